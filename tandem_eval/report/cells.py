"""The cells of Table 2: its columns (each a metric of the registry under a short key) and, for one
arm, every column's estimate and 95% CI per benchmark group and macro, from one seed's solo and
handoff runs or pooled over several seeds (two-way clustered bootstrap).

    from tandem_eval.report.cells import COLUMNS, arm_cells, seed_cells
    arm_cells(solo_run, handoff_run, "tandem", k=4, n_boot=2000, seed=0)   # {scope: {key: {estimate, low, high}}}

tandem_eval.report.tables assembles the cells of every arm into the table and writes it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import pandas as pd

from tandem_eval.metrics.registry import DRIFT_ESTIMATORS, METRICS, Metric, drift_columns
from tandem_eval.metrics.stats import MACRO, scoped_cis
from tandem_eval.metrics.tax import communication_tax
from tandem_eval.run.lens_layout import LensError
from tandem_eval.run.runs import Run, problem_values
from tandem_eval.schemas import BOOT_SEED, N_BOOT


@dataclass(frozen=True)
class Column:
    """A column of Table 2: its key in the table's rows and CSV, and the metric it shows (the registry's)."""

    key: str
    metric: Metric

    @property
    def decimals(self) -> int:
        return self.metric.decimals

    @property
    def better(self) -> str:
        return self.metric.better


COLUMNS = [
    Column(key, METRICS[name])
    for key, name in (
        ("solo", "solo_pass@K"),
        ("handoff", "handoff_pass@K"),
        ("retention", "retention@K"),
        ("tax", "tax@K"),
        ("nll", "junior_nll"),  # same-vocabulary juniors only
        ("bpb", "junior_bpb"),  # any junior; shown when some junior has another vocabulary
    )
] + [Column(name, METRICS[name]) for name in drift_columns()]
# Drift estimators, each in its own column (never one column mixing them; metrics/registry.py's order). The
# Monte-Carlo columns appear only when some senior has no exact KL; then they are filled for every senior
# that has them.
DRIFT_COLUMNS = tuple(drift_columns())
MC_COLUMNS = tuple(name for name in DRIFT_COLUMNS if not DRIFT_ESTIMATORS[name].exact)
LENS_COLUMNS = [c for c in COLUMNS if c.metric.source]  # read from the solo run's lens tables


def scoped_ci(
    values: pd.DataFrame, column: str, n_boot: int = N_BOOT, seed: int = BOOT_SEED, cluster: str | None = None
) -> dict:
    """Per group and macro (equal weight per group, stratified bootstrap) CI of the mean of
    `column` over problems (stats.scoped_cis). `values`: one row per problem (per seed x problem
    with `cluster`) with a `group` column."""
    cis = scoped_cis(values, column, n_boot=n_boot, seed=seed, cluster=cluster)
    return {**cis["group"], **({MACRO: cis[MACRO]} if MACRO in cis else {})}


def passk_cis(run: Run, k: int, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> dict:
    """Per group and macro CI of a run's pass@k, in percent."""
    return scoped_ci(problem_values(run, f"pass@{k}"), "value", n_boot, seed)


def side_cis(run: Run | None, metric: str, n_boot: int, seed: int) -> dict:
    """Per group and macro CI of a lens metric (runs.LENS_METRICS) over problems; {} without the table."""
    if run is None:
        return {}
    try:
        values = problem_values(run, metric)
    except LensError:
        return {}
    # NaN throughout (exact KL of a Monte-Carlo drift table): no cell, so the column can drop, not a CI of nothing
    return scoped_ci(values, "value", n_boot, seed) if len(values.dropna()) else {}


def _ci_dict(ci) -> dict:
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high}


def arm_cells(solo: Run | None, hand: Run | None, arm: str, k: int, n_boot: int, seed: int) -> dict:
    """{scope: {metric: {estimate, low, high}}} for one arm's solo and handoff runs."""
    cells: dict[str, dict] = {}

    def put(metric, cis):
        for scope, ci in cis.items():
            cells.setdefault(scope, {})[metric] = _ci_dict(ci)

    if solo is not None and hand is not None:
        try:
            tax = communication_tax(solo.samples(), hand.samples(), [k], n_boot=n_boot, seed=seed)
        except ValueError as e:  # different problem sets: report both runs, but no paired tax
            warnings.warn(f"{arm}: no communication tax ({e})", stacklevel=2)
            tax = None
        if tax is not None:
            scopes = {**tax["per_group"], MACRO: tax["macro"]}
            for scope, entry in scopes.items():
                entry = entry.get(f"pass@{k}", {})
                for metric in ("solo", "handoff", "tax", "retention"):
                    if metric in entry:
                        # communication_tax gives retention as a fraction; the table's unit is percent
                        cell = {
                            x: as_float(entry[metric][x]) * (100.0 if metric == "retention" else 1.0)
                            for x in ("estimate", "low", "high")
                        }
                        cells.setdefault(scope, {})[metric] = cell
    # with a paired tax, solo and handoff came from its joint resampling (one resampling for all four cells);
    # their own CIs only where there is no tax
    for metric, run in (("solo", solo), ("handoff", hand)):
        if run is not None and not any(metric in c for c in cells.values()):
            put(metric, passk_cis(run, k, n_boot, seed))
    for c in LENS_COLUMNS:
        put(c.key, side_cis(solo, c.metric.name, n_boot, seed))
    return cells


def seed_cells(seeds: list[tuple], k: int, n_boot: int, seed: int) -> dict:
    """{scope: {metric: {estimate, low, high}}} of one arm over several seeds' (solo, handoff) runs:
    mean over seeds x problems, CI from the two-way clustered bootstrap (stats.scoped_cis, cluster=seed)."""
    cells: dict[str, dict] = {}

    def frame(runs, metric):
        parts = []
        for i, r in enumerate(runs):
            try:
                parts.append(problem_values(r, metric).assign(seed=i))
            except LensError:
                return None
        return pd.concat(parts) if parts else None

    def put(metric, cis):
        for scope, ci in cis.items():
            cells.setdefault(scope, {})[metric] = _ci_dict(ci)

    solos, hands = [p[0] for p in seeds if p[0] is not None], [p[1] for p in seeds if p[1] is not None]
    both = [p for p in seeds if p[0] is not None and p[1] is not None]
    # tax and retention pair each seed's solo and handoff runs: only when every seed has both, else each mode
    # gets its own CI over the seeds it has
    if both and len(both) == len(seeds):
        sv, hv = frame([p[0] for p in both], f"pass@{k}"), frame([p[1] for p in both], f"pass@{k}")
        joint = sv.rename(columns={"value": "solo"}).set_index("seed", append=True)
        joint = joint.join(hv.set_index("seed", append=True)["value"].rename("handoff"), how="inner")
        joint = joint.reset_index("seed")
        stats = {
            "solo": lambda m: m[:, 0],
            "handoff": lambda m: m[:, 1],
            "tax": lambda m: m[:, 0] - m[:, 1],
            "retention": lambda m: 100.0 * m[:, 1] / m[:, 0],
        }
        cis = scoped_cis(joint, ["solo", "handoff"], stats=stats, n_boot=n_boot, seed=seed, cluster="seed")
        for scope, entry in {**cis["group"], MACRO: cis.get(MACRO)}.items():
            if entry is not None:
                for metric, ci in entry.items():
                    cells.setdefault(scope, {})[metric] = _ci_dict(ci)
    else:
        for metric, runs in (("solo", solos), ("handoff", hands)):
            if runs:
                put(metric, scoped_ci(frame(runs, f"pass@{k}"), "value", n_boot, seed, cluster="seed"))
    for c in LENS_COLUMNS:
        # lens outputs are scored on the senior's solo CoTs: a handoff run has none
        values = frame(solos, c.metric.name) if solos else None
        if values is not None and len(values.dropna()):
            put(c.key, scoped_ci(values, "value", n_boot, seed, cluster="seed"))
    return cells


def as_float(x) -> float:
    return math.nan if x is None else float(x)
