"""The toy world's gates and verdicts: the precondition (GRPO pays a tax of its own) and the paper's
claims, each with its rule stated before the result, decided on the more conservative of the two CIs
(two-way bootstrap, seed-level t) of a difference computed by trainer/toy/aggregate.py.

    from trainer.toy.verdicts import precondition, verdicts
    verdicts({"arms": ..., "differences": ..., "precondition": precondition(differences)})
"""

from __future__ import annotations

from tandem_eval.metrics.registry import fmt_interval
from trainer.toy.scales import kl_coef, kl_ref

PARITY = 5.0  # points: solo accuracy "matches" when the difference's CI lies inside +-PARITY
TAX_EFFECT = 3.0  # points: the paper's effect size (GRPO tax 3.2 vs tandem 0.1, macro pass@4)
RL_GAIN = 15.0  # points of solo pass@1 that RL must add for the self-paired experiment to have power


def fmt_ci(cell: dict, decimals: int = 1, signed: bool = False, key: str = "ci") -> str:
    return fmt_interval(cell["mean"], cell.get(key), decimals, signed)


def conservative(cell: dict | None) -> tuple[float, float] | None:
    """The interval a verdict rests on: the hull of the two-way bootstrap CI and the seed-level t CI
    (the more conservative of the two, whichever side). None without a seed-level CI (fewer than 2
    paired seeds): no verdict rests on one seed."""
    if not cell or cell.get("seed_ci") is None:
        return None
    return min(cell["ci"][0], cell["seed_ci"][0]), max(cell["ci"][1], cell["seed_ci"][1])


UNINFORMATIVE = "uninformative: GRPO shows no tax"
ONE_SEED = "no: fewer than 2 paired seeds, so no seed-level CI"
PRECONDITION_RULE = "grpo − init tax@4 and grpo − init junior NLL: both CIs above 0 (bootstrap and seed-level)"
PLANTED_RULE = (
    "grpo tax@4: both CIs above 0 (bootstrap and seed-level); the junior is not the initial senior, so a tax "
    "that SFT planted and GRPO keeps counts"
)


def _gate_cell(c: dict | None) -> dict | None:
    ci = conservative(c)
    return (
        {"mean": c["mean"], "ci": list(ci) if ci else None, "bootstrap_ci": c["ci"], "seed_ci": c.get("seed_ci")}
        if c
        else None
    )


def _above_zero(cell: dict | None) -> bool:
    return bool(cell and cell["ci"] and cell["ci"][0] > 0)


def precondition(differences: dict, arms: dict | None = None, planted: bool = False) -> dict:
    """The paper's precondition, checked before any claim on tandem: GRPO itself pays a tax and writes
    CoTs its junior reads worse than the initial senior's. {"grpo_tax@4_minus_init": {mean, ci,
    bootstrap_ci, seed_ci}, "grpo_junior_nll_minus_init": {...}, "holds": bool, "rule": str}; "ci" is
    the conservative interval (None with fewer than 2 paired seeds).
    `planted` (a scenario whose junior is not the initial senior, e.g. jargon): the tax is SFT's, so the
    gate is GRPO's own tax@4 (`arms["grpo"]["tax@4"]`, also reported as "grpo_tax@4")."""
    d = differences.get("grpo - init", {})
    out: dict = {"rule": PLANTED_RULE if planted else PRECONDITION_RULE}
    out["grpo_tax@4_minus_init"] = _gate_cell(d.get("tax@4"))
    out["grpo_junior_nll_minus_init"] = _gate_cell(d.get("junior_nll"))
    if planted:
        out["grpo_tax@4"] = _gate_cell((arms or {}).get("grpo", {}).get("tax@4"))
        out["holds"] = _above_zero(out["grpo_tax@4"])
    else:
        out["holds"] = _above_zero(out["grpo_tax@4_minus_init"]) and _above_zero(out["grpo_junior_nll_minus_init"])
    return out


def _rl_moves(c, ci) -> str:
    if ci is None:
        return ONE_SEED
    return "yes" if c["mean"] >= RL_GAIN and ci[0] > 0 else f"no: gain below {RL_GAIN:g} pts or CI not above 0"


def _parity(c, ci) -> str:
    if ci is None:
        return ONE_SEED
    lo, hi = ci
    if -PARITY <= lo and hi <= PARITY:
        return "yes (parity)"
    if hi < 0:
        return "no: tandem is worse"
    if lo > 0:
        return "no: tandem is better"
    return f"no: CI wider than ±{PARITY:g}, parity not shown"


def _lower_tax(c, ci) -> str:
    if ci is None:
        return ONE_SEED
    lo, hi = ci
    if hi < 0:
        return "yes"
    if lo > 0:
        return "no: tandem's tax is higher"
    if -TAX_EFFECT <= lo and hi <= TAX_EFFECT:
        return f"no: no effect of {TAX_EFFECT:g}+ pts (CI inside ±{TAX_EFFECT:g})"
    return f"no: no effect detected; the CI cannot exclude {TAX_EFFECT:g} pts"


def _lower(c, ci) -> str:
    if ci is None:
        return ONE_SEED
    return "yes" if ci[1] < 0 else "no: higher" if ci[0] > 0 else "no: no difference detected"


# claim -> (difference, metric, rule, outcome function, decimals, needs the precondition)
CLAIMS = [
    ("RL moves the senior", "grpo - init", "solo_pass@1", f"grpo − init solo pass@1 ≥ {RL_GAIN:g} pts, CI above 0",
     _rl_moves, 1, False),
    ("Solo parity", "tandem - grpo", "solo_pass@1", f"tandem − grpo solo pass@1: CI inside ±{PARITY:g} pts",
     _parity, 1, True),
    ("Lower communication tax", "tandem - grpo", "tax@4", "tandem − grpo tax@4: CI below 0", _lower_tax, 1, True),
    ("Better legibility", "tandem - grpo", "junior_nll", "tandem − grpo junior_nll: CI below 0", _lower, 3, True),
    ("Lower drift", "tandem - grpo", "kl_exact", "tandem − grpo kl_exact: CI below 0", _lower, 3, True),
]  # fmt: skip
KL_RULE = "kl-reg@C − tandem, solo and handoff pass@4: for every C, one CI below 0 and none above"


def _kl_frontier(d: dict, kl: list[str]) -> dict | None:
    """The kl-reg claim: every coefficient is worse than tandem on solo or handoff pass@4 and better on
    neither (each interval the conservative one); a coefficient that breaks the rule makes it "no"."""
    boot, seed, failed, missing = [], [], [], []
    for a in kl:
        k = d.get(f"{a} - tandem", {})
        if "solo_pass@4" not in k or "handoff_pass@4" not in k:
            continue
        cis = {m: conservative(k[m]) for m in ("solo_pass@4", "handoff_pass@4")}
        boot.append(f"{a}: solo {fmt_ci(k['solo_pass@4'], 1, True)}, handoff {fmt_ci(k['handoff_pass@4'], 1, True)}")
        seed.append(
            f"{a}: solo {fmt_ci(k['solo_pass@4'], 1, True, 'seed_ci')}, "
            f"handoff {fmt_ci(k['handoff_pass@4'], 1, True, 'seed_ci')}"
        )
        if any(ci is None for ci in cis.values()):
            missing.append(a)
            continue
        worse = [m.split("_")[0] for m, ci in cis.items() if ci[1] < 0]
        better = [m.split("_")[0] for m, ci in cis.items() if ci[0] > 0]
        if better:
            failed.append(f"{a} is better than tandem on {' and '.join(better)}")
        elif not worse:
            failed.append(f"{a} is indistinguishable from tandem on both")
    if not boot:
        return None
    outcome = (
        "no: " + "; ".join(failed)
        if failed
        else ONE_SEED
        if missing
        else "yes: every coefficient is worse than tandem on solo or handoff pass@4 and better on neither"
    )
    return {
        "claim": "KL-reg does not give tandem's combination",
        "rule": KL_RULE,
        "bootstrap": "; ".join(boot),
        "seed_level": "; ".join(seed),
        "outcome": outcome,
        "needs_precondition": True,
    }


def verdicts(sc: dict) -> list[dict]:
    """The paper's claims, each with its rule stated before the result (thresholds: module constants),
    its two-way bootstrap and seed-level CIs, and its outcome, decided on the more conservative CI.
    When the precondition fails, every claim on tandem is UNINFORMATIVE (its numbers still shown)."""
    d, arms, out = sc["differences"], sc["arms"], []
    pre = sc.get("precondition") or precondition(d)
    for claim, diff, m, rule, decide, decimals, gated in CLAIMS:
        c = d.get(diff, {}).get(m)
        if not c:
            continue
        out.append(
            {
                "claim": claim,
                "rule": rule,
                "bootstrap": fmt_ci(c, decimals, True),
                "seed_level": fmt_ci(c, decimals, True, "seed_ci"),
                "n_seeds": len(d[diff].get("paired_seeds", [])),
                "outcome": decide(c, conservative(c)),
                "needs_precondition": gated,
            }
        )
    # kl toward the initial senior under any version's name (scales.kl_ref: kl-reg@C is kl-init@C)
    kl = sorted((a for a in arms if kl_ref(a) == "init"), key=kl_coef)
    if kl and "tandem" in arms and (v := _kl_frontier(d, kl)):
        out.append(v)
    for v in out:
        if v.pop("needs_precondition") and not pre["holds"]:
            v["rule_outcome"], v["outcome"] = v["outcome"], UNINFORMATIVE  # the rule's, kept in the JSON only
    return out
