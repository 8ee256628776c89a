"""The trainer learns the same on vLLM as on HF: trainer/engine_curves.py at its CI scale.

One recipe (cpu-grpo.yaml on the bundled toy emergent initial senior), `engine=hf` and `engine=vllm`,
the same seed: both raise the held-out solo pass@1 by the scale's `min_gain` and their gains differ by
at most `max_gap` (thresholds fixed in trainer/engine_curves.py before the runs); the first step's
rollouts, drawn from the same weights with the same position-keyed randomness, score the same; and on
vLLM trl's own log-prob comparison (importance-sampling correction on) stays at float noise.
A few minutes: two short trainings in fresh processes (vLLM keeps its memory until its process ends).
"""

from __future__ import annotations

import json

import pytest


@pytest.mark.vllm
def test_grpo_learns_the_same_on_vllm_and_hf(tmp_path, monkeypatch):
    pytest.importorskip("vllm")
    from trainer.engine_curves import SCALES, main

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    summary = main(["--out", str(tmp_path / "engines"), "--scale", "ci"])
    s, hf, vllm = SCALES["ci"], summary["engines"]["hf"], summary["engines"]["vllm"]
    assert summary["checks"] == {k: True for k in summary["checks"]} and summary["verdict"] == "same learning"
    assert hf["gain_mean"] >= s.min_gain and vllm["gain_mean"] >= s.min_gain
    assert hf["reward_per_step"][0] == vllm["reward_per_step"][0]  # same weights, same draws: same rewards
    assert 0 <= vllm["logp_difference_max"] <= 0.01 and hf["logp_difference_max"] is None
    assert json.loads((tmp_path / "engines" / "summary.json").read_text())["verdict"] == "same learning"
    assert (tmp_path / "engines" / "curves.png").stat().st_size > 10_000
