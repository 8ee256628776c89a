"""Pilot of the toy world's emergent scenario: does GRPO, on its own, pay a communication tax?

SFT of the emergent initial senior (from a given plain base checkpoint), `make toy`'s RL runs (grpo,
optionally tandem) on a few seeds (the same train_job and checkpoint rule as trainer/toy/world.py),
then init and each arm evaluated per seed (solo, paragraph handoff, legibility, drift) at a modest n,
and the precondition of trainer/toy/verdicts.py (grpo - init tax@4 and junior NLL, CIs above 0)
written with the command that made it to a small JSON file, beside why: per arm, how many CoT steps
are terse, and the accuracy, truncation and junior NLL of all-plain, mixed and all-terse CoTs. The
file's earlier record is kept under "earlier_attempts". Not a full run: its numbers never go into
results/toy/summary.json.

    python -m trainer.toy.pilot --base toy:jargon/junior --seeds 0 1 2 --steps 30 --lr 5e-5 \\
        --n 4 --limit 150 --out results/toy/pilot-v3.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pandas as pd

from tandem_eval.files import atomic_write_json
from tandem_eval.models import resolve_model
from tandem_eval.run.runs import runs_in
from tandem_eval.schemas import to_jsonable
from trainer.toy import scales
from trainer.toy import world as tw
from trainer.toy.styles import terse_rate
from trainer.toy.summary import build_summary

SCENARIO = "emergent"


def _parse(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the plain base senior the emergent SFT continues (path or toy:NAME)")
    ap.add_argument("--arms", nargs="+", default=["grpo"], choices=["grpo", "tandem"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, help="RL steps (default: the full scale's)")
    ap.add_argument("--lr", type=float, help="learning rate (default: the full scale's)")
    ap.add_argument("--heldout-every", type=int, help="held-out evaluation and checkpoint every N steps")
    ap.add_argument("--n", type=int, default=4, help="samples per test problem")
    ap.add_argument("--limit", type=int, default=150, help="first N test problems")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work", type=Path, default=tw.REPO / "runs" / "toy-pilot")
    ap.add_argument("--out", type=Path, default=tw.REPO / "results" / "toy" / "pilot-v3.json")
    return ap.parse_args(argv)


def _style(text: str) -> str:
    rate = terse_rate(text)
    return "plain" if rate == 0 else "terse" if rate == 1 else "mixed"


def solo_styles(results: Path, test: Path) -> dict:
    """Per arm and seed: the share of terse CoT steps, and per CoT style (all-plain, mixed, all-terse)
    its share, accuracy, truncation and junior NLL (nats/token, from the legibility table), and its
    accuracy per number of problem steps ("correct/CoTs": a style's accuracy is confounded with the
    problem's length, since longer problems draw more terse steps and overrun the budget more often)."""
    n_steps = pd.read_json(test, lines=True)[["problem_id", "n_steps"]]
    out = {}
    for run in runs_in(results / SCENARIO):
        if run.mode != "solo":
            continue
        d = run.samples()
        key = ["benchmark", "problem_id", "sample_idx"]
        lens = next(run.path.glob("lens/*/legibility.parquet"), None)
        if lens is not None:
            d = d.merge(pd.read_parquet(lens, columns=[*key, "junior_nll_mean"]), on=key, how="left")
        d = d.assign(style=d["text"].map(_style), cut=d["finish_reason"] == "length").merge(n_steps, on="problem_id")
        row = {"terse_step_pct": 100 * d["text"].map(terse_rate).mean()}
        for style, g in d.groupby("style"):
            row[style] = {
                "pct": 100 * len(g) / len(d),
                "correct_pct": 100 * g["correct"].mean(),
                "truncated_pct": 100 * g["cut"].mean(),
                "junior_nll": g["junior_nll_mean"].mean() if "junior_nll_mean" in g else None,
                "correct_by_n_steps": {int(k): f"{c.sum()}/{len(c)}" for k, c in g.groupby("n_steps")["correct"]},
            }
        out[f"{run.arm.split('/')[-1]}/seed{run.seed}"] = row
    return out


def reference_nll(checkpoint: Path, n: int = 100) -> dict:
    """The junior's mean NLL (nats/token) of the reference solutions of the first `n` test problems written
    all plain, all terse, and alternating terse/plain by step: how well it reads each notation."""
    from trainer.toy.gates import reference_nll as nll
    from trainer.toy.models import load_checkpoint
    from trainer.toy.task import Difficulty, generate, mixed_solution

    model, tok = load_checkpoint(checkpoint)
    styles = {
        "plain": lambda p: p.solution_plain,
        "terse": lambda p: p.solution("terse"),
        "alternating": lambda p: mixed_solution(p.steps, p.answer, [i % 2 == 0 for i in range(p.n_steps)]),
    }
    problems = generate("test", n, difficulty=scales.DIFFICULTIES.get(SCENARIO, Difficulty()))
    return {name: nll(model, tok, problems, write) for name, write in styles.items()}


def reading(pre: dict) -> str:
    """One line: does the precondition hold, with its two differences (conservative CI)."""

    def cell(key, decimals):
        c = pre.get(key)
        if not c:
            return "–"
        ci = c["ci"] or c["bootstrap_ci"]
        kind = "" if c["ci"] else " (bootstrap only: one seed)"
        return f"{c['mean']:+.{decimals}f} [{ci[0]:+.{decimals}f}, {ci[1]:+.{decimals}f}]{kind}"

    verdict = "holds" if pre["holds"] else "does not hold"
    return (
        f"The precondition {verdict}: grpo - init tax@4 {cell('grpo_tax@4_minus_init', 1)} pts, "
        f"junior NLL {cell('grpo_junior_nll_minus_init', 3)} nats/token (hull of the bootstrap and seed-level CIs)."
    )


def earlier(out: Path) -> list[dict]:
    """The file's earlier attempts, plus its current record (without the per-arm tables) as the last one."""
    if not out.exists():
        return []
    old = json.loads(out.read_text())
    keep = {k: v for k, v in old.items() if k not in ("arms", "differences", "earlier_attempts")}
    return [*old.get("earlier_attempts", []), keep]


def run_pilot(args, s: scales.Scale, work: Path) -> tuple[dict, dict]:
    """SFT, RL runs, evaluations; ({(arm, seed): selected step}, the scenario's summary entry)."""
    data = tw.stage_data(work, s)  # {scenario: {split: path}}
    senior = work / "init" / SCENARIO / "senior"
    tw._sft(senior, SCENARIO, None, work, init_from=Path(resolve_model(args.base)))
    pair = {"senior": senior, "junior": senior}
    results = work / "results"
    keys = [(arm, seed) for seed in s.seeds for arm in args.arms]

    def train(key):
        arm, seed = key
        out = work / "train" / SCENARIO / arm / f"seed{seed}"
        tw.train_job(out, data, pair, s, tw.RLJob(SCENARIO, arm, seed, s.lr, s.rl_steps, s.heldout_every))
        return tw.selected_checkpoint(out, s.rl_steps)

    with ThreadPoolExecutor(args.jobs) as pool:
        picks = dict(zip(keys, pool.map(train, keys)))
        jobs = [("init", seed, senior) for seed in s.seeds] + [(a, sd, picks[(a, sd)][0]) for a, sd in keys]
        list(pool.map(lambda j: tw.eval_job(results, data, s, SCENARIO, j[0], j[1], j[2], senior), jobs))
    tw.stage_heldout_init(work, results, data, {SCENARIO: pair}, s)  # step 0 of the held-out curves
    tw.copy_training_logs(results, {(SCENARIO, a, sd): ck for (a, sd), (ck, _) in picks.items()}, s)
    entry = build_summary(results, {SCENARIO: tuple(args.arms)})["scenarios"][SCENARIO]
    return {f"{a}/seed{sd}": step for (a, sd), (_, step) in picks.items()}, entry


def main(argv=None) -> None:
    args, t0 = _parse(argv), time.time()
    full = scales.SCALES["emergent"]  # v3's emergent scenario at its committed settings
    s = replace(
        full,
        rl_steps=args.steps or full.rl_steps,
        lr=args.lr or full.lr,
        heldout_every=args.heldout_every or full.heldout_every,
        seeds=tuple(args.seeds),
        n_samples=args.n,
        eval_limits=((SCENARIO, args.limit),),
        scenarios=(SCENARIO,),
    )
    work = args.work.resolve()
    selected, entry = run_pilot(args, s, work)
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tw.REPO, capture_output=True, text=True)
    pilot = {
        "command": "python -m trainer.toy.pilot " + shlex.join(sys.argv[1:] if argv is None else argv),
        "code": f"commit {sha.stdout.strip()}",
        "scenario": SCENARIO,
        "budget_new_tokens": s.budget(SCENARIO),
        "rl": {"steps": s.rl_steps, "lr": s.lr, "prompts_per_step": s.prompts_per_step, "group": s.group_size},
        "selected_steps": selected,
        "eval": {"n": s.n_samples, "problems": args.limit, "seeds": list(s.seeds)},
        "arms": entry["arms"],
        "differences": entry["differences"],
        "precondition": entry.get("precondition"),
        "verdicts": entry.get("verdicts"),
        "solo_styles": solo_styles(work / "results", work / "data" / SCENARIO / "test.jsonl"),
        "junior_nll_of_reference_solutions": reference_nll(work / "init" / SCENARIO / "senior"),
        "training": entry.get("training"),
        "reading": reading(entry["precondition"]),
        "minutes": round((time.time() - t0) / 60, 1),
        "earlier_attempts": earlier(args.out),
    }
    atomic_write_json(args.out, to_jsonable(pilot))
    print(pilot["reading"])


if __name__ == "__main__":
    main()
