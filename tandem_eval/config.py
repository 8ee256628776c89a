"""Frozen configuration dataclasses with strict loading.

Every run folder's `config.json` is `asdict(EvalConfig)` plus provenance; `from_dict` (the strict
loader of tandem_eval.schemas) turns it back into the same objects and refuses unknown or missing
keys, so a typo in a config file is an error, not a silently ignored setting.

    from tandem_eval.config import EvalConfig, Sampling, from_dict
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass, field

# strict loading and its error live in the schema module; config loads with them and offers them (__all__)
from .paths import served_name
from .schemas import ConfigError, from_dict


@dataclass(frozen=True)
class Sampling:
    """Decoding settings. Defaults are the paper's evaluation protocol."""

    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int = 20  # 0 or -1 disables top-k
    max_new_tokens: int = 3000  # one budget shared by senior and junior
    max_context: int = 4096  # prompt + generation never exceeds this

    def __post_init__(self):
        t, p = self.temperature, self.top_p
        if not _number(t) or not math.isfinite(t) or t < 0:
            raise ConfigError(f"--temperature must be a finite number >= 0 (0 = greedy), got {t}")
        if not _number(p) or not math.isfinite(p) or not 0 < p <= 1:
            raise ConfigError(f"--top-p must be in (0, 1] (1 disables it), got {p}")
        if not _integer(self.top_k) or self.top_k < -1:
            raise ConfigError(f"--top-k must be an integer >= 0 (0 or -1 disables it), got {self.top_k}")
        if not _integer(self.max_new_tokens) or self.max_new_tokens < 1:
            raise ConfigError(f"--max-new-tokens must be an integer >= 1, got {self.max_new_tokens}")
        if not _integer(self.max_context) or self.max_context < 2:
            raise ConfigError(f"--max-context must be an integer >= 2 (prompt + generation), got {self.max_context}")


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


DTYPES = ("float32", "bfloat16", "float16")
# The largest --batch-size: 16x the 1024 the committed GPU runs use. The engines size their caches by it
# (rows x --max-context), so --batch-size 1000000000 failed in mmap after the models loaded.
MAX_BATCH_SIZE = 16384


def default_ks(n: int) -> tuple[int, ...]:
    """pass@k values reported when --k is not given: the powers of two <= n, plus n itself."""
    return tuple(sorted({2**i for i in range(max(n, 1).bit_length()) if 2**i <= n} | {n})) if n >= 1 else (1,)


@dataclass(frozen=True)
class ModelSpec:
    """A checkpoint by path (an HF-format directory) or a bundled name like `toy:tandem`, and by
    content: the SHA-256 of its model files (tandem_eval.models.checkpoint_content; plan.validate
    fills it in, None: not hashed, as in runs from before these hashes), so weights replaced at a
    path make another experiment."""

    path: str
    dtype: str = "float32"
    content: str | None = None
    # a served model's ("URL[,URL]#NAME", --engine served) tokenizer folder (--tokenizer; None: the folder its
    # server reports). Out of the fingerprint: `content` covers the tokenizer files wherever they are copied.
    tokenizer: str | None = None

    def __post_init__(self):
        if not isinstance(self.path, str) or not self.path:
            raise ConfigError(f"a checkpoint must be a path or toy:NAME (a non-empty string), got {self.path!r}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"--dtype {self.dtype!r} is not supported; valid: {', '.join(DTYPES)}")
        if self.content is not None and not isinstance(self.content, str):
            raise ConfigError(f"a checkpoint's content hash must be a string, got {self.content!r}")
        if self.tokenizer is not None and (not isinstance(self.tokenizer, str) or not self.tokenizer):
            raise ConfigError(f"--tokenizer must be a folder (a non-empty string), got {self.tokenizer!r}")


@dataclass(frozen=True)
class Inputs:
    """What a run read, by content: the SHA-256 of every benchmark file (as the run names it) and of
    the resolved problem list before sharding (benchmark, group, id, problem, answer of each problem,
    in order), so an edited file or a changed hub dataset is another run, and every shard of one run
    provably saw the same problems. Filled in by tandem_eval.generate.plan.validate."""

    files: tuple[tuple[str, str], ...] = ()  # (benchmark file, its SHA-256); hub datasets have none
    problems: str = ""  # SHA-256 of the resolved problem list
    n_problems: int = 0


@dataclass(frozen=True)
class EvalConfig:
    """Everything that determines the samples of one run folder."""

    senior: ModelSpec
    junior: ModelSpec | None = None
    mode: str = "solo"  # solo | handoff
    schedule: str = "solo"  # a name from tandem_eval.generate.schedules.SCHEDULES (with ":N" args)
    benchmarks: tuple[str, ...] = ("tiny",)
    n: int = 8  # samples per problem
    ks: tuple[int, ...] = (1, 2, 4, 8)
    seed: int = 0
    limit: int | None = None  # first N problems of each benchmark
    # a name from tandem_eval.engines.ENGINES, checked there (engines.backend/unavailable: plan.validate,
    # before anything loads): config sits below the engines, which read it, so it holds no list of its own
    engine: str = "hf"
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
    junior_chat_template: str | None = None  # the same for the junior (used when its vocabulary differs)
    # torch CPU threads (--threads; None = the machine's cores). Out of the fingerprint: the thread
    # count changes speed, not samples, so a run resumes or is reused under any --threads.
    threads: int | None = None
    # served models (--engine served): the environment variable holding the servers' API key (--api-key-env;
    # None: VLLM_API_KEY, the variable `vllm serve` reads its own key from). A name, never the key; out of the
    # fingerprint, as where a key is kept changes no sample.
    api_key_env: str | None = None
    inputs: Inputs | None = None  # the benchmarks' content (plan.validate fills it in; None: not hashed)

    def __post_init__(self):
        _check_types(self)
        if self.mode == "handoff" and self.junior is None:
            raise ConfigError(
                "handoff needs a junior: pass --junior PATH (or a senior checkpoint with tandem metadata)"
            )
        if self.mode == "solo" and self.schedule not in ("solo", "junior-solo"):
            raise ConfigError(
                f"mode solo cannot use schedule {self.schedule!r}; use `tandem-eval handoff --schedule ...`"
            )
        if not _integer(self.n) or self.n < 1:
            raise ConfigError(f"--n must be an integer >= 1, got {self.n}")
        if not self.ks:
            raise ConfigError("--k needs at least one value")
        if small := [k for k in self.ks if k < 1]:
            raise ConfigError(f"--k values {small} are below 1 (pass@k needs 1 <= k <= n); pass k from 1 to {self.n}")
        if bad := [k for k in self.ks if k > self.n]:
            raise ConfigError(f"--k values {bad} exceed --n {self.n} (pass@k needs k <= n); lower --k or raise --n")
        if _integer(self.batch_size) and self.batch_size > MAX_BATCH_SIZE:
            raise ConfigError(
                f"--batch-size must be at most {MAX_BATCH_SIZE} (traces per forward pass, each with a cache of up to "
                f"--max-context tokens; 16x the largest the committed runs use), got {self.batch_size}"
            )
        for name, value in (
            ("--batch-size", self.batch_size),
            ("--tensor-parallel-size", self.tensor_parallel_size),
            ("--num-shards", self.num_shards),
        ):
            if not _integer(value) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value}")
        if self.threads is not None and (not _integer(self.threads) or self.threads < 1):
            raise ConfigError(f"--threads must be an integer >= 1 (omit it for every core), got {self.threads}")
        if self.limit is not None and (not _integer(self.limit) or self.limit < 1):
            raise ConfigError(f"--limit must be an integer >= 1 (omit it for every problem), got {self.limit}")
        if not self.benchmarks:
            raise ConfigError("no benchmarks given; pass --benchmark NAME (see `tandem-eval benchmarks`)")
        if not 0 <= self.shard_index < self.num_shards:
            raise ConfigError(f"--shard-index must be in [0, {self.num_shards}), got {self.shard_index}")

    def fingerprint(self) -> str:
        """Hash of the fields that change samples (not sharding or batch size)."""
        return fingerprint_of(to_dict(self))


def _check_types(cfg: EvalConfig) -> None:
    """The field types a Python caller must pass, as the CLI's typed options and the strict loader
    guarantee (a string where a tuple of benchmarks belongs would be read letter by letter); a list
    is taken as the tuple it stands for, and a checkpoint given as a string (a path or toy:NAME) as the
    ModelSpec it names (with ModelSpec's defaults: float32, not hashed)."""
    for name in ("benchmarks", "ks"):
        value = getattr(cfg, name)
        if isinstance(value, list):
            object.__setattr__(cfg, name, tuple(value))  # frozen: the normalisations, at construction
    for name in ("senior", "junior"):
        value = getattr(cfg, name)
        if isinstance(value, str | os.PathLike):
            object.__setattr__(cfg, name, ModelSpec(os.fspath(value)))
    checks = {
        "senior": (ModelSpec,),
        "junior": (ModelSpec, type(None)),
        "sampling": (Sampling,),
        "inputs": (Inputs, type(None)),
        "mode": (str,),
        "schedule": (str,),
        "engine": (str,),
        "label": (str, type(None)),
        "chat_template": (str, type(None)),
        "junior_chat_template": (str, type(None)),
        "group": (str, type(None)),
        "api_key_env": (str, type(None)),
        "allow_vocab_mismatch": (bool,),
        "allow_grader_mismatch": (bool,),
    }
    for name, types in checks.items():
        if not isinstance(getattr(cfg, name), types):
            want = " or ".join("None" if t is type(None) else t.__name__ for t in types)
            raise ConfigError(f"EvalConfig.{name} must be {want}, got {type(getattr(cfg, name)).__name__}")
    if not isinstance(cfg.benchmarks, tuple) or not all(isinstance(b, str) and b for b in cfg.benchmarks):
        raise ConfigError(f"EvalConfig.benchmarks must be a tuple of benchmark names or files, got {cfg.benchmarks!r}")
    if not isinstance(cfg.ks, tuple) or not all(_integer(k) for k in cfg.ks):
        raise ConfigError(f"--k must be integers (EvalConfig.ks a tuple of ints), got {cfg.ks!r}")
    if not _integer(cfg.seed):
        raise ConfigError(f"--seed must be an integer, got {cfg.seed!r}")
    if not _integer(cfg.shard_index):
        raise ConfigError(f"--shard-index must be an integer, got {cfg.shard_index!r}")


def solo_config(cfg: EvalConfig) -> EvalConfig:
    """The senior's solo run that a handoff run is compared with (independent of the junior)."""
    return dataclasses.replace(cfg, mode="solo", schedule="solo", junior=None, allow_vocab_mismatch=False)


def fingerprint_of(config: dict) -> str:
    """EvalConfig.fingerprint of a config dict as stored in config.json (run folders recompute it
    from the stored dict, so older runs without later-added keys still verify)."""
    d = dict(config)
    for k in ("batch_size", "num_shards", "shard_index", "tensor_parallel_size", "label", "threads", "api_key_env"):
        d.pop(k, None)
    for key in ("chat_template", "junior_chat_template", "group", "inputs"):
        if d.get(key) is None:  # absent = the default; keeps older runs' fingerprints
            d.pop(key, None)
    for role in ("senior", "junior"):  # a checkpoint not hashed by content (older runs) hashes as before
        spec = d.get(role)
        if isinstance(spec, dict):  # where a served model's tokenizer folder sits is not the experiment
            d[role] = {k: v for k, v in spec.items() if k != "tokenizer" and (k != "content" or v is not None)}
            path = spec.get("path")
            name = served_name(path) if isinstance(path, str) else None
            if spec.get("content") and name is not None:
                # nor which servers answer: a server restarted on another port (or a replica) serves the model
                # its content names (name, model folder, tokenizer), so a rerun there resumes this run
                d[role]["path"] = "#" + name
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def as_recorded(cfg: EvalConfig, recorded: dict) -> tuple[EvalConfig, list[str]]:
    """`cfg` without the content hashes a run from before them (`recorded`: its stored config) lacks,
    and what therefore cannot be checked: such a run is the same experiment when the rest agrees."""
    out, unchecked = cfg, []
    if recorded.get("inputs") is None and cfg.inputs is not None:
        out, unchecked = dataclasses.replace(out, inputs=None), ["benchmark files"]
    for role in ("senior", "junior"):
        spec, old = getattr(out, role), recorded.get(role)
        if spec is not None and spec.content is not None and isinstance(old, dict) and old.get("content") is None:
            out = dataclasses.replace(out, **{role: dataclasses.replace(spec, content=None)})
            unchecked.append(f"the {role} checkpoint")
    return out, unchecked


def checkpoint_diff(old: dict, new: dict) -> list[str]:
    """Checkpoints whose content changed between two stored configs (the same path, other files)."""
    out = []
    for role in ("senior", "junior"):
        a, b = old.get(role), new.get(role)
        if isinstance(a, dict) and isinstance(b, dict) and a.get("content") and b.get("content"):
            if a["content"] != b["content"]:
                out.append(
                    f"{role} checkpoint {b.get('path')} (content changed: sha256 {a['content'][:12]} -> "
                    f"{b['content'][:12]})"
                )
    return out


def stored_fingerprint(config: dict, where: str) -> str:
    """The fingerprint of a config dict as config.json stores it, recomputed, once the dict loads
    strictly as an EvalConfig (else a ConfigError naming `where` and the invalid field)."""
    fingerprint = fingerprint_of(config)  # plain dict work: safe before the dict is checked
    from_dict(EvalConfig, config, where=where)
    return fingerprint


def inputs_diff(old: dict | None, new: dict | None, settings_differ: bool = False) -> list[str]:
    """How two runs' recorded inputs (config.json's "inputs") differ, naming each changed file; nothing
    when either was not hashed (a run from before content hashes: its callers warn). `settings_differ`:
    the runs' --benchmark/--limit/--group differ, which explains another problem list (no hub is blamed)."""
    if old == new or not old or not new:
        return []
    a, b = dict(map(tuple, old.get("files", []))), dict(map(tuple, new.get("files", [])))
    out = [
        f"benchmark file {f} (content changed: sha256 {a[f][:12]} -> {b[f][:12]})"
        for f in sorted(a.keys() & b.keys())
        if a[f] != b[f]
    ]
    out += [f"benchmark file {f} (only in one run)" for f in sorted(a.keys() ^ b.keys())]
    if not out and not settings_differ and old.get("problems") != new.get("problems"):
        out.append(
            f"the resolved problem list ({old.get('n_problems')} vs {new.get('n_problems')} problems; a hub dataset "
            "or the benchmark registry changed)"
        )
    return out


def config_diff(old: dict, new: dict) -> str:
    """The first differences between two stored configs, changed benchmark files named first."""
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and k not in ("label", "inputs"))
    chosen = bool({"benchmarks", "limit", "group"} & set(keys))  # the problems chosen differ: named below
    parts = checkpoint_diff(old, new) + inputs_diff(old.get("inputs"), new.get("inputs"), chosen)
    if parts[:1] and parts[0].startswith(("senior checkpoint", "junior checkpoint")):
        keys = [k for k in keys if not _only_content(old.get(k), new.get(k))]
    parts += [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys]
    return ", ".join(parts[:3]) or "different fingerprint"


def _only_content(a, b) -> bool:
    """Two recorded checkpoints that differ in their content hash only (named by checkpoint_diff)."""
    strip = lambda d: {k: v for k, v in d.items() if k != "content"} if isinstance(d, dict) else d  # noqa: E731
    return strip(a) == strip(b)


def to_dict(obj) -> dict:
    """JSON-ready dict (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(obj)))


__all__ = [
    "DTYPES",
    "ConfigError",
    "EvalConfig",
    "Inputs",
    "ModelSpec",
    "Sampling",
    "as_recorded",
    "checkpoint_diff",
    "default_ks",
    "fingerprint_of",
    "from_dict",
    "inputs_diff",
    "to_dict",
]
