"""Training recipes: one YAML file per experiment, loaded strictly into a `Recipe` -- a subclass of
trl's `GRPOConfig`, so every trl/transformers training field works in a recipe and on the command
line, with the tandem fields (arm, junior, schedule, fail-closed band, KL reference, held-out
evaluation hook ...) on top.

    recipe = load_recipe("trainer/recipes/tandem.yaml", ["steps=10", "learning_rate=2e-6"])
    trainer = GRPOTrainer(args=recipe, ...)          # the recipe IS the trl config

Defaults are the paper's (group 8, 16 prompts x 2 optimizer updates per step, clip 0.2, lr 1e-6,
temperature 0.6, 3,000 new tokens, no KL, no entropy bonus, token-mean loss). Sources, later
ones winning: the YAML file (which may start from another with `base: other.yaml`), `--set
key=value` items, then trl-style `--key value` options (`tandem-train --help` lists them all).

Old recipe names are accepted and translated (`ALIASES`: lr, clip, kl_coef, max_new_tokens,
group_size, micro_batch; the `eval:` section -> `heldout_*`; the `trl:` section -> top level).
trl fields derived from the tandem "step" (`DERIVED`: max_steps, save_steps, the batch split,
bf16, use_vllm ...) are refused when set directly. Values are type-checked strictly: lists stay
lists, integers are integers, floats are finite (and positive where they must be).

Arms (`ARMS`) are labels with rules, checked (trainer/recipe_checks.py) so a recipe cannot
silently train the wrong thing: `tandem` must co-generate with a junior; `grpo`, `grpo-g16` and
`kl-reg` must not; only `kl-reg` may (and must) have a KL coefficient (`beta`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from trl import GRPOConfig

from tandem_eval.config import Sampling
from tandem_eval.engines import backend
from tandem_eval.generate.schedules import parse_schedule
from tandem_eval.schemas import ConfigError, TypeMismatch, conform

from .recipe_checks import ARMS, check_recipe


@dataclass(frozen=True)
class EvalHook:
    """Held-out evaluation of saved checkpoints through tandem_eval (normal run folders)."""

    every: int = 0  # steps between evaluations (a multiple of save_every); 0 = off
    benchmarks: tuple[str, ...] = ()  # registry names or local files of held-out problems
    modes: tuple[str, ...] = ("solo", "handoff")  # handoff also writes the solo run and the tax
    schedule: str = "paragraph"  # the handoff schedule
    n: int = 4
    ks: tuple[int, ...] = (1, 4)
    limit: int | None = None
    engine: str = "hf"
    batch_size: int = 32
    sampling: Sampling = field(default_factory=Sampling)  # the paper's evaluation decoding


def _trl(name: str, default: Any) -> Any:
    """A trl field re-declared with the paper's default (trl's help text kept)."""
    meta = dict(GRPOConfig.__dataclass_fields__[name].metadata)
    meta["help"] = f"{meta.get('help', '')} [tandem default: {default}]".strip()
    return field(default=default, metadata=meta)


def _help(text: str, default: Any = None, factory=None) -> Any:
    if factory is not None:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


_SAMPLING = Sampling()
# the recipe fields of Sampling's fields, in Sampling's order
ROLLOUT_SAMPLING = ("temperature", "top_p", "top_k", "max_completion_length", "max_context")
HELDOUT_SAMPLING = tuple(f"heldout_{f.name}" for f in dataclasses.fields(Sampling))


@dataclass
class Recipe(GRPOConfig):
    # ---- tandem fields --------------------------------------------------------------------------
    arm: str | None = _help(f"the arm: {', '.join(ARMS)} (required)")
    senior: str | None = _help("initial senior checkpoint: HF folder, toy:NAME or tiny:DIR (required)")
    junior: str | None = _help("frozen junior checkpoint; unset = the senior's initial checkpoint (self-paired)")
    train_data: str | None = _help(
        "training problems: benchmark name, local jsonl with problem/answer, or toy:SCENARIO (generated) (required)"
    )
    train_limit: int | None = _help("use only the first N training problems")
    schedule: str = _help("co-generation schedule of the rollouts (tandem: word:0.5:32; other arms: solo)", "solo")
    kl_ref: str = _help(
        "KL reference of kl-reg: junior (the frozen junior, the paper's ablation; the senior's initial checkpoint "
        "when self-paired), init (the senior's initial checkpoint), or a checkpoint path",
        "junior",
    )
    kl_clamp: float | None = _help("clamp the per-token k3 KL to [-C, C] as verl's low_var_kl (unset: no clamp)", 10.0)
    log_rollouts: bool = _help(
        "also write OUTPUT_DIR/rollouts.jsonl: each rollout's text by author, and its reward", False
    )
    steps: int | None = _help(
        "rollout batches to train (each = updates_per_step optimizer updates); unset = num_train_epochs", 200
    )
    prompts_per_step: int = _help("prompts per rollout batch (x num_generations rollouts)", 16)
    updates_per_step: int = _help("optimizer updates per rollout batch", 2)
    save_every: int = _help("steps between checkpoints (the last step is always saved)", 20)
    max_context: int = _help("prompt + completion tokens never exceed this", 4096)
    max_prompt_tokens: int | None = _help("drop training problems whose prompt is longer (paper: 1024)")
    dtype: str = _help("weights dtype of senior and junior: float32 | bfloat16 | float16", "bfloat16")
    engine: str = _help("rollout engine: hf | vllm (senior in trl's colocate engine)", "hf")
    rollout_batch: int = _help("traces per engine forward (HF) / live pool per engine", 64)
    senior_fraction_band: list[float] | None = _help(
        "fail-closed band [low, high] of the senior-token fraction; unset = P +- 0.2 for word:P"
    )
    grade_timeout: float = _help("seconds per graded answer", 5.0)
    allow_grader_mismatch: bool = _help("train although the grader versions differ from the pinned ones", False)
    junior_kv_cache_gib: float | None = _help("the junior's vLLM KV cache in GiB (unset: engine default)")
    # held-out evaluation hook (the old `eval:` section)
    heldout_every: int = _help("steps between held-out evaluations (a multiple of save_every); 0 = off", 0)
    heldout_benchmarks: list[str] = _help("held-out problems: registry names or local files", factory=list)
    heldout_modes: list[str] = _help("solo and/or handoff", factory=lambda: ["solo", "handoff"])
    heldout_schedule: str = _help("the handoff schedule (paper: paragraph:150 = at most 150 rounds)", "paragraph")
    heldout_n: int = _help("samples per problem", 4)
    heldout_ks: list[int] = _help("pass@k values", factory=lambda: [1, 4])
    heldout_limit: int | None = _help("first N held-out problems")
    heldout_engine: str = _help("hf | vllm", "hf")
    heldout_batch_size: int = _help("evaluation batch size", 32)
    heldout_temperature: float = _help("evaluation decoding", _SAMPLING.temperature)
    heldout_top_p: float = _help("evaluation decoding", _SAMPLING.top_p)
    heldout_top_k: int = _help("evaluation decoding", _SAMPLING.top_k)
    heldout_max_new_tokens: int = _help("evaluation budget", _SAMPLING.max_new_tokens)
    heldout_max_context: int = _help("evaluation context", _SAMPLING.max_context)

    # ---- trl fields with the paper's defaults ---------------------------------------------------
    per_device_train_batch_size: int = _trl("per_device_train_batch_size", 8)
    temperature: float = _trl("temperature", 0.6)
    max_completion_length: int | None = _trl("max_completion_length", 3000)
    seed: int = _trl("seed", 0)
    disable_dropout: bool = _trl("disable_dropout", True)
    remove_unused_columns: bool | None = _trl("remove_unused_columns", False)  # the reward needs `answer`
    dataloader_pin_memory: bool = _trl("dataloader_pin_memory", False)  # the "data" are prompt strings
    gradient_checkpointing: bool = _trl("gradient_checkpointing", False)
    report_to: None | str | list[str] = _trl("report_to", "trackio")
    project: str = _trl("project", "tandem-train")  # the trackio / wandb project

    def __post_init__(self):
        check_recipe(self)
        for key, value in trl_batch_fields(self, int(os.environ.get("WORLD_SIZE", "1"))).items():
            setattr(self, key, value)
        if self.bf16:
            from transformers.utils import is_torch_bf16_gpu_available

            # bfloat16 weights on a machine without a bf16 accelerator: transformers wants use_cpu
            # for bf16 mixed precision on CPU (it trains on the CPU either way).
            self.use_cpu = self.use_cpu or not is_torch_bf16_gpu_available()
        try:
            super().__post_init__()
        except ConfigError:
            raise
        except ValueError as e:  # trl/transformers' own validation: keep it one line
            raise ConfigError(" ".join(str(e).split())) from None

    # ---- derived --------------------------------------------------------------------------
    @property
    def rollout_sampling(self) -> Sampling:
        """The rollouts' decoding (trl's names: max_completion_length is the new-token budget)."""
        return Sampling(*(getattr(self, name) for name in ROLLOUT_SAMPLING))

    @property
    def eval(self) -> EvalHook:
        return EvalHook(
            every=self.heldout_every,
            benchmarks=tuple(self.heldout_benchmarks),
            modes=tuple(self.heldout_modes),
            schedule=self.heldout_schedule,
            n=self.heldout_n,
            ks=tuple(self.heldout_ks),
            limit=self.heldout_limit,
            engine=self.heldout_engine,
            batch_size=self.heldout_batch_size,
            sampling=self.heldout_sampling,
        )

    @property
    def heldout_sampling(self) -> Sampling:
        """The held-out evaluation's decoding (heldout_temperature, ...)."""
        return Sampling(*(getattr(self, name) for name in HELDOUT_SAMPLING))

    @property
    def uses_junior_model(self) -> bool:
        """The junior is loaded as a rollout engine (tandem)."""
        return ARMS[self.arm].junior_rollouts

    def fraction_band(self) -> tuple[float, float] | None:
        """Senior-token fraction a tandem rollout batch must fall in (fail closed), or None."""
        if self.senior_fraction_band is not None:
            return tuple(self.senior_fraction_band)  # type: ignore[return-value]
        name, args = parse_schedule(self.schedule)
        if name == "word":
            p = args[0] if args else 0.5
            return (max(0.0, p - 0.2), min(1.0, p + 0.2))  # the paper's smoke test: [0.3, 0.7] at p = 0.5
        return None

    def replace(self, **changes) -> Recipe:
        """A copy with `changes`: the tandem rules re-checked and the derived trl fields recomputed.

        A shallow copy, not `dataclasses.replace`: re-running TrainingArguments.__post_init__ sets
        up the devices again, which resets accelerate's state under a live trainer."""
        import copy

        unknown = set(changes) - set(self.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown recipe field(s): {sorted(unknown)}")
        new = copy.copy(self)
        for key, value in changes.items():
            setattr(new, key, value)
        check_recipe(new)
        for key, value in trl_batch_fields(new, int(os.environ.get("WORLD_SIZE", "1"))).items():
            if key != "generation_batch_size":  # trl's post-init filled it in; keep it consistent
                setattr(new, key, value)
        new.generation_batch_size = new.per_device_train_batch_size * new.world_size * new.steps_per_generation
        return new


TANDEM_FIELDS = tuple(f.name for f in dataclasses.fields(Recipe) if f.name not in GRPOConfig.__dataclass_fields__)

# Old recipe names -> trl's.
ALIASES = {
    "lr": "learning_rate",
    "clip": "epsilon",
    "kl_coef": "beta",
    "max_new_tokens": "max_completion_length",
    "group_size": "num_generations",
    "micro_batch": "per_device_train_batch_size",
}

# trl fields computed from tandem fields (trl_batch_fields); setting them directly is refused.
DERIVED = {
    "max_steps": "steps (trl's max_steps = steps x updates_per_step)",
    "save_steps": "save_every",
    "save_strategy": "save_every",
    "logging_steps": "nothing (one log record per step)",
    "gradient_accumulation_steps": "per_device_train_batch_size and prompts_per_step",
    "steps_per_generation": "updates_per_step",
    "generation_batch_size": "prompts_per_step",
    "bf16": "dtype",
    "fp16": "dtype",
    "use_vllm": "engine",
    "vllm_max_model_length": "max_context",
}

# Floats that must be > 0 (all floats must be finite).
_POSITIVE = {
    "learning_rate",
    "epsilon",
    "grade_timeout",
    "num_train_epochs",
    "kl_clamp",
    "junior_kv_cache_gib",
    "vllm_gpu_memory_utilization",
}
_NON_NEGATIVE = {"beta", "temperature", "heldout_temperature", "weight_decay", "warmup_ratio"}


def trl_batch_fields(recipe: Recipe, num_processes: int) -> dict[str, Any]:
    """The trl fields a recipe's "steps" determine, on `num_processes` devices.

    One "step" = one rollout batch of prompts_per_step x num_generations traces, split into
    updates_per_step optimizer updates. trl counts optimizer updates, so max_steps, save_steps and
    logging_steps are multiplied by updates_per_step, and steps_per_generation makes trl generate
    once per `updates_per_step` updates (the second update reuses the rollouts; its importance
    ratios and PPO clip are against the log-probs computed before the first).
    """
    upd, micro = recipe.updates_per_step, recipe.per_device_train_batch_size
    per_update = recipe.prompts_per_step * recipe.num_generations // upd
    per_device = per_update // num_processes
    if per_update % num_processes or per_device % micro:
        raise ConfigError(
            f"{per_update} rollouts per update do not split into {num_processes} device(s) x "
            f"per_device_train_batch_size {micro}; change it or prompts_per_step"
        )
    accumulation = per_device // micro
    kw: dict[str, Any] = dict(
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation * upd,
        generation_batch_size=None,
        max_steps=recipe.steps * upd if recipe.steps else -1,  # -1: trl trains num_train_epochs
        save_strategy="steps",
        save_steps=recipe.save_every * upd,
        logging_steps=upd,  # one log record per step
        bf16=recipe.dtype == "bfloat16",
        fp16=recipe.dtype == "float16",
        use_vllm=backend(recipe.engine).trl_colocate,  # the senior rolls out in trl's colocate engine
    )
    if kw["use_vllm"]:
        kw.update(vllm_mode="colocate", vllm_max_model_length=recipe.max_context)
    return kw


def trl_fields(recipe: Recipe) -> dict[str, Any]:
    """The recipe's values of every trl GRPOConfig field."""
    return {name: getattr(recipe, name) for name in GRPOConfig.__dataclass_fields__}


# ---- loading --------------------------------------------------------------------------------


def load_recipe(path: str | Path, overrides: list[str] | tuple[str, ...] = (), options: dict | None = None) -> Recipe:
    """Read a recipe file (following `base:`), apply `key=value` overrides and already-typed
    command-line `options`, validate."""
    data = _read_with_base(Path(path), seen=())
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        value = _yaml_value(raw, f"--set {item}")
        data.update(_check_types(_migrate({key.strip(): value}, "--set"), "--set"))
    if options:
        data.update(_check_types(_migrate(dict(options), "command line"), "command line"))
    return _build(data, where=str(path))


def recipe_from_dict(data: dict, where: str = "recipe") -> Recipe:
    return _build(_check_types(_migrate(dict(data), where), where), where)


def _build(data: dict, where: str) -> Recipe:
    try:
        recipe = Recipe(**data)
    except TypeError as e:  # should not happen after _check_types, but stay one line
        raise ConfigError(f"{where}: {e}") from None
    recipe._given = data
    return recipe


def recipe_to_dict(recipe: Recipe) -> dict:
    """A YAML-safe recipe that `load_recipe` reads back: the tandem fields and the trl fields
    the recipe set (not the ~200 trl defaults, not the derived ones)."""
    keys = list(TANDEM_FIELDS) + [k for k in getattr(recipe, "_given", {}) if k not in TANDEM_FIELDS]
    return {k: _plain(getattr(recipe, k)) for k in keys if k not in DERIVED}


def _plain(value):
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _yaml_value(raw: str, where: str):
    if not raw.strip():
        return None
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ConfigError(f"{where}: not a YAML value (quote strings with special characters)") from None


def _read_with_base(path: Path, seen: tuple[Path, ...]) -> dict:
    if not path.is_file():
        raise ConfigError(f"recipe not found: {path}")
    if path.resolve() in seen:
        raise ConfigError(f"recipe base cycle: {' -> '.join(map(str, seen + (path,)))}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{line}: invalid YAML ({getattr(e, 'problem', None) or 'syntax error'})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe is a mapping of key: value")
    base = data.pop("base", None)
    data = _check_types(_migrate(data, str(path)), str(path))
    if base is None:
        return data
    return {**_read_with_base(path.parent / str(base), seen + (path.resolve(),)), **data}


def _migrate(data: dict, where: str) -> dict:
    """Old names -> new: ALIASES, `eval:`/`eval.X` -> heldout_X, `trl:`/`trl.X` -> X."""
    out: dict = {}

    def put(key, value):
        if key in out:
            raise ConfigError(f"{where}: {key} is given twice (under two names)")
        out[key] = value

    for key, value in data.items():
        key = str(key)
        head, _, rest = key.partition(".")
        if head == "trl":
            section = {rest: value} if rest else value
            if not isinstance(section, dict):
                raise ConfigError(f"{where}: trl: is a section of trl fields")
            for k, v in section.items():
                put(str(k), v)
        elif head == "eval":
            section = {rest: value} if rest else value
            if not isinstance(section, dict):
                raise ConfigError(f"{where}: eval: is a section (every, benchmarks, ...)")
            for k, v in section.items():
                k = str(k)
                if k.startswith("sampling"):
                    sub = {k.partition(".")[2]: v} if "." in k else v
                    if not isinstance(sub, dict):
                        raise ConfigError(f"{where}: eval.sampling is a section")
                    for sk, sv in sub.items():
                        put(f"heldout_{sk}", sv)  # temperature, top_p, top_k, max_new_tokens, max_context
                else:
                    put(f"heldout_{k}", v)
        else:
            put(ALIASES.get(key, key), value)
    return out


def _check_types(data: dict, where: str) -> dict:
    """Values of the right type (strict), unknown keys refused; returns the (normalised) data."""
    hints = _hints()
    out = {}
    for key, value in data.items():
        if key not in hints:
            raise ConfigError(f"{where}: unknown key {key!r} (tandem-train --help lists the fields)")
        if key in DERIVED:
            raise ConfigError(f"{where}: {key} is derived from the recipe; set {DERIVED[key]} instead")
        try:
            out[key] = conform(value, hints[key])
        except TypeMismatch as e:
            raise ConfigError(f"{where}: {key}: expected {e}, got {value!r}") from None
        v = out[key]
        if isinstance(v, float):
            if not math.isfinite(v):
                raise ConfigError(f"{where}: {key} must be a finite number, got {value!r}")
            if key in _POSITIVE and v <= 0:
                raise ConfigError(f"{where}: {key} must be > 0, got {value!r}")
            if key in _NON_NEGATIVE and v < 0:
                raise ConfigError(f"{where}: {key} must be >= 0, got {value!r}")
    return out


_HINTS: dict = {}


def _hints() -> dict:
    if not _HINTS:
        _HINTS.update(
            {
                f.name: typing.get_type_hints(Recipe)[f.name]
                for f in dataclasses.fields(Recipe)
                if f.init and not f.name.startswith("_")
            }
        )
    return _HINTS
