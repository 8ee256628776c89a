"""Nothing generated is lost to the grader: a grader whose start-up is killed at its deadline leaves
every generated sample stored (ungraded), the command fails with one line saying to rerun, and the
rerun only grades (no model is loaded, no sample is generated again).

    .venv/bin/python -m pytest tests/test_grading_resume.py -q
"""

from __future__ import annotations

import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.config import EvalConfig, ModelSpec, Sampling
from tandem_eval.generate import execute as generate
from tandem_eval.generate import grading
from tandem_eval.generate.execute import open_engines, run_eval
from tandem_eval.generate.grading import UNGRADED, GradingIncomplete
from tandem_eval.run.results import RunFolder

KEY = ["benchmark", "problem_id", "sample_idx"]


@pytest.fixture(scope="module")
def cfg(tiny_pair):
    sampling = Sampling(temperature=1.0, top_p=0.9, top_k=50, max_new_tokens=16)
    return EvalConfig(senior=ModelSpec(tiny_pair[0]), benchmarks=("tiny",), n=2, ks=(1,), limit=3, sampling=sampling)


@pytest.fixture
def worker_path(monkeypatch):
    """Every answer goes to a grading worker (random tiny models never write a \\boxed{} answer the string
    path could settle), as the extracted answer "7"."""
    monkeypatch.setattr(grading, "_fast_grade", lambda prediction, gold: (None, "7"))


def _hanging_workers(monkeypatch):
    """Grading workers that never report ready: the start-up deadline kills them."""
    monkeypatch.setattr(grading, "_worker_command", lambda: [sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_killed_grader_start_up_keeps_the_samples_and_a_rerun_only_grades(cfg, tmp_path, monkeypatch, worker_path):
    out = tmp_path / "solo"
    with monkeypatch.context() as m:
        _hanging_workers(m)
        with pytest.raises(GradingIncomplete, match="6 samples are stored ungraded in .*rerun the same command"):
            run_eval(cfg, out, open_engines(cfg), progress=False, flush_every=4, grader_startup_s=1.0)
    rf = RunFolder(out)
    stored = rf.load_samples()
    assert not rf.is_complete() and len(stored) == 6  # every generated trace survived the grader
    assert (stored.grade_status == UNGRADED).all() and not stored.correct.any()
    assert (stored.n_tokens > 0).all()

    def no_model(*a, **k):
        raise AssertionError("a rerun with every sample stored must not load a model")

    monkeypatch.setattr(generate, "load_engines", no_model)
    done = run_eval(cfg, out, progress=False, grader_startup_s=120.0)
    assert done.is_complete()
    graded = done.load_samples()
    pd.testing.assert_frame_equal(  # the same traces, now graded
        graded[[*KEY, "token_ids", "text"]].reset_index(drop=True),
        stored[[*KEY, "token_ids", "text"]].reset_index(drop=True),
    )
    assert (graded.grade_status == "ok").all() and (graded.extracted_answer == "7").all()
    assert list(graded.correct) == [g == "7" for g in graded.gold]
    assert done.metrics()["grade_status"] == {"ok": 6}


def test_the_cli_says_in_one_line_how_to_finish(cfg, tiny_pair, tmp_path, monkeypatch, worker_path):
    _hanging_workers(monkeypatch)
    args = ["solo", "--senior", tiny_pair[0], "--benchmark", "tiny", "--limit", "1", "--n", "1", "--k", "1"]
    args += ["--max-new-tokens", "8", "--out", str(tmp_path), "--grader-startup-timeout", "1", "-q"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    *warnings, line = [ln for ln in res.output.splitlines() if ln.strip()]  # (warnings: logged as they happen)
    assert (
        line.startswith("error: grading failed (grading worker not ready after 1 s") and "Traceback" not in res.output
    )
    assert "1 samples are stored ungraded" in line and line.endswith("grades them without generating them again")
    assert len(RunFolder(tmp_path / "solo").load_samples()) == 1


def test_the_start_up_deadline_is_the_graders_own(monkeypatch, worker_path):
    _hanging_workers(monkeypatch)
    with grading.Grader(n_workers=1, startup_timeout=0.5) as g:
        with pytest.raises(grading.GraderWorkerError, match="not ready after 0.5 s .*--grader-startup-timeout"):
            g.grade_many([("\\boxed{7}", "7")])
    with pytest.raises(ValueError, match="must be > 0"):
        grading.Grader(startup_timeout=0)
