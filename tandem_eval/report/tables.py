"""Table 2 of the paper, for any set of arms: per benchmark group and macro, each senior's solo
pass@k, handoff pass@k, retention, communication tax, junior NLL (legibility) and KL drift, as
mean ± half-width of the 95% bootstrap CI, best value per column in bold; Markdown and LaTeX.

    from tandem_eval.report.collect import collect
    from tandem_eval.report.tables import table2, to_markdown, to_latex
    t = table2(collect(["results/toy"]), k=4)      # a Table: rows (DataFrame) + caption facts
    print(to_markdown(t)); open("t.tex", "w").write(to_latex(t))

Numbers come from tandem_eval.report.cells (each arm's cells, through tandem_eval.metrics on the
run folders' samples); nothing is re-implemented here. Output is deterministic: fixed bootstrap seed,
rows sorted (groups alphabetically, macro last; seniors by label), fixed float formatting, no
paths or dates, so a rerun on the same run folders is byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tandem_eval.metrics.registry import fmt_value
from tandem_eval.metrics.stats import MACRO
from tandem_eval.report.cells import (
    COLUMNS,
    DRIFT_COLUMNS,
    MC_COLUMNS,
    Column,
    arm_cells,
    as_float,
    seed_cells,
)
from tandem_eval.report.collect import Collection
from tandem_eval.run.runs import ReportError, Run
from tandem_eval.schemas import BOOT_SEED, N_BOOT


@dataclass
class Table:
    rows: pd.DataFrame  # scope, n_problems, senior, then <key>, <key>_low, <key>_high per column
    k: int
    schedule: str | None
    n_boot: int
    columns: list[Column] = field(default_factory=list)  # the non-empty ones, in order
    juniors: dict[str, str] = field(default_factory=dict)  # senior -> junior whose lens outputs are shown
    note: str | None = None  # how rows were restricted when the runs cover different problems
    groups: list[str] = field(default_factory=list)
    title: str | None = None  # which problem set the table compares (report: one table per set)
    seeds: dict[str, int] = field(default_factory=dict)  # senior -> seeds its row pools (rows of one seed: absent)


# ---- rows ------------------------------------------------------------------------------------


def check_k(runs: list[Run], k: int, where: str = "") -> None:
    """Refuse a `k` none of `runs` holds pass@k for (a table would otherwise lose every pass@k column
    without a word); `where` names their problem set."""
    held = sorted(set().union(*(r.ks for r in runs)))
    if runs and k not in held:
        raise ReportError(
            f"--k {k}: no run{where} holds pass@{k} (they hold k = {', '.join(map(str, held))}); pass one of those"
        )


def default_k(col: Collection) -> int:
    """The paper's table uses pass@4; else the largest k every run has."""
    ks = col.common_ks()
    if not ks:
        raise ReportError("runs share no k; pass --k")
    return 4 if 4 in ks else max(ks)


def shared_problems(runs: list[Run]) -> tuple[set, dict[str, set], set]:
    """(problems every run holds; per group, the problems shared by the runs that have that group;
    all problems) as (benchmark, problem_id) keys."""
    keysets = [r.problem_keys() for r in runs]
    union = set().union(*keysets) if keysets else set()
    shared = set.intersection(*keysets) if keysets else set()
    group_of: dict[tuple, str] = {}  # (benchmark, problem_id) -> group
    for r in runs:
        s = r.samples()
        group_of.update(zip(zip(s["benchmark"], s["problem_id"].astype(str)), s["group"]))
    per_group: dict[str, set] = {}
    for g in sorted(set(group_of.values())):
        in_g = [ks & {key for key in ks if group_of[key] == g} for ks in keysets]
        # only the runs holding the group: a run without it would empty the group's intersection
        in_g = [x for x in in_g if x]
        per_group[g] = set.intersection(*in_g) if in_g else set()
    return shared, per_group, union


def _rows(pairs: dict, k: int, n_boot: int, seed: int, scopes: set | None = None) -> list[dict]:
    """Table rows (one per scope and senior) from {arm: (solo, handoff)}; `scopes` keeps only those."""
    rows = []
    for arm, pair in pairs.items():
        if isinstance(pair, list):  # one arm's seeds: aggregated (one seed: that run's own numbers)
            if len(pair) > 1:
                cells = seed_cells(pair, k, n_boot, seed)
            else:
                cells = arm_cells(pair[0][0], pair[0][1], arm, k, n_boot, seed)
        else:
            cells = arm_cells(pair[0], pair[1], arm, k, n_boot, seed)
        for scope, metrics in cells.items():
            if scopes is not None and scope not in scopes:
                continue
            row = {"scope": scope, "senior": arm}
            for c in COLUMNS:
                m = metrics.get(c.key, {})
                row.update(
                    {
                        c.key: as_float(m.get("estimate")),
                        f"{c.key}_low": as_float(m.get("low")),
                        f"{c.key}_high": as_float(m.get("high")),
                    }
                )
            rows.append(row)
    return rows


def _sizes(pairs: dict, k: int) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for pair in pairs.values():
        for solo, hand in pair if isinstance(pair, list) else [pair]:
            run = solo or hand
            if run is None:
                continue
            pp = run.per_problem([k])
            for scope, n in {**pp.groupby("group").size().to_dict(), MACRO: len(pp)}.items():
                sizes[scope] = max(sizes.get(scope, 0), int(n))
    return sizes


def _restricted(pairs: dict, keys: set) -> dict:
    def one(pair):
        return tuple(r.restrict(keys) if r is not None else None for r in pair)

    return {a: [one(p) for p in pair] if isinstance(pair, list) else one(pair) for a, pair in pairs.items()}


def table2(
    col: Collection,
    k: int | None = None,
    schedule: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
    by_seed: bool = False,
) -> Table:
    """Table 2 rows for every arm of `col` (handoff `schedule`: default the primary one).

    When the runs cover different problems, nothing is averaged over unequal problem sets: each
    group row uses the problems every run holding that group shares, and the macro only the
    problems every run shares (no macro row when there are none); Table.note says so."""
    k = default_k(col) if k is None else int(k)
    schedule = schedule or col.primary_schedule()
    juniors = col.pick_juniors_once()
    # {arm: (solo, handoff)}; with seeds aggregated, {arm: [(solo, handoff) of each seed]}
    pairs: dict[str, Any] = {arm: (col.solo(arm), col.handoff(arm, schedule) if schedule else None) for arm in col.arms}
    pairs = {a: p for a, p in pairs.items() if p != (None, None)}
    runs = [r for pair in pairs.values() for r in pair if r is not None]
    check_k(runs, k)
    if not by_seed:  # runs of one arm and different seeds (label ARM/sN) make one row
        by_arm: dict[str, list] = {}
        arm_of = {}
        for label, pair in pairs.items():
            run = next(r for r in pair if r is not None)
            arm_of[label] = run.arm
            by_arm.setdefault(run.arm, []).append(pair)
        pairs = by_arm
        juniors = {arm_of[a]: j for a, j in juniors.items() if a in arm_of}
    rows, sizes, note = _rows_on_shared_problems(pairs, runs, k, n_boot, seed)
    df = pd.DataFrame(rows)
    if df.empty:
        raise ReportError("no arm has a solo or handoff run to tabulate")
    df = _drop_unneeded_bpb(_drop_unneeded_mc(df))
    df["n_problems"] = df["scope"].map(sizes).fillna(0).astype(int)
    # macro last: sorted by name it would fall among the groups (aime < macro < minerva)
    df["_order"] = (df["scope"] == MACRO).astype(int)
    df = df.sort_values(["_order", "scope", "senior"], kind="stable").drop(columns="_order")
    columns = [c for c in COLUMNS if df[c.key].notna().any()]
    keep = ["scope", "n_problems", "senior"] + [f"{c.key}{s}" for c in columns for s in ("", "_low", "_high")]
    groups = sorted(set(df["scope"]) - {MACRO})
    shown = {a: j for a, j in juniors.items() if a in pairs}
    pooled = {a: len(p) for a, p in pairs.items() if isinstance(p, list) and len(p) > 1}
    return Table(df[keep].reset_index(drop=True), k, schedule, n_boot, columns, shown, note, groups, seeds=pooled)


def _rows_on_shared_problems(pairs: dict, runs: list[Run], k: int, n_boot: int, seed: int):
    """(rows, problems per scope, note): every group row on the problems the runs holding that group
    share, the macro on those every run shares; the note says how rows were restricted (None: not)."""
    shared, per_group, union = shared_problems(runs)
    if shared == union:
        return _rows(pairs, k, n_boot, seed), _sizes(pairs, k), None
    group_view = _restricted(pairs, set().union(*per_group.values()))
    rows, sizes = _rows(group_view, k, n_boot, seed, scopes=set(per_group)), _sizes(group_view, k)
    # group_view's macro counts every group's problems; the macro row (below) uses only the shared ones
    sizes.pop(MACRO, None)
    if not shared:
        note = (
            f"the runs cover different problems ({len(union)} in all) and no problem is shared by every run, "
            "so there is no macro row; each group row uses the problems shared by the runs holding that group"
        )
        return rows, sizes, note
    rows += _rows(_restricted(pairs, shared), k, n_boot, seed, scopes={MACRO})
    sizes[MACRO] = len(shared)
    shared_groups = sorted({g for g, keys in per_group.items() if keys & shared})
    note = (
        f"the runs cover different problems ({len(union)} in all): each group row uses the problems shared "
        f"by the runs holding that group; the macro uses only the {len(shared)} problems every run shares "
        f"(groups {', '.join(shared_groups)})"
    )
    return rows, sizes, note


def _drop_unneeded_bpb(df: pd.DataFrame) -> pd.DataFrame:
    """Legibility in bits per byte only when some senior's junior has another vocabulary (it has no
    nats-per-token value); then every senior's bits per byte are shown, in their own column."""
    lacks_nll = (df["bpb"].notna() & df["nll"].isna()).groupby(df["senior"]).any()
    if not lacks_nll.any():
        df[["bpb", "bpb_low", "bpb_high"]] = np.nan
    return df


def _drop_unneeded_mc(df: pd.DataFrame) -> pd.DataFrame:
    """Monte-Carlo KL columns only when some senior with a drift table has no exact KL."""
    has_drift = df[list(DRIFT_COLUMNS)].notna().any(axis=1)
    lacks_exact = (has_drift & df["kl_exact"].isna()).groupby(df["senior"]).any()
    if not lacks_exact.any():
        for key in MC_COLUMNS:
            df[[key, f"{key}_low", f"{key}_high"]] = np.nan
    return df


# ---- formatting ------------------------------------------------------------------------------


def best_mask(rows: pd.DataFrame, col: Column) -> pd.Series:
    """True where the cell holds the best value of its column within its scope (ties: all),
    judged on the displayed (rounded) values; nothing is marked when fewer than 2 values exist or
    all values are equal."""
    rounded = rows[col.key].round(col.decimals)
    mask = pd.Series(False, index=rows.index)
    for _, idx in rows.groupby("scope", sort=False).groups.items():
        vals = rounded.loc[idx].dropna()
        if len(vals) >= 2 and vals.nunique() > 1:  # all tied (e.g. every senior at 0.0): nobody is best
            target = vals.max() if col.better == "max" else vals.min()
            mask.loc[vals.index[vals == target]] = True
    return mask


def _scope_label(scope: str, n: int) -> str:
    return f"{'Macro' if scope == MACRO else scope} (n={n})"


def _shown(t: Table) -> pd.DataFrame:
    """The rows Markdown and LaTeX print: with one benchmark group its macro row would repeat the group's
    row under another name ("Macro (n=50)" over one benchmark), so it is left out (the CSV keeps it)."""
    return t.rows[t.rows["scope"] != MACRO] if len(t.groups) == 1 else t.rows


def _caption(t: Table) -> str:
    rows = "rows: benchmark groups and their macro" if len(t.groups) != 1 else "rows: the one benchmark group"
    # the group's name alone hides that it pools three benchmarks (docs/metrics.md: Groups and macro)
    if any(g.lower().startswith("aime") for g in t.groups):
        rows += " (AIME 24/25/26 pool into one group)"
    parts = [f"{rows}; pass@{t.k} in percent"]
    parts.append(f"handoff schedule `{t.schedule}`" if t.schedule else "no handoff runs")
    parts.append(
        f"mean ± half-width of the 95% bootstrap CI ({t.n_boot} resamples of problems; the macro "
        "weights each benchmark group equally and resamples within groups)"
        if not t.seeds
        else _pooled_text(t)
    )
    if t.note:
        parts.append(t.note)
    parts.append("tax = solo − handoff (points, lower is better); retention = handoff / solo")
    keys = {c.key for c in t.columns}
    if keys & {"nll", "bpb", *DRIFT_COLUMNS}:
        parts.append(f"lens outputs of {_junior_text(t.juniors)}, scored on the senior's solo CoTs")
    if "nll" in keys:
        parts.append("junior NLL = the junior's mean per-token negative log-likelihood of the senior's solo CoTs")
    if "bpb" in keys:
        parts.append(
            "junior NLL (bits/byte) = the junior's negative log-likelihood of the CoT text per UTF-8 byte, the "
            "one unit that compares juniors with different tokenizers; nats/tok is shown only for juniors sharing "
            "the senior's vocabulary"
        )
    if "kl_exact" in keys:
        parts.append("KL exact = KL(senior ‖ junior) per token, exact over the vocabulary")
    if keys & set(MC_COLUMNS):
        parts.append(
            "KL k3 / k1 (MC) = Monte-Carlo estimates from the sampled tokens' log-probs (k1 = log p_s − log p_j, "
            "k3 = (r − 1) − log r with r = p_j / p_s), unbiased only for tokens drawn from the senior at "
            "temperature 1, so not comparable with the exact column; each column holds one estimator only"
        )
    parts.append("bold = best per column within a benchmark (none when all are equal)")
    return "; ".join(parts) + "."


def _pooled_text(t: Table) -> str:
    """The CI method of a table whose rows pool seeds (cells.seed_cells): such a row is the mean over its
    seeds x problems with a two-way clustered CI (stats.scoped_cis, cluster=seed), which the plain
    problem-bootstrap sentence would misstate; the rows of one seed are named with their own method."""
    counts = sorted(set(t.seeds.values()))
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    single = sorted(set(t.rows["senior"]) - set(t.seeds))
    text = (
        f"{'rows that pool seeds' if single else 'every row'} ({n} seeds): mean over seeds × problems ± half-width "
        f"of the 95% two-way clustered bootstrap CI ({t.n_boot} resamples; seeds and problems resampled "
        "independently, problems within groups; the macro weights each benchmark group equally)"
    )
    if single:
        each = " each" if len(single) > 1 else ""
        text += f"; {', '.join(single)} (one seed{each}): the plain bootstrap over problems"
    return text


def _junior_text(juniors: dict[str, str]) -> str:
    names = sorted(set(juniors.values()))
    if len(names) == 1:
        return f"the junior labelled '{names[0]}'"  # quoted: a label such as 'senior' reads as a word
    return "juniors " + ", ".join(f"'{j}' (for {a})" for a, j in sorted(juniors.items())) if names else "the junior"


def _header(c: Column, k: int) -> str:
    return c.metric.header(k)


def _md_cell(text) -> str:
    """A label as one Markdown table cell: a `|` in it would start a new column."""
    return str(text).replace("|", r"\|")


def to_markdown(t: Table) -> str:
    cols = t.columns
    lines = [
        "| benchmark | senior | " + " | ".join(_header(c, t.k) for c in cols) + " |",
        "|:--|:--|" + "--:|" * len(cols),
    ]
    marks = {c.key: best_mask(t.rows, c) for c in cols}
    prev = None
    for i, r in _shown(t).iterrows():
        scope = _scope_label(r["scope"], r["n_problems"]) if r["scope"] != prev else ""
        prev = r["scope"]
        cells = []
        for c in cols:
            text = fmt_value(r[c.key], r[f"{c.key}_low"], r[f"{c.key}_high"], c.decimals)
            cells.append(f"**{text}**" if marks[c.key][i] else text)
        lines.append(f"| {_md_cell(scope)} | {_md_cell(r['senior'])} | " + " | ".join(cells) + " |")
    head = f"**{t.title}**\n\n" if t.title else ""
    return head + "\n".join(lines) + "\n\n" + _caption(t) + "\n"


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def _latex_caption(t: Table) -> str:
    # the Markdown caption marks the schedule as code with backticks, which LaTeX would print as quotes
    text = latex_escape(((f"{t.title}. " if t.title else "") + _caption(t)).replace("`", ""))
    # ±, ‖, − and × in math mode: in text, pdflatex's default setup stops at ‖ and − ("not set up for use with LaTeX")
    return text.replace("±", r"$\pm$").replace("‖", r"$\|$").replace("−", "$-$").replace("×", r"$\times$")


def to_latex(t: Table, label: str = "tab:handoff") -> str:
    """A booktabs `table` float; needs \\usepackage{booktabs} in the preamble."""
    cols = t.columns
    marks = {c.key: best_mask(t.rows, c) for c in cols}
    head = " & ".join(["Benchmark", "Senior"] + [latex_escape(_header(c, t.k)) for c in cols])
    lines = [
        "% generated by `tandem-eval report`; do not edit by hand",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\setlength{\tabcolsep}{4pt}",
        rf"\caption{{{_latex_caption(t)}}}",
        rf"\label{{{label}}}",
        r"\begin{tabular}{ll" + "r" * len(cols) + "}",
        r"\toprule",
        head + r" \\",
        r"\midrule",
    ]
    prev = None
    for i, r in _shown(t).iterrows():
        if prev is not None and r["scope"] != prev:
            lines.append(r"\midrule")
        scope = latex_escape(_scope_label(r["scope"], r["n_problems"])) if r["scope"] != prev else ""
        prev = r["scope"]
        cells = []
        for c in cols:
            text = fmt_value(r[c.key], r[f"{c.key}_low"], r[f"{c.key}_high"], c.decimals, pm=r"$\pm$")
            # fmt_value's '–' (no value) as LaTeX's en dash; a leading '-' as a math minus, not a hyphen
            text = "--" if text == "–" else (f"$-${text[1:]}" if text.startswith("-") else text)
            cells.append(rf"\textbf{{{text}}}" if marks[c.key][i] else text)
        lines.append(" & ".join([scope, latex_escape(r["senior"])] + cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_csv(t: Table) -> str:
    """The table's numbers at full precision (rounded to 6 decimals for stable text), each row with what
    the Markdown says in its caption: the k of its pass@k columns, the handoff schedule and the seeds the
    row pools (1: one run's problems; more: the two-way clustered CI), so the file read alone is not
    ambiguous (pass@1 or pass@4?)."""
    rows = t.rows.assign(k=t.k, schedule=t.schedule or "", seeds=t.rows["senior"].map(t.seeds).fillna(1).astype(int))
    return rows.round(6).to_csv(index=False, float_format="%.6f", lineterminator="\n")
