"""Where the lens tables live in a run folder: RUN/lens/<junior label>/{legibility,drift}.parquet.

The run folder's side of the score stage, read by the score stage (which writes the tables) and by
the read side (runs, compare, report), so that reading a run never imports the lens computation
(tandem_eval.score.lens, which needs torch):

    from tandem_eval.run.lens_layout import junior_label, lens_file, lens_juniors
    junior_label("toy:self-paired/junior")      # "self-paired-junior": a junior as one folder name
    lens_juniors("runs/quick/solo")             # the labels with lens tables ("" = the older layout)
    lens_file("runs/quick/solo", "drift")       # the only junior's drift table; LensError names the choices

One junior per run used to write RUN/legibility.parquet / RUN/drift.parquet (the committed
results/toy); `lens_file` still finds those, with the junior recorded in metrics.json.
"""

from __future__ import annotations

from pathlib import Path

from ..paths import folder_name, served_name

LENS_DIR = "lens"  # RUN/lens/<junior label>/<kind>.parquet
LENS_KINDS = ("legibility", "drift")


class LensError(ValueError):
    """Legibility/drift cannot be computed or read as asked (no such lens table, runs that cannot be
    paired); the message names the fix."""


def junior_label(spec: str | Path) -> str:
    """A folder-safe name for a junior: toy:self-paired/junior -> self-paired-junior, a served
    http://HOST:PORT/v1#NAME -> NAME, else the checkpoint folder's name (characters other than letters,
    digits, . _ - become -)."""
    text = str(spec).rstrip("/")
    if (served := served_name(text)) is not None:  # a served junior: the name its servers give it
        return folder_name(served, "junior")
    name = text[4:].replace("/", "-") if text.startswith("toy:") else (Path(text).name or text)
    return folder_name(name, "junior")


def lens_juniors(run_dir: str | Path) -> list[str]:
    """Junior labels with lens outputs in a run folder (new layout), sorted; "" stands for the older
    one-junior layout (RUN/legibility.parquet or RUN/drift.parquet) when present."""
    run_dir = Path(run_dir)
    found = sorted(
        d.name for d in (run_dir / LENS_DIR).glob("*") if any((d / f"{k}.parquet").exists() for k in LENS_KINDS)
    )
    if any((run_dir / f"{k}.parquet").exists() for k in LENS_KINDS):
        found.append("")
    return found


def lens_file(run_dir: str | Path, kind: str, junior: str | None = None) -> Path:
    """Path of a run's `kind` lens table (legibility | drift) for `junior` (a label as written by the
    lens commands); junior None: the only junior that has one (older layout included). Raises
    LensError naming the choices when the junior is missing or ambiguous."""
    run_dir = Path(run_dir)
    if junior:
        path = run_dir / LENS_DIR / junior / f"{kind}.parquet"
        if path.exists():
            return path
        legacy = run_dir / f"{kind}.parquet"
        if legacy.exists() and _legacy_junior(run_dir, kind) == junior:
            return legacy
    have = [j for j in lens_juniors(run_dir) if _lens_path(run_dir, kind, j).exists()]
    if junior is None and len(have) == 1:
        return _lens_path(run_dir, kind, have[0])
    names = ", ".join(j or _legacy_junior(run_dir, kind) or "(unnamed)" for j in have) or "none"
    if not have:
        raise LensError(f"{run_dir} has no {kind} output; run `tandem-eval {kind} --run {run_dir} --junior PATH` first")
    want = f"junior {junior!r}" if junior else "one junior"
    raise LensError(f"{run_dir} has {kind} outputs of juniors {names}, not {want}; pass --junior LABEL")


def _lens_path(run_dir: Path, kind: str, junior: str) -> Path:
    return run_dir / LENS_DIR / junior / f"{kind}.parquet" if junior else run_dir / f"{kind}.parquet"


def _legacy_junior(run_dir: Path, kind: str) -> str | None:
    """The junior label of an older-layout lens table (from metrics.json), if recorded."""
    import json

    from ..files import read_regular

    try:
        spec = json.loads(read_regular(run_dir / "metrics.json", "")).get(kind, {}).get("junior")
    except (OSError, ValueError, AttributeError):
        return None
    return junior_label(spec) if spec else None
