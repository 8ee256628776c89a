"""`make toy`: the paper's whole experiment in the toy world, from scratch, on two CPU cores.

Stages (each skips what is already done, so an interrupted run resumes):
  1. data      train / held-out / test problems (trainer/toy/task.py) as jsonl benchmarks; the
               emergent scenario's are 2-step problems (DIFFICULTIES), the others' 2-4 steps
  2. init      SFT: the plain base senior, then from it the emergent senior (30% of steps terse),
               the self-paired senior (shortcut mix) -- each also its own junior -- and the jargon
               senior (the jargon junior is the base)
  3. held-out the initial seniors' held-out solo pass@k (step 0 of the learning curves)
  4. lr check  grpo and tandem, emergent, seed 0, a short run per learning rate; each arm takes the lr
               whose run ends with the best held-out solo pass@4 (grpo-g16 and kl-reg take grpo's)
               -> results/toy/lr_sweep.json
  5. train     RL arms grpo, tandem (word schedule), grpo-g16 (16 rollouts per prompt, tandem's
               compute) and kl-reg@COEF (k3 KL toward the senior's initial checkpoint) x seeds x
               scenarios with tandem-train, the paper's recipe shape (rollout T 0.6, constant lr);
               held-out solo pass@k every `heldout_every` steps: the curves, and the checkpoint each
               arm keeps by the same rule (selected_checkpoint: best held-out solo pass@4)
  6. evaluate  every selected senior, and the initial senior and the junior on every seed: solo,
               paragraph handoff, legibility, drift (tandem-eval) into
               results/toy/<scenario>/<arm>/seed<S>/, seed by seed. Seed S is evaluated with run seed
               eval_seed(S): every seed-run its own sampling seeds, and all arms of one seed the same
               ones (common random numbers for the paired comparisons)
  7. tables    results/toy/summary.json (+ summary.md, figures, the toy-summary block of docs/toy-world.md), with the
               precondition and verdicts: trainer/toy/summary.py
  8. bundle    seed-0 selected checkpoints (BUNDLE) -> tandem_eval/toy/checkpoints/<scenario>/<arm>
  9. report    tandem-eval report results/toy --out results/toy/report

    python -m trainer.toy.world [--scale full|controls|ci] [--results results/toy] [--work runs/toy] [--jobs 2]
                                [--readme docs/toy-world.md] [--no-bundle]
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
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from tandem_eval.files import atomic_write_json, atomic_write_parquet
from tandem_eval.models import TOY_DIR
from tandem_eval.schemas import RunFolderError, to_jsonable
from trainer.toy.aggregate import SCENARIOS
from trainer.toy.dialects import shares, training_dialects
from trainer.toy.gates import EVIDENCE, G0_EVIDENCE, GATED
from trainer.toy.scales import DIFFICULTIES, SCALES, Scale, arm_order, eval_seed, kl_coef, kl_ref
from trainer.toy.task import Difficulty, write_benchmark

REPO = Path(__file__).resolve().parents[2]
CKPT_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "tandem_meta.json",
)


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


def stage_data(work: Path, s: Scale) -> dict[str, dict[str, Path]]:
    """The problem sets of each scenario {scenario: {split: path}}: data/<split>.jsonl for the default
    mix, data/<scenario>/<split>.jsonl for a scenario of DIFFICULTIES."""
    sizes = {"train": (s.n_train, 2000), "heldout": (s.n_heldout, 0), "test": (s.n_test, 0)}
    out = {}
    for sc in s.scenarios:
        folder = work / "data" / sc if sc in DIFFICULTIES else work / "data"
        out[sc] = {split: folder / f"{split}.jsonl" for split in sizes}
        for split, path in out[sc].items():  # RL's seed differs from SFT's (0, 1000): RL sees fresh problems
            if not path.exists():
                n, seed = sizes[split]
                write_benchmark(path, split, n, seed=seed, difficulty=DIFFICULTIES.get(sc, Difficulty()))
    return out


def _sft(out: Path, scenario: str, steps: int | None, work: Path, init_from: Path | None = None, **kw) -> None:
    """One SFT run (trainer.toy.sft) unless its checkpoint exists; `role` (default senior) and `seed` (0)."""
    if (out / "config.json").exists():
        return
    role, seed = kw.get("role", "senior"), kw.get("seed", 0)
    log(f"SFT: {scenario} {role}" + (f" (continues {init_from.name})" if init_from else ""))
    cmd = ["-m", "trainer.toy.sft", "--scenario", scenario, "--role", role, "--out", str(out), "--seed", str(seed)]
    cmd += ["--init-from", str(init_from)] if init_from else []
    cmd += ["--steps", str(steps)] if steps else []
    run(cmd, work / "logs" / "sft.log")


def stage_init(work: Path, s: Scale) -> dict[str, dict[str, Path]]:
    """Initial checkpoints: {scenario: {"senior": path, "junior": path}}."""
    init = work / "init"
    base = init / "base"
    _sft(base, "base", s.sft("base"), work)
    for scenario in s.scenarios:
        if scenario == "dialects":  # the junior continues the base; the initial senior continues the junior
            junior = init / scenario / "junior"
            _sft(junior, scenario, s.sft(f"{scenario}/junior"), work, init_from=base, role="junior")
            # seed 1: other training problems and style draws than the junior's (trainer.toy.sft's data seed)
            _sft(init / scenario / "senior", scenario, s.sft(f"{scenario}/senior"), work, init_from=junior, seed=1)
        else:
            _sft(init / scenario / "senior", scenario, s.sft(scenario), work, init_from=base)
    # self-paired and emergent: the junior IS the senior's initial checkpoint; jargon: the plain base;
    # dialects: its own junior (the initial senior's parent)
    pairs = {sc: {"senior": init / sc / "senior", "junior": init / sc / "senior"} for sc in SCENARIOS}
    pairs["jargon"]["junior"] = base
    pairs["dialects"]["junior"] = init / "dialects" / "junior"
    return {sc: pair for sc, pair in pairs.items() if sc in s.scenarios}


def checkpoints(out: Path) -> dict[int, Path]:
    """{step: checkpoint folder} of a training run's finished checkpoints."""
    found = {}
    for ck in out.glob("checkpoint-*"):
        meta = ck / "tandem_meta.json"
        if meta.exists():
            found[int(json.loads(meta.read_text())["step"])] = ck
    return dict(sorted(found.items()))


def final_checkpoint(out: Path, steps: int) -> Path | None:
    return checkpoints(out).get(steps)


SELECT_K = 4  # the paper keeps the checkpoint with the best held-out solo pass@4 (aggregate.heldout_score)


def selected_checkpoint(out: Path, steps: int, keep: str = "best") -> tuple[Path, int]:
    """The rule every arm's checkpoint is chosen by (the paper's): the best held-out solo pass@SELECT_K
    (pass@1 where the held-out n is smaller) among the run's evaluated checkpoints; a tie goes to the
    later step (more training at the same held-out score). keep="final": the last step's (the v2
    controls' rule). (checkpoint, step)."""
    from trainer.toy.training import heldout_score, read_jsonl

    cks, best = checkpoints(out), None
    if keep == "final":
        return cks[steps], steps
    for rec in read_jsonl(out / "eval_log.jsonl"):
        score, step = heldout_score(rec), int(rec["step"])
        if score is not None and step in cks and (best is None or (score, step) >= best):
            best = (score, step)
    step = best[1] if best else steps
    return cks[step], step


@dataclass(frozen=True)
class RLJob:
    """One RL run's settings: its scenario, arm and seed, the learning rate, the steps, and how often it
    saves a checkpoint and evaluates the held-out set."""

    scenario: str
    arm: str
    seed: int
    lr: float
    steps: int
    every: int
    heldout_modes: tuple[str, ...] = ("solo",)  # the G1 pilot adds handoff: the held-out tax along training


def train_job(out: Path, data: dict, pair: dict, s: Scale, job: RLJob) -> Path:
    """One RL run (resumable); its final checkpoint."""
    sc, arm, seed, lr, steps, every = job.scenario, job.arm, job.seed, job.lr, job.steps, job.every
    ck = final_checkpoint(out, steps)
    if ck is not None:
        return ck
    log(f"RL {out.relative_to(out.parents[3])} (lr {lr:g}, {steps} steps)")
    coef = kl_coef(arm)
    budget = s.budget(sc)
    group = 2 * s.group_size if arm == "grpo-g16" else s.group_size  # compute-matched: 2x the rollouts
    sets = [
        f"senior={pair['senior']}",
        f"junior={pair['junior']}",
        f"train_data={data[sc]['train']}",
        f"steps={steps}",
        f"prompts_per_step={s.prompts_per_step}",
        f"group_size={group}",
        f"micro_batch={s.group_size}",
        f"rollout_batch={s.prompts_per_step * group}",
        f"lr={lr}",
        f"max_new_tokens={budget}",
        "max_context=512",
        f"seed={seed}",
        f"output_dir={out}",
        f"save_every={every}",
        # held-out solo pass@k along the run: the learning curve (eval_log.jsonl) and the checkpoint choice
        f"eval.every={every}",
        f"eval.benchmarks=[{data[sc]['heldout']}]",
        f"eval.modes=[{','.join(job.heldout_modes)}]",
        f"eval.n={s.heldout_n}",
        f"eval.limit={s.n_heldout}",
        f"eval.ks=[{heldout_ks(s)}]",
        f"eval.max_new_tokens={budget}",
        "eval.max_context=512",
        "eval.batch_size=256",
    ]
    if coef is not None:  # k3 KL toward the arm's reference (kl-reg@C, v3's arms: the initial senior)
        sets += [f"beta={coef}", f"kl_ref={kl_ref(arm)}"]
    if sc in GATED:  # the rollouts' texts by author and rewards: who chose step 1's dialect (trainer.toy.dialects)
        sets += ["log_rollouts=true"]
    sets += list(s.recipe_sets)  # a scale's own settings (the v2 controls': temperature 1.0, linear lr decay)
    out.mkdir(parents=True, exist_ok=True)
    recipe = REPO / "trainer" / "recipes" / f"cpu-{'kl-reg' if coef is not None else arm}.yaml"
    run(["-m", "trainer", "--recipe", str(recipe), "--resume", "auto", "--set", *sets], out / "train.out")
    ck = final_checkpoint(out, steps)
    if ck is None:
        raise RuntimeError(f"training {out} finished without a step-{steps} checkpoint")
    return ck


def heldout_ks(s: Scale) -> str:
    """The held-out pass@k values: 1 and the selection rule's SELECT_K (as far as heldout_n allows)."""
    return ",".join(str(k) for k in sorted({1, min(SELECT_K, s.heldout_n)}))


def budget_args(s: Scale, scenario: str) -> list[str]:
    """tandem-eval options every toy evaluation of a scenario shares (token budget, batch, quiet)."""
    return ["--max-new-tokens", str(s.budget(scenario)), "--max-context", "512", "--batch-size", "1024", "-q"]


def eval_job(results: Path, data: dict, s: Scale, sc: str, arm: str, seed: int, senior: Path, junior: Path) -> None:
    out = results / sc / arm / f"seed{seed}"
    if (out / "DONE").exists():
        return
    log(f"evaluate {sc}/{arm}/seed{seed}")
    ks = ",".join(str(k) for k in (1, 2, 4, 8) if k <= s.n_samples)
    common = ["--benchmark", str(data[sc]["test"]), "--n", str(s.n_samples), "--k", ks, "--seed", str(eval_seed(seed))]
    common += budget_args(s, sc)
    if sc in dict(s.eval_limits):
        common += ["--limit", str(dict(s.eval_limits)[sc])]
    label = f"{sc}/{arm}/s{seed}"
    logf = out / "eval.log"
    out.mkdir(parents=True, exist_ok=True)
    if arm == "junior":  # the junior alone: its solo accuracy is the floor the seniors must beat
        cmd = ["-m", "tandem_eval.cli", "solo", "--senior", str(senior), "--out", str(out), "--label", label]
        run([*cmd, *common], logf)
    else:
        cmd = ["-m", "tandem_eval.cli", "handoff", "--senior", str(senior), "--junior", str(junior)]
        run([*cmd, "--out", str(out), "--label", label, *common], logf)
        for lens in ("legibility", "drift"):
            run(
                ["-m", "tandem_eval.cli", lens, "--senior", str(senior), "--junior", str(junior)]
                + ["--run", str(out / "solo"), "--n-boot", "200"],
                logf,
            )
    (out / "DONE").write_text(str(senior) + "\n")


SWEEP_ARMS = ("grpo", "tandem")  # the lr check: each picks its own lr; grpo-g16 and kl-reg take grpo's


def sweep_lr(s: Scale, chosen: dict[str, float], arm: str) -> float:
    return chosen.get(arm if arm in SWEEP_ARMS else "grpo", s.lr)


def stage_train_and_eval(work: Path, results: Path, data: dict, init: dict, s: Scale, jobs: int) -> dict:
    """The lr check, then the RL runs, then their evaluations, `jobs` processes at a time; writes
    results/lr_sweep.json and returns the selected checkpoints of the arms {(sc, arm, seed): path}."""
    from trainer.toy.training import choose_lr, write_lr_sweep

    sc0 = s.scenarios[0]  # the lr check runs in the first scenario (emergent), seed 0
    keys = [(sc, arm, seed) for sc in s.scenarios for arm in s.arms(sc) for seed in s.seeds_of(arm)]
    sweep = {(arm, lr): work / "lr-sweep" / arm / f"lr{lr:g}" / "seed0" for arm in SWEEP_ARMS for lr in s.lr_sweep}

    def train_sweep(key):
        arm, lr = key
        return train_job(sweep[key], data, init[sc0], s, RLJob(sc0, arm, 0, lr, s.sweep_steps, s.sweep_steps))

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(train_sweep, sweep))
        chosen = choose_lr(sweep) if sweep else {}  # no lr check (the controls): every arm trains at s.lr
        if sweep:
            write_lr_sweep(results, sweep, chosen, scenario=sc0)

        def train(key):
            sc, arm, seed = key
            out = work / "train" / sc / arm / f"seed{seed}"
            job = RLJob(sc, arm, seed, sweep_lr(s, chosen, arm), s.rl_steps, s.heldout_every)
            train_job(out, data, init[sc], s, job)
            return selected_checkpoint(out, s.rl_steps, s.keep)[0]

        # the self-paired and emergent juniors are the initial seniors themselves: their solo runs are init's
        untrained = [(sc, "init", init[sc]["senior"]) for sc in s.scenarios]
        untrained += [(sc, "junior", init[sc]["junior"]) for sc in s.scenarios if sc in OWN_JUNIOR]

        def task(t):  # an RL arm: train, pick its checkpoint, evaluate; an untrained arm: evaluate
            sc, arm, seed, ck = t
            if ck is None:
                ck = train((sc, arm, seed))
            eval_job(results, data, s, sc, arm, seed, ck, init[sc]["junior"])
            return ck

        # seed by seed (every seed of the untrained arms beside the RL arms' same seed: differences pair on
        # every seed), each arm-seed evaluated as soon as it is trained: an interrupted run has whole seeds.
        # The pre-stated cut: grpo and tandem (and the untrained arms) on every seed first, then the arms with
        # fewer seeds (kl, g16) seed by seed, so a run that cannot finish loses their last seeds first.
        tasks = [(sc, arm, seed, ck) for seed in (s.untrained_seeds or s.seeds) for sc, arm, ck in untrained]
        tasks += [(sc, arm, seed, None) for sc, arm, seed in keys]
        tasks.sort(key=lambda t: (s.seeds_of(t[1]) != s.seeds, t[2], t[3] is None, arm_order(t[1])))
        done = dict(zip(tasks, pool.map(task, tasks)))
        picks = {(sc, arm, seed): ck for (sc, arm, seed, c), ck in done.items() if c is None}
    copy_training_logs(results, picks, s)
    return picks


def copy_training_logs(results: Path, picks: dict, s: Scale) -> None:
    """Training and held-out curves travel with the results: results/<sc>/<arm>/seed<S>/train/."""
    for (sc, arm, seed), ck in picks.items():
        dst = results / sc / arm / f"seed{seed}" / "train"
        dst.mkdir(parents=True, exist_ok=True)  # a sibling of the run folders: not final evaluations
        for name in ("train_log.jsonl", "eval_log.jsonl"):
            if (ck.parent / name).exists():
                shutil.copy(ck.parent / name, dst / name)
        meta = {"arm": f"{sc}/{arm}/s{seed}", "selected_step": selected_checkpoint(ck.parent, s.rl_steps, s.keep)[1]}
        if kl_ref(arm):  # the KL reference as the checkpoint records it (its recipe's kl_ref, resolved)
            ck_meta = json.loads((ck / "tandem_meta.json").read_text())
            meta["kl_ref"] = {"choice": ck_meta["recipe"]["kl_ref"], "checkpoint": ck_meta["kl_ref"]}
        (dst / "tandem_meta.json").write_text(json.dumps(meta) + "\n")
        if sc in GATED:  # dialect shares along training, who chose step 1's dialect (trainer.toy.dialects)
            atomic_write_json(dst / "dialects.json", to_jsonable(training_dialects(ck.parent)))


class GateFailed(RuntimeError):
    """A gate of a gated scenario failed: its full run does not start (the gate is recorded)."""


def record_gate(results: Path, sc: str, name: str, gate: dict, s: Scale) -> None:
    """Merge a gate into results/<sc>/gates.json, print it PASS/FAIL, and stop the run when it failed
    (unless the scale only records gates)."""
    from trainer.toy.gates import print_gate

    path = results / sc / "gates.json"
    gates = json.loads(path.read_text()) if path.exists() else {}
    if gates.get(name) != gate:
        gates[name] = gate
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, gates)
    print_gate(f"{sc} {name}", gate)
    if not gate["pass"] and s.enforce_gates:
        raise GateFailed(f"gate {name} of the {sc} scenario failed ({path}): its full run does not start")


def stage_g0(work: Path, results: Path, init: dict, s: Scale) -> None:
    """G0 of each gated scenario: its initial senior and junior after SFT (trainer.toy.gates g0)."""
    for sc in (sc for sc in s.scenarios if sc in GATED):
        out = work / "gates" / sc / "G0.json"
        if not out.exists():
            log(f"G0: the {sc} initial senior and junior on the held-out split")
            pair = ["--senior", str(init[sc]["senior"]), "--junior", str(init[sc]["junior"])]
            size = ["--budget", str(s.budget(sc)), "--problems", str(s.gate_problems), "--out", str(out)]
            keep = ["--samples", str(out.with_name("G0-samples.parquet"))]
            run(["-m", "trainer.toy.gates", "g0", *pair, *size, *keep], work / "logs" / "gates.log")
        keep_evidence(results / sc, {G0_EVIDENCE: out.with_name("G0-samples.parquet")})
        record_gate(results, sc, "G0", json.loads(out.read_text()), s)


def keep_evidence(scenario_dir: Path, files: dict[str, Path]) -> None:
    """Copy each gate's raw evidence into the committed results (scenario_dir/NAME, NAME under gates.EVIDENCE),
    so a reader recomputes every gate figure from samples, not from the gate's JSON alone."""
    for name, src in files.items():
        if src.exists():
            (scenario_dir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, scenario_dir / name)


def pilot_evidence(runs: dict[str, list[Path]], into: Path) -> dict[str, Path]:
    """The G1 pilot's evidence as two parquet tables under `into`: every held-out sample its runs evaluated
    (evals/step-N/ and heldout-handoff/step-N/ run folders: arm, seed, step, source, mode and the samples'
    columns) and every logged rollout (rollouts.jsonl: reward and text by author). The checkpoints stay in
    work/ (2.4 MB each); these tables hold what G1's shares, pass@k and plateau were computed from."""
    samples, rollouts = [], []
    for arm, dirs in runs.items():
        for d in dirs:
            seed = int(d.name.removeprefix("seed"))
            for source in ("evals", "heldout-handoff"):
                for path in sorted((d / source).glob("step-*/*/samples.parquet")):
                    step = int(path.parent.parent.name.removeprefix("step-"))
                    df = pd.read_parquet(path)
                    samples.append(df.assign(arm=arm, seed=seed, step=step, source=source, run=path.parent.name))
            if (d / "rollouts.jsonl").exists():  # segments: [[author, text], ...] kept as its JSON text
                df = pd.read_json(d / "rollouts.jsonl", lines=True)
                rollouts.append(df.assign(arm=arm, seed=seed, segments=df["segments"].map(json.dumps)))
    out = {}
    for name, parts in (("pilot-heldout-samples.parquet", samples), ("pilot-rollouts.parquet", rollouts)):
        if parts:
            atomic_write_parquet(into / name, pd.concat(parts, ignore_index=True))
            out[f"{EVIDENCE}/{name}"] = into / name
    return out


def stage_headroom(results: Path, s: Scale) -> None:
    """H of each gated scenario (trainer.toy.gates.headroom), before any pilot: from G0's numbers and the
    initial senior's held-out handoff record, both already under results/<scenario>/."""
    from trainer.toy.gates import headroom_of

    for sc in (sc for sc in s.scenarios if sc in GATED):
        record_gate(results, sc, "H", headroom_of(results / sc), s)


PILOT_ARMS = ("grpo", "tandem")
OWN_JUNIOR = ("jargon", "dialects")  # scenarios whose junior is not the initial senior: evaluated alone too


def stage_pilot(work: Path, results: Path, data: dict, init: dict, s: Scale, jobs: int) -> Scale:
    """G1 of each gated scenario: grpo and tandem on the pilot seeds at the full run's settings, held-out solo
    every heldout_every steps until GRPO's plateau (or pilot_steps), then GRPO's held-out handoff there; the
    runs stay under work/pilot/ (never results). Returns the scale with rl_steps = GRPO's plateau step (G1),
    the full run's step count."""
    from trainer.toy.gates import g1, heldout_curve, plateau_step

    full = s
    for sc in (sc for sc in s.scenarios if sc in GATED):
        out = work / "gates" / sc / "G1.json"
        runs = {arm: [work / "pilot" / sc / arm / f"seed{seed}" for seed in s.pilot_seeds] for arm in PILOT_ARMS}
        if not out.exists():
            log(f"G1: the {sc} pilot, {', '.join(PILOT_ARMS)} x seeds {', '.join(map(str, s.pilot_seeds))}")

            def train(job):
                sc, arm, seed, path, steps = job
                train_job(path, data, init[sc], s, RLJob(sc, arm, seed, s.lr, steps, s.heldout_every))

            # every run one held-out interval at a time (each resumes from its last checkpoint), until GRPO's
            # plateau shows or the horizon ends: the pilot trains no step its gate does not read
            horizon = s.pilot_steps or s.rl_steps
            for steps in sorted({*range(s.heldout_every, horizon + 1, s.heldout_every), horizon}):
                todo = [(sc, arm, sd, p, steps) for arm, paths in runs.items() for sd, p in zip(s.pilot_seeds, paths)]
                with ThreadPoolExecutor(jobs) as pool:
                    list(pool.map(train, todo))
                if plateau_step([heldout_curve(d) for d in runs["grpo"]])[0] is not None:
                    break
            # GRPO's held-out handoff at the step G1 reads (the initial senior's held-out run's settings and seed)
            at = plateau_step([heldout_curve(d) for d in runs["grpo"]])[0] or steps
            with ThreadPoolExecutor(jobs) as pool:
                list(pool.map(heldout_handoff, *zip(*[(work, data, init, s, sc, d, at) for d in runs["grpo"]])))
            atomic_write_json(out, to_jsonable(g1(runs, work / "heldout" / sc / "init")))
        keep_evidence(results / sc, pilot_evidence(runs, work / "gates" / sc))
        gate = json.loads(out.read_text())
        record_gate(results, sc, "G1", gate, s)
        if gate["numbers"]["steps"]:
            log(f"{sc}: the full run trains {gate['numbers']['steps']} steps (GRPO's plateau in the pilot)")
            full = replace(full, rl_steps=int(gate["numbers"]["steps"]))
    return full


def heldout_args(s: Scale, data: dict, sc: str) -> list[str]:
    """tandem-eval options of a held-out evaluation outside training (the initial senior's, the pilot's
    handoff): the hook's problems, samples and k, evaluation seed 0 (common random numbers across them)."""
    return (
        ["--benchmark", str(data[sc]["heldout"]), "--n", str(s.heldout_n), "--k", heldout_ks(s), "--seed", "0"]
        + ["--limit", str(s.n_heldout)]
        + budget_args(s, sc)
    )


def heldout_handoff(work: Path, data: dict, init: dict, s: Scale, sc: str, run_dir: Path, step: int) -> None:
    """A pilot run's held-out solo and paragraph handoff at `step`: run_dir/heldout-handoff/step-NNNNNN/."""
    out = run_dir / "heldout-handoff" / f"step-{step:06d}"
    if (out / "handoff-paragraph" / "COMPLETE").exists():
        return
    log(f"held-out handoff of {run_dir.relative_to(work)} at step {step}")
    ck = checkpoints(run_dir)[step]
    cmd = ["-m", "tandem_eval.cli", "handoff", "--senior", str(ck), "--junior", str(init[sc]["junior"])]
    run([*cmd, "--out", str(out), *heldout_args(s, data, sc)], work / "logs" / "heldout.log")


def stage_heldout_init(work: Path, results: Path, data: dict, init: dict, s: Scale) -> None:
    """Held-out solo pass@k of each initial senior, step 0 of the learning curves: a run folder under
    `work` and its pass@k record in results/<scenario>/init/heldout.jsonl (eval_log.jsonl's format). A gated
    scenario's is a handoff run (solo and handoff): G1 compares GRPO's held-out tax with the initial senior's."""
    for sc in s.scenarios:
        record = results / sc / "init" / "heldout.jsonl"
        if record.exists():
            continue
        log(f"held-out evaluation of the {sc} initial senior")
        out = work / "heldout" / sc / "init"
        mode = ["handoff", "--junior", str(init[sc]["junior"])] if sc in GATED else ["solo"]
        run(
            ["-m", "tandem_eval.cli", *mode, "--senior", str(init[sc]["senior"]), "--out", str(out)]
            + heldout_args(s, data, sc),
            work / "logs" / "heldout.log",
        )
        rec = {"step": 0, "checkpoint": str(init[sc]["senior"])}
        for key, folder in (("solo", "solo"), ("handoff", "handoff-paragraph")):
            if (out / folder / "metrics.json").exists():
                rec[key] = json.loads((out / folder / "metrics.json").read_text())["pass_at_k"]
        if sc in GATED:  # step 0 of the dialect shares along training
            rec["dialects"] = shares(pd.read_parquet(out / "solo" / "samples.parquet", columns=["text"])["text"])
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(rec) + "\n")


# What is bundled (2.4 MB a checkpoint, <= 30 MB in all): of the dialects scenario (v4) the junior, the
# initial senior, grpo and tandem; of emergent (v3) the junior (= its initial senior, one copy), grpo and
# tandem; of jargon the junior, grpo and tandem; of the self-paired negative control the pair the demo
# evaluates (toy:tandem = toy:self-paired/tandem). The kl arms are not bundled (their run folders are).
BUNDLE = {
    "dialects": ("junior", "init", "grpo", "tandem"),
    "emergent": ("junior", "grpo", "tandem"),
    "jargon": ("junior", "grpo", "tandem"),
    "self-paired": ("junior", "tandem"),
}


def stage_bundle(picks_: dict, init: dict, data: dict, s: Scale, dest: Path = TOY_DIR) -> None:
    """Seed-0 selected checkpoints (weights, tokenizer, metadata only) as toy:<scenario>/<arm> (the arms
    of BUNDLE), plus the test problems (tandem_eval/toy/data/test.jsonl, the demo's benchmark). A kl arm,
    where BUNDLE names one, is bundled once, at its middle coefficient, as toy:<scenario>/<kind>."""
    (dest.parent / "data").mkdir(parents=True, exist_ok=True)
    default = next((d for sc, d in data.items() if sc not in DIFFICULTIES), None)  # the demo's: the default mix
    if default is not None:
        shutil.copy(default["test"], dest.parent / "data" / "test.jsonl")
    picks = {(sc, "junior"): init[sc]["junior"] for sc in init}
    picks.update({(sc, "init"): init[sc]["senior"] for sc in init})
    for (sc, arm, seed), ck in picks_.items():
        coefs = dict(s.kl_coefs).get(sc, ())
        if seed == 0 and (kl_coef(arm) is None or kl_coef(arm) == coefs[len(coefs) // 2]):
            picks[(sc, arm.split("@")[0])] = ck
    picks = {(sc, name): src for (sc, name), src in picks.items() if name in BUNDLE.get(sc, ())}
    for sc, names in BUNDLE.items():  # earlier bundles' extra arms go: the bundle stays <= 30 MB
        for old in (dest / sc).glob("*") if (dest / sc).is_dir() else ():
            if old.is_dir() and old.name not in names:
                shutil.rmtree(old)
    for (sc, name), src in picks.items():
        dst = dest / sc / name
        if dst.exists():
            shutil.rmtree(dst)
        dst.mkdir(parents=True)
        for f in CKPT_FILES:
            if (src / f).exists():
                shutil.copy(src / f, dst / f)
        meta = json.loads((src / "tandem_meta.json").read_text()) if (src / "tandem_meta.json").exists() else {}
        # source: where it was copied from, which run folders record (models.recorded_checkpoint finds it here)
        meta.update({"junior": f"toy:{sc}/junior", "scenario": sc, "arm": meta.get("arm", name), "source": str(src)})
        (dst / "tandem_meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")


def check_committed(allow_dirty: bool) -> None:
    """Every run folder records the commit it was written from (tandem_eval.run.provenance): a full run starts
    only from a committed tree with no modified tracked file (one error line and exit 2 otherwise)."""
    from tandem_eval.run.provenance import git_commit

    git = git_commit()
    if not allow_dirty and (git["commit"] is None or git["dirty"]):
        state = "has uncommitted changes" if git["commit"] else "is not a git checkout"
        print(f"error: the tree {state}; commit first, so every run folder names a commit that holds its code "
              "(--allow-dirty for a trial run)", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    log(f"code: commit {git['commit']}{' (DIRTY)' if git['dirty'] else ''}")


def stage_reports(results: Path, work: Path) -> None:
    """One `tandem-eval report` per scenario folder (their problem sets differ): results/report/<scenario>/."""
    if (results / "report" / "table2.md").exists():  # v3's pooled report of every scenario: replaced
        shutil.rmtree(results / "report")
    for sc in (sc for sc in SCENARIOS if (results / sc).is_dir()):
        run(
            ["-m", "tandem_eval.cli", "report", str(results / sc), "--out", str(results / "report" / sc)],
            work / "logs" / "report.log",
        )


def summarize(results: Path, s: Scale, readme: Path | None) -> None:
    """summary.json/.md, figures and the toy-summary block: the scale's scenarios, and the others already under
    results/ (summarised from their run folders)."""
    from trainer.toy.summary import arms_found, write_summary

    arms = {**arms_found(results), **{sc: s.arms(sc) for sc in s.scenarios}}
    try:
        write_summary(results, {sc: arms[sc] for sc in SCENARIOS if sc in arms}, readme=readme)
    except RunFolderError as e:  # the run folders stay; fix them and rerun `python -m trainer.toy.summary`
        log(f"error: {e}")
        raise SystemExit(2) from None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=list(SCALES), default="full")
    ap.add_argument("--results", type=Path, default=REPO / "results" / "toy")
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "toy")
    ap.add_argument("--jobs", type=int, default=2, help="processes at a time (1 torch thread each)")
    ap.add_argument("--no-bundle", action="store_true", help="do not refresh tandem_eval/toy/checkpoints")
    ap.add_argument(
        "--readme",
        type=Path,
        help="rewrite this markdown file's toy-summary block from the new summary (make toy: docs/toy-world.md)",
    )
    ap.add_argument("--allow-dirty", action="store_true", help="run from a tree with uncommitted changes (trials)")
    args = ap.parse_args(argv)
    s, t0 = SCALES[args.scale], time.time()
    check_committed(args.allow_dirty or args.scale == "ci")
    args.work, args.results = args.work.resolve(), args.results.resolve()
    data = stage_data(args.work, s)
    init = stage_init(args.work, s)
    try:
        stage_g0(args.work, args.results, init, s)
        stage_heldout_init(args.work, args.results, data, init, s)
        stage_headroom(args.results, s)
        s = stage_pilot(args.work, args.results, data, init, s, args.jobs)
    except GateFailed as e:
        log(f"STOP: {e}")
        # the stop is a result: summary.json and docs/toy-world.md say which gate failed, with its numbers
        summarize(args.results, s, args.readme)
        raise SystemExit(1) from None
    finals = stage_train_and_eval(args.work, args.results, data, init, s, args.jobs)
    summarize(args.results, s, args.readme)
    if not args.no_bundle:
        stage_bundle(finals, init, data, s)
    stage_reports(args.results, args.work)
    log(f"done in {(time.time() - t0) / 60:.1f} min: {args.results}")


if __name__ == "__main__":
    main()
