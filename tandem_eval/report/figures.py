"""Paper figures from a Collection of run folders; every function returns a matplotlib Figure
(or None when the runs hold no data for it) so tests can inspect axes before saving.

    from tandem_eval.report import figures, style
    fig = figures.fig_passk(col)               # Figure 2: pass@k vs k (log2), solo and handoff
    style.save(fig, "out/", "fig2_passk")      # out/fig2_passk.png + .pdf

Figures: fig_passk (bands = ±1 bootstrap SE over problems), fig_tax (bars, 95% CI),
fig_legibility (junior NLL and KL drift distributions + per-position curves), fig_training
(trainer log + held-out pass@k against step), fig_dose (pass@k against the takeover point).
All styling comes from style.py: one color per arm everywhere, solid = solo, dashed = handoff.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from tandem_eval.report import style
from tandem_eval.report.collect import Collection
from tandem_eval.report.tables import MACRO, N_BOOT, SEED, Table, passk_cis, per_sample_side

POSITION_BINS = 20


# ---- data -------------------------------------------------------------------------------------


def passk_curves(col: Collection, schedule: str | None = None, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """senior, mode, scope, k, estimate, se, low, high (percent) for each arm's solo and handoff run."""
    schedule = schedule or col.primary_schedule()
    rows = []
    for arm in col.arms:
        for mode, run in (("solo", col.solo(arm)), ("handoff", col.handoff(arm, schedule) if schedule else None)):
            if run is None:
                continue
            for k in run.ks:
                for scope, ci in passk_cis(run, k, n_boot, seed).items():
                    rows.append(
                        {
                            "senior": arm,
                            "mode": mode,
                            "scope": scope,
                            "k": k,
                            "estimate": ci.estimate,
                            "se": ci.se,
                            "low": ci.low,
                            "high": ci.high,
                        }
                    )
    return pd.DataFrame(rows, columns=["senior", "mode", "scope", "k", "estimate", "se", "low", "high"])


def _scopes(values) -> list[str]:
    return sorted(s for s in set(values) if s != MACRO) + [MACRO]


def array_column(columns: dict[str, bool], needle: str) -> str | None:
    """The per-token array column whose name contains `needle` ("token_*" names first), if any.
    columns: name -> holds arrays (Run.side_columns)."""
    for c in sorted(columns, key=lambda c: (not c.startswith("token"), c)):
        if needle in c and columns[c]:
            return c
    return None


def position_curve(arrays, bins: int = POSITION_BINS) -> np.ndarray:
    """Token-pooled mean of per-token values in `bins` equal slices of relative CoT position."""
    arrays = [np.asarray(a, dtype=float) for a in arrays]
    lengths = np.array([a.size for a in arrays], dtype=np.int64)
    if lengths.sum() == 0:
        return np.full(bins, np.nan)
    values = np.concatenate(arrays)  # all tokens of all samples, (T,)
    per_token_len = np.repeat(lengths, lengths)
    index = np.arange(len(values)) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # position in own CoT
    b = np.minimum(((index + 0.5) / per_token_len * bins).astype(int), bins - 1)
    ok = np.isfinite(values)
    sums = np.bincount(b[ok], weights=values[ok], minlength=bins)
    counts = np.bincount(b[ok], minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


# ---- figures ------------------------------------------------------------------------------------


def _legend(fig, arms: list[str], modes: list[str] | None = None) -> None:
    handles = [Line2D([], [], color=style.arm_color(a), linewidth=3, label=a) for a in arms]
    for m in modes or []:
        handles.append(Line2D([], [], color="black", label=style.MODE_LABEL[m], **style.MODE_LINE[m]))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6 if len(handles) <= 8 else 4))


def _panels(n: int, ncols: int = 3, panel_h: float = 1.6):
    nrows, ncols, figsize = style.grid_size(n, ncols, panel_h)
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False, layout="constrained")
    axes = axes.ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, list(axes[:n])


def fig_passk(
    col: Collection,
    schedule: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    curves: pd.DataFrame | None = None,
):
    """Figure 2: pass@k (%) against k on a log2 axis, one panel per benchmark group plus macro."""
    curves = passk_curves(col, schedule, n_boot, seed) if curves is None else curves
    if curves.empty:
        return None
    with style.paper():
        scopes = _scopes(curves["scope"])
        fig, axes = _panels(len(scopes))
        for ax, scope in zip(axes, scopes):
            part = curves[curves["scope"] == scope]
            for (arm, mode), line in part.groupby(["senior", "mode"], sort=True):
                line = line.sort_values("k")
                color = style.arm_color(arm)
                ax.plot(line["k"], line["estimate"], color=color, **style.MODE_LINE[mode])
                ax.fill_between(
                    line["k"],
                    line["estimate"] - line["se"],
                    line["estimate"] + line["se"],
                    color=color,
                    alpha=0.18,
                    linewidth=0,
                )
            ks = sorted(part["k"].unique())
            ax.set_xscale("log", base=2)
            ax.set_xticks(ks, [str(int(k)) for k in ks])
            ax.minorticks_off()
            ax.set_title("Macro" if scope == MACRO else scope)
            ax.set_xlabel("k (samples, log2 scale)")
            ax.set_ylabel("pass@k (%)")
        _legend(fig, sorted(curves["senior"].unique()), sorted(curves["mode"].unique(), key=["solo", "handoff"].index))
    return fig


def fig_tax(table: Table | None):
    """Communication tax@k (points) per benchmark group and macro, one bar per senior, 95% CI."""
    if table is None or not any(c.key == "tax" for c in table.columns):
        return None
    rows = table.rows.dropna(subset=["tax"])
    scopes = _scopes(rows["scope"])
    arms = sorted(rows["senior"].unique())
    width = 0.8 / len(arms)
    with style.paper():
        many = len(arms) > 6  # e.g. one label per seed: the legend goes below the axes, in columns
        aspect = 0.6 + (0.025 * len(arms) if many else 0)
        fig, ax = plt.subplots(figsize=style.size(2 if many or len(scopes) > 3 else 1, aspect), layout="constrained")
        for i, arm in enumerate(arms):
            part = rows[rows["senior"] == arm].set_index("scope").reindex(scopes)
            x = np.arange(len(scopes)) + (i - (len(arms) - 1) / 2) * width
            err = np.vstack([part["tax"] - part["tax_low"], part["tax_high"] - part["tax"]])
            ax.bar(
                x,
                part["tax"],
                width,
                color=style.arm_color(arm),
                label=arm,
                yerr=np.nan_to_num(err),
                capsize=2,
                error_kw={"linewidth": 0.7},
            )
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xticks(np.arange(len(scopes)), ["Macro" if s == MACRO else s for s in scopes])
        ax.set_xlabel("benchmark")
        ax.set_ylabel(f"communication tax@{table.k} (points)")
        ax.set_title(f"solo − handoff pass@{table.k} ({table.schedule}); bars: 95% CI")
        if many:
            fig.legend(loc="outside lower center", ncol=4)
        else:
            ax.legend(ncol=min(len(arms), 4))
    return fig


def _side_frames(col: Collection, name: str):
    """{arm: (per-sample frame, source column, solo run)} for arms whose solo run has the table."""
    out = {}
    for arm in col.arms:
        solo = col.solo(arm)
        per_sample, source = per_sample_side(solo, name)
        if per_sample is not None and not per_sample.empty:
            out[arm] = (per_sample, source, solo)
    return out


def fig_legibility(col: Collection, bins: int = POSITION_BINS):
    """Distributions of per-sample junior NLL and KL drift per senior (violins), and their
    per-position curves (token-pooled mean per slice of relative CoT position) when the side
    tables carry per-token arrays."""
    import seaborn as sns

    panels = []
    for name, needle, ylabel in (
        ("legibility", "nll", "junior NLL (nats/token)"),
        ("drift", "kl", "KL(senior ‖ junior) (nats/token)"),
    ):
        frames = _side_frames(col, name)
        if not frames:
            continue
        panels.append(("dist", name, needle, ylabel, frames))
        if any(array_column(run.side_columns(name), needle) for _, _, run in frames.values()):
            panels.append(("pos", name, needle, ylabel, frames))
    if not panels:
        return None
    with style.paper():
        fig, axes = _panels(len(panels), ncols=2, panel_h=1.8)
        for ax, (kind, name, needle, ylabel, frames) in zip(axes, panels):
            if kind == "dist":
                data = pd.concat([f.assign(senior=arm) for arm, (f, _, _) in frames.items()], ignore_index=True)
                arms = sorted(frames)
                sns.violinplot(
                    data=data,
                    x="senior",
                    y="value",
                    hue="senior",
                    order=arms,
                    hue_order=arms,
                    palette={a: style.arm_color(a) for a in arms},
                    cut=0,
                    inner="quartile",
                    linewidth=0.6,
                    legend=False,
                    ax=ax,
                )
                sources = sorted({s for _, s, _ in frames.values()})
                ax.set_title(f"per-sample {'legibility' if name == 'legibility' else 'drift'} ({', '.join(sources)})")
                ax.set_xlabel("senior")
            else:
                for arm, (_, _, run) in sorted(frames.items()):
                    column = array_column(run.side_columns(name), needle)
                    if column is None:
                        continue
                    curve = position_curve(run.side_table(name, arrays=True)[column].dropna(), bins)
                    x = (np.arange(bins) + 0.5) / bins * 100
                    ax.plot(x, curve, color=style.arm_color(arm), label=arm, marker="o")
                ax.set_title(f"per position ({needle} per token)")
                ax.set_xlabel("relative position in CoT (%)")
                ax.legend()
            ax.set_ylabel(ylabel)
    return fig


TRAIN_PANELS = [  # (log column, y label); "kl" matches the first column starting with "kl"
    ("reward", "reward (mean per rollout)"),
    ("accuracy", "training accuracy (fraction)"),
    ("senior_fraction", "senior-token fraction"),
    ("kl", "KL to junior (nats/token)"),
]


def _train_column(log: pd.DataFrame, key: str) -> str | None:
    if key in log.columns and log[key].notna().any():
        return key
    if key == "kl":
        return next((c for c in sorted(log.columns) if c.startswith("kl") and log[c].notna().any()), None)
    return None


def training_evals(col: Collection, k: int | None = None, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """senior, step, k, estimate, se (macro pass@k, percent) of every training's periodic evals."""
    rows = []
    for t in col.trainings:
        for run in t.evals:
            kk = k if k in run.ks else (4 if 4 in run.ks else max(run.ks))
            ci = passk_cis(run, kk, n_boot, seed).get(MACRO)
            if ci is not None:
                rows.append({"senior": t.arm, "step": run.step, "k": kk, "estimate": ci.estimate, "se": ci.se})
    return pd.DataFrame(rows, columns=["senior", "step", "k", "estimate", "se"])


def fig_training(col: Collection, k: int | None = None, n_boot: int = N_BOOT, seed: int = SEED):
    """Training dynamics against step: trainer-log panels present in any log, plus held-out pass@k."""
    logs = [t for t in col.trainings if "step" in t.log.columns and len(t.log)]
    evals = training_evals(col, k, n_boot, seed)
    keys = [(key, label) for key, label in TRAIN_PANELS if any(_train_column(t.log, key) for t in logs)]
    n = len(keys) + (not evals.empty)
    if n == 0:
        return None
    with style.paper():
        fig, axes = _panels(n, ncols=min(n, 3))
        for ax, (key, label) in zip(axes, keys):
            for t in sorted(logs, key=lambda t: t.arm):
                column = _train_column(t.log, key)
                if column is None:
                    continue
                d = t.log[["step", column]].dropna()
                color = style.arm_color(t.arm)
                if len(d) > 50:  # raw values faintly, a rolling mean on top
                    ax.plot(d["step"], d[column], color=color, alpha=0.25, linewidth=0.6, marker="")
                    ax.plot(d["step"], d[column].rolling(10, min_periods=1).mean(), color=color, marker="")
                else:
                    ax.plot(d["step"], d[column], color=color, marker=".")
            ax.set_xlabel("training step")
            ax.set_ylabel(label)
        if not evals.empty:
            ax = axes[-1]
            for arm, d in evals.groupby("senior", sort=True):
                d = d.sort_values("step")
                color = style.arm_color(arm)
                ax.plot(d["step"], d["estimate"], color=color, marker="o")
                ax.fill_between(
                    d["step"], d["estimate"] - d["se"], d["estimate"] + d["se"], color=color, alpha=0.18, linewidth=0
                )
            ax.set_xlabel("training step")
            ax.set_ylabel(f"held-out pass@{int(evals['k'].iloc[0])} (%)")
        _legend(fig, sorted({t.arm for t in logs} | set(evals["senior"])))
    return fig


def dose_curve(col: Collection, k: int = 1, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """senior, takeover, estimate, low, high: macro pass@k when the junior takes over after N
    senior paragraphs (schedule takeover:N)."""
    rows = []
    for arm, runs in col.takeover_runs().items():
        for n, run in runs.items():
            ci = passk_cis(run, k, n_boot, seed).get(MACRO)
            if ci is not None:
                rows.append({"senior": arm, "takeover": n, "estimate": ci.estimate, "low": ci.low, "high": ci.high})
    return pd.DataFrame(rows, columns=["senior", "takeover", "estimate", "low", "high"])


def fig_dose(col: Collection, k: int = 1, n_boot: int = N_BOOT, seed: int = SEED):
    """Handoff dose curve: macro pass@k against the takeover point; dotted line = the arm solo."""
    data = dose_curve(col, k, n_boot, seed)
    if data.empty:
        return None
    with style.paper():
        fig, ax = plt.subplots(figsize=style.size(1), layout="constrained")
        for arm, d in data.groupby("senior", sort=True):
            d = d.sort_values("takeover")
            color = style.arm_color(arm)
            err = np.vstack([d["estimate"] - d["low"], d["high"] - d["estimate"]])
            ax.errorbar(
                d["takeover"],
                d["estimate"],
                yerr=np.nan_to_num(err),
                color=color,
                label=arm,
                capsize=2,
                **style.MODE_LINE["handoff"],
            )
            solo = col.solo(arm)
            if solo is not None and k in solo.ks:
                ci = passk_cis(solo, k, n_boot, seed).get(MACRO)
                if ci is not None:
                    ax.axhline(ci.estimate, color=color, linestyle=":", linewidth=0.9)
        ax.set_xticks(sorted(data["takeover"].unique()))
        ax.set_xlabel("takeover point N (senior paragraphs, then junior)")
        ax.set_ylabel(f"pass@{k} (%)")
        ax.set_title("handoff dose curve (dotted: solo; bars: 95% CI)")
        ax.legend(loc="lower right")
    return fig
