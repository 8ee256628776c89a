"""Evaluation pipeline: config -> engines -> co-generation -> grading -> run folder.

`run_eval` fills one run folder (solo or handoff) and is resumable: it skips every sample already
in a shard and flushes graded samples every `flush_every` traces. `run_handoff` runs (or reuses)
the senior's solo run and the handoff run side by side and records the communication tax.

    from tandem_eval.pipeline import run_handoff
    solo, handoff, tax = run_handoff(EvalConfig(senior=ModelSpec("ckpt"), junior=ModelSpec("jr"),
                                                mode="handoff", schedule="paragraph"), "runs/ckpt")
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from .config import EvalConfig
from .data import load_benchmarks, prompt_ids
from .engines import load_engine
from .engines.bridge import RetokenizingEngine
from .grading import Grader, check_grader_versions
from .metrics import summarize_pass_at_k
from .metrics.tax import communication_tax
from .models import check_vocab, load_tokenizer, resolve_model
from .results import RunFolder, RunFolderError, require_complete
from .schedules import make_schedule, needs_junior
from .tandem import TraceSpec, budget, cogenerate, trace_seed


def load_problems(cfg: EvalConfig) -> list:
    """All problems of the configured benchmarks; with sharding, every num_shards-th one."""
    problems = load_benchmarks(list(cfg.benchmarks), limit=cfg.limit, group=cfg.group)  # ids unique in the run
    return [p for i, p in enumerate(problems) if i % cfg.num_shards == cfg.shard_index]


def open_engines(cfg: EvalConfig, **engine_kw) -> dict:
    """Load the senior (and the junior when the schedule needs one) on the configured backend.

    `engine_kw` go to both engines' constructors (e.g. `device` for hf)."""
    kw = {"dtype": cfg.senior.dtype, "max_batch": cfg.batch_size, **engine_kw}
    if cfg.engine == "vllm":
        kw["tensor_parallel_size"] = cfg.tensor_parallel_size
    senior_path = resolve_model(cfg.senior.path)
    engines = {"senior": load_engine(cfg.engine, senior_path, cfg.sampling, **kw)}
    tok = engines["senior"].tokenizer
    if cfg.junior is not None and needs_junior(cfg.schedule):
        junior_path = resolve_model(cfg.junior.path)
        same_vocab = check_vocab(tok, load_tokenizer(junior_path), cfg.allow_vocab_mismatch)
        engines["junior"] = load_engine(cfg.engine, junior_path, cfg.sampling, **{**kw, "dtype": cfg.junior.dtype})
        if not same_vocab:  # text-level handoff: the trace stays in senior ids, the junior re-tokenizes
            engines["junior"] = RetokenizingEngine(engines["junior"], tok, cfg.schedule)
    return engines


def close_engines(engines: dict) -> None:
    for e in engines.values():
        e.close()


def _rows(traces, meta: dict, grades, tokenizer, cfg: EvalConfig) -> list[dict]:
    rows = []
    for trace, g in zip(traces, grades):
        problem, sample_idx, seed = meta[trace.key]
        mask = np.asarray(trace.author_mask, dtype=np.int8)
        rows.append(
            {
                "problem_id": problem.problem_id,
                "benchmark": problem.benchmark,
                "group": problem.group,
                "sample_idx": sample_idx,
                "mode": cfg.mode,
                "schedule": cfg.schedule,
                "seed": seed,
                "problem": problem.problem,
                "prompt": tokenizer.decode(list(trace.prompt_ids)),
                "text": tokenizer.decode(trace.token_ids, skip_special_tokens=True),
                "prompt_ids": list(trace.prompt_ids),
                "token_ids": trace.token_ids,
                "author_mask": mask.tolist(),
                "logprobs": trace.logprobs,
                "gold": problem.answer,
                "extracted_answer": g.extracted,
                "correct": bool(g.correct),
                "grade_status": g.status,
                "finish_reason": trace.finish_reason,
                "n_tokens": len(trace.token_ids),
                "n_senior_tokens": int(mask.sum()),
                "senior_fraction": float(mask.mean()) if len(mask) else float("nan"),
                "n_handoffs": trace.n_handoffs,
            }
        )
    return rows


def summarize(samples: pd.DataFrame, cfg: EvalConfig) -> dict:
    """metrics.json content for a finished run."""
    truncated = samples.finish_reason == "length"
    return {
        "pass_at_k": summarize_pass_at_k(samples, list(cfg.ks)),
        "n_samples": int(len(samples)),
        "n_problems": int(samples[["benchmark", "problem_id"]].drop_duplicates().shape[0]),
        "mean_tokens": float(samples.n_tokens.mean()),
        "truncation_rate": float(truncated.mean()),
        "senior_fraction": float(samples.senior_fraction.mean()),
        "handoffs_per_trace": float(samples.n_handoffs.mean()),
        "grade_status": {k: int(v) for k, v in samples.grade_status.value_counts().sort_index().items()},
    }


def run_eval(
    cfg: EvalConfig,
    out: str | Path,
    engines: dict | None = None,
    progress: bool = True,
    flush_every: int = 64,
    on_flush: Callable[[int], None] | None = None,
) -> RunFolder:
    """Generate, grade and store every missing sample of `cfg` in run folder `out`; resumable."""
    grader_versions = check_grader_versions(cfg.allow_grader_mismatch)
    # Validate every input before the run folder exists, so a bad command leaves nothing behind.
    for spec in (cfg.senior, cfg.junior):
        if spec is not None:
            resolve_model(spec.path)
    problems = load_problems(cfg)
    if problems:  # a tokenizer without a chat template fails here, not halfway through
        tok = engines["senior"].tokenizer if engines else load_tokenizer(resolve_model(cfg.senior.path))
        prompt_ids(tok, problems[0].problem, chat_template=cfg.chat_template)
    rf = RunFolder(out)
    rf.init(cfg, extra={"grader": grader_versions})
    if rf.is_complete():
        return rf
    if not problems:
        raise RunFolderError(
            f"no problems to evaluate for benchmarks {list(cfg.benchmarks)} (shard "
            f"{cfg.shard_index}/{cfg.num_shards}); check --benchmark/--limit/--num-shards"
        )
    own = engines is None
    engines = engines or open_engines(cfg)
    try:
        _generate(cfg, rf, problems, engines, progress, flush_every, on_flush)
        rf.finalize(summarize(rf.load_samples(), cfg))
    finally:
        if own:
            close_engines(engines)
    return rf


def _generate(cfg, rf, problems, engines, progress, flush_every, on_flush) -> None:
    tok = engines["senior"].tokenizer
    schedule = make_schedule(cfg.schedule, tok)
    done = rf.done_keys()
    specs, meta = [], {}
    for problem in problems:
        prompt = tuple(prompt_ids(tok, problem.problem, chat_template=cfg.chat_template))
        n_new = budget(len(prompt), cfg.sampling.max_new_tokens, cfg.sampling.max_context)
        for i in range(cfg.n):
            if (problem.benchmark, problem.problem_id, i) in done:
                continue
            seed = trace_seed(cfg.seed, f"{problem.benchmark}/{problem.problem_id}", i)
            key = len(specs)
            specs.append(TraceSpec(key, prompt, seed, n_new))
            meta[key] = (problem, i, seed)
    if not specs:
        return
    junior = engines.get("junior") if needs_junior(cfg.schedule) else None
    if isinstance(junior, RetokenizingEngine):
        for spec in specs:
            junior.register(
                spec.key, prompt_ids(junior.inner.tokenizer, meta[spec.key][0].problem), len(spec.prompt_ids)
            )
    pool = cfg.batch_size * (2 if junior is not None else 1)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = [
        TextColumn(f"{cfg.mode}:{cfg.schedule}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tps]} tok/s"),
        TimeRemainingColumn(),
    ]
    with Grader() as grader, Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task("gen", total=len(specs), tps="-")
        buffer, n_tok, t0 = [], 0, time.time()

        def flush():
            grades = grader.grade_many(
                [(tok.decode(t.token_ids, skip_special_tokens=True), meta[t.key][0].answer) for t in buffer]
            )
            rf.append_shard(_rows(buffer, meta, grades, tok, cfg))
            if on_flush:
                on_flush(len(buffer))
            buffer.clear()

        for trace in cogenerate(specs, engines["senior"], junior, schedule, pool_size=pool):
            buffer.append(trace)
            n_tok += len(trace.token_ids)
            bar.update(task, advance=1, tps=f"{n_tok / max(time.time() - t0, 1e-9):.0f}")
            if len(buffer) >= flush_every:
                flush()
        if buffer:
            flush()


def solo_config(cfg: EvalConfig) -> EvalConfig:
    """The senior's solo run that a handoff run is compared with (independent of the junior)."""
    return dataclasses.replace(cfg, mode="solo", schedule="solo", junior=None, allow_vocab_mismatch=False)


def handoff_dirname(schedule: str) -> str:
    return "handoff-" + schedule.replace(":", "_")


def run_handoff(
    cfg: EvalConfig, out_root: str | Path, solo_run: str | Path | None = None, progress: bool = True
) -> tuple[RunFolder, RunFolder, dict]:
    """Solo + handoff runs of one senior under out_root, and the communication tax between them."""
    out_root = Path(out_root)
    engines = open_engines(cfg)
    try:
        if solo_run is not None:
            solo = require_complete(solo_run)
        else:
            solo = run_eval(solo_config(cfg), out_root / "solo", {"senior": engines["senior"]}, progress)
        handoff = run_eval(cfg, out_root / handoff_dirname(cfg.schedule), engines, progress)
    finally:
        close_engines(engines)
    tax = communication_tax(solo.load_samples(), handoff.load_samples(), list(cfg.ks))
    handoff.update_metrics({"tax": tax, "solo_run": str(solo.path.resolve())})
    return solo, handoff, tax


def merge_shards(parts: list[str | Path], out: str | Path) -> RunFolder:
    """Merge complete shard runs (same experiment, --num-shards N) into one run folder."""
    folders = [require_complete(p) for p in parts]
    cfgs = [f.config() for f in folders]
    if len({c["fingerprint"] for c in cfgs}) != 1:
        raise RunFolderError(
            "shards come from different experiments (fingerprints differ); merge only the "
            "--shard-index 0..N-1 outputs of one command"
        )
    from .config import from_dict

    cfg = dataclasses.replace(from_dict(EvalConfig, cfgs[0]["config"]), num_shards=1, shard_index=0)
    indices = sorted(c["config"]["shard_index"] for c in cfgs)
    if indices != list(range(cfgs[0]["config"]["num_shards"])):
        raise RunFolderError(
            f"shard indices {indices} do not cover 0..{cfgs[0]['config']['num_shards'] - 1}; "
            "finish the missing shards first"
        )
    rf = RunFolder(out)
    rf.init(cfg, extra={"grader": cfgs[0].get("grader"), "merged_from": [str(f.path) for f in folders]})
    if not rf.is_complete():
        for f in folders:
            rf.append_shard(f.load_samples().to_dict("records"))
        rf.finalize(summarize(rf.load_samples(), cfg))
    return rf
