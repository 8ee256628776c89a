"""The co-generation loop shared by evaluation and training: token ids in, token ids + author mask out.

A pool of live traces (larger than one batch) is kept; each trace is always waiting on exactly one
engine: the senior's while the schedule says the senior writes, the junior's otherwise. Every
loop iteration steps each engine once, so both models serve whichever traces are theirs
(continuous batching) instead of alternating in rounds that wait for the longest segment. When a
trace comes back to a model, the engine catches up on the tokens it missed in one prefill. A
segment ends only where the author changes (`schedules.SegmentEnd`): a decision point that keeps
the author (a word redraw) is passed inside the engine, not by a new request.

With a full pool (more traces than two batches, as in any large evaluation) an engine holding
fewer than half the pool's traces waits while the other runs a full batch: its traces pile up
as the other model's turns end, so both models run full forwards instead of one of them running
part-empty ones at every step. When neither holds half (the pool's tail, or fewer traces than the
pool), only the engine holding more traces steps (both on a tie), for the same reason. Which
engine steps when never changes a trace's tokens.

Per-trace randomness: the sampling seed and the schedule's Bernoulli draws both derive from the
trace seed (see `trace_seed`), so a trace is reproducible whatever else shares its batch. No I/O.

    traces = list(cogenerate(specs, senior_engine, junior_engine, make_schedule("paragraph", tok)))
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..engines.base import FINISH_EOS, FINISH_LENGTH, Engine, Request
from .schedules import JUNIOR, SENIOR, Schedule


def trace_seed(run_seed: int, problem_id: str, sample_idx: int) -> int:
    """Stable 63-bit seed from (run seed, problem id, sample index)."""
    h = hashlib.sha256(f"{run_seed}\x1f{problem_id}\x1f{sample_idx}".encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


@dataclass(frozen=True)
class TraceSpec:
    key: Hashable
    prompt_ids: tuple[int, ...]
    seed: int
    max_new_tokens: int


@dataclass
class Trace:
    key: Hashable
    prompt_ids: tuple[int, ...]
    token_ids: list[int] = field(default_factory=list)
    author_mask: list[int] = field(default_factory=list)  # 1 = senior wrote the token
    logprobs: list[float] = field(default_factory=list)  # author's raw log-prob of each token
    finish_reason: str = FINISH_LENGTH  # "eos" or "length" (the shared budget ran out)
    n_handoffs: int = 0

    @property
    def senior_fraction(self) -> float:
        return float(np.mean(self.author_mask)) if self.author_mask else float("nan")


class _LiveTrace:
    def __init__(self, spec: TraceSpec, schedule: Schedule):
        self.spec = spec
        self.rng = np.random.default_rng(spec.seed)
        self.state = schedule.init(self.rng)
        self.trace = Trace(spec.key, spec.prompt_ids)


def budget(prompt_len: int, max_new_tokens: int, max_context: int) -> int:
    """The shared token budget of a trace: the paper's max new tokens within the context."""
    return max(0, min(max_new_tokens, max_context - prompt_len))


def cogenerate(
    specs: Iterable[TraceSpec], senior: Engine, junior: Engine | None, schedule: Schedule, pool_size: int = 64
) -> Iterator[Trace]:
    """Yield finished traces (in completion order) for every spec."""
    engines = {SENIOR: senior, JUNIOR: junior}
    roles = [e for e in engines.values() if e is not None]  # each frees a finished trace's state
    live: dict[Hashable, _LiveTrace] = {}
    pending = iter(specs)
    exhausted = False

    def submit(lv: _LiveTrace) -> None:
        engine = engines[lv.state.author]
        if engine is None:
            raise ValueError(f"schedule {schedule.name!r} hands off to the junior, but no junior engine was given")
        state = lv.state
        engine.submit(
            Request(
                lv.spec.key,
                list(lv.spec.prompt_ids) + lv.trace.token_ids,
                lv.spec.max_new_tokens - len(lv.trace.token_ids),
                schedule.stop_ids(state),
                lv.spec.seed,
                until=schedule.segment_end(state, lv.rng),  # the segment runs to the author's change
            )
        )

    try:
        while True:
            while not exhausted and len(live) < pool_size:
                spec = next(pending, None)
                if spec is None:
                    exhausted = True
                    break
                lv = _LiveTrace(spec, schedule)
                if spec.max_new_tokens <= 0:  # no budget at all: an empty, truncated trace
                    yield lv.trace
                    continue
                live[spec.key] = lv
                submit(lv)
            if not live:
                return
            for engine in _to_step(engines, live, pool_size):
                for comp in engine.step():
                    lv = live[comp.key]
                    if _absorb(lv, comp, schedule, engine):
                        del live[comp.key]
                        for e in roles:
                            e.release(comp.key)
                        yield lv.trace
                    else:
                        submit(lv)
    finally:  # abandoned early (an exception, a killed run): free the engines' per-trace state
        for key in live:
            for e in roles:
                e.release(key)


def _to_step(engines: dict, live: dict[Hashable, _LiveTrace], pool_size: int) -> list[Engine]:
    """The engines to step this iteration: those holding a full batch (half the pool), else the one
    holding the most traces (both on a tie), so that no model runs a part-empty forward while the
    other could run a fuller one; the waiting model's traces pile up meanwhile."""
    ready = [e for e in {id(e): e for e in engines.values() if e is not None}.values() if e.has_work()]
    if len(ready) < 2:
        return ready
    held = Counter(id(engines[lv.state.author]) for lv in live.values())
    full = [e for e in ready if held[id(e)] >= pool_size / 2]
    most = max(held[id(e)] for e in ready)
    return full or [e for e in ready if held[id(e)] == most]


def _absorb(lv: _LiveTrace, comp, schedule: Schedule, engine: Engine) -> bool:
    """Append a finished segment to its trace; return True when the trace is complete."""
    author, trace = lv.state.author, lv.trace
    last, tok = len(comp.token_ids) - 1, None
    for i, (tok, lp) in enumerate(zip(comp.token_ids, comp.logprobs)):
        trace.token_ids.append(tok)
        trace.author_mask.append(author)
        trace.logprobs.append(lp)
        schedule.advance(lv.state, tok, lv.rng)
        if lv.state.author != author and i != last:
            if getattr(engine, "may_overrun", False):  # text-level handoff: keep text up to the switch
                break
            raise RuntimeError(
                f"engine {engine.name} ran past a handoff at token {i} of a segment; "
                "its stop rules do not match the schedule's"
            )
    trace.n_handoffs = lv.state.handoffs
    if tok is not None and tok in engine.eos_ids:  # the last token this segment kept
        trace.finish_reason = FINISH_EOS
        return True
    if len(trace.token_ids) >= lv.spec.max_new_tokens or schedule.exhausted(lv.state):  # budget or round cap
        trace.finish_reason = FINISH_LENGTH
        return True
    return False
