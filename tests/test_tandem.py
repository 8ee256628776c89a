"""Co-generation loop: author mask semantics, shared budget, EOS, determinism, real engines."""

import numpy as np
import pytest
from test_schedules import ID, V

from tandem_eval.config import Sampling
from tandem_eval.engines.base import Completion
from tandem_eval.engines.hf import HFEngine
from tandem_eval.generate.schedules import make_schedule
from tandem_eval.generate.tandem import TraceSpec, cogenerate, trace_seed

EOS = len(V.surface)  # an id outside the fake vocabulary's pieces


class ScriptedEngine:
    """Emits script[position] for each trace; honours stop_ids / max_tokens / EOS like a real engine."""

    def __init__(self, name, script):
        self.name, self.script, self.eos_ids = name, script, frozenset({EOS})
        self.live, self.calls = {}, 0

    def submit(self, req):
        self.live[req.key] = req

    def has_work(self):
        return bool(self.live)

    def release(self, key):
        self.live.pop(key, None)

    def step(self):
        done = []
        for key, req in list(self.live.items()):
            self.calls += 1
            out, pos = [], len(req.token_ids)
            while True:  # (a real engine takes one token per step; the loop must not care)
                tok = self.script(key, pos + len(out))
                out.append(tok)
                if tok in self.eos_ids or tok in req.stop_ids or len(out) >= req.max_tokens:
                    break
            done.append(Completion(key, out, [-1.0 if self.name == "s" else -2.0] * len(out), "stop"))
            del self.live[key]
        return done


def para_script(key, pos):
    return [ID["x"], ID["cat"], ID["ĊĊ"]][pos % 3]


def test_paragraph_mask_alternates_per_paragraph_and_logprobs_come_from_the_author():
    sched = make_schedule("paragraph", V)
    s, j = ScriptedEngine("s", para_script), ScriptedEngine("j", para_script)
    [t] = cogenerate([TraceSpec("a", (ID["x"],), 0, 10)], s, j, sched)
    # prompt has 1 token, so paragraphs end at generated positions 1, 4, 7
    assert t.author_mask == [1, 1, 0, 0, 0, 1, 1, 1, 0, 0]
    assert t.logprobs == [-1.0 if a else -2.0 for a in t.author_mask]
    assert t.finish_reason == "length" and len(t.token_ids) == 10 and t.n_handoffs == 3


class OneTokenEngine(ScriptedEngine):
    """Writes one token per step for every live request, like a real engine, and records at each
    step how many traces it and the other engine (`peer`) held."""

    peer: "OneTokenEngine"

    def __init__(self, name, script):
        super().__init__(name, script)
        self.out, self.held = {}, []

    def step(self):
        self.held.append((len(self.live), len(self.peer.live)))
        done = []
        for key, req in list(self.live.items()):
            out = self.out.setdefault(key, [])
            out.append(tok := self.script(key, len(req.token_ids) + len(out)))
            if tok in req.stop_ids or len(out) >= req.max_tokens:
                done.append(Completion(key, out, [0.0] * len(out), "stop"))
                del self.live[key], self.out[key]
        return done


def test_an_engine_holding_fewer_traces_waits_unless_it_holds_a_full_batch():
    """Steps go to the engine with more traces, or to any holding half the pool (a full batch), so
    neither model runs a part-empty forward while the other could run a fuller one."""
    s, j = OneTokenEngine("s", para_script), OneTokenEngine("j", para_script)
    s.peer, j.peer = j, s
    pool = 6
    specs = [TraceSpec(i, (ID["x"],) * (1 + i % 3), 0, 7 + i % 5) for i in range(20)]
    traces = list(cogenerate(specs, s, j, make_schedule("paragraph", V), pool_size=pool))
    assert len(traces) == 20 and sum(map(len, (s.held, j.held))) > 0
    for own, other in s.held + j.held:
        assert own >= other or own >= pool / 2, (own, other)
    assert any(own > other > 0 for own, other in s.held + j.held)  # a fuller engine steps alone


def test_eos_ends_trace_whoever_writes_it():
    def script(key, pos):
        return EOS if pos == 4 else para_script(key, pos)

    [t] = cogenerate(
        [TraceSpec("a", (ID["x"],), 0, 50)],
        ScriptedEngine("s", script),
        ScriptedEngine("j", script),
        make_schedule("paragraph", V),
    )
    assert t.finish_reason == "eos" and t.token_ids[-1] == EOS and len(t.token_ids) == 4
    assert t.author_mask[-1] == 0  # the junior was active when EOS came


def test_engine_running_past_a_handoff_is_an_error():
    class Overrunning(ScriptedEngine):
        def submit(self, req):
            super().submit(type(req)(req.key, req.token_ids, req.max_tokens, frozenset(), req.seed))

    with pytest.raises(RuntimeError, match="ran past a handoff"):
        list(
            cogenerate(
                [TraceSpec("a", (ID["x"],), 0, 10)],
                Overrunning("s", para_script),
                ScriptedEngine("j", para_script),
                make_schedule("paragraph", V),
            )
        )


def test_solo_schedule_needs_no_junior_but_handoff_does():
    [t] = cogenerate([TraceSpec("a", (1,), 0, 7)], ScriptedEngine("s", para_script), None, make_schedule("solo", V))
    assert t.author_mask == [1] * 7
    with pytest.raises(ValueError, match="no junior engine"):
        list(
            cogenerate(
                [TraceSpec("a", (1,), 0, 7)], ScriptedEngine("s", para_script), None, make_schedule("paragraph", V)
            )
        )


def test_zero_budget_gives_empty_truncated_trace():
    [t] = cogenerate([TraceSpec("a", (1,), 0, 0)], ScriptedEngine("s", para_script), None, make_schedule("solo", V))
    assert t.token_ids == [] and t.finish_reason == "length"


def test_trace_seed_is_stable_and_distinct():
    assert trace_seed(0, "aime24/1", 0) == trace_seed(0, "aime24/1", 0)
    assert len({trace_seed(s, p, i) for s in (0, 1) for p in ("a", "b") for i in range(4)}) == 16


@pytest.fixture(scope="module")
def engines(tiny_pair):
    sampling = Sampling(temperature=1.0, top_p=0.95, top_k=50)
    return HFEngine(tiny_pair[0], sampling, max_batch=4), HFEngine(tiny_pair[1], sampling, max_batch=4)


@pytest.mark.parametrize("spec", ["paragraph", "word", "sentence", "chunk:5", "takeover:1", "junior-solo"])
def test_real_engines_deterministic_across_pool_sizes(engines, spec):
    senior, junior = engines
    sched = make_schedule(spec, senior.tokenizer)
    prompt = tuple(senior.tokenizer.encode("Tom has 3 apples.\n\nSo"))
    specs = [TraceSpec(i, prompt, trace_seed(0, "p", i), 40) for i in range(6)]
    a = sorted(cogenerate(specs, senior, junior, sched, pool_size=6), key=lambda t: t.key)
    b = sorted(cogenerate(specs, senior, junior, sched, pool_size=2), key=lambda t: t.key)
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids and x.author_mask == y.author_mask
        assert len(x.token_ids) == len(x.author_mask) == len(x.logprobs) <= 40
    if spec == "junior-solo":
        assert all(set(t.author_mask) == {0} for t in a)


def test_word_schedule_senior_fraction_near_half(engines):
    senior, junior = engines
    sched = make_schedule("word", senior.tokenizer)
    prompt = tuple(senior.tokenizer.encode("Tom has"))
    traces = list(
        cogenerate(
            [TraceSpec(i, prompt, trace_seed(1, "p", i), 60) for i in range(24)], senior, junior, sched, pool_size=8
        )
    )
    frac = np.mean([m for t in traces for m in t.author_mask])
    assert 0.3 < frac < 0.7
    assert np.mean([t.n_handoffs for t in traces]) > 1


class CountingSubmits:
    """Counts the segments (requests) each trace gets from the loop."""

    def __init__(self, engine):
        self.engine, self.submits = engine, {}

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def submit(self, req):
        self.submits[req.key] = self.submits.get(req.key, 0) + 1
        self.engine.submit(req)


@pytest.mark.parametrize("spec", ["word", "word:0.5:3", "paragraph"])
def test_segments_end_only_where_the_author_changes(engines, spec):
    """One request per author turn: a word redraw that keeps the author (also a forced one after K
    tokens), or a newline that completes no paragraph, is passed inside the engine. The trace is the
    one the schedule gives when every decision point is replayed in order (same draws)."""
    senior, junior = (CountingSubmits(e) for e in engines)
    sched = make_schedule(spec, senior.tokenizer)
    prompt = tuple(senior.tokenizer.encode("Tom has 3 apples.\n\nSo"))
    specs = [TraceSpec(i, prompt, trace_seed(2, "p", i), 50) for i in range(6)]
    traces = list(cogenerate(specs, senior, junior, sched, pool_size=4))
    decisions = 0
    for t in traces:
        rng = np.random.default_rng(specs[t.key].seed)
        state = sched.init(rng)
        for tok, author in zip(t.token_ids, t.author_mask):
            assert author == state.author
            sched.advance(state, tok, rng)
        decisions += state.events
        ended_on_a_switch = state.author != t.author_mask[-1]  # the budget ran out at a handoff
        segments = senior.submits.get(t.key, 0) + junior.submits.get(t.key, 0)
        assert segments == t.n_handoffs + 1 - ended_on_a_switch
    if spec.startswith("word"):
        assert decisions > sum(t.n_handoffs for t in traces) + 10  # many redraws kept the author
