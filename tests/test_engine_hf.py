"""HF engine: greedy equals transformers' generate, raw log-probs equal a plain forward,
catch-up prefill continues correctly, and sampling depends only on (seed, position)."""

import pytest
import torch

from tandem_eval.config import Sampling
from tandem_eval.engines.base import Request, generate
from tandem_eval.engines.hf import HFEngine
from tandem_eval.engines.sampling import filtered_probs

GREEDY = Sampling(temperature=0, top_p=1, top_k=0)


@pytest.fixture(scope="module")
def setup(tiny_pair):
    from transformers import AutoModelForCausalLM

    senior, _ = tiny_pair
    engine = HFEngine(senior, GREEDY, max_batch=4)
    model = AutoModelForCausalLM.from_pretrained(senior).eval()
    tok = engine.tokenizer
    prompts = [
        tok.encode(t)
        for t in [
            "Tom has 3 apples",
            "Ana",
            "The answer is \\boxed{7}.\n\nSo Li has 5 coins and",
            "Maya buys 4 more pens.\n\n",
            "x",
        ]
    ]
    return engine, model, prompts


def _plain_logprobs(model, prompt, cont):
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([prompt + cont])).logits[0].float(), -1)
    return lp[len(prompt) - 1 : -1].gather(1, torch.tensor(cont)[:, None])[:, 0]


def test_greedy_matches_transformers_generate_and_logprobs_match_forward(setup):
    engine, model, prompts = setup
    # 5 prompts with max_batch 4: rows join and leave mid-flight (continuous batching).
    outs = generate(engine, [Request(i, p, 24) for i, p in enumerate(prompts)])
    for p, out in zip(prompts, outs):
        ref = model.generate(
            torch.tensor([p]), max_new_tokens=24, do_sample=False, eos_token_id=list(engine.eos_ids), pad_token_id=0
        )[0, len(p) :].tolist()
        assert len(out.token_ids) > 0
        assert out.token_ids == ref  # the whole sequence, EOS included: an empty output cannot pass
        assert torch.allclose(_plain_logprobs(model, p, out.token_ids), torch.tensor(out.logprobs), atol=1e-4)
        scored = engine.score([p], [out.token_ids])[0]
        assert abs(scored - _plain_logprobs(model, p, out.token_ids).numpy()).max() < 1e-4


def test_stop_ids_end_a_segment_inclusively(setup):
    engine, _, prompts = setup
    [full] = generate(engine, [Request("a", prompts[0], 12)])
    assert full.finish_reason == "length" and len(full.token_ids) == 12
    stop = full.token_ids[5]
    j = full.token_ids.index(stop)
    [cut] = generate(engine, [Request("b", prompts[0], 12, frozenset({stop}))])
    assert cut.token_ids == full.token_ids[: j + 1] and cut.finish_reason == "stop"


def test_catch_up_after_foreign_tokens_equals_fresh_generation(setup):
    engine, _, prompts = setup
    p = prompts[2]
    engine.submit(Request("t", p, 6))
    while engine.has_work():
        [first] = engine.step() or [None]
    foreign = [11, 42, 7]  # written by "another model"
    ctx = p + first.token_ids + foreign
    engine.submit(Request("t", ctx, 8))  # same key: the engine reuses its cache and prefills 4 tokens
    out = []
    while engine.has_work():
        out += engine.step()
    engine.release("t")
    [fresh] = generate(engine, [Request("fresh", ctx, 8)])
    assert out[0].token_ids == fresh.token_ids
    assert max(abs(a - b) for a, b in zip(out[0].logprobs, fresh.logprobs)) < 1e-4


def test_traces_changing_hands_are_served_from_contiguous_rows_in_one_forward_per_step(tiny_pair, setup):
    """Half the traces park (the other model's turn) while the rest come back with catch-ups of 2,
    9 and 30 tokens (30 > prefill_tokens: chunked): the returning rows are swapped into contiguous
    slots (no gather), every step is one forward, and the tokens equal a fresh engine's."""
    _, _, prompts = setup
    engine = HFEngine(tiny_pair[0], GREEDY, max_batch=8, prefill_tokens=24)
    firsts = generate_keep(engine, {i: (prompts[i % len(prompts)] + [5] * i, 3) for i in range(6)})
    foreign = {1: [11, 42], 3: [7] * 9, 4: list(range(30, 60))}
    ctx = {k: prompts[k % len(prompts)] + [5] * k + firsts[k] + f for k, f in foreign.items()}
    before = dict(engine.stats)
    steps = 0
    for k, c in ctx.items():
        engine.submit(Request(k, c, 5))
    out = {}
    while engine.has_work():
        steps += 1
        out.update({c.key: c for c in engine.step()})
    assert engine.stats["forwards"] - before["forwards"] == steps
    assert engine.stats["swaps"] > before["swaps"] and engine.stats["gathers"] == 0
    assert engine.stats["catchup"] - before["catchup"] == sum(map(len, foreign.values()))
    fresh = HFEngine(tiny_pair[0], GREEDY, max_batch=8)
    for k, c in ctx.items():
        [ref] = generate(fresh, [Request(k, c, 5)])
        assert out[k].token_ids == ref.token_ids
        assert max(abs(a - b) for a, b in zip(out[k].logprobs, ref.logprobs)) < 1e-4


def generate_keep(engine, todo: dict) -> dict:
    """Run {key: (prompt, n)} to completion without releasing the rows: {key: new token ids}."""
    for k, (p, n) in todo.items():
        engine.submit(Request(k, p, n))
    done = {}
    while engine.has_work():
        done.update({c.key: c.token_ids for c in engine.step()})
    return done


def test_sampling_depends_only_on_seed_and_position(tiny_pair):
    engine = HFEngine(tiny_pair[0], Sampling(temperature=1.0, top_p=1.0, top_k=0), max_batch=3)
    p = engine.tokenizer.encode("Tom has")
    alone = generate(engine, [Request("x", p, 20, seed=5)])[0].token_ids
    crowd = generate(engine, [Request(i, p, 20, seed=5 if i == 2 else i + 100) for i in range(7)])
    assert crowd[2].token_ids == alone
    other = generate(engine, [Request("y", p, 20, seed=6)])[0].token_ids
    assert other != alone


def test_top_k_top_p_filter():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.allclose(filtered_probs(logits, 2, 1.0), torch.tensor([[0.625, 0.375, 0, 0]]))
    # top_p 0.8: 0.5 + 0.3 reaches 0.8 -> keep two tokens
    assert (filtered_probs(logits, 0, 0.8)[0] > 0).tolist() == [True, True, False, False]
    assert (filtered_probs(logits, 0, 0.4)[0] > 0).tolist() == [True, False, False, False]


def test_samples_of_one_prompt_compute_it_once_and_equal_separate_generation(tiny_pair, setup):
    """Traces that share a prompt (the samples of a problem) compute it once: the others copy its
    keys and values; each trace's tokens and log-probs equal generating it alone."""
    _, _, prompts = setup
    prompt = (prompts[2] * 3)[:40]  # longer than SHARE_MIN
    engine = HFEngine(tiny_pair[0], Sampling(temperature=1.0, top_p=1, top_k=0), max_batch=8)
    reqs = [Request(i, prompt + [5] * (i % 2), 6, seed=i) for i in range(5)]
    out = generate(engine, reqs)
    assert engine.stats["shared"] >= 4 * (len(prompt) - 1)
    assert engine.stats["tokens_fed"] <= len(prompt) + 1 + 4 * 2 + 5 * 5
    for r, o in zip(reqs, out):
        alone = HFEngine(tiny_pair[0], Sampling(temperature=1.0, top_p=1, top_k=0), max_batch=8)
        [ref] = generate(alone, [r])
        assert o.token_ids == ref.token_ids
        assert max(abs(a - b) for a, b in zip(o.logprobs, ref.logprobs)) < 1e-4


def test_the_kv_store_is_allocated_once_at_the_longest_trace_not_grown_by_doubling(tiny_pair):
    """Peak memory: the first requests size the store (rows x prompt + budget, rounded up to 64), so it
    is never regrown mid-run; doubling gave a 662-token trace 1024 positions, and each growth left the
    old tensors to the allocator."""
    engine = HFEngine(tiny_pair[0], GREEDY, max_batch=4)
    assert not engine._store.k  # the engine's own start-up check left nothing allocated
    prompts = [engine.tokenizer.encode(t) for t in ("Tom has 3 apples", "Ana buys 4 pens and 2 books")]
    reqs = [Request(i, p, 300) for i, p in enumerate(prompts)]
    for r in reqs:
        engine.submit(r)
    engine.step()
    layer0 = engine._store.k[0]
    longest = max(len(p) for p in prompts) + 300
    assert layer0.shape[0] == 8 and layer0.shape[2] == -(-longest // 64) * 64 < 512  # rows: at least 8; doubling: 512
    while engine.has_work():
        engine.step()
    assert engine._store.k[0] is layer0  # never regrown


def test_a_junior_with_the_seniors_tokenizer_files_shares_its_loaded_tokenizer(tiny_pair, tmp_path):
    import shutil

    from tandem_eval.config import EvalConfig, ModelSpec
    from tandem_eval.generate.execute import close_engines, load_engines
    from tandem_eval.generate.schedules import parse_schedule
    from tandem_eval.models import run_checkpoints, same_tokenizer

    senior, junior = tiny_pair
    assert same_tokenizer(senior, junior) and same_tokenizer(senior, senior)
    cfg = EvalConfig(senior=ModelSpec(senior), junior=ModelSpec(junior), mode="handoff", schedule="paragraph")
    engines = load_engines(cfg, run_checkpoints(cfg, junior_needed=True), parse_schedule(cfg.schedule))
    try:
        assert engines["junior"].tokenizer is engines["senior"].tokenizer  # loaded once
        assert engines["junior"].model is not engines["senior"].model  # two models: only the tokenizer is shared
    finally:
        close_engines(engines)
    other = tmp_path / "junior-other-config"
    shutil.copytree(junior, other)
    cfg_file = other / "tokenizer_config.json"
    cfg_file.write_text(cfg_file.read_text().replace("{", '{"model_max_length": 7, ', 1))
    assert not same_tokenizer(senior, other)  # one differing byte: each engine loads its own


def test_load_engine_takes_a_checkpoint_value_and_gives_the_api_key_variable_to_remote_backends_only(tiny_pair):
    """Commands pass a resolved models.Checkpoint: a local one loads from its folder, and the API key
    variable every command passes is for a remote backend only (an HF engine would refuse the keyword)."""
    from tandem_eval.engines import load_engine
    from tandem_eval.models import Checkpoint, resolve_model

    senior, _ = tiny_pair
    engine = load_engine("hf", Checkpoint(resolve_model(senior)), GREEDY, api_key_env="VLLM_API_KEY")
    try:
        prompt = engine.tokenizer.encode("Tom has 3 apples")
        assert generate(engine, [Request(0, prompt, 4)])[0].token_ids  # it generates from the checkpoint's weights
    finally:
        engine.close()
    with pytest.raises(TypeError):  # the keyword is the served engine's: load_engine kept it from HF's
        HFEngine(senior, GREEDY, api_key_env="VLLM_API_KEY")
