"""Table 2: solo / handoff pass@k, retention, communication tax, junior NLL and KL drift per senior,
per benchmark group and macro (Markdown, LaTeX booktabs, CSV). One table per handoff schedule.

    python analyses/table2.py [--results results/toy] [--out results/toy/report]
"""

from __future__ import annotations

import common

from tandem_eval.report import write_tables


def make(col, args):
    title = getattr(args, "title", None)  # the problem set's title (common.per_problem_set)
    paths, _ = write_tables(col, args.out, args.k, args.n_boot, args.seed, args.by_seed, title)
    return paths


if __name__ == "__main__":
    common.main(__doc__, make)
