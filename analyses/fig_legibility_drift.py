"""Legibility and drift: per-sample junior NLL and KL distributions per senior, and per-position curves.

python analyses/fig_legibility_drift.py [--results results/toy] [--out results/toy/report]
# -> fig_legibility_drift.png + .pdf
"""

from __future__ import annotations

import common

from tandem_eval.report import figures

NAME = "fig_legibility_drift"


def make(col, args):
    return common.save_figure(
        NAME, figures.fig_legibility(col, n_boot=args.n_boot, seed=args.seed, by_seed=args.by_seed), args.out
    )


if __name__ == "__main__":
    common.main(__doc__, make)
