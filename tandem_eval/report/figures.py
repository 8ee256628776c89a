"""Paper figures from a Collection of run folders; every function returns a matplotlib Figure
(or None when the runs hold no data for it) so tests can inspect axes before saving.

    from tandem_eval.report import figures, style
    fig = figures.fig_passk(col)               # Figure 2: pass@k vs k (log2), solo and handoff
    style.save(fig, "out/", "fig2_passk")      # out/fig2_passk.png + .pdf

Runs of one arm with different seeds (labels ARM/sN, tandem_eval.run.runs.split_seed) make one line,
bar or violin per arm, as in the table: mean over seeds, intervals from the two-way clustered
bootstrap over seeds × problems (stats.scoped_cis, cluster=seed); `by_seed=True` (report
--by-seed) draws one per seed's run instead.

Figures: fig_passk (bands = ±1 bootstrap SE over problems; error bars where a curve has one k), fig_tax (bars, 95% CI),
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

from tandem_eval.metrics.stats import MACRO
from tandem_eval.report import style
from tandem_eval.report.collect import Collection
from tandem_eval.report.panels import (
    arm_labels,
    arm_legend,
    common_ks,
    legend_columns,
    mark_degenerate,
    n_problems_in,
    panel_grid,
    pooled_cis,
    scopes_of,
)
from tandem_eval.report.tables import Table
from tandem_eval.run.lens_layout import LensError
from tandem_eval.run.runs import sample_values
from tandem_eval.schemas import BOOT_SEED, N_BOOT, PROBLEM_KEY

POSITION_BINS = 20


# ---- data -------------------------------------------------------------------------------------


def passk_curves(
    col: Collection, schedule: str | None = None, n_boot: int = N_BOOT, seed: int = BOOT_SEED, by_seed: bool = False
) -> pd.DataFrame:
    """senior, mode, scope, k, estimate, se, low, high (percent), n_seeds for each arm's solo and
    handoff runs (mean over its seeds; by_seed: one curve per seed's run)."""
    schedule = schedule or col.primary_schedule()
    rows = []
    for arm, labels in arm_labels(col, by_seed).items():
        for mode in ("solo", "handoff"):
            if mode == "solo":
                runs = [col.solo(label) for label in labels]
            else:
                runs = [col.handoff(label, schedule) for label in labels] if schedule else []
            runs = [r for r in runs if r is not None]
            for k in common_ks(runs):
                for scope, ci in pooled_cis(runs, f"pass@{k}", n_boot, seed).items():
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
                            "n_seeds": len(runs),
                        }
                    )
    columns = ["senior", "mode", "scope", "k", "estimate", "se", "low", "high", "n_seeds"]
    return pd.DataFrame(rows, columns=columns)


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


def token_pooled_curve(arrays, bins: int = POSITION_BINS) -> np.ndarray:
    """Token-pooled mean of per-token values in `bins` equal slices of relative CoT position (every
    token weighs the same; metrics.json's curves weigh every CoT the same: lens.sample_mean_curves)."""
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


@style.fitted
def fig_passk(
    col: Collection,
    schedule: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
    curves: pd.DataFrame | None = None,
    by_seed: bool = False,
):
    """Figure 2: pass@k (%) against k on a log2 axis, one panel per benchmark group plus macro;
    one curve per arm and mode (mean over seeds, ±1 SE band over seeds × problems), by_seed: per run."""
    curves = passk_curves(col, schedule, n_boot, seed, by_seed) if curves is None else curves
    if curves.empty:
        return None
    with style.paper():
        scopes = scopes_of(curves["scope"])
        colors = style.arm_colors(curves["senior"].unique(), col.palette())  # the report's colours
        fig, axes = panel_grid(len(scopes))
        for ax, scope in zip(axes, scopes):
            part = curves[curves["scope"] == scope]
            spread = _passk_panel(ax, part, colors)
            ks = sorted(part["k"].unique())
            ax.set_xscale("log", base=2)
            ax.set_xticks(ks, [str(int(k)) for k in ks])
            if len(ks) == 1:  # room for the dodged error bars around the one k
                ax.set_xlim(ks[0] * 2**-0.5, ks[0] * 2**0.5)
            ax.minorticks_off()
            seeds = sorted(part["n_seeds"].unique()) if "n_seeds" in part and len(part) else [1]
            # arms may hold different numbers of seeds: the title gives the most, marked ≤
            over = f"; means over {'≤' if len(seeds) > 1 else ''}{seeds[-1]} seeds" if seeds[-1] > 1 else ""
            style.title(
                ax, f"{'Macro' if scope == MACRO else scope} (n={n_problems_in(col, scope)}{over}; {spread} ±1 SE)"
            )
            # judged on what the panel draws, the lines and their bands: equal means under a band of
            # spread are data (n = 1 sample per problem draws flat lines with wide bands)
            drawn = pd.concat([part["estimate"], part["estimate"] - part["se"], part["estimate"] + part["se"]])
            mark_degenerate(ax, drawn, n_problems_in(col, scope))
            one = ks == [1]  # pass@1 alone: the runs hold one sample per problem
            ax.set_xlabel("k = 1 only (1 sample per problem)" if one else "k (samples, log2 scale)")
            ax.set_ylabel("pass@k (%)")
        # solo before handoff in the legend, as everywhere (alphabetical order would put handoff first)
        modes = sorted(curves["mode"].unique(), key=["solo", "handoff"].index)
        arm_legend(fig, sorted(curves["senior"].unique()), modes, colors)
    return fig


def _passk_panel(ax, part: pd.DataFrame, colors: dict) -> str:
    """One panel's curves, a ±1 SE band around each; a curve of a single k (one sample per problem)
    has no band to draw, so its SE is an error bar, the curves' points set a little apart at that k.
    Returns what the spread is drawn as ('bands', 'bars' or both), for the title."""
    lines = list(part.groupby(["senior", "mode"], sort=True))
    # in log2(k) units: well inside the ±0.5 that fig_passk's x axis spans around a single k
    dodge = np.linspace(-0.12, 0.12, len(lines)) if len(lines) > 1 else np.zeros(1)  # in log2(k) units
    drawn = set()
    for ((arm, mode), line), dx in zip(lines, dodge):
        line = line.sort_values("k")
        color = colors[arm]
        if len(line) == 1:
            k = line["k"] * 2**dx
            ax.errorbar(k, line["estimate"], yerr=line["se"], color=color, capsize=2, **style.MODE_LINE[mode])
            drawn.add("bars")
            continue
        ax.plot(line["k"], line["estimate"], color=color, **style.MODE_LINE[mode])
        low, high = line["estimate"] - line["se"], line["estimate"] + line["se"]
        ax.fill_between(line["k"], low, high, color=color, alpha=0.18, linewidth=0)
        drawn.add("bands")
    return " and ".join(sorted(drawn)) or "bands"


@style.fitted
def fig_tax(table: Table | None, colors: dict[str, str] | None = None):
    """Communication tax@k (points) per benchmark group and macro, one bar per senior, 95% CI;
    `colors`: the report's map (Collection.palette)."""
    if table is None or not any(c.key == "tax" for c in table.columns):
        return None
    rows = table.rows.dropna(subset=["tax"])
    scopes = scopes_of(rows["scope"])
    arms = sorted(rows["senior"].unique())
    colors = style.arm_colors(arms, colors)  # the report's colours; no two bars' arms share one
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
                color=colors[arm],
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
        style.title(ax, f"solo − handoff pass@{table.k} ({table.schedule}); error bars: 95% CI")
        # judged on solo and handoff, not the tax: a tax of 0 everywhere is a finding, pass@k of 0 everywhere is not
        values = pd.concat([rows["solo"], rows["handoff"]]) if {"solo", "handoff"} <= set(rows) else rows["tax"]
        mark_degenerate(ax, values, int(n.max()) if len(n) else None)
        # below the axes, inside the canvas (constrained layout makes room), whatever the number of arms
        fig.legend(loc="outside lower center", ncol=legend_columns(fig, arms, 4))
    return fig


def _side_frames(col: Collection, name: str, by_seed: bool = False, metric: str | None = None):
    """{arm: (per-sample frame with a `seed` column, source column, solo runs)} for arms whose solo
    runs have the table, pooled over the arm's seeds (by_seed: one arm per run). `metric`: default
    junior_nll (legibility; same-vocabulary juniors only) or kl (drift)."""
    out = {}
    for arm, labels in arm_labels(col, by_seed).items():
        frames, sources, runs = [], [], []
        for i, label in enumerate(labels):
            solo = col.solo(label)
            if solo is None:
                continue
            try:
                metric = metric or ("junior_nll" if name == "legibility" else "kl")
                per_sample, source = sample_values(solo, metric)
            except LensError:  # no lens table of this kind
                continue
            if not per_sample.empty:
                frames.append(per_sample.assign(seed=i))
                sources.append(source)
                runs.append(solo)
        if frames:
            out[arm] = (pd.concat(frames, ignore_index=True), ", ".join(sorted(set(sources))), runs)
    return out


def _mean_ci(frame: pd.DataFrame, n_boot: int, seed: int):
    """Mean over problems (over seeds × problems when the frame holds several seeds) of per-sample
    values and its 95% CI: plain bootstrap over problems, or the two-way clustered one."""
    from tandem_eval.metrics.stats import bootstrap_ci, clustered_bootstrap_means, percentile_ci

    if frame["seed"].nunique() <= 1:
        return bootstrap_ci(frame.groupby(PROBLEM_KEY)["value"].mean(), n_boot=n_boot, seed=seed)
    cells = frame.groupby(["seed", *PROBLEM_KEY])["value"].mean().reset_index("seed")
    est, boot = clustered_bootstrap_means(cells, ["value"], "seed", False, n_boot, seed)
    return percentile_ci(float(est[0]), boot[:, 0])


@style.fitted
def fig_legibility(
    col: Collection, bins: int = POSITION_BINS, n_boot: int = N_BOOT, seed: int = BOOT_SEED, by_seed: bool = False
):
    """Distributions of per-sample junior NLL and KL drift per senior (violins pooled over the arm's
    seeds, with the mean over problems and its 95% bootstrap CI, clustered over seeds × problems when
    there are several), and their per-position curves (token-pooled mean per slice of relative CoT
    position) when the lens tables carry per-token arrays. Titles name the junior. by_seed: per run."""
    juniors = col.pick_juniors_once()  # first: it settles whose lens outputs the panels read
    panels = _lens_panels(col, by_seed)
    if not panels:
        return None
    who = sorted({juniors.get(a, "?") for a in col.arms if a in juniors})
    named = [w if "junior" in w.lower() else f"junior {w}" for w in who]  # not "junior junior"
    reader = named[0] if len(who) == 1 else "juniors " + ", ".join(who)
    colors = style.arm_colors({a for _, _, _, frames in panels for a in frames}, col.palette())
    with style.paper():
        # >3 arms: the names stand upright under the violins (_distribution_panel); the panels grow by
        # the longest name, so the axes keep their height and the y label stays beside them
        longest = max((len(a) for a in col.arms), default=0) if len(col.arms) > 3 else 0
        fig, axes = panel_grid(len(panels), ncols=2, panel_h=1.9 + 0.05 * longest)
        first_pos = True
        for ax, (kind, name, ylabel, frames) in zip(axes, panels):
            if kind == "dist":
                _distribution_panel(ax, name, frames, reader, n_boot, seed, colors)
            else:
                _position_panel(ax, name, frames, bins, colors, legend=first_pos)
                first_pos = False
            ax.set_ylabel(ylabel)
    return fig


def _lens_panels(col: Collection, by_seed: bool) -> list[tuple]:
    """(kind, lens table, y label, frames) of every legibility/drift panel: a distribution panel per
    unit with data, and a per-position panel where the lens tables carry per-token arrays."""
    panels = []
    # one unit per panel: nats per shared token (same-vocabulary juniors), bits per byte when some
    # junior has another tokenizer (every junior then, so they compare), KL in nats per token
    nll, bpb = _side_frames(col, "legibility", by_seed), _side_frames(col, "legibility", by_seed, "junior_bpb")
    drift = _side_frames(col, "drift", by_seed)
    for name, ylabel, frames in (
        ("legibility", "junior NLL (nats/token)", nll),
        ("legibility", "junior NLL (bits/byte)", bpb if set(bpb) - set(nll) else {}),
        ("drift", "KL(senior ‖ junior) (nats/token)", drift),
    ):
        if not frames:
            continue
        panels.append(("dist", name, ylabel, frames))
        # no per-position bits/byte panel: the per-token arrays are nats per junior token, another unit
        if "bits" not in ylabel and any(token_arrays(run, name) for _, _, runs in frames.values() for run in runs):
            panels.append(("pos", name, ylabel, frames))
    return panels


def _distribution_panel(ax, name: str, frames: dict, reader: str, n_boot: int, seed: int, colors: dict) -> None:
    """Violins of per-sample values per arm, each with the mean over problems and its 95% CI."""
    import seaborn as sns

    arms = sorted(frames)
    what = "legibility" if name == "legibility" else "drift"
    data = pd.concat([f.assign(senior=arm) for arm, (f, _, _) in frames.items()], ignore_index=True)
    sns.violinplot(
        data=data,
        x="senior",
        y="value",
        hue="senior",
        order=arms,
        hue_order=arms,
        palette=colors,
        # no density past the observed values: a kernel's tail would draw NLL or KL below 0
        cut=0,
        inner="quartile",
        linewidth=0.6,
        legend=False,
        ax=ax,
    )
    sizes = []
    for i, arm in enumerate(arms):
        f = frames[arm][0]
        ci = _mean_ci(f, n_boot, seed)
        ax.errorbar(
            [i], [ci.estimate], yerr=[[ci.estimate - ci.low], [ci.high - ci.estimate]],
            color="black", marker="D", markersize=2.5, capsize=2, linewidth=0.8,
        )  # fmt: skip
        n_seeds = f["seed"].nunique()
        n_arm = len(f[PROBLEM_KEY].drop_duplicates())
        sizes.append(f"n={n_arm} problems" + (f" × {n_seeds} seeds" if n_seeds > 1 else ""))
    # the sizes go under each arm's name only where arms differ in them (else once, in the title);
    # more than 3 names stand upright so that they never overlap (slanted ones reach left into the
    # y label: a trainer's `run/checkpoint-N` names are long)
    labels = [f"{a}\n{n}" for a, n in zip(arms, sizes)] if len(set(sizes)) > 1 else arms
    ax.set_xticks(range(len(arms)), labels)
    if len(arms) > 3:
        ax.tick_params(axis="x", labelrotation=90)
    sources = sorted({s for _, s, _ in frames.values()})
    n_problems = max(len(frames[a][0][PROBLEM_KEY].drop_duplicates()) for a in arms)
    # an arm of several seeds has its mean over seeds × problems and a CI clustered over both (_mean_ci)
    seeds = {frames[a][0]["seed"].nunique() > 1 for a in arms}
    mean = "mean over seeds × problems, 95% CI clustered over both" if True in seeds else "mean over problems, 95% CI"
    mean += " (one seed: over problems)" if seeds == {True, False} else ""
    style.title(
        ax,
        f"per-sample {what} ({', '.join(sources)}), read by {reader}\n"
        f"{sizes[0] if len(set(sizes)) == 1 else f'n≤{n_problems} problems'}; ◆ {mean}",
    )
    ax.set_xlabel("senior")
    mark_degenerate(ax, data["value"], n_problems)


def _position_panel(ax, name: str, frames: dict, bins: int, colors: dict, legend: bool = True) -> None:
    """Token-pooled mean per slice of relative CoT position, one curve per arm (its seeds pooled);
    the legend (once per figure) beside the axes, where it covers no curve."""
    arms = sorted(frames)
    n_samples = 0
    for arm in arms:  # tokens pooled over the arm's seeds
        arrays = [a for run in frames[arm][2] for a in (token_arrays(run, name) or [])]
        if not arrays:
            continue
        n_samples = max(n_samples, len(arrays))
        curve = token_pooled_curve(arrays, bins)
        x = (np.arange(bins) + 0.5) / bins * 100
        ax.plot(x, curve, color=colors[arm], label=arm, marker="o")
    per_token = "−log p_junior" if name == "legibility" else "exact KL"
    style.title(ax, f"per position ({per_token} per token; n={n_samples} CoTs; token-pooled means, no CI)")
    ax.set_xlabel("relative position in CoT (%)")
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def dose_curve(
    col: Collection, k: int = 1, n_boot: int = N_BOOT, seed: int = BOOT_SEED, by_seed: bool = False
) -> pd.DataFrame:
    """senior, takeover, estimate, low, high: macro pass@k when the junior takes over after N
    senior paragraphs (schedule takeover:N), pooled over the arm's seeds (by_seed: per run)."""
    takeovers = col.takeover_runs()
    rows = []
    for arm, labels in arm_labels(col, by_seed).items():
        by_n: dict[int, list] = {}
        for label in labels:
            for n, run in takeovers.get(label, {}).items():
                by_n.setdefault(n, []).append(run)
        for n, runs in sorted(by_n.items()):
            ci = pooled_cis(runs, f"pass@{k}", n_boot, seed).get(MACRO)
            if ci is not None:
                rows.append({"senior": arm, "takeover": n, "estimate": ci.estimate, "low": ci.low, "high": ci.high})
    return pd.DataFrame(rows, columns=["senior", "takeover", "estimate", "low", "high"])


@style.fitted
def fig_dose(col: Collection, k: int = 1, n_boot: int = N_BOOT, seed: int = BOOT_SEED, by_seed: bool = False):
    """Handoff dose curve: macro pass@k against the takeover point; dotted line = the arm solo
    (means over the arm's seeds; by_seed: per run)."""
    data = dose_curve(col, k, n_boot, seed, by_seed)
    if data.empty:
        return None
    labels_of = arm_labels(col, by_seed)
    colors = style.arm_colors(data["senior"].unique(), col.palette())
    with style.paper():
        fig, ax = plt.subplots(figsize=style.size(1), layout="constrained")
        for arm, d in data.groupby("senior", sort=True):
            d = d.sort_values("takeover")
            color = colors[arm]
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
            solos = [r for label in labels_of.get(arm, []) if (r := col.solo(label)) is not None and k in r.ks]
            if solos:
                ci = pooled_cis(solos, f"pass@{k}", n_boot, seed).get(MACRO)
                if ci is not None:
                    ax.axhline(ci.estimate, color=color, linestyle=":", linewidth=0.9)
        ax.set_xticks(sorted(data["takeover"].unique()))  # integer takeover points only
        ax.set_xlabel("takeover point N (senior paragraphs, then junior)")
        ax.set_ylabel(f"pass@{k} (%)")
        n = n_problems_in(col, MACRO)
        style.title(ax, f"handoff dose curve, macro (n={n} problems; dotted: solo; bars: 95% CI)")
        mark_degenerate(ax, data["estimate"], n)
        ax.legend(loc="best")
    return fig
