"""The segment bookkeeping that the two vLLM backends share: in process (vllm_engine.py) and behind a
server (served.py). Each writes a trace's segment over one or more requests to vLLM (chunks there,
HTTP calls here), so both keep the same three things: the live segment of each trace, the queue of
segments waiting for a request slot, and the finished ones `step()` has yet to return.

    class MyEngine(SegmentQueue):
        def __init__(self, ...):
            self._init_segments()          # needs self.max_context and self.stats["segments"]
        # _launch takes keys from self._queue; _take calls self._absorb, then self._finish or requeues

The HF engine is not one of them: it decodes every live row in one forward pass, with no queue.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from .base import FINISH_LENGTH, Completion, Request


@dataclass
class Segment:
    """A trace's live request on an engine: the segment it is writing, over one or more requests to vLLM."""

    req: Request
    limit: int  # new tokens at most (the request's, within the context window)
    ids: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)
    ended: bool = False  # the token where the segment ends came (until / a stop token)
    chunks: int = 0  # requests made for it so far


class SegmentQueue:
    """submit / has_work and the bookkeeping under them; the engine launches the queued segments."""

    max_context: int
    stats: dict

    def _init_segments(self) -> None:
        self._segments: dict[Hashable, Segment] = {}
        self._queue: deque[Hashable] = deque()  # segments waiting for a request slot
        self._ready: list[Completion] = []  # finished but not yet returned by step()

    def submit(self, request: Request) -> None:
        """Queue one segment; at most one live segment per trace key."""
        if request.key in self._segments:
            raise ValueError(f"trace {request.key!r} already has a live request on this engine")
        if not request.token_ids:
            raise ValueError("a request needs at least one context token")
        # vLLM refuses a prompt that fills the context window: such a request is answered here
        limit = min(request.max_tokens, self.max_context - len(request.token_ids))
        self.stats["segments"] += 1
        if limit <= 0:
            self._ready.append(Completion(key=request.key, finish_reason=FINISH_LENGTH))
            return
        self._segments[request.key] = Segment(request, limit)
        self._queue.append(request.key)

    def has_work(self) -> bool:
        return bool(self._segments or self._ready)

    def _absorb(self, seg: Segment, tokens, logprobs, overrun: Exception) -> None:
        """Add one request's new tokens (and their log-probs) to `seg`, feeding `until` every token; a token
        after the one where the segment ended raises `overrun` (vLLM was told to stop there)."""
        until, stops = seg.req.until, seg.req.stop_ids
        for tok, lp in zip(tokens, logprobs):
            if seg.ended:
                raise overrun
            seg.ids.append(tok)
            seg.lps.append(lp)
            seg.ended = until(tok) if until is not None else tok in stops

    def _finish(self, seg: Segment, reason: str) -> None:
        """The segment is written: it leaves the engine, and the next step() returns it."""
        del self._segments[seg.req.key]
        self._ready.append(Completion(seg.req.key, seg.ids, seg.lps, reason))

    def _forget(self, key: Hashable) -> bool:
        """Drop the live segment of trace `key` (released: the trace is over); True when there was one."""
        if self._segments.pop(key, None) is None:
            return False
        with contextlib.suppress(ValueError):
            self._queue.remove(key)
        return True

    def _drop_ready(self, key: Hashable) -> None:
        self._ready = [c for c in self._ready if c.key != key]

    def _take_ready(self) -> list[Completion]:
        done, self._ready = self._ready, []
        return done
