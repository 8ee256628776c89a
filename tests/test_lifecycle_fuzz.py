"""Property-based tests of the run-folder life and of the benchmark loader (hypothesis).

The lifecycle test draws a sequence of steps on one benchmark file and a few run folders: write a run
(stopped at any atomic write), edit the benchmark file, resume, write shards and merge them, add a
regrade or lens table (stopped between writing and recording it, or adopted afterwards), tamper with
COMPLETE or a table, delete files. After every step every reader (verify_run + load_samples, the
report's Run) must either return exactly the samples of one consistent run (every problem of the
problem list that run recorded, --n samples each, all written from that list) or refuse with a
one-line RunFolderError. Generation is replaced by rows derived from the problem list (no model), so
an example takes milliseconds; the flow is run_eval's (validate's inputs, lock, init, shards, finalize).

The loader test feeds arbitrary bytes (and arbitrary JSON rows) to load_inputs: one user error, or a
correct load. Run: PYTHONPATH=$PWD python -m pytest tests/test_lifecycle_fuzz.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from run_fixtures import plant_wrong_kind

from tandem_eval import files
from tandem_eval.cli.common import user_errors
from tandem_eval.config import EvalConfig, ModelSpec
from tandem_eval.generate.checks import check_out_path
from tandem_eval.generate.execute import merge_shards, summarize
from tandem_eval.generate.plan import load_inputs
from tandem_eval.run.results import RunFolder, verify_run
from tandem_eval.schemas import RunFolderError

N = 2  # samples per problem
FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,  # the same examples in every CI run; raise max_examples locally to search further
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Killed(BaseException):
    """The process died here (raised from inside an atomic write, so nothing after it runs)."""


class Kills:
    """Counts atomic renames and kills the process at the drawn one (None: never)."""

    def __init__(self, monkeypatch):
        self.left: int | None = None
        real = files._replace_synced

        def replace(tmp, path):
            if self.left is not None:
                if self.left == 0:
                    self.left = None
                    raise Killed
                self.left -= 1
            real(tmp, path)

        monkeypatch.setattr(files, "_replace_synced", replace)  # every atomic write renames through it

    def run(self, at: int | None, fn, *args):
        """fn(*args), killed at the `at`-th atomic write; a refusal (RunFolderError) is checked for one line."""
        self.left = at
        try:
            return fn(*args)
        except Killed:
            return None
        except RunFolderError as e:
            assert "\n" not in str(e), str(e)
            return None
        finally:
            self.left = None


def _write_bench(path: Path, version: int, rows: int) -> None:
    path.write_text("".join(json.dumps({"problem": f"v{version} q{i}", "answer": str(i)}) + "\n" for i in range(rows)))


def _cfg(bench: Path, **kw) -> EvalConfig:
    return EvalConfig(senior=ModelSpec("toy:x"), benchmarks=(str(bench),), n=N, ks=(1, 2), **kw)


def _row(p, i: int, cfg: EvalConfig) -> dict:
    """A sample derived from its problem: its text names the problem's text, so a reader can tell
    which version of the benchmark file each row was generated from."""
    return {
        "problem_id": p.problem_id,
        "benchmark": p.benchmark,
        "group": p.group,
        "sample_idx": i,
        "mode": "solo",
        "schedule": "solo",
        "seed": i,
        "problem": p.problem,
        "prompt": p.problem,
        "text": f"{p.problem} -> \\boxed{{{p.answer}}}",
        "prompt_ids": [1],
        "token_ids": [5, 6],
        "author_mask": [1, 1],
        "logprobs": [-0.1, -0.2],
        "gold": p.answer,
        "extracted_answer": p.answer,
        "correct": True,
        "grade_status": "ok",
        "finish_reason": "eos",
        "n_tokens": 2,
        "n_senior_tokens": 2,
        "senior_fraction": 1.0,
        "n_handoffs": 0,
    }


def fake_run_eval(cfg: EvalConfig, out: Path, chunk: int) -> RunFolder:
    """pipeline.run_eval's flow with rows derived from the problems instead of generated ones."""
    import dataclasses

    problems, inputs = load_inputs(cfg)
    cfg = dataclasses.replace(cfg, inputs=inputs)
    check_out_path(out, cfg)
    rf = RunFolder(out)
    if rf.config_path.exists():
        rf.init(cfg)
        if rf.is_complete():
            return rf.verify(allow_unrecorded=True)
    with rf.lock():
        rf.init(cfg)
        done = rf.done_keys()
        todo = [_row(p, i, cfg) for p in problems for i in range(N) if (p.benchmark, p.problem_id, i) not in done]
        for start in range(0, len(todo), chunk):
            rf.append_shard(todo[start : start + chunk])
        rf.finalize(summarize(rf.load_samples(), cfg.ks))
    return rf


def lens_table(rf: RunFolder) -> pd.DataFrame:
    s = rf.load_samples()
    return pd.DataFrame(
        {
            "benchmark": s.benchmark,
            "problem_id": s.problem_id,
            "sample_idx": s.sample_idx,
            "junior_nll_mean": 1.0,
        }
    )


def check_readers(path: Path) -> None:
    """The invariant: every reader returns one consistent run's samples, or refuses in one line."""
    from tandem_eval.run.runs import Run

    readers = [lambda: verify_run(path).load_samples()]
    if RunFolder(path).is_complete():  # the report reads unfinished runs only when asked to (include_incomplete)
        readers.append(lambda: Run.load(path).samples())
    for read in readers:
        try:
            df = read()
        except RunFolderError as e:
            assert "\n" not in str(e), str(e)
            continue
        recorded = RunFolder(path).config()["config"]
        inputs = recorded.get("inputs")
        assert inputs, "a run written now records its inputs"
        # The problem list the run recorded, rebuilt from the rows: ids and texts of one version.
        problems = df[["benchmark", "problem_id", "problem"]].drop_duplicates()
        assert len(problems) == inputs["n_problems"] and problems.problem_id.is_unique
        assert problems.problem.str.split(" ").str[0].nunique() == 1, "rows of two benchmark versions"
        assert sorted(df.groupby("problem_id").sample_idx.apply(sorted).tolist()) == [list(range(N))] * len(problems)
        assert (df.text.str.split(" -> ").str[0] == df.problem).all()
        assert RunFolder(path).metrics()["n_samples"] == len(df)
    if RunFolder(path).is_complete():  # a lens table is read only when recorded, and then it is this run's
        try:
            lens = Run.load(path).side_table("legibility")
        except RunFolderError as e:
            assert "\n" not in str(e), str(e)
            return
        if lens is not None:
            key = ["benchmark", "problem_id", "sample_idx"]
            samples = verify_run(path).load_samples()
            assert sorted(map(tuple, lens[key].values.tolist())) == sorted(map(tuple, samples[key].values.tolist()))


STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["run", "run", "edit", "lens", "adopt", "regrade", "tamper", "delete", "merge", "unlock-crash"]
            + ["held", "wrong-kind"]
        ),
        st.one_of(st.none(), st.integers(0, 6)),  # kill at the n-th atomic write
        st.integers(0, 5),  # a parameter: rows of an edit, which tamper, chunk size
    ),
    min_size=2,
    max_size=9,
)
TAMPER = ["legacy-marker", "empty-marker", "no-tables", "drop-row", "drop-problem", "flip-metrics"]
# files a reader opens, and what may stand where one is expected (a FIFO blocks, /dev/zero never ends)
WRONG_FILES = ["config.json", "metrics.json", "COMPLETE", "samples.parquet", "lens/jr/legibility.parquet", "shards"]
WRONG_KINDS = ["folder", "fifo", "devzero"]


def amend(rf: RunFolder, name: str, table: pd.DataFrame) -> None:
    """What legibility/drift (a lens table) and regrade (regrade.parquet) do: under the run's lock,
    write the table and record it (regrade repairs its own unrecorded table, tolerates no other)."""
    with rf.amending(rewriting="regrade.parquet" if name == "regrade.parquet" else ""):
        rf.write_table(name, table)


def other_commands_refused(run: Path) -> None:
    """While another process writes `run` (its flock held), every writing command is refused in one
    line at once, and no file of the folder changes."""
    import fcntl
    import os

    fd = os.open(run / ".lock", os.O_RDWR | os.O_CREAT)  # another open file: its flock excludes this process's
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        before = _files(run)
        rf = RunFolder(run)
        table = pd.DataFrame(
            {"benchmark": ["b"], "problem_id": ["b/0000"], "sample_idx": [0], "junior_nll_mean": [1.0]}
        )
        for command in (
            lambda: fake_run_eval(_cfg(run.parent.parent / "b.jsonl"), run, 1),
            lambda: amend(rf, "lens/jr/legibility.parquet", table),
            lambda: amend(rf, "regrade.parquet", table.rename(columns={"junior_nll_mean": "x"})),
        ):
            with pytest.raises(RunFolderError) as refused:
                command()
            assert "\n" not in str(refused.value) and "being written by another process" in str(refused.value)
        assert _files(run) == before
    finally:
        (run / ".lock").unlink(missing_ok=True)
        os.close(fd)


def _files(run: Path) -> dict:
    """Regular files under `run` (but the lock) with their bytes' hash."""
    import hashlib

    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in run.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != ".lock"
    }


def wrong_kind_refused(run: Path, which: int, kind: int, scratch: Path) -> None:
    """A file of the run folder replaced by one of the wrong kind: every reader refuses in one line or
    returns the run's consistent samples (check_readers), never hangs or reads without end; the writer
    refuses in one line or finishes without opening it; then the file is put back."""
    import os

    target = run / WRONG_FILES[which % len(WRONG_FILES)]
    if target.name == "shards":
        parts = sorted(target.glob("part-*.parquet"))
        target = parts[0] if parts else target / "part-00000.parquet"
    if not target.exists() or target.is_dir():
        return
    aside = scratch / "aside"
    os.replace(target, aside)
    how = WRONG_KINDS[kind % len(WRONG_KINDS)]
    plant_wrong_kind(target, how)
    try:
        check_readers(run)
        try:
            fake_run_eval(_cfg(run.parent.parent / "b.jsonl"), run, 2)
        except RunFolderError as e:
            assert "\n" not in str(e), str(e)
    finally:
        if how == "folder":
            target.rmdir()
        else:
            target.unlink()
        os.replace(aside, target)


# The losses, always among the examples: a killed run resumed after the file changed; shards
# run before and after the file grew, then merged; a marker without records over deleted rows.
@example(steps=[("run", 2, 0), ("edit", None, 1), ("run", None, 0)])
@example(steps=[("merge", None, 0), ("edit", None, 2), ("merge", None, 1)])
@example(steps=[("run", None, 0), ("tamper", None, 4), ("tamper", None, 0), ("run", None, 0)])
@example(steps=[("run", None, 0), ("lens", 0, 0), ("adopt", None, 0), ("tamper", None, 2)])
# issue 33: concurrent different commands on one folder; files of the wrong kind; a killed regrade repaired
@example(steps=[("run", None, 0), ("lens", None, 0), ("held", None, 0), ("wrong-kind", 1, 1), ("wrong-kind", 2, 4)])
@example(steps=[("run", 1, 1), ("wrong-kind", 0, 5), ("run", None, 0), ("wrong-kind", 0, 0), ("wrong-kind", 2, 3)])
@example(steps=[("run", None, 0), ("regrade", 0, 0), ("regrade", None, 0), ("held", None, 0)])
@pytest.mark.timeout(600)  # a FIFO or /dev/zero read by mistake would hang, not fail
@FUZZ
@given(steps=STEPS)
def test_run_folder_lifecycle(tmp_path_factory, monkeypatch, steps):
    root = tmp_path_factory.mktemp("life")
    bench, run, merged = root / "b.jsonl", root / "out" / "solo", root / "merged"
    kills, version = Kills(monkeypatch), 0
    _write_bench(bench, version, 3)
    for op, kill_at, k in steps:
        rf = RunFolder(run)
        if op == "run":
            kills.run(kill_at, fake_run_eval, _cfg(bench), run, k + 1)
        elif op == "edit":
            version += 1
            _write_bench(bench, version, 2 + k % 3)
        elif op in ("lens", "regrade"):
            name = "lens/jr/legibility.parquet" if op == "lens" else "regrade.parquet"
            try:
                rf = verify_run(run, allow_unrecorded=True)
            except RunFolderError:
                continue
            table = lens_table(rf) if op == "lens" else lens_table(rf).rename(columns={"junior_nll_mean": "x"})
            kills.run(kill_at, amend, rf, name, table)
        elif op == "adopt":  # --adopt: record an unrecorded lens table that holds one row per sample
            table = run / "lens" / "jr" / "legibility.parquet"
            try:
                rf = verify_run(run, allow_unrecorded=True)
                ok = table.exists() and len(pd.read_parquet(table)) == len(rf.load_samples())
            except RunFolderError:
                continue
            if ok:
                kills.run(kill_at, rf.register_table, "lens/jr/legibility.parquet")
        elif op == "tamper" and rf.done_path.exists():
            how = TAMPER[k % len(TAMPER)]
            if how == "legacy-marker":
                rf.done_path.write_text("2026-11-30T04:27:21+0000\n")
            elif how == "empty-marker":
                rf.done_path.write_text("")
            elif how == "no-tables":
                rec = json.loads(rf.done_path.read_text() or "{}") if rf.done_path.read_text().startswith("{") else {}
                rf.done_path.write_text(json.dumps({**rec, "tables": {}}))
            elif how in ("drop-row", "drop-problem") and rf.samples_path.exists():
                df = pd.read_parquet(rf.samples_path)
                df = df.iloc[:-1] if how == "drop-row" else df[df.problem_id != df.problem_id.iloc[0]]
                df.to_parquet(rf.samples_path, index=False)
            elif how == "flip-metrics" and rf.metrics_path.exists():
                rf.metrics_path.write_text(json.dumps({**rf.metrics(), "n_samples": 999}))
        elif op == "delete":
            victim = [rf.done_path, rf.samples_path, run / "lens" / "jr" / "legibility.parquet"][k % 3]
            victim.unlink(missing_ok=True)
        elif op == "merge":  # one shard of a 2-shard run (the file may have changed since the other), then merge
            parts = [root / "shards" / f"shard-{i}-of-2" / "solo" for i in range(2)]
            i = k % 2
            kills.run(kill_at, fake_run_eval, _cfg(bench, num_shards=2, shard_index=i), parts[i], 2)
            if all(RunFolder(p).is_complete() for p in parts):
                kills.run(None, merge_shards, parts, merged)
            if merged.exists():
                check_readers(merged)
        elif op == "held" and (run / "config.json").exists():  # another command is writing the folder
            other_commands_refused(run)
        elif op == "wrong-kind" and run.exists():
            wrong_kind_refused(run, k, kill_at or 0, root)
        elif op == "unlock-crash":  # a writer died holding the lock: the kernel released it
            run.mkdir(parents=True, exist_ok=True)
            rf.lock_path.write_text(json.dumps({"pid": 999999, "host": "gone", "started": "then"}))
        if (run / "config.json").exists():
            check_readers(run)


# ---- the loader: any bytes in a benchmark file ------------------------------------------------------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
ROWS = st.lists(
    st.dictionaries(st.sampled_from(["problem", "answer", "id", "group", "x"]), JSON_VALUES, max_size=5), max_size=4
)


def _load_or_refuse(path: Path) -> None:
    try:
        problems, inputs = load_inputs(_cfg(path))
    except user_errors() as e:
        assert str(e).strip(), "an error names the problem"
        return
    assert inputs.n_problems == len(problems) and dict(inputs.files)[str(path)]
    assert len({p.problem_id for p in problems}) == len(problems)
    for p in problems:
        assert isinstance(p.problem, str) and p.problem.strip() and isinstance(p.answer, str) and p.answer.strip()


@FUZZ
@given(data=st.binary(max_size=200), suffix=st.sampled_from([".jsonl", ".json", ".csv", ".parquet"]))
def test_any_bytes_in_a_benchmark_file_load_or_give_one_user_error(tmp_path_factory, data, suffix):
    path = tmp_path_factory.mktemp("bytes") / f"b{suffix}"
    path.write_bytes(data)
    _load_or_refuse(path)


@FUZZ
@given(rows=ROWS, as_list=st.booleans())
def test_any_json_rows_load_or_give_one_user_error(tmp_path_factory, rows, as_list):
    path = tmp_path_factory.mktemp("rows") / ("b.json" if as_list else "b.jsonl")
    text = json.dumps(rows) if as_list else "".join(json.dumps(r) + "\n" for r in rows)
    path.write_text(text)
    _load_or_refuse(path)


def test_the_fuzzed_flow_is_the_pipelines(tmp_path):
    """The fake writer follows run_eval: a run it finishes verifies, and an edit of the file is refused."""
    bench = tmp_path / "b.jsonl"
    _write_bench(bench, 0, 3)
    rf = fake_run_eval(_cfg(bench), tmp_path / "run", 2)
    assert len(verify_run(rf.path).load_samples()) == 3 * N
    _write_bench(bench, 1, 3)
    with pytest.raises(RunFolderError, match="benchmark file"):
        fake_run_eval(_cfg(bench), tmp_path / "run", 2)
