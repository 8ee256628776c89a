"""Grading: the one answer checker shared by evaluation and training.

A prediction is graded by (1) taking the content of its LAST \\boxed{...} / \\fbox{...}
(`extract_answer`), (2) a conservative normalised string match against the gold answer, done
in the calling process, and (3) if the strings differ, math-verify (`parse` + `verify`) run in a
killable worker process with a per-item deadline. Every item gets a `Grade` with a status:

  ok         an answer was extracted and compared (correct or not)
  no_answer  no complete \\boxed{} in the prediction (missing, empty or unbalanced braces)
  timeout    math-verify did not finish within the deadline; the worker was killed and replaced
  error      an exception escaped the comparison, or the worker process died

    from tandem_eval.grading import Grader, grade, check_grader_versions
    versions = check_grader_versions()          # raises if math-verify is not the pinned one
    with Grader() as g:
        grades = g.grade_many([(text, gold), ...], timeout=5.0)
    grade("... so \\boxed{\\frac12}.", "0.5")    # one-off: Grade(correct=True, status='ok', ...)

From the shell: python -m tandem_eval.grading "<prediction>" "<gold>" [timeout_s]
"""

from __future__ import annotations

import importlib.metadata
import logging
import multiprocessing as mp
import os
import re
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_for_connections

# The grader is part of the measurement: other versions give other verdicts (the independent
# reproduction found silent false negatives without these exact versions), so they are pinned.
PINNED = {"math-verify": "0.9.0", "latex2sympy2_extended": "1.11.0"}
_FIX = (
    "pip install math-verify==0.9.0 latex2sympy2_extended==1.11.0, or pass "
    "--allow-grader-mismatch to accept a different grader (recorded in the run)"
)
_WORKER_EXTRA_MEMORY = 4 << 30  # address space a worker may add on top of its start-up size
_STARTUP_TIMEOUT_S = 120.0  # a worker that is not ready by then is a broken install
_MAX_BATCH = 16  # items per message to a worker
_MAX_FAST_LEN = 1000  # longer answers skip the regex fast path (go to math-verify)
_PRELOAD_IF_IMPORTED = ("torch", "transformers")  # see Grader.__init__
_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_SPACE_FORM_END = re.compile(r"[\s$]")


class GraderVersionError(RuntimeError):
    """math-verify / latex2sympy2_extended are missing or not the pinned versions."""


@dataclass(frozen=True)
class Grade:
    correct: bool
    status: str  # "ok" | "no_answer" | "timeout" | "error"
    extracted: str | None  # content of the last \boxed{}, None when absent
    detail: str = ""  # how it was decided, or what went wrong


def check_grader_versions(allow_mismatch: bool = False) -> dict:
    """Installed versions of the grader packages, plus "mismatch"; raises on a mismatch."""
    versions: dict = {}
    for pkg in PINNED:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    versions["mismatch"] = any(versions[p] != v for p, v in PINNED.items())
    if versions["mismatch"] and not allow_mismatch:
        found = ", ".join(f"{p} {versions[p] or 'missing'} (pinned {v})" for p, v in PINNED.items())
        raise GraderVersionError(f"grader versions differ from the pins: {found}; fix: {_FIX}")
    return versions


def extract_answer(text: str) -> str | None:
    r"""Content of the last top-level \boxed{...} or \fbox{...} (also `\boxed 5`), else None.

    Scans left to right, so a box nested inside another belongs to the outer one. An unbalanced
    last box (typically a generation cut off by the token budget) gives None rather than an
    earlier box: an earlier box is usually an intermediate result, not the final answer.
    Escaped braces (\{ \}) do not count towards the balance.
    """
    answer, pos = None, 0
    while (m := _BOX.search(text, pos)) is not None:
        i = m.end()
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                c = text[j]
                if c == "\\":
                    j += 2
                    continue
                depth += (c == "{") - (c == "}")
                if depth == 0:
                    break
                j += 1
            if depth != 0 or j >= len(text):
                return None
            answer, pos = text[i + 1 : j], j + 1
        elif i > m.end() and i < len(text):  # "\boxed 5": up to whitespace or "$"
            end = _SPACE_FORM_END.search(text, i)
            j = end.start() if end else len(text)
            answer, pos = text[i:j], j
        else:
            answer, pos = None, i  # bare "\boxed" with nothing after it
    return answer if answer is not None and answer.strip() else None


def normalize_answer(s: str) -> str:
    r"""Conservative string normalisation for the fast path; it only ever proves equality.

    Removes: surrounding whitespace and all spaces, $, \left/\right, \! \, \; \: thin spaces,
    \displaystyle, degree marks (^\circ, ^{\circ}, °), a trailing unit written as \text{..} /
    \mbox{..} / \mathrm{..} after a number ("10\text{ cm}" -> "10"), then unwraps remaining
    \text{X} -> X; \dfrac/\tfrac -> \frac; thousands separators in a plain number
    ("1,000" / "1{,}000" -> "1000"); one trailing "."; a leading single-letter "x=".
    Anything subtler (fractions vs decimals, sets, intervals) is left to math-verify.
    """
    s = s.strip().replace("$", "").replace("\\displaystyle", "")
    s = re.sub(r"\\(?:left|right)(?![A-Za-z])", "", s)
    s = re.sub(r"\\[!,;: ]", "", s)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|°", "", s)
    s = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", s)
    s = re.sub(r"(\d)\s*\\(?:text|mbox|mathrm)\{\s*[A-Za-z][A-Za-z .]*\}$", r"\1", s)
    s = re.sub(r"\\(?:text|textbf|mbox|mathrm)\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\s+", "", s).replace("{,}", ",")
    if s.endswith(".") and not s.endswith(".."):
        s = s[:-1]
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    if s.count("=") == 1:
        s = re.sub(r"^[A-Za-z]=", "", s)
    return s


def _fast_grade(prediction: str, gold: str) -> tuple[Grade | None, str | None]:
    """Grade without a worker when possible; returns (grade or None, extracted answer)."""
    extracted = extract_answer(prediction)
    if extracted is None:
        return Grade(False, "no_answer", None, "no complete \\boxed{} in the prediction"), None
    if len(extracted) <= _MAX_FAST_LEN and len(gold) <= _MAX_FAST_LEN:
        if (norm := normalize_answer(extracted)) and norm == normalize_answer(gold):
            return Grade(True, "ok", extracted, "string match"), extracted
    return None, extracted


# ---------------------------------------------------------------- worker process side
def _math_verify(extracted: str, gold: str) -> bool:
    from math_verify import parse, verify

    # Both sides are wrapped in \boxed{} so math-verify reads them as LaTeX. Its own timeouts
    # are disabled (None): they use SIGALRM, and the Grader enforces the deadline by killing.
    # raise_on_error stays False, math-verify's reference behaviour: a side that fails to parse
    # or compare counts as "not equal" (status ok, wrong), as in other math-verify evaluations.
    g = parse("\\boxed{" + gold + "}", parsing_timeout=None)
    p = parse("\\boxed{" + extracted + "}", parsing_timeout=None)
    return bool(verify(g, p, timeout_seconds=None))


def _cap_memory() -> None:
    """Best effort: a sympy blow-up fails with MemoryError instead of exhausting the machine."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = size + _WORKER_EXTRA_MEMORY
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ImportError, OSError, ValueError):
        pass


def _worker_main(conn) -> None:
    # math-verify warns once that its timeouts are off; that is deliberate here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _cap_memory()
    _math_verify("\\frac{1}{2}", "0.5")  # warm-up (imports, parser set-up) before the clock runs
    conn.send("ready")
    while True:
        try:
            batch = conn.recv()
        except EOFError:  # the parent went away without close()
            return
        if batch is None:
            return
        for idx, extracted, gold in batch:
            try:
                conn.send((idx, "ok", _math_verify(extracted, gold), "math-verify"))
            except Exception as e:  # noqa: BLE001 -- any failure of one item is that item's
                conn.send((idx, "error", False, f"{type(e).__name__}: {str(e)[:200]}"))


# ---------------------------------------------------------------- parent side
@dataclass(eq=False)
class _Worker:
    proc: mp.process.BaseProcess
    conn: object
    started: float
    ready: bool = False
    batch: deque = field(default_factory=deque)  # items sent, not yet answered; head = current
    t0: float = 0.0  # when the head item started


class Grader:
    """A pool of killable grading workers; use as a context manager (workers start lazily).

    Like any multiprocessing user, a script that grades needs an `if __name__ == "__main__":`
    guard: the fork server imports the main script once (without running the guarded part).
    """

    def __init__(self, n_workers: int | None = None):
        self.n_workers = n_workers or min(2, os.cpu_count() or 1)
        # "forkserver", not "fork": forking a parent that runs torch / vLLM threads (or holds a
        # CUDA context) can copy held locks and deadlock the child; the fork server is a fresh,
        # single-threaded interpreter. Not "spawn": workers fork from that server, with
        # math-verify preloaded, so a replacement after a timeout starts in a fraction of a second.
        # Each worker still re-runs the main script as __mp_main__ (Python 3.11's fork server
        # ignores "__main__" below: it looks for a "main_path" key that spawn no longer sends),
        # so heavy libraries the parent already uses are preloaded into the server once; the
        # re-run then finds them imported (a restart with torch: ~1 s -> ~0.1 s).
        heavy = [m for m in _PRELOAD_IF_IMPORTED if m in sys.modules]
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(["__main__", __name__, "math_verify", *heavy])
        self._workers: list[_Worker] = []

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for w in self._workers:  # no polite shutdown needed: workers hold no state
            self._kill(w)
        self._workers = []

    def grade_many(
        self, pairs: list[tuple[str, str]], timeout: float = 5.0, progress: Callable[[int, int], None] | None = None
    ) -> list[Grade]:
        """Grade (prediction, gold) pairs in order; progress(n_done, n_total) after each item."""
        results: list[Grade | None] = [None] * len(pairs)
        todo: deque = deque()
        for i, (prediction, gold) in enumerate(pairs):
            grade_, extracted = _fast_grade(prediction, gold)
            if grade_ is None:
                todo.append((i, extracted, gold))
            results[i] = grade_
        n_done = len(pairs) - len(todo)
        if progress is not None and n_done:
            progress(n_done, len(pairs))  # the fast-path items, at once

        def finish(idx: int, g: Grade) -> None:
            nonlocal n_done
            results[idx], n_done = g, n_done + 1
            if progress is not None:
                progress(n_done, len(pairs))

        if todo:
            self._run(todo, timeout, finish)
        return results  # type: ignore[return-value]

    def _run(self, todo: deque, timeout: float, finish: Callable[[int, Grade], None]) -> None:
        while len(self._workers) < self.n_workers:
            self._workers.append(self._start())
        while todo or any(w.batch for w in self._workers):
            now = time.monotonic()
            for w in self._workers:  # hand work to idle workers; small batches near the end
                if w.ready and not w.batch and todo:
                    k = max(1, min(_MAX_BATCH, len(todo) // (2 * self.n_workers)))
                    w.batch.extend(todo.popleft() for _ in range(k))
                    w.t0 = now
                    try:
                        w.conn.send(list(w.batch))
                    except OSError:  # died while idle: not the batch's fault
                        self._replace(w, todo)
            busy = [w for w in self._workers if w.batch]
            wait_s = min((w.t0 + timeout - now for w in busy), default=1.0)
            ready = wait_for_connections([w.conn for w in self._workers], max(0.0, wait_s))
            for w in [w for w in self._workers if w.conn in ready]:
                self._receive(w, todo, finish)
            now = time.monotonic()
            for w in list(self._workers):
                if w.batch and now - w.t0 > timeout:
                    idx, extracted, _ = w.batch.popleft()
                    finish(idx, Grade(False, "timeout", extracted, f"no verdict within {timeout:g} s; worker killed"))
                    self._replace(w, todo)
                elif not w.ready and now - w.started > _STARTUP_TIMEOUT_S:
                    raise RuntimeError(f"grading worker not ready after {_STARTUP_TIMEOUT_S:g} s")

    def _receive(self, w: _Worker, todo: deque, finish: Callable[[int, Grade], None]) -> None:
        try:
            while w.conn.poll():
                msg = w.conn.recv()
                if msg == "ready":
                    w.ready = True
                    continue
                idx, status, correct, detail = msg
                _, extracted, _ = w.batch.popleft()
                finish(idx, Grade(correct, status, extracted, detail))
                w.t0 = time.monotonic()  # the next item's clock starts now
        except (EOFError, OSError):
            w.proc.join(timeout=1.0)
            if not w.ready:  # e.g. math-verify not importable: retrying would loop forever
                raise RuntimeError(
                    f"grading worker failed to start (exit code {w.proc.exitcode}); is math-verify installed? ({_FIX})"
                ) from None
            if w.batch:  # crashed (segfault, OOM kill) while grading the head item
                idx, extracted, _ = w.batch.popleft()
                finish(idx, Grade(False, "error", extracted, f"worker died (exit code {w.proc.exitcode})"))
            self._replace(w, todo)

    def _start(self) -> _Worker:
        parent_conn, child_conn = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child_conn,), daemon=True)
        proc.start()
        child_conn.close()  # so the parent sees EOF when the worker dies
        return _Worker(proc, parent_conn, time.monotonic())

    def _replace(self, w: _Worker, todo: deque) -> None:
        """Kill w, put its unanswered items back at the front of the queue, start a new one."""
        self._kill(w)
        todo.extendleft(reversed(w.batch))
        self._workers[self._workers.index(w)] = self._start()

    @staticmethod
    def _kill(w: _Worker) -> None:
        if w.proc.is_alive():
            w.proc.kill()
            w.proc.join(timeout=5.0)
        w.conn.close()


def grade(prediction: str, gold: str, timeout: float = 5.0) -> Grade:
    """Grade one item; starts a one-worker pool only if the string fast path cannot decide."""
    fast, _ = _fast_grade(prediction, gold)
    if fast is not None:
        return fast
    with Grader(n_workers=1) as g:
        return g.grade_many([(prediction, gold)], timeout=timeout)[0]


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit('usage: python -m tandem_eval.grading "<prediction>" "<gold>" [timeout_s]')
    print(check_grader_versions(allow_mismatch=True))
    print(grade(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) == 4 else 5.0))
