"""What every report figure shares: the arms of a collection (seeds pooled) and their CIs, the
scopes and problem counts of a panel, the panel grid, the legend, and the red note on a panel whose
data cannot show a difference.

    from tandem_eval.report.panels import arm_labels, panel_grid, pooled_cis
    fig, axes = panel_grid(4)                     # a grid of 4 panels in the paper's style
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from tandem_eval.metrics.stats import MACRO
from tandem_eval.report import style
from tandem_eval.report.cells import scoped_ci
from tandem_eval.report.collect import Collection
from tandem_eval.run.runs import problem_values, split_seed
from tandem_eval.schemas import BOOT_SEED, N_BOOT, PROBLEM_KEY


def arm_labels(col: Collection, by_seed: bool = False) -> dict[str, list[str]]:
    """{arm: run labels of its seeds, in seed order}; runs labelled ARM/sN share the arm ARM.
    by_seed: every label is its own arm (one line per seed's run, today's per-run view)."""
    out: dict[str, list[tuple]] = {}
    for label in col.arms:
        run = next(r for r in col.runs if r.label == label)
        arm, s = (label, None) if by_seed else split_seed(label, run.path)
        # -1: a label without a seed suffix sorts before the arm's seeds
        out.setdefault(arm, []).append((s if s is not None else -1, label))
    return {arm: [label for _, label in sorted(labels)] for arm, labels in sorted(out.items())}


def pooled_cis(runs: list, metric: str, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> dict:
    """Per group and macro CI of `metric` (runs.problem_values) over one arm's runs, one per seed:
    one run -> the plain bootstrap over its problems; several -> mean over seeds × problems with the
    two-way clustered bootstrap, as the table's per-arm rows."""
    runs = [r for r in runs if r is not None]
    if not runs:
        return {}
    if len(runs) == 1:
        return scoped_ci(problem_values(runs[0], metric), "value", n_boot, seed)
    values = pd.concat([problem_values(r, metric).assign(seed=i) for i, r in enumerate(runs)])
    return scoped_ci(values, "value", n_boot, seed, cluster="seed")


def common_ks(runs: list) -> list[int]:
    return sorted(set.intersection(*(set(r.ks) for r in runs))) if runs else []


def n_problems_in(col: Collection, scope: str) -> int:
    """Problems in a scope (group or macro), the most any solo/handoff run of the collection has."""
    n = 0
    for r in col.runs:
        s = r.samples()
        keys = s[PROBLEM_KEY] if scope == MACRO else s.loc[s["group"] == scope, PROBLEM_KEY]
        n = max(n, len(keys.drop_duplicates()))
    return n


def scopes_of(values) -> list[str]:
    """A figure's panels (or bar groups): each benchmark group, then the macro over them, only when there are
    several (the macro of one group is that group again: a panel that adds nothing, as the tables omit it)."""
    groups = sorted(s for s in set(values) if s != MACRO)
    return groups if len(groups) == 1 else groups + [MACRO]


def degenerate_reason(values, n_problems: int | None = None) -> str | None:
    """Why a panel's numbers cannot show a difference: all zero, one problem, or no variance."""
    v = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce").dropna(), dtype=float)
    if v.size == 0:
        return "no data"
    if n_problems is not None and n_problems <= 1:
        return "one problem only"
    if np.all(v == 0):
        return "all values are 0"
    if v.size > 1 and np.ptp(v) == 0:
        return "no variance (all values equal)"
    return None


def mark_degenerate(ax, values, n_problems: int | None = None) -> None:
    reason = degenerate_reason(values, n_problems)
    if reason:
        panel_note(ax, f"degenerate data: {reason}", "#C00000")


def panel_note(ax, text: str, color: str = "#404040") -> None:
    """A boxed line across the panel's centre: what its data cannot show (red), or what a flat panel
    means (grey, e.g. no trace truncated), so an empty-looking panel is never left to be guessed."""
    ax.text(
        0.5,
        0.5,
        text,
        transform=ax.transAxes,
        ha="center",
        va="center",
        color=color,
        fontsize=7,
        bbox={"facecolor": "white", "edgecolor": color, "linewidth": 0.6, "alpha": 0.9},
    )


def arm_legend(fig, arms: list[str], modes: list[str] | None = None, colors: dict | None = None) -> None:
    colors = colors or style.arm_colors(arms)
    handles = [Line2D([], [], color=colors[a], linewidth=3, label=a) for a in arms]
    for m in modes or []:
        handles.append(Line2D([], [], color="black", label=style.MODE_LABEL[m], **style.MODE_LINE[m]))
    ncol = legend_columns(fig, [str(h.get_label()) for h in handles], 6 if len(handles) <= 8 else 4)
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol)


def legend_columns(fig, labels: list[str], most: int) -> int:
    """How many columns of a legend below the axes fit the figure's width (a wider legend is cut at both
    edges): a column is about 0.6 em per character of the longest label, plus the handle and gaps (4 em)."""
    from matplotlib.font_manager import FontProperties

    em_in = FontProperties(size=plt.rcParams["legend.fontsize"]).get_size_in_points() / 72
    column_in = (0.6 * max(map(len, labels), default=1) + 4) * em_in
    return max(1, min(most, len(labels), int(fig.get_figwidth() // column_in)))


def panel_grid(n: int, ncols: int = 3, panel_h: float = 1.6):
    nrows, ncols, figsize = style.grid_size(n, ncols, panel_h)
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False, layout="constrained")
    axes = axes.ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, list(axes[:n])
