"""Run-to-run comparison of two seniors on one metric: per-problem values and a paired test.

`tandem-eval compare RUN_A RUN_B --metric M` reads M per problem from each run (pass@k from
samples.parquet, lens metrics from legibility.parquet / drift.parquet) and reports A - B per
benchmark group and macro with a paired-bootstrap CI and a sign-flip p-value
(`metrics.stats.paired_compare`).

    from tandem_eval.compare import problem_values, compare_values
    table = compare_values(problem_values(run_a, samples_a, "kl_exact"), problem_values(run_b, samples_b, "kl_exact"))
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .lens import DRIFT_METRICS, KEYS, PROBLEM_KEY, LensError, LensOptions, lens_file, per_problem
from .metrics.passk import per_problem_pass_at_k
from .metrics.stats import macro_mean, paired_compare

_PASS = re.compile(r"^(solo|handoff)_pass@(\d+)$")
LENS_FILES = {
    "junior_nll": ("legibility", "junior_nll_mean"),
    "junior_bpb": ("legibility", "junior_bpb"),
    **{m: ("drift", m) for m in DRIFT_METRICS},
}
COMPARE_METRICS = ["solo_pass@K", "handoff_pass@K", *LENS_FILES]


def metric_mode(metric: str) -> str:
    """The run mode a metric is read from (solo or handoff); raises on an unknown metric."""
    m = _PASS.match(metric)
    if m:
        return m.group(1)
    if metric in LENS_FILES:
        return "solo"
    raise LensError(f"unknown metric {metric!r}; valid: {', '.join(COMPARE_METRICS)} (K a number, e.g. handoff_pass@4)")


def problem_values(
    run_path, samples: pd.DataFrame, metric: str, exclude_truncated: bool = False, junior: str | None = None
) -> pd.DataFrame:
    """Per-problem values of `metric` for one run: index (benchmark, problem_id), columns value, group.
    pass@k in percent; lens metrics read RUN/legibility.parquet or RUN/drift.parquet."""
    m = _PASS.match(metric)
    if m:  # pass@k counts every sample (a truncated CoT is simply wrong): exclude_truncated is ignored
        k = int(m.group(2))
        pp = per_problem_pass_at_k(samples, [k]).set_index(PROBLEM_KEY)
        return pd.DataFrame({"value": 100 * pp[f"pass@{k}"], "group": pp["group"]})
    name, column = LENS_FILES[metric]
    path = lens_file(Path(run_path), name, junior)  # RUN/lens/<junior>/NAME.parquet (or the older RUN/NAME.parquet)
    per_sample = pd.read_parquet(path, columns=KEYS + ["truncated", column])
    if exclude_truncated:
        per_sample = per_sample[~per_sample["truncated"]]
    return per_problem(per_sample, column)


def compare_values(
    a: pd.DataFrame, b: pd.DataFrame, opts: LensOptions = LensOptions(), on_mismatch: str = "raise"
) -> pd.DataFrame:
    """Paired comparison a - b per benchmark group and macro (stats.paired_compare; groups from a)."""
    groups = a["group"]
    rows = [(g, a["value"][a["group"] == g], b["value"][b["group"] == g], None) for g in sorted(groups.unique())]
    rows.append(("macro", a["value"], b["value"], groups))
    table = []
    try:
        for name, va, vb, grp in rows:
            p = paired_compare(
                va, vb, n_boot=opts.n_boot, seed=opts.seed, groups=grp, on_mismatch=on_mismatch, alpha=opts.alpha
            )
            both = va.dropna().index.intersection(vb.dropna().index)  # the problems actually paired
            table.append(
                {
                    "group": name,
                    "a": _mean(va[both], grp),
                    "b": _mean(vb[both], grp),
                    "diff": p.diff,
                    "low": p.low,
                    "high": p.high,
                    "p_value": p.p_value,
                    "n_problems": p.n_problems,
                }
            )
    except ValueError as e:
        raise LensError(f"cannot pair the two runs: {e}") from None
    return pd.DataFrame(table)


def _mean(v: pd.Series, groups: pd.Series | None) -> float:
    return float(v.mean()) if groups is None else macro_mean(v, groups.reindex(v.index))
