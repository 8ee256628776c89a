"""Communication tax: how much pass@k a senior loses when the junior writes every other step.

    tax@k       = solo pass@k − handoff pass@k        (percentage points; > 0 means a loss)
    retention@k = handoff pass@k / solo pass@k        (fraction; NaN -> None when solo is 0)

computed per benchmark, per benchmark group (pooled problems) and macro (equal weight per group),
each with a paired bootstrap CI: every resample draws one set of problems and uses it for BOTH
runs, so the problem-difficulty noise shared by solo and handoff cancels in tax and retention.
The macro resamples within each group (stratified). A sign-flip p-value for tax is included.

    from tandem_eval.metrics.tax import communication_tax
    out = communication_tax(solo_samples, handoff_samples, ks=[1, 4, 8])   # tax_table: the same, not JSON-cleaned
    out["macro"]["pass@4"]["tax"]        # {"estimate": 0.11, "low": ..., "high": ..., "se": ...}

Two seniors' taxes (or retentions) are compared with `tax_difference(solo_a, handoff_a, solo_b,
handoff_b, k)`: the four runs' per-problem pass@k are resampled jointly (one set of problems per
resample for all four), and the p-value swaps the two seniors within problems (stats.swap_p_value).

Inputs are sample tables of one senior in the two modes (see passk.py for the columns); both must
cover the same problems. The output is strict-JSON (NaN -> None) and can go into metrics.json.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict

import numpy as np
import pandas as pd

from tandem_eval.metrics.passk import _check_ks, macro_provenance, per_problem_pass_at_k
from tandem_eval.metrics.stats import (
    MACRO,
    _macro_weights,
    difference_row,
    scoped_cis,
    sign_flip_p_value,
    swap_p_value,
)
from tandem_eval.schemas import ALPHA, BOOT_SEED, N_BOOT, PROBLEM_KEY, Bootstrap, to_jsonable

# Statistics of the (macro) mean pass@k of the two runs; columns are [solo, handoff] in percent.
# Vectorised over resamples: `m` has shape (B, 2).
STATS = {
    "solo": lambda m: m[:, 0],
    "handoff": lambda m: m[:, 1],
    "tax": lambda m: m[:, 0] - m[:, 1],
    "retention": lambda m: m[:, 1] / m[:, 0],  # solo = 0 -> inf/NaN, dropped from the CI
}


def communication_tax(
    solo_samples: pd.DataFrame,
    handoff_samples: pd.DataFrame,
    ks: Iterable[int],
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
) -> dict:
    """Solo, handoff, tax and retention per benchmark / group / macro for each k, with CIs.

    Returns {"ks", "n_boot", "alpha", "seed", "per_benchmark": {bench: {"pass@k": entry}},
    "per_group": {group: {...}}, "macro": {"pass@k": entry}, "macro_label", "paper_sets",
    "paper_sets_reasons"} where entry = {"solo", "handoff",
    "tax", "retention": {"estimate", "low", "high", "se", "n_boot"}, "tax_p_value", "n_problems"}.
    Problems with fewer than k samples in either run are left out for that k.
    """
    return to_jsonable(tax_table(solo_samples, handoff_samples, ks, n_boot, seed))


def tax_table(solo: pd.DataFrame, handoff: pd.DataFrame, ks: Iterable[int], n_boot=N_BOOT, seed=BOOT_SEED) -> dict:
    """communication_tax before JSON cleaning (numpy numbers, NaN): for a caller that cleans a whole
    record once (generate: metrics.json)."""
    paired, ks = _paired_table(solo, handoff, ks)
    provenance = macro_provenance(paired.groupby("group").size().to_dict())  # label: paper's macro or not
    out: dict = {"ks": ks, "n_boot": n_boot, "alpha": ALPHA, "seed": seed}
    out["per_benchmark"] = {name: {} for name in sorted(paired["benchmark"].unique())}
    out["per_group"] = {name: {} for name in sorted(paired["group"].unique())}
    out["macro"] = {}
    for k in ks:
        cols = [f"solo_pass@{k}", f"handoff_pass@{k}"]
        # ONE joint problem resampling of solo and handoff per scope (stats.scoped_cis; macro stratified)
        cis = scoped_cis(paired, cols, STATS, ("benchmark", "group"), n_boot, seed, ALPHA)
        for scope, level in (("per_benchmark", "benchmark"), ("per_group", "group"), ("macro", None)):
            for name in out[scope] if level else [None]:
                values = (paired if level is None else paired[paired[level] == name]).dropna(subset=cols)
                got = cis.get(MACRO) if level is None else cis[level].get(name)
                entry: dict = {"n_problems": 0}  # every problem has fewer than k samples in some run
                if got is not None and len(values):
                    # the tax's sign-flip p-value (macro: groups weighted equally), beside the CIs
                    diffs = (values[cols[0]] - values[cols[1]]).to_numpy()
                    weights = _macro_weights(values["group"].to_numpy() if level is None else None, len(diffs))
                    entry = {ci_name: asdict(ci) for ci_name, ci in got.items()}
                    entry["tax_p_value"] = sign_flip_p_value(diffs, weights, n_boot, seed)
                    entry["n_problems"] = int(len(values))
                (out[scope] if level is None else out[scope][name])[f"pass@{k}"] = entry
    out.update(provenance)
    return out


def _paired_table(solo: pd.DataFrame, handoff: pd.DataFrame, ks: Iterable[int]) -> tuple[pd.DataFrame, list[int]]:
    """One row per problem with solo_pass@k and handoff_pass@k (percent), and the ks checked (sorted,
    unique); same problems required."""
    ks = _check_ks(ks)
    pp_solo = per_problem_pass_at_k(solo, ks).set_index(PROBLEM_KEY)
    pp_hand = per_problem_pass_at_k(handoff, ks).set_index(PROBLEM_KEY)
    only_solo = pp_solo.index.difference(pp_hand.index)
    only_hand = pp_hand.index.difference(pp_solo.index)
    if len(only_solo) or len(only_hand):
        raise ValueError(
            f"solo and handoff runs cover different problems: {len(only_solo) + len(only_hand)} "
            f"differ ({len(only_solo)} only in solo, {len(only_hand)} only in handoff)"
        )
    pp_hand = pp_hand.reindex(pp_solo.index)
    if not (pp_solo["group"] == pp_hand["group"]).all():
        raise ValueError("solo and handoff runs assign different groups to the same benchmark")
    table = pp_solo[["group"]].copy()
    for k in ks:
        table[f"solo_pass@{k}"] = pp_solo[f"pass@{k}"] * 100.0
        table[f"handoff_pass@{k}"] = pp_hand[f"pass@{k}"] * 100.0
    return table.reset_index(), ks


def tax_difference(
    solo_a: pd.DataFrame,
    handoff_a: pd.DataFrame,
    solo_b: pd.DataFrame,
    handoff_b: pd.DataFrame,
    k: int,
    statistic: str = "tax",
    boot: Bootstrap = Bootstrap(),
    on_mismatch: str = "raise",
) -> list[dict]:
    """tax@k (or retention@k) of senior A minus that of senior B, per benchmark group and macro.

    Each resample draws ONE set of problems for all four runs (A's solo and handoff, B's solo and
    handoff; the macro is stratified by group), so the difficulty noise shared by the four cancels.
    p-value: stats.swap_p_value (the seniors swapped within problems; for tax the sign-flip test).
    Problems in only one senior's runs raise ValueError unless on_mismatch="intersect".
    Returns rows {"group", "a", "b", "diff", "low", "high", "p_value", "n_problems"} (tax in points).
    `boot`: resamples, seed and alpha (any object with n_boot, seed, alpha, e.g. lens.LensOptions).
    """
    n_boot, seed, alpha = boot.n_boot, boot.seed, boot.alpha
    if statistic not in ("tax", "retention"):
        raise ValueError(f"statistic must be 'tax' or 'retention', got {statistic!r}")
    if on_mismatch not in ("raise", "intersect"):
        raise ValueError(f"on_mismatch must be 'raise' or 'intersect', got {on_mismatch!r}")
    (k,) = _check_ks([k])
    fn = STATS[statistic]
    ta = _paired_table(solo_a, handoff_a, [k])[0].set_index(PROBLEM_KEY)
    tb = _paired_table(solo_b, handoff_b, [k])[0].set_index(PROBLEM_KEY)
    only_a, only_b = ta.index.difference(tb.index), tb.index.difference(ta.index)
    if (len(only_a) or len(only_b)) and on_mismatch == "raise":
        raise ValueError(
            f"problem sets differ: {len(only_a) + len(only_b)} problems are in only one senior's runs "
            f"({len(only_a)} only in A, {len(only_b)} only in B; {len(ta.index.intersection(tb.index))} shared)"
        )
    common = ta.index.intersection(tb.index)
    if not (ta.loc[common, "group"] == tb.loc[common, "group"]).all():
        raise ValueError("the two seniors' runs assign different groups to the same benchmark")
    cols = [f"solo_pass@{k}", f"handoff_pass@{k}"]
    values = np.hstack([ta.loc[common, cols].to_numpy(float), tb.loc[common, cols].to_numpy(float)])
    groups = ta.loc[common, "group"].to_numpy()
    keep = ~np.isnan(values).any(axis=1)  # problems with fewer than k samples in some run
    values, groups = values[keep], groups[keep]
    if not len(values):
        raise ValueError(f"no problem has {k} or more samples in all four runs")

    stats = {
        "a": lambda m: fn(m[:, :2]),
        "b": lambda m: fn(m[:, 2:]),
        "diff": lambda m: fn(m[:, :2]) - fn(m[:, 2:]),
    }
    table = pd.DataFrame(values, columns=["solo_a", "handoff_a", "solo_b", "handoff_b"]).assign(group=groups)
    cis = scoped_cis(table, list(table.columns[:4]), stats, ("group",), n_boot, seed, alpha)  # one joint resampling
    rows = []
    for name, c in [*((str(g), cis["group"][g]) for g in sorted(cis["group"])), (MACRO, cis[MACRO])]:
        rows_of = slice(None) if name == MACRO else groups == name
        v, strata = values[rows_of], groups if name == MACRO else None
        p = swap_p_value(v[:, :2], v[:, 2:], fn, _macro_weights(strata, len(v)), n_boot, seed)
        rows.append(difference_row(name, c, p, len(v)))
    return rows
