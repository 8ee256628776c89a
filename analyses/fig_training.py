"""Training dynamics: trainer-log reward, accuracy, senior-token fraction, KL, and held-out pass@k against step.

    python analyses/fig_training.py [--results results/toy] [--out results/toy/report]   # -> fig_training.png + .pdf
"""

from __future__ import annotations

import common
from tandem_eval.report import figures, style

NAME = "fig_training"


def make(col, args):
    fig = figures.fig_training(col, k=args.k, n_boot=args.n_boot, seed=args.seed)
    if fig is None:
        print(f"{NAME}: skipped, no runs hold its data")
        return []
    return style.save(fig, args.out, NAME)


if __name__ == "__main__":
    a = common.parse(__doc__)
    common.report(make(common.load(a), a))
