"""Communication tax@k per benchmark group and macro, one bar per senior, 95% bootstrap CIs.

python analyses/fig_tax.py [--results results/toy] [--out results/toy/report]   # -> fig_tax.png + .pdf
"""

from __future__ import annotations

import common

from tandem_eval.report import figures
from tandem_eval.report.tables import table2

NAME = "fig_tax"


def make(col, args):
    return common.save_figure(
        NAME, figures.fig_tax(table2(col, k=args.k, n_boot=args.n_boot, seed=args.seed, by_seed=args.by_seed)), args.out
    )


if __name__ == "__main__":
    common.main(__doc__, make)
