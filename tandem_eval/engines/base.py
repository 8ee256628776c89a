"""The engine protocol: what the co-generation loop and the scorers need from a model backend.

An engine wraps one model (senior or junior) and serves many traces at once:

* `submit(Request)` queues a segment: continue `token_ids` (the whole trace so far, prompt
  included, whoever wrote it) by sampling up to `max_tokens` new tokens, stopping right after an
  EOS token or the token where the segment ends (kept and returned): the first token in
  `stop_ids`, or, when the request carries `until` (the schedule's `SegmentEnd`), the token for
  which `until(token)` is true. `until` is fed every new token in order and ends a segment only
  where its author changes; it can only fire on a token in `stop_ids` or after `until.max_run()`
  more tokens, so an engine that stops at those may check it there (vLLM) or per token (HF).
* `step()` advances every live request by one decoding step (continuous batching: new requests
  join, finished ones leave) and returns the requests that finished in that step.
* `release(key)` tells the engine that a trace is over, so it can drop cached state.
* `score(prompts, continuations, **kw)` returns teacher-forced log-probs of each continuation
  token (batched; keywords a backend may use: `batch_tokens`, `chunk`, `progress`).
* `exact_kl(junior, prompts, junior_prompts, continuations, **kw)`, offered when
  `full_distributions` is True (HF): KL between this model's and the junior's full next-token
  distributions along teacher-forced continuations (engines/hf_scoring.py). Scorers (score/lens.py)
  read only these methods and that flag, never a backend's type or model.

Requests are keyed by trace: an engine may keep a trace's KV cache between segments and only
prefill the tokens the other model wrote meanwhile (the "catch-up" prefill). The log-prob an
engine returns with each sampled token is, by the engine's `logprobs` (`LOGPROBS`):
* "raw" (evaluation, the default): log-softmax of the model's logits at temperature 1, before
  temperature/top-k/top-p, so they mean the same on every backend and drift's k1/k3 read them;
* "sampling" (training rollouts): log-softmax of the logits divided by the sampling temperature,
  before top-k/top-p: exactly what trl's GRPOTrainer recomputes for the same tokens (its fused
  LM head divides by `temperature`), so its importance-sampling ratio starts at 1.
Sampling randomness is a function of (request seed, absolute
token position) only, so a trace's tokens do not depend on which other traces share a batch.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the engine registry (engines/__init__) imports this module, and the
    import numpy as np  # CLI imports the registry for --engine's choices, before --help (no numpy there)


class Until(Protocol):
    """What an engine reads of a request's `until` (schedules.SegmentEnd is the one implementation):
    engines stay below schedules, so they see this shape, never the schedule itself."""

    def __call__(self, token_id: int) -> bool: ...  # True after the token at which the author changes

    def max_run(self) -> int | None: ...  # tokens until a forced decision; None: none pending


FINISH_EOS = "eos"  # an EOS token was sampled (kept in the output)
FINISH_STOP = "stop"  # the segment ended at a stop token / where `until` said (kept in the output)
FINISH_LENGTH = "length"  # max_tokens reached

LOGPROBS_RAW = "raw"  # log-softmax of the raw logits (temperature 1)
LOGPROBS_SAMPLING = "sampling"  # log-softmax of logits / sampling temperature (trl's rollout log-probs)
LOGPROBS = (LOGPROBS_RAW, LOGPROBS_SAMPLING)


def logprob_temperature(logprobs: str, temperature: float) -> float:
    """The temperature an engine divides the logits by before the log-softmax of a returned log-prob:
    1 for "raw", the sampling temperature for "sampling" (1 for greedy decoding, where trl's own
    temperature division has no meaning). The one rule both backends apply."""
    if logprobs not in LOGPROBS:
        raise ValueError(f"unknown log-prob kind {logprobs!r}; valid: {', '.join(LOGPROBS)}")
    return temperature if logprobs == LOGPROBS_SAMPLING and temperature > 0 else 1.0


@dataclass
class Request:
    key: Hashable  # the trace this segment belongs to
    token_ids: list[int]  # full context: prompt + all tokens generated so far
    max_tokens: int
    stop_ids: frozenset[int] = frozenset()
    seed: int = 0  # per-trace sampling seed; combined with the absolute position
    # Where the segment ends (schedules.SegmentEnd: True after the token at which the author changes);
    # None: at the first token in stop_ids.
    until: Until | None = None


@dataclass
class Completion:
    key: Hashable
    token_ids: list[int] = field(default_factory=list)  # the new tokens only
    logprobs: list[float] = field(default_factory=list)  # log p(token), one per new token (the engine's `logprobs`)
    finish_reason: str = FINISH_LENGTH


class Engine(Protocol):
    """Everything the co-generation loop (tandem.py) and the scorers read from an engine."""

    name: str  # its ENGINES name ("hf", ...): named in errors, never branched on (engines.Backend holds the facts)
    tokenizer: object  # the model's own tokenizer (schedules read its vocabulary)
    eos_ids: frozenset[int]  # a trace ends after any of these
    # True when a segment may run past a stop token (text-level handoffs that re-tokenize, e.g.
    # engines.bridge); the loop then truncates at the handoff instead of raising. Optional: the
    # loop reads it with getattr(engine, "may_overrun", False).
    may_overrun: bool
    # True when the engine serves `exact_kl` (full next-token distributions of teacher-forced tokens).
    full_distributions: bool
    # What Completion.logprobs hold: "raw" or "sampling" (LOGPROBS; see the module docstring).
    logprobs: str
    # The `stats` counter that grows with every token of a live trace (progress.live_token_counter).
    # Optional: an engine without `stats` shows no live rate.
    live_counter: str

    def submit(self, request: Request) -> None: ...

    def step(self) -> list[Completion]: ...

    def has_work(self) -> bool: ...

    def release(self, key: Hashable) -> None: ...

    def score(
        self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]], **kw
    ) -> list[np.ndarray]: ...

    def exact_kl(self, junior, prompts, junior_prompts, continuations, **kw) -> list[dict[str, np.ndarray]]: ...

    def close(self) -> None: ...


def generate(engine: Engine, requests: Sequence[Request]) -> list[Completion]:
    """Run requests to completion on one engine; results in request order."""
    order = {r.key: i for i, r in enumerate(requests)}
    if len(order) != len(requests):
        raise ValueError("request keys must be unique")
    for r in requests:
        engine.submit(r)
    out: list[Completion | None] = [None] * len(requests)
    while engine.has_work():
        for c in engine.step():
            out[order[c.key]] = c
            engine.release(c.key)
    return out  # type: ignore[return-value]


_MASK64 = (1 << 64) - 1


def mix64(*values: int) -> int:
    """SplitMix64-style hash of integers: stable across runs, platforms and Python versions."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v & _MASK64)) & _MASK64
        h = (h + 0x9E3779B97F4A7C15) & _MASK64
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK64
        h ^= h >> 31
    return h


def position_uniform(seed: int, position: int) -> float:
    """The uniform draw used to sample the token at `position` of a trace seeded `seed`."""
    return (mix64(seed, position) >> 11) * (1.0 / (1 << 53))
