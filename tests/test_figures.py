"""Every report figure family drawn with 1, 4 and 8 arms (synthetic run folders, report_fixtures):
every text (titles, axis labels, drawn tick labels, legends, annotations) inside the canvas and
none overlapping another, and one colour per arm, the report's, in every figure; the toy world's
figures (trainer/toy/figures.py) checked the same way, with the n each panel states."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest
import report_fixtures
from matplotlib.collections import PolyCollection
from matplotlib.text import Text

from tandem_eval.report import figures, training_figures
from tandem_eval.report.collect import collect
from tandem_eval.report.tables import table2

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parent.parent
ARM_NAMES = ["tandem", "grpo", "kl-init@0.1", "grpo-g16", "kl-junior@0.1", "tandem-lr3e-5", "init", "checkpoint-1200"]


@pytest.fixture(scope="module", params=[1, 4, 8], ids=lambda n: f"{n}-arms")
def col(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"arms{request.param}")
    with pytest.MonkeyPatch.context() as mp:
        # 4 arms: the longer names (a legend of 4 columns was cut at both edges of one paper column)
        names = ARM_NAMES[-4:] if request.param == 4 else ARM_NAMES[: request.param]
        mp.setattr(report_fixtures, "ARMS", {a: 0.3 + 0.05 * i for i, a in enumerate(names)})
        report_fixtures.make_results(root)
    return collect([root])


def _families(col) -> dict:
    return {
        "fig2_passk": figures.fig_passk(col),
        "fig_tax": figures.fig_tax(table2(col), col.palette()),
        "fig_legibility_drift": figures.fig_legibility(col),
        "fig_training": training_figures.fig_training(col),
        "fig_dose": figures.fig_dose(col),
    }


def drawn_texts(fig) -> list[tuple[str, object, float, object, float]]:
    """(text, window bbox, rotation, group, font height px) of every text the figure draws: tick labels
    only where their tick lies within the axis' view limits (matplotlib keeps the others, undrawn)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []

    def add(t: Text, group) -> None:
        if t.get_visible() and t.get_text().strip():
            out.append(
                (t.get_text(), t.get_window_extent(renderer), t.get_rotation(), group, t.get_fontsize() * fig.dpi / 72)
            )

    for t in fig.texts:
        add(t, "figure")
    for legend in fig.legends:
        for t in legend.get_texts():
            add(t, "legend")
    for ax in (a for a in fig.axes if a.get_visible()):
        for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts):
            add(t, id(ax))
        if ax.get_legend() is not None:
            for t in ax.get_legend().get_texts():
                add(t, "legend")
        for axis, lim in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            for tick in axis.get_major_ticks():
                if lim[0] - 1e-9 <= tick.get_loc() <= lim[1] + 1e-9:
                    add(tick.label1, ("ticks", id(axis)))
    return out


def collide(a, b) -> bool:
    """Two texts overlap; slanted tick labels of one axis (whose axis-aligned boxes always overlap)
    collide when their parallel baselines are closer than a line of text."""
    (_, box_a, rot_a, group_a, h_a), (_, box_b, rot_b, group_b, h_b) = a, b
    if not box_a.overlaps(box_b):
        return False
    if rot_a and rot_a == rot_b and group_a == group_b:
        return abs(box_a.x1 - box_b.x1) * math.sin(math.radians(rot_a)) < max(h_a, h_b)
    return True


def problems(fig) -> tuple[list, list]:
    texts = drawn_texts(fig)
    canvas = fig.bbox
    outside = [
        t[0]
        for t in texts
        if t[1].x0 < canvas.x0 - 1 or t[1].x1 > canvas.x1 + 1 or t[1].y0 < canvas.y0 - 1 or t[1].y1 > canvas.y1 + 1
    ]
    overlapping = [(a[0], b[0]) for a, b in itertools.combinations(texts, 2) if collide(a, b)]
    return outside, overlapping


def test_every_figure_family_keeps_its_text_inside_and_apart(col):
    for name, fig in _families(col).items():
        assert fig is not None, name
        outside, overlapping = problems(fig)
        assert not outside, f"{name}: outside the canvas: {outside}"
        assert not overlapping, f"{name}: overlapping texts: {overlapping[:5]}"


@pytest.mark.parametrize("results", ["real", "toy/self-paired"])
def test_committed_results_figures_keep_their_text_inside_and_apart(results):
    """The same check on committed run folders, whose names are long (qwen2.5-coder-1.5b-instruct-0.2.0-bfloat16)
    and whose junior names go into titles: the legibility figure's title ran into the next panel's y label
    (its width was estimated before the legend beside the other panel narrowed the axes; style.fit_titles),
    and the training figure's one-line truncation label was taller than its panel."""
    col = collect([REPO / "results" / results])
    drawn = {name: fig for name, fig in _families(col).items() if fig is not None}
    assert "fig_legibility_drift" in drawn and (results == "real" or "fig_training" in drawn)
    # the violins' ◆ of an arm of several seeds is the mean over seeds × problems, its CI clustered over both
    title = drawn["fig_legibility_drift"].axes[0].get_title().replace("\n", " ")
    pooled = "mean over seeds × problems, 95% CI clustered over both"
    assert (pooled in title) == (results != "real") and "95% CI" in title, title
    for name, fig in drawn.items():
        outside, overlapping = problems(fig)
        assert not outside, f"{results} {name}: outside the canvas: {outside}"
        assert not overlapping, f"{results} {name}: overlapping texts: {overlapping[:5]}"
        plt.close(fig)


def test_the_checker_sees_overlapping_arm_names(col):
    """The check above can fail: the legibility figure's arm names set level (no slant) overlap at 8 arms."""
    if len(col.arms) < 8:
        pytest.skip("needs 8 arms")
    fig = figures.fig_legibility(col)
    for t in fig.axes[0].get_xticklabels():
        t.set_rotation(0)
        t.set_horizontalalignment("center")
    assert problems(fig)[1]


def test_one_colour_per_arm_the_reports_in_every_figure(col):
    palette = col.palette()
    assert len(set(palette[a] for a in col.arms)) == len(col.arms)  # no two arms share a colour
    for name in ("fig2_passk", "fig_tax"):
        fig = _families(col)[name]
        entries = [
            (t.get_text(), h)
            for lg in fig.legends
            for h, t in zip(lg.legend_handles, lg.get_texts())
            if t.get_text() in palette
        ]
        assert {label for label, _ in entries} == set(col.arms), name
        for label, h in entries:
            face = h.get_color() if hasattr(h, "get_color") else h.get_facecolor()
            assert matplotlib.colors.same_color(face, palette[label]), (name, label)


# The toy world's figures (trainer/toy/figures.py), drawn from summary.json: a constructed summary at 1, 4
# and 8 arms (a dialects scenario whose held-out curve has one step), and the committed one.
TOY_ARMS = ["grpo", "tandem", "grpo-g16", "kl-reg@0.1", "kl-reg@1", "kl-reg@10", "kl-junior@0.1", "init"]


def _cell(mean: float) -> dict:
    return {"mean": mean, "ci": [mean - 3, mean + 3], "seed_ci": None}


def toy_summary(n_arms: int) -> dict:
    """A summary.json of one trained scenario with `n_arms` arms (their points nearly equal, as where
    labels piled up) and a dialects scenario read while its runs train (one held-out step, one seed of 2)."""
    arms = TOY_ARMS[:n_arms]
    cells = {
        a: {
            "solo_pass@4": _cell(60 + i),
            "handoff_pass@4": _cell(20 + i),
            "kl_exact": _cell(0.02),
            "n_seeds": 1 if a == "init" else 3,
            "n_samples": 8,
            "n_problems": 150,
        }
        for i, a in enumerate(arms)
    }
    per_step = {"reward": [0.1, 0.2, 0.3] * 10, "frac_reward_zero_std": [0.5] * 30}
    curve = {"heldout_pass@1": [[0, 5.0], [10, 20.0]], "heldout_n": [[0, 1, 100], [10, 3, 100]]}
    training = {a: {"n_seeds": 3, "per_step": per_step, **curve} for a in arms if a != "init"}
    shares = {"columns": ["step", "A", "B", "plain", "mixed"], "rows": [[2, 60.0, 30.0, 10.0, 0.0]], "n_seeds": 1}
    rollouts = {part: [{"chooser": c, "dialect": d, "n": 9, "reward": 0.5} for c in ("senior", "junior") for d in "AB"]
                for part in ("first10", "last10")}  # fmt: skip
    line = {"points": {a: [[60.0, 5.0], [62.0, 4.0]] for a in arms[:3]}, "intercept": 1.0, "slope": 0.05}
    dialects = {
        "arms": {},
        "training": {},
        "dialects": {a: {"training": shares, "rollouts": rollouts} for a in ["tandem", *arms[: n_arms - 1]]},
        "claims": {"claims": [{"metric": "tax@4", "matched_solo": line}]},
    }
    return {"scenarios": {"emergent": {"arms": cells, "training": training}, "dialects": dialects}}


@pytest.fixture(scope="module", params=[1, 4, 8, "committed"], ids=lambda n: f"toy-{n}")
def toy_figures(request):
    import json

    from trainer.toy import figures as toy

    if request.param == "committed":
        summary = json.loads((REPO / "results" / "toy" / "summary.json").read_text())
    else:
        summary = toy_summary(request.param)
    figs = toy.draw(summary)
    yield summary, figs
    for fig in figs.values():
        plt.close(fig)


def test_toy_figures_keep_their_text_inside_and_apart(toy_figures):
    summary, figs = toy_figures
    assert {"summary", "frontier", "training"} <= set(figs)
    for name, fig in figs.items():
        outside, overlapping = problems(fig)
        assert not outside, f"{name}: outside the canvas: {outside}"
        assert not overlapping, f"{name}: overlapping texts: {overlapping[:5]}"


def test_toy_figures_give_each_arm_one_colour_the_reports_rule(toy_figures):
    from trainer.toy import figures as toy

    summary, figs = toy_figures
    colors = toy.palette(summary)
    assert len(set(colors.values())) == len(colors)  # kl-reg@0.1 and kl-reg@1 differ
    for name in ("frontier", "training"):
        entries = [(t.get_text(), h) for lg in figs[name].legends for h, t in zip(lg.legend_handles, lg.get_texts())]
        assert entries, name
        for label, h in entries:
            assert matplotlib.colors.same_color(h.get_color(), colors[label]), (name, label)


def test_toy_figures_state_the_n_they_draw_and_steps_as_integers():
    """Each panel's n is counted from the entries it draws (init's one seed gives 1–3 seeds; the dialects
    arm's title says 1 seed, its curve's); a single held-out step gets its own tick, not 1.900 ... 2.100."""
    from trainer.toy import figures as toy

    figs = toy.draw(toy_summary(8))
    titles = [ax.get_title().replace("\n", " ") for fig in figs.values() for ax in fig.axes]
    assert "emergent: 1–3 seeds × 150 problems" in titles
    assert "emergent held-out: 3 seeds × 100 problems" in titles
    assert "tandem: 1 seed" in titles
    dialect_ax = figs["dialects"].axes[0]
    dialect_ax.figure.canvas.draw()
    assert [t.get_text() for t in dialect_ax.get_xticklabels()] == ["2"]
    assert toy.counted([3, 3], "seed") == "3 seeds" and toy.counted([1], "seed") == "1 seed"


def test_dialect_curves_count_the_seeds_they_hold(tmp_path):
    """A seed still training (no held-out evaluation yet) adds no seed to the curve's n."""
    import json

    from trainer.toy import dialects

    for seed, heldout in ((0, [{"step": 2, "A": 60.0, "B": 30.0, "plain": 10.0, "mixed": 0.0, "n": 8}]), (1, [])):
        log = tmp_path / "tandem" / f"seed{seed}" / "train" / "dialects.json"
        log.parent.mkdir(parents=True)
        log.write_text(json.dumps({"heldout": heldout, "rollouts": []}))
    assert dialects.summarize(tmp_path, {"tandem": {}})["tandem"]["training"]["n_seeds"] == 1


def test_one_sample_per_problem_draws_bars_and_says_so(col):
    """pass@1 alone (one sample per problem): a band over one k has no width, so the SE is drawn as error
    bars, the title says bars, and the k axis says why there is one k."""
    curves = figures.passk_curves(col)
    fig = figures.fig_passk(col, curves=curves[curves["k"] == 1])
    for ax in fig.axes:
        assert "bars ±1 SE" in ax.get_title() and "bands" not in ax.get_title()
        assert ax.containers and not any(isinstance(c, PolyCollection) for c in ax.collections)  # no empty band
        assert ax.get_xlabel() == "k = 1 only (1 sample per problem)"
    outside, overlapping = problems(fig)
    assert not outside and not overlapping


def test_an_all_zero_truncation_panel_says_no_trace_truncated(col, monkeypatch):
    train = col.trainings[0]
    monkeypatch.setattr(train, "log", train.log.assign(truncation_rate=0.0))
    fig = training_figures.fig_training(col)
    notes = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "no trace truncated\n(rate 0 at every step)" in notes
    assert not any(n.startswith("degenerate") for n in notes)
    outside, overlapping = problems(fig)
    assert not outside and not overlapping


def test_arms_get_their_own_colours_before_their_seeds_labels():
    """The palette of the committed emergent runs, 6 arms × 8 seeds (notebook 03): the seed labels, which
    only by_seed figures draw, no longer use up the colours before kl-reg@1 gets one of its own."""
    from tandem_eval.report import style

    arms = [f"emergent/{a}" for a in ("grpo", "grpo-g16", "init", "kl-reg@0.1", "kl-reg@1", "tandem")]
    colors = style.arm_colors([*arms, *(f"{a}/s{s}" for a in arms for s in range(8))])
    assert len({colors[a] for a in arms}) == len(arms)
    assert colors["emergent/kl-reg@0.1"] == style.arm_color("kl-reg") != colors["emergent/kl-reg@1"]
