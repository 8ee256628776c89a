"""Where a model runs and in which dtype: the one place both are chosen (engines, commands, trainer).

    from tandem_eval.devices import default_device, resolve_dtype, torch_dtype
    default_device()               # "cuda" when torch sees a GPU, else "cpu"
    resolve_dtype("auto")          # "bfloat16" on a CUDA GPU (float16 where it has no bf16), else "float32"
    resolve_dtype("auto", "cpu")   # "float32": the device the model goes to decides
    resolve_dtype("float16")       # an explicit dtype wins everywhere

Commands take `--dtype auto` (their default) and resolve it here before anything is fingerprinted, so
a run records the concrete dtype in config.json (`senior.dtype`): on a CPU it is float32, as it
always was (the fingerprints of earlier CPU runs are unchanged); on a GPU it is bfloat16. Log-probs
are computed in fp32 whatever the weights' dtype (engines/hf.py `_logits`). torch is imported only
when a function is called (`tandem-eval --help` must stay light).
"""

from __future__ import annotations

from .config import DTYPES
from .schemas import ConfigError

AUTO = "auto"
DTYPE_CHOICES = (AUTO, *DTYPES)  # what --dtype accepts


def default_device() -> str:
    """ "cuda" (the current GPU) when torch sees one, else "cpu"."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def on_cpu() -> bool:
    """No GPU here: engines take their CPU settings (vLLM-CPU's KV space, eager mode, fp32 by default)."""
    return default_device() == "cpu"


def resolve_dtype(dtype: str, device: str | None = None) -> str:
    """The concrete weights dtype for `dtype` ("auto" or one of config.DTYPES) on `device` (default:
    default_device()): auto = bfloat16 on CUDA (float16 on a GPU without bf16), float32 elsewhere."""
    if dtype != AUTO:
        if dtype not in DTYPES:
            raise ConfigError(f"--dtype {dtype!r} is not supported; valid: {', '.join(DTYPE_CHOICES)}")
        return dtype
    if not str(device or default_device()).startswith("cuda"):
        return "float32"  # CPU: fp32 is exact and faster than bf16 here (DESIGN.md: bf16 ~1.8x slower)
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def torch_dtype(dtype: str, device: str | None = None):
    """The torch dtype object of `dtype` (resolved as resolve_dtype does)."""
    import torch

    return getattr(torch, resolve_dtype(dtype, device))


def usable_device(device: str | None) -> str | None:
    """`device` where it exists on this machine, else None (the engine then picks default_device()).
    lm-eval passes its --device (often "cuda") to every model, GPU or not."""
    if not device:
        return None
    if str(device).startswith("cuda") and default_device() != "cuda":
        return None
    return str(device)
