"""Draws the five figures of docs/figures/README.md with whichever tandem_eval and trainer are first on
PYTHONPATH: an old commit's worktree for the "before" PNGs, this tree for the "after" ones. The same
inputs each time: synthetic results folders of 4 and 8 arms (tests/report_fixtures, built once by this tree),
the committed results/toy/summary.json, a dialects scenario read while its runs train, and pass@1 curves
with equal means under wide bands.

    PYTHONPATH=$PWD python docs/figures/draw_before_after.py /tmp/arms /tmp/after   # builds /tmp/arms/{4,8}
    git worktree add /tmp/old 49659b8
    PYTHONPATH=/tmp/old python docs/figures/draw_before_after.py /tmp/arms /tmp/before
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[2]
DPI = 100  # small files for the docs; the figures themselves are saved at style.DPI
ARMS = ["tandem", "grpo", "kl-init@0.1", "grpo-g16", "kl-junior@0.1", "tandem-lr3e-5", "init", "checkpoint-1200"]
LONG_NAMES = ["grpo", "kl-junior@0.1", "tandem-lr3e-5", "checkpoint-1200"]  # grpo: the one arm with a tax


def synthetic_results(root: Path, arms: list[str]) -> Path:
    """ROOT/N: synthetic run folders of N arms (tests/test_figures.py's layout)."""
    root = root / str(len(arms))
    if not (root / "train").exists():
        sys.path.insert(0, str(REPO / "tests"))
        import report_fixtures

        report_fixtures.ARMS = {a: 0.3 + 0.05 * i for i, a in enumerate(arms)}
        report_fixtures.make_results(root)
    return root


def toy_figures(summary: dict) -> dict:
    """{name: figure} of the toy figures of `summary`, whichever version of trainer/toy/figures.py is
    imported (older ones only saved, so style.save is caught)."""
    from tandem_eval.report import style
    from trainer.toy import figures

    if hasattr(figures, "draw"):
        return figures.draw(summary)
    caught: dict = {}
    style.save = lambda fig, out, name: caught.setdefault(name, fig)
    if figures.plotted_scenarios(summary):  # older plot_frontier fails on a summary without arms
        figures.plot_frontier(summary, Path("."))
    figures.plot_dialects(summary, Path("."))
    return caught


def dialects_summary(root: Path) -> dict:
    """A dialects scenario while its runs train: two seeds' logs, one with a held-out evaluation (step 2),
    read by this version's trainer/toy/dialects.summarize."""
    from trainer.toy import dialects

    shares = {"step": 2, "A": 60.0, "B": 30.0, "plain": 10.0, "mixed": 0.0, "n": 8}
    for seed, heldout in ((0, [shares]), (1, [])):
        log = root / "tandem" / f"seed{seed}" / "train" / "dialects.json"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(json.dumps({"heldout": heldout, "rollouts": []}))
    readings = dialects.summarize(root, {"tandem": {}})
    return {"scenarios": {"dialects": {"arms": {}, "training": {}, "dialects": readings, "claims": {}}}}


def passk_flat_means(col):
    """fig2_passk of pass@1 curves with equal means (25%) under ±1 SE bands of 15 points."""
    import pandas as pd

    from tandem_eval.report import figures

    rows = [
        {"senior": "tandem", "mode": m, "scope": s, "k": 1, "estimate": 25.0, "se": 15.0, "low": 0, "high": 55}
        for m in ("solo", "handoff")
        for s in ("bench_a", "bench_b", "macro")
    ]
    return figures.fig_passk(col, curves=pd.DataFrame(rows).assign(n_seeds=1))


def main(results: Path, out: Path) -> None:
    from tandem_eval.report import figures
    from tandem_eval.report.collect import collect
    from tandem_eval.report.tables import table2

    col, four = collect([synthetic_results(results, ARMS)]), collect([synthetic_results(results, LONG_NAMES)])
    try:
        tax = figures.fig_tax(table2(four), four.palette())
    except (TypeError, AttributeError):  # before the report's one palette
        tax = figures.fig_tax(table2(four))
    summary = json.loads((REPO / "results" / "toy" / "summary.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        held = toy_figures(dialects_summary(Path(tmp)))["dialects"]
    drawn = {
        "legibility_drift_8arms": figures.fig_legibility(col),
        "tax_4arms": tax,
        "toy_frontier": toy_figures(summary)["frontier"],
        "toy_heldout_one_step": held,
        "passk_flat_means": passk_flat_means(col),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, fig in drawn.items():
        # as report/style.save writes them: the canvas as laid out (what lies outside it is lost)
        fig.savefig(out / f"{name}.png", dpi=DPI, metadata={"Software": None})
        print("wrote", out / f"{name}.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
