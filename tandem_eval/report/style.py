"""The one style module for every report figure: sizes for a paper column, fonts, a fixed color
per arm, line styles per mode, and deterministic PNG + PDF saving.

    from tandem_eval.report import style
    with style.paper():
        fig, ax = plt.subplots(figsize=style.size(1))       # one paper column wide
        ax.plot(k, y, color=style.arm_color("tandem"), **style.MODE_LINE["handoff"])
        style.save(fig, out_dir, "fig2_passk")               # fig2_passk.png + fig2_passk.pdf

Why fixed colors: a reader who learns "tandem is blue" on one figure must find it blue on every
figure, whatever other arms happen to be plotted. Known arm names get a reserved color; any other
label gets a color from its name's CRC32, so it too is stable across figures and runs.
"""

from __future__ import annotations

import contextlib
import io
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
    "kl-reg": "#009E73",  # green
    "grpo-g16": "#CC79A7",  # purple
    "base": "#7F7F7F",  # gray: the starting checkpoint / junior
    "junior": "#000000",
}
FALLBACK_COLORS = ["#E69F00", "#56B4E9", "#F0E442", "#8C564B", "#17BECF", "#BCBD22", "#9467BD"]
# Order matters: the more specific names first ("grpo-g16" before "grpo").
_ALIASES = [
    ("g16", "grpo-g16"),
    ("kl", "kl-reg"),
    ("tandem", "tandem"),
    ("grpo", "grpo"),
    ("base", "base"),
    ("junior", "junior"),
]

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
    "svg.hashsalt": "tandem-eval",
    "font.family": "DejaVu Sans",
}


def arm_color(label: str) -> str:
    """The fixed color of an arm: a reserved one for known names, else one from the name's hash."""
    key = str(label).lower()
    if key in ARM_COLORS:
        return ARM_COLORS[key]
    for needle, arm in _ALIASES:
        if needle in key:
            return ARM_COLORS[arm]
    return FALLBACK_COLORS[zlib.crc32(key.encode()) % len(FALLBACK_COLORS)]


def arm_colors(arms) -> dict[str, str]:
    """The colours of the arms of one figure: each arm's fixed colour (arm_color), except that no two
    arms share one. When two names map to one colour (an alias such as "kl" in both, or a hash
    collision), the arm with the exact reserved name keeps it (else the first by name) and the other
    gets the first colour nobody uses, so the assignment depends only on the set of arms."""
    order = sorted(set(map(str, arms)), key=lambda a: (a.lower() not in ARM_COLORS, a))
    palette = [*ARM_COLORS.values(), *FALLBACK_COLORS, *plt.get_cmap("tab20").colors]  # type: ignore[attr-defined]  # a ListedColormap
    out: dict[str, str] = {}
    for arm in order:
        color = arm_color(arm)
        if color in out.values():
            color = next(c for c in palette if c not in out.values())
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
    rendered in memory and written atomically, never through a link (tandem_eval.run.durable)."""
    from tandem_eval.run.durable import atomic_write_bytes, make_dirs

    out_dir = Path(out_dir)
    make_dirs(out_dir)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    try:
        for path in paths:
            buf = io.BytesIO()
            fig.savefig(buf, format=path.suffix[1:], **_SAVE[path.suffix])
            atomic_write_bytes(path, buf.getvalue(), root=out_dir)
    finally:
        plt.close(fig)
    return paths
