"""Reports from run folders: paper tables (Markdown + LaTeX), figures (PNG + PDF), a trace viewer.

    from tandem_eval.report import build_report, find_results, collect
    build_report([find_results("toy")], "results/toy/report")    # what `tandem-eval report` does

Modules: collect (run discovery, arms), cells (Table 2's columns and each arm's CIs), tables
(Table 2), figures (panels: what every figure shares; training_figures), style (the one style
module), view (self-contained HTML trace viewer), cli (the `report` and `view` commands). Nothing here
loads a model; a report on hundreds of problems takes seconds on a CPU.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tandem_eval.files import atomic_write_text, folder_lock, make_dirs, remove_empty
from tandem_eval.report.collect import Collection, collect, parse_labels, problem_sets, read_train_log
from tandem_eval.report.tables import check_k, table2, to_csv, to_latex, to_markdown
from tandem_eval.run.runs import ReportError, Run, find_results
from tandem_eval.schemas import BOOT_SEED, N_BOOT, Bootstrap

TABLE_NAME = "table2"


@dataclass
class ReportFiles:
    tables: list[Path] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # figures without data, with the reason


def _slug(schedule: str) -> str:
    return schedule.replace(":", "-").replace("/", "-")


def write_tables(
    col: Collection,
    out: Path,
    k: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
    by_seed: bool = False,
    title: str | None = None,
) -> tuple[list[Path], object]:
    """table2.{md,tex,csv} for the primary handoff schedule, table2_<schedule>.* for the others;
    `title` heads each (which problem set the table compares)."""
    make_dirs(out)
    primary = col.primary_schedule()
    written, main = [], None
    for schedule in [primary] + [s for s in col.handoff_schedules() if s != primary]:
        t = table2(col, k=k, schedule=schedule, n_boot=n_boot, seed=seed, by_seed=by_seed)
        t.title = title
        main = main or t
        # cast: a schedule other than the primary is one of handoff_schedules(), a str
        stem = TABLE_NAME if schedule == primary else f"{TABLE_NAME}_{_slug(cast(str, schedule))}"
        label = "tab:handoff" if schedule == primary else f"tab:handoff-{_slug(cast(str, schedule))}"
        for suffix, text in ((".md", to_markdown(t)), (".tex", to_latex(t, label)), (".csv", to_csv(t))):
            path = out / f"{stem}{suffix}"
            atomic_write_text(path, text, root=out)  # whole or not at all, never through a planted link
            written.append(path)
    return written, main


def write_figures(
    col: Collection,
    out: Path,
    table,
    k: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
    by_seed: bool = False,
) -> ReportFiles:
    """Every figure into `out`: one line/bar/violin per arm (seeds aggregated), by_seed: per run."""
    from tandem_eval.report import figures, style, training_figures

    files = ReportFiles()
    opts: dict[str, Any] = {"n_boot": n_boot, "seed": seed, "by_seed": by_seed}
    makers = {
        "fig2_passk": lambda: figures.fig_passk(col, **opts),
        # fig_tax: None without a table -> skipped; aggregated as the table
        "fig_tax": lambda: figures.fig_tax(table, col.palette()),
        "fig_legibility_drift": lambda: figures.fig_legibility(col, **opts),
        "fig_training": lambda: training_figures.fig_training(col, k=k, **opts),
        "fig_dose": lambda: figures.fig_dose(col, **opts),
    }
    for name, make in makers.items():
        fig = make()
        if fig is None:
            files.skipped.append(f"{name}: no runs hold its data")
        else:
            files.figures += style.save(fig, out, name)
    return files


def build_report(
    inputs,
    out: str | Path,
    k: int | None = None,
    boot: Bootstrap | None = None,
    with_figures: bool = True,
    labels: dict | None = None,
    junior: str | None = None,
    by_seed: bool = False,
    intersect: bool = False,
) -> ReportFiles:
    """Collect run folders under `inputs`, write tables (and figures) into `out`.
    boot: the CIs' resamples and seed (schemas.Bootstrap); labels: {run folder or current label: new
    label}; junior: whose lens outputs to show; by_seed: one row (and figure line) per run instead of
    one per arm (runs labelled ARM/sN aggregate over seeds). Runs on different problems (by content)
    are never pooled silently: each problem set gets its own tables and figures in OUT/<set name>/
    (collect.problem_sets), or with `intersect` one table of the problems every run holds, titled
    with what was dropped."""
    _check_arguments(inputs, out, k, labels, junior)
    boot = boot or Bootstrap()
    n_boot, seed = boot.n_boot, boot.seed
    col = collect(inputs, labels=labels, junior=junior)
    for run in col.runs:  # a damaged folder is refused before anything is written
        for part in run.parts or (run,):
            part.folder.verify(complete=False)
    groups = problem_sets(col, intersect)
    if k is not None:  # every set's k checked before any file is written
        for group in groups:
            check_k(group.col.runs, k, f" of problem set {group.name}" if group.name else "")
    out = Path(out)
    files = ReportFiles()
    # one writer of `out` at a time (its .lock, as a run folder's); a report that fails before writing
    # any file leaves no folder it made
    with folder_lock(out, out / ".lock") as created, _rolled_back(created, files):
        for group in groups:
            where, sub = out / group.name if group.name else out, group.col
            table = None
            if any(r.mode == "solo" or r.schedule == sub.primary_schedule() for r in sub.runs):
                tables, table = write_tables(sub, where, k, n_boot, seed, by_seed, group.title)
                files.tables += tables
            else:
                files.skipped.append(f"{where / 'table2'}: no solo or (non-takeover) handoff runs")
            if with_figures:
                figs = write_figures(sub, where, table, k, n_boot, seed, by_seed)
                files.figures, files.skipped = files.figures + figs.figures, files.skipped + figs.skipped
    return files


def _check_arguments(inputs, out, k, labels, junior) -> None:
    """The Python call's arguments typed as the CLI's options are (one ReportError line each)."""
    paths = [inputs] if isinstance(inputs, str | Path) else inputs
    if not isinstance(paths, list | tuple) or not all(isinstance(p, str | Path) for p in paths):
        raise ReportError(f"inputs must be run folders (paths), got {inputs!r}")
    if not isinstance(out, str | Path):
        raise ReportError(f"out must be a folder path, got {type(out).__name__} {out!r}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ReportError(f"k must be an integer >= 1, got {k!r}")
    if labels is not None and not isinstance(labels, dict):
        raise ReportError(f"labels must be a mapping {{run folder or label: name}}, got {labels!r}")
    if junior is not None and not isinstance(junior, str):
        raise ReportError(f"junior must be a junior label (a string), got {junior!r}")


@contextlib.contextmanager
def _rolled_back(created: list[Path], files: ReportFiles):
    """Remove the (still empty) folders `created` when the report fails before writing a file."""
    try:
        yield
    except BaseException:
        if created and not files.tables and not files.figures:
            (created[0] / ".lock").unlink(missing_ok=True)  # the held lock's file: the folder is then empty
            remove_empty(created)
        raise


__all__ = [
    "Bootstrap",
    "Collection",
    "ReportError",
    "ReportFiles",
    "Run",
    "build_report",
    "collect",
    "find_results",
    "parse_labels",
    "read_train_log",
    "table2",
    "to_latex",
    "to_markdown",
    "write_figures",
    "write_tables",
]
