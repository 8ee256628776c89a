"""`make demo`: the whole evaluation on the bundled default, in a few minutes on a laptop CPU.

Runs, through the real CLI commands: solo + paragraph handoff (pass@k, communication tax), the
junior's legibility of the senior's solo CoTs, KL drift, and the report. The default pair is the
bundled toy world's tandem senior and its junior; when this install has no toy checkpoints, a tiny
random pair is built on the fly (its accuracy is ~0: it shows the pipeline, not a result).

    python -m tandem_eval.cli.demo [--out runs/demo] [--n 4] [--limit 8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..models import default_junior, resolve_model, toy_names
from .main import DEFAULT_SENIOR, app
from .terminal import console


def _pair(out: Path) -> tuple[str, str, str]:
    """(senior, junior, benchmark) for the demo."""
    if DEFAULT_SENIOR in toy_names():
        junior = default_junior(resolve_model(DEFAULT_SENIOR), DEFAULT_SENIOR)  # each bundled senior names one
        bench = Path(__file__).resolve().parents[1] / "toy" / "data" / "test.jsonl"
        return DEFAULT_SENIOR, junior, str(bench) if bench.exists() else "tiny"
    from ..toy.tiny import build_tiny_pair  # imports torch/transformers: only on this fallback

    console.print("[yellow]no bundled toy checkpoints: building a tiny random senior/junior pair[/]")
    tiny_senior, tiny_junior = build_tiny_pair(out / "models")
    return str(tiny_senior), str(tiny_junior), "tiny"


def _cli(args: list[str]) -> int:
    """Run one CLI command in-process; its exit code (0 = ok). A user error prints its one line and
    returns 2 instead of ending the demo, so the summary can say which step failed."""
    console.rule(" ".join(["tandem-eval", *args[:1]]))
    try:
        rv = app(args, standalone_mode=False)
    except SystemExit as e:  # typer.Exit inside a command surfaces as its code
        rv = e.code
    return rv if isinstance(rv, int) else 0


def _steps(senior: str, junior: str, out: Path, common: list[str]) -> list[tuple[str, list[str], Path]]:
    """(name, CLI arguments, what it produces) for every demo step, in order."""
    solo = out / "solo"
    return [
        ("handoff", ["handoff", "--senior", senior, "--junior", junior, "--out", str(out), *common], out),
        ("legibility", ["legibility", "--senior", senior, "--junior", junior, "--run", str(solo)], solo / "lens"),
        ("drift", ["drift", "--senior", senior, "--junior", junior, "--run", str(solo)], solo / "lens"),
        ("report", ["report", str(out), "--out", str(out / "report")], out / "report"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("runs/demo"))
    ap.add_argument("--n", type=int, default=4, help="samples per problem")
    ap.add_argument("--limit", type=int, default=50, help="problems")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    args = ap.parse_args()
    senior, junior, bench = _pair(args.out)
    common = ["--benchmark", bench, "--n", str(args.n), "--limit", str(args.limit)]
    common += ["--k", ",".join(str(k) for k in (1, 2, 4) if k <= args.n), "--max-new-tokens", str(args.max_new_tokens)]
    results: list[tuple[str, int | None, Path]] = []
    for name, cli_args, product in _steps(senior, junior, args.out, common):
        # a step after a failed one would only fail again on its missing input
        code = _cli(cli_args) if all(c == 0 for _, c, _ in results) else None
        results.append((name, code, product))
    console.rule("summary")
    console.print(f"senior {senior}  junior {junior}  benchmark {bench}")
    for name, code, product in results:
        state = "[green]OK[/]" if code == 0 else "[dim]skipped[/]" if code is None else f"[red]FAILED (exit {code})[/]"
        console.print(f"  {name:<11} {state:<28} {product}")
    solo_metrics = args.out / "solo" / "metrics.json"
    if solo_metrics.exists():
        lens = sorted(json.loads(solo_metrics.read_text()).get("lens", {}))
        console.print(f"  lens entries in {solo_metrics}: {lens}")
    failed = [name for name, code, _ in results if code != 0]
    if failed:
        console.print(f"[red]demo failed at: {', '.join(failed)}[/]")
        raise SystemExit(1)
    console.print("done: every step OK")


if __name__ == "__main__":
    main()
