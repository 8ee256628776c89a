"""The metric registry: every metric a run folder yields, defined once (name, label, unit, direction,
decimals, where its per-sample values come from, how they aggregate), and the one cell formatting.

Report tables, figures, `compare`, the terminal tables and the toy world's summary read metric
metadata here, so a unit or a number of decimals is never written twice.

    from tandem_eval.metrics.registry import METRICS, lookup, header, fmt_value
    m, k = lookup("handoff_pass@4")          # (Metric handoff_pass@K, 4)
    header("tax@4")                           # "tax@4 (pts)"
    fmt_value(55.61, 53.5, 57.7, m.decimals)  # "55.6 ± 2.1"

Names with `@K` take a number (pass@4, tax@4). The drift estimators (`DRIFT_ESTIMATORS`: each one's
per-token formula, label, whether it needs exact KL, its Table 2 column) are one registry too: the drift
lens computes them, and report, compare and `runs` read their names and order here. Standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

PER_PROBLEM_PASS = "pass@k per problem (unbiased, over its n samples)"
PER_PROBLEM_MEAN = "mean over the problem's samples of the lens table's per-sample column"
PAIRED = "solo minus handoff per problem (paired runs)"


@dataclass(frozen=True)
class Metric:
    """One metric. `name` is what users type (`compare --metric`), with K for a number; `label` may
    hold "{k}"; `better` is "max" or "min"; `source` is (lens table, per-sample column) for lens
    metrics, None for those computed from samples.parquet; `aggregate` says how a problem's value is made."""

    name: str
    label: str
    unit: str
    better: str
    decimals: int
    aggregate: str
    source: tuple[str, str] | None = None
    mode: str = "solo"  # the run mode the metric reads (pass@K: the run's own)

    def header(self, k: int | None = None) -> str:
        """'tax@4 (pts)': the label (K filled in) and the unit."""
        return f"{self.label.format(k=k)} ({self.unit})"


def _lens(name: str, label: str, unit: str, table: str, column: str) -> Metric:
    return Metric(name, label, unit, "min", 3, PER_PROBLEM_MEAN, (table, column))


@dataclass(frozen=True)
class DriftEstimator:
    """One estimator of KL(senior || junior) per CoT token, from what teacher forcing gives a CoT
    (`per_token` reads {"senior_lp", "junior_lp": each scored token's log-prob under either model;
    "kl", "kl_reverse": the exact forward and reverse KL over the vocabulary, NaN unless `exact`}).
    The drift lens (score/lens.py) writes every estimator as its own column, the mean over the CoT."""

    label: str
    per_token: Callable[[dict], Any]  # an array of one value per scored token
    exact: bool = False  # needs both models' full distributions (an engine with exact_kl); NaN otherwise
    # its Table 2 column, in this order (the first one a drift table holds is also metric "kl"); None: no column
    column: int | None = None


def _k1(t: dict):
    return t["senior_lp"] - t["junior_lp"]  # log p_s(x_t) - log p_j(x_t)


def _k3(t: dict):
    import numpy as np  # on first use: this module loads with the standard library only

    k1 = _k1(t)
    return np.expm1(-k1) + k1  # (r - 1) - log r with log r = -k1, r = p_j / p_s


# The drift estimators, in the drift table's column order (metrics.json too). Table 2 shows the exact one,
# then k3, then k1: each estimator in its own column, never one column mixing them.
DRIFT_ESTIMATORS: dict[str, DriftEstimator] = {
    "kl_exact": DriftEstimator("KL exact", lambda t: t["kl"], exact=True, column=0),
    "kl_reverse": DriftEstimator("KL reverse", lambda t: t["kl_reverse"], exact=True),
    "kl_k1": DriftEstimator("KL k1 (MC)", _k1, column=2),
    "kl_k3": DriftEstimator("KL k3 (MC)", _k3, column=1),
}


def drift_columns() -> list[str]:
    """The drift estimators Table 2 shows, in its order (exact first): also the order metric "kl" tries."""
    shown = [(e.column, name) for name, e in DRIFT_ESTIMATORS.items() if e.column is not None]
    return [name for _, name in sorted(shown)]


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("pass@K", "pass@{k}", "%", "max", 1, PER_PROBLEM_PASS, mode="any"),
        Metric("solo_pass@K", "solo pass@{k}", "%", "max", 1, PER_PROBLEM_PASS),
        Metric("handoff_pass@K", "handoff pass@{k}", "%", "max", 1, PER_PROBLEM_PASS, mode="handoff"),
        Metric("tax@K", "tax@{k}", "pts", "min", 1, PAIRED, mode="handoff"),
        Metric("retention@K", "retention@{k}", "%", "max", 1, "handoff / solo pass@k (paired runs)", mode="handoff"),
        _lens("junior_nll", "junior NLL", "nats/tok", "legibility", "junior_nll_mean"),  # same-vocabulary juniors
        _lens("junior_bpb", "junior NLL", "bits/byte", "legibility", "junior_bpb"),  # any junior
        *(_lens(name, e.label, "nats/tok", "drift", name) for name, e in DRIFT_ESTIMATORS.items()),
    )
}
LENS_METRICS = {name: m.source for name, m in METRICS.items() if m.source}  # name -> (lens table, column)
COMPARABLE = [name for name, m in METRICS.items() if m.mode != "any"]  # those that name the run mode they read
_WITH_K = re.compile(r"^(?P<base>.+)@(?P<k>\d+)$")


def lookup(name: str) -> tuple[Metric, int | None] | None:
    """(the metric, K) of a metric name such as `kl_exact` or `handoff_pass@4`; None if unknown."""
    if name in METRICS and not name.endswith("@K"):
        return METRICS[name], None
    m = _WITH_K.match(name)
    if m and f"{m['base']}@K" in METRICS:
        return METRICS[f"{m['base']}@K"], int(m["k"])
    return None


def is_pass(metric: Metric) -> bool:
    return metric.aggregate == PER_PROBLEM_PASS


def header(name: str) -> str:
    """The column header of a metric name: `solo_pass@1` -> 'solo pass@1 (%)'."""
    metric, k = cast(tuple[Metric, int | None], lookup(name))  # cast: callers pass registered metric names
    return metric.header(k)


# ---- cell formatting ----------------------------------------------------------------------------


def fixed(x: float, decimals: int) -> str:
    """x with `decimals` decimals, never '-0.0'."""
    s = f"{x:.{decimals}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s


def fmt_value(est: float, low: float, high: float, decimals: int, pm: str = "±") -> str:
    """'55.6 ± 2.1' (± half-width of the CI), '55.6' without a CI, '–' without a value."""
    if not math.isfinite(est):
        return "–"
    text = fixed(est, decimals)
    if math.isfinite(low) and math.isfinite(high):
        text += f" {pm} {fixed((high - low) / 2, decimals)}"
    return text


def fmt_p(p: float | None) -> str:
    """A p-value with two significant digits ('0.0015', '0.23', '1'), '<1e-4' below that, '-' without one:
    a fixed 2 decimals would print a clear effect's 0.0015 as '0.00'."""
    if p is None or not math.isfinite(p):
        return "-"
    return "<1e-4" if p < 1e-4 else f"{p:.2g}"


def fmt_interval(mean: float, ci, decimals: int = 1, signed: bool = False) -> str:
    """'+1.2 [-0.3, +2.7]' (signed) or '1.2 [0.3, 2.7]'; '–' without an interval."""
    if ci is None:
        return "–"
    sign = "+" if signed else ""
    lo, hi = ci
    return f"{mean:{sign}.{decimals}f} [{lo:{sign}.{decimals}f}, {hi:{sign}.{decimals}f}]"
