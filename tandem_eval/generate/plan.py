"""Plan once, then execute: everything a generate command needs, resolved and checked before any
engine loads or any file is written.

A `Plan` holds the config with its inputs hashed, this shard's problems and their prompt ids, the
grader versions to record, and the run folders to fill (solo, handoff) with what each one is: to be
generated, or complete and reused. `execute.execute` runs a plan without checking anything again.

    from tandem_eval.generate.plan import plan_handoff, plan_run
    plan = plan_handoff(cfg, "runs/ckpt")          # OUT/solo (made or reused) + OUT/handoff-SCHEDULE
    plan = plan_run(cfg, "runs/ckpt/solo")         # one run folder
    plan.runs[0].out, plan.cfg.fingerprint()
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..config import EvalConfig, Inputs, solo_config
from ..data import Problem
from ..data.benchmarks import read_benchmarks
from ..engines import backend, resolve_checkpoints, unavailable
from ..models import Checkpoint, Checkpoints, check_models, with_contents
from ..run.results import RunFolder, verify_run
from ..schemas import ConfigError
from .checks import check_out_folder, check_prompts, check_solo_problems, check_solo_reuse, solo_record
from .grading import check_grader_versions
from .schedules import SOLO, ScheduleSpec, parse_schedule

if TYPE_CHECKING:
    import pandas as pd


def handoff_dirname(schedule: str) -> str:
    return "handoff-" + schedule.replace(":", "_")


def load_inputs(cfg: EvalConfig) -> tuple[list[Problem], Inputs]:
    """This shard's problems, and the run's inputs by content (Inputs: every benchmark file's SHA-256, of
    the bytes its problems were parsed from, and the whole resolved problem list's, before sharding)."""
    problems, files = read_benchmarks(list(cfg.benchmarks), limit=cfg.limit, group=cfg.group)  # ids unique in the run
    listed = [[p.benchmark, p.group, p.problem_id, p.problem, p.answer] for p in problems]
    digest = hashlib.sha256(json.dumps(listed, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
    inputs = Inputs(files=tuple(files), problems=digest, n_problems=len(problems))
    return [p for i, p in enumerate(problems) if i % cfg.num_shards == cfg.shard_index], inputs


def load_problems(cfg: EvalConfig) -> list:
    """All problems of the configured benchmarks; with sharding, every num_shards-th one."""
    return load_inputs(cfg)[0]


@dataclass(frozen=True)
class Validated:
    """What validation computed: the config with its inputs hashed (the one to run and record), this
    shard's problems, their senior prompt ids by (benchmark, problem id), the grader versions to record,
    the checkpoints as engines load them, and the schedule parsed."""

    problems: list[Problem]
    grader_versions: dict
    cfg: EvalConfig
    schedule: ScheduleSpec
    prompts: dict = field(default_factory=dict)
    checkpoints: Checkpoints | None = None

    @property
    def senior(self) -> Checkpoint | None:
        """The senior as this command resolved it (what a reused solo run's recorded senior is compared with)."""
        return self.checkpoints.senior if self.checkpoints else None

    def servers(self, junior: bool = True) -> dict:
        """What a run folder's config.json records of its served models ({"servers": {role: identity}}:
        name, URLs, the server's model folder and vLLM version, whether it runs our sampler); {} when its
        models are local. `junior=False`: the senior's alone (the solo run of a handoff)."""
        ckpts = self.checkpoints
        roles = {"senior": ckpts.senior, "junior": ckpts.junior if junior else None} if ckpts else {}
        served = {role: c.identity for role, c in roles.items() if c is not None and c.identity is not None}
        return {"servers": served} if served else {}


def validate(cfg: EvalConfig, resolved: Checkpoints | None = None) -> Validated:
    """Check everything a run needs, cheaply (benchmarks, configs, tokenizers, safetensors headers,
    prompts), before any engine loads or anything is written; raises a user error (one-line message).
    Each lower module is asked once, in one order: benchmarks, grader, schedule, engine, checkpoints,
    prompts. Out folders and a reused solo run are the plan's to check (plan_run, plan_handoff)."""
    problems, inputs = load_inputs(cfg)
    cfg = dataclasses.replace(cfg, inputs=inputs)
    if inputs.n_problems and cfg.num_shards > inputs.n_problems:
        # refused by every shard, not only by the empty ones: the others would finish, and `merge` then
        # waits forever for a shard that can never run
        first, last = inputs.n_problems, cfg.num_shards - 1
        empty = f"shard {first} would be" if first == last else f"shards {first} to {last} would be"
        raise ConfigError(
            f"--num-shards {cfg.num_shards} is more than the {inputs.n_problems} problems to evaluate ({empty} "
            f"empty, and `merge` could never finish); pass --num-shards {inputs.n_problems} or fewer"
        )
    if not problems:
        raise ConfigError(
            f"no problems to evaluate for benchmarks {list(cfg.benchmarks)} (shard "
            f"{cfg.shard_index}/{cfg.num_shards}); check --benchmark/--limit/--num-shards"
        )
    grader_versions = check_grader_versions(cfg.allow_grader_mismatch)
    schedule = parse_schedule(cfg.schedule)  # a bad --schedule is refused here; the plan carries it parsed
    if reason := unavailable(cfg.engine):
        raise ConfigError(reason)
    # served models: their servers are asked once, here; local folders: resolved once in check_models
    resolved = resolved or resolve_checkpoints(cfg.engine, cfg, schedule.junior)
    tok, checkpoints = check_models(cfg, schedule.junior, resolved=resolved)
    cfg = with_contents(cfg, checkpoints)  # checkpoints by content: replaced weights are another run
    prompts = check_prompts(cfg, tok, problems)
    return Validated(problems, grader_versions, cfg, schedule, prompts, checkpoints)


class SoloTable(NamedTuple):
    """The solo run a handoff run's tax compares with: its folder (verified) and its samples, read once."""

    folder: RunFolder
    samples: pd.DataFrame


@dataclass(frozen=True)
class RunPlan:
    """One run folder to fill, as the plan opened it (`open_run`): its config and fingerprint (computed
    once), the folder (holding the config.json record it read, if any), its schedule (parsed once),
    whether it is complete (then verified by the plan and reused as it is), and what a new folder's
    config.json records beside the config."""

    cfg: EvalConfig
    folder: RunFolder = field(compare=False)
    schedule: ScheduleSpec
    fingerprint: str
    complete: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.folder.path


def reproducibility(cfg: EvalConfig) -> str:
    """What a run's config.json says about rerunning it bit for bit. Threads and batch size are out of the
    fingerprint (a run resumes under any), so this says when they can change the samples
    (docs/reliability.md: "Which runs are bit-reproducible")."""
    dtypes = {cfg.senior.dtype} | ({cfg.junior.dtype} if cfg.junior is not None else set())
    if backend(cfg.engine).remote:  # the servers compute: their dtype and batching are theirs, not cfg's
        return (
            f'{cfg.engine}: samples drawn on the servers (see "servers"); where every server runs our sampler '
            "(shared_sampler) a trace's tokens are the in-process engines' on the same seeds (measured: "
            "tests/test_served.py), else vLLM's own generator draws them (reproducible on the same servers)"
        )
    if backend(cfg.engine).fp32_reproducible and dtypes == {"float32"}:
        return (
            f"float32 on the {cfg.engine} engine: the same samples under any --threads and --batch-size (measured: "
            "SmolLM2-135M, 8 of 8 traces for threads 1/2 and batch 8/1; tests/test_real_gsm8k.py)"
        )
    return (
        f"{'/'.join(sorted(dtypes))} on {cfg.engine}: not bit-reproducible across --threads, --batch-size or "
        "engines (low-precision sums round differently when the work is split differently: SmolLM2-135M bfloat16, "
        "2 of 8 traces the same for batch 8 vs 4; Qwen2.5-Coder-1.5B bfloat16, 26 of 50 for threads 1 vs 2); "
        "rerun with the recorded threads and batch size for the same samples"
    )


def open_run(cfg: EvalConfig, out: Path, schedule: ScheduleSpec, extra: dict | None = None) -> RunPlan:
    """The run folder `out` for `cfg`, opened once for the whole command: --out checked to hold it
    (check_out_folder reads an existing config.json, and the folder keeps what it read), and a complete run
    verified here, so that execute reuses it without reading or checking it again."""
    fingerprint = cfg.fingerprint()
    extra = {"reproducibility": reproducibility(cfg), **(extra or {})}  # config.json's, beside grader and threads
    folder = check_out_folder(RunFolder(out), cfg, fingerprint)
    complete = folder.is_complete()
    if complete:  # a damaged complete folder is refused now, before any engine loads or other run is made
        folder.verify(allow_unrecorded=True)  # a lens table may be unrecorded (lens commands repair or adopt it)
    return RunPlan(cfg, folder, schedule, fingerprint, complete, extra)


@dataclass(frozen=True)
class Plan:
    """A checked generate command: the runs to fill in order, and for a handoff the solo run folder
    its tax compares with (`reused`: a complete one, checked; else the plan's first run)."""

    checked: Validated
    runs: tuple[RunPlan, ...]
    solo: Path | None = None
    reused: bool = False
    solo_table: SoloTable | None = None  # the reused solo run, checked and read once, here

    @property
    def cfg(self) -> EvalConfig:
        return self.checked.cfg

    @property
    def fingerprint(self) -> str:
        """The command's own run's fingerprint (the handoff's, or the one run's): checked.cfg is the last run's."""
        return self.runs[-1].fingerprint


def plan_run(cfg: EvalConfig, out: str | Path, extra: dict | None = None) -> Plan:
    """One run folder `out` for `cfg` (solo, or a handoff run alone); `extra` goes into its config.json."""
    checked = validate(cfg)
    record = dict(extra or {}) | checked.servers(junior=checked.cfg.junior is not None)
    return Plan(checked, (open_run(checked.cfg, Path(out), checked.schedule, record),))


def plan_handoff(
    cfg: EvalConfig,
    out_root: str | Path,
    solo_run: str | Path | None = None,
    allow_solo_mismatch: bool = False,
    checkpoints: Checkpoints | None = None,
) -> Plan:
    """OUT/solo (or the complete `solo_run`) and OUT/handoff-SCHEDULE, both checked before the solo run
    starts: a bad junior or schedule must not cost a whole solo run first.

    A reused solo run (--solo-run, or a complete OUT/solo) must match the handoff's senior, seed,
    sampling, budget, chat template, benchmarks and grader; allow_solo_mismatch records the
    differences in the handoff's config.json ("solo_run") instead of refusing."""
    out_root = Path(out_root)
    solo_out, handoff_out = out_root / "solo", out_root / handoff_dirname(cfg.schedule)
    solo_dir = Path(solo_run) if solo_run is not None else solo_out
    reuse = solo_run is not None or RunFolder(solo_dir).is_complete()
    checked = validate(cfg, checkpoints)  # checkpoints the caller resolved are taken as they are
    cfg = checked.cfg
    if reuse:
        how = "--solo-run" if solo_run is not None else "the existing solo run"
        folder = verify_run(solo_dir)
        record = check_solo_reuse(cfg, folder, allow_solo_mismatch, how, checked.grader_versions, checked.senior)
        runs: tuple[RunPlan, ...] = ()
        reused = SoloTable(folder, folder.load_samples())
        check_solo_problems(folder, reused.samples, checked.problems, how)
        solo_table: SoloTable | None = reused
    else:  # made first, from this very config: nothing differs
        made = open_run(solo_config(cfg), solo_out, SOLO, checked.servers(junior=False))
        record = solo_record(solo_out, made.fingerprint, [], False)
        runs, solo_table = (made,), None
    handoff = open_run(cfg, handoff_out, checked.schedule, {"solo_run": record, **checked.servers()})
    return Plan(checked, (*runs, handoff), solo_dir, reused=reuse, solo_table=solo_table)
