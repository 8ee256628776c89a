"""Evaluation across machines on Ray: the problem shards of one run as Ray tasks, then one merge.

Each Ray task is one `--num-shards N --shard-index I` process: it opens its own engine pair and fills
OUT/shard-I-of-N (solo, or solo + handoff-SCHEDULE) with the same resumable code as a single process.
Finished shards are skipped, a killed shard resumes from its flushed samples, and the merge writes OUT/solo
and OUT/handoff-SCHEDULE (plus the tax), exactly as `tandem-eval merge OUT`. Every sample's randomness
depends only on its seed (run seed, problem id, sample index), so the merged samples equal the
single-process run's.

    tandem-eval handoff --senior CKPT --junior JR --engine vllm --ray-workers 8 --out runs/ckpt    # local Ray
    ray start --head; ray start --address HEAD:6379   # (on each worker node)
    tandem-eval handoff --senior CKPT --junior JR --engine vllm --ray-address HEAD:6379 --out runs/ckpt

    from tandem_eval.generate.distributed import RayPlan, run_on_ray
    folders = run_on_ray(cfg, "runs/ckpt", RayPlan(workers=2))   # {"solo": RunFolder, "handoff-paragraph": ...}

GPUs: a task asks Ray for `tensor_parallel_size` GPUs when the engine is vllm and the cluster has GPUs
(senior and junior share them, as in one process); otherwise for CPUs only. Paths (checkpoints,
benchmark files, OUT) must be visible at the same place on every node (a shared filesystem).
"""

from __future__ import annotations

import dataclasses
import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ..config import EvalConfig
from ..engines import backend
from ..run.results import RunFolder, verify_run
from ..run.runs import shard_dir
from ..schemas import ConfigError
from .plan import handoff_dirname

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RayPlan:
    """Where the shards run: `workers` tasks on a local Ray started here, or on the cluster at `address`."""

    workers: int | None = None  # number of shards; default with an address: the cluster's GPUs (or nodes)
    address: str | None = None  # an existing cluster ("HOST:6379" or "auto"); None starts a local one
    cpus_per_worker: float = 1.0

    def __post_init__(self):
        if self.workers is None and self.address is None:
            raise ConfigError("Ray needs --ray-workers N or --ray-address ADDR")
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--ray-workers must be >= 1, got {self.workers}")


def _kinds(cfg: EvalConfig, solo_run) -> list[str]:
    """The run folders each shard fills."""
    if cfg.mode == "solo":
        return ["solo"]
    return [handoff_dirname(cfg.schedule)] if solo_run is not None else ["solo", handoff_dirname(cfg.schedule)]


def run_shard(cfg: EvalConfig, out_root: str, solo_record: dict | None = None) -> str:
    """One shard in this process (what each Ray task runs): solo, or solo + handoff like the CLI.

    solo_record: the checked --solo-run (see checks.check_solo_reuse); the shard then runs the handoff only."""
    from .execute import run_eval, run_handoff

    root = shard_dir(Path(out_root), cfg.shard_index, cfg.num_shards)
    if cfg.mode == "solo":
        run_eval(cfg, root / "solo", progress=False)
    elif solo_record is not None:  # the tax is computed after the merge against the given solo run
        run_eval(cfg, root / handoff_dirname(cfg.schedule), progress=False, extra={"solo_run": solo_record})
    else:
        run_handoff(cfg, root, progress=False)
    return str(root)


def merge_root(out_root: str | Path, kinds: list[str], num_shards: int, solo_run=None) -> dict[str, RunFolder]:
    """Merge OUT/shard-*-of-N/KIND into OUT/KIND for each kind; a handoff kind gets its tax."""
    from .execute import merge_runs

    parts = [shard_dir(Path(out_root), i, num_shards) for i in range(num_shards)]
    return merge_runs(out_root, parts, kinds, solo_run)


def run_on_ray(
    cfg: EvalConfig, out_root: str | Path, plan: RayPlan, solo_run=None, allow_solo_mismatch: bool = False
) -> dict[str, RunFolder]:
    """Run every unfinished shard of `cfg` as a Ray task, then merge; returns the merged run folders."""
    try:
        import ray
    except ModuleNotFoundError:
        raise ConfigError('--ray-workers/--ray-address need Ray: pip install -e ".[ray]" (ray==2.60.0)') from None
    if cfg.num_shards != 1:
        raise ConfigError("--ray-workers/--ray-address choose the shards themselves; drop --num-shards/--shard-index")
    from .checks import check_solo_reuse
    from .plan import validate

    if plan.address not in (None, "auto"):
        _check_reachable(plan.address)
    checked = validate(cfg)  # the single-process checks, in the driver, before any task starts
    cfg, problems = checked.cfg, checked.problems
    if plan.workers is not None and plan.workers > len(problems):
        raise ConfigError(
            f"--ray-workers {plan.workers} is more than the {len(problems)} problems to evaluate (a shard would be "
            f"empty); pass --ray-workers {len(problems)} or fewer"
        )
    record = None
    if solo_run is not None and cfg.mode == "handoff":
        solo = verify_run(solo_run)
        record = check_solo_reuse(cfg, solo, allow_solo_mismatch, "--solo-run", checked.grader_versions, checked.senior)
    out_root = Path(out_root).resolve()
    kinds = _kinds(cfg, solo_run)
    if plan.workers is not None and not _unfinished(out_root, plan.workers, kinds):
        return merge_root(out_root, kinds, plan.workers, solo_run)  # all shards done: no cluster needed
    started = not ray.is_initialized()
    if started:  # a local cluster sized to the workers, or a connection to an existing one
        if plan.address is None:
            workers = cast(int, plan.workers)  # RayPlan requires workers when there is no address
            ray.init(num_cpus=int(workers * plan.cpus_per_worker), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=plan.address, log_to_driver=False)
    try:
        n = plan.workers or _cluster_workers(ray, cfg)
        if n > len(problems):  # the cluster's default: never more shards than problems
            log.info("ray: %d shards for %d problems (the cluster offers %d workers)", len(problems), len(problems), n)
            n = len(problems)
        todo = _unfinished(out_root, n, kinds)
        log.info("ray: %d shards, %d to run (%d complete)", n, len(todo), n - len(todo))
        task = ray.remote(run_shard).options(num_cpus=plan.cpus_per_worker, num_gpus=_gpus(ray, cfg), max_retries=0)
        refs = [task.remote(dataclasses.replace(cfg, num_shards=n, shard_index=i), str(out_root), record) for i in todo]
        _wait(ray, refs)
    finally:
        if started:
            ray.shutdown()
    return merge_root(out_root, kinds, n, solo_run)


def ray_solo(cfg: EvalConfig, out_root: str | Path, plan: RayPlan) -> RunFolder:
    """`tandem-eval solo` on Ray: the merged OUT/solo run folder."""
    return run_on_ray(cfg, out_root, plan)["solo"]


def ray_handoff(
    cfg: EvalConfig, out_root: str | Path, plan: RayPlan, solo_run=None, allow_solo_mismatch: bool = False
) -> tuple[RunFolder, RunFolder, dict]:
    """`tandem-eval handoff` on Ray: (solo, handoff, tax) like generate.run_handoff."""
    folders = run_on_ray(cfg, out_root, plan, solo_run, allow_solo_mismatch)
    handoff = folders[handoff_dirname(cfg.schedule)]
    solo = folders["solo"] if solo_run is None else verify_run(solo_run)
    return solo, handoff, handoff.metrics()["tax"]


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """An existing cluster's HOST:PORT answers within `timeout` seconds, else one line (ray.init
    would wait for it indefinitely)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--ray-address {address}: expected HOST:PORT (e.g. 10.0.0.1:6379) or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConfigError(
            f"--ray-address {address}: no Ray head answers there within {timeout:g} s ({e.strerror or e}); "
            "start it with `ray start --head` or fix the address"
        ) from None


def _unfinished(out_root: Path, n: int, kinds: list[str]) -> list[int]:
    """Shard indices whose run folders are not all complete."""
    return [i for i in range(n) if not all(RunFolder(shard_dir(out_root, i, n) / k).is_complete() for k in kinds)]


def _gpus(ray, cfg: EvalConfig) -> float:
    has_gpus = ray.cluster_resources().get("GPU", 0) > 0
    return float(cfg.tensor_parallel_size) if backend(cfg.engine).tensor_parallel and has_gpus else 0.0


def _cluster_workers(ray, cfg: EvalConfig) -> int:
    """Default shard count on an existing cluster: one per GPU group, else one per node."""
    gpus = _gpus(ray, cfg)
    if gpus:
        return max(1, int(ray.cluster_resources()["GPU"] // gpus))
    return max(1, sum(1 for node in ray.nodes() if node.get("Alive")))


def _wait(ray, refs: list) -> None:
    """Wait for every task; a task's own error (a user error included) is re-raised as itself."""
    from ray.exceptions import RayTaskError

    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        try:
            log.info("ray: shard done: %s", ray.get(done[0]))
        except RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise
