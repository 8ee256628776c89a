"""Progress of a long generation: a live bar on a terminal, periodic one-line log records otherwise.

Speed and ETA count the tokens generated so far by every trace, finished or still being written
(`live_tokens`, read from the engines' counters: the HF engine counts every sampled token; vLLM returns
a segment only when it ends, so its live count is one token per running request per engine step, its
`rows` counter): a run of 40 long traces has a true tok/s and ETA from the first step. The ETA is the
tokens left divided by the rate so far; the tokens left are those of the unfinished traces:

    left per unfinished trace = mean finished length - l     (the budget until a trace finishes)
                              = (budget - l) / 2             once l reaches that mean: the stragglers
    with l = the tokens the unfinished traces wrote so far, per unfinished trace; at least 1 token

so it is never `0:00` while a trace is unfinished (the clock rounds up), and never more than the
budget allows.

When stderr is not a terminal (output redirected to a file, a batch job), rich's bar would appear
only at the end and a 10-minute run would look hung; instead one INFO line is logged through
`logging` every `every_s` seconds (from a timer thread, so also while no trace finishes) and
every `every_frac` of the traces:

    12:00:31 INFO solo:solo 120/800 (15%) 340 tok/s, elapsed 0:31, eta 2:56

    with progress_reporter(total, "solo:solo", live_tokens=counter, budget=3000) as bar:
        bar.advance(n_tokens)          # once per finished trace
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)


def _clock(seconds: float) -> str:
    m, s = divmod(math.ceil(seconds), 60)  # rounded up: 0.4 s of work left is not 0:00
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Rate:
    """Traces done, tokens so far (live traces included) and the token-based rate and ETA."""

    def __init__(
        self,
        total: int,
        live_tokens: Callable[[], int] | None = None,
        budget: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.live_tokens, self.budget, self.clock = total, live_tokens, budget, clock
        self.done = self.finished_tokens = 0
        self.t0 = clock()

    def add(self, n_tokens: int) -> None:
        self.done += 1
        self.finished_tokens += n_tokens

    def tokens(self) -> int:
        live = self.live_tokens() if self.live_tokens is not None else 0
        return max(live, self.finished_tokens)  # an engine counter never lags the finished traces

    def left(self, tokens: int) -> float:
        """Tokens the unfinished traces are expected to write still (NaN when nothing says how long a
        trace is: no trace finished and no budget); see the module docstring."""
        unfinished = self.total - self.done
        if unfinished <= 0:
            return 0.0
        mean = self.finished_tokens / self.done if self.done else self.budget
        if mean is None:
            return float("nan")
        written = max(tokens - self.finished_tokens, 0) / unfinished  # per unfinished trace, so far
        if written < mean:
            per_trace = mean - written
        elif self.budget is not None:
            per_trace = (self.budget - written) / 2
        else:  # no budget: assume a straggler is as long again as it is now
            per_trace = written
        return unfinished * max(per_trace, 1.0)

    def numbers(self, now: float | None = None) -> tuple[float, float, float]:
        """(elapsed s, tokens/s, eta s; NaN when unknown)."""
        elapsed = max((self.clock() if now is None else now) - self.t0, 1e-9)
        tokens = self.tokens()
        if self.done >= self.total:
            return elapsed, tokens / elapsed, 0.0
        if not tokens:
            return elapsed, 0.0, float("nan")
        return elapsed, tokens / elapsed, self.left(tokens) / (tokens / elapsed)


class LogProgress:
    """Logs `label done/total (pct) tok/s, elapsed, eta` every `every_s` seconds or `every_frac`."""

    def __init__(
        self,
        total: int,
        label: str,
        every_s: float = 30.0,
        every_frac: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        live_tokens: Callable[[], int] | None = None,
        budget: int | None = None,
    ):
        self.total, self.label, self.every_s, self.clock = total, label, every_s, clock
        self.rate = Rate(total, live_tokens, budget, clock)
        self.step = max(1, int(total * every_frac))
        self.last_t = self.rate.t0
        self.last_done = 0
        self._lock = threading.Lock()  # advance (the loop) and tick (the timer thread) both log

    @property
    def done(self) -> int:
        return self.rate.done

    def advance(self, n_tokens: int = 0) -> None:
        with self._lock:
            self.rate.add(n_tokens)
            now = self.clock()
            due = self.done - self.last_done >= self.step or now - self.last_t >= self.every_s
            if self.done >= self.total or due:
                self._log(now)

    def tick(self) -> None:
        """Log if `every_s` passed since the last line (called by the timer thread)."""
        with self._lock:
            now = self.clock()
            if now - self.last_t >= self.every_s and self.done < self.total:
                self._log(now)

    def _log(self, now: float) -> None:
        self.last_t, self.last_done = now, self.done
        log.info("%s", self.line(now))

    def line(self, now: float) -> str:
        elapsed, tps, eta = self.rate.numbers(now)
        pct = 100 * self.done / max(self.total, 1)
        return (
            f"{self.label} {self.done}/{self.total} ({pct:.0f}%) {tps:.0f} tok/s, "
            f"elapsed {_clock(elapsed)}, eta {_clock(eta) if eta == eta else '?'}"
        )


@contextlib.contextmanager
def _ticking(bar: LogProgress) -> Iterator[LogProgress]:
    """Run bar.tick() every second in a daemon thread while the block runs."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(1.0):
            bar.tick()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield bar
    finally:
        stop.set()
        thread.join()


class _RichProgress:
    def __init__(self, bar, task, rate: Rate):
        self.bar, self.task, self.rate = bar, task, rate

    def advance(self, n_tokens: int = 0) -> None:
        self.rate.add(n_tokens)
        self.bar.update(self.task, advance=1)


class _NoProgress:
    def advance(self, n_tokens: int = 0) -> None:
        pass


def _rate_column(rate: Rate):
    """A rich column showing live tok/s and the token-based ETA (rich refreshes it several times a second)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task) -> Text:
            _, tps, eta = rate.numbers()
            return Text(f"{tps:.0f} tok/s, eta {_clock(eta) if eta == eta else '?'}")

    return RateColumn()


def live_token_counter(engines: list) -> Callable[[], int] | None:
    """Tokens the engines generated from now on, live traces included, or None when an engine keeps no
    such counter: the `stats` entry each engine names as its `live_counter` (a text-level junior's inner
    engine's): the HF engine bumps "generated" per sampled token; vLLM's counts a segment when it ends, so
    its live count is "rows", one per running request per engine step. One engine serving two roles
    (self-paired vLLM) counts once."""
    inner = {id(e): getattr(e, "inner", e) for e in engines if e is not None}.values()
    keys = [getattr(e, "live_counter", "generated") for e in inner]
    stats: list = [getattr(e, "stats", None) for e in inner]  # dicts (checked next), or None
    if not all(isinstance(s, dict) and k in s for s, k in zip(stats, keys)):
        return None
    base = sum(s[k] for s, k in zip(stats, keys))  # engines are reused across runs (solo, then handoff)
    return lambda: sum(s[k] for s, k in zip(stats, keys)) - base


@contextlib.contextmanager
def progress_reporter(
    total: int,
    label: str,
    enabled: bool = True,
    stream=None,
    live_tokens: Callable[[], int] | None = None,
    budget: int | None = None,
) -> Iterator:
    """A rich bar on stderr when it is a terminal, LogProgress otherwise, nothing when disabled.
    `live_tokens`: tokens generated so far by all traces; `budget`: max new tokens per trace."""
    stream = stream or sys.stderr
    if not enabled:
        yield _NoProgress()
        return
    if not (hasattr(stream, "isatty") and stream.isatty()):
        with _ticking(LogProgress(total, label, live_tokens=live_tokens, budget=budget)) as bar:
            yield bar
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    rate = Rate(total, live_tokens, budget)
    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), _rate_column(rate)]
    with Progress(*columns, console=Console(file=stream), transient=False) as bar:
        yield _RichProgress(bar, bar.add_task("gen", total=total), rate)
