"""Run-folder integrity: COMPLETE records, verify_run on every reader, recomputed fingerprints,
merge's shard checks, the writer lock, and the checked reuse of a solo run by `handoff`.

Synthetic folders (tests/run_fixtures.py) keep this fast; the kill-and-resume test lives in
tests/test_pipeline.py. Run: .venv/bin/python -m pytest tests/test_results.py -q
"""

import hashlib
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from run_fixtures import handoff_cfg, solo_cfg, write_run
from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.config import EvalConfig, ModelSpec, fingerprint_of, to_dict
from tandem_eval.generate.execute import merge_shards, run_handoff
from tandem_eval.run.results import RunFolder, verify_run
from tandem_eval.schemas import RunFolderError

FLAGS = {("tiny", f"tiny/{i:04d}"): [i % 2 == 0, True, False, i % 3 == 0] for i in range(6)}
runner = CliRunner()


def _one_line_exit_2(args) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def _drop_rows(path, n=2):
    df = pd.read_parquet(path)
    df.iloc[n:].to_parquet(path, index=False)


@pytest.fixture
def solo(tmp_path):
    return write_run(tmp_path / "solo", solo_cfg("toy:a", n=4, ks=(1, 2)), FLAGS)


# ---- COMPLETE and verify_run --------------------------------------------------------------------
def test_a_shard_that_breaks_its_schema_or_leads_through_a_link_is_never_written(tmp_path, solo):
    rf = RunFolder(tmp_path / "run")
    with pytest.raises(RunFolderError, match="lacks the required column 'correct'; nothing was written"):
        rf.append_shard([{"problem_id": "p", "benchmark": "b", "sample_idx": 0}])
    assert rf.shards() == []
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    rf.shard_dir.rmdir()
    rf.shard_dir.symlink_to(outside)  # a linked shards/ would write out of the run folder
    with pytest.raises(RunFolderError, match="outside the run folder"):
        rf.append_shard(solo.load_samples().head(2).to_dict("records"))
    assert list(outside.iterdir()) == []


def test_complete_records_row_count_and_hash_of_samples(solo):
    rec = json.loads(solo.done_path.read_text())
    assert rec["tables"]["samples.parquet"]["rows"] == 24
    digest = hashlib.sha256(solo.samples_path.read_bytes()).hexdigest()
    assert rec["tables"]["samples.parquet"]["sha256"] == digest  # the hash of what was written
    assert rec["fingerprint"] == solo.config()["fingerprint"]
    assert len(verify_run(solo.path).load_samples()) == 24


def test_recomputed_fingerprint_equals_evalconfig_fingerprint():
    for cfg in (
        solo_cfg("toy:a"),
        solo_cfg("x", n=2, ks=(1, 2), chat_template="{{ x }}", label="L", batch_size=3),
        handoff_cfg("s", "j", num_shards=4, shard_index=2),
    ):
        assert fingerprint_of(to_dict(cfg)) == cfg.fingerprint()


def test_deleted_rows_are_refused_by_every_reader(solo, tmp_path):
    _drop_rows(solo.samples_path)
    with pytest.raises(RunFolderError, match="samples.parquet was changed or truncated"):
        verify_run(solo.path)
    with pytest.raises(RunFolderError, match="22 rows, COMPLETE records 24"):
        RunFolder(solo.path).load_samples()  # a reader that skips verify_run is still protected
    from tandem_eval.run.runs import Run

    with pytest.raises(RunFolderError, match="samples.parquet"):
        Run.load(solo.path).samples()
    msg = _one_line_exit_2(["compare", str(solo.path), str(solo.path), "--metric", "solo_pass@1"])
    assert "samples.parquet was changed or truncated" in msg


def test_truncated_samples_file_is_one_line_error(solo):
    data = solo.samples_path.read_bytes()
    solo.samples_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RunFolderError, match="not a readable parquet file") as e:
        verify_run(solo.path)
    assert "\n" not in str(e.value)


def test_edited_config_json_is_detected(solo):
    raw = json.loads(solo.config_path.read_text())
    raw["config"]["seed"] = 7  # the stored fingerprint is left as it was
    solo.config_path.write_text(json.dumps(raw))
    with pytest.raises(RunFolderError, match="was edited after the run was written"):
        verify_run(solo.path)
    raw["fingerprint"] = fingerprint_of(raw["config"])  # edited consistently: COMPLETE still knows
    solo.config_path.write_text(json.dumps(raw))
    with pytest.raises(RunFolderError, match="does not belong to the finished run"):
        verify_run(solo.path)


@pytest.mark.parametrize(
    "content, message",
    [
        ("{}", "not a tandem-eval run config"),
        ("not json {", "invalid JSON"),
        ('{"config": {}, "fingerprint": 1}', "missing .* 'senior'"),
    ],
)
def test_garbage_config_json_is_one_line_naming_the_file(solo, content, message):
    solo.config_path.write_text(content)
    with pytest.raises(RunFolderError, match=message) as e:
        verify_run(solo.path)
    assert str(solo.config_path) in str(e.value) and "\n" not in str(e.value)


def test_incomplete_and_missing_folders_are_refused(tmp_path, solo):
    with pytest.raises(RunFolderError, match="no such directory"):
        verify_run(tmp_path / "nope")
    solo.done_path.unlink()
    with pytest.raises(RunFolderError, match="incomplete"):
        verify_run(solo.path)
    assert verify_run(solo.path, complete=False).path == solo.path


def test_legacy_complete_marker_is_read_but_never_sealed(solo):
    """A marker from before integrity records: readers check its row counts; writers are refused, since
    a record written now would vouch for whatever the folder holds (an edited samples.parquet too)."""
    solo.done_path.write_text("2026-11-30T04:27:21+0000\n")  # written before integrity records
    assert len(verify_run(solo.path).load_samples()) == 24
    table = pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["tiny/0000"], "sample_idx": [0], "x": [1.0]})
    with pytest.raises(RunFolderError, match="older marker that records no tables.*move .* aside and rerun"):
        RunFolder(solo.path).write_table("lens/jr/legibility.parquet", table)
    with pytest.raises(RunFolderError, match="read-only"):
        with RunFolder(solo.path).amending():
            pass
    assert solo.done_path.read_text() == "2026-11-30T04:27:21+0000\n"
    assert not (solo.path / "lens" / "jr" / "legibility.parquet").exists()


def test_a_legacy_marker_over_a_run_that_records_its_inputs_was_replaced(solo, tmp_path):
    """Inputs by content came after COMPLETE's records: a record-less marker beside them is a downgrade
    (how edited samples would pass as the run's), refused by every reader."""
    import dataclasses

    from tandem_eval.config import Inputs

    cfg = dataclasses.replace(solo_cfg("toy:a", n=4, ks=(1, 2)), inputs=Inputs(problems="0" * 64, n_problems=6))
    rf = write_run(tmp_path / "hashed", cfg, FLAGS)
    rf.done_path.write_text("2026-11-30T04:27:21+0000\n")
    with pytest.raises(RunFolderError, match="the marker was replaced"):
        verify_run(rf.path)


def test_a_rewritten_lens_table_is_recorded_again_but_samples_never_are(solo):
    table = pd.DataFrame({"benchmark": ["tiny"] * 2, "problem_id": ["tiny/0000"] * 2, "sample_idx": [0, 1]})
    solo.write_table("lens/jr/drift.parquet", table)
    RunFolder(solo.path).write_table("lens/jr/drift.parquet", table.iloc[:1])  # a rerun, by a fresh process
    assert json.loads(solo.done_path.read_text())["tables"]["lens/jr/drift.parquet"]["rows"] == 1
    assert verify_run(solo.path)
    _drop_rows(solo.samples_path)
    with pytest.raises(RunFolderError, match="cannot be registered again"):
        RunFolder(solo.path).register_table("samples.parquet")


def test_registered_lens_table_is_verified(solo):
    table = pd.DataFrame({"benchmark": ["tiny"] * 3, "problem_id": ["tiny/0000"] * 3, "sample_idx": [0, 1, 2]})
    path = solo.write_table("lens/jr/drift.parquet", table)
    assert verify_run(solo.path)
    table.iloc[:1].to_parquet(path, index=False)
    with pytest.raises(RunFolderError, match="drift.parquet was changed or truncated"):
        verify_run(solo.path)
    path.unlink()
    with pytest.raises(RunFolderError, match="drift.parquet is missing"):
        verify_run(solo.path)


def test_while_the_lock_is_held_complete_and_metrics_are_read_once_and_otherwise_every_time(solo, monkeypatch):
    """Holding the folder's lock (amending), no other writer can change COMPLETE or metrics.json, so each is
    read once per hold and kept (a lens command read each 5 times); a write lets go of the kept copy. Outside
    a hold every call reads the file: a notebook's folder object sees what a lens command wrote since."""
    from tandem_eval import files

    reads, real = [], files.read_regular

    def counted(path, *a, **kw):
        reads.append(Path(path).name)
        return real(path, *a, **kw)

    monkeypatch.setattr(files, "read_regular", counted)
    table = pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["tiny/0000"], "sample_idx": [0]})
    rf = RunFolder(solo.path)
    with rf.amending() as amend:
        assert reads.count("COMPLETE") == 1 and reads.count("metrics.json") == 1  # the verify under the lock
        for _ in range(3):
            rf.check_sealed("a test")
            rf.metrics()["lens"] = "changed"  # a copy: the kept value is not changed through it
            assert "lens" not in rf.metrics()
        assert reads.count("COMPLETE") == 1 and reads.count("metrics.json") == 1
        amend.add_table("lens/jr/drift.parquet", table)
        rf.update_metrics({"lens": {"jr": {}}})
        assert reads.count("COMPLETE") == 1 and reads.count("metrics.json") == 1
        assert rf.metrics()["lens"] == {"jr": {}} and "lens/jr/drift.parquet" in rf.complete_record()["tables"]
        assert reads.count("COMPLETE") == 2 and reads.count("metrics.json") == 2  # written, then read again
    reads.clear()
    rf.metrics(), rf.metrics(), rf.complete_record(), rf.complete_record()
    assert reads.count("COMPLETE") == 2 and reads.count("metrics.json") == 2
    assert verify_run(solo.path)  # what the hold wrote is what a reader verifies


# ---- merge ---------------------------------------------------------------------------------------
def _shard(root, i, n, flags=FLAGS):
    keys = sorted(flags)
    part = {k: flags[k] for j, k in enumerate(keys) if j % n == i}
    cfg = solo_cfg("toy:a", n=4, ks=(1, 2), num_shards=n, shard_index=i)
    return write_run(root / f"shard-{i}-of-{n}" / "solo", cfg, part)


def test_merge_refuses_mixed_shard_counts(tmp_path):
    parts = [_shard(tmp_path, 0, 2), _shard(tmp_path, 1, 3)]
    with pytest.raises(RunFolderError, match="different --num-shards"):
        merge_shards([p.path for p in parts], tmp_path / "merged")
    msg = _one_line_exit_2(["merge", str(tmp_path)])
    assert "--num-shards 2" in msg and "--num-shards 3" in msg
    assert not (tmp_path / "solo").exists()


def test_merge_refuses_a_truncated_shard_and_merges_good_ones(tmp_path):
    parts = [_shard(tmp_path, i, 2) for i in range(2)]
    merged = merge_shards([p.path for p in parts], tmp_path / "merged")
    assert len(merged.load_samples()) == 24 and json.loads(merged.done_path.read_text())["tables"]
    _drop_rows(parts[1].samples_path, 1)
    msg = _one_line_exit_2(["merge", str(tmp_path)])
    assert "shard-1-of-2/solo/samples.parquet was changed or truncated" in msg


# ---- solo reuse by handoff -----------------------------------------------------------------------
def _tiny_flags(n_problems, n):
    from tandem_eval.data import load_benchmark

    return {(p.benchmark, p.problem_id): [True] * n for p in load_benchmark("tiny", limit=n_problems)}


def test_handoff_refuses_solo_run_of_another_senior(tiny_pair, tmp_path):
    senior, junior = tiny_pair
    other = write_run(tmp_path / "b" / "solo", solo_cfg(junior, limit=1), _tiny_flags(1, 8))  # senior B = junior
    out = tmp_path / "a"
    args = ["handoff", "--senior", senior, "--junior", junior, "--limit", "1", "--out", str(out), "-q"]
    msg = _one_line_exit_2([*args, "--solo-run", str(other.path)])
    assert "differs in senior (" in msg and "--allow-solo-mismatch" in msg and "seed" not in msg
    assert not out.exists()  # refused before any work
    msg = _one_line_exit_2([*args, "--solo-run", str(other.path), "--seed", "3", "--temperature", "1.0"])
    assert "seed (0 vs 3)" in msg and "sampling.temperature (0.7 vs 1.0)" in msg


def test_handoff_refuses_an_existing_out_solo_of_another_senior(tiny_pair, tmp_path):
    senior, junior = tiny_pair
    write_run(tmp_path / "out" / "solo", solo_cfg(junior, n=2, ks=(1,), limit=2), _tiny_flags(2, 2))
    cfg = handoff_cfg(senior, junior, n=2, ks=(1,), limit=2)
    with pytest.raises(RunFolderError, match="the existing solo run .* differs in senior"):
        run_handoff(cfg, tmp_path / "out", progress=False)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["solo"]


def test_handoff_refuses_tampered_solo_run(tiny_pair, tmp_path):
    senior, junior = tiny_pair
    solo = write_run(tmp_path / "solo", solo_cfg(senior, n=2, ks=(1,), limit=2), _tiny_flags(2, 2))
    _drop_rows(solo.samples_path, 1)
    cfg = handoff_cfg(senior, junior, n=2, ks=(1,), limit=2)
    with pytest.raises(RunFolderError, match="samples.parquet was changed or truncated"):
        run_handoff(cfg, tmp_path / "out", solo_run=solo.path, progress=False)


def test_allowed_solo_mismatch_is_recorded_in_the_handoff_run(tiny_pair, tmp_path):
    from tandem_eval.config import Sampling

    senior, junior = tiny_pair
    sampling = Sampling(max_new_tokens=6)
    solo = write_run(tmp_path / "b", solo_cfg(junior, n=1, ks=(1,), limit=1, sampling=sampling), _tiny_flags(1, 1))
    cfg = EvalConfig(
        senior=ModelSpec(senior),
        junior=ModelSpec(junior),
        mode="handoff",
        schedule="paragraph",
        n=1,
        ks=(1,),
        limit=1,
        sampling=sampling,
        seed=5,
    )
    _, handoff, tax = run_handoff(cfg, tmp_path / "a", solo_run=solo.path, progress=False, allow_solo_mismatch=True)
    record = handoff.config()["solo_run"]
    assert record["allow_solo_mismatch"] is True and record["path"] == str(solo.path.resolve())
    assert any(d.startswith("senior (") for d in record["differs"]) and "seed (0 vs 5)" in record["differs"]
    assert tax["macro"]["pass@1"]["n_problems"] == 1


# ---- inputs by content: an edited benchmark file is another run -----------------------------------
def _bench(path, n_rows, edit=""):
    rows = [{"problem": f"What is {i} + {i}?{edit}", "answer": str(2 * i)} for i in range(n_rows)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def tiny_solo(tiny_pair):
    """A cheap solo config on a local benchmark file (1 sample of 4 tokens per problem) and its engines."""
    from tandem_eval.config import Sampling
    from tandem_eval.generate.execute import open_engines

    cfg = EvalConfig(senior=ModelSpec(tiny_pair[0]), n=1, ks=(1,), sampling=Sampling(max_new_tokens=4), batch_size=8)
    engines = open_engines(cfg)
    yield cfg, engines
    for e in engines.values():
        e.close()


def _on(cfg, bench, **kw):
    import dataclasses

    return dataclasses.replace(cfg, benchmarks=(str(bench),), **kw)


def test_resume_after_the_benchmark_file_changed_is_refused_naming_it(tiny_solo, tmp_path):
    from tandem_eval.generate.execute import run_eval

    (cfg, engines), run = tiny_solo, tmp_path / "o" / "solo"
    bench = _bench(tmp_path / "b.jsonl", 6)
    cfg = _on(cfg, bench)

    class Killed(Exception):
        pass

    def kill(n):
        raise Killed

    with pytest.raises(Killed):
        run_eval(cfg, run, engines, progress=False, flush_every=2, on_flush=kill)
    shards = sorted((run / "shards").iterdir())
    assert len(shards) == 1
    _bench(bench, 6, edit=" (edited)")
    with pytest.raises(RunFolderError, match=f"benchmark file {bench} \\(content changed"):
        run_eval(cfg, run, engines, progress=False, flush_every=2)
    assert sorted((run / "shards").iterdir()) == shards  # nothing mixed in
    msg = _one_line_exit_2(
        [
            "solo",
            "--senior",
            cfg.senior.path,
            "--benchmark",
            str(bench),
            "--n",
            "1",
            "--max-new-tokens",
            "4",
            "--out",
            str(tmp_path / "o"),
            "-q",
        ]
    )
    assert f"benchmark file {bench}" in msg
    _bench(bench, 6)  # the original content again: the run resumes and finishes with one version only
    rf = run_eval(cfg, run, engines, progress=False)
    assert len(rf.load_samples()) == 6 and not rf.load_samples().problem.str.contains("edited").any()


def test_merge_refuses_shards_that_saw_different_problem_lists(tiny_solo, tmp_path):
    from tandem_eval.generate.execute import run_eval

    (cfg, engines), bench = tiny_solo, _bench(tmp_path / "b.jsonl", 6)
    for i, rows in ((0, 6), (1, 10)):  # the file grew between the shards
        _bench(bench, rows)
        run_eval(_on(cfg, bench, num_shards=2, shard_index=i), tmp_path / "m" / f"shard-{i}-of-2" / "solo", engines)
    msg = _one_line_exit_2(["merge", str(tmp_path / "m")])
    assert f"benchmark file {bench} (content changed" in msg
    assert not (tmp_path / "m" / "solo").exists()


def test_solo_reuse_refuses_a_solo_run_of_an_edited_benchmark(tiny_pair, tiny_solo, tmp_path):
    from tandem_eval.generate.execute import run_eval

    (solo_cfg_, engines), bench = tiny_solo, _bench(tmp_path / "b.jsonl", 2)
    solo = run_eval(_on(solo_cfg_, bench), tmp_path / "solo", engines, progress=False)
    _bench(bench, 2, edit=" (edited)")
    cfg = _on(handoff_cfg(tiny_pair[0], tiny_pair[1], n=1, ks=(1,), sampling=solo_cfg_.sampling), bench)
    with pytest.raises(RunFolderError, match=f"differs in benchmark file {bench} \\(content changed"):
        run_handoff(cfg, tmp_path / "out", solo_run=solo.path, progress=False)
    assert not (tmp_path / "out").exists()


# ---- unrecorded tables: a lens command stopped between writing and recording --------------------
def test_an_unrecorded_lens_table_is_refused_then_repaired_by_a_rerun_or_adopted(tiny_pair, tmp_path, monkeypatch):
    import logging

    from tandem_eval.run import results

    # An earlier command's log handler may hold a closed CliRunner stream (the lens commands add none).
    for h in [h for h in logging.getLogger("tandem_eval").handlers if getattr(h, "tandem_cli", False)]:
        monkeypatch.setattr(h, "stream", sys.stderr)
    senior, junior = tiny_pair
    solo = write_run(tmp_path / "solo", solo_cfg(senior, n=4, ks=(1, 2)), FLAGS)
    args = ["legibility", "--run", str(solo.path), "--junior", junior, "--junior-label", "jr", "--n-boot", "50"]

    def killed(folder, path):
        raise KeyboardInterrupt  # the table is on disk, COMPLETE does not record it yet

    with monkeypatch.context() as m:
        m.setattr(results, "_record_table", killed)  # the step every writer records a table with
        assert runner.invoke(app, args).exit_code != 0
    table = solo.path / "lens" / "jr" / "legibility.parquet"
    assert table.exists() and "lens/jr/legibility.parquet" not in json.loads(solo.done_path.read_text())["tables"]
    for reader in (
        ["compare", str(solo.path), str(solo.path), "--metric", "junior_nll"],
        ["report", str(solo.path), "--out", str(tmp_path / "rep"), "--no-figures"],
        ["view", str(solo.path), "--out", str(tmp_path / "v.html")],
    ):
        assert "legibility.parquet is not recorded in" in _one_line_exit_2(reader)
    # The rerun rewrites and records it; --adopt records the table as it is, without scoring.
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert verify_run(solo.path) and "lens/jr/legibility.parquet" in json.loads(solo.done_path.read_text())["tables"]
    rec = json.loads(solo.done_path.read_text())
    del rec["tables"]["lens/jr/legibility.parquet"]
    solo.done_path.write_text(json.dumps(rec))
    with monkeypatch.context() as m:
        m.setattr("tandem_eval.score.stage._score", lambda *a: pytest.fail("--adopt must not score"))
        result = runner.invoke(app, [*args, "--adopt"])
    assert result.exit_code == 0, result.output
    assert verify_run(solo.path) and "jr" in RunFolder(solo.path).metrics()["lens"]
    pd.read_parquet(table).iloc[:3].to_parquet(table, index=False)  # not one row per sample: not adoptable
    rec["tables"].pop("lens/jr/legibility.parquet", None)
    solo.done_path.write_text(json.dumps(rec))
    assert "does not hold one row per sample" in _one_line_exit_2([*args, "--adopt"])


def test_an_empty_complete_on_an_unfinished_run_resumes(tiny_solo, tmp_path):
    from tandem_eval.generate.execute import run_eval

    (cfg, engines), run = tiny_solo, tmp_path / "run"
    cfg = _on(cfg, _bench(tmp_path / "b.jsonl", 4))

    def kill(n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, run, engines, progress=False, flush_every=2, on_flush=kill)
    (run / "COMPLETE").write_text("")  # a marker with nothing in it, e.g. from a crash while writing it
    with pytest.raises(RunFolderError, match="incomplete"):
        verify_run(run)
    rf = run_eval(cfg, run, engines, progress=False)
    assert len(verify_run(rf.path).load_samples()) == 4


def test_a_marker_without_records_is_checked_and_its_repair_resumes(tiny_solo, tmp_path):
    from tandem_eval.generate.execute import run_eval

    (cfg, engines), run = tiny_solo, tmp_path / "run"
    cfg = _on(cfg, _bench(tmp_path / "b.jsonl", 4))
    full = run_eval(cfg, run, engines, progress=False).load_samples()
    kept = full[full.problem_id != full.problem_id.iloc[0]]
    kept.to_parquet(run / "samples.parquet", index=False)
    (run / "COMPLETE").write_text("2026-11-30T04:27:21+0000\n")  # an older marker over 3 of 4 problems
    # the run records its inputs by content, so its marker cannot be older than integrity records
    with pytest.raises(RunFolderError, match=r"records no tables, .* the marker was replaced"):
        verify_run(run)
    original = (run / "config.json").read_text()
    raw = json.loads(original)  # as a run from before inputs were hashed: its row counts are checked
    raw["config"]["inputs"] = None
    raw["config"]["senior"]["content"] = None
    raw["fingerprint"] = fingerprint_of(raw["config"])
    (run / "config.json").write_text(json.dumps(raw))
    with pytest.raises(RunFolderError, match=r"records no tables .* delete .*COMPLETE and rerun") as e:
        verify_run(run)
    assert "3 samples of 3 problems, metrics.json counts 4 of 4" in str(e.value)
    (run / "config.json").write_text(original)
    (run / "COMPLETE").unlink()  # the repair the message names
    rf = run_eval(cfg, run, engines, progress=False)
    pd.testing.assert_frame_equal(verify_run(rf.path).load_samples(), full)


def test_no_table_is_written_through_a_link(solo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (solo.path / "lens").symlink_to(outside)
    table = pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["tiny/0000"], "sample_idx": [0]})
    with pytest.raises(RunFolderError, match="outside the run folder"):
        solo.write_table("lens/jr/drift.parquet", table)
    assert list(outside.iterdir()) == []
    (solo.path / "lens").unlink()
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    solo.metrics_path.unlink()
    solo.metrics_path.symlink_to(victim)
    with pytest.raises(RunFolderError, match="symbolic link"):
        solo.update_metrics({"x": 1})
    assert victim.read_text() == "{}"


def test_a_table_is_never_written_through_a_link_planted_at_its_temporary_name(solo, tmp_path):
    """A table's temporary file has a predictable name (.NAME.tmpPID); a link planted there is refused
    (the one no-follow atomic write), never written through: the file it points to keeps its bytes and
    no link is left behind. The hash returned is that of the bytes written."""
    import hashlib
    import os

    from tandem_eval.schemas import write_table

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    target = solo.path / "lens" / "jr" / "drift.parquet"
    target.parent.mkdir(parents=True)
    (target.parent / f".{target.name}.tmp{os.getpid()}").symlink_to(victim)
    table = pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["tiny/0000"], "sample_idx": [0]})
    with pytest.raises(RunFolderError, match="symbolic links"):
        write_table(target, table, solo.path)
    assert victim.read_text() == "keep" and os.listdir(target.parent) == []
    digest = write_table(target, table, solo.path)
    assert digest == hashlib.sha256(target.read_bytes()).hexdigest()


def test_a_run_from_before_inputs_were_hashed_is_still_reused(tiny_solo, tmp_path, monkeypatch):
    from tandem_eval.generate.execute import run_eval
    from tandem_eval.run import results

    said = []  # the logger's own call, whatever logging configuration earlier tests left behind
    # the out-folder check (RunFolder.check_holds, which opening the folder repeats)
    monkeypatch.setattr(results.log, "warning", lambda msg, *args: said.append(msg % args))

    (cfg, engines), bench = tiny_solo, _bench(tmp_path / "b.jsonl", 2)
    cfg = _on(cfg, bench)
    old = write_run(tmp_path / "old", cfg, {("b", f"b/{i:04d}"): [True] for i in range(2)})  # no inputs recorded
    assert "inputs" not in old.config()["config"] or old.config()["config"]["inputs"] is None
    assert run_eval(cfg, old.path, engines, progress=False).config()["fingerprint"] == cfg.fingerprint()
    assert any("predates content hashes" in m for m in said)
