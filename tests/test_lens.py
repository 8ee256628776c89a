"""Legibility and drift (tandem_eval.score.lens, tandem_eval.cli.lens) on a tiny random senior/junior pair.

    .venv/bin/python -m pytest tests/test_lens.py -q            # ~1 min on 2 cores; -m "not vllm" skips vLLM

The senior's CoTs are sampled at temperature 1 (top-p 1, top-k off), so the Monte-Carlo estimators
k1, k3 are unbiased for the exact KL on them. Every lens number is checked against a brute-force
computation written here with plain transformers forwards in float64 (tolerance 1e-4).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from tandem_eval.config import Sampling
from tandem_eval.engines.base import Request, generate
from tandem_eval.metrics.registry import DRIFT_ESTIMATORS
from tandem_eval.run.lens_layout import LensError
from tandem_eval.score import lens
from tandem_eval.score.lens import LensOptions

N_PROBLEMS, N_SAMPLES, MAX_NEW = 8, 4, 48
T1 = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=MAX_NEW, max_context=512)
# small chunks exercise the block loop; the brute-force checks score every token, the final EOS included
FAST = LensOptions(n_boot=200, chunk=64, batch_tokens=2048, include_eos=True)


# ---- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    from tandem_eval.toy.tiny import build_tiny_pair

    senior, junior = build_tiny_pair(tmp_path_factory.mktemp("tiny"))
    return {"senior": senior, "junior": junior}


@pytest.fixture(scope="module")
def engines(pair):
    from tandem_eval.engines.hf import HFEngine

    return {r: HFEngine(pair[r], T1) for r in ("senior", "junior")}


@pytest.fixture(scope="module")
def samples(engines):
    """A solo sample table: N_PROBLEMS tiny problems x N_SAMPLES CoTs sampled from the senior at T=1."""
    from tandem_eval.data.benchmarks import load_benchmark
    from tandem_eval.data.prompts import prompt_ids

    senior = engines["senior"]
    rows, reqs = [], []
    for p in load_benchmark("tiny")[:N_PROBLEMS]:
        ids = prompt_ids(senior.tokenizer, p.problem)
        for k in range(N_SAMPLES):
            reqs.append(Request((p.problem_id, k), ids, MAX_NEW, seed=1000 * len(rows) + 7))
            rows.append(
                {
                    "problem_id": p.problem_id,
                    "benchmark": p.benchmark,
                    "group": p.group,
                    "sample_idx": k,
                    "mode": "solo",
                    "schedule": "solo",
                    "prompt_ids": ids,
                    "correct": k % 2 == 0,
                }
            )
    for row, c in zip(rows, generate(senior, reqs)):
        row.update(
            token_ids=c.token_ids,
            logprobs=c.logprobs,
            finish_reason=c.finish_reason,
            n_tokens=len(c.token_ids),
            text=senior.tokenizer.decode(c.token_ids),
        )
    df = pd.DataFrame(rows)
    assert (df.n_tokens > 0).all()
    return df


@pytest.fixture(scope="module")
def drift_hf(samples, engines):
    return lens.drift(samples, engines["junior"], senior=engines["senior"], opts=FAST)


def _brute(model_s, model_j, prompt, cont, vocab, junior_prompt=None):
    """Plain forwards, float64 log-softmax over the tokenizer vocabulary: per-token quantities."""

    def logp(model, prompt):
        with torch.no_grad():
            logits = model(torch.tensor([list(prompt) + list(cont)])).logits[0, len(prompt) - 1 : -1, :vocab]
        return torch.log_softmax(logits.double(), -1)

    ls, lj = logp(model_s, prompt), logp(model_j, junior_prompt or prompt)
    t = torch.tensor(list(cont))
    r = torch.arange(len(cont))
    return {
        "nll_j": (-lj[r, t]).numpy(),
        "k1": (ls[r, t] - lj[r, t]).numpy(),
        "kl": (ls.exp() * (ls - lj)).sum(-1).numpy(),
        "rev": (lj.exp() * (lj - ls)).sum(-1).numpy(),
    }


@pytest.fixture(scope="module")
def brute(samples, pair):
    from transformers import AutoModelForCausalLM

    s, j = (
        AutoModelForCausalLM.from_pretrained(str(pair[r]), dtype=torch.float32).eval() for r in ("senior", "junior")
    )
    vocab = s.config.vocab_size
    return {
        "models": (s, j, vocab),
        "rows": [_brute(s, j, list(p), list(c), vocab) for p, c in zip(samples.prompt_ids, samples.token_ids)],
    }


# ---- correctness against brute force -------------------------------------------------------
def test_legibility_matches_brute_force(samples, engines, brute):
    out = lens.legibility(samples, engines["junior"], senior_tok=engines["senior"].tokenizer, opts=FAST)
    assert list(out.columns[:4]) == lens.KEYS and len(out) == len(samples)
    assert out["vocab_match"].all() and (out["n_tokens"] == samples["n_tokens"]).all()
    for row, b, eos in zip(out.itertuples(), brute["rows"], samples.finish_reason == "eos"):
        np.testing.assert_allclose(-row.junior_logprobs, b["nll_j"], atol=1e-4)
        assert abs(row.junior_nll_sum - b["nll_j"].sum()) < 1e-4 * max(1, len(b["nll_j"]))
        assert abs(row.junior_nll_mean - b["nll_j"].mean()) < 1e-4
        text_nats = b["nll_j"][: len(b["nll_j"]) - int(eos)].sum()  # bits per byte leaves a final EOS out
        assert row.junior_bpb == pytest.approx(text_nats / math.log(2) / row.n_bytes, abs=1e-4)
        assert len(row.nll_bins) == FAST.bins
    # One CoT per problem: the padded mixed-prompt batches (not the shared-prompt path) give the same.
    lone = samples.sample_idx == 0
    one = lens.legibility(samples[lone], engines["junior"], senior_tok=engines["senior"].tokenizer, opts=FAST)
    np.testing.assert_allclose(one["junior_nll_mean"], out.loc[lone.to_numpy(), "junior_nll_mean"], atol=1e-5)


def test_final_eos_is_left_out_by_default_and_kept_with_include_eos(samples, engines, pair):
    eos = (samples.finish_reason == "eos").to_numpy()
    assert eos.any()  # some CoTs end with EOS, so the two scopes differ
    opts = dataclasses.replace(FAST, include_eos=False)
    tok = engines["senior"].tokenizer
    with_eos = lens.legibility(samples, engines["junior"], senior_tok=tok, opts=FAST)
    without = lens.legibility(samples, engines["junior"], senior_tok=tok, opts=opts)
    assert (without["n_scored_tokens"] == samples["n_tokens"] - eos).all() and not without["include_eos"].any()
    assert (with_eos["n_scored_tokens"] == samples["n_tokens"]).all() and with_eos["include_eos"].all()
    for a, b, e in zip(without.junior_logprobs, with_eos.junior_logprobs, eos):
        assert len(a) == len(b) - int(e)
        np.testing.assert_allclose(a, b[: len(a)], atol=1e-5)  # the EOS position is simply dropped
    d = lens.drift(samples, engines["junior"], senior_tok=tok, opts=opts)  # Monte Carlo, stored log-probs
    assert [len(x) for x in d.k1_tokens] == list(without["n_scored_tokens"])


def test_exact_kl_matches_brute_force(drift_hf, brute):
    assert (drift_hf["method"] == "exact").all()
    for row, b in zip(drift_hf.itertuples(), brute["rows"]):
        np.testing.assert_allclose(row.kl_tokens, b["kl"], atol=1e-4)
        np.testing.assert_allclose(row.k1_tokens, b["k1"], atol=1e-4)
        assert row.kl_exact == pytest.approx(b["kl"].mean(), abs=1e-4)
        assert row.kl_reverse == pytest.approx(b["rev"].mean(), abs=1e-4)
        assert row.kl_k1 == pytest.approx(b["k1"].mean(), abs=1e-4)
        assert row.kl_k3 == pytest.approx((np.expm1(-b["k1"]) + b["k1"]).mean(), abs=1e-4)
        assert row.junior_nll_mean == pytest.approx(b["nll_j"].mean(), abs=1e-4)
    # KL >= 0 at every position, both directions; the two random models really differ.
    assert all((x >= 0).all() for x in drift_hf["kl_tokens"])
    assert (drift_hf[["kl_exact", "kl_reverse", "kl_k3"]] > 0.1).all().all()


def test_junior_with_its_own_chat_template(samples, pair, engines, brute):
    """Same vocabulary, different template: the junior reads its own chat prefix, the senior its own."""
    from tandem_eval.data.prompts import prompt_ids
    from tandem_eval.engines.hf import HFEngine

    junior = HFEngine(pair["junior"], T1)
    junior.tokenizer.chat_template = (
        "{{- '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}" + junior.tokenizer.chat_template
    )
    sub = samples.iloc[::5]
    out = lens.drift(sub, junior, senior=engines["senior"], opts=FAST)
    s, j, vocab = brute["models"]
    for row, (_, x) in zip(out.itertuples(), sub.iterrows()):
        jp = prompt_ids(junior.tokenizer, _problem(x.problem_id))
        assert len(jp) > len(x.prompt_ids)
        b = _brute(s, j, list(x.prompt_ids), list(x.token_ids), vocab, junior_prompt=jp)
        np.testing.assert_allclose(row.kl_tokens, b["kl"], atol=1e-4)
        assert row.junior_nll_mean == pytest.approx(b["nll_j"].mean(), abs=1e-4)


def test_stored_senior_logprobs_are_the_teacher_forced_ones(samples, drift_hf):
    """The solo run's `logprobs` (what the vLLM path uses for log p_s) equal teacher-forced senior log-probs."""
    for lp, row in zip(samples["logprobs"], drift_hf.itertuples()):
        assert -np.mean(lp) == pytest.approx(row.senior_nll_mean, abs=1e-4)


def test_same_weights_give_zero_drift(samples, pair):
    from tandem_eval.engines.hf import HFEngine

    a, b = HFEngine(pair["senior"], T1), HFEngine(pair["senior"], T1)
    out = lens.drift(samples.iloc[:6], b, senior=a, opts=FAST)
    for col in ("kl_exact", "kl_reverse", "kl_k1", "kl_k3"):
        assert out[col].abs().max() < 1e-6, col
    assert all((x == 0).all() for x in out["k1_tokens"])


def test_monte_carlo_estimators_approach_exact_kl(drift_hf):
    """E[k1_t | context] = E[k3_t | context] = KL_t when x_t ~ p_s (temperature 1). The differences
    k_t - KL_t are martingale differences (uncorrelated across positions), so their mean over N
    tokens is ~ Normal(0, sd / sqrt(N)). Tolerance: 4 standard errors (two-sided false alarm 6e-5);
    the test also requires the standard error to be below 10% of the KL, so it has power."""
    kl = np.concatenate(drift_hf["kl_tokens"].to_list()).astype(float)
    k1 = np.concatenate(drift_hf["k1_tokens"].to_list()).astype(float)
    k3 = np.expm1(-k1) + k1
    assert len(kl) > 1000
    for name, k in (("k1", k1), ("k3", k3)):
        d = k - kl
        se = d.std(ddof=1) / math.sqrt(len(d))
        assert se < 0.1 * kl.mean(), (name, se)
        assert abs(d.mean()) < 4 * se, (name, k.mean(), kl.mean(), se)


# ---- truncation, summaries, curves ---------------------------------------------------------
def test_position_bins():
    np.testing.assert_allclose(lens.position_bins(np.arange(40.0), 20), np.arange(20) * 2 + 0.5)
    short = lens.position_bins(np.array([1.0, 3.0]), 4)  # token centres 0.25, 0.75 -> bins 1 and 3
    assert short[1] == 1 and short[3] == 3 and np.isnan(short[[0, 2]]).all()


def test_truncated_flag_and_summaries(drift_hf, samples):
    per = drift_hf.copy()
    per["truncated"] = np.arange(len(per)) % 3 == 0  # a known pattern (random tiny models rarely emit EOS)
    assert (drift_hf["truncated"] == (samples["finish_reason"] == "length").to_numpy()).all()
    per["benchmark"] = np.where(per.problem_id < "tiny/0004", "bench_a", "bench_b")  # two groups: a real macro
    per["group"] = per["benchmark"].str.replace("bench", "group")
    summ = lens.summarize(per, list(DRIFT_ESTIMATORS), ["kl_bins"], FAST, {"note": "x"})
    json.dumps(summ, allow_nan=False)
    assert summ["n_truncated"] == int(per.truncated.sum()) and summ["note"] == "x"

    def manual(df):  # mean over samples -> problems -> groups
        pp = df.groupby(["group", "problem_id"]).kl_exact.mean()
        return pp.groupby(level=0).mean().mean()

    entry = summ["kl_exact"]
    assert entry["all"]["macro"]["estimate"] == pytest.approx(manual(per), abs=1e-12)
    assert entry["no_truncated"]["macro"]["estimate"] == pytest.approx(manual(per[~per.truncated]), abs=1e-12)
    assert entry["no_truncated"]["macro"]["n_samples"] == int((~per.truncated).sum())
    ci = entry["all"]["macro"]
    assert ci["low"] <= ci["estimate"] <= ci["high"]
    assert set(entry["all"]["per_group"]) == {"group_a", "group_b"}
    assert len(summ["curves"]["kl_bins"]["macro"]) == FAST.bins
    # Only truncated CoTs in one group: its no-truncation macro is undefined, not re-weighted.
    per.loc[per.group == "group_a", "truncated"] = True
    summ = lens.summarize(per, ["kl_exact"], [], FAST)
    assert summ["kl_exact"]["no_truncated"]["macro"] == {"estimate": None, "missing_groups": ["group_a"]}


# ---- mismatched vocabularies ---------------------------------------------------------------
@pytest.fixture(scope="module")
def foreign_junior(tmp_path_factory):
    """A junior with its own (smaller) BPE vocabulary and the same chat template."""
    from tandem_eval.engines.hf import HFEngine
    from tandem_eval.toy.tiny import build_model, train_tokenizer

    tok = train_tokenizer(vocab_size=300)
    path = tmp_path_factory.mktemp("foreign")
    build_model(tok, seed=5).save_pretrained(path)
    tok.save_pretrained(path)
    return HFEngine(path, T1)


def test_drift_refuses_mismatched_vocab(samples, engines, foreign_junior):
    with pytest.raises(LensError, match="drift needs one shared tokenizer.*allow-vocab-mismatch"):
        lens.drift(samples, foreign_junior, senior=engines["senior"], opts=FAST)


def test_legibility_bits_per_byte_fallback(samples, engines, foreign_junior):
    stok, jtok = engines["senior"].tokenizer, foreign_junior.tokenizer
    sub = samples.iloc[:4]
    with pytest.raises(LensError, match="--allow-vocab-mismatch"):
        lens.legibility(sub, foreign_junior, senior_tok=stok, opts=FAST)
    out = lens.legibility(sub, foreign_junior, senior_tok=stok, opts=LensOptions(allow_vocab_mismatch=True))
    assert not out["vocab_match"].any()
    from tandem_eval.data.prompts import prompt_ids

    model = foreign_junior.model
    for row, (_, s) in zip(out.itertuples(), sub.iterrows()):
        ids = list(s.token_ids)[: len(s.token_ids) - int(s.finish_reason == "eos")]
        text = stok.decode(ids, skip_special_tokens=False)
        cont = jtok.encode(text, add_special_tokens=False)  # the junior's own tokenization of the text
        prompt = prompt_ids(jtok, _problem(s.problem_id))
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([prompt + cont])).logits[0, len(prompt) - 1 : -1].double(), -1)
        nats = -lp[torch.arange(len(cont)), torch.tensor(cont)].sum().item()
        assert row.n_bytes == len(text.encode()) and row.n_junior_tokens == len(cont)
        assert row.junior_bpb == pytest.approx(nats / math.log(2) / len(text.encode()), abs=1e-4)


def _problem(problem_id):
    from tandem_eval.data.benchmarks import load_benchmark

    return {p.problem_id: p.problem for p in load_benchmark("tiny")}[problem_id]


# ---- HF vs vLLM ----------------------------------------------------------------------------
@pytest.mark.vllm
def test_hf_and_vllm_agree(samples, pair, engines, drift_hf):
    from tandem_eval.engines.vllm_engine import VLLMEngine, vllm_available

    if not vllm_available():
        pytest.skip("vllm is not installed")
    junior = VLLMEngine(pair["junior"], Sampling(temperature=0, max_context=512), max_batch=8, kv_cache_gib=1 / 16)
    try:
        stok = engines["senior"].tokenizer
        leg = lens.legibility(samples, junior, senior_tok=stok, opts=FAST)
        mc = lens.drift(samples, junior, senior_tok=stok, opts=FAST)  # k1/k3 from stored senior log-probs
    finally:
        junior.close()
    assert (mc["method"] == "monte-carlo").all() and mc["kl_exact"].isna().all()
    np.testing.assert_allclose(leg["junior_nll_mean"], drift_hf["junior_nll_mean"], atol=1e-4)
    np.testing.assert_allclose(mc["kl_k1"], drift_hf["kl_k1"], atol=1e-4)
    np.testing.assert_allclose(mc["kl_k3"], drift_hf["kl_k3"], atol=1e-3)
    for a, b in zip(mc["k1_tokens"], drift_hf["k1_tokens"]):
        np.testing.assert_allclose(a, b, atol=1e-4)


# ---- CLI: legibility, drift, compare on run folders ----------------------------------------
def _run_folder(path, senior, samples):
    from tandem_eval.config import EvalConfig, ModelSpec
    from tandem_eval.run.results import RunFolder

    rf = RunFolder(path)
    rf.init(EvalConfig(senior=ModelSpec(str(senior)), n=N_SAMPLES, ks=(1, 2, 4)))
    rf.append_shard(samples.to_dict("records"))
    rf.finalize({"solo": {}})
    return rf


def test_cli_legibility_drift_compare(tmp_path, pair, samples):
    from typer.testing import CliRunner

    from tandem_eval.cli.main import app  # imports cli_lens's commands when they run

    runner = CliRunner()
    a = _run_folder(tmp_path / "a", pair["senior"], samples)
    b_samples = samples.copy()
    b_samples["token_ids"] = [list(t)[: max(1, len(t) // 2)] for t in samples.token_ids]  # another "senior"
    b_samples["logprobs"] = [list(lp)[: max(1, len(lp) // 2)] for lp in samples.logprobs]
    b_samples["correct"] = ~samples["correct"]
    b = _run_folder(tmp_path / "b", pair["senior"], b_samples)
    for rf in (a, b):
        for cmd in ("legibility", "drift"):
            res = runner.invoke(app, [cmd, "--run", str(rf.path), "--junior", str(pair["junior"]), "--n-boot", "100"])
            assert res.exit_code == 0, res.output
    m = a.metrics()["lens"]["junior"]  # keyed by the junior's label (its folder name)
    assert {"legibility", "drift"} <= set(m)
    assert m["drift"]["method"] == "exact" and m["legibility"]["primary"] == "junior_nll_mean"
    assert m["legibility"]["include_eos"] is False and "without the final EOS" in m["legibility"]["scope"]
    per = pd.read_parquet(a.path / "lens" / "junior" / "drift.parquet")
    assert {
        "benchmark",
        "problem_id",
        "sample_idx",
        "n_tokens",
        "kl_exact",
        "kl_k1",
        "kl_k3",
        "kl_reverse",
        "truncated",
    } <= set(per.columns)
    legi = pd.read_parquet(a.path / "lens" / "junior" / "legibility.parquet")
    assert {"junior_nll_sum", "junior_nll_mean", "junior_logprobs"} <= set(legi.columns)

    out = tmp_path / "cmp.json"
    for metric in ("junior_nll", "kl_exact", "kl_k1", "solo_pass@1"):
        res = runner.invoke(
            app, ["compare", str(a.path), str(b.path), "--metric", metric, "--n-boot", "100", "--json", str(out)]
        )
        assert res.exit_code == 0, res.output
        rows = json.loads(out.read_text())["rows"]
        assert [r["group"] for r in rows] == ["tiny", "macro"] and rows[-1]["n_problems"] == N_PROBLEMS
    assert rows[-1]["diff"] == pytest.approx(100.0 * (samples.correct.mean() - b_samples.correct.mean()))
    # Bad input: one-line error naming the fix, non-zero exit.
    for args, msg in (
        (["compare", str(a.path), str(b.path), "--metric", "pass@4"], "unknown metric"),
        (["drift", "--run", str(tmp_path / "nope"), "--junior", str(pair["junior"])], "not a run folder"),
        (["legibility", "--junior", str(pair["junior"])], "--run SOLO_RUN_DIR"),
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and msg in res.output, res.output


def test_real_cli_run_scored_by_two_juniors_keeps_both_and_the_viewer_shades_it(tmp_path, pair):
    """generate (solo CLI) -> legibility with two juniors -> report and view pick by junior."""
    import re
    import shutil
    import subprocess
    import tempfile

    from typer.testing import CliRunner

    from tandem_eval.cli.main import app
    from tandem_eval.report.view import build_page

    runner = CliRunner()
    res = runner.invoke(
        app,
        ["solo", "--senior", str(pair["senior"]), "--benchmark", "tiny", "--limit", "3", "--n", "2", "--k", "1,2",
         "--max-new-tokens", "24", "--out", str(tmp_path / "run"), "--label", "mine", "-q"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    solo = tmp_path / "run" / "solo"
    for junior, label in ((pair["junior"], None), (pair["senior"], "self")):
        args = ["legibility", "--run", str(solo), "--junior", str(junior), "--n-boot", "50"]
        res = runner.invoke(app, args + (["--junior-label", label] if label else []))
        assert res.exit_code == 0, res.output
    a, b = (pd.read_parquet(solo / "lens" / j / "legibility.parquet") for j in ("junior", "self"))
    assert len(a) == len(b) == 6 and not np.allclose(a["junior_nll_mean"], b["junior_nll_mean"])
    assert set(json.loads((solo / "metrics.json").read_text())["lens"]) == {"junior", "self"}
    assert json.loads((solo / "config.json").read_text())["config"]["label"] == "mine"
    # several juniors: a reader must say which one
    res = runner.invoke(app, ["compare", str(solo), str(solo), "--metric", "junior_nll", "--n-boot", "20"])
    assert res.exit_code == 2 and "--junior" in res.output
    res = runner.invoke(
        app, ["compare", str(solo), str(solo), "--metric", "junior_nll", "--n-boot", "20", "--junior", "self"]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", str(solo), "--out", str(tmp_path / "r"), "--junior", "self", "--n-boot", "20"])
    assert res.exit_code == 0, res.output
    assert "the junior labelled 'self'" in (tmp_path / "r" / "table2.md").read_text()
    page = build_page(solo, junior="self")
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert all(t["jr"] == "self" and t["src"] == "lens" for t in data["traces"])
    b_first = b.sort_values(["benchmark", "problem_id", "sample_idx"]).iloc[0]
    t0 = data["traces"][0]
    assert t0["s"][: len(b_first.junior_logprobs)] == pytest.approx(-np.round(b_first.junior_logprobs, 2), abs=0.011)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium)")
    html = tmp_path / "view.html"
    html.write_text(page, encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--dump-dom",
             html.as_uri()], capture_output=True, text=True, timeout=120,
        ).stdout  # fmt: skip
    shaded = re.findall(r'class="tok sen" title="senior · −log p = [\d.]+" style="--a: 0\.\d+', dom)
    assert len(shaded) >= sum(len(x) for x in b.junior_logprobs) // 2, dom[-1500:]


def test_self_paired_drift_loads_the_model_once_and_is_zero(tmp_path, pair, samples, monkeypatch):
    """A junior that is the senior's own checkpoint: exact drift reads one loaded model with two engines."""
    import transformers
    from typer.testing import CliRunner

    from tandem_eval.cli.main import app

    rf = _run_folder(tmp_path / "a", pair["senior"], samples)
    loads = []
    original = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(
        transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: loads.append(a[0]) or original(*a, **k)
    )
    res = CliRunner().invoke(app, ["drift", "--run", str(rf.path), "--junior", str(pair["senior"]), "--n-boot", "50"])
    assert res.exit_code == 0, res.output
    assert len(loads) == 1
    per = pd.read_parquet(next((rf.path / "lens").glob("*/drift.parquet")))
    assert np.allclose(per.kl_exact, 0.0, atol=1e-6) and len(per) == len(samples)
