"""Commands that load no model import no torch, vLLM or transformers (issue 42: `view` took ~30 s to start).

Each command runs in a fresh interpreter as the console script does (runpy of tandem_eval.cli) on synthetic
run folders (report_fixtures); the child prints which heavy modules ended up in sys.modules. `view` must
still split tokens (its page carries token surfaces): the tokenizer is read with the `tokenizers` library
(models.Vocabulary), not skipped. benchmarks/bench_startup.py measures the same commands' start-up.

Run: .venv/bin/python -m pytest tests/test_startup.py -q
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from report_fixtures import make_results

HEAVY = ("torch", "vllm", "transformers")
PROBE = (
    "import runpy, sys\n"
    "sys.argv = ['tandem-eval', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('tandem_eval.cli', run_name='__main__')\n"
    "except SystemExit as e:\n    assert not e.code, f'exit {e.code}'\n"
    f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return make_results(tmp_path_factory.mktemp("results"))


def heavy_imports(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=os.environ, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("HEAVY="), proc.stdout[-500:]
    return last[len("HEAVY=") :]


@pytest.mark.parametrize("command", ["--help", "report --help", "view --help", "compare --help"])
def test_help_imports_no_model_library(command):
    assert heavy_imports(*command.split()) == ""


def test_view_splits_tokens_without_torch(results, tmp_path):
    page = tmp_path / "view.html"
    assert heavy_imports("view", str(results / "tandem"), "--out", str(page)) == ""
    assert '"tok"' in page.read_text(), "the page carries token surfaces only when a tokenizer loaded"


def test_report_and_compare_import_no_model_library(results, tmp_path):
    assert heavy_imports("report", str(results / "tandem"), "--out", str(tmp_path / "report")) == ""
    assert (tmp_path / "report" / "table2.md").exists()
    solo_a, solo_b = (str(results / arm / "solo") for arm in ("tandem", "grpo"))
    assert heavy_imports("compare", solo_a, solo_b, "--metric", "solo_pass@4") == ""
