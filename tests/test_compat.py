"""Deprecated names (tandem_eval/compat.py): each old import a release documented still gives the new
home's object, with a FutureWarning naming that home; the names no release documented are retired;
nothing else in the repository imports a name from a module that only borrows it, so the old names are
used by old code alone.

PYTHONPATH=$PWD python -m pytest -q tests/test_compat.py
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tandem_eval import compat

REPO = Path(__file__).resolve().parents[1]
FORMER = [(module, name) for module, names in compat.FORMER_NAMES.items() for name in names]


@pytest.mark.parametrize(("module", "name"), FORMER, ids=[f"{m}.{n}" for m, n in FORMER])
def test_each_deprecated_name_forwards_to_its_new_home_and_warns(module, name):
    new_module, new_name, since = compat.FORMER_NAMES[module][name]
    old = importlib.import_module(module)
    assert name not in vars(old), f"{module} still holds {name}: the forwarder would never run"
    with pytest.warns(FutureWarning, match=rf"{re.escape(module)}\.{name} .*from {re.escape(new_module)} import"):
        got = getattr(old, name)
    assert got is getattr(importlib.import_module(new_module), new_name)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", since)
    assert f"{new_name}" in compat.__doc__ and name in compat.__doc__, "compat's docstring lists old -> new"


def test_the_documented_grading_import_works_and_names_the_new_path():
    """README before the stage packages: `from tandem_eval.grading import grade` (it raised ImportError)."""
    from tandem_eval.generate import grading

    with pytest.warns(FutureWarning, match=r"tandem_eval\.grading\.grade .*from tandem_eval\.generate\.grading import"):
        from tandem_eval.grading import grade
    assert grade is grading.grade


def test_an_old_import_statement_warns_once_per_line_and_works():
    code = (
        "import warnings\n"
        "from tandem_eval.generate.grading import grade as new\n"  # imported first: libraries that reset
        "warnings.simplefilter('default')\n"  # the warning filters on import would show it again
        "for _ in range(3):\n"
        "    from tandem_eval.grading import grade\n"
        "assert grade is new\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "FutureWarning" in ln]
    assert len(lines) == 1 and "<string>:5" in lines[0] and "tandem_eval.generate.grading" in lines[0], res.stderr


def test_names_that_never_lived_there_are_still_missing():
    import tandem_eval.generate as generate
    from tandem_eval import grading

    for module in (grading, generate):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a missing name is an AttributeError, never a warning
            with pytest.raises(AttributeError, match="no_such_name"):
                module.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        from tandem_eval.grading import no_such_name  # noqa: F401


RETIRED = [  # forwarded for a few days, named in no release's README, docs or notebooks (compat's docstring)
    ("tandem_eval.run.results", "require_complete"),
    ("tandem_eval.run.results", "sha256_file"),
    ("tandem_eval.run.runs", "load_tokenizer"),
    ("tandem_eval.config", "json_safe"),
    ("tandem_eval.generate", "use_threads"),
    ("tandem_eval.score.lens", "lens_juniors"),
]


@pytest.mark.parametrize(("module", "name"), RETIRED, ids=[f"{m}.{n}" for m, n in RETIRED])
def test_names_no_release_documented_are_retired_and_compat_says_where_they_went(module, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # retired: no FutureWarning, the plain missing name
        with pytest.raises(AttributeError):
            getattr(importlib.import_module(module), name)
    assert name in compat.__doc__.split("Retired")[1], f"compat's docstring names {module}.{name}'s new home"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tandem_eval.generate.pipeline")


def test_only_the_modules_that_lost_names_import_compat():
    users = sorted(
        ".".join(f.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")  # a package's own names
        for d in ("tandem_eval", "trainer", "analyses", "benchmarks")
        for f in (REPO / d).rglob("*.py")
        if re.search(r"^\s*from (tandem_eval|\.)\.?compat import|import tandem_eval\.compat", f.read_text(), re.M)
    )
    assert users == sorted(compat.FORMER_NAMES), users


def _defined_and_offered(path: Path) -> tuple[set[str], set[str]]:
    """Top-level names `path` defines itself, and the ones it imports (its literal __all__ offers on purpose)."""
    tree = ast.parse(path.read_text())
    defined, imported = set(), set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            defined |= names
            if "__all__" in names and isinstance(node.value, ast.List | ast.Tuple):
                defined |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            imported |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try):
            defined |= {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    return defined, imported - defined


def _code(path: Path) -> str:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        return re.sub(r"^\s*[%!].*$", "", code, flags=re.M)  # IPython magics are not Python
    return path.read_text()


def borrowed_imports(root: Path = REPO) -> list[str]:
    """`from M import name` where M is a library module (not a package's __init__) that only imports
    `name`: the caller should import it from its home."""
    files = [f for d in ("tandem_eval", "trainer", "tests", "analyses", "benchmarks") for f in (root / d).rglob("*.py")]
    files += sorted((root / "notebooks").glob("*.ipynb"))
    hits = []
    for f in files:
        package = list(f.relative_to(root).parent.parts)
        for node in ast.walk(ast.parse(_code(f))):
            if not isinstance(node, ast.ImportFrom):
                continue
            parts = (node.module or "").split(".") if node.module else []
            if node.level:
                parts = package[: len(package) - node.level + 1] + parts
            module = root.joinpath(*parts).with_suffix(".py")
            if parts[:1] not in (["tandem_eval"], ["trainer"]) or not module.is_file():
                continue
            _, borrowed = _defined_and_offered(module)
            hits += [
                f"{f.relative_to(root)}:{node.lineno}: {a.name} from {'.'.join(parts)}"
                for a in node.names
                if a.name in borrowed
            ]
    return hits


def test_every_import_names_the_home_of_what_it_imports():
    assert borrowed_imports() == []


def test_the_borrowed_import_check_sees_one(tmp_path):
    (tmp_path / "tandem_eval").mkdir()
    (tmp_path / "tandem_eval" / "home.py").write_text("def f():\n    pass\n")
    (tmp_path / "tandem_eval" / "former.py").write_text("from .home import f\n\ng = f\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "from tandem_eval.former import f, g\nfrom tandem_eval.home import f\n"
    )
    assert borrowed_imports(tmp_path) == ["tests/test_x.py:1: f from tandem_eval.former"]


def test_the_old_command_paths_still_run_from_another_directory(tmp_path):
    """`python -m tandem_eval.grading` (documented before the stage packages) still grades; the file only runs
    the moved module (`python -m tandem_eval.demo` runs in tests/test_paths.py)."""
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "tandem_eval.grading", "so \\boxed{\\frac12}", "0.5"]
    got = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and "correct=True" in got.stdout, got.stdout + got.stderr
    import tandem_eval.demo
    import tandem_eval.grading

    assert not [n for n in (*vars(tandem_eval.demo), *vars(tandem_eval.grading)) if not n.startswith("__")]


def test_every_name_a_stage_package_offers_on_first_use_resolves():
    """tandem_eval.generate and tandem_eval.score load their names lazily from their modules: a name
    that moved between them (reproducibility, from execute to plan) must still resolve, not raise."""
    import tandem_eval.generate as generate
    import tandem_eval.score as score

    for package in (generate, score):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
