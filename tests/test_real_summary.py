"""The real pair's summary (trainer/real.py) from its committed run folders, without the models: the
committed results/real/summary.json regenerates byte for byte (`python -m trainer.real --summary-only`), its
tax carries the exact sign-flip (McNemar) p and the capability prediction, and the command refuses in one
line where there is nothing finished to summarise.

    PYTHONPATH=$PWD python -m pytest -q tests/test_real_summary.py
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from scipy.stats import binomtest

from trainer import real

REPO = Path(__file__).resolve().parent.parent
COMMITTED = REPO / "results" / "real"


def test_the_committed_summary_regenerates_from_the_run_folders(tmp_path):
    out = tmp_path / "real"
    shutil.copytree(COMMITTED, out, ignore=shutil.ignore_patterns("report", "view.html"))
    assert real.main(["--summary-only", "--out", str(out)]) == 0
    assert (out / "summary.json").read_bytes() == (COMMITTED / "summary.json").read_bytes()


def test_the_tax_p_is_mcnemars_exact_one_and_the_prediction_is_the_token_share_mix():
    s = json.loads((COMMITTED / "summary.json").read_text())
    t, cap = s["tax"], s["capability_prediction"]
    first, second = t["discordant"]["first_only"], t["discordant"]["second_only"]
    # 100 binary outcomes per run: the tax in points is the discordant balance
    assert first - second == round(t["estimate"] * t["n_problems"] / 100)
    assert t["p_value"] == binomtest(first, first + second, 0.5).pvalue and "McNemar" in t["p_test"]
    f = s["handoff"]["senior_fraction"]
    assert (cap["senior_solo"], cap["junior_solo"]) == (s["senior_solo"]["pass@1"]["estimate"],
                                                        s["junior_solo"]["pass@1"]["estimate"])  # fmt: skip
    assert cap["predicted_handoff"] == round(f * cap["senior_solo"] + (1 - f) * cap["junior_solo"], 1)
    assert s["senior"]["quantization"] == "Q4_K_M GGUF" and "AWQ" in s["junior"]["quantization"]


def test_summary_only_refuses_without_finished_runs(tmp_path, capsys):
    assert real.main(["--summary-only", "--out", str(tmp_path / "none")]) == 2
    assert "has no summary.json and steps.json" in capsys.readouterr().err
    out = tmp_path / "half"
    out.mkdir()
    for name in ("summary.json", "steps.json"):
        shutil.copy(COMMITTED / name, out / name)
    assert real.main(["--summary-only", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not finished" in err and "senior solo" in err
