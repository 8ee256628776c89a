"""Paper figures from a Collection of run folders; every function returns a matplotlib Figure
(or None when the runs hold no data for it) so tests can inspect axes before saving.

    from tandem_eval.report import figures, style
    fig = figures.fig_passk(col)               # Figure 2: pass@k vs k (log2), solo and handoff
    style.save(fig, "out/", "fig2_passk")      # out/fig2_passk.png + .pdf

Figures: fig_passk (bands = ±1 bootstrap SE over problems), fig_tax (bars, 95% CI),
fig_legibility (junior NLL and KL drift distributions + per-position curves), fig_training
(trainer log, truncation rate, response length + held-out pass@k against step), fig_dose (pass@k
against the takeover point). Every panel states its n and its interval; a panel whose data are
degenerate (all zero, one problem, no variance) says so in red on the panel; legends sit inside
the canvas; step axes have integer ticks. All styling comes from style.py: one color per arm
everywhere, solid = solo, dashed = handoff.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from tandem_eval.lens import LensError
from tandem_eval.report import style
from tandem_eval.report.collect import Collection
from tandem_eval.report.tables import MACRO, N_BOOT, SEED, Table, passk_cis
from tandem_eval.runs import sample_values

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


def _n_problems(col: Collection, scope: str) -> int:
    """Problems in a scope (group or macro), the most any solo/handoff run of the collection has."""
    n = 0
    for r in col.runs:
        s = r.samples()
        keys = (
            s[["benchmark", "problem_id"]]
            if scope == MACRO
            else s.loc[s["group"] == scope, ["benchmark", "problem_id"]]
        )
        n = max(n, len(keys.drop_duplicates()))
    return n


def _scopes(values) -> list[str]:
    return sorted(s for s in set(values) if s != MACRO) + [MACRO]


def array_column(columns: dict[str, bool], needle: str) -> str | None:
    """The per-token array column whose name contains `needle` ("token_*" names first), if any.
    columns: name -> holds arrays (Run.side_columns)."""
    for c in sorted(columns, key=lambda c: (not c.startswith("token"), c)):
        if needle in c and columns[c]:
            return c
    return None


TOKEN_COLUMNS = {  # per-token columns of the lens tables, preferred first, with the sign giving -log p / KL
    "legibility": (("junior_logprobs", -1.0), ("token_nll", 1.0)),
    "drift": (("kl_tokens", 1.0), ("token_kl", 1.0)),
}


def token_arrays(run, name: str) -> list[np.ndarray] | None:
    """Per-token values of a run's lens table: junior −log p (legibility) or exact KL (drift), one
    array per sample; None when the table has no per-token column (the `*_bins` curves are not)."""
    columns = run.side_columns(name) if run is not None else {}
    found = next(((c, sign) for c, sign in TOKEN_COLUMNS[name] if columns.get(c)), None)
    if found is None:
        return None
    column, sign = found
    values = run.side_table(name, arrays=True)[column].dropna()
    if name == "drift" and not any(np.isfinite(np.asarray(a, dtype=float)).any() for a in values):
        return None  # Monte-Carlo drift: kl_tokens are NaN
    return [sign * np.asarray(a, dtype=float) for a in values]


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


def _mark_degenerate(ax, values, n_problems: int | None = None) -> None:
    reason = degenerate_reason(values, n_problems)
    if reason:
        ax.text(
            0.5,
            0.5,
            f"degenerate data: {reason}",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#C00000",
            fontsize=7,
            bbox={"facecolor": "white", "edgecolor": "#C00000", "linewidth": 0.6, "alpha": 0.9},
        )


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
            ax.set_title(f"{'Macro' if scope == MACRO else scope} (n={_n_problems(col, scope)}; bands ±1 SE)")
            _mark_degenerate(ax, part["estimate"], _n_problems(col, scope))
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
        many = len(arms) > 6  # e.g. one label per seed: a wider figure, the legend in columns
        aspect = 0.6 + (0.025 * len(arms) if many else 0.08)
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
        n = rows.groupby("scope")["n_problems"].max()
        ax.set_xticks(np.arange(len(scopes)), [f"{'Macro' if s == MACRO else s}\nn={int(n.get(s, 0))}" for s in scopes])
        ax.set_xlabel("benchmark (n = problems)")
        ax.set_ylabel(f"communication tax@{table.k} (points)")
        ax.set_title(f"solo − handoff pass@{table.k} ({table.schedule}); error bars: 95% CI")
        values = pd.concat([rows["solo"], rows["handoff"]]) if {"solo", "handoff"} <= set(rows) else rows["tax"]
        _mark_degenerate(ax, values, int(n.max()) if len(n) else None)
        # below the axes, inside the canvas (constrained layout makes room), whatever the number of arms
        fig.legend(loc="outside lower center", ncol=min(len(arms), 4))
    return fig


def _side_frames(col: Collection, name: str):
    """{arm: (per-sample frame, source column, solo run)} for arms whose solo run has the table."""
    out = {}
    for arm in col.arms:
        solo = col.solo(arm)
        if solo is None:
            continue
        try:
            per_sample, source = sample_values(solo, "junior_nll" if name == "legibility" else "kl")
        except LensError:  # no lens table of this kind
            continue
        if not per_sample.empty:
            out[arm] = (per_sample, source, solo)
    return out


def fig_legibility(col: Collection, bins: int = POSITION_BINS, n_boot: int = N_BOOT, seed: int = SEED):
    """Distributions of per-sample junior NLL and KL drift per senior (violins, with the mean over
    problems and its 95% bootstrap CI), and their per-position curves (token-pooled mean per slice
    of relative CoT position) when the lens tables carry per-token arrays. Titles name the junior."""
    import seaborn as sns

    from tandem_eval.metrics.stats import bootstrap_ci

    juniors = col.pick_juniors_once()
    panels = []
    for name, ylabel in (("legibility", "junior NLL (nats/token)"), ("drift", "KL(senior ‖ junior) (nats/token)")):
        frames = _side_frames(col, name)
        if not frames:
            continue
        panels.append(("dist", name, ylabel, frames))
        if any(token_arrays(run, name) for _, _, run in frames.values()):
            panels.append(("pos", name, ylabel, frames))
    if not panels:
        return None
    who = sorted({juniors.get(a, "?") for a in col.arms if a in juniors})
    reader = f"junior {who[0]}" if len(who) == 1 else "juniors " + ", ".join(who)
    with style.paper():
        fig, axes = _panels(len(panels), ncols=2, panel_h=1.9)
        for ax, (kind, name, ylabel, frames) in zip(axes, panels):
            arms = sorted(frames)
            what = "legibility" if name == "legibility" else "drift"
            if kind == "dist":
                data = pd.concat([f.assign(senior=arm) for arm, (f, _, _) in frames.items()], ignore_index=True)
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
                labels = []
                for i, arm in enumerate(arms):
                    f = frames[arm][0]
                    per_problem = f.groupby(["benchmark", "problem_id"])["value"].mean()
                    ci = bootstrap_ci(per_problem, n_boot=n_boot, seed=seed)
                    ax.errorbar(
                        [i], [ci.estimate], yerr=[[ci.estimate - ci.low], [ci.high - ci.estimate]],
                        color="black", marker="D", markersize=2.5, capsize=2, linewidth=0.8,
                    )  # fmt: skip
                    labels.append(f"{arm}\nn={len(per_problem)} problems")
                ax.set_xticks(range(len(arms)), labels)
                sources = sorted({s for _, s, _ in frames.values()})
                n_problems = max(len(frames[a][0][["benchmark", "problem_id"]].drop_duplicates()) for a in arms)
                ax.set_title(
                    f"per-sample {what} ({', '.join(sources)}), read by {reader}\n"
                    f"n={n_problems} problems; ◆ mean over problems, 95% CI"
                )
                ax.set_xlabel("senior")
                _mark_degenerate(ax, data["value"], n_problems)
            else:
                n_samples = 0
                for arm in arms:
                    arrays = token_arrays(frames[arm][2], name)
                    if not arrays:
                        continue
                    n_samples = max(n_samples, len(arrays))
                    curve = position_curve(arrays, bins)
                    x = (np.arange(bins) + 0.5) / bins * 100
                    ax.plot(x, curve, color=style.arm_color(arm), label=arm, marker="o")
                per_token = "−log p_junior" if name == "legibility" else "exact KL"
                ax.set_title(f"per position ({per_token} per token; n={n_samples} CoTs; token-pooled means, no CI)")
                ax.set_xlabel("relative position in CoT (%)")
                ax.legend(loc="best")
            ax.set_ylabel(ylabel)
    return fig


TRAIN_PANELS = [  # (log column, y label); "kl" matches the first column starting with "kl"
    ("reward", "reward (mean per rollout)"),
    ("accuracy", "training accuracy (fraction)"),
    ("senior_fraction", "senior-token fraction"),
    ("kl", "KL to junior (nats/token)"),
    ("truncation_rate", "truncation rate (fraction at the budget)"),
    ("response_length", "response length (tokens)"),
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
            n_steps = max((int(t.log["step"].nunique()) for t in logs), default=0)
            ax.set_title(f"n={n_steps} steps (trainer log, per-step values; no CI)")
            ax.set_xlabel("training step")
            ax.set_ylabel(label)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            values = pd.concat([t.log[c] for t in logs if (c := _train_column(t.log, key))])
            if key != "kl" and key != "truncation_rate":  # zero KL / no truncation are ordinary
                _mark_degenerate(ax, values)
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
            n = max((len(r.per_problem([1])) for t in col.trainings for r in t.evals), default=0)
            ax.set_title(f"held-out macro (n={n} problems; bands ±1 SE)")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            _mark_degenerate(ax, evals["estimate"], n)
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
        ax.set_xticks(sorted(data["takeover"].unique()))  # integer takeover points only
        ax.set_xlabel("takeover point N (senior paragraphs, then junior)")
        ax.set_ylabel(f"pass@{k} (%)")
        n = _n_problems(col, MACRO)
        ax.set_title(f"handoff dose curve, macro (n={n} problems; dotted: solo; bars: 95% CI)")
        _mark_degenerate(ax, data["estimate"], n)
        ax.legend(loc="best")
    return fig
