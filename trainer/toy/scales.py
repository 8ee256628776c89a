"""The toy world's settings: the scales `make toy` runs at (`full`: the emergent scenario, <= 3 h on
2 cores; `controls`: the self-paired and jargon controls; `ci`: the tiny version `make test` runs), each
scenario's problem difficulty and the names of the RL arms.

    from trainer.toy.scales import SCALES, DIFFICULTIES
    SCALES["full"].arms("emergent")   # ('grpo', 'tandem', 'grpo-g16', 'kl-reg@0.1', 'kl-reg@1')
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainer.toy.task import Difficulty


@dataclass(frozen=True)
class Scale:
    sft_steps: tuple[int | None, ...]  # base, then each of SCENARIOS (None: the recipe's)
    rl_steps: int
    prompts_per_step: int
    group_size: int
    lr: float
    seeds: tuple[int, ...]
    n_train: int
    n_test: int
    eval_limits: tuple[tuple[str, int], ...]  # (scenario, first N test problems) where fewer suffice
    n_samples: int
    max_new_tokens: int
    budgets: tuple[tuple[str, int], ...]  # (scenario, new-token budget) where it differs from max_new_tokens
    kl_coefs: tuple[tuple[str, tuple[float, ...]], ...]  # (scenario, coefficients of its kl-reg arms)
    n_heldout: int
    heldout_every: int
    heldout_n: int
    lr_sweep: tuple[float, ...]
    sweep_steps: int
    g16_scenarios: tuple[str, ...]  # scenarios with the compute-matched grpo-g16 arm
    scenarios: tuple[str, ...]  # the scenarios this scale runs (a subset of SCENARIOS)

    def arms(self, scenario: str) -> tuple[str, ...]:
        g16 = ("grpo-g16",) if scenario in self.g16_scenarios else ()
        return ("grpo", "tandem", *g16, *(kl_arm(c) for c in dict(self.kl_coefs)[scenario]))

    def budget(self, scenario: str) -> int:
        """New-token budget of the scenario's rollouts and evaluations (one budget for both)."""
        return dict(self.budgets).get(scenario, self.max_new_tokens)


def kl_arm(coef: float) -> str:
    return f"kl-reg@{coef:g}"


def kl_coef(arm: str) -> float | None:
    return float(arm.split("@", 1)[1]) if arm.startswith("kl-reg@") else None


def arm_order(arm: str) -> tuple:
    """Sort key of RL arms, the order of Scale.arms: grpo, tandem, grpo-g16, then kl-reg by coefficient
    (other names last), so a summary reads the same from `make toy` and from its run folders."""
    fixed = ("grpo", "tandem", "grpo-g16")
    coef = kl_coef(arm)
    return (0, fixed.index(arm), 0.0, arm) if arm in fixed else (1 if coef is not None else 2, 0, coef or 0.0, arm)


SCALES = {
    # `make toy` (<= 3 h on 2 cores): the emergent scenario, where the precondition is tested. The
    # self-paired (negative) and jargon (SFT-planted) controls are summarised from their committed run
    # folders (results/toy/<scenario>/); rerunning them takes SCALES["controls"] (~9 h).
    "full": Scale(
        sft_steps=(None, None, None, None),
        rl_steps=20,  # grpo's held-out pass@4 peaks by step 20 at lr 1e-4 (results/toy/pilot-v3.json, v4 pilot)
        prompts_per_step=8,
        group_size=8,
        lr=1e-4,
        seeds=(0, 1, 2, 3, 4, 5, 6, 7),  # 6 seeds gave a seed-level tandem - grpo tax@4 CI of +-3.2 (target +-3)
        n_train=4000,
        n_test=300,
        eval_limits=(("emergent", 150), ("jargon", 150)),
        n_samples=8,
        max_new_tokens=256,
        # emergent (2-step problems, DIFFICULTIES): all-terse CoTs fit 37 tokens, ones with a plain step do not
        budgets=(("emergent", 37),),
        kl_coefs=(("emergent", (0.1, 1.0)), ("self-paired", (0.1, 1.0, 10.0)), ("jargon", (1.0,))),
        n_heldout=100,
        heldout_every=10,
        heldout_n=4,
        lr_sweep=(3e-5, 1e-4, 3e-4),
        sweep_steps=20,
        g16_scenarios=("emergent",),
        scenarios=("emergent",),
    ),
    "ci": Scale(
        sft_steps=(4, 2, 2, 2),
        rl_steps=1,
        prompts_per_step=2,
        group_size=2,
        lr=5e-5,
        seeds=(0,),
        n_train=40,
        n_test=3,
        eval_limits=(("jargon", 2),),
        n_samples=4,
        max_new_tokens=48,
        budgets=(("emergent", 37),),
        kl_coefs=(("emergent", (0.1,)), ("self-paired", ()), ("jargon", ())),
        n_heldout=2,
        heldout_every=1,
        heldout_n=1,
        lr_sweep=(5e-5,),
        sweep_steps=1,
        g16_scenarios=("emergent",),
        # One scenario keeps `make test` within budget: the self-paired and jargon scenarios run the
        # emergent scenario's code with other SFT data (their aggregation is tested on constructed data).
        scenarios=("emergent",),
    ),
}
# The two controls at the settings of their committed runs (60 RL steps, held-out every 20, 256 tokens).
SCALES["controls"] = replace(
    SCALES["full"],
    rl_steps=60,
    heldout_every=20,
    lr_sweep=(),  # their lr is the committed runs' (1e-4); results/toy/lr_sweep.json stays the emergent check's
    scenarios=("self-paired", "jargon"),
)


def eval_seed(seed: int) -> int:
    """The evaluation run seed of training seed `seed` (and of the untrained arms' seed-`seed` runs)."""
    return 1000 + seed


# Scenarios whose problems differ from the default mix (2-4 steps). emergent: 2-step problems only, so
# that one new-token budget separates the notations on every problem: under 37 tokens an all-terse CoT
# always finishes (29-37 tokens on 300 test problems) and one with a plain step almost never does (plain
# second step 35-45, plain first step 43-54, all plain 50-62; trainer.toy.task, the toy tokenizer).
DIFFICULTIES = {"emergent": Difficulty(min_steps=2, max_steps=2)}
