"""Schedules on scripted token streams: exactly which emitted token triggers a switch."""

import numpy as np
import pytest

from tandem_eval.generate.schedules import JUNIOR, SENIOR, Vocab, make_schedule, parse_schedule

# A byte-level-BPE-like toy vocabulary: "Ġ" marks word starts, "Ċ" is a newline.
PIECES = ["Ġthe", "cat", "Ċ", "ĊĊ", ".ĊĊ", "Ġsat", ".", "Ġ3.5", "!", "x", "Ġon", "Ċx"]


class FakeTok:
    def __len__(self):
        return len(PIECES)

    def convert_ids_to_tokens(self, ids):
        return [PIECES[i] for i in ids]

    def convert_tokens_to_string(self, toks):
        return "".join(toks).replace("Ġ", " ").replace("Ċ", "\n")


V = Vocab(FakeTok())
ID = {p: i for i, p in enumerate(PIECES)}


def run(spec, stream, seed=0):
    """Feed tokens; return the author of each token and the final state."""
    sched = make_schedule(spec, V)
    rng = np.random.default_rng(seed)
    state = sched.init(rng)
    authors = []
    for piece in stream:
        authors.append(state.author)
        sched.advance(state, ID[piece], rng)
    return authors, state, sched


def test_paragraph_switches_after_token_containing_double_newline():
    authors, state, _ = run("paragraph", ["Ġthe", "cat", "ĊĊ", "Ġsat", ".ĊĊ", "x", "Ġon"])
    assert authors == [SENIOR, SENIOR, SENIOR, JUNIOR, JUNIOR, SENIOR, SENIOR]
    assert state.handoffs == 2


def test_paragraph_double_newline_split_across_two_tokens():
    # "Ċ" then "Ċx": the second token completes "\n\n" -> switch after it; a lone "Ċ" does not.
    authors, _, _ = run("paragraph", ["cat", "Ċ", "x", "Ċ", "Ċx", "Ġon"])
    assert authors == [SENIOR] * 5 + [JUNIOR]


def test_paragraph_stop_ids_cover_every_deciding_token():
    sched = make_schedule("paragraph", V)
    stops = sched.stop_ids(sched.init(np.random.default_rng(0)))
    assert {ID["Ċ"], ID["ĊĊ"], ID[".ĊĊ"], ID["Ċx"]} <= stops and ID["cat"] not in stops


def test_sentence_rule():
    authors, _, _ = run("sentence", ["Ġthe", "cat", ".", "Ġsat", "!", "x", "Ċ", "Ġon"])
    assert authors == [SENIOR, SENIOR, SENIOR, JUNIOR, JUNIOR, SENIOR, SENIOR, JUNIOR]


def test_chunk_alternates_every_n_tokens():
    authors, _, sched = run("chunk:3", ["x"] * 8)
    assert authors == [1, 1, 1, 0, 0, 0, 1, 1]
    state = sched.init(np.random.default_rng(0))
    assert sched.max_run(state) == 3 and sched.stop_ids(state) == frozenset()


def test_takeover_senior_writes_n_paragraphs_then_junior_finishes():
    stream = ["x", "ĊĊ", "x", "ĊĊ", "x", "ĊĊ", "x"]
    authors, state, sched = run("takeover:2", stream)
    assert authors == [1, 1, 1, 1, 0, 0, 0]
    assert sched.stop_ids(state) == frozenset()  # the junior is never interrupted
    assert run("takeover:0", ["x", "ĊĊ", "x"])[0] == [0, 0, 0]


def test_solo_and_junior_solo_never_switch():
    assert run("solo", ["ĊĊ", "Ġthe"] * 5)[0] == [SENIOR] * 10
    assert run("junior-solo", ["ĊĊ", "Ġthe"] * 5)[0] == [JUNIOR] * 10


def test_word_redraws_only_after_word_starts_with_fresh_bernoulli():
    stream = ["Ġthe", "cat", "Ċ", "Ġsat", "x", "Ġon"] * 50
    sched = make_schedule("word", V)
    rng = np.random.default_rng(3)
    replay = np.random.default_rng(3)
    state = sched.init(rng)
    expected = SENIOR if replay.random() < 0.5 else JUNIOR
    for piece in stream:
        assert state.author == expected
        sched.advance(state, ID[piece], rng)
        if piece.startswith("Ġ"):  # newline tokens and "cat" never trigger a redraw
            expected = SENIOR if replay.random() < 0.5 else JUNIOR


def test_word_forced_redraw_after_k_tokens_without_word_start():
    sched = make_schedule("word:0.5:4", V)
    rng, replay = np.random.default_rng(7), np.random.default_rng(7)
    state = sched.init(rng)
    replay.random()
    draws = 0
    for i in range(12):
        assert sched.max_run(state) == 4 - (i % 4)
        sched.advance(state, ID["x"], rng)
        if (i + 1) % 4 == 0:
            draws += 1
            assert state.author == (SENIOR if replay.random() < 0.5 else JUNIOR)
    assert state.events == draws == 3


def test_word_senior_fraction_tracks_p():
    for p in (0.2, 0.5, 0.8):
        authors, _, _ = run(f"word:{p}", ["Ġthe", "cat"] * 3000, seed=1)
        assert abs(np.mean(authors) - p) < 0.04


def test_word_p1_is_senior_only():
    assert set(run("word:1.0", ["Ġthe"] * 100)[0]) == {SENIOR}


def test_parse_errors_name_valid_schedules():
    with pytest.raises(ValueError, match="valid: solo, junior-solo, paragraph"):
        parse_schedule("paragraphs")
    with pytest.raises(ValueError, match="at most 1 argument"):
        parse_schedule("chunk:3:4")
    with pytest.raises(ValueError, match="bad argument"):
        parse_schedule("chunk:x")
    assert parse_schedule("word:0.3:16") == ("word", (0.3, 16))
