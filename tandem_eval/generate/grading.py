"""Grading: the one answer checker shared by evaluation and training.

A prediction is graded by (1) taking the content of its LAST \\boxed{...} / \\fbox{...}
(`extract_answer`), (2) a conservative normalised string match against the gold answer, done
in the calling process, which may only prove equality (`fast_match`), and (3) otherwise
math-verify (`parse` + `verify`) run in a killable worker subprocess with a per-item deadline.
Every item gets a `Grade` with a status:

  ok         an answer was extracted and compared (correct or not)
  no_answer  no complete \\boxed{} in the prediction (missing, empty or unbalanced braces)
  timeout    math-verify did not finish within the deadline; the worker was killed and replaced
  error      an exception escaped the comparison, or the worker process died
  ungraded   not graded yet: the grader could not start; the sample is stored and a rerun of the
             command grades it without generating it again (tandem_eval.generate)

    from tandem_eval.generate.grading import Grader, grade, check_grader_versions
    versions = check_grader_versions()          # raises if math-verify is not the pinned one
    with Grader() as g:
        grades = g.grade_many([(text, gold), ...], timeout=5.0)
    grade("... so \\boxed{\\frac12}.", "0.5")    # one-off: Grade(correct=True, status='ok', ...)

Works from a script without an `if __name__ == "__main__":` guard, from Jupyter, from
`python -c` and from several threads: workers are `python -m tandem_eval.generate._grade_worker`
subprocesses (they never import the caller's `__main__`), a lock serialises threads sharing a
Grader, and the deadline is enforced by killing the worker (no SIGALRM).

From the shell: python -m tandem_eval.generate.grading "<prediction>" "<gold>" [timeout_s]
"""

from __future__ import annotations

import atexit
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_for_fds
from pathlib import Path
from typing import IO, cast

# The grader is part of the measurement: other versions give other verdicts (the independent
# reproduction found silent false negatives without these exact versions), so they are pinned.
PINNED = {"math-verify": "0.9.0", "latex2sympy2_extended": "1.11.0"}
_FIX = (
    "pip install math-verify==0.9.0 latex2sympy2_extended==1.11.0, or pass "
    "--allow-grader-mismatch to accept a different grader (recorded in the run)"
)
# A worker that is not ready by then is a broken install. Generous: a cold import of sympy and
# math-verify beside a loaded model under memory pressure took over 120 s (issue 32); configurable
# per Grader (the solo/handoff commands' --grader-startup-timeout).
STARTUP_TIMEOUT_S = 600.0
UNGRADED = "ungraded"  # a stored sample whose grading failed; a rerun of its command grades it
_MAX_BATCH = 16  # items per message to a worker
_MAX_FAST_LEN = 1000  # longer answers skip the regex fast path (go to math-verify)
_STDERR_TAIL = 600  # characters of a dead worker's stderr quoted in the error
_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_SPACE_FORM_END = re.compile(r"[\s$]")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?")
_ASSIGNMENT = re.compile(r"[A-Za-z]=([^=]+)")  # "x=3"; the right side is compared with a value
_RELATION = re.compile(r"[<>]|\\(?:neq?|leq?|geq?|lt|gt|in|approx|sim|equiv)(?![A-Za-z])")


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
    r"""Conservative string normalisation for the fast path (see `fast_match`).

    Removes: surrounding whitespace, $, \left/\right, \displaystyle, degree marks written as
    ^\circ / ^{\circ}, a trailing unit written as \text{..} / \mbox{..} / \mathrm{..} after a
    number ("10\text{ cm}" -> "10"), then unwraps remaining \text{X} -> X; \dfrac/\tfrac ->
    \frac; thousands separators in a plain number written without spaces ("1,000" / "1{,}000"
    -> "1000"). Whitespace and the spacing commands \! \, \; \: are dropped, except between two
    letters or digits, where they stay one space ("1 2" and "3\,000" are not 12 and 3000).
    Each step is one math-verify also makes; anything subtler is left to math-verify.
    """
    s = s.strip().replace("$", "").replace("\\displaystyle", "")
    s = re.sub(r"\\(?:left|right)(?![A-Za-z])", "", s)
    s = re.sub(r"\\[!,;: ]", " ", s)  # spacing commands separate like a space (3\,000 is not 3000)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s)  # not "°": math-verify reads 90° as another value
    s = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", s)
    s = re.sub(r"(\d)\s*\\(?:text|mbox|mathrm)\{\s*[A-Za-z][A-Za-z .]*\}$", r"\1", s)
    s = re.sub(r"\\(?:text|textbf|mbox|mathrm)\{([^{}]*)\}", r"\1", s).strip()
    if _THOUSANDS.fullmatch(s):  # only with no space inside: "3, 500" is a list, not 3500
        s = s.replace("{,}", "").replace(",", "")
    s = re.sub(r"(\\[A-Za-z]+)\s+(?=[^A-Za-z\s])", r"\1", s)  # a space only ends a command word
    return re.sub(r"\s+", _space, s)


def _space(m: re.Match) -> str:
    """A run of whitespace: one space between two letters/digits ("1 2" != "12"), else nothing."""
    before, after = m.string[m.start() - 1 : m.start()], m.string[m.end() : m.end() + 1]
    return " " if before.isalnum() and after.isalnum() else ""


def fast_match(extracted: str, gold: str) -> bool:
    """True only when the two answers are equal after `normalize_answer` (or one is "x = <the
    other>"), each a case math-verify accepts too; False means "not decided here", not "wrong"."""
    if len(extracted) > _MAX_FAST_LEN or len(gold) > _MAX_FAST_LEN:
        return False
    a, b = normalize_answer(extracted), normalize_answer(gold)
    if not a or not b:
        return False
    if a == b:
        return True
    # math-verify compares a one-letter assignment's right side with a plain value ("x=3" vs
    # "3"), but two assignments as relations ("x=3" vs "y=3" differ): strip only against a value.
    for lhs, rhs in ((a, b), (b, a)):
        m = _ASSIGNMENT.fullmatch(lhs)
        if m and m.group(1) == rhs and not _RELATION.search(rhs):
            return True
    return False


def _fast_grade(prediction: str, gold: str) -> tuple[Grade | None, str | None]:
    """Grade without a worker when possible; returns (grade or None, extracted answer)."""
    extracted = extract_answer(prediction)
    if extracted is None:
        return Grade(False, "no_answer", None, "no complete \\boxed{} in the prediction"), None
    if fast_match(extracted, gold):
        return Grade(True, "ok", extracted, "string match"), extracted
    return None, extracted


# ---------------------------------------------------------------- worker pool (parent side)
class GraderWorkerError(RuntimeError):
    """A grading worker could not start; the message quotes its exit code and stderr."""


class GradingIncomplete(RuntimeError):
    """A run's samples are stored but some are ungraded (the grader failed); rerunning grades them."""


def ungraded(prediction: str, reason: str) -> Grade:
    """The grade of a sample stored while the grader could not run."""
    return Grade(False, UNGRADED, extract_answer(prediction), f"not graded: {reason}")


def _worker_command() -> list[str]:
    if not sys.executable:
        raise GraderWorkerError("cannot start a grading worker: sys.executable is empty in this interpreter")
    # -P (3.11+): the working directory is not put on sys.path, so a local file named like a
    # dependency cannot shadow it; tandem_eval itself is found through PYTHONPATH (_start).
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *safe_path, "-m", "tandem_eval.generate._grade_worker"]


@dataclass(eq=False)
class _Worker:
    proc: subprocess.Popen
    stderr: IO[bytes]  # a temporary file holding the worker's stderr, quoted when it dies
    started: float
    ready: bool = False
    pending: bytes = b""  # a partial line read from stdout
    batch: deque = field(default_factory=deque)  # items sent, not yet answered; head = current
    t0: float = 0.0  # when the head item started

    def death_cause(self) -> str:
        """ "exit code N (SIGNAME); stderr: <tail>" for a worker whose stdout reached EOF."""
        try:
            rc = self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        cause = f"exit code {rc}"
        if rc < 0:
            try:
                cause += f" ({signal.Signals(-rc).name})"
            except ValueError:
                pass
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(0, self.stderr.tell() - 4 * _STDERR_TAIL))
        lines = [ln.strip() for ln in self.stderr.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        tail = " | ".join(lines)[-_STDERR_TAIL:]
        return f"{cause}; stderr: {tail}" if tail else f"{cause}; no stderr output"


class Grader:
    """A pool of killable grading workers; use as a context manager (workers start lazily).

    Safe to share between threads (one grade_many runs at a time) and usable from any script,
    notebook or thread: workers are subprocesses that never import the caller's `__main__`.
    """

    def __init__(self, n_workers: int | None = None, startup_timeout: float = STARTUP_TIMEOUT_S):
        check_startup_timeout(startup_timeout, 0.0, "the grader's start-up deadline")
        self.n_workers = n_workers or min(2, os.cpu_count() or 1)
        self.startup_timeout = float(startup_timeout)
        self._workers: list[_Worker] = []
        # A worker killed at a deadline is replaced by this warm spare (a fresh interpreter takes
        # ~1-3 s to import math-verify). It exists only once a first worker has been replaced,
        # and starts only while every worker is ready, so it never slows a replacement down.
        self._spare: _Worker | None = None
        self._want_spare = False
        self._lock = threading.Lock()
        self._pid = os.getpid()  # a forked child must not drive the parent's workers

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> Grader:
        """Start the workers now, without waiting for them: they import math-verify while the caller
        generates, so the first grade_many finds them warm (start-up is still checked there)."""
        with self._lock:
            if self._pid == os.getpid():
                while len(self._workers) < self.n_workers:
                    self._workers.append(self._start())
        return self

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                for w in self._workers + ([self._spare] if self._spare is not None else []):
                    self._kill(w)  # no polite shutdown needed: workers hold no state
            self._workers, self._spare = [], None

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
            with self._lock:
                if self._pid != os.getpid():  # inherited through fork: start our own workers
                    self._workers, self._spare, self._pid = [], None, os.getpid()
                self._run(todo, timeout, finish)
        return results  # type: ignore[return-value]

    def _run(self, todo: deque, timeout: float, finish: Callable[[int, Grade], None]) -> None:
        while len(self._workers) < self.n_workers:
            self._workers.append(self._start())
        while todo or any(w.batch for w in self._workers):
            self._start_spare_if_due()
            now = time.monotonic()
            for w in self._workers:  # hand work to idle workers; small batches near the end
                if w.ready and not w.batch and todo:
                    k = max(1, min(_MAX_BATCH, len(todo) // (2 * self.n_workers)))
                    w.batch.extend(todo.popleft() for _ in range(k))
                    w.t0 = now
                    try:
                        stdin = cast(IO[bytes], w.proc.stdin)  # cast: started with stdin=PIPE, never None
                        stdin.write((json.dumps(list(w.batch)) + "\n").encode())
                        stdin.flush()
                    except (OSError, ValueError):  # died while idle: not the batch's fault
                        self._replace(w, todo)
            busy = [w for w in self._workers if w.batch]
            wait_s = min((w.t0 + timeout - now for w in busy), default=1.0)
            # multiprocessing's wait takes any object with fileno(); typeshed names only its own types
            readable = wait_for_fds([w.proc.stdout for w in self._workers], max(0.0, wait_s))  # type: ignore[misc]
            for w in [w for w in self._workers if w.proc.stdout in readable]:
                self._receive(w, todo, finish)
            now = time.monotonic()
            for w in list(self._workers):
                if w.batch and now - w.t0 > timeout:
                    idx, extracted, _ = w.batch.popleft()
                    finish(idx, Grade(False, "timeout", extracted, f"no verdict within {timeout:g} s; worker killed"))
                    self._replace(w, todo)
                elif not w.ready and now - w.started > self.startup_timeout:
                    self._kill(w)
                    self._workers.remove(w)
                    raise GraderWorkerError(
                        f"grading worker not ready after {self.startup_timeout:g} s (a cold start under memory "
                        "pressure can take minutes: raise --grader-startup-timeout)"
                    )
        self._start_spare_if_due()  # so it warms up between calls too

    def _start_spare_if_due(self) -> None:
        if self._want_spare and self._spare is None and all(w.ready for w in self._workers):
            self._spare = self._start()

    def _receive(self, w: _Worker, todo: deque, finish: Callable[[int, Grade], None]) -> None:
        chunk = os.read(cast(IO[bytes], w.proc.stdout).fileno(), 1 << 16)  # cast: stdout=PIPE, never None
        if not chunk:  # EOF: the worker died (segfault, OOM kill, failed import ...)
            cause = w.death_cause()
            if not w.ready:  # retrying a worker that cannot start would loop forever
                self._kill(w)
                self._workers.remove(w)
                raise GraderWorkerError(f"grading worker failed to start ({cause}); if math-verify is missing: {_FIX}")
            if w.batch:  # it was grading the head item
                idx, extracted, _ = w.batch.popleft()
                finish(idx, Grade(False, "error", extracted, f"worker died ({cause})"))
            self._replace(w, todo)
            return
        *lines, w.pending = (w.pending + chunk).split(b"\n")
        for line in filter(None, lines):
            msg = json.loads(line)
            if msg == "ready":
                w.ready = True
                continue
            idx, status, correct, detail = msg
            _, extracted, _ = w.batch.popleft()
            finish(idx, Grade(bool(correct), status, extracted, detail))
            w.t0 = time.monotonic()  # the next item's clock starts now

    def _start(self) -> _Worker:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the folder holding the tandem_eval this process runs
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        stderr = tempfile.TemporaryFile()
        proc = subprocess.Popen(
            _worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, close_fds=True
        )
        return _Worker(proc, stderr, time.monotonic())

    def _replace(self, w: _Worker, todo: deque) -> None:
        """Kill w, put its unanswered items back at the front of the queue, start a new one."""
        self._kill(w)
        todo.extendleft(reversed(w.batch))
        spare, self._spare, self._want_spare = self._spare, None, True
        if spare is None or spare.proc.poll() is not None:  # none yet, or it died while waiting
            if spare is not None:
                self._kill(spare)
            spare = self._start()
        spare.started = time.monotonic()  # its start-up deadline counts from now
        self._workers[self._workers.index(w)] = spare

    @staticmethod
    def _kill(w: _Worker) -> None:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait(timeout=5.0)
        for f in (w.proc.stdin, w.proc.stdout, w.stderr):
            try:
                f.close()  # type: ignore[union-attr]  # all three are open files: stdin/stdout are PIPEs
            except OSError:
                pass


# The one module-level object: grade()'s pool, so one-off calls in a loop (or from several
# threads) reuse a warm worker instead of starting an interpreter each. Closed at exit.
_shared: dict[str, Grader] = {}
_shared_lock = threading.Lock()


def _shared_grader() -> Grader:
    with _shared_lock:
        g = _shared.get("grader")
        if g is None or g._pid != os.getpid():
            g = _shared["grader"] = Grader(n_workers=1)
            atexit.register(g.close)
        return g


def check_startup_timeout(seconds, minimum: float = 1.0, name: str = "--grader-startup-timeout") -> float:
    """A grader start-up deadline as a finite number of seconds (>= `minimum`; 0: any > 0), or a one-line
    ConfigError (inf or 1e400 would wait for a hung worker forever, nan never expires); returns it as a
    float. Generate commands check it before any work: the grader starts only after every sample is
    generated. The CLI asks >= 1 s (its option's floor); the Python API (run_eval, Grader) any > 0."""
    import math

    from ..schemas import ConfigError

    ok = isinstance(seconds, int | float) and not isinstance(seconds, bool) and math.isfinite(seconds)
    if not ok or seconds < minimum or seconds <= 0:
        bound = f">= {minimum:g}" if minimum > 0 else "> 0"
        raise ConfigError(f"{name} must be {bound} seconds and finite (default {STARTUP_TIMEOUT_S:g}), got {seconds!r}")
    return float(seconds)


def as_gold(gold, where: str = "gold") -> str:
    """A reference answer as the grader reads it: a string as given, a finite number (2, 0.5) as its
    str(); anything else (a bool, inf, None, a dict) is a one-line ConfigError, as a benchmark row's
    answer is (data.rows)."""
    import math

    from ..schemas import ConfigError

    if isinstance(gold, str):
        return gold
    if isinstance(gold, int | float) and not isinstance(gold, bool) and math.isfinite(gold):
        return str(gold)
    raise ConfigError(f"{where} must be a string or a finite number, got {type(gold).__name__} {gold!r}")


def grade(prediction: str, gold: str | int | float, timeout: float = 5.0) -> Grade:
    """Grade one item; uses a shared one-worker pool only if the string fast path cannot decide.
    A numeric gold is graded as its str() (grade(text, 2) == grade(text, "2"))."""
    import math

    from ..schemas import ConfigError

    if not isinstance(prediction, str):
        raise ConfigError(f"grade(prediction, gold): prediction must be a string, got {type(prediction).__name__}")
    gold = as_gold(gold)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"grade(..., timeout=): must be a finite number of seconds > 0, got {timeout!r}")
    fast, _ = _fast_grade(prediction, gold)
    if fast is not None:
        return fast
    return _shared_grader().grade_many([(prediction, gold)], timeout=timeout)[0]


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit('usage: python -m tandem_eval.generate.grading "<prediction>" "<gold>" [timeout_s]')
    print(check_grader_versions(allow_mismatch=True))
    print(grade(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) == 4 else 5.0))
