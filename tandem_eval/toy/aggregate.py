"""The toy world's Table 2: every arm's numbers as mean over seeds, with a seeds x problems bootstrap CI.

Reads results/toy/<scenario>/<arm>/seed<S>/{solo,handoff-paragraph} run folders (with their
legibility.parquet / drift.parquet) and writes results/toy/summary.json, summary.md and
summary.png/.pdf (solo and handoff pass@4 and drift per arm and scenario). For each
metric we build a [seeds, problems] matrix of per-problem values (all seeds evaluate the same test
problems); the estimate is its mean, and the 95% CI resamples seeds and problems with replacement
(2,000 draws, seed 0: deterministic). Differences against grpo resample problems jointly (paired)
and seeds independently.

    python -m tandem_eval.toy.aggregate results/toy
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..results import RunFolder, atomic_write_json, atomic_write_text
from .jargon import uses_jargon

KEY = ["benchmark", "problem_id"]
N_BOOT, ALPHA = 2000, 0.05
COLUMNS = [  # (name, label, kind) kind: matrix metric or ratio of two metrics
    ("solo@1", "solo pass@1", None),
    ("solo@4", "solo pass@4", None),
    ("handoff@1", "handoff pass@1", None),
    ("handoff@4", "handoff pass@4", None),
    ("tax@4", "tax@4 (pts)", None),
    ("retention@4", "retention@4 (%)", ("handoff@4", "solo@4")),
    ("junior_nll", "junior NLL (nats/tok)", None),
    ("kl", "KL(S||J) (nats/tok)", None),
    ("jargon", "jargon CoTs (%)", None),
]


def _per_problem(rf_dir: Path) -> pd.DataFrame:
    """Per-problem values of one seed's evaluation (NaN where a run or lens is missing), read with
    tandem_eval.runs (the one read side)."""
    from ..lens import LensError
    from ..runs import Run, problem_values

    out = []
    for mode, folder in (("solo", "solo"), ("handoff", "handoff-paragraph")):
        if not RunFolder(rf_dir / folder).samples_path.exists():
            continue
        run = Run.load(rf_dir / folder)
        n = int(run.samples().sample_idx.max()) + 1
        for k in (k for k in (1, 4) if k <= n):
            out.append(problem_values(run, f"pass@{k}")["value"].rename(f"{mode}@{k}"))
        if mode == "solo":
            s = run.samples()
            out.append((s.assign(j=s.text.map(uses_jargon)).groupby(KEY).j.mean() * 100).rename("jargon"))
            for metric, dest in (("junior_nll", "junior_nll"), ("kl_exact", "kl")):
                try:
                    out.append(problem_values(run, metric)["value"].rename(dest))
                except LensError:
                    pass
    df = pd.concat(out, axis=1) if out else pd.DataFrame()
    if {"solo@4", "handoff@4"} <= set(df.columns):
        df["tax@4"] = df["solo@4"] - df["handoff@4"]
    return df


def _matrices(arm_dir: Path) -> tuple[list[str], dict[str, np.ndarray]]:
    seeds = sorted(p for p in arm_dir.glob("seed*") if p.is_dir())
    frames = [_per_problem(p) for p in seeds]
    problems = sorted(set().union(*(f.index for f in frames))) if frames else []
    mats = {}
    for name, _, ratio in COLUMNS:
        if ratio is None and all(name in f.columns for f in frames) and frames:
            mats[name] = np.stack([f[name].reindex(problems).to_numpy(float) for f in frames])
    return [p.name for p in seeds], mats


def _draws(n_seeds: int, n_problems: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, n_seeds, (N_BOOT, n_seeds)), rng.integers(0, n_problems, (N_BOOT, n_problems))


def _boot(mat: np.ndarray, seeds_idx: np.ndarray, prob_idx: np.ndarray) -> np.ndarray:
    """Mean of mat[seeds, problems] for each bootstrap draw: shape [N_BOOT]."""
    return np.array([np.nanmean(mat[s][:, p]) for s, p in zip(seeds_idx, prob_idx)])


def summarize_arm(mats: dict[str, np.ndarray], prob_idx: np.ndarray, seed: int) -> dict:
    """Estimates and CIs of every column for one arm (prob_idx shared across arms: paired problems)."""
    if not mats:
        return {}
    n_seeds = next(iter(mats.values())).shape[0]
    seeds_idx = np.random.default_rng(seed).integers(0, n_seeds, (N_BOOT, n_seeds))
    out, boots = {}, {}
    for name, _, ratio in COLUMNS:
        if ratio is None and name in mats:
            est, boots[name] = float(np.nanmean(mats[name])), _boot(mats[name], seeds_idx, prob_idx)
        elif ratio is not None and set(ratio) <= set(mats):
            num, den = (float(np.nanmean(mats[r])) for r in ratio)
            est = 100 * num / den if den else float("nan")
            with np.errstate(divide="ignore", invalid="ignore"):
                boots[name] = (
                    100 * _boot(mats[ratio[0]], seeds_idx, prob_idx) / _boot(mats[ratio[1]], seeds_idx, prob_idx)
                )
        else:
            continue
        lo, hi = np.nanquantile(boots[name], [ALPHA / 2, 1 - ALPHA / 2])
        out[name] = {"estimate": est, "low": float(lo), "high": float(hi), "n_seeds": n_seeds}
    out["_boots"] = boots
    return out


def write_summary(results: str | Path, scenarios, arms) -> dict:
    results = Path(results)
    summary: dict = {"n_boot": N_BOOT, "alpha": ALPHA, "method": "bootstrap over seeds x problems", "scenarios": {}}
    lines = [
        "# Toy world: Table 2 per scenario",
        "",
        f"Mean over seeds; ± = half-width of the 95% CI from {N_BOOT} bootstrap draws of seeds and problems.",
        "Δ vs grpo: paired over problems, seeds resampled independently per arm.",
        "",
    ]
    for sc in scenarios:
        per_arm = {arm: _matrices(results / sc / arm) for arm in arms if (results / sc / arm).exists()}
        n_problems = max((m.shape[1] for _, mats in per_arm.values() for m in mats.values()), default=0)
        prob_idx = np.random.default_rng(1).integers(0, max(n_problems, 1), (N_BOOT, max(n_problems, 1)))
        stats = {arm: summarize_arm(mats, prob_idx, seed=i) for i, (arm, (_, mats)) in enumerate(per_arm.items())}
        lines += [
            f"## {sc}",
            "",
            "| arm | seeds | " + " | ".join(c[1] for c in COLUMNS) + " |",
            "|---|---:|" + "---:|" * len(COLUMNS),
        ]
        for arm, st in stats.items():
            cells = [_cell(st.get(name), name) for name, _, _ in COLUMNS]
            lines.append(f"| {arm} | {len(per_arm[arm][0])} | " + " | ".join(cells) + " |")
        diffs = _diffs(stats, "grpo")
        if diffs:
            lines += [
                "",
                "Δ vs grpo (95% CI): "
                + "; ".join(
                    f"{arm} {name} {d['estimate']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]"
                    for arm, dd in diffs.items()
                    for name, d in dd.items()
                    if name in ("handoff@4", "tax@4", "kl", "junior_nll", "solo@4")
                ),
            ]
        lines.append("")
        summary["scenarios"][sc] = {arm: {k: v for k, v in st.items() if k != "_boots"} for arm, st in stats.items()}
        summary["scenarios"][sc]["diff_vs_grpo"] = diffs
    atomic_write_json(results / "summary.json", summary)
    atomic_write_text(results / "summary.md", "\n".join(lines) + "\n")
    plot_summary(summary, results)
    return summary


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


def _diffs(stats: dict, base: str) -> dict:
    if base not in stats:
        return {}
    out = {}
    for arm, st in stats.items():
        if arm in (base, "junior", "init"):
            continue
        out[arm] = {}
        for name, boot in st.get("_boots", {}).items():
            if name in stats[base].get("_boots", {}):
                d = boot - stats[base]["_boots"][name]
                lo, hi = np.nanquantile(d, [ALPHA / 2, 1 - ALPHA / 2])
                out[arm][name] = {
                    "estimate": st[name]["estimate"] - stats[base][name]["estimate"],
                    "low": float(lo),
                    "high": float(hi),
                }
    return out


def _cell(v: dict | None, name: str) -> str:
    if not v or v["estimate"] != v["estimate"]:
        return "-"
    half = (v["high"] - v["low"]) / 2
    digits = 3 if name in ("junior_nll", "kl") else 1
    return f"{v['estimate']:.{digits}f} ± {half:.{digits}f}"


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "results/toy")
    write_summary(root, ("self-paired", "jargon"), ("junior", "init", "grpo", "tandem", "kl-reg"))
    print((root / "summary.md").read_text())
