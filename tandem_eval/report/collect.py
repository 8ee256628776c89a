"""Finding run folders and grouping them into arms: the data layer of reports, notebooks and analyses.

    from tandem_eval.report.collect import collect, find_results
    col = collect([find_results("toy")])         # every run folder and trainer log under results/toy
    col.arms                                       # ["base", "grpo", "tandem"] (sorted labels)
    col.solo("tandem").samples()                   # the sample table of tandem's solo run
    col.handoff("tandem", "paragraph").per_problem([1, 4])

An arm is one senior, named by its run's `label` (default: the senior checkpoint's folder name).
Each arm has at most one solo run and one run per handoff schedule. Run folders below a folder
holding a trainer log (`train_log.jsonl`) are that training's periodic evaluations: they feed the
training-dynamics figure (by step), not the tables. Nothing here loads a model.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from tandem_eval.metrics.passk import per_problem_pass_at_k
from tandem_eval.results import RunFolder, find_runs

TRAIN_LOG = "train_log.jsonl"
RESULTS_ENV = "TANDEM_EVAL_RESULTS"  # overrides where find_results() looks (tests, CI, other worlds)
_STEP_RE = re.compile(r"(?:step|checkpoint|ckpt)[-_]?(\d+)", re.IGNORECASE)
_KEY = ["benchmark", "problem_id", "sample_idx"]


class ReportError(RuntimeError):
    """The inputs cannot make a report as asked; the message names the fix."""


def find_results(world: str | None = None, start: str | Path | None = None) -> Path:
    """The repository's `results/` folder (or `results/WORLD`), found without `cd ..` tricks.

    Order: $TANDEM_EVAL_RESULTS; a `results/` folder next to a pyproject.toml in `start` (default:
    the current directory) or any parent; the `results/` next to the installed package's source.
    """
    candidates: list[Path] = []
    if os.environ.get(RESULTS_ENV):
        candidates.append(Path(os.environ[RESULTS_ENV]).expanduser())
    here = Path(start or Path.cwd()).resolve()
    candidates += [
        d / "results" for d in (here, *here.parents) if (d / "results").is_dir() and (d / "pyproject.toml").exists()
    ]
    candidates.append(Path(__file__).resolve().parents[2] / "results")
    for root in candidates:
        path = root / world if world else root
        if path.is_dir():
            return path
    raise ReportError(
        f"no results folder{f' for {world!r}' if world else ''} found (looked in "
        f"{', '.join(str(c) for c in candidates)}); set ${RESULTS_ENV} or pass run folders"
    )


@dataclass
class Run:
    """One run folder, read lazily and cached. `label` is its arm; `step` is set for training evals."""

    path: Path
    config: dict
    label: str
    mode: str
    schedule: str
    ks: tuple[int, ...]
    fingerprint: str | None = None
    step: int | None = None
    _pp: dict = field(default_factory=dict, repr=False)  # cache: per-problem pass@k, side tables

    @classmethod
    def load(cls, path: str | Path, step: int | None = None) -> Run:
        rf = RunFolder(path)
        if not rf.config_path.exists():
            raise ReportError(
                f"{path} is not a run folder (no config.json); pass folders written by "
                "`tandem-eval solo/handoff`, or a results folder holding them"
            )
        raw = rf.config()
        cfg = raw.get("config", raw)
        if step is None and raw.get("step") is not None:
            step = int(raw["step"])
        return cls(
            Path(path),
            cfg,
            run_label(cfg),
            cfg.get("mode", "solo"),
            cfg.get("schedule", "solo"),
            tuple(int(k) for k in cfg.get("ks", (1,))),
            raw.get("fingerprint"),
            step,
        )

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.path)

    @cached_property
    def _samples(self) -> pd.DataFrame:
        df = self.folder.load_samples()
        if "group" not in df.columns or df["group"].isna().any():
            df = df.assign(group=df.get("group", df["benchmark"]).fillna(df["benchmark"]))
        return df

    def samples(self) -> pd.DataFrame:
        """The sample table (one row per problem x sample index); `group` defaults to benchmark."""
        return self._samples

    def metrics(self) -> dict:
        return self.folder.metrics()

    def per_problem(self, ks) -> pd.DataFrame:
        """Per-problem pass@k (fractions 0-1), one row per (benchmark, problem_id); cached per ks."""
        key = tuple(sorted(set(int(k) for k in ks)))
        if key not in self._pp:
            self._pp[key] = per_problem_pass_at_k(self.samples(), list(key))
        return self._pp[key]

    def groups(self) -> dict[str, str]:
        """benchmark -> group."""
        s = self.samples()
        return dict(zip(s["benchmark"], s["group"]))

    def side_columns(self, name: str) -> dict[str, bool]:
        """Columns of the run's `legibility` / `drift` parquet -> whether each holds per-token arrays."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.path / f"{name}.parquet"
        if not path.exists():
            return {}
        schema = pq.read_schema(path)
        return {f.name: pa.types.is_list(f.type) or pa.types.is_large_list(f.type) for f in schema}

    def side_table(self, name: str, arrays: bool = False) -> pd.DataFrame | None:
        """`legibility` or `drift` parquet of this run (group added), or None if absent. Per-token
        array columns are read only with arrays=True (they can be gigabytes); scalar reads are cached."""
        columns = self.side_columns(name)
        if not columns:
            return None
        cache_key = ("side", name)
        if not arrays and cache_key in self._pp:
            return self._pp[cache_key]
        path = self.path / f"{name}.parquet"
        missing = [c for c in ("benchmark", "problem_id") if c not in columns]
        if missing:
            warnings.warn(f"{path} lacks key columns {missing}; ignored", stacklevel=2)
            return None
        df = pd.read_parquet(path, columns=[c for c, is_list in columns.items() if arrays or not is_list])
        if "group" not in df.columns:
            df["group"] = df["benchmark"].map(self.groups()).fillna(df["benchmark"])
        df = df.sort_values([c for c in _KEY if c in df.columns], kind="stable").reset_index(drop=True)
        if not arrays:
            self._pp[cache_key] = df
        return df


def run_label(cfg: dict) -> str:
    """Display name of a run's senior: config label, else the senior checkpoint's folder name."""
    if cfg.get("label"):
        return str(cfg["label"])
    model = cfg.get("junior") if cfg.get("schedule") == "junior-solo" else cfg.get("senior")
    path = str((model or {}).get("path") or "senior")
    if path.startswith("toy:"):
        return path[4:]
    return Path(path.rstrip("/")).name or path


@dataclass
class TrainLog:
    """One training's per-step log and its periodic evaluation runs."""

    arm: str
    path: Path
    log: pd.DataFrame
    evals: list[Run]


@dataclass
class Collection:
    runs: list[Run]
    trainings: list[TrainLog]

    @property
    def arms(self) -> list[str]:
        return sorted({r.label for r in self.runs})

    def _find(self, arm: str, mode: str, schedule: str | None = None) -> Run | None:
        for r in self.runs:
            if r.label == arm and r.mode == mode and (schedule is None or r.schedule == schedule):
                return r
        return None

    def solo(self, arm: str) -> Run | None:
        return self._find(arm, "solo")

    def handoff(self, arm: str, schedule: str) -> Run | None:
        return self._find(arm, "handoff", schedule)

    def handoff_schedules(self) -> list[str]:
        """Handoff schedules other than takeover:N (those make the dose curve), sorted."""
        return sorted({r.schedule for r in self.runs if r.mode == "handoff" and not is_takeover(r.schedule)})

    def primary_schedule(self) -> str | None:
        """The schedule of the main table: the paper's `paragraph` when present, else the first."""
        schedules = self.handoff_schedules()
        return "paragraph" if "paragraph" in schedules else (schedules[0] if schedules else None)

    def takeover_runs(self) -> dict[str, dict[int, Run]]:
        """arm -> {N: run} for runs with schedule takeover:N."""
        out: dict[str, dict[int, Run]] = {}
        for r in self.runs:
            if r.mode == "handoff" and is_takeover(r.schedule):
                out.setdefault(r.label, {})[int(r.schedule.split(":")[1])] = r
        return {a: dict(sorted(v.items())) for a, v in sorted(out.items())}

    def common_ks(self) -> list[int]:
        sets = [set(r.ks) for r in self.runs]
        return sorted(set.intersection(*sets)) if sets else []


def is_takeover(schedule: str) -> bool:
    return schedule.startswith("takeover:") and schedule.split(":")[1].isdigit()


def _step_of(run: Run, train_dir: Path) -> int | None:
    if run.step is not None:
        return run.step
    rel = run.path.relative_to(train_dir).as_posix()
    senior = str((run.config.get("senior") or {}).get("path", ""))
    for text in (rel, senior):
        m = _STEP_RE.findall(text)
        if m:
            return int(m[-1])
    return None


def _train_arm(train_dir: Path, log: pd.DataFrame) -> str:
    meta = train_dir / "tandem_meta.json"
    if meta.exists():
        arm = json.loads(meta.read_text()).get("arm")
        if arm:
            return str(arm)
    if "arm" in log.columns and log["arm"].notna().any():
        return str(log["arm"].dropna().iloc[0])
    return train_dir.name


def read_train_log(path: str | Path) -> pd.DataFrame:
    """A trainer's JSON-lines log as a frame sorted by step (non-JSON lines are skipped)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    df = pd.DataFrame(rows)
    if "step" in df.columns:
        df = df.sort_values("step", kind="stable").reset_index(drop=True)
    return df


def collect(inputs, include_incomplete: bool = False) -> Collection:
    """Run folders (or folders holding them) -> a Collection of arms' runs and training logs."""
    inputs = [Path(p) for p in ([inputs] if isinstance(inputs, (str, Path)) else inputs)]
    if not inputs:
        raise ReportError("no inputs: pass run folders or a results folder")
    paths: list[Path] = []
    train_dirs: list[Path] = []
    for p in inputs:
        if not p.exists():
            raise ReportError(f"{p} does not exist")
        if (p / "config.json").exists():
            paths.append(p)
        paths += [rf.path for rf in find_runs(p)]
        train_dirs += sorted(t.parent for t in p.rglob(TRAIN_LOG))
    paths = sorted({q.resolve() for q in paths})
    train_dirs = sorted({t.resolve() for t in train_dirs})
    runs, evals = [], {t: [] for t in train_dirs}
    for path in paths:
        if not include_incomplete and not RunFolder(path).is_complete():
            warnings.warn(f"skipping incomplete run {path} (no COMPLETE marker)", stacklevel=2)
            continue
        owner = next((t for t in train_dirs if t in path.parents), None)
        run = Run.load(path)
        if owner is None:
            runs.append(run)
        else:
            run.step = _step_of(run, owner)
            if run.step is None:
                warnings.warn(
                    f"{path} is below the training folder {owner} but names no step "
                    '(step-N / checkpoint-N in its path, or "step" in config.json); ignored',
                    stacklevel=2,
                )
            else:
                evals[owner].append(run)
    trainings = []
    for t in train_dirs:
        log = read_train_log(t / TRAIN_LOG)
        arm = _train_arm(t, log)
        for r in evals[t]:
            r.label = arm
        trainings.append(TrainLog(arm, t, log, sorted(evals[t], key=lambda r: (r.step, str(r.path)))))
    if not runs and not trainings:
        raise ReportError(f"no run folders or trainer logs under {', '.join(map(str, inputs))}")
    return Collection(_dedupe(runs), trainings)


def _dedupe(runs: list[Run]) -> list[Run]:
    """One run per (arm, mode, schedule). Copies of one experiment (same fingerprint, e.g. the
    solo/ folder each `handoff` command writes) collapse to the first; different ones refuse."""
    seen: dict[tuple, Run] = {}
    for r in sorted(runs, key=lambda r: str(r.path)):
        key = (r.label, r.mode, r.schedule)
        if key not in seen:
            seen[key] = r
        elif seen[key].fingerprint != r.fingerprint or r.fingerprint is None:
            raise ReportError(
                f"two different {r.mode} runs ({r.schedule}) are both labelled {r.label!r}: {seen[key].path} and "
                f"{r.path}; give them distinct labels (--label) or pass only the run folders to report"
            )
    return sorted(seen.values(), key=lambda r: (r.label, r.mode, r.schedule))
