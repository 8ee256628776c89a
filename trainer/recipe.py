"""Training recipes: one YAML file per experiment, loaded strictly into a frozen `Recipe`.

A recipe names the arm, the checkpoints, the data and the GRPO settings. Defaults are the paper's
(group 8, 16 prompts x 2 optimizer updates per step, clip 0.2, lr 1e-6, temperature 0.6, 3,000
new tokens, no KL, no entropy bonus). A recipe may start from another with `base: other.yaml`
(relative to the file); `--set key=value` overrides any field, dotted for nested ones
(`eval.every=10`, `trl.warmup_steps=5`). Unknown keys are errors.

    recipe = load_recipe("trainer/recipes/tandem.yaml", ["steps=10", "lr=2e-6"])
    args = grpo_config_kwargs(recipe, num_processes=1)   # -> trl.GRPOConfig(**args)

Arms (`ARMS`) are labels with rules, checked here so a recipe cannot silently train the wrong
thing: `tandem` must co-generate with a junior; `grpo`, `grpo-g16` and `kl-reg` must not;
only `kl-reg` may (and must) have a KL coefficient.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tandem_eval.config import ConfigError, Sampling, from_dict, to_dict
from tandem_eval.schedules import needs_junior, parse_schedule


@dataclass(frozen=True)
class Arm:
    junior_rollouts: bool  # rollouts are co-generated with the junior
    kl: bool  # a KL penalty toward the junior is part of the arm
    doc: str


ARMS: dict[str, Arm] = {
    "grpo": Arm(False, False, "plain GRPO on solo rollouts (the control)"),
    "tandem": Arm(True, False, "GRPO on senior/junior co-generated rollouts, loss on senior tokens only"),
    "kl-reg": Arm(False, True, "plain GRPO + k3 KL penalty toward the frozen junior"),
    "grpo-g16": Arm(False, False, "plain GRPO with 16 rollouts per prompt (matches tandem compute)"),
}


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


@dataclass(frozen=True)
class Recipe:
    arm: str
    senior: str  # initial senior checkpoint (HF folder, or toy:NAME / tiny:DIR)
    train_data: str  # benchmark name or local file with problem/answer columns
    output_dir: str
    junior: str | None = None  # frozen junior; None = the senior's initial checkpoint (self-paired)
    schedule: str = "solo"  # any tandem_eval schedule; the paper's tandem arm uses word:0.5:32
    group_size: int = 8  # rollouts per prompt
    prompts_per_step: int = 16
    updates_per_step: int = 2  # optimizer updates per rollout batch ("step")
    micro_batch: int = 8  # rollouts per forward/backward on one device
    steps: int = 200
    lr: float = 1e-6
    clip: float = 0.2
    kl_coef: float = 0.0  # k3 KL toward the junior (kl-reg arm only)
    temperature: float = 0.6
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 3000
    max_context: int = 4096
    dtype: str = "bfloat16"
    engine: str = "hf"  # rollout engine: hf | vllm (senior in trl's colocate engine)
    rollout_batch: int = 64  # traces per engine forward (HF) / live pool per engine
    seed: int = 0
    save_every: int = 20  # steps between checkpoints (the last step is always saved)
    train_limit: int | None = None  # first N training problems
    senior_fraction_band: tuple[float, ...] | None = None  # fail-closed band; None = P +- 0.2 for word:P
    grade_timeout: float = 5.0
    allow_grader_mismatch: bool = False
    gradient_checkpointing: bool = False
    report_to: tuple[str, ...] = ("none",)
    vllm_gpu_memory_utilization: float = 0.3  # the senior's colocate engine
    junior_kv_cache_gib: float | None = None  # the junior's vLLM KV cache (None: engine default)
    eval: EvalHook = field(default_factory=EvalHook)
    trl: dict[str, Any] = field(default_factory=dict)  # extra trl.GRPOConfig keywords (recorded)

    def __post_init__(self):
        if self.arm not in ARMS:
            raise ConfigError(f"unknown arm {self.arm!r}; valid: {', '.join(ARMS)}")
        arm = ARMS[self.arm]
        try:
            parse_schedule(self.schedule)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if arm.junior_rollouts and not needs_junior(self.schedule):
            raise ConfigError(
                f"arm {self.arm!r} co-generates with the junior; schedule {self.schedule!r} never "
                "hands off (use e.g. word:0.5:32)"
            )
        if not arm.junior_rollouts and self.schedule != "solo":
            raise ConfigError(f"arm {self.arm!r} uses solo rollouts; set schedule: solo (or arm: tandem)")
        if arm.kl and self.kl_coef <= 0:
            raise ConfigError("arm 'kl-reg' needs kl_coef > 0 (the coefficient of the KL toward the junior)")
        if not arm.kl and self.kl_coef != 0:
            raise ConfigError(f"arm {self.arm!r} has no KL penalty; use arm: kl-reg for kl_coef={self.kl_coef}")
        if self.engine not in ("hf", "vllm"):
            raise ConfigError(f"unknown engine {self.engine!r}; valid: hf, vllm")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"unknown dtype {self.dtype!r}; valid: float32, bfloat16, float16")
        for name in (
            "group_size",
            "prompts_per_step",
            "updates_per_step",
            "micro_batch",
            "steps",
            "save_every",
            "max_new_tokens",
            "rollout_batch",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError("group_size must be >= 2 (GRPO normalises rewards within a group)")
        if (self.prompts_per_step * self.group_size) % self.updates_per_step:
            raise ConfigError(
                f"prompts_per_step x group_size = {self.prompts_per_step * self.group_size} rollouts "
                f"do not split into {self.updates_per_step} equal updates"
            )
        band = self.senior_fraction_band
        if band is not None and (len(band) != 2 or not 0 <= band[0] < band[1] <= 1):
            raise ConfigError(f"senior_fraction_band must be [low, high] within [0, 1], got {band}")
        if self.eval.every and self.eval.every % self.save_every:
            raise ConfigError(
                f"eval.every ({self.eval.every}) must be a multiple of save_every ({self.save_every}): "
                "evaluation reads saved checkpoints"
            )
        if self.eval.every and not self.eval.benchmarks:
            raise ConfigError("eval.every > 0 needs eval.benchmarks (held-out problems)")
        owned = set(_OWNED_TRL_KEYS) & set(self.trl)
        if owned:
            raise ConfigError(f"trl keys {sorted(owned)} are set by recipe fields; set those fields instead")
        Sampling(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens,
            max_context=self.max_context,
        )  # validates

    # ---- derived --------------------------------------------------------------------------
    @property
    def rollout_sampling(self) -> Sampling:
        return Sampling(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens,
            max_context=self.max_context,
        )

    @property
    def uses_junior_model(self) -> bool:
        """The junior is loaded: as a rollout engine (tandem) or as the KL reference (kl-reg)."""
        return ARMS[self.arm].junior_rollouts or ARMS[self.arm].kl

    def fraction_band(self) -> tuple[float, float] | None:
        """Senior-token fraction a tandem rollout batch must fall in (fail closed), or None."""
        if self.senior_fraction_band is not None:
            return tuple(self.senior_fraction_band)  # type: ignore[return-value]
        name, args = parse_schedule(self.schedule)
        if name == "word":
            p = args[0] if args else 0.5
            return (max(0.0, p - 0.2), min(1.0, p + 0.2))  # the paper's smoke test: [0.3, 0.7] at p = 0.5
        return None


# GRPOConfig keywords derived from recipe fields (the `trl:` section may not override them).
_OWNED_TRL_KEYS = (
    "output_dir",
    "learning_rate",
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "max_steps",
    "epsilon",
    "beta",
    "temperature",
    "top_p",
    "top_k",
    "max_completion_length",
    "seed",
    "save_steps",
    "logging_steps",
    "report_to",
    "entropy_coef",
    "bf16",
    "use_vllm",
    "vllm_mode",
)


def grpo_config_kwargs(recipe: Recipe, num_processes: int) -> dict[str, Any]:
    """trl.GRPOConfig keywords for a recipe on `num_processes` devices.

    One "step" = one rollout batch of prompts_per_step x group_size traces, split into
    updates_per_step optimizer updates. trl counts optimizer updates, so max_steps, save_steps and
    logging_steps are multiplied by updates_per_step, and steps_per_generation makes trl generate
    once per `updates_per_step` updates (the second update reuses the rollouts; its importance
    ratios and PPO clip are against the log-probs computed before the first).
    """
    per_update = recipe.prompts_per_step * recipe.group_size // recipe.updates_per_step
    per_device = per_update // num_processes
    if per_update % num_processes or per_device % recipe.micro_batch:
        raise ConfigError(
            f"{per_update} rollouts per update do not split into {num_processes} device(s) x "
            f"micro_batch {recipe.micro_batch}; change micro_batch or prompts_per_step"
        )
    accumulation = per_device // recipe.micro_batch
    kw: dict[str, Any] = dict(
        output_dir=recipe.output_dir,
        learning_rate=recipe.lr,
        num_generations=recipe.group_size,
        per_device_train_batch_size=recipe.micro_batch,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation * recipe.updates_per_step,
        max_steps=recipe.steps * recipe.updates_per_step,
        epsilon=recipe.clip,
        beta=recipe.kl_coef,
        entropy_coef=0.0,
        temperature=recipe.temperature,
        top_p=recipe.top_p,
        top_k=recipe.top_k,
        max_completion_length=recipe.max_new_tokens,
        seed=recipe.seed,
        save_strategy="steps",
        save_steps=recipe.save_every * recipe.updates_per_step,
        logging_steps=recipe.updates_per_step,  # one log record per step
        report_to=list(recipe.report_to),
        bf16=recipe.dtype == "bfloat16",
        gradient_checkpointing=recipe.gradient_checkpointing,
        # The paper's loss: token-mean over the senior tokens of the whole batch ("dapo" in trl:
        # sum of masked per-token losses / number of loss tokens in the generation batch).
        loss_type="dapo",
        scale_rewards="group",  # advantage (R - mean) / (std + eps) within each group
        mask_truncated_completions=False,
        disable_dropout=True,
        remove_unused_columns=False,  # the reward function needs the `answer` column
        shuffle_dataset=True,
        use_vllm=recipe.engine == "vllm",
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=recipe.vllm_gpu_memory_utilization,
        vllm_max_model_length=recipe.max_context,
        save_only_model=False,  # optimizer and RNG states too: needed to resume
        dataloader_pin_memory=False,  # the "data" are prompt strings
    )
    if recipe.engine != "vllm":
        kw.pop("vllm_mode"), kw.pop("vllm_gpu_memory_utilization"), kw.pop("vllm_max_model_length")
    if recipe.dtype == "float16":
        kw["fp16"] = True
    return {**kw, **recipe.trl}


# ---- loading --------------------------------------------------------------------------------


def load_recipe(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Recipe:
    """Read a recipe file (following `base:`), apply `key=value` overrides, validate."""
    data = _read_with_base(Path(path), seen=())
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        _set_dotted(data, key.strip(), yaml.safe_load(raw) if raw.strip() else None)
    return recipe_from_dict(data, where=str(path))


def recipe_from_dict(data: dict, where: str = "recipe") -> Recipe:
    return from_dict(Recipe, _coerce_numbers(Recipe, data, where), where=where)


def recipe_to_dict(recipe: Recipe) -> dict:
    return to_dict(recipe)


def _read_with_base(path: Path, seen: tuple[Path, ...]) -> dict:
    if not path.is_file():
        raise ConfigError(f"recipe not found: {path}")
    if path.resolve() in seen:
        raise ConfigError(f"recipe base cycle: {' -> '.join(map(str, seen + (path,)))}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe is a mapping of key: value")
    base = data.pop("base", None)
    if base is None:
        return data
    merged = _read_with_base(path.parent / base, seen + (path.resolve(),))
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _set_dotted(data: dict, key: str, value) -> None:
    *parents, last = key.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: {p!r} is not a section")
    node[last] = value


def _coerce_numbers(cls, data: dict, where: str) -> dict:
    """YAML reads `1e-6` as a string (YAML 1.1 wants `1.0e-6`): convert numeric fields."""
    if not isinstance(data, dict):
        return data
    hints = typing.get_type_hints(cls)
    out = dict(data)
    for f in dataclasses.fields(cls):
        if f.name not in out:
            continue
        tp, value = hints[f.name], out[f.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
        base = args[0]
        if dataclasses.is_dataclass(base):
            out[f.name] = _coerce_numbers(base, value, f"{where}.{f.name}")
        elif base in (int, float) and isinstance(value, str):
            try:
                out[f.name] = base(float(value)) if base is int and float(value).is_integer() else base(value)
            except ValueError:
                raise ConfigError(f"{where}.{f.name}: expected a number, got {value!r}") from None
        elif base in (int, float) and isinstance(value, bool):
            raise ConfigError(f"{where}.{f.name}: expected a number, got {value!r}")
        elif base is float and isinstance(value, int):
            out[f.name] = float(value)
    return out
