"""Frozen configuration dataclasses with strict loading.

Every run folder's `config.json` is `asdict(EvalConfig)` plus provenance; `load_config` turns it
back into the same objects and refuses unknown or missing keys, so a typo in a config file is an
error, not a silently ignored setting.

    from tandem_eval.config import EvalConfig, Sampling, load_config
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field


class ConfigError(ValueError):
    """A configuration value or combination is invalid; the message names the fix."""


@dataclass(frozen=True)
class Sampling:
    """Decoding settings. Defaults are the paper's evaluation protocol."""

    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int = 20  # 0 or -1 disables top-k
    max_new_tokens: int = 3000  # one budget shared by senior and junior
    max_context: int = 4096  # prompt + generation never exceeds this

    def __post_init__(self):
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1 or self.max_context < 2:
            raise ConfigError("max_new_tokens and max_context must be positive")


@dataclass(frozen=True)
class ModelSpec:
    """A checkpoint by path (an HF-format directory) or a bundled name like `toy:tandem`."""

    path: str
    dtype: str = "float32"


@dataclass(frozen=True)
class EvalConfig:
    """Everything that determines the samples of one run folder."""

    senior: ModelSpec
    junior: ModelSpec | None = None
    mode: str = "solo"  # solo | handoff
    schedule: str = "solo"  # a name from tandem_eval.schedules.SCHEDULES (with ":N" args)
    benchmarks: tuple[str, ...] = ("tiny",)
    n: int = 8  # samples per problem
    ks: tuple[int, ...] = (1, 2, 4, 8)
    seed: int = 0
    limit: int | None = None  # first N problems of each benchmark
    engine: str = "hf"  # hf | vllm
    sampling: Sampling = field(default_factory=Sampling)
    batch_size: int = 32  # traces per forward pass
    tensor_parallel_size: int = 1
    num_shards: int = 1
    shard_index: int = 0
    allow_vocab_mismatch: bool = False
    allow_grader_mismatch: bool = False
    label: str | None = None  # display name in reports (default: the senior's folder name)
    chat_template: str | None = None  # Jinja template text replacing the senior tokenizer's own
    group: str | None = None  # macro group of a single local benchmark file (--group)

    def __post_init__(self):
        if self.mode == "handoff" and self.junior is None:
            raise ConfigError(
                "handoff needs a junior: pass --junior PATH (or a senior checkpoint with tandem metadata)"
            )
        if self.mode == "solo" and self.schedule not in ("solo", "junior-solo"):
            raise ConfigError(
                f"mode solo cannot use schedule {self.schedule!r}; use `tandem-eval handoff --schedule ...`"
            )
        if self.n < 1:
            raise ConfigError(f"--n must be >= 1, got {self.n}")
        bad = [k for k in self.ks if k < 1 or k > self.n]
        if bad:
            raise ConfigError(f"--k values {bad} exceed --n {self.n} (pass@k needs k <= n); lower --k or raise --n")
        if not 0 <= self.shard_index < self.num_shards:
            raise ConfigError(f"--shard-index must be in [0, {self.num_shards}), got {self.shard_index}")
        if self.engine not in ("hf", "vllm"):
            raise ConfigError(f"unknown engine {self.engine!r}; valid: hf, vllm")

    def fingerprint(self) -> str:
        """Hash of the fields that change samples (not sharding or batch size)."""
        d = to_dict(self)
        for k in ("batch_size", "num_shards", "shard_index", "tensor_parallel_size", "label"):
            d.pop(k)
        for k in ("chat_template", "group"):  # None = the default; keeps older runs' fingerprints
            if d[k] is None:
                d.pop(k)
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def to_dict(obj) -> dict:
    """JSON-ready dict (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(obj)))


def _coerce(tp, value, where: str):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if value is None else _coerce(args[0], value, where)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if origin is tuple:
        (inner, *_) = typing.get_args(tp)
        return tuple(_coerce(inner, v, where) for v in value)
    return value


def from_dict(cls, data: dict, where: str = "config"):
    """Build dataclass `cls` from `data`, refusing unknown keys (strict loading)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping for {cls.__name__}, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown} for {cls.__name__}; valid: {sorted(names)}")
    kwargs = {k: _coerce(hints[k], v, f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required key is missing
        raise ConfigError(f"{where}: {e}") from None


def load_config(path) -> EvalConfig:
    """Read a run folder's config.json (provenance keys are ignored) into an EvalConfig."""
    with open(path) as f:
        data = json.load(f)
    return from_dict(EvalConfig, data["config"], where=str(path))
