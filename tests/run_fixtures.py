"""Synthetic run folders for the run-folder and compare tests: no model, no generation.

`write_run(path, cfg, flags)` writes a COMPLETE run through RunFolder (init, one shard, finalize),
exactly as run_eval does, with one sample row per correct-flag. Used by tests/test_results.py and
tests/test_compare.py.

    rf = write_run(tmp_path / "solo", solo_cfg("toy:x"), {("tiny", "tiny/0000"): [True, False]})
"""

from __future__ import annotations

from pathlib import Path

from tandem_eval.config import EvalConfig, ModelSpec
from tandem_eval.generate.execute import summarize
from tandem_eval.generate.grading import check_grader_versions
from tandem_eval.run.results import RunFolder


def solo_cfg(senior: str, **kw) -> EvalConfig:
    """A solo config with the CLI's defaults (so `tandem-eval handoff` with defaults matches it)."""
    return EvalConfig(senior=ModelSpec(senior), mode="solo", schedule="solo", **kw)


def handoff_cfg(senior: str, junior: str, **kw) -> EvalConfig:
    return EvalConfig(senior=ModelSpec(senior), junior=ModelSpec(junior), mode="handoff", schedule="paragraph", **kw)


def write_run(
    path: Path,
    cfg: EvalConfig,
    flags: dict[tuple[str, str], list[bool]],
    groups: dict[str, str] | None = None,
    extra: dict | None = None,
    texts: dict[tuple[str, str], str] | None = None,
) -> RunFolder:
    """A complete run folder whose samples have the given correct flags per (benchmark, problem_id);
    `texts`: the problem text of a key (default "problem ID": the same problem in every run)."""
    rf = RunFolder(path)
    rf.init(cfg, extra={"grader": check_grader_versions(True), **(extra or {})})
    rows = []
    for (bench, pid), correct in sorted(flags.items()):
        for i, ok in enumerate(correct):
            senior_tokens = 4 if cfg.mode == "solo" else 2
            rows.append(
                {
                    "problem_id": pid,
                    "benchmark": bench,
                    "group": (groups or {}).get(bench, bench),
                    "sample_idx": i,
                    "mode": cfg.mode,
                    "schedule": cfg.schedule,
                    "seed": i,
                    "problem": (texts or {}).get((bench, pid), f"problem {pid}"),
                    "prompt": (texts or {}).get((bench, pid), f"problem {pid}"),
                    "text": "\\boxed{1}" if ok else "\\boxed{2}",
                    "prompt_ids": [1, 2],
                    "token_ids": [5, 6, 7, 8],
                    "author_mask": [1, 1, 1, 1] if cfg.mode == "solo" else [1, 0, 1, 0],
                    "logprobs": [-0.1, -0.2, -0.3, -0.4],
                    "gold": "1",
                    "extracted_answer": "1" if ok else "2",
                    "correct": bool(ok),
                    "grade_status": "ok",
                    "finish_reason": "eos",
                    "n_tokens": 4,
                    "n_senior_tokens": senior_tokens,
                    "senior_fraction": senior_tokens / 4,
                    "n_handoffs": 0 if cfg.mode == "solo" else 3,
                }
            )
    rf.append_shard(rows)
    rf.finalize(summarize(rf.load_samples(), cfg.ks))
    return rf


def plant_wrong_kind(path: Path, kind: str) -> None:
    """Put a folder, a FIFO (a read blocks forever) or a link to /dev/zero (a read never ends) where the
    file `path` is (removed first, if there)."""
    import os

    path.unlink(missing_ok=True)
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


def reseal(run: Path) -> None:
    """Re-record a deliberately edited run's tables in COMPLETE (drop the ones removed), so the
    edited folder stands for a run made that way rather than a tampered one."""
    import json

    from tandem_eval.run.results import _table_record

    rec = json.loads((run / "COMPLETE").read_text())
    rec["tables"] = {rel: _table_record(run / rel) for rel in rec.get("tables", {}) if (run / rel).exists()}
    (run / "COMPLETE").write_text(json.dumps(rec))
