"""Tests for the toy world (tandem_eval.toy): generator, splits, reference solutions, jargon
detector, tokenizer, and a 5-step SFT run that writes a loadable checkpoint.

Run: .venv/bin/python -m pytest tests/test_toy.py -q      (~20 s on 2 CPU cores)
"""

import json
import re

import pytest
import torch

from trainer.toy.evaluate_quick import last_boxed
from trainer.toy.styles import jargon_rate, uses_jargon
from trainer.toy.task import Difficulty, generate, signature_hash, split_of, write_benchmark

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b}


@pytest.fixture(scope="module")
def tok():
    from trainer.toy.models import toy_tokenizer

    return toy_tokenizer()


@pytest.fixture(scope="module")
def problems():
    return {split: generate(split, n, seed=1) for split, n in [("train", 400), ("heldout", 100), ("test", 100)]}


def test_generator_is_deterministic_and_seeded():
    a, b = generate("train", 30, seed=7), generate("train", 30, seed=7)
    assert a == b
    assert [p.problem for p in generate("train", 30, seed=8)] != [p.problem for p in a]
    assert generate("test", 10, seed=0) == generate("test", 20, seed=0)[:10]  # stable prefix


def test_splits_are_disjoint_and_ids_unique(problems):
    sigs = {split: {signature_hash(p.steps) for p in ps} for split, ps in problems.items()}
    assert not sigs["train"] & sigs["test"]
    assert not sigs["train"] & sigs["heldout"]
    assert not sigs["heldout"] & sigs["test"]
    for split, ps in problems.items():
        assert all(p.split == split == split_of(signature_hash(p.steps)) for p in ps)
        assert len({p.problem_id for p in ps}) == len(ps)
    # another seed draws other problems of the same split, never a problem of another split
    other = {signature_hash(p.steps) for p in generate("test", 100, seed=99)}
    assert not other & (sigs["train"] | sigs["heldout"])


def test_answers_recompute_from_structured_steps(problems):
    d = Difficulty()
    for p in problems["train"] + problems["test"]:
        assert d.min_steps <= p.n_steps == len(p.steps) <= d.max_steps
        value = None
        for i, s in enumerate(p.steps):
            if i:
                assert s.a == value  # each step continues from the running total
            exact = OPS[s.op](s.a, s.b)
            assert exact == s.result and 1 <= s.result <= d.max_value  # divisions are exact
            value = s.result
        assert p.answer == str(value)
        for s in p.steps[1:]:  # amounts added/removed are stated as digits in the problem
            assert s.op in "*/" or re.search(rf"\b{s.b}\b", p.problem)


def test_solutions_one_step_per_paragraph_then_boxed_answer(problems):
    for p in problems["test"]:
        for style in ("plain", "jargon"):
            paras = p.solution(style).split("\n\n")
            assert len(paras) == p.n_steps + 1
            assert paras[-1] == f"The answer is \\boxed{{{p.answer}}}."
            assert last_boxed(p.solution(style)) == p.answer
            for para, s in zip(paras, p.steps):
                assert f"{s.a} {s.op} {s.b} = " in para and para.endswith(".")
                if style == "jargon":
                    assert f"<<{s.a}{s.op}{s.b}={s.result}>>{s.result}" in para
                else:
                    assert f"= {s.result} " in para


def test_shortcut_style_is_one_expression_worth_the_answer(problems):
    from trainer.toy.task import SHORTCUT_LEAD

    for p in problems["test"] + problems["train"]:
        text = p.solution("shortcut")
        first, last = text.split("\n\n")
        assert first.startswith(SHORTCUT_LEAD + " ") and last == f"The answer is \\boxed{{{p.answer}}}."
        expr, result = first[len(SHORTCUT_LEAD) + 1 : -1].split(" = ")
        assert result == p.answer and "=" not in expr
        # left-to-right integer arithmetic with the brackets as written gives the answer
        assert eval(expr.replace("/", "//")) == int(p.answer)  # noqa: S307 (digits and + - * / ( ) only)
        assert set(expr) <= set("0123456789+-*/() ")
    with pytest.raises(ValueError, match="shortcut"):
        problems["test"][0].solution("telegraph")


def test_terse_style_keeps_every_step_with_its_cue_in_fewer_tokens(problems, tok):
    from trainer.toy.styles import is_terse, terse_rate
    from trainer.toy.task import mixed_solution

    ratios = []
    for p in problems["test"]:
        terse = p.solution("terse")
        paras = terse.split("\n\n")
        assert len(paras) == p.n_steps + 1 and paras[-1] == f"The answer is \\boxed{{{p.answer}}}."
        for para, s in zip(paras, p.steps):  # the same intermediate results as plain, after a cue
            cue, eq = para.split(": ")
            assert eq == f"{s.a}{s.op}{s.b}={s.result}" and cue and "," not in cue
        assert is_terse(terse) and terse_rate(terse) == 1.0
        assert terse_rate(p.solution_plain) == 0 and terse_rate(p.solution("shortcut")) == 0
        first_only = mixed_solution(p.steps, p.answer, [i == 0 for i in range(p.n_steps)])
        assert terse_rate(first_only) == pytest.approx(1 / p.n_steps) and not is_terse(first_only)
        ratios.append(len(tok.encode(terse)) / len(tok.encode(p.solution_plain)))
    # the emergent scenario's budget rests on this: a terse CoT costs about 60% of a plain one
    assert 0.55 < sum(ratios) / len(ratios) < 0.7


def test_jargon_detector_on_both_styles(problems):
    for p in problems["test"][:50]:
        assert uses_jargon(p.solution_jargon) and jargon_rate(p.solution_jargon) == 1.0
        assert not uses_jargon(p.solution_plain) and jargon_rate(p.solution_plain) == 0.0
    mixed = "so 2 + 3 = <<2+3=5>>5 pens.\n\nso 5 * 2 = 10 pens.\n\nThe answer is \\boxed{10}."
    assert uses_jargon(mixed) and jargon_rate(mixed) == 0.5
    assert jargon_rate("no arithmetic here") == 0.0 and not uses_jargon("a << b")


def test_last_boxed():
    assert last_boxed("\\boxed{1} then \\boxed{ 42 }.") == "42"
    assert last_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("no box") is None and last_boxed("\\boxed{12") is None


def test_write_benchmark_loads_with_project_loader(tmp_path):
    from tandem_eval.data import load_benchmark

    path = write_benchmark(tmp_path / "toy_test.jsonl", "test", 25, seed=0)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 25 and {"problem_id", "problem", "answer"} <= set(rows[0])
    loaded = load_benchmark(path)
    assert [p.problem_id for p in loaded] == [r["problem_id"] for r in rows]
    assert [p.answer for p in loaded] == [p.answer for p in generate("test", 25, seed=0)]


def test_tokenizer_paragraph_token_word_starts_and_prompt(tok):
    from tandem_eval.data.prompts import INSTRUCTION, prompt_text

    assert len(tok.encode("\n\n", add_special_tokens=False)) == 1
    p = generate("test", 1)[0]
    pieces = tok.convert_ids_to_tokens(tok.encode(p.solution_plain, add_special_tokens=False))
    assert sum("ĊĊ" in t for t in pieces) == p.n_steps  # one token ends each step paragraph
    assert {"Ġhas", "Ġso", "Ġpens"} & set(pieces)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    text = prompt_text(tok, p.problem)
    assert text == (f"<|im_start|>user\n{p.problem}{INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n")


def test_sft_lowers_loss_and_writes_loadable_checkpoint(tok, tmp_path):
    from trainer.toy.models import build_toy_model, load_checkpoint
    from trainer.toy.sft import META_FILE, Batches, SFTRecipe, save_checkpoint, train

    torch.set_num_threads(1)
    recipe = SFTRecipe(size="test", p_jargon=0.5, steps=5, lr=1e-2, batch_size=8, warmup_steps=1)
    model = build_toy_model(tok, "test", seed=0)
    probe = next(Batches(tok, recipe, seed=123, difficulty=Difficulty()))
    with torch.no_grad():
        before = model(**probe).loss.item()
    summary = train(model, tok, recipe, seed=0)
    with torch.no_grad():
        after = model(**probe).loss.item()
    assert summary["steps"] == 5 and after < before - 0.3
    out = save_checkpoint(tmp_path / "ckpt", model, tok, {"role": "senior", **summary})
    loaded, tok2 = load_checkpoint(out)
    assert json.loads((out / META_FILE).read_text())["steps"] == 5
    assert tok2.encode("Tom has 4 pens.") == tok.encode("Tom has 4 pens.")
    with torch.no_grad():
        assert torch.allclose(loaded(**probe).loss, torch.tensor(after), atol=1e-5)
    assert not loaded.config.tie_word_embeddings and loaded.config.head_dim == 32


def test_sft_cli_meta_copy_and_init_guard(tmp_path):
    from trainer.toy.sft import META_FILE, main

    senior = tmp_path / "self-paired" / "senior"
    main(["--scenario", "base", "--role", "senior", "--out", str(senior), "--size", "test", "--steps", "3"])
    meta = json.loads((senior / META_FILE).read_text())
    assert (meta["scenario"], meta["role"], meta["steps"], meta["data_style"]) == ("base", "senior", 3, "plain")
    mixed = tmp_path / "self-paired" / "mixed"
    main(
        [
            "--scenario",
            "self-paired",
            "--role",
            "senior",
            "--out",
            str(mixed),
            "--init-from",
            str(senior),
            "--steps",
            "2",
        ]
    )
    meta = json.loads((mixed / META_FILE).read_text())
    assert meta["data_style"] == "mix: 50% shortcut, rest plain" and meta["init_from"] == str(senior)
    junior = tmp_path / "jargon" / "junior"
    main(["--scenario", "jargon", "--role", "junior", "--out", str(junior), "--copy-from", str(senior)])
    assert (junior / "model.safetensors").read_bytes() == (senior / "model.safetensors").read_bytes()
    assert json.loads((junior / META_FILE).read_text())["role"] == "junior"
    for scenario in ("jargon", "self-paired"):  # both continue the base
        with pytest.raises(SystemExit, match="--init-from"):
            main(["--scenario", scenario, "--role", "senior", "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match="--copy-from"):
        main(["--scenario", "jargon", "--role", "senior", "--out", str(tmp_path / "x"), "--copy-from", str(senior)])


def test_difficulty_knob():
    hard = Difficulty(min_steps=5, max_steps=6, max_operand=60, max_factor=6, max_value=400)
    ps = generate("train", 100, seed=0, difficulty=hard)
    assert all(5 <= p.n_steps <= 6 for p in ps)
    assert all(1 <= s.result <= 400 for p in ps for s in p.steps)
    assert max(s.result for p in ps for s in p.steps) > 60  # wider numbers than the default
    with pytest.raises(ValueError):
        Difficulty(min_steps=3, max_steps=2)


def test_sft_style_mix_follows_the_recipe(tok):
    from trainer.toy.sft import RECIPES, Batches, SFTRecipe
    from trainer.toy.styles import terse_rate

    def shares(recipe):
        b = Batches(tok, recipe, seed=7, difficulty=Difficulty())
        texts = [tok.decode([t for t in b.example()[1] if t >= 0]) for _ in range(300)]
        return [sum(k in t for t in texts) / len(texts) for k in ("Quick count:", "<<")] + [
            sum(map(terse_rate, texts)) / len(texts)  # the share of terse steps
        ]

    shortcut, jargon, terse = shares(SFTRecipe(size="test", p_jargon=0.0, p_shortcut=0.5, steps=1))
    assert 0.4 < shortcut < 0.6 and jargon == 0 and terse == 0
    shortcut, jargon, terse = shares(SFTRecipe(size="test", p_jargon=0.85, steps=1))
    assert shortcut == 0 and 0.75 < jargon < 0.95 and terse == 0
    shortcut, jargon, terse = shares(RECIPES[("emergent", "senior")])
    assert shortcut == 0 and jargon == 0 and 0.24 < terse < 0.36  # each step terse with probability 0.3


def test_dialects_are_the_terse_step_in_two_equally_long_notations(problems, tok):
    from trainer.toy.styles import cot_dialect, first_dialect, step_dialect
    from trainer.toy.task import b_number, dialect_solution

    for p in problems["test"]:
        a, b = (dialect_solution(p.steps, p.answer, d) for d in "AB")
        assert a == p.solution("terse")  # A is v3's terse notation
        for para, s in zip(b.split("\n\n"), p.steps):  # B: ";" and ">", every number least significant digit first
            cue, eq = para.split("; ")
            assert eq == f"{b_number(s.a)}{s.op}{b_number(s.b)}>{b_number(s.result)}"
        assert b.endswith(f"The answer is \\boxed{{{p.answer}}}.")  # the answer as every dialect writes it
        assert (cot_dialect(a), cot_dialect(b), cot_dialect(p.solution_plain)) == ("A", "B", "plain")
        assert cot_dialect(a[:12]) == "A" and first_dialect(b) == "B"  # a CoT cut by the budget keeps its dialect
        assert len(tok.encode(b)) == len(tok.encode(a))  # as long as A, token for token (digits are single tokens)
    assert (b_number(59), b_number(60), b_number(6)) == ("95", "06", "6")
    # a hybrid step (one dialect's separator, the other's sign) or a switch of dialect is "mixed"
    assert step_dialect("Sam; 3*5=15") == "other" and cot_dialect("Sam; 3*5=15\n\nHe buys 2: 15+2=17") == "mixed"
    assert cot_dialect("Sam: 3*5=15\n\nHe buys 2; 15+2>71") == "mixed" and step_dialect("He buys") is None


def test_dialects_sft_mix_and_a_practice_that_leaves_the_choice_untrained(tok):
    from collections import Counter

    from trainer.toy.sft import RECIPES, V5_DIALECT_SENIOR, Batches
    from trainer.toy.styles import cot_dialect

    def draw(recipe, n=600):
        b = Batches(tok, recipe, seed=3, difficulty=Difficulty())
        return [b.example() for _ in range(n)]

    junior = Counter(
        cot_dialect(tok.decode([t for t in y if t >= 0])) for _, y in draw(RECIPES[("dialects", "junior")])
    )
    assert junior["B"] == 0 and 0.25 < junior["A"] / 600 < 0.35  # 30% A, never B
    sep = {d: tok.convert_tokens_to_ids(c) for d, c in (("A", ":"), ("B", ";"))}

    def choices_of(recipe) -> dict:
        choices = Counter()
        for ids, labels in draw(recipe):
            masked = [i for i, y in zip(ids, labels) if y == -100 and i in sep.values()]
            trained = [i for i, y in zip(ids, labels) if y >= 0 and i in sep.values()]
            if masked:  # A practice: only its first separator (the choice) is out of the loss
                assert masked == [sep["A"]] and trained
                choices["A practice"] += 1
            elif trained:
                choices["A" if trained[0] == sep["A"] else "B"] += 1
            else:
                choices["plain"] += 1
        return {k: v / 600 for k, v in choices.items()}

    # v6's initial senior: about A 25%, B 35%, plain 40%, no A practice
    v6 = choices_of(RECIPES[("dialects", "senior")])
    assert 0.2 < v6["A"] < 0.3 and 0.3 < v6["B"] < 0.4 and 0.35 < v6["plain"] < 0.45 and "A practice" not in v6
    v5 = choices_of(V5_DIALECT_SENIOR)  # v5's, with the A practice that leaves the choice untrained
    assert 0.08 < v5["A"] < 0.16 and 0.08 < v5["A practice"] < 0.16 and 0.19 < v5["B"] < 0.29
