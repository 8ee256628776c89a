"""Engine registry: name -> loader. `load_engine("hf", path, sampling)` returns an Engine.

from tandem_eval.engines import load_engine
engine = load_engine("hf", "path/to/ckpt", Sampling())
"""

from __future__ import annotations

from .base import Completion, Engine, Request, generate


def _load_hf(path, sampling, **kw):
    from .hf import HFEngine

    return HFEngine(path, sampling, **kw)


def _load_vllm(path, sampling, **kw):
    from .vllm_engine import VLLMEngine

    return VLLMEngine(path, sampling, **kw)


ENGINES = {"hf": _load_hf, "vllm": _load_vllm}


def load_engine(name: str, path, sampling, **kw) -> Engine:
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; valid: {', '.join(ENGINES)}")
    return ENGINES[name](path, sampling, **kw)


__all__ = ["ENGINES", "Completion", "Engine", "Request", "generate", "load_engine"]
