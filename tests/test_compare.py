"""`compare --metric tax@K / retention@K`: two seniors' communication tax compared on four run
folders (each handoff run with its solo run), against a hand computation, plus compare's mismatch
message. Synthetic run folders (tests/run_fixtures.py), no model.

Run: .venv/bin/python -m pytest tests/test_compare.py -q
"""

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from run_fixtures import handoff_cfg, solo_cfg, write_run
from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.metrics.stats import paired_compare
from tandem_eval.metrics.tax import tax_difference
from tandem_eval.report.compare import solo_of, tax_compare
from tandem_eval.run.lens_layout import LensError
from tandem_eval.run.results import verify_run
from tandem_eval.schemas import Bootstrap

GROUPS = {"b1": "g1", "b2": "g2"}
P1, P2, P3 = ("b1", "p1"), ("b1", "p2"), ("b2", "p3")
# Correct flags (n = 2) -> pass@1 in percent, by hand:
#   A solo 100, 50, 0   A handoff 50, 0, 0    -> tax per problem 50, 50, 0
#   B solo 100, 100, 50 B handoff = B solo    -> tax per problem 0, 0, 0
A_SOLO = {P1: [True, True], P2: [True, False], P3: [False, False]}
A_HAND = {P1: [True, False], P2: [False, False], P3: [False, False]}
B_SOLO = {P1: [True, True], P2: [True, True], P3: [True, False]}
runner = CliRunner()


def _senior(root, name, solo_flags, hand_flags, record=False):
    """ROOT/NAME/solo and ROOT/NAME/handoff-paragraph; record=True stores the solo run in config.json."""
    kw = dict(benchmarks=("b1", "b2"), n=2, ks=(1, 2))
    solo = write_run(root / name / "solo", solo_cfg(f"toy:{name}", **kw), solo_flags, GROUPS)
    extra = {"solo_run": {"path": str(solo.path), "fingerprint": solo.config()["fingerprint"]}} if record else None
    hand = write_run(
        root / name / "handoff-paragraph", handoff_cfg(f"toy:{name}", "toy:jr", **kw), hand_flags, GROUPS, extra
    )
    return solo, hand


@pytest.fixture
def seniors(tmp_path):
    _senior(tmp_path, "a", A_SOLO, A_HAND)
    _senior(tmp_path, "b", B_SOLO, B_SOLO, record=True)
    return tmp_path


def _rows(root, metric, n_boot=500):
    table = tax_compare(
        verify_run(root / "a" / "handoff-paragraph"),
        verify_run(root / "b" / "handoff-paragraph"),
        metric,
        Bootstrap(n_boot=n_boot),
    )
    return {r["group"]: r for r in table.to_dict("records")}


def test_tax_difference_matches_hand_computation(seniors):
    rows = _rows(seniors, "tax@1")
    assert (rows["g1"]["a"], rows["g1"]["b"], rows["g1"]["diff"]) == pytest.approx((50.0, 0.0, 50.0))
    assert rows["g2"]["diff"] == pytest.approx(0.0)
    assert (rows["macro"]["a"], rows["macro"]["b"], rows["macro"]["diff"]) == pytest.approx((25.0, 0.0, 25.0))
    for r in rows.values():
        assert r["low"] <= r["diff"] <= r["high"]
    # exact sign flips by hand: g1 d = (50, 50): |T| = 50 for 2 of 4 flips; macro d = (50, 50, 0) w = (1/4, 1/4, 1/2)
    assert rows["g1"]["p_value"] == pytest.approx(0.5)
    assert rows["g2"]["p_value"] == pytest.approx(1.0)
    assert rows["macro"]["p_value"] == pytest.approx(0.5)
    assert [rows[g]["n_problems"] for g in ("g1", "g2", "macro")] == [2, 1, 3]


def test_retention_difference_matches_hand_computation(seniors):
    rows = _rows(seniors, "retention@1")
    # A: macro handoff (25 + 0) / 2 = 12.5 over macro solo (75 + 0) / 2 = 37.5 -> 1/3; B: 75 / 75 = 1
    assert rows["macro"]["a"] == pytest.approx(1 / 3) and rows["macro"]["b"] == pytest.approx(1.0)
    assert rows["macro"]["diff"] == pytest.approx(-2 / 3)
    assert rows["macro"]["low"] <= -2 / 3 <= rows["macro"]["high"]
    assert np.isnan(rows["g2"]["a"])  # A never solves g2 alone: its retention is undefined there
    # the swap test by hand: every way of swapping the seniors within the 3 problems
    a = np.array([[100, 50], [50, 0], [0, 0]], float)  # (solo, handoff) of A per problem
    b = np.array([[100, 100], [100, 100], [50, 50]], float)
    w = np.array([0.25, 0.25, 0.5])

    def ret(x):
        return (w @ x[:, 1]) / (w @ x[:, 0])

    observed, null = abs(ret(a) - ret(b)), []
    for swap in itertools.product([False, True], repeat=3):
        s = np.array(swap)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ret(np.where(s, b, a)) - ret(np.where(s, a, b))
        if np.isfinite(t):
            null.append(abs(t))
    assert rows["macro"]["p_value"] == pytest.approx(np.mean(np.array(null) >= observed - 1e-12))
    assert 0 < rows["macro"]["p_value"] <= 1


def test_joint_resampling_equals_paired_compare_of_per_problem_taxes():
    """tax is linear, so resampling four runs jointly = paired_compare on per-problem tax differences."""
    rng = np.random.default_rng(0)
    frames = []
    for run in range(4):
        rows = [
            {"benchmark": f"b{i % 3}", "group": f"g{i % 3}", "problem_id": f"q{i}", "sample_idx": j}
            for i in range(40)
            for j in range(4)
        ]
        df = pd.DataFrame(rows)
        df["correct"] = rng.random(len(df)) < 0.3 + 0.1 * run
        frames.append(df)
    rows = {r["group"]: r for r in tax_difference(*frames, k=2, boot=Bootstrap(n_boot=300, seed=1))}
    from tandem_eval.metrics.passk import per_problem_pass_at_k

    pp = [per_problem_pass_at_k(f, [2]).set_index(["benchmark", "problem_id"]) for f in frames]
    tax_a, tax_b = (100 * (pp[i]["pass@2"] - pp[i + 1]["pass@2"]) for i in (0, 2))
    ref = paired_compare(tax_a, tax_b, n_boot=300, seed=1, groups=pp[0]["group"])
    got = rows["macro"]
    assert (got["diff"], got["low"], got["high"], got["p_value"]) == pytest.approx(
        (ref.diff, ref.low, ref.high, ref.p_value)
    )


def test_identical_seniors_differ_by_nothing(tmp_path):
    _senior(tmp_path, "a", A_SOLO, A_HAND)
    _senior(tmp_path, "b", A_SOLO, A_HAND)
    rows = _rows(tmp_path, "tax@2")
    assert rows["macro"]["diff"] == 0 and rows["macro"]["p_value"] == 1.0


def test_cli_compare_tax_finds_solo_runs_and_writes_json(seniors):
    out = seniors / "cmp.json"
    result = runner.invoke(
        app, ["compare", str(seniors / "a"), str(seniors / "b"), "--metric", "tax@1", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    rows = {r["group"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["macro"]["diff"] == pytest.approx(25.0)
    assert solo_of(verify_run(seniors / "b" / "handoff-paragraph")).path == seniors / "b" / "solo"


def test_a_k_above_the_samples_per_problem_is_refused_naming_n(seniors):
    """pass@k with k above every problem's sample count: every value NaN, and compare said only that no
    problem has a value in both runs (with a raw warning first)."""
    said = {
        "solo_pass@4": "holds 2 sample(s) per problem and pass@k needs k <= n; pass a k of at most 2",
        "tax@4": "no problem has 4 or more samples in all four runs",
    }
    for metric, text in said.items():
        result = runner.invoke(app, ["compare", str(seniors / "a"), str(seniors / "b"), "--metric", metric])
        assert result.exit_code == 2 and text in " ".join(result.output.split()), result.output


def test_mismatched_problems_name_the_cli_option(tmp_path):
    _senior(tmp_path, "a", A_SOLO, A_HAND)
    _senior(tmp_path, "b", {P1: [True, True], P2: [True, True]}, {P1: [True, True], P2: [True, True]})
    for metric in ("tax@1", "solo_pass@1"):
        result = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", metric])
        assert result.exit_code == 2, result.output
        msg = " ".join(result.output.split())
        assert "--on-mismatch intersect" in msg and "on_mismatch=" not in msg
    with pytest.raises(LensError, match="1 only in A, 0 only in B"):
        tax_compare(
            verify_run(tmp_path / "a" / "handoff-paragraph"), verify_run(tmp_path / "b" / "handoff-paragraph"), "tax@1"
        )
    ok = tax_compare(
        verify_run(tmp_path / "a" / "handoff-paragraph"),
        verify_run(tmp_path / "b" / "handoff-paragraph"),
        "tax@1",
        Bootstrap(n_boot=100),
        on_mismatch="intersect",
    )
    assert ok.set_index("group").loc["macro", "n_problems"] == 2
