"""Which run is which: a senior's label is unique across runs, a handoff is paired with the solo run it
records, a junior's lens label is unique, and the shard-* parts of a merged run are not runs of their own.

    PYTHONPATH=$PWD python -m pytest -q tests/test_identity.py

Run folders are synthetic (tests/run_fixtures.py: no generation); the lens test scores them with the
tiny junior.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from run_fixtures import handoff_cfg, solo_cfg, write_run
from typer.testing import CliRunner

from tandem_eval.cli import app
from tandem_eval.pipeline import merge_shards
from tandem_eval.report.collect import collect
from tandem_eval.runs import ReportError, find_run, runs_in

runner = CliRunner()
PROBLEMS = [("tiny", f"tiny/000{i}") for i in range(4)]


def _flags(ok: bool) -> dict:
    return {key: [ok, ok] for key in PROBLEMS}


def _handoff_with_its_solo(root: Path, senior: str, solo_ok: bool, handoff_ok: bool, label=None):
    """OUT/solo and OUT/handoff-paragraph of `senior`, the handoff recording its solo run as handoff does."""
    solo = write_run(root / "solo", solo_cfg(senior, n=2, ks=(1, 2), label=label), _flags(solo_ok))
    record = {"path": str(solo.path.resolve()), "fingerprint": solo.config()["fingerprint"], "differs": []}
    cfg = handoff_cfg(senior, "jr", n=2, ks=(1, 2), label=label)
    hand = write_run(root / "handoff-paragraph", cfg, _flags(handoff_ok), extra={"solo_run": record})
    hand.update_metrics({"solo_run": record["path"]})
    return solo, hand


@pytest.mark.parametrize("label", [None, "checkpoint-200"], ids=["no-label", "cli-default-label"])
def test_two_checkpoints_of_one_name_are_two_arms_and_a_handoff_gets_its_own_solo(tmp_path, label):
    a_solo = write_run(
        tmp_path / "runA/solo", solo_cfg("/ckpt/A/checkpoint-200", n=2, ks=(1, 2), label=label), _flags(True)
    )
    b_solo, b_hand = _handoff_with_its_solo(tmp_path / "runB", "/ckpt/B/checkpoint-200", False, False, label)
    col = collect([a_solo.path, b_hand.path])
    assert col.arms == ["A/checkpoint-200", "B/checkpoint-200"]
    assert col.solo("B/checkpoint-200").path.resolve() == b_solo.path.resolve()  # recorded, not A's
    assert col.solo("A/checkpoint-200").path.resolve() == a_solo.path.resolve()
    assert col.handoff("A/checkpoint-200", "paragraph") is None
    # the report's tax of B is B's own (0 points), never A's solo minus B's handoff (100)
    out = tmp_path / "report"
    result = runner.invoke(app, ["report", str(a_solo.path), str(b_hand.path), "--out", str(out), "--no-figures"])
    assert result.exit_code == 0, result.stderr
    rows = [line for line in (out / "table2.md").read_text().splitlines() if "B/checkpoint-200" in line]
    assert rows and all(line.rstrip(" |").endswith("0.0 ± 0.0") for line in rows), rows


def test_one_explicit_label_for_two_seniors_never_pairs_the_wrong_solo_run(tmp_path):
    write_run(tmp_path / "runA/solo", solo_cfg("/ckpt/A/c", n=2, ks=(1, 2), label="mine"), _flags(True))
    _, b_hand = _handoff_with_its_solo(tmp_path / "runB", "/ckpt/B/c", False, False, "mine")
    with pytest.raises(ReportError, match="was measured against the solo run"):
        collect([tmp_path / "runA/solo", b_hand.path])


def test_the_shard_parts_of_a_merged_run_are_not_runs(tmp_path):
    root = tmp_path / "ray-out"
    for i in range(2):
        cfg = solo_cfg("/ckpt/s", n=2, ks=(1, 2), num_shards=2, shard_index=i)
        write_run(root / f"shard-{i}-of-2" / "solo", cfg, {k: [True, False] for k in PROBLEMS[i::2]})
    merge_shards([root / f"shard-{i}-of-2" / "solo" for i in range(2)], root / "solo")
    (run,) = collect([root]).runs
    assert run.path == (root / "solo").resolve() and run.per_problem([1]).shape[0] == 4
    assert [r.path for r in runs_in(root)] == [root / "solo"]
    assert find_run(root, "solo").path == root / "solo"


def test_two_junior_folders_of_one_name_get_two_lens_labels(tiny_pair, tmp_path):
    senior, junior = tiny_pair
    run = write_run(tmp_path / "run/solo", solo_cfg(senior, n=2, ks=(1, 2)), {PROBLEMS[0]: [True, False]}).path
    for d in ("J1", "J2"):
        shutil.copytree(junior, tmp_path / d / "junior")

    def legibility(jr: str, *extra: str):
        return runner.invoke(app, ["legibility", "--run", str(run), "--junior", jr, "--n-boot", "20", *extra])

    for d in ("J1", "J2", "J1"):  # the third call rescores J1 under its own label
        result = legibility(str(tmp_path / d / "junior"))
        assert result.exit_code == 0, (result.stderr, result.exception)
    lens = json.loads((run / "metrics.json").read_text())["lens"]
    assert sorted(lens) == ["J2-junior", "junior"]
    assert Path(lens["junior"]["legibility"]["junior"]) == (tmp_path / "J1/junior").resolve()
    assert Path(lens["J2-junior"]["legibility"]["junior"]) == (tmp_path / "J2/junior").resolve()
    assert sorted(p.name for p in (run / "lens").iterdir()) == ["J2-junior", "junior"]
    refused = legibility(str(tmp_path / "J2/junior"), "--junior-label", "junior")
    assert refused.exit_code == 2 and "--junior-label junior already holds" in refused.stderr
