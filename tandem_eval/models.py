"""Resolving and checking checkpoints: paths, bundled `toy:` names, the junior recorded by the
trainer, cheap up-front checks (config, weights, tokenizer, chat template) and the one
vocabulary-identity check that evaluation and training share.

    path = resolve_model("toy:tandem")            # a bundled toy-world checkpoint
    junior = junior_from_metadata(path)           # from tandem_meta.json, if the trainer wrote one
    junior = default_junior(path, "toy:tandem")   # the same, or one ModelError naming the fix
    check_checkpoint(path)                        # config.json + weights headers, no weights loaded
    check_vocab(senior_tok, junior_tok, allow_mismatch=False)
    same = check_pair(senior_path, junior_path)   # the same, from paths (used by the trainer)
    tok = check_model("toy:tandem")               # checkpoint files + tokenizer, no weights; the tokenizer
    senior_tok, checkpoints = check_models(cfg, junior_needed=True)  # a run's senior (+ junior), chat templates
    one_model = same_weights(senior_path, junior_path)  # a self-paired pair: load the weights once

Every check here reads only small files (config.json, tokenizer files, safetensors headers), so it
runs in about a second before any engine loads; failures are ModelError with a one-line message.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import signal
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .files import RunFolderError, atomic_write_json, check_regular, read_regular

if TYPE_CHECKING:
    from .config import EvalConfig, ModelSpec

INSTALL_DIR = Path(__file__).resolve().parents[1]  # the checkout (or site-packages) holding tandem_eval/
TOY_DIR = INSTALL_DIR / "tandem_eval" / "toy" / "checkpoints"
log = logging.getLogger(__name__)
META_FILE = "tandem_meta.json"  # written by trainer/ into every checkpoint it saves
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
SAFETENSORS_HEADER_CAP = 100_000_000  # safetensors' own limit on a header's size


class ModelError(ValueError):
    """A checkpoint cannot be used; the message names the problem and the fix."""


def toy_names() -> list[str]:
    """Bundled toy checkpoints as `toy:NAME` (a folder with config.json under toy/checkpoints)."""
    if not TOY_DIR.exists():
        return []
    return sorted(f"toy:{p.parent.relative_to(TOY_DIR).as_posix()}" for p in TOY_DIR.rglob("config.json"))


def resolve_model(name: str | Path) -> Path:
    """A usable HF-format checkpoint folder for a path or a `toy:NAME`, or a ModelError."""
    name = str(name)
    if name.startswith("toy:"):
        short = name[4:] if "/" in name else f"self-paired/{name[4:]}"  # toy:tandem = the main scenario's
        path = (TOY_DIR / short).resolve()
        # `toy:../../x` must not reach outside the bundle.
        if not path.is_relative_to(TOY_DIR) or not (path / "config.json").exists():
            valid = ", ".join(toy_names()) or "none bundled in this install"
            raise ModelError(f"unknown toy checkpoint {name!r}; valid: {valid}")
        return path
    path = Path(name).expanduser()
    if not path.exists():
        raise ModelError(f"checkpoint not found: {path} (pass an HF-format folder with config.json, or toy:NAME)")
    if not path.is_dir():
        raise ModelError(f"checkpoint {path} is a file; pass the folder that save_pretrained wrote")
    if not (path / "config.json").exists():
        raise ModelError(
            f"{path} is not an HF-format checkpoint (no config.json); pass the folder that save_pretrained wrote"
        )
    if not any((path / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
        raise ModelError(
            f"{path} has no tokenizer files; save the tokenizer next to the weights (tokenizer.save_pretrained(PATH))"
        )
    return path


def recorded_checkpoint(name: str | Path) -> Path:
    """A checkpoint that a run folder recorded, found on this machine (for reading, e.g. its tokenizer):
    `toy:NAME` through resolve_model; a path that exists; else, for an absolute path written on another
    machine or checkout, the same folder inside this install (`/elsewhere/tandem_eval/toy/checkpoints/X`
    -> this install's tandem_eval/toy/checkpoints/X), or the bundled checkpoint whose tandem_meta.json
    records that it was copied from that path. A ModelError naming the path otherwise."""
    if str(name).startswith("toy:"):
        return resolve_model(str(name))
    path = Path(str(name)).expanduser()
    if path.exists():
        return path
    # longest suffix first, two parts at least: a bare `init` must not match some folder of this checkout
    for i in range(1, len(path.parts) - 1):
        here = INSTALL_DIR.joinpath(*path.parts[i:])
        if (here / "config.json").exists() or (here / "tokenizer.json").exists():
            return here
    bundled = bundled_sources().get(str(path))
    if bundled is not None:
        return bundled
    raise ModelError(f"{path} not found (recorded on another machine, and no bundled checkpoint was copied from it)")


def bundled_sources() -> dict[str, Path]:
    """{absolute path a bundled toy checkpoint was copied from: its folder here}, from what each bundled
    tandem_meta.json records: `source` (trainer.toy.world's bundle step), the trainer's output_dir and
    optimizer_step (the checkpoint-N folder it saved), and the recipe's junior, which the bundle names as
    `toy:SCENARIO/junior`."""
    out: dict[str, Path] = {}
    for meta_file in sorted(TOY_DIR.glob(f"*/*/{META_FILE}")) if TOY_DIR.exists() else ():
        try:
            meta = metadata(meta_file.parent)
        except ModelError:
            continue  # a damaged bundle is reported where it is loaded, not while looking up aliases
        recipe: dict = meta["recipe"] if isinstance(meta.get("recipe"), dict) else {}
        if meta.get("source"):
            out[str(meta["source"])] = meta_file.parent
        if recipe.get("output_dir") and meta.get("optimizer_step") is not None:
            out[f"{recipe['output_dir']}/checkpoint-{meta['optimizer_step']}"] = meta_file.parent
        junior = meta.get("junior")
        if recipe.get("junior") and str(junior).startswith("toy:"):
            with contextlib.suppress(ModelError):
                out.setdefault(str(recipe["junior"]), resolve_model(str(junior)))
    return out


def metadata(path: Path) -> dict:
    """tandem_meta.json of a trainer checkpoint ({} when absent); a damaged file is a ModelError."""
    meta = Path(path) / META_FILE
    if not meta.exists():
        return {}
    try:
        data = json.loads(read_regular(meta, "restore it from the trainer or delete it", error=ModelError))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelError(f"{meta} is not valid JSON ({_short(e)}); restore it from the trainer or delete it") from None
    if not isinstance(data, dict) or not isinstance(data.get("junior", ""), str | type(None)):
        raise ModelError(f"{meta} must be a JSON object with a string 'junior'; restore it or delete it")
    return data


def junior_from_metadata(senior: Path) -> str | None:
    """The junior a trainer checkpoint was paired with (relative paths are relative to it)."""
    junior = metadata(senior).get("junior")
    if not junior or str(junior).startswith("toy:"):
        return junior
    p = Path(junior)
    return str(p if p.is_absolute() else (Path(senior) / p).resolve())


def default_junior(
    senior: Path, named: str | Path, fix: str = "pass --junior PATH", option: str = "--junior", error=None
) -> str:
    """The junior a senior is measured with when none is given: the one its trainer recorded
    (tandem_meta.json, junior_from_metadata), or one error (`error`, default ModelError) naming the
    senior, the command's `option` for a junior and `fix`. `senior`: its folder, resolved; `named`: as
    the user named it. The one place every command (handoff, legibility, drift, lm-eval, the demo)
    reads the default."""
    found = junior_from_metadata(senior)
    if not found:
        raise (error or ModelError)(f"no {option} given and senior {named} has no tandem_meta.json naming one; {fix}")
    return found


def _short(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__


def read_model_config(path: Path) -> dict:
    """config.json as a dict with a model_type, or a ModelError naming the file."""
    cfg_path = Path(path) / "config.json"
    try:
        data = json.loads(read_regular(cfg_path, "restore the checkpoint's own config.json", error=ModelError))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelError(f"{cfg_path} is not valid JSON ({_short(e)}); save the model again") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise ModelError(f"{cfg_path} has no 'model_type'; re-save the model with save_pretrained (PATH)")
    return data


def _check_safetensors(file: Path) -> dict[str, tuple[int, ...]]:
    """The header parses and every tensor's bytes lie inside the file (catches truncation); returns
    each tensor's shape as the header records it."""
    try:
        size = file.stat().st_size
        check_regular(file, "copy or save the weights again", ModelError)
        with open(file, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n <= 0 or 8 + n > size or n > SAFETENSORS_HEADER_CAP:
                raise ValueError("header length past the end of the file or above safetensors' 100 MB limit")
            header = json.loads(f.read(n))
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        end = max((v["data_offsets"][1] for v in tensors.values()), default=0)
        shapes = {k: tuple(int(d) for d in v["shape"]) for k, v in tensors.items()}
    except (OSError, ValueError, struct.error, KeyError, TypeError, IndexError, AttributeError) as e:
        raise ModelError(f"{file} is damaged or truncated ({_short(e)}); copy or save the weights again") from None
    if 8 + n + end > size:
        raise ModelError(
            f"{file} is truncated ({size} bytes, its header needs {8 + n + end}); copy or save the weights again"
        )
    return shapes


def _check_torch_bin(file: Path) -> dict[str, tuple[int, ...]]:
    """A pytorch_model*.bin loads as transformers loads it (torch.load with weights_only=True), onto the
    meta device (no tensor data read; torch's zip format is memory-mapped); returns each tensor's
    shape. A pickle that weights_only refuses (one that could run code) would otherwise pass every
    check and fail once the engine loads it."""
    import warnings
    import zipfile

    import torch

    check_regular(file, "copy or save the weights again", ModelError)
    if file.stat().st_size == 0:
        raise ModelError(f"{file} is empty; copy or save the weights again")
    try:
        with warnings.catch_warnings():  # torch's note on a pickle protocol is not the user's concern
            warnings.simplefilter("ignore")
            state = torch.load(file, map_location="meta", weights_only=True, mmap=zipfile.is_zipfile(file))
    except Exception as e:  # noqa: BLE001 - unpickling raises many types; each is a file transformers cannot load
        raise ModelError(
            f"{file} does not load as weights only (torch.load(weights_only=True): {type(e).__name__}): a plain "
            "pickle (it could run code) or a damaged file. Convert it to safetensors where you trust it "
            "(load it, then model.save_pretrained(PATH)), or copy the weights again"
        ) from None
    if not isinstance(state, dict):
        raise ModelError(
            f"{file} holds a {type(state).__name__}, not a state dict; save the model with save_pretrained"
        )
    return {k: tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}


def check_weights(path: Path) -> dict[str, tuple[int, ...]]:
    """Weights are present and loadable: safetensors headers and sizes consistent, pytorch_model.bin
    files loadable as weights only; returns the tensors' shapes (headers; .bin files on the meta device)."""
    path = Path(path)
    for index in WEIGHT_INDEXES:
        if (path / index).exists():
            try:
                raw = read_regular(path / index, "save the model again", error=ModelError)
                files = sorted(set(json.loads(raw)["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                raise ModelError(f"{path / index} is damaged ({_short(e)}); save the model again") from None
            shapes = {}
            for name in files:
                shard = path / name
                if not shard.is_file():
                    raise ModelError(f"{path}: weight shard {name} listed in {index} is missing; copy it")
                shapes.update(_check_safetensors(shard) if shard.suffix == ".safetensors" else _check_torch_bin(shard))
            return shapes
    for name in WEIGHT_FILES:
        if (path / name).is_file():
            if name.endswith(".safetensors"):
                return _check_safetensors(path / name)
            return _check_torch_bin(path / name)
    raise ModelError(f"{path} has no weights (model.safetensors or pytorch_model.bin); save them with save_pretrained")


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def check_shapes(path: Path, config, shapes: dict[str, tuple[int, ...]]) -> None:
    """config.json describes the weights: the model it builds (on the meta device: no memory, no
    weights) has the tensors' shapes the safetensors headers record, and as many layers. A config
    edited after saving (a wider MLP, more layers) would otherwise pass every check and fail at load,
    or load with layers transformers fills with random numbers."""
    if not shapes:
        return
    import torch
    from transformers import AutoModelForCausalLM

    where = f"{Path(path) / 'config.json'} does not match the weights"
    fix = "restore the checkpoint's own config.json (or save the model again)"
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception as e:  # noqa: BLE001 - any failure to build is a config that cannot serve these weights
        raise ModelError(f"{Path(path) / 'config.json'} does not build a model ({_short(e)}); {fix}") from None
    prefix = f"{model.base_model_prefix}." if getattr(model, "base_model_prefix", "") else "\0"
    strip = lambda k: k[len(prefix) :] if k.startswith(prefix) else k  # noqa: E731 (base-model checkpoints)
    want = {strip(k): tuple(v.shape) for k, v in model.state_dict().items()}
    have = {strip(k): v for k, v in shapes.items()}
    for name in sorted(want.keys() & have.keys()):
        if want[name] != have[name]:
            raise ModelError(
                f"{where}: {name} is {list(have[name])} in the weights, config.json implies {list(want[name])}"
                f"{_fields_behind(config, want[name], have[name])}; {fix}"
            )
    layers = [{int(m.group(1)) for k in keys if (m := _LAYER.search(k))} for keys in (want, have)]
    if all(layers) and len(layers[0]) != len(layers[1]):
        raise ModelError(f"{where}: config.json has {len(layers[0])} layers, the weights {len(layers[1])}; {fix}")


SUPPORTED_FAMILIES = "Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3, OLMo 2"  # what the HF engine is tested on
_LAYER_KINDS = frozenset({"full_attention", "sliding_attention"})


def check_supported(config) -> None:
    """Raise a one-line ModelError if the HF engine cannot serve a model with this config.

    Cheap (reads the config and the model class, loads no weights): check_checkpoint runs it before
    loading anything, and the HF engine before its weights load. What passes is still checked
    numerically when an engine is built."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    arch = ", ".join(getattr(config, "architectures", None) or [type(config).__name__])
    what = f"{arch} (model_type {getattr(config, 'model_type', '?')!r})"
    fix = f"use a decoder-only causal LM such as {SUPPORTED_FAMILIES}, or --engine vllm if vLLM supports it"
    if getattr(config, "is_encoder_decoder", False):
        raise ModelError(f"{what} is an encoder-decoder model; the HF engine serves decoder-only causal LMs: {fix}")
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise ModelError(f"{what} has no causal-LM class in transformers (remote code is not supported); {fix}")
    text = config.get_text_config()
    kinds = set(getattr(text, "layer_types", None) or []) - _LAYER_KINDS
    if kinds:
        raise ModelError(
            f"{what} has {', '.join(sorted(map(str, kinds)))} layers; the HF engine serves full and "
            f"sliding-window attention layers only; {fix}"
        )
    cls: Any = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]  # a model class; transformers types it as a pair
    if not cls.is_backend_compatible():
        raise ModelError(
            f"{what}: {cls.__name__} does not route attention through transformers' AttentionInterface, "
            f"which the HF engine needs; {fix}"
        )
    if getattr(text, "num_kv_shared_layers", 0):
        raise ModelError(f"{what} shares KV caches across layers, which the HF engine's row store cannot; {fix}")


def _fields_behind(config, implied: tuple[int, ...], actual: tuple[int, ...]) -> str:
    """The config.json numbers behind the dimensions that differ (" (its vocab_size is 10)"), if any."""
    fields = config.get_text_config().to_dict()
    named = []
    for want, got in zip(implied, actual):
        if want != got:
            named += [f"{k} is {v}" for k, v in sorted(fields.items()) if type(v) is int and v == want and v > 1]
    return f" (its {', '.join(dict.fromkeys(named))})" if named else ""


def check_checkpoint(path: Path) -> dict:
    """config.json readable and known to transformers, weights present; returns the config dict."""
    data = read_model_config(path)
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(path))
    except Exception as e:  # noqa: BLE001 - transformers' config validators raise their own types too
        if isinstance(e, ImportError):  # a missing optional dependency of a family is not a bad config
            raise
        raise ModelError(f"{Path(path) / 'config.json'} is not usable by transformers ({_short(e)})") from None
    shapes = check_weights(path)
    check_supported(config)  # the reference engine's architecture check (config only)
    check_shapes(path, config, shapes)
    return data


# The files a tokenizer loads from (a chat template is not one: prompts are rendered by the plan).
TOKENIZER_FILES: tuple[str, ...] = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    for name in TOKENIZER_FILES:  # a FIFO or device would block or never end inside transformers
        check_regular(Path(path) / name, "restore the tokenizer files (tokenizer.save_pretrained(PATH))", ModelError)
    try:
        return AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ModelError(f"cannot load the tokenizer at {path}: {_short(e)}") from None


class Vocabulary:
    """A tokenizer's vocabulary read from tokenizer.json with the `tokenizers` library alone: what token
    boundaries need (convert_ids_to_tokens, all_special_ids, get_vocab), without transformers, whose import
    loads torch (seconds, for commands that load no model: `view`, the notebooks)."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        fix = "restore the tokenizer files (tokenizer.save_pretrained(PATH))"
        check_regular(path / "tokenizer.json", fix, ModelError)
        try:
            self._tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as e:  # the Rust library raises its own Exception type on a damaged file
            raise ModelError(f"cannot load the tokenizer at {path}: {_short(e)}") from None
        special = {i for i, t in self._tok.get_added_tokens_decoder().items() if t.special}
        # bos/eos/pad/unk named in tokenizer_config.json count as special even when not marked so
        cfg_file = path / "tokenizer_config.json"
        try:
            cfg = json.loads(read_regular(cfg_file, fix, error=ModelError)) if cfg_file.exists() else {}
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ModelError(f"{cfg_file} is not valid JSON ({_short(e)}); {fix}") from None
        cfg = cfg if isinstance(cfg, dict) else {}
        for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
            token = cfg.get(key)
            token = token.get("content") if isinstance(token, dict) else token
            token_id = self._tok.token_to_id(token) if isinstance(token, str) else None
            if token_id is not None:
                special.add(token_id)
        self.all_special_ids = sorted(special)

    def convert_ids_to_tokens(self, ids) -> list[str | None]:
        return [self._tok.id_to_token(int(i)) for i in ids]

    def get_vocab(self) -> dict[str, int]:
        return self._tok.get_vocab(with_added_tokens=True)

    def __len__(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)


def load_vocabulary(path: Path):
    """The vocabulary of the tokenizer at `path` for reading token ids: a Vocabulary (no torch) when a
    tokenizer.json is there, else transformers' tokenizer (a slow-only tokenizer: vocab.json + merges.txt
    or a SentencePiece model)."""
    path = Path(path)
    return Vocabulary(path) if (path / "tokenizer.json").exists() else load_tokenizer(path)


def same_vocab(tok_a, tok_b) -> bool:
    """Same token string -> id map (added/special tokens included): ids mean the same to both."""
    return tok_a is tok_b or (len(tok_a) == len(tok_b) and tok_a.get_vocab() == tok_b.get_vocab())


def check_vocab(
    senior_tok, junior_tok, allow_mismatch: bool = False, senior: str = "senior", junior: str = "junior"
) -> bool:
    """True when both tokenizers map every string to the same ids. Refuses a mismatch unless allowed.

    The single vocabulary check of evaluation (handoff) and training (tandem rollouts, KL reference):
    a reordered vocabulary of the same size is a mismatch too."""
    same = same_vocab(senior_tok, junior_tok)
    if not same and not allow_mismatch:
        how = "sizes differ" if len(senior_tok) != len(junior_tok) else "same size, different token ids"
        raise ModelError(
            f"senior {senior} and junior {junior} tokenizers differ ({len(senior_tok)} vs {len(junior_tok)} tokens, "
            f"{how}); token-level handoff needs one vocabulary. Use a junior from the same model family, or pass "
            "--allow-vocab-mismatch for text-level handoff with re-tokenization"
        )
    return same


def check_embedding_rows(path: Path, tokenizer, data: dict | None = None) -> None:
    """The model's embedding has a row for every token id the tokenizer can produce; `data`: its
    config.json as the caller read it (None: read here)."""
    data = read_model_config(path) if data is None else data
    rows = data.get("vocab_size") or (data.get("text_config") or {}).get("vocab_size")
    if isinstance(rows, int) and rows < len(tokenizer):
        raise ModelError(
            f"{Path(path) / 'config.json'}: vocab_size {rows} is smaller than its tokenizer ({len(tokenizer)} tokens); "
            "resize the embeddings (model.resize_token_embeddings) and save again"
        )


def check_pair(senior, junior, allow_mismatch: bool = False) -> bool:
    """check_vocab from two checkpoint paths or toy: names (loads tokenizers only); also checks each
    model's embedding covers its tokenizer. Returns True when the vocabularies are identical."""
    s_path, j_path = resolve_model(senior), resolve_model(junior)
    s_tok, j_tok = load_tokenizer(s_path), load_tokenizer(j_path)
    check_embedding_rows(s_path, s_tok)
    check_embedding_rows(j_path, j_tok)
    return check_vocab(s_tok, j_tok, allow_mismatch, senior=str(senior), junior=str(junior))


def _weight_files(path: Path) -> list[Path]:
    return sorted(f for pattern in ("*.safetensors", "*.bin") for f in Path(path).glob(pattern))


# ---- checkpoints by content ------------------------------------------------------------------------
# A checkpoint's content hash covers what decides its outputs: weights (safetensors and their index,
# pytorch_model*.bin), config.json, generation_config.json and the tokenizer files; not the trainer's
# state (optimizer.pt, trainer_state.json, tandem_meta.json). File hashes are cached in one file under
# the user cache (paths.cache_root), never in the checkpoint. A cached hash is trusted only while the
# file's device, inode, size, mtime AND ctime are the ones it was hashed at (a tool can restore an
# mtime, nothing can set a ctime back: any write or utime moves it), and while the file's first and
# last MiB still digest as they did (so a cache entry edited to match a swapped file is caught too).
_MODEL_FILES = ("config.json", "generation_config.json", *WEIGHT_INDEXES, *TOKENIZER_FILES, *CHAT_TEMPLATE_FILES)
_WEIGHTS = re.compile(r".*\.safetensors|pytorch_model.*\.bin")
HASH_CACHE = "file-sha256.json"
PARTIAL_BLOCK = 2**20  # the partial digest reads this many bytes at each end of a file


def checkpoint_content(folder: Path, only: tuple[str, ...] | None = None) -> str:
    """The SHA-256 of a checkpoint folder's model files (resolved already: resolve_model): names, sizes
    and each file's SHA-256 (hashed once per file version, then read from the cache). Replaced weights,
    an edited config or tokenizer give another value; a copy of the same files gives the same one.
    `only`: those file names alone (a served model's tokenizer files: its weights are the server's)."""
    import hashlib

    path = Path(folder).resolve()
    names = set(only) if only is not None else None
    files = sorted(
        f
        for f in path.iterdir()
        if (f.name in names if names is not None else f.name in _MODEL_FILES or _WEIGHTS.fullmatch(f.name))
        and f.is_file()
    )
    with _hash_cache() as cached:
        manifest = [[f.name, f.stat().st_size, cached(f)] for f in files]
    return hashlib.sha256(json.dumps(manifest).encode()).hexdigest()


def partial_digest(file: Path) -> str:
    """SHA-256 of a file's size and its first and last PARTIAL_BLOCK bytes: two reads of at most 1 MiB
    each, checked on every cache hit (a small file is read whole)."""
    import hashlib

    h = hashlib.sha256()
    with open(file, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        h.update(str(size).encode() + b"\0" + f.read(PARTIAL_BLOCK))
        if size > PARTIAL_BLOCK:
            f.seek(max(PARTIAL_BLOCK, size - PARTIAL_BLOCK))
            h.update(f.read(PARTIAL_BLOCK))
    return h.hexdigest()


@functools.lru_cache(maxsize=16)
def _warn_once(message: str) -> None:
    """Log `message` once per process (a handoff hashes two checkpoints, each through the cache)."""
    log.warning(message)


@contextlib.contextmanager
def _hash_cache():
    """A function file -> SHA-256 backed by the cache file (see the section's comment for what makes an
    entry count). The cache is best effort: a missing, damaged or linked cache file costs a re-hash; a
    cache root that cannot be used (a file, read-only) means hashing without the cache, with one
    warning; never an error."""
    import hashlib

    from .paths import cache_root, not_writable

    root = cache_root()
    where = root / HASH_CACHE
    why = not_writable(root)  # a file where the folder belongs, a read-only home: checked once
    if why is not None:
        _warn_once(f"checkpoint hash cache not used ({why}): every checkpoint file is hashed in full")
    entries: dict = {}
    if why is None and not where.is_symlink():  # a planted link is not our cache: it is replaced below
        try:
            entries = json.loads(read_regular(where, ""))
            entries = entries if isinstance(entries, dict) else {}
        except (OSError, ValueError):
            entries = {}
    changed = []

    def sha256(file: Path) -> str:
        real = file.resolve()
        st = real.stat()
        key, stamp = str(real), [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        check_regular(real, "restore the checkpoint's files", ModelError)
        hit = entries.get(key)
        if isinstance(hit, list) and len(hit) == 3 and hit[0] == stamp and hit[2] == partial_digest(real):
            return hit[1]
        with open(real, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        # A file written in the last seconds could change again within its timestamps' granularity:
        # hashed again next time. (mtime only: a ctime moved by utime alone cannot hide a write.)
        if why is None and time.time_ns() - st.st_mtime_ns > 2 * 10**9:
            entries[key] = [stamp, digest, partial_digest(real)]
            changed.append(key)
        return digest

    yield sha256
    if changed:
        _write_cache(where, {k: v for k, v in entries.items() if os.path.exists(k)})  # gone files pruned


def _write_cache(where: Path, entries: dict) -> None:
    """Write the cache whole, atomically (files.atomic_write_json: a no-follow temporary file renamed over
    it, so a planted link is replaced, never written through). Best effort: a disk filled or made
    read-only meanwhile costs a re-hash next time, with one warning."""
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(where, entries)
    except (OSError, ValueError, RunFolderError) as e:
        log.warning("checkpoint hash cache %s not written (%s); hashes are recomputed next time", where, e)


def same_weights(a: Path, b: Path) -> bool:
    """Two checkpoint folders (resolved already: resolve_model) are one model: the same folder, or a copy
    of it (equal config.json and weight files of equal names, sizes and SHA-256; hashed only when names
    and sizes agree)."""
    a, b = Path(a).resolve(), Path(b).resolve()
    if a == b:
        return True
    if read_model_config(a) != read_model_config(b):
        return False
    fa, fb = _weight_files(a), _weight_files(b)
    if not fa or [(f.name, f.stat().st_size) for f in fa] != [(f.name, f.stat().st_size) for f in fb]:
        return False
    with _hash_cache() as cached:
        return all(cached(x) == cached(y) for x, y in zip(fa, fb))


TEMPLATE_SECONDS = 5.0  # rendering the check's one-line prompt takes milliseconds with any sane template


class TimeCapExceeded(Exception):
    """Raised inside a time_cap block when its seconds run out."""


@contextlib.contextmanager
def time_cap(seconds: float):
    """Raise TimeCapExceeded inside the block after `seconds` (SIGALRM's interval timer, so pure-Python
    work such as Jinja rendering is interrupted). In threads other than the main one, where signals
    cannot be delivered, the block runs without a cap."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise TimeCapExceeded

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def same_tokenizer(a: Path, b: Path) -> bool:
    """Two checkpoint folders (resolved already) load one tokenizer: byte-identical tokenizer files (the
    same folder, a copy, or two sizes of one family: Qwen2.5-Coder 1.5B and 0.5B), so one loaded
    tokenizer object serves both engines (about 100 MB and a second of loading saved for Qwen's)."""
    a, b = Path(a).resolve(), Path(b).resolve()
    if a == b:
        return True
    for name in TOKENIZER_FILES:
        fa, fb = a / name, b / name
        if fa.exists() != fb.exists() or (fa.exists() and fa.read_bytes() != fb.read_bytes()):
            return False
    return True


def check_chat_template(tokenizer, chat_template: str | None, source: str, option: str) -> list[int]:
    """Render the paper's prompt once with `chat_template` (or the tokenizer's own); return its ids.

    `source` names where the template came from (a file, a checkpoint), `option` the flag that
    replaces it; any Jinja or rendering failure becomes a one-line PromptError naming both."""
    from jinja2 import TemplateError

    from .data.prompts import PromptError, prompt_ids

    if not (chat_template or getattr(tokenizer, "chat_template", None)):
        raise PromptError(f"{source} has no chat_template; add one to tokenizer_config.json or pass {option} FILE")
    try:
        with time_cap(TEMPLATE_SECONDS):  # a template that loops for minutes is refused, not waited for
            ids = prompt_ids(tokenizer, "What is 1 + 1?", chat_template=chat_template)
    except TimeCapExceeded:
        raise PromptError(
            f"the chat template of {source} did not render a one-line prompt within {TEMPLATE_SECONDS:g} s (nested "
            f"loops?); fix it or pass {option} FILE"
        ) from None
    except PromptError as e:
        raise PromptError(f"{source}: {_short(e)}; fix it or pass {option} FILE") from None
    except (TemplateError, ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        # only jinja's syntax errors carry a line number (hence the getattr)
        where = f" (line {e.lineno})" if getattr(e, "lineno", None) else ""  # type: ignore[union-attr]
        raise PromptError(
            f"the chat template of {source} does not render{where}: {type(e).__name__}: {_short(e)}; "
            f"fix it or pass {option} FILE"
        ) from None
    if not ids:
        raise PromptError(f"the chat template of {source} renders an empty prompt; fix it or pass {option} FILE")
    return ids


# ---- a run's checkpoints: every check before weights load ---------------------------------------
def check_model(spec_path: str):
    """Checkpoint files (config, weights headers) and tokenizer of one model; returns the tokenizer.
    Every command that loads a model's weights runs this first (solo, handoff, legibility, drift, lm-eval)."""
    return check_folder(resolve_model(spec_path))


def check_files(checkpoint: Checkpoint):
    """check_folder of a resolved checkpoint, returning its tokenizer; a served model's folder holds its
    tokenizer only (its weights are the server's, checked by engines/served.py), so only that loads."""
    return check_folder(checkpoint.path) if checkpoint.server is None else load_tokenizer(checkpoint.path)


def check_folder(path: Path):
    """check_model of a checkpoint folder already resolved (check_models resolves each one once); every
    checkpoint check of a command passes here."""
    data = check_checkpoint(path)
    tok = load_tokenizer(path)
    check_embedding_rows(path, tok, data)  # config.json as check_checkpoint read it
    return tok


def check_template(tok, chat_template: str | None, who: str, spec_path: str, option: str) -> None:
    """The prompt renders with `chat_template` (or the tokenizer's own); errors name `option`."""
    source = f"{option} (the {who}'s template)" if chat_template else f"the {who} checkpoint {spec_path}"
    check_chat_template(tok, chat_template, source, option)


def check_models(
    cfg: EvalConfig,
    junior_needed: bool,
    templates: bool = True,
    option: str = "--chat-template",
    resolved: Checkpoints | None = None,
):
    """The senior's (and with `junior_needed`, the junior's) checkpoint, tokenizer and vocabulary, and
    the chat templates that render prompts; no weights load. Returns the senior's tokenizer and the
    run's Checkpoints.

    `junior_needed` is a value the caller computes once (from the schedule, `schedules.needs_junior`,
    or because the junior scores): checkpoints know nothing of schedules.
    templates=False (lm-eval): the senior's template is checked only when `cfg.chat_template` is given
    (lm-eval renders with it only under --apply_chat_template), the junior's never (it reads text).
    `option` is the flag that replaces the senior's template, as errors name it. `resolved`: the
    checkpoints as another check of this command already found them (served models: engines/served.py
    checks their servers, then the tokenizer folders are checked here); else each is resolved here, once."""
    senior = resolved.senior if resolved is not None else Checkpoint(resolve_model(cfg.senior.path))
    junior = None
    if cfg.junior is not None and junior_needed:  # resolved here unless given (the CLI resolves the senior only)
        given = resolved.junior if resolved is not None else None
        junior = given or Checkpoint(resolve_model(cfg.junior.path))
    tok = check_files(senior)
    junior_tok, same = None, True
    if junior is not None:
        junior_tok = check_files(junior)
        junior_name = cast("ModelSpec", cfg.junior).path  # cast: a junior checkpoint comes from cfg.junior only
        same = check_vocab(tok, junior_tok, cfg.allow_vocab_mismatch, senior=cfg.senior.path, junior=junior_name)
    checkpoints = _checkpoints(cfg, senior, junior, same)
    renders = [(tok, cfg.chat_template, "senior", cfg.senior.path, option)] if templates or cfg.chat_template else []
    if junior_tok is not None and templates and (not same or cfg.junior_chat_template):  # the junior's own prompt
        junior_path = cast("ModelSpec", cfg.junior).path  # cast: junior_tok is only loaded from cfg.junior
        renders.append((junior_tok, cfg.junior_chat_template, "junior", junior_path, "--junior-chat-template"))
    for render in renders:  # the chat templates last: every checkpoint and tokenizer is checked first
        check_template(*render)
    return tok, checkpoints


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint as a command resolved it, once: `path` the folder its files are read from (config,
    tokenizer, weights; for a served model, its tokenizer folder) and, for a served model, `server` its
    "URL[,URL...]#NAME" and `identity` what its servers report (engines/served.py: model name, the
    server's model path, context window, vLLM version, whether it runs our sampler): its weights stay
    behind the server. Every later question (content, same weights, same tokenizer, which engine loads
    what) is asked of this value, never of the name the user typed."""

    path: Path
    server: str | None = None
    identity: dict | None = None

    @property
    def target(self) -> str | Path:
        """What an engine loads: the server, or the folder."""
        return self.server or self.path

    def content(self) -> str:
        """The SHA-256 the run records for this checkpoint: its model files (checkpoint_content), or for
        a served model its identity (name and the server's model path) and its tokenizer files. Weights
        replaced behind a server under the same name and path are not seen: no server reports a hash."""
        if self.server is None:
            return checkpoint_content(self.path)
        import hashlib

        ident = self.identity or {}
        key = {
            "model": ident.get("model"),
            "root": ident.get("root"),
            "tokenizer": checkpoint_content(self.path, only=TOKENIZER_FILES),
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Checkpoints:
    """A run's checkpoints as engines load them, and how the junior (None when the command needs
    none) relates to the senior."""

    senior: Checkpoint
    junior: Checkpoint | None = None
    same_vocab: bool = True  # token-level handoff; False: text-level, the junior re-tokenizes the trace
    shared: bool = False  # the junior is the senior's own model in the same dtype: its weights load once

    @functools.cached_property
    def one_tokenizer(self) -> bool:
        """The junior's tokenizer files are the senior's, byte for byte (same_tokenizer): one loaded tokenizer
        serves both engines. Asked once, of these values, when an engine that can share one loads."""
        return self.junior is not None and self.same_vocab and same_tokenizer(self.senior.path, self.junior.path)


def with_contents(cfg: EvalConfig, checkpoints: Checkpoints) -> EvalConfig:
    """`cfg` with the content hash of each checkpoint its engines load (Checkpoint.content): the run
    records them, and they are part of its fingerprint (and a served model's tokenizer folder, which is not)."""
    from dataclasses import replace

    senior = replace(cfg.senior, content=checkpoints.senior.content(), **_tokenizer_folder(checkpoints.senior))
    junior = cfg.junior
    if checkpoints.junior is not None:
        # cast: a junior checkpoint is resolved only from cfg.junior
        junior = replace(
            cast("ModelSpec", junior), content=checkpoints.junior.content(), **_tokenizer_folder(checkpoints.junior)
        )
    return replace(cfg, senior=senior, junior=junior)


def _tokenizer_folder(checkpoint: Checkpoint) -> dict:
    """A served model's tokenizer folder as found (--tokenizer, or the model folder its server reported),
    recorded in the run so its readers (lenses, view) tokenize without the server; {} for a local folder."""
    return {"tokenizer": str(checkpoint.path)} if checkpoint.server is not None else {}


def run_checkpoints(cfg: EvalConfig, junior_needed: bool, same_vocab: bool | None = None) -> Checkpoints:
    """`cfg`'s local checkpoints resolved (the junior's only when `junior_needed`); `same_vocab` as already
    checked (None: the tokenizers are loaded and compared here). For Python callers that open engines
    without a plan (open_engines); a command's plan resolves them once in check_models."""
    senior = Checkpoint(resolve_model(cfg.senior.path))
    junior = Checkpoint(resolve_model(cfg.junior.path)) if cfg.junior is not None and junior_needed else None
    return _checkpoints(cfg, senior, junior, same_vocab)


def _checkpoints(
    cfg: EvalConfig, senior: Checkpoint, junior: Checkpoint | None, same_vocab: bool | None
) -> Checkpoints:
    """run_checkpoints of checkpoints already resolved (None: no junior needed)."""
    if junior is None:
        return Checkpoints(senior)
    if same_vocab is None:
        same_vocab = check_vocab(load_tokenizer(senior.path), load_tokenizer(junior.path), cfg.allow_vocab_mismatch)
    return Checkpoints(senior, junior, same_vocab, _one_model(cfg, senior, junior))


def _one_model(cfg: EvalConfig, senior: Checkpoint, junior: Checkpoint) -> bool:
    """The junior is the senior's own model: the same checkpoint (or a byte-identical copy; for served
    models, the same server target) in the same dtype. HF: two engines on one loaded model; vLLM: one
    engine for both roles."""
    if cast("ModelSpec", cfg.junior).dtype != cfg.senior.dtype:
        return False
    if senior.server or junior.server:  # served: one server target serves both roles
        return senior.server == junior.server
    return same_weights(senior.path, junior.path)


def shares_senior_model(cfg: EvalConfig) -> bool:
    """_one_model of `cfg`'s local checkpoints, resolved here (for callers without a plan)."""
    if cfg.junior is None:
        return False
    return _one_model(cfg, Checkpoint(resolve_model(cfg.senior.path)), Checkpoint(resolve_model(cfg.junior.path)))
