"""ARCHITECTURE.md's "where a new piece goes", held by adding one: a new engine is one class and one
`engines.ENGINES` entry, a new drift estimator one `metrics.registry.DRIFT_ESTIMATORS` entry; nothing else
changes, and the normal Python calls (generate.run_eval / run_handoff, score.drift) run them.

    PYTHONPATH=$PWD python -m pytest -q tests/test_new_pieces.py      # ~1 min on 2 cores
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from tandem_eval import engines
from tandem_eval.config import EvalConfig, ModelSpec, Sampling
from tandem_eval.engines.hf import HFEngine
from tandem_eval.metrics import registry

MADE: list[FakeEngine] = []  # every fake engine constructed, in order


class FakeEngine(HFEngine):
    """A new backend: here the HF engine under another name, so its samples can be checked against hf's."""

    name = "fake"

    def __init__(self, path_or_model, sampling, **kw):
        super().__init__(path_or_model, sampling, **kw)
        MADE.append(self)


# The HF engine's facts, and the facts of a backend like vLLM's (no exact KL, one engine serving both
# roles of a self-paired run, a caller-sized context), which the HF class can serve too.
FACTS = {
    "like-hf": dict(exact_kl=True, shares_weights=True, takes_device=True, fp32_reproducible=True),
    "like-vllm": dict(sized_context=True),
}


@pytest.fixture(params=sorted(FACTS))
def fake(request, monkeypatch):
    """Register engine "fake" (the only change a new backend makes) with one set of facts."""
    monkeypatch.setitem(engines.ENGINES, "fake", engines.Backend(f"{__name__}:FakeEngine", **FACTS[request.param]))
    MADE.clear()
    return request.param


def _cfg(tiny_pair, engine: str) -> EvalConfig:
    senior = ModelSpec(tiny_pair[0])
    return EvalConfig(
        senior=senior,
        junior=senior,  # self-paired: the junior is the senior's own checkpoint
        mode="handoff",
        schedule="chunk:4",  # switches authors within the budget (random models write no paragraphs)
        n=2,
        ks=(1, 2),
        limit=2,
        engine=engine,
        sampling=Sampling(temperature=1.0, max_new_tokens=16),
        batch_size=4,
    )


def _tokens(rf) -> list:
    return [list(t) for t in rf.load_samples().sort_values(["problem_id", "sample_idx"]).token_ids]


def test_a_new_engine_runs_solo_a_self_paired_handoff_and_drift(fake, tiny_pair, tmp_path):
    from tandem_eval.generate import run_eval, run_handoff
    from tandem_eval.score import stage as score
    from tandem_eval.score.lens import LensOptions

    solo, handoff, tax = run_handoff(_cfg(tiny_pair, "fake"), tmp_path / "fake", progress=False)
    assert solo.config()["config"]["engine"] == handoff.config()["config"]["engine"] == "fake"
    # the senior, and for a backend that shares weights a second engine on its loaded model; else the
    # senior's engine serves both roles
    assert len(MADE) == (2 if fake == "like-hf" else 1) and MADE[-1].model is MADE[0].model
    # position-keyed sampling: a self-paired handoff writes the solo traces, and so does the hf engine
    assert (handoff.load_samples().n_handoffs > 0).any()
    assert _tokens(handoff) == _tokens(solo)
    hf = run_eval(
        dataclasses.replace(_cfg(tiny_pair, "hf"), mode="solo", schedule="solo", junior=None), tmp_path / "hf"
    )
    assert _tokens(hf) == _tokens(solo) and "pass@1" in tax["macro"]

    scored = score.drift(solo.path, junior=tiny_pair[0], engine="fake", options=LensOptions(n_boot=20))
    assert scored.summary["method"] == ("exact" if fake == "like-hf" else "monte-carlo")


def test_a_new_drift_estimator_is_one_registry_entry(tiny_pair, tmp_path, monkeypatch):
    from tandem_eval.generate import run_eval
    from tandem_eval.score import stage as score
    from tandem_eval.score.lens import LensOptions

    half_k1 = registry.DriftEstimator("KL k1 / 2", lambda t: (t["senior_lp"] - t["junior_lp"]) / 2)
    monkeypatch.setitem(registry.DRIFT_ESTIMATORS, "kl_half_k1", half_k1)
    cfg = dataclasses.replace(_cfg(tiny_pair, "hf"), mode="solo", schedule="solo", junior=None)
    run = run_eval(cfg, tmp_path / "solo", progress=False)
    scored = score.drift(run.path, junior=tiny_pair[1], options=LensOptions(n_boot=20))
    table = pd.read_parquet(scored.table)
    assert np.allclose(table["kl_half_k1"], table["kl_k1"] / 2)  # computed per token, then averaged
    assert scored.summary["kl_half_k1"]["all"]["macro"]  # summarized with its CIs, beside the others
