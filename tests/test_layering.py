"""The library's boundaries: tandem_eval/ evaluates, trainer/ trains and depends on tandem_eval, never the reverse.

PYTHONPATH=$PWD python -m pytest -q tests/test_layering.py
"""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parents[1] / "tandem_eval"
# an optimizer, a backward pass or an optimizer step: the signs of a training loop
TRAINING = re.compile(r"torch\.optim|\.backward\(|optim\w*\.step\(|zero_grad\(")


def _sources() -> list[Path]:
    files = sorted(LIBRARY.rglob("*.py"))
    assert len(files) > 20, "the library's sources were not found"
    return files


def test_no_optimizer_loop_in_the_evaluation_library():
    hits = [
        f"{f.relative_to(LIBRARY.parent)}:{m.group(0)}" for f in _sources() for m in TRAINING.finditer(f.read_text())
    ]
    assert not hits, f"training code inside tandem_eval/ (move it under trainer/): {hits}"


def test_the_evaluation_library_never_imports_the_trainer():
    pattern = re.compile(r"^\s*(from trainer[\s.]|import trainer\b)", re.M)
    # none: the demo's fallback (no bundled checkpoints) builds its tiny pair with tandem_eval.toy.tiny
    hits = [str(f.relative_to(LIBRARY.parent)) for f in _sources() if pattern.search(f.read_text())]
    assert hits == [], hits


def test_the_pattern_sees_a_training_loop():
    assert TRAINING.search("opt = torch.optim.AdamW(model.parameters())\nloss.backward()\nopt.step()")


def _unit(lib: Path, parts: tuple[str, ...]) -> str | None:
    """The library unit a dotted module path falls in: a top-level module, or a whole subpackage."""
    if len(parts) < 2 or parts[0] != lib.name:
        return None
    name = parts[1]
    if (lib / name).is_dir():
        return f"{name}/"
    return name if (lib / f"{name}.py").exists() else None


def import_graph(lib: Path = LIBRARY) -> dict[str, set[str]]:
    """{unit: units it imports}, counting imports inside functions too (a lazy import is still a
    dependency: it only hides a cycle from the interpreter, not from the reader)."""
    graph: dict[str, set[str]] = {}
    for f in sorted(lib.rglob("*.py")):
        rel = f.relative_to(lib.parent).with_suffix("").parts
        package = rel[:-1]
        me = _unit(lib, rel if rel[-1] != "__init__" else (*package, "__init__"))
        if me is None:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                mods = [(*base, *node.module.split("."))] if node.module else [(*base, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [tuple(node.module.split("."))]
            elif isinstance(node, ast.Import):
                mods = [tuple(a.name.split(".")) for a in node.names]
            else:
                continue
            graph.setdefault(me, set()).update(u for m in mods if (u := _unit(lib, m)) and u != me)
    return graph


def test_the_library_imports_in_one_direction():
    """No import cycle between the library's modules and subpackages (ARCHITECTURE.md's layers);
    graphlib names the cycle if one appears."""
    graph = import_graph()
    assert {"cli/", "generate/", "run/", "score/", "engines/", "report/"} <= set(graph)
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError naming the cycle
    assert order.index("schemas") < order.index("run/") < order.index("generate/") < order.index("cli/")


def test_guarded_file_io_stands_on_the_ground():
    """tandem_eval/files.py (every guarded read and write, RunFolderError) imports nothing of the library,
    so that the schemas, checkpoints (models) and the run folder all read and write through it."""
    graph = import_graph()
    assert "files" in {u for imported in graph.values() for u in imported}, "tandem_eval/files.py is used by no unit"
    assert graph.get("files", set()) == set(), graph.get("files")


def test_the_cycle_check_sees_a_lazy_import(tmp_path):
    lib = tmp_path / "tandem_eval"
    (lib / "sub").mkdir(parents=True)
    (lib / "a.py").write_text("from .sub.b import x\n")
    (lib / "sub" / "__init__.py").write_text("")
    (lib / "sub" / "b.py").write_text("def x():\n    from ..a import y  # lazy, inside a function\n")
    assert import_graph(lib) == {"a": {"sub/"}, "sub/": {"a"}}
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(import_graph(lib)).static_order())


# The stage boundaries of ARCHITECTURE.md: (importer units, forbidden unit, why). Checkpoints and engines
# take what they need of a schedule as values (junior needed, stop ids); the score stage reads run
# folders and never generates; the read side takes the lens tables' layout from the run-folder side.
BOUNDARIES = [
    (("models", "engines/"), "generate/", "checkpoints and engines take 'junior needed' / stop ids as values"),
    (("score/",), "generate/", "the score stage scores a run folder; the CLI composes generate then score"),
    (("run/", "report/"), "score/", "the read side takes the lens tables' layout from run/lens_layout"),
]


@pytest.mark.parametrize(("importers", "forbidden", "why"), BOUNDARIES, ids=[b[1] for b in BOUNDARIES])
def test_the_stage_boundaries_hold(importers, forbidden, why):
    graph = import_graph()
    assert set(importers) <= set(graph), f"units not found: {set(importers) - set(graph)}"
    crossing = sorted(u for u in importers if forbidden in graph[u])
    assert not crossing, f"{crossing} import {forbidden}: {why}"


# The package rules (ARCHITECTURE.md's picture): the stages sit on run/, run/ on the core (config,
# schemas, models, devices, paths, data/, engines/, metrics/, ...); the CLI and the integrations on top
# may import everything. A stage never imports another stage: what two stages share lives below them.
STAGES = ("generate/", "score/", "report/")
RUN = "run/"
TOP = ("cli/", "integrations/")


def package_rule_breaks(graph: dict[str, set[str]]) -> list[str]:
    """'importer -> imported' for each import that goes across stages or upwards."""
    breaks = []
    for unit, imported in sorted(graph.items()):
        if unit in TOP:
            continue
        above = set(TOP) | set(STAGES) - {unit}  # a stage: the other stages and the top
        if unit not in STAGES:
            above |= set(STAGES) | ({RUN} if unit != RUN else set())  # run/ and the core: every stage too
        breaks += [f"{unit} -> {u}" for u in sorted(imported & above)]
    return breaks


def test_no_stage_imports_another_and_nothing_imports_upwards():
    graph = import_graph()
    assert {*STAGES, RUN, *TOP} <= set(graph), f"packages not found: {({*STAGES, RUN, *TOP}) - set(graph)}"
    assert package_rule_breaks(graph) == []


def test_the_package_rules_see_a_planted_import(tmp_path):
    lib = tmp_path / "tandem_eval"
    for pkg in ("run", "generate", "score", "cli"):
        (lib / pkg).mkdir(parents=True)
        (lib / pkg / "__init__.py").write_text("")
    (lib / "models.py").write_text("from .run import results\n")  # the core reaching up to run/
    (lib / "score" / "stage.py").write_text("def f():\n    from ..generate.progress import bar\n")  # lazy
    (lib / "generate" / "execute.py").write_text("from ..run.results import RunFolder\n")  # allowed
    (lib / "cli" / "main.py").write_text("from ..generate import execute\nfrom ..score import stage\n")  # allowed
    assert package_rule_breaks(import_graph(lib)) == ["models -> run/", "score/ -> generate/"]


def test_the_boundary_check_sees_a_type_only_import(tmp_path):
    """A TYPE_CHECKING import is a dependency too (the reader still has to know the other module)."""
    lib = tmp_path / "tandem_eval"
    lib.mkdir()
    (lib / "schedules.py").write_text("")
    (lib / "models.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .schedules import S\n"
    )
    assert import_graph(lib) == {"models": {"schedules"}}


TRAINER = LIBRARY.parent / "trainer"


def test_the_trainers_modules_import_in_one_direction():
    """No import cycle between the trainer's modules, file by file (trainer/toy holds many; imports inside
    functions count): two modules asking each other for names read as one tangle (markdown and diagnosis,
    gates and scales did, each hidden by a lazy import)."""
    graph: dict[str, set[str]] = {}
    for f in sorted(TRAINER.rglob("*.py")):
        me = ".".join(f.relative_to(TRAINER.parent).with_suffix("").parts).removesuffix(".__init__")
        package = me if f.name == "__init__.py" else me.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mods = (
                    [".".join([*base, node.module])] if node.module else [".".join([*base, a.name]) for a in node.names]
                )
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            else:
                continue
            known = {
                m for m in mods if m.startswith("trainer") and (TRAINER.parent / (m.replace(".", "/") + ".py")).exists()
            }
            graph.setdefault(me, set()).update(known - {me})
    assert "trainer.toy.gates" in graph and "trainer.toy.scales" in graph["trainer.toy.gates"]
    list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError naming the cycle
