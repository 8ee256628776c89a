"""`tandem-eval regrade RUN`: re-grade a finished run without regenerating, report what changed.

A run is made by the CLI with the tiny models (random: their texts hold no \\boxed{}), copied,
given boxed answers in some texts with consistent stored verdicts, and then four stored
verdicts are corrupted: regrade must find exactly those, and recompute pass@k from the rest.

Run: .venv/bin/python -m pytest tests/test_regrade.py -q   (about 20 s on 2 cores)
"""

import json
import shutil

import pandas as pd
import pytest
from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.cli.terminal import console
from tandem_eval.generate.regrade import regrade
from tandem_eval.metrics.passk import summarize_pass_at_k
from tandem_eval.run.results import RunFolder
from tandem_eval.schemas import write_table

runner = CliRunner()
KEY = ["benchmark", "problem_id", "sample_idx"]


@pytest.fixture(scope="module")
def cli_run(tiny_pair, tmp_path_factory):
    out = tmp_path_factory.mktemp("regrade") / "senior"
    args = ["solo", "--senior", tiny_pair[0], "--limit", "4", "--n", "2", "--k", "1,2", "--max-new-tokens", "8"]
    result = runner.invoke(app, [*args, "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return out / "solo"


def _reseal(run) -> None:
    """Record the edited samples.parquet in COMPLETE (verify_run refuses it otherwise)."""
    from tandem_eval.run.results import _table_record

    rec = json.loads((run / "COMPLETE").read_text())
    rec["tables"]["samples.parquet"] = _table_record(run / "samples.parquet")
    (run / "COMPLETE").write_text(json.dumps(rec))


def _edited_copy(run, dest) -> tuple[pd.DataFrame, set]:
    """Copy of `run` where every other text ends in a boxed answer (right or wrong, verdicts
    stored consistently), then four stored verdicts corrupted; returns (true verdicts, corrupted keys)."""
    shutil.copytree(run, dest)
    df = pd.read_parquet(dest / "samples.parquet")
    for i in range(0, len(df), 2):
        right = i % 4 == 0
        answer = df.at[i, "gold"] if right else "-12345"
        df.at[i, "text"] = df.at[i, "text"] + f" so the answer is \\boxed{{{answer}}}."
        df.at[i, "extracted_answer"], df.at[i, "correct"], df.at[i, "grade_status"] = answer, right, "ok"
    truth = df.copy()
    corrupt = {0: (False, "ok"), 3: (False, "error"), 5: (True, "ok"), 7: (True, "ok")}
    for i, verdict in corrupt.items():  # right stored as wrong, no answer as an error or as right
        df.loc[i, ["correct", "grade_status"]] = list(verdict)
    write_table(dest / "samples.parquet", df)
    _reseal(dest)  # the edited run stands for one graded wrongly from the start, not a tampered one
    return truth, {tuple(df.loc[i, KEY]) for i in corrupt}


def test_regrade_of_an_untouched_run_changes_nothing(cli_run, tmp_path):
    run = shutil.copytree(cli_run, tmp_path / "run")
    result = regrade(run)
    assert len(result.table) == 8 and not result.table["changed"].any()
    assert result.pass_at_k["stored"] == result.pass_at_k["regraded"] == RunFolder(run).metrics()["pass_at_k"]
    assert (run / "regrade.parquet").exists() and (run / "regrade.json").exists()


def test_regrade_finds_exactly_the_corrupted_verdicts(cli_run, tmp_path):
    truth, corrupted = _edited_copy(cli_run, tmp_path / "copy")
    result = regrade(tmp_path / "copy")
    assert {tuple(r) for r in result.changed[KEY].itertuples(index=False)} == corrupted
    new = result.table.merge(truth, on=KEY)
    assert (new.new_correct == new.correct).all() and (new.new_grade_status == new.grade_status).all()
    assert result.pass_at_k["regraded"] == summarize_pass_at_k(truth, [1, 2])
    assert result.pass_at_k["stored"] != result.pass_at_k["regraded"]
    written = pd.read_parquet(tmp_path / "copy" / "regrade.parquet")
    assert int(written["changed"].sum()) == 4
    assert set(written["new_grader"]) == {"math-verify==0.9.0 latex2sympy2_extended==1.11.0"}
    stored = pd.read_parquet(tmp_path / "copy" / "samples.parquet")
    assert stored.loc[7, "correct"]  # the stored verdicts are left as they were


def test_regrade_command_prints_disagreements_and_both_pass_at_k(cli_run, tmp_path, monkeypatch):
    monkeypatch.setattr(console, "width", 160)  # table cells unwrapped, whatever the terminal
    _edited_copy(cli_run, tmp_path / "copy")
    result = runner.invoke(app, ["regrade", str(tmp_path / "copy"), "-q"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "4 of 8 samples changed verdict" in out
    assert "stored pass@1" in out and "regraded pass@1" in out
    # not a terminal (a pipe, a CI log): markdown tables, each row on one line with every cell whole
    header = next(line for line in result.output.splitlines() if "stored pass@1" in line)
    assert header.startswith("| benchmark |") and header.endswith("|") and "regraded pass@1" in header
    assert out.count("True (ok)") == 3 and out.count("False (error)") == 1  # 4 rows, stored -> regraded


def test_regrade_refuses_an_incomplete_run(cli_run, tmp_path):
    run = shutil.copytree(cli_run, tmp_path / "run")
    (run / "COMPLETE").unlink()
    result = runner.invoke(app, ["regrade", str(run)])
    assert result.exit_code == 2 and "incomplete" in result.output


def test_a_regrade_stopped_before_its_record_is_repaired_by_the_next(cli_run, tmp_path, monkeypatch):
    """Killed between writing regrade.parquet and recording it in COMPLETE: every reader refuses the
    folder, and the next `regrade` repairs it (it rewrites and records its own table) instead of
    refusing too; an unrecorded table of another command stays refused."""
    from tandem_eval.run import results
    from tandem_eval.run.results import verify_run

    run = shutil.copytree(cli_run, tmp_path / "run")
    real = results._record_table  # the step every writer records a table with (Amendment, register_table)

    def killed(folder, path):
        raise KeyboardInterrupt  # the process dies here: the table is written, not recorded

    monkeypatch.setattr(results, "_record_table", killed)
    with pytest.raises(KeyboardInterrupt):
        regrade(run)
    monkeypatch.setattr(results, "_record_table", real)
    assert (run / "regrade.parquet").exists() and not (run / ".lock").exists()
    with pytest.raises(ValueError, match="regrade.parquet is not recorded"):
        verify_run(run)
    result = runner.invoke(app, ["regrade", str(run), "-q"])
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert len(verify_run(run).load_samples()) == 8  # every reader reads it again
    lens = pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["x"], "sample_idx": [0], "junior_nll_mean": [1.0]})
    (run / "lens" / "jr").mkdir(parents=True)
    write_table(run / "lens" / "jr" / "legibility.parquet", lens)  # a lens command's, never recorded
    refused = runner.invoke(app, ["regrade", str(run)])
    assert refused.exit_code == 2 and "legibility.parquet is not recorded" in refused.stderr
