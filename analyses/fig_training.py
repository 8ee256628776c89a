"""Training dynamics: trainer-log reward, accuracy, senior-token fraction, KL, and held-out pass@k against step.

python analyses/fig_training.py [--results results/toy] [--out results/toy/report]   # -> fig_training.png + .pdf
"""

from __future__ import annotations

import common

from tandem_eval.report import training_figures

NAME = "fig_training"


def make(col, args):
    return common.save_figure(
        NAME,
        training_figures.fig_training(col, k=args.k, n_boot=args.n_boot, seed=args.seed, by_seed=args.by_seed),
        args.out,
    )


if __name__ == "__main__":
    common.main(__doc__, make)
