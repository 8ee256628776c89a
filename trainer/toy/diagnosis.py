"""Why a dialects gate failed, computed from the samples it was read from (results/<sc>/evidence/), not from a reading.

G0's checks are recomputed from G0's committed samples (evidence/g0-samples.parquet: one row per sampled answer,
its `run`, `problem_id`, `correct` and `dialect`), each with a 95% bootstrap CI over problems
(tandem_eval.metrics.stats.bootstrap_ci: the 200 problems resampled, every run's samples of a problem kept
together, so paired runs stay paired). A check whose CI lies wholly on the failing side of its threshold failed
beyond sampling noise; one whose CI straddles it is within noise of passing.

When G0 stops the run, H (the headroom check) never sees the initial senior's held-out handoff run. Its
prediction is still computable from G0 alone: the two-point model (gates.two_point_pass_at_k) fitted on G0's
forced runs predicts the initial senior's own tax at its evaluation-decoding dialect shares (the `senior` run),
so "predicted H" is the tax at 100% B minus that predicted tax, at pass@1 and pass@4, with the model's fit to the
initial senior's measured solo accuracy beside it. It says whether the data left the design headroom, had G0
passed; it is a diagnosis, never a gate.

    python -m trainer.toy.diagnosis results/toy/dialects     # prints it; the summary records it (stopped entries)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from tandem_eval.metrics.stats import bootstrap_ci
from trainer.toy.gates import G0_EVIDENCE, G0_RULES, HEADROOM_KS, HEADROOM_MIN, G0Rules, two_point_pass_at_k
from trainer.toy.markdown import diagnosis_table

G0_SAMPLES = G0_EVIDENCE  # under a scenario's results folder (world.keep_evidence)
DIALECTS = ("A", "B")


def per_problem(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per problem, a column per (run, quantity) in 0-1: `acc|RUN` (share of its samples correct) and
    `share_D|RUN` (share written in dialect D)."""
    g = samples.groupby(["problem_id", "run"])
    cols = {"acc": g["correct"].mean()}
    for d in ("A", "B", "plain", "mixed"):
        cols[f"share_{d}"] = g["dialect"].apply(lambda s, d=d: float((s == d).mean()))
    wide = pd.DataFrame(cols).unstack("run")
    wide.columns = [f"{q}|{run}" for q, run in wide.columns]
    return wide


def _index(columns: list[str]) -> Callable[[str], int]:
    return columns.index


def g0_statistics(rules: G0Rules = G0_RULES) -> dict[str, tuple[Callable, Callable[[float], bool], str]]:
    """{check: (statistic of the column means (B, m) -> (B,), pass(value), rule)} for G0's checks that samples
    decide (the junior's reference NLL is a teacher-forced number, not sampled: it is not here)."""
    r = rules
    (lo_a, hi_a), (lo_b, hi_b) = r.a_share, r.b_share

    def col(name: str) -> Callable:
        return lambda m, ix: m[:, ix(name)]

    def pct(f: Callable) -> Callable:
        return lambda m, ix: 100.0 * f(m, ix)

    stats = {
        "init A share (%)": (pct(col("share_A|senior (T 1)")), lambda v: lo_a <= v <= hi_a, f"{lo_a:g}-{hi_a:g}"),
        "init B share (%)": (pct(col("share_B|senior (T 1)")), lambda v: lo_b <= v <= hi_b, f"{lo_b:g}-{hi_b:g}"),
        "init mixed share (%)": (
            pct(col("share_mixed|senior (T 1)")), lambda v: v <= r.mixed_max, f"<= {r.mixed_max:g}"
        ),
        "init accuracy forced A - forced B (pts)": (
            lambda m, ix: 100.0 * (m[:, ix("acc|senior forced A")] - m[:, ix("acc|senior forced B")]),
            lambda v: abs(v) <= r.forcing_max,
            f"|A - B| <= {r.forcing_max:g}",
        ),
        "junior after A / own": (
            lambda m, ix: m[:, ix("acc|junior after A")] / m[:, ix("acc|junior forced A")],
            lambda v: v >= r.junior_after_a_min,
            f">= {r.junior_after_a_min:g}",
        ),
        "junior after B / own": (
            lambda m, ix: m[:, ix("acc|junior after B")] / m[:, ix("acc|junior forced A")],
            lambda v: v <= r.junior_after_b_max,
            f"<= {r.junior_after_b_max:g}",
        ),
    }  # fmt: skip
    if r.a_share_eval_min is not None:
        stats["init A share at the evaluation decoding (%)"] = (
            pct(col("share_A|senior")), lambda v: v >= r.a_share_eval_min, f">= {r.a_share_eval_min:g}"
        )  # fmt: skip
    return stats


def predicted_headroom(m: np.ndarray, ix: Callable[[str], int], k: int) -> np.ndarray:
    """H's value with the initial senior's tax@k predicted, not measured: 100 (S_B - F_B) minus the two-point
    model's solo minus handoff pass@k at the `senior` run's dialect shares (the evaluation decoding). (B,)."""
    senior = {d: m[:, ix(f"acc|senior forced {d}")] for d in DIALECTS}
    junior = {d: m[:, ix(f"acc|junior after {d}")] for d in DIALECTS}
    shares = {d: m[:, ix(f"share_{d}|senior")] for d in DIALECTS}
    tax = two_point_pass_at_k(senior, shares, k) - two_point_pass_at_k(junior, shares, k)
    return 100.0 * (senior["B"] - junior["B"]) - tax


def _ci_row(wide: pd.DataFrame, stat: Callable, ok: Callable[[float], bool] | None, rule: str) -> dict:
    ix = _index(list(wide.columns))
    ci = bootstrap_ci(wide, stat_fn=lambda means: stat(means, ix))
    row = {"value": ci.estimate, "ci": [ci.low, ci.high], "rule": rule}
    if ok is not None:
        passes, lo_ok, hi_ok = ok(ci.estimate), ok(ci.low), ok(ci.high)
        row["pass"] = bool(passes)
        # beyond noise: the whole interval sits on the side of the estimate's verdict
        row["within_noise"] = not (passes == lo_ok == hi_ok)
    return row


def g0_diagnosis(samples: pd.DataFrame, rules: G0Rules = G0_RULES) -> dict:
    """G0's sampled checks recomputed with 95% CIs, H predicted from G0 alone, and the model's fit."""
    wide = per_problem(samples)
    checks = {name: _ci_row(wide, stat, ok, rule) for name, (stat, ok, rule) in g0_statistics(rules).items()}
    headroom = {
        f"predicted H at pass@{k} (pts)": _ci_row(
            wide, lambda m, ix, k=k: predicted_headroom(m, ix, k), lambda v: v >= HEADROOM_MIN, f">= +{HEADROOM_MIN:g}"
        )
        for k in HEADROOM_KS
    }
    senior = {d: wide[f"acc|senior forced {d}"].mean() for d in DIALECTS}
    shares = {d: wide[f"share_{d}|senior"].mean() for d in DIALECTS}
    fit = {
        "init solo pass@1 measured (G0 'senior' run)": 100.0 * float(wide["acc|senior"].mean()),
        "init solo pass@1 predicted (two-point model)": float(two_point_pass_at_k(senior, shares, 1)),
    }
    return {
        "source": G0_SAMPLES,
        "n_problems": int(len(wide)),
        "n_samples": int(samples.groupby(["problem_id", "run"]).size().max()),
        "ci": "95% bootstrap over problems (metrics.stats.bootstrap_ci), each problem's runs resampled together",
        "checks": checks,
        "predicted_headroom": headroom,
        "fit": fit,
    }


def diagnosis_of(scenario_dir: Path) -> dict | None:
    """The diagnosis of a scenario folder whose G0 samples are committed; None without them."""
    path = scenario_dir / G0_SAMPLES
    return g0_diagnosis(pd.read_parquet(path)) if path.exists() else None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", type=Path, help="results/toy/<scenario> (its evidence/g0-samples.parquet)")
    args = ap.parse_args(argv)
    diag = diagnosis_of(args.scenario)
    if diag is None:
        missing = args.scenario / G0_SAMPLES
        print(f"error: {missing} does not exist; run `make toy` (its G0 stage) first", file=sys.stderr)
        raise SystemExit(2)
    print("\n".join(diagnosis_table(diag)))


if __name__ == "__main__":
    main()
