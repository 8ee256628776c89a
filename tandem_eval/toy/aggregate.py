"""The toy world's summary: `tandem-eval report`'s Table 2 per scenario (one row per arm, mean over
seeds, CI from the seeds x problems clustered bootstrap of tandem_eval.metrics.stats.scoped_cis),
the share of CoTs using the jargon, and the paired tax difference tandem - grpo of each seed
(tandem_eval.compare.tax_compare, the same test as `tandem-eval compare --metric tax@4`).

Reads results/toy/<scenario>/<arm>/seed<S>/{solo,handoff-paragraph} run folders through the report
layer (tandem_eval.report.collect / tables, which read runs with tandem_eval.runs) and writes
results/toy/summary.json, summary.md and summary.png/.pdf. No statistics are computed here.

    python -m tandem_eval.toy.aggregate results/toy      # what trainer/toy_world.py's last stage calls
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..compare import tax_compare
from ..lens import LensOptions
from ..metrics.stats import MACRO, scoped_cis, to_jsonable
from ..report.collect import collect
from ..report.tables import N_BOOT, SEED, table2, to_markdown
from ..results import RunFolder, atomic_write_json, atomic_write_text
from .jargon import uses_jargon

K = 4
ALPHA = 0.05
# summary.json key -> (k of the table, the table's column); KL is the exact estimator
SUMMARY_KEYS = {
    "solo@1": (1, "solo"),
    "solo@4": (K, "solo"),
    "handoff@1": (1, "handoff"),
    "handoff@4": (K, "handoff"),
    "tax@4": (K, "tax"),
    "retention@4": (K, "retention"),
    "junior_nll": (K, "nll"),
    "kl": (K, "kl_exact"),
}


def _macro_rows(t) -> dict[str, pd.Series]:
    """{arm (without the scenario prefix): its macro row} of a report Table."""
    rows = t.rows[t.rows["scope"] == MACRO]
    return {str(r["senior"]).split("/")[-1]: r for _, r in rows.iterrows()}


def _jargon(col, arm_label: str) -> dict | None:
    """Share of an arm's solo CoTs that use the jargon (percent), mean over seeds x problems with the
    report's clustered CI (stats.scoped_cis, cluster = seed)."""
    parts = []
    for run in col.runs:
        if run.arm == arm_label and run.mode == "solo":
            s = run.samples()
            pp = s.assign(value=s["text"].map(uses_jargon) * 100.0).groupby(["benchmark", "problem_id"])
            parts.append(pp.agg(value=("value", "mean"), group=("group", "first")).assign(seed=run.seed or 0))
    if not parts:
        return None
    ci = scoped_cis(pd.concat(parts), "value", n_boot=N_BOOT, seed=SEED, cluster="seed")[MACRO]
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high, "n_seeds": len(parts)}


def tax_vs_grpo(scenario_dir: Path, arm: str = "tandem", base: str = "grpo") -> list[dict]:
    """tax@4 of `arm` minus `base`, per seed both hold (macro rows of compare.tax_compare)."""
    rows = []
    for hand in sorted(scenario_dir.glob(f"{arm}/seed*/handoff-paragraph")):
        other = scenario_dir / base / hand.parent.name / "handoff-paragraph"
        if not (other / "COMPLETE").exists() or not (hand / "COMPLETE").exists():
            continue
        if min(RunFolder(r).config()["config"]["n"] for r in (hand, other)) < K:
            continue  # tax@K needs K samples per problem (the CI-scale toy world draws fewer)
        table = tax_compare(RunFolder(hand), RunFolder(other), f"tax@{K}", LensOptions(n_boot=N_BOOT, seed=SEED))
        macro = table[table["group"] == MACRO].iloc[0].to_dict()
        rows.append({"seed": hand.parent.name, **{k: v for k, v in macro.items() if k != "group"}})
    return rows


def write_summary(results: str | Path, scenarios, arms) -> dict:
    """summary.json/.md/.png of the scenarios under `results` (arms: which arms, in this order)."""
    results = Path(results)
    summary: dict = {"n_boot": N_BOOT, "alpha": ALPHA, "method": "tandem-eval report (Table 2, seeds aggregated)"}
    summary["scenarios"] = {}
    lines = [
        "# Toy world: Table 2 per scenario",
        "",
        "Written by `python -m tandem_eval.toy.aggregate results/toy` from `tandem-eval report`'s tables: one row per",
        "arm, mean over seeds ± half-width of the 95% CI of the seeds x problems bootstrap.",
        "",
    ]
    for sc in scenarios:
        if not (results / sc).is_dir():
            continue
        col = collect([results / sc])
        tables = {k: table2(col, k=k) for k in sorted({k for k, _ in SUMMARY_KEYS.values()})}
        rows = {k: _macro_rows(t) for k, t in tables.items()}
        entry: dict = {}
        for arm in arms:
            if not any(arm in r for r in rows.values()):  # (with n < 4 an arm may have pass@1 rows only)
                continue
            cells = {}
            for key, (k, column) in SUMMARY_KEYS.items():
                r = rows[k].get(arm)
                if r is not None and column in r and np.isfinite(r[column]):
                    cells[key] = {
                        x: float(r[f"{column}{s}"]) for x, s in (("estimate", ""), ("low", "_low"), ("high", "_high"))
                    }
            label = next(run.arm for run in col.runs if run.arm.split("/")[-1] == arm)
            if (jargon := _jargon(col, label)) is not None:
                cells["jargon"] = jargon
            entry[arm] = cells
        taxes = tax_vs_grpo(results / sc)
        entry["tax_vs_grpo"] = taxes
        summary["scenarios"][sc] = entry
        lines += [f"## {sc}", "", to_markdown(tables[K]).rstrip(), ""]
        lines.append(
            "jargon CoTs (%): "
            + "; ".join(f"{a} {_pm(c['jargon'])}" for a, c in entry.items() if isinstance(c, dict) and "jargon" in c)
        )
        if taxes:
            lines += [
                "",
                f"Paired tax@{K} difference tandem − grpo per seed (`tandem-eval compare --metric tax@{K}`: problems",
                "resampled jointly across both seniors' solo and handoff runs; sign-flip p-value):",
                "",
                f"| seed | tandem tax@{K} | grpo tax@{K} | Δ (pts) | 95% CI | p |",
                "|:--|--:|--:|--:|--:|--:|",
                *(
                    f"| {t['seed']} | {t['a']:.1f} | {t['b']:.1f} | {t['diff']:+.1f} "
                    f"| [{t['low']:+.1f}, {t['high']:+.1f}] | {t['p_value']:.3g} |"
                    for t in taxes
                ),
            ]
        lines.append("")
    summary = to_jsonable(summary)
    atomic_write_json(results / "summary.json", summary)
    atomic_write_text(results / "summary.md", "\n".join(lines) + "\n")
    plot_summary(summary, results)
    return summary


def _pm(v: dict) -> str:
    return f"{v['estimate']:.1f} ± {(v['high'] - v['low']) / 2:.1f}"


PLOTTED = [("solo@4", "solo pass@4 (%)"), ("handoff@4", "handoff pass@4 (%)"), ("kl", "KL(senior‖junior) (nats/token)")]


def plot_summary(summary: dict, out: Path) -> list[Path]:
    """summary.png/.pdf: per scenario, each arm's solo and handoff pass@4 and drift, 95% CI bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..report import style

    scenarios = list(summary["scenarios"])
    with style.paper():
        fig, axes = plt.subplots(1, len(PLOTTED), figsize=style.size(2, 0.36), layout="constrained", squeeze=False)
        for ax, (metric, label) in zip(axes[0], PLOTTED):
            arms = [
                a
                for a in ("init", "grpo", "tandem", "kl-reg")
                if any(metric in summary["scenarios"][sc].get(a, {}) for sc in scenarios)
            ]
            width = 0.8 / max(len(arms), 1)
            for i, arm in enumerate(arms):
                vals = [summary["scenarios"][sc].get(arm, {}).get(metric) for sc in scenarios]
                est = [v["estimate"] if v else np.nan for v in vals]
                err = [
                    [v["estimate"] - v["low"] if v else 0 for v in vals],
                    [v["high"] - v["estimate"] if v else 0 for v in vals],
                ]
                x = np.arange(len(scenarios)) + (i - (len(arms) - 1) / 2) * width
                color = style.ARM_COLORS["base"] if arm == "init" else style.arm_color(arm)
                ax.bar(
                    x,
                    est,
                    width,
                    yerr=err,
                    color=color,
                    label="initial senior" if arm == "init" else arm,
                    capsize=2,
                    error_kw={"linewidth": 0.7},
                )
            ax.set_xticks(np.arange(len(scenarios)), scenarios)
            ax.set_ylabel(label)
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncol=4)
        fig.suptitle("toy world: mean over seeds, 95% CI (bootstrap over seeds and problems)")
    return style.save(fig, out, "summary")


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "results/toy")
    write_summary(root, ("self-paired", "jargon"), ("junior", "init", "grpo", "tandem", "kl-reg"))
    print((root / "summary.md").read_text())
