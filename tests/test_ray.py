"""Evaluation on Ray: `--ray-workers 2` gives the single-process run's samples, and resumes finished shards.

One local Ray cluster (2 CPUs, no dashboard) serves the module; workers inherit PYTHONPATH from this process.
"""

import os

import pandas as pd
import pytest
from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.config import EvalConfig, ModelSpec, Sampling
from tandem_eval.generate.execute import run_handoff

ray = pytest.importorskip("ray")

COLS = ["benchmark", "problem_id", "sample_idx", "seed", "token_ids", "author_mask", "text", "correct", "n_handoffs"]
ARGS = ["--n", "2", "--k", "1,2", "--limit", "3", "--max-new-tokens", "24", "--temperature", "1.0"]
ARGS += ["--top-p", "0.9", "--top-k", "50", "--quiet"]


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a throwaway local cluster needs no token file
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _samples(path):
    return pd.read_parquet(path / "samples.parquet")[COLS].reset_index(drop=True)


def test_ray_workers_handoff_equals_the_single_process_run(tiny_pair, local_ray, tmp_path):
    senior, junior = tiny_pair
    cfg = EvalConfig(
        senior=ModelSpec(senior),
        junior=ModelSpec(junior),
        mode="handoff",
        schedule="chunk:4",  # handoffs every 4 tokens, even from a random model
        n=2,
        ks=(1, 2),
        limit=3,
        sampling=Sampling(temperature=1.0, top_p=0.9, top_k=50, max_new_tokens=24),
        label="senior",
    )
    single_solo, single_handoff, single_tax = run_handoff(cfg, tmp_path / "single", progress=False)

    out = tmp_path / "ray"
    result = CliRunner().invoke(
        app,
        [
            "handoff",
            "--senior",
            senior,
            "--junior",
            junior,
            "--schedule",
            "chunk:4",
            *ARGS,
            "--out",
            str(out),
            "--ray-workers",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (out / "shard-0-of-2" / "handoff-chunk_4" / "COMPLETE").exists()
    assert (out / "shard-1-of-2" / "solo" / "COMPLETE").exists()
    for kind, single in (("solo", single_solo), ("handoff-chunk_4", single_handoff)):
        pd.testing.assert_frame_equal(_samples(out / kind), _samples(single.path))
        assert (out / kind / "COMPLETE").exists()
    merged = pd.read_json(out / "handoff-chunk_4" / "metrics.json", typ="series")
    assert merged["tax"]["macro"]["pass@1"]["tax"] == single_tax["macro"]["pass@1"]["tax"]
    assert _samples(out / "handoff-chunk_4").n_handoffs.sum() > 0  # the junior really wrote

    # Resume: shard 1 and the merged folders are lost; only shard 1 runs again, shard 0 is kept as is.
    from shutil import rmtree

    from tandem_eval.generate.distributed import RayPlan, ray_handoff

    kept = (out / "shard-0-of-2" / "solo" / "samples.parquet").stat().st_mtime_ns
    for d in ("shard-1-of-2", "solo", "handoff-chunk_4"):
        rmtree(out / d)
    solo, handoff, _ = ray_handoff(cfg, out, RayPlan(workers=2))
    assert (out / "shard-0-of-2" / "solo" / "samples.parquet").stat().st_mtime_ns == kept
    pd.testing.assert_frame_equal(_samples(handoff.path), _samples(single_handoff.path))
    pd.testing.assert_frame_equal(_samples(solo.path), _samples(single_solo.path))
    # Everything complete: a rerun only reads the merged folders back.
    merged_mtime = (handoff.path / "samples.parquet").stat().st_mtime_ns
    ray_handoff(cfg, out, RayPlan(workers=2))
    assert (handoff.path / "samples.parquet").stat().st_mtime_ns == merged_mtime


def test_ray_refuses_manual_sharding(tiny_pair, local_ray, tmp_path):
    result = CliRunner().invoke(
        app,
        ["solo", "--senior", tiny_pair[0], *ARGS, "--out", str(tmp_path), "--ray-workers", "2", "--num-shards", "2"],
    )
    assert result.exit_code == 2 and "drop --num-shards" in " ".join(result.output.split())
