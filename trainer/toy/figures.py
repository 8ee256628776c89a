"""The toy world's figures from summary.json: summary.png (solo / handoff pass@4 and drift per arm),
frontier.png (kl-reg's coefficients against tandem), training.png (reward, zero-variance groups,
held-out pass@1 along RL); each also as .pdf.

    from trainer.toy.figures import plot_summary, plot_frontier, plot_training
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from trainer.toy.scales import kl_coef, kl_ref


def _arm_color(arm: str):
    """The report's colour per arm; kl-reg@C from light (small C) to dark (large C, closer to init)."""
    from matplotlib.colors import to_rgb

    from tandem_eval.report import style

    if arm in ("init", "junior"):
        return style.ARM_COLORS["base"]
    if arm.startswith("kl-junior"):  # v4's second kl arm (toward the junior): its own hue beside kl-init's green
        return to_rgb("#8C564B")
    color = to_rgb(style.arm_color(arm.split("@")[0]))
    if "@" not in arm:
        return color
    shade = float(np.clip(np.log10(float(arm.split("@")[1])) / 4 + 0.25, 0, 0.75))  # C 0.1 -> 0, 10 -> 0.5
    return tuple(c * (0.5 + shade) + (1 - (0.5 + shade)) * w for c, w in zip(color, (1.0, 1.0, 1.0)))


PLOTTED = [
    ("solo_pass@4", "solo pass@4 (%)"),
    ("handoff_pass@4", "handoff pass@4 (%)"),
    ("kl_exact", "KL(S‖J) (nats/token)"),
]


def plotted_scenarios(summary: dict) -> list[str]:
    """The scenarios with arms to draw (a gated scenario stopped by a failed gate has none)."""
    return [sc for sc, entry in summary["scenarios"].items() if entry["arms"]]


def plot_summary(summary: dict, out: Path) -> list[Path]:
    """summary.png/.pdf: per scenario, each arm's solo and handoff pass@4 and drift, 95% CI bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tandem_eval.report import style

    scenarios = plotted_scenarios(summary)
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
                    color=[_arm_color(a) for a in names],
                    capsize=2,
                    error_kw={"linewidth": 0.7},
                )
                ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
                ax.set_ylabel(label)
                ax.set_title(sc, fontsize="small")
        fig.suptitle("toy world: mean over seeds, 95% CI (bootstrap over seeds and problems)")
    return style.save(fig, out, "summary")


def plot_frontier(summary: dict, out: Path) -> list[Path]:
    """frontier.png/.pdf: solo pass@4 (x) vs handoff pass@4 (y) per arm; kl-reg's coefficients joined
    in order, tandem a single point; the diagonal is zero tax."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tandem_eval.report import style

    scenarios = plotted_scenarios(summary)
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
                    color=_arm_color("kl-reg"),
                    linewidth=0.8,
                )
            for a, c in pts.items():
                x, y = c["solo_pass@4"], c["handoff_pass@4"]
                ax.errorbar(
                    x["mean"],
                    y["mean"],
                    xerr=[[x["mean"] - x["ci"][0]], [x["ci"][1] - x["mean"]]],
                    yerr=[[y["mean"] - y["ci"][0]], [y["ci"][1] - y["mean"]]],
                    fmt="o",
                    color=_arm_color(a),
                    markersize=3,
                    capsize=1.5,
                    linewidth=0.6,
                )
                ax.annotate(a, (x["mean"], y["mean"]), fontsize=5, xytext=(3, -6), textcoords="offset points")
            lims = [0, 100]
            ax.plot(lims, lims, ":", color="grey", linewidth=0.6)
            ax.set_xlim(*lims)
            ax.set_ylim(*lims)
            ax.set_xlabel("solo pass@4 (%)")
            ax.set_ylabel("handoff pass@4 (%)")
            ax.set_title(sc, fontsize="small")
        fig.suptitle("solo vs handoff: kl-reg coefficients (line) vs tandem; 95% CIs; diagonal = no tax")
    return style.save(fig, out, "frontier")


def plot_training(summary: dict, out: Path) -> list[Path]:
    """training.png/.pdf: per scenario, reward (10-step mean), zero-variance group fraction and held-out
    solo pass@1 along RL, mean over seeds per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tandem_eval.report import style

    scenarios = [sc for sc in summary["scenarios"] if summary["scenarios"][sc]["training"]]
    if not scenarios:
        return []
    panels = [
        ("reward", "reward (10-step mean)"),
        ("frac_reward_zero_std", "zero-variance groups"),
        ("heldout", "held-out solo pass@1 (%)"),
    ]
    with style.paper():
        fig, axes = plt.subplots(
            len(scenarios), 3, figsize=style.size(2, 0.3 * len(scenarios)), layout="constrained", squeeze=False
        )
        for row, sc in zip(axes, scenarios):
            for arm, t in summary["scenarios"][sc]["training"].items():
                color = _arm_color(arm)
                style_kw = {"color": color, "linewidth": 0.8, "label": arm, "linestyle": "--" if "@" in arm else "-"}
                for ax, (key, label) in zip(row, panels):
                    if key == "heldout":
                        steps, vals = zip(*t["heldout_pass@1"]) if t["heldout_pass@1"] else ((), ())
                        ax.plot(steps, vals, marker="o", markersize=2, **style_kw)
                    else:
                        y = pd.Series(t["per_step"][key]).rolling(10, min_periods=1).mean()
                        ax.plot(np.arange(1, len(y) + 1), y, **style_kw)
                    ax.set_ylabel(label)
                    ax.set_xlabel("RL step")
                    ax.set_title(sc, fontsize="small")
        axes[0][0].legend(fontsize=5)
        fig.suptitle("toy world RL: mean over seeds")
    return style.save(fig, out, "training")


def plot_dialects(summary: dict, out: Path) -> list[Path]:
    """dialects.png/.pdf (a gated scenario, v4): per arm the held-out share of CoTs in dialect A, B and plain
    along RL (mean over seeds; step 0 the initial senior), and tandem's rollout reward by who chose step 1's
    dialect (senior or junior) and which dialect it was, over the first and the last 10 steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tandem_eval.report import style

    found = [(sc, e["dialects"]) for sc, e in summary["scenarios"].items() if e.get("dialects")]
    if not found:
        return []
    sc, readings = found[0]
    arms = [a for a, r in readings.items() if r.get("training")]
    if not arms:
        return []
    colors = {"A": "#0072B2", "B": "#D55E00", "plain": "#7F7F7F", "mixed": "#E69F00"}
    claims = summary["scenarios"][sc].get("claims") or {}
    tax = next((c for c in claims.get("claims", []) if c["metric"] == "tax@4"), None)
    line = (tax or {}).get("matched_solo")
    with style.paper():
        n = len(arms) + 1 + (line is not None)
        fig, axes = plt.subplots(1, n, figsize=style.size(2, 0.28), layout="constrained", squeeze=False)
        for ax, arm in zip(axes[0], arms):
            t = readings[arm]["training"]
            rows = pd.DataFrame(t["rows"], columns=t["columns"])
            for d in ("A", "B", "plain"):
                ax.plot(rows["step"], rows[d], marker="o", markersize=2, color=colors[d], label=d, linewidth=0.8)
            ax.set_title(f"{arm} ({t['n_seeds']} seeds)", fontsize="small")
            ax.set_xlabel("RL step")
            ax.set_ylim(-2, 102)
        axes[0][0].set_ylabel(f"{sc}: held-out CoTs (%)")
        axes[0][0].legend(fontsize=5)
        _reward_by_chooser(axes[0][len(arms)], (readings.get("tandem") or {}).get("rollouts") or {}, colors)
        if line is not None:  # tax@4 against solo pass@4 per arm-seed: the matched-solo line (claims.py)
            _matched_solo_panel(axes[0][len(arms) + 1], line)
        fig.suptitle(f"toy world {sc}: dialect shares along RL, and tandem's reward by chooser")
    return style.save(fig, out, "dialects")


def _reward_by_chooser(ax, roll: dict, colors: dict) -> None:
    """tandem's mean rollout reward per (who chose step 1's dialect, which dialect), first and last 10 steps."""
    labels, x = [], 0
    for part, hatch in (("first10", ""), ("last10", "//")):
        for r in sorted(roll.get(part, []), key=lambda r: (r["chooser"], r["dialect"])):
            if r["dialect"] not in ("A", "B", "plain") or r["n"] < 5:
                continue  # rare cells (a handful of rollouts) would only add noise to the bars
            ax.bar(x, r["reward"], color=colors[r["dialect"]], hatch=hatch, edgecolor="black", linewidth=0.3)
            labels.append(f"{r['chooser'][0].upper()}:{r['dialect']}\n{part[:-2]}")
            x += 1
    ax.set_xticks(range(len(labels)), labels, fontsize=4)
    ax.set_ylabel("tandem rollout reward")
    ax.set_title("by who chose step 1's dialect", fontsize="small")


def _matched_solo_panel(ax, line: dict) -> None:
    """tax@4 against solo pass@4 per arm-seed, with the line fitted to the arms that never see the junior."""
    for a, pts in line["points"].items():
        xy = np.array(pts)
        ax.scatter(xy[:, 0], xy[:, 1], s=4, color=_arm_color(a), label=a)
    x = np.linspace(*ax.get_xlim(), 2)
    ax.plot(x, line["intercept"] + line["slope"] * x, ":", color="black", linewidth=0.6)
    ax.set_xlabel("solo pass@4 (%)")
    ax.set_ylabel("tax@4 (pts)")
    ax.set_title("tax at matched solo accuracy", fontsize="small")
    ax.legend(fontsize=4)
