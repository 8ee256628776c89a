"""The dialects gates' diagnosis (trainer/toy/diagnosis.py): G0 recomputed from its committed samples, each check
with a CI that says whether a failure is beyond sampling noise, and H predicted from G0 alone."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trainer.toy import diagnosis, gates

DIALECTS_DIR = Path(__file__).resolve().parents[1] / "results" / "toy" / "dialects"


def test_the_committed_g0_recomputes_from_its_samples():
    """Every sampled number of the committed G0 (accuracies, dialect shares, the checks' values) follows from
    evidence/g0-samples.parquet: a reader can recompute the gate, not only read it."""
    g0 = json.loads((DIALECTS_DIR / "gates.json").read_text())["G0"]
    samples = pd.read_parquet(DIALECTS_DIR / diagnosis.G0_SAMPLES)
    numbers = g0["numbers"]
    for run, acc in numbers["accuracy_pct"].items():
        assert 100 * samples.loc[samples["run"] == run, "correct"].mean() == pytest.approx(acc)
        share = samples.loc[samples["run"] == run, "dialect"].value_counts(normalize=True) * 100
        for d, v in numbers["dialect_shares_pct"][run].items():
            assert share.get(d, 0.0) == pytest.approx(v)
    diag = diagnosis.g0_diagnosis(samples)
    assert diag["n_problems"] == numbers["n_problems"] and diag["n_samples"] == numbers["n_samples"]
    for name, row in diag["checks"].items():
        assert row["value"] == pytest.approx(g0["checks"][name]["value"], abs=1e-3), name
        assert row["pass"] == g0["checks"][name]["pass"], name
        assert row["ci"][0] <= row["value"] <= row["ci"][1]


def _samples(acc: dict[str, float], n_problems: int = 200, n: int = 8, seed: int = 0) -> pd.DataFrame:
    """G0-shaped samples: each run correct with its probability, dialect A/B as the run forces (else A 30%,
    B 40%, plain 30%)."""
    rng = np.random.default_rng(seed)
    rows = []
    for run in ("senior (T 1)", "senior", "senior forced A", "senior forced B", "junior", "junior forced A",
                "junior after A", "junior after B"):  # fmt: skip
        p = acc.get(run, 0.5)
        for i in range(n_problems):
            for _ in range(n):
                forced = run[-1] if run.endswith((" A", " B")) else None
                d = forced or rng.choice(["A", "B", "plain"], p=[0.3, 0.4, 0.3])
                rows.append({"problem_id": f"p{i}", "run": run, "correct": rng.random() < p, "dialect": d})
    return pd.DataFrame(rows)


def test_a_failure_far_past_its_threshold_is_not_within_noise_and_one_at_it_is():
    far = diagnosis.g0_diagnosis(_samples({"senior forced A": 0.6, "senior forced B": 0.95}))
    row = far["checks"]["init accuracy forced A - forced B (pts)"]
    assert row["pass"] is False and row["within_noise"] is False and row["ci"][1] < -3
    near = diagnosis.g0_diagnosis(_samples({"senior forced A": 0.9, "senior forced B": 0.93}))
    row = near["checks"]["init accuracy forced A - forced B (pts)"]
    assert row["ci"][0] < -3 < row["ci"][1] and row["within_noise"] is True


def test_predicted_headroom_is_the_ceiling_minus_the_models_tax_at_the_senior_runs_shares():
    samples = _samples({"senior forced A": 0.9, "senior forced B": 0.95, "junior after A": 0.8, "junior after B": 0.2})
    wide = diagnosis.per_problem(samples)
    m = wide.mean().to_numpy()[None, :]
    ix = list(wide.columns).index
    senior = {d: wide[f"acc|senior forced {d}"].mean() for d in "AB"}
    junior = {d: wide[f"acc|junior after {d}"].mean() for d in "AB"}
    shares = {d: wide[f"share_{d}|senior"].mean() for d in "AB"}
    for k in (1, 4):
        tax = gates.two_point_pass_at_k(senior, shares, k) - gates.two_point_pass_at_k(junior, shares, k)
        want = 100 * (senior["B"] - junior["B"]) - tax
        assert diagnosis.predicted_headroom(m, ix, k)[0] == pytest.approx(want)


def test_the_diagnosis_names_missing_samples(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        diagnosis.main([str(tmp_path)])
    assert e.value.code == 2 and "g0-samples.parquet does not exist" in capsys.readouterr().err
