"""Tests for tandem_eval.data: registry, local-file loading and validation, the paper's prompt.

    .venv/bin/python -m pytest tests/test_data.py -q

Offline and fast: hub loads run with HF_HUB_OFFLINE=1 against an empty cache (or a fake
`load_dataset`), and the chat tokenizer is a byte-level BPE trained in memory in ~0.1 s.
"""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from tandem_eval.data import (
    BENCHMARK_SETS,
    BENCHMARKS,
    INSTRUCTION,
    BenchmarkError,
    BenchmarkSpec,
    PromptError,
    load_benchmark,
    prompt_ids,
    prompt_text,
    resolve_benchmarks,
    user_message,
)
from tandem_eval.data import benchmarks as bm
from tandem_eval.data.prompts import _as_id_list


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    # Never touch the network, and never find a real cached copy of a benchmark.
    import datasets
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "ds_cache"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub_cache"))


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ---------------------------------------------------------------- registry and bundled data


def test_tiny_loads_with_unique_ids():
    problems = load_benchmark("tiny")
    assert len(problems) == 24
    assert len({p.problem_id for p in problems}) == 24
    assert {p.benchmark for p in problems} == {"tiny"} and {p.group for p in problems} == {"tiny"}
    assert all(p.answer.isdigit() and p.problem.strip() for p in problems)
    assert problems[0].problem_id == "tiny/0000"


def test_limit_takes_first_n():
    assert load_benchmark("tiny", limit=5) == load_benchmark("tiny")[:5]
    assert load_benchmark("tiny", limit=0) == []


def test_registry_groups_and_sets():
    assert set(BENCHMARK_SETS["paper"]) <= set(BENCHMARKS)
    assert {BENCHMARKS[n].group for n in ("aime24", "aime25", "aime26")} == {"aime"}
    assert BENCHMARKS["gsm8k"].answer_marker == "####"
    for name, spec in BENCHMARKS.items():
        assert spec.name == name and (spec.hub_id or spec.path)
    assert resolve_benchmarks("paper,gsm8k,aime24") == [*BENCHMARK_SETS["paper"], "gsm8k"]
    assert resolve_benchmarks(["tiny", "x.jsonl"]) == ["tiny", "x.jsonl"]


def test_unknown_name_lists_valid_names():
    with pytest.raises(BenchmarkError) as err:
        load_benchmark("aime99")
    msg = str(err.value)
    assert "unknown benchmark 'aime99'" in msg
    assert "aime24, aime25" in msg and "tiny" in msg and ".jsonl" in msg
    with pytest.raises(BenchmarkError, match="benchmark set"):
        load_benchmark("paper")


def test_registry_name_offline_fails_fast_with_fix():
    start = time.monotonic()
    with pytest.raises(BenchmarkError) as err:
        load_benchmark("aime24")
    assert time.monotonic() - start < 20
    msg = str(err.value)
    assert "'aime24'" in msg and "HuggingFaceH4/aime_2024" in msg
    assert "pass a local file: --benchmark path.jsonl (columns problem, answer)" in msg
    assert "\n" not in msg


def test_unreachable_hub_fails_without_load(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr("datasets.config.HF_HUB_OFFLINE", False)
    monkeypatch.setattr(bm, "_hub_unreachable", lambda: "hub huggingface.co unreachable: nope")
    monkeypatch.setattr("datasets.load_dataset", lambda *a, **k: pytest.fail("must not load"))
    with pytest.raises(BenchmarkError, match="unreachable.*HF_HUB_OFFLINE=1.*--benchmark"):
        load_benchmark("minerva")


def test_hub_rows_are_normalised(monkeypatch):
    # A fake hub: checks the spec plumbing (columns, config, "####", list answers, id prefix).
    import datasets

    fake = {
        ("openai/gsm8k", "main"): [
            {"question": "Q1", "answer": "48/2 = <<48/2=24>>24\n#### 1,024"},
            {"question": "Q2", "answer": "so\n#### 72"},
        ],
        ("Hothan/OlympiadBench", "OE_TO_maths_en_COMP"): [
            {"id": 7, "question": "Find x.", "final_answer": ["$3$"]},
            {"id": 9, "question": "Find all y.", "final_answer": ["1", "2"]},
        ],
        ("MathArena/aime_2025", None): [{"problem_idx": 1, "problem": "P", "answer": 204}],
    }
    calls = []

    def load_dataset(hub_id, config, split):
        calls.append((hub_id, config, split))
        return datasets.Dataset.from_list(fake[(hub_id, config)])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    gsm = load_benchmark("gsm8k")
    assert [p.answer for p in gsm] == ["1024", "72"]
    assert [p.problem_id for p in gsm] == ["gsm8k/0000", "gsm8k/0001"]
    oly = load_benchmark("olympiadbench")
    assert [(p.problem_id, p.answer) for p in oly] == [("olympiadbench/7", "$3$"), ("olympiadbench/9", "1, 2")]
    (aime,) = load_benchmark("aime25")
    assert (aime.problem_id, aime.answer, aime.group) == ("aime25/1", "204", "aime")
    assert calls[0] == ("openai/gsm8k", "main", "test")


# ---------------------------------------------------------------- local files


def test_local_jsonl_custom_columns(tmp_path):
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"qid": "a", "question": "1+1?", "gold": 2},
            {"qid": "b", "question": "2+2?", "gold": "4"},
        ],
    )
    problems = load_benchmark(path, problem_col="question", answer_col="gold", id_col="qid")
    assert [(p.problem_id, p.problem, p.answer) for p in problems] == [("a", "1+1?", "2"), ("b", "2+2?", "4")]
    assert {(p.benchmark, p.group) for p in problems} == {("mine", "mine")}


def test_local_file_ids_default_to_row_order(tmp_path):
    path = write_jsonl(tmp_path / "noid.jsonl", [{"problem": "p", "answer": "1"}] * 3)
    assert [p.problem_id for p in load_benchmark(str(path))] == ["noid/0000", "noid/0001", "noid/0002"]


def test_local_parquet_and_csv(tmp_path):
    df = pd.DataFrame({"id": [10, 11], "q": ["x?", "y?"], "a": [7, 8]})
    df.to_parquet(tmp_path / "t.parquet")
    problems = load_benchmark(tmp_path / "t.parquet", problem_col="q", answer_col="a")
    assert [(p.problem_id, p.answer) for p in problems] == [("10", "7"), ("11", "8")]
    (tmp_path / "t.csv").write_text("question,final\nWhat is 7?,007\n", encoding="utf-8")
    (p,) = load_benchmark(tmp_path / "t.csv", problem_col="question", answer_col="final")
    assert (p.problem_id, p.answer) == ("t/0000", "007")  # CSV values kept verbatim


def test_local_json_list(tmp_path):
    (tmp_path / "l.json").write_text(json.dumps([{"problem": "p", "answer": 1.0}]))
    assert load_benchmark(tmp_path / "l.json")[0].answer == "1"


def test_missing_column_names_column_file_and_present(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [{"question": "q", "answer": "1"}])
    with pytest.raises(BenchmarkError) as err:
        load_benchmark(path)
    msg = str(err.value)
    assert "'problem'" in msg and str(path) in msg and "question, answer" in msg


def test_empty_answer_names_line_and_file(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text('{"problem": "a", "answer": "1"}\n\n{"problem": "b", "answer": ""}\n')
    with pytest.raises(BenchmarkError) as err:
        load_benchmark(path)
    assert "line 3" in str(err.value) and str(path) in str(err.value)
    assert "empty answer" in str(err.value)
    write_jsonl(path, [{"problem": None, "answer": "1"}])
    with pytest.raises(BenchmarkError, match="empty problem.*line 1"):
        load_benchmark(path)


def test_empty_value_in_parquet_names_row(tmp_path):
    pd.DataFrame({"problem": ["a", "b"], "answer": ["1", None]}).to_parquet(tmp_path / "n.parquet")
    with pytest.raises(BenchmarkError, match=r"empty answer .*row 2 of .*n\.parquet"):
        load_benchmark(tmp_path / "n.parquet")


def test_duplicate_ids_name_the_id(tmp_path):
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [{"problem_id": "q7", "problem": "a", "answer": "1"}, {"problem_id": "q7", "problem": "b", "answer": "2"}],
    )
    with pytest.raises(BenchmarkError, match="duplicate problem id 'q7'.*line 1 and line 2"):
        load_benchmark(path)


def test_bad_json_and_missing_file(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"problem": "a", "answer": "1"}\n{oops\n')
    with pytest.raises(BenchmarkError, match="line 2: invalid JSON"):
        load_benchmark(path)
    with pytest.raises(BenchmarkError, match="not found"):
        load_benchmark(tmp_path / "nope.jsonl")


# ---------------------------------------------------------------- prompts

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}"
)


@pytest.fixture(scope="module")
def chat_tokenizer():
    """A real byte-level BPE (Qwen-style special tokens) trained in memory on the tiny set."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [p.problem + INSTRUCTION for p in load_benchmark("tiny")]
    tok.train_from_iterator(corpus, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = CHATML
    return hf


def test_user_message_is_problem_plus_instruction():
    assert user_message("What is 2+2?") == "What is 2+2?" + INSTRUCTION
    assert INSTRUCTION.startswith(" Solve the following") and "\\boxed{\\frac{1}{2}}" in INSTRUCTION


def test_prompt_ids_chatml(chat_tokenizer):
    problem = "Tom has 3 apples and buys 4 more. How many apples does he have?"
    text = prompt_text(chat_tokenizer, problem)
    assert text == (
        f"<|im_start|>user\n{user_message(problem)}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )  # thinking disabled
    ids = prompt_ids(chat_tokenizer, problem)
    assert isinstance(ids, list) and all(type(i) is int for i in ids)
    assert ids == chat_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == chat_tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert chat_tokenizer.decode(ids) == text


def test_prompt_ids_after_save_and_reload(chat_tokenizer, tmp_path):
    from transformers import AutoTokenizer

    chat_tokenizer.save_pretrained(tmp_path / "tok")
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert prompt_ids(reloaded, "1+1?") == prompt_ids(chat_tokenizer, "1+1?")


def test_as_id_list_accepts_every_return_shape():
    import torch
    from transformers import BatchEncoding

    expected = [5, 6, 7]
    for out in (
        [5, 6, 7],
        [[5, 6, 7]],
        {"input_ids": [5, 6, 7]},
        BatchEncoding({"input_ids": [5, 6, 7]}),
        torch.tensor([[5, 6, 7]]),
    ):
        assert _as_id_list(out) == expected
    with pytest.raises(PromptError, match="batch of 2"):
        _as_id_list([[1], [2]])


def test_no_chat_template_error(chat_tokenizer, tmp_path):
    from transformers import AutoTokenizer

    chat_tokenizer.save_pretrained(tmp_path / "plain")
    cfg_path = tmp_path / "plain" / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("chat_template", None)
    cfg_path.write_text(json.dumps(cfg))
    for extra in ("chat_template.jinja", "chat_template.json"):
        (tmp_path / "plain" / extra).unlink(missing_ok=True)
    plain = AutoTokenizer.from_pretrained(tmp_path / "plain")
    with pytest.raises(PromptError) as err:
        prompt_ids(plain, "1+1?")
    msg = str(err.value)
    assert str(tmp_path / "plain") in msg and "has no chat_template" in msg
    assert "--chat-template FILE" in msg
    # An explicit template (the CLI's --chat-template) fixes it.
    assert prompt_text(plain, "1+1?", chat_template=CHATML).startswith("<|im_start|>user\n")


def test_spec_is_frozen():
    with pytest.raises(AttributeError):
        BENCHMARKS["tiny"].group = "x"  # type: ignore[misc]
    assert isinstance(BENCHMARKS["tiny"], BenchmarkSpec)
