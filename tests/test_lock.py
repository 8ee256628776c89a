"""The writer lock RUN/.lock: an flock, so exactly one holder at a time, released by the kernel when
its holder dies, whatever a leftover file says. The race test runs 20 processes over 40 trials and
counts holders inside the lock with an O_EXCL marker file.

    PYTHONPATH=$PWD python -m pytest tests/test_lock.py -q
"""

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tandem_eval.run.results import RunFolder
from tandem_eval.schemas import RunFolderError

PROCESSES, TRIALS = 20, 40


def _holder(path: str, code: str = "time.sleep(30)") -> subprocess.Popen:
    """A separate process that takes the lock, says so, then runs `code`."""
    src = (
        "import time; from tandem_eval.run.results import RunFolder\n"
        f"with RunFolder({path!r}).lock():\n    print('held', flush=True); {code}\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", src], stdout=subprocess.PIPE, text=True, env=os.environ)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_held_lock_is_refused_naming_the_holder(tmp_path):
    rf = RunFolder(tmp_path / "run")
    holder = _holder(str(rf.path))
    try:
        with pytest.raises(RunFolderError, match=f"PID {holder.pid} on {socket.gethostname()}") as e:
            with rf.lock():
                pass
        assert str(rf.lock_path) in str(e.value) and "\n" not in str(e.value)
    finally:
        holder.kill()
        holder.wait()
    with rf.lock():  # the kernel released the dead holder's lock
        assert json.loads(rf.lock_path.read_text())["pid"] == os.getpid()
    assert not rf.lock_path.exists()


def test_a_killed_holder_never_blocks_and_a_live_one_always_does(tmp_path):
    rf = RunFolder(tmp_path / "run")
    holder = _holder(str(rf.path))
    os.kill(holder.pid, signal.SIGKILL)  # no cleanup runs: the file stays, naming a dead PID
    holder.wait()
    assert json.loads(rf.lock_path.read_text())["pid"] == holder.pid
    with rf.lock():
        pass
    # A leftover file naming any process, of this host or another, is only information: no lock.
    for host in (socket.gethostname(), "another-host"):
        rf.lock_path.write_text(json.dumps({"pid": os.getpid(), "host": host, "started": "then"}))
        with rf.lock():
            assert json.loads(rf.lock_path.read_text())["pid"] == os.getpid()


def test_lock_in_same_process_is_exclusive(tmp_path):
    rf = RunFolder(tmp_path / "run")
    with rf.lock():
        t0 = time.monotonic()
        with pytest.raises(RunFolderError, match=f"PID {os.getpid()}"):
            with RunFolder(rf.path).lock(wait_s=0.3):
                pass
        assert time.monotonic() - t0 >= 0.3
    assert not rf.lock_path.exists()


def test_a_symlinked_lock_file_is_refused(tmp_path):
    rf = RunFolder(tmp_path / "run")
    rf.path.mkdir()
    target = tmp_path / "elsewhere"
    rf.lock_path.symlink_to(target)
    with pytest.raises(RunFolderError, match="symbolic link"):
        with rf.lock():
            pass
    assert not target.exists()


def _racer(path: str, marker: str, start, trials: int, out) -> None:
    """Each trial: wait for the start, take the lock, and inside it create the marker exclusively
    (a second holder inside finds it and counts a violation)."""
    rf = RunFolder(path)
    violations = entries = 0
    for _ in range(trials):
        start.wait()
        with rf.lock(wait_s=60):
            entries += 1
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                violations += 1
            else:
                time.sleep(0.0005)  # widen the window a second holder would need
                os.close(fd)
                os.unlink(marker)
        start.wait()  # the parent plants a stale lock file between trials
    out.put((entries, violations))


def test_race_of_many_processes_never_has_two_holders(tmp_path):
    rf = RunFolder(tmp_path / "run")
    rf.path.mkdir()
    ctx = multiprocessing.get_context("fork")  # the children share the parent's imports: fast to start
    start, out = ctx.Barrier(PROCESSES + 1), ctx.Queue()
    marker = str(tmp_path / "inside")
    procs = [ctx.Process(target=_racer, args=(str(rf.path), marker, start, TRIALS, out)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    t0 = time.monotonic()
    for _ in range(TRIALS):
        # A stale lock file of a dead process, the case the PID guess used to break several times at once.
        rf.lock_path.write_text(json.dumps({"pid": 999999, "host": socket.gethostname(), "started": "then"}))
        start.wait(timeout=60)
        start.wait(timeout=60)
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    assert sum(e for e, _ in results) == PROCESSES * TRIALS
    assert sum(v for _, v in results) == 0
    assert time.monotonic() - t0 < 20


# ---- issue 33: a run stopped before its first sample leaves nothing a rerun must work around ---------
def test_a_sigterm_before_the_first_sample_leaves_no_folder_and_a_rerun_of_other_settings_works(tiny_pair, tmp_path):
    """SIGTERM (a scheduler's stop) during generation, before any sample is stored: the command's own
    cleanup runs (the CLI turns SIGTERM into SystemExit), so no folder, config.json, .lock or shards/
    remains; and what a hard kill (SIGKILL: no cleanup) leaves, config.json and an empty shards/, is
    started afresh by a rerun with other settings, since it holds nothing."""
    from run_fixtures import solo_cfg
    from typer.testing import CliRunner

    from tandem_eval.cli.main import app

    out = tmp_path / "out"
    stalled = (
        "import sys, time, tandem_eval.generate.execute as g\n"
        "g._generate = lambda *a, **k: (print('generating', flush=True), time.sleep(60))\n"
        "from tandem_eval.cli import app\n"
        f"sys.argv = ['tandem-eval', 'solo', '--senior', {tiny_pair[0]!r}, '--limit', '1', '--n', '1', '-q', "
        f"'--max-new-tokens', '4', '--out', {str(out)!r}]\n"
        "app()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", stalled], stdout=subprocess.PIPE, text=True, env=os.environ)
    assert proc.stdout.readline().strip() == "generating"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143 and not out.exists()
    RunFolder(out / "solo").init(solo_cfg(tiny_pair[0], n=1, ks=(1,), limit=1))  # what a SIGKILL leaves
    args = ["solo", "--senior", tiny_pair[0], "--limit", "1", "--n", "2", "--max-new-tokens", "4", "-q"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])  # --n 2, not the killed run's 1
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert RunFolder(out / "solo").config()["config"]["n"] == 2 and (out / "solo" / "COMPLETE").exists()


def test_a_table_not_yet_recorded_by_a_live_writer_says_so(tmp_path):
    """A reader that meets a table a live writer has written but not yet recorded names the writer
    (wait for it) instead of calling the folder damaged; the probe creates and changes nothing."""
    import pandas as pd
    from run_fixtures import solo_cfg, write_run

    from tandem_eval.run.results import verify_run
    from tandem_eval.schemas import write_table

    rf = write_run(tmp_path / "solo", solo_cfg("/ckpt/s", n=1, ks=(1,)), {("tiny", "tiny/0000"): [True]})
    table = pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["tiny/0000"], "sample_idx": [0], "x": [1]})
    write_table(rf.path / "regrade.parquet", table)
    with pytest.raises(RunFolderError, match="is not recorded in"):  # nobody writing: a stopped command
        verify_run(rf.path)
    proc = _holder(str(rf.path))
    try:
        before = sorted(p.name for p in rf.path.iterdir())
        with pytest.raises(RunFolderError, match=f"being written by another process \\(PID {proc.pid}"):
            verify_run(rf.path)
        assert sorted(p.name for p in rf.path.iterdir()) == before
    finally:
        proc.kill()
        proc.wait()
