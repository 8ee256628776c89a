"""Run-to-run comparison of two seniors on one metric: per-problem values and a paired test.

`tandem-eval compare RUN_A RUN_B --metric M` reads M per problem from each run (pass@k from
samples.parquet, lens metrics from legibility.parquet / drift.parquet) and reports A - B per
benchmark group and macro with a paired-bootstrap CI and a sign-flip p-value
(`metrics.stats.paired_compare`). `--metric tax@K` / `retention@K` compares the two seniors'
communication tax: each handoff run with the solo run it was measured against (4 runs, problems
resampled jointly; `metrics.tax.tax_difference`).

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
from .metrics.tax import tax_difference
from .results import RunFolder, RunFolderError, verify_run

_PASS = re.compile(r"^(solo|handoff)_pass@(\d+)$")
_TAX = re.compile(r"^(tax|retention)@(\d+)$")
LENS_FILES = {
    "junior_nll": ("legibility", "junior_nll_mean"),
    "junior_bpb": ("legibility", "junior_bpb"),
    **{m: ("drift", m) for m in DRIFT_METRICS},
}
COMPARE_METRICS = ["solo_pass@K", "handoff_pass@K", "tax@K", "retention@K", *LENS_FILES]
MISMATCH_FIX = "pass --on-mismatch intersect to compare the shared problems"


def metric_mode(metric: str) -> str:
    """The run mode a metric is read from (solo or handoff); raises on an unknown metric."""
    m = _PASS.match(metric)
    if m:
        return m.group(1)
    if _TAX.match(metric):
        return "handoff"
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
    _check_problem_sets(a.index, b.index, on_mismatch)
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


def _check_problem_sets(a: pd.Index, b: pd.Index, on_mismatch: str) -> None:
    """Refuse runs on different problems (unless on_mismatch='intersect'), naming the CLI option."""
    only_a, only_b = a.difference(b), b.difference(a)
    if (len(only_a) or len(only_b)) and on_mismatch == "raise":
        raise LensError(
            f"cannot pair the two runs: problem sets differ ({len(only_a)} problems only in A, {len(only_b)} "
            f"only in B, {len(a.intersection(b))} shared); {MISMATCH_FIX}"
        )


def is_tax_metric(metric: str) -> bool:
    return _TAX.match(metric) is not None


def solo_of(handoff: RunFolder) -> RunFolder:
    """The verified solo run a handoff run's tax was measured against: the one recorded in its
    metrics.json/config.json, else its sibling OUT/solo (a results folder that was moved)."""
    record = handoff.config().get("solo_run") or {}
    recorded = handoff.metrics().get("solo_run") or record.get("path")
    for cand in (recorded, handoff.path.parent / "solo"):
        if cand and (Path(cand) / "config.json").exists():
            solo = verify_run(cand)
            if record.get("fingerprint") not in (None, solo.config()["fingerprint"]):
                raise RunFolderError(
                    f"{solo.path} is not the solo run {handoff.path} was measured against (fingerprint "
                    f"{solo.config()['fingerprint']}, recorded {record['fingerprint']}); restore it or rerun the "
                    "handoff"
                )
            return solo
    raise RunFolderError(
        f"{handoff.path} names no solo run that exists (recorded {recorded}, no sibling solo/); "
        "rerun `tandem-eval handoff` (with --solo-run SOLO if it lives elsewhere)"
    )


def tax_compare(
    handoff_a: RunFolder, handoff_b: RunFolder, metric: str, opts: LensOptions = LensOptions(), on_mismatch="raise"
) -> pd.DataFrame:
    """tax@K or retention@K of senior A minus senior B (rows as compare_values), from two handoff runs
    and their solo runs."""
    m = _TAX.match(metric)
    if m is None:
        raise LensError(f"not a tax metric: {metric!r}; use tax@K or retention@K (K a number)")
    samples = [rf.load_samples() for rf in (solo_of(handoff_a), handoff_a, solo_of(handoff_b), handoff_b)]
    try:
        rows = tax_difference(
            *samples, int(m.group(2)), m.group(1), opts.n_boot, opts.seed, opts.alpha, on_mismatch=on_mismatch
        )
    except ValueError as e:
        fix = f"; {MISMATCH_FIX}" if "problem sets differ" in str(e) else ""
        raise LensError(f"cannot pair the two seniors' runs: {e}{fix}") from None
    return pd.DataFrame(rows)
