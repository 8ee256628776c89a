"""The toy-world pipeline (`make toy`) at CI scale: every stage runs, so the full one cannot rot."""

import json

import pytest

from trainer import toy_world


@pytest.mark.slow
def test_toy_world_ci_scale_end_to_end(tmp_path):
    results, work = tmp_path / "results", tmp_path / "work"
    toy_world.main(["--scale", "ci", "--results", str(results), "--work", str(work), "--jobs", "1", "--no-bundle"])
    summary = json.loads((results / "summary.json").read_text())
    for sc in toy_world.SCENARIOS:
        arms = summary["scenarios"][sc]
        assert {"junior", "init", *toy_world.ARMS} <= set(arms)
        for arm in toy_world.ARMS:
            assert 0 <= arms[arm]["solo@1"]["estimate"] <= 100
            assert arms[arm]["kl"]["estimate"] >= 0
            ck = toy_world.final_checkpoint(work / "train" / sc / arm / "seed0", toy_world.SCALES["ci"].rl_steps)
            meta = json.loads((ck / "tandem_meta.json").read_text())
            assert meta["arm"] == arm
            assert (results / sc / arm / "seed0" / "train" / "train_log.jsonl").exists()
    assert "/tandem |" in (results / "summary.md").read_text()
    assert (results / "summary.png").stat().st_size > 10_000 and (results / "summary.pdf").exists()
    table = (results / "report" / "table2.md").read_text()
    for sc in toy_world.SCENARIOS:
        for arm in toy_world.ARMS:
            assert f"| {sc}/{arm} |" in table  # one row per arm: seeds are aggregated
    # resumable: a second call finds every stage done and changes nothing
    before = (results / "summary.json").read_text()
    toy_world.main(["--scale", "ci", "--results", str(results), "--work", str(work), "--jobs", "1", "--no-bundle"])
    assert (results / "summary.json").read_text() == before
