"""Bad input never costs work: a table of hostile and careless CLI invocations, each of which must exit
with code 2, print exactly one line (`error: ...`) on stderr, no traceback, and create nothing on disk.

    PYTHONPATH=$PWD python -m pytest -q tests/test_bad_inputs.py

Every case runs in-process through typer's CliRunner (stderr kept separate from stdout). The broken
checkpoints are copies of the tiny senior with one thing damaged, built once per module.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tandem_eval.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def world(tiny_pair, tmp_path_factory):
    """A working directory holding damaged checkpoints, files and templates; returns (root, paths)."""
    from trainer.tiny import build_model, train_tokenizer

    root = tmp_path_factory.mktemp("bad")
    senior, junior = tiny_pair
    p = {"senior": senior, "junior": junior}

    def ckpt(name, damage=None):
        dst = root / name
        shutil.copytree(senior, dst)
        if damage:
            damage(dst)
        p[name] = str(dst)

    ckpt("cfg_empty", lambda d: (d / "config.json").write_text("{}"))
    ckpt("cfg_garbage", lambda d: (d / "config.json").write_text("not json {"))
    ckpt("cfg_unknown", lambda d: (d / "config.json").write_text('{"model_type": "no-such-family"}'))

    def truncate(d):
        w = d / "model.safetensors"
        w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])

    ckpt("truncated", truncate)
    ckpt("header_garbage", lambda d: (d / "model.safetensors").write_bytes(b"\xff" * 64))
    ckpt("no_weights", lambda d: (d / "model.safetensors").unlink())

    def no_tokenizer(d):
        for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json"):
            (d / f).unlink(missing_ok=True)

    ckpt("no_tokenizer", no_tokenizer)

    def small_vocab(d):
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**cfg, "vocab_size": 10}))

    ckpt("small_vocab", small_vocab)

    def set_template(text):
        def damage(d):
            (d / "chat_template.jinja").unlink(missing_ok=True)
            tc = json.loads((d / "tokenizer_config.json").read_text())
            tc.pop("chat_template", None)
            if text is not None:
                tc["chat_template"] = text
            (d / "tokenizer_config.json").write_text(json.dumps(tc))

        return damage

    ckpt("no_chat", set_template(None))
    ckpt("broken_chat", set_template("{% for m in messages %}{{ m['content'] }"))
    ckpt("meta_garbage", lambda d: (d / "tandem_meta.json").write_text("{garbage"))
    ckpt("meta_list", lambda d: (d / "tandem_meta.json").write_text("[1, 2]"))

    other_tok = train_tokenizer(["completely different corpus " * 3] * 20, vocab_size=300)
    for name, template in (("other_vocab", True), ("other_vocab_no_chat", False)):
        if not template:
            other_tok.chat_template = None
        build_model(other_tok).save_pretrained(root / name)
        other_tok.save_pretrained(root / name)
        if not template:
            (root / name / "chat_template.jinja").unlink(missing_ok=True)
        p[name] = str(root / name)

    (root / "a_file").write_text("x")
    (root / "not_a_ckpt").mkdir()
    (root / "empty_dir").mkdir()
    (root / "syntax.jinja").write_text("{% for m in messages %}{{ m['content'] }")
    (root / "latin1.jinja").write_bytes(b"{{ '\xe9' }}")
    (root / "blank.jinja").write_text("  \n")
    (root / "raises.jinja").write_text("{{ raise_exception('this template refuses') }}")
    (root / "bad_line.jsonl").write_text('{"problem": "1+1?", "answer": "2"}\n{"problem": "2+2?", "answer": ""}\n')
    (root / "not_json.jsonl").write_text('{"problem": "1+1?", "answer": "2"}\nnot json\n')
    (root / "empty.jsonl").write_text("")
    (root / "no_answer.jsonl").write_text('{"problem": "1+1?"}\n')
    damaged_run = root / "damaged_run" / "solo"
    damaged_run.mkdir(parents=True)
    (damaged_run / "config.json").write_text("garbage")
    return root, p


S = ["solo", "--senior", "{senior}"]
H = ["handoff", "--senior", "{senior}", "--junior", "{junior}"]

# (case id, argv with {placeholders} from the world, a substring the one-line message must contain)
CASES = [
    # ---- sampling and run options ------------------------------------------------------------
    ("temperature-nan", S + ["--temperature", "nan"], "--temperature"),
    ("temperature-inf", S + ["--temperature", "inf"], "--temperature"),
    ("temperature-negative", S + ["--temperature", "-1"], "--temperature"),
    ("temperature-not-a-number", S + ["--temperature", "hot"], "--temperature"),
    ("top-p-zero", S + ["--top-p", "0"], "--top-p"),
    ("top-p-above-one", S + ["--top-p", "1.5"], "--top-p"),
    ("top-p-nan", S + ["--top-p", "nan"], "--top-p"),
    ("top-k-below-minus-one", S + ["--top-k", "-2"], "--top-k"),
    ("max-new-tokens-zero", S + ["--max-new-tokens", "0"], "--max-new-tokens"),
    ("max-context-one", S + ["--max-context", "1"], "--max-context"),
    ("max-context-shorter-than-every-prompt", S + ["--max-context", "10"], "--max-context 10"),
    ("dtype-float64", S + ["--dtype", "float64"], "--dtype"),
    ("batch-size-zero", S + ["--batch-size", "0"], "--batch-size"),
    ("batch-size-negative", S + ["--batch-size", "-3"], "--batch-size"),
    ("n-zero", S + ["--n", "0"], "--n"),
    ("n-not-an-integer", S + ["--n", "abc"], "--n"),
    ("k-zero", S + ["--k", "0"], "--k"),
    ("k-above-n", S + ["--n", "8", "--k", "1,16"], "exceed --n"),
    ("k-above-n-default-n", S + ["--n", "1", "--k", "1,2"], "exceed --n"),
    ("k-not-integers", S + ["--k", "one"], "--k"),
    ("k-empty", S + ["--k", ","], "--k"),
    ("limit-zero", S + ["--limit", "0"], "--limit"),
    ("limit-negative", S + ["--limit", "-1"], "--limit"),
    ("num-shards-zero", S + ["--num-shards", "0"], "--num-shards"),
    ("shard-index-out-of-range", S + ["--num-shards", "2", "--shard-index", "2"], "--shard-index"),
    ("tensor-parallel-zero", S + ["--tensor-parallel-size", "0"], "--tensor-parallel-size"),
    ("unknown-engine", S + ["--engine", "tpu"], "'tpu' is not one of 'hf', 'vllm'"),
    ("unknown-option", S + ["--temprature", "1"], "--temprature"),
    ("out-is-a-file", S + ["--out", "{root}/a_file"], "is a file"),
    ("out-below-a-file", S + ["--out", "{root}/a_file/sub"], "a_file"),
    ("out-holds-a-damaged-run", S + ["--out", "{root}/damaged_run"], "config.json"),
    # ---- benchmarks ----------------------------------------------------------------------------
    ("unknown-benchmark", S + ["--benchmark", "nonsense"], "valid: aime24"),
    ("missing-benchmark-file", S + ["--benchmark", "{root}/nope.jsonl"], "nope.jsonl"),
    ("benchmark-row-without-answer", S + ["--benchmark", "{root}/bad_line.jsonl"], "line 2"),
    ("benchmark-line-not-json", S + ["--benchmark", "{root}/not_json.jsonl"], "line 2"),
    ("benchmark-file-empty", S + ["--benchmark", "{root}/empty.jsonl"], "empty.jsonl"),
    ("benchmark-without-answer-column", S + ["--benchmark", "{root}/no_answer.jsonl"], "answer"),
    # ---- the senior checkpoint -------------------------------------------------------------------
    ("missing-checkpoint", ["solo", "--senior", "{root}/nope"], "checkpoint not found"),
    ("checkpoint-is-a-file", ["solo", "--senior", "{root}/a_file"], "is a file"),
    ("checkpoint-without-config", ["solo", "--senior", "{root}/not_a_ckpt"], "no config.json"),
    ("config-json-empty-object", ["solo", "--senior", "{cfg_empty}"], "model_type"),
    ("config-json-garbage", ["solo", "--senior", "{cfg_garbage}"], "config.json"),
    ("config-json-unknown-family", ["solo", "--senior", "{cfg_unknown}"], "config.json"),
    ("truncated-safetensors", ["solo", "--senior", "{truncated}"], "truncated"),
    ("safetensors-header-garbage", ["solo", "--senior", "{header_garbage}"], "model.safetensors"),
    ("checkpoint-without-weights", ["solo", "--senior", "{no_weights}"], "no weights"),
    ("checkpoint-without-tokenizer", ["solo", "--senior", "{no_tokenizer}"], "tokenizer"),
    ("embedding-smaller-than-tokenizer", ["solo", "--senior", "{small_vocab}"], "vocab_size"),
    ("toy-name-escaping-the-bundle", ["solo", "--senior", "toy:../../x"], "unknown toy checkpoint"),
    ("toy-name-as-an-absolute-path", ["solo", "--senior", "toy:{senior}"], "unknown toy checkpoint"),
    ("unknown-toy-name", ["solo", "--senior", "toy:nonexistent"], "valid: toy:"),
    ("senior-without-chat-template", ["solo", "--senior", "{no_chat}"], "--chat-template"),
    ("senior-chat-template-syntax-error", ["solo", "--senior", "{broken_chat}"], "chat template"),
    # ---- --chat-template files -------------------------------------------------------------------
    ("chat-template-syntax-error", S + ["--chat-template", "{root}/syntax.jinja"], "syntax.jinja"),
    ("chat-template-missing", S + ["--chat-template", "{root}/nope.jinja"], "nope.jinja"),
    ("chat-template-not-utf8", S + ["--chat-template", "{root}/latin1.jinja"], "UTF-8"),
    ("chat-template-blank", S + ["--chat-template", "{root}/blank.jinja"], "empty"),
    ("chat-template-raises", S + ["--chat-template", "{root}/raises.jinja"], "--chat-template"),
    ("chat-template-is-a-folder", S + ["--chat-template", "{root}/empty_dir"], "--chat-template"),
    # ---- handoff: schedules, the junior, metadata -------------------------------------------------
    ("schedule-chunk-zero", H + ["--schedule", "chunk:0"], "chunk:0"),
    ("schedule-chunk-not-integer", H + ["--schedule", "chunk:x"], "chunk:x"),
    ("schedule-word-p-above-one", H + ["--schedule", "word:2"], "word:2"),
    ("schedule-word-p-nan", H + ["--schedule", "word:nan"], "word:nan"),
    ("schedule-word-k-zero", H + ["--schedule", "word:0.5:0"], "word:0.5:0"),
    ("schedule-takeover-negative", H + ["--schedule", "takeover:-1"], "takeover:-1"),
    ("schedule-too-many-args", H + ["--schedule", "chunk:3:4"], "at most 1"),
    ("schedule-unknown", H + ["--schedule", "nope"], "unknown schedule"),
    ("schedule-solo-is-not-a-handoff", H + ["--schedule", "solo"], "tandem-eval solo"),
    ("missing-junior", ["handoff", "--senior", "{senior}", "--junior", "{root}/nope"], "checkpoint not found"),
    ("junior-truncated-weights", ["handoff", "--senior", "{senior}", "--junior", "{truncated}"], "truncated"),
    ("junior-config-empty", ["handoff", "--senior", "{senior}", "--junior", "{cfg_empty}"], "model_type"),
    ("no-junior-and-no-metadata", ["handoff", "--senior", "{senior}"], "no --junior given"),
    ("garbage-tandem-meta", ["handoff", "--senior", "{meta_garbage}"], "tandem_meta.json"),
    ("tandem-meta-not-an-object", ["handoff", "--senior", "{meta_list}"], "tandem_meta.json"),
    ("vocab-mismatch", ["handoff", "--senior", "{senior}", "--junior", "{other_vocab}"], "--allow-vocab-mismatch"),
    (
        "other-vocab-junior-without-chat-template",
        ["handoff", "--senior", "{senior}", "--junior", "{other_vocab_no_chat}", "--allow-vocab-mismatch"],
        "--junior-chat-template",
    ),
    (
        "junior-chat-template-syntax-error",
        H + ["--junior-chat-template", "{root}/syntax.jinja"],
        "--junior-chat-template",
    ),
    (
        "junior-chat-template-raises",
        ["handoff", "--senior", "{senior}", "--junior", "{other_vocab}", "--allow-vocab-mismatch"]
        + ["--junior-chat-template", "{root}/raises.jinja"],
        "--junior-chat-template",
    ),
    ("solo-run-missing", H + ["--solo-run", "{root}/nope"], "not a run folder"),
    ("solo-run-not-a-run-folder", H + ["--solo-run", "{root}/empty_dir"], "not a run folder"),
    ("handoff-temperature-nan", H + ["--temperature", "nan"], "--temperature"),
    ("handoff-out-is-a-file", H + ["--out", "{root}/a_file"], "is a file"),
    # ---- other commands --------------------------------------------------------------------------
    ("merge-without-shards", ["merge", "{root}/empty_dir"], "shard"),
    ("unknown-command", ["evaluate"], "evaluate"),
]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_the_table_is_large_enough():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("name,argv,expect", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_creates_nothing(world, monkeypatch, name, argv, expect):
    root, paths = world
    monkeypatch.chdir(root)  # the default --out (runs/<label>) lands here if anything is created
    args = [a.format(root=root, **paths) for a in argv]
    before = _tree(root)
    result = runner.invoke(app, args)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert expect in lines[0], lines[0]
    assert _tree(root) == before, sorted(_tree(root) - before)
