"""Golden cases for the shared grader: extraction, equivalence, a fast path without false
positives, deadlines, order, crashes, use from scripts / threads / notebooks, version pins.

Run: .venv/bin/python -m pytest tests/test_grading.py -q   (about 40 s on 2 cores)
"""

import importlib.metadata
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tandem_eval.generate import grading
from tandem_eval.generate._grade_worker import math_verify_equal, serve
from tandem_eval.generate.grading import (
    PINNED,
    Grade,
    Grader,
    GraderVersionError,
    GraderWorkerError,
    check_grader_versions,
    extract_answer,
    fast_match,
    grade,
    normalize_answer,
)

REPO = Path(__file__).resolve().parents[1]

POWER_TOWER = r"so the answer is \boxed{9^{9^{9^{9^{9^{9}}}}}}"  # sympy evaluates it forever


@pytest.fixture(scope="module")
def grader():
    # One worker for the whole module: tests share 2 cores with other work.
    with Grader(n_workers=1) as g:
        yield g


# ------------------------------------------------------------------ extraction
@pytest.mark.parametrize(
    "text, expected",
    [
        (r"so \boxed{42}.", "42"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),  # nested braces
        (r"\boxed{\sqrt{\frac{a}{b^{2}}}} done", r"\sqrt{\frac{a}{b^{2}}}"),
        (r"first \boxed{1}, then \boxed{2}, finally \boxed{3}", "3"),  # last of several
        (r"\boxed{1} and \fbox{7}", "7"),  # \fbox counts
        (r"$\boxed 5$", "5"),  # space form
        (r"\boxed {12}", "12"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces
        (r"\boxed{\boxed{4}}", r"\boxed{4}"),  # outer box wins
        ("no box here", None),
        (r"\boxed{}", None),  # empty
        (r"\boxed{1} ... \boxed{\frac{1}{2}", None),  # unbalanced last box
        (r"\boxed", None),
        (r"\boxedx{3}", None),  # not the \boxed macro
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_normalize_answer_is_conservative():
    assert normalize_answer(r"$\left( 1, 2 \right)$") == "(1,2)"
    assert normalize_answer(r"\dfrac{1}{2}") == normalize_answer(r"\frac{1}{2}")
    assert normalize_answer("1,000,000") == "1000000"
    assert normalize_answer("1,2") == "1,2"  # a list, not a thousand
    assert normalize_answer("3, 500") == "3,500"  # a list too: a space is not a thousands separator
    assert normalize_answer("1 2") == "1 2"  # a space between digits is kept
    assert normalize_answer(r"3\,000") == "3 000"  # so is a thin space
    assert normalize_answer(r"\sqrt 2") == r"\sqrt2"  # a space after a command word is not
    assert normalize_answer(r"10\text{ cm}") == "10"
    assert normalize_answer(r"90^\circ") == normalize_answer(r"90^{\circ}") == "90"
    assert normalize_answer("5.") == "5."  # math-verify reads "5." as another answer than 5
    assert normalize_answer("x = 3") == "x=3"  # assignments are handled pairwise by fast_match
    assert normalize_answer(r"\text{Evelyn}") == "Evelyn"


# The fast path's three known false positives (issue 10): math-verify says wrong, so must it.
FALSE_POSITIVES = [("x=3", "y=3"), ("3, 500", "3500"), ("1 2", "12")]


@pytest.mark.parametrize("extracted, gold", FALSE_POSITIVES)
def test_fast_path_false_positives_are_graded_wrong(grader, extracted, gold):
    assert not fast_match(extracted, gold)
    result = grader.grade_many([(rf"\boxed{{{extracted}}}", gold)], timeout=10.0)[0]
    assert (result.status, result.correct, result.detail) == ("ok", False, "math-verify")


# Tricky pairs for the property "the fast path says equal => math-verify says equal": spaces,
# separators, assignments, units, degrees, text, trailing dots, relations, case.
TRICKY = FALSE_POSITIVES + [
    ("x = 3", "3"), ("3", "x=3"), ("X=3", "3"), ("x=3", "x = 3"), ("y=2x+1", "2x+1"), ("x<3", "3"),
    ("x=2,y=3", "2,3"), ("x=3", "y = 3"), ("1,000", "1000"), ("1{,}000", "1000"), ("-1,000", "-1000"),
    ("1,000.5", "1000.5"), ("12,34", "1234"), ("1,2", "12"), ("0,5", "0.5"), (r"3\,000", "3000"),
    (r"3\ 000", "3000"), ("3 000", "3000"), ("5.", "5"), ("90°", "90"), (r"90^\circ", "90"),
    (r"10\text{ cm}", "10"), (r"10\text{ cm}", r"10\text{ m}"), (r"5\text{i}", "5"), (r"1\text{ or more}", "1"),
    (r"\text{Evelyn}", "Evelyn"), (r"\text{A}", r"\text{B}"), (r"\textbf{A}", "A"), ("a b", "ab"),
    (r"\sqrt 2", r"\sqrt2"), (r"\frac 1 2", r"\frac12"), (r"\pi r", r"\pir"), (r"\left( 1, 2 \right)", "(1,2)"),
    ("(1, 2)", "(1,2)"), (r"\tfrac{3}{4}", r"\frac{3}{4}"), ("$5$", "5"), (r"\!5", "5"), (r"\$5", "5"),
    ("2x", "x2"), ("x^2", "x^{2}"), ("A", "a"), (r"x \le 3", r"x\le3"), ("x=3", "3<x"),
]  # fmt: skip


def test_fast_path_never_accepts_what_math_verify_rejects():
    fast = [fast_match(a, b) for a, b in TRICKY]
    assert sum(fast) >= 15  # the property is not satisfied vacuously
    wrongly_accepted = [(a, b) for (a, b), f in zip(TRICKY, fast) if f and not math_verify_equal(a, b)]
    assert wrongly_accepted == []


# ------------------------------------------------------------------ equivalence
CORRECT = [
    (r"\frac{1}{2}", "0.5"),
    ("0.5", r"\frac{1}{2}"),
    (r"\dfrac12", r"\frac{1}{2}"),
    ("1,000", "1000"),
    ("x = 3", "3"),
    (r"\sqrt{2}/2", r"\frac{\sqrt2}{2}"),
    (r"[0,1)", r"[0, 1)"),
    (r"(-\infty, 3]", r"(-\infty,3]"),
    ("(1, 2)", "(1,2)"),
    (r"\{1,2\}", r"\{2,1\}"),
    (r"50\%", "50"),
]
WRONG = [("2", "3"), ("1/3", "0.33"), ("0.33", r"\frac{1}{3}"), ("(0,1]", "[0,1)"), ("A", "B")]


def test_equivalences(grader):
    pairs = [(rf"The answer is \boxed{{{p}}}.", g) for p, g in CORRECT + WRONG]
    grades = grader.grade_many(pairs, timeout=10.0)
    assert all(g.status == "ok" for g in grades), grades
    assert [g.correct for g in grades] == [True] * len(CORRECT) + [False] * len(WRONG), grades


def test_string_fast_path_needs_no_worker():
    g = Grader(n_workers=1)
    t = time.monotonic()
    grades = g.grade_many([(rf"\boxed{{{i:,}}}", str(i)) for i in range(5000)])
    assert time.monotonic() - t < 2.0
    assert all(x == Grade(True, "ok", f"{i:,}", "string match") for i, x in enumerate(grades))
    assert g._workers == []  # no process was started for easy items
    g.close()


def test_grade_single_reuses_one_shared_worker():
    assert grade(r"\boxed{\tfrac{3}{4}}", r"\frac{3}{4}").correct  # fast path
    mv = grade(r"so \boxed{0.75}", r"\frac34")  # via a one-worker pool
    assert (mv.correct, mv.status, mv.extracted) == (True, "ok", "0.75")
    none = grade("I give up", "3")
    assert (none.correct, none.status, none.extracted) == (False, "no_answer", None)
    shared = grading._shared_grader()
    pid = shared._workers[0].proc.pid
    assert grade(r"\boxed{0.2}", r"\frac15").correct and shared._workers[0].proc.pid == pid


# ------------------------------------------------------------------ deadlines and order
def test_timeout_kills_worker_and_next_item_grades(grader):
    grader.grade_many([(r"\boxed{0.5}", r"\frac12")])  # make sure the worker is warm
    t, seen = time.monotonic(), []
    pairs = [(POWER_TOWER, "1"), (r"\boxed{0.25}", r"\frac14")]
    first, second = grader.grade_many(pairs, timeout=2.0, progress=lambda n, _: seen.append(time.monotonic() - t))
    assert seen[0] < 2.0 + 1.0  # the deadline holds (the tower alone would run for ever)
    assert seen[1] < 2.0 + 10.0  # the replacement worker starts (a fresh interpreter; slow under load)
    assert (first.status, first.correct) == ("timeout", False)
    assert first.extracted == "9^{9^{9^{9^{9^{9}}}}}"
    assert (second.status, second.correct) == ("ok", True)
    spare = grader._spare  # a warm spare now waits, so the next kill is replaced at once
    assert spare is not None and spare.proc.poll() is None
    grader.grade_many([(POWER_TOWER, "1")], timeout=1.0)
    assert spare in grader._workers


def test_grade_many_keeps_order_with_mixed_statuses():
    pairs = [
        (r"\boxed{0.5}", r"\frac{1}{2}"),  # ok, via math-verify
        ("no answer at all", "7"),  # no_answer
        (r"\boxed{(10^{10})!}", "1"),  # timeout (giant factorial)
        (r"\boxed{7}", "7"),  # ok, string match
        (r"\boxed{2}", "3"),  # ok, wrong
        (r"\boxed{\frac{2}{4}}", "0.5"),  # ok, via math-verify
    ]
    done = []
    with Grader(n_workers=2) as g:
        grades = g.grade_many(pairs, timeout=2.0, progress=lambda n, total: done.append(n))
    assert [x.status for x in grades] == ["ok", "no_answer", "timeout", "ok", "ok", "ok"]
    assert [x.correct for x in grades] == [True, False, False, True, False, True]
    assert [x.extracted for x in grades] == ["0.5", None, "(10^{10})!", "7", "2", r"\frac{2}{4}"]
    assert done[-1] == len(pairs) and done == sorted(done)


def test_crashed_worker_gives_error_and_is_replaced():
    # A worker killed from outside (as the OOM killer would) fails only the item it was on.
    import threading

    with Grader(n_workers=1) as g:
        g.grade_many([(r"\boxed{0.5}", r"\frac12")])  # workers are up
        threading.Timer(1.0, lambda: g._workers[0].proc.kill()).start()
        t = time.monotonic()
        crashed, after = g.grade_many([(POWER_TOWER, "1"), (r"\boxed{0.25}", r"\frac14")], timeout=30.0)
    assert time.monotonic() - t < 10.0
    assert crashed.status == "error"
    assert crashed.detail.startswith("worker died (exit code -9 (SIGKILL)")
    assert (after.status, after.correct) == ("ok", True)


def test_worker_exception_is_error():
    # Workers are separate interpreters, so a monkeypatch cannot reach them; run the worker
    # loop in this process over text streams instead, with a comparison that raises.
    def compare(extracted, gold):
        if extracted == "bad":
            raise ValueError("boom")
        return True

    out = io.StringIO()
    serve(io.StringIO(json.dumps([[0, "bad", "1"], [1, "good", "1"]]) + "\n"), out, compare)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        "ready",
        [0, "error", False, "ValueError: boom"],
        [1, "ok", True, "math-verify"],
    ]


def test_worker_that_cannot_start_reports_exit_code_and_stderr(monkeypatch):
    failing = "import sys; sys.stderr.write('ModuleNotFoundError: no math here\\n'); sys.exit(3)"
    monkeypatch.setattr(grading, "_worker_command", lambda: [sys.executable, "-c", failing])
    with Grader(n_workers=1) as g, pytest.raises(GraderWorkerError) as err:
        g.grade_many([(r"\boxed{0.5}", r"\frac12")])
    msg = str(err.value)
    assert "\n" not in msg and "exit code 3" in msg and "ModuleNotFoundError: no math here" in msg


# ------------------------------------------------------------------ anywhere: scripts, threads, notebooks
def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


ONE_OFF = r'from tandem_eval.generate.grading import grade; print(grade("\\boxed{\\frac12}", "0.5"))'


def test_plain_script_without_main_guard_and_python_c_grade(tmp_path):
    script = tmp_path / "check.py"  # no `if __name__ == "__main__":` guard, as a new user writes
    script.write_text(ONE_OFF + "\n")
    for argv in ([str(script)], ["-c", ONE_OFF]):
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=_env(), timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == (
            "Grade(correct=True, status='ok', extracted='\\\\frac12', detail='math-verify')"
        ), done.stdout


def test_four_threads_share_one_grader_and_grade():
    items = [(rf"\boxed{{\frac{{1}}{{{d}}}}}", str(1 / d)) for d in (2, 4, 5, 8)]
    items += [(rf"\boxed{{0.{d}}}", rf"\frac{{{d}}}{{10}}") for d in (1, 3)]  # all via math-verify
    results: dict[int, list] = {}

    def work(t: int, g: Grader) -> None:
        pairs = items[t:] + [(r"\boxed{2}", r"\frac{1}{3}")]  # the last one is wrong
        results[t] = [x.correct for x in g.grade_many(pairs, timeout=20.0)] + [grade(*items[t]).correct]

    with Grader(n_workers=1) as g:
        threads = [threading.Thread(target=work, args=(t, g)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
    assert results == {t: [True] * (len(items) - t) + [False, True] for t in range(4)}


def test_deadline_holds_off_the_main_thread():
    # math-verify's own timeouts use SIGALRM (main thread only); ours kill the worker instead.
    out = {}

    def work():
        grade(r"\boxed{0.5}", r"\frac12")  # the shared worker is up before the clock runs
        t = time.monotonic()
        out["tower"] = grade(POWER_TOWER, "1", timeout=1.0)
        out["seconds"] = time.monotonic() - t
        out["next"] = grade(r"\boxed{0.125}", r"\frac18")

    th = threading.Thread(target=work)
    th.start()
    th.join(timeout=60)
    assert out["tower"].status == "timeout" and out["seconds"] < 1.0 + 3.0
    assert (out["next"].status, out["next"].correct) == ("ok", True)


@pytest.mark.slow
def test_grade_from_a_jupyter_kernel(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(ONE_OFF)])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert nb.cells[0].outputs[0]["text"].startswith("Grade(correct=True, status='ok'")


# ------------------------------------------------------------------ version pins
def test_versions_match_installed_pins():
    versions = check_grader_versions()
    assert versions == {**PINNED, "mismatch": False}


def test_version_mismatch_raises_unless_allowed(monkeypatch):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.7.0" if name == "math-verify" else real(name))
    with pytest.raises(GraderVersionError) as err:
        check_grader_versions()
    msg = str(err.value)
    assert "\n" not in msg and "math-verify 0.7.0 (pinned 0.9.0)" in msg
    assert "pip install math-verify==0.9.0 latex2sympy2_extended==1.11.0" in msg
    assert "--allow-grader-mismatch" in msg
    versions = check_grader_versions(allow_mismatch=True)
    assert versions["math-verify"] == "0.7.0" and versions["mismatch"] is True


def test_missing_package_is_a_mismatch(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(GraderVersionError, match="missing"):
        check_grader_versions()
    assert check_grader_versions(allow_mismatch=True)["latex2sympy2_extended"] is None
