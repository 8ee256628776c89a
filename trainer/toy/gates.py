"""The dialects scenario's gates: stated (here and in docs/toy-world.md) before any run, checked by code on the
held-out split only (never the test set), printed PASS/FAIL with their numbers. A failed gate stops
`make toy` before the full run; the summary records it (summary.json: scenarios.dialects.gates).

G0, after SFT, before any RL (initial senior and junior, `G0_PROBLEMS` held-out problems x `G0_SAMPLES`
samples, the scenario's token budget, the evaluation's decoding except where said):
  * the initial senior writes dialect A in 10-20% of its CoTs, B in 25-40%, mixed ones in <= 5%, sampled
    from its own distribution (temperature 1, no top-p/top-k: the evaluation's top_p 0.8 drops any
    first-step choice under ~20%, so a 10-20% share cannot show there);
  * forcing its first step into A or B (the separator after the cue, "Maya:" vs "Maya;", forced; the
    rest sampled) changes its accuracy by <= 3 points;
  * the junior continues after a first step in A (the reference step, forced) at >= 0.8 of its own
    accuracy, and after the same step in B at <= 0.35 of it; its own accuracy: forced into its own
    dialect, A ("Maya:"), writing the rest itself;
  * the junior's NLL of reference CoTs in B is >= 2x its NLL of the same CoTs in A (nats per token).
G1, the pilot (`PILOT_SEEDS`, never reused: grpo and tandem at the full run's settings for up to the
scale's pilot_steps, held-out solo every `heldout_every` steps, and GRPO's held-out handoff at its plateau;
numbers are means over the pilot seeds at GRPO's plateau, the first evaluation where the last check holds,
which is the full run's step count for every arm):
  * GRPO writes B in >= 70% of its held-out CoTs, and its held-out tax@4 exceeds the initial senior's
    by >= 10 points;
  * tandem writes A in >= 60% of its CoTs;
  * tandem's solo pass@4 is within 5 points of GRPO's;
  * GRPO plateaus: its held-out solo pass@4 changes by < 3 points from one evaluation to the next, within
    the pilot's horizon.

    python -m trainer.toy.gates g0 --senior runs/toy/init/dialects/senior --junior runs/toy/init/dialects/junior
    python -m trainer.toy.gates g1 --pilot runs/toy/pilot/dialects --init results/toy/dialects/init/heldout
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from trainer.toy.styles import cot_dialect
from trainer.toy.task import Difficulty, ToyProblem, cue, dialect_solution, dialect_step, generate

SCENARIO = "dialects"
GATED = (SCENARIO,)  # the scenarios whose full run waits for G0 and G1
PILOT_SEEDS = (100, 101)  # the G1 pilot's training seeds: never a full-run seed (those are 0..7)
G0_PROBLEMS, G0_SAMPLES, G0_SEED = 200, 8, 0  # held-out problems, samples per problem, sampling seed

# G0 thresholds (shares in %, accuracy in points, ratios)
INIT_A_SHARE = (10.0, 20.0)
INIT_B_SHARE = (25.0, 40.0)
INIT_MIXED_MAX = 5.0
FORCING_MAX = 3.0
JUNIOR_AFTER_A_MIN = 0.8
JUNIOR_AFTER_B_MAX = 0.35
NLL_RATIO_MIN = 2.0
# G1 thresholds
GRPO_B_MIN = 70.0
GRPO_TAX_GAIN_MIN = 10.0
TANDEM_A_MIN = 60.0
SOLO_GAP_MAX = 5.0
PLATEAU_MAX = 3.0


def check(value: float | None, rule: str, ok: bool) -> dict:
    finite = value is not None and np.isfinite(value)
    return {"value": round(float(value), 4) if finite else None, "rule": rule, "pass": bool(ok) and finite}


def gate(checks: dict[str, dict], numbers: dict) -> dict:
    """{"pass": every check passed, "checks": {name: {"value", "rule", "pass"}}, "numbers": ...}."""
    return {"pass": all(c["pass"] for c in checks.values()), "checks": checks, "numbers": numbers}


def print_gate(name: str, g: dict, out=None) -> None:
    out = out or sys.stdout
    print(f"{name}: {'PASS' if g['pass'] else 'FAIL'}", file=out)
    for key, c in g["checks"].items():
        print(f"  {'PASS' if c['pass'] else 'FAIL'}  {key} = {c['value']}  ({c['rule']})", file=out)


# ------------------------------------------------------------------ G0
def heldout_problems(n: int = G0_PROBLEMS) -> list[ToyProblem]:
    """The scenario's first `n` held-out problems (the ones stage_data writes: seed 0, 2-step)."""
    from trainer.toy.scales import DIFFICULTIES

    return generate("heldout", n, seed=0, difficulty=DIFFICULTIES.get(SCENARIO, Difficulty()))


def sample_answers(
    model, tok, problems: list[ToyProblem], prefixes: list[str] | None, budget: int, sampling: dict | None = None
) -> pd.DataFrame:
    """G0_SAMPLES sampled answers per problem (`sampling`, default the evaluation decoding; `budget` tokens
    in all, `prefixes` forced): one row per sample with problem_id, text, correct and dialect."""
    from trainer.toy.evaluate_quick import complete, last_boxed

    probs = [p for p in problems for _ in range(G0_SAMPLES)]
    heads = [h for h in (prefixes or [""] * len(problems)) for _ in range(G0_SAMPLES)]
    texts = complete(
        model, tok, probs, sample=True, seed=G0_SEED, batch_size=256, max_new_tokens=budget, prefixes=heads,
        sampling=sampling,
    )  # fmt: skip
    return pd.DataFrame(
        {
            "problem_id": [p.problem_id for p in probs],
            "text": texts,
            "correct": [last_boxed(t) == p.answer for p, t in zip(probs, texts)],
            "dialect": [cot_dialect(t) for t in texts],
        }
    )


def reference_nll(model, tok, problems: list[ToyProblem], write: Callable[[ToyProblem], str]) -> float:
    """Mean per-token NLL (nats) of `model` reading the reference answers `write(p)` (+ <|im_end|>)
    teacher-forced after each problem's chat prompt; mean over problems."""
    import torch

    from tandem_eval.data.prompts import prompt_text

    nll = []
    for p in problems:
        prompt = tok.encode(prompt_text(tok, p.problem), add_special_tokens=False)
        ids = torch.tensor([prompt + tok.encode(write(p) + "<|im_end|>", add_special_tokens=False)])
        with torch.no_grad():
            logp = model(ids).logits[0, :-1].log_softmax(-1)
        tgt = ids[0, 1:]
        nll.append(-logp[len(prompt) - 1 :].gather(1, tgt[len(prompt) - 1 :, None]).mean().item())
    return float(np.mean(nll))


def _acc(d: pd.DataFrame) -> float:
    return 100.0 * float(d["correct"].mean())


def g0(senior_dir: Path, junior_dir: Path, budget: int, n_problems: int = G0_PROBLEMS) -> dict:
    """G0 (module docstring) of an initial senior and its junior."""
    import torch

    from trainer.toy.models import load_checkpoint

    torch.set_num_threads(1)
    problems = heldout_problems(n_problems)
    senior, tok = load_checkpoint(senior_dir)
    junior, _ = load_checkpoint(junior_dir)
    forced = {d: [f"{cue(p.steps[0])}{sep}" for p in problems] for d, sep in (("A", ":"), ("B", ";"))}
    first = {d: [dialect_step(p.steps[0], d) + "\n\n" for p in problems] for d in ("A", "B")}
    from trainer.toy.evaluate_quick import MODEL_SAMPLING

    runs = {
        # the shares are the model's own (temperature 1, no truncation): the evaluation decoding's top_p 0.8
        # drops any first-step choice under ~20%, so a 10-20% share could not show there
        "senior (T 1)": sample_answers(senior, tok, problems, None, budget, MODEL_SAMPLING),
        "senior": sample_answers(senior, tok, problems, None, budget),
        "senior forced A": sample_answers(senior, tok, problems, forced["A"], budget),
        "senior forced B": sample_answers(senior, tok, problems, forced["B"], budget),
        "junior": sample_answers(junior, tok, problems, None, budget),
        "junior forced A": sample_answers(junior, tok, problems, forced["A"], budget),
        "junior after A": sample_answers(junior, tok, problems, first["A"], budget),
        "junior after B": sample_answers(junior, tok, problems, first["B"], budget),
    }
    shares = {
        k: {d: 100.0 * float((r["dialect"] == d).mean()) for d in ("A", "B", "plain", "mixed")} for k, r in runs.items()
    }
    acc = {k: _acc(r) for k, r in runs.items()}
    nll = {
        d: reference_nll(junior, tok, problems, lambda p, d=d: dialect_solution(p.steps, p.answer, d))
        for d in ("A", "B")
    }
    checks = _g0_checks(shares["senior (T 1)"], acc, nll)
    numbers = {
        "split": "heldout",
        "n_problems": len(problems),
        "n_samples": G0_SAMPLES,
        "budget_new_tokens": budget,
        "accuracy_pct": acc,
        "dialect_shares_pct": shares,
        "junior_nll_reference": nll,
        "junior_own_accuracy": "junior forced A",
    }
    return gate(checks, numbers)


def _g0_checks(share: dict, acc: dict, nll: dict) -> dict:
    """G0's checks from the initial senior's own dialect shares (temperature 1), the accuracies of every
    run, and the junior's reference NLL per dialect."""
    own = acc["junior forced A"]
    after_a, after_b = (acc[f"junior after {d}"] / own if own else float("nan") for d in ("A", "B"))
    lo_a, hi_a = INIT_A_SHARE
    lo_b, hi_b = INIT_B_SHARE
    return {
        "init A share (%)": check(share["A"], f"{lo_a:g} <= A <= {hi_a:g}", lo_a <= share["A"] <= hi_a),
        "init B share (%)": check(share["B"], f"{lo_b:g} <= B <= {hi_b:g}", lo_b <= share["B"] <= hi_b),
        "init mixed share (%)": check(share["mixed"], f"<= {INIT_MIXED_MAX:g}", share["mixed"] <= INIT_MIXED_MAX),
        "init accuracy forced A - forced B (pts)": check(
            acc["senior forced A"] - acc["senior forced B"],
            f"|A - B| <= {FORCING_MAX:g}",
            abs(acc["senior forced A"] - acc["senior forced B"]) <= FORCING_MAX,
        ),
        "junior after A / own": check(after_a, f">= {JUNIOR_AFTER_A_MIN:g}", after_a >= JUNIOR_AFTER_A_MIN),
        "junior after B / own": check(after_b, f"<= {JUNIOR_AFTER_B_MAX:g}", after_b <= JUNIOR_AFTER_B_MAX),
        "junior NLL B / A": check(nll["B"] / nll["A"], f">= {NLL_RATIO_MIN:g}", nll["B"] / nll["A"] >= NLL_RATIO_MIN),
    }


# ------------------------------------------------------------------ G1
def _pass4(pass_at_k: dict | None) -> float | None:
    return ((pass_at_k or {}).get("macro") or {}).get("pass@4")


def _minus(a: float | None, b: float | None) -> float:
    """a - b; NaN where either is missing (a held-out n below 4 has no pass@4): its check fails."""
    return float("nan") if a is None or b is None else a - b


def heldout_curve(run_dir: Path) -> list[dict]:
    """A pilot run's held-out evaluations by step: solo and handoff pass@4, tax@4 (points) and the dialect
    shares of its solo CoTs (trainer.toy.dialects). The handoff and the tax come from the training hook's
    handoff run, else from run_dir/heldout-handoff/step-N/ (world.heldout_handoff: solo and handoff at the
    initial senior's held-out settings and seed)."""
    from trainer.toy.dialects import heldout_dialects
    from trainer.toy.training import read_jsonl

    by_step = {d["step"]: d for d in heldout_dialects(run_dir)}
    out = []
    for rec in read_jsonl(run_dir / "eval_log.jsonl"):
        solo, hand = _pass4(rec.get("solo")), _pass4(rec.get("handoff"))
        tax = _minus(solo, hand)
        extra = run_dir / "heldout-handoff" / f"step-{int(rec['step']):06d}"
        if hand is None and (extra / "handoff-paragraph" / "metrics.json").exists():  # world.heldout_handoff's
            pair = init_heldout(extra)  # its own solo and handoff (the initial senior's seed): the tax
            hand, tax = pair["handoff_pass@4"], pair["tax@4"]
        out.append({"step": int(rec["step"]), "solo_pass@4": solo, "handoff_pass@4": hand, "tax@4": tax,
                    "shares": by_step.get(int(rec["step"]))})  # fmt: skip
    return out


def init_heldout(init_dir: Path) -> dict:
    """Held-out solo and handoff pass@4, tax@4 and dialect shares of one handoff run folder (the initial
    senior's, world.stage_heldout_init; a pilot run's, world.heldout_handoff)."""
    from trainer.toy.dialects import shares

    solo = json.loads((init_dir / "solo" / "metrics.json").read_text())["pass_at_k"]
    hand = json.loads((init_dir / "handoff-paragraph" / "metrics.json").read_text())["pass_at_k"]
    texts = pd.read_parquet(init_dir / "solo" / "samples.parquet", columns=["text"])["text"]
    return {"solo_pass@4": _pass4(solo), "handoff_pass@4": _pass4(hand), "tax@4": _minus(_pass4(solo), _pass4(hand)),
            "shares": shares(texts)}  # fmt: skip


def plateau_step(curves: list[list[dict]]) -> tuple[int | None, float]:
    """The first held-out evaluation at which the runs' mean solo pass@4 changes by < PLATEAU_MAX points from
    the one before: (its step, the change); (None, the last change) when no evaluation does."""
    steps = sorted({r["step"] for c in curves for r in c})
    mean = {st: np.nanmean([next((r["solo_pass@4"] for r in c if r["step"] == st), None) or np.nan for c in curves])
            for st in steps}  # fmt: skip
    change = float("nan")
    for prev, st in zip(steps, steps[1:]):
        change = float(mean[st] - mean[prev])
        if abs(change) < PLATEAU_MAX:
            return st, change
    return None, change


def g1(runs: dict[str, list[Path]], init_dir: Path) -> dict:
    """G1 (module docstring) of the pilot runs {"grpo": [run dirs], "tandem": [...]} and the initial senior's
    held-out run folder. The step count of the full run is GRPO's plateau: the first evaluation whose mean
    held-out solo pass@4 changes by < PLATEAU_MAX from the one before (numbers["steps"]); the other checks
    are read there (means over the pilot seeds). Without a plateau in the pilot's horizon the plateau check
    fails and the others are read at the last evaluation."""
    curves = {arm: [heldout_curve(d) for d in dirs] for arm, dirs in runs.items()}
    init = init_heldout(init_dir)
    step, change = plateau_step(curves["grpo"])
    last_steps = [c[-1]["step"] for cs in curves.values() for c in cs if c]
    at = step if step is not None else (min(last_steps) if last_steps else None)

    def value(arm: str, key: str) -> float:
        vals = [next((r[key] for r in c if r["step"] == at), None) for c in curves[arm]]
        return float(np.nanmean([np.nan if v is None else v for v in vals])) if vals else float("nan")

    def share(arm: str, dialect: str) -> float:
        rows = [next((r["shares"] for r in c if r["step"] == at and r["shares"]), None) for c in curves[arm]]
        return float(np.nanmean([np.nan if r is None else r[dialect] for r in rows])) if rows else float("nan")

    grpo_b, tandem_a = share("grpo", "B"), share("tandem", "A")
    tax_gain = _minus(value("grpo", "tax@4"), init["tax@4"])
    gap = value("tandem", "solo_pass@4") - value("grpo", "solo_pass@4")
    checks = {
        "grpo B share (%)": check(grpo_b, f">= {GRPO_B_MIN:g}", grpo_b >= GRPO_B_MIN),
        "grpo - init tax@4 (pts)": check(tax_gain, f">= +{GRPO_TAX_GAIN_MIN:g}", tax_gain >= GRPO_TAX_GAIN_MIN),
        "tandem A share (%)": check(tandem_a, f">= {TANDEM_A_MIN:g}", tandem_a >= TANDEM_A_MIN),
        "tandem - grpo solo pass@4 (pts)": check(gap, f"|gap| <= {SOLO_GAP_MAX:g}", abs(gap) <= SOLO_GAP_MAX),
        "grpo solo pass@4, change from the previous evaluation (pts)": check(
            change, f"|change| < {PLATEAU_MAX:g} by the pilot's last evaluation", step is not None
        ),
    }
    numbers = {"split": "heldout", "steps": at, "plateau_step": step, "init": init, "curves": curves,
               "runs": {arm: [str(d) for d in dirs] for arm, dirs in runs.items()}}  # fmt: skip
    return gate(checks, numbers)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="gate", required=True)
    a = sub.add_parser("g0", help="G0: the initial senior and junior after SFT")
    a.add_argument("--senior", type=Path, required=True)
    a.add_argument("--junior", type=Path, required=True)
    a.add_argument("--budget", type=int, help="new-token budget (default: the full scale's for dialects)")
    a.add_argument("--problems", type=int, default=G0_PROBLEMS)
    a.add_argument("--out", type=Path, help="also write the gate as JSON")
    b = sub.add_parser("g1", help="G1: the pilot's runs (after world.stage_pilot trained them)")
    b.add_argument("--pilot", type=Path, required=True, help="work/pilot/<scenario>: <arm>/seed<S> run folders")
    b.add_argument("--init", type=Path, required=True, help="the initial senior's held-out handoff run folder")
    b.add_argument("--out", type=Path, help="also write the gate as JSON")
    args = ap.parse_args(argv)
    from trainer.toy.scales import SCALES

    if args.gate == "g1":
        runs = {arm: sorted((args.pilot / arm).glob("seed*")) for arm in ("grpo", "tandem")}
        if not all(runs.values()) or not (args.init / "handoff-paragraph").is_dir():
            print(f"error: {args.pilot} needs grpo/seed*/ and tandem/seed*/ runs and {args.init} a handoff run; "
                  "run `make toy` (its pilot stage) first", file=sys.stderr)  # fmt: skip
            raise SystemExit(2)
        _finish("G1", g1(runs, args.init), args.out)
        return

    for d in (args.senior, args.junior):
        if not (d / "config.json").exists():
            print(
                f"error: {d} is not a checkpoint folder (no config.json); pass --senior/--junior DIR", file=sys.stderr
            )
            raise SystemExit(2)
    _finish("G0", g0(args.senior, args.junior, args.budget or SCALES["full"].budget(SCENARIO), args.problems), args.out)


def _finish(name: str, g: dict, out: Path | None) -> None:
    print_gate(name, g)
    if out:
        from tandem_eval.run.durable import atomic_write_json
        from tandem_eval.schemas import to_jsonable

        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out, to_jsonable(g))


if __name__ == "__main__":
    main()
