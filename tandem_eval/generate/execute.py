"""The generate stage: execute a checked plan into run folders (shards, resume, grading, pass@k and
the communication tax into metrics.json), and merge the run folders of --num-shards processes.

`plan.plan_run` / `plan.plan_handoff` check every input once; `execute` runs the plan without
checking anything again: it sets torch's threads once, opens the engines only when a run needs
generating, fills each run folder (resumable: it skips every sample already in a shard and flushes
graded samples every `flush_every` traces), and writes each metrics.json once, the tax included,
before COMPLETE. `run_eval` and `run_handoff` plan and execute in one call.

    from tandem_eval.generate import run_handoff
    solo, handoff, tax = run_handoff(EvalConfig(senior=ModelSpec("ckpt"), junior=ModelSpec("jr"),
                                                mode="handoff", schedule="paragraph"), "runs/ckpt")
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from .. import devices
from ..config import EvalConfig, ModelSpec, config_diff
from ..data import prompt_ids
from ..engines import backend, load_engine
from ..engines.bridge import RetokenizingEngine
from ..metrics import summarize_pass_at_k
from ..metrics.tax import tax_table
from ..models import Checkpoints, run_checkpoints
from ..progress import live_token_counter, progress_reporter
from ..run.results import RunFolder, verify_run
from ..schemas import RunFolderError, from_dict
from ..schemas import to_jsonable as json_safe
from .checks import solo_record
from .grading import (
    STARTUP_TIMEOUT_S,
    UNGRADED,
    Grader,
    GraderWorkerError,
    GradingIncomplete,
    check_startup_timeout,
    ungraded,
)
from .plan import Plan, RunPlan, SoloTable, Validated, plan_handoff, plan_run
from .schedules import JUNIOR, ScheduleSpec, State, parse_schedule
from .tandem import TraceSpec, budget, cogenerate, trace_seed

log = logging.getLogger(__name__)


def open_engines(cfg: EvalConfig, **engine_kw) -> dict:
    """Load the senior (and the junior when the schedule needs one) on the configured backend.

    `engine_kw` go to both engines' constructors (e.g. `device` for hf). Sets torch's CPU threads first
    (cfg.threads, see devices.use_threads)."""
    devices.use_threads(cfg.threads)
    schedule = parse_schedule(cfg.schedule)
    return load_engines(cfg, run_checkpoints(cfg, schedule.junior), schedule, **engine_kw)


def load_engines(cfg: EvalConfig, checkpoints: Checkpoints, schedule: ScheduleSpec, **engine_kw) -> dict:
    """open_engines without setting threads, from the checkpoints and the schedule as the plan resolved and
    parsed them (cfg.schedule is never parsed again here)."""
    kw = {"dtype": cfg.senior.dtype, "max_batch": cfg.batch_size, **engine_kw}
    facts = backend(cfg.engine)
    if facts.tensor_parallel:
        kw["tensor_parallel_size"] = cfg.tensor_parallel_size
        kw["verbose"] = logging.getLogger("tandem_eval").isEnabledFor(logging.DEBUG)  # vLLM's chatter only with -v
    log.info("loading the senior %s on %s", cfg.senior.path, cfg.engine)
    senior = checkpoints.senior
    engines = {"senior": load_engine(cfg.engine, senior, cfg.sampling, api_key_env=cfg.api_key_env, **kw)}
    if checkpoints.junior is None:
        return engines
    junior = cast(ModelSpec, cfg.junior)  # cast: a junior checkpoint is resolved only from cfg.junior
    tok = engines["senior"].tokenizer
    try:
        if checkpoints.shared and facts.shares_weights:  # one set of weights, two engines (own KV rows)
            log.info("the junior %s is the senior's own model: sharing its loaded weights", junior.path)
            senior_model = engines["senior"].model  # type: ignore[attr-defined]  # a backend that shares_weights has one
            engines["junior"] = load_engine(cfg.engine, senior_model, cfg.sampling, tokenizer=tok, **kw)
        elif checkpoints.shared:
            # a backend that cannot share weights (vLLM): the senior's engine serves both roles. A trace has
            # one live segment at a time, and the loop credits each finished segment to its trace's current
            # author, not to an engine.
            log.info("the junior %s is the senior's own model: one %s engine serves both", junior.path, cfg.engine)
            engines["junior"] = engines["senior"]
        else:
            log.info("loading the junior %s on %s", junior.path, cfg.engine)
            kw["dtype"] = junior.dtype
            if facts.shares_weights and checkpoints.one_tokenizer:
                kw["tokenizer"] = tok  # identical tokenizer files: one loaded tokenizer for both engines
            junior_ckpt = checkpoints.junior
            engines["junior"] = load_engine(cfg.engine, junior_ckpt, cfg.sampling, api_key_env=cfg.api_key_env, **kw)
        if not checkpoints.same_vocab:  # text-level handoff: the trace stays in senior ids, the junior re-tokenizes
            # the junior stops where the schedule, read in the junior's own vocabulary, might switch
            stops = schedule.build(engines["junior"].tokenizer).stop_ids(State(author=JUNIOR))
            engines["junior"] = RetokenizingEngine(engines["junior"], tok, stops)
    except BaseException:  # a junior that fails to load must not leave the senior's engine running
        close_engines(engines)
        raise
    return engines


def close_engines(engines: dict) -> None:
    for e in {id(e): e for e in engines.values()}.values():  # a self-paired engine may serve two roles (vLLM)
        e.close()


def _rows(traces, meta: dict, grades, tokenizer, labels: dict) -> list[dict]:
    """Sample rows of graded traces; `labels` = the run's mode and schedule, the same on every row."""
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
                **labels,
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


def summarize(samples: pd.DataFrame, ks) -> dict:
    """metrics.json content for a finished run, pass@k at each of `ks`."""
    truncated = samples.finish_reason == "length"
    return json_safe(
        {
            "pass_at_k": summarize_pass_at_k(samples, list(ks)),
            "n_samples": int(len(samples)),
            "n_problems": int(samples[["benchmark", "problem_id"]].drop_duplicates().shape[0]),
            "mean_tokens": float(samples.n_tokens.mean()),
            "truncation_rate": float(truncated.mean()),
            "n_truncated": int(truncated.sum()),  # traces that hit the token budget
            "n_no_answer": int((samples.grade_status == "no_answer").sum()),  # no complete \\boxed{}
            "senior_fraction": float(samples.senior_fraction.mean()),  # NaN (all 0-token) -> null via json_safe
            "handoffs_per_trace": float(samples.n_handoffs.mean()),
            "grade_status": {k: int(v) for k, v in samples.grade_status.value_counts().sort_index().items()},
        }
    )


@dataclass(frozen=True)
class Pacing:
    """How execute reports and flushes, none of which changes a sample: a progress bar, graded samples
    flushed every `flush_every` traces (`on_flush` told how many each time), and the grader's start-up
    deadline in seconds."""

    progress: bool = True
    flush_every: int = 64
    on_flush: Callable[[int], None] | None = None
    grader_startup_s: float = STARTUP_TIMEOUT_S


def _generate(run: RunPlan, rf: RunFolder, done: frozenset, checked: Validated, engines, pacing: Pacing) -> tuple:
    """Every sample of the run `run` missing from `rf` (`done`: the keys it holds), graded and flushed as
    `pacing` says. `engines()` loads
    the engines, called only when something is left to generate (a rerun that only grades loads none).

    The grader's workers start with generation, so they warm up beside it. When the grader fails, the
    traces are stored anyway, ungraded, and generation goes on: nothing generated is lost to the
    grader. Returns the number of samples stored ungraded by this call and why (0, "" when none)."""
    cfg = run.cfg
    specs: list[TraceSpec] = []
    meta: dict[int, tuple] = {}
    for problem in checked.problems:
        prompt = checked.prompts[(problem.benchmark, problem.problem_id)]  # rendered once, by the plan
        n_new = budget(len(prompt), cfg.sampling.max_new_tokens, cfg.sampling.max_context)
        for i in range(cfg.n):
            if (problem.benchmark, problem.problem_id, i) in done:
                continue
            seed = trace_seed(cfg.seed, f"{problem.benchmark}/{problem.problem_id}", i)
            meta[len(specs)] = (problem, i, seed)
            specs.append(TraceSpec(len(specs), prompt, seed, n_new))
    if not specs:
        return 0, ""
    if done:  # a rerun of a stopped run: say so, a user watching it must not think it started over
        log.info("%s: resuming; %d samples already stored, %d to generate", rf.path, len(done), len(specs))
    grader = Grader(startup_timeout=pacing.grader_startup_s)
    with grader:
        return _generate_specs(run, rf, specs, meta, engines(), grader.start(), pacing)


def _generate_specs(
    run: RunPlan, rf: RunFolder, specs: list, meta: dict, engines: dict, grader, pacing: Pacing
) -> tuple:
    cfg, tok = run.cfg, engines["senior"].tokenizer
    schedule = run.schedule.build(tok)  # as the plan parsed it: whether the junior writes is its own
    junior = engines.get("junior") if schedule.junior else None
    # a generator: no trace starts before the loop below asks for the first one
    traces = cogenerate(specs, engines["senior"], junior, schedule, pool_size=cfg.batch_size * (1 + bool(junior)))
    if isinstance(junior, RetokenizingEngine):
        for spec in specs:
            problem = meta[spec.key][0].problem
            junior.register(
                spec.key,
                prompt_ids(junior.inner.tokenizer, problem, chat_template=cfg.junior_chat_template),
                len(spec.prompt_ids),
            )
    live = live_token_counter([engines["senior"], junior])
    labels = {"mode": cfg.mode, "schedule": cfg.schedule}
    reporter = progress_reporter(
        len(specs),
        f"{cfg.mode}:{cfg.schedule}",
        enabled=pacing.progress,
        live_tokens=live,
        budget=cfg.sampling.max_new_tokens,
    )
    failed, n_ungraded = None, 0
    with reporter as bar:
        for batch, stopping in _batches(traces, pacing.flush_every, bar):
            pairs = [(tok.decode(t.token_ids, skip_special_tokens=True), meta[t.key][0].answer) for t in batch]
            grades = None
            if failed is None and not stopping:
                try:
                    grades = grader.grade_many(pairs)
                except GraderWorkerError as e:  # keep the traces: a rerun grades them
                    failed = " ".join(str(e).split())
                    log.warning("grading failed (%s); storing the samples ungraded and generating on", failed)
                except (KeyboardInterrupt, SystemExit):  # stopped while grading: the batch is kept, ungraded
                    _store_stopped(rf, batch, meta, pairs, tok, labels)
                    raise
            if stopping:  # stopped while generating: the traces finished so far, ungraded (no wait on a grader)
                _store_stopped(rf, batch, meta, pairs, tok, labels)
                continue  # the generator raises the stop on
            if grades is None:
                # cast: grades is None here only when grading failed, which set `failed`
                grades = [ungraded(text, cast(str, failed)) for text, _ in pairs]
                n_ungraded += len(grades)
            rf.append_shard(_rows(batch, meta, grades, tok, labels))
            if pacing.on_flush:
                pacing.on_flush(len(batch))
    return n_ungraded, failed or ""


STOPPED = "the command was stopped (Ctrl-C or SIGTERM) before grading it"


def _store_stopped(rf: RunFolder, batch: list, meta: dict, pairs: list, tok, labels: dict) -> None:
    """A batch of finished traces, stored ungraded when the command is stopped (Ctrl-C, SIGTERM): a stop
    loses no finished trace, and does not wait on the grader (its workers got the same Ctrl-C); the rerun
    resumes after them and grades them (_grade_stored)."""
    rf.append_shard(_rows(batch, meta, [ungraded(text, STOPPED) for text, _ in pairs], tok, labels))
    log.warning(
        "%s: stopped; %d finished samples stored ungraded with the others; rerun the same command to resume "
        "(it grades them and generates the rest)",
        rf.path,
        len(batch),
    )


def _grade_stored(rf: RunFolder, samples: pd.DataFrame, startup_s: float) -> pd.DataFrame:
    """`samples` with the rows stored ungraded (a grader that failed in an earlier invocation) graded now."""
    todo = samples.index[samples.grade_status == UNGRADED]
    if not len(todo):
        return samples
    log.info("grading %d stored samples of %s that an earlier run could not grade", len(todo), rf.path)
    pairs = list(zip(samples.loc[todo, "text"], samples.loc[todo, "gold"]))
    try:
        with Grader(startup_timeout=startup_s) as grader:
            grades = grader.grade_many(pairs)
    except GraderWorkerError as e:
        raise GradingIncomplete(_incomplete(rf, len(todo), " ".join(str(e).split()))) from None
    samples = samples.copy()
    samples.loc[todo, "extracted_answer"] = [g.extracted for g in grades]
    samples.loc[todo, "correct"] = [bool(g.correct) for g in grades]
    samples.loc[todo, "grade_status"] = [g.status for g in grades]
    return samples


def _incomplete(rf: RunFolder, n: int, cause: str) -> str:
    return (
        f"grading failed ({cause}): {n} samples are stored ungraded in {rf.path}; rerun the same command: it "
        "grades them without generating them again"
    )


def _batches(traces, size: int, bar):
    """(finished traces, stopping) in lists of `size` (the last one shorter), each trace counted on `bar`
    as it finishes. When generating fails (a server that died, an engine error) or the command is stopped
    (Ctrl-C, SIGTERM: `stopping` True), the traces already finished are yielded first, so the caller
    stores them and a rerun resumes after them; then the error or the stop goes on."""
    batch = []
    try:
        for trace in traces:
            batch.append(trace)
            bar.advance(len(trace.token_ids))
            if len(batch) >= size:
                yield batch, False
                batch = []
    except (KeyboardInterrupt, SystemExit):
        if batch:
            yield batch, True  # stored before the stop is raised on (the caller's next() resumes here)
        raise
    except Exception:
        if batch:
            yield batch, False  # stored (and graded) before the error is raised on
        raise
    if batch:
        yield batch, False


# ---- execution: a checked plan into run folders ----------------------------------------------------
def execute(
    plan: Plan,
    engines: dict | None = None,
    progress: bool = True,
    flush_every: int = 64,
    on_flush: Callable[[int], None] | None = None,
    grader_startup_s: float = STARTUP_TIMEOUT_S,
) -> tuple[RunFolder, ...]:
    """Fill the plan's run folders in order; nothing is checked again. Engines open (after torch's
    threads are set, once) only when a run has samples left to generate; engines passed in keep the
    caller's threads and stay open. A handoff run compared with a solo run gets its tax in metrics.json,
    from the solo samples in memory (the run the plan checked, read once, or the one just made).
    `grader_startup_s`: the grader's start-up deadline; when grading fails the samples stay stored,
    ungraded, and GradingIncomplete says to rerun, which then only grades."""
    own = engines is None and not all(run.complete for run in plan.runs)
    if own:
        devices.use_threads(plan.cfg.threads)
    held = {"engines": engines}

    def get_engines() -> dict:
        """Loaded on first use: a run left with only stored samples to grade loads no model."""
        if held["engines"] is None:
            # cast: a checked plan has resolved its checkpoints
            held["engines"] = load_engines(plan.cfg, cast(Checkpoints, plan.checked.checkpoints), plan.checked.schedule)
        return cast(dict, held["engines"])  # cast: set just above when it was None

    solo = plan.solo_table
    folders = []
    pacing = Pacing(progress=progress, flush_every=flush_every, on_flush=on_flush, grader_startup_s=grader_startup_s)
    try:
        for run in plan.runs:
            rf, samples = _fill(plan.checked, run, get_engines, solo, pacing)
            folders.append(rf)
            if run.out == plan.solo:  # the solo run just made: the handoff's tax reads its samples
                # (or, when another process finished it after the plan looked, reused: read once, here)
                solo = SoloTable(rf, samples if samples is not None else rf.load_samples())
    finally:
        if own and held["engines"] is not None:
            close_engines(held["engines"])
    return tuple(folders)


def _fill(checked: Validated, run: RunPlan, engines: Callable[[], dict], solo: SoloTable | None, pacing: Pacing):
    """One run folder and its samples: generated (resuming its shards) and sealed with its metrics, or,
    when complete, reused as it is (samples None unless a tax needs them). RunFolder.writing: one
    writer at a time, and nothing half-made left behind by an early crash."""
    solo = solo if run.cfg.mode == "handoff" else None
    rf = run.folder  # as the plan opened it: its record read once, and verified when complete
    if run.complete:
        return _reusing(run, solo)
    with contextlib.ExitStack() as held:
        import torch

        # threads as torch reports them once the engines loaded (engines passed in keep the caller's)
        extra = {
            "grader": checked.grader_versions,
            "threads": torch.get_num_threads(),
            **run.extra,  # the plan's: the reproducibility note, a handoff's solo run, served models
        }
        stored = held.enter_context(rf.writing(run.cfg, extra, run.fingerprint))
        if not stored.complete:
            n_ungraded, cause = _generate(run, rf, stored.done, checked, engines, pacing)
            if n_ungraded:  # the grader failed in this invocation: a rerun grades (trying again now would wait again)
                raise GradingIncomplete(_incomplete(rf, n_ungraded, cause))
            samples = _grade_stored(rf, rf.load_samples(), pacing.grader_startup_s)
            rf.finalize(_metrics(samples, run.cfg.ks, solo), samples)
            return rf, samples
    # another process finished it since the plan looked: checked now, then reused (its lock released:
    # _reused takes it again only to record a tax)
    rf.verify(allow_unrecorded=True)  # a lens table may be unrecorded
    return _reusing(run, solo)


def _reusing(run: RunPlan, solo: SoloTable | None) -> tuple:
    log.info("reusing the complete %s run %s (same settings; delete it to regenerate)", run.cfg.mode, run.out)
    return _reused(run.folder, solo, run.cfg.ks)


def _metrics(samples: pd.DataFrame, ks, solo: SoloTable | None = None) -> dict:
    """metrics.json of a run holding `samples` (finalize writes it, then COMPLETE): the summary, and
    for a handoff run compared with `solo`, the communication tax."""
    metrics = summarize(samples, ks)
    return metrics if solo is None else {**metrics, **_tax(solo, samples, ks)}


def _tax(solo: SoloTable, handoff_samples: pd.DataFrame, ks) -> dict:
    """The tax keys of a handoff run's metrics.json: the tax against `solo`, and which solo run."""
    tax = json_safe(tax_table(solo.samples, handoff_samples, list(ks)))  # cleaned once, here
    return {"tax": tax, "solo_run": str(solo.folder.path.resolve())}


def _reused(rf: RunFolder, solo: SoloTable | None, ks) -> tuple:
    """A complete, verified run as it is, and its samples when a tax needs them (else None); a handoff
    run whose metrics.json lacks this solo run's tax gets it (run folders written before the tax
    preceded COMPLETE, or compared with another solo run), under the folder's lock: lens commands merge
    their keys into metrics.json under it, and a merge made beside one of them would lose its keys.
    Called without the lock held (it is not reentrant)."""
    if solo is None:
        return rf, None
    samples = rf.load_samples()
    tax, stored = _tax(solo, samples, ks), rf.metrics()
    if {k: stored.get(k) for k in tax} != tax:
        with rf.holding(wait_s=30):  # as register_table: a lens command holds it for seconds
            rf.check_sealed("recording the tax")  # an older marker's folder is read-only
            rf.update_metrics(tax)  # metrics.json read again under the lock, then merged
    return rf, samples


def verified_metrics(rf: RunFolder, ks) -> dict:
    """A finished run's metrics.json, read once, with its pass@k recomputed from the verified samples:
    what solo and handoff print, also on a rerun that reuses a complete folder, whose metrics.json may
    have been edited since (it is not hashed: lens commands add keys to it). A metrics.json whose pass@k
    disagree is named in a warning."""
    pass_at_k = json_safe(summarize_pass_at_k(rf.verify().load_samples(), list(ks)))
    metrics = rf.metrics()
    stored = metrics.get("pass_at_k")
    # the keys both hold (a run finished before a key existed, e.g. the CIs, is not "edited")
    if stored is not None and {k: stored[k] for k in pass_at_k if k in stored} != {
        k: v for k, v in pass_at_k.items() if k in stored
    }:
        log.warning(
            "%s: its pass@k differ from the samples' (edited after the run finished?); the samples' are shown",
            rf.metrics_path,
        )
    return {**metrics, "pass_at_k": pass_at_k}


def run_eval(
    cfg: EvalConfig,
    out: str | Path,
    engines: dict | None = None,
    progress: bool = True,
    flush_every: int = 64,
    on_flush: Callable[[int], None] | None = None,
    extra: dict | None = None,
    grader_startup_s: float = STARTUP_TIMEOUT_S,
) -> RunFolder:
    """Generate, grade and store every missing sample of `cfg` in run folder `out`; resumable.

    Plans (every input checked before the folder exists or an engine loads), then executes;
    `extra` is recorded in a new folder's config.json."""
    check_startup_timeout(grader_startup_s, 0.0, "grader_startup_s")  # the grader starts after generation: first
    (rf,) = execute(plan_run(cfg, out, extra), engines, progress, flush_every, on_flush, grader_startup_s)
    return rf


def run_handoff(
    cfg: EvalConfig,
    out_root: str | Path,
    solo_run: str | Path | None = None,
    progress: bool = True,
    allow_solo_mismatch: bool = False,
    grader_startup_s: float = STARTUP_TIMEOUT_S,
    checkpoints: Checkpoints | None = None,
) -> tuple[RunFolder, RunFolder, dict]:
    """Solo + handoff runs of one senior under out_root, and the communication tax between them
    (plan.plan_handoff says which solo run is reused and how it is checked). `checkpoints`: those the
    caller already resolved (the CLI, reading the default junior), passed to the plan as they are."""
    check_startup_timeout(grader_startup_s, 0.0, "grader_startup_s")
    plan = plan_handoff(cfg, out_root, solo_run, allow_solo_mismatch, checkpoints)
    if plan.reused:
        log.info("reusing %s (checked against the handoff's settings; not regenerated)", plan.solo)
    *made, handoff = execute(plan, progress=progress, grader_startup_s=grader_startup_s)
    solo = made[0] if made else cast(SoloTable, plan.solo_table).folder  # cast: nothing made = a reused solo table
    return solo, handoff, handoff.metrics()["tax"]


# ---- merge: the run folders of --num-shards processes into one ------------------------------------
def merge_shards(parts: list[str | Path], out: str | Path, solo: RunFolder | None = None) -> RunFolder:
    """Merge complete shard runs (same experiment, one --num-shards N, indices 0..N-1) into one run folder;
    a handoff run compared with the complete run `solo` gets its tax in metrics.json (before COMPLETE)."""
    folders = [verify_run(p) for p in parts]  # refuses a truncated or edited shard
    cfgs = [f.record for f in folders]
    other = next((i for i, c in enumerate(cfgs) if c["fingerprint"] != cfgs[0]["fingerprint"]), None)
    if other is not None:
        raise RunFolderError(
            f"shards come from different experiments: {folders[other].path} differs from {folders[0].path} in "
            f"{config_diff(cfgs[0]['config'], cfgs[other]['config'])}; merge only the --shard-index 0..N-1 outputs "
            "of one command on unchanged inputs (rerun the differing shards into a new --out)"
        )
    counts = {f.path: c["config"]["num_shards"] for f, c in zip(folders, cfgs)}
    if len(set(counts.values())) != 1:
        listed = ", ".join(f"{p} (--num-shards {n})" for p, n in counts.items())
        raise RunFolderError(
            f"shards were split with different --num-shards: {listed}; merge the outputs of one --num-shards N "
            "command only (move the others away)"
        )
    cfg = dataclasses.replace(from_dict(EvalConfig, cfgs[0]["config"]), num_shards=1, shard_index=0)
    num_shards = cfgs[0]["config"]["num_shards"]
    indices = sorted(c["config"]["shard_index"] for c in cfgs)
    if indices != list(range(num_shards)):
        raise RunFolderError(
            f"shard indices {indices} do not cover 0..{num_shards - 1}; finish the missing shards first"
        )
    samples = [f.load_samples() for f in folders]
    keys = pd.concat([s[["benchmark", "problem_id", "sample_idx"]] for s in samples], ignore_index=True)
    n_dup = int(keys.duplicated().sum())
    per_problem = keys.groupby(["benchmark", "problem_id"]).size()
    short = per_problem[per_problem != cfg.n]
    if n_dup or len(short):
        raise RunFolderError(
            f"shards overlap or miss samples ({n_dup} duplicate samples, {len(short)} problems without "
            f"--n {cfg.n} samples); rerun the shards of one --num-shards N command into a new --out"
        )
    if cfg.inputs is not None and len(per_problem) != cfg.inputs.n_problems:  # every shard saw this list
        raise RunFolderError(
            f"the shards hold {len(per_problem)} problems, but their inputs list {cfg.inputs.n_problems}; rerun "
            "the shards of one --num-shards N command into a new --out"
        )
    against = SoloTable(solo, solo.load_samples()) if solo is not None else None
    extra = {"grader": cfgs[0].get("grader"), "merged_from": [str(f.path) for f in folders]}
    if solo is not None:  # which solo run the tax is measured against, as a single-process handoff records it
        extra["solo_run"] = solo_record(solo.path, solo.record["fingerprint"], [], False)
    rf = RunFolder(out)
    with rf.writing(cfg, extra) as stored:
        if not stored.complete:
            for s in samples:
                rf.append_shard(s.to_dict("records"))
            merged = rf.load_samples()
            rf.finalize(_metrics(merged, cfg.ks, against), merged)
            return rf
    rf.verify()  # merged before: reused as it is (the lock released: _reused takes it to record a tax)
    return _reused(rf, against, cfg.ks)[0]


def merge_runs(root: str | Path, parts: list[Path], kinds: list[str], solo_run=None) -> dict[str, RunFolder]:
    """Merge PART/KIND of every shard folder in `parts` into ROOT/KIND for each kind (solo,
    handoff-SCHEDULE); each handoff kind's tax compares with `solo_run`, else the merged ROOT/solo
    (merged first). `tandem-eval merge` and the Ray driver both merge here."""
    root = Path(root)
    solo = verify_run(solo_run) if solo_run is not None else None
    merged: dict[str, RunFolder] = {}
    for kind in sorted(kinds, key=lambda k: k != "solo"):  # the solo run first: the handoffs' tax needs it
        against = (solo if solo is not None else merged.get("solo")) if kind.startswith("handoff") else None
        merged[kind] = merge_shards([Path(p) / kind for p in parts], root / kind, against)
    return {kind: merged[kind] for kind in kinds}
