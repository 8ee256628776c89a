"""Resumable vLLM requests ("sessions") for VLLMEngine: one vLLM request per trace, kept between segments.

Without sessions every segment is a new vLLM request over the whole trace, and prefix caching
reuses whole KV blocks only (32 tokens on CPU, 16 on GPU): each segment recomputes its catch-up
plus up to a block of the trace's tail. vLLM 0.32/0.33's streaming-input requests instead pause
when a chunk stops (EOS, a stop token, max_tokens) and keep their KV blocks; the next chunk
carries only what the engine has not computed: the last token it sampled (vLLM drops it on pause)
and whatever the other model wrote since.

vLLM offers this publicly only as `AsyncLLM.generate(async generator of StreamingInput, ...)`; the
in-process `LLMEngine` that VLLMEngine steps has no such call, so `Sessions` makes the calls
AsyncLLM makes (input processor -> output processor -> engine core, `resumable=True`). They are
vLLM internals: `unsupported(vllm)` accepts 0.32 (read and run here) and 0.33 (its session path is
the same, per the issue's prototype; not installed here) when the interfaces still match, and
VLLMEngine otherwise falls back to a new request per segment (logged).

Two things beyond AsyncLLM's calls:
* vLLM defect (in-process engine core): the first chunk's prompt-token list is shared by the
  output processor and the scheduler, and both extend it when the session resumes, so the resumed
  chunk is seen twice and the request never finishes. The output processor gets its own copy
  (tests/test_vllm_engine.py would hang without it).
* A chunk's sampling parameters are a shallow copy of a template validated once per stop list,
  with only `max_tokens` and the sampler's arguments set: a word schedule's ~32k stop ids cost
  ~3 ms per chunk to build and validate, more than a decode step of a small model.

Memory: a paused session holds its KV blocks and one of vLLM's request slots (`max_num_seqs`; a
resumed chunk is admitted only while running + paused requests are below it). Sessions close
least recently used first when a new one needs a slot, when paused sessions would hold more than
`KV_SHARE` of the KV blocks, or when the engine stalls (`evict`); a closed trace's next segment is
a new session whose prompt reads the freed blocks back from the prefix cache (the fallback).

    sessions = Sessions(llm.llm_engine)
    template = sessions.template(sampling_params)   # once per stop list
    ext_id, sent, opened = sessions.send(key, context_ids, template, max_tokens=8, extra_args=None)
"""

from __future__ import annotations

import copy
import inspect
import itertools
import logging
import time
from collections.abc import Hashable
from dataclasses import dataclass

log = logging.getLogger(__name__)

TESTED = ("0.32.", "0.33.")  # 0.32: read and run here; 0.33: the same session path (the prototype)
KV_SHARE = 0.5  # paused sessions may hold at most this share of the KV blocks


def unsupported(vllm) -> str | None:
    """Why sessions cannot be used with this vLLM module (None: they can)."""
    if not vllm.__version__.startswith(TESTED):
        return f"vLLM {vllm.__version__} is not a release this session code was checked on ({', '.join(TESTED)})"
    try:
        from vllm.v1.engine import EngineCoreRequest
        from vllm.v1.engine.input_processor import InputProcessor
        from vllm.v1.engine.output_processor import OutputProcessor
    except ImportError as e:
        return f"vLLM {vllm.__version__} lacks a module sessions use ({e})"
    if "resumable" not in inspect.signature(InputProcessor.process_inputs).parameters:
        return f"vLLM {vllm.__version__}'s input processor takes no resumable requests"
    if "resumable" not in EngineCoreRequest.__struct_fields__:
        return f"vLLM {vllm.__version__}'s engine-core requests cannot be resumable"
    if not hasattr(OutputProcessor, "add_request"):
        return f"vLLM {vllm.__version__}'s output processor has no add_request"
    return None


def wanted(requested: bool | None, vllm) -> bool:
    """Whether an engine uses sessions: `requested` None (where supported) or True, and this vLLM
    supports them; an unsupported vLLM is logged as the fallback to one request per segment."""
    if requested is False:
        return False
    why_not = unsupported(vllm)
    if why_not:
        log.warning("vLLM sessions unavailable (%s): one vLLM request per segment, with prefix caching", why_not)
    return why_not is None


@dataclass
class Session:
    rid: str  # vLLM's internal request id
    ext: str  # its external id, which outputs carry
    tokens: list[int]  # the trace as the session has seen it, its last sampled token included
    used: int = 0  # LRU clock
    live: bool = True  # a chunk is queued or running; else paused (holding its blocks)


class Sessions:
    """The resumable requests of one VLLMEngine, by trace key."""

    def __init__(self, llm_engine, prefix: str):
        self._engine = llm_engine
        cfg = llm_engine.vllm_config
        self.block_size = cfg.cache_config.block_size
        self.blocks = cfg.cache_config.num_gpu_blocks or 0
        self.slots = cfg.scheduler_config.max_num_seqs
        self._by_key: dict[Hashable, Session] = {}
        self._paused_blocks = 0
        self._clock = itertools.count()
        self._ids = (f"{prefix}{i}" for i in itertools.count())
        self.stats = dict.fromkeys(("opened", "resumed", "evicted"), 0)

    def __len__(self) -> int:
        return len(self._by_key)

    # ---- requests -------------------------------------------------------------------------
    def template(self, params):
        """The engine-core request that chunks with these SamplingParams copy: `params` validated and
        processed once by vLLM's input processor (the caller keeps one per stop list)."""
        from .vllm_scoring import tokens_input

        eng = self._engine
        return eng.input_processor.process_inputs(
            "template", tokens_input([0]), params, eng.get_supported_tasks(), resumable=True
        )

    def send(self, key: Hashable, ctx: list[int], template, max_tokens: int, extra_args) -> tuple[str, int, bool]:
        """Queue trace `key`'s next chunk, `ctx` being its whole context now; returns (the external id
        its outputs carry, prompt tokens sent, whether it opened a session). A trace whose session
        does not hold a prefix of `ctx` (a key reused for another trace) starts a new session."""
        s = self._by_key.get(key)
        if s is not None and (s.live or ctx[: len(s.tokens)] != s.tokens):
            self.close(key)
            s = None
        if s is None:
            return self._open(key, ctx, template, max_tokens, extra_args)
        self._unpause(s)
        kept = len(s.tokens) - 1  # vLLM keeps the KV of all but the last sampled token
        chunk = ctx[kept:]
        self._add(self._request(template, s.rid, s.ext, chunk, max_tokens, extra_args), first=False)
        self.stats["resumed"] += 1
        return s.ext, len(chunk), False

    def _open(self, key, ctx, template, max_tokens, extra_args) -> tuple[str, int, bool]:
        while len(self._by_key) >= self.slots and self.evict(1):
            pass
        ext = next(self._ids)
        req = self._request(template, ext, None, list(ctx), max_tokens, extra_args)
        self._engine.input_processor.assign_request_id(req)  # internal id = ext + a random suffix
        self._add(req, first=True)
        self._by_key[key] = Session(req.request_id, ext, [], next(self._clock))
        self.stats["opened"] += 1
        return ext, len(ctx), True

    @staticmethod
    def _request(template, rid: str, ext: str | None, ids: list[int], max_tokens: int, extra_args):
        params = copy.copy(template.sampling_params)  # shallow: the stop list is shared, never rebuilt
        params.max_tokens = max_tokens
        params.extra_args = extra_args
        req = copy.copy(template)
        req.request_id, req.external_req_id = rid, ext
        req.prompt_token_ids, req.sampling_params, req.arrival_time = ids, params, time.time()
        return req

    def _add(self, req, first: bool) -> None:
        own = req
        if first:  # the output processor's own prompt list (see the module docstring)
            own = copy.copy(req)
            own.prompt_token_ids = list(req.prompt_token_ids)
        self._engine.output_processor.add_request(own, None, None, 0)
        self._engine.engine_core.add_request(req)

    # ---- bookkeeping ----------------------------------------------------------------------
    def paused(self, key: Hashable, tokens: list[int]) -> None:
        """Trace `key`'s chunk stopped: vLLM paused its session, which now holds `tokens` (the trace so
        far) but the last one. Closes least recently used paused sessions beyond the KV share."""
        s = self._by_key[key]
        s.tokens, s.live, s.used = tokens, False, next(self._clock)
        self._paused_blocks += self._blocks(s)
        while self._paused_blocks > KV_SHARE * self.blocks and self.evict(1):
            pass

    def _unpause(self, s: Session) -> None:
        s.live = True
        self._paused_blocks -= self._blocks(s)

    def _blocks(self, s: Session) -> int:
        return -(-max(len(s.tokens) - 1, 0) // self.block_size)

    def evict(self, n: int) -> int:
        """Close up to n least recently used paused sessions (their blocks go back to the prefix cache);
        returns how many were closed."""
        paused = sorted((s.used, k) for k, s in self._by_key.items() if not s.live)
        for _, key in paused[:n]:
            self.close(key)
            self.stats["evicted"] += 1
        return min(n, len(paused))

    def n_paused(self) -> int:
        return sum(not s.live for s in self._by_key.values())

    def close(self, key: Hashable) -> None:
        """Abort trace `key`'s session (a running chunk with it), if it has one."""
        s = self._by_key.pop(key, None)
        if s is None:
            return
        if not s.live:
            self._paused_blocks -= self._blocks(s)
        self._engine.abort_request([s.rid], internal=True)

    def close_all(self) -> None:
        for key in list(self._by_key):
            self.close(key)
