"""Table 2 of the paper, for any set of arms: per benchmark group and macro, each senior's solo
pass@k, handoff pass@k, retention, communication tax, junior NLL (legibility) and KL drift, as
mean ± half-width of the 95% bootstrap CI, best value per column in bold; Markdown and LaTeX.

    from tandem_eval.report.collect import collect
    from tandem_eval.report.tables import table2, to_markdown, to_latex
    t = table2(collect(["results/toy"]), k=4)      # a Table: rows (DataFrame) + caption facts
    print(to_markdown(t)); open("t.tex", "w").write(to_latex(t))

Numbers come from tandem_eval.metrics (pass@k, communication_tax, bootstrap_ci) on the run
folders' samples; nothing is re-implemented here. Output is deterministic: fixed bootstrap seed,
rows sorted (groups alphabetically, macro last; seniors by label), fixed float formatting, no
paths or dates, so a rerun on the same run folders is byte-identical.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tandem_eval.metrics.stats import bootstrap_ci
from tandem_eval.metrics.tax import communication_tax
from tandem_eval.report.collect import Collection, Run

MACRO = "macro"
N_BOOT = 2000
SEED = 0


@dataclass(frozen=True)
class Column:
    key: str
    header: str  # "{k}" is replaced by the table's k
    unit: str
    better: str  # "max" | "min"
    decimals: int


COLUMNS = [
    Column("solo", "solo pass@{k}", "%", "max", 1),
    Column("handoff", "handoff pass@{k}", "%", "max", 1),
    Column("retention", "retention@{k}", "%", "max", 1),
    Column("tax", "tax@{k}", "pts", "min", 1),
    Column("nll", "junior NLL", "nats/tok", "min", 3),
    Column("kl", "KL drift", "nats/tok", "min", 3),
]
DRIFT_ESTIMATORS = ("kl_exact", "kl_k3", "kl_k1")  # first one with values is used


@dataclass
class Table:
    rows: pd.DataFrame  # scope, n_problems, senior, then <key>, <key>_low, <key>_high per column
    k: int
    schedule: str | None
    n_boot: int
    columns: list[Column] = field(default_factory=list)  # the non-empty ones, in order
    drift_estimator: str | None = None


# ---- numbers ---------------------------------------------------------------------------------


def scoped_ci(values: pd.DataFrame, column: str, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """Per group and macro (equal weight per group, stratified bootstrap) CI of the mean of
    `column` over problems. `values`: one row per problem with a `group` column."""
    out = {}
    v = values[["group", column]].dropna()
    for g, part in v.groupby("group", sort=True):
        out[g] = bootstrap_ci(part[column], n_boot=n_boot, seed=seed)
    if len(v):
        out[MACRO] = bootstrap_ci(v[column], n_boot=n_boot, seed=seed, groups=v["group"])
    return out


def passk_cis(run: Run, k: int, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """Per group and macro CI of a run's pass@k, in percent."""
    pp = run.per_problem([k]).set_index(["benchmark", "problem_id"])
    return scoped_ci(pp.assign(value=pp[f"pass@{k}"] * 100.0), "value", n_boot, seed)


def per_sample_side(run: Run | None, name: str) -> tuple[pd.DataFrame | None, str | None]:
    """Per-sample scalar of a run's legibility (junior NLL, nats/token) or drift (KL) table:
    (frame with benchmark, problem_id, group, value; the source column) or (None, None)."""
    df = run.side_table(name) if run is not None else None
    if df is None:
        return None, None
    if name == "legibility":
        if "junior_nll_mean" in df.columns and df["junior_nll_mean"].notna().any():
            source, value = "junior_nll_mean", df["junior_nll_mean"]
        elif {"junior_nll_sum", "n_tokens"} <= set(df.columns):
            source, value = "junior_nll_sum/n_tokens", df["junior_nll_sum"] / df["n_tokens"].replace(0, np.nan)
        else:
            return None, None
    else:
        source = next((c for c in DRIFT_ESTIMATORS if c in df.columns and df[c].notna().any()), None)
        if source is None:
            return None, None
        value = df[source]
    out = df[["benchmark", "problem_id", "group"]].assign(value=pd.to_numeric(value, errors="coerce"))
    return out.dropna(subset=["value"]), source


def side_cis(run: Run | None, name: str, n_boot: int, seed: int) -> tuple[dict, str | None]:
    per_sample, source = per_sample_side(run, name)
    if per_sample is None or per_sample.empty:
        return {}, None
    per_problem = per_sample.groupby(["benchmark", "problem_id"], sort=True).agg(
        group=("group", "first"), value=("value", "mean")
    )
    return scoped_ci(per_problem, "value", n_boot, seed), source


def _ci_dict(ci) -> dict:
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high}


def _arm_cells(col: Collection, arm: str, k: int, schedule: str | None, n_boot: int, seed: int):
    """{scope: {metric: {estimate, low, high}}} for one arm, plus the drift estimator used."""
    solo = col.solo(arm)
    hand = col.handoff(arm, schedule) if schedule else None
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
                        e = {
                            x: _num(entry[metric][x]) * (100.0 if metric == "retention" else 1.0)
                            for x in ("estimate", "low", "high")
                        }
                        cells.setdefault(scope, {})[metric] = e
    for metric, run in (("solo", solo), ("handoff", hand)):
        if run is not None and not any(metric in c for c in cells.values()):
            put(metric, passk_cis(run, k, n_boot, seed))
    nll, _ = side_cis(solo, "legibility", n_boot, seed)
    put("nll", nll)
    kl, estimator = side_cis(solo, "drift", n_boot, seed)
    put("kl", kl)
    return cells, estimator


def _num(x) -> float:
    return math.nan if x is None else float(x)


def default_k(col: Collection) -> int:
    """The paper's table uses pass@4; else the largest k every run has."""
    ks = col.common_ks()
    if not ks:
        raise ValueError("runs share no k; pass --k")
    return 4 if 4 in ks else max(ks)


def table2(
    col: Collection, k: int | None = None, schedule: str | None = None, n_boot: int = N_BOOT, seed: int = SEED
) -> Table:
    """Table 2 rows for every arm of `col` (handoff `schedule`: default the primary one)."""
    k = default_k(col) if k is None else int(k)
    schedule = schedule or col.primary_schedule()
    rows, estimators, sizes = [], set(), {}
    for arm in col.arms:
        cells, est = _arm_cells(col, arm, k, schedule, n_boot, seed)
        if est:
            estimators.add(est)
        run = col.solo(arm) or (col.handoff(arm, schedule) if schedule else None)
        if run is not None:
            pp = run.per_problem([k])
            for scope, n in {**pp.groupby("group").size().to_dict(), MACRO: len(pp)}.items():
                sizes[scope] = max(sizes.get(scope, 0), int(n))
        for scope, metrics in cells.items():
            row = {"scope": scope, "senior": arm}
            for c in COLUMNS:
                m = metrics.get(c.key, {})
                row.update(
                    {
                        c.key: _num(m.get("estimate")),
                        f"{c.key}_low": _num(m.get("low")),
                        f"{c.key}_high": _num(m.get("high")),
                    }
                )
            rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        raise ValueError("no arm has a solo or handoff run to tabulate")
    df["n_problems"] = df["scope"].map(sizes).fillna(0).astype(int)
    df["_order"] = (df["scope"] == MACRO).astype(int)
    df = df.sort_values(["_order", "scope", "senior"], kind="stable").drop(columns="_order")
    columns = [c for c in COLUMNS if df[c.key].notna().any()]
    keep = ["scope", "n_problems", "senior"] + [f"{c.key}{s}" for c in columns for s in ("", "_low", "_high")]
    est = sorted(estimators)[0] if estimators else None
    if len(estimators) > 1:
        warnings.warn(
            f"arms use different drift estimators {sorted(estimators)}; the KL column mixes them", stacklevel=2
        )
    return Table(df[keep].reset_index(drop=True), k, schedule, n_boot, columns, est)


# ---- formatting ------------------------------------------------------------------------------


def fmt_value(est: float, low: float, high: float, decimals: int, pm: str = "±") -> str:
    """'55.6 ± 2.1' (± half-width of the CI), '55.6' without a CI, '–' without a value."""
    if not math.isfinite(est):
        return "–"
    text = _fixed(est, decimals)
    if math.isfinite(low) and math.isfinite(high):
        text += f" {pm} {_fixed((high - low) / 2, decimals)}"
    return text


def _fixed(x: float, decimals: int) -> str:
    s = f"{x:.{decimals}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s  # no "-0.0"


def best_mask(rows: pd.DataFrame, col: Column) -> pd.Series:
    """True where the cell holds the best value of its column within its scope (ties: all),
    judged on the displayed (rounded) values; nothing is marked when fewer than 2 values exist."""
    rounded = rows[col.key].round(col.decimals)
    mask = pd.Series(False, index=rows.index)
    for _, idx in rows.groupby("scope", sort=False).groups.items():
        vals = rounded.loc[idx].dropna()
        if len(vals) >= 2:
            target = vals.max() if col.better == "max" else vals.min()
            mask.loc[vals.index[vals == target]] = True
    return mask


def _scope_label(scope: str, n: int) -> str:
    return f"{'Macro' if scope == MACRO else scope} (n={n})"


def _caption(t: Table) -> str:
    parts = [f"rows: benchmark groups (AIME 24/25/26 pool into one) and their macro; pass@{t.k} in percent"]
    parts.append(f"handoff schedule `{t.schedule}`" if t.schedule else "no handoff runs")
    parts.append(
        f"mean ± half-width of the 95% bootstrap CI ({t.n_boot} resamples of problems; the macro "
        "weights each benchmark group equally and resamples within groups)"
    )
    parts.append("tax = solo − handoff (points, lower is better); retention = handoff / solo")
    if any(c.key == "nll" for c in t.columns):
        parts.append("junior NLL = the junior's mean per-token negative log-likelihood of the senior's solo CoTs")
    if t.drift_estimator:
        parts.append(f"KL drift = KL(senior ‖ junior) per token ({t.drift_estimator})")
    parts.append("bold = best per column within a benchmark")
    return "; ".join(parts) + "."


def _header(c: Column, k: int) -> str:
    return f"{c.header.format(k=k)} ({c.unit})"


def to_markdown(t: Table) -> str:
    cols = t.columns
    lines = [
        "| benchmark | senior | " + " | ".join(_header(c, t.k) for c in cols) + " |",
        "|:--|:--|" + "--:|" * len(cols),
    ]
    marks = {c.key: best_mask(t.rows, c) for c in cols}
    prev = None
    for i, r in t.rows.iterrows():
        scope = _scope_label(r["scope"], r["n_problems"]) if r["scope"] != prev else ""
        prev = r["scope"]
        cells = []
        for c in cols:
            text = fmt_value(r[c.key], r[f"{c.key}_low"], r[f"{c.key}_high"], c.decimals)
            cells.append(f"**{text}**" if marks[c.key][i] else text)
        lines.append(f"| {scope} | {r['senior']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + _caption(t) + "\n"


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def _latex_caption(t: Table) -> str:
    text = latex_escape(_caption(t).replace("`", ""))
    return text.replace("±", r"$\pm$").replace("‖", r"$\|$").replace("−", "$-$")


def to_latex(t: Table, label: str = "tab:handoff") -> str:
    """A booktabs `table` float; needs \\usepackage{booktabs} in the preamble."""
    cols = t.columns
    marks = {c.key: best_mask(t.rows, c) for c in cols}
    head = " & ".join(["Benchmark", "Senior"] + [latex_escape(_header(c, t.k)) for c in cols])
    lines = [
        "% generated by `tandem-eval report`; do not edit by hand",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\setlength{\tabcolsep}{4pt}",
        rf"\caption{{{_latex_caption(t)}}}",
        rf"\label{{{label}}}",
        r"\begin{tabular}{ll" + "r" * len(cols) + "}",
        r"\toprule",
        head + r" \\",
        r"\midrule",
    ]
    prev = None
    for i, r in t.rows.iterrows():
        if prev is not None and r["scope"] != prev:
            lines.append(r"\midrule")
        scope = latex_escape(_scope_label(r["scope"], r["n_problems"])) if r["scope"] != prev else ""
        prev = r["scope"]
        cells = []
        for c in cols:
            text = fmt_value(r[c.key], r[f"{c.key}_low"], r[f"{c.key}_high"], c.decimals, pm=r"$\pm$")
            text = "--" if text == "–" else (f"$-${text[1:]}" if text.startswith("-") else text)
            cells.append(rf"\textbf{{{text}}}" if marks[c.key][i] else text)
        lines.append(" & ".join([scope, latex_escape(r["senior"])] + cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_csv(t: Table) -> str:
    """The table's numbers at full precision (rounded to 6 decimals for stable text)."""
    return t.rows.round(6).to_csv(index=False, float_format="%.6f", lineterminator="\n")
