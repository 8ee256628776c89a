"""The dialects scenario's verdicts, pre-registered here (and in docs/toy-world.md) before its full run: what is
tested, how, and what "yes" requires, so that neither noise nor a weaker senior can meet a claim.

Unit of analysis: the training seed. Each arm-seed's metric is its macro mean over the test problems
(aggregate.frame); a difference pairs seed S of tandem with seed S of grpo (common evaluation seeds).

* Primary: the seed-level paired t-test (scipy.stats.ttest_1samp on the per-seed differences), one-sided
  in the claimed direction, at ALPHA = 0.05.
* Holm over the family FAMILY (the four claims on tandem), step-down; each claim's Holm-adjusted p is
  printed beside it. A second family, the same claims at matched solo accuracy (below), is Holm-adjusted
  on its own.
* Solo parity: TOST with margin +-PARITY points of solo pass@4 (the tax's k): the 90% seed-level t CI
  inside +-PARITY (both one-sided tests at 0.05; p = the larger of the two).
* "Lower communication tax" is "yes" only if, besides its own test: tandem's handoff pass@4 is not lower
  than GRPO's (the one-sided t for "lower" is not significant at ALPHA), solo parity holds, and the claim
  also holds at matched solo accuracy. The tax is solo minus handoff, so a weaker senior lowers it without
  any better handoff: these conditions rule that reading out.
* Matched solo accuracy: a line metric = a + b * solo pass@4 fitted (least squares) to the arm-seeds of
  LINE_ARMS (the arms that never see the junior: init, grpo, grpo-g16, kl toward the initial senior);
  tandem's per-seed residuals against it are tested like a difference (one-sided t). Legibility and drift
  claims also need their matched test.
* Sensitivity: the two-way clustered bootstrap (seeds and problems, N_BOOT_VERDICT resamples) of each
  verdict endpoint at the claim's own Holm level, so that it is read against the Holm-adjusted t it is
  compared with: the claim ranked i-th (from 1) by raw p in a family of m is tested at ALPHA / (m - i + 1),
  its endpoint the one-sided bound at that level (both ends of the interval at that level for parity). Each
  endpoint has its Monte-Carlo standard error (order statistics: the half-distance between the quantile's
  +-1 s.d. ranks); one within BORDERLINE_SE s.e. of its threshold is marked "borderline". The bootstrap never
  decides a verdict; a disagreement with the Holm-adjusted t-test is printed.
* Precondition: grpo - init tax@4 > 0 (one-sided t); without it every claim is "uninformative".
* Arms: read under their current names (scales.canonical_arm: v3's kl-reg@C is kl-init@C). Every arm of
  LINE_ARMS and KL_ARMS that the scenario's design trains (scales.designed_arms) must be in the data, else
  the verdicts refuse (MissingArm, naming the arm and the folder): never a silent fit on fewer arms.

    from trainer.toy.claims import evaluate
    evaluate(frames, "results/toy/dialects")   # frames: {arm: aggregate.frame(...)} of one scenario
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from tandem_eval.metrics.stats import clustered_bootstrap_means, macro_mean, t_interval
from tandem_eval.schemas import RunFolderError
from trainer.toy.scales import canonical_arms, older_names

ALPHA = 0.05
PARITY = 5.0  # points of solo pass@4
N_BOOT_VERDICT = 20_000
BOOT_SEED = 0
BORDERLINE_SE = 2.0
LINE_ARMS = ("init", "grpo", "grpo-g16", "kl-init@0.1")  # the matched-solo line: arms that never see the junior
LINE_X = "solo_pass@4"
UNINFORMATIVE = "uninformative: the precondition (grpo - init tax@4 > 0) does not hold"


@dataclass(frozen=True)
class Claim:
    name: str
    metric: str
    test: str  # "less": tandem - grpo < 0; "tost": |tandem - grpo| < PARITY
    matched: bool  # also tested at matched solo accuracy


FAMILY = (
    Claim("Lower communication tax", "tax@4", "less", True),
    Claim("Solo parity", "solo_pass@4", "tost", False),
    Claim("Better legibility", "junior_nll", "less", True),
    Claim("Lower drift", "kl_exact", "less", True),
)
KL_ARMS = ("kl-junior@0.1", "kl-init@0.1")  # compared with tandem (descriptive: two-sided, not in FAMILY)
V4_DESIGN = ("init", "grpo", "tandem", "grpo-g16", *KL_ARMS)  # the arms v4 pre-registered (scales.SCALES["full"])


class MissingArm(RunFolderError):
    """A pre-registered arm has no runs in the data: the verdicts refuse rather than fit on fewer arms."""


def required_arms(design: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The arms the verdicts read, from a scenario's design (canonical names): {"line": LINE_ARMS it trains,
    "kl": KL_ARMS it trains, "all": those and grpo and tandem}. An arm the design never trained (v3 had no
    kl-junior, the controls no grpo-g16) is left out by the design, and named in the output; one it trained
    must be in the data."""
    line = tuple(a for a in LINE_ARMS if a in design)
    kl = tuple(a for a in KL_ARMS if a in design)
    return {"line": line, "kl": kl, "all": ("grpo", "tandem", *line, *(a for a in kl if a not in line))}


def canonical_frames(frames: dict[str, pd.DataFrame], design: tuple[str, ...], where: str) -> dict[str, pd.DataFrame]:
    """`frames` keyed by canonical arm names (scales.canonical_arm); raises MissingArm (one line: the arm, its
    folder, the fix) when an arm the verdicts need (required_arms(design)) has no rows."""
    out = {c: frames[a] for a, c in canonical_arms(frames, where).items()}
    for arm in required_arms(design)["all"]:
        if arm not in out or out[arm].empty:
            old = older_names(arm)
            also = f" (nor under its older name {', '.join(old)})" if old else ""
            raise MissingArm(f"{where or 'the run folders'}: pre-registered arm {arm!r} has no runs{also}; "
                             f"train and evaluate it (the verdicts never fit on fewer arms)")  # fmt: skip
    return out


# ------------------------------------------------------------------ building blocks
def seed_values(frame: pd.DataFrame, metric: str) -> pd.Series:
    """Per seed: the macro mean of `metric` over the problems (groups weighted equally)."""
    v = frame.dropna(subset=[metric])
    return pd.Series({s: macro_mean(g[metric], g["group"]) for s, g in v.groupby("seed", sort=True)}, dtype=float)


def paired_seed_differences(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> pd.Series:
    """Per seed both arms hold: a's seed macro minus b's."""
    va, vb = seed_values(a, metric), seed_values(b, metric)
    both = va.index.intersection(vb.index)
    return (va[both] - vb[both]).sort_index()


def t_one_sided(d: np.ndarray, direction: str) -> float:
    """p of the one-sided one-sample t-test that the mean of d is < 0 ("less") or > 0 ("greater")."""
    d = np.asarray(d, dtype=float)
    if len(d) < 2:
        return float("nan")
    if np.ptp(d) == 0:  # no spread: the sign decides
        return 0.0 if (d[0] < 0 if direction == "less" else d[0] > 0) else 1.0
    return float(stats.ttest_1samp(d, 0.0, alternative=direction).pvalue)


def tost(d: np.ndarray, margin: float = PARITY) -> dict:
    """Two one-sided t-tests of |mean(d)| < margin: p (the larger one-sided p) and the 90% t CI."""
    d = np.asarray(d, dtype=float)
    if len(d) < 2:
        return {"p": float("nan"), "ci90": None}
    low = stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    high = stats.ttest_1samp(d, margin, alternative="less").pvalue
    ci = t_interval(d, 2 * ALPHA)
    return {"p": float(max(low, high)), "ci90": [ci[1], ci[2]] if ci else None}


def holm(pvalues: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values (NaN stays NaN and is left out of the family). Written here:
    scipy has no multiple-testing correction and statsmodels is not a dependency; it is five lines."""
    finite = sorted((p, k) for k, p in pvalues.items() if np.isfinite(p))
    m, out, running = len(finite), {k: float("nan") for k in pvalues}, 0.0
    for i, (p, k) in enumerate(finite):
        running = max(running, min(1.0, (m - i) * p))  # monotone: never below an earlier adjusted p
        out[k] = running
    return out


def matched_residuals(
    frames: dict[str, pd.DataFrame], metric: str, arm: str = "tandem", line_arms: tuple[str, ...] = LINE_ARMS
) -> dict | None:
    """`arm`'s per-seed residuals of `metric` against the line fitted on `line_arms`' arm-seeds (x = solo
    pass@4): {"residuals": {seed: r}, "slope", "intercept", "r2", "n_points", "line_arms", "points"}. Every
    line arm must be in `frames` (KeyError otherwise: evaluate checks them first, canonical_frames)."""
    xs, ys, points = [], [], {}
    for a in (*line_arms, arm):
        x, y = seed_values(frames[a], LINE_X), seed_values(frames[a], metric)
        both = x.index.intersection(y.index)
        points[a] = [[float(x[s]), float(y[s])] for s in both]
        if a != arm:
            xs += list(x[both])
            ys += list(y[both])
    if len(xs) < 3 or np.ptp(xs) == 0:
        return None
    fit = stats.linregress(xs, ys)
    x, y = seed_values(frames[arm], LINE_X), seed_values(frames[arm], metric)
    both = x.index.intersection(y.index)
    res = y[both] - (fit.intercept + fit.slope * x[both])
    return {
        "residuals": {int(s): float(r) for s, r in res.items()},
        "slope": float(fit.slope),
        "intercept": float(fit.intercept),
        "r2": float(fit.rvalue**2),
        "n_points": len(xs),
        "line_arms": list(line_arms),
        "points": points,  # {arm: [[solo pass@4, metric], ...]} per seed, the line's and `arm`'s
    }


def order_statistic_se(draws: np.ndarray, q: float) -> float:
    """Monte-Carlo s.e. of the q-quantile of `draws` (distribution-free: the order statistics at ranks
    q*B +- sqrt(B q (1 - q)) span about +-1 s.e.)."""
    x = np.sort(draws[np.isfinite(draws)])
    b = len(x)
    half = np.sqrt(b * q * (1 - q))
    lo, hi = int(max(0, np.floor(q * b - half))), int(min(b - 1, np.ceil(q * b + half)))
    return float((x[hi] - x[lo]) / 2)


def bootstrap_draws(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> dict:
    """Two-way clustered bootstrap (seeds and problems, N_BOOT_VERDICT) of mean(a) - mean(b) on the
    (seed, problem) rows both hold: {"mean", "draws", "n_boot"} ({} below 2 seeds). The endpoints are read
    from the draws once each claim's Holm level is known (endpoints)."""
    from trainer.toy.aggregate import paired_rows

    both = paired_rows(a, b, [metric])
    both = both.dropna(subset=[f"{metric}_a", f"{metric}_b"])
    if both["seed"].nunique() < 2:
        return {}
    est, boot = clustered_bootstrap_means(
        both, [f"{metric}_a", f"{metric}_b"], "seed", True, N_BOOT_VERDICT, BOOT_SEED
    )  # fmt: skip
    return {"mean": float(est[0] - est[1]), "draws": boot[:, 0] - boot[:, 1], "n_boot": N_BOOT_VERDICT}


def endpoints(draws: np.ndarray, quantiles: tuple[float, ...]) -> dict:
    """{"endpoints": {q: value}, "mc_se": {q: s.e.}} of the bootstrap draws at `quantiles`."""
    return {"endpoints": {str(q): float(np.quantile(draws, q)) for q in quantiles},
            "mc_se": {str(q): order_statistic_se(draws, q) for q in quantiles}}  # fmt: skip


def holm_levels(pvalues: dict[str, float]) -> dict[str, float]:
    """Each test's own level in Holm's step-down: ALPHA / (m - i + 1) for the i-th smallest raw p of m
    (NaN-p tests get NaN). A bootstrap endpoint at this level is read against the same bar as its
    Holm-adjusted t."""
    finite = sorted((p, k) for k, p in pvalues.items() if np.isfinite(p))
    out = {k: float("nan") for k in pvalues}
    for i, (_, k) in enumerate(finite):
        out[k] = ALPHA / (len(finite) - i)
    return out


# ------------------------------------------------------------------ the verdicts
def _sensitivity(boot: dict, test: str, level: float, holds: bool) -> dict:
    """The bootstrap endpoints at the claim's Holm level against their thresholds (an upper bound below 0
    for "less"; both ends inside +-PARITY for "tost"): agrees with the Holm-adjusted t verdict? borderline?"""
    if not boot or not np.isfinite(level):
        return {}
    thresholds = {level: -PARITY, 1 - level: PARITY} if test == "tost" else {1 - level: 0.0}
    ends = endpoints(boot["draws"], tuple(thresholds))
    e = {float(q): v for q, v in ends["endpoints"].items()}
    ses = {float(q): v for q, v in ends["mc_se"].items()}
    met = all((e[q] < t) if q > 0.5 else (e[q] > t) for q, t in thresholds.items())
    borderline = any(abs(e[q] - t) < BORDERLINE_SE * ses[q] for q, t in thresholds.items())
    return {"mean": boot["mean"], "holm_level": level, **ends, "n_boot": boot["n_boot"],
            "thresholds": {str(q): t for q, t in thresholds.items()}, "bootstrap_met": met,
            "agrees_with_t": met == holds, "borderline": borderline}  # fmt: skip


def evaluate(frames: dict[str, pd.DataFrame], where: str = "", design: tuple[str, ...] = V4_DESIGN) -> dict:
    """The pre-registered verdicts of one scenario (module docstring) from its arms' frames ({folder name:
    frame}; `where` names their folder in errors; `design`: the arms the scenario trains, canonical names).
    Raises MissingArm when an arm the verdicts need is missing (canonical_frames)."""
    names = canonical_arms(frames, where)
    frames = canonical_frames(frames, design, where)
    need = required_arms(design)
    t, g = frames["tandem"], frames["grpo"]
    pre = _precondition(frames)
    rows = {c.name: _claim_row(frames, c, need["line"]) for c in FAMILY}
    raw_p = {name: row["p"] for name, row in rows.items()}
    matched_p = {name: row["matched_solo"]["p"] for name, row in rows.items() if row.get("matched_solo")}
    adj, adj_m = holm(raw_p), holm(matched_p)
    for name, row in rows.items():
        row["p_holm"] = adj[name]
        if row.get("matched_solo"):
            row["matched_solo"]["p_holm"] = adj_m[name]
    parity = bool(adj["Solo parity"] < ALPHA)
    hand = paired_seed_differences(t, g, "handoff_pass@4")
    hand_lower_p = t_one_sided(hand.to_numpy(), "less")
    levels = holm_levels(raw_p)
    for name, row in rows.items():
        row["outcome"], row["conditions"] = _outcome(name, row, parity, hand_lower_p)
        # the bootstrap's endpoint at this claim's Holm level, against the Holm-adjusted t's verdict
        row["bootstrap"] = _sensitivity(row["bootstrap"], row["test"], levels[name], bool(row["p_holm"] < ALPHA))
        if not pre["holds"]:
            row["rule_outcome"], row["outcome"] = row["outcome"], UNINFORMATIVE
    return {
        "rules": {
            "alpha": ALPHA,
            "family": [c.name for c in FAMILY],
            "parity_pts": PARITY,
            "n_boot": N_BOOT_VERDICT,
            "borderline_se": BORDERLINE_SE,
            "line_arms": list(need["line"]),
            "not_in_design": [a for a in dict.fromkeys((*LINE_ARMS, *KL_ARMS)) if a not in need["all"]],
            "arm_names": {a: c for a, c in names.items() if a != c},  # folder name -> name read (older runs)
            "doc": __doc__.split("\n\n")[1],
        },  # fmt: skip
        "precondition": pre,
        "handoff_lower_p": hand_lower_p,
        "claims": list(rows.values()),
        "kl_vs_tandem": _kl_vs_tandem(frames, need["kl"]),
    }


def _precondition(frames: dict[str, pd.DataFrame]) -> dict:
    """grpo - init tax@4 > 0, one-sided seed-level paired t: else every claim is uninformative."""
    g = frames["grpo"]
    pre_d = paired_seed_differences(g, frames["init"], "tax@4") if "init" in frames else pd.Series(dtype=float)
    pre = {"rule": "grpo - init tax@4 > 0: one-sided seed-level paired t at alpha 0.05",
           "mean": float(pre_d.mean()) if len(pre_d) else None, "p": t_one_sided(pre_d.to_numpy(), "greater"),
           "seeds": [int(s) for s in pre_d.index]}  # fmt: skip
    pre["holds"] = bool(np.isfinite(pre["p"]) and pre["p"] < ALPHA)
    return pre


def _claim_row(frames: dict[str, pd.DataFrame], c, line_arms: tuple[str, ...]) -> dict:
    """One claim of the family, before Holm: tandem - grpo per seed, its test's raw p, the bootstrap
    endpoints, and (where the claim asks) the matched-solo residuals with their own raw p."""
    t, g = frames["tandem"], frames["grpo"]
    d = paired_seed_differences(t, g, c.metric)
    ci = t_interval(d.to_numpy())
    row = {"claim": c.name, "metric": c.metric, "test": c.test, "n_seeds": len(d),
           "mean": float(d.mean()) if len(d) else None, "seed_ci95": [ci[1], ci[2]] if ci else None,
           "per_seed": {int(s): float(v) for s, v in d.items()}}  # fmt: skip
    if c.test == "tost":
        row.update(tost(d.to_numpy()))
    else:
        row["p"] = t_one_sided(d.to_numpy(), c.test)
    row["bootstrap"] = bootstrap_draws(t, g, c.metric)  # endpoints at its Holm level: evaluate
    if c.matched:
        m = matched_residuals(frames, c.metric, line_arms=line_arms)
        if m:
            r = np.array(list(m["residuals"].values()))
            m["mean"], m["p"] = float(r.mean()), t_one_sided(r, "less")
            rci = t_interval(r)
            m["seed_ci95"] = [rci[1], rci[2]] if rci else None
        row["matched_solo"] = m
    return row


def _kl_vs_tandem(frames: dict[str, pd.DataFrame], kl_arms: tuple[str, ...]) -> dict:
    """Each kl arm - tandem on solo, handoff and tax, two-sided seed-level paired t (descriptive)."""
    t, kl = frames["tandem"], {}
    for arm in kl_arms:
        kl[f"{arm} - tandem"] = {}
        for metric in ("solo_pass@4", "handoff_pass@4", "tax@4"):
            d = paired_seed_differences(frames[arm], t, metric)
            ci = t_interval(d.to_numpy())
            p = float(stats.ttest_1samp(d.to_numpy(), 0.0).pvalue) if len(d) > 1 and np.ptp(d) > 0 else float("nan")
            kl[f"{arm} - tandem"][metric] = {"mean": float(d.mean()) if len(d) else None,
                                             "seed_ci95": [ci[1], ci[2]] if ci else None, "p_two_sided": p,
                                             "seeds": [int(s) for s in d.index]}  # fmt: skip
    return kl


def _outcome(name: str, row: dict, parity: bool, hand_lower_p: float) -> tuple[str, dict]:
    """The claim's outcome from its Holm-adjusted test and, where stated, its extra conditions."""
    sig = bool(np.isfinite(row["p_holm"]) and row["p_holm"] < ALPHA)
    if row["test"] == "tost":
        return ("yes (parity)" if sig else f"no: parity within ±{PARITY:g} not shown"), {}
    m = row.get("matched_solo")
    matched = bool(m and np.isfinite(m["p_holm"]) and m["p_holm"] < ALPHA)
    cond = {"significant (Holm)": sig, "at matched solo accuracy (Holm)": matched}
    if name == "Lower communication tax":
        cond["handoff pass@4 not lower"] = not (np.isfinite(hand_lower_p) and hand_lower_p < ALPHA)
        cond["solo parity"] = parity
    failed = [k for k, ok in cond.items() if not ok]
    return ("yes" if not failed else "no: " + ", ".join(f"not {k}" for k in failed)), cond
