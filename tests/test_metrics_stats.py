"""Tests for tandem_eval.metrics.stats and .tax: macro means, bootstrap CI coverage on simulated
paired runs, permutation p-value calibration, mismatch refusal, and communication-tax golden cases.

Simulations are seeded, so every test is deterministic; tolerances are stated where used.
Run: .venv/bin/python -m pytest tests/test_metrics_stats.py -q
"""

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from tandem_eval.metrics.stats import (
    CI,
    Paired,
    bootstrap_ci,
    macro_mean,
    mcnemar_exact,
    paired_compare,
    scoped_cis,
    sign_flip_p_value,
)
from tandem_eval.metrics.tax import communication_tax


def simulate_pair(rng, n_problems, delta, n_samples=8):
    """Per-problem pass@1 of two seniors on the same problems; E[a - b] = delta exactly.

    Problem difficulty p_i is shared by both runs (that is what makes the comparison paired);
    each run's pass@1 is a Binomial(n_samples, .)/n_samples estimate."""
    p = rng.uniform(0.1, 0.85, size=n_problems)
    a = rng.binomial(n_samples, p + delta) / n_samples
    b = rng.binomial(n_samples, p) / n_samples
    index = [f"q{i}" for i in range(n_problems)]
    return pd.Series(a, index=index), pd.Series(b, index=index)


# ---- macro_mean and bootstrap_ci ------------------------------------------------------------


def test_macro_mean_weights_groups_equally():
    values = pd.Series([1.0, 1.0, 1.0, 0.0], index=list("abcd"))
    groups = pd.Series(["x", "x", "x", "y"], index=list("abcd"))
    assert macro_mean(values, groups) == pytest.approx(0.5)
    assert macro_mean(values, groups.iloc[::-1]) == pytest.approx(0.5)  # aligned by label
    assert math.isnan(macro_mean(pd.Series([1.0, np.nan], index=list("ab")), pd.Series(["x", "y"], index=list("ab"))))


def test_bootstrap_ci_basic_properties():
    values = pd.Series(np.linspace(0, 1, 50))
    ci = bootstrap_ci(values, n_boot=500, seed=3)
    assert isinstance(ci, CI) and ci.n_boot == 500
    assert ci.estimate == pytest.approx(0.5)
    assert ci.low < ci.estimate < ci.high
    # SE of a mean of 50 values: sd / sqrt(50) ~ 0.041; bootstrap within 20 %.
    assert ci.se == pytest.approx(values.std(ddof=0) / math.sqrt(50), rel=0.2)
    assert bootstrap_ci(values, n_boot=500, seed=3) == ci  # seeded -> reproducible
    const = bootstrap_ci(pd.Series([0.3] * 10), n_boot=200)
    assert (const.low, const.high, const.se) == pytest.approx((0.3, 0.3, 0.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ci.estimate = 1.0


def test_bootstrap_ci_stratified_macro_and_stat_fn():
    # Group x (40 problems, mean 1) and group y (10 problems, mean 0): macro 0.5, pooled 0.8.
    values = pd.Series([1.0] * 40 + [0.0] * 10, index=[f"q{i}" for i in range(50)])
    groups = pd.Series(["x"] * 40 + ["y"] * 10, index=values.index)
    ci = bootstrap_ci(values, n_boot=300, groups=groups)
    # Stratified: every resample keeps 40 x and 10 y problems, so the macro never moves.
    assert (ci.estimate, ci.low, ci.high) == pytest.approx((0.5, 0.5, 0.5))
    assert bootstrap_ci(values, n_boot=300).estimate == pytest.approx(0.8)
    frame = pd.DataFrame({"solo": [50.0, 100.0, 0.0, 50.0], "handoff": [25.0, 100.0, 0.0, 25.0]})
    ratio = bootstrap_ci(frame, stat_fn=lambda m: m[:, 1] / m[:, 0], n_boot=300)
    assert ratio.estimate == pytest.approx(150 / 200)
    with pytest.raises(ValueError, match="stat_fn"):
        bootstrap_ci(frame)


def test_bootstrap_ci_coverage_on_simulated_paired_runs():
    """300 datasets of two paired seniors with true difference 0.05 (100 problems each).

    Tolerance: a nominal 95 % CI should cover the truth in [90 %, 99 %] of datasets; with 300
    datasets the coverage's own standard error is ~1.3 points, so this band is >= 3.5 SE wide
    on the low side and detects an interval that is too narrow (e.g. resampling samples instead
    of problems) or badly miscentred."""
    rng = np.random.default_rng(20260601)
    covered = 0
    for i in range(300):
        a, b = simulate_pair(rng, n_problems=100, delta=0.05)
        res = paired_compare(a, b, n_boot=500, seed=i)
        covered += res.low <= 0.05 <= res.high
    assert 0.90 <= covered / 300 <= 0.99, covered / 300


def test_stratified_coverage_of_macro_difference():
    """Same check for the macro: group x (60 problems, delta 0.10) and y (20, delta 0.0) ->
    true macro difference 0.05; 200 datasets, coverage tolerance [88 %, 99.5 %]."""
    rng = np.random.default_rng(7)
    covered = 0
    for i in range(200):
        ax, bx = simulate_pair(rng, 60, 0.10)
        ay, by = simulate_pair(rng, 20, 0.0)
        ay.index = by.index = [f"y{j}" for j in range(20)]
        groups = pd.Series(["x"] * 60 + ["y"] * 20, index=list(ax.index) + list(ay.index))
        res = paired_compare(pd.concat([ax, ay]), pd.concat([bx, by]), n_boot=400, seed=i, groups=groups)
        covered += res.low <= 0.05 <= res.high
    assert 0.88 <= covered / 200 <= 0.995, covered / 200


# ---- paired_compare p-values ----------------------------------------------------------------


def test_permutation_p_value_is_calibrated_under_the_null():
    """200 null datasets (both runs from the same distribution): the fraction of p < 0.05 must be
    in [0.01, 0.10] (expected 0.05; its SE over 200 datasets is ~0.015)."""
    rng = np.random.default_rng(11)
    p_values = []
    for i in range(200):
        a, b = simulate_pair(rng, n_problems=60, delta=0.0)
        p_values.append(paired_compare(a, b, n_boot=500, seed=i).p_value)
    p_values = np.array(p_values)
    assert 0.01 <= (p_values < 0.05).mean() <= 0.10
    assert 0.35 <= (p_values < 0.5).mean() <= 0.65  # roughly uniform, not just in the tail


def test_p_value_small_under_a_big_effect():
    a, b = simulate_pair(np.random.default_rng(5), n_problems=100, delta=0.15)
    for test in ("permutation", "bootstrap"):
        res = paired_compare(a, b, n_boot=1000, test=test)
        assert isinstance(res, Paired)
        assert ("permutation" if test == "permutation" else "centred bootstrap") in res.method
        assert res.p_value < 0.01 and res.low > 0, (test, res)
        assert res.diff == pytest.approx(a.mean() - b.mean())
        assert res.n_problems == 100


def test_exact_sign_flip_p_value_golden():
    # 5 positive distinct differences: only all-plus and all-minus are as extreme -> p = 2/32.
    d = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    assert sign_flip_p_value(d, np.full(5, 0.2), n_perm=10, seed=0) == pytest.approx(2 / 32)
    a = pd.Series(d + 1.0, index=list("abcde"))
    b = pd.Series(np.ones(5), index=list("abcde"))
    assert paired_compare(a, b, n_boot=100).p_value == pytest.approx(2 / 32)
    # All differences zero: every flip ties with the observed statistic -> p = 1.
    assert paired_compare(b, b, n_boot=100).p_value == pytest.approx(1.0)


def test_mcnemar_exact_is_the_exact_sign_flip_p_of_binary_outcomes():
    rng = np.random.default_rng(3)
    for n in (6, 12, 16):  # small enough for sign_flip_p_value's exact enumeration
        a, b = (pd.Series(rng.integers(0, 2, n) * 100.0, index=range(n)) for _ in range(2))
        d = (a - b).to_numpy()
        got = mcnemar_exact(a, b)
        assert got["p_value"] == pytest.approx(sign_flip_p_value(d, np.full(n, 1 / n), 10, 0))
        assert got["a_only"] == int((d > 0).sum()) and got["n_discordant"] == int((d != 0).sum())
    # 7 discordant problems all one way: 2 / 2**7; none discordant: p 1
    a, b = pd.Series([1.0] * 7 + [0.0] * 3), pd.Series([0.0] * 10)
    assert mcnemar_exact(a, b)["p_value"] == pytest.approx(2 / 128) and mcnemar_exact(b, b)["p_value"] == 1.0
    with pytest.raises(ValueError, match="binary outcomes"):
        mcnemar_exact(pd.Series([0.5, 1.0]), pd.Series([0.0, 0.0]))


def test_paired_compare_refuses_mismatched_problem_sets():
    a = pd.Series(np.ones(10), index=[f"q{i}" for i in range(10)])
    b = pd.Series(np.ones(10), index=[f"q{i}" for i in range(3, 13)])  # 3 only in a, 3 only in b
    with pytest.raises(ValueError, match=r"6 problems are in only one run"):
        paired_compare(a, b)
    res = paired_compare(a, b, on_mismatch="intersect", n_boot=100)
    assert res.n_problems == 7 and res.diff == 0.0
    with pytest.raises(ValueError, match="test must be"):
        paired_compare(a, a, test="t-test")


# ---- communication tax ----------------------------------------------------------------------


def make_run(rng, spec, n_samples=8, accuracy=None):
    """Sample table: spec = [(benchmark, group, n_problems)]; per-problem accuracy ~ U(0.1, 0.9)."""
    rows = []
    for bench, group, n_problems in spec:
        for i in range(n_problems):
            p = rng.uniform(0.1, 0.9) if accuracy is None else accuracy
            for s in range(n_samples):
                rows.append((f"{bench}-{i}", bench, group, s, bool(rng.uniform() < p)))
    return pd.DataFrame(rows, columns=["problem_id", "benchmark", "group", "sample_idx", "correct"])


SPEC = [("aime24", "aime", 10), ("aime25", "aime", 10), ("amc23", "amc", 15)]


def test_tax_identical_runs_have_zero_tax_and_full_retention():
    solo = make_run(np.random.default_rng(0), SPEC)
    out = communication_tax(solo, solo.copy(), ks=[1, 4], n_boot=300)
    json.dumps(out, allow_nan=False)
    entries = [out["macro"]["pass@4"], out["per_group"]["aime"]["pass@1"], out["per_benchmark"]["amc23"]["pass@4"]]
    for entry in entries:
        assert entry["tax"]["estimate"] == pytest.approx(0.0)
        assert entry["tax"]["low"] <= 0.0 <= entry["tax"]["high"]
        assert entry["retention"]["estimate"] == pytest.approx(1.0)
        assert entry["solo"]["estimate"] == pytest.approx(entry["handoff"]["estimate"])
    assert out["per_group"]["aime"]["pass@1"]["n_problems"] == 20


def test_tax_all_wrong_handoff_retains_nothing():
    rng = np.random.default_rng(1)
    solo = make_run(rng, SPEC)
    handoff = solo.assign(correct=False)
    out = communication_tax(solo, handoff, ks=[1, 8], n_boot=300)
    macro = out["macro"]["pass@1"]
    assert macro["retention"]["estimate"] == 0.0
    assert macro["handoff"]["estimate"] == 0.0
    assert macro["tax"]["estimate"] == pytest.approx(macro["solo"]["estimate"])
    assert macro["tax"]["low"] > 0 and macro["tax_p_value"] < 0.01
    # Macro = mean of the two groups' values (solo in percent).
    groups = out["per_group"]
    assert macro["solo"]["estimate"] == pytest.approx(
        (groups["aime"]["pass@1"]["solo"]["estimate"] + groups["amc"]["pass@1"]["solo"]["estimate"]) / 2
    )


def test_tax_matches_summaries_and_handles_zero_solo():
    rng = np.random.default_rng(2)
    solo = make_run(rng, SPEC)
    handoff = make_run(rng, SPEC)
    solo.loc[solo["benchmark"] == "aime25", "correct"] = False  # solo 0 -> retention undefined
    out = communication_tax(solo, handoff, ks=[2], n_boot=200)
    assert out["per_benchmark"]["aime25"]["pass@2"]["retention"]["estimate"] is None
    json.dumps(out, allow_nan=False)
    from tandem_eval.metrics.passk import summarize_pass_at_k

    s, h = summarize_pass_at_k(solo, [2]), summarize_pass_at_k(handoff, [2])
    entry = out["macro"]["pass@2"]
    assert entry["solo"]["estimate"] == pytest.approx(s["macro"]["pass@2"])
    assert entry["tax"]["estimate"] == pytest.approx(s["macro"]["pass@2"] - h["macro"]["pass@2"])


def test_tax_refuses_different_problem_sets():
    rng = np.random.default_rng(3)
    solo = make_run(rng, SPEC)
    handoff = solo[solo["problem_id"] != "amc23-0"]
    with pytest.raises(ValueError, match="1 differ"):
        communication_tax(solo, handoff, ks=[1], n_boot=50)


# ---- swap_p_value (tax@K / retention@K of two seniors) -------------------------------------------
def test_swap_p_value_of_a_mean_difference_is_the_sign_flip_test():
    from tandem_eval.metrics.stats import _macro_weights, swap_p_value

    rng = np.random.default_rng(3)
    for n in (6, 40):  # exact enumeration and Monte Carlo
        a, b = rng.normal(0.3, 1, size=(n, 1)), rng.normal(0, 1, size=(n, 1))
        groups = np.arange(n) % 3
        w = _macro_weights(groups, n)
        got = swap_p_value(a, b, lambda m: m[:, 0], w, 500, 0)
        assert got == pytest.approx(sign_flip_p_value((a - b)[:, 0], w, 500, 0))


def test_swap_p_value_of_identical_runs_is_one_and_of_separated_runs_small():
    from tandem_eval.metrics.stats import swap_p_value

    rng = np.random.default_rng(4)
    solo = rng.uniform(50, 100, size=(12, 1))
    a = np.hstack([solo, solo * 0.5])  # (solo, handoff): retention 0.5
    b = np.hstack([solo, solo])  # retention 1
    w = np.full(12, 1 / 12)
    ratio = lambda m: m[:, 1] / m[:, 0]  # noqa: E731
    assert swap_p_value(a, a, ratio, w, 200, 0) == 1.0
    assert swap_p_value(a, b, ratio, w, 200, 0) == pytest.approx(2 / 2**12)  # only the two extreme swaps


# ---- stats.scoped_cis: the one CI builder per scope --------------------------------------------


def _frame(n_per_group=(60, 30), seeds=(0,), seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for gi, n in enumerate(n_per_group):
        mu = rng.normal(size=n) + gi
        for s in seeds:
            rows += [
                {
                    "benchmark": f"b{gi}",
                    "problem_id": str(i),
                    "group": f"g{gi}",
                    "seed": s,
                    "value": m + 0.3 * rng.normal(),
                }
                for i, m in enumerate(mu)
            ]
    return pd.DataFrame(rows).set_index(["benchmark", "problem_id"])


def test_scoped_ci_of_one_group_matches_scipy_bootstrap():
    from scipy.stats import bootstrap

    v = _frame((200,))
    ci = scoped_cis(v, n_boot=8000, seed=1)["group"]["g0"]
    ref = bootstrap((v["value"].to_numpy(),), np.mean, n_resamples=8000, method="percentile", random_state=2)
    assert ci.estimate == pytest.approx(v["value"].mean())
    assert ci.low == pytest.approx(ref.confidence_interval.low, abs=0.02)
    assert ci.high == pytest.approx(ref.confidence_interval.high, abs=0.02)


def test_stratified_macro_ci_matches_a_brute_force_bootstrap():
    v = _frame((60, 20))
    ci = scoped_cis(v, n_boot=6000, seed=0)["macro"]
    rng = np.random.default_rng(5)
    parts = [p["value"].to_numpy() for _, p in v.groupby("group")]
    draws = [np.mean([rng.choice(p, len(p)).mean() for p in parts]) for _ in range(6000)]
    assert ci.estimate == pytest.approx(np.mean([p.mean() for p in parts]))
    low, high = np.quantile(draws, [0.025, 0.975])
    assert (ci.low, ci.high) == pytest.approx((low, high), abs=0.03)


def test_clustered_ci_resamples_seeds_and_problems_like_a_brute_force():
    v = _frame((40, 20), seeds=(0, 1, 2))
    ci = scoped_cis(v, n_boot=4000, seed=0, cluster="seed")["macro"]
    rng = np.random.default_rng(7)
    mats = [p.pivot_table(index=p.index, columns="seed", values="value").to_numpy().T for _, p in v.groupby("group")]
    draws = []
    for _ in range(4000):
        s = rng.integers(0, 3, 3)
        draws.append(np.mean([m[s][:, rng.integers(0, m.shape[1], m.shape[1])].mean() for m in mats]))
    low, high = np.quantile(draws, [0.025, 0.975])
    assert (ci.low, ci.high) == pytest.approx((low, high), abs=0.04)
    plain = scoped_cis(v, n_boot=4000, seed=0)["macro"]  # treating seed x problem cells as independent problems
    assert ci.high - ci.low > plain.high - plain.low  # the clustered CI is wider


def test_one_seed_clustered_equals_the_plain_problem_bootstrap():
    v = _frame((30, 10))
    assert scoped_cis(v, n_boot=500, cluster="seed") == scoped_cis(v, n_boot=500)


def test_paired_stats_come_from_one_joint_resampling():
    v = _frame((50,)).assign(other=lambda d: d["value"] + 1.0)
    cis = scoped_cis(v, ["value", "other"], stats={"diff": lambda m: m[:, 1] - m[:, 0]}, n_boot=300)
    d = cis["group"]["g0"]["diff"]
    assert (d.estimate, d.low, d.high) == pytest.approx((1.0, 1.0, 1.0))  # a constant shift has no spread


def test_p_values_print_with_two_significant_digits_not_as_0_00():
    from tandem_eval.metrics.registry import fmt_p

    assert [fmt_p(p) for p in (0.0015, 0.23, 1.0, 0.05, 3e-5, None, float("nan"))] == [
        "0.0015",
        "0.23",
        "1",
        "0.05",
        "<1e-4",
        "-",
        "-",
    ]
