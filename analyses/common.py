"""Shared command line of the analyses scripts: which results to read and where to write.

Every script in analyses/ reads run folders under results/ only (never a model) and writes one
paper artifact; `make_all.py` writes all of them. Defaults: the toy world's committed results
(`results/toy`, found from the repository, not the current directory) and `<results>/report/`.

    python analyses/table2.py                                  # results/toy -> results/toy/report
    python analyses/fig2_passk.py --results runs/paper --out paper/figures
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only

from tandem_eval.report import ReportError, collect, find_results  # noqa: E402
from tandem_eval.schemas import BOOT_SEED, N_BOOT  # noqa: E402

DEFAULT_WORLD = "toy"


def default_results() -> Path:
    try:
        return find_results(DEFAULT_WORLD)
    except ReportError:
        return find_results()


def parse(description: str, argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--results",
        type=Path,
        nargs="+",
        default=None,
        help="run folders or folders holding them (default: the repository's results/toy)",
    )
    p.add_argument("--out", type=Path, default=None, help="output folder (default: <first results>/report)")
    p.add_argument("--k", type=int, default=None, help="k of tables (default 4, else the largest common k)")
    p.add_argument("--n-boot", type=int, default=N_BOOT)
    p.add_argument("--seed", type=int, default=BOOT_SEED)
    p.add_argument("--label", action="append", default=[], help="RUN=NAME: relabel runs (as `report --label`)")
    p.add_argument("--by-seed", action="store_true", help="one row/line per seed's run (default: one per arm)")
    p.add_argument("--junior", default=None, help="junior label whose lens outputs to show (runs with several)")
    args = p.parse_args(argv)
    args.results = args.results or [default_results()]
    args.out = args.out or args.results[0] / "report"
    return args


def load(args: argparse.Namespace):
    from tandem_eval.report import parse_labels

    return collect(args.results, labels=parse_labels(args.label), junior=args.junior)


def per_problem_set(col, args, make) -> list:
    """make(collection, args) once per problem set (tandem_eval.report.collect.problem_sets), each into
    its own `<out>/<set>/` (`<out>` itself when every run reads the same problems), as
    `tandem-eval report` does: runs on different problems are never pooled into one table or figure."""
    import copy

    from tandem_eval.report.collect import problem_sets

    paths = []
    for group in problem_sets(col):
        sub = copy.copy(args)
        sub.out, sub.title = (args.out / group.name if group.name else args.out), group.title
        paths += make(group.col, sub)
    return paths


def report(paths) -> None:
    for path in paths:
        print(f"wrote {path}")


def save_figure(name: str, fig, out: Path) -> list:
    """PNG + PDF of one figure, or nothing (with a note) when no run holds its data."""
    if fig is None:
        print(f"{name}: skipped, no runs hold its data")
        return []
    from tandem_eval.report import style

    return style.save(fig, out, name)


def main(doc: str, make) -> None:
    """The body of every artifact script: parse the shared options, load results once, write."""
    args = parse(doc)
    report(per_problem_set(load(args), args, make))
