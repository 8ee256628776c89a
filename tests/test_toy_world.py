"""The toy-world pipeline (`make toy`) at CI scale: every stage runs, so the full one cannot rot; and
the committed summary, the docs/toy-world.md block and figures regenerate from the committed results."""

import json
from pathlib import Path

import pandas as pd
import pytest

from trainer.toy import markdown, scales
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
    assert list(summary["scenarios"]) == list(ci.scenarios) == ["dialects"]
    entry = summary["scenarios"]["dialects"]
    arms = entry["arms"]
    assert {"junior", "init", *ci.arms("dialects")} <= set(arms) and "same_as" not in arms["junior"]
    assert ci.arms("dialects") == ("grpo", "tandem", "grpo-g16", "kl-init@0.1", "kl-junior@0.1")
    for arm in ci.arms("dialects"):
        cells = arms[arm]
        _check_cell(cells["solo_pass@1"])
        assert 0 <= cells["solo_pass@1"]["mean"] <= 100 and cells["kl_exact"]["mean"] >= 0
        assert (cells["n_seeds"], cells["n_samples"], cells["n_problems"]) == (1, ci.n_samples, ci.n_test)
        run_dir = work / "train" / "dialects" / arm / "seed0"
        ck = toy_world.final_checkpoint(run_dir, ci.rl_steps)
        meta = json.loads((ck / "tandem_meta.json").read_text())
        assert meta["arm"] == ("kl-reg" if scales.kl_coef(arm) else arm)
        assert entry["training"][arm]["heldout_pass@1"][0][0] == 0  # the initial senior starts each curve
        # every arm: the paper's recipe shape, and its checkpoint chosen by the same held-out rule
        recipe = (run_dir / "recipe.yaml").read_text()
        assert "lr_scheduler_type: constant" in recipe and "temperature: 0.6" in recipe
        assert f"max_completion_length: {ci.budget('dialects')}" in recipe and "log_rollouts: true" in recipe
        train = results / "dialects" / arm / "seed0" / "train"
        assert (
            json.loads((train / "tandem_meta.json").read_text())["selected_step"]
            == toy_world.selected_checkpoint(run_dir, ci.rl_steps)[1]
        )
        readings = json.loads((train / "dialects.json").read_text())  # shares along training, who chose
        assert readings["heldout"][0]["step"] == 1 and readings["rollouts"]
        assert sum(r["n"] for r in readings["rollouts"]) == ci.prompts_per_step * ci.group_size * (
            2 if arm == "grpo-g16" else 1
        )
        if scales.kl_coef(arm):  # the KL reference, as the checkpoint's metadata records it
            ref = {"kl-init@0.1": "senior", "kl-junior@0.1": "junior"}[arm]
            assert meta["kl_ref"] == str(work / "init" / "dialects" / ref) and meta["recipe"]["kl_ref"] == arm[3:-4]
    choosers = {r["chooser"] for r in entry["dialects"]["tandem"]["rollouts"]["all"]}
    assert choosers <= {"senior", "junior", "none"} and entry["dialects"]["grpo"]["test"]["per_seed"]
    cfg = json.loads((results / "dialects" / "grpo" / "seed0" / "solo" / "config.json").read_text())
    assert cfg["config"]["sampling"]["max_new_tokens"] == ci.budget("dialects")  # one budget for RL and evaluation
    assert cfg["config"]["seed"] == scales.eval_seed(0)  # every seed-run is evaluated with its own seed
    _check_cell(entry["differences"]["tandem - grpo"]["tax@4"])
    assert entry["differences"]["grpo - init"]["paired_seeds"] == list(ci.seeds)  # init on every seed
    # the gates: computed and recorded at CI scale (tiny models fail them), so no verdict is given
    gates = entry["gates"]
    assert set(gates) == {"G0", "H", "G1"} and gates["G0"]["pass"] is False
    assert set(gates["H"]["checks"]) == {f"predicted grpo - init tax@{k} ceiling (pts)" for k in (1, 4)}
    assert {"init A share (%)", "junior after B / own", "junior NLL B / A"} <= set(gates["G0"]["checks"])
    assert {"grpo B share (%)", "tandem A share (%)"} <= set(gates["G1"]["checks"])
    assert "not_run" in entry["claims"] and json.loads((results / "dialects" / "gates.json").read_text()) == gates
    pilot = work / "pilot" / "dialects" / "grpo" / f"seed{ci.pilot_seeds[0]}"  # GRPO's held-out tax, at its plateau
    assert (pilot / "heldout-handoff" / f"step-{ci.pilot_steps:06d}" / "handoff-paragraph" / "COMPLETE").exists()
    assert not (results / "dialects" / "pilot").exists()  # pilot seeds never reach the results as runs...
    evidence = results / "dialects" / "evidence"  # ...only as the raw evidence of the gates, in parquet tables
    g0_samples = pd.read_parquet(evidence / "g0-samples.parquet")
    junior_own = g0_samples[g0_samples["run"] == "junior forced A"]
    own_acc = gates["G0"]["numbers"]["accuracy_pct"]["junior forced A"]
    assert own_acc == pytest.approx(100 * junior_own["correct"].mean())  # the gate recomputes from its samples
    held = pd.read_parquet(evidence / "pilot-heldout-samples.parquet")
    assert {"grpo", "tandem"} <= set(held["arm"]) and set(held["seed"]) == set(ci.pilot_seeds)
    assert not any(evidence.rglob("config.json"))  # no run folder: report and the summary never read it as an arm
    # grpo-g16 matches tandem's compute with twice the rollouts per prompt
    recipe = (work / "train" / "dialects" / "grpo-g16" / "seed0" / "recipe.yaml").read_text()
    assert f"num_generations: {2 * ci.group_size}" in recipe
    for fig in ("summary", "frontier", "training"):
        assert (results / f"{fig}.png").stat().st_size > 10_000 and (results / f"{fig}.pdf").exists()
    table = (results / "report" / "dialects" / "table2.md").read_text()  # one report per scenario
    for arm in ci.arms("dialects"):
        assert f"| dialects/{arm} |" in table  # one row per arm: seeds are aggregated
    # resumable: a second call finds every stage done and changes nothing
    before = (results / "summary.json").read_text()
    toy_world.main(["--scale", "ci", "--results", str(results), "--work", str(work), "--jobs", "1", "--no-bundle"])
    assert (results / "summary.json").read_text() == before


def test_a_full_run_refuses_an_uncommitted_tree(monkeypatch, capsys):
    import tandem_eval.run.provenance as provenance

    monkeypatch.setattr(provenance, "git_commit", lambda: {"commit": "abc", "dirty": True})
    with pytest.raises(SystemExit) as e:
        toy_world.check_committed(allow_dirty=False)
    assert e.value.code == 2 and "commit first" in capsys.readouterr().err
    toy_world.check_committed(allow_dirty=True)  # a trial says so in its log, and goes on


def test_the_scales_pre_state_the_full_runs_seeds_and_the_v3_runs():
    full, em = scales.SCALES["full"], scales.SCALES["emergent"]
    assert [len(full.seeds_of(a)) for a in full.arms("dialects")] == [8, 8, 4, 6, 6]
    assert not set(full.pilot_seeds) & set(full.seeds)  # pilot seeds are never reused
    assert (em.rl_steps, em.lr_sweep, em.arms("emergent")[-1]) == (20, (3e-5, 1e-4, 3e-4), "kl-reg@1")
    assert scales.kl_ref("kl-reg@1") == "init" and scales.kl_ref("kl-junior@0.1") == "junior"


def test_readme_block_is_generated_from_the_committed_summary():
    summary = json.loads((REPO / "results" / "toy" / "summary.json").read_text())
    # the block lives in docs/toy-world.md (make toy: --readme docs/toy-world.md)
    assert markdown.readme_block(REPO / "docs" / "toy-world.md") == markdown.block_markdown(summary)
    assert (REPO / "results" / "toy" / "summary.md").read_text() == markdown.summary_markdown(summary)


def test_bundle_copies_the_seed0_picks_and_drops_arms_no_longer_bundled(tmp_path):
    """stage_bundle: seed-0 selected checkpoints of BUNDLE's arms, the default-mix test set (not a 2-step
    one), and an earlier bundle's extra arms removed (v3's emergent init and kl-reg: the bundle stays <= 30 MB)."""
    full = scales.SCALES["full"]

    def ckpt(name):
        d = tmp_path / "src" / name
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"name": name}))
        return d

    init = {"dialects": {"senior": ckpt("init"), "junior": ckpt("junior")}}
    picks = {("dialects", arm, seed): ckpt(f"{arm}-s{seed}") for arm in full.arms("dialects") for seed in (0, 1)}
    data = {"dialects": {"test": tmp_path / "dialects-test.jsonl"}}
    dest = tmp_path / "bundle" / "checkpoints"
    stale = [dest / "self-paired" / "grpo", dest / "emergent" / "init", dest / "emergent" / "kl-reg"]
    for d in stale:
        d.mkdir(parents=True)
    (dest / "self-paired" / "tandem").mkdir()
    (dest / "emergent" / "tandem").mkdir()
    toy_world.stage_bundle(picks, init, data, full, dest=dest)

    bundled = sorted(p.name for p in (dest / "dialects").iterdir())
    assert bundled == sorted(toy_world.BUNDLE["dialects"]) == ["grpo", "init", "junior", "tandem"]
    assert json.loads((dest / "dialects" / "grpo" / "config.json").read_text())["name"] == "grpo-s0"
    meta = json.loads((dest / "dialects" / "tandem" / "tandem_meta.json").read_text())
    assert meta["junior"] == "toy:dialects/junior" and meta["scenario"] == "dialects"
    assert not any(d.exists() for d in stale) and (dest / "self-paired" / "tandem").is_dir()
    assert (dest / "emergent" / "tandem").is_dir()  # a scenario this scale does not run keeps its bundled arms
    assert not (dest.parent / "data" / "test.jsonl").exists()  # only a 2-step set was given


def test_the_controls_scale_is_what_the_committed_control_runs_record():
    """`--scale controls` (make toy-controls) reruns the committed v2 controls at their own settings."""
    c = scales.SCALES["controls"]
    for sc in c.scenarios:
        root = REPO / "results" / "toy" / sc
        assert sorted(p.name for p in (root / "grpo").iterdir()) == [f"seed{s}" for s in c.seeds]
        assert sorted(p.name for p in (root / "init").glob("seed*")) == [f"seed{s}" for s in c.untrained_seeds]
        assert set(c.arms(sc)) == {p.name for p in root.iterdir() if p.is_dir()} - {"init", "junior"}
        log = [json.loads(x) for x in (root / "grpo" / "seed1" / "train" / "train_log.jsonl").read_text().splitlines()]
        assert len(log) == c.rl_steps and log[0]["lr"] == pytest.approx(c.lr * (1 - 1 / (2 * c.rl_steps)))  # linear
        assert log[-1]["response_length"] > 37  # no 37-token budget: 256 new tokens
        held = [
            json.loads(x)["step"]
            for x in (root / "grpo" / "seed1" / "train" / "eval_log.jsonl").read_text().splitlines()
        ]
        assert held == list(range(c.heldout_every, c.rl_steps + 1, c.heldout_every))
        cfg = json.loads((root / "grpo" / "seed1" / "solo" / "config.json").read_text())["config"]
        assert (cfg["n"], cfg["limit"], cfg["seed"]) == (c.n_samples, dict(c.eval_limits).get(sc), scales.eval_seed(1))
        assert cfg["sampling"]["max_new_tokens"] == c.budget(sc) == 256
    assert c.keep == "final" and "temperature=1.0" in c.recipe_sets and "lr_scheduler_type=linear" in c.recipe_sets


def test_the_headroom_stage_records_h_and_stops_a_full_run_before_its_pilot(tmp_path):
    """world.stage_headroom on the committed v5 G0 and initial-senior record: H fails (+6.0 at pass@4) and
    stops the full scale; at CI scale (no pass@4 in the record) it is recorded, null where unmeasured."""
    import shutil

    sc = tmp_path / "dialects"
    (sc / "init").mkdir(parents=True)
    shutil.copy(REPO / "results" / "toy" / "dialects-v5" / "gates.json", sc / "gates.json")
    shutil.copy(REPO / "results" / "toy" / "dialects-v5" / "init" / "heldout.jsonl", sc / "init" / "heldout.jsonl")
    with pytest.raises(toy_world.GateFailed, match="gate H"):
        toy_world.stage_headroom(tmp_path, scales.SCALES["full"])
    gates = json.loads((sc / "gates.json").read_text())
    assert list(gates) == ["G0", "G1", "H"] and not gates["H"]["pass"]
    rec = json.loads((sc / "init" / "heldout.jsonl").read_text())
    for mode in ("solo", "handoff"):
        rec[mode]["macro"].pop("pass@4")
    (sc / "init" / "heldout.jsonl").write_text(json.dumps(rec) + "\n")
    toy_world.stage_headroom(tmp_path, scales.SCALES["ci"])  # recorded, not enforced
    h = json.loads((sc / "gates.json").read_text())["H"]["checks"]
    assert h["predicted grpo - init tax@4 ceiling (pts)"]["value"] is None
    assert h["predicted grpo - init tax@1 ceiling (pts)"]["pass"]
