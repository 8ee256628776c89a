"""The score stage from Python (tandem_eval.score) equals the `legibility` / `drift` commands.

    .venv/bin/python -m pytest tests/test_score.py -q        # ~30 s on 2 cores

One tiny solo run is copied twice: the CLI scores one copy, `score.legibility` / `score.drift` the
other, in-process. The lens tables must be byte-identical, the metrics.json entries equal apart
from the run's own path, and COMPLETE must record the same tables with the same hashes.
"""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from tandem_eval.cli.main import app


@pytest.fixture(scope="module")
def solo_run(tiny_pair, tmp_path_factory):
    senior, _ = tiny_pair
    out = tmp_path_factory.mktemp("score") / "run"
    args = ["solo", "--senior", str(senior), "--benchmark", "tiny", "--limit", "2", "--n", "2", "--k", "1,2"]
    res = CliRunner().invoke(app, [*args, "--max-new-tokens", "16", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    return out / "solo"


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_score_module_equals_the_cli(solo_run, tiny_pair, tmp_path):
    from tandem_eval.score import stage as score
    from tandem_eval.score.lens import LensOptions

    _, junior = tiny_pair
    by_cli, by_lib = _copy(solo_run, tmp_path / "cli"), _copy(solo_run, tmp_path / "lib")
    for kind in ("legibility", "drift"):
        res = CliRunner().invoke(app, [kind, "--run", str(by_cli), "--junior", str(junior), "--n-boot", "50", "-q"])
        assert res.exit_code == 0, res.output
    opts = LensOptions(n_boot=50)
    leg = score.legibility(by_lib, str(junior), options=opts)
    dri = score.drift(by_lib, junior=str(junior), options=opts)
    assert leg.table == by_lib / "lens" / "junior" / "legibility.parquet" and dri.junior_label == "junior"
    for kind in ("legibility", "drift"):
        a, b = (p / "lens" / "junior" / f"{kind}.parquet" for p in (by_cli, by_lib))
        assert a.read_bytes() == b.read_bytes(), kind
    lens_cli = json.loads((by_cli / "metrics.json").read_text())["lens"]
    lens_lib = json.loads((by_lib / "metrics.json").read_text())["lens"]
    assert lens_cli == lens_lib and lens_lib["junior"]["drift"] == dri.summary
    assert lens_lib["junior"]["drift"]["method"] == "exact" and leg.summary["junior_nll_mean"]["all"]["macro"]
    tables = [json.loads((p / "COMPLETE").read_text())["tables"] for p in (by_cli, by_lib)]
    assert tables[0] == tables[1] and "lens/junior/drift.parquet" in tables[0]


def test_score_refuses_bad_input_before_loading(solo_run, tiny_pair, monkeypatch):
    from tandem_eval.run.lens_layout import LensError
    from tandem_eval.score import stage as score

    monkeypatch.setattr(score, "_engine", lambda *a, **k: pytest.fail("a model was loaded before the check"))
    with pytest.raises(LensError, match="pass run=SOLO_RUN_DIR, or senior=PATH") as err:  # Python's words
        score.legibility()
    assert "--" not in str(err.value)
    # the score stage only reads run folders: a senior without a run is the CLI's generate-then-score
    with pytest.raises(LensError, match=r"existing solo run folder: pass run=SOLO_RUN_DIR \(`tandem-eval legi"):
        score.legibility(senior=str(tiny_pair[0]), junior=str(tiny_pair[1]))
    with pytest.raises(LensError, match="--run SOLO_RUN_DIR"):  # the CLI's entry keeps its flags
        score.run_lens("legibility", score.ScoreRequest())
    with pytest.raises(LensError, match="unknown engine 'tpu'; valid: hf, vllm, served"):
        score.drift(solo_run, junior=str(tiny_pair[1]), engine="tpu")
    with pytest.raises(LensError, match="unknown lens"):
        score.run_lens("clarity", score.ScoreRequest(run=solo_run))


def test_python_wording_keeps_commands_and_unknown_flags():
    from tandem_eval.score.stage import python_wording

    msg = "pass --junior-label cut or --allow-vocab-mismatch; run `tandem-eval drift --run R --junior PATH` first"
    assert python_wording(msg) == (
        "pass junior_label cut or options=LensOptions(allow_vocab_mismatch=True); "
        "run `tandem-eval drift --run R --junior PATH` first"
    )
    assert python_wording("no --junior given; pass --junior PATH") == "no junior given; pass junior=PATH"
    assert python_wording("--adopt: x does not exist; --k 3") == "adopt=True: x does not exist; --k 3"


def test_a_solo_run_made_for_a_lens_takes_the_one_k_rule(tiny_pair, monkeypatch, tmp_path):
    """Without a run, the solo run a lens command makes has the fingerprint `tandem-eval solo --n 6` would give."""
    from tandem_eval.cli.lens import solo_then_lens
    from tandem_eval.config import default_ks
    from tandem_eval.score import stage as score

    made = {}

    def run_eval(cfg, out, progress):
        made.update(cfg=cfg, out=out)
        raise KeyboardInterrupt  # stop before any generation

    monkeypatch.setattr("tandem_eval.generate.execute.run_eval", run_eval)
    with pytest.raises(KeyboardInterrupt):
        req = score.ScoreRequest(senior=str(tiny_pair[0]), junior=str(tiny_pair[1]), out=tmp_path, n=6, limit=1)
        solo_then_lens("legibility", req, score.LensOptions())
    assert made["cfg"].ks == default_ks(6) == (1, 2, 4, 6) and made["out"] == tmp_path / "solo"


def test_one_engine_factory_names_what_cannot_load(monkeypatch):
    from tandem_eval import engines
    from tandem_eval.engines import vllm_engine

    assert engines.unavailable("hf") is None
    assert engines.unavailable("tpu") == "unknown engine 'tpu'; valid: hf, vllm, served"
    monkeypatch.setattr(vllm_engine, "vllm_available", lambda: False)
    assert "vLLM is not installed" in engines.unavailable("vllm")
    with pytest.raises(ValueError, match="vLLM is not installed"):
        engines.load_engine("vllm", "unused", None)


def test_a_solo_run_of_other_settings_at_out_is_offered_to_score_as_it_is(solo_run, tiny_pair, tmp_path):
    """legibility without --run, at an --out whose solo run was made with --max-new-tokens (an option the lens
    commands lack): refused before any work with the way to score that run (--run), not only the generate
    stage's "pass a new --out, or delete the folder", which would throw the run away."""
    senior, junior = tiny_pair
    out = _copy(solo_run.parent, tmp_path / "run")
    args = [
        "legibility",
        "--senior",
        str(senior),
        "--junior",
        str(junior),
        "--out",
        str(out),
        "--limit",
        "2",
        "--n",
        "2",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert f"score it as it is with `tandem-eval legibility --run {out / 'solo'}`" in said and "max_new_tokens" in said
    assert not (out / "solo" / "lens").exists()
