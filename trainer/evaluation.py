"""Periodic held-out evaluation of saved checkpoints, through tandem_eval's own pipeline.

Every `eval.every` steps (a multiple of `save_every`) the main process evaluates the checkpoint
just saved and writes normal run folders that `tandem-eval report` can read:

    OUTPUT_DIR/evals/step-000020/solo/                      solo pass@k
    OUTPUT_DIR/evals/step-000020/handoff-paragraph/         handoff pass@k + communication tax

and appends one line to OUTPUT_DIR/eval_log.jsonl: {"step", "checkpoint", "solo", "handoff", "tax"}
(pass@k dicts as tandem_eval writes them). The other processes wait at a barrier meanwhile.
"""

from __future__ import annotations

import json
from pathlib import Path

from tandem_eval.config import EvalConfig, ModelSpec

from .recipe import Recipe

EVAL_LOG = "eval_log.jsonl"


def eval_config(ckpt: Path, junior: Path | None, recipe: Recipe) -> EvalConfig:
    e = recipe.eval
    handoff = "handoff" in e.modes and junior is not None
    return EvalConfig(
        senior=ModelSpec(str(ckpt), dtype=recipe.dtype),
        junior=ModelSpec(str(junior), dtype=recipe.dtype) if handoff else None,
        mode="handoff" if handoff else "solo",
        schedule=e.schedule if handoff else "solo",
        benchmarks=tuple(e.benchmarks),
        n=e.n,
        ks=tuple(e.ks),
        seed=recipe.seed,
        limit=e.limit,
        engine=e.engine,
        sampling=e.sampling,
        batch_size=e.batch_size,
        allow_grader_mismatch=recipe.allow_grader_mismatch,
    )


def evaluate_checkpoint(ckpt: Path, junior: Path | None, recipe: Recipe, step: int) -> dict:
    from tandem_eval.config import solo_config
    from tandem_eval.generate.execute import run_eval, run_handoff

    cfg = eval_config(ckpt, junior, recipe)
    out = Path(recipe.output_dir) / "evals" / f"step-{step:06d}"
    record = {"step": step, "checkpoint": str(ckpt), "n": cfg.n}
    if cfg.mode == "handoff":
        solo, handoff, tax = run_handoff(cfg, out, progress=False)
        record.update(solo=solo.metrics().get("pass_at_k"), handoff=handoff.metrics().get("pass_at_k"), tax=tax)
    else:
        solo = run_eval(solo_config(cfg), out / "solo", progress=False)
        record.update(solo=solo.metrics().get("pass_at_k"))
    with open(Path(recipe.output_dir) / EVAL_LOG, "a") as f:
        f.write(json.dumps(record, default=str) + "\n")
    return record
