"""Progress of a long generation: a live bar on a terminal, periodic one-line log records otherwise.

When stderr is not a terminal (output redirected to a file, a batch job), rich's bar would appear
only at the end and a 10-minute run would look hung; instead one INFO line is logged through
`logging` every `every_s` seconds or every `every_frac` of the work, whichever comes first:

    12:00:31 INFO solo:solo 120/800 (15%) 340 tok/s, elapsed 0:31, eta 2:56

    with progress_reporter(total, "solo:solo") as bar:
        bar.advance(n_tokens)          # once per finished trace
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class LogProgress:
    """Logs `label done/total (pct) tok/s, elapsed, eta` every `every_s` seconds or `every_frac`."""

    def __init__(
        self,
        total: int,
        label: str,
        every_s: float = 30.0,
        every_frac: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.label, self.every_s, self.clock = total, label, every_s, clock
        self.step = max(1, int(total * every_frac))
        self.done = self.tokens = 0
        self.t0 = self.last_t = clock()
        self.last_done = 0

    def advance(self, n_tokens: int = 0) -> None:
        self.done += 1
        self.tokens += n_tokens
        now = self.clock()
        if self.done >= self.total or now - self.last_t >= self.every_s or self.done - self.last_done >= self.step:
            self.last_t, self.last_done = now, self.done
            log.info("%s", self.line(now))

    def line(self, now: float) -> str:
        elapsed = max(now - self.t0, 1e-9)
        eta = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        pct = 100 * self.done / max(self.total, 1)
        return (
            f"{self.label} {self.done}/{self.total} ({pct:.0f}%) {self.tokens / elapsed:.0f} tok/s, "
            f"elapsed {_clock(elapsed)}, eta {_clock(eta) if eta == eta else '?'}"
        )


class _RichProgress:
    def __init__(self, bar, task):
        self.bar, self.task, self.tokens, self.t0 = bar, task, 0, time.monotonic()

    def advance(self, n_tokens: int = 0) -> None:
        self.tokens += n_tokens
        tps = self.tokens / max(time.monotonic() - self.t0, 1e-9)
        self.bar.update(self.task, advance=1, tps=f"{tps:.0f}")


class _NoProgress:
    def advance(self, n_tokens: int = 0) -> None:
        pass


@contextlib.contextmanager
def progress_reporter(total: int, label: str, enabled: bool = True, stream=None) -> Iterator:
    """A rich bar on stderr when it is a terminal, LogProgress otherwise, nothing when disabled."""
    stream = stream or sys.stderr
    if not enabled:
        yield _NoProgress()
        return
    if not (hasattr(stream, "isatty") and stream.isatty()):
        yield LogProgress(total, label)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = [
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tps]} tok/s"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=Console(file=stream), transient=False) as bar:
        yield _RichProgress(bar, bar.add_task("gen", total=total, tps="-"))
