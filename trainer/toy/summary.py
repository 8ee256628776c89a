"""The toy world's summary: per scenario the arms and their paired differences (trainer/toy/aggregate.py),
the training logs (training.py), the precondition and verdicts (verdicts.py), written as

    results/toy/summary.json   the machine-readable summary (schema below); everything else is made from it
    results/toy/summary.md     tables, differences, verdicts, power, training and lr-check summaries (markdown.py)
    results/toy/summary.png    solo / handoff pass@4 and drift per arm          (+ .pdf; figures.py)
    results/toy/frontier.png   solo vs handoff pass@4: kl-reg's coefficients against tandem's single point
    results/toy/training.png   reward, zero-variance groups and held-out pass@1 along RL
    results/toy/dialects.png   v4: dialect shares along RL per arm, tandem's reward by who chose the dialect

and, with --readme, the block between the toy-summary markers of a markdown file (make toy: docs/toy-world.md).

summary.json: {"scenarios": {SCENARIO: {"arms": {ARM: {METRIC: {"mean": float, "ci": [lo, hi],
"seed_ci": [lo, hi] | null}, ..., "n_seeds": int, "n_samples": int, "n_problems": int}}, "differences":
{"A - B": {METRIC: {"mean", "ci", "seed_ci"}, "paired_seeds": [...], "unpaired_seeds": {"a": [...],
"b": [...]}}}, "precondition": {"grpo_tax@4_minus_init": {...}, "grpo_junior_nll_minus_init": {...},
["grpo_tax@4": {...} where the tax is planted,] "holds": bool, "rule": str}, "verdicts": [{"claim",
"rule", "bootstrap", "seed_level", "outcome", ...}], "training": {...}, "tax_vs_grpo_per_seed": [...]}},
"lr_sweep": {...}, "thresholds": {...}}. Verdicts rest on the hull of
the two CIs, and none is given on tandem unless the precondition (GRPO pays a tax of its own) holds.

    python -m trainer.toy.summary results/toy [--readme docs/toy-world.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tandem_eval.files import atomic_write_text
from tandem_eval.schemas import ALPHA, N_BOOT, RunFolderError, to_jsonable
from trainer.toy.aggregate import SCENARIOS, arm_runs, arm_summary, difference, frame, tax_vs_grpo
from trainer.toy.figures import plot_figures
from trainer.toy.gates import EVIDENCE, GATED
from trainer.toy.markdown import summary_markdown, update_readme
from trainer.toy.scales import arm_order, designed_arms, kl_coef
from trainer.toy.training import training_summary
from trainer.toy.verdicts import PARITY, RL_GAIN, TAX_EFFECT, precondition, verdicts


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
        # a gate failed and stopped the full run: no run folders to read (a scale that only records its gates,
        # like CI's, runs on and is summarised from its runs)
        if sc in GATED and not any((results / sc).rglob("config.json")) and (stopped := stopped_entry(results / sc)):
            summary["scenarios"][sc] = stopped
            continue
        runs = arm_runs(results / sc)
        frames = {arm: frame(seeds) for arm, seeds in runs.items()}
        order = [a for a in ("junior", "init", *wanted) if a in runs]
        arms = {a: arm_summary(frames[a], runs[a]) for a in order}
        if "junior" not in arms and "init" in arms:  # self-paired: the junior IS the initial senior
            arms = {"junior": {**arms["init"], "same_as": "init"}, **arms}
            for m in ("handoff_pass@4", "tax@4", "kl_exact", "junior_nll"):
                arms["junior"].pop(m, None)
        pairs = [("grpo", "init"), ("tandem", "init"), ("tandem", "grpo")]
        pairs += [(a, b) for a in wanted if kl_coef(a) is not None for b in ("grpo", "tandem")]
        diffs = {f"{a} - {b}": difference(frames[a], frames[b]) for a, b in pairs if a in frames and b in frames}
        entry = {
            "arms": arms,
            "differences": diffs,
            "tax_vs_grpo_per_seed": tax_vs_grpo(results / sc),
            "training": {a: t for a in wanted if (t := training_summary(results / sc, a))},
        }
        if sc in GATED:  # v4: gates, then the pre-registered verdicts (trainer/toy/claims.py)
            entry.update(gated_entry(results / sc, frames, runs))
        else:
            # a junior of its own (jargon: the plain base) means a tax SFT planted: GRPO's own tax is the gate
            entry["precondition"] = precondition(diffs, arms, planted="junior" in runs)
            entry["verdicts"] = verdicts(entry)
            if "tandem" in frames and "grpo" in frames:  # v4's rules on this older data: a re-analysis
                from trainer.toy.claims import evaluate

                entry["claims_v4_reanalysis"] = evaluate(frames, str(results / sc), designed_arms(sc))
        summary["scenarios"][sc] = entry
    for sc, entry in summary["scenarios"].items():
        if sc in GATED and (earlier := earlier_designs(results, sc)):
            entry["earlier_designs"] = earlier
    if (results / "lr_sweep.json").exists():
        summary["lr_sweep"] = json.loads((results / "lr_sweep.json").read_text())
    return to_jsonable(summary)


def earlier_designs(results: Path, scenario: str) -> dict:
    """{version: {"gates", "stopped_at"}} of a gated scenario's earlier designs, each kept beside it as
    results/<scenario>-<version>/gates.json (v5's: results/toy/dialects-v5/) when a revised design replaced it:
    the numbers a revision was read from stay in the summary, never under the new design's name."""
    out = {}
    for folder in sorted(results.glob(f"{scenario}-v*"), key=lambda p: int(p.name.rsplit("-v", 1)[1] or 0)):
        gates = _gates(folder)
        failed = [name for name, g in gates.items() if not g["pass"]]
        out[folder.name.rsplit("-", 1)[1]] = {"gates": gates, "stopped_at": failed[0] if failed else None}
    return out


def _gates(scenario_dir: Path) -> dict:
    path = scenario_dir / "gates.json"
    return json.loads(path.read_text()) if path.exists() else {}


def stopped_entry(scenario_dir: Path) -> dict | None:
    """A gated scenario stopped by a failed gate (world.GateFailed): its gates and the pre-registered
    consequence, in the shape of a full entry with no arms (the full run never started, so there is
    nothing else to read); None when no gate failed."""
    gates = _gates(scenario_dir)
    failed = [name for name, g in gates.items() if not g["pass"]]
    if not failed:
        return None
    why = f"gate {failed[0]} failed: the full run did not start (the pre-registered rule), so no verdict"
    from trainer.toy.diagnosis import diagnosis_of

    diagnosis = diagnosis_of(scenario_dir) if failed[0] == "G0" else None  # G1's: from the pilot's evidence
    return {
        "arms": {},
        "differences": {},
        "tax_vs_grpo_per_seed": {},
        "training": {},
        "gates": gates,
        "stopped_at": failed[0],
        "dialects": {},
        "claims": {"not_run": why},
        **({"diagnosis": diagnosis} if diagnosis else {}),
    }


def gated_entry(scenario_dir: Path, frames: dict, runs: dict) -> dict:
    """A gated scenario's own parts: its gates (gates.json), the pre-registered verdicts (claims.evaluate;
    none when a gate failed), and the dialect readings: each arm's test-set shares, its held-out shares
    along training, and tandem's rollout rewards by who chose step 1's dialect."""
    from trainer.toy.claims import evaluate
    from trainer.toy.dialects import summarize

    gates = _gates(scenario_dir)
    passed = bool(gates) and all(g["pass"] for g in gates.values())
    out = {"gates": gates, "dialects": summarize(scenario_dir, runs)}
    not_run = {"not_run": "a gate failed or is missing: no verdict"}
    out["claims"] = evaluate(frames, str(scenario_dir), designed_arms(scenario_dir.name)) if passed else not_run
    return out


def write_summary(
    results: str | Path, arms_by_scenario: dict[str, tuple[str, ...]], readme: Path | None = None
) -> dict:
    """summary.json, summary.md and the figures under `results`; the toy-summary block of `readme` when given."""
    results = Path(results)
    summary = build_summary(results, arms_by_scenario)
    # key order kept (not sorted): scenarios, arms and differences read in the order they are rendered
    atomic_write_text(results / "summary.json", json.dumps(summary, indent=2, allow_nan=False) + "\n")
    atomic_write_text(results / "summary.md", summary_markdown(summary))
    plot_figures(summary, results)
    if readme is not None:
        update_readme(readme, summary)
    return summary


# folders of a scenario that hold no RL arm: the untrained roles, and the raw evidence of its gates (G0's
# samples, the pilot's held-out samples: world.keep_evidence), which are parquet tables, not run folders
NOT_ARMS = ("junior", "init", EVIDENCE)


def arms_found(root: Path) -> dict[str, tuple[str, ...]]:
    """{scenario: its RL arms} of the scenario folders under `root`, in Scale.arms' order (scales.arm_order)."""
    arms = {}
    for sc in (sc for sc in SCENARIOS if (root / sc).is_dir()):
        found = (p.name for p in (root / sc).glob("*") if p.is_dir() and p.name not in NOT_ARMS)
        arms[sc] = tuple(sorted(found, key=arm_order))
    return arms


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Write the toy world's summary from its results folder")
    ap.add_argument("results", nargs="?", default="results/toy")
    ap.add_argument(
        "--readme", type=Path, help="also rewrite this markdown file's toy-summary block (docs/toy-world.md)"
    )
    args = ap.parse_args(argv)
    root = Path(args.results)
    if not any((root / sc).is_dir() for sc in SCENARIOS):
        folders = ", ".join(f"{sc}/" for sc in SCENARIOS)
        print(f"error: {root} holds no toy-world scenario folder ({folders}); run `make toy` first", file=sys.stderr)
        raise SystemExit(2)
    try:
        write_summary(root, arms_found(root), readme=args.readme)
    except RunFolderError as e:  # a pre-registered arm missing (claims.MissingArm), two folders for one arm
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    print((root / "summary.md").read_text())


if __name__ == "__main__":
    main()
