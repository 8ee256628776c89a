"""Problem-level statistics: macro means, bootstrap confidence intervals, paired run comparisons.

Samples are clustered within problems (n = 8 chains of one problem share its difficulty), so every
method here works on ONE VALUE PER PROBLEM (e.g. a problem's pass@k, or its mean junior NLL) and
resamples problems, never samples. Macro averages give each benchmark *group* equal weight (the
paper pools AIME 24/25/26 into one group); when `groups` is given the bootstrap is stratified by
group, so every resample keeps each group's size and the macro is recomputed per resample.

    from tandem_eval.metrics.stats import bootstrap_ci, paired_compare, macro_mean
    ci = bootstrap_ci(per_problem["pass@4"], groups=per_problem["group"])     # CI(estimate, low, ...)
    res = paired_compare(tandem_pp, grpo_pp, groups=groups)                  # Paired(diff, p_value, ...)

Statistics of several columns resampled *jointly* (e.g. a ratio handoff/solo) go through
`bootstrap_means` + `percentile_ci`, or `bootstrap_ci(frame, stat_fn=...)`, where `stat_fn` maps
per-column (macro) means of shape (B, m) to B statistics.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tandem_eval.schemas import ALPHA, BOOT_SEED, N_BOOT

# Above this many problems the exact sign-flip enumeration (2**n vectors) is replaced by Monte Carlo.
EXACT_PERMUTATION_MAX_N = 16


@dataclass(frozen=True)
class CI:
    """A point estimate with a percentile bootstrap interval; `n_boot` = resamples with a finite stat."""

    estimate: float
    low: float
    high: float
    se: float
    n_boot: int


@dataclass(frozen=True)
class Paired:
    """Difference a − b between two runs on the same problems, its CI and a two-sided p-value."""

    diff: float
    low: float
    high: float
    p_value: float
    n_problems: int
    method: str


def macro_mean(values: pd.Series, groups: pd.Series) -> float:
    """Mean of per-group means (equal weight per group). NaN values are skipped within a group;
    a group with no finite value makes the macro NaN (it is undefined, not silently re-weighted)."""
    values = pd.Series(values)
    groups = _align_groups(values, groups)
    per_group = values.groupby(groups.to_numpy(), sort=True).mean()
    return float(per_group.mean(skipna=False)) if len(per_group) else math.nan


def t_interval(values: Any, alpha: float = ALPHA) -> tuple[float, float, float] | None:
    """(mean, low, high): the Student-t interval of the mean with len(values) - 1 degrees of freedom,
    e.g. over one value per training seed (a seed-level analysis, scipy.stats.t). None below two
    finite values; values without spread give a zero-width interval."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return None
    mean, se = float(x.mean()), float(stats.sem(x))
    if se == 0:
        return mean, mean, mean
    low, high = stats.t.interval(1 - alpha, len(x) - 1, loc=mean, scale=se)
    return mean, float(low), float(high)


def bootstrap_means(
    values: np.ndarray, groups: np.ndarray | None, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Column (macro) means of `values` (n, m) and of `n_boot` problem resamples: ((m,), (B, m)).

    Without groups, problems are resampled with replacement as one pool. With groups, each group
    is resampled within itself (stratified) and the per-resample macro is the mean of group means.
    """
    values = np.asarray(values, dtype=float)
    values = values.reshape(len(values), -1)
    if len(values) == 0:
        raise ValueError("bootstrap needs at least one problem, got 0")
    if groups is None:
        groups = np.zeros(len(values), dtype=int)
    rng = np.random.default_rng(seed)
    est_parts, boot_parts = [], []
    for g in np.unique(groups):  # few groups; the B resamples are vectorised below
        vals_g = values[groups == g]
        idx = rng.integers(0, len(vals_g), size=(n_boot, len(vals_g)))  # (B, n_g) problem indices
        est_parts.append(vals_g.mean(axis=0))
        boot_parts.append(vals_g[idx].mean(axis=1))  # (B, n_g, m) -> (B, m)
    return np.mean(est_parts, axis=0), np.mean(boot_parts, axis=0)


def percentile_ci(estimate: float, draws: np.ndarray, alpha: float = ALPHA) -> CI:
    """Percentile interval of bootstrap `draws`; non-finite draws (e.g. a ratio over 0) are dropped."""
    draws = np.asarray(draws, dtype=float)
    draws = draws[np.isfinite(draws)]
    if len(draws) == 0:
        return CI(float(estimate), math.nan, math.nan, math.nan, 0)
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    se = float(np.std(draws, ddof=1)) if len(draws) > 1 else 0.0
    return CI(float(estimate), float(low), float(high), se, int(len(draws)))


def bootstrap_ci(
    per_problem: pd.DataFrame | pd.Series,
    stat_fn: Callable[[np.ndarray], np.ndarray] | None = None,
    n_boot: int = N_BOOT,
    alpha: float = ALPHA,
    seed: int = BOOT_SEED,
    groups: pd.Series | None = None,
) -> CI:
    """Bootstrap CI over problems for a statistic of per-problem values.

    per_problem: one row per problem (index = problem key). A Series or a one-column frame gives
    the CI of the (macro) mean. For several columns pass `stat_fn(means) -> stats`, vectorised:
    it gets per-column (macro) means of shape (B, m) and returns shape (B,), e.g.
    `lambda m: m[:, 1] / m[:, 0]`. Rows with any NaN are dropped. groups: benchmark group per
    problem (aligned on the index) -> stratified resampling and a macro mean.
    """
    frame = per_problem.to_frame() if isinstance(per_problem, pd.Series) else per_problem
    if stat_fn is None:
        if frame.shape[1] != 1:
            raise ValueError(f"bootstrap_ci: {frame.shape[1]} columns need a stat_fn over column means")
        stat_fn = _first_column
    keep = frame.notna().all(axis=1).to_numpy()
    g = None if groups is None else _align_groups(frame, groups).to_numpy()[keep]
    est_means, boot_means = bootstrap_means(frame.to_numpy(dtype=float)[keep], g, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = float(np.asarray(stat_fn(est_means[None, :])).reshape(-1)[0])
        draws = np.asarray(stat_fn(boot_means)).reshape(-1)
    return percentile_ci(estimate, draws, alpha)


MACRO = "macro"


def scoped_cis(
    values: pd.DataFrame,
    columns: str | list[str] = "value",
    stats: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None,
    levels: tuple[str, ...] = ("group",),
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
    alpha: float = ALPHA,
    cluster: str | None = None,
) -> dict:
    """THE CI builder per scope: {level: {name: CIs}} for each column of `levels` (e.g. benchmark,
    group) and {"macro": CIs} (equal weight per group, stratified by group). CIs is one CI (one
    column, no `stats`) or {stat: CI} for `stats` = {name: fn over (B, m) column means} computed from
    ONE joint resampling (paired columns, e.g. solo and handoff of the same problems).

    values: one row per problem (per seed x problem with `cluster`), with a `group` column.
    cluster: a column (the seed) -> two-way clustered bootstrap: seeds and problems are resampled
    independently (problems within groups) and each draw averages the chosen seed x problem cells,
    so the CI covers seed-to-seed and problem-to-problem variation. A single cluster value falls
    back to the plain problem bootstrap (same numbers as without `cluster`). Rows with a NaN are
    dropped. scipy.stats.bootstrap has no stratified or two-way clustered resampling, so it serves
    as the test oracle of the unstratified case (tests/test_metrics_stats.py), not as the engine."""
    columns = [columns] if isinstance(columns, str) else list(columns)
    v = values.dropna(subset=columns)
    if cluster is not None and v[cluster].nunique() <= 1:
        cluster = None
    first: dict[Any, Callable[[np.ndarray], np.ndarray]] = {None: _first_column}  # None: no stats given
    fn = stats or first
    out: dict = {level: {} for level in levels}

    def cis(part: pd.DataFrame, groups: np.ndarray | None) -> dict | CI:
        if cluster is None:
            est, boot = bootstrap_means(part[columns].to_numpy(dtype=float), groups, n_boot, seed)
        else:
            est, boot = clustered_bootstrap_means(part, columns, cluster, groups is not None, n_boot, seed)
        res: dict[Any, CI] = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            for name, f in fn.items():
                res[name] = percentile_ci(float(np.asarray(f(est[None, :])).reshape(-1)[0]), f(boot), alpha)
        return res if stats else res[None]

    for level in levels:
        for name, part in v.groupby(level, sort=True):
            out[level][name] = cis(part, None)
    if len(v):
        out[MACRO] = cis(v, v["group"].to_numpy())
    return out


def clustered_bootstrap_means(
    values: pd.DataFrame, columns: list[str], cluster: str, stratify: bool, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(macro) column means of a seed x problem table and of n_boot two-way resamples: ((m,), (B, m)).
    Problems are the index (one row per cluster value and problem); seeds are drawn once per
    resample for all groups, problems within each group (stratify) or as one pool."""
    seeds = np.unique(values[cluster].to_numpy())
    rng = np.random.default_rng(seed)
    s_idx = rng.integers(0, len(seeds), size=(n_boot, len(seeds)))
    w = np.zeros((n_boot, len(seeds)))
    np.add.at(w, (np.arange(n_boot)[:, None], s_idx), 1.0 / len(seeds))  # weight of each seed per draw
    groups = values["group"].to_numpy() if stratify else np.zeros(len(values), dtype=int)
    est_parts, boot_parts = [], []
    for g in np.unique(groups):
        part = values[groups == g]
        problems = part.index.unique().sort_values()
        # (S, n_g, m): each seed's values of the group's problems (NaN where a seed lacks one)
        mat = np.stack(
            [
                part[part[cluster] == s][columns]
                .groupby(level=list(range(part.index.nlevels)))
                .mean()
                .reindex(problems)
                .to_numpy(dtype=float)
                for s in seeds
            ]
        )
        p_idx = rng.integers(0, mat.shape[1], size=(n_boot, mat.shape[1]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            per_seed = np.nanmean(mat[:, p_idx, :], axis=2)  # (S, B, m)
            est_parts.append(np.nanmean(mat, axis=(0, 1)))
        boot_parts.append(np.einsum("bs,sbm->bm", w, per_seed))
    return np.mean(est_parts, axis=0), np.mean(boot_parts, axis=0)


def paired_compare(
    a: pd.Series,
    b: pd.Series,
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
    groups: pd.Series | None = None,
    test: str = "permutation",
    on_mismatch: str = "raise",
    alpha: float = ALPHA,
) -> Paired:
    """Compare two runs' per-problem values of one metric on the same problems (index = problem).

    diff = mean(a) − mean(b) (macro over `groups` when given). CI: paired bootstrap over problems
    (each resampled problem carries both runs). p-value, two-sided: test="permutation" flips the
    signs of per-problem differences (exact for n <= 16, else n_boot random flips);
    test="bootstrap" counts centred bootstrap diffs at least as extreme as the observed one.
    Mismatched problem sets raise unless on_mismatch="intersect". NaN pairs are dropped.
    """
    if test not in ("permutation", "bootstrap"):
        raise ValueError(f"test must be 'permutation' or 'bootstrap', got {test!r}")
    d = _paired_differences(a, b, on_mismatch)
    g = None if groups is None else _align_groups(d, groups)
    ci = bootstrap_ci(d, n_boot=n_boot, alpha=alpha, seed=seed, groups=g)
    weights = _macro_weights(None if g is None else g.to_numpy(), len(d))
    if test == "permutation":
        p_value = sign_flip_p_value(d.to_numpy(), weights, n_boot, seed)
    else:
        _, boot = bootstrap_means(d.to_numpy(), None if g is None else g.to_numpy(), n_boot, seed)
        extreme = np.abs(boot[:, 0] - ci.estimate) >= abs(ci.estimate) - _tol(d.to_numpy())
        p_value = float((1 + extreme.sum()) / (1 + len(boot)))
    method = f"paired bootstrap CI ({n_boot} resamples of problems); p: " + (
        "sign-flip permutation" if test == "permutation" else "centred bootstrap"
    )
    return Paired(ci.estimate, ci.low, ci.high, p_value, len(d), method)


def sign_flip_p_value(d: np.ndarray, weights: np.ndarray, n_perm: int, seed: int) -> float:
    """Two-sided p of T = sum(w * d) under random sign flips of the per-problem differences d.

    Exact enumeration of all 2**n sign vectors when n <= EXACT_PERMUTATION_MAX_N; otherwise
    n_perm random flips with the (1 + count) / (1 + n_perm) correction so p is never 0.
    """
    d = np.asarray(d, dtype=float)
    n = len(d)
    observed = abs(float(np.dot(weights, d)))
    if n <= EXACT_PERMUTATION_MAX_N:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1  # (2**n, n) all sign vectors
        signs = 1.0 - 2.0 * bits
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_perm, n))
    null = np.abs(signs @ (weights * d))
    count = int((null >= observed - _tol(d)).sum())  # tolerance: float ties count as "as extreme"
    if n <= EXACT_PERMUTATION_MAX_N:
        return count / len(signs)
    return (1 + count) / (1 + n_perm)


def mcnemar_exact(a: pd.Series, b: pd.Series) -> dict:
    """Exact two-sided p of mean(a) - mean(b) for binary per-problem outcomes (0/1 or 0/100, problems weighted
    equally; index = problem): McNemar's exact test. Under the sign-flip null each discordant problem is
    equally likely to favour either run, so the count where only a succeeds is Binomial(n_discordant, 1/2)
    (scipy.stats.binomtest): the exact sign-flip p that sign_flip_p_value only estimates beyond
    EXACT_PERMUTATION_MAX_N problems. {"p_value", "a_only", "b_only", "n_discordant", "n_problems"}."""
    from scipy.stats import binomtest

    d = _paired_differences(a, b, "raise")
    values = np.unique(np.abs(d.to_numpy()))
    if len(values[values > 0]) > 1:
        raise ValueError(f"mcnemar_exact needs binary outcomes; the differences take the values {values.tolist()}")
    a_only, b_only = int((d > 0).sum()), int((d < 0).sum())
    n = a_only + b_only
    p = 1.0 if n == 0 else float(binomtest(a_only, n, 0.5).pvalue)
    return {"p_value": p, "a_only": a_only, "b_only": b_only, "n_discordant": n, "n_problems": len(d)}


def swap_p_value(
    a: np.ndarray,
    b: np.ndarray,
    stat_fn: Callable[[np.ndarray], np.ndarray],
    weights: np.ndarray,
    n_perm: int,
    seed: int,
) -> float:
    """Two-sided p of T = stat_fn(means of a) - stat_fn(means of b) under random swaps of the two
    runs within each problem (the paired null: per problem, the runs are exchangeable).

    a, b: (n, m) per-problem columns of runs A and B (e.g. solo and handoff pass@k of each senior);
    means are weighted by `weights` (macro weights, see _macro_weights); stat_fn maps (P, m) means
    to (P,) statistics, e.g. the retention `m[:, 1] / m[:, 0]`. Exact over all 2**n swap vectors
    when n <= EXACT_PERMUTATION_MAX_N, else n_perm random ones with the (1 + count) / (1 + n_perm)
    correction. Swaps giving a non-finite T (e.g. a zero denominator) are left out. For a linear
    statistic this equals sign_flip_p_value of the per-problem differences.
    """
    a, b = (np.asarray(x, dtype=float).reshape(len(x), -1) for x in (a, b))
    n = len(a)
    if n <= EXACT_PERMUTATION_MAX_N:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1
        signs = 1.0 - 2.0 * bits  # row s: problem i keeps its runs (+1) or swaps them (-1)
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_perm, n))
    mid = weights @ ((a + b) / 2)  # (m,) the part of each mean that swaps leave unchanged
    half = signs @ (weights[:, None] * (a - b) / 2)  # (P, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = abs(float(stat_fn((weights @ a)[None, :])[0] - stat_fn((weights @ b)[None, :])[0]))
        null = np.abs(stat_fn(mid + half) - stat_fn(mid - half))
    null = null[np.isfinite(null)]
    if not math.isfinite(observed) or len(null) == 0:
        return math.nan
    count = int((null >= observed - 1e-9 * max(1.0, observed)).sum())  # float ties count as "as extreme"
    if n <= EXACT_PERMUTATION_MAX_N:
        return count / len(null)
    return (1 + count) / (1 + len(null))


def difference_row(group: str, cis: dict, p_value: float, n_problems: int) -> dict:
    """One row of an A - B comparison: the two estimates, the difference with its CI, p, n."""
    a, b, d = cis["a"], cis["b"], cis["diff"]
    return {
        "group": group,
        "a": a.estimate,
        "b": b.estimate,
        "diff": d.estimate,
        "low": d.low,
        "high": d.high,
        "p_value": p_value,
        "n_problems": int(n_problems),
    }


def _first_column(means: np.ndarray) -> np.ndarray:
    return means[:, 0]


def _tol(d: np.ndarray) -> float:
    # Sums of the same numbers in another order differ by rounding; treat those as ties.
    return 1e-9 * max(1.0, float(np.abs(d).sum()))


def _macro_weights(groups: np.ndarray | None, n: int) -> np.ndarray:
    """Per-problem weights w with sum(w * x) = macro mean of x: 1 / (n_groups * size of own group)."""
    if groups is None:
        return np.full(n, 1.0 / n)
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    return 1.0 / (len(counts) * counts[inverse])


def _align_groups(values: pd.Series | pd.DataFrame, groups: Any) -> pd.Series:
    """Groups as a Series on `values`' index (aligned by label if a Series, else by position)."""
    if isinstance(groups, pd.Series):
        missing = ~values.index.isin(groups.index)
        if missing.any():
            raise ValueError(f"groups lacks {int(missing.sum())} of the {len(values)} problems")
        if groups.index.has_duplicates:
            raise ValueError("groups index has duplicate problem keys")
        groups = groups.reindex(values.index)
    else:
        groups = pd.Series(np.asarray(groups), index=values.index)
        if len(groups) != len(values):
            raise ValueError(f"groups has {len(groups)} entries for {len(values)} problems")
    if groups.isna().any():
        raise ValueError(f"{int(groups.isna().sum())} problems have no group")
    return groups


def _paired_differences(a: pd.Series, b: pd.Series, on_mismatch: str) -> pd.Series:
    """Per-problem a − b on a common index; refuses (or intersects) mismatched problem sets."""
    if on_mismatch not in ("raise", "intersect"):
        raise ValueError(f"on_mismatch must be 'raise' or 'intersect', got {on_mismatch!r}")
    for name, s in (("a", a), ("b", b)):
        if s.index.has_duplicates:
            raise ValueError(f"{name} has {int(s.index.duplicated().sum())} duplicate problem keys")
    only_a, only_b = a.index.difference(b.index), b.index.difference(a.index)
    if (len(only_a) or len(only_b)) and on_mismatch == "raise":
        shared = len(a.index.intersection(b.index))
        raise ValueError(
            f"problem sets differ: {len(only_a) + len(only_b)} problems are in only one run "
            f"({len(only_a)} only in a, {len(only_b)} only in b; {shared} shared). "
            "Pass on_mismatch='intersect' to compare the shared problems."
        )
    common = a.index.intersection(b.index)
    d = (a.reindex(common).astype(float) - b.reindex(common).astype(float)).dropna()
    if len(d) == 0:
        raise ValueError("no problem has a value in both runs")
    return d
