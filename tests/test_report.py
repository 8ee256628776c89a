"""Tests for tandem_eval.report: Table 2 numbers against hand-computed pass@k, best-per-column
marks, LaTeX shape, figures (axes inspected before saving, then PNG + PDF on disk), byte-identical
reruns, run discovery, and the committed toy tables regenerating exactly.

Run: .venv/bin/python -m pytest tests/test_report.py -q
"""

from __future__ import annotations

import io
import math
import re
import shutil
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from report_fixtures import make_results, make_run, save_tokenizer
from typer.testing import CliRunner

from tandem_eval.cli.main import app  # as users call it: user errors are the CLI's one line, exit 2
from tandem_eval.metrics.registry import fmt_value
from tandem_eval.metrics.stats import MACRO
from tandem_eval.report import (
    Bootstrap,
    ReportError,
    build_report,
    collect,
    figures,
    find_results,
    training_figures,
    write_tables,
)
from tandem_eval.report.tables import latex_escape, table2, to_csv, to_latex, to_markdown

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "results" / "toy" / "report"


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return make_results(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def col(results):
    return collect([results])


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    """Two arms on one benchmark, 2 problems x 4 samples, flags chosen by hand."""
    root = tmp_path_factory.mktemp("hand")
    solo = {
        "mine": {("bench_x", "p0"): [1, 0, 0, 0], ("bench_x", "p1"): [1, 1, 0, 0]},
        "other": {("bench_x", "p0"): [1, 1, 1, 1], ("bench_x", "p1"): [1, 1, 1, 1]},
    }
    handoff = {
        "mine": {("bench_x", "p0"): [0, 0, 0, 0], ("bench_x", "p1"): [1, 0, 0, 0]},
        "other": {("bench_x", "p0"): [0, 0, 0, 0], ("bench_x", "p1"): [0, 0, 0, 0]},
    }
    labels = {"mine": "my_senior", "other": "other"}
    for arm in solo:
        senior = save_tokenizer(root / "ckpt" / arm)
        as_bool = lambda d: {k: [bool(x) for x in v] for k, v in d.items()}  # noqa: E731
        make_run(root / arm / "solo", senior, as_bool(solo[arm]), label=labels[arm], ks=(1, 2, 4))
        make_run(
            root / arm / "handoff-paragraph",
            senior,
            as_bool(handoff[arm]),
            "handoff",
            "paragraph",
            label=labels[arm],
            ks=(1, 2, 4),
        )
    return collect([root])


def _md_rows(md: str) -> list[list[str]]:
    """Data rows of a Markdown table as cells, the benchmark cell filled down its block."""
    lines = [line for line in md.splitlines() if line.startswith("|")][2:]
    rows, scope = [], ""
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        scope = cells[0] or scope
        rows.append([scope] + cells[1:])
    return rows


# ---- Table 2 -------------------------------------------------------------------------------------


def test_table_values_equal_hand_computed_pass_at_k(hand):
    t = table2(hand, k=2, n_boot=200)
    solo = (exact_pass_at_k(4, 1, 2) + exact_pass_at_k(4, 2, 2)) / 2 * 100  # (1/2 + 5/6) / 2
    handoff = (exact_pass_at_k(4, 0, 2) + exact_pass_at_k(4, 1, 2)) / 2 * 100  # (0 + 1/2) / 2
    mine = t.rows[(t.rows["senior"] == "my_senior") & (t.rows["scope"] == MACRO)].iloc[0]
    assert mine["solo"] == pytest.approx(solo)
    assert mine["handoff"] == pytest.approx(handoff)
    assert mine["tax"] == pytest.approx(solo - handoff)
    assert mine["retention"] == pytest.approx(100 * handoff / solo)
    assert mine["solo_low"] <= mine["solo"] <= mine["solo_high"]
    md = to_markdown(t)
    # one benchmark group: its row is the table's; a "Macro (n=2)" row would repeat it (the CSV keeps it)
    assert not any(r[0].startswith("Macro") for r in _md_rows(md)) and "Macro" not in to_latex(t)
    assert "rows: the one benchmark group" in md and "macro" in to_csv(t)
    row = next(r for r in _md_rows(md) if r[1] == "my_senior" and r[0] == "bench_x (n=2)")
    assert row[2].strip("*").startswith(f"{solo:.1f} ± ")  # 66.7
    assert row[3].strip("*").startswith(f"{handoff:.1f} ± ")  # 25.0
    assert row[5].strip("*").startswith(f"{solo - handoff:.1f} ± ")  # 41.7
    assert "pass@2" in md.splitlines()[0]


def test_best_value_per_column_is_marked_on_the_right_cell(hand):
    rows = _md_rows(to_markdown(table2(hand, k=2, n_boot=200)))
    block = {r[1]: r for r in rows[:2]}  # bench_x block: my_senior, other
    header = ["benchmark", "senior", "solo", "handoff", "retention", "tax"]
    col = {name: i for i, name in enumerate(header)}
    assert block["other"][col["solo"]].startswith("**100.0")  # other solves everything alone
    assert not block["my_senior"][col["solo"]].startswith("**")
    assert block["my_senior"][col["handoff"]].startswith("**25.0")  # other's handoff is 0
    assert block["my_senior"][col["tax"]].startswith("**")  # lower tax is better: 41.7 < 100
    assert not block["other"][col["tax"]].startswith("**")


def test_latex_has_booktabs_rules_and_escapes(hand):
    tex = to_latex(table2(hand, k=2, n_boot=200))
    for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}", r"\end{tabular}"):
        assert rule in tex
    assert r"my\_senior" in tex and r"bench\_x" in tex
    body = "\n".join(line for line in tex.splitlines() if not line.startswith("%"))
    assert not re.search(r"(?<!\\)[_%#$]", body.replace("$\\pm$", "").replace("$-$", "")), "unescaped special"
    assert body.count("{") == body.count("}")
    assert tex.count(r"\begin{") == tex.count(r"\end{")
    # every data row has as many cells as the column spec
    spec = re.search(r"\\begin\{tabular\}\{(\w+)\}", tex).group(1)
    rows = [line for line in body.splitlines() if line.endswith(r"\\")]
    assert rows and all(line.count(" & ") == len(spec) - 1 for line in rows)
    assert latex_escape("a_b%c&d") == r"a\_b\%c\&d"


def test_format_fixed_and_no_negative_zero():
    assert fmt_value(55.56, 53.5, 57.5, 1) == "55.6 ± 2.0"
    assert fmt_value(-0.01, -1.0, 1.0, 1) == "0.0 ± 1.0"
    assert fmt_value(float("nan"), 0, 1, 1) == "–"
    assert fmt_value(1.23456, float("nan"), float("nan"), 3) == "1.235"


def test_full_table_has_all_columns_and_macro_last(col):
    t = table2(col, n_boot=200)
    assert t.k == 4 and t.schedule == "paragraph"
    # exact KL for every senior: no Monte-Carlo column beside it
    assert [c.key for c in t.columns] == ["solo", "handoff", "retention", "tax", "nll", "kl_exact"]
    assert list(t.rows["scope"].unique()) == ["bench_a", "bench_b", MACRO]
    assert t.note is None and set(t.juniors) == {"grpo", "tandem"}
    macro = t.rows[t.rows["scope"] == MACRO].set_index("senior")
    assert macro.loc["tandem", "nll"] < macro.loc["grpo", "nll"]  # the fixture's tandem is more legible


# ---- figures ----------------------------------------------------------------------------------------


def _visible(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def test_passk_figure_axes(col):
    fig = figures.fig_passk(col, n_boot=200)
    axes = _visible(fig)
    # every panel names its n and its interval
    assert [ax.get_title() for ax in axes] == [
        "bench_a (n=6; bands ±1 SE)",
        "bench_b (n=5; bands ±1 SE)",
        "Macro (n=11; bands ±1 SE)",
    ]
    for ax in axes:
        assert ax.get_xscale() == "log" and "log2" in ax.get_xlabel()
        assert ax.get_ylabel() == "pass@k (%)"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8"]
        assert len(ax.lines) == 4  # 2 arms x (solo, handoff)
        assert len(ax.collections) == 4  # one SE band per line
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["grpo", "tandem", "solo", "handoff"]


def test_other_figures_axes(col):
    tax = figures.fig_tax(table2(col, n_boot=200))
    assert "tax@4 (points)" in tax.axes[0].get_ylabel()
    assert [t.get_text() for t in tax.axes[0].get_xticklabels()] == ["bench_a\nn=6", "bench_b\nn=5", "Macro\nn=11"]
    assert tax.legends and not tax.axes[0].get_legend()  # the legend sits below the axes, inside the canvas
    leg = figures.fig_legibility(col, n_boot=200)
    titles = [" ".join(ax.get_title().split()) for ax in _visible(leg)]  # titles wrap to the axes width
    # the junior named once (its label is "junior": "read by junior", not "read by junior junior")
    assert all("n=" in t for t in titles) and sum("read by junior" in t for t in titles) == 2
    assert not any("junior junior" in t for t in titles)
    ylabels = [ax.get_ylabel() for ax in _visible(leg)]
    assert ylabels.count("junior NLL (nats/token)") == 2 and sum("KL" in y for y in ylabels) == 2
    assert "relative position in CoT (%)" in [ax.get_xlabel() for ax in _visible(leg)]
    train = training_figures.fig_training(col, n_boot=200)
    assert {ax.get_xlabel() for ax in _visible(train)} == {"training step"}
    assert "held-out pass@4 (%)" in [ax.get_ylabel() for ax in _visible(train)]
    assert "senior-token fraction" in [ax.get_ylabel() for ax in _visible(train)]
    assert all("n=" in ax.get_title() for ax in _visible(train))
    assert {"truncation rate\n(fraction at the budget)", "response length (tokens)"} <= {
        ax.get_ylabel() for ax in _visible(train)
    }
    for ax in _visible(train):  # steps are whole numbers
        assert all(float(t).is_integer() for t in ax.get_xticks())
    dose = figures.fig_dose(col, n_boot=200)
    assert dose.axes[0].get_ylabel() == "pass@1 (%)" and "takeover" in dose.axes[0].get_xlabel()


def test_figures_are_none_without_data(hand):
    assert training_figures.fig_training(hand) is None
    assert figures.fig_dose(hand) is None
    assert figures.fig_legibility(hand) is None


def test_build_report_writes_tables_and_png_pdf_figures(results, tmp_path):
    files = build_report([results], tmp_path, boot=Bootstrap(n_boot=200))
    names = sorted(p.name for p in files.figures)
    for stem in ("fig2_passk", "fig_tax", "fig_legibility_drift", "fig_training", "fig_dose"):
        assert f"{stem}.png" in names and f"{stem}.pdf" in names
    for p in files.figures:
        data = p.read_bytes()
        assert len(data) > 5000
        assert data.startswith(b"\x89PNG") if p.suffix == ".png" else data.startswith(b"%PDF")
    assert {p.name for p in files.tables} == {"table2.md", "table2.tex", "table2.csv"}
    assert files.skipped == []


def test_a_k_no_run_holds_is_refused_naming_the_ks_they_hold(col, results, tmp_path):
    """--k 99 used to write a Table 2 without a single pass@k column, and say nothing."""
    held = sorted(set().union(*(r.ks for r in col.runs if r.mode in ("solo", "handoff"))))
    with pytest.raises(ReportError, match=f"--k 99: no run holds pass@99 .*k = {', '.join(map(str, held))}"):
        table2(col, k=99)
    res = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "r"), "--k", "99", "--no-figures"])
    assert res.exit_code == 2 and "pass one of those" in res.output and not (tmp_path / "r" / "table2.md").exists()


def test_a_junior_no_run_holds_is_refused_naming_the_juniors_they_hold(results, tmp_path):
    """--junior with a mistyped label used to show another junior's lens outputs, and say nothing."""
    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["report", str(results), "--out", str(out), "--junior", "nope", "--no-figures"])
    assert res.exit_code == 2 and "--junior 'nope'" in res.output and "'junior'" in res.output, res.output
    assert not out.exists()
    res = CliRunner().invoke(app, ["report", str(results), "--out", str(out), "--junior", "junior", "--no-figures"])
    assert res.exit_code == 0, res.output


def test_report_cli_is_deterministic(results, tmp_path):
    runner = CliRunner()
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        res = runner.invoke(app, ["report", str(results), "--out", str(out), "--no-figures"])
        assert res.exit_code == 0, res.output
    for name in ("table2.md", "table2.tex", "table2.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    assert str(results) not in (outs[0] / "table2.md").read_text()  # no paths in the tables
    res = runner.invoke(app, ["report", str(tmp_path / "missing"), "--out", str(tmp_path / "c")])
    assert res.exit_code == 2 and "does not exist" in res.output


# ---- discovery ----------------------------------------------------------------------------------------


def test_collect_groups_arms_and_training_evals(col):
    assert col.arms == ["grpo", "tandem"]  # checkpoint-N eval runs under train/ are not arms
    assert col.handoff_schedules() == ["paragraph"]
    assert {a: sorted(v) for a, v in col.takeover_runs().items()} == {"grpo": [1, 2], "tandem": [1, 2]}
    (train,) = col.trainings
    assert train.arm == "tandem" and [r.step for r in train.evals] == [10, 20, 30]
    assert list(train.log.columns[:2]) == ["step", "reward"]


def test_solo_paragraph_and_junior_solo_runs_of_one_senior_make_one_arm(tmp_path):
    """One label rule (paths.senior_label): the CLI's default label, the read side's label of a run
    without one, and a junior-solo run (which names the senior's arm, not the junior) agree."""
    from tandem_eval.paths import senior_label

    senior = save_tokenizer(tmp_path / "ckpt" / "mysenior")
    flags = {("b", "p0"): [True, False]}
    make_run(tmp_path / "r" / "solo", senior, flags, ks=(1,))  # no label: the read side derives it
    make_run(tmp_path / "r" / "handoff-paragraph", senior, flags, "handoff", "paragraph", senior_label(senior), (1,))
    make_run(tmp_path / "r" / "handoff-junior-solo", senior, flags, "handoff", "junior-solo", None, (1,))
    col = collect([tmp_path / "r"])
    assert col.arms == ["mysenior"] and len(col.runs) == 3
    assert senior_label("toy:self-paired/tandem") == "tandem" and senior_label("/x/ckpt/") == "ckpt"
    assert senior_label("/x/cpu-tandem/checkpoint-8") == "cpu-tandem/checkpoint-8"  # its own default --out


def test_duplicate_labels_with_different_runs_refuse(tmp_path):
    senior = save_tokenizer(tmp_path / "ckpt" / "same")
    flags = {("b", "p0"): [True, False]}
    make_run(tmp_path / "one" / "solo", senior, flags, ks=(1,))
    make_run(tmp_path / "two" / "solo", senior, flags, ks=(1, 2))
    with pytest.raises(ReportError, match="distinct labels"):
        collect([tmp_path])
    shutil.copytree(tmp_path / "one", tmp_path / "copy" / "one")  # the same experiment twice: fine
    shutil.rmtree(tmp_path / "two")
    assert len(collect([tmp_path]).runs) == 1


def test_find_results(monkeypatch, tmp_path):
    monkeypatch.delenv("TANDEM_EVAL_RESULTS", raising=False)
    nested = tmp_path / "repo" / "notebooks" / "deep"
    nested.mkdir(parents=True)
    (tmp_path / "repo" / "pyproject.toml").write_text("")
    (tmp_path / "repo" / "results" / "toy").mkdir(parents=True)
    assert find_results(start=nested) == tmp_path / "repo" / "results"
    assert find_results("toy", start=nested) == tmp_path / "repo" / "results" / "toy"
    monkeypatch.setenv("TANDEM_EVAL_RESULTS", str(tmp_path / "repo" / "results" / "toy"))
    assert find_results() == tmp_path / "repo" / "results" / "toy"


# ---- committed toy results --------------------------------------------------------------------------


def test_committed_toy_tables_regenerate_byte_for_byte(tmp_path):
    # one report per toy scenario (results/toy/report/<scenario>/, from results/toy/<scenario>/): their test
    # sets differ, so no table mixes them
    scenarios = sorted(p.parent for p in COMMITTED.glob("*/table2.md")) if COMMITTED.exists() else []
    if not scenarios:
        pytest.skip(
            f"no committed tables under {COMMITTED.relative_to(REPO)}/<scenario>/ yet "
            "(make toy writes them once results/toy/ holds runs)"
        )
    for folder in scenarios:
        committed = sorted(folder.glob("table2*.*"))
        written, _ = write_tables(collect([COMMITTED.parent / folder.name]), tmp_path / folder.name)
        assert sorted(p.name for p in written) == [p.name for p in committed]
        for path in committed:
            assert (tmp_path / folder.name / path.name).read_bytes() == path.read_bytes(), f"{folder.name}/{path.name}"


def test_committed_real_report_regenerates_byte_for_byte(tmp_path):
    """results/real/report is what `tandem-eval report results/real --out results/real/report` writes now.
    The report writes no timestamp, path or version (tables; PNG and PDF metadata), so a file that differs
    was drawn by older code (the figures of 55ec3ab were, until issue 42's figure changes were redrawn):
    rerun that command and commit what it writes."""
    committed = REPO / "results" / "real" / "report"
    files = build_report([REPO / "results" / "real"], tmp_path)
    written = sorted(p.name for p in [*files.tables, *files.figures])
    assert written == sorted(p.name for p in committed.iterdir())
    stale = [name for name in written if (tmp_path / name).read_bytes() != (committed / name).read_bytes()]
    assert not stale, f"stale in {committed.relative_to(REPO)}: {stale}; rerun tandem-eval report results/real"


def test_report_from_training_logs_only(results, tmp_path):
    files = build_report([results / "train"], tmp_path, boot=Bootstrap(n_boot=200))
    assert files.tables == [] and any("table2" in s for s in files.skipped)
    assert sorted(p.name for p in files.figures) == ["fig_training.pdf", "fig_training.png"]


def test_position_curve_pools_tokens_by_relative_position():
    curve = figures.token_pooled_curve([[0.0, 1.0, 2.0, 3.0], [10.0, float("nan")], []], bins=2)
    assert curve.tolist() == pytest.approx([(0 + 1 + 10) / 3, (2 + 3) / 2])


def test_analyses_make_all_equals_report(results, tmp_path):
    """analyses/make_all.py (a fresh process) and build_report write identical tables and figures."""
    import subprocess
    import sys

    subprocess.run(
        [
            sys.executable,
            str(REPO / "analyses" / "make_all.py"),
            "--results",
            str(results),
            "--out",
            str(tmp_path / "analyses"),
            "--n-boot",
            "200",
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    files = build_report([results], tmp_path / "report", boot=Bootstrap(n_boot=200))
    with pytest.raises(TypeError, match="n_boot"):  # the former keyword is gone (tandem_eval.compat lists it)
        build_report([results], tmp_path / "again", n_boot=200)
    assert not (tmp_path / "again").exists()
    made = sorted(p.name for p in (tmp_path / "analyses").iterdir())
    assert made == sorted(p.name for p in files.tables + files.figures)
    for name in made:
        assert (tmp_path / "analyses" / name).read_bytes() == (tmp_path / "report" / name).read_bytes(), name


# ---- labels, benchmark sets, estimators (issue 14, 10.6) --------------------------------------------


def _two_runs_of_one_senior(tmp_path, benches_a, benches_b, labels=(None, None)):
    senior = save_tokenizer(tmp_path / "ckpt" / "smollm2")
    flags = lambda benches, rate: {  # noqa: E731
        (b, f"{b}/{i}"): [bool((i + j) % rate) for j in range(4)] for b in benches for i in range(4)
    }
    make_run(tmp_path / "a" / "solo", senior, flags(benches_a, 2), ks=(1, 2), label=labels[0])
    make_run(tmp_path / "b" / "solo", senior, flags(benches_b, 3), ks=(1,), label=labels[1])  # another experiment
    return tmp_path / "a", tmp_path / "b"


def test_two_runs_of_one_senior_with_labels_make_a_report(tmp_path):
    a, b = _two_runs_of_one_senior(tmp_path, ["x"], ["x"], labels=("base", "tuned"))
    files = build_report([a, b], tmp_path / "r", boot=Bootstrap(n_boot=50), with_figures=False)
    md = (tmp_path / "r" / "table2.md").read_text()
    assert files.tables and "| base |" in md and "| tuned |" in md


def test_report_label_option_relabels_without_touching_run_folders(tmp_path):
    a, b = _two_runs_of_one_senior(tmp_path, ["x"], ["x"])
    with pytest.raises(ReportError, match="report --label RUN=NAME"):
        collect([a, b])
    before = (a / "solo" / "config.json").read_bytes()
    res = CliRunner().invoke(
        app, ["report", str(a), str(b), "--out", str(tmp_path / "r"), "--label", f"{a}=first", "--label", f"{b}=second",
              "--no-figures", "--n-boot", "50"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert {"first", "second"} <= set((tmp_path / "r" / "table2.csv").read_text().split(","))
    assert (a / "solo" / "config.json").read_bytes() == before
    res = CliRunner().invoke(app, ["report", str(a), "--out", str(tmp_path / "r"), "--label", "nonsense"])
    assert res.exit_code == 2 and "RUN=NAME" in res.output


def test_one_label_on_different_benchmarks_is_one_arm(tmp_path):
    a, b = _two_runs_of_one_senior(tmp_path, ["x"], ["y"])
    col = collect([a, b])
    assert col.arms == ["smollm2"] and sorted(col.solo("smollm2").samples()["benchmark"].unique()) == ["x", "y"]


def test_no_macro_over_unequal_problem_sets(tmp_path):
    a, b = _two_runs_of_one_senior(tmp_path, ["x", "y"], ["y", "z"], labels=("one", "two"))
    t = table2(collect([a, b]), k=1, n_boot=50)
    macro = t.rows[t.rows["scope"] == MACRO]
    assert set(macro["n_problems"]) == {4}  # only group y's 4 problems are shared by both runs
    y = t.rows[t.rows["scope"] == "y"].set_index("senior")["solo"]
    assert macro.set_index("senior")["solo"].to_dict() == pytest.approx(y.to_dict())
    assert "only the 4 problems every run shares (groups y)" in to_markdown(t)
    c, d = _two_runs_of_one_senior(tmp_path / "disjoint", ["x"], ["z"], labels=("one", "two"))
    t = table2(collect([c, d]), k=1, n_boot=50)
    assert MACRO not in set(t.rows["scope"]) and "no macro row" in to_markdown(t)
    assert "AIME" not in to_markdown(t)  # the AIME pooling footnote only where an AIME group exists


def test_exact_and_monte_carlo_kl_are_separate_columns(tmp_path):
    import pandas as pd

    from tandem_eval.run.results import RunFolder

    root = make_results(tmp_path / "res")
    drift = root / "grpo" / "solo" / "lens" / "junior" / "drift.parquet"
    df = pd.read_parquet(drift)
    # grpo scored by vLLM: k1/k3 only (rewritten and recorded, as the drift command would)
    RunFolder(root / "grpo" / "solo").write_table("lens/junior/drift.parquet", df.assign(kl_exact=float("nan")))
    t = table2(collect([root / "grpo", root / "tandem"]), n_boot=50)
    keys = [c.key for c in t.columns]
    assert {"kl_exact", "kl_k3", "kl_k1"} <= set(keys)
    rows = t.rows.set_index(["scope", "senior"])
    assert math.isnan(rows.loc[(MACRO, "grpo"), "kl_exact"]) and rows.loc[(MACRO, "grpo"), "kl_k3"] > 0
    assert rows.loc[(MACRO, "tandem"), "kl_exact"] > 0 and rows.loc[(MACRO, "tandem"), "kl_k3"] > 0
    md = to_markdown(t)
    assert "KL exact (nats/tok)" in md and "KL k3 (MC) (nats/tok)" in md and "each column holds one estimator" in md


def test_solo_run_of_a_handoff_made_with_solo_run_is_shown(tmp_path):
    senior = save_tokenizer(tmp_path / "ckpt" / "s")
    flags = {("x", f"x/{i}"): [bool(i % 2), True] for i in range(4)}
    solo = make_run(tmp_path / "elsewhere" / "solo", senior, flags, ks=(1,), label="other")
    hand = make_run(tmp_path / "out" / "handoff-paragraph", senior, flags, "handoff", "paragraph", ks=(1,))
    hand.update_metrics({"solo_run": str(solo.path.resolve())})
    t = table2(collect([tmp_path / "out"]), k=1, n_boot=50)
    macro = t.rows[t.rows["scope"] == MACRO].iloc[0]
    assert math.isfinite(macro["solo"]) and macro["tax"] == pytest.approx(0.0)


def test_tied_values_are_not_bold():
    import pandas as pd

    from tandem_eval.report.cells import COLUMNS
    from tandem_eval.report.tables import best_mask

    rows = pd.DataFrame({"scope": ["g", "g"], "solo": [0.0, 0.0]})
    assert not best_mask(rows, COLUMNS[0]).any()


def test_report_aggregates_seeds_into_one_row_per_arm_and_by_seed_keeps_them():
    """2 arms x 3 seeds (the committed toy runs labelled ARM/sN): one row per arm and scope; --by-seed 6."""
    from tandem_eval.report import collect, table2

    toy = Path(__file__).resolve().parents[1] / "results" / "toy" / "self-paired"
    col = collect([toy / "tandem", toy / "grpo"])
    rows = table2(col, k=4, n_boot=200).rows
    assert sorted(rows[rows.scope == "macro"].senior) == ["self-paired/grpo", "self-paired/tandem"]
    per_seed = table2(col, k=4, n_boot=200, by_seed=True).rows
    assert len(per_seed[per_seed.scope == "macro"]) == 6
    tandem = rows[(rows.scope == "macro") & (rows.senior == "self-paired/tandem")].iloc[0]
    seeds = per_seed[(per_seed.scope == "macro") & per_seed.senior.str.startswith("self-paired/tandem/")]
    assert tandem["solo"] == pytest.approx(seeds["solo"].mean())  # mean over seeds (same problems each)


def test_figures_draw_one_curve_per_arm_over_seeds_and_by_seed_one_per_run():
    """2 arms x 3 seeds (committed toy runs): fig2_passk has 2 solo curves per panel, 6 with by_seed."""
    toy = Path(__file__).resolve().parents[1] / "results" / "toy" / "self-paired"
    col = collect([toy / "tandem", toy / "grpo"])
    curves = figures.passk_curves(col, n_boot=50)
    assert sorted(curves.senior.unique()) == ["self-paired/grpo", "self-paired/tandem"]
    assert set(curves.n_seeds) == {3}
    per_seed = figures.passk_curves(col, n_boot=50, by_seed=True)
    assert per_seed.senior.nunique() == 6 and set(per_seed.n_seeds) == {1}
    for by_seed, n_curves in ((False, 2), (True, 6)):
        fig = figures.fig_passk(col, n_boot=50, by_seed=by_seed)
        panels = [ax for ax in _visible(fig) if ax.lines]
        assert len(panels) == 1 and not panels[0].get_title().startswith("Macro")  # one group: no macro twin
        assert len(panels[0].lines) == 2 * n_curves  # (solo, handoff) per arm or per run
    # the aggregated curve is the mean over seeds (each seed holds the same problems)
    macro = lambda c: c[(c.scope == MACRO) & (c["mode"] == "solo") & (c.k == 4)]  # noqa: E731
    tandem = macro(curves).set_index("senior").loc["self-paired/tandem", "estimate"]
    seeds = macro(per_seed)
    assert tandem == pytest.approx(seeds[seeds.senior.str.startswith("self-paired/tandem/")].estimate.mean())


def test_runs_on_different_problems_get_a_table_each_or_one_titled_intersection(tmp_path):
    """Issue 33 (35.5): the report never intersects problem sets silently. Arms on different problems
    get one table (and figure set) per problem set, in OUT/<set>/, each titled with its problems and
    arms, and "best" is bolded among comparable rows only; --intersect makes one table of the problems
    every run holds, whose title says how many were dropped and from where."""
    a, b = _two_runs_of_one_senior(tmp_path, ["x", "y"], ["y", "z"], labels=("one", "two"))
    files = build_report([a, b], tmp_path / "r", boot=Bootstrap(n_boot=50), with_figures=True)
    md = sorted(p for p in files.tables if p.suffix == ".md")
    assert len(md) == 2 and not (tmp_path / "r" / "table2.md").exists()
    assert {p.parent.parent for p in md} == {tmp_path / "r"} and len({p.parent for p in files.figures}) == 2
    for path, arm, benches in zip(md, ("one", "two"), ("x, y", "y, z")):
        text = path.read_text()
        assert text.startswith(f"**Problem set {path.parent.name}: 8 problems ({benches}); arms {arm}**")
        assert "| one |" in text if arm == "one" else "| one |" not in text
        assert "**" not in text.split("\n", 2)[2].split("\n\n")[0]  # one arm per table: nothing to bold
    res = CliRunner().invoke(app, ["report", str(a), str(b), "--out", str(tmp_path / "i"), "--intersect",
                                      "--no-figures", "--n-boot", "50"])  # fmt: skip
    assert res.exit_code == 0, res.output
    text = (tmp_path / "i" / "table2.md").read_text()
    assert text.startswith("**Problems every run holds: 4 of 12 (--intersect dropped 8 held by only some runs")
    assert "| one |" in text and "| two |" in text and "y (n=4)" in text and "x (n=" not in text


REAL = Path(__file__).resolve().parents[1] / "results" / "real"


def test_a_label_on_the_solo_run_alone_keeps_its_handoff_and_tax_in_its_row(tmp_path):
    """--label RUN=NAME on the solo run only split the senior into two rows (the solo under NAME, the
    handoff under its old label), the tax gone; the handoff now follows the solo run it was measured against."""
    col = collect([REAL / "pair"], labels={str(REAL / "pair" / "solo"): "S"})
    assert {(r.label, r.mode) for r in col.runs} == {("S", "solo"), ("S", "handoff")}
    rows = table2(col, k=1, n_boot=50).rows
    assert set(rows["senior"]) == {"S"} and rows["tax"].tolist() == pytest.approx([16.0, 16.0])
    with pytest.raises(ReportError, match="two names; they are one senior's row"):
        collect(
            [REAL / "pair"], labels={str(REAL / "pair" / "solo"): "S", str(REAL / "pair" / "handoff-paragraph"): "H"}
        )


def test_a_moved_handoff_passed_alone_finds_its_sibling_solo_run(tmp_path):
    """The committed handoff records its solo run at the path it ran in (gone here): report now finds the
    sibling OUT/solo, checked by fingerprint, as compare does, instead of showing the handoff without its tax."""
    shutil.copytree(REAL / "pair", tmp_path / "pair")
    col = collect([tmp_path / "pair" / "handoff-paragraph"])
    assert sorted(r.mode for r in col.runs) == ["handoff", "solo"]
    assert table2(col, k=1, n_boot=50).rows["tax"].tolist() == pytest.approx([16.0, 16.0])


def test_the_caption_names_the_clustered_ci_of_rows_that_pool_seeds(tmp_path):
    """Rows pooling an arm's seeds carry a two-way clustered CI (cells.seed_cells); the caption said "resamples
    of problems" for every table. It now names the method per row kind, and the one-seed rows."""
    col = collect([COMMITTED.parent / "self-paired"])
    t = table2(col, n_boot=50)
    assert t.seeds and set(t.seeds.values()) == {3} and "self-paired/init" not in t.seeds
    text = to_markdown(t)
    assert "rows that pool seeds (3 seeds): mean over seeds × problems" in text
    assert "self-paired/init (one seed): the plain bootstrap over problems" in text
    assert "resamples of problems" not in text
    assert r"seeds $\times$ problems" in to_latex(t)
    assert "resamples of problems" in to_markdown(table2(collect([REAL / "pair"]), k=1, n_boot=50))  # one seed
    # the CSV read alone says the same: k, schedule and the seeds each row pools
    csv = pd.read_csv(io.StringIO(to_csv(t))).set_index(["scope", "senior"])
    assert set(csv["k"]) == {t.k} and set(csv["schedule"]) == {"paragraph"}
    assert csv.xs("self-paired/init", level="senior")["seeds"].tolist() == [1, 1]
    assert set(csv.xs("self-paired/tandem", level="senior")["seeds"]) == {3}


def test_a_warning_is_one_line_on_stderr(tmp_path):
    """The CLI prints a warning as it prints an error, `warning: MESSAGE` on one line; Python's printer added
    the library's file name and a source line (`--debug` keeps it)."""
    shutil.copytree(REAL / "pair", tmp_path / "pair")
    (tmp_path / "pair" / "solo" / "COMPLETE").unlink()  # the solo run its handoff was measured against: incomplete
    args = ["report", str(tmp_path / "pair" / "handoff-paragraph"), "--out", str(tmp_path / "r"), "--no-figures"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    warned = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1 and "is incomplete: no solo or tax shown" in warned[0], res.stderr
    assert "UserWarning" not in res.stderr and "collect.py" not in res.stderr
