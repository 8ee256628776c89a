"""Every command takes relative paths from any working directory, with the results absolute paths give;
and `python -m tandem_eval.demo` says by its exit code whether every step worked.

    PYTHONPATH=$PWD python -m pytest -q tests/test_paths.py

Each command runs as its own process (`subprocess` with `cwd=`), as a user types it: the run is made
from one folder with paths relative to it, then read, scored and reported from a sibling folder
(`../runs/...`). The tiny pair is linked into the work folder so that it too is named relatively.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
FAST = ["--benchmark", "tiny", "--n", "2", "--limit", "2", "--max-new-tokens", "12", "--temperature", "0", "-q"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def tandem(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`tandem-eval ARGS` in its own process, started in `cwd`; fails the test unless it exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", "tandem_eval.cli", *args], cwd=cwd, env=_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def work(tiny_pair, tmp_path_factory):
    """A work folder: models/{senior,junior} (links to the tiny pair) and an empty sibling cwd `other/`."""
    root = tmp_path_factory.mktemp("paths")
    (root / "models").mkdir()
    for name, path in zip(("senior", "junior"), tiny_pair):
        (root / "models" / name).symlink_to(path)
    (root / "other").mkdir()
    return root


def _samples(run: Path) -> pd.DataFrame:
    cols = ["benchmark", "problem_id", "sample_idx", "text", "correct"]
    return pd.read_parquet(run / "samples.parquet")[cols].sort_values(cols[:3]).reset_index(drop=True)


@pytest.mark.slow
def test_every_command_takes_relative_paths_from_another_working_directory(work):
    other = work / "other"
    # generate: from the work folder, every path relative to it
    tandem(work, "handoff", "--senior", "models/senior", "--junior", "models/junior", *FAST, "--out", "runs/rel")
    # the same experiment from a sibling folder, in two shards merged there: the same run
    for i in (0, 1):
        shard = ["--num-shards", "2", "--shard-index", str(i)]
        tandem(other, "solo", "--senior", "../models/senior", *FAST, *shard, "--out", "../runs/sharded")
    tandem(other, "merge", "../runs/sharded")
    rel, merged = work / "runs/rel/solo", work / "runs/sharded/solo"
    cfg = json.loads((rel / "config.json").read_text())
    assert cfg["fingerprint"] == json.loads((merged / "config.json").read_text())["fingerprint"]
    assert Path(cfg["config"]["senior"]["path"]) == work / "models/senior"  # recorded absolute
    pd.testing.assert_frame_equal(_samples(rel), _samples(merged))

    # score, regrade, compare, report and view from the sibling folder
    tandem(other, "legibility", "--run", "../runs/rel/solo", "--junior", "../models/junior")
    tandem(other, "drift", "--run", "../runs/rel/solo", "--junior", "../models/junior")
    tandem(other, "regrade", "../runs/rel/solo")
    compare = ["compare", "../runs/rel/solo", "../runs/sharded/solo", "--metric", "solo_pass@1", "--json", "c.json"]
    tandem(other, *compare)
    tandem(other, "report", "../runs/rel", "--out", "../report", "--no-figures")
    tandem(other, "view", "../runs/rel", "--out", "../view.html")

    lens = json.loads((rel / "metrics.json").read_text())["lens"]["junior"]
    assert {"legibility", "drift"} <= set(lens)
    assert (rel / "lens/junior/legibility.parquet").is_file() and (rel / "lens/junior/drift.parquet").is_file()
    assert json.loads((rel / "regrade.json").read_text())
    rows = json.loads((other / "c.json").read_text())["rows"]
    assert rows and all(r["diff"] == 0 for r in rows)  # one experiment from two folders: no difference
    assert "senior" in (work / "report/table2.md").read_text()
    assert (work / "view.html").stat().st_size > 1000
    assert not (other / "runs").exists() and not (other / "models").exists()  # nothing landed in the cwd


@pytest.mark.slow
def test_demo_exit_code_says_whether_every_step_worked(work):
    demo = [sys.executable, "-m", "tandem_eval.demo", "--limit", "4", "--n", "2", "--max-new-tokens", "32"]
    ok = subprocess.run([*demo, "--out", "runs/demo"], cwd=work, env=_env(), capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    assert "every step OK" in ok.stdout
    assert (work / "runs/demo/report/table2.md").is_file()
    assert (work / "runs/demo/solo/lens").is_dir()

    (work / "a_file").write_text("x")  # the handoff step's --out is a file: it fails, the rest is skipped
    bad = subprocess.run([*demo, "--out", "a_file"], cwd=work, env=_env(), capture_output=True, text=True)
    assert bad.returncode == 1, bad.stdout[-3000:] + bad.stderr[-3000:]
    assert "demo failed at: handoff" in bad.stdout
    assert "skipped" in bad.stdout
