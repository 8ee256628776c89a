"""The dialects scenario's gates: stated (here and in docs/toy-world.md) before any run, checked by code on the
held-out split only (never the test set), printed PASS/FAIL with their numbers. A failed gate stops
`make toy` before the full run; the summary records it (summary.json: scenarios.dialects.gates).

v6 (the design revised after v5's G1 failed, pre-registered here and in docs/toy-world.md before any v6 run;
v5's rules are kept as V5_G0 / V5_G1, the ones the committed results/toy/dialects/gates.json was read with):
the SFT mixture is about A 25% / B 35% / plain 40% (trainer/toy/sft.py), and

G0, after SFT, before any RL (initial senior and junior, `G0_PROBLEMS` held-out problems x `G0_SAMPLES`
samples, the scenario's token budget, the evaluation's decoding except where said):
  * the initial senior writes dialect A in 15-30% of its CoTs, B in 25-45%, mixed ones in <= 5%, sampled
    from its own distribution (temperature 1, no top-p/top-k; v5: A 10-20%, B 25-40%);
  * v6: A survives the evaluation decoding (T 0.7, top-p 0.8): the initial senior writes A in >= 15% of its
    CoTs there (v5's wrote A in 0%: top-p 0.8 dropped A's 18% first-step share, so GRPO and tandem could
    only reach A by exploration the evaluation never showed);
  * forcing its first step into A or B (the separator after the cue, "Maya:" vs "Maya;", forced; the
    rest sampled) changes its accuracy by <= 3 points;
  * the junior continues after a first step in A (the reference step, forced) at >= 0.8 of its own
    accuracy, and after the same step in B at <= 0.35 of it; its own accuracy: forced into its own
    dialect, A ("Maya:"), writing the rest itself;
  * the junior's NLL of reference CoTs in B is >= 2x its NLL of the same CoTs in A (nats per token).
H, the headroom check (v6), after G0 and the initial senior's held-out handoff run, before any pilot: a
two-point model (per problem, the junior finishes after a step-1 in dialect d always or never: a fraction
F_d of problems; the senior alone likewise S_d), read from G0's forced runs (F_A, F_B: the junior after a
first step in A / B; S_A, S_B: the senior forced into A / B; plain overruns the budget: 0), predicts the tax
at 100% B, GRPO's dialect by design: S_B - F_B, whatever k. Its excess over the initial senior's measured
held-out tax@k must be >= HEADROOM_MIN points at pass@1 and at pass@4, else G1's precondition cannot pass
(v5: +6.0 at pass@4, where G1 asked for +10). The model's prediction of the initial senior's own held-out
solo and handoff (at its evaluation-decoding dialect shares) is recorded beside it, as its fit.
G1, the pilot (scales.py's `PILOT_SEEDS`, fresh: v5 spent 100-101; grpo and tandem at the full run's settings for up
to the scale's pilot_steps, held-out solo every `heldout_every` steps, and GRPO's held-out handoff at its
plateau; numbers are means over the pilot seeds at GRPO's plateau, the first evaluation where the last
check holds, which is the full run's step count for every arm):
  * GRPO writes B in >= 70% of its held-out CoTs, and its held-out tax exceeds the initial senior's by
    >= 10 points at pass@1 and at pass@4 (v5: pass@4 only, which saturates: GRPO's solo pass@4 was
    96.7-97.3 at step 10);
  * tandem writes A in >= 60% of its CoTs;
  * tandem's solo pass@1 is within 5 points of GRPO's (v5: pass@4);
  * GRPO plateaus: its held-out solo pass@1 changes by < 3 points from one evaluation to the next, within
    the pilot's horizon (v5: pass@4, saturated).

    python -m trainer.toy.gates g0 --senior runs/toy/init/dialects/senior --junior runs/toy/init/dialects/junior
    python -m trainer.toy.gates headroom --results results/toy/dialects   # H: gates.json's G0, init/heldout.jsonl
    python -m trainer.toy.gates g1 --pilot runs/toy/pilot/dialects --init results/toy/dialects/init/heldout
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from trainer.toy.scales import DIFFICULTIES, SCALES
from trainer.toy.styles import cot_dialect
from trainer.toy.task import Difficulty, ToyProblem, cue, dialect_solution, dialect_step, generate

SCENARIO = "dialects"
GATED = (SCENARIO,)  # the scenarios whose full run waits for G0, H and G1
G0_PROBLEMS, G0_SAMPLES, G0_SEED = 200, 8, 0  # held-out problems, samples per problem, sampling seed
# results/<scenario>/evidence/: the samples each gate was read from, as parquet tables (no run folders, so no
# reader takes them for an arm): written by world.keep_evidence, read by trainer.toy.diagnosis
EVIDENCE = "evidence"
G0_EVIDENCE = f"{EVIDENCE}/g0-samples.parquet"


@dataclass(frozen=True)
class G0Rules:
    """G0's thresholds (shares in %, accuracy in points, ratios)."""

    a_share: tuple[float, float]  # A at temperature 1
    b_share: tuple[float, float]
    mixed_max: float
    forcing_max: float
    junior_after_a_min: float
    junior_after_b_max: float
    nll_ratio_min: float
    a_share_eval_min: float | None = None  # v6: A at the evaluation decoding (T 0.7, top-p 0.8)


@dataclass(frozen=True)
class G1Rules:
    """G1's thresholds, and the pass@k its precondition, parity and plateau are read at."""

    grpo_b_min: float
    tax_gain_min: float
    tax_ks: tuple[int, ...]  # GRPO's tax over the initial senior's, checked at each k
    tandem_a_min: float
    solo_gap_max: float
    plateau_max: float
    solo_k: int  # the pass@k of the parity and plateau checks


V5_G0 = G0Rules((10.0, 20.0), (25.0, 40.0), 5.0, 3.0, 0.8, 0.35, 2.0)
V5_G1 = G1Rules(70.0, 10.0, (4,), 60.0, 5.0, 3.0, solo_k=4)
# v6: A's share widened for the A 25% mixture, and A must survive the evaluation decoding
G0_RULES = G0Rules((15.0, 30.0), (25.0, 45.0), 5.0, 3.0, 0.8, 0.35, 2.0, a_share_eval_min=15.0)
# v6: the precondition at pass@1 and pass@4, parity and plateau on pass@1 (pass@4 saturates)
G1_RULES = G1Rules(70.0, 10.0, (1, 4), 60.0, 5.0, 3.0, solo_k=1)
HEADROOM_MIN = 15.0  # H: points of predicted grpo - init tax at 100% B, at pass@1 and at pass@4
HEADROOM_KS = (1, 4)


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


def g0(
    senior_dir: Path, junior_dir: Path, budget: int, n_problems: int = G0_PROBLEMS, samples: Path | None = None
) -> dict:
    """G0 (module docstring) of an initial senior and its junior; with `samples`, every sampled answer it was
    read from is also written there (one parquet table, a row per sample with its `run`), so a reader can
    recompute each share and accuracy."""
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
    if samples is not None:
        from tandem_eval.files import atomic_write_parquet

        samples.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(samples, pd.concat([r.assign(run=k) for k, r in runs.items()], ignore_index=True))
    shares = {
        k: {d: 100.0 * float((r["dialect"] == d).mean()) for d in ("A", "B", "plain", "mixed")} for k, r in runs.items()
    }
    acc = {k: _acc(r) for k, r in runs.items()}
    nll = {
        d: reference_nll(junior, tok, problems, lambda p, d=d: dialect_solution(p.steps, p.answer, d))
        for d in ("A", "B")
    }
    checks = _g0_checks(shares["senior (T 1)"], acc, nll, shares_eval=shares["senior"])
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


def _g0_checks(share: dict, acc: dict, nll: dict, rules: G0Rules = G0_RULES, shares_eval: dict | None = None) -> dict:
    """G0's checks from the initial senior's own dialect shares (temperature 1; `shares_eval`: at the
    evaluation decoding, for v6's check), the accuracies of every run, and the junior's reference NLL per
    dialect, under `rules` (V5_G0: the committed v5 gate's)."""
    own = acc["junior forced A"]
    after_a, after_b = (acc[f"junior after {d}"] / own if own else float("nan") for d in ("A", "B"))
    (lo_a, hi_a), (lo_b, hi_b), r = rules.a_share, rules.b_share, rules
    checks = {
        "init A share (%)": check(share["A"], f"{lo_a:g} <= A <= {hi_a:g}", lo_a <= share["A"] <= hi_a),
        "init B share (%)": check(share["B"], f"{lo_b:g} <= B <= {hi_b:g}", lo_b <= share["B"] <= hi_b),
        "init mixed share (%)": check(share["mixed"], f"<= {r.mixed_max:g}", share["mixed"] <= r.mixed_max),
        "init accuracy forced A - forced B (pts)": check(
            acc["senior forced A"] - acc["senior forced B"],
            f"|A - B| <= {r.forcing_max:g}",
            abs(acc["senior forced A"] - acc["senior forced B"]) <= r.forcing_max,
        ),
        "junior after A / own": check(after_a, f">= {r.junior_after_a_min:g}", after_a >= r.junior_after_a_min),
        "junior after B / own": check(after_b, f"<= {r.junior_after_b_max:g}", after_b <= r.junior_after_b_max),
        "junior NLL B / A": check(
            nll["B"] / nll["A"], f">= {r.nll_ratio_min:g}", nll["B"] / nll["A"] >= r.nll_ratio_min
        ),
    }
    if r.a_share_eval_min is not None:
        a = (shares_eval or {}).get("A", float("nan"))
        checks["init A share at the evaluation decoding (%)"] = check(
            a, f">= {r.a_share_eval_min:g} (T 0.7, top-p 0.8)", a >= r.a_share_eval_min
        )
    return checks


# ------------------------------------------------------------------ H, the headroom check (v6)
def two_point_pass_at_k(fractions: dict[str, float], shares: dict[str, float], k: int) -> float:
    """pass@k (%) under the two-point model: per problem, a step 1 in dialect d leads to a solved chain
    always or never, for a fraction fractions[d] (0-1) of the problems, independently across dialects;
    each of the k samples picks d with probability shares[d] (0-1; a dialect without a fraction solves
    nothing: plain and mixed overrun the budget). Exact: a sum over which dialects solve the problem."""
    ds = list(fractions)
    fail = 0.0
    for member in itertools.product((False, True), repeat=len(ds)):  # axis 0: floats, or (B,) bootstrap arrays
        p = np.prod([fractions[d] if m else 1 - fractions[d] for d, m in zip(ds, member)], axis=0)
        cover = sum(shares.get(d, 0.0) for d, m in zip(ds, member) if m)
        fail += p * (1 - cover) ** k
    return 100.0 * (1 - fail)


def headroom(g0_numbers: dict, init_record: dict, ks: tuple[int, ...] = HEADROOM_KS) -> dict:
    """H (module docstring) from G0's numbers (gates.json "G0" "numbers") and the initial senior's held-out
    handoff record (results/<sc>/init/heldout.jsonl: solo and handoff pass@k, step 0): a gate whose checks
    are the predicted grpo - init tax ceiling at each k, with the model's fit to the initial senior."""
    acc = g0_numbers["accuracy_pct"]
    junior = {d: acc[f"junior after {d}"] / 100 for d in ("A", "B")}
    senior = {d: acc[f"senior forced {d}"] / 100 for d in ("A", "B")}
    shares = {d: v / 100 for d, v in (init_record.get("dialects") or {}).items() if d in ("A", "B")}
    ceiling = 100 * (senior["B"] - junior["B"])  # the tax at 100% B, any k (two points: pass@k = pass@1)
    checks, fit = {}, {}
    for k in ks:
        solo, hand = (_pass_k((init_record.get(m) or {}).get("macro"), k) for m in ("solo", "handoff"))
        init_tax = _minus(solo, hand)
        gain = ceiling - init_tax
        checks[f"predicted grpo - init tax@{k} ceiling (pts)"] = check(
            gain, f">= +{HEADROOM_MIN:g} (tax at 100% B minus the initial senior's)", gain >= HEADROOM_MIN
        )
        fit[f"pass@{k}"] = {
            "init_solo": {"measured": solo, "predicted": two_point_pass_at_k(senior, shares, k)},
            "init_handoff": {"measured": hand, "predicted": two_point_pass_at_k(junior, shares, k)},
            "init_tax_measured": init_tax,
        }
    numbers = {"model": "two-point: per problem solved always or never after a step 1 in each dialect",
               "junior_fraction": junior, "senior_fraction": senior, "init_shares": shares,
               "tax_at_100pct_B": ceiling, "fit": fit}  # fmt: skip
    from tandem_eval.schemas import to_jsonable

    return to_jsonable(gate(checks, numbers))  # strict JSON (a missing pass@k is null): gates.json holds it as is


# ------------------------------------------------------------------ G1
def _pass_k(macro: dict | None, k: int) -> float | None:
    return (macro or {}).get(f"pass@{k}")


def _minus(a: float | None, b: float | None) -> float:
    """a - b; NaN where either is missing (a held-out n below 4 has no pass@4): its check fails."""
    return float("nan") if a is None or b is None else a - b


KS = (1, 4)  # the pass@k a held-out curve records


def heldout_curve(run_dir: Path) -> list[dict]:
    """A pilot run's held-out evaluations by step: solo and handoff pass@1 and pass@4, tax@1 and tax@4
    (points) and the dialect shares of its solo CoTs (trainer.toy.dialects). The handoff and the tax come
    from the training hook's handoff run, else from run_dir/heldout-handoff/step-N/ (world.heldout_handoff:
    solo and handoff at the initial senior's held-out settings and seed)."""
    from trainer.toy.dialects import heldout_dialects
    from trainer.toy.training import read_jsonl

    by_step = {d["step"]: d for d in heldout_dialects(run_dir)}
    out = []
    for rec in read_jsonl(run_dir / "eval_log.jsonl"):
        row: dict = {"step": int(rec["step"])}
        extra = run_dir / "heldout-handoff" / f"step-{int(rec['step']):06d}"
        pair = init_heldout(extra) if (extra / "handoff-paragraph" / "metrics.json").exists() else None
        for k in KS:
            solo, hand = (_pass_k((rec.get(m) or {}).get("macro"), k) for m in ("solo", "handoff"))
            tax = _minus(solo, hand)
            if hand is None and pair:  # world.heldout_handoff's own solo and handoff (the initial senior's seed)
                hand, tax = pair[f"handoff_pass@{k}"], pair[f"tax@{k}"]
            row.update({f"solo_pass@{k}": solo, f"handoff_pass@{k}": hand, f"tax@{k}": tax})
        out.append({**row, "shares": by_step.get(int(rec["step"]))})
    return out


def init_heldout(init_dir: Path) -> dict:
    """Held-out solo and handoff pass@4, tax@4 and dialect shares of one handoff run folder (the initial
    senior's, world.stage_heldout_init; a pilot run's, world.heldout_handoff)."""
    from trainer.toy.dialects import shares

    solo = json.loads((init_dir / "solo" / "metrics.json").read_text())["pass_at_k"].get("macro")
    hand = json.loads((init_dir / "handoff-paragraph" / "metrics.json").read_text())["pass_at_k"].get("macro")
    texts = pd.read_parquet(init_dir / "solo" / "samples.parquet", columns=["text"])["text"]
    out: dict = {}
    for k in KS:
        s_k, h_k = _pass_k(solo, k), _pass_k(hand, k)
        out.update({f"solo_pass@{k}": s_k, f"handoff_pass@{k}": h_k, f"tax@{k}": _minus(s_k, h_k)})
    return {**out, "shares": shares(texts)}


def plateau_step(curves: list[list[dict]], rules: G1Rules = G1_RULES) -> tuple[int | None, float]:
    """The first held-out evaluation at which the runs' mean solo pass@k (rules.solo_k) changes by <
    rules.plateau_max points from the one before: (its step, the change); (None, the last change) when no
    evaluation does."""
    key = f"solo_pass@{rules.solo_k}"
    steps = sorted({r["step"] for c in curves for r in c})

    def at(c: list[dict], st: int) -> float:  # NaN where a run lacks the step or the value (0.0 is a value)
        v = next((r.get(key) for r in c if r["step"] == st), None)
        return np.nan if v is None else v

    mean = {st: np.nanmean([at(c, st) for c in curves]) for st in steps}
    change = float("nan")
    for prev, st in zip(steps, steps[1:]):
        change = float(mean[st] - mean[prev])
        if abs(change) < rules.plateau_max:
            return st, change
    return None, change


def g1(runs: dict[str, list[Path]], init_dir: Path, rules: G1Rules = G1_RULES) -> dict:
    """G1 (module docstring) of the pilot runs {"grpo": [run dirs], "tandem": [...]} and the initial senior's
    held-out run folder, under `rules` (V5_G1: v5's). The step count of the full run is GRPO's plateau: the
    first evaluation whose mean held-out solo pass@k (rules.solo_k) changes by < rules.plateau_max from the
    one before (numbers["steps"]); the other checks are read there (means over the pilot seeds). Without a
    plateau in the pilot's horizon the plateau check fails and the others are read at the last evaluation."""
    curves = {arm: [heldout_curve(d) for d in dirs] for arm, dirs in runs.items()}
    init = init_heldout(init_dir)
    step, change = plateau_step(curves["grpo"], rules)
    last_steps = [c[-1]["step"] for cs in curves.values() for c in cs if c]
    at = step if step is not None else (min(last_steps) if last_steps else None)

    def value(arm: str, key: str) -> float:
        vals = [next((r[key] for r in c if r["step"] == at), None) for c in curves[arm]]
        return float(np.nanmean([np.nan if v is None else v for v in vals])) if vals else float("nan")

    def share(arm: str, dialect: str) -> float:
        rows = [next((r["shares"] for r in c if r["step"] == at and r["shares"]), None) for c in curves[arm]]
        return float(np.nanmean([np.nan if r is None else r[dialect] for r in rows])) if rows else float("nan")

    r, sk = rules, rules.solo_k
    grpo_b, tandem_a = share("grpo", "B"), share("tandem", "A")
    checks = {"grpo B share (%)": check(grpo_b, f">= {r.grpo_b_min:g}", grpo_b >= r.grpo_b_min)}
    for k in r.tax_ks:
        gain = _minus(value("grpo", f"tax@{k}"), init[f"tax@{k}"])
        checks[f"grpo - init tax@{k} (pts)"] = check(gain, f">= +{r.tax_gain_min:g}", gain >= r.tax_gain_min)
    gap = value("tandem", f"solo_pass@{sk}") - value("grpo", f"solo_pass@{sk}")
    checks |= {
        "tandem A share (%)": check(tandem_a, f">= {r.tandem_a_min:g}", tandem_a >= r.tandem_a_min),
        f"tandem - grpo solo pass@{sk} (pts)": check(gap, f"|gap| <= {r.solo_gap_max:g}", abs(gap) <= r.solo_gap_max),
        f"grpo solo pass@{sk}, change from the previous evaluation (pts)": check(
            change, f"|change| < {r.plateau_max:g} by the pilot's last evaluation", step is not None
        ),
    }
    numbers = {"split": "heldout", "steps": at, "plateau_step": step, "init": init, "curves": curves,
               "runs": {arm: [str(d) for d in dirs] for arm, dirs in runs.items()}}  # fmt: skip
    return gate(checks, numbers)


def headroom_of(scenario_dir: Path) -> dict:
    """H of a scenario's results folder: G0's numbers from gates.json and the initial senior's held-out record
    (init/heldout.jsonl); SystemExit(2) with one line naming what is missing."""
    gates_path, record = scenario_dir / "gates.json", scenario_dir / "init" / "heldout.jsonl"
    g0_gate = json.loads(gates_path.read_text()).get("G0") if gates_path.exists() else None
    if not g0_gate or not record.exists():
        print(f"error: {scenario_dir} needs gates.json with G0 and init/heldout.jsonl; run `make toy` (its G0 and "
              "held-out stages) first", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    return headroom(g0_gate["numbers"], json.loads(record.read_text().splitlines()[0]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="gate", required=True)
    a = sub.add_parser("g0", help="G0: the initial senior and junior after SFT")
    a.add_argument("--senior", type=Path, required=True)
    a.add_argument("--junior", type=Path, required=True)
    a.add_argument("--budget", type=int, help="new-token budget (default: the full scale's for dialects)")
    a.add_argument("--problems", type=int, default=G0_PROBLEMS)
    a.add_argument("--out", type=Path, help="also write the gate as JSON")
    a.add_argument("--samples", type=Path, help="also write every sampled answer G0 reads (parquet)")
    h = sub.add_parser("headroom", help="H: the two-point model's tax ceiling, from G0 and the initial senior's run")
    h.add_argument("--results", type=Path, required=True, help="results/toy/<scenario>: gates.json, init/heldout.jsonl")
    h.add_argument("--out", type=Path, help="also write the gate as JSON")
    b = sub.add_parser("g1", help="G1: the pilot's runs (after world.stage_pilot trained them)")
    b.add_argument("--pilot", type=Path, required=True, help="work/pilot/<scenario>: <arm>/seed<S> run folders")
    b.add_argument("--init", type=Path, required=True, help="the initial senior's held-out handoff run folder")
    b.add_argument("--out", type=Path, help="also write the gate as JSON")
    args = ap.parse_args(argv)
    if args.gate == "headroom":
        _finish("H", headroom_of(args.results), args.out)
        return
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
    budget = args.budget or SCALES["full"].budget(SCENARIO)
    _finish("G0", g0(args.senior, args.junior, budget, args.problems, args.samples), args.out)


def _finish(name: str, g: dict, out: Path | None) -> None:
    print_gate(name, g)
    if out:
        from tandem_eval.files import atomic_write_json
        from tandem_eval.schemas import to_jsonable

        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out, to_jsonable(g))


if __name__ == "__main__":
    main()
