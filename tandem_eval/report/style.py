"""The one style module for every report figure: sizes for a paper column, fonts, a fixed color
per arm, line styles per mode, and deterministic PNG + PDF saving.

    from tandem_eval.report import style
    with style.paper():
        fig, ax = plt.subplots(figsize=style.size(1))       # one paper column wide
        ax.plot(k, y, color=style.arm_color("tandem"), **style.MODE_LINE["handoff"])
        style.save(fig, out_dir, "fig2_passk")               # fig2_passk.png + fig2_passk.pdf

Why fixed colors: a reader who learns "tandem is blue" on one figure must find it blue on every
figure, whatever other arms happen to be plotted. Known arm names (the last part of a label, so
`emergent/tandem` and `tandem/s0` are tandem; `kl-init@0.1` is kl-init) get a reserved color that
no other arm is ever given; any other label gets a color from its name's CRC32 over a palette of
unreserved colors. A report computes one map for all its arms (`arm_colors` of every label it
holds, Collection.colors) and every figure of it, in every problem-set folder, draws from that map,
so an arm keeps its color across figure families and folders, and no two arms of a report share one.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import zlib
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

COLUMN_WIDTH_IN = 3.4  # one column of a two-column paper (ACL/NeurIPS-ish)
FULL_WIDTH_IN = 7.0  # both columns
DPI = 200

# Okabe-Ito: distinguishable for color-blind readers and in grayscale print.
ARM_COLORS = {
    "tandem": "#0072B2",  # blue
    "grpo": "#D55E00",  # vermillion
    "kl-init": "#009E73",  # bluish green: KL toward the initial senior ...
    "kl-reg": "#009E73",  # ... under its v3 name (the same arm, trainer/toy/scales.py)
    "kl-junior": "#E69F00",  # orange: KL toward the junior
    "grpo-g16": "#CC79A7",  # reddish purple
    "init": "#7F7F7F",  # gray: the starting checkpoint
    "base": "#7F7F7F",
    "junior": "#000000",
}
# unreserved (tab10's, less those close to a reserved one): unknown labels, and collisions
FALLBACK_COLORS = ["#8C564B", "#17BECF", "#BCBD22", "#9467BD", "#56B4E9", "#F0E442", "#2CA02C", "#E377C2"]
_SEED = re.compile(r"[/_-]s\d+$")  # a seed suffix: tandem/s0, grpo-s3

MODE_LINE: dict[str, dict[str, Any]] = {
    "solo": {"linestyle": "-", "marker": "o"},
    "handoff": {"linestyle": "--", "marker": "s"},
}
MODE_LABEL = {"solo": "solo", "handoff": "handoff"}

RC = {
    "font.size": 7,
    "axes.titlesize": 7,
    "axes.labelsize": 7,
    "xtick.labelsize": 6,
    "ytick.labelsize": 6,
    "legend.fontsize": 6,
    "legend.frameon": False,
    "lines.linewidth": 1.2,
    "lines.markersize": 3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
    "pdf.fonttype": 42,  # TrueType in PDFs: editable text, accepted by paper venues
    # a fixed salt for SVG element ids (a random uuid otherwise), so reruns write equal files
    "svg.hashsalt": "tandem-eval",
    # shipped with matplotlib: every machine draws the same glyphs, not whatever system font it finds
    "font.family": "DejaVu Sans",
}


def arm_name(label: str) -> str:
    """The arm a label names, for its color: `emergent/tandem/s0` -> `tandem`, `kl-init@0.1` -> `kl-init`."""
    key = _SEED.sub("", str(label).lower().rstrip("/"))
    return key.rsplit("/", 1)[-1].split("@", 1)[0]


def arm_color(label: str) -> str:
    """The fixed color of an arm: a reserved one for known names, else one from the name's hash."""
    name = arm_name(label)
    if name in ARM_COLORS:
        return ARM_COLORS[name]
    # crc32, not hash(): str hashes are salted per process, so an arm's color would change from run to run
    return FALLBACK_COLORS[zlib.crc32(str(label).lower().encode()) % len(FALLBACK_COLORS)]


def arm_colors(arms, fixed: dict[str, str] | None = None) -> dict[str, str]:
    """The colors of `arms`: those in `fixed` (a report's map) keep theirs; the others get their fixed
    color (arm_color) unless an arm already holds it (two labels of one arm name, as `tandem/s0` and
    `tandem/s1` with by_seed, or a hash collision), then the first unreserved color nobody uses. The
    assignment depends only on the set of arms (sorted: arms before their seeds' labels, which only
    by_seed figures draw, so 5 arms × 8 seeds never use up the palette before kl-reg@1 gets a color of
    its own; reserved names first)."""
    fixed = fixed or {}
    order = sorted(set(map(str, arms)), key=lambda a: (bool(_SEED.search(a)), arm_name(a) not in ARM_COLORS, a))
    palette = [*FALLBACK_COLORS, *plt.get_cmap("tab20").colors]  # type: ignore[attr-defined]  # a ListedColormap
    out = {a: fixed[a] for a in order if a in fixed}
    for arm in (a for a in order if a not in fixed):
        color = arm_color(arm)
        if color in out.values():
            color = next((c for c in palette if c not in out.values()), color)  # > 28 arms: colors repeat
        out[arm] = color
    return out


def title(ax, text: str) -> None:
    """ax.set_title with each line wrapped to the axes' width, so a long title is never clipped at
    the figure's edge (about 0.55 em per character)."""
    import textwrap

    from matplotlib.font_manager import FontProperties

    points = FontProperties(size=plt.rcParams["axes.titlesize"]).get_size_in_points()
    width_pt = ax.get_position().width * ax.figure.get_figwidth() * 72
    chars = max(20, int(width_pt / (0.55 * points)))
    ax.set_title("\n".join(textwrap.fill(line, chars) for line in text.split("\n")))
    ax.title.tandem_title = (text, chars)  # what fit_titles rewraps, if needed


def fit_titles(fig, rounds: int = 3) -> None:
    """Rewrap every title that `title` set and that is wider than its axes once the layout is final: its
    width is an estimate made before constrained layout shrinks the axes (for a legend beside them, or a
    neighbour's y label), and a title wider than its axes runs into the next panel. Each round draws the
    figure (which runs the layout) and narrows the titles that overflow, by the measured ratio."""
    import textwrap

    for _ in range(rounds):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        changed = False
        for ax in fig.axes:
            raw = getattr(ax.title, "tandem_title", None)
            if raw is None or not ax.get_visible():
                continue
            text, chars = raw
            wide, room = ax.title.get_window_extent(renderer).width, ax.get_window_extent(renderer).width
            if wide <= room or chars <= 12:
                continue
            chars = max(12, min(chars - 1, int(chars * room / wide)))
            # set_text keeps the title's font (set_title would take rcParams', outside the style's context)
            ax.title.set_text("\n".join(textwrap.fill(line, chars) for line in text.split("\n")))
            ax.title.tandem_title = (text, chars)
            changed = True
        if not changed:
            return


def fitted(draw):
    """A figure function whose titles fit their axes once its figure is complete (fit_titles): a notebook
    shows what `report` saves."""

    @functools.wraps(draw)
    def fitted_draw(*args, **kwargs):
        fig = draw(*args, **kwargs)
        if fig is not None:
            fit_titles(fig)
        return fig

    return fitted_draw


def size(columns: float = 1, aspect: float = 0.7) -> tuple[float, float]:
    """(width, height) in inches for a figure `columns` paper columns wide (1 or 2)."""
    width = COLUMN_WIDTH_IN if columns <= 1 else FULL_WIDTH_IN
    return width, width * aspect


def grid_size(n_panels: int, ncols: int = 3, panel_h: float = 1.6) -> tuple[int, int, tuple[float, float]]:
    """(nrows, ncols, figsize) for n small-multiple panels at full paper width."""
    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    width = COLUMN_WIDTH_IN if ncols == 1 else FULL_WIDTH_IN
    return nrows, ncols, (width, panel_h * nrows + 0.4)


@contextlib.contextmanager
def paper():
    """Matplotlib settings for every report figure (restored on exit)."""
    with plt.rc_context(RC):
        yield


# per format: no timestamps or versions in the metadata
_SAVE: dict[str, dict[str, Any]] = {
    ".png": {"dpi": DPI, "metadata": {"Software": None}},
    ".pdf": {"metadata": {"CreationDate": None, "Producer": None, "Creator": None}},
}


def save(fig, out_dir: str | Path, name: str) -> list[Path]:
    """Write NAME.png and NAME.pdf (no timestamps in the metadata, so reruns give equal files), each
    rendered in memory and written atomically, never through a link (tandem_eval.files)."""
    from tandem_eval.files import atomic_write_bytes, make_dirs

    out_dir = Path(out_dir)
    make_dirs(out_dir)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    try:
        fit_titles(fig)  # the figure functions fit theirs already; this covers a figure a notebook drew itself
        for path in paths:
            buf = io.BytesIO()
            fig.savefig(buf, format=path.suffix[1:], **_SAVE[path.suffix])
            atomic_write_bytes(path, buf.getvalue(), root=out_dir)
    finally:
        plt.close(fig)
    return paths
