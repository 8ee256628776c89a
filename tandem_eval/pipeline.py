"""Evaluation pipeline: config -> engines -> co-generation -> grading -> run folder.

`run_eval` fills one run folder (solo or handoff) and is resumable: it skips every sample already
in a shard and flushes graded samples every `flush_every` traces. `run_handoff` runs (or reuses)
the senior's solo run and the handoff run side by side and records the communication tax.

    from tandem_eval.pipeline import run_handoff
    solo, handoff, tax = run_handoff(EvalConfig(senior=ModelSpec("ckpt"), junior=ModelSpec("jr"),
                                                mode="handoff", schedule="paragraph"), "runs/ckpt")
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .config import ConfigError, EvalConfig, Inputs, inputs_diff, json_safe, to_dict
from .data import Problem, load_benchmarks, prompt_ids
from .data.benchmarks import benchmark_files
from .engines import load_engine, unavailable
from .engines.bridge import RetokenizingEngine
from .grading import Grader, check_grader_versions
from .metrics import summarize_pass_at_k
from .metrics.tax import communication_tax
from .models import (
    check_chat_template,
    check_checkpoint,
    check_embedding_rows,
    check_vocab,
    load_tokenizer,
    resolve_model,
    same_weights,
)
from .paths import not_writable
from .progress import progress_reporter
from .results import RunFolder, RunFolderError, config_diff, require_complete, sha256_file, verify_run
from .schedules import make_schedule, needs_junior, parse_schedule
from .tandem import TraceSpec, budget, cogenerate, trace_seed

log = logging.getLogger(__name__)


def load_problems(cfg: EvalConfig) -> list:
    """All problems of the configured benchmarks; with sharding, every num_shards-th one."""
    return load_inputs(cfg)[0]


def load_inputs(cfg: EvalConfig) -> tuple[list[Problem], Inputs]:
    """This shard's problems, and the run's inputs by content (Inputs: every benchmark file's SHA-256,
    hashed before it is read, and the whole resolved problem list's, before sharding)."""
    files = []
    for entry, path in benchmark_files(cfg.benchmarks):
        if path.is_file():  # a missing file is reported by the loader below
            files.append((entry, sha256_file(path)))
    problems = load_benchmarks(list(cfg.benchmarks), limit=cfg.limit, group=cfg.group)  # ids unique in the run
    listed = [[p.benchmark, p.group, p.problem_id, p.problem, p.answer] for p in problems]
    digest = hashlib.sha256(json.dumps(listed, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
    inputs = Inputs(files=tuple(files), problems=digest, n_problems=len(problems))
    return [p for i, p in enumerate(problems) if i % cfg.num_shards == cfg.shard_index], inputs


# ---- validation: every cheap check before any engine loads or any folder is created -------------
@dataclass(frozen=True)
class Validated:
    """What validation already computed: the problems, the grader versions to record, and the config
    with its inputs hashed (the one to run and record)."""

    problems: list[Problem]
    grader_versions: dict
    cfg: EvalConfig


def check_out_path(path: str | Path, cfg: EvalConfig | None = None) -> None:
    """An output folder can be created (or reused) at `path`: no file in the way, writable parent,
    and an existing run there holds the same experiment."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {path} is a file; pass a folder path (it is created if missing)")
    reason = not_writable(path)
    if reason:
        raise ConfigError(f"--out {path}: {reason}; pass another --out")
    config_path = path / "config.json"
    if cfg is not None and config_path.exists():
        try:
            old = json.loads(config_path.read_text(encoding="utf-8"))
            fingerprint = old["fingerprint"]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise RunFolderError(f"{config_path} is damaged; pass a new --out, or delete {path} to restart") from None
        if fingerprint != cfg.fingerprint():
            RunFolder(path).init(cfg)  # raises "holds a different run (diff...)"


def check_model(spec_path: str):
    """Checkpoint files (config, weights headers) and tokenizer of one model; returns the tokenizer.
    Every command that loads a model's weights runs this first (solo, handoff, legibility, drift, lm-eval)."""
    path = resolve_model(spec_path)
    check_checkpoint(path)
    tok = load_tokenizer(path)
    check_embedding_rows(path, tok)
    return tok


def check_template(tok, chat_template: str | None, who: str, spec_path: str, option: str) -> None:
    """The prompt renders with `chat_template` (or the tokenizer's own); errors name `option`."""
    source = f"{option} (the {who}'s template)" if chat_template else f"the {who} checkpoint {spec_path}"
    check_chat_template(tok, chat_template, source, option)


def validate(cfg: EvalConfig, outs: list[str | Path] = (), solo_run: str | Path | None = None) -> Validated:
    """Check everything a run needs, cheaply (configs, tokenizers, safetensors headers, prompts),
    before any engine loads or anything is written; raises a user error (one-line message)."""
    grader_versions = check_grader_versions(cfg.allow_grader_mismatch)
    parse_schedule(cfg.schedule)
    if reason := unavailable(cfg.engine):
        raise ConfigError(reason)
    for out in outs:
        check_out_path(out, None)
        if RunFolder(out).lock_path.exists():  # a live writer refuses before any model loads (a dead one holds nothing)
            with RunFolder(out).lock():
                pass
    if solo_run is not None:
        require_complete(solo_run)
    tok = check_models(cfg)
    problems, inputs = load_inputs(cfg)
    cfg = dataclasses.replace(cfg, inputs=inputs)
    if not problems:
        raise ConfigError(
            f"no problems to evaluate for benchmarks {list(cfg.benchmarks)} (shard "
            f"{cfg.shard_index}/{cfg.num_shards}); check --benchmark/--limit/--num-shards"
        )
    _check_prompt_lengths(cfg, tok, problems)
    return Validated(problems, grader_versions, cfg)


def check_models(cfg: EvalConfig, junior_too: bool = False):
    """The senior's (and, when the schedule needs one or `junior_too`, the junior's) checkpoint,
    tokenizer, vocabulary and chat template; no weights load. Returns the senior's tokenizer."""
    tok = check_model(cfg.senior.path)
    check_template(tok, cfg.chat_template, "senior", cfg.senior.path, "--chat-template")
    if cfg.junior is not None and (junior_too or needs_junior(cfg.schedule)):
        junior_tok = check_model(cfg.junior.path)
        same = check_vocab(tok, junior_tok, cfg.allow_vocab_mismatch, senior=cfg.senior.path, junior=cfg.junior.path)
        if not same or cfg.junior_chat_template:  # the junior renders its own prompt only with another vocabulary
            check_template(junior_tok, cfg.junior_chat_template, "junior", cfg.junior.path, "--junior-chat-template")
    return tok


def _check_prompt_lengths(cfg: EvalConfig, tok, problems: list[Problem]) -> None:
    """Refuse a context no prompt fits in; warn (by name) about problems that get 0 tokens."""
    lengths = {
        (p.benchmark, p.problem_id): len(prompt_ids(tok, p.problem, chat_template=cfg.chat_template)) for p in problems
    }
    ctx = cfg.sampling.max_context
    too_long = {key: n for key, n in lengths.items() if n >= ctx}
    if len(too_long) == len(lengths):
        raise ConfigError(
            f"--max-context {ctx} leaves no room to generate: every prompt is at least {min(lengths.values())} "
            f"tokens; raise --max-context above {max(lengths.values())}"
        )
    if too_long:
        names = ", ".join(f"{b}/{pid}" for b, pid in list(too_long)[:5]) + (" ..." if len(too_long) > 5 else "")
        log.warning(
            "%d problem(s) have prompts of >= --max-context %d tokens and get 0-token samples: %s; "
            "raise --max-context to generate for them",
            len(too_long),
            ctx,
            names,
        )


def use_threads(threads: int | None = None) -> int:
    """Set torch's CPU threads to `threads` (default: the cores this process may use) and return it;
    warn when the 1-minute load average already exceeds the cores (another process competes for
    them: beside one other torch process on 2 cores, HF generation ran 11x slower)."""
    import torch

    cores = _usable_cores()
    torch.set_num_threads(threads or cores)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > cores:
        log.warning(
            "the 1-minute load average is %.1f on %d cores: other processes compete for them, so this run may be "
            "several times slower; wait for them, or give each process a share with --threads",
            load,
            cores,
        )
    return torch.get_num_threads()


def open_engines(cfg: EvalConfig, **engine_kw) -> dict:
    """Load the senior (and the junior when the schedule needs one) on the configured backend.

    `engine_kw` go to both engines' constructors (e.g. `device` for hf). Sets torch's CPU threads first
    (cfg.threads, see use_threads)."""
    use_threads(cfg.threads)
    kw = {"dtype": cfg.senior.dtype, "max_batch": cfg.batch_size, **engine_kw}
    if cfg.engine == "vllm":
        kw["tensor_parallel_size"] = cfg.tensor_parallel_size
        kw["verbose"] = logging.getLogger("tandem_eval").isEnabledFor(logging.DEBUG)  # vLLM's chatter only with -v
    senior_path = resolve_model(cfg.senior.path)
    log.info("loading the senior %s on %s", cfg.senior.path, cfg.engine)
    engines = {"senior": load_engine(cfg.engine, senior_path, cfg.sampling, **kw)}
    tok = engines["senior"].tokenizer
    try:
        if cfg.junior is not None and needs_junior(cfg.schedule):
            junior_path = resolve_model(cfg.junior.path)
            same_vocab = check_vocab(tok, load_tokenizer(junior_path), cfg.allow_vocab_mismatch)
            if shares_senior_model(cfg) and cfg.engine == "hf":  # one set of weights, two engines (own KV rows)
                log.info("the junior %s is the senior's own model: sharing its loaded weights", cfg.junior.path)
                engines["junior"] = load_engine("hf", engines["senior"].model, cfg.sampling, tokenizer=tok, **kw)
            elif shares_senior_model(cfg):
                # vLLM: the senior's engine serves both roles. A trace has one live segment at a time, and
                # the loop credits each finished segment to its trace's current author, not to an engine.
                log.info("the junior %s is the senior's own model: one vLLM engine serves both", cfg.junior.path)
                engines["junior"] = engines["senior"]
            else:
                log.info("loading the junior %s on %s", cfg.junior.path, cfg.engine)
                engines["junior"] = load_engine(
                    cfg.engine, junior_path, cfg.sampling, **{**kw, "dtype": cfg.junior.dtype}
                )
            if not same_vocab:  # text-level handoff: the trace stays in senior ids, the junior re-tokenizes
                engines["junior"] = RetokenizingEngine(engines["junior"], tok, cfg.schedule)
    except BaseException:  # a junior that fails to load must not leave the senior's engine running
        close_engines(engines)
        raise
    return engines


def shares_senior_model(cfg: EvalConfig) -> bool:
    """The junior is the senior's own model: same checkpoint (or a byte-identical copy) in the same
    dtype. HF: two engines on one loaded model; vLLM: one engine for both roles."""
    return (
        cfg.junior is not None
        and cfg.junior.dtype == cfg.senior.dtype
        and same_weights(cfg.senior.path, cfg.junior.path)
    )


def close_engines(engines: dict) -> None:
    for e in {id(e): e for e in engines.values()}.values():  # a self-paired vLLM engine serves two roles
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
    return json_safe(
        {
            "pass_at_k": summarize_pass_at_k(samples, list(cfg.ks)),
            "n_samples": int(len(samples)),
            "n_problems": int(samples[["benchmark", "problem_id"]].drop_duplicates().shape[0]),
            "mean_tokens": float(samples.n_tokens.mean()),
            "truncation_rate": float(truncated.mean()),
            "senior_fraction": float(samples.senior_fraction.mean()),  # NaN (all 0-token) -> null via json_safe
            "handoffs_per_trace": float(samples.n_handoffs.mean()),
            "grade_status": {k: int(v) for k, v in samples.grade_status.value_counts().sort_index().items()},
        }
    )


def run_eval(
    cfg: EvalConfig,
    out: str | Path,
    engines: dict | None = None,
    progress: bool = True,
    flush_every: int = 64,
    on_flush: Callable[[int], None] | None = None,
    extra: dict | None = None,
) -> RunFolder:
    """Generate, grade and store every missing sample of `cfg` in run folder `out`; resumable.

    Every input is validated before the folder exists or an engine loads. A crash before the first
    samples are flushed removes what this call created, so no half-made folder is left behind;
    a crash after keeps the flushed shards (the folder stays incomplete: rerun to resume).
    One process writes a folder at a time (RUN/.lock); `extra` is recorded in a new folder's config.json."""
    checked = validate(cfg, [out])
    cfg = checked.cfg  # with its inputs hashed: a resumed run whose benchmark file changed is refused
    check_out_path(out, cfg)
    rf = RunFolder(out)
    existed = rf.config_path.exists()
    if existed:
        rf.init(cfg, extra={"grader": checked.grader_versions})  # refuses a folder of another experiment
        if rf.is_complete():  # a reused run must still hold what COMPLETE recorded (a lens rerun repairs
            log.info("reusing the complete %s run %s (same settings; delete it to regenerate)", cfg.mode, rf.path)
            return rf.verify(allow_unrecorded=True)  # an unrecorded table of its own, so it may be there)
    own = engines is None
    engines = engines or open_engines(cfg)  # an engine that fails to load leaves nothing on disk
    created = [] if existed else _missing_dirs(rf.path)
    try:
        with contextlib.ExitStack() as held:
            held.enter_context(rf.lock())  # a second writer stops here, before touching anything
            try:
                # as used (config.threads: as asked; None = every core); engines passed in keep the caller's
                threads = {"threads": _torch_threads(cfg if own else None)}
                rf.init(cfg, extra={"grader": checked.grader_versions, **threads, **(extra or {})})
                if rf.is_complete():  # finished by another process while this one loaded its engines
                    return rf.verify(allow_unrecorded=True)
                _generate(cfg, rf, checked.problems, engines, progress, flush_every, on_flush)
                rf.finalize(summarize(rf.load_samples(), cfg))
            except BaseException:
                if not existed:
                    held.close()  # release the lock first, so that an emptied folder can be removed
                    _discard_if_empty(rf, created)
                raise
    finally:
        if own:
            close_engines(engines)
    return rf


def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _torch_threads(cfg: EvalConfig | None = None) -> int:
    """torch's CPU threads as used; with `cfg`, its --threads applied again first (loading a model can
    reset the count, so run_eval applies it after its engines load too)."""
    import torch

    if cfg is not None:
        torch.set_num_threads(cfg.threads or _usable_cores())
    return torch.get_num_threads()


def _missing_dirs(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    return missing


def _discard_if_empty(rf: RunFolder, created: list[Path]) -> None:
    """Undo a run folder this call created when no sample reached it (nothing to resume)."""
    if rf.shards() or rf.samples_path.exists():
        return
    for f in (rf.config_path, rf.metrics_path, rf.done_path):
        f.unlink(missing_ok=True)
    for d in [rf.shard_dir, *created]:
        try:
            d.rmdir()
        except OSError:  # not empty (someone else's files) or already gone
            pass


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
            junior_prompt = prompt_ids(
                junior.inner.tokenizer, meta[spec.key][0].problem, chat_template=cfg.junior_chat_template
            )
            junior.register(spec.key, junior_prompt, len(spec.prompt_ids))
    pool = cfg.batch_size * (2 if junior is not None else 1)
    reporter = progress_reporter(
        len(specs),
        f"{cfg.mode}:{cfg.schedule}",
        enabled=progress,
        live_tokens=live_token_counter([engines["senior"], junior]),
        budget=cfg.sampling.max_new_tokens,
    )
    with Grader() as grader, reporter as bar:
        buffer = []

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
            bar.advance(len(trace.token_ids))
            if len(buffer) >= flush_every:
                flush()
        if buffer:
            flush()


def live_token_counter(engines: list) -> Callable[[], int] | None:
    """Tokens the engines generated from now on, live traces included (their `stats["generated"]`
    counters; a text-level junior's inner engine), or None when an engine keeps no such counter."""
    stats = [getattr(getattr(e, "inner", e), "stats", None) for e in engines if e is not None]
    if not all(isinstance(s, dict) and "generated" in s for s in stats):
        return None
    base = sum(s["generated"] for s in stats)  # engines are reused across runs (solo, then handoff)
    return lambda: sum(s["generated"] for s in stats) - base


def solo_config(cfg: EvalConfig) -> EvalConfig:
    """The senior's solo run that a handoff run is compared with (independent of the junior)."""
    return dataclasses.replace(cfg, mode="solo", schedule="solo", junior=None, allow_vocab_mismatch=False)


def handoff_dirname(schedule: str) -> str:
    return "handoff-" + schedule.replace(":", "_")


# Fields of a solo run that must equal the handoff's own for the tax to compare like with like
# (sharding, batch size, label and the k list do not change samples' meaning).
SOLO_REUSE_FIELDS = (
    "mode",
    "schedule",
    "senior",
    "seed",
    "sampling",
    "n",
    "benchmarks",
    "limit",
    "engine",
    "chat_template",
    "group",
    "inputs",
)


def solo_reuse_differences(cfg: EvalConfig, solo: RunFolder) -> list[str]:
    """Fields in which the complete solo run `solo` differs from the solo run `cfg`'s handoff needs,
    each as 'field (run value vs needed value)'; the grader's versions count as the field `grader`."""
    want, raw = to_dict(solo_config(cfg)), solo.config()
    have = raw["config"]
    diffs = []
    for key in SOLO_REUSE_FIELDS:
        a, b = have.get(key), want.get(key)
        if key == "senior" and a != b and isinstance(a, dict) and isinstance(b, dict):
            if a.get("dtype") != b.get("dtype"):
                diffs.append(f"senior.dtype ({a.get('dtype')} vs {b.get('dtype')})")
            if not _same_checkpoint(a.get("path"), b.get("path")):
                diffs.append(f"senior ({a.get('path')} vs {b.get('path')})")
        elif key == "inputs":  # nothing for a run from before inputs were hashed (check_solo_reuse warns)
            diffs += inputs_diff(a, b)
        elif isinstance(a, dict) and isinstance(b, dict):
            diffs += [
                f"{key}.{k} ({a.get(k)!r} vs {b.get(k)!r})" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)
            ]
        elif a != b:
            shown = (lambda v: "custom" if v else "tokenizer's own") if key == "chat_template" else repr
            diffs.append(f"{key} ({shown(a)} vs {shown(b)})")
    grader = {k: v for k, v in check_grader_versions(True).items() if k != "mismatch"}
    recorded = {k: v for k, v in (raw.get("grader") or {}).items() if k != "mismatch"}
    if recorded != grader:
        diffs.append(f"grader ({recorded or 'unrecorded'} vs {grader})")
    return diffs


def _same_checkpoint(a: str | None, b: str | None) -> bool:
    if a == b:
        return True
    try:
        return resolve_model(a).resolve() == resolve_model(b).resolve()
    except Exception:  # a moved or deleted checkpoint cannot be shown to be the same one
        return False


def check_solo_reuse(cfg: EvalConfig, solo: RunFolder, allow_mismatch: bool, how: str) -> dict:
    """Refuse a solo run that does not match the handoff (unless allowed); the record for config.json."""
    diffs = solo_reuse_differences(cfg, solo)
    if diffs and not allow_mismatch:
        raise RunFolderError(
            f"{how} {solo.path} is not this senior's solo run under the handoff's settings: differs in "
            f"{'; '.join(diffs)}. Pass the matching solo run (or a new --out), or --allow-solo-mismatch to use it "
            "anyway"
        )
    if solo.config()["config"].get("inputs") is None:
        log.warning("%s predates content hashes of benchmark files: their content is not checked", solo.path)
    return {
        "path": str(solo.path.resolve()),
        "fingerprint": solo.config()["fingerprint"],
        "differs": diffs,
        "allow_solo_mismatch": bool(allow_mismatch),
    }


def run_handoff(
    cfg: EvalConfig,
    out_root: str | Path,
    solo_run: str | Path | None = None,
    progress: bool = True,
    allow_solo_mismatch: bool = False,
) -> tuple[RunFolder, RunFolder, dict]:
    """Solo + handoff runs of one senior under out_root, and the communication tax between them.

    A reused solo run (--solo-run, or a complete OUT/solo) must match the handoff's senior, seed,
    sampling, budget, chat template, benchmarks and grader; allow_solo_mismatch records the
    differences in the handoff's config.json ("solo_run") instead of refusing."""
    out_root = Path(out_root)
    solo_out, handoff_out = out_root / "solo", out_root / handoff_dirname(cfg.schedule)
    # Both runs' inputs are checked before the solo run starts: a bad junior or schedule must not
    # cost a whole solo run first.
    cfg = validate(cfg, [handoff_out] if solo_run is not None else [solo_out, handoff_out], solo_run).cfg
    check_out_path(handoff_out, cfg)
    solo_dir = Path(solo_run) if solo_run is not None else solo_out
    solo, record = None, None
    if solo_run is not None or RunFolder(solo_dir).is_complete():  # checked before any model is loaded
        solo = verify_run(solo_dir)
        how = "--solo-run" if solo_run is not None else "the existing solo run"
        record = check_solo_reuse(cfg, solo, allow_solo_mismatch, how)
        log.info("reusing %s %s (checked against the handoff's settings; not regenerated)", how, solo.path)
    else:
        check_out_path(solo_out, solo_config(cfg))  # an unfinished OUT/solo must be the same experiment
    engines = open_engines(cfg)
    try:
        if solo is None:
            solo = run_eval(solo_config(cfg), solo_dir, {"senior": engines["senior"]}, progress)
            record = check_solo_reuse(cfg, solo, False, "the solo run")
        handoff = run_eval(cfg, handoff_out, engines, progress, extra={"solo_run": record})
    finally:
        close_engines(engines)
    tax = json_safe(communication_tax(solo.load_samples(), handoff.load_samples(), list(cfg.ks)))
    handoff.update_metrics({"tax": tax, "solo_run": str(solo.path.resolve())})
    return solo, handoff, tax


def merge_shards(parts: list[str | Path], out: str | Path) -> RunFolder:
    """Merge complete shard runs (same experiment, one --num-shards N, indices 0..N-1) into one run folder."""
    folders = [verify_run(p) for p in parts]  # refuses a truncated or edited shard
    cfgs = [f.config() for f in folders]
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
    from .config import from_dict

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
    rf = RunFolder(out)
    rf.init(cfg, extra={"grader": cfgs[0].get("grader"), "merged_from": [str(f.path) for f in folders]})
    with rf.lock():
        if rf.is_complete():
            return rf.verify()
        for s in samples:
            rf.append_shard(s.to_dict("records"))
        rf.finalize(summarize(rf.load_samples(), cfg))
    return rf
