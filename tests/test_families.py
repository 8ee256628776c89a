"""The HF engine on every common decoder-only family (tests/families.py), against transformers itself.

    PYTHONPATH=$PWD .venv/bin/python -m pytest tests/test_families.py -q     # ~2 min CPU on 2 cores

Tiny random fp32 models of Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3 and OLMo 2 share
one BPE tokenizer. The references are each family's own transformers code run with eager
attention (Gemma 2's attention soft-capping included): `generate(do_sample=False)` and plain
forwards. Contexts run past the 16-token sliding windows of Mistral and Gemma 2/3, and a test
shows those windows change the log-probs by far more than the 1e-4 tolerance, so they are tested.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from families import FAMILIES, SLIDING_FAMILIES, SLIDING_WINDOW, build_family_model
from test_lens import FAST, _brute

from tandem_eval.config import Sampling
from tandem_eval.engines.base import Request, generate
from tandem_eval.engines.hf import HFEngine
from tandem_eval.generate.schedules import make_schedule
from tandem_eval.generate.tandem import TraceSpec, cogenerate, trace_seed
from tandem_eval.models import ModelError, check_supported
from tandem_eval.score import lens

GREEDY = Sampling(temperature=0, top_p=1, top_k=0)
T1 = Sampling(temperature=1.0, top_p=1.0, top_k=0)
MAX_NEW = 20
TEXTS = [
    "Tom has 3 apples and buys 5 more. How many apples does Tom have? Solve the following math problem step by step.",
    "Ana",
    "Li starts with 4 coins.\n\nThen",
]


@pytest.fixture(scope="module")
def tok():
    from tandem_eval.toy.tiny import train_tokenizer

    return train_tokenizer()


@pytest.fixture(scope="module")
def prompts(tok):
    ids = [tok.encode(t) for t in TEXTS]
    assert len(ids[0]) > SLIDING_WINDOW + 8  # the long prompt alone outruns every sliding window
    return ids


@pytest.fixture(scope="module")
def zoo(tok):
    """family -> {"ref": eager reference model, "greedy"/"t1": HF engines on a same-weights copy}."""
    cache: dict[str, dict] = {}

    def get(family: str) -> dict:
        if family not in cache:
            ref = build_family_model(family, tok, seed=FAMILIES_SEED[family])
            ref.set_attn_implementation("eager")
            model = build_family_model(family, tok, seed=FAMILIES_SEED[family])
            cache[family] = {
                "ref": ref,
                "greedy": HFEngine(model, GREEDY, tokenizer=tok, max_batch=2),
                "t1": HFEngine(model, T1, tokenizer=tok, max_batch=4),
            }
        return cache[family]

    return get


FAMILIES_SEED = {f: i for i, f in enumerate(FAMILIES)}  # different weights for every family


def _plain_logprobs(model, prompt, cont) -> torch.Tensor:
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([list(prompt) + list(cont)])).logits[0].double(), -1)
    return lp[len(prompt) - 1 : -1].gather(1, torch.tensor(cont)[:, None])[:, 0]


def _reference_greedy(ref, prompt, max_new=MAX_NEW) -> list[int]:
    out = ref.generate(torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False)
    return out[0, len(prompt) :].tolist()


@pytest.fixture(scope="module")
def solo(zoo, prompts):
    """family -> greedy completions of every prompt, all in one continuously batched run (max_batch 2)."""
    cache: dict[str, list] = {}

    def get(family: str):
        if family not in cache:
            cache[family] = generate(zoo(family)["greedy"], [Request(i, p, MAX_NEW) for i, p in enumerate(prompts)])
        return cache[family]

    return get


# ---- one family at a time ------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_solo_equals_transformers_generate(family, zoo, solo, prompts):
    ref = zoo(family)["ref"]
    for p, out in zip(prompts, solo(family)):
        expected = _reference_greedy(ref, p)
        assert len(out.token_ids) > 0
        assert out.token_ids == expected


@pytest.mark.parametrize("family", FAMILIES)
def test_logprobs_equal_a_plain_forward(family, zoo, solo, prompts):
    ref = zoo(family)["ref"]
    for p, out in zip(prompts, solo(family)):
        np.testing.assert_allclose(out.logprobs, _plain_logprobs(ref, p, out.token_ids).numpy(), atol=1e-4)
    # teacher-forced scoring goes through the model's own attention, not the row store: same numbers
    p, out = prompts[0], solo(family)[0]
    [scored] = zoo(family)["greedy"].score([p], [out.token_ids])
    np.testing.assert_allclose(scored, _plain_logprobs(ref, p, out.token_ids).numpy(), atol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("n_other", [2, 7])  # merged into the decode forward / a separate catch-up prefill
def test_catch_up_after_the_other_models_tokens_equals_fresh_generation(family, n_other, zoo, prompts):
    engine, ref = zoo(family)["greedy"], zoo(family)["ref"]
    p = prompts[0]
    engine.submit(Request("trace", p, 6))
    [first] = _run(engine)
    other = [(37 * i + 11) % len(engine.tokenizer) for i in range(n_other)]  # "the other model wrote these"
    context = p + first.token_ids + other
    engine.submit(Request("trace", context, 10))
    [caught_up] = _run(engine)
    engine.release("trace")
    [fresh] = generate(engine, [Request("fresh", context, 10)])
    assert len(caught_up.token_ids) > 0
    assert caught_up.token_ids == fresh.token_ids == _reference_greedy(ref, context, 10)
    np.testing.assert_allclose(caught_up.logprobs, fresh.logprobs, atol=1e-5)


def _run(engine):
    done = []
    while engine.has_work():
        done += engine.step()
    return done


@pytest.mark.parametrize("family", FAMILIES)
def test_a_trace_is_the_same_alone_and_in_a_batch_of_other_lengths(family, zoo, prompts, tok):
    engine = zoo(family)["t1"]  # sampled: position-keyed randomness must not depend on the batch
    target = Request("target", prompts[0], MAX_NEW, seed=5)
    [alone] = generate(engine, [target])
    others = [Request(("other", i), p, 8 + 5 * i, seed=i) for i, p in enumerate(prompts[1:] + [tok.encode("x")])]
    together = generate(engine, [others[0], target, *others[1:]])[1]
    assert len(alone.token_ids) > 0
    assert together.token_ids == alone.token_ids
    np.testing.assert_allclose(together.logprobs, alone.logprobs, atol=1e-5)


@pytest.mark.parametrize("family", SLIDING_FAMILIES)
def test_sliding_windows_are_exercised(family, zoo, solo, prompts):
    """Widening the window moves the log-probs far past the tolerance the tests above use."""
    ref = zoo(family)["ref"]
    wide = copy.deepcopy(ref)
    wide.config.get_text_config().sliding_window = 10**6
    for m in wide.modules():
        if getattr(m, "sliding_window", None):
            m.sliding_window = 10**6
    p, out = prompts[0], solo(family)[0]
    gap = (_plain_logprobs(ref, p, out.token_ids) - _plain_logprobs(wide, p, out.token_ids)).abs().max()
    assert gap > 1e-2


# ---- two families together -----------------------------------------------------------------
PAIRS = [("llama", "gemma2"), ("gemma3", "phi3"), ("qwen2", "olmo2"), ("mistral", "qwen3")]


@pytest.mark.parametrize("schedule", ["paragraph", "word"])
@pytest.mark.parametrize("senior,junior", PAIRS)
def test_handoff_between_two_families_completes_with_a_sane_author_mask(senior, junior, schedule, zoo, tok):
    sched = make_schedule(schedule, tok)
    prompt = tuple(tok.encode("Tom has 3 apples.\n\nSo"))
    specs = [TraceSpec(i, prompt, trace_seed(0, schedule, i), 32) for i in range(3)]
    traces = sorted(cogenerate(specs, zoo(senior)["t1"], zoo(junior)["t1"], sched, pool_size=4), key=lambda t: t.key)
    refs = {1: zoo(senior)["ref"], 0: zoo(junior)["ref"]}
    for spec, t in zip(specs, traces):
        assert 0 < len(t.token_ids) == len(t.author_mask) == len(t.logprobs) <= 32
        assert t.finish_reason == "eos" or len(t.token_ids) == 32
        # the author mask is exactly what the schedule says, replayed over the trace's tokens
        rng = np.random.default_rng(spec.seed)
        state, authors = sched.init(rng), []
        for token in t.token_ids:
            authors.append(state.author)
            sched.advance(state, token, rng)
        assert t.author_mask == authors and t.n_handoffs == state.handoffs
        # every token's log-prob is its author's, from a plain forward over the whole mixed context
        for author in (0, 1):
            at = [i for i, a in enumerate(t.author_mask) if a == author]
            if at:
                lp = _plain_logprobs(refs[author], list(prompt), t.token_ids).numpy()
                np.testing.assert_allclose(np.array(t.logprobs)[at], lp[at], atol=1e-4)
    if schedule == "word":  # word handoffs are frequent: both models really wrote
        assert {a for t in traces for a in t.author_mask} == {0, 1}


def test_legibility_and_exact_kl_match_brute_force_across_families(zoo, tok):
    """Senior Mistral (sliding window), junior Gemma 2 (soft-capped): the lens on HF engines equals
    float64 brute force from each family's own forward."""
    from tandem_eval.data.benchmarks import load_benchmark
    from tandem_eval.data.prompts import prompt_ids

    senior, junior = zoo("mistral"), zoo("gemma2")
    rows, reqs = [], []
    for p in load_benchmark("tiny")[:3]:
        ids = prompt_ids(tok, p.problem)
        for k in range(2):
            reqs.append(Request((p.problem_id, k), ids, 24, seed=100 * len(rows) + 3))
            rows.append(
                dict(problem_id=p.problem_id, benchmark=p.benchmark, group=p.group, sample_idx=k, mode="solo")
                | dict(schedule="solo", prompt_ids=ids, correct=k == 0)
            )
    for row, c in zip(rows, generate(senior["t1"], reqs)):
        row.update(token_ids=c.token_ids, logprobs=c.logprobs, finish_reason=c.finish_reason)
        row.update(n_tokens=len(c.token_ids), text=tok.decode(c.token_ids))
    samples = pd.DataFrame(rows)
    assert (samples.n_tokens > 0).all() and (samples.prompt_ids.map(len) > SLIDING_WINDOW).all()
    brute = [
        _brute(senior["ref"], junior["ref"], p, c, len(tok)) for p, c in zip(samples.prompt_ids, samples.token_ids)
    ]
    leg = lens.legibility(samples, junior["t1"], senior_tok=tok, opts=FAST)
    drift = lens.drift(samples, junior["t1"], senior=senior["t1"], opts=FAST)
    assert (drift["method"] == "exact").all()
    for row, d, b in zip(leg.itertuples(), drift.itertuples(), brute):
        np.testing.assert_allclose(-row.junior_logprobs, b["nll_j"], atol=1e-4)
        np.testing.assert_allclose(d.kl_tokens, b["kl"], atol=1e-4)
        np.testing.assert_allclose(d.k1_tokens, b["k1"], atol=1e-4)
        assert d.kl_reverse == pytest.approx(b["rev"].mean(), abs=1e-4)
    assert (drift["kl_exact"] > 0.1).all()  # two different families really differ


# ---- what the engine refuses ---------------------------------------------------------------
def test_an_encoder_decoder_is_refused_in_one_line_naming_it_before_weights_load(tmp_path):
    from transformers import T5Config

    T5Config(architectures=["T5ForConditionalGeneration"]).save_pretrained(tmp_path)  # a config, no weights
    with pytest.raises(ModelError) as err:
        HFEngine(str(tmp_path), GREEDY)
    msg = str(err.value)
    assert "T5ForConditionalGeneration" in msg and "encoder-decoder" in msg and "\n" not in msg


def test_recurrent_hybrid_layers_are_refused_in_one_line():
    from transformers import Qwen3NextConfig

    with pytest.raises(ModelError) as err:
        check_supported(Qwen3NextConfig(architectures=["Qwen3NextForCausalLM"]))
    msg = str(err.value)
    assert "Qwen3NextForCausalLM" in msg and "linear_attention" in msg and "\n" not in msg


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_passes_the_support_check(family, zoo):
    check_supported(zoo(family)["ref"].config)
