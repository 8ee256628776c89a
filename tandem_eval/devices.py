"""Where a model runs, in which dtype and on how many CPU threads: the one place each is chosen (engines,
commands, trainer; generate and score both set threads here).

    from tandem_eval.devices import default_device, resolve_dtype, torch_dtype, use_threads
    default_device()               # "cuda" when torch sees a GPU, else "cpu"
    resolve_dtype("auto")          # "bfloat16" on a CUDA GPU (float16 where it has no bf16), else "float32"
    resolve_dtype("auto", "cpu")   # "float32": the device the model goes to decides
    resolve_dtype("float16")       # an explicit dtype wins everywhere
    use_threads(2)                 # torch's CPU threads (None: the free cores, default_threads)

Commands take `--dtype auto` (their default) and resolve it here before anything is fingerprinted, so
a run records the concrete dtype in config.json (`senior.dtype`): on a CPU it is float32, as it
always was (the fingerprints of earlier CPU runs are unchanged); on a GPU it is bfloat16. Log-probs
are computed in fp32 whatever the weights' dtype (engines/hf.py `_logits`). torch is imported only
when a function is called (`tandem-eval --help` must stay light).
"""

from __future__ import annotations

import logging
import os

from .config import DTYPES
from .schemas import ConfigError

AUTO = "auto"
DTYPE_CHOICES = (AUTO, *DTYPES)  # what --dtype accepts
log = logging.getLogger(__name__)


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


def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_threads(cores: int, load: float) -> int:
    """The free cores: the cores this process may use less those the 1-minute load average says other
    processes keep busy, at least 1, never more than the cores. Every core on a busy machine
    oversubscribes it (torch's threads then wait on each other: beside one other torch process on 2
    cores, HF generation ran 11x slower with 2 threads than alone)."""
    return max(1, min(cores, cores - int(load)))


def check_threads(threads: int | None) -> None:
    """--threads at most the cores this process may use (None: all of them), or a one-line ConfigError:
    torch would try to start 100000 threads and fail in mmap, and more threads than cores only slow
    the run. Checked before any work (the CLI runs it with the other option checks)."""
    cores = _usable_cores()
    if threads is not None and threads > cores:
        raise ConfigError(
            f"--threads {threads} exceeds the {cores} cores this process may use; pass at most {cores}, or omit "
            "it for the free cores"
        )


def use_threads(threads: int | None = None) -> int:
    """Set torch's CPU threads to `threads` (default: default_threads, the free cores) and return it;
    warn when the 1-minute load average already exceeds the cores, naming the threads chosen and
    the option that overrides them."""
    import torch

    cores = _usable_cores()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    chosen = threads or default_threads(cores, load)
    torch.set_num_threads(chosen)
    if load > cores:
        log.warning(
            "the 1-minute load average is %.1f on %d cores: other processes compete for them, so this run may be "
            "several times slower; running on %d thread(s)%s (--threads N sets them; wait for the other processes "
            "for full speed)",
            load,
            cores,
            chosen,
            "" if threads else " (the free cores)",
        )
    return torch.get_num_threads()
