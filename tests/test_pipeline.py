"""Run folders end to end: resume equivalence after a kill, config mismatch refusal, sharding + merge,
and the CLI's one-line errors for bad input."""

import dataclasses
import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.config import EvalConfig, ModelSpec, Sampling
from tandem_eval.generate.execute import merge_shards, open_engines, run_eval, run_handoff
from tandem_eval.run.results import RunFolder
from tandem_eval.schemas import ConfigError, RunFolderError
from tandem_eval.toy.tiny import CHATML_TEMPLATE

SAMPLING = Sampling(temperature=1.0, top_p=0.9, top_k=50, max_new_tokens=24)
COLS = ["benchmark", "problem_id", "sample_idx", "token_ids", "author_mask", "correct", "grade_status"]


@pytest.fixture(scope="module")
def cfg(tiny_pair):
    return EvalConfig(
        senior=ModelSpec(tiny_pair[0]),
        junior=ModelSpec(tiny_pair[1]),
        mode="handoff",
        schedule="paragraph",
        benchmarks=("tiny",),
        n=3,
        ks=(1, 2),
        limit=4,
        sampling=SAMPLING,
        batch_size=4,
    )


@pytest.fixture(scope="module")
def engines(cfg):
    return open_engines(cfg)


def _samples(rf):
    return rf.load_samples()[COLS].sort_values(COLS[:3]).reset_index(drop=True)


def test_killed_run_resumes_to_the_same_result(cfg, engines, tmp_path):
    full = run_eval(cfg, tmp_path / "full", engines, progress=False, flush_every=4)

    class Killed(Exception):
        pass

    def kill(n):
        raise Killed

    with pytest.raises(Killed):
        run_eval(cfg, tmp_path / "killed", engines, progress=False, flush_every=4, on_flush=kill)
    partial = RunFolder(tmp_path / "killed")
    assert not partial.is_complete() and len(partial.load_samples()) == 4
    resumed = run_eval(cfg, tmp_path / "killed", engines, progress=False, flush_every=4)
    assert resumed.is_complete()
    a, b = _samples(full), _samples(resumed)
    assert len(b) == 12 and not b.duplicated(COLS[:3]).any()
    pd.testing.assert_frame_equal(a, b)
    assert full.metrics()["pass_at_k"] == resumed.metrics()["pass_at_k"]
    cfg_json = json.loads((tmp_path / "full" / "config.json").read_text())
    assert cfg_json["provenance"]["versions"]["torch"] and "commit" in cfg_json["provenance"]["git"]
    assert cfg_json["config"]["sampling"]["temperature"] == 1.0


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_a_stopped_run_keeps_its_finished_traces_ungraded_and_resumes_to_the_same_result(
    cfg, engines, tmp_path, monkeypatch, stop
):
    """Ctrl-C (KeyboardInterrupt) or SIGTERM (SystemExit, as the CLI turns it) after 5 traces finished, with
    flushes every 64: the 5 are stored, ungraded, without waiting on the grader (before, up to 63 finished
    traces were lost and nothing was said); the rerun grades them and generates the rest, as an
    uninterrupted run."""
    import tandem_eval.generate.execute as generate

    full = run_eval(cfg, tmp_path / "full", engines, progress=False)
    real = generate.cogenerate

    def stopped_after_5(*args, **kwargs):
        for i, trace in enumerate(real(*args, **kwargs)):
            if i == 5:
                raise stop()
            yield trace

    monkeypatch.setattr(generate, "cogenerate", stopped_after_5)
    with pytest.raises(stop):
        run_eval(cfg, tmp_path / "stopped", engines, progress=False)
    kept = pd.concat(pd.read_parquet(p) for p in RunFolder(tmp_path / "stopped").shards())
    assert len(kept) == 5 and set(kept["grade_status"]) == {"ungraded"}
    monkeypatch.setattr(generate, "cogenerate", real)
    resumed = run_eval(cfg, tmp_path / "stopped", engines, progress=False)
    pd.testing.assert_frame_equal(_samples(full), _samples(resumed))
    assert full.metrics()["pass_at_k"] == resumed.metrics()["pass_at_k"]


def test_existing_folder_with_other_config_is_refused(cfg, engines, tmp_path):
    run_eval(dataclasses.replace(cfg, limit=1, n=2), tmp_path / "r", engines, progress=False)
    with pytest.raises(RunFolderError, match="holds a different run"):
        run_eval(dataclasses.replace(cfg, limit=1, n=3), tmp_path / "r", engines, progress=False)


def test_a_writer_reads_the_folder_again_under_its_lock_not_what_its_plan_read(cfg, engines, tmp_path):
    """The plan reads an existing config.json without the lock; another writer may restart the folder
    with other settings before this one takes the lock. What the writer trusts is read again under it:
    the folder, holding no sample, is started afresh with this run's settings (the record the plan read
    would have filled a folder whose config.json names the other run, and no reader could verify it).
    RunFolder.check_holds reads config.json whenever it is called: the plan's check and the writer's each."""
    from tandem_eval.generate.execute import execute
    from tandem_eval.generate.plan import plan_run

    mine = dataclasses.replace(cfg, limit=1, n=1, ks=(1,))
    other = dataclasses.replace(mine, seed=mine.seed + 1)
    out = tmp_path / "r"
    RunFolder(out).init(mine)  # a run of these settings stopped before its first sample
    plan = plan_run(mine, out)  # reads that config.json: the same experiment
    with RunFolder(out).writing(other):  # meanwhile another writer restarts it for other settings
        pass
    assert RunFolder(out).config()["fingerprint"] != plan.fingerprint
    (rf,) = execute(plan, engines, progress=False)
    assert rf.config()["fingerprint"] == plan.fingerprint  # started afresh under the lock, as this run
    assert len(RunFolder(out).verify().load_samples()) == 1


def test_handoff_reuses_solo_and_reports_tax(cfg, tmp_path):
    cfg = dataclasses.replace(cfg, schedule="chunk:4")  # switches within 24 tokens (random models write no paragraphs)
    solo, handoff, tax = run_handoff(cfg, tmp_path, progress=False)
    assert solo.config()["config"]["mode"] == "solo" and solo.config()["config"]["junior"] is None
    hs = handoff.load_samples()
    assert set(hs["mode"]) == {"handoff"}
    for mask, n_handoffs in zip(hs.author_mask, hs.n_handoffs):
        mask = np.asarray(mask)
        assert len(mask) == 0 or mask[0] == 1  # the senior writes first
        # every author change visible in the tokens was counted (a switch at the budget's end adds no token)
        assert np.count_nonzero(np.diff(mask)) <= n_handoffs <= np.count_nonzero(np.diff(mask)) + 1
    assert (hs.n_handoffs > 0).any(), "no trace handed off: the paragraph schedule never switched authors"
    assert {"per_benchmark", "per_group", "macro"} <= set(tax)
    assert handoff.metrics()["tax"]["macro"]["pass@1"]["n_problems"] == 4
    # a second call finds both folders complete and regenerates nothing
    mtime = (solo.path / "samples.parquet").stat().st_mtime
    run_handoff(cfg, tmp_path, progress=False)
    assert (solo.path / "samples.parquet").stat().st_mtime == mtime


def test_a_reused_handoff_run_records_its_missing_tax_under_the_folder_lock(cfg, tmp_path, monkeypatch):
    """A complete handoff run whose metrics.json lacks the tax (written before the tax preceded COMPLETE)
    gets it on a rerun, merged into metrics.json under the run's lock: lens commands merge their keys
    under that lock, so a merge made without it, beside one of them, could drop theirs."""
    from tandem_eval import files

    cfg = dataclasses.replace(cfg, limit=1, n=1, ks=(1,), sampling=dataclasses.replace(SAMPLING, max_new_tokens=4))
    _, handoff, tax = run_handoff(cfg, tmp_path, progress=False)
    metrics = handoff.metrics()
    del metrics["tax"]
    handoff.metrics_path.write_text(json.dumps({**metrics, "lens": {"jr": {"legibility": {}}}}))
    held, update = [], RunFolder.update_metrics

    def locked_update(self, new):
        held.append(files.live_holder(self.lock_path) is not None)
        return update(self, new)

    monkeypatch.setattr(RunFolder, "update_metrics", locked_update)
    _, again, tax_again = run_handoff(cfg, tmp_path, progress=False)
    assert held == [True]  # merged once, with the lock held
    assert tax_again == tax and again.metrics()["lens"] == {"jr": {"legibility": {}}}  # the lens key kept


def test_runs_another_process_finished_after_the_plan_looked_are_reused_and_get_their_tax(cfg, tmp_path):
    """Planned while OUT was empty, executed after another process finished both runs there: nothing is
    generated again (the writer finds COMPLETE under its lock), and a handoff run lacking the tax gets it
    once that lock is released (recording it takes the lock again, which is not reentrant)."""
    from tandem_eval.generate.execute import execute
    from tandem_eval.generate.plan import plan_handoff

    cfg = dataclasses.replace(cfg, limit=1, n=1, ks=(1,), sampling=dataclasses.replace(SAMPLING, max_new_tokens=4))
    plan = plan_handoff(cfg, tmp_path)
    assert not any(run.complete for run in plan.runs)
    solo, handoff, tax = run_handoff(cfg, tmp_path, progress=False)  # the other process
    metrics = handoff.metrics()
    del metrics["tax"]
    handoff.metrics_path.write_text(json.dumps(metrics))
    stamps = [rf.samples_path.stat().st_mtime_ns for rf in (solo, handoff)]
    folders = execute(plan, progress=False)
    assert [rf.samples_path.stat().st_mtime_ns for rf in folders] == stamps  # reused, not regenerated
    assert folders[1].metrics()["tax"] == tax


def test_a_damaged_complete_handoff_run_is_refused_before_the_solo_run_is_made(cfg, tmp_path):
    """The plan opens and verifies every complete run folder it will reuse: a handoff folder whose samples
    were edited is refused up front, not after a whole solo run (OUT/solo is never created)."""
    cfg = dataclasses.replace(cfg, limit=1, n=1, ks=(1,), sampling=dataclasses.replace(SAMPLING, max_new_tokens=4))
    _, handoff, _ = run_handoff(cfg, tmp_path, progress=False)
    shutil.rmtree(tmp_path / "solo")
    samples = pd.read_parquet(handoff.samples_path)
    samples.loc[0, "correct"] = not samples.loc[0, "correct"]
    samples.to_parquet(handoff.samples_path)
    with pytest.raises(RunFolderError, match="changed or truncated"):
        run_handoff(cfg, tmp_path, progress=False)
    assert not (tmp_path / "solo").exists()


def test_shards_merge_to_the_unsharded_run(cfg, engines, tmp_path):
    solo = dataclasses.replace(cfg, mode="solo", schedule="solo", junior=None)
    whole = run_eval(solo, tmp_path / "whole", engines, progress=False)
    parts = [
        run_eval(dataclasses.replace(solo, num_shards=2, shard_index=i), tmp_path / f"p{i}", engines, progress=False)
        for i in range(2)
    ]
    merged = merge_shards([p.path for p in parts], tmp_path / "merged")
    pd.testing.assert_frame_equal(_samples(whole), _samples(merged))
    with pytest.raises(RunFolderError, match="do not cover"):
        merge_shards([parts[0].path], tmp_path / "bad")


def test_config_rejects_contradictions():
    with pytest.raises(ConfigError, match="exceed --n"):
        EvalConfig(senior=ModelSpec("x"), n=2, ks=(1, 4))
    with pytest.raises(ConfigError, match="needs a junior"):
        EvalConfig(senior=ModelSpec("x"), mode="handoff", schedule="paragraph")
    with pytest.raises(ConfigError, match="unknown key"):
        from tandem_eval.schemas import from_dict

        from_dict(EvalConfig, {"senior": {"path": "x"}, "temprature": 1})


runner = CliRunner()


def _err(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


def test_cli_bad_inputs(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default --out is runs/<label> under the working directory
    senior, junior = tiny_pair
    assert "checkpoint not found" in _err(["solo", "--senior", str(tmp_path / "nope")])
    assert "no config.json" in _err(["solo", "--senior", str(tmp_path)])
    assert "valid: aime24" in _err(["solo", "--senior", senior, "--benchmark", "nonsense"])
    assert "exceed --n" in _err(["solo", "--senior", senior, "--n", "2", "--k", "1,4"])
    assert "--k must be" in _err(["solo", "--senior", senior, "--k", "one"])
    assert "unknown schedule" in _err(["handoff", "--senior", senior, "--junior", junior, "--schedule", "nope"])
    assert "no --junior given" in _err(["handoff", "--senior", senior])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "1+1?", "answer": "2"}\n{"problem": "2+2?", "answer": ""}\n')
    assert "line 2" in _err(["solo", "--senior", senior, "--benchmark", str(bad), "--out", str(tmp_path / "o")])
    assert not (tmp_path / "runs").exists() and not (tmp_path / "o").exists()  # failed commands leave nothing


def test_cli_vocab_mismatch_and_missing_chat_template(tiny_pair, tmp_path):
    from tandem_eval.toy.tiny import build_model, train_tokenizer

    senior, _ = tiny_pair
    other_tok = train_tokenizer(["completely different corpus " * 3] * 20, vocab_size=300)
    other = tmp_path / "other"
    build_model(other_tok).save_pretrained(other)
    other_tok.save_pretrained(other)
    msg = _err(["handoff", "--senior", senior, "--junior", str(other), "--limit", "1", "--out", str(tmp_path / "o")])
    assert "tokenizers differ" in msg and "--allow-vocab-mismatch" in msg
    other_tok.chat_template = None
    plain = tmp_path / "plain"
    build_model(other_tok).save_pretrained(plain)
    other_tok.save_pretrained(plain)
    (plain / "chat_template.jinja").unlink(missing_ok=True)
    assert "no chat_template" in _err(["solo", "--senior", str(plain), "--limit", "1", "--out", str(tmp_path / "p")])
    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML_TEMPLATE)
    ok = runner.invoke(
        app,
        [
            "solo",
            "--senior",
            str(plain),
            "--chat-template",
            str(template),
            "--limit",
            "1",
            "--n",
            "1",
            "--k",
            "1",
            "--max-new-tokens",
            "4",
            "--out",
            str(tmp_path / "p"),
            "-q",
        ],
    )
    assert ok.exit_code == 0, ok.output
    cfg = json.loads((tmp_path / "p" / "solo" / "config.json").read_text())["config"]
    assert cfg["chat_template"] == CHATML_TEMPLATE


def test_cli_help_explains_commands():
    out = subprocess.run([sys.executable, "-m", "tandem_eval.cli", "--help"], capture_output=True, text=True).stdout
    assert "handoff" in out and "solo" in out
    out = runner.invoke(app, ["handoff", "--help"]).output
    assert "--schedule" in out and "--junior" in out


def test_text_level_handoff_with_different_vocabularies(tiny_pair, tmp_path):
    """--allow-vocab-mismatch: the junior re-tokenizes text; the trace stays in senior ids."""
    from tandem_eval.toy.tiny import build_model, train_tokenizer

    senior, _ = tiny_pair
    other_tok = train_tokenizer(["Tom has 3 pens.\n\nSo he has 5 pens. The answer is \\boxed{5}."] * 40, vocab_size=330)
    other = tmp_path / "other"
    build_model(other_tok, seed=3).save_pretrained(other)
    other_tok.save_pretrained(other)
    cfg = EvalConfig(
        senior=ModelSpec(senior),
        junior=ModelSpec(str(other)),
        mode="handoff",
        schedule="chunk:4",
        n=2,
        ks=(1,),
        limit=2,
        sampling=SAMPLING,
        allow_vocab_mismatch=True,
        junior_chat_template=CHATML_TEMPLATE,
    )
    rf = run_eval(cfg, tmp_path / "run", progress=False)
    df = rf.load_samples()
    assert rf.config()["config"]["allow_vocab_mismatch"] is True
    assert rf.config()["config"]["junior_chat_template"] == CHATML_TEMPLATE
    for mask, ids, lps in zip(df.author_mask, df.token_ids, df.logprobs):
        assert len(mask) == len(ids) == len(lps) and 0 in list(mask) and 1 in list(mask)
        assert all(np.isnan(lp) == (m == 0) for m, lp in zip(mask, lps))  # junior log-probs are NaN


def test_default_k_is_the_powers_of_two_up_to_n_plus_n(tiny_pair, tmp_path):
    from tandem_eval.config import default_ks

    assert default_ks(1) == (1,) and default_ks(2) == (1, 2) and default_ks(6) == (1, 2, 4, 6)
    assert default_ks(8) == (1, 2, 4, 8) and default_ks(12) == (1, 2, 4, 8, 12)
    args = ["solo", "--senior", tiny_pair[0], "--n", "2", "--limit", "1", "--max-new-tokens", "4"]
    ok = runner.invoke(app, args + ["--out", str(tmp_path / "o"), "-q"])
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "o" / "solo" / "config.json").read_text())["config"]["ks"] == [1, 2]
    # the run folder, then the results table (markdown: stdout is not a terminal), then only the
    # traces' outcome line
    lines = ok.stdout.rstrip().splitlines()
    rows = [i for i, line in enumerate(lines) if line.startswith("| ")]
    assert rows and any("run folder" in line for line in lines[: rows[0]])
    assert lines[rows[0]].startswith("| benchmark | solo pass@1 | solo pass@2 |")
    tail = lines[rows[-1] + 1 :]
    assert len(tail) == 1 and tail[0].startswith("solo: 2 traces, ") and "truncated at the token budget" in tail[0]


def test_engine_crash_before_any_sample_leaves_no_run_folder(cfg, engines, tmp_path, monkeypatch):
    import tandem_eval.generate.execute as generate

    def crash(*args, **kwargs):
        raise RuntimeError("engine died")

    monkeypatch.setattr(generate, "_generate", crash)
    with pytest.raises(RuntimeError, match="engine died"):
        run_eval(cfg, tmp_path / "a" / "b" / "run", engines, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_prompts_longer_than_the_context_get_zero_token_samples_and_a_warning(cfg, engines, tmp_path, caplog):
    from tandem_eval.data import prompt_ids
    from tandem_eval.models import load_tokenizer

    bench = tmp_path / "mixed.jsonl"
    long_problem = "Tom has 3 pens and buys more pens. " * 30 + "How many pens?"
    rows = [{"problem": "What is 1 + 1?", "answer": "2"}, {"problem": long_problem, "answer": "3"}]
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    short = len(prompt_ids(load_tokenizer(cfg.senior.path), rows[0]["problem"]))
    solo = dataclasses.replace(
        cfg,
        mode="solo",
        schedule="solo",
        junior=None,
        benchmarks=(str(bench),),
        limit=None,
        n=2,
        sampling=dataclasses.replace(SAMPLING, max_context=short + 8),
    )
    with caplog.at_level("WARNING", logger="tandem_eval"):
        rf = run_eval(solo, tmp_path / "run", engines, progress=False)
    assert "0-token samples" in caplog.text and "mixed/" in caplog.text
    df = rf.load_samples()
    assert sorted(df.n_tokens.eq(0).groupby(df.problem_id).all()) == [False, True]
    metrics = json.loads(rf.metrics_path.read_text())  # strict JSON: no NaN anywhere
    assert metrics["n_problems"] == 2 and metrics["pass_at_k"]["macro"]


def test_metrics_of_all_zero_token_samples_are_written_as_null(cfg):
    from tandem_eval.generate.execute import summarize
    from tandem_eval.schemas import to_jsonable

    df = pd.DataFrame(
        {
            "benchmark": ["b", "b"],
            "group": ["g", "g"],
            "problem_id": ["p", "p"],
            "sample_idx": [0, 1],
            "correct": [False, False],
            "finish_reason": ["length", "length"],
            "n_tokens": [0, 0],
            "senior_fraction": [float("nan")] * 2,
            "n_handoffs": [0, 0],
            "grade_status": ["no_answer"] * 2,
        }
    )
    m = summarize(df, (1, 2))
    assert m["senior_fraction"] is None and m["mean_tokens"] == 0.0
    json.dumps(m, allow_nan=False)
    assert to_jsonable({"a": [float("inf"), np.float64("nan"), 1.5]}) == {"a": [None, None, 1.5]}


def test_progress_is_logged_every_5_percent_or_30_seconds_off_a_terminal(caplog):
    from tandem_eval.progress import LogProgress

    now = [0.0]
    bar = LogProgress(100, "solo:solo", clock=lambda: now[0])
    with caplog.at_level("INFO", logger="tandem_eval.progress"):
        for _ in range(10):
            now[0] += 1.0
            bar.advance(10)
        assert len(caplog.records) == 2  # at 5 and 10 of 100
        now[0] += 31.0
        bar.advance(10)  # 11/100: not a 5% step, but 30 s passed
    assert len(caplog.records) == 3
    assert caplog.records[0].getMessage().startswith("solo:solo 5/100 (5%) 10 tok/s, elapsed 0:05, eta 1:35")


def test_one_vocabulary_check_refuses_a_reordered_vocabulary_of_the_same_size():
    from tandem_eval.models import ModelError, check_vocab, same_vocab

    class Tok:
        def __init__(self, vocab):
            self.vocab = vocab

        def __len__(self):
            return len(self.vocab)

        def get_vocab(self):
            return dict(self.vocab)

    a, b = Tok({"x": 0, "y": 1}), Tok({"x": 1, "y": 0})
    assert same_vocab(a, Tok({"y": 1, "x": 0})) and not same_vocab(a, b)
    with pytest.raises(ModelError, match="same size, different token ids"):
        check_vocab(a, b, senior="S", junior="J")
    assert check_vocab(a, b, allow_mismatch=True) is False


def test_check_pair_reads_only_tokenizers_and_configs(tiny_pair, tmp_path):
    from tandem_eval.models import check_pair

    assert check_pair(*tiny_pair) is True


def _spy(monkeypatch, calls: list, module, name: str) -> None:
    """Count calls of module.name (where its callers look it up), passing them through."""
    real = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)


@pytest.mark.parametrize("command", ["handoff", "solo"])
def test_a_command_checks_its_inputs_once_and_writes_metrics_once_before_complete(
    command, tiny_pair, tmp_path, monkeypatch
):
    """Plan once, then execute: one validation (tokenizers and benchmarks loaded, prompts rendered,
    each out folder checked once), and per run folder one metrics.json write, the tax included, then COMPLETE."""
    from collections import Counter

    import tandem_eval.files as files
    import tandem_eval.generate.plan as plan
    import tandem_eval.models as models

    calls, writes = [], []
    spied = ["validate", "check_out_folder", "load_inputs", "check_prompts"]
    for module, name in [(plan, name) for name in spied]:
        _spy(monkeypatch, calls, module, name)
    _spy(monkeypatch, calls, models, "check_folder")  # check_model's, after the one resolution
    write = files.atomic_write_json  # every metrics.json and COMPLETE of a run folder is written here

    def spy_write(path, data, root=None):
        if path.name in ("metrics.json", "COMPLETE"):
            writes.append((path.parent.name, sorted(data) if path.name == "metrics.json" else "COMPLETE"))
        return write(path, data, root)

    monkeypatch.setattr(files, "atomic_write_json", spy_write)
    senior, junior = tiny_pair
    args = [command, "--senior", senior, *"--limit 1 --n 1 --max-new-tokens 8 -q".split(), "--out", str(tmp_path)]
    r = CliRunner().invoke(app, args + (["--junior", junior] if command == "handoff" else []))
    assert r.exit_code == 0, r.output
    models = 2 if command == "handoff" else 1  # each checkpoint and tokenizer checked once
    assert Counter(calls) == {
        "validate": 1,
        "check_out_folder": 2 if command == "handoff" else 1,  # each run folder opened once
        "load_inputs": 1,
        "check_prompts": 1,
        "check_folder": models,
    }
    summary = ["grade_status", "handoffs_per_trace", "mean_tokens", "n_problems", "n_samples", "pass_at_k"]
    summary += ["senior_fraction", "truncation_rate", "n_truncated", "n_no_answer"]
    want = [("solo", sorted(summary)), ("solo", "COMPLETE")]
    if command == "handoff":
        want += [("handoff-paragraph", sorted([*summary, "solo_run", "tax"])), ("handoff-paragraph", "COMPLETE")]
    assert writes == want
    handoff = RunFolder(tmp_path / "handoff-paragraph")
    if command == "handoff":  # the tax compares with the solo run made first, recorded in config.json
        assert (
            handoff.metrics()["solo_run"] == handoff.config()["solo_run"]["path"] == str((tmp_path / "solo").resolve())
        )
    # a rerun reuses both complete runs: no engine loads, nothing is written again
    monkeypatch.setattr("tandem_eval.generate.execute.load_engines", lambda *a, **k: pytest.fail("loaded an engine"))
    writes.clear()
    r = CliRunner().invoke(app, args + (["--junior", junior] if command == "handoff" else []))
    assert r.exit_code == 0 and writes == [], (r.output, writes)
    if command == "handoff":  # a folder written when the tax followed COMPLETE, stopped in between: repaired
        metrics = handoff.metrics()
        handoff.metrics_path.write_text(json.dumps({k: v for k, v in metrics.items() if k != "tax"}))
        r = CliRunner().invoke(app, args + ["--junior", junior])
        assert r.exit_code == 0 and writes == [("handoff-paragraph", sorted([*summary, "solo_run", "tax"]))], (
            r.output,
            writes,
        )
        assert handoff.metrics() == metrics


def test_json_prints_each_runs_results_and_results_json_holds_them(tiny_pair, tmp_path):
    """`--json`: one JSON object on stdout (no tables), each run's results.json: config, provenance
    and every pass@k with its CI and n; truncation and no-answer counts in metrics."""
    senior, junior = tiny_pair
    args = ["handoff", "--senior", senior, "--junior", junior, "--n", "2", "--limit", "2", "--max-new-tokens", "6"]
    r = runner.invoke(app, args + ["--out", str(tmp_path), "-q", "--json"])
    assert r.exit_code == 0, r.output
    record = json.loads(r.stdout)
    assert set(record) == {"solo", "handoff"}
    for kind, folder in (("solo", "solo"), ("handoff", "handoff-paragraph")):
        res = record[kind]
        assert res == json.loads((tmp_path / folder / "results.json").read_text())
        assert res["config"]["mode"] == kind and "versions" in json.dumps(res["provenance"])
        m = res["metrics"]
        low, high = m["pass_at_k"]["ci"]["per_benchmark"]["tiny"]["pass@1"]
        assert low <= m["pass_at_k"]["per_benchmark"]["tiny"]["pass@1"] <= high
        assert m["pass_at_k"]["n_problems"]["per_benchmark"]["tiny"] == 2
        assert m["n_truncated"] == 4 and m["n_no_answer"] == 4  # 6 tokens: every trace hits the budget
    assert "tax" in record["handoff"]["metrics"]
