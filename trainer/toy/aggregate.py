"""The toy world's numbers: per scenario and arm, the paper's metrics pooled over seeds, and the paired
differences between arms (trainer/toy/summary.py turns them into summary.json, verdicts and figures).

Reads results/toy/<scenario>/<arm>/seed<S>/{solo,handoff-paragraph} run folders through tandem_eval.run.runs.
METRIC: solo_pass@1, solo_pass@4, handoff_pass@4, tax@4 (points), kl_exact (nats/token), junior_nll
(nats/token), jargon (% of solo CoTs with calculator annotations) and terse (% of solo CoT steps written
tersely). Statistics: the mean over seeds x
problems; CI from the two-way clustered bootstrap of metrics.stats.scoped_cis (seeds and problems
resampled), the same builder as the report's tables. A difference A - B pairs seed S of A with seed S
of B (the same evaluation seed) and each problem with itself, and resamples them jointly; beside it, a
seed-level paired t interval (S - 1 df).

    from trainer.toy.aggregate import arm_frames, difference
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tandem_eval.metrics.registry import METRICS as REGISTRY
from tandem_eval.metrics.registry import header
from tandem_eval.metrics.stats import MACRO, macro_mean, scoped_cis, t_interval
from tandem_eval.report.compare import tax_compare
from tandem_eval.run.lens_layout import LensError
from tandem_eval.run.results import RunFolder
from tandem_eval.run.runs import problem_values, runs_in
from tandem_eval.schemas import ALPHA, BOOT_SEED, N_BOOT, PROBLEM_KEY, Bootstrap
from trainer.toy.styles import terse_rate, uses_jargon

SCENARIOS = ("dialects", "emergent", "self-paired", "jargon")  # the toy world's scenarios, in the order they are shown
K = 4
README_BEGIN, README_END = "<!-- toy-summary:begin -->", "<!-- toy-summary:end -->"

# summary key -> (runs.problem_values metric, run mode)
PER_PROBLEM = {
    "solo_pass@1": ("pass@1", "solo"),
    "solo_pass@4": (f"pass@{K}", "solo"),
    "handoff_pass@4": (f"pass@{K}", "handoff"),
    "kl_exact": ("kl_exact", "solo"),
    "junior_nll": ("junior_nll", "solo"),
}
METRICS = ["solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "kl_exact", "junior_nll", "jargon", "terse"]
LABELS = {  # the registry's headers (tandem_eval.metrics.registry), the toy's own styles, and KL's symbol
    **{m: header(m) for m in METRICS[:6]},
    "kl_exact": "KL(S‖J) (nats/tok)",
    "jargon": "jargon CoTs (%)",
    "terse": "terse steps (%)",
}
DECIMALS = {m: REGISTRY[m].decimals for m in ("kl_exact", "junior_nll")}


# ------------------------------------------------------------------ reading
def arm_runs(scenario_dir: Path) -> dict[str, dict[int, dict[str, object]]]:
    """{arm: {seed: {mode: Run}}} of a scenario folder (arm without the scenario prefix)."""
    out: dict = {}
    for run in runs_in(scenario_dir):
        arm = run.arm.split("/")[-1]
        out.setdefault(arm, {}).setdefault(run.seed or 0, {})[run.mode] = run
    return out


def frame(seeds: dict[int, dict[str, object]]) -> pd.DataFrame:
    """One row per (seed, problem): the per-problem values of every metric an arm's runs have."""
    parts = []
    for seed, modes in sorted(seeds.items()):
        cols: dict[str, pd.Series] = {}
        group = None
        for key, (metric, mode) in PER_PROBLEM.items():
            run = modes.get(mode)
            if run is None:
                continue
            try:
                v = problem_values(run, metric)
            except LensError:  # no lens table for this run (e.g. the junior evaluated alone)
                continue
            cols[key], group = v["value"].astype(float), v["group"] if group is None else group
        if "solo" in modes:
            s = modes["solo"].samples()
            for name, detect in (("jargon", uses_jargon), ("terse", terse_rate)):
                cols[name] = s.assign(j=s["text"].map(detect) * 100.0).groupby(PROBLEM_KEY)["j"].mean()
        if cols:
            df = pd.DataFrame(cols)
            if "solo_pass@4" in df and "handoff_pass@4" in df:
                df["tax@4"] = df["solo_pass@4"] - df["handoff_pass@4"]
            parts.append(df.assign(group=group.reindex(df.index) if group is not None else "test", seed=seed))
    return pd.concat(parts) if parts else pd.DataFrame()


def _ci(values: pd.DataFrame, columns: list[str], fn) -> dict:
    """{"mean", "ci", "seed_ci"} of fn(columns) over the (seed x problem) rows, macro over groups:
    "ci" the two-way bootstrap (seeds and problems resampled jointly), "seed_ci" a Student-t interval
    over the seeds' macro values (S - 1 degrees of freedom; None below 2 seeds)."""
    v = values.dropna(subset=columns)
    if not len(v):
        return {}
    c = scoped_cis(v, columns, {"x": fn}, ("group",), N_BOOT, BOOT_SEED, ALPHA, cluster="seed")[MACRO]["x"]
    per_seed = [
        macro_mean(pd.Series(fn(g[columns].to_numpy(dtype=float)), index=g.index), g["group"])
        for _, g in v.groupby("seed", sort=True)
    ]
    t = t_interval(per_seed, ALPHA)
    return {"mean": c.estimate, "ci": [c.low, c.high], "seed_ci": [t[1], t[2]] if t else None}


def arm_summary(frame: pd.DataFrame, seeds: dict) -> dict:
    """{metric: {"mean", "ci", "seed_ci"}} of one arm ("ci": the two-way bootstrap; "seed_ci": a t
    interval over the seeds' macro means, None below 2 seeds), and its seeds, samples and problems."""
    cells = {}
    for m in METRICS:
        if m in frame:
            cell = _ci(frame, [m], lambda x: x[:, 0])
            if cell:
                cells[m] = cell
    any_run = next(iter(next(iter(seeds.values())).values()))
    cells["n_seeds"] = len(seeds)
    cells["n_samples"] = int(any_run.config["n"])
    cells["n_problems"] = int(frame.loc[frame["seed"] == frame["seed"].iloc[0]].shape[0]) if len(frame) else 0
    return cells


def paired_rows(a: pd.DataFrame, b: pd.DataFrame, metrics: list[str] | None = None) -> pd.DataFrame:
    """The (seed, problem) rows both frames hold, A's columns suffixed _a and B's _b (`metrics`: only
    those), indexed by problem with `seed` and `group` columns (scoped_cis' cluster layout)."""
    key = ["seed", *PROBLEM_KEY]
    cols = None if metrics is None else ["group", *metrics]
    ja, jb = (f.reset_index().set_index(key)[cols] if cols else f.reset_index().set_index(key) for f in (a, b))
    both = pd.merge(ja, jb, how="inner", left_index=True, right_index=True, suffixes=("_a", "_b"))
    return both.reset_index(["seed"]).rename(columns={"group_a": "group"})


def difference(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """{metric: {"mean", "ci", "seed_ci"}} of A - B, rows paired on (seed, problem), and the seeds
    paired ("paired_seeds") and those one side lacks ("unpaired_seeds": {"a": [...], "b": [...]}), which
    no difference can use: they are named, never silently dropped. "ci": the two-way bootstrap (seeds
    and problems resampled jointly); "seed_ci": a paired t interval over the seeds' macro differences
    (S - 1 degrees of freedom; None below 2 seeds)."""
    both = paired_rows(a, b)
    seeds_a, seeds_b = set(a["seed"]) if len(a) else set(), set(b["seed"]) if len(b) else set()
    out: dict = {}
    for m in METRICS:
        if f"{m}_a" in both and f"{m}_b" in both:
            cell = _ci(both, [f"{m}_a", f"{m}_b"], lambda x: x[:, 0] - x[:, 1])
            if cell:
                out[m] = cell
    out["paired_seeds"] = sorted(seeds_a & seeds_b)
    out["unpaired_seeds"] = {"a": sorted(seeds_a - seeds_b), "b": sorted(seeds_b - seeds_a)}
    return out


def tax_vs_grpo(scenario_dir: Path, arm: str = "tandem", base: str = "grpo") -> list[dict]:
    """tax@4 of `arm` minus `base`, per seed both hold: `tandem-eval compare --metric tax@4`'s macro row
    (compare.tax_compare: problems resampled jointly across the four runs; sign-flip p-value)."""
    rows = []
    for hand in sorted(scenario_dir.glob(f"{arm}/seed*/handoff-paragraph")):
        other = scenario_dir / base / hand.parent.name / "handoff-paragraph"
        if not (other / "COMPLETE").exists() or not (hand / "COMPLETE").exists():
            continue
        if min(RunFolder(r).config()["config"]["n"] for r in (hand, other)) < K:
            continue  # tax@K needs K samples per problem (the CI-scale toy world draws fewer)
        table = tax_compare(RunFolder(hand), RunFolder(other), f"tax@{K}", Bootstrap(n_boot=N_BOOT, seed=BOOT_SEED))
        macro = table[table["group"] == MACRO].iloc[0].to_dict()
        rows.append({"seed": hand.parent.name, **{k: v for k, v in macro.items() if k != "group"}})
    return rows
