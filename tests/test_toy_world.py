"""The toy-world pipeline (`make toy`) at CI scale: every stage runs, so the full one cannot rot; and
the committed summary, README block and figures regenerate from the committed results."""

import json
from pathlib import Path

import pytest

from tandem_eval.toy import aggregate
from trainer import toy_world

REPO = Path(__file__).resolve().parent.parent
METRIC_KEYS = {"solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "kl_exact", "junior_nll"}


def _check_cell(cell):
    assert set(cell) == {"mean", "ci"} and cell["ci"][0] <= cell["mean"] <= cell["ci"][1]


@pytest.mark.slow
def test_toy_world_ci_scale_end_to_end(tmp_path):
    results, work = tmp_path / "results", tmp_path / "work"
    ci = toy_world.SCALES["ci"]
    toy_world.main(["--scale", "ci", "--results", str(results), "--work", str(work), "--jobs", "1", "--no-bundle"])
    summary = json.loads((results / "summary.json").read_text())
    for sc in toy_world.SCENARIOS:
        entry = summary["scenarios"][sc]
        arms = entry["arms"]
        assert {"junior", "init", *ci.arms(sc)} <= set(arms)
        for arm in ci.arms(sc):
            cells = arms[arm]
            _check_cell(cells["solo_pass@1"])
            assert 0 <= cells["solo_pass@1"]["mean"] <= 100 and cells["kl_exact"]["mean"] >= 0
            n_problems = dict(ci.eval_limits).get(sc, ci.n_test)
            assert (cells["n_seeds"], cells["n_samples"], cells["n_problems"]) == (1, ci.n_samples, n_problems)
            ck = toy_world.final_checkpoint(work / "train" / sc / arm / "seed0", ci.rl_steps)
            assert json.loads((ck / "tandem_meta.json").read_text())["arm"] == arm.split("@")[0]
            assert entry["training"][arm]["heldout_pass@1"][0][0] == 0  # the initial senior starts each curve
        _check_cell(entry["differences"]["tandem - grpo"]["tax@4"])
        assert {v["claim"] for v in entry["verdicts"]} >= {"Solo parity", "Lower communication tax"}
    # the self-paired junior is the initial senior: its row is init's solo numbers, marked as such
    sp = summary["scenarios"]["self-paired"]["arms"]
    assert sp["junior"]["same_as"] == "init" and sp["junior"]["solo_pass@1"] == sp["init"]["solo_pass@1"]
    # kl-reg regularises toward the senior's initial checkpoint (the paper's definition)
    kl = ci.arms("self-paired")[-1]
    recipe = (work / "train" / "self-paired" / kl / "seed0" / "recipe.yaml").read_text()
    assert "kl_ref: init" in recipe and f"beta: {toy_world.kl_coef(kl)}" in recipe
    # every seed-run is evaluated with its own seed
    cfg = json.loads((results / "jargon" / "grpo" / "seed0" / "solo" / "config.json").read_text())
    assert cfg["config"]["seed"] == toy_world.eval_seed(0)
    assert [r["lr"] for r in summary["lr_sweep"]["runs"]] == list(ci.lr_sweep)
    for fig in ("summary", "frontier", "training"):
        assert (results / f"{fig}.png").stat().st_size > 10_000 and (results / f"{fig}.pdf").exists()
    table = (results / "report" / "table2.md").read_text()
    for sc in toy_world.SCENARIOS:
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


def test_verdicts_follow_the_stated_thresholds():
    def cell(lo, hi):
        return {"mean": (lo + hi) / 2, "ci": [lo, hi]}

    sc = {
        "arms": {"grpo": {}, "tandem": {}, "kl-reg@0.1": {}, "kl-reg@1": {}},
        "differences": {
            "grpo - init": {"solo_pass@1": cell(20, 30)},
            "tandem - grpo": {
                "solo_pass@1": cell(-4, 4),
                "tax@4": cell(-2, 2.5),
                "junior_nll": cell(-0.2, -0.1),
                "kl_exact": cell(-0.01, 0.02),
            },
            "kl-reg@0.1 - tandem": {"solo_pass@4": cell(-1, 1), "handoff_pass@4": cell(-9, -2)},
            "kl-reg@1 - tandem": {"solo_pass@4": cell(-2, 2), "handoff_pass@4": cell(-1, 1)},
        },
    }
    v = {x["claim"]: x["verdict"] for x in aggregate.verdicts(sc)}
    assert v["RL moves the senior"] == "yes"
    assert v["Solo parity"] == "yes (parity)"
    assert v["Lower communication tax"].startswith("no effect of 3+ pts")
    assert v["Better legibility"] == "yes" and v["Lower drift"] == "no difference detected"
    assert v["KL-reg does not give tandem's combination"].startswith("no: kl-reg@1 ")
    sc["differences"]["tandem - grpo"]["tax@4"] = cell(-8, -1)
    sc["differences"]["grpo - init"]["solo_pass@1"] = cell(-1, 9)
    v = {x["claim"]: x["verdict"] for x in aggregate.verdicts(sc)}
    assert v["Lower communication tax"] == "yes" and v["RL moves the senior"].startswith("no")


def test_aggregate_names_a_folder_without_toy_results(tmp_path):
    with pytest.raises(SystemExit, match="no toy-world scenario folder"):
        aggregate.main([str(tmp_path / "nope")])
