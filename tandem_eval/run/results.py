"""Run folders: the only thing reports, notebooks and comparisons read.

Layout of one run (a solo or handoff evaluation of one senior):

    RUN/config.json        {"config": resolved EvalConfig, "fingerprint", "provenance": versions, git, host}
    RUN/shards/part-NNNNN.parquet   samples appended while generating (atomic: write tmp, rename);
                           removed once samples.parquet and COMPLETE are written
    RUN/samples.parquet    all samples, one row per (problem, sample index), written at the end
    RUN/metrics.json       summary numbers (pass@k per benchmark/group/macro, tax, legibility, drift ...)
    RUN/results.json       for scripts (as lm-eval's results_*.json): config.json's record and metrics.json
                           in one file, every metric with its CI and n; rewritten with metrics.json
    RUN/COMPLETE           written last: JSON {"finished", "fingerprint", "tables": {file: {"rows", "sha256"}}}
    RUN/.lock              present while a process writes the folder (flock held): {"pid", "host", "started"}

Killing a run loses at most the unflushed traces; rerunning the same command skips every
(problem_id, sample_idx) already in a shard. Because each trace's randomness depends only on its
own seed, the resumed run's samples equal an uninterrupted run's.

Nothing in a folder is trusted blindly: `verify_run(path)` (what every reader calls) re-hashes the
settings in config.json and compares them with the recorded fingerprint, and checks every table
recorded in COMPLETE (samples.parquet, and the lens tables registered with `RunFolder.write_table` /
`register_table`) for its row count and SHA-256. A changed, truncated or missing file is refused with
a one-line RunFolderError naming the file.

    rf = verify_run("runs/my-senior/solo"); df = rf.load_samples()
    rf.write_table("lens/jr/legibility.parquet", per_sample)   # written atomically and recorded in COMPLETE

Tables are checked against their parquet schemas (tandem_eval/schemas.py) when written and read;
every file is read and written through tandem_eval/files.py (regular files only, JSON capped and
checked; atomic writes, never through a link; the lock).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pandas as pd

from .. import files
from ..config import EvalConfig, as_recorded, config_diff, stored_fingerprint, to_dict
from ..files import RunFolderError
from ..schemas import PROBLEM_KEY, SAMPLE_COLUMNS, SAMPLE_KEY, ConfigError, read_table, write_table
from .provenance import provenance

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
_REDO_PART = "delete it and rerun: its samples are generated again"  # a damaged part of an unfinished run


@dataclass(frozen=True)
class Held:
    """What a run folder holds once `RunFolder.writing` has its lock: complete (another process finished
    it: nothing to write), or the keys (benchmark, problem id, sample index) of the samples stored so
    far (a new folder: none), which a resumed run skips."""

    complete: bool
    done: frozenset[tuple[str, str, int]] = frozenset()


class DifferentRun(RunFolderError):
    """A run folder that holds another experiment than the one asked for (RunFolder.check_holds): `path`,
    and `diff`, the settings that differ (config.config_diff). A caller that can offer another way out
    (a lens command: score that run as it is) words its own line from them."""

    def __init__(self, message: str, path: Path, diff: str):
        super().__init__(message)
        self.path, self.diff = path, diff


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
        # config.json's record, kept as a value: the one writing() wrote, else the one config() read and checked.
        # A complete run's config.json is never rewritten (writing() rewrites only a folder without samples),
        # so one read per command serves every later check, seal and results.json.
        self._record: dict | None = None
        # While this process holds the folder's lock (holding()), no other writer can change it: COMPLETE's
        # record and metrics.json are then kept as last read or written, and read once per hold.
        self._held = False
        self._kept: dict[str, dict | None] = {}  # "COMPLETE" / "metrics": the kept value (COMPLETE: None = no records)

    # ---- lifecycle ----------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self, cfg: EvalConfig, extra: dict | None = None, fingerprint: str | None = None):
        """Hold the lock (a second writer stops here), create the folder or check it holds `cfg`'s
        experiment (`fingerprint`: cfg's, as the caller computed it), and yield what it holds (Held:
        complete, when another process finished it; else the keys of the samples stored). A failure
        before any sample is flushed removes what this call created."""
        created = None  # set once the lock is held: a refused lock removes nothing
        try:
            with files.folder_lock(self.path, self.lock_path) as made:
                if not self.config_path.exists():  # a new folder: its config.json first, while the lock is held
                    created = made
                    files.make_dirs(self.shard_dir)
                    self._write_config(_new_record(cfg, extra, fingerprint))
                elif self.check_holds(cfg, fingerprint) == "empty":  # killed before its first sample: started afresh
                    created = []
                    self._write_config(_new_record(cfg, extra, fingerprint), self.path)
                yield Held(True) if self.is_complete() else Held(False, frozenset(self.done_keys()))
        except BaseException:
            if created is not None:  # the lock is released first, so that an emptied folder can be removed
                self._discard_if_empty(created)
            raise

    def _discard_if_empty(self, created: list[Path]) -> None:
        """Undo a folder this process created when no sample reached it (nothing to resume)."""
        if self.shards() or self.samples_path.exists():
            return
        for f in (self.config_path, self.metrics_path, self.done_path):
            f.unlink(missing_ok=True)
        self._record = None
        files.remove_empty([self.shard_dir, *created])

    def init(self, cfg: EvalConfig, extra: dict | None = None) -> str | None:  # check_holds' answer, if any
        """Create the folder, or check that an existing one holds the same experiment."""
        if self.config_path.exists():
            return self.check_holds(cfg)
        files.make_dirs(self.shard_dir)
        self._write_config(_new_record(cfg, extra))
        return None

    def _write_config(self, record: dict, root: Path | None = None) -> None:
        """config.json, written atomically and kept: nothing this process wrote is read back."""
        files.atomic_write_json(self.config_path, record, root)
        self._record = record

    def check_holds(self, cfg: EvalConfig, fingerprint: str | None = None) -> str | None:
        """A run already here holds the experiment `cfg` (`fingerprint`: cfg's, as the caller computed it;
        a folder without config.json holds none yet); the refusal names the differences. Returns "empty"
        for a folder whose run of other settings was stopped before it stored a sample (nothing to lose:
        the writer starts it afresh)."""
        if not self.config_path.exists():
            return None
        old = self.config()  # refuses garbage and an edited config.json (fingerprint recomputed)
        if old["fingerprint"] == (fingerprint or cfg.fingerprint()):
            return None
        legacy, unchecked = as_recorded(cfg, old["config"])
        if unchecked and old["fingerprint"] == legacy.fingerprint():
            # A run from before content hashes: the same settings, but those inputs cannot be checked.
            log.warning("%s predates content hashes of %s: not checked", self.path, " and ".join(unchecked))
            return None
        if not self._partial_tables() and not self.done_path.exists():
            log.info("%s holds no sample of its earlier settings (stopped before one); starting afresh", self.path)
            return "empty"
        diff = config_diff(old["config"], to_dict(cfg))
        raise DifferentRun(
            f"{self.path} holds a different run ({diff}); pass a new --out, or delete the folder to start over",
            self.path,
            diff,
        )

    @property
    def record(self) -> dict:
        """config.json's record as this folder keeps it (see config): the one writing() wrote, else read
        and checked on first use."""
        return self._record if self._record is not None else self.config()

    def config(self) -> dict:
        """config.json, read and checked (and kept as `record`): a mapping whose "config" is a valid
        EvalConfig and whose stored fingerprint equals the one recomputed from those settings (an edit is
        refused)."""
        raw = files.read_json(self.config_path, "config.json")
        fix = "restore the original config.json, or rerun into a new --out"
        if not isinstance(raw, dict) or not isinstance(raw.get("config"), dict) or "fingerprint" not in raw:
            raise RunFolderError(
                f'{self.config_path} is not a tandem-eval run config (no "config"/"fingerprint"); {fix}'
            )
        try:
            recomputed = stored_fingerprint(raw["config"], where=str(self.config_path))
        except (ConfigError, TypeError, ValueError) as e:
            raise RunFolderError(f"{' '.join(str(e).split())}; {fix}") from None
        if recomputed != raw["fingerprint"]:
            raise RunFolderError(
                f"{self.config_path} was edited after the run was written (its settings hash to {recomputed}, "
                f"recorded {raw['fingerprint']}); {fix}"
            )
        self._record = raw
        return raw

    def is_complete(self) -> bool:
        """COMPLETE and samples.parquet are both there. A marker without samples.parquet (an empty
        COMPLETE left by a crash, or one whose table was removed) finishes nothing: the run resumes."""
        return self.done_path.exists() and self.samples_path.exists()

    def shards(self) -> list[Path]:
        return sorted(self.shard_dir.glob("part-*.parquet")) if self.shard_dir.exists() else []

    def _partial_tables(self) -> list[Path]:
        """What an unfinished run holds so far: the shards, and a samples.parquet left by a run whose
        COMPLETE was removed or never written (its rows are kept, never generated twice)."""
        return ([self.samples_path] if self.samples_path.exists() else []) + self.shards()

    def done_keys(self) -> set[tuple[str, str, int]]:
        keys: set[tuple[str, str, int]] = set()
        for part in self._partial_tables():
            df = read_table(part, SAMPLE_KEY, _REDO_PART)
            keys.update(zip(df.benchmark, df.problem_id, df.sample_idx.astype(int)))
        return keys

    def append_shard(self, rows: list[dict]) -> Path:
        if not rows:
            raise ValueError("empty shard")
        files.make_dirs(self.shard_dir)
        existing = self.shards()
        n = int(existing[-1].stem.split("-")[1]) + 1 if existing else 0
        path = self.shard_dir / f"part-{n:05d}.parquet"
        write_table(path, pd.DataFrame(rows), self.path)
        return path

    def load_samples(self) -> pd.DataFrame:
        """All samples: samples.parquet of a complete run (verified first), else what an unfinished run
        holds so far (shards and a kept samples.parquet, deduplicated)."""
        complete = self.is_complete()
        if complete:
            self.verify()
        parts = [self.samples_path] if complete else self._partial_tables()
        fix = "delete the run folder and rerun the command that wrote it" if complete else _REDO_PART
        tables = [read_table(p, None, fix) for p in parts]
        if complete:
            return tables[0]
        if not tables:
            return pd.DataFrame(columns=SAMPLE_COLUMNS)
        df = pd.concat(tables, ignore_index=True).drop_duplicates(SAMPLE_KEY, keep="first")
        return df.sort_values(SAMPLE_KEY, kind="stable").reset_index(drop=True)

    def finalize(self, metrics: dict, samples: pd.DataFrame | None = None) -> None:
        """Seal a run whose samples are all flushed (`samples`: load_samples() as the caller read it):
        samples.parquet, metrics.json, then COMPLETE."""
        df = self.load_samples() if samples is None else samples
        record = {"finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "fingerprint": self.record["fingerprint"]}
        digest = write_table(self.samples_path, df, self.path)
        self.update_metrics(metrics)
        record["tables"] = {self.samples_path.name: {"rows": len(df), "sha256": digest}}
        files.atomic_write_json(self.done_path, record, self.path)  # last: its presence means every file above is final
        self._verified = True
        shutil.rmtree(self.shard_dir, ignore_errors=True)  # samples.parquet now holds every shard's rows

    # ---- integrity ----------------------------------------------------------------------
    def tables(self) -> list[str]:
        """Every table this folder holds, relative to it: each parquet file but the shards (and
        temporary files). A complete run must record all of them in COMPLETE."""
        found = []
        for p in self.path.rglob("*.parquet"):
            rel = p.relative_to(self.path)
            if rel.parts[0] != self.shard_dir.name and not p.name.startswith("."):
                found.append(rel.as_posix())
        return sorted(found)

    def complete_record(self) -> dict | None:
        """COMPLETE's JSON, or None for a marker without records (timestamp only, from before integrity
        records, or empty); verify() checks such a folder against what it can recompute. Read once per
        hold of the lock (see holding)."""
        if "COMPLETE" in self._kept:
            return copy.deepcopy(self._kept["COMPLETE"])
        rec = self._read_complete()
        if self._held:
            self._kept["COMPLETE"] = copy.deepcopy(rec)
        return rec

    def _read_complete(self) -> dict | None:
        raw = files.read_regular(self.done_path, self._repair())  # read once: told apart, then parsed
        try:
            timestamp = not raw.decode("utf-8").lstrip().startswith("{")
        except UnicodeDecodeError:
            timestamp = False  # not a timestamp: reported as damaged below
        if timestamp:
            return None
        rec = files.parse_json(self.done_path, "COMPLETE", raw)
        if not isinstance(rec, dict) or not isinstance(rec.get("tables"), dict):
            raise RunFolderError(f"{self.done_path} is damaged (no table records); {self._repair()}")
        return rec

    def _regenerate(self) -> str:
        return f"regenerate it: move {self.path} aside and rerun the command that wrote it"

    def check_sealed(self, writer: str) -> None:
        """Refuse a writer (`writer`: the command) into a complete run whose COMPLETE is an older marker
        recording no tables: a new record would vouch for whatever the folder holds now (an edited
        samples.parquet included), so such a folder is read-only; readers still check its row counts."""
        if self.is_complete() and self.complete_record() is None:
            raise RunFolderError(
                f"{writer} would add a record to {self.done_path}, an older marker that records no tables: the "
                f"samples it would vouch for cannot be verified, so the folder is read-only; {self._regenerate()}"
            )

    def _repair(self) -> str:
        return (
            f"delete {self.done_path} and rerun the command that wrote the run: it resumes, keeping the samples "
            "it holds and generating what is missing"
        )

    def verify(self, complete: bool = True, allow_unrecorded: bool = False, _rewriting: str = "") -> RunFolder:
        """Refuse (RunFolderError, one line) a folder whose config.json or tables changed.

        complete=True also requires the run to be finished. Tables recorded in COMPLETE must exist, be
        readable, and match their recorded row count and SHA-256; COMPLETE must record samples.parquet
        and every other table the folder holds. A table the folder holds but COMPLETE does not record
        (a lens command stopped between writing and recording it) is refused, unless allow_unrecorded
        (the writers: a lens command rerun rewrites it, `--adopt` records it). A marker without records
        (legacy timestamp, or empty) is accepted only when samples.parquet holds every sample the run's
        settings and metrics.json imply. `_rewriting` (register_table) is the table being rewritten: its
        old record and new content are not compared."""
        if not self.config_path.exists():
            raise RunFolderError(
                f"{self.path} is not a run folder (no config.json); pass a folder written by tandem-eval solo/handoff"
            )
        # read first, then checked: COMPLETE, config.json (settings re-hashed), a record-less marker's table
        finished = self.is_complete()
        check = finished and not self._verified
        rec, repair = (self.complete_record(), self._repair()) if check else (None, "")
        cfg = self.record
        legacy = read_table(self.samples_path, SAMPLE_KEY, repair) if check and rec is None else None
        if not finished:
            if complete:
                why = "no COMPLETE marker" if not self.done_path.exists() else "COMPLETE but no samples.parquet"
                raise RunFolderError(
                    f"{self.path} is incomplete ({why}); rerun the command that created it to finish it"
                )
            return self
        if not check:
            return self
        if legacy is not None:
            recorded = cfg["config"]
            if recorded.get("inputs") is not None or (recorded.get("senior") or {}).get("content"):
                # inputs and checkpoints by content were recorded only by versions that also write COMPLETE's
                # table records: a record-less marker beside them is a downgrade
                raise RunFolderError(
                    f"{self.done_path} records no tables, but {self.config_path} records the run's inputs or senior by "
                    "content, which only versions that record tables write: the marker was replaced, so the samples "
                    f"cannot be verified; {self._regenerate()}"
                )
            self._verify_unrecorded_marker(cfg, legacy, allow_unrecorded)
            self._verified = True
            return self
        rec = cast(dict, rec)  # cast: checked with no COMPLETE record means a legacy marker, returned above
        if rec.get("fingerprint") != cfg["fingerprint"]:
            raise RunFolderError(
                f"{self.config_path} does not belong to the finished run (fingerprint {cfg['fingerprint']}, "
                f"COMPLETE records {rec.get('fingerprint')}); restore the original config.json, or rerun into a new "
                "--out"
            )
        self._check_recorded_tables(rec["tables"], _rewriting)
        rows = rec["tables"][self.samples_path.name]["rows"]
        self._check_expected_rows(cfg, rows)
        self._check_unrecorded(set(rec["tables"]) | {_rewriting}, allow_unrecorded)
        # metrics.json is not hashed (lens commands and handoff add keys), but its counts must be the table's
        n_samples = self.metrics().get("n_samples")
        if n_samples is not None and n_samples != rows:
            raise RunFolderError(
                f"{self.metrics_path} counts {n_samples} samples, samples.parquet holds {rows}: it was edited; "
                f"restore it, or {self._repair()}"
            )
        self._verified = True
        return self

    def _check_recorded_tables(self, tables: dict, rewriting: str) -> None:
        """Every table COMPLETE records (samples.parquet among them) exists with its recorded row count
        and SHA-256; `rewriting` (the table being rewritten) is not compared."""
        if self.samples_path.name not in tables:
            raise RunFolderError(f"{self.done_path} does not record samples.parquet; {self._repair()}")
        for name, want in sorted(tables.items()):
            if name == rewriting:
                continue
            path = self.path / name
            regen = files.RESTORE
            if not path.exists():
                raise RunFolderError(f"{path} is missing but recorded in {self.done_path}; {regen}")
            got = _table_record(path)
            if not isinstance(want, dict) or got != {k: want.get(k) for k in got}:
                raise RunFolderError(
                    f"{path} was changed or truncated after the run finished ({got['rows']} rows, "
                    f"COMPLETE records {want.get('rows') if isinstance(want, dict) else want}; content hash "
                    f"differs); {regen}"
                )

    def _check_unrecorded(self, recorded: set[str], allow: bool) -> None:
        extra = [t for t in self.tables() if t not in recorded]
        if not extra:
            return
        holder = None if allow or self._held else files.live_holder(self.lock_path)
        if holder is not None:  # another process is between writing and recording it right now
            raise RunFolderError(
                f"{self.path} is being written by another process (PID {holder.get('pid', 'unknown')} on "
                f"{holder.get('host', 'unknown')}): {self.path / extra[0]} is not recorded yet; wait for it to finish"
            )
        msg = (
            f"{self.path / extra[0]} is not recorded in {self.done_path} (a command stopped between writing and "
            "recording it); rerun the command that writes it (legibility/drift/regrade), or pass --adopt to "
            "legibility/drift to record it as it is"
        )
        if not allow:
            raise RunFolderError(msg)
        log.warning("%s", msg)

    def _check_expected_rows(self, cfg: dict, rows: int) -> None:
        """samples.parquet holds problems x n rows, the problems being those config.json's inputs record."""
        inputs = cfg["config"].get("inputs")
        if not inputs:
            return
        c = cfg["config"]
        problems = len(range(c["shard_index"], inputs["n_problems"], c["num_shards"]))
        if rows != problems * c["n"]:
            raise RunFolderError(
                f"{self.samples_path} holds {rows} rows, but the run's inputs imply {problems} problems x --n "
                f"{c['n']} = {problems * c['n']}; {self._repair()}"
            )

    def _verify_unrecorded_marker(self, cfg: dict, df: pd.DataFrame, allow_unrecorded: bool) -> None:
        """A COMPLETE without records: accept samples.parquet only if it holds every sample (problems x
        --n, each problem with sample indices 0..n-1, as metrics.json counts them); lens tables one row
        per sample (allow_unrecorded: a writer is told, not stopped). Anything else is refused with the
        command that repairs it."""
        n = cfg["config"]["n"]
        per_problem = df.groupby(PROBLEM_KEY).sample_idx.apply(lambda s: sorted(s.astype(int)))
        metrics = self.metrics()
        reasons = []
        if any(idx != list(range(n)) for idx in per_problem):
            reasons.append(f"not every problem has sample indices 0..{n - 1}")
        if metrics.get("n_samples") != len(df) or metrics.get("n_problems") != len(per_problem):
            reasons.append(
                f"{len(df)} samples of {len(per_problem)} problems, metrics.json counts "
                f"{metrics.get('n_samples')} of {metrics.get('n_problems')}"
            )
        if "pass_at_k" not in metrics:
            reasons.append("metrics.json has no pass_at_k")
        try:
            self._check_expected_rows(cfg, len(df))
        except RunFolderError:
            reasons.append("the row count differs from the problems x --n the inputs imply")
        for name in self._per_sample_tables_off(len(df)):
            if allow_unrecorded:
                log.warning("%s: %s is not one row per sample; readers refuse it", self.path, name)
            else:
                reasons.append(f"{name} is not one row per sample ({len(df)})")
        if reasons:
            raise RunFolderError(
                f"{self.done_path} records no tables (an older or empty marker) and the run does not hold what its "
                f"settings imply ({'; '.join(reasons)}); {self._repair()}"
            )
        # Once per process (warnings dedups), not once per folder: a results tree may hold dozens.
        warnings.warn(
            "run folders whose COMPLETE records no tables (older markers) are checked by row counts only",
            stacklevel=3,
        )
        log.info("%s: COMPLETE records no tables; row counts checked", self.path)

    def _per_sample_tables_off(self, n_samples: int) -> list[str]:
        """Tables other than samples.parquet that should hold one row per sample but do not."""
        return [
            t
            for t in self.tables()
            if t != self.samples_path.name and _table_record(self.path / t)["rows"] != n_samples
        ]

    def register_table(self, name: str | Path) -> None:
        """Record a table written into this COMPLETE run (e.g. lens/JR/legibility.parquet) in COMPLETE,
        so readers verify it like samples.parquet. `name` is relative to the run folder (or inside it).
        Other unrecorded tables do not stop it (they stay refused by readers until rewritten or adopted).
        The folder is locked and verified first; a command inside amending() records through the
        Amendment it holds instead (record_table), without asking again."""
        path = Path(name) if Path(name).is_absolute() else self.path / name
        rel = _check_table(self, path)
        if not self.is_complete():
            raise RunFolderError(f"{self.path} is incomplete (no COMPLETE marker); finish the run before adding {rel}")
        with contextlib.nullcontext() if self._held else self.holding(wait_s=30):
            self._verified = False  # another process may have changed the folder since this one verified it
            self.verify(allow_unrecorded=True, _rewriting=rel)  # never re-seal a folder that is already damaged
            self.check_sealed(f"recording {rel}")  # a marker without records is never sealed after the fact
            _record_table(self, path)

    def write_table(self, name: str | Path, df: pd.DataFrame) -> Path:
        """Write a per-sample table into this COMPLETE run atomically and record it in COMPLETE. A kill
        between the two leaves the table unrecorded: readers refuse it, and rerunning the command that
        writes it (or registering it) repairs the folder."""
        path = self.path / name
        files.check_write_target(path, self.path)
        self.check_sealed(f"writing {name}")  # before the table exists: it would stay unrecorded
        files.make_dirs(path.parent)
        write_table(path, df, self.path)  # refuses a link planted while the folder was made
        self.register_table(name)  # relative to the run folder (path is already joined with self.path)
        return path

    # ---- one writer at a time -------------------------------------------------------------
    @contextlib.contextmanager
    def amending(self, rewriting: str = ""):
        """Hold the lock while a command adds tables to this complete run (legibility, drift, regrade):
        the folder is verified under it, and what the command names, writes and records inside
        (write_table, register_table, update_metrics) happens with no other writer in between. A
        second writer is refused at once, naming the holder. `rewriting`: the one table the command
        rewrites, whose unrecorded copy (the command stopped before recording it) it repairs; without
        it every unrecorded table is tolerated (lens commands: they rewrite or adopt theirs)."""
        with self.holding():
            self._verified = False
            self.verify(allow_unrecorded=not rewriting, _rewriting=rewriting)
            self.check_sealed(f"adding {rewriting or 'a table'}")
            yield Amendment(self)

    def lock(self, wait_s: float = 0.0):
        """Hold RUN/.lock while writing (files.folder_lock: an exclusive flock, released when the
        holder exits or dies). Not reentrant."""
        return files.folder_lock(self.path, self.lock_path, wait_s)

    @contextlib.contextmanager
    def holding(self, wait_s: float = 0.0):
        """lock(), and while it is held COMPLETE's record and metrics.json are read once and then kept as
        this process last read or wrote them: no other writer can change them before it lets go (a lens
        command read COMPLETE 5 times and metrics.json 5 times before). Not reentrant."""
        with self.lock(wait_s):
            self._held, self._kept = True, {}
            try:
                yield self
            finally:
                self._held, self._kept = False, {}

    # ---- metrics ------------------------------------------------------------------------
    def metrics(self) -> dict:
        """metrics.json ({} before it exists); read once per hold of the lock (see holding)."""
        if "metrics" in self._kept:
            return copy.deepcopy(cast(dict, self._kept["metrics"]))
        exists = self.metrics_path.exists() or self.metrics_path.is_symlink()
        metrics = files.read_json(self.metrics_path, "metrics.json", dict) if exists else {}
        if self._held:
            self._kept["metrics"] = copy.deepcopy(metrics)
        return metrics

    def update_metrics(self, new: dict) -> None:
        """Merge top-level keys into metrics.json (legibility/drift add their own keys), and rewrite
        results.json from it. results.json is derived (never read back by tandem-eval: readers verify
        config.json and the tables), so a stale or edited one misleads no command. results.json holds the
        record this folder keeps (config.json as written or read once)."""
        merged = {**self.metrics(), **new}
        files.atomic_write_json(self.metrics_path, merged, self.path)
        self._kept.pop("metrics", None)  # read again if asked again (as a reader would see the file written)
        files.atomic_write_json(self.path / RESULTS_FILE, self.results(merged), self.path)  # not read back

    def results(self, metrics: dict | None = None) -> dict:
        """{"run": path, "config", "fingerprint", "provenance" (versions, git, host), ..., "metrics"}:
        config.json's record and metrics.json, what `--json` prints and results.json holds. `metrics`:
        metrics.json as the caller holds it (None: read here)."""
        return {"run": str(self.path), **self.record, "metrics": self.metrics() if metrics is None else metrics}


RESULTS_FILE = "results.json"


class Amendment:
    """What a command adds to a complete run while it holds the run's lock (RunFolder.amending yields
    it): the folder was verified under that lock and no other writer can change it before the command
    leaves, so each table is written and recorded in COMPLETE without locking or verifying it again.
    `folder`: the run folder itself, for reading."""

    def __init__(self, folder: RunFolder):
        self.folder = folder

    def add_table(self, name: str | Path, df: pd.DataFrame) -> Path:
        """Write a per-sample table atomically, then record it (RunFolder.write_table, under the lock)."""
        path = self.folder.path / name
        _check_table(self.folder, path)
        files.make_dirs(path.parent)
        write_table(path, df, self.folder.path)  # refuses a link planted while the folder was made
        _record_table(self.folder, path)
        return path

    def record_table(self, name: str | Path) -> None:
        """Record a table already written (an adopted one) in COMPLETE (RunFolder.register_table, under the lock)."""
        path = Path(name) if Path(name).is_absolute() else self.folder.path / name
        _check_table(self.folder, path)
        _record_table(self.folder, path)


def _check_table(folder: RunFolder, path: Path) -> str:
    """The name in COMPLETE of a table to record in `folder`; refused when it lies outside the folder or
    through a link (check_write_target), or is samples.parquet (only finalize seals the samples: an edited
    table is never re-sealed)."""
    files.check_write_target(path, folder.path)
    rel = _relative(folder, path)
    if rel == folder.samples_path.name:
        raise RunFolderError(f"{path} is recorded by the run itself; it cannot be registered again")
    return rel


def _relative(folder: RunFolder, path: Path) -> str:
    """A table's name in COMPLETE: its path relative to the run folder."""
    return path.resolve().relative_to(folder.path.resolve()).as_posix()


def _record_table(folder: RunFolder, path: Path) -> None:
    """COMPLETE with the table at `path` recorded: its row count and SHA-256 (called holding the lock)."""
    rec = cast(dict, folder.complete_record())  # cast: a sealed folder's marker records tables (check_sealed)
    rec["tables"][_relative(folder, path)] = _table_record(path)
    files.atomic_write_json(folder.done_path, rec, folder.path)
    folder._kept.pop("COMPLETE", None)  # read again if asked again


def _new_record(cfg: EvalConfig, extra: dict | None, fingerprint: str | None = None) -> dict:
    """A new folder's config.json; `fingerprint`: cfg's, when the caller computed it already (the plan)."""
    fingerprint = fingerprint or cfg.fingerprint()
    return {"config": to_dict(cfg), "fingerprint": fingerprint, "provenance": provenance(), **(extra or {})}


def _table_record(path: Path) -> dict:
    """What COMPLETE records of a table file: its row count (from the parquet footer) and SHA-256."""
    rows, digest = files.parquet_record(path)
    return {"rows": rows, "sha256": digest}


def find_runs(root: str | Path) -> list[RunFolder]:
    """Every run folder (a directory with config.json and samples) under root, sorted by path."""
    root = Path(root)
    found = [
        p.parent
        for p in root.rglob("config.json")
        if (p.parent / "shards").exists() or (p.parent / "samples.parquet").exists()
    ]
    return [RunFolder(p) for p in sorted(found)]


def verify_run(
    path: str | Path, complete: bool = True, allow_unrecorded: bool = False, *, rewriting: str = ""
) -> RunFolder:
    """THE reader's entry point: the run folder at `path`, checked (see RunFolder.verify).

    complete=False accepts an unfinished run (its config is still checked); allow_unrecorded is for
    the commands that write tables into a finished run (they repair or adopt an unrecorded one);
    `rewriting` names the one table a command rewrites (regrade.parquet): only it may be unrecorded."""
    if not isinstance(path, str | Path):
        raise RunFolderError(f"a run folder is a path, got {type(path).__name__} {path!r}")
    if not Path(path).is_dir():
        why = "a file, not a folder" if Path(path).exists() else "no such directory"
        raise RunFolderError(f"{path} is not a run folder ({why}); pass a folder written by tandem-eval")
    return RunFolder(path).verify(complete, allow_unrecorded, _rewriting=rewriting)
