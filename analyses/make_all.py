"""Regenerate every committed paper artifact (tables and figures) from results/ in one go.

    python analyses/make_all.py                       # results/toy -> results/toy/report
    python analyses/make_all.py --results runs/paper --out paper/figures

Equivalent to `tandem-eval report results/toy --out results/toy/report`: one folder of tables and
figures per problem set (the toy world's scenarios: emergent/, jargon/, self-paired/); the tables are
byte-identical across reruns (tests/test_report.py checks the committed ones).
"""

from __future__ import annotations

import time

import common
import fig2_passk
import fig_dose
import fig_legibility_drift
import fig_tax
import fig_training
import table2

ARTIFACTS = [table2, fig2_passk, fig_tax, fig_legibility_drift, fig_training, fig_dose]


def make_every(col, args) -> list:
    """Every artifact of one problem set."""
    return [path for artifact in ARTIFACTS for path in artifact.make(col, args)]


def main(argv=None) -> list:
    args = common.parse(__doc__, argv)
    start = time.perf_counter()
    col = common.load(args)  # one collection: per-problem pass@k is computed once and shared
    paths = common.per_problem_set(
        col, args, lambda sub, a: [p for artifact in ARTIFACTS for p in artifact.make(sub, a)]
    )
    common.report(paths)
    print(f"{len(paths)} files in {time.perf_counter() - start:.1f} s")
    return paths


if __name__ == "__main__":
    main()
