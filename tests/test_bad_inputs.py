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

from tandem_eval.cli.main import app

runner = CliRunner()


@pytest.fixture(scope="module")
def world(tiny_pair, tmp_path_factory):
    """A working directory holding damaged checkpoints, files and templates; returns (root, paths)."""
    from tandem_eval.toy.tiny import build_model, train_tokenizer

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
    _benchmark_files(root)
    p.update(_run_folders(root, senior, junior))
    p.update(_run_folders_19a(root, senior))
    return root, p


def _benchmark_files(root: Path) -> None:
    """Benchmark files whose rows are wrong in ways a loader could paper over."""
    (root / "latin1.jsonl").write_bytes(b'{"problem": "1+1?", "answer": "2"}\n{"problem": "caf\xe9?", "answer": "3"}\n')
    (root / "dict_answer.jsonl").write_text('{"problem": "1+1?", "answer": {"value": 2}}\n')
    (root / "bool_answer.jsonl").write_text('{"problem": "1+1?", "answer": true}\n')
    (root / "inf_answer.jsonl").write_text('{"problem": "1+1?", "answer": Infinity}\n')
    (root / "dup_ids.jsonl").write_text(
        '{"id": "p1", "problem": "1+1?", "answer": "2"}\n{"id": "p1", "problem": "2+2?", "answer": "4"}\n'
    )


def _run_folders(root: Path, senior: str, junior: str) -> dict[str, str]:
    """Complete synthetic run folders (tests/run_fixtures.py, no generation), each damaged one way
    after COMPLETE was written; plus shard outputs merge must refuse and a folder another process holds."""
    import fcntl
    import os
    import socket

    import pandas as pd
    from run_fixtures import solo_cfg, write_run

    flags = {("tiny", "tiny/0000"): [True, False], ("tiny", "tiny/0001"): [False, False]}
    out: dict[str, str] = {}

    def run(name: str, cfg=None, fl=flags) -> Path:
        path = root / "rf" / name
        write_run(path, cfg or solo_cfg(senior, n=2, ks=(1, 2)), fl)
        out[name] = str(path)
        return path

    run("good")
    d = run("rows_deleted")
    pd.read_parquet(d / "samples.parquet").iloc[:-1].to_parquet(d / "samples.parquet")
    d = run("parquet_truncated")
    w = d / "samples.parquet"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    d = run("config_edited")
    raw = json.loads((d / "config.json").read_text())
    raw["config"]["seed"] = 7  # the recorded fingerprint is kept: only a recomputation notices
    (d / "config.json").write_text(json.dumps(raw))
    d = run("config_empty")
    (d / "config.json").write_text("{}")
    d = run("metrics_garbage")
    (d / "metrics.json").write_text("{not json")
    d = run("lens_truncated")
    from tandem_eval.run.results import RunFolder

    lens = RunFolder(d).write_table(
        "lens/jr/legibility.parquet",
        pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["tiny/0000"], "sample_idx": [0], "junior_nll_mean": [1.0]}),
    )
    lens.write_bytes(lens.read_bytes()[: lens.stat().st_size // 2])
    run("other_senior", solo_cfg(junior, n=2, ks=(1, 2)))  # a solo run of another senior (the junior)

    def shard(name: str, index: int, of: int) -> None:
        cfg = solo_cfg(senior, n=2, ks=(1, 2), num_shards=of, shard_index=index)
        write_run(root / name / f"shard-{index}-of-{of}" / "solo", cfg, {("tiny", f"tiny/000{index}"): [True, False]})
        out[name] = str(root / name)

    shard("merge_truncated", 0, 2)
    shard("merge_truncated", 1, 2)
    w = root / "merge_truncated" / "shard-1-of-2" / "solo" / "samples.parquet"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    shard("merge_mixed_counts", 0, 2)
    shard("merge_mixed_counts", 1, 3)

    held = root / "locked" / "solo"  # a folder a live process (this one) is writing
    held.mkdir(parents=True)
    fd = os.open(held / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held until the test process exits (the fd is never closed)
    os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "now"}).encode())
    out["locked"] = str(held.parent)
    return out


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
    ("k-zero", S + ["--k", "0"], "--k values [0] are below 1"),
    ("k-negative", S + ["--k", "-1,2"], "--k values [-1] are below 1"),
    ("k-above-n", S + ["--n", "8", "--k", "1,16"], "exceed --n"),
    ("k-above-n-default-n", S + ["--n", "1", "--k", "1,2"], "exceed --n"),
    ("k-not-integers", S + ["--k", "one"], "--k"),
    ("k-empty", S + ["--k", ","], "--k"),
    ("limit-zero", S + ["--limit", "0"], "--limit"),
    # every shard refuses, not only the empty one: the others would finish and `merge` could never
    (
        "more-shards-than-problems",
        S + ["--limit", "2", "--num-shards", "3", "--shard-index", "0"],
        "shard 2 would be empty",
    ),
    ("limit-negative", S + ["--limit", "-1"], "--limit"),
    ("num-shards-zero", S + ["--num-shards", "0"], "--num-shards"),
    ("shard-index-out-of-range", S + ["--num-shards", "2", "--shard-index", "2"], "--shard-index"),
    ("tensor-parallel-zero", S + ["--tensor-parallel-size", "0"], "--tensor-parallel-size"),
    ("unknown-engine", S + ["--engine", "tpu"], "'tpu' is not one of 'hf', 'vllm', 'served'"),
    ("unknown-option", S + ["--temprature", "1"], "--temprature"),
    ("out-is-a-file", S + ["--out", "{root}/a_file"], "is a file"),
    ("out-below-a-file", S + ["--out", "{root}/a_file/sub"], "a_file"),
    ("out-holds-a-damaged-run", S + ["--out", "{root}/damaged_run"], "config.json"),
    # ---- benchmarks ----------------------------------------------------------------------------
    ("unknown-benchmark", S + ["--benchmark", "nonsense"], "valid: aime24"),
    ("missing-benchmark-file", S + ["--benchmark", "{root}/nope.jsonl"], "nope.jsonl"),
    ("benchmark-row-without-answer", S + ["--benchmark", "{root}/bad_line.jsonl"], "line 2"),
    ("benchmark-line-not-json", S + ["--benchmark", "{root}/not_json.jsonl"], "line 2"),
    ("benchmark-file-empty", S + ["--benchmark", "{root}/empty.jsonl"], "empty.jsonl holds no fields (an empty file"),
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
    ("lens-run-is-a-file", ["legibility", "--run", "{root}/empty.jsonl"], "not a run folder (a file, not a folder)"),
    ("handoff-temperature-nan", H + ["--temperature", "nan"], "--temperature"),
    ("handoff-out-is-a-file", H + ["--out", "{root}/a_file"], "is a file"),
    # ---- legibility / drift: the junior is checked before any weights load, as in solo/handoff -----
    ("legibility-junior-truncated-weights", ["legibility", "--run", "{good}", "--junior", "{truncated}"], "truncated"),
    ("drift-junior-truncated-weights", ["drift", "--run", "{good}", "--junior", "{truncated}"], "truncated"),
    ("drift-junior-config-empty", ["drift", "--run", "{good}", "--junior", "{cfg_empty}"], "model_type"),
    # the solo-run settings were ignored with --run: every CoT of the run was scored, exit 0
    (
        "legibility-run-with-solo-settings",
        ["legibility", "--run", "{good}", "--n", "1", "--limit", "1"],
        "--n, --limit describe the solo run made without --run",
    ),
    (
        "legibility-base-junior-without-chat-template",
        ["legibility", "--run", "{good}", "--junior", "{no_chat}"],
        "--junior-chat-template",
    ),
    ("drift-base-junior-without-chat-template", ["drift", "--run", "{good}", "--junior", "{no_chat}"], "--junior-chat"),
    (
        "legibility-junior-chat-template-syntax-error",
        ["legibility", "--run", "{good}", "--junior", "{junior}", "--junior-chat-template", "{root}/syntax.jinja"],
        "--junior-chat-template",
    ),
    (
        "drift-junior-chat-template-raises",
        ["drift", "--run", "{good}", "--junior", "{no_chat}", "--junior-chat-template", "{root}/raises.jinja"],
        "--junior-chat-template",
    ),
    # ---- other commands --------------------------------------------------------------------------
    ("merge-without-shards", ["merge", "{root}/empty_dir"], "shard"),
    ("unknown-command", ["evaluate"], "evaluate"),
    # ---- benchmark rows a loader could paper over (issue 15) --------------------------------------
    ("benchmark-not-utf8", S + ["--benchmark", "{root}/latin1.jsonl"], "UTF-8"),
    ("benchmark-answer-is-a-dict", S + ["--benchmark", "{root}/dict_answer.jsonl"], "dict_answer.jsonl"),
    ("benchmark-answer-is-a-bool", S + ["--benchmark", "{root}/bool_answer.jsonl"], "bool_answer.jsonl"),
    ("benchmark-answer-is-infinity", S + ["--benchmark", "{root}/inf_answer.jsonl"], "inf_answer.jsonl"),
    ("benchmark-duplicate-ids", S + ["--benchmark", "{root}/dup_ids.jsonl"], "p1"),
    ("handoff-benchmark-not-utf8", H + ["--benchmark", "{root}/latin1.jsonl"], "UTF-8"),
    # ---- run folders: merge, reuse, locks ----------------------------------------------------------
    ("merge-truncated-shard", ["merge", "{merge_truncated}"], "samples.parquet"),
    ("merge-shards-of-different-num-shards", ["merge", "{merge_mixed_counts}"], "num-shards"),
    ("handoff-solo-run-of-another-senior", H + ["--solo-run", "{other_senior}"], "senior"),
    ("handoff-solo-run-damaged", H + ["--solo-run", "{rows_deleted}"], "samples.parquet"),
    ("solo-into-a-folder-another-process-writes", S + ["--out", "{locked}"], ".lock"),
    ("handoff-into-a-folder-another-process-writes", H + ["--out", "{locked}"], ".lock"),
]

# Every reader of run folders refuses each way a finished folder can be damaged (a sibling table:
# (damage, the message's substring) x (command, argv)); built from one synthetic run per damage.
DAMAGES = [
    ("rows_deleted", "samples.parquet"),
    ("parquet_truncated", "samples.parquet"),
    ("config_edited", "config.json"),
    ("config_empty", "config.json"),
    ("metrics_garbage", "metrics.json"),
    ("lens_truncated", "legibility.parquet"),
]
READERS = [
    ("compare", ["compare", "{run}", "{good}", "--metric", "solo_pass@1"]),
    ("compare-as-b", ["compare", "{good}", "{run}", "--metric", "solo_pass@1"]),
    ("legibility", ["legibility", "--run", "{run}", "--junior", "{junior}"]),
    ("drift", ["drift", "--run", "{run}", "--junior", "{junior}"]),
    ("view", ["view", "{run}", "--out", "{root}/view.html"]),
    ("report", ["report", "{run}", "--out", "{root}/report", "--no-figures"]),
    ("regrade", ["regrade", "{run}"]),
]
RUN_CASES = [
    (f"{cmd}-{damage}".replace("_", "-"), [a.replace("{run}", "{" + damage + "}") for a in argv], expect)
    for damage, expect in DAMAGES
    for cmd, argv in READERS
]
CASES += RUN_CASES


# ==== issue 19 (run-folder core): inputs by content, records that cannot be bypassed, no writes ======
# ==== through links, regrade's timeout. Folders built by _run_folders_19a. ==========================
def _run_folders_19a(root: Path, senior: str) -> dict[str, str]:
    """Runs whose benchmark file changed after they started; COMPLETE markers that record too little;
    a lens table COMPLETE never recorded; links planted where a command writes."""
    import dataclasses

    import pandas as pd
    from run_fixtures import solo_cfg, write_run

    from tandem_eval.generate.plan import load_inputs
    from tandem_eval.run.results import RunFolder
    from tandem_eval.schemas import write_table

    out: dict[str, str] = {}
    flags = {("tiny", "tiny/0000"): [True, False], ("tiny", "tiny/0001"): [False, False]}

    def bench(name: str, rows: int, edit: str = "") -> str:
        path = root / name
        path.write_text(
            "".join(json.dumps({"problem": f"{i}+{i}?{edit}", "answer": str(2 * i)}) + "\n" for i in range(rows))
        )
        return str(path)

    def on_file(path: str, **kw):
        cfg = solo_cfg(senior, n=2, ks=(1, 2), benchmarks=(path,), **kw)
        problems, inputs = load_inputs(cfg)
        return dataclasses.replace(cfg, inputs=inputs), problems

    # A solo run stopped after its first problem's samples; then its benchmark file was edited.
    cfg, problems = on_file(bench("resumed.jsonl", 4))
    rf = write_run(
        root / "edited_resume" / "solo", cfg, {(problems[0].benchmark, problems[0].problem_id): [True, True]}
    )
    rf.done_path.unlink()  # unfinished: it holds the samples written so far
    out["edited_resume"] = str(rf.path.parent)
    # Shards whose file grew in between; a solo run whose file was edited after it finished.
    grown = bench("grown.jsonl", 2)
    for i, rows in ((0, 2), (1, 4)):
        bench("grown.jsonl", rows)
        cfg, problems = on_file(grown, num_shards=2, shard_index=i)
        write_run(
            root / "merge_grown" / f"shard-{i}-of-2" / "solo",
            cfg,
            {(p.benchmark, p.problem_id): [True, False] for p in problems},
        )
    out["merge_grown"] = str(root / "merge_grown")
    cfg, problems = on_file(bench("edited_solo.jsonl", 2))
    write_run(root / "rf19" / "edited_solo", cfg, {(p.benchmark, p.problem_id): [True, False] for p in problems})
    bench("edited_solo.jsonl", 2, edit=" (edited)")
    bench("resumed.jsonl", 4, edit=" (edited)")
    out["edited_solo"] = str(root / "rf19" / "edited_solo")

    def run(name: str) -> RunFolder:
        rf = write_run(root / "rf19" / name, solo_cfg(senior, n=2, ks=(1, 2)), flags)
        out[name] = str(rf.path)
        return rf

    rf = run("complete_no_tables")
    rf.done_path.write_text(json.dumps({**json.loads(rf.done_path.read_text()), "tables": {}}))
    for name, marker in (("legacy_rows_deleted", "2026-11-30T04:27:21+0000\n"), ("empty_complete_rows_deleted", "")):
        rf = run(name)
        df = pd.read_parquet(rf.samples_path)
        df[df.problem_id == "tiny/0000"].to_parquet(rf.samples_path)  # a whole problem gone
        rf.done_path.write_text(marker)
    rf = run("lens_unrecorded")
    (rf.path / "lens" / "jr").mkdir(parents=True)
    table = pd.DataFrame(
        {
            "benchmark": ["tiny"] * 4,
            "problem_id": ["tiny/0000"] * 2 + ["tiny/0001"] * 2,
            "sample_idx": [0, 1, 0, 1],
            "junior_nll_mean": [1.0] * 4,
        }
    )
    write_table(rf.path / "lens" / "jr" / "legibility.parquet", table)  # written, never recorded
    rf = run("view_linked")
    (root / "victim.html").write_text("not yours")
    (rf.path / "view.html").symlink_to(root / "victim.html")
    rf = run("lens_linked")
    (root / "outside_lens").mkdir()
    (rf.path / "lens").symlink_to(root / "outside_lens")
    return out


H19 = ["handoff", "--senior", "{senior}", "--junior", "{junior}", "--n", "2", "--k", "1,2"]
DAMAGES_19A = [
    ("complete_no_tables", "does not record samples.parquet"),
    ("legacy_rows_deleted", "records no tables"),
    ("empty_complete_rows_deleted", "records no tables"),
    ("lens_unrecorded", "is not recorded in"),
]
CASES += [
    ("regrade-timeout-zero", ["regrade", "{good}", "--timeout", "0"], "--timeout"),
    ("regrade-timeout-negative", ["regrade", "{good}", "--timeout", "-1"], "--timeout"),
    ("regrade-timeout-nan", ["regrade", "{good}", "--timeout", "nan"], "--timeout"),
    (
        "solo-resume-after-the-benchmark-file-changed",
        S + ["--benchmark", "{root}/resumed.jsonl", "--n", "2", "--out", "{edited_resume}"],
        "resumed.jsonl",
    ),
    ("merge-shards-whose-benchmark-file-grew", ["merge", "{merge_grown}"], "grown.jsonl"),
    (
        "handoff-solo-run-of-an-edited-benchmark",
        H19 + ["--benchmark", "{root}/edited_solo.jsonl", "--solo-run", "{edited_solo}"],
        "edited_solo.jsonl",
    ),
    ("view-through-a-planted-link", ["view", "{view_linked}"], "symbolic link"),
    (
        "legibility-into-a-linked-lens-folder",
        ["legibility", "--run", "{lens_linked}", "--junior", "{junior}"],
        "outside the run folder",
    ),
    (
        "drift-into-a-linked-lens-folder",
        ["drift", "--run", "{lens_linked}", "--junior", "{junior}"],
        "outside the run folder",
    ),
] + [
    (f"{cmd}-{damage}".replace("_", "-"), [a.replace("{run}", "{" + damage + "}") for a in argv], expect)
    for damage, expect in DAMAGES_19A
    for cmd, argv in READERS
    if not (damage == "lens_unrecorded" and cmd in ("legibility", "drift"))  # they repair it (tests/test_results.py)
]


def _tree(root: Path) -> dict[str, tuple[int, int] | None]:
    """Every path under root, files with their size and modification time: created, removed and changed
    files show (a folder's own mtime is left out: a lock probe's temporary file touches it)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None
        for p in root.rglob("*")
    }


def test_the_table_is_large_enough():
    assert len(CASES) >= 100 and len({c[0] for c in CASES}) == len(CASES)


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
    after = _tree(root)
    assert after == before, sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


# ---- recipes: `tandem-train` (argparse, not typer: its one line reads `tandem-train: error: ...`) --------
RECIPE = str(Path(__file__).resolve().parents[1] / "trainer" / "recipes" / "cpu-tandem.yaml")
RECIPE_FILES = {
    "invalid.yaml": "arm: tandem\nsteps: [1,\n  x: y\n",
    "a_list.yaml": "- 1\n- 2\n",
    "unknown_key.yaml": f"base: {RECIPE}\nno_such_field: 1\n",
    "bad_type.yaml": f"base: {RECIPE}\nsteps: two\n",
}
RECIPE_CASES = [
    ("steps-not-an-integer", ["--set", "steps=2.5"], "steps: expected an integer"),
    ("steps-option-not-an-integer", ["--steps", "2.5"], "invalid int value: '2.5'"),
    ("lr-nan", ["--set", "lr=nan"], "learning_rate must be a finite number"),
    ("lr-inf", ["--set", "lr=inf"], "learning_rate must be a finite number"),
    ("lr-negative", ["--set", "lr=-1"], "learning_rate must be > 0"),
    ("unknown-field-in-set", ["--set", "no_such_field=1"], "unknown key 'no_such_field'"),
    ("set-without-equals", ["--set", "steps"], "key=value"),
    ("unknown-option", ["--no_such_option", "1"], "--no_such_option"),
    ("invalid-yaml", ["--recipe", "{dir}/invalid.yaml"], "invalid.yaml:4: invalid YAML"),
    ("recipe-not-a-mapping", ["--recipe", "{dir}/a_list.yaml"], "a_list.yaml"),
    ("unknown-field-in-yaml", ["--recipe", "{dir}/unknown_key.yaml"], "unknown key 'no_such_field'"),
    ("wrong-type-in-yaml", ["--recipe", "{dir}/bad_type.yaml"], "steps"),
    ("recipe-missing", ["--recipe", "{dir}/nope.yaml"], "nope.yaml"),
]


@pytest.fixture(scope="module")
def recipe_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("recipes")
    for name, text in RECIPE_FILES.items():
        (d / name).write_text(text)
    return d


def _train(argv: list[str], capsys) -> tuple[int, str, str]:
    """tandem-train's main in-process: (exit status, stdout, stderr)."""
    from trainer.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name,extra,expect", RECIPE_CASES, ids=[c[0] for c in RECIPE_CASES])
def test_bad_recipe_is_one_line_exit_2_and_creates_nothing(recipe_dir, monkeypatch, capsys, name, extra, expect):
    monkeypatch.chdir(recipe_dir)  # a recipe's output_dir (relative) would land here
    extra = [a.format(dir=recipe_dir) for a in extra]
    argv = (extra if extra[0] == "--recipe" else ["--recipe", RECIPE, *extra]) + ["--print"]
    before = _tree(recipe_dir)
    code, out, err = _train(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("tandem-train: error: "), err
    assert "Traceback" not in err + out
    assert expect in lines[0], lines[0]
    assert _tree(recipe_dir) == before


@pytest.mark.parametrize("how", [["--set", "report_to=wandb"], ["--report_to", "wandb"]], ids=["set", "option"])
def test_recipe_report_to_one_name_stays_a_list(capsys, how):
    import yaml

    code, out, err = _train(["--recipe", RECIPE, "--print", *how], capsys)
    assert code == 0, err
    assert yaml.safe_load(out)["report_to"] == ["wandb"]  # never ['w', 'a', 'n', 'd', 'b']


# ---- a label is one cell of the report's Markdown table --------------------------------------------------
def test_a_pipe_in_a_label_keeps_the_markdown_table_columns(world, tmp_path):
    import re

    root, paths = world
    result = runner.invoke(
        app, ["report", paths["good"], "--out", str(tmp_path), "--no-figures", "--label", f"{paths['good']}=a|b"]
    )
    assert result.exit_code == 0, result.stderr
    rows = [line for line in (tmp_path / "table2.md").read_text().splitlines() if line.startswith("|")]
    widths = {len(re.split(r"(?<!\\)\|", line)) for line in rows}
    assert len(rows) >= 3 and len(widths) == 1, rows
    assert any(r"a\|b" in line for line in rows)


# ==== issue 19 (the boundary): paths, typed parameters, labels; each case one line and exit 2 ============
# The same contract as CASES above, on a few more files written into the same world.
CASES_19 = [
    ("benchmark-lone-surrogate", S + ["--benchmark", "{root}/surrogate.jsonl"], "U+D800"),
    ("compare-metric-pass-at-0", ["compare", "{good}", "{good}", "--metric", "solo_pass@0"], "K must be"),
    ("compare-metric-tax-at-0", ["compare", "{good}", "{good}", "--metric", "tax@0"], "K must be"),
    ("view-out-is-a-folder", ["view", "{good}", "--out", "{root}/empty_dir"], "is a folder"),
    ("ray-workers-above-the-problems", S + ["--limit", "2", "--ray-workers", "3"], "--ray-workers 3"),
    ("ray-address-unreachable", S + ["--limit", "2", "--ray-address", "127.0.0.1:1"], "127.0.0.1:1"),
    ("ray-address-without-port", S + ["--limit", "2", "--ray-address", "somewhere"], "HOST:PORT"),
]


@pytest.fixture(scope="module")
def world19(world):
    root, paths = world
    (root / "surrogate.jsonl").write_text('{"problem": "\\ud800 1+1?", "answer": "2"}\n')
    return root, paths


@pytest.mark.parametrize("name,argv,expect", CASES_19, ids=[c[0] for c in CASES_19])
def test_boundary_bad_input_is_one_line_exit_2_and_creates_nothing(world19, monkeypatch, name, argv, expect):
    import time

    start = time.monotonic()
    test_bad_input_is_one_line_exit_2_and_creates_nothing(world19, monkeypatch, name, argv, expect)
    assert time.monotonic() - start < 30  # an unreachable Ray address times out in seconds, never hangs


def test_an_unwritable_run_folder_is_refused_before_any_work(world, monkeypatch):
    """regrade, legibility and view on a folder the user cannot write: one line up front (legibility
    before any model loads). os.access is faked: permission bits do not bind root, who runs CI."""
    import os

    import tandem_eval.score.stage as score

    root, paths = world
    ro = root / "readonly_run"
    if not ro.exists():
        shutil.copytree(paths["good"], ro)
    real = os.access
    unwritable = lambda p, mode, **kw: not (mode & os.W_OK and str(ro) in str(p)) and real(p, mode, **kw)  # noqa: E731
    monkeypatch.setattr(os, "access", unwritable)
    monkeypatch.setattr(score, "_engine", lambda *a, **k: pytest.fail("a model was loaded before the check"))
    for argv in (
        ["regrade", str(ro)],
        ["legibility", "--run", str(ro), "--junior", paths["junior"]],
        ["view", str(ro)],
    ):
        before = _tree(root)
        result = runner.invoke(app, argv)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2, (argv, result.stdout, result.stderr, result.exception)
        assert len(lines) == 1 and "not writable" in lines[0], result.stderr
        assert _tree(root) == before


def test_label_is_a_label_never_a_path(world, monkeypatch, tmp_path):
    """--label /abs/path without --out: the run goes to runs/<label as one folder name> in the cwd."""
    _, paths = world
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere" / "x"
    args = S + ["--limit", "1", "--n", "1", "--max-new-tokens", "4", "--label", str(target), "-q"]
    result = runner.invoke(app, [a.format(**paths) for a in args])
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert not (tmp_path / "elsewhere").exists()
    (made,) = (tmp_path / "runs").iterdir()
    assert made.name == str(target).strip("/").replace("/", "-") and (made / "solo" / "COMPLETE").exists()


@pytest.mark.parametrize(
    "arg,expect",
    [
        ("seed=abc", "seed=abc: expected an integer"),
        ("max_length=abc", "max_length=abc: expected an integer"),
        ("batch_size=-3", "batch_size=-3: must be >= 1"),
        ("batch_size=auto", "batch_size=auto: expected an integer"),
        ("allow_vocab_mismatch=no", "allow_vocab_mismatch=no: expected true, false, 1 or 0"),
        ("add_bos_token=yes", "add_bos_token=yes: expected true, false, 1 or 0"),
        ("max_gen_toks=0", "max_gen_toks=0: must be >= 1"),
    ],
)
def test_lm_eval_model_args_are_typed_before_any_model_loads(tiny_pair, monkeypatch, arg, expect):
    import re

    pytest.importorskip("lm_eval")
    import tandem_eval.integrations.lm_eval_model as lm
    from tandem_eval.schemas import ConfigError

    monkeypatch.setattr(lm, "open_engines", lambda *a, **k: pytest.fail("engines opened before the check"))
    key, value = arg.split("=")
    with pytest.raises(ConfigError, match=re.escape(expect)):
        lm.TandemLM(senior=tiny_pair[0], schedule="solo", **{key: value})


@pytest.mark.parametrize("value,expected", [("true", True), ("FALSE", False), ("1", True), (0, False), (True, True)])
def test_lm_eval_booleans_read_as_written(value, expected):
    pytest.importorskip("lm_eval")
    from tandem_eval.integrations.lm_eval_model import _bool_arg

    assert _bool_arg("allow_vocab_mismatch", value) is expected


def test_held_out_settings_are_checked_before_training(capsys):
    code, out, err = _train(["--recipe", RECIPE, "--print", "--set", "heldout_ks=[8]", "heldout_n=2"], capsys)
    assert code == 2 and err.strip().count("\n") == 0, err
    assert "heldout_ks must be integers in [1, heldout_n=2], got [8]" in err


@pytest.mark.parametrize(
    "truth,shown", [(True, "bool True"), (float("inf"), "float inf"), ({"v": 1}, "dict {'v': 1}")], ids=str
)
def test_build_paper_sets_refuses_a_bool_inf_or_dict_ground_truth(tmp_path, capsys, truth, shown):
    import pandas as pd

    from tandem_eval.data import build_paper_sets as bps
    from tandem_eval.data.prompts import INSTRUCTION

    rows = [
        {"prompt": [{"role": "user", "content": f"p{i}" + INSTRUCTION}], "reward_model": {"ground_truth": truth}}
        for i in range(30)
    ]
    (tmp_path / "repo" / "aime24").mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(tmp_path / "repo" / "aime24" / "test.parquet")
    code = bps.main([str(tmp_path / "sets"), "--from-repo", str(tmp_path / "repo"), "--sets", "aime24"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: aime24: row 0"), err
    assert shown in err and "Traceback" not in err
    assert not (tmp_path / "sets" / "aime24.jsonl").exists()


def test_jsonl_with_raw_line_separators_loads_as_written(tmp_path):
    """build_paper_sets writes JSON with raw U+2028/U+0085 (ensure_ascii=False): lines end at \\n only."""
    from tandem_eval.data import build_paper_sets as bps
    from tandem_eval.data.benchmarks import load_benchmarks

    text = "a\u2028b\x85c\x0cd: 1+1?"
    path = bps._write_jsonl(
        tmp_path / "seps.jsonl", [{"problem": text, "answer": "2"}, {"problem": "x", "answer": "3"}]
    )
    assert "\u2028" in path.read_text(encoding="utf-8")
    problems = load_benchmarks([str(path)])
    assert [p.problem for p in problems] == [text, "x"] and [p.answer for p in problems] == ["2", "3"]


# ==== issue 33 (nothing lost v3): files of the wrong kind, checkpoints by content, pairing through ========
# ==== fingerprints, one writer at a time. Each row: one line, exit 2, nothing created or changed. ==========
@pytest.fixture(scope="module")
def world33(world):
    """Run folders with a file of the wrong kind; checkpoints whose files are of the wrong kind or whose
    config.json disagrees with the weights; runs of replaced weights; runs that must not be paired."""
    import dataclasses
    import fcntl
    import os

    import pandas as pd
    from run_fixtures import handoff_cfg, plant_wrong_kind, solo_cfg, write_run

    from tandem_eval.config import Sampling
    from tandem_eval.models import checkpoint_content
    from tandem_eval.run.results import RunFolder

    root, paths = world
    senior, junior = paths["senior"], paths["junior"]
    p = dict(paths)
    flags = {("tiny", "tiny/0000"): [True, False], ("tiny", "tiny/0001"): [False, False]}
    lens = pd.DataFrame({"benchmark": ["tiny"] * 4, "problem_id": ["tiny/0000"] * 2 + ["tiny/0001"] * 2})
    lens = lens.assign(sample_idx=[0, 1, 0, 1], junior_nll_mean=[1.0, 1.1, 1.2, 1.3])

    hashed = solo_cfg(senior, n=2, ks=(1, 2))  # a run made now records its senior's content
    hashed = dataclasses.replace(hashed, senior=dataclasses.replace(hashed.senior, content=checkpoint_content(senior)))

    def run(name, cfg=None, fl=flags, **kw) -> RunFolder:
        rf = write_run(root / "rf33" / name, cfg or hashed, fl, **kw)
        p[name] = str(rf.path)
        return rf

    for name, file, kind in (
        ("metrics_devzero", "metrics.json", "devzero"),
        ("config_fifo", "config.json", "fifo"),
        ("complete_folder", "COMPLETE", "folder"),
        ("samples_folder", "samples.parquet", "folder"),
        ("lens_fifo", "lens/jr/legibility.parquet", "fifo"),
    ):
        rf = run(name)
        if name == "lens_fifo":
            rf.write_table("lens/jr/legibility.parquet", lens)
        plant_wrong_kind(rf.path / file, kind)
    rf = run("metrics_list")
    rf.metrics_path.write_text("[1, 2]")
    rf = run("lens_entry_list")
    rf.update_metrics({"lens": [1]})

    # checkpoints: a file of the wrong kind, a config.json edited after saving
    def ckpt(name, damage):
        dst = root / name
        shutil.copytree(senior, dst)
        damage(dst)
        p[name] = str(dst)

    ckpt("ck_config_fifo", lambda d: plant_wrong_kind(d / "config.json", "fifo"))
    ckpt("ck_tokenizer_fifo", lambda d: plant_wrong_kind(d / "tokenizer.json", "fifo"))
    ckpt("ck_meta_fifo", lambda d: os.mkfifo(d / "tandem_meta.json"))

    def edit(**fields):
        def damage(d):
            cfg = json.loads((d / "config.json").read_text())
            cfg.update({k: v(cfg) for k, v in fields.items()})
            (d / "config.json").write_text(json.dumps(cfg))

        return damage

    ckpt("ck_wider_mlp", edit(intermediate_size=lambda c: 2 * c["intermediate_size"]))
    more = lambda c: c["num_hidden_layers"] + 2  # noqa: E731
    ckpt("ck_more_layers", edit(num_hidden_layers=more, layer_types=lambda c: c["layer_types"] + c["layer_types"]))
    (root / "nested.jinja").write_text(
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
        "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    )
    os.mkfifo(root / "template_fifo.jinja")

    # runs of a checkpoint whose weights were replaced since (recorded content hashes, as plan.validate writes)
    shutil.copytree(senior, root / "ck_replaced")
    p["ck_replaced"] = str(root / "ck_replaced")
    made = solo_cfg(p["ck_replaced"], n=2, ks=(1, 2))
    made = dataclasses.replace(made, senior=dataclasses.replace(made.senior, content=checkpoint_content(senior)))
    write_run(root / "replaced" / "solo", made, flags)
    p["replaced"] = str(root / "replaced")
    rf = write_run(root / "replaced_resume" / "solo", made, flags)
    rf.shard_dir.mkdir()
    pd.read_parquet(rf.samples_path).iloc[:2].to_parquet(rf.shard_dir / "part-00000.parquet")
    for f in (rf.done_path, rf.samples_path):
        f.unlink()
    p["replaced_resume"] = str(root / "replaced_resume")
    from safetensors.torch import load_file, save_file

    weights = load_file(root / "ck_replaced" / "model.safetensors")
    save_file({k: v + 0.5 for k, v in weights.items()}, root / "ck_replaced" / "model.safetensors", {"format": "pt"})

    # pairing: one id, two problems; two juniors; one label, two budgets; a regenerated solo run
    texts = {key: f"other {key[1]}" for key in flags}
    run("file_a", solo_cfg(senior, n=2, ks=(1, 2), label="A"))
    run("file_b", solo_cfg(senior, n=2, ks=(1, 2), label="B"), texts=texts)
    for name, who in (("scored_a", "/ckpt/a/junior"), ("scored_b", "/ckpt/b/junior")):
        rf = run(name)
        rf.write_table("lens/junior/legibility.parquet", lens)
        rf.update_metrics({"lens": {"junior": {"legibility": {"junior": who, "junior_content": who[-9:]}}}})
    for name, bench, budget in (("budget_a", "aime24", 3000), ("budget_b", "aime25", 1000)):
        cfg = solo_cfg(senior, n=2, ks=(1, 2), label="X", benchmarks=(bench,), sampling=Sampling(max_new_tokens=budget))
        run(name, cfg, {(bench, f"{bench}/0000"): [True, False]})
    out = root / "regenerated"
    solo = write_run(out / "solo", solo_cfg(senior, n=2, ks=(1, 2)), flags)
    record = {"path": str(solo.path.resolve()), "fingerprint": solo.config()["fingerprint"], "differs": []}
    hand = write_run(
        out / "handoff-paragraph", handoff_cfg(senior, junior, n=2, ks=(1, 2)), flags, extra={"solo_run": record}
    )
    hand.update_metrics({"solo_run": record["path"]})
    shutil.rmtree(out / "solo")
    write_run(out / "solo", solo_cfg(senior, n=2, ks=(1, 2), seed=9), flags)
    p["regenerated"] = str(out)

    # writes: a link planted in report's --out; a run folder another process (this one) is writing
    (root / "report_linked").mkdir()
    (root / "report_linked" / "table2.md").symlink_to(root / "victim.html")
    rf = run("being_written")
    fd = os.open(rf.lock_path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held until the test process exits (the fd is never closed)
    os.write(fd, json.dumps({"pid": os.getpid(), "host": "here", "started": "now"}).encode())
    return root, p


DAMAGES_33 = [
    ("metrics_devzero", "metrics.json"),
    ("config_fifo", "config.json"),
    ("complete_folder", "COMPLETE"),
    ("samples_folder", "samples.parquet"),
    ("lens_fifo", "legibility.parquet"),
    ("metrics_list", "metrics.json"),
]
H33 = ["handoff", "--senior", "{ck_replaced}", "--junior", "{junior}", "--n", "2", "--k", "1,2"]
CASES_33 = [
    (f"{cmd}-{damage}".replace("_", "-"), [a.replace("{run}", "{" + damage + "}") for a in argv], expect)
    for damage, expect in DAMAGES_33
    for cmd, argv in READERS
] + [
    (
        "legibility-lens-entry-not-an-object",
        ["legibility", "--run", "{lens_entry_list}", "--junior", "{junior}"],
        "lens",
    ),
    ("checkpoint-config-is-a-fifo", ["solo", "--senior", "{ck_config_fifo}"], "FIFO"),
    ("checkpoint-tokenizer-is-a-fifo", ["solo", "--senior", "{ck_tokenizer_fifo}"], "tokenizer.json is a FIFO"),
    ("tandem-meta-is-a-fifo", ["handoff", "--senior", "{ck_meta_fifo}"], "tandem_meta.json is a FIFO"),
    ("config-json-wider-than-the-weights", ["solo", "--senior", "{ck_wider_mlp}"], "does not match the weights"),
    ("config-json-more-layers-than-the-weights", ["solo", "--senior", "{ck_more_layers}"], "4 layers, the weights 2"),
    ("chat-template-with-nested-loops", S + ["--chat-template", "{root}/nested.jinja"], "within 5 s"),
    ("chat-template-is-a-fifo", S + ["--chat-template", "{root}/template_fifo.jinja"], "FIFO"),
    ("handoff-reusing-a-solo-run-of-replaced-weights", H33 + ["--out", "{replaced}"], "checkpoint content"),
    (
        "solo-resuming-after-the-weights-were-replaced",
        ["solo", "--senior", "{ck_replaced}", "--n", "2", "--k", "1,2", "--out", "{replaced_resume}"],
        "content changed",
    ),
    (
        "drift-after-the-weights-were-replaced",
        ["drift", "--run", "{replaced}/solo", "--junior", "{junior}"],
        "changed since",
    ),
    (
        "legibility-after-the-weights-were-replaced",
        ["legibility", "--run", "{replaced}/solo", "--junior", "{junior}"],
        "other weights",
    ),
    ("compare-two-files-of-one-name", ["compare", "{file_a}", "{file_b}", "--metric", "solo_pass@1"], "other problems"),
    (
        "compare-junior-nll-of-two-juniors",
        ["compare", "{scored_a}", "{scored_b}", "--metric", "junior_nll"],
        "different juniors",
    ),
    (
        "report-one-label-two-budgets",
        ["report", "{budget_a}", "{budget_b}", "--out", "{root}/r33", "--no-figures"],
        "different experiments",
    ),
    (
        "report-a-handoff-whose-solo-was-regenerated",
        ["report", "{regenerated}/handoff-paragraph", "--out", "{root}/r33", "--no-figures"],
        "measured against",
    ),
    (
        "view-a-handoff-beside-another-solo-run",
        ["view", "{regenerated}", "--out", "{root}/v33.html"],
        "measured against",
    ),
    (
        "report-out-holding-a-planted-link",
        ["report", "{good}", "--out", "{root}/report_linked", "--no-figures"],
        "symbolic link",
    ),
    (
        "legibility-while-another-process-writes-the-run",
        ["legibility", "--run", "{being_written}", "--junior", "{junior}"],
        "being written by another process",
    ),
    (
        "regrade-while-another-process-writes-the-run",
        ["regrade", "{being_written}"],
        "being written by another process",
    ),
]


@pytest.mark.timeout(120)  # a FIFO or /dev/zero read by mistake would hang or exhaust memory, not fail
@pytest.mark.parametrize("name,argv,expect", CASES_33, ids=[c[0] for c in CASES_33])
def test_files_of_the_wrong_kind_replaced_weights_and_unpaired_runs(world33, monkeypatch, name, argv, expect):
    test_bad_input_is_one_line_exit_2_and_creates_nothing(world33, monkeypatch, name, argv, expect)


FULL_DISK = [
    (
        "solo",
        ["solo", "--senior", "{senior}", "--limit", "1", "--n", "1", "--max-new-tokens", "4", "-q", "--out", "{out}"],
    ),
    ("report", ["report", "{run}", "--out", "{out}", "--no-figures"]),
    ("report-figures", ["report", "{run}", "--out", "{out}"]),
    ("view", ["view", "{run}", "--out", "{out}/view.html"]),
    ("regrade", ["regrade", "{run}"]),
]


@pytest.mark.parametrize("errno_name", ["ENOSPC", "EROFS"])
@pytest.mark.parametrize("name,argv", FULL_DISK, ids=[c[0] for c in FULL_DISK])
def test_a_full_or_read_only_disk_is_one_line_and_leaves_no_partial_file(
    world, monkeypatch, tmp_path, name, argv, errno_name
):
    """Every rename of a finished temporary file fails (os.replace: the step that makes a write visible)
    as on a full or read-only disk: one line naming the file and the fix, exit 2, no temporary file,
    no empty folder, nothing of the run folder changed."""
    import errno
    import os

    root, paths = world
    run = tmp_path / "run"
    shutil.copytree(paths["good"], run)
    monkeypatch.chdir(tmp_path)
    code = getattr(errno, errno_name)

    def full(*a, **k):
        raise OSError(code, os.strerror(code))

    before = _tree(tmp_path)
    monkeypatch.setattr(os, "replace", full)
    result = runner.invoke(app, [a.format(out=tmp_path / "out", run=run, **paths) for a in argv])
    monkeypatch.undo()
    lines = result.stderr.strip().splitlines()  # warnings of the work done before the write may precede it
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert "Traceback" not in result.stderr and [ln for ln in lines if ln.startswith("error:")] == lines[-1:]
    assert lines[-1].startswith("error: cannot write") and errno_name in lines[-1], result.stderr
    assert _tree(tmp_path) == before, sorted(set(_tree(tmp_path)) ^ set(before))


# ==== issue 45 (reliability v4): content identity a restored mtime cannot fool; every entry point's ======
# ==== bad input in one line, before any work. Each row: one line, exit 2, nothing created or changed. ====
@pytest.fixture(scope="module")
def world45(world33):
    """A checkpoint whose weights were rewritten in place with another checkpoint's bytes of the same size
    and its mtime restored to the nanosecond, after a solo run of the old weights was made (and hashed)."""
    import dataclasses
    import os

    from run_fixtures import solo_cfg, write_run
    from safetensors.torch import load_file, save

    from tandem_eval.models import checkpoint_content

    root, paths = world33
    p = dict(paths)
    flags = {("tiny", "tiny/0000"): [True, False], ("tiny", "tiny/0001"): [False, False]}
    ck = shutil.copytree(paths["senior"], root / "ck_rewritten")
    for f in ck.iterdir():  # files written a minute ago: the hash cache keeps their entries
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))
    made = solo_cfg(str(ck), n=2, ks=(1, 2))
    made = dataclasses.replace(made, senior=dataclasses.replace(made.senior, content=checkpoint_content(ck)))
    write_run(root / "rewritten" / "solo", made, flags)
    weights = ck / "model.safetensors"
    other = save({k: v + 0.5 for k, v in load_file(weights).items()}, {"format": "pt"})
    st = weights.stat()
    assert len(other) == st.st_size
    with open(weights, "r+b") as f:  # in place: the same inode and size
        f.write(other)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # as a time-preserving backup or sync tool does
    p.update(ck_rewritten=str(ck), rewritten=str(root / "rewritten"))

    # a solo run of the first two problems only, recorded by content (no warning on reuse)
    from tandem_eval.generate.plan import load_inputs

    two = solo_cfg(paths["senior"], n=2, ks=(1, 2), limit=2)
    two = dataclasses.replace(two, inputs=load_inputs(two)[1])
    two = dataclasses.replace(two, senior=dataclasses.replace(two.senior, content=checkpoint_content(paths["senior"])))
    write_run(root / "rf45" / "two_problems", two, flags)
    p["two_problems"] = str(root / "rf45" / "two_problems")

    # a benchmark row nested past the recursion limit; weights only a plain pickle can hold
    deep = "[" * 100_000 + "]" * 100_000
    (root / "deep.jsonl").write_text(
        '{"problem": "1+1?", "answer": "2"}\n{"problem": "x", "answer": "2", "extra": ' + deep + "}\n"
    )
    import pickle

    pick = shutil.copytree(paths["senior"], root / "ck_pickle_bin")
    weights = load_file(pick / "model.safetensors")
    (pick / "model.safetensors").unlink()
    with open(pick / "pytorch_model.bin", "wb") as f:
        pickle.dump(dict(weights), f)  # what torch.load(weights_only=True), and so transformers, refuses
    p["ck_pickle_bin"] = str(pick)

    # complete runs whose COMPLETE is an older marker: a run from before records (no inputs recorded: read,
    # never written), and one that records its inputs (the marker was replaced: refused by every reader)
    for name, cfg in (("legacy_old", solo_cfg(paths["senior"], n=2, ks=(1, 2))), ("legacy_replaced", two)):
        rf = write_run(root / "rf45" / name, cfg, flags)
        rf.done_path.write_text("2026-11-30T04:27:21+0000\n")
        p[name] = str(rf.path)

    # a solo run's legibility scored by junior folder J (content a...), beside a handoff that ran J as b...
    import pandas as pd
    from run_fixtures import handoff_cfg

    out = root / "rf45" / "lens_other_junior"
    solo = write_run(out / "solo", solo_cfg(paths["senior"], n=2, ks=(1, 2)), flags)
    lens = pd.DataFrame({"benchmark": ["tiny"] * 4, "problem_id": ["tiny/0000"] * 2 + ["tiny/0001"] * 2})
    solo.write_table("lens/junior/legibility.parquet", lens.assign(sample_idx=[0, 1, 0, 1], junior_nll_mean=1.0))
    jr = str(Path(paths["junior"]).resolve())
    solo.update_metrics({"lens": {"junior": {"legibility": {"junior": jr, "junior_content": "a" * 64}}}})
    record = {"path": str(solo.path.resolve()), "fingerprint": solo.config()["fingerprint"], "differs": []}
    cfg = handoff_cfg(paths["senior"], jr, n=2, ks=(1, 2))
    cfg = dataclasses.replace(cfg, junior=dataclasses.replace(cfg.junior, content="b" * 64))
    hand = write_run(out / "handoff-paragraph", cfg, flags, extra={"solo_run": record})
    hand.update_metrics({"solo_run": record["path"]})
    p["lens_other_junior"] = str(out)
    return root, p


H45 = ["handoff", "--senior", "{ck_rewritten}", "--junior", "{junior}", "--n", "2", "--k", "1,2"]
CASES_45 = [
    ("handoff-reusing-a-solo-run-of-weights-rewritten-with-mtime-restored", H45 + ["--out", "{rewritten}"], "content"),
    # ---- up-front bounds: refused before any model loads or anything is generated
    ("threads-above-the-cores", S + ["--threads", "100000"], "--threads 100000 exceeds the"),
    ("handoff-threads-above-the-cores", H + ["--threads", "100000"], "--threads 100000 exceeds the"),
    ("legibility-threads-above-the-cores", ["legibility", "--run", "{good}", "--threads", "100000"], "exceeds the"),
    ("batch-size-absurd", S + ["--batch-size", "1000000000"], "--batch-size must be at most 16384"),
    ("grader-startup-timeout-inf", S + ["--grader-startup-timeout", "inf"], "--grader-startup-timeout must be"),
    ("grader-startup-timeout-1e400", S + ["--grader-startup-timeout", "1e400"], "seconds and finite"),
    ("grader-startup-timeout-nan", H + ["--grader-startup-timeout", "nan"], "--grader-startup-timeout"),
    ("out-inside-a-complete-run-folder", S + ["--out", "{good}"], "inside the run folder"),
    ("handoff-out-deep-inside-a-run-folder", H + ["--out", "{good}/a/b"], "inside the run folder"),
    (
        "handoff-allow-solo-mismatch-with-a-solo-run-of-other-problems",
        H + ["--n", "2", "--k", "1,2", "--solo-run", "{two_problems}", "--allow-solo-mismatch"],
        "never of other problems",
    ),
    # ---- tracebacks that are one line now
    ("benchmark-row-nested-past-the-recursion-limit", S + ["--benchmark", "{root}/deep.jsonl"], "line 2: JSON nested"),
    ("pytorch-model-bin-a-plain-pickle", ["solo", "--senior", "{ck_pickle_bin}"], "does not load as weights only"),
    # ---- an older COMPLETE marker: read-only for writers, refused where it replaced a newer one
    ("legibility-on-a-legacy-marker-run", ["legibility", "--run", "{legacy_old}", "--junior", "{junior}"], "read-only"),
    ("drift-on-a-legacy-marker-run", ["drift", "--run", "{legacy_old}", "--junior", "{junior}"], "read-only"),
    ("regrade-on-a-legacy-marker-run", ["regrade", "{legacy_old}"], "read-only"),
    (
        "report-of-a-run-whose-marker-was-replaced",
        ["report", "{legacy_replaced}", "--out", "{root}/r45", "--no-figures"],
        "marker was replaced",
    ),
    (
        "legibility-of-a-run-whose-marker-was-replaced",
        ["legibility", "--run", "{legacy_replaced}", "--junior", "{junior}"],
        "an older marker that records no tables",
    ),
    # ---- a lens table of other junior weights than the handoff beside it ran
    (
        "report-pairing-a-lens-of-replaced-junior-weights",
        ["report", "{lens_other_junior}", "--out", "{root}/r45", "--no-figures"],
        "weights were replaced in between",
    ),
    ("view-pairing-a-lens-of-replaced-junior-weights", ["view", "{lens_other_junior}"], "weights were replaced"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name,argv,expect", CASES_45, ids=[c[0] for c in CASES_45])
def test_reliability_v4_bad_input_is_one_line_exit_2_and_creates_nothing(world45, monkeypatch, name, argv, expect):
    test_bad_input_is_one_line_exit_2_and_creates_nothing(world45, monkeypatch, name, argv, expect)


def _api_calls():
    """Python API calls a careless caller makes: (id, a thunk, the one-line ConfigError's substring)."""
    from tandem_eval.config import EvalConfig, ModelSpec
    from tandem_eval.data.benchmarks import load_benchmark, load_benchmarks
    from tandem_eval.generate.grading import grade

    senior = ModelSpec("toy:tandem")
    return [
        ("evalconfig-ks-a-float", lambda: EvalConfig(senior=senior, ks=(1.5,)), "--k must be integers"),
        ("evalconfig-ks-above-n", lambda: EvalConfig(senior=senior, n=2, ks=(4,)), "exceed --n 2"),
        ("evalconfig-senior-a-number", lambda: EvalConfig(senior=3), "EvalConfig.senior must be ModelSpec"),
        ("evalconfig-limit-negative", lambda: EvalConfig(senior=senior, limit=-1), "--limit must be"),
        ("grade-gold-a-bool", lambda: grade("\\boxed{2}", True), "gold must be a string or a finite number"),
        ("grade-gold-inf", lambda: grade("\\boxed{2}", float("inf")), "gold must be a string or a finite number"),
        ("grade-prediction-none", lambda: grade(None, "2"), "prediction must be a string"),
        ("grade-timeout-nan", lambda: grade("\\boxed{2}", "2", timeout=float("nan")), "timeout"),
        ("load-benchmarks-limit-negative", lambda: load_benchmarks(["tiny"], limit=-1), "--limit must be"),
        ("load-benchmarks-limit-zero", lambda: load_benchmarks(["tiny"], limit=0), "--limit must be"),
        ("load-benchmark-limit-a-float", lambda: load_benchmark("tiny", limit=2.5), "--limit must be"),
    ]


@pytest.mark.parametrize("case", range(11), ids=[c[0] for c in _api_calls()])
def test_the_python_api_refuses_bad_arguments_with_the_clis_one_line(case):
    from tandem_eval.schemas import ConfigError

    name, call, expect = _api_calls()[case]
    with pytest.raises(ConfigError) as e:
        call()
    assert expect in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_the_python_api_accepts_what_it_can_read_unambiguously():
    """A checkpoint as a string is the ModelSpec it names; a numeric gold is graded as its str()."""
    from tandem_eval.config import EvalConfig, ModelSpec
    from tandem_eval.generate.grading import grade

    cfg = EvalConfig(senior="toy:tandem", junior=Path("/ckpt/jr"), mode="handoff", schedule="paragraph")
    assert cfg.senior == ModelSpec("toy:tandem") and cfg.junior == ModelSpec("/ckpt/jr")
    assert (
        cfg.fingerprint()
        == EvalConfig(
            senior=ModelSpec("toy:tandem"), junior=ModelSpec("/ckpt/jr"), mode="handoff", schedule="paragraph"
        ).fingerprint()
    )
    assert grade("so \\boxed{2}", 2).correct and not grade("so \\boxed{3}", 2).correct
    assert grade("so \\boxed{0.5}", 0.5) == grade("so \\boxed{0.5}", "0.5")


def test_tandem_train_output_dir_a_file_is_refused_before_any_model_loads(tmp_path, monkeypatch, capsys):
    import trainer.run

    (tmp_path / "a_file").write_text("x")
    monkeypatch.setattr(trainer.run, "build_trainer", lambda *a, **k: pytest.fail("models loaded before the check"))
    for out, expect in ((tmp_path / "a_file", "is a file"), (tmp_path / "a_file" / "sub", "a_file is a file")):
        code, _, err = _train(["--recipe", RECIPE, "--set", f"output_dir={out}"], capsys)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("tandem-train: error: output_dir"), err
        assert expect in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


@pytest.fixture
def real_inputs(tmp_path, monkeypatch):
    """trainer.real's main with packaged.install failing the test: every input is checked before it."""
    import trainer.real

    monkeypatch.setattr(trainer.real.packaged, "install", lambda *a, **k: pytest.fail("installed before the check"))
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "no_block.md").write_text("# results\n")
    for name, text in (("truncated", '{"senior-solo": {"wall_s": 1'), ("a_list", "[1, 2]"), ("bad_entry", '{"a": 1}')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "steps.json").write_text(text)
    return trainer.real.main


@pytest.mark.parametrize(
    "argv,expect",
    [
        (["--out", "{t}/a_file"], "is a file"),
        (["--out", "{t}/a_file/sub"], "a_file is a file"),
        (["--out", "{t}/truncated"], "steps.json is not valid JSON"),
        (["--out", "{t}/a_list"], "steps.json is not an object of step records"),
        (["--out", "{t}/bad_entry"], "steps.json is not an object of step records"),
        (["--out", "{t}/new", "--readme", "{t}/no_block.md"], "has no <!-- real-summary:begin -->"),
        (["--out", "{t}/new", "--readme", "{t}/missing.md"], "--readme"),
    ],
    ids=[
        "out-a-file",
        "out-below-a-file",
        "steps-truncated",
        "steps-a-list",
        "steps-entry-not-an-object",
        "readme-without-its-block",
        "readme-missing",
    ],
)
def test_trainer_real_checks_its_inputs_before_any_step(real_inputs, tmp_path, capsys, argv, expect):
    before = _tree(tmp_path)
    code = real_inputs([a.format(t=tmp_path) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert expect in err[0], err[0]
    assert _tree(tmp_path) == before


def test_lm_evals_own_device_and_batch_size_fill_in_what_model_args_leave_unset(tiny_pair, monkeypatch):
    """`tandem-eval lm-eval --model tandem --model_args ...,device=cpu --device cuda`: lm-eval passes both
    device values to the constructor (a TypeError before); model_args' own value is used."""
    pytest.importorskip("lm_eval")
    import tandem_eval.integrations.lm_eval_model as lm

    seen: dict = {}
    monkeypatch.setattr(lm.TandemLM, "__init__", lambda self, **kw: seen.update(kw))
    extra = {"device": "cuda", "batch_size": 8, "max_batch_size": None}
    lm.TandemLM.create_from_arg_string("senior=x,device=cpu", extra)
    assert seen == {"senior": "x", "device": "cpu", "batch_size": 8}
    seen.clear()
    lm.TandemLM.create_from_arg_obj({"senior": "x", "batch_size": 2}, extra)
    assert seen == {"senior": "x", "batch_size": 2, "device": "cuda"}
    monkeypatch.undo()
    model = lm.TandemLM.create_from_arg_string(f"senior={tiny_pair[0]},schedule=solo,device=cpu", {"device": "cuda"})
    try:
        assert model.options.device == "cpu"
    finally:
        model.close()


def test_lm_eval_tax_names_a_wrong_filter_and_the_filters_present(tmp_path):
    from tandem_eval.integrations.lm_eval_tax import lm_eval_tax
    from tandem_eval.schemas import ConfigError

    for run in ("solo", "paragraph"):
        (tmp_path / run).mkdir()
        lines = [
            {"doc_id": d, "filter": f, "metrics": ["exact_match"], "exact_match": float(d % 2)}
            for d in range(4)
            for f in ("strict-match", "flexible-extract")
        ]
        (tmp_path / run / "samples_gsm8k_2026-12-04.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(ConfigError) as e:
        lm_eval_tax(tmp_path / "solo", tmp_path / "paragraph", filter_name="flexible", n_boot=50)
    assert "filter 'flexible' is not in" in str(e.value) and "flexible-extract, strict-match" in str(e.value)
    tax = lm_eval_tax(tmp_path / "solo", tmp_path / "paragraph", filter_name="strict-match", n_boot=50)
    assert tax["macro"]["pass@1"]["tax"]["estimate"] == 0.0


def test_a_rerun_on_a_complete_folder_prints_the_samples_pass_at_k_not_an_edited_metrics_json(world, tmp_path):
    """solo on a complete folder reuses it (nothing generated) and prints pass@k recomputed from its
    verified samples; an edited metrics.json is named in a warning, its numbers never shown."""
    _, paths = world
    argv = ["solo", "--senior", paths["senior"], "--limit", "2", "--n", "1", "--max-new-tokens", "4", "-q"]
    first = runner.invoke(app, [*argv, "--out", str(tmp_path)])
    assert first.exit_code == 0, (first.stderr, first.exception)
    metrics = tmp_path / "solo" / "metrics.json"
    m = json.loads(metrics.read_text())
    m["pass_at_k"]["macro"]["pass@1"] = 99.0
    m["pass_at_k"]["per_benchmark"]["tiny"]["pass@1"] = 99.0
    metrics.write_text(json.dumps(m))
    again = runner.invoke(app, [*argv, "--out", str(tmp_path)])
    assert again.exit_code == 0, (again.stderr, again.exception)
    assert "99.0" not in again.stdout and again.stdout == first.stdout
    loud = runner.invoke(app, [a for a in argv if a != "-q"] + ["--out", str(tmp_path)])  # -q: errors only
    assert "metrics.json: its pass@k differ from the samples'" in loud.stderr
