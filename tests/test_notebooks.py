"""Execute every notebook in notebooks/ with nbclient against a results folder.

The notebooks find results with tandem_eval.report.find_results() (no `cd ..`): here
$TANDEM_EVAL_RESULTS points them at a synthetic results folder built by report_fixtures; once the
toy world's runs are committed under results/toy/, test_notebooks_on_committed_results runs them
on those too.

Run: .venv/bin/python -m pytest tests/test_notebooks.py -q
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from report_fixtures import make_results

from tandem_eval.run.results import find_runs

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def run_notebook(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    return nb


@pytest.fixture(scope="module")
def synthetic_results(tmp_path_factory) -> Path:
    return make_results(tmp_path_factory.mktemp("results"))


def test_three_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == [
        "01_explore_run.ipynb",
        "02_compare_seniors.ipynb",
        "03_training_dynamics.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, synthetic_results, monkeypatch):
    monkeypatch.setenv("TANDEM_EVAL_RESULTS", str(synthetic_results))
    nb = run_notebook(path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs)
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert str(synthetic_results) in text  # it read the results it was pointed at


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_on_committed_results(path, monkeypatch):
    toy = REPO / "results" / "toy"
    if not (toy.exists() and find_runs(toy)):
        pytest.skip("results/toy/ holds no run folders yet (the toy world's results land later)")
    monkeypatch.delenv("TANDEM_EVAL_RESULTS", raising=False)
    run_notebook(path)
