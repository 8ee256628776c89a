"""The training figure: trainer-log panels against step (per arm, the mean over its seeds with a
min–max band) and held-out pass@k of the periodic evaluations (±1 SE over seeds × problems).

    from tandem_eval.report.training_figures import fig_training, training_evals
    fig = fig_training(collect(["results/toy"]))      # None when no run has a training log
"""

from __future__ import annotations

import pandas as pd
from matplotlib.ticker import MaxNLocator

from tandem_eval.metrics.stats import MACRO
from tandem_eval.report import style
from tandem_eval.report.collect import TRAIN_LOG, Collection
from tandem_eval.report.panels import arm_legend, common_ks, mark_degenerate, panel_grid, panel_note, pooled_cis
from tandem_eval.run.runs import split_seed
from tandem_eval.schemas import BOOT_SEED, N_BOOT

TRAIN_PANELS = [  # (log column, y label); "kl" matches the first column starting with "kl"
    ("reward", "reward (mean per rollout)"),
    ("accuracy", "training accuracy (fraction)"),
    ("senior_fraction", "senior-token fraction"),
    ("kl", "KL to junior (nats/token)"),
    ("truncation_rate", "truncation rate\n(fraction at the budget)"),  # one line is taller than the panel
    ("response_length", "response length (tokens)"),
]


def _train_column(log: pd.DataFrame, key: str) -> str | None:
    if key in log.columns and log[key].notna().any():
        return key
    if key == "kl":
        return next((c for c in sorted(log.columns) if c.startswith("kl") and log[c].notna().any()), None)
    return None


def _training_arms(col: Collection, by_seed: bool = False) -> dict[str, list]:
    """{arm: its trainings, one per seed} (a trainer's arm ARM/sN, or a seedN folder above it)."""
    out: dict[str, list] = {}
    for t in col.trainings:
        # split_seed reads a run folder's two parents: the trainer folder and a seedN folder above it
        arm, s = (t.arm, None) if by_seed else split_seed(t.arm, t.path / TRAIN_LOG)
        out.setdefault(arm, []).append((s if s is not None else -1, str(t.path), t))
    return {arm: [t for _, _, t in sorted(ts, key=lambda x: x[:2])] for arm, ts in sorted(out.items())}


def training_evals(
    col: Collection, k: int | None = None, n_boot: int = N_BOOT, seed: int = BOOT_SEED, by_seed: bool = False
) -> pd.DataFrame:
    """senior, step, k, estimate, se, n_seeds (macro pass@k, percent) of every arm's periodic
    evals, pooled over the arm's seeds at each step (by_seed: one curve per training)."""
    rows = []
    for arm, trainings in _training_arms(col, by_seed).items():
        by_step: dict[int, list] = {}
        for t in trainings:
            for run in t.evals:
                by_step.setdefault(run.step, []).append(run)
        for step, runs in sorted(by_step.items(), key=lambda x: (x[0] is None, x[0])):
            ks = common_ks(runs)
            if not ks:
                continue
            # as Table 2 (tables.default_k): the paper's pass@4 where the runs have it, else the largest k
            kk = k if k in ks else (4 if 4 in ks else max(ks))
            ci = pooled_cis(runs, f"pass@{kk}", n_boot, seed).get(MACRO)
            if ci is not None:
                rows.append(
                    {"senior": arm, "step": step, "k": kk, "estimate": ci.estimate, "se": ci.se, "n_seeds": len(runs)}
                )
    return pd.DataFrame(rows, columns=["senior", "step", "k", "estimate", "se", "n_seeds"])


def _log_curves(trainings: list, key: str) -> pd.DataFrame | None:
    """step, mean, low, high of one log column over an arm's trainings (low/high = min/max over seeds)."""
    parts = []
    for t in trainings:
        column = _train_column(t.log, key) if "step" in t.log.columns else None
        if column is not None:
            parts.append(t.log[["step", column]].dropna().set_axis(["step", "value"], axis=1))
    if not parts:
        return None
    g = pd.concat(parts).groupby("step")["value"]
    return pd.DataFrame({"mean": g.mean(), "low": g.min(), "high": g.max(), "n": g.size()}).reset_index()


@style.fitted
def fig_training(
    col: Collection, k: int | None = None, n_boot: int = N_BOOT, seed: int = BOOT_SEED, by_seed: bool = False
):
    """Training dynamics against step: trainer-log panels present in any log (per arm, the mean over
    its seeds with a min–max band), plus held-out pass@k (±1 SE over seeds × problems). by_seed: per run."""
    logs = [t for t in col.trainings if "step" in t.log.columns and len(t.log)]
    arms = {a: [t for t in ts if t in logs] for a, ts in _training_arms(col, by_seed).items()}
    arms = {a: ts for a, ts in arms.items() if ts}
    evals = training_evals(col, k, n_boot, seed, by_seed)
    keys = [(key, label) for key, label in TRAIN_PANELS if any(_train_column(t.log, key) for t in logs)]
    n = len(keys) + (not evals.empty)
    if n == 0:
        return None
    colors = style.arm_colors([*arms, *evals.get("senior", [])], col.palette())
    with style.paper():
        fig, axes = panel_grid(n, ncols=min(n, 3))
        for ax, (key, label) in zip(axes, keys):
            _log_panel(ax, key, label, arms, logs, colors)
        if not evals.empty:
            _heldout_panel(axes[-1], evals, col, colors)
        arm_legend(fig, sorted(set(arms) | set(evals["senior"])), colors=colors)
    return fig


def _log_panel(ax, key: str, label: str, arms: dict, logs: list, colors: dict) -> None:
    """One trainer-log column against step: per arm the mean over its seeds, a min–max band when
    several; a rolling mean over long logs."""
    seeds = 1
    for arm, trainings in arms.items():
        d = _log_curves(trainings, key)
        if d is None:
            continue
        color = colors[arm]
        several = int(d["n"].max()) > 1
        seeds = max(seeds, len(trainings))
        if several:  # min–max over seeds
            low, high = d["low"], d["high"]
            if len(d) > 50:
                low, high = low.rolling(10, min_periods=1).mean(), high.rolling(10, min_periods=1).mean()
            ax.fill_between(d["step"], low, high, color=color, alpha=0.18, linewidth=0)
        if len(d) > 50:  # raw values faintly, a rolling mean on top
            if not several:
                ax.plot(d["step"], d["mean"], color=color, alpha=0.25, linewidth=0.6, marker="")
            ax.plot(d["step"], d["mean"].rolling(10, min_periods=1).mean(), color=color, marker="")
        else:
            ax.plot(d["step"], d["mean"], color=color, marker=".")
    n_steps = max((int(t.log["step"].nunique()) for t in logs), default=0)
    if seeds > 1:  # two lines: the panels are narrow
        style.title(ax, f"n={n_steps} steps, ≤{seeds} seeds/arm\n(mean; band = min–max; no CI)")
    else:
        style.title(ax, f"n={n_steps} steps (trainer log, per-step values; no CI)")
    ax.set_xlabel("training step")
    ax.set_ylabel(label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    values = pd.concat([t.log[c] for t in logs if (c := _train_column(t.log, key))])
    if key == "truncation_rate" and values.dropna().eq(0).all():  # ordinary, but a flat line at 0 reads as empty
        ax.set_ylim(-0.02, 1)  # the line on the floor of a rate's whole range, the note above it
        panel_note(ax, "no trace truncated\n(rate 0 at every step)")
    elif key != "kl" and key != "truncation_rate":  # zero KL is ordinary
        mark_degenerate(ax, values)


def _heldout_panel(ax, evals: pd.DataFrame, col: Collection, colors: dict) -> None:
    """Held-out macro pass@k of the periodic evaluations against step (±1 SE over seeds × problems)."""
    for arm, d in evals.groupby("senior", sort=True):
        d = d.sort_values("step")
        color = colors[arm]
        ax.plot(d["step"], d["estimate"], color=color, marker="o")
        ax.fill_between(
            d["step"], d["estimate"] - d["se"], d["estimate"] + d["se"], color=color, alpha=0.18, linewidth=0
        )
    ax.set_xlabel("training step")
    ax.set_ylabel(f"held-out pass@{int(evals['k'].iloc[0])} (%)")
    n = max((len(r.per_problem([1])) for t in col.trainings for r in t.evals), default=0)
    seeds = int(evals["n_seeds"].max())
    over = f"; means over {seeds} seeds" if seeds > 1 else ""
    style.title(ax, f"held-out macro (n={n} problems{over}; bands ±1 SE)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    mark_degenerate(ax, evals["estimate"], n)
