"""The toy-world pipeline (`make toy`) at CI scale: every stage runs, so the full one cannot rot; and
the committed summary, README block and figures regenerate from the committed results."""

import json
from pathlib import Path

import pytest

from trainer.toy import markdown, scales, verdicts
from trainer.toy import world as toy_world

REPO = Path(__file__).resolve().parent.parent
METRIC_KEYS = {"solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "kl_exact", "junior_nll"}


def _check_cell(cell):
    assert set(cell) <= {"mean", "ci", "seed_ci"} and cell["ci"][0] <= cell["mean"] <= cell["ci"][1]


@pytest.mark.slow
def test_toy_world_ci_scale_end_to_end(tmp_path):
    results, work = tmp_path / "results", tmp_path / "work"
    ci = scales.SCALES["ci"]
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
        by_claim = {v["claim"]: v for v in entry["verdicts"]}
        assert by_claim["Lower communication tax"]["outcome"] == verdicts.UNINFORMATIVE
        assert {"rule", "bootstrap", "seed_level", "outcome"} <= set(by_claim["Solo parity"])
    # the emergent junior is the initial senior: its row is init's solo numbers, marked as such
    em = summary["scenarios"]["emergent"]["arms"]
    assert em["junior"]["same_as"] == "init" and em["junior"]["solo_pass@1"] == em["init"]["solo_pass@1"]
    # kl-reg regularises toward the senior's initial checkpoint (the paper's definition)
    kl = ci.arms("emergent")[-1]
    recipe = (work / "train" / "emergent" / kl / "seed0" / "recipe.yaml").read_text()
    assert "kl_ref: init" in recipe and f"beta: {scales.kl_coef(kl)}" in recipe
    # grpo-g16 matches tandem's compute with twice the rollouts per prompt
    recipe = (work / "train" / "emergent" / "grpo-g16" / "seed0" / "recipe.yaml").read_text()
    assert f"num_generations: {2 * ci.group_size}" in recipe
    # every seed-run is evaluated with its own seed
    cfg = json.loads((results / "emergent" / "grpo" / "seed0" / "solo" / "config.json").read_text())
    assert cfg["config"]["seed"] == scales.eval_seed(0)
    # the lr check: grpo and tandem each swept, each choosing its own lr by the same rule
    sweep = summary["lr_sweep"]
    assert sorted((r["arm"], r["lr"]) for r in sweep["runs"]) == [
        (a, lr) for a in sorted(toy_world.SWEEP_ARMS) for lr in ci.lr_sweep
    ]
    assert set(sweep["chosen_lr"]) == set(toy_world.SWEEP_ARMS)
    for fig in ("summary", "frontier", "training"):
        assert (results / f"{fig}.png").stat().st_size > 10_000 and (results / f"{fig}.pdf").exists()
    # one table per problem set (the scenarios' test sets differ: never pooled, issue 33)
    table = "".join(p.read_text() for p in sorted((results / "report").rglob("table2.md")))
    for sc in ci.scenarios:
        for arm in ci.arms(sc):
            assert f"| {sc}/{arm} |" in table  # one row per arm: seeds are aggregated
    # resumable: a second call finds every stage done and changes nothing
    before = (results / "summary.json").read_text()
    toy_world.main(["--scale", "ci", "--results", str(results), "--work", str(work), "--jobs", "1", "--no-bundle"])
    assert (results / "summary.json").read_text() == before


def test_readme_block_is_generated_from_the_committed_summary():
    summary = json.loads((REPO / "results" / "toy" / "summary.json").read_text())
    assert markdown.readme_block(REPO / "README.md") == markdown.block_markdown(summary)
    assert (REPO / "results" / "toy" / "summary.md").read_text() == markdown.summary_markdown(summary)


def test_bundle_copies_the_seed0_picks_and_drops_arms_no_longer_bundled(tmp_path):
    """stage_bundle: seed-0 selected checkpoints of BUNDLE's arms (kl-reg at the middle coefficient), the
    default-mix test set (not the emergent 2-step one), and an earlier bundle's extra arms removed."""
    full = scales.SCALES["full"]

    def ckpt(name):
        d = tmp_path / "src" / name
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"name": name}))
        return d

    init = {"emergent": {"senior": ckpt("init"), "junior": ckpt("init-junior")}}
    picks = {("emergent", arm, seed): ckpt(f"{arm}-s{seed}") for arm in full.arms("emergent") for seed in (0, 1)}
    data = {"emergent": {"test": tmp_path / "emergent-test.jsonl"}}
    dest = tmp_path / "bundle" / "checkpoints"
    stale = dest / "self-paired" / "grpo"
    stale.mkdir(parents=True)
    (dest / "self-paired" / "tandem").mkdir()
    toy_world.stage_bundle(picks, init, data, full, dest=dest)

    bundled = sorted(p.name for p in (dest / "emergent").iterdir())
    assert bundled == sorted(toy_world.BUNDLE["emergent"])
    kl = json.loads((dest / "emergent" / "kl-reg" / "config.json").read_text())["name"]
    assert kl == "kl-reg@1-s0"  # the middle of (0.1, 1.0), seed 0
    assert json.loads((dest / "emergent" / "junior" / "config.json").read_text())["name"] == "init-junior"
    assert not stale.exists() and (dest / "self-paired" / "tandem").is_dir()
    assert not (dest.parent / "data" / "test.jsonl").exists()  # only the emergent (2-step) set was given
