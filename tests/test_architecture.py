"""Engines by capability: outside tandem_eval/engines/, no code of the library or the trainer branches on an
engine's name; it asks the backend's facts (`engines.backend(name).exact_kl`, ...), so a new engine is one
class and one `ENGINES` entry (ARCHITECTURE.md, "where a new piece goes").

PYTHONPATH=$PWD python -m pytest -q tests/test_architecture.py
"""

from __future__ import annotations

import ast
from pathlib import Path

from tandem_eval.engines import ENGINES

ROOT = Path(__file__).resolve().parents[1]
ENGINES_DIR = ROOT / "tandem_eval" / "engines"


def _names(node: ast.AST) -> list[str]:
    """The engine names `node` holds as literals: a string, or a tuple/list/set of strings."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in ENGINES]


def name_branches(source: str) -> list[str]:
    """'line: what' for each place `source` decides by an engine's name: a comparison or membership test
    against one (`== "hf"`, `in ("hf", "vllm")`), a dict keyed by them, a lookup by one (`d["vllm"]`), a
    `case "hf":`. Passing a name as a value (a default, `load_engine(name, ...)`) is no branch."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found = [n for side in (node.left, *node.comparators) for n in _names(side)]
        elif isinstance(node, ast.Dict):
            found = [n for k in node.keys if k is not None for n in _names(k)]
        elif isinstance(node, ast.Subscript):
            found = _names(node.slice)
        elif isinstance(node, ast.MatchValue):
            found = _names(node.value)
        else:
            continue
        hits += [f"{node.lineno}: {type(node).__name__} on {n!r}" for n in found]
    return hits


def test_no_code_outside_the_engines_branches_on_an_engine_name():
    files = [*sorted((ROOT / "tandem_eval").rglob("*.py")), *sorted((ROOT / "trainer").rglob("*.py"))]
    assert len(files) > 50, "the sources were not found"
    hits = [
        f"{f.relative_to(ROOT)}:{hit}"
        for f in files
        if ENGINES_DIR not in f.parents
        for hit in name_branches(f.read_text())
    ]
    assert hits == [], f"branches on an engine's name (ask engines.backend(name)'s facts instead): {hits}"


def test_the_check_sees_each_kind_of_branch():
    planted = (
        'if cfg.engine == "hf":\n    pass\n'
        'ok = engine in ("hf", "vllm")\n'
        'KEY = {"vllm": "rows"}\n'
        'gap = engines["vllm"] - 1\n'
        'match cfg.engine:\n    case "hf":\n        pass\n'
        'load_engine("hf", path)\n'  # a value passed on: no branch
        'engine: str = "hf"\n'  # a default: no branch
    )
    assert [h.split(" on ")[0] for h in name_branches(planted)] == [
        "1: Compare",
        "3: Compare",
        "3: Compare",
        "4: Dict",
        "5: Subscript",
        "7: MatchValue",
    ]
