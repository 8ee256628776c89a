"""`make toy`: the paper's whole experiment in the toy world, from scratch, on two CPU cores.

Stages (each skips what is already done, so an interrupted run resumes):
  1. data      train / test problems (trainer/toy/task.py) as jsonl benchmarks
  2. init      SFT initial checkpoints: self-paired senior (= both scenarios' junior) and jargon senior
  3. train     RL arms grpo, tandem (word schedule), kl-reg x seeds x scenarios with tandem-train
  4. evaluate  every final senior + the initial senior + the junior: solo, paragraph handoff,
               legibility, drift (tandem-eval), into results/toy/<scenario>/<arm>/seed<S>/
  5. tables    results/toy/summary.md + summary.json: mean over seeds with a seeds x problems
               bootstrap CI (tandem_eval.toy.aggregate)
  6. bundle    seed-0 final checkpoints -> tandem_eval/toy/checkpoints/<scenario>/<arm> (toy:NAMES)
  7. report    tandem-eval report results/toy --out results/toy/report

    python -m trainer.toy_world [--scale full|ci] [--results results/toy] [--work runs/toy] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tandem_eval.models import TOY_DIR
from trainer.toy.task import write_benchmark

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = ("self-paired", "jargon")
ARMS = ("grpo", "tandem", "kl-reg")
CKPT_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "tandem_meta.json",
)


@dataclass(frozen=True)
class Scale:
    sft_steps: tuple[int | None, int | None]  # self-paired senior, jargon senior (None: the recipe's)
    rl_steps: int
    prompts_per_step: int
    group_size: int
    lr: float
    seeds: tuple[int, ...]
    n_train: int
    n_test: int
    n_samples: int
    max_new_tokens: int


SCALES = {
    "full": Scale((None, None), 80, 8, 8, 5e-5, (0, 1, 2), 4000, 100, 4, 256),
    "ci": Scale((4, 2), 1, 2, 2, 5e-5, (0,), 40, 3, 2, 48),
}


def log(msg: str) -> None:
    print(f"[toy {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd: list[str], logfile: Path | None = None) -> None:
    """One stage command in a fresh process (1 torch thread: jobs share two cores)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    if logfile:
        logfile.parent.mkdir(parents=True, exist_ok=True)
    out = open(logfile, "a") if logfile else None
    try:
        res = subprocess.run(
            [sys.executable, *cmd],
            cwd=REPO,
            env=env,
            stdout=out or subprocess.DEVNULL,
            stderr=subprocess.STDOUT if out else subprocess.PIPE,
            text=True,
        )
    finally:
        if out:
            out.close()
    if res.returncode:
        detail = res.stderr[-2000:] if res.stderr else f"see {logfile}"
        raise RuntimeError(f"failed: {' '.join(cmd)}\n{detail}")


def stage_data(work: Path, s: Scale) -> dict[str, Path]:
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    paths = {"train": data / "train.jsonl", "test": data / "test.jsonl"}
    if not paths["train"].exists():  # seeds differ from SFT's (0, 1000) so RL sees fresh problems
        write_benchmark(paths["train"], "train", s.n_train, seed=2000)
    if not paths["test"].exists():
        write_benchmark(paths["test"], "test", s.n_test, seed=0)
    return paths


def stage_init(work: Path, s: Scale) -> dict[str, dict[str, Path]]:
    init = work / "init"
    base, jargon = init / "self-paired" / "senior", init / "jargon" / "senior"
    steps = [[] if n is None else ["--steps", str(n)] for n in s.sft_steps]
    if not (base / "config.json").exists():
        log("SFT: self-paired senior")
        run(
            [
                "-m",
                "trainer.toy.sft",
                "--scenario",
                "self-paired",
                "--role",
                "senior",
                "--out",
                str(base),
                *steps[0],
            ],
            work / "logs" / "sft.log",
        )
    if not (jargon / "config.json").exists():
        log("SFT: jargon senior (continues from the self-paired senior)")
        run(
            [
                "-m",
                "trainer.toy.sft",
                "--scenario",
                "jargon",
                "--role",
                "senior",
                "--out",
                str(jargon),
                "--init-from",
                str(base),
                *steps[1],
            ],
            work / "logs" / "sft.log",
        )
    # The junior of both scenarios is the plain-only self-paired initial senior.
    return {sc: {"senior": init / sc / "senior", "junior": base} for sc in SCENARIOS}


def final_checkpoint(out: Path, steps: int) -> Path | None:
    for ck in sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]), reverse=True):
        meta = ck / "tandem_meta.json"
        if meta.exists() and json.loads(meta.read_text()).get("step") == steps:
            return ck
    return None


def train_job(work: Path, data: dict, init: dict, s: Scale, sc: str, arm: str, seed: int) -> Path:
    out = work / "train" / sc / arm / f"seed{seed}"
    ck = final_checkpoint(out, s.rl_steps)
    if ck is None:
        log(f"RL {sc}/{arm}/seed{seed}")
        sets = [
            f"senior={init[sc]['senior']}",
            f"junior={init[sc]['junior']}",
            f"train_data={data['train']}",
            f"steps={s.rl_steps}",
            f"prompts_per_step={s.prompts_per_step}",
            f"group_size={s.group_size}",
            f"micro_batch={s.group_size}",
            f"rollout_batch={s.prompts_per_step * s.group_size}",
            f"lr={s.lr}",
            "temperature=1.0",
            f"max_new_tokens={s.max_new_tokens}",
            "max_context=512",
            f"seed={seed}",
            f"output_dir={out}",
            f"save_every={s.rl_steps}",
            "eval.every=0",
            "kl_ref=junior",  # the toy world's kl-reg arm regularises toward the junior (README: toy world)
        ]
        out.mkdir(parents=True, exist_ok=True)
        run(
            [
                "-m",
                "trainer",
                "--recipe",
                str(REPO / "trainer" / "recipes" / f"cpu-{arm}.yaml"),
                "--resume",
                "auto",
                "--set",
                *sets,
            ],
            out / "train.out",
        )
        ck = final_checkpoint(out, s.rl_steps)
        if ck is None:
            raise RuntimeError(f"training {out} finished without a step-{s.rl_steps} checkpoint")
    return ck


def eval_job(results: Path, data: dict, s: Scale, sc: str, arm: str, seed: int, senior: Path, junior: Path) -> None:
    out = results / sc / arm / f"seed{seed}"
    solo = out / "solo"
    if (out / "DONE").exists():
        return
    log(f"evaluate {sc}/{arm}/seed{seed}")
    ks = ",".join(str(k) for k in (1, 2, 4) if k <= s.n_samples)
    common = [
        "--benchmark",
        str(data["test"]),
        "--n",
        str(s.n_samples),
        "--k",
        ks,
        "--max-new-tokens",
        str(s.max_new_tokens),
        "--max-context",
        "512",
        "-q",
    ]
    label = f"{sc}/{arm}/s{seed}"
    logf = out / "eval.log"
    out.mkdir(parents=True, exist_ok=True)
    if arm == "junior":  # the junior alone: its solo accuracy is the floor the seniors must beat
        run(
            ["-m", "tandem_eval.cli", "solo", "--senior", str(senior), "--out", str(out), "--label", label, *common],
            logf,
        )
    else:
        run(
            [
                "-m",
                "tandem_eval.cli",
                "handoff",
                "--senior",
                str(senior),
                "--junior",
                str(junior),
                "--out",
                str(out),
                "--label",
                label,
                *common,
            ],
            logf,
        )
        for lens in ("legibility", "drift"):
            run(
                [
                    "-m",
                    "tandem_eval.cli",
                    lens,
                    "--senior",
                    str(senior),
                    "--junior",
                    str(junior),
                    "--run",
                    str(solo),
                    "--n-boot",
                    "200",
                ],
                logf,
            )
    (out / "DONE").write_text(str(senior) + "\n")


def stage_train_and_eval(work: Path, results: Path, data: dict, init: dict, s: Scale, jobs: int) -> dict:
    """RL runs, then their evaluations, `jobs` processes at a time; returns final checkpoints."""
    keys = [(sc, arm, seed) for sc in SCENARIOS for arm in ARMS for seed in s.seeds]
    with ThreadPoolExecutor(jobs) as pool:
        finals = dict(zip(keys, pool.map(lambda k: train_job(work, data, init, s, *k), keys)))
        evals = [(sc, arm, seed, finals[(sc, arm, seed)]) for sc, arm, seed in keys]
        evals += [(sc, "init", 0, init[sc]["senior"]) for sc in SCENARIOS]
        evals += [(sc, "junior", 0, init[sc]["junior"]) for sc in SCENARIOS]
        list(pool.map(lambda e: eval_job(results, data, s, e[0], e[1], e[2], e[3], init[e[0]]["junior"]), evals))
    for (sc, arm, seed), ck in finals.items():  # training curves travel with the results
        log_src, dst = ck.parent / "train_log.jsonl", results / sc / arm / f"seed{seed}" / "train"
        if log_src.exists():  # a sibling of the run folders: they are final evaluations, not step evals
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copy(log_src, dst / "train_log.jsonl")
            (dst / "tandem_meta.json").write_text(json.dumps({"arm": f"{sc}/{arm}/s{seed}"}) + "\n")
    return finals


def stage_bundle(finals: dict, init: dict, data: dict, dest: Path = TOY_DIR) -> None:
    """Seed-0 final checkpoints (weights, tokenizer, metadata only) as toy:<scenario>/<arm>, plus the
    test problems (tandem_eval/toy/data/test.jsonl, the demo's benchmark)."""
    (dest.parent / "data").mkdir(parents=True, exist_ok=True)
    shutil.copy(data["test"], dest.parent / "data" / "test.jsonl")
    picks = {(sc, "junior"): init[sc]["junior"] for sc in SCENARIOS}
    picks.update({(sc, "init"): init[sc]["senior"] for sc in SCENARIOS})
    picks.update({(sc, arm): ck for (sc, arm, seed), ck in finals.items() if seed == 0})
    for (sc, name), src in picks.items():
        dst = dest / sc / name
        dst.mkdir(parents=True, exist_ok=True)
        for f in CKPT_FILES:
            if (src / f).exists():
                shutil.copy(src / f, dst / f)
        meta = json.loads((src / "tandem_meta.json").read_text()) if (src / "tandem_meta.json").exists() else {}
        meta.update({"junior": f"toy:{sc}/junior", "scenario": sc, "arm": meta.get("arm", name)})
        (dst / "tandem_meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=list(SCALES), default="full")
    ap.add_argument("--results", type=Path, default=REPO / "results" / "toy")
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "toy")
    ap.add_argument("--jobs", type=int, default=2, help="processes at a time (1 torch thread each)")
    ap.add_argument("--no-bundle", action="store_true", help="do not refresh tandem_eval/toy/checkpoints")
    args = ap.parse_args(argv)
    s, t0 = SCALES[args.scale], time.time()
    data = stage_data(args.work, s)
    init = stage_init(args.work, s)
    finals = stage_train_and_eval(args.work, args.results, data, init, s, args.jobs)
    from tandem_eval.toy.aggregate import write_summary

    write_summary(args.results, SCENARIOS, ("junior", "init", *ARMS))
    if not args.no_bundle:
        stage_bundle(finals, init, data)
    run(
        ["-m", "tandem_eval.cli", "report", str(args.results), "--out", str(args.results / "report")],
        args.work / "logs" / "report.log",
    )
    log(f"done in {(time.time() - t0) / 60:.1f} min: {args.results}")


if __name__ == "__main__":
    main()
