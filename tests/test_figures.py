"""Every report figure family drawn with 1, 4 and 8 arms (synthetic run folders, report_fixtures):
every text (titles, axis labels, drawn tick labels, legends, annotations) inside the canvas and
none overlapping another, and one colour per arm, the report's, in every figure."""

from __future__ import annotations

import itertools
import math

import matplotlib
import pytest
import report_fixtures
from matplotlib.text import Text

from tandem_eval.report import figures, training_figures
from tandem_eval.report.collect import collect
from tandem_eval.report.tables import table2

matplotlib.use("Agg")

ARM_NAMES = ["tandem", "grpo", "kl-init@0.1", "grpo-g16", "kl-junior@0.1", "tandem-lr3e-5", "init", "checkpoint-1200"]


@pytest.fixture(scope="module", params=[1, 4, 8], ids=lambda n: f"{n}-arms")
def col(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"arms{request.param}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report_fixtures, "ARMS", {a: 0.3 + 0.05 * i for i, a in enumerate(ARM_NAMES[: request.param])})
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
