"""The toy world's settings: the scales `make toy` runs at (`full`: the dialects scenario with its gates,
<= 3 h on 2 cores; `emergent`: v3's emergent scenario as committed; `controls`: the self-paired and jargon
controls; `ci`: the tiny version `make test` runs), each scenario's problem difficulty and the names of
the RL arms.

    from trainer.toy.scales import SCALES, DIFFICULTIES
    SCALES["full"].arms("dialects")      # ('grpo', 'tandem', 'grpo-g16', 'kl-init@0.1', 'kl-junior@0.1')
    SCALES["emergent"].arms("emergent")  # ('grpo', 'tandem', 'grpo-g16', 'kl-reg@0.1', 'kl-reg@1')
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainer.toy.task import Difficulty

# v6's G1 pilot seeds, pre-registered (in gates.py, before any v6 run): never a full-run seed (0..7), nor
# v5's spent 100-101. Here, with the scale that runs them, so that gates reads the scales and not the reverse.
PILOT_SEEDS = (102, 103)
V5_PILOT_SEEDS = (100, 101)


@dataclass(frozen=True)
class Scale:
    sft_steps: tuple[tuple[str, int], ...]  # (checkpoint, SFT steps) overriding its recipe's: "base", a
    # scenario's initial senior ("emergent"), "dialects/junior", "dialects/senior"
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
    kl_coefs: tuple[tuple[str, tuple[float, ...]], ...]  # (scenario, coefficients of its kl arms)
    n_heldout: int
    heldout_every: int
    heldout_n: int
    lr_sweep: tuple[float, ...]
    sweep_steps: int
    g16_scenarios: tuple[str, ...]  # scenarios with the compute-matched grpo-g16 arm
    scenarios: tuple[str, ...]  # the scenarios this scale runs (a subset of SCENARIOS)
    # (scenario, KL references) where kl arms are named by reference, kl-init@C / kl-junior@C; elsewhere
    # kl-reg@C regularises toward the initial senior (the committed v3 runs)
    kl_refs: tuple[tuple[str, tuple[str, ...]], ...] = ()
    arm_seeds: tuple[tuple[str, int], ...] = ()  # (arm kind, how many of `seeds` it trains); others: all
    pilot_seeds: tuple[int, ...] = ()  # the G1 pilot's seeds (gated scenarios; never one of `seeds`)
    pilot_steps: int = 0  # the pilot's horizon; a gated scenario's rl_steps is GRPO's plateau in it (G1)
    gate_problems: int = 200  # G0's held-out problems
    recipe_sets: tuple[str, ...] = ()  # trainer --set items after the recipe's (the v2 controls' T 1.0, linear lr)
    keep: str = "best"  # the checkpoint an arm keeps: "best" held-out solo pass@4 (the paper), or "final"
    untrained_seeds: tuple[int, ...] | None = None  # seeds init and the junior are evaluated on (None: all)
    enforce_gates: bool = True  # a failed gate stops the run (the CI scale records it and goes on)

    def arms(self, scenario: str) -> tuple[str, ...]:
        g16 = ("grpo-g16",) if scenario in self.g16_scenarios else ()
        coefs = dict(self.kl_coefs).get(scenario, ())
        refs = dict(self.kl_refs).get(scenario)
        kl = [kl_arm(c, r) for r in refs for c in coefs] if refs else [kl_arm(c) for c in coefs]
        return ("grpo", "tandem", *g16, *kl)

    def seeds_of(self, arm: str) -> tuple[int, ...]:
        """The training seeds of an arm: the first `arm_seeds` of `seeds` for its kind, else all."""
        n = dict(self.arm_seeds).get(arm.split("@")[0])
        return self.seeds if n is None else self.seeds[:n]

    def sft(self, checkpoint: str) -> int | None:
        """SFT steps of an initial checkpoint at this scale (None: its recipe's)."""
        return dict(self.sft_steps).get(checkpoint)

    def budget(self, scenario: str) -> int:
        """New-token budget of the scenario's rollouts and evaluations (one budget for both)."""
        return dict(self.budgets).get(scenario, self.max_new_tokens)


KL_KINDS = ("kl-reg", "kl-init", "kl-junior")  # kl-reg: v3's name, toward the initial senior as kl-init
KL_REFS = {"kl-reg": "init", "kl-init": "init", "kl-junior": "junior"}


# One table for arm names across versions: v3's kl-reg@C is v4's kl-init@C (both regularise toward the
# initial senior, KL_REFS). Derived, not typed: every kind whose reference has a v4 name `kl-<ref>` of its own.
KIND_ALIASES = {k: f"kl-{KL_REFS[k]}" for k in KL_KINDS if k != f"kl-{KL_REFS[k]}"}  # {"kl-reg": "kl-init"}


def canonical_arm(arm: str) -> str:
    """An arm's current (v4) name: kl-reg@0.1 -> kl-init@0.1; every other name unchanged. Claims, reports and
    figures read arm names from run folders through it, so a pre-registered arm is found under any version's name."""
    kind, at, coef = arm.partition("@")
    return f"{KIND_ALIASES.get(kind, kind)}{at}{coef}" if at else arm


def older_names(arm: str) -> list[str]:
    """The names an arm had in earlier versions (kl-init@0.1 -> [kl-reg@0.1]): where a missing arm was looked for."""
    kind, at, coef = arm.partition("@")
    return [f"{old}@{coef}" for old, new in KIND_ALIASES.items() if new == kind] if at else []


def canonical_arms(arms, where: str = "") -> dict[str, str]:
    """{folder name: canonical name} of `arms`; two folders that name one arm (kl-reg@0.1 and kl-init@0.1 side
    by side) raise RunFolderError naming both and `where`, since either choice would hide the other's runs."""
    from tandem_eval.schemas import RunFolderError

    out: dict[str, str] = {}
    for a in arms:
        c = canonical_arm(a)
        if (other := next((b for b, cb in out.items() if cb == c), None)) is not None:
            raise RunFolderError(f"{where or 'the run folders'}: arms {other!r} and {a!r} are the same arm ({c}); "
                                 "keep one folder")  # fmt: skip
        out[a] = c
    return out


# The scale whose settings made each scenario's runs (results/toy/<scenario>/): its arms are what the scenario
# pre-registered, which the claims check the run folders against (a missing arm refuses, never a smaller fit).
SCENARIO_SCALE = {"dialects": "full", "emergent": "emergent", "self-paired": "controls", "jargon": "controls"}


def designed_arms(scenario: str) -> tuple[str, ...]:
    """The arms `scenario`'s design trains, in their canonical names, with the untrained initial senior."""
    return ("init", *(canonical_arm(a) for a in SCALES[SCENARIO_SCALE[scenario]].arms(scenario)))


def kl_arm(coef: float, ref: str | None = None) -> str:
    return f"kl-{ref}@{coef:g}" if ref else f"kl-reg@{coef:g}"


def kl_coef(arm: str) -> float | None:
    return float(arm.split("@", 1)[1]) if "@" in arm and arm.split("@")[0] in KL_KINDS else None


def kl_ref(arm: str) -> str | None:
    """The KL reference (the trainer recipe's kl_ref) of a kl arm, init or junior; None for other arms."""
    return KL_REFS[arm.split("@")[0]] if kl_coef(arm) is not None else None


def arm_order(arm: str) -> tuple:
    """Sort key of RL arms, the order of Scale.arms: grpo, tandem, grpo-g16, then kl arms by reference and
    coefficient (other names last), so a summary reads the same from `make toy` and from its run folders."""
    fixed = ("grpo", "tandem", "grpo-g16")
    coef = kl_coef(arm)
    if arm in fixed:
        return (0, fixed.index(arm), 0.0, arm)
    if coef is not None:
        return (1, KL_KINDS.index(arm.split("@")[0]), coef, arm)
    return (2, 0, 0.0, arm)


# The dialects scenario's lr, fixed before its pilot: v3's lr check chose 3e-5 for grpo and tandem alike.
# Its step count is not fixed here: the pilot finds GRPO's plateau within DIALECTS_PILOT_STEPS (G1).
DIALECTS_LR = 3e-5
DIALECTS_PILOT_STEPS = 60

# v3's emergent scenario at the settings of its committed runs (results/toy/emergent/: 8 seeds, 20 RL
# steps, the lr check): `python -m trainer.toy.world --scale emergent` reruns it (~2.5 h)
EMERGENT = Scale(
    sft_steps=(),
    rl_steps=20,  # v3: grpo and tandem both chose lr 3e-5 in the lr check; 38/40 runs kept their last step
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
)
SCALES = {
    # `make toy` (<= 3 h on 2 cores): the dialects scenario (v4), gated (trainer/toy/gates.py: G0 after
    # SFT, G1 on the pilot seeds) before its full run. The emergent scenario and the self-paired and jargon
    # controls are summarised from their committed run folders (SCALES["emergent"], ["controls"]).
    "full": replace(
        EMERGENT,
        rl_steps=DIALECTS_PILOT_STEPS,  # replaced by the pilot's plateau step (world.stage_pilot)
        lr=DIALECTS_LR,
        eval_limits=(("dialects", 150), *EMERGENT.eval_limits),
        budgets=(("dialects", 37), *EMERGENT.budgets),
        kl_coefs=(("dialects", (0.1,)), *EMERGENT.kl_coefs),
        kl_refs=(("dialects", ("init", "junior")),),
        # the budget: grpo and tandem x 8 seeds, each kl reference x 6, grpo-g16 x 4
        arm_seeds=(("kl-init", 6), ("kl-junior", 6), ("grpo-g16", 4)),
        n_heldout=200,  # held-out pass@4 from 8 samples of 200 problems: the plateau check's resolution
        heldout_n=8,
        lr_sweep=(),  # one lr for every arm, fixed before the pilot (DIALECTS_LR)
        g16_scenarios=("dialects",),
        scenarios=("dialects",),
        pilot_seeds=PILOT_SEEDS,  # v6's (102, 103): v5 spent 100-101
        pilot_steps=DIALECTS_PILOT_STEPS,
    ),
    "emergent": EMERGENT,
    "ci": Scale(
        sft_steps=(("base", 4), ("emergent", 2), ("dialects/junior", 2), ("dialects/senior", 2)),
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
        budgets=(("emergent", 37), ("dialects", 37)),
        kl_coefs=(("dialects", (0.1,)), ("emergent", (0.1,)), ("self-paired", ()), ("jargon", ())),
        kl_refs=(("dialects", ("init", "junior")),),
        n_heldout=2,
        heldout_every=1,
        heldout_n=1,
        lr_sweep=(),
        sweep_steps=1,
        g16_scenarios=("dialects",),
        # One scenario keeps `make test` within budget (the others run the same code with other SFT data;
        # their aggregation is tested on constructed data). Gates are computed and recorded, not enforced.
        scenarios=("dialects",),
        pilot_seeds=(100,),
        pilot_steps=1,  # one held-out evaluation: no plateau to find, the full run trains rl_steps
        gate_problems=2,
        enforce_gates=False,
    ),
}
# The two controls at the settings their committed runs record (v2, results/toy/{self-paired,jargon}/: 3
# seeds, 40 steps of lr 1e-4 decaying linearly to 0, rollout temperature 1.0, no weight decay, held-out every
# 10 steps on 100 problems x 2 samples, the final checkpoint kept, 256 new tokens, init and the jargon junior
# evaluated on seed 0 only); `make toy-controls` reruns them (~9 h).
SCALES["controls"] = replace(
    EMERGENT,
    rl_steps=40,
    seeds=(0, 1, 2),
    budgets=(),
    heldout_every=10,
    heldout_n=2,
    lr_sweep=(),  # their lr is the committed runs' (1e-4); results/toy/lr_sweep.json stays the emergent check's
    g16_scenarios=(),
    scenarios=("self-paired", "jargon"),
    recipe_sets=("temperature=1.0", "lr_scheduler_type=linear", "weight_decay=0.0"),
    keep="final",
    untrained_seeds=(0,),
)


def eval_seed(seed: int) -> int:
    """The evaluation run seed of training seed `seed` (and of the untrained arms' seed-`seed` runs)."""
    return 1000 + seed


# Scenarios whose problems differ from the default mix (2-4 steps). emergent: 2-step problems only, so
# that one new-token budget separates the notations on every problem: under 37 tokens an all-terse CoT
# always finishes (29-37 tokens on 300 test problems) and one with a plain step almost never does (plain
# second step 35-45, plain first step 43-54, all plain 50-62; trainer.toy.task, the toy tokenizer).
# dialects: the same problems; a CoT wholly in dialect A or B is 29-37 tokens (+ the end token), a plain one
# 49-62, so under 37 tokens only the dialects finish.
DIFFICULTIES = {"emergent": Difficulty(min_steps=2, max_steps=2), "dialects": Difficulty(min_steps=2, max_steps=2)}
