"""The toy world's figures from summary.json: summary.png (solo / handoff pass@4 and drift per arm),
frontier.png (kl-reg's coefficients against tandem), training.png (reward, zero-variance groups,
held-out pass@1 along RL), dialects.png (a gated scenario's dialect shares along RL); each also as .pdf.

    from trainer.toy.figures import draw, plot_figures
    plot_figures(summary, Path("results/toy"))       # every figure the summary has data for
    fig = draw(summary)["frontier"]                  # or one, undrawn (tests check its texts)

Each arm has one colour in every toy figure, the report's rule (report/style.arm_colors) over every arm
the summary names, so kl-reg@0.1 and kl-reg@1 differ and tandem is the report's blue. Every panel
states the seeds and problems behind what it draws, counted from the entries it draws.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from trainer.toy.scales import kl_coef, kl_ref

PLOTTED = [
    ("solo_pass@4", "solo pass@4 (%)"),
    ("handoff_pass@4", "handoff pass@4 (%)"),
    ("kl_exact", "KL(S‖J) (nats/token)"),
]
# dialects are no arms: colours and markers of their own, none of the arms' (a blue curve is never tandem)
DIALECT_STYLE = {
    "A": {"color": "#332288", "marker": "o"},
    "B": {"color": "#882255", "marker": "s"},
    "plain": {"color": "#DDCC77", "marker": "^"},
}
MANY_STEPS = 6  # held-out evaluations: up to this many, a tick at each evaluated step


def plotted_scenarios(summary: dict) -> list[str]:
    """The scenarios with arms to draw (a gated scenario stopped by a failed gate has none)."""
    return [sc for sc, entry in summary["scenarios"].items() if entry["arms"]]


def palette(summary: dict) -> dict[str, str]:
    """{arm: colour} for every arm the summary names (arms, training logs, dialect readings, the
    matched-solo line's points): the report's rule, computed once so each figure draws from one map."""
    from tandem_eval.report import style

    arms: set[str] = set()
    for entry in summary["scenarios"].values():
        arms |= set(entry["arms"]) | set(entry.get("training") or {}) | set(entry.get("dialects") or {})
        arms |= set((_matched_solo_line(entry) or {}).get("points", {}))
    return style.arm_colors(arms)


def counted(values, unit: str) -> str:
    """'3 seeds', '1 seed', '1–3 seeds' (the range of counts over what a panel draws); '' for none."""
    n = sorted({int(v) for v in values if v is not None})
    if not n:
        return ""
    return f"{n[0]}{f'–{n[-1]}' if len(n) > 1 else ''} {unit}{'s' if n[-1] != 1 else ''}"


def n_text(seeds, problems=()) -> str:
    """'3 seeds × 300 problems' from the counts of the entries a panel draws."""
    parts = [p for p in (counted(seeds, "seed"), counted(problems, "problem")) if p]
    return " × ".join(parts) or "n unknown"


def cells_n(cells: list[dict]) -> str:
    """The n of a panel drawing summary.json's arm cells (each with n_seeds and n_problems)."""
    return n_text([c["n_seeds"] for c in cells], [c["n_problems"] for c in cells])


def step_axis(ax, steps) -> None:
    """RL steps on x: integers only; a tick at each evaluated step when there are few, and a single
    step centred with its own tick (matplotlib would span it with ticks 1.900 ... 2.100)."""
    from matplotlib.ticker import MaxNLocator

    steps = sorted({int(s) for s in steps})
    if len(steps) == 1:
        ax.set_xlim(steps[0] - 1, steps[0] + 1)
    if 0 < len(steps) <= MANY_STEPS:
        ax.set_xticks(steps)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("RL step")


def draw(summary: dict) -> dict:
    """{name: figure} of every toy figure the summary has data for (undrawn, unsaved)."""
    colors = palette(summary)
    figs = {
        "summary": summary_figure(summary, colors),
        "frontier": frontier_figure(summary, colors),
        "training": training_figure(summary, colors),
        "dialects": dialects_figure(summary, colors),
    }
    from tandem_eval.report import style

    drawn = {name: fig for name, fig in figs.items() if fig is not None}
    for fig in drawn.values():
        style.fit_titles(fig)  # as the report's figure functions do (style.fitted)
    return drawn


def plot_figures(summary: dict, out: Path) -> list[Path]:
    """NAME.png and NAME.pdf under `out` for every figure of draw(summary)."""
    from tandem_eval.report import style

    return [path for name, fig in draw(summary).items() for path in style.save(fig, out, name)]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def summary_figure(summary: dict, colors: dict):
    """Per scenario, each arm's solo and handoff pass@4 and drift, 95% CI bars."""
    from tandem_eval.report import style

    plt = _plt()
    scenarios = plotted_scenarios(summary)
    if not scenarios:
        return None
    with style.paper():
        fig, axes = plt.subplots(
            len(scenarios),
            len(PLOTTED),
            figsize=style.size(2, 0.3 * max(1, len(scenarios))),
            layout="constrained",
            squeeze=False,
        )
        for row, sc in zip(axes, scenarios):
            arms = {a: c for a, c in summary["scenarios"][sc]["arms"].items() if not c.get("same_as")}
            for ax, (metric, label) in zip(row, PLOTTED):
                names = [a for a, c in arms.items() if metric in c]
                est = [arms[a][metric]["mean"] for a in names]
                err = [
                    [e - arms[a][metric]["ci"][0] for a, e in zip(names, est)],
                    [arms[a][metric]["ci"][1] - e for a, e in zip(names, est)],
                ]
                ax.bar(
                    range(len(names)),
                    est,
                    yerr=err,
                    color=[colors[a] for a in names],
                    capsize=2,
                    error_kw={"linewidth": 0.7},
                )
                ax.set_xticks(range(len(names)), names, rotation=35, ha="right", rotation_mode="anchor")
                ax.set_ylabel(label)
                cells = [arms[a] for a in names]
                style.title(ax, f"{sc}: {cells_n(cells)}")
        fig.suptitle("toy world: mean over seeds, 95% CI (bootstrap over seeds and problems)")
    return fig


def frontier_figure(summary: dict, colors: dict):
    """Solo pass@4 (x) vs handoff pass@4 (y) per arm, one colour per arm named in the legend below
    (labels beside the points pile up where arms agree); kl-reg's coefficients joined in order, tandem a
    single point; the diagonal is zero tax."""
    from tandem_eval.report import style
    from tandem_eval.report.panels import arm_legend

    plt = _plt()
    scenarios = plotted_scenarios(summary)
    if not scenarios:
        return None
    drawn: list[str] = []
    with style.paper():
        fig, axes = plt.subplots(1, len(scenarios), figsize=style.size(2, 0.42), layout="constrained", squeeze=False)
        for ax, sc in zip(axes[0], scenarios):
            arms = summary["scenarios"][sc]["arms"]
            pts = {
                a: c for a, c in arms.items() if "solo_pass@4" in c and "handoff_pass@4" in c and not c.get("same_as")
            }
            # kl toward the initial senior under any version's name (scales.kl_ref: kl-reg@C is kl-init@C)
            kl = sorted((a for a in pts if kl_ref(a) == "init"), key=kl_coef)
            if len(kl) > 1:
                ax.plot(
                    [pts[a]["solo_pass@4"]["mean"] for a in kl],
                    [pts[a]["handoff_pass@4"]["mean"] for a in kl],
                    color="grey",
                    linewidth=0.8,
                    zorder=1,
                )
            for a, c in pts.items():
                x, y = c["solo_pass@4"], c["handoff_pass@4"]
                ax.errorbar(
                    x["mean"],
                    y["mean"],
                    xerr=[[x["mean"] - x["ci"][0]], [x["ci"][1] - x["mean"]]],
                    yerr=[[y["mean"] - y["ci"][0]], [y["ci"][1] - y["mean"]]],
                    fmt="o",
                    color=colors[a],
                    markersize=3,
                    capsize=1.5,
                    linewidth=0.6,
                )
                drawn += [a] if a not in drawn else []
            lims = [0, 100]
            ax.plot(lims, lims, ":", color="grey", linewidth=0.6)
            ax.set_xlim(*lims)
            ax.set_ylim(*lims)
            ax.set_xlabel("solo pass@4 (%)")
            ax.set_ylabel("handoff pass@4 (%)")
            cells = list(pts.values())
            style.title(ax, f"{sc}: {cells_n(cells)}")
        arm_legend(fig, drawn, colors=colors)
        fig.suptitle("solo vs handoff pass@4: kl-reg coefficients joined (grey line); 95% CIs; diagonal = no tax")
    return fig


def training_figure(summary: dict, colors: dict):
    """Per scenario, reward (10-step mean), zero-variance group fraction and held-out solo pass@1 along
    RL, mean over seeds per arm."""
    from tandem_eval.report import style
    from tandem_eval.report.panels import arm_legend

    plt = _plt()
    scenarios = [sc for sc in summary["scenarios"] if summary["scenarios"][sc]["training"]]
    if not scenarios:
        return None
    drawn: list[str] = []
    with style.paper():
        fig, axes = plt.subplots(
            len(scenarios), 3, figsize=style.size(2, 0.3 * len(scenarios)), layout="constrained", squeeze=False
        )
        for (reward_ax, zero_ax, held_ax), sc in zip(axes, scenarios):
            training = summary["scenarios"][sc]["training"]
            for arm, t in training.items():
                kw = {"color": colors[arm], "linewidth": 0.8}
                for ax, key in ((reward_ax, "reward"), (zero_ax, "frac_reward_zero_std")):
                    y = pd.Series(t["per_step"][key]).rolling(10, min_periods=1).mean()
                    ax.plot(np.arange(1, len(y) + 1), y, **kw)
                if t["heldout_pass@1"]:
                    steps, vals = zip(*t["heldout_pass@1"])
                    held_ax.plot(steps, vals, marker="o", markersize=2, **kw)
                drawn += [arm] if arm not in drawn else []
            rl_steps = [s for t in training.values() for s in range(1, len(t["per_step"]["reward"]) + 1)]
            rl_n = n_text([t["n_seeds"] for t in training.values()])
            for ax, label in ((reward_ax, "reward (10-step mean)"), (zero_ax, "zero-variance groups")):
                step_axis(ax, rl_steps)
                ax.set_ylabel(label)
                style.title(ax, f"{sc}: {rl_n}")
            step_axis(held_ax, [s for t in training.values() for s, _ in t["heldout_pass@1"]])
            held_ax.set_ylabel("held-out solo pass@1 (%)")
            style.title(held_ax, f"{sc} held-out: {_heldout_n(training)}")
        arm_legend(fig, drawn, colors=colors)
        fig.suptitle("toy world RL: mean over seeds (step 0: the initial senior)")
    return fig


def _heldout_n(training: dict) -> str:
    """The n of the held-out curves drawn: seeds and problems per evaluation (training.heldout_n; the
    seeds of RL's evaluations, step 0 being the one initial senior); a summary written before it was
    recorded gives each arm's logged seeds."""
    rows = [r for t in training.values() for r in t.get("heldout_n", [])]
    if rows:
        seeds = [r[1] for r in rows if r[0] > 0] or [r[1] for r in rows]
        return n_text(seeds, [r[2] for r in rows])
    return n_text([t["n_seeds"] for t in training.values() if t["heldout_pass@1"]])


def _matched_solo_line(entry: dict) -> dict | None:
    """The claims' matched-solo line of tax@4 (claims.py), None where no claim ran."""
    claims = entry.get("claims") or {}
    tax = next((c for c in claims.get("claims", []) if c["metric"] == "tax@4"), None)
    return (tax or {}).get("matched_solo")


def dialects_figure(summary: dict, colors: dict):
    """A gated scenario (v4): per arm the held-out share of CoTs in dialect A, B and plain along RL (mean
    over seeds; step 0 the initial senior), and tandem's rollout reward by who chose step 1's dialect
    (senior or junior) and which dialect it was, over the first and the last 10 steps."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from tandem_eval.report import style
    from tandem_eval.report.panels import panel_grid

    _plt()
    found = [(sc, e["dialects"]) for sc, e in summary["scenarios"].items() if e.get("dialects")]
    if not found:
        return None
    sc, readings = found[0]
    arms = [a for a, r in readings.items() if r.get("training")]
    if not arms:
        return None
    line = _matched_solo_line(summary["scenarios"][sc])
    bars = chooser_bars((readings.get("tandem") or {}).get("rollouts") or {})
    with style.paper():
        # panels only where there is something to draw: no chooser bars before tandem logs rollouts
        fig, axes = panel_grid(len(arms) + bool(bars) + (line is not None), ncols=4, panel_h=1.7)
        for ax, arm in zip(axes, arms):
            t = readings[arm]["training"]
            rows = pd.DataFrame(t["rows"], columns=t["columns"])
            for d, kw in DIALECT_STYLE.items():
                ax.plot(rows["step"], rows[d], markersize=2, linewidth=0.8, **kw)
            step_axis(ax, rows["step"])
            style.title(ax, f"{arm}: {n_text([t['n_seeds']])}")
            ax.set_ylim(-2, 102)
        for ax in axes[: len(arms) : 4]:
            ax.set_ylabel(f"{sc}: held-out CoTs (%)")
        handles = [Line2D([], [], linewidth=0.8, label=f"dialect {d}", **kw) for d, kw in DIALECT_STYLE.items()]
        more = iter(axes[len(arms) :])
        if bars:
            _reward_by_chooser(next(more), bars)
            last = Patch(facecolor="white", edgecolor="black", hatch="//", linewidth=0.3, label="last 10 steps")
            handles.append(last)
        if line is not None:  # tax@4 against solo pass@4 per arm-seed: the matched-solo line (claims.py)
            _matched_solo_panel(next(more), line, colors)
            handles += [Line2D([], [], marker="o", linestyle="", color=colors[a], label=a) for a in line["points"]]
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6))
        fig.suptitle(f"toy world {sc}: dialect shares along RL" + (", and tandem's reward by chooser" if bars else ""))
    return fig


def chooser_bars(roll: dict) -> list[tuple[str, dict]]:
    """(hatch, cell) of tandem's rollout cells worth a bar: per (who chose step 1's dialect, which dialect),
    the first 10 steps plain, the last 10 hatched; rare cells (under 5 rollouts) would only add noise."""
    return [
        (hatch, r)
        for part, hatch in (("first10", ""), ("last10", "//"))
        for r in sorted(roll.get(part, []), key=lambda r: (r["chooser"], r["dialect"]))
        if r["dialect"] in DIALECT_STYLE and r["n"] >= 5
    ]


def _reward_by_chooser(ax, bars: list[tuple[str, dict]]) -> None:
    """tandem's mean rollout reward per (who chose step 1's dialect, which dialect), first and last 10 steps."""
    from tandem_eval.report import style

    for x, (hatch, r) in enumerate(bars):
        color = DIALECT_STYLE[r["dialect"]]["color"]
        ax.bar(x, r["reward"], color=color, hatch=hatch, edgecolor="black", linewidth=0.3)
    ax.set_xticks(range(len(bars)), [f"{r['chooser'][0].upper()}:{r['dialect']}" for _, r in bars], rotation=90)
    ax.set_ylabel("tandem rollout reward")
    style.title(ax, f"by who chose step 1's dialect (S/J; n = {sum(r['n'] for _, r in bars)} rollouts)")


def _matched_solo_panel(ax, line: dict, colors: dict) -> None:
    """tax@4 against solo pass@4 per arm-seed, with the line fitted to the arms that never see the junior."""
    from tandem_eval.report import style

    for a, pts in line["points"].items():
        xy = np.array(pts)
        ax.scatter(xy[:, 0], xy[:, 1], s=4, color=colors[a])
    x = np.linspace(*ax.get_xlim(), 2)
    ax.plot(x, line["intercept"] + line["slope"] * x, ":", color="black", linewidth=0.6)
    ax.set_xlabel("solo pass@4 (%)")
    ax.set_ylabel("tax@4 (pts)")
    seeds = sum(len(p) for p in line["points"].values())
    style.title(ax, f"tax at matched solo accuracy (n = {seeds} arm-seeds)")
