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
"n_seeds": int, "n_samples": int, "n_problems": int}}, "differences": {"A - B": {METRIC: {...}}},
"verdicts": [...], "training": {...}, "tax_vs_grpo_per_seed": [...]}}, "lr_sweep": {...}, "thresholds": {...}}.
METRIC: solo_pass@1, solo_pass@4, handoff_pass@4, tax@4 (points), kl_exact (nats/token), junior_nll
(nats/token), jargon (% of solo CoTs). Statistics: the mean over seeds x problems; CI from the two-way
clustered bootstrap of metrics.stats.scoped_cis (seeds and problems resampled), the same builder as the
report's tables. A difference A - B pairs seed S of A with seed S of B (the same evaluation seed) and
each problem with itself, and resamples them jointly.

    python -m tandem_eval.toy.aggregate results/toy [--readme README.md]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..compare import tax_compare
from ..lens import LensError, LensOptions
from ..metrics.stats import MACRO, scoped_cis, to_jsonable
from ..report.collect import read_train_log
from ..report.tables import fmt_value
from ..results import RunFolder, atomic_write_json, atomic_write_text
from ..runs import problem_values, runs_in
from .jargon import uses_jargon

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
METRICS = ["solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "kl_exact", "junior_nll", "jargon"]
LABELS = {
    "solo_pass@1": "solo pass@1 (%)",
    "solo_pass@4": "solo pass@4 (%)",
    "handoff_pass@4": "handoff pass@4 (%)",
    "tax@4": "tax@4 (pts)",
    "kl_exact": "KL(S‖J) (nats/tok)",
    "junior_nll": "junior NLL (nats/tok)",
    "jargon": "jargon CoTs (%)",
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
            cols["jargon"] = (
                s.assign(j=s["text"].map(uses_jargon) * 100.0).groupby(["benchmark", "problem_id"])["j"].mean()
            )
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
    """{metric: {"mean", "ci"}} of A - B, rows paired on (seed, problem)."""
    key = ["seed", "benchmark", "problem_id"]
    ja, jb = a.reset_index().set_index(key), b.reset_index().set_index(key)
    both = pd.merge(ja, jb, how="inner", left_index=True, right_index=True, suffixes=("_a", "_b"))
    both = both.reset_index(["seed"]).rename(columns={"group_a": "group"})
    out = {}
    for m in METRICS:
        if f"{m}_a" in both and f"{m}_b" in both:
            cell = _ci(both, [f"{m}_a", f"{m}_b"], lambda x: x[:, 0] - x[:, 1])
            if cell:
                out[m] = cell
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


def _jsonl(path: Path) -> list[dict]:
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
    logs = [_jsonl(p) for p in sorted(scenario_dir.glob(f"{arm}/seed*/train/train_log.jsonl"))]
    logs = [rows for rows in logs if rows]
    if not logs:
        return {}

    def window(key: str, part: slice) -> float:
        return float(np.mean([np.mean([r[key] for r in rows[part]]) for rows in logs]))

    curve: dict[int, list[float]] = {}
    init = _jsonl(scenario_dir / "init" / "heldout.jsonl")
    for rec in init:
        curve.setdefault(0, []).append(_heldout_pass1(rec))
    for p in sorted(scenario_dir.glob(f"{arm}/seed*/train/eval_log.jsonl")):
        for rec in _jsonl(p):
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
def _fmt(cell: dict, decimals: int = 1, signed: bool = False) -> str:
    sign = "+" if signed else ""
    lo, hi = cell["ci"]
    return f"{cell['mean']:{sign}.{decimals}f} [{lo:{sign}.{decimals}f}, {hi:{sign}.{decimals}f}]"


def verdicts(sc: dict) -> list[dict]:
    """The paper's claims, each with its test stated before the result (thresholds: module constants)."""
    d, arms, out = sc["differences"], sc["arms"], []

    def add(claim, test, cell, verdict, decimals=1):
        out.append(
            {"claim": claim, "test": test, "result": _fmt(cell, decimals, True) if cell else "–", "verdict": verdict}
        )

    g = d.get("grpo - init", {}).get("solo_pass@1")
    if g:
        ok = g["mean"] >= RL_GAIN and g["ci"][0] > 0
        add(
            "RL moves the senior",
            f"grpo − init solo pass@1 ≥ {RL_GAIN:g} pts, CI above 0",
            g,
            "yes" if ok else f"no (gain below {RL_GAIN:g} pts)",
        )
    t = d.get("tandem - grpo", {})
    if "solo_pass@1" in t:
        c = t["solo_pass@1"]
        lo, hi = c["ci"]
        v = (
            "yes (parity)"
            if -PARITY <= lo and hi <= PARITY
            else "no: tandem is worse"
            if hi < 0
            else "no: tandem is better"
            if lo > 0
            else f"inconclusive (CI wider than ±{PARITY:g})"
        )
        add("Solo parity", f"tandem − grpo solo pass@1: CI inside ±{PARITY:g} pts", c, v)
    if "tax@4" in t:
        c = t["tax@4"]
        lo, hi = c["ci"]
        v = (
            "yes"
            if hi < 0
            else "no: tandem's tax is higher"
            if lo > 0
            else f"no effect of {TAX_EFFECT:g}+ pts (CI inside ±{TAX_EFFECT:g})"
            if -TAX_EFFECT <= lo and hi <= TAX_EFFECT
            else f"no effect detected; the CI cannot exclude {TAX_EFFECT:g} pts"
        )
        add("Lower communication tax", "tandem − grpo tax@4: CI below 0", c, v)
    for claim, m in (("Better legibility", "junior_nll"), ("Lower drift", "kl_exact")):
        if m in t:
            c = t[m]
            v = "yes" if c["ci"][1] < 0 else "no: higher" if c["ci"][0] > 0 else "no difference detected"
            add(claim, f"tandem − grpo {m}: CI below 0", c, v, 3)
    kl = sorted((a for a in arms if a.startswith("kl-reg@")), key=lambda a: float(a.split("@")[1]))
    if kl and "tandem" in arms:
        parts, same = [], []
        for a in kl:
            k = d.get(f"{a} - tandem", {})
            if "solo_pass@4" not in k or "handoff_pass@4" not in k:
                continue
            worse = [m for m in ("solo_pass@4", "handoff_pass@4") if k[m]["ci"][1] < 0]
            better = [m for m in ("solo_pass@4", "handoff_pass@4") if k[m]["ci"][0] > 0]
            parts.append(f"{a}: solo {_fmt(k['solo_pass@4'], 1, True)}, handoff {_fmt(k['handoff_pass@4'], 1, True)}")
            same.append(not worse and not better)
        if parts:
            v = (
                "yes: every coefficient is worse than tandem on solo or handoff pass@4"
                if not any(same)
                else "no: kl-reg@"
                + ", @".join(a.split("@")[1] for a, s in zip(kl, same) if s)
                + " is indistinguishable from tandem on both"
            )
            out.append(
                {
                    "claim": "KL-reg does not give tandem's combination",
                    "test": "kl-reg@C − tandem, solo and handoff pass@4: for every C, one CI below 0 and none above",
                    "result": "; ".join(parts),
                    "verdict": v,
                }
            )
    return out


# ------------------------------------------------------------------ lr sweep
def write_lr_sweep(results: str | Path, runs: dict[float, Path], chosen: float) -> dict:
    """results/lr_sweep.json from the sweep's run folders ({lr: output_dir})."""
    rows = []
    for lr, out in sorted(runs.items()):
        log, evals = _jsonl(out / "train_log.jsonl"), _jsonl(out / "eval_log.jsonl")
        half = max(1, len(log) // 2)
        rows.append(
            {
                "lr": lr,
                "steps": len(log),
                "reward_first_half": float(np.mean([r["reward"] for r in log[:half]])) if log else None,
                "reward_second_half": float(np.mean([r["reward"] for r in log[half:]])) if log[half:] else None,
                "zero_std_mean": float(np.mean([r["frac_reward_zero_std"] for r in log])) if log else None,
                "heldout_pass@1": _heldout_pass1(evals[-1]) if evals else None,
            }
        )
    sweep = to_jsonable({"scenario": "self-paired", "arm": "grpo", "seed": 0, "chosen_lr": chosen, "runs": rows})
    atomic_write_json(Path(results) / "lr_sweep.json", sweep)
    return sweep


# ------------------------------------------------------------------ summary
def build_summary(results: str | Path, arms_by_scenario: dict[str, tuple[str, ...]]) -> dict:
    results = Path(results)
    summary: dict = {
        "method": "mean over seeds x problems; 95% CI: two-way clustered bootstrap (seeds and problems), "
        f"{N_BOOT} resamples (metrics.stats.scoped_cis)",
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
    cols = ["solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "junior_nll", "kl_exact", "jargon"]
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
        "| scenario | difference | " + " | ".join(LABELS[c] for c in cols) + " |",
        "|:--|:--|" + "--:|" * len(cols),
    ]
    for sc, entry in summary["scenarios"].items():
        for name, d in entry["differences"].items():
            cells = [_fmt(d[m], DECIMALS.get(m, 1), True) if m in d else "–" for m in cols]
            lines.append(f"| {sc} | {name} | " + " | ".join(cells) + " |")
    return lines


def verdict_lines(summary: dict) -> list[str]:
    lines = []
    for sc, entry in summary["scenarios"].items():
        lines += [
            f"**{sc}**",
            "",
            "| claim | test (stated before the numbers) | result, 95% CI | verdict |",
            "|:--|:--|:--|:--|",
        ]
        lines += [f"| {v['claim']} | {v['test']} | {v['result']} | {v['verdict']} |" for v in entry["verdicts"]]
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
            verdict = "resolves" if dhw < TAX_EFFECT else "cannot resolve"
            line += f"; paired tandem − grpo tax@4 difference ±{dhw:.1f} pts: {verdict} a {TAX_EFFECT:g}-point effect"
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
    lines = [
        f"Learning-rate sweep ({sw['arm']}, {sw['scenario']}, seed {sw['seed']}; "
        f"the full runs use {sw['chosen_lr']:g}):",
        "",
        "| lr | steps | reward, first → second half | zero-variance groups | held-out solo pass@1 at the end |",
        "|--:|--:|--:|--:|--:|",
    ]

    def num(x, spec):
        return "–" if x is None else format(x, spec)

    for r in sw["runs"]:
        lines.append(
            f"| {r['lr']:g} | {r['steps']} | {num(r['reward_first_half'], '.3f')} → "
            f"{num(r['reward_second_half'], '.3f')} | {num(r['zero_std_mean'], '.2f')} "
            f"| {num(r['heldout_pass@1'], '.1f')} |"
        )
    return lines


def block_markdown(summary: dict) -> str:
    """The README's toy-summary block (also the body of summary.md)."""
    lines = [
        "Verdicts (each test and threshold stated before its result; differences pair seed S of one arm with",
        "seed S of the other, which share an evaluation seed, and each problem with itself):",
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
        "Written by `python -m tandem_eval.toy.aggregate results/toy` from `summary.json` (same folder).",
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

    from ..report import style

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

    from ..report import style

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

    from ..report import style

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

    from ..report import style

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
    if not any((root / sc).is_dir() for sc in ("self-paired", "jargon")):
        raise SystemExit(
            f"error: {root} holds no toy-world scenario folder (self-paired/, jargon/); run `make toy` first"
        )
    arms = {}
    for sc in ("self-paired", "jargon"):
        found = sorted(p.name for p in (root / sc).glob("*") if p.is_dir() and p.name not in ("junior", "init"))
        arms[sc] = tuple(sorted(found, key=lambda a: (a.startswith("kl-reg"), a != "grpo", a)))
    write_summary(root, arms, readme=args.readme)
    print((root / "summary.md").read_text())


if __name__ == "__main__":
    main()
