"""The toy world's summary: per scenario and arm, the paper's numbers pooled over seeds, the paired
differences between arms, the verdicts on the paper's claims, and the learning-rate sweep.

Reads results/toy/<scenario>/<arm>/seed<S>/{solo,handoff-paragraph} run folders (through
tandem_eval.runs) and the training logs beside them, and writes

    results/toy/summary.json   the machine-readable summary (schema below); everything else is made from it
    results/toy/summary.md     tables, differences, verdicts, power, training and lr-sweep summaries
    results/toy/summary.png    solo / handoff pass@4 and drift per arm          (+ .pdf)
    results/toy/frontier.png   solo vs handoff pass@4: kl-reg's coefficients against tandem's single point
    results/toy/training.png   reward, zero-variance groups and held-out pass@1 along RL

and, with --readme, the block between the README's toy-summary markers.

summary.json: {"scenarios": {SCENARIO: {"arms": {ARM: {METRIC: {"mean": float, "ci": [lo, hi]}, ...,
"n_seeds": int, "n_samples": int, "n_problems": int}}, "differences": {"A - B": {METRIC: {"mean", "ci",
"seed_ci"}, "paired_seeds": [...], "unpaired_seeds": {"a": [...], "b": [...]}}}, "precondition":
{"grpo_tax@4_minus_init": {...}, "grpo_junior_nll_minus_init": {...}, "holds": bool, "rule": str},
"verdicts": [{"claim", "rule", "bootstrap", "seed_level", "outcome", ...}], "training": {...},
"tax_vs_grpo_per_seed": [...]}}, "lr_sweep": {...}, "thresholds": {...}}.
METRIC: solo_pass@1, solo_pass@4, handoff_pass@4, tax@4 (points), kl_exact (nats/token), junior_nll
(nats/token), jargon and terse (% of solo CoTs in that style). Statistics: the mean over seeds x
problems; CI from the two-way clustered bootstrap of metrics.stats.scoped_cis (seeds and problems
resampled), the same builder as the report's tables. A difference A - B pairs seed S of A with seed S
of B (the same evaluation seed) and each problem with itself, and resamples them jointly; beside it, a
seed-level paired t interval (S - 1 df). Verdicts rest on the hull of the two CIs, and none is given
on tandem unless the precondition (GRPO pays a tax of its own) holds.

    python -m trainer.toy.aggregate results/toy [--readme README.md]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from tandem_eval.compare import tax_compare
from tandem_eval.lens import LensError, LensOptions
from tandem_eval.metrics.stats import MACRO, macro_mean, scoped_cis, t_interval, to_jsonable
from tandem_eval.report.collect import read_train_log
from tandem_eval.report.tables import fmt_value
from tandem_eval.results import RunFolder, atomic_write_json, atomic_write_text
from tandem_eval.runs import problem_values, runs_in
from trainer.toy.styles import is_terse, uses_jargon

SCENARIOS = ("emergent", "self-paired", "jargon")  # the toy world's scenarios, in the order they are shown
K = 4
N_BOOT = 2000
BOOT_SEED = 0
ALPHA = 0.05
PARITY = 5.0  # points: solo accuracy "matches" when the difference's CI lies inside +-PARITY
TAX_EFFECT = 3.0  # points: the paper's effect size (GRPO tax 3.2 vs tandem 0.1, macro pass@4)
RL_GAIN = 15.0  # points of solo pass@1 that RL must add for the self-paired experiment to have power
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
LABELS = {
    "solo_pass@1": "solo pass@1 (%)",
    "solo_pass@4": "solo pass@4 (%)",
    "handoff_pass@4": "handoff pass@4 (%)",
    "tax@4": "tax@4 (pts)",
    "kl_exact": "KL(S‖J) (nats/tok)",
    "junior_nll": "junior NLL (nats/tok)",
    "jargon": "jargon CoTs (%)",
    "terse": "terse CoTs (%)",
}
DECIMALS = {"kl_exact": 3, "junior_nll": 3}


# ------------------------------------------------------------------ reading
def _arm_runs(scenario_dir: Path) -> dict[str, dict[int, dict[str, object]]]:
    """{arm: {seed: {mode: Run}}} of a scenario folder (arm without the scenario prefix)."""
    out: dict = {}
    for run in runs_in(scenario_dir):
        arm = run.arm.split("/")[-1]
        out.setdefault(arm, {}).setdefault(run.seed or 0, {})[run.mode] = run
    return out


def _frame(seeds: dict[int, dict[str, object]]) -> pd.DataFrame:
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
            for name, detect in (("jargon", uses_jargon), ("terse", is_terse)):
                cols[name] = s.assign(j=s["text"].map(detect) * 100.0).groupby(["benchmark", "problem_id"])["j"].mean()
        if cols:
            df = pd.DataFrame(cols)
            if "solo_pass@4" in df and "handoff_pass@4" in df:
                df["tax@4"] = df["solo_pass@4"] - df["handoff_pass@4"]
            parts.append(df.assign(group=group.reindex(df.index) if group is not None else "test", seed=seed))
    return pd.concat(parts) if parts else pd.DataFrame()


def _ci(values: pd.DataFrame, columns: list[str], fn) -> dict:
    """{"mean", "ci"} of fn(column means) over the (seed x problem) rows, macro over groups."""
    v = values.dropna(subset=columns)
    if not len(v):
        return {}
    c = scoped_cis(v, columns, {"x": fn}, ("group",), N_BOOT, BOOT_SEED, ALPHA, cluster="seed")[MACRO]["x"]
    return {"mean": c.estimate, "ci": [c.low, c.high]}


def arm_summary(frame: pd.DataFrame, seeds: dict) -> dict:
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


def difference(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """{metric: {"mean", "ci", "seed_ci"}} of A - B, rows paired on (seed, problem), and the seeds
    paired ("paired_seeds") and those one side lacks ("unpaired_seeds": {"a": [...], "b": [...]}), which
    no difference can use: they are named, never silently dropped. "ci": the two-way bootstrap (seeds
    and problems resampled jointly); "seed_ci": a paired t interval over the seeds' macro differences
    (S - 1 degrees of freedom; None below 2 seeds)."""
    key = ["seed", "benchmark", "problem_id"]
    ja, jb = a.reset_index().set_index(key), b.reset_index().set_index(key)
    both = pd.merge(ja, jb, how="inner", left_index=True, right_index=True, suffixes=("_a", "_b"))
    both = both.reset_index(["seed"]).rename(columns={"group_a": "group"})
    seeds_a, seeds_b = set(a["seed"]) if len(a) else set(), set(b["seed"]) if len(b) else set()
    out: dict = {}
    for m in METRICS:
        if f"{m}_a" in both and f"{m}_b" in both:
            cell = _ci(both, [f"{m}_a", f"{m}_b"], lambda x: x[:, 0] - x[:, 1])
            if cell:
                v = both.dropna(subset=[f"{m}_a", f"{m}_b"])
                per_seed = [macro_mean(g[f"{m}_a"] - g[f"{m}_b"], g["group"]) for _, g in v.groupby("seed", sort=True)]
                t = t_interval(per_seed, ALPHA)
                out[m] = {**cell, "seed_ci": [t[1], t[2]] if t else None}
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
        table = tax_compare(RunFolder(hand), RunFolder(other), f"tax@{K}", LensOptions(n_boot=N_BOOT, seed=BOOT_SEED))
        macro = table[table["group"] == MACRO].iloc[0].to_dict()
        rows.append({"seed": hand.parent.name, **{k: v for k, v in macro.items() if k != "group"}})
    return rows


def read_jsonl(path: Path) -> list[dict]:
    """A trainer log's records by step (report.collect.read_train_log), [] when there is none. A resumed
    run re-logs the steps after its last checkpoint: the later record of a step wins."""
    if not path.exists():
        return []
    df = read_train_log(path)
    return (df.drop_duplicates("step", keep="last") if "step" in df else df).to_dict("records")


def _heldout_pass1(record: dict) -> float | None:
    solo = record.get("solo") or {}
    return (solo.get("macro") or {}).get("pass@1")


def training_summary(scenario_dir: Path, arm: str) -> dict:
    """Reward and zero-variance-group fraction (mean of the first and last 10 steps, over seeds) and
    the held-out solo pass@1 curve (mean over seeds; step 0 = the initial senior)."""
    logs = [read_jsonl(p) for p in sorted(scenario_dir.glob(f"{arm}/seed*/train/train_log.jsonl"))]
    logs = [rows for rows in logs if rows]
    if not logs:
        return {}

    def window(key: str, part: slice) -> float:
        return float(np.mean([np.mean([r[key] for r in rows[part]]) for rows in logs]))

    curve: dict[int, list[float]] = {}
    init = read_jsonl(scenario_dir / "init" / "heldout.jsonl")
    for rec in init:
        curve.setdefault(0, []).append(_heldout_pass1(rec))
    for p in sorted(scenario_dir.glob(f"{arm}/seed*/train/eval_log.jsonl")):
        for rec in read_jsonl(p):
            if _heldout_pass1(rec) is not None:
                curve.setdefault(int(rec["step"]), []).append(_heldout_pass1(rec))
    return {
        "n_seeds": len(logs),
        "steps": max(len(rows) for rows in logs),
        "reward_first10": window("reward", slice(0, 10)),
        "reward_last10": window("reward", slice(-10, None)),
        "zero_std_first10": window("frac_reward_zero_std", slice(0, 10)),
        "zero_std_last10": window("frac_reward_zero_std", slice(-10, None)),
        "per_step": {
            k: [float(np.mean([rows[i][k] for rows in logs if i < len(rows)])) for i in range(len(logs[0]))]
            for k in ("reward", "frac_reward_zero_std")
        },
        "heldout_pass@1": [[s, float(np.mean(v))] for s, v in sorted(curve.items())],
    }


# ------------------------------------------------------------------ verdicts
def _fmt(cell: dict, decimals: int = 1, signed: bool = False, key: str = "ci") -> str:
    sign = "+" if signed else ""
    if cell.get(key) is None:
        return "–"
    lo, hi = cell[key]
    return f"{cell['mean']:{sign}.{decimals}f} [{lo:{sign}.{decimals}f}, {hi:{sign}.{decimals}f}]"


def conservative(cell: dict | None) -> tuple[float, float] | None:
    """The interval a verdict rests on: the hull of the two-way bootstrap CI and the seed-level t CI
    (the more conservative of the two, whichever side). None without a seed-level CI (fewer than 2
    paired seeds): no verdict rests on one seed."""
    if not cell or cell.get("seed_ci") is None:
        return None
    return min(cell["ci"][0], cell["seed_ci"][0]), max(cell["ci"][1], cell["seed_ci"][1])


UNINFORMATIVE = "uninformative: GRPO shows no tax"
ONE_SEED = "no: fewer than 2 paired seeds, so no seed-level CI"
PRECONDITION_RULE = "grpo − init tax@4 and grpo − init junior NLL: both CIs above 0 (bootstrap and seed-level)"


def precondition(differences: dict) -> dict:
    """The paper's precondition, checked before any claim on tandem: GRPO itself pays a tax and writes
    CoTs its junior reads worse than the initial senior's. {"grpo_tax@4_minus_init": {mean, ci,
    bootstrap_ci, seed_ci}, "grpo_junior_nll_minus_init": {...}, "holds": bool, "rule": str}; "ci" is
    the conservative interval (None with fewer than 2 paired seeds)."""
    d = differences.get("grpo - init", {})
    out: dict = {"rule": PRECONDITION_RULE}
    for key, m in (("grpo_tax@4_minus_init", "tax@4"), ("grpo_junior_nll_minus_init", "junior_nll")):
        c = d.get(m)
        ci = conservative(c)
        out[key] = (
            {"mean": c["mean"], "ci": list(ci) if ci else None, "bootstrap_ci": c["ci"], "seed_ci": c.get("seed_ci")}
            if c
            else None
        )
    out["holds"] = all(out[k] and out[k]["ci"] and out[k]["ci"][0] > 0 for k in list(out)[1:])
    return out


def _rl_moves(c, ci) -> str:
    if ci is None:
        return ONE_SEED
    return "yes" if c["mean"] >= RL_GAIN and ci[0] > 0 else f"no: gain below {RL_GAIN:g} pts or CI not above 0"


def _parity(c, ci) -> str:
    if ci is None:
        return ONE_SEED
    lo, hi = ci
    if -PARITY <= lo and hi <= PARITY:
        return "yes (parity)"
    if hi < 0:
        return "no: tandem is worse"
    if lo > 0:
        return "no: tandem is better"
    return f"no: CI wider than ±{PARITY:g}, parity not shown"


def _lower_tax(c, ci) -> str:
    if ci is None:
        return ONE_SEED
    lo, hi = ci
    if hi < 0:
        return "yes"
    if lo > 0:
        return "no: tandem's tax is higher"
    if -TAX_EFFECT <= lo and hi <= TAX_EFFECT:
        return f"no: no effect of {TAX_EFFECT:g}+ pts (CI inside ±{TAX_EFFECT:g})"
    return f"no: no effect detected; the CI cannot exclude {TAX_EFFECT:g} pts"


def _lower(c, ci) -> str:
    if ci is None:
        return ONE_SEED
    return "yes" if ci[1] < 0 else "no: higher" if ci[0] > 0 else "no: no difference detected"


# claim -> (difference, metric, rule, outcome function, decimals, needs the precondition)
CLAIMS = [
    ("RL moves the senior", "grpo - init", "solo_pass@1", f"grpo − init solo pass@1 ≥ {RL_GAIN:g} pts, CI above 0",
     _rl_moves, 1, False),
    ("Solo parity", "tandem - grpo", "solo_pass@1", f"tandem − grpo solo pass@1: CI inside ±{PARITY:g} pts",
     _parity, 1, True),
    ("Lower communication tax", "tandem - grpo", "tax@4", "tandem − grpo tax@4: CI below 0", _lower_tax, 1, True),
    ("Better legibility", "tandem - grpo", "junior_nll", "tandem − grpo junior_nll: CI below 0", _lower, 3, True),
    ("Lower drift", "tandem - grpo", "kl_exact", "tandem − grpo kl_exact: CI below 0", _lower, 3, True),
]  # fmt: skip
KL_RULE = "kl-reg@C − tandem, solo and handoff pass@4: for every C, one CI below 0 and none above"


def _kl_frontier(d: dict, kl: list[str]) -> dict | None:
    """The kl-reg claim: every coefficient is worse than tandem on solo or handoff pass@4 and better on
    neither (each interval the conservative one); a coefficient that breaks the rule makes it "no"."""
    boot, seed, failed, missing = [], [], [], []
    for a in kl:
        k = d.get(f"{a} - tandem", {})
        if "solo_pass@4" not in k or "handoff_pass@4" not in k:
            continue
        cis = {m: conservative(k[m]) for m in ("solo_pass@4", "handoff_pass@4")}
        boot.append(f"{a}: solo {_fmt(k['solo_pass@4'], 1, True)}, handoff {_fmt(k['handoff_pass@4'], 1, True)}")
        seed.append(
            f"{a}: solo {_fmt(k['solo_pass@4'], 1, True, 'seed_ci')}, "
            f"handoff {_fmt(k['handoff_pass@4'], 1, True, 'seed_ci')}"
        )
        if any(ci is None for ci in cis.values()):
            missing.append(a)
            continue
        worse = [m.split("_")[0] for m, ci in cis.items() if ci[1] < 0]
        better = [m.split("_")[0] for m, ci in cis.items() if ci[0] > 0]
        if better:
            failed.append(f"{a} is better than tandem on {' and '.join(better)}")
        elif not worse:
            failed.append(f"{a} is indistinguishable from tandem on both")
    if not boot:
        return None
    outcome = (
        "no: " + "; ".join(failed)
        if failed
        else ONE_SEED
        if missing
        else "yes: every coefficient is worse than tandem on solo or handoff pass@4 and better on neither"
    )
    return {
        "claim": "KL-reg does not give tandem's combination",
        "rule": KL_RULE,
        "bootstrap": "; ".join(boot),
        "seed_level": "; ".join(seed),
        "outcome": outcome,
        "needs_precondition": True,
    }


def verdicts(sc: dict) -> list[dict]:
    """The paper's claims, each with its rule stated before the result (thresholds: module constants),
    its two-way bootstrap and seed-level CIs, and its outcome, decided on the more conservative CI.
    When the precondition fails, every claim on tandem is UNINFORMATIVE (its numbers still shown)."""
    d, arms, out = sc["differences"], sc["arms"], []
    pre = sc.get("precondition") or precondition(d)
    for claim, diff, m, rule, decide, decimals, gated in CLAIMS:
        c = d.get(diff, {}).get(m)
        if not c:
            continue
        out.append(
            {
                "claim": claim,
                "rule": rule,
                "bootstrap": _fmt(c, decimals, True),
                "seed_level": _fmt(c, decimals, True, "seed_ci"),
                "n_seeds": len(d[diff].get("paired_seeds", [])),
                "outcome": decide(c, conservative(c)),
                "needs_precondition": gated,
            }
        )
    kl = sorted((a for a in arms if a.startswith("kl-reg@")), key=lambda a: float(a.split("@")[1]))
    if kl and "tandem" in arms and (v := _kl_frontier(d, kl)):
        out.append(v)
    for v in out:
        if v.pop("needs_precondition") and not pre["holds"]:
            v["rule_outcome"], v["outcome"] = v["outcome"], UNINFORMATIVE  # the rule's, kept in the JSON only
    return out


# ------------------------------------------------------------------ lr sweep
def heldout_score(record: dict) -> float | None:
    """The checkpoint-selection score of a held-out record: solo pass@4 (the paper's rule), pass@1
    where the held-out n is below 4."""
    macro = (record.get("solo") or {}).get("macro") or {}
    return macro.get("pass@4", macro.get("pass@1"))


def choose_lr(runs: dict[tuple[str, float], Path]) -> dict[str, float]:
    """{arm: lr}: per arm, the lr whose sweep run ends with the best held-out score (the checkpoint
    rule's score; a tie goes to the smaller lr). Arms without any held-out record are left out."""
    best: dict[str, tuple[float, float]] = {}
    for (arm, lr), out in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        evals = read_jsonl(Path(out) / "eval_log.jsonl")
        score = heldout_score(evals[-1]) if evals else None
        if score is not None and (arm not in best or score > best[arm][0]):
            best[arm] = (score, lr)
    return {arm: lr for arm, (_, lr) in best.items()}


def write_lr_sweep(
    results: str | Path, runs: dict[tuple[str, float], Path], chosen: dict[str, float], scenario: str
) -> dict:
    """results/lr_sweep.json from the sweep's run folders ({(arm, lr): output_dir}) and the lr each arm
    chose (choose_lr)."""
    rows = []
    for (arm, lr), out in sorted(runs.items()):
        log, evals = read_jsonl(Path(out) / "train_log.jsonl"), read_jsonl(Path(out) / "eval_log.jsonl")
        half = max(1, len(log) // 2)
        rows.append(
            {
                "arm": arm,
                "lr": lr,
                "steps": len(log),
                "reward_first_half": float(np.mean([r["reward"] for r in log[:half]])) if log else None,
                "reward_second_half": float(np.mean([r["reward"] for r in log[half:]])) if log[half:] else None,
                "zero_std_mean": float(np.mean([r["frac_reward_zero_std"] for r in log])) if log else None,
                "heldout_pass@1": _heldout_pass1(evals[-1]) if evals else None,
                "heldout_score": heldout_score(evals[-1]) if evals else None,
            }
        )
    sweep = to_jsonable(
        {
            "scenario": scenario,
            "seed": 0,
            "rule": "per arm, the lr with the best held-out solo pass@4 at the end of the sweep run",
            "chosen_lr": chosen,
            "runs": rows,
        }
    )
    atomic_write_json(Path(results) / "lr_sweep.json", sweep)
    return sweep


# ------------------------------------------------------------------ summary
def build_summary(results: str | Path, arms_by_scenario: dict[str, tuple[str, ...]]) -> dict:
    results = Path(results)
    summary: dict = {
        "method": "mean over seeds x problems; 95% CI: two-way clustered bootstrap (seeds and problems), "
        f"{N_BOOT} resamples (metrics.stats.scoped_cis); differences also a seed-level paired t CI over the "
        "seeds' macro differences (S - 1 df, metrics.stats.t_interval); verdicts use the hull of the two",
        "thresholds": {"parity_pts": PARITY, "tax_effect_pts": TAX_EFFECT, "rl_gain_pts": RL_GAIN, "alpha": ALPHA},
        "scenarios": {},
    }
    for sc, wanted in arms_by_scenario.items():
        if not (results / sc).is_dir():
            continue
        runs = _arm_runs(results / sc)
        frames = {arm: _frame(seeds) for arm, seeds in runs.items()}
        order = [a for a in ("junior", "init", *wanted) if a in runs]
        arms = {a: arm_summary(frames[a], runs[a]) for a in order}
        if "junior" not in arms and "init" in arms:  # self-paired: the junior IS the initial senior
            arms = {"junior": {**arms["init"], "same_as": "init"}, **arms}
            for m in ("handoff_pass@4", "tax@4", "kl_exact", "junior_nll"):
                arms["junior"].pop(m, None)
        pairs = [("grpo", "init"), ("tandem", "init"), ("tandem", "grpo")]
        pairs += [(a, b) for a in wanted if a.startswith("kl-reg@") for b in ("grpo", "tandem")]
        diffs = {f"{a} - {b}": difference(frames[a], frames[b]) for a, b in pairs if a in frames and b in frames}
        entry = {
            "arms": arms,
            "differences": diffs,
            "tax_vs_grpo_per_seed": tax_vs_grpo(results / sc),
            "training": {a: t for a in wanted if (t := training_summary(results / sc, a))},
        }
        entry["precondition"] = precondition(diffs)
        entry["verdicts"] = verdicts(entry)
        summary["scenarios"][sc] = entry
    if (results / "lr_sweep.json").exists():
        summary["lr_sweep"] = json.loads((results / "lr_sweep.json").read_text())
    return to_jsonable(summary)


def write_summary(
    results: str | Path, arms_by_scenario: dict[str, tuple[str, ...]], readme: Path | None = None
) -> dict:
    """summary.json, summary.md and the figures under `results`; the README block when `readme` is given."""
    results = Path(results)
    summary = build_summary(results, arms_by_scenario)
    # key order kept (not sorted): scenarios, arms and differences read in the order they are rendered
    atomic_write_text(results / "summary.json", json.dumps(summary, indent=2, allow_nan=False) + "\n")
    atomic_write_text(results / "summary.md", summary_markdown(summary))
    plot_summary(summary, results)
    plot_frontier(summary, results)
    plot_training(summary, results)
    if readme is not None:
        update_readme(readme, summary)
    return summary


# ------------------------------------------------------------------ markdown
def _cell(cell: dict | None, m: str) -> str:
    if not cell:
        return "–"
    return fmt_value(cell["mean"], *cell["ci"], DECIMALS.get(m, 1))


def arms_table(summary: dict) -> list[str]:
    cols = ["solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "junior_nll", "kl_exact", "jargon", "terse"]
    lines = [
        "| scenario | arm | " + " | ".join(LABELS[c] for c in cols) + " | seeds × samples × problems |",
        "|:--|:--|" + "--:|" * len(cols) + "--:|",
    ]
    for sc, entry in summary["scenarios"].items():
        for arm, c in entry["arms"].items():
            name = f"{arm} (= init)" if c.get("same_as") else arm
            dims = f"{c['n_seeds']} × {c['n_samples']} × {c['n_problems']}"
            lines.append(f"| {sc} | {name} | " + " | ".join(_cell(c.get(m), m) for m in cols) + f" | {dims} |")
    return lines


def differences_table(summary: dict) -> list[str]:
    cols = ["solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "junior_nll", "kl_exact"]
    lines = [
        "| scenario | difference | " + " | ".join(LABELS[c] for c in cols) + " | seeds paired |",
        "|:--|:--|" + "--:|" * len(cols) + ":--|",
    ]
    for sc, entry in summary["scenarios"].items():
        for name, d in entry["differences"].items():
            cells = [_fmt(d[m], DECIMALS.get(m, 1), True) if m in d else "–" for m in cols]
            lines.append(f"| {sc} | {name} | " + " | ".join(cells) + f" | {_seeds_cell(name, d)} |")
    return lines


def _seeds_cell(name: str, d: dict) -> str:
    """The seeds a difference pairs, and those only one arm has (left out, named)."""
    text = ", ".join(str(x) for x in d.get("paired_seeds", []))
    arms = dict(zip("ab", name.split(" - ")))
    left = [f"{arms[k]} {', '.join(str(x) for x in v)}" for k, v in d.get("unpaired_seeds", {}).items() if v]
    return text + (f" ({'; '.join(left)} unpaired, left out)" if left else "")


def precondition_line(entry: dict) -> str:
    pre = entry.get("precondition")
    if not pre:
        return ""

    def part(name, key, decimals):
        c = pre.get(key)
        if not c:
            return f"{name} –"
        boot = _fmt({"mean": c["mean"], "ci": c["bootstrap_ci"]}, decimals, True)
        seed = _fmt({"mean": c["mean"], "ci": c["seed_ci"]}, decimals, True) if c["seed_ci"] else "– (one seed)"
        return f"{name} {boot} (seed-level {seed})"

    verdict = "holds" if pre["holds"] else f"fails: every claim on tandem is {UNINFORMATIVE}"
    return (
        f"Precondition ({pre['rule']}): {part('tax@4', 'grpo_tax@4_minus_init', 1)}; "
        f"{part('junior NLL', 'grpo_junior_nll_minus_init', 3)}. **{verdict}**."
    )


def verdict_lines(summary: dict) -> list[str]:
    lines = []
    for sc, entry in summary["scenarios"].items():
        lines += [f"**{sc}**", ""]
        if line := precondition_line(entry):
            lines += [line, ""]
        lines += [
            "| claim | rule (stated before the numbers) | bootstrap 95% CI "
            "| seed-level 95% CI (t, S − 1 df) | outcome |",
            "|:--|:--|:--|:--|:--|",
        ]
        lines += [
            f"| {v['claim']} | {v['rule']} | {v['bootstrap']} | {v['seed_level']} | {v['outcome']}"
            + (f" (the rule alone: {v['rule_outcome']})" if "rule_outcome" in v else "")
            + " |"
            for v in entry["verdicts"]
        ]
        lines.append("")
    return lines


def power_lines(summary: dict) -> list[str]:
    lines = []
    for sc, entry in summary["scenarios"].items():
        hw = {
            a: (c["tax@4"]["ci"][1] - c["tax@4"]["ci"][0]) / 2
            for a, c in entry["arms"].items()
            if a in ("grpo", "tandem") and "tax@4" in c
        }
        d = entry["differences"].get("tandem - grpo", {}).get("tax@4")
        if not hw:
            continue
        parts = ", ".join(f"{a} ±{h:.1f}" for a, h in hw.items())
        line = f"- {sc}: tax@4 CI half-width {parts} pts"
        if d:
            dhw = (d["ci"][1] - d["ci"][0]) / 2
            line += f"; paired tandem − grpo tax@4 difference: bootstrap ±{dhw:.1f}"
            if d.get("seed_ci"):
                line += f", seed-level ±{(d['seed_ci'][1] - d['seed_ci'][0]) / 2:.1f}"
            ci = conservative(d)
            hw = (ci[1] - ci[0]) / 2 if ci else float("inf")
            verdict = "resolves" if hw <= TAX_EFFECT else "cannot resolve"
            line += f" pts (target ≤ {TAX_EFFECT:g}): {verdict} a {TAX_EFFECT:g}-point effect"
        lines.append(line + ".")
    return lines


def training_lines(summary: dict) -> list[str]:
    lines = [
        "| scenario | arm | reward, first → last 10 steps | zero-variance groups, first → last 10 "
        "| held-out solo pass@1 by step |",
        "|:--|:--|--:|--:|:--|",
    ]
    for sc, entry in summary["scenarios"].items():
        for arm, t in entry["training"].items():
            curve = ", ".join(f"{s}: {v:.1f}" for s, v in t["heldout_pass@1"])
            lines.append(
                f"| {sc} | {arm} | {t['reward_first10']:.3f} → {t['reward_last10']:.3f} "
                f"| {t['zero_std_first10']:.2f} → {t['zero_std_last10']:.2f} | {curve} |"
            )
    return lines


def sweep_lines(summary: dict) -> list[str]:
    sw = summary.get("lr_sweep")
    if not sw:
        return []
    chosen = sw["chosen_lr"]
    if isinstance(chosen, dict):  # one lr per arm (v3); v2 swept grpo only
        runs_use = ", ".join(f"{a} {lr:g}" for a, lr in chosen.items())
        head = f"Learning-rate check ({sw['scenario']}, seed {sw['seed']}; {sw['rule']}; the full runs use {runs_use}):"
    else:
        head = f"Learning-rate sweep ({sw['arm']}, {sw['scenario']}, seed {sw['seed']}; the full runs use {chosen:g}):"
    lines = [
        head,
        "",
        "| arm | lr | steps | reward, first → second half | zero-variance groups | held-out solo pass@1 at the end |",
        "|:--|--:|--:|--:|--:|--:|",
    ]

    def num(x, spec):
        return "–" if x is None else format(x, spec)

    for r in sw["runs"]:
        lines.append(
            f"| {r.get('arm', sw.get('arm'))} | {r['lr']:g} | {r['steps']} | {num(r['reward_first_half'], '.3f')} → "
            f"{num(r['reward_second_half'], '.3f')} | {num(r['zero_std_mean'], '.2f')} "
            f"| {num(r['heldout_pass@1'], '.1f')} |"
        )
    return lines


def block_markdown(summary: dict) -> str:
    """The README's toy-summary block (also the body of summary.md)."""
    lines = [
        "Verdicts (each rule and threshold stated before its result; differences pair seed S of one arm with",
        "seed S of the other, which share an evaluation seed, and each problem with itself; a seed only one arm",
        "has is left out and named; each outcome rests on the wider of the two CIs, and a rule that fails says no):",
        "",
        *verdict_lines(summary),
        "Per arm (mean over seeds × problems ± half-width of the 95% CI; seeds and problems resampled):",
        "",
        *arms_table(summary),
        "",
        "Paired differences (mean [95% CI]):",
        "",
        *differences_table(summary),
        "",
        "Power of the design:",
        "",
        *power_lines(summary),
        "",
        "Training (mean over seeds; held-out: 100 held-out problems, step 0 = the initial senior):",
        "",
        *training_lines(summary),
        "",
        *sweep_lines(summary),
    ]
    return "\n".join(lines).rstrip() + "\n"


def summary_markdown(summary: dict) -> str:
    head = [
        "# Toy world summary",
        "",
        "Written by `python -m trainer.toy.aggregate results/toy` from `summary.json` (same folder).",
        "",
        "",
    ]
    per_seed = []
    for sc, entry in summary["scenarios"].items():
        if entry.get("tax_vs_grpo_per_seed"):
            per_seed += [
                f"Per-seed paired tax@{K} difference tandem − grpo, {sc} (`tandem-eval compare --metric tax@{K}`):",
                "",
                "| seed | tandem tax@4 | grpo tax@4 | Δ (pts) | 95% CI | p |",
                "|:--|--:|--:|--:|--:|--:|",
                *(
                    f"| {t['seed']} | {t['a']:.1f} | {t['b']:.1f} | {t['diff']:+.1f} "
                    f"| [{t['low']:+.1f}, {t['high']:+.1f}] | {t['p_value']:.3g} |"
                    for t in entry["tax_vs_grpo_per_seed"]
                ),
                "",
            ]
    return "\n".join(head) + block_markdown(summary) + ("\n" + "\n".join(per_seed) if per_seed else "")


def update_readme(readme: str | Path, summary: dict) -> None:
    """Replace the block between README_BEGIN and README_END with block_markdown(summary)."""
    readme = Path(readme)
    text = readme.read_text()
    pattern = re.compile(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{readme} has no {README_BEGIN} ... {README_END} block")
    new = f"{README_BEGIN}\n{block_markdown(summary)}{README_END}"
    atomic_write_text(readme, pattern.sub(lambda _: new, text))


def readme_block(readme: str | Path) -> str:
    """The current text between the README's markers (for the regeneration test)."""
    text = Path(readme).read_text()
    return text.split(README_BEGIN, 1)[1].split(README_END, 1)[0].lstrip("\n")


# ------------------------------------------------------------------ figures
def _arm_color(arm: str):
    """The report's colour per arm; kl-reg@C from light (small C) to dark (large C, closer to init)."""
    from matplotlib.colors import to_rgb

    from tandem_eval.report import style

    if arm in ("init", "junior"):
        return style.ARM_COLORS["base"]
    color = to_rgb(style.arm_color(arm.split("@")[0]))
    if "@" not in arm:
        return color
    shade = float(np.clip(np.log10(float(arm.split("@")[1])) / 4 + 0.25, 0, 0.75))  # C 0.1 -> 0, 10 -> 0.5
    return tuple(c * (0.5 + shade) + (1 - (0.5 + shade)) * w for c, w in zip(color, (1.0, 1.0, 1.0)))


PLOTTED = [
    ("solo_pass@4", "solo pass@4 (%)"),
    ("handoff_pass@4", "handoff pass@4 (%)"),
    ("kl_exact", "KL(S‖J) (nats/token)"),
]


def plot_summary(summary: dict, out: Path) -> list[Path]:
    """summary.png/.pdf: per scenario, each arm's solo and handoff pass@4 and drift, 95% CI bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tandem_eval.report import style

    scenarios = list(summary["scenarios"])
    with style.paper():
        fig, axes = plt.subplots(
            len(scenarios),
            len(PLOTTED),
            figsize=style.size(2, 0.3 * max(1, len(scenarios))),
            layout="constrained",
            squeeze=False,
        )
        for row, sc in zip(axes, scenarios):
            arms = {a: c for a, c in summary["scenarios"][sc]["arms"].items() if not c.get("same_as")}
            for ax, (metric, label) in zip(row, PLOTTED):
                names = [a for a, c in arms.items() if metric in c]
                est = [arms[a][metric]["mean"] for a in names]
                err = [
                    [e - arms[a][metric]["ci"][0] for a, e in zip(names, est)],
                    [arms[a][metric]["ci"][1] - e for a, e in zip(names, est)],
                ]
                ax.bar(
                    range(len(names)),
                    est,
                    yerr=err,
                    color=[_arm_color(a) for a in names],
                    capsize=2,
                    error_kw={"linewidth": 0.7},
                )
                ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
                ax.set_ylabel(label)
                ax.set_title(sc, fontsize="small")
        fig.suptitle("toy world: mean over seeds, 95% CI (bootstrap over seeds and problems)")
    return style.save(fig, out, "summary")


def plot_frontier(summary: dict, out: Path) -> list[Path]:
    """frontier.png/.pdf: solo pass@4 (x) vs handoff pass@4 (y) per arm; kl-reg's coefficients joined
    in order, tandem a single point; the diagonal is zero tax."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tandem_eval.report import style

    scenarios = list(summary["scenarios"])
    with style.paper():
        fig, axes = plt.subplots(1, len(scenarios), figsize=style.size(2, 0.42), layout="constrained", squeeze=False)
        for ax, sc in zip(axes[0], scenarios):
            arms = summary["scenarios"][sc]["arms"]
            pts = {
                a: c for a, c in arms.items() if "solo_pass@4" in c and "handoff_pass@4" in c and not c.get("same_as")
            }
            kl = sorted((a for a in pts if a.startswith("kl-reg@")), key=lambda a: float(a.split("@")[1]))
            if len(kl) > 1:
                ax.plot(
                    [pts[a]["solo_pass@4"]["mean"] for a in kl],
                    [pts[a]["handoff_pass@4"]["mean"] for a in kl],
                    color=_arm_color("kl-reg"),
                    linewidth=0.8,
                )
            for a, c in pts.items():
                x, y = c["solo_pass@4"], c["handoff_pass@4"]
                ax.errorbar(
                    x["mean"],
                    y["mean"],
                    xerr=[[x["mean"] - x["ci"][0]], [x["ci"][1] - x["mean"]]],
                    yerr=[[y["mean"] - y["ci"][0]], [y["ci"][1] - y["mean"]]],
                    fmt="o",
                    color=_arm_color(a),
                    markersize=3,
                    capsize=1.5,
                    linewidth=0.6,
                )
                ax.annotate(a, (x["mean"], y["mean"]), fontsize=5, xytext=(3, -6), textcoords="offset points")
            lims = [0, 100]
            ax.plot(lims, lims, ":", color="grey", linewidth=0.6)
            ax.set_xlim(*lims)
            ax.set_ylim(*lims)
            ax.set_xlabel("solo pass@4 (%)")
            ax.set_ylabel("handoff pass@4 (%)")
            ax.set_title(sc, fontsize="small")
        fig.suptitle("solo vs handoff: kl-reg coefficients (line) vs tandem; 95% CIs; diagonal = no tax")
    return style.save(fig, out, "frontier")


def plot_training(summary: dict, out: Path) -> list[Path]:
    """training.png/.pdf: per scenario, reward (10-step mean), zero-variance group fraction and held-out
    solo pass@1 along RL, mean over seeds per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tandem_eval.report import style

    scenarios = [sc for sc in summary["scenarios"] if summary["scenarios"][sc]["training"]]
    if not scenarios:
        return []
    panels = [
        ("reward", "reward (10-step mean)"),
        ("frac_reward_zero_std", "zero-variance groups"),
        ("heldout", "held-out solo pass@1 (%)"),
    ]
    with style.paper():
        fig, axes = plt.subplots(
            len(scenarios), 3, figsize=style.size(2, 0.3 * len(scenarios)), layout="constrained", squeeze=False
        )
        for row, sc in zip(axes, scenarios):
            for arm, t in summary["scenarios"][sc]["training"].items():
                color = _arm_color(arm)
                style_kw = {"color": color, "linewidth": 0.8, "label": arm, "linestyle": "--" if "@" in arm else "-"}
                for ax, (key, label) in zip(row, panels):
                    if key == "heldout":
                        steps, vals = zip(*t["heldout_pass@1"]) if t["heldout_pass@1"] else ((), ())
                        ax.plot(steps, vals, marker="o", markersize=2, **style_kw)
                    else:
                        y = pd.Series(t["per_step"][key]).rolling(10, min_periods=1).mean()
                        ax.plot(np.arange(1, len(y) + 1), y, **style_kw)
                    ax.set_ylabel(label)
                    ax.set_xlabel("RL step")
                    ax.set_title(sc, fontsize="small")
        axes[0][0].legend(fontsize=5)
        fig.suptitle("toy world RL: mean over seeds")
    return style.save(fig, out, "training")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Write the toy world's summary from its results folder")
    ap.add_argument("results", nargs="?", default="results/toy")
    ap.add_argument("--readme", type=Path, help="also rewrite this README's toy-summary block")
    args = ap.parse_args(argv)
    root = Path(args.results)
    if not any((root / sc).is_dir() for sc in SCENARIOS):
        folders = ", ".join(f"{sc}/" for sc in SCENARIOS)
        raise SystemExit(f"error: {root} holds no toy-world scenario folder ({folders}); run `make toy` first")
    arms = {}
    for sc in (sc for sc in SCENARIOS if (root / sc).is_dir()):
        found = sorted(p.name for p in (root / sc).glob("*") if p.is_dir() and p.name not in ("junior", "init"))
        arms[sc] = tuple(sorted(found, key=lambda a: (a.startswith("kl-reg"), a != "grpo", a)))
    write_summary(root, arms, readme=args.readme)
    print((root / "summary.md").read_text())


if __name__ == "__main__":
    main()
