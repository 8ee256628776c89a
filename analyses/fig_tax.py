"""Communication tax@k per benchmark group and macro, one bar per senior, 95% bootstrap CIs.

    python analyses/fig_tax.py [--results results/toy] [--out results/toy/report]   # -> fig_tax.png + .pdf
"""

from __future__ import annotations

import common
from tandem_eval.report import figures, style
from tandem_eval.report.tables import table2

NAME = "fig_tax"


def make(col, args):
    fig = figures.fig_tax(table2(col, k=args.k, n_boot=args.n_boot, seed=args.seed))
    if fig is None:
        print(f"{NAME}: skipped, no runs hold its data")
        return []
    return style.save(fig, args.out, NAME)


if __name__ == "__main__":
    a = common.parse(__doc__)
    common.report(make(common.load(a), a))
