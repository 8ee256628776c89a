"""Golden cases for the shared grader: extraction, equivalence, deadlines, order, version pins.

Run: .venv/bin/python -m pytest tests/test_grading.py -q   (about 15 s on 2 cores)
"""

import importlib.metadata
import time

import pytest

from tandem_eval import grading
from tandem_eval.grading import (
    PINNED,
    Grade,
    Grader,
    GraderVersionError,
    check_grader_versions,
    extract_answer,
    grade,
    normalize_answer,
)

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
    assert normalize_answer(r"$\left( 1, 2 \right)$.") == "(1,2)"
    assert normalize_answer(r"\dfrac{1}{2}") == normalize_answer(r"\frac{1}{2}")
    assert normalize_answer("1,000,000") == "1000000"
    assert normalize_answer("1,2") == "1,2"  # a list, not a thousand
    assert normalize_answer(r"10\text{ cm}") == "10"
    assert normalize_answer(r"90^\circ") == normalize_answer(r"90^{\circ}") == "90"
    assert normalize_answer("x = 3") == "3"
    assert normalize_answer("y = 2x = 4") == "y=2x=4"  # not a plain assignment
    assert normalize_answer(r"\text{Evelyn}") == "Evelyn"


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


def test_grade_single():
    assert grade(r"\boxed{\tfrac{3}{4}}", r"\frac{3}{4}").correct  # fast path
    mv = grade(r"so \boxed{0.75}", r"\frac34")  # via a one-worker pool
    assert (mv.correct, mv.status, mv.extracted) == (True, "ok", "0.75")
    none = grade("I give up", "3")
    assert (none.correct, none.status, none.extracted) == (False, "no_answer", None)


# ------------------------------------------------------------------ deadlines and order
def test_timeout_kills_worker_and_next_item_grades(grader):
    grader.grade_many([(r"\boxed{0.5}", r"\frac12")])  # make sure the worker is warm
    t = time.monotonic()
    first, second = grader.grade_many([(POWER_TOWER, "1"), (r"\boxed{0.25}", r"\frac14")], timeout=2.0)
    assert time.monotonic() - t < 2.0 + 3.0
    assert (first.status, first.correct) == ("timeout", False)
    assert first.extracted == "9^{9^{9^{9^{9^{9}}}}}"
    assert (second.status, second.correct) == ("ok", True)


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
    assert crashed.status == "error" and "worker died" in crashed.detail
    assert (after.status, after.correct) == ("ok", True)


def test_worker_exception_is_error(monkeypatch):
    # Fork-server workers import the module afresh, so a monkeypatch cannot reach them; run the
    # worker loop in this process over a pipe instead, with a comparison that raises.
    import multiprocessing as mp

    def compare(extracted, gold):
        if extracted == "bad":
            raise ValueError("boom")
        return True

    monkeypatch.setattr(grading, "_math_verify", compare)
    monkeypatch.setattr(grading, "_cap_memory", lambda: None)
    parent, child = mp.Pipe()
    parent.send([(0, "bad", "1"), (1, "good", "1")])
    parent.send(None)
    grading._worker_main(child)
    assert parent.recv() == "ready"
    assert parent.recv() == (0, "error", False, "ValueError: boom")
    assert parent.recv() == (1, "ok", True, "math-verify")


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
