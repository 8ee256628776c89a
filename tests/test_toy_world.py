"""The toy-world pipeline (`make toy`) at CI scale: every stage runs, so the full one cannot rot; and
the committed summary, README block and figures regenerate from the committed results."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from trainer.toy import aggregate
from trainer.toy import world as toy_world

REPO = Path(__file__).resolve().parent.parent
METRIC_KEYS = {"solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "kl_exact", "junior_nll"}


def _check_cell(cell):
    assert set(cell) <= {"mean", "ci", "seed_ci"} and cell["ci"][0] <= cell["mean"] <= cell["ci"][1]


@pytest.mark.slow
def test_toy_world_ci_scale_end_to_end(tmp_path):
    results, work = tmp_path / "results", tmp_path / "work"
    ci = toy_world.SCALES["ci"]
    toy_world.main(["--scale", "ci", "--results", str(results), "--work", str(work), "--jobs", "1", "--no-bundle"])
    summary = json.loads((results / "summary.json").read_text())
    assert list(summary["scenarios"]) == list(ci.scenarios)
    for sc in ci.scenarios:
        entry = summary["scenarios"][sc]
        arms = entry["arms"]
        assert {"junior", "init", *ci.arms(sc)} <= set(arms)
        for arm in ci.arms(sc):
            cells = arms[arm]
            _check_cell(cells["solo_pass@1"])
            assert 0 <= cells["solo_pass@1"]["mean"] <= 100 and cells["kl_exact"]["mean"] >= 0
            n_problems = dict(ci.eval_limits).get(sc, ci.n_test)
            assert (cells["n_seeds"], cells["n_samples"], cells["n_problems"]) == (1, ci.n_samples, n_problems)
            run_dir = work / "train" / sc / arm / "seed0"
            ck = toy_world.final_checkpoint(run_dir, ci.rl_steps)
            assert json.loads((ck / "tandem_meta.json").read_text())["arm"] == arm.split("@")[0]
            assert entry["training"][arm]["heldout_pass@1"][0][0] == 0  # the initial senior starts each curve
            # every arm: the paper's recipe shape, and its checkpoint chosen by the same held-out rule
            recipe = (run_dir / "recipe.yaml").read_text()
            assert "lr_scheduler_type: constant" in recipe and "temperature: 0.6" in recipe
            assert f"max_completion_length: {ci.budget(sc)}" in recipe
            meta = json.loads((results / sc / arm / "seed0" / "train" / "tandem_meta.json").read_text())
            assert meta["selected_step"] == toy_world.selected_checkpoint(run_dir, ci.rl_steps)[1]
        cfg = json.loads((results / sc / "grpo" / "seed0" / "solo" / "config.json").read_text())
        assert cfg["config"]["sampling"]["max_new_tokens"] == ci.budget(sc)  # one budget for RL and evaluation
        _check_cell(entry["differences"]["tandem - grpo"]["tax@4"])
        assert entry["differences"]["grpo - init"]["paired_seeds"] == list(ci.seeds)  # init on every seed
        pre = entry["precondition"]
        assert set(pre) == {"rule", "grpo_tax@4_minus_init", "grpo_junior_nll_minus_init", "holds"}
        assert pre["holds"] is False  # one seed: no seed-level CI, so no verdict on tandem
        verdicts = {v["claim"]: v for v in entry["verdicts"]}
        assert verdicts["Lower communication tax"]["outcome"] == aggregate.UNINFORMATIVE
        assert {"rule", "bootstrap", "seed_level", "outcome"} <= set(verdicts["Solo parity"])
    # the emergent junior is the initial senior: its row is init's solo numbers, marked as such
    em = summary["scenarios"]["emergent"]["arms"]
    assert em["junior"]["same_as"] == "init" and em["junior"]["solo_pass@1"] == em["init"]["solo_pass@1"]
    # kl-reg regularises toward the senior's initial checkpoint (the paper's definition)
    kl = ci.arms("emergent")[-1]
    recipe = (work / "train" / "emergent" / kl / "seed0" / "recipe.yaml").read_text()
    assert "kl_ref: init" in recipe and f"beta: {toy_world.kl_coef(kl)}" in recipe
    # grpo-g16 matches tandem's compute with twice the rollouts per prompt
    recipe = (work / "train" / "emergent" / "grpo-g16" / "seed0" / "recipe.yaml").read_text()
    assert f"num_generations: {2 * ci.group_size}" in recipe
    # every seed-run is evaluated with its own seed
    cfg = json.loads((results / "emergent" / "grpo" / "seed0" / "solo" / "config.json").read_text())
    assert cfg["config"]["seed"] == toy_world.eval_seed(0)
    # the lr check: grpo and tandem each swept, each choosing its own lr by the same rule
    sweep = summary["lr_sweep"]
    assert sorted((r["arm"], r["lr"]) for r in sweep["runs"]) == [
        (a, lr) for a in sorted(toy_world.SWEEP_ARMS) for lr in ci.lr_sweep
    ]
    assert set(sweep["chosen_lr"]) == set(toy_world.SWEEP_ARMS)
    for fig in ("summary", "frontier", "training"):
        assert (results / f"{fig}.png").stat().st_size > 10_000 and (results / f"{fig}.pdf").exists()
    table = (results / "report" / "table2.md").read_text()
    for sc in ci.scenarios:
        for arm in ci.arms(sc):
            assert f"| {sc}/{arm} |" in table  # one row per arm: seeds are aggregated
    # resumable: a second call finds every stage done and changes nothing
    before = (results / "summary.json").read_text()
    toy_world.main(["--scale", "ci", "--results", str(results), "--work", str(work), "--jobs", "1", "--no-bundle"])
    assert (results / "summary.json").read_text() == before


def test_readme_block_is_generated_from_the_committed_summary():
    summary = json.loads((REPO / "results" / "toy" / "summary.json").read_text())
    assert aggregate.readme_block(REPO / "README.md") == aggregate.block_markdown(summary)
    assert (REPO / "results" / "toy" / "summary.md").read_text() == aggregate.summary_markdown(summary)


def test_update_readme_replaces_only_the_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{aggregate.README_BEGIN}\nSTALE-BLOCK\n{aggregate.README_END}\nafter\n")
    summary = {"scenarios": {}}
    aggregate.update_readme(readme, summary)
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n") and text.endswith(f"{aggregate.README_END}\nafter\n")
    assert "STALE-BLOCK" not in text and aggregate.readme_block(readme) == aggregate.block_markdown(summary)
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="toy-summary"):
        aggregate.update_readme(readme, summary)


def _cell(lo, hi, seed=None):
    """A difference cell: bootstrap CI [lo, hi], seed-level CI `seed` (default: the same)."""
    return {"mean": (lo + hi) / 2, "ci": [lo, hi], "seed_ci": list(seed or (lo, hi))}


def _scenario(**diffs):
    base = {
        "grpo - init": {"solo_pass@1": _cell(20, 30), "tax@4": _cell(2, 9), "junior_nll": _cell(0.1, 0.3)},
        "tandem - grpo": {
            "solo_pass@1": _cell(-4, 4),
            "tax@4": _cell(-2, 2.5),
            "junior_nll": _cell(-0.2, -0.1),
            "kl_exact": _cell(-0.01, 0.02),
        },
        "kl-reg@0.1 - tandem": {"solo_pass@4": _cell(-1, 1), "handoff_pass@4": _cell(-9, -2)},
        "kl-reg@1 - tandem": {"solo_pass@4": _cell(-2, 2), "handoff_pass@4": _cell(-1, 1)},
    }
    for name, cells in diffs.items():
        base[name.replace("_", " ").replace(" minus ", " - ")] = {**base.get(name, {}), **cells}
    arms = {"grpo": {}, "tandem": {}, **{d.split(" - ")[0]: {} for d in base if d.startswith("kl-reg@")}}
    return {"arms": arms, "differences": base}


def _outcomes(sc):
    return {x["claim"]: x["outcome"] for x in aggregate.verdicts(sc)}


def test_verdicts_follow_the_stated_thresholds():
    sc = _scenario()
    assert aggregate.precondition(sc["differences"])["holds"]
    v = _outcomes(sc)
    assert v["RL moves the senior"] == "yes"
    assert v["Solo parity"] == "yes (parity)"
    assert v["Lower communication tax"].startswith("no: no effect of 3+ pts")
    assert v["Better legibility"] == "yes" and v["Lower drift"] == "no: no difference detected"
    assert v["KL-reg does not give tandem's combination"] == "no: kl-reg@1 is indistinguishable from tandem on both"
    sc["differences"]["tandem - grpo"]["tax@4"] = _cell(-8, -1)
    sc["differences"]["grpo - init"]["solo_pass@1"] = _cell(-1, 9)
    v = _outcomes(sc)
    assert v["Lower communication tax"] == "yes" and v["RL moves the senior"].startswith("no")


def test_a_failed_kl_rule_says_no_when_every_ci_is_above_zero():
    # v2's kl-reg@0.1 - tandem: solo +3.7 [+0.4, +7.3], handoff +2.7 [+0.2, +5.0]: better on both, so the
    # rule "one CI below 0 and none above" fails for that coefficient even though the others pass
    sc = _scenario()
    sc["differences"]["kl-reg@0.1 - tandem"] = {"solo_pass@4": _cell(0.4, 7.3), "handoff_pass@4": _cell(0.2, 5.0)}
    sc["differences"]["kl-reg@1 - tandem"] = {"solo_pass@4": _cell(-18.8, -8.1), "handoff_pass@4": _cell(-21.5, -13)}
    sc["differences"]["kl-reg@10 - tandem"] = {"solo_pass@4": _cell(-30, -18), "handoff_pass@4": _cell(-33, -23)}
    sc["arms"]["kl-reg@10"] = {}
    out = _outcomes(sc)["KL-reg does not give tandem's combination"]
    assert out == "no: kl-reg@0.1 is better than tandem on solo and handoff"
    del sc["differences"]["kl-reg@0.1 - tandem"], sc["arms"]["kl-reg@0.1"]
    assert _outcomes(sc)["KL-reg does not give tandem's combination"].startswith("yes")


def test_verdicts_use_the_more_conservative_ci_and_need_two_seeds():
    # bootstrap says tandem's tax is lower, the seed-level t interval crosses 0: the claim is not shown
    sc = _scenario(**{"tandem - grpo": {"tax@4": _cell(-6, -1, seed=(-9, 2))}})
    assert _outcomes(sc)["Lower communication tax"].startswith("no: no effect detected")
    assert aggregate.conservative(sc["differences"]["tandem - grpo"]["tax@4"]) == (-9, 2)
    sc["differences"]["tandem - grpo"]["tax@4"] = {"mean": -3.0, "ci": [-6, -1], "seed_ci": None}
    assert _outcomes(sc)["Lower communication tax"] == aggregate.ONE_SEED


def test_a_failed_precondition_makes_every_claim_on_tandem_uninformative():
    # v2's self-paired: grpo - init tax@4 -4.1 [-7.1, -1.2], junior NLL -0.071: GRPO pays no tax
    sc = _scenario(**{"grpo - init": {"tax@4": _cell(-7.1, -1.2), "junior_nll": _cell(-0.075, -0.067)}})
    pre = aggregate.precondition(sc["differences"])
    assert not pre["holds"] and pre["grpo_tax@4_minus_init"]["ci"] == [-7.1, -1.2]
    verdicts = aggregate.verdicts(sc)
    out = {x["claim"]: x for x in verdicts}
    assert out["RL moves the senior"]["outcome"] == "yes"  # not a claim on tandem
    for claim in (
        "Solo parity",
        "Lower communication tax",
        "Better legibility",
        "KL-reg does not give tandem's combination",
    ):
        assert out[claim]["outcome"] == aggregate.UNINFORMATIVE and out[claim]["rule_outcome"]
    # a tax with a CI above 0 but a junior that reads GRPO no worse: still no precondition
    sc = _scenario(**{"grpo - init": {"junior_nll": _cell(-0.01, 0.02)}})
    assert not aggregate.precondition(sc["differences"])["holds"]
    # one paired seed: no seed-level CI, so the precondition cannot hold
    sc = _scenario()
    sc["differences"]["grpo - init"]["tax@4"]["seed_ci"] = None
    assert not aggregate.precondition(sc["differences"])["holds"]


def _frame(seeds, shift, n_problems=40, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for s in seeds:
        for p in range(n_problems):
            rows.append({"benchmark": "test", "problem_id": f"p{p}", "seed": s, "group": "test",
                         "tax@4": shift + s + rng.normal(0, 5)})  # fmt: skip
    return pd.DataFrame(rows).set_index(["benchmark", "problem_id"])


def test_difference_names_the_seeds_it_cannot_pair_and_adds_a_seed_level_t_interval():
    grpo, init = _frame([0, 1, 2], shift=4.0, seed=1), _frame([0], shift=0.0, seed=2)
    d = aggregate.difference(grpo, init)
    assert d["paired_seeds"] == [0] and d["unpaired_seeds"] == {"a": [1, 2], "b": []}
    assert d["tax@4"]["seed_ci"] is None  # one paired seed: no seed-level interval
    tandem = _frame([0, 1, 2], shift=1.0, seed=3)
    d = aggregate.difference(tandem, grpo)
    assert d["paired_seeds"] == [0, 1, 2] and d["unpaired_seeds"] == {"a": [], "b": []}
    a, b = tandem.reset_index(), grpo.reset_index()
    per_seed = (a["tax@4"] - b["tax@4"]).groupby(a["seed"]).mean().to_numpy()
    half = stats.t.ppf(0.975, 2) * per_seed.std(ddof=1) / np.sqrt(3)
    assert d["tax@4"]["seed_ci"] == pytest.approx([per_seed.mean() - half, per_seed.mean() + half])
    assert d["tax@4"]["mean"] == pytest.approx(per_seed.mean())


def test_aggregate_names_a_folder_without_toy_results(tmp_path):
    with pytest.raises(SystemExit, match="no toy-world scenario folder"):
        aggregate.main([str(tmp_path / "nope")])
