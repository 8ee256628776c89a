"""The repository habits `make lint` enforces: .pre-commit-config.yaml fetches nothing (every repo is `local`,
every hook a console script of a package pinned in pyproject.toml's test extra), and its large-file guard
admits the bundled toy checkpoints and nothing else that is large.

    PYTHONPATH=$PWD python -m pytest -q tests/test_habits.py

Fast (< 2 s): the guard is run in-process through pre-commit-hooks' own function, on the tracked files.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib.metadata import distribution
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = "tandem_eval/toy/checkpoints/"


def _config() -> dict:
    return yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())


def _hooks() -> dict[str, dict]:
    return {hook["id"]: hook for repo in _config()["repos"] for hook in repo["hooks"]}


def _tracked() -> list[str]:
    """Every file git tracks here (CI runs on a clone, as `pre-commit run --all-files` needs)."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.strip()}")
    return [f for f in out.stdout.split("\0") if f]


def test_every_hook_is_local_and_a_pinned_console_script():
    """No hook is fetched (machines and CI reach only the package index) and none builds its own environment:
    each runs a console script that the test extra installs at an exact version."""
    repos = _config()["repos"]
    assert repos and all(repo["repo"] == "local" for repo in repos), [r["repo"] for r in repos]
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    pinned = [Requirement(r).name for r in extra if str(Requirement(r).specifier).startswith("==")]
    scripts = {name: _scripts(name) for name in pinned}
    for hook in _hooks().values():
        assert hook["language"] in {"system", "unsupported"}, hook  # no env to install, so nothing to download
        assert "additional_dependencies" not in hook, hook
        script = hook["entry"].split()[0]
        owners = [name for name, names in scripts.items() if script in names]
        assert owners, f"{hook['id']}: {script} is no script of a package the test extra pins ({pinned})"


def _scripts(package: str) -> set[str]:
    """The commands an installed package puts in the venv's bin/: its console scripts and, for a binary such
    as ruff, the files its wheel installs there."""
    dist = distribution(package)
    files = {Path(f).name for f in dist.files or () if Path(f).parent.name in {"bin", "Scripts"}}
    return files | {ep.name for ep in dist.entry_points if ep.group == "console_scripts"}


def test_large_file_guard_admits_the_toy_checkpoints_and_refuses_other_large_files(tmp_path, monkeypatch):
    from pre_commit_hooks.check_added_large_files import main as guard

    hook = _hooks()["check-added-large-files"]
    assert "--enforce-all" in hook["args"]  # `--all-files` in CI checks every file, not only new ones
    maxkb = int(next(a for a in hook["args"] if a.startswith("--maxkb=")).split("=")[1])
    excluded = re.compile(hook["exclude"])
    tracked = _tracked()
    checked = [f for f in tracked if not excluded.search(f)]
    weights = [f for f in tracked if f.startswith(CHECKPOINTS) and f.endswith(".safetensors")]
    # the exception is exactly the checkpoints folder, and it is needed (they are larger than the limit)
    assert weights and all(excluded.search(f) for f in weights)
    assert any((ROOT / f).stat().st_size > maxkb * 1024 for f in weights)
    assert not any(f.startswith(CHECKPOINTS) for f in checked) and checked
    monkeypatch.chdir(ROOT)
    assert guard([*hook["args"], *checked]) == 0  # everything else committed today is under the limit
    # a large file anywhere else (results/ included) is refused
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # the guard asks git which files are LFS
    big = tmp_path / "results" / "model.safetensors"
    big.parent.mkdir()
    big.write_bytes(b"\0" * (maxkb + 1) * 1024)
    assert not excluded.search("results/model.safetensors")
    monkeypatch.chdir(tmp_path)
    assert guard([*hook["args"], "results/model.safetensors"]) == 1
