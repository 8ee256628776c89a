"""Run folders end to end: resume equivalence after a kill, config mismatch refusal, sharding + merge,
and the CLI's one-line errors for bad input."""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tandem_eval.cli import app
from tandem_eval.config import ConfigError, EvalConfig, ModelSpec, Sampling
from tandem_eval.pipeline import merge_shards, open_engines, run_eval, run_handoff
from tandem_eval.results import RunFolder, RunFolderError
from tandem_eval.tiny import CHATML_TEMPLATE

SAMPLING = Sampling(temperature=1.0, top_p=0.9, top_k=50, max_new_tokens=24)
COLS = ["benchmark", "problem_id", "sample_idx", "token_ids", "author_mask", "correct", "grade_status"]


@pytest.fixture(scope="module")
def cfg(tiny_pair):
    return EvalConfig(
        senior=ModelSpec(tiny_pair[0]),
        junior=ModelSpec(tiny_pair[1]),
        mode="handoff",
        schedule="paragraph",
        benchmarks=("tiny",),
        n=3,
        ks=(1, 2),
        limit=4,
        sampling=SAMPLING,
        batch_size=4,
    )


@pytest.fixture(scope="module")
def engines(cfg):
    return open_engines(cfg)


def _samples(rf):
    return rf.load_samples()[COLS].sort_values(COLS[:3]).reset_index(drop=True)


def test_killed_run_resumes_to_the_same_result(cfg, engines, tmp_path):
    full = run_eval(cfg, tmp_path / "full", engines, progress=False, flush_every=4)

    class Killed(Exception):
        pass

    def kill(n):
        raise Killed

    with pytest.raises(Killed):
        run_eval(cfg, tmp_path / "killed", engines, progress=False, flush_every=4, on_flush=kill)
    partial = RunFolder(tmp_path / "killed")
    assert not partial.is_complete() and len(partial.load_samples()) == 4
    resumed = run_eval(cfg, tmp_path / "killed", engines, progress=False, flush_every=4)
    assert resumed.is_complete()
    a, b = _samples(full), _samples(resumed)
    assert len(b) == 12 and not b.duplicated(COLS[:3]).any()
    pd.testing.assert_frame_equal(a, b)
    assert full.metrics()["pass_at_k"] == resumed.metrics()["pass_at_k"]
    cfg_json = json.loads((tmp_path / "full" / "config.json").read_text())
    assert cfg_json["provenance"]["versions"]["torch"] and "commit" in cfg_json["provenance"]["git"]
    assert cfg_json["config"]["sampling"]["temperature"] == 1.0


def test_existing_folder_with_other_config_is_refused(cfg, engines, tmp_path):
    run_eval(dataclasses.replace(cfg, limit=1, n=2), tmp_path / "r", engines, progress=False)
    with pytest.raises(RunFolderError, match="holds a different run"):
        run_eval(dataclasses.replace(cfg, limit=1, n=3), tmp_path / "r", engines, progress=False)


def test_handoff_reuses_solo_and_reports_tax(cfg, tmp_path):
    solo, handoff, tax = run_handoff(cfg, tmp_path, progress=False)
    assert solo.config()["config"]["mode"] == "solo" and solo.config()["config"]["junior"] is None
    hs = handoff.load_samples()
    assert set(hs["mode"]) == {"handoff"} and (hs.n_handoffs >= 0).all()
    assert {"per_benchmark", "per_group", "macro"} <= set(tax)
    assert handoff.metrics()["tax"]["macro"]["pass@1"]["n_problems"] == 4
    # a second call finds both folders complete and regenerates nothing
    mtime = (solo.path / "samples.parquet").stat().st_mtime
    run_handoff(cfg, tmp_path, progress=False)
    assert (solo.path / "samples.parquet").stat().st_mtime == mtime


def test_shards_merge_to_the_unsharded_run(cfg, engines, tmp_path):
    solo = dataclasses.replace(cfg, mode="solo", schedule="solo", junior=None)
    whole = run_eval(solo, tmp_path / "whole", engines, progress=False)
    parts = [
        run_eval(dataclasses.replace(solo, num_shards=2, shard_index=i), tmp_path / f"p{i}", engines, progress=False)
        for i in range(2)
    ]
    merged = merge_shards([p.path for p in parts], tmp_path / "merged")
    pd.testing.assert_frame_equal(_samples(whole), _samples(merged))
    with pytest.raises(RunFolderError, match="do not cover"):
        merge_shards([parts[0].path], tmp_path / "bad")


def test_config_rejects_contradictions():
    with pytest.raises(ConfigError, match="exceed --n"):
        EvalConfig(senior=ModelSpec("x"), n=2, ks=(1, 4))
    with pytest.raises(ConfigError, match="needs a junior"):
        EvalConfig(senior=ModelSpec("x"), mode="handoff", schedule="paragraph")
    with pytest.raises(ConfigError, match="unknown key"):
        from tandem_eval.config import from_dict

        from_dict(EvalConfig, {"senior": {"path": "x"}, "temprature": 1})


runner = CliRunner()


def _err(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


def test_cli_bad_inputs(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default --out is runs/<label> under the working directory
    senior, junior = tiny_pair
    assert "checkpoint not found" in _err(["solo", "--senior", str(tmp_path / "nope")])
    assert "no config.json" in _err(["solo", "--senior", str(tmp_path)])
    assert "valid: aime24" in _err(["solo", "--senior", senior, "--benchmark", "nonsense"])
    assert "exceed --n" in _err(["solo", "--senior", senior, "--n", "2", "--k", "1,4"])
    assert "--k must be" in _err(["solo", "--senior", senior, "--k", "one"])
    assert "unknown schedule" in _err(["handoff", "--senior", senior, "--junior", junior, "--schedule", "nope"])
    assert "no --junior given" in _err(["handoff", "--senior", senior])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "1+1?", "answer": "2"}\n{"problem": "2+2?", "answer": ""}\n')
    assert "line 2" in _err(["solo", "--senior", senior, "--benchmark", str(bad), "--out", str(tmp_path / "o")])
    assert not (tmp_path / "runs").exists() and not (tmp_path / "o").exists()  # failed commands leave nothing


def test_cli_vocab_mismatch_and_missing_chat_template(tiny_pair, tmp_path):
    from tandem_eval.tiny import build_model, train_tokenizer

    senior, _ = tiny_pair
    other_tok = train_tokenizer(["completely different corpus " * 3] * 20, vocab_size=300)
    other = tmp_path / "other"
    build_model(other_tok).save_pretrained(other)
    other_tok.save_pretrained(other)
    msg = _err(["handoff", "--senior", senior, "--junior", str(other), "--limit", "1", "--out", str(tmp_path / "o")])
    assert "tokenizers differ" in msg and "--allow-vocab-mismatch" in msg
    other_tok.chat_template = None
    plain = tmp_path / "plain"
    build_model(other_tok).save_pretrained(plain)
    other_tok.save_pretrained(plain)
    (plain / "chat_template.jinja").unlink(missing_ok=True)
    assert "no chat_template" in _err(["solo", "--senior", str(plain), "--limit", "1", "--out", str(tmp_path / "p")])
    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML_TEMPLATE)
    ok = runner.invoke(
        app,
        [
            "solo",
            "--senior",
            str(plain),
            "--chat-template",
            str(template),
            "--limit",
            "1",
            "--n",
            "1",
            "--k",
            "1",
            "--max-new-tokens",
            "4",
            "--out",
            str(tmp_path / "p"),
            "-q",
        ],
    )
    assert ok.exit_code == 0, ok.output
    cfg = json.loads((tmp_path / "p" / "solo" / "config.json").read_text())["config"]
    assert cfg["chat_template"] == CHATML_TEMPLATE


def test_cli_help_explains_commands():
    out = subprocess.run([sys.executable, "-m", "tandem_eval.cli", "--help"], capture_output=True, text=True).stdout
    assert "handoff" in out and "solo" in out
    out = runner.invoke(app, ["handoff", "--help"]).output
    assert "--schedule" in out and "--junior" in out


def test_text_level_handoff_with_different_vocabularies(tiny_pair, tmp_path):
    """--allow-vocab-mismatch: the junior re-tokenizes text; the trace stays in senior ids."""
    from tandem_eval.tiny import build_model, train_tokenizer

    senior, _ = tiny_pair
    other_tok = train_tokenizer(["Tom has 3 pens.\n\nSo he has 5 pens. The answer is \\boxed{5}."] * 40, vocab_size=330)
    other = tmp_path / "other"
    build_model(other_tok, seed=3).save_pretrained(other)
    other_tok.save_pretrained(other)
    cfg = EvalConfig(
        senior=ModelSpec(senior),
        junior=ModelSpec(str(other)),
        mode="handoff",
        schedule="chunk:4",
        n=2,
        ks=(1,),
        limit=2,
        sampling=SAMPLING,
        allow_vocab_mismatch=True,
    )
    rf = run_eval(cfg, tmp_path / "run", progress=False)
    df = rf.load_samples()
    assert rf.config()["config"]["allow_vocab_mismatch"] is True
    for mask, ids, lps in zip(df.author_mask, df.token_ids, df.logprobs):
        assert len(mask) == len(ids) == len(lps) and 0 in list(mask) and 1 in list(mask)
        assert all(np.isnan(lp) == (m == 0) for m, lp in zip(mask, lps))  # junior log-probs are NaN
