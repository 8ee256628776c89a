"""Handoff dose curve: macro pass@1 against the takeover point (runs with schedule takeover:N).

    python analyses/fig_dose.py [--results results/toy] [--out results/toy/report]   # -> fig_dose.png + .pdf
"""

from __future__ import annotations

import common
from tandem_eval.report import figures, style

NAME = "fig_dose"


def make(col, args):
    fig = figures.fig_dose(col, n_boot=args.n_boot, seed=args.seed)
    if fig is None:
        print(f"{NAME}: skipped, no runs hold its data")
        return []
    return style.save(fig, args.out, NAME)


if __name__ == "__main__":
    a = common.parse(__doc__)
    common.report(make(common.load(a), a))
