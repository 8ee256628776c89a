"""Figure 2: pass@k against k (log2 axis) per benchmark group and macro, solo and handoff, ±1 bootstrap SE bands.

python analyses/fig2_passk.py [--results results/toy] [--out results/toy/report]   # -> fig2_passk.png + .pdf
"""

from __future__ import annotations

import common

from tandem_eval.report import figures

NAME = "fig2_passk"


def make(col, args):
    return common.save_figure(
        NAME, figures.fig_passk(col, n_boot=args.n_boot, seed=args.seed, by_seed=args.by_seed), args.out
    )


if __name__ == "__main__":
    common.main(__doc__, make)
