"""Pilot of the toy world's emergent scenario: does GRPO, on its own, pay a communication tax?

SFT of the emergent initial senior (from a given plain base checkpoint), `make toy`'s grpo runs on a
few seeds for the planned steps (the same train_job and checkpoint rule as trainer/toy/world.py),
then init and grpo evaluated per seed (solo, paragraph handoff, legibility, drift) at a modest n,
and the precondition of trainer/toy/verdicts.py (grpo - init tax@4 and junior NLL, CIs above 0)
written with the command that made it to a small JSON file. Not a full run: its numbers never go
into results/toy/summary.json.

    python -m trainer.toy.pilot --base toy:jargon/junior --seeds 0 --n 4 --limit 150 \\
        --out results/toy/pilot-v3.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from tandem_eval.metrics.stats import to_jsonable
from tandem_eval.models import resolve_model
from tandem_eval.results import atomic_write_json
from trainer.toy import world as tw
from trainer.toy.task import is_terse

SCENARIO = "emergent"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the plain base senior the emergent SFT continues (path or toy:NAME)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, help="RL steps (default: the full scale's)")
    ap.add_argument("--n", type=int, default=4, help="samples per test problem")
    ap.add_argument("--limit", type=int, default=150, help="first N test problems")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work", type=Path, default=tw.REPO / "runs" / "toy-pilot")
    ap.add_argument("--out", type=Path, default=tw.REPO / "results" / "toy" / "pilot-v3.json")
    args = ap.parse_args(argv)
    t0 = time.time()
    full = tw.SCALES["full"]
    s = replace(
        full,
        rl_steps=args.steps or full.rl_steps,
        seeds=tuple(args.seeds),
        n_samples=args.n,
        eval_limits=((SCENARIO, args.limit),),
        scenarios=(SCENARIO,),
    )
    work = args.work.resolve()
    data = tw.stage_data(work, s)
    senior = work / "init" / SCENARIO / "senior"
    tw._sft(senior, SCENARIO, None, work, init_from=Path(resolve_model(args.base)))
    pair = {"senior": senior, "junior": senior}
    results = work / "results"
    from concurrent.futures import ThreadPoolExecutor

    def train(seed):
        out = work / "train" / SCENARIO / "grpo" / f"seed{seed}"
        tw.train_job(out, data, pair, s, SCENARIO, "grpo", seed, s.lr, s.rl_steps, s.heldout_every)
        return tw.selected_checkpoint(out, s.rl_steps)

    with ThreadPoolExecutor(args.jobs) as pool:
        picks = dict(zip(s.seeds, pool.map(train, s.seeds)))
        jobs = [(arm, seed, ck) for seed in s.seeds for arm, ck in (("init", senior), ("grpo", picks[seed][0]))]
        list(pool.map(lambda j: tw.eval_job(results, data, s, SCENARIO, j[0], j[1], j[2], senior), jobs))
    from tandem_eval.runs import runs_in
    from trainer.toy.summary import build_summary

    styles = {}  # why the tax does or does not appear: how often each arm writes tersely, and how well
    for run in runs_in(results / SCENARIO):
        if run.mode == "solo":
            d = run.samples()
            terse = d["text"].map(is_terse)
            cut = d["finish_reason"] == "length"
            styles[f"{run.arm.split('/')[-1]}/seed{run.seed}"] = {
                "terse_pct": 100 * terse.mean(),
                "correct_pct_terse": 100 * d["correct"][terse].mean() if terse.any() else None,
                "correct_pct_plain": 100 * d["correct"][~terse].mean() if (~terse).any() else None,
                "truncated_pct_terse": 100 * cut[terse].mean() if terse.any() else None,
                "truncated_pct_plain": 100 * cut[~terse].mean() if (~terse).any() else None,
            }

    entry = build_summary(results, {SCENARIO: ("grpo",)})["scenarios"][SCENARIO]
    pilot = {
        "command": "python -m trainer.toy.pilot " + shlex.join(sys.argv[1:] if argv is None else argv),
        "scenario": SCENARIO,
        "budget_new_tokens": s.budget(SCENARIO),
        "rl": {"steps": s.rl_steps, "lr": s.lr, "prompts_per_step": s.prompts_per_step, "group": s.group_size},
        "selected_steps": {str(seed): step for seed, (_, step) in picks.items()},
        "eval": {"n": s.n_samples, "problems": args.limit, "seeds": list(s.seeds)},
        "arms": entry["arms"],
        "differences": entry["differences"],
        "precondition": entry.get("precondition"),
        "solo_styles": styles,
        "minutes": round((time.time() - t0) / 60, 1),
    }
    atomic_write_json(args.out, to_jsonable(pilot))
    print(json.dumps(pilot["precondition"], indent=2))


if __name__ == "__main__":
    main()
