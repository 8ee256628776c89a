"""Run-to-run comparison of two seniors on one metric: per-problem values and a paired test.

`tandem-eval compare RUN_A RUN_B --metric M` reads M per problem from each run
(`tandem_eval.run.runs.problem_values`: pass@k from samples, lens metrics from the run's lens tables)
and reports A - B per benchmark group and macro with a paired-bootstrap CI and a sign-flip p-value
(`metrics.stats.scoped_cis` and `sign_flip_p_value`, the statistics layer the report tables use too).
`--metric tax@K` / `retention@K` compares the two seniors' communication tax: each handoff run with
the solo run it was measured against (4 runs, problems resampled jointly; `metrics.tax.tax_difference`).

    from tandem_eval.report.compare import compare_values
    from tandem_eval.run.runs import find_run, problem_values
    a, b = (problem_values(find_run(p, "solo"), "kl_exact") for p in ("runs/a", "runs/b"))
    table = compare_values(a, b)
"""

from __future__ import annotations

import pandas as pd

from ..metrics.registry import lookup
from ..metrics.stats import MACRO, _macro_weights, difference_row, scoped_cis, sign_flip_p_value
from ..metrics.tax import tax_difference
from ..run.lens_layout import LensError
from ..run.results import RunFolder, verify_run
from ..run.runs import (
    Run,
    differing_contents,
    lens_junior,
    measured_solo_path,
    pairing_problem,
    recorded_solo,
    same_junior,
)
from ..schemas import Bootstrap, RunFolderError

MISMATCH_FIX = "pass --on-mismatch intersect to compare the shared problems"


def compare_values(
    a: pd.DataFrame, b: pd.DataFrame, opts: Bootstrap = Bootstrap(), on_mismatch: str = "raise"
) -> pd.DataFrame:
    """Paired comparison a - b per benchmark group and macro (groups from a): CIs from one joint
    problem resampling per scope (stats.scoped_cis, macro stratified by group) and a sign-flip
    p-value of the per-problem differences per scope (stats.sign_flip_p_value)."""
    differ = differing_contents(a, b)  # one id, two problems (two files of one name): not a pair
    _check_problem_sets(a.index, b.index, on_mismatch, differ)
    both = a.index.intersection(b.index).difference(differ)
    pairs = pd.DataFrame(
        {"a": a["value"].reindex(both).astype(float), "b": b["value"].reindex(both).astype(float)}
    ).assign(group=a["group"].reindex(both), d=lambda f: f["a"] - f["b"])
    pairs = pairs.dropna(subset=["a", "b"])  # the problems actually paired
    missing = sorted(set(a["group"]) - set(pairs["group"]))
    # a group of A with no paired problem would drop out of the table and the macro without a word
    if missing:
        raise LensError(f"cannot pair the two runs: no problem of group {missing[0]!r} has a value in both runs")
    stats = {"a": lambda m: m[:, 0], "b": lambda m: m[:, 1], "diff": lambda m: m[:, 2]}
    cis = scoped_cis(pairs, ["a", "b", "d"], stats, ("group",), opts.n_boot, opts.seed, opts.alpha)
    table = []
    for name, c in [*((g, cis["group"][g]) for g in sorted(cis["group"])), (MACRO, cis[MACRO])]:
        part = pairs if name == MACRO else pairs[pairs["group"] == name]
        # the p-value tests the statistic the CI estimates: the macro weighs each group equally, not each problem
        weights = _macro_weights(part["group"].to_numpy() if name == MACRO else None, len(part))
        p_value = sign_flip_p_value(part["d"].to_numpy(), weights, opts.n_boot, opts.seed)
        table.append(difference_row(name, c, p_value, len(part)))
    return pd.DataFrame(table)


def _check_problem_sets(a: pd.Index, b: pd.Index, on_mismatch: str, differ: pd.Index | None = None) -> None:
    """Refuse runs on different problems (unless on_mismatch='intersect'), naming the CLI option;
    `differ`: ids both runs hold for different problems (by content), which count as in one run only."""
    if on_mismatch not in ("raise", "intersect"):
        raise LensError(f"on_mismatch must be 'raise' or 'intersect', got {on_mismatch!r}")
    differ = a[:0] if differ is None else differ
    only_a, only_b = a.difference(b).union(differ), b.difference(a).union(differ)
    if (len(only_a) or len(only_b)) and on_mismatch == "raise":
        same_id = f"; {len(differ)} ids name other problems (text or answer) in each run" if len(differ) else ""
        raise LensError(
            f"cannot pair the two runs: problem sets differ ({len(only_a)} problems only in A, {len(only_b)} "
            f"only in B, {len(a.intersection(b).difference(differ))} shared{same_id}); {MISMATCH_FIX}"
        )


def check_juniors(a: Run, b: Run, allow_mismatch: bool = False) -> tuple[dict, dict]:
    """The juniors whose lens outputs two runs' lens metrics come from (runs.lens_junior); refused
    when they are different checkpoints (a difference would mix the seniors with the juniors),
    unless allow_mismatch. Returns both, for the title that names them."""
    ja, jb = lens_junior(a), lens_junior(b)
    if not same_junior(ja, jb) and not allow_mismatch:
        name = lambda j: f"{j['label']} ({j['path'] or 'checkpoint not recorded'})"  # noqa: E731
        raise LensError(
            f"the two runs' lens outputs were scored by different juniors: A by {name(ja)}, B by {name(jb)}; "
            "compare runs scored by one junior (--junior LABEL picks among a run's juniors), or pass "
            "--allow-junior-mismatch to compare them anyway"
        )
    return ja, jb


def is_tax_metric(metric: str) -> bool:
    """tax@K or retention@K: a difference of two paired runs per senior (the registry's aggregate)."""
    found = lookup(metric)
    return found is not None and found[1] is not None and found[0].name in ("tax@K", "retention@K")


def solo_of(handoff: RunFolder) -> RunFolder:
    """The verified solo run a handoff run's tax was measured against (runs.measured_solo_path: the one
    it records, else its sibling OUT/solo), checked to be that run (runs.pairing_problem "measured")."""
    run = Run.load(handoff.path)
    path = measured_solo_path(run)
    if path is None:
        raise RunFolderError(
            f"{handoff.path} names no solo run that exists (recorded {recorded_solo(run)}, no sibling solo/); "
            "rerun `tandem-eval handoff` (with --solo-run SOLO if it lives elsewhere)"
        )
    solo = verify_run(path)
    if reason := pairing_problem(run, Run.load(solo.path), "measured"):
        raise RunFolderError(f"{reason}; restore that solo run, or rerun the handoff")
    return solo


def tax_compare(
    handoff_a: RunFolder, handoff_b: RunFolder, metric: str, opts: Bootstrap = Bootstrap(), on_mismatch="raise"
) -> pd.DataFrame:
    """tax@K or retention@K of senior A minus senior B (rows as compare_values), from two handoff runs
    and their solo runs."""
    if not is_tax_metric(metric):
        raise LensError(f"not a tax metric: {metric!r}; use tax@K or retention@K (K a number)")
    kind, k = metric.split("@")
    runs = [Run.load(rf.path) for rf in (solo_of(handoff_a), handoff_a, solo_of(handoff_b), handoff_b)]
    differ = set(differing_contents(runs[0].contents().to_frame("content"), runs[2].contents().to_frame("content")))
    if differ and on_mismatch == "raise":
        raise LensError(
            f"cannot pair the two seniors' runs: {len(differ)} problem ids name other problems (text or answer) in "
            f"each senior's runs; {MISMATCH_FIX}"
        )
    if differ:  # intersect: the problems that are the same problems in both seniors' runs
        runs = [r.restrict(r.problem_keys() - differ) for r in runs]
    samples = [r.samples() for r in runs]
    try:
        rows = tax_difference(
            samples[0], samples[1], samples[2], samples[3], int(k), kind, opts, on_mismatch=on_mismatch
        )
    except ValueError as e:
        fix = f"; {MISMATCH_FIX}" if "problem sets differ" in str(e) else ""
        raise LensError(f"cannot pair the two seniors' runs: {e}{fix}") from None
    return pd.DataFrame(rows)
