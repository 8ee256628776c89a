"""Handoff dose curve: macro pass@1 against the takeover point (runs with schedule takeover:N).

python analyses/fig_dose.py [--results results/toy] [--out results/toy/report]   # -> fig_dose.png + .pdf
"""

from __future__ import annotations

import common

from tandem_eval.report import figures

NAME = "fig_dose"


def make(col, args):
    return common.save_figure(
        NAME, figures.fig_dose(col, n_boot=args.n_boot, seed=args.seed, by_seed=args.by_seed), args.out
    )


if __name__ == "__main__":
    common.main(__doc__, make)
