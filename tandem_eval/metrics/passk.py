"""Unbiased pass@k: per problem, per benchmark, per benchmark group and macro over groups.

pass@k for one problem with n graded samples of which c are correct is the chance that a random
k-subset of the n samples holds at least one correct one: 1 − C(n−c, k) / C(n, k) (Chen et al.
2021). A benchmark's pass@k is the mean over its problems; a group pools its benchmarks' problems
(AIME 24/25/26 -> "aime", 90 problems); the macro gives each group equal weight. The macro is
labelled "macro" only when the groups and their sizes are the paper's four (aime 90, amc 121,
minerva 272, olympiadbench 581); any other run's is "macro over these groups", with the reasons
in the summary (`macro_label`, `paper_sets`, `paper_sets_reasons`), which the terminal table
prints under a macro row (no logged warning: the caption says it once, where the number is). The
summary carries each number's 95% bootstrap CI over problems (`ci`, metrics.stats.scoped_cis, the
macro resampled within groups) and the problems behind it (`n_problems`).

    from tandem_eval.metrics.passk import pass_at_k, per_problem_pass_at_k, summarize_pass_at_k
    pass_at_k(8, 3, 4)                                   # 0.9285714...
    pp = per_problem_pass_at_k(samples, ks=[1, 4, 8])    # one row per problem, fractions 0-1
    summary = summarize_pass_at_k(samples, ks=[1, 4, 8]) # JSON-ready dict, PERCENT 0-100

`samples` is one run's sample table (one row per problem × sample index) with columns
problem_id, benchmark, group, sample_idx, correct. Problems are keyed by (benchmark, problem_id).
"""

from __future__ import annotations

import logging
import math
import operator
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from tandem_eval.data.benchmarks import OTHER_MACRO_LABEL, PAPER_MACRO_LABEL, paper_set_reasons
from tandem_eval.metrics.stats import scoped_cis
from tandem_eval.schemas import PROBLEM_KEY, SAMPLE_KEY, to_jsonable

log = logging.getLogger(__name__)

REQUIRED_COLUMNS = ("problem_id", "benchmark", "group", "sample_idx", "correct")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimate from n samples with c correct, as a fraction in [0, 1].

    Uses the product form 1 − prod_{i=n−c+1}^{n} (1 − k/i), which equals 1 − C(n−c,k)/C(n,k)
    without forming huge binomials (C(200, 100) overflows a float).
    """
    n, c, k = operator.index(n), operator.index(c), operator.index(k)
    if n < 0 or c < 0 or k < 1:
        raise ValueError(f"pass@k needs n >= 0, c >= 0, k >= 1; got n={n}, c={c}, k={k}")
    if c > n:
        raise ValueError(f"pass@k: c={c} correct samples exceeds n={n} samples")
    if k > n:
        raise ValueError(f"pass@k: k={k} exceeds the n={n} samples available")
    if n - c < k:
        return 1.0  # every k-subset must contain a correct sample
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def per_problem_pass_at_k(samples: pd.DataFrame, ks: Iterable[int]) -> pd.DataFrame:
    """One row per problem: problem_id, benchmark, group, n, c, pass@k for each k (fraction 0-1).

    A problem with fewer than k samples gets NaN for that k (one warning per call, naming how many
    problems); duplicate (benchmark, problem_id, sample_idx) rows and ungraded (NaN) `correct`
    values raise, because either would silently change n or c.
    """
    ks = _check_ks(ks)
    _check_samples(samples)
    correct = samples["correct"].astype(bool).astype(int)
    grouped = samples.assign(correct=correct).groupby(PROBLEM_KEY, sort=True)
    table = grouped.agg(group=("group", "first"), n=("correct", "size"), c=("correct", "sum"))
    table = table.reset_index()[["problem_id", "benchmark", "group", "n", "c"]]
    short = {}
    for k in ks:
        # A (n, c) pair repeats across problems; the loop is over problems (hundreds), fine.
        table[f"pass@{k}"] = [pass_at_k(n, c, k) if n >= k else math.nan for n, c in zip(table["n"], table["c"])]
        short[k] = int((table["n"] < k).sum())
    if any(short.values()):
        detail = ", ".join(f"k={k}: {m}" for k, m in short.items() if m)
        warnings.warn(
            f"pass@k: problems with fewer than k samples get NaN and are left out of means ({detail})",
            stacklevel=2,
        )
    return table


def summarize_pass_at_k(samples: pd.DataFrame, ks: Iterable[int]) -> dict:
    """pass@k in PERCENT per benchmark, per group (pooled problems) and macro (mean of groups).

    Returns {"per_benchmark": {bench: {"pass@k": pct}}, "per_group": {...}, "macro": {...},
    "n_problems": {"per_benchmark": {...}, "per_group": {...}, "macro": total}, "ci": {"per_benchmark":
    {bench: {"pass@k": [low, high]}}, "per_group": ..., "macro": ...} (95% bootstrap over problems,
    percent), "macro_label", "paper_sets", "paper_sets_reasons"} (see macro_provenance); NaN -> None.
    """
    ks = _check_ks(ks)
    table = per_problem_pass_at_k(samples, ks)
    cols = [f"pass@{k}" for k in ks]
    pct = table[cols] * 100.0
    per_benchmark = pct.groupby(table["benchmark"]).mean()
    per_group = pct.groupby(table["group"]).mean()
    macro = per_group.mean(skipna=False)  # a group with no value makes the macro undefined
    summary = {
        "per_benchmark": per_benchmark.to_dict(orient="index"),
        "per_group": per_group.to_dict(orient="index"),
        "macro": macro.to_dict(),
        "n_problems": {
            "per_benchmark": table.groupby("benchmark").size().to_dict(),
            "per_group": table.groupby("group").size().to_dict(),
            "macro": len(table),
        },
        "ci": _pass_cis(pct.assign(benchmark=table["benchmark"], group=table["group"]), cols),
        **macro_provenance(table.groupby("group").size().to_dict()),
    }
    return to_jsonable(summary)


def _pass_cis(pct: pd.DataFrame, cols: list[str]) -> dict:
    """[low, high] of each pass@k (percent) per benchmark, group and macro: scoped_cis, one k at a
    time (a k some problems have too few samples for drops only those problems from its CI)."""
    out: dict = {"per_benchmark": {}, "per_group": {}, "macro": {}}
    for col in cols:
        cis = scoped_cis(pct, col, levels=("benchmark", "group"))
        for level, key in (("benchmark", "per_benchmark"), ("group", "per_group")):
            for name, ci in cis[level].items():
                out[key].setdefault(name, {})[col] = [ci.low, ci.high]
        if "macro" in cis:
            out["macro"][col] = [cis["macro"].low, cis["macro"].high]
    return out


def macro_provenance(n_per_group: Mapping[str, int], warn: bool = False) -> dict:
    """{"macro_label", "paper_sets", "paper_sets_reasons"} for a macro over groups of these sizes.

    "macro" (the paper's name) only for exactly the paper's four groups at the paper's sizes;
    otherwise "macro over these groups" and the reasons, logged once when `warn`."""
    reasons = paper_set_reasons(n_per_group)
    if reasons and warn:
        log.warning(
            "not the paper's problem sets (%s): the macro is reported as '%s', not as the paper's macro",
            "; ".join(reasons),
            OTHER_MACRO_LABEL,
        )
    return {
        "macro_label": OTHER_MACRO_LABEL if reasons else PAPER_MACRO_LABEL,
        "paper_sets": not reasons,
        "paper_sets_reasons": reasons,
    }


def _check_ks(ks: Any) -> list[int]:  # an int, or ints in a list, tuple or array
    ks = [operator.index(k) for k in ([ks] if np.ndim(ks) == 0 else ks)]
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be a non-empty list of integers >= 1, got {ks}")
    return sorted(set(ks))


def _check_samples(samples: pd.DataFrame) -> None:
    """Refuse inputs that would silently distort n or c (see per_problem_pass_at_k)."""
    missing = [col for col in REQUIRED_COLUMNS if col not in samples.columns]
    if missing:
        raise ValueError(f"samples lack columns {missing}; required: {list(REQUIRED_COLUMNS)}")
    if len(samples) == 0:
        raise ValueError("samples is empty")
    # Only booleans (or 0/1) count: NaN means ungraded, and a string "False" would cast to True.
    bad = ~samples["correct"].isin([True, False])
    if bad.any():
        raise ValueError(f"{int(bad.sum())} samples have a `correct` value that is not True/False")
    dup = samples.duplicated(SAMPLE_KEY)
    if dup.any():
        raise ValueError(
            f"{int(dup.sum())} duplicate (benchmark, problem_id, sample_idx) rows; "
            "filter one run/mode before computing pass@k"
        )
    groups_per_bench = samples.groupby("benchmark")["group"].nunique()
    if (groups_per_bench > 1).any():
        bad = sorted(groups_per_bench[groups_per_bench > 1].index)
        raise ValueError(f"benchmarks with more than one group: {bad}")
