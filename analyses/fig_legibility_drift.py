"""Legibility and drift: per-sample junior NLL and KL distributions per senior, and per-position curves.

    python analyses/fig_legibility_drift.py [--results results/toy] [--out results/toy/report]   # -> fig_legibility_drift.png + .pdf
"""

from __future__ import annotations

import common
from tandem_eval.report import figures, style

NAME = "fig_legibility_drift"


def make(col, args):
    fig = figures.fig_legibility(col)
    if fig is None:
        print(f"{NAME}: skipped, no runs hold its data")
        return []
    return style.save(fig, args.out, NAME)


if __name__ == "__main__":
    a = common.parse(__doc__)
    common.report(make(common.load(a), a))
