"""Tables on the terminal: pass@k of finished runs, the communication tax, a regrade's changed
verdicts, the benchmark registry. Every command prints through `console` here, so a test can capture
or widen one console. On a terminal a table is drawn by rich; piped to a file or a CI log (stdout not
a terminal) it is a markdown table, one row per line with every cell whole (rich would cut names
and wrap cells to an 80-column guess of a width a pipe does not have).

    from tandem_eval.cli.terminal import console, print_passk, print_tax
    print_passk({"solo": rf.metrics()["pass_at_k"]}, (1, 2, 4))

Imports rich only (the CLI imports it before `--help`): the numbers come already computed.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

console = Console(soft_wrap=True)  # lines are never broken at a guessed width (a pipe has none); tables set theirs


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def show(title: str | None, header: list[str], rows: list[list[str]], caption: str | None = None, right=()) -> None:
    """One table: rich's on a terminal, else markdown (the module docstring says why). `right`: the
    indices of right-aligned (number) columns. Written by hand: rich has no plain-text table mode,
    and pandas' to_markdown would import pandas (and tabulate) for a few lines of text."""
    if console.is_terminal:
        table = Table(title=title, caption=caption)
        for i, h in enumerate(header):
            table.add_column(h, justify="right" if i in right else "left")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    # a '|' in a cell would open a new column and a newline would end the row
    cell = lambda c: str(c).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [title, ""] if title else []
    lines += ["| " + " | ".join(map(cell, header)) + " |"]
    lines += ["|" + "|".join("--:" if i in right else ":--" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    lines += ["", caption] if caption else []
    console.out("\n".join(lines), highlight=False)


def print_json(record: dict) -> None:
    """One JSON object on stdout (`--json`), NaN as null: what a script reads with json.loads."""
    import json

    from tandem_eval.schemas import to_jsonable

    console.out(json.dumps(to_jsonable(record), indent=2, allow_nan=False), highlight=False)


def _with_ci(summary: dict, level: str | None, name: str, k: int) -> str:
    """pass@k and its 95% CI, `12.50 [5.00, 20.00]` (the value alone for summaries without CIs)."""
    value = (summary["macro"] if level is None else summary[level].get(name, {})).get(f"pass@{k}")
    ci = summary.get("ci", {})
    ci = (ci.get("macro", {}) if level is None else ci.get(level, {}).get(name, {})).get(f"pass@{k}")
    return _fmt(value) if value is None or not ci else f"{_fmt(value)} [{_fmt(ci[0])}, {_fmt(ci[1])}]"


def print_passk(runs: dict[str, dict], ks) -> None:
    """One table: rows = benchmarks (with their problem counts), groups that pool several benchmarks,
    and the macro when there are several groups; columns = pass@k [95% CI] per run."""
    first = next(iter(runs.values()))
    n = first.get("n_problems", {})
    rows: list[tuple[str, str | None, int | None]]  # (name, level: None = the macro, problems)
    rows = [(b, "per_benchmark", n.get("per_benchmark", {}).get(b)) for b in first["per_benchmark"]]
    rows += [
        (g, "per_group", n.get("per_group", {}).get(g)) for g in first["per_group"] if g not in first["per_benchmark"]
    ]
    several_groups = len(first["per_group"]) > 1
    if several_groups:  # one group: the macro is that group's number again
        rows.append((_macro_label(first), None, n.get("macro")))
    body = [
        [name if count is None else f"{name} (n={count})"]
        + [_with_ci(r, level, name, k) for r in runs.values() for k in ks]
        for name, level, count in rows
    ]
    header = ["benchmark"] + [f"{name} pass@{k}" for name in runs for k in ks]
    caption = _macro_caption(first) if several_groups else None
    show("pass@k (%) [95% bootstrap CI over problems]", header, body, caption, right=range(1, len(header)))


def print_outcomes(runs: dict[str, dict]) -> None:
    """One line per run from its metrics.json: traces, how many hit the token budget and how many
    have no answer the grader can read (a pass@k of 0 with every trace truncated says "raise
    --max-new-tokens", not "the model cannot solve these")."""
    for name, m in runs.items():
        n = m.get("n_samples", 0)
        # run folders written before metrics.json held these counts have only the rate and grade_status
        truncated = m.get("n_truncated", round(m.get("truncation_rate", 0.0) * n))
        no_answer = m.get("n_no_answer", m.get("grade_status", {}).get("no_answer", 0))
        line = (
            f"{name}: {n} traces, {truncated} truncated at the token budget, {no_answer} without a \\boxed{{}} answer"
        )
        if n and truncated == n:
            # the budget is --max-new-tokens, or less where --max-context leaves less after the prompt
            line += " (every trace hit the budget: raise --max-new-tokens, or --max-context when prompts are long)"
        console.print(line, highlight=False, markup=False)


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

    body = []
    levels = list(tax["per_group"].items())
    if len(levels) > 1:  # one group: the macro is that group's row again
        levels.append((tax.get("macro_label", "macro"), tax["macro"]))
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
                    # `and`: a bound of None (no CI) stays None and prints as '-'
                    f"[{_fmt(r['low'] and 100 * r['low'])}, {_fmt(r['high'] and 100 * r['high'])}]"
                )
            )
            body.append(
                [
                    name,
                    str(k),
                    _fmt(e["solo"]["estimate"]),
                    _fmt(e["handoff"]["estimate"]),
                    f"{_fmt(t['estimate'])} [{_fmt(t['low'])}, {_fmt(t['high'])}]",
                    ret,
                    fmt_p(e.get("tax_p_value")),
                ]
            )
    header = ["scope", "k", "solo", "handoff", "tax [CI]", "retention [CI]", "p"]
    show(
        "communication tax = solo - handoff (points); retention = handoff / solo; 95% CI", header, body, right=range(7)
    )


def print_regrade(result, n_show: int = 20) -> None:
    """The disagreements of a regrade.RegradeResult (first `n_show` rows), their count, and pass@k
    stored vs regraded."""
    import pandas as pd  # loaded already: the result holds a DataFrame

    changed = result.changed
    if len(changed):
        body = [
            [
                r.benchmark,
                str(r.problem_id),
                str(r.sample_idx),
                r.mode,
                "-" if pd.isna(r.new_extracted_answer) else str(r.new_extracted_answer)[:40],
                str(r.gold)[:40],
                f"{r.old_correct} ({r.old_grade_status})",
                f"{r.new_correct} ({r.new_grade_status})",
            ]
            for r in changed.head(n_show).itertuples()
        ]
        header = ["benchmark", "problem", "sample", "mode", "answer", "gold", "stored", "regraded"]
        show("verdicts that changed (stored -> regraded)", header, body)
        if len(changed) > n_show:
            console.print(f"... {len(changed) - n_show} more in {result.path / 'regrade.parquet'}")
    graders = result.table[["old_grader", "new_grader"]].iloc[0] if len(result.table) else None
    if graders is not None:
        console.print(f"grader: stored {graders.old_grader}; regraded {graders.new_grader}", highlight=False)
    console.print(f"{len(changed)} of {len(result.table)} samples changed verdict", highlight=False)
    print_passk(result.pass_at_k, result.ks)
    console.print(f"written: {result.path / 'regrade.parquet'}  {result.path / 'regrade.json'}")


def print_benchmarks(benchmarks: dict, sets: dict) -> None:
    """The benchmark registry (name, group, source, sizes) and the named sets."""
    body = []
    for name, spec in benchmarks.items():
        size, paper = (str(v) if v is not None else "-" for v in (spec.size, spec.paper_size))
        source = spec.package[0] if spec.package else str(spec.path or spec.hub_id)  # a wheel, a file or a hub id
        body.append([name, spec.group, source, size, paper, spec.description])
    show(None, ["name", "group", "source", "size", "paper", "description"], body, right=(3, 4))
    for name, members in sets.items():
        console.print(f"set {name}: {', '.join(members)}")


def print_paper_sets(rows: list[dict], folder) -> None:
    """Each benchmark file and group of `folder` with its size against the paper's."""
    body = []
    for r in rows:
        match = "-" if r["paper"] is None else ("yes" if r["match"] else "NO")
        body.append([r["benchmark"], r["group"], str(r["problems"]), str(r["paper"] or "-"), match])
    show(f"benchmark sets in {folder}", ["benchmark", "group", "problems", "paper", "match"], body, right=(2, 3))
