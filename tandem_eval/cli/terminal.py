"""Tables on the terminal: pass@k of finished runs, the communication tax, a regrade's changed
verdicts, the benchmark registry. Every command prints through `console` here, so a test can capture
or widen one console.

    from tandem_eval.cli.terminal import console, print_passk, print_tax
    print_passk({"solo": rf.metrics()["pass_at_k"]}, (1, 2, 4))

Imports rich only (the CLI imports it before `--help`): the numbers come already computed.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

console = Console()


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def print_passk(runs: dict[str, dict], ks) -> None:
    """One table: rows = benchmarks, groups and macro; columns = pass@k per run."""
    first = next(iter(runs.values()))
    label = _macro_label(first)
    table = Table(title="pass@k (%)", caption=_macro_caption(first))
    table.add_column("benchmark")
    for name in runs:
        for k in ks:
            table.add_column(f"{name} @{k}", justify="right")
    rows = [(b, "per_benchmark") for b in first["per_benchmark"]]
    rows += [(g, "per_group") for g in first["per_group"] if g not in first["per_benchmark"]]
    for name, level in rows + [(label, None)]:
        cells = [
            (r["macro"] if level is None else r[level].get(name, {})).get(f"pass@{k}")
            for r in runs.values()
            for k in ks
        ]
        table.add_row(name, *map(_fmt, cells))
    console.print(table)


def _macro_label(summary: dict) -> str:
    """ "macro" only for the paper's four sets; runs written before the label existed are judged by size."""
    if "macro_label" in summary:
        return summary["macro_label"]
    from tandem_eval.metrics.passk import macro_provenance

    return macro_provenance(summary.get("n_problems", {}).get("per_group", {}))["macro_label"]


def _macro_caption(summary: dict) -> str | None:
    reasons = summary.get("paper_sets_reasons")
    return f"{_macro_label(summary)}: {'; '.join(reasons)}" if reasons else None


def print_tax(tax: dict, ks) -> None:
    """Rows = (group or macro, k); solo and handoff pass@k, tax in points and retention, with 95% CIs."""
    from ..metrics.registry import fmt_p  # metrics/__init__ imports pandas: not at `--help` time

    table = Table(title="communication tax = solo - handoff (points); retention = handoff / solo; 95% CI")
    for col in ("scope", "k", "solo", "handoff", "tax [CI]", "retention [CI]", "p"):
        table.add_column(col, justify="right")
    levels = list(tax["per_group"].items()) + [(tax.get("macro_label", "macro"), tax["macro"])]
    for name, entry in levels:
        for k in ks:
            e = entry.get(f"pass@{k}", {})
            if "tax" not in e:
                continue
            t, r = e["tax"], e["retention"]
            ret = (
                "-"
                if r["estimate"] is None
                else (
                    f"{100 * r['estimate']:.1f}% "
                    f"[{_fmt(r['low'] and 100 * r['low'])}, {_fmt(r['high'] and 100 * r['high'])}]"
                )
            )
            table.add_row(
                name,
                str(k),
                _fmt(e["solo"]["estimate"]),
                _fmt(e["handoff"]["estimate"]),
                f"{_fmt(t['estimate'])} [{_fmt(t['low'])}, {_fmt(t['high'])}]",
                ret,
                fmt_p(e.get("tax_p_value")),
            )
    console.print(table)


def print_regrade(result, show: int = 20) -> None:
    """The disagreements of a regrade.RegradeResult (first `show` rows), their count, and pass@k
    stored vs regraded."""
    import pandas as pd  # loaded already: the result holds a DataFrame

    changed = result.changed
    if len(changed):
        table = Table(title="verdicts that changed (stored -> regraded)")
        for col in ("benchmark", "problem", "sample", "mode", "answer", "gold", "stored", "regraded"):
            table.add_column(col)
        for r in changed.head(show).itertuples():
            table.add_row(
                r.benchmark,
                str(r.problem_id),
                str(r.sample_idx),
                r.mode,
                "-" if pd.isna(r.new_extracted_answer) else str(r.new_extracted_answer)[:40],
                str(r.gold)[:40],
                f"{r.old_correct} ({r.old_grade_status})",
                f"{r.new_correct} ({r.new_grade_status})",
            )
        console.print(table)
        if len(changed) > show:
            console.print(f"... {len(changed) - show} more in {result.path / 'regrade.parquet'}")
    graders = result.table[["old_grader", "new_grader"]].iloc[0] if len(result.table) else None
    if graders is not None:
        console.print(f"grader: stored {graders.old_grader}; regraded {graders.new_grader}", highlight=False)
    console.print(f"{len(changed)} of {len(result.table)} samples changed verdict", highlight=False)
    print_passk(result.pass_at_k, result.ks)
    console.print(f"written: {result.path / 'regrade.parquet'}  {result.path / 'regrade.json'}")


def print_benchmarks(benchmarks: dict, sets: dict) -> None:
    """The benchmark registry (name, group, source, sizes) and the named sets."""
    table = Table("name", "group", "source", "size", "paper", "description")
    for name, spec in benchmarks.items():
        size, paper = (str(v) if v is not None else "-" for v in (spec.size, spec.paper_size))
        source = spec.package[0] if spec.package else str(spec.path or spec.hub_id)  # a wheel, a file or a hub id
        table.add_row(name, spec.group, source, size, paper, spec.description)
    console.print(table)
    for name, members in sets.items():
        console.print(f"set {name}: {', '.join(members)}")


def print_paper_sets(rows: list[dict], folder) -> None:
    """Each benchmark file and group of `folder` with its size against the paper's."""
    table = Table("benchmark", "group", "problems", "paper", "match", title=f"benchmark sets in {folder}")
    for r in rows:
        match = "-" if r["paper"] is None else ("yes" if r["match"] else "NO")
        table.add_row(r["benchmark"], r["group"], str(r["problems"]), str(r["paper"] or "-"), match)
    console.print(table)
