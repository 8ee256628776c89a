"""Schedules: who writes the next token of a trace.

A schedule is a small state machine over emitted tokens. After every token (by whichever model
is the author) `advance(state, token_id, rng)` may change `state.author` (1 = senior,
0 = junior). A segment ends only where the author changes: the co-generation loop hands each
engine request a `SegmentEnd` (`segment_end`), which replays the schedule on copies of the trace's
state and random generator, token by token, and says at which token the author changes (a word
redraw that keeps the author does not end the segment). It can only fire on a token that can
trigger a decision (`stop_ids`, a superset of the deciding tokens) or after `max_run` tokens, so
an engine that pauses there (vLLM) checks it there and never runs past a handoff; the trace's
own state and generator advance only when the loop takes the finished segment, with the same
draws, so traces are what they were when every decision point ended a segment.

The rules, by name (token "surface" = its decoded text; a word start is a byte-level BPE token
whose string begins with the "Ġ" marker, or "▁" for SentencePiece):

* `solo`         the senior writes everything.
* `junior-solo`  the junior writes everything.
* `paragraph`    the paper's evaluation: the senior writes first; a turn ends at the token that
                 completes a "\\n\\n" (its surface contains "\\n\\n", or it starts with "\\n"
                 right after a token ending in "\\n"); strict alternation S, J, S, J...
                 `paragraph:R` caps it at R rounds (a round = a senior turn and a junior turn;
                 the paper: 150): the trace ends there, finish reason "length".
* `sentence`     alternation; a turn ends at a token whose surface, ignoring trailing spaces, ends
                 with ".", "!" or "?", or contains a newline. (A decimal point also ends a turn:
                 the rule sees one token at a time.)
* `chunk:N`      alternation every N tokens, senior first.
* `takeover:N`   the senior writes the first N paragraphs (paragraph rule), then the junior
                 finishes alone; `takeover:0` is junior-solo with the same bookkeeping.
* `word[:P[:K]]` the paper's training schedule: first author ~ Bernoulli(P) (senior w.p. P);
                 after every word-start token the author is REDRAWN ~ Bernoulli(P) (a redraw,
                 not a toggle); a redraw is also forced after K tokens without one. Newline
                 tokens are not word starts. Defaults P = 0.5, K = 32.

    from tandem_eval.generate.schedules import make_schedule
    sched = make_schedule("word", tokenizer)
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from ..schemas import ConfigError

SENIOR, JUNIOR = 1, 0


class ScheduleError(ConfigError):
    """A --schedule spelling or argument is invalid; the message names the valid forms."""


@dataclass
class State:
    author: int
    since_event: int = 0  # tokens since the last decision point
    events: int = 0  # decision points so far (paragraphs, words, chunks ...)
    prev_newline: bool = False  # the previous token's surface ended with "\n"
    handoffs: int = 0  # author changes so far


class Vocab:
    """Per-token surfaces of a tokenizer, computed once."""

    def __init__(self, tokenizer):
        n = len(tokenizer)
        pieces = tokenizer.convert_ids_to_tokens(list(range(n)))
        self.size = n
        self.surface = [tokenizer.convert_tokens_to_string([p]) if p is not None else "" for p in pieces]
        self.word_start = np.array([p is not None and p[:1] in ("Ġ", "▁") for p in pieces])

    def text(self, token_id: int) -> str:
        """Surface of a token; ids past the tokenizer (padded model vocab) have none."""
        return self.surface[token_id] if 0 <= token_id < self.size else ""

    def ids(self, pred) -> frozenset[int]:
        return frozenset(i for i, s in enumerate(self.surface) if pred(s))


class Schedule:
    """Base: solo senior. Subclasses override the hooks."""

    name = "solo"
    junior = False  # whether the junior writes any of a trace (needs_junior): every schedule but solo

    def __init__(self, vocab: Vocab):
        self.vocab = vocab

    def first_author(self, rng: np.random.Generator) -> int:
        return SENIOR

    def init(self, rng: np.random.Generator) -> State:
        return State(author=self.first_author(rng))

    def stop_ids(self, state: State) -> frozenset[int]:
        return frozenset()

    def max_run(self, state: State) -> int | None:
        return None

    def is_event(self, state: State, token_id: int) -> bool:
        return False

    def next_author(self, state: State, rng: np.random.Generator) -> int:
        return state.author

    def exhausted(self, state: State) -> bool:
        """The schedule ends the trace here (a round cap), whatever the budget left."""
        return False

    def segment_end(self, state: State, rng: np.random.Generator) -> SegmentEnd | None:
        """Where the current author's segment ends; None when nothing can end it (solo, a takeover's
        junior tail): then only EOS or the budget do."""
        if not self.stop_ids(state) and self.max_run(state) is None:
            return None
        return SegmentEnd(self, state, rng)

    def advance(self, state: State, token_id: int, rng: np.random.Generator) -> State:
        """Account for one emitted token; on a decision point pick the next author."""
        state.since_event += 1
        event = self.is_event(state, token_id)
        state.prev_newline = (not event) and self.vocab.text(token_id).endswith("\n")
        if event:
            state.events += 1
            state.since_event = 0
            new = self.next_author(state, rng)
            state.handoffs += int(new != state.author)
            state.author = new
        return state


class SegmentEnd:
    """`until(token)` is True after the token at which the segment's author changes (or the schedule
    ends the trace). It replays `advance` on private copies of the trace's state and random generator
    (the trace's own advance only when the loop takes the segment, drawing the same numbers), so it
    must be fed every token of the segment, in order. `max_run()`: tokens until a forced decision
    (None: none pending); `stop_ids`: the only tokens it can fire on otherwise."""

    __slots__ = ("schedule", "state", "rng", "author", "stop_ids")

    def __init__(self, schedule: Schedule, state: State, rng: np.random.Generator):
        self.schedule, self.author = schedule, state.author
        self.state = replace(state)
        self.rng = np.random.Generator(copy.copy(rng.bit_generator))  # ~20 us; a deepcopy costs 50
        self.stop_ids = schedule.stop_ids(state)

    def __call__(self, token_id: int) -> bool:
        state = self.schedule.advance(self.state, token_id, self.rng)
        return state.author != self.author or self.schedule.exhausted(state)

    def max_run(self) -> int | None:
        return self.schedule.max_run(self.state)


class JuniorSolo(Schedule):
    name = "junior-solo"
    junior = True

    def first_author(self, rng):
        return JUNIOR


class Paragraph(Schedule):
    name = "paragraph"
    junior = True
    rounds: int | None = None  # paragraph:R

    def __init__(self, vocab: Vocab, rounds: int | None = None):
        super().__init__(vocab)
        if rounds is not None and rounds < 1:
            raise ScheduleError(f"paragraph:R needs an integer R >= 1 rounds, got {rounds}")
        self.rounds = rounds
        self._candidates = vocab.ids(lambda s: "\n" in s)
        self._contains = vocab.ids(lambda s: "\n\n" in s)
        self._starts = vocab.ids(lambda s: s.startswith("\n"))

    def stop_ids(self, state):
        return self._candidates

    def is_event(self, state, token_id):
        return token_id in self._contains or (state.prev_newline and token_id in self._starts)

    def next_author(self, state, rng):
        return 1 - state.author

    def exhausted(self, state):
        return self.rounds is not None and state.events >= 2 * self.rounds


class Sentence(Paragraph):
    name = "sentence"

    def __init__(self, vocab: Vocab):
        Schedule.__init__(self, vocab)
        self._candidates = vocab.ids(lambda s: "\n" in s or s.rstrip(" ").endswith((".", "!", "?")))

    def is_event(self, state, token_id):
        return token_id in self._candidates


class Chunk(Schedule):
    name = "chunk"
    junior = True

    def __init__(self, vocab: Vocab, n: int = 32):
        super().__init__(vocab)
        if n < 1:
            raise ScheduleError(f"chunk:N needs an integer N >= 1, got {n}")
        self.n = n

    def max_run(self, state):
        return self.n - state.since_event

    def is_event(self, state, token_id):
        return state.since_event >= self.n

    def next_author(self, state, rng):
        return 1 - state.author


class Takeover(Paragraph):
    name = "takeover"

    def __init__(self, vocab: Vocab, n: int = 1):
        super().__init__(vocab)
        if n < 0:
            raise ScheduleError(f"takeover:N needs an integer N >= 0, got {n}")
        self.n = n

    def first_author(self, rng):
        return SENIOR if self.n > 0 else JUNIOR

    def stop_ids(self, state):
        return self._candidates if state.author == SENIOR else frozenset()

    def is_event(self, state, token_id):
        return state.author == SENIOR and super().is_event(state, token_id)

    def next_author(self, state, rng):
        return JUNIOR if state.events >= self.n else SENIOR


class Word(Schedule):
    name = "word"
    junior = True

    def __init__(self, vocab: Vocab, p: float = 0.5, k: int = 32):
        super().__init__(vocab)
        if not (math.isfinite(p) and 0 <= p <= 1) or k < 1:
            raise ScheduleError(f"word:P:K needs 0 <= P <= 1 and an integer K >= 1, got P={p}, K={k}")
        self.p, self.k = p, k
        self._word_starts = frozenset(np.flatnonzero(vocab.word_start).tolist())

    def first_author(self, rng):
        return SENIOR if rng.random() < self.p else JUNIOR

    def stop_ids(self, state):
        return self._word_starts

    def max_run(self, state):
        return self.k - state.since_event

    def is_event(self, state, token_id):
        return token_id in self._word_starts or state.since_event >= self.k

    def next_author(self, state, rng):
        return self.first_author(rng)  # a fresh Bernoulli(p) redraw, not a toggle


SCHEDULES = {
    "solo": Schedule,
    "junior-solo": JuniorSolo,
    "paragraph": Paragraph,
    "sentence": Sentence,
    "chunk": Chunk,
    "takeover": Takeover,
    "word": Word,
}
_ARG_TYPES = {"paragraph": (int,), "chunk": (int,), "takeover": (int,), "word": (float, int)}


# Allowed range of each argument, checked when the schedule is parsed (before any work).
_ARG_RANGES = {
    "paragraph": (("R", 1, None),),
    "chunk": (("N", 1, None),),
    "takeover": (("N", 0, None),),
    "word": (("P", 0.0, 1.0), ("K", 1, None)),
}


class ScheduleSpec(NamedTuple):
    """A parsed --schedule: its name and checked arguments ('word:0.5:32' -> ('word', (0.5, 32))). A run
    carries this value from its plan and builds its Schedule from it: the text is parsed once."""

    name: str
    args: tuple

    @property
    def junior(self) -> bool:
        """Whether the junior writes any of a trace (every schedule but solo): its engine must load."""
        return SCHEDULES[self.name].junior

    def build(self, tokenizer_or_vocab) -> Schedule:
        """The schedule over a tokenizer's vocabulary (or a Vocab already computed)."""
        vocab = tokenizer_or_vocab if isinstance(tokenizer_or_vocab, Vocab) else Vocab(tokenizer_or_vocab)
        return SCHEDULES[self.name](vocab, *self.args)


SOLO = ScheduleSpec("solo", ())  # a solo run's schedule, known without parsing


def parse_schedule(spec: str) -> ScheduleSpec:
    """'word:0.5:32' -> ('word', (0.5, 32)); validates the name, argument count, types and ranges.

    Raises ScheduleError (a ConfigError) so a bad --schedule is refused before any run starts."""
    name, *raw = str(spec).split(":")
    forms = "paragraph[:R], chunk:N, takeover:N, word[:P[:K]]"
    if name not in SCHEDULES:
        raise ScheduleError(f"unknown schedule {spec!r}; valid: {', '.join(SCHEDULES)} ({forms})")
    types_ = _ARG_TYPES.get(name, ())
    if len(raw) > len(types_):
        raise ScheduleError(f"schedule {name!r} takes at most {len(types_)} argument(s), got {spec!r} ({forms})")
    args = []
    for t, a, (label, low, high) in zip(types_, raw, _ARG_RANGES.get(name, ())):
        try:
            v = t(a)
        except ValueError:
            kind = "an integer" if t is int else "a number"
            raise ScheduleError(f"bad argument in schedule {spec!r}: {label} must be {kind}, got {a!r}") from None
        if (t is float and not math.isfinite(v)) or v < low or (high is not None and v > high):
            span = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise ScheduleError(f"bad argument in schedule {spec!r}: {label} must be {span}, got {a!r}")
        args.append(v)
    return ScheduleSpec(name, tuple(args))


def make_schedule(spec: str, tokenizer_or_vocab) -> Schedule:
    return parse_schedule(spec).build(tokenizer_or_vocab)


def needs_junior(spec: str) -> bool:
    return parse_schedule(spec).junior
