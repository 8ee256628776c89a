"""Tests for tandem_eval.metrics.passk: the estimator against exact combinatorics, and the
per-problem / per-benchmark / per-group / macro aggregation on hand-built sample tables.

Run: .venv/bin/python -m pytest tests/test_metrics_passk.py -q
"""

import json
import math
import warnings
from fractions import Fraction

import pandas as pd
import pytest

from tandem_eval.metrics.passk import pass_at_k, per_problem_pass_at_k, summarize_pass_at_k


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def make_samples(spec):
    """spec: list of (benchmark, group, problem_id, [correct flags]) -> a sample table."""
    rows = [
        {"problem_id": pid, "benchmark": bench, "group": group, "sample_idx": i, "correct": flag}
        for bench, group, pid, flags in spec
        for i, flag in enumerate(flags)
    ]
    return pd.DataFrame(rows)


# ---- pass_at_k ------------------------------------------------------------------------------


def test_pass_at_k_matches_exact_formula_on_grid():
    for n in range(1, 33):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(exact_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


@pytest.mark.parametrize("n,c,k", [(200, 3, 100), (500, 1, 250), (1000, 10, 7), (300, 299, 1)])
def test_pass_at_k_stable_where_binomials_overflow(n, c, k):
    # C(500, 250) ~ 1e149 and C(1000, 500) overflow-prone; the product form must stay accurate.
    assert pass_at_k(n, c, k) == pytest.approx(exact_pass_at_k(n, c, k), rel=1e-12)


def test_pass_at_k_edge_cases():
    assert pass_at_k(8, 0, 1) == 0.0
    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 8, 1) == 1.0
    assert pass_at_k(8, 8, 8) == 1.0
    assert pass_at_k(8, 1, 8) == 1.0  # k = n: any correct sample is in the only k-subset
    assert pass_at_k(8, 5, 4) == 1.0  # n - c = 3 < k = 4: exactly 1.0, not 0.9999...
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert pass_at_k(8, 3, 4) == pytest.approx(1 - 5 / 70)
    assert isinstance(pass_at_k(8, 3, 2), float)


@pytest.mark.parametrize(
    "n,c,k,fragment",
    [
        (4, 1, 5, "k=5 exceeds"),
        (4, 5, 1, "c=5"),
        (-1, 0, 1, "n >= 0"),
        (4, -1, 1, "c >= 0"),
        (4, 1, 0, "k >= 1"),
        (4, 1, -2, "k >= 1"),
        (0, 0, 1, "exceeds"),
    ],
)
def test_pass_at_k_rejects_bad_arguments(n, c, k, fragment):
    with pytest.raises(ValueError, match=fragment):
        pass_at_k(n, c, k)


def test_pass_at_k_rejects_non_integers():
    with pytest.raises(TypeError):
        pass_at_k(8, 2.5, 1)


# ---- per_problem_pass_at_k ------------------------------------------------------------------


def test_per_problem_table():
    samples = make_samples(
        [
            ("amc23", "amc", "p1", [True, False, False, True]),
            ("amc23", "amc", "p2", [False, False, False, False]),
        ]
    )
    table = per_problem_pass_at_k(samples, [1, 2, 4])
    assert list(table.columns) == ["problem_id", "benchmark", "group", "n", "c", "pass@1", "pass@2", "pass@4"]
    p1 = table.set_index("problem_id").loc["p1"]
    assert (p1["n"], p1["c"]) == (4, 2)
    assert p1["pass@1"] == pytest.approx(0.5)
    assert p1["pass@2"] == pytest.approx(1 - 1 / 6)  # C(2,2)/C(4,2)
    assert p1["pass@4"] == 1.0
    assert table.set_index("problem_id").loc["p2", ["pass@1", "pass@4"]].tolist() == [0.0, 0.0]


def test_per_problem_same_id_in_two_benchmarks_is_two_problems():
    samples = make_samples([("aime24", "aime", "1", [True]), ("aime25", "aime", "1", [False])])
    assert len(per_problem_pass_at_k(samples, [1])) == 2


def test_too_few_samples_give_nan_and_one_warning():
    samples = make_samples(
        [
            ("amc23", "amc", "p1", [True, False, False, True]),
            ("amc23", "amc", "p2", [True, False]),  # only 2 samples: pass@4 undefined
        ]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = per_problem_pass_at_k(samples, [1, 4])
    assert len(caught) == 1 and "fewer than k" in str(caught[0].message)
    p2 = table.set_index("problem_id").loc["p2"]
    assert p2["pass@1"] == pytest.approx(0.5) and math.isnan(p2["pass@4"])


@pytest.mark.parametrize(
    "mutate,fragment",
    [
        (lambda df: df.drop(columns="group"), "lack columns"),
        (lambda df: pd.concat([df, df.iloc[:1]]), "duplicate"),
        (lambda df: df.assign(correct=[True, None, False, True]), "not True/False"),
        (lambda df: df.assign(correct=["True", "False", "False", "True"]), "not True/False"),
        (lambda df: df.iloc[:0], "empty"),
    ],
)
def test_per_problem_refuses_distorting_inputs(mutate, fragment):
    samples = make_samples([("amc23", "amc", "p1", [True, False, False, True])])
    with pytest.raises(ValueError, match=fragment):
        per_problem_pass_at_k(mutate(samples), [1])


def test_benchmark_with_two_groups_is_refused():
    samples = make_samples([("amc23", "amc", "p1", [True]), ("amc23", "other", "p2", [True])])
    with pytest.raises(ValueError, match="more than one group"):
        per_problem_pass_at_k(samples, [1])


# ---- summarize_pass_at_k --------------------------------------------------------------------


def test_summarize_macro_weights_groups_not_benchmarks():
    # Group "aime" pools aime24 (2 problems) and aime25 (1 problem); "amc" has 1 problem.
    # pass@1 per problem: aime24 -> 1.0, 0.5; aime25 -> 0.0; amc -> 0.25.
    samples = make_samples(
        [
            ("aime24", "aime", "a", [True, True, True, True]),
            ("aime24", "aime", "b", [True, True, False, False]),
            ("aime25", "aime", "c", [False, False, False, False]),
            ("amc23", "amc", "d", [True, False, False, False]),
        ]
    )
    out = summarize_pass_at_k(samples, [1, 4])
    assert out["per_benchmark"]["aime24"]["pass@1"] == pytest.approx(75.0)
    assert out["per_benchmark"]["aime25"]["pass@1"] == pytest.approx(0.0)
    assert out["per_benchmark"]["amc23"]["pass@1"] == pytest.approx(25.0)
    # Pooled group: mean over its 3 problems (50), not the mean of its benchmarks (37.5).
    assert out["per_group"]["aime"]["pass@1"] == pytest.approx(50.0)
    assert out["per_group"]["amc"]["pass@1"] == pytest.approx(25.0)
    # Macro: equal weight per group (37.5), not per problem (43.75) nor per benchmark (33.3).
    assert out["macro"]["pass@1"] == pytest.approx(37.5)
    # pass@4 with n = 4 is "any correct": aime -> 2/3, amc -> 1.
    assert out["per_group"]["aime"]["pass@4"] == pytest.approx(200 / 3)
    assert out["macro"]["pass@4"] == pytest.approx((200 / 3 + 100) / 2)
    assert out["n_problems"] == {
        "per_benchmark": {"aime24": 2, "aime25": 1, "amc23": 1},
        "per_group": {"aime": 3, "amc": 1},
        "macro": 4,
    }
    json.dumps(out, allow_nan=False)  # strict-JSON serialisable


def test_summarize_undefined_k_gives_none_not_crash():
    samples = make_samples([("amc23", "amc", "p1", [True, False])])
    with pytest.warns(UserWarning, match="fewer than k"):
        out = summarize_pass_at_k(samples, [1, 4])
    assert out["macro"]["pass@1"] == pytest.approx(50.0)
    assert out["macro"]["pass@4"] is None
    json.dumps(out, allow_nan=False)


# ---- macro label: the paper's name only for the paper's sets (issue 10.1) --------------------


def paper_sized_samples(sizes=None):
    sizes = sizes or {"aime": 90, "amc": 121, "minerva": 272, "olympiadbench": 581}
    return make_samples([(g, g, f"{g}/{i}", [i % 2 == 0]) for g, n in sizes.items() for i in range(n)])


def test_summarize_labels_the_macro_of_the_papers_sets_macro(caplog):
    with caplog.at_level("WARNING"):
        out = summarize_pass_at_k(paper_sized_samples(), [1])
    assert (out["macro_label"], out["paper_sets"], out["paper_sets_reasons"]) == ("macro", True, [])
    assert "not the paper's problem sets" not in caplog.text


def test_summarize_labels_any_other_macro_and_says_why_in_the_summary(caplog):
    """The reasons go into the summary (the terminal table's caption prints them under the macro row);
    nothing is logged, so a command says it once, where the number is."""
    samples = paper_sized_samples({"aime": 90, "amc": 40, "minerva": 272, "olympiadbench": 675})
    with caplog.at_level("WARNING"):
        out = summarize_pass_at_k(samples, [1])
    assert out["macro_label"] == "macro over these groups" and out["paper_sets"] is False
    assert out["paper_sets_reasons"] == [
        "'amc' has 40 problems (paper: 121)",
        "'olympiadbench' has 675 problems (paper: 581)",
    ]
    assert not [r for r in caplog.records if "not the paper's problem sets" in r.getMessage()]
    json.dumps(out, allow_nan=False)


def test_tax_and_printed_tables_carry_the_label(monkeypatch):
    from rich.console import Console

    from tandem_eval.cli import terminal

    monkeypatch.setattr(terminal, "console", Console(width=250))  # no wrapping inside cells
    from tandem_eval.metrics.tax import communication_tax

    samples = make_samples([("aime24", "aime", "a", [True, False]), ("amc23", "amc", "b", [False, True])])
    tax = communication_tax(samples, samples, [1], n_boot=20)
    assert tax["macro_label"] == "macro over these groups" and tax["paper_sets"] is False
    summary = summarize_pass_at_k(samples, [1])
    with terminal.console.capture() as cap:
        terminal.print_passk({"solo": summary}, [1])
        terminal.print_tax(tax, [1])
    text = cap.get()
    assert text.count("macro over these groups") >= 3  # pass@k row, its caption, tax row
    assert "missing group(s) minerva, olympiadbench" in " ".join(text.split())  # the caption wraps
    # A summary written before the label existed is judged by its group sizes.
    old = {k: v for k, v in summary.items() if not k.startswith(("macro_label", "paper_sets"))}
    assert terminal._macro_label(old) == "macro over these groups"
    assert terminal._macro_label(summarize_pass_at_k(paper_sized_samples(), [1])) == "macro"
