"""The rules a training recipe must satisfy beyond its field types: the arms (labels with rules, so
a recipe cannot silently train the wrong thing), schedules, engines, counts, the held-out
evaluation's settings. trainer.recipe.Recipe runs `check_recipe` when it is built.

    from trainer.recipe_checks import ARMS, check_recipe
    check_recipe(recipe)          # raises ConfigError naming the field and the fix
"""

from __future__ import annotations

from dataclasses import dataclass

from tandem_eval.config import DTYPES
from tandem_eval.engines import ENGINES
from tandem_eval.generate.schedules import needs_junior, parse_schedule
from tandem_eval.schemas import ConfigError


@dataclass(frozen=True)
class Arm:
    junior_rollouts: bool  # rollouts are co-generated with the junior
    kl: bool  # a KL penalty toward a reference (kl_ref) is part of the arm
    doc: str


ARMS: dict[str, Arm] = {
    "grpo": Arm(False, False, "plain GRPO on solo rollouts (the control)"),
    "tandem": Arm(True, False, "GRPO on senior/junior co-generated rollouts, loss on senior tokens only"),
    "kl-reg": Arm(False, True, "plain GRPO + k3 KL penalty toward the senior's initial checkpoint (kl_ref)"),
    "grpo-g16": Arm(False, False, "plain GRPO with 16 rollouts per prompt (matches tandem compute)"),
}


def check_recipe(r) -> None:
    """Refuse (ConfigError) a recipe `r` that breaks a rule; its derived settings are checked as well."""
    _check_arm(r)
    _check_counts(r)
    _check_heldout(r)
    r.rollout_sampling  # noqa: B018 -- validates temperature, top_p, budgets
    r.eval  # noqa: B018


def _check_arm(r) -> None:
    """Required fields, the arm's rules (junior rollouts, KL), schedules, engines, dtype."""
    for name in ("arm", "senior", "train_data", "output_dir"):
        if not getattr(r, name):
            raise ConfigError(f"the recipe needs {name}")
    if r.arm not in ARMS:
        raise ConfigError(f"unknown arm {r.arm!r}; valid: {', '.join(ARMS)}")
    arm = ARMS[r.arm]
    for spec in (r.schedule, r.heldout_schedule):
        try:
            name, args = parse_schedule(spec)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if name == "paragraph" and args and args[0] < 1:
            raise ConfigError(f"schedule {spec!r}: paragraph:R needs R >= 1 rounds")
    if arm.junior_rollouts and not needs_junior(r.schedule):
        raise ConfigError(
            f"arm {r.arm!r} co-generates with the junior; schedule {r.schedule!r} never "
            "hands off (use e.g. word:0.5:32)"
        )
    if not arm.junior_rollouts and r.schedule != "solo":
        raise ConfigError(f"arm {r.arm!r} uses solo rollouts; set schedule: solo (or arm: tandem)")
    if arm.kl and r.beta <= 0:
        raise ConfigError("arm 'kl-reg' needs beta > 0 (kl_coef: the coefficient of the KL toward kl_ref)")
    if not arm.kl and r.beta != 0:
        raise ConfigError(f"arm {r.arm!r} has no KL penalty; use arm: kl-reg for beta={r.beta}")
    if not r.kl_ref:
        raise ConfigError("kl_ref must be init, junior or a checkpoint path")
    if r.kl_clamp is not None and not r.kl_clamp > 0:
        raise ConfigError(f"kl_clamp must be > 0 (or unset), got {r.kl_clamp}")
    if r.engine not in ENGINES or r.heldout_engine not in ENGINES:
        raise ConfigError(f"unknown engine {r.engine!r}/{r.heldout_engine!r}; valid: {', '.join(ENGINES)}")
    if ENGINES[r.engine].remote or ENGINES[r.heldout_engine].remote:  # the trained senior lives in this process
        raise ConfigError(f"engine {r.engine!r}/{r.heldout_engine!r} serves a remote model; training needs a local one")
    if r.dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {r.dtype!r}; valid: {', '.join(DTYPES)}")


def _check_counts(r) -> None:
    """Counts that must be positive, the group size, and rollouts that split into equal updates."""
    positive = (
        "num_generations",
        "prompts_per_step",
        "updates_per_step",
        "per_device_train_batch_size",
        "save_every",
        "max_completion_length",
        "rollout_batch",
        "heldout_n",
        "heldout_batch_size",
    )
    optional_positive = ("steps", "train_limit", "max_prompt_tokens", "heldout_limit")
    for name in positive + optional_positive:
        value = getattr(r, name)
        if (value is not None or name in positive) and (value is None or value < 1):
            raise ConfigError(f"{name} must be >= 1, got {value}")
    if r.heldout_every < 0:
        raise ConfigError(f"heldout_every must be >= 0, got {r.heldout_every}")
    if r.num_generations < 2:
        raise ConfigError("num_generations (group_size) must be >= 2 (GRPO normalises rewards within a group)")
    if (r.prompts_per_step * r.num_generations) % r.updates_per_step:
        raise ConfigError(
            f"prompts_per_step x num_generations = {r.prompts_per_step * r.num_generations} rollouts "
            f"do not split into {r.updates_per_step} equal updates"
        )


def _check_heldout(r) -> None:
    """The fail-closed band and the held-out evaluation's settings, checked now rather than at its
    first run after training steps."""
    band = r.senior_fraction_band
    if band is not None and (len(band) != 2 or not 0 <= band[0] < band[1] <= 1):
        raise ConfigError(f"senior_fraction_band must be [low, high] within [0, 1], got {band}")
    if r.heldout_every and r.heldout_every % r.save_every:
        raise ConfigError(
            f"heldout_every ({r.heldout_every}) must be a multiple of save_every ({r.save_every}): "
            "evaluation reads saved checkpoints"
        )
    if r.heldout_every and not r.heldout_benchmarks:
        raise ConfigError("heldout_every > 0 needs heldout_benchmarks (held-out problems)")
    if not set(r.heldout_modes) <= {"solo", "handoff"} or not r.heldout_modes:
        raise ConfigError(f"heldout_modes must be solo and/or handoff, got {r.heldout_modes}")
    ks = r.heldout_ks
    if not ks or not all(isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= r.heldout_n for k in ks):
        raise ConfigError(f"heldout_ks must be integers in [1, heldout_n={r.heldout_n}], got {ks}")
    try:
        r.heldout_sampling  # noqa: B018 -- builds (so validates) the held-out decoding
    except ConfigError as e:  # Sampling names the CLI option: say which recipe field it was
        raise ConfigError(f"held-out decoding (heldout_*): {e}") from None
