"""The documentation's commands, verbatim: every shell block marked `<!-- ci: run; expect: ... -->` in
README.md or in a docs/*.md page runs as written in a fresh temporary working directory, must exit 0 and
must produce what its marker names. A test's id names its file and the block's place in it
(`README.md-block0`, `docs/usage.md-block1`).

    PYTHONPATH=$PWD python -m pytest -q tests/test_readme.py

A marker line right above a ```bash block: `<!-- ci: run; expect: FILE:KEY FILE:KEY ... -->`. Each
FILE (relative to the block's working directory) must exist and hold KEY: a top-level key of a .json
file, a column of a .parquet file, a substring of any other file. Blocks are CI-scale as written (the
page says so next to them); blocks that need a GPU, a cluster or real checkpoints stay unmarked.
`tandem-eval` resolves to this interpreter's environment (its bin folder is put first on PATH).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!-- ci: run(?:; expect: (?P<expect>[^>]*?))? -->\n```(?:bash|sh)\n(?P<body>.*?)\n```", re.S)


def marked_blocks(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """(block body, [(file, key), ...]) of every marked shell block, in the page's order."""
    out = []
    for m in MARKER.finditer(text):
        expect = [tuple(item.split(":", 1)) for item in (m["expect"] or "").split()]
        assert all(len(e) == 2 for e in expect), f"expect items are FILE:KEY, got {m['expect']!r}"
        out.append((m["body"], expect))
    return out


def holds(path: Path, key: str) -> bool:
    """Whether the file at `path` holds `key` (see the module docstring)."""
    if path.suffix == ".json":
        return key in json.loads(path.read_text(encoding="utf-8"))
    if path.suffix == ".parquet":
        return key in pd.read_parquet(path).columns
    return key in path.read_text(encoding="utf-8")


def pages(root: Path) -> list[Path]:
    """The pages whose blocks run: README.md and every docs/*.md under `root`."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def blocks_of(root: Path) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(test id, block body, expect) of every marked block under `root`: the id names the page and the block."""
    out = []
    for page in pages(root):
        name = page.relative_to(root).as_posix()
        for i, (body, expect) in enumerate(marked_blocks(page.read_text(encoding="utf-8"))):
            out.append((f"{name}-block{i}", body, expect))
    return out


BLOCKS = blocks_of(REPO)


def test_the_readme_has_runnable_blocks_and_the_parser_sees_markers():
    assert any(i.startswith("README.md-") for i, _, _ in BLOCKS), "no `<!-- ci: run -->` block in README.md"
    assert any(i.startswith("docs/") for i, _, _ in BLOCKS), "no `<!-- ci: run -->` block in docs/*.md"
    assert all(expect for _, _, expect in BLOCKS), "every marked block names what it produces"
    sample = "<!-- ci: run; expect: a.json:k b.md:x -->\n```bash\necho hi\n```"
    assert marked_blocks(sample) == [("echo hi", [("a.json", "k"), ("b.md", "x")])]
    assert marked_blocks("```bash\necho unmarked\n```") == []


def test_blocks_are_collected_from_the_readme_and_every_docs_page_with_ids_naming_them(tmp_path):
    block = "<!-- ci: run; expect: {0}.txt:{0} -->\n```bash\necho {0} > {0}.txt\n```\n"
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# front\n" + block.format("r") + "```bash\necho unmarked\n```\n")
    (tmp_path / "docs" / "b.md").write_text(block.format("b1") + "text\n" + block.format("b2"))
    (tmp_path / "docs" / "a.md").write_text(block.format("a"))
    (tmp_path / "docs" / "notes.txt").write_text(block.format("ignored"))
    got = [(i, body) for i, body, _ in blocks_of(tmp_path)]
    assert got == [
        ("README.md-block0", "echo r > r.txt"),
        ("docs/a.md-block0", "echo a > a.txt"),
        ("docs/b.md-block0", "echo b1 > b1.txt"),
        ("docs/b.md-block1", "echo b2 > b2.txt"),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("body,expect", [b[1:] for b in BLOCKS], ids=[b[0] for b in BLOCKS])
def test_readme_block_runs_verbatim_and_produces_what_it_says(body, expect, tmp_path):
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, (body, done.stdout[-3000:], done.stderr[-3000:])
    for file, key in expect:
        path = tmp_path / file
        assert path.is_file(), f"{file} was not written by:\n{body}"
        assert holds(path, key), f"{file} does not hold {key!r}"
