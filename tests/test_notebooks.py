"""Execute every notebook in notebooks/ with nbclient: on a synthetic results folder and on the committed runs.

Each notebook opens on one scenario (a `parameters` cell, `SCENARIO = "toy/emergent"`) and finds it with
tandem_eval.report.find_results(SCENARIO) (no `cd ..`): here $TANDEM_EVAL_RESULTS points them at a synthetic
results folder (report_fixtures) laid out as results/toy/emergent; test_notebooks_on_committed_results runs
them on results/toy/emergent itself, each within NOTEBOOK_BUDGET_S, without a tokenizer warning (runs
written on another machine find their checkpoints in the bundle) and, for 02, on two distinct arms.

Run: .venv/bin/python -m pytest tests/test_notebooks.py -q
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from report_fixtures import make_results

from tandem_eval.run.results import find_runs

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
SCENARIO = "toy/emergent"  # every notebook's default
NOTEBOOK_BUDGET_S = 60  # issue 42: each runs in a minute at most on the committed runs


def run_notebook(path: Path) -> tuple[nbformat.NotebookNode, float]:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the failing cell
    return nb, time.perf_counter() - start


def streams(nb: nbformat.NotebookNode, name: str | None = None) -> str:
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    return "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and name in (None, o.name))


@pytest.fixture(scope="module")
def synthetic_results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    make_results(root / SCENARIO)
    return root


def test_three_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == [
        "01_explore_run.ipynb",
        "02_compare_seniors.ipynb",
        "03_training_dynamics.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_opens_on_one_scenario(path):
    """The second cell is the parameter cell (tagged `parameters`, as papermill reads it) naming one scenario,
    and the notebook reads results through find_results(SCENARIO), never the whole results folder."""
    nb = nbformat.read(path, as_version=4)
    params = nb.cells[1]
    assert params.cell_type == "code" and "parameters" in params.metadata.get("tags", [])
    assert re.search(rf'^SCENARIO = "{SCENARIO}"', params.source, re.M)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "find_results(SCENARIO)" in code and "find_results()" not in code


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, synthetic_results, monkeypatch):
    monkeypatch.setenv("TANDEM_EVAL_RESULTS", str(synthetic_results))
    nb, _ = run_notebook(path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs)
    assert str(synthetic_results / SCENARIO) in streams(nb)  # it read the scenario it was pointed at


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_on_committed_results(path, monkeypatch):
    scenario = REPO / "results" / SCENARIO
    if not (scenario.exists() and find_runs(scenario)):
        pytest.skip(f"results/{SCENARIO} holds no run folders in this checkout")
    monkeypatch.delenv("TANDEM_EVAL_RESULTS", raising=False)
    nb, seconds = run_notebook(path)
    assert seconds <= NOTEBOOK_BUDGET_S, f"{path.name} took {seconds:.0f} s (budget {NOTEBOOK_BUDGET_S} s)"
    assert "no tokenizer" not in streams(nb, "stderr")  # the committed runs' recorded paths resolve here
    if path.stem.startswith("02"):
        m = re.search(r"comparing (\S+) - (\S+) at", streams(nb))
        assert m and m.group(1) != m.group(2) and m.group(1).split("/")[0] == m.group(2).split("/")[0]
