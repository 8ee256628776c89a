"""The `report` and `view` commands; tandem_eval/cli/main.py adds them with `register(app)`.

    tandem-eval report results/toy --out results/toy/report     # tables + figures from run folders
    tandem-eval report runs/grpo runs/tandem --out /tmp/r --k 8 --no-figures
    tandem-eval report runs/a runs/b --label runs/a=tandem --label runs/b=grpo --junior qwen3-0.6b
    tandem-eval report results/toy --out /tmp/r --intersect     # runs on other problems: the shared ones only
    tandem-eval view runs/tandem/solo --out /tmp/tandem.html      # self-contained trace viewer

Both read run folders only (no model is loaded; `view` loads the tokenizer to split tokens).
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from tandem_eval.schemas import N_BOOT

RESULTS_HELP = "run folders, or folders holding them (default: the repository's results/)"


def register(app: typer.Typer) -> None:
    """Add `report` and `view` to the `tandem-eval` app."""
    app.command("report")(report)
    app.command("view")(view)


def report(
    inputs: list[Path] | None = typer.Argument(None, help=RESULTS_HELP, show_default=False),
    out: Path = typer.Option(..., "--out", "-o", help="folder for table2.{md,tex,csv} and figures (.png + .pdf)"),
    k: int | None = typer.Option(None, help="k of the main table (default 4 if every run has it, else the largest)"),
    n_boot: int = typer.Option(N_BOOT, "--n-boot", help="bootstrap resamples of problems for CIs and SE bands"),
    seed: int = typer.Option(0, help="bootstrap seed (fixed, so reruns give byte-identical tables)"),
    figures: bool = typer.Option(True, "--figures/--no-figures", help="also write the figures"),
    label: list[str] | None = typer.Option(
        None,
        "--label",
        help="RUN=NAME: show the runs in folder RUN (or now labelled RUN) as senior NAME; repeatable; "
        "the run folders are not touched",
    ),
    junior: str | None = typer.Option(
        None, "--junior", help="lens outputs (junior NLL, KL) of this junior label where a run has several"
    ),
    by_seed: bool = typer.Option(
        False, "--by-seed", help="one row per seed's run (default: runs labelled ARM/sN make one row per arm)"
    ),
    intersect: bool = typer.Option(
        False,
        "--intersect",
        help="runs on different problems: one table of the problems every run holds (its title names what was "
        "dropped) instead of one table and figure set per problem set, in OUT/<set>/",
    ),
) -> None:
    """Paper tables (Markdown + LaTeX) and figures from run folders: Table 2 (solo/handoff pass@k,
    retention, communication tax, junior NLL, KL drift, with CIs), pass@k curves, tax bars,
    legibility/drift, training dynamics and the handoff dose curve."""
    # matplotlib here, when the command runs: `report --help` and `view` (this module) never load it
    import matplotlib

    matplotlib.use("Agg")  # files only, never windows
    from tandem_eval.report import build_report, find_results, parse_labels
    from tandem_eval.schemas import Bootstrap

    start = time.perf_counter()
    # a bad input (ReportError, RunFolderError, ...) is the CLI's one error line (cli.main.CLIGroup)
    files = build_report(
        inputs or [find_results()],
        out,
        k=k,
        boot=Bootstrap(n_boot=n_boot, seed=seed),
        with_figures=figures,
        labels=parse_labels(label),
        junior=junior,
        by_seed=by_seed,
        intersect=intersect,
    )
    for path in files.tables + files.figures:
        typer.echo(f"wrote {path}")
    for reason in files.skipped:
        typer.echo(f"skipped {reason}")
    typer.echo(f"report done in {time.perf_counter() - start:.1f} s")


def view(
    run_dir: Path = typer.Argument(..., help="a run folder, or a folder of run folders (e.g. a handoff --out)"),
    out: Path | None = typer.Option(None, "--out", "-o", help="HTML file to write (default RUN_DIR/view.html)"),
    tokenizer: Path | None = typer.Option(None, help="tokenizer folder for token boundaries (default: the senior's)"),
    max_traces: int = typer.Option(
        1000, "--max-traces", help="keep at most this many traces (whole problems, evenly spaced)"
    ),
    junior: str | None = typer.Option(
        None, "--junior", help="junior label whose legibility output shades solo runs scored by several"
    ),
) -> None:
    """A self-contained HTML page of the traces: tokens colored by author, shaded by the junior's
    surprise (−log p: the legibility lens's per-token log-probs on solo runs, the junior's own on
    handoff traces), handoff points marked, solo and handoff of a problem in columns, a summary
    header, and benchmark / problem / correct / mode filters."""
    from tandem_eval.report.view import write_page

    path = write_page(run_dir, out, tokenizer, max_traces, junior)  # bad input: the CLI's one error line
    typer.echo(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB); open it in a browser")
