"""The documentation holds together: every relative link and image in README.md, ARCHITECTURE.md and
docs/*.md points to a file that exists, and every `#anchor` is a heading of its target page (GitHub's
slug rule); README.md stays a front page (at most 250 lines) that links every docs page; the blocks that
commands write into the docs (`make toy`'s toy-summary, `make real`'s real-summary) are where the
Makefile writes them and match the committed summaries.

    PYTHONPATH=$PWD python -m pytest -q tests/test_docs_links.py

Links inside fenced code blocks and inline code spans are text, not links, and are not checked; links
with a scheme (https:, mailto:) are not followed (nothing is fetched in tests).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FRONT_PAGE_LINES = 250
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")


def doc_pages(root: Path) -> list[Path]:
    """The checked pages: README.md, ARCHITECTURE.md and docs/*.md under `root` (those that exist)."""
    return [p for p in (root / "README.md", root / "ARCHITECTURE.md") if p.is_file()] + sorted(
        (root / "docs").glob("*.md")
    )


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    out, fence = [], None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m and (fence is None or m[1] == fence):
            fence = m[1] if fence is None else None
            continue
        if fence is None:
            out.append((n, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda c: " " * len(c[0]), line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (links reduced to their text, code marks dropped),
    lowercased, every character but letters, digits, spaces, `-` and `_` dropped, spaces to `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown page; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    text = path.read_text(encoding="utf-8")
    fence = None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if m and (fence is None or m[1] == fence):
            fence = m[1] if fence is None else None
            continue
        h = HEADING.match(line) if fence is None else None
        if h:
            base = slug(h[2])
            out.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return out


def broken_links(page: Path, root: Path) -> list[str]:
    """'page:line: target (why)' for every relative link or image of `page` that leads nowhere."""
    problems = []
    for n, line in prose_lines(page.read_text(encoding="utf-8")):
        for m in LINK.finditer(line):
            target = m[1]
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # https:, mailto: ...: not followed
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(root).as_posix()}:{n}: {target}"
            if not dest.exists():
                problems.append(f"{where} (no such file)")
            elif anchor and dest.suffix != ".md":
                problems.append(f"{where} (an anchor into a file that is not markdown)")
            elif anchor and anchor not in anchors(dest):
                problems.append(f"{where} (no heading with anchor #{anchor} in {dest.name})")
    return problems


def readme_problems(root: Path) -> list[str]:
    """What keeps README.md under `root` from being the front page: its length, docs pages it does not link."""
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    problems = []
    n = len(text.splitlines())
    if n > FRONT_PAGE_LINES:
        problems.append(f"README.md has {n} lines (at most {FRONT_PAGE_LINES}: move sections to docs/)")
    linked = {
        (readme.parent / m[1].partition("#")[0]).resolve() for _, line in prose_lines(text) for m in LINK.finditer(line)
    }
    problems += [
        f"README.md does not link {p.relative_to(root).as_posix()}"
        for p in sorted((root / "docs").glob("*.md"))
        if p.resolve() not in linked
    ]
    return problems


# ------------------------------------------------------------------ the repository's documentation


def test_every_docs_link_and_anchor_resolves():
    pages = doc_pages(REPO)
    assert REPO / "README.md" in pages and len(pages) > 3
    problems = [p for page in pages for p in broken_links(page, REPO)]
    assert not problems, "\n".join(problems)


def test_the_readme_is_a_front_page_that_links_every_docs_page():
    assert list((REPO / "docs").glob("*.md")), "no docs/*.md page"
    problems = readme_problems(REPO)
    assert not problems, "\n".join(problems)


def test_the_makefile_writes_the_docs_blocks_where_they_are():
    """`make toy`, `make toy-controls` and `make real` pass --readme PAGE: each PAGE holds its block's markers."""
    from trainer import real
    from trainer.toy import markdown

    markers = {"trainer.toy.world": (markdown.README_BEGIN, markdown.README_END)}
    markers["trainer.real"] = (real.README_BEGIN, real.README_END)
    calls = re.findall(r"-m (trainer\.toy\.world|trainer\.real)\b[^\n]*--readme (\S+)", (REPO / "Makefile").read_text())
    assert sorted(module for module, _ in calls) == ["trainer.real", "trainer.toy.world", "trainer.toy.world"]
    for module, page in calls:
        text = (REPO / page).read_text(encoding="utf-8")
        begin, end = markers[module]
        assert text.count(begin) == 1 and text.count(end) == 1 and text.index(begin) < text.index(end), page


def test_the_real_results_docs_block_is_generated_from_the_committed_summary():
    from trainer import real

    summary = json.loads((REPO / "results" / "real" / "summary.json").read_text())
    text = (REPO / "docs" / "real-results.md").read_text(encoding="utf-8")
    block = text.split(real.README_BEGIN, 1)[1].split(real.README_END, 1)[0]
    assert block == "\n" + real.readme_block(summary)


# ------------------------------------------------------------------ the checker itself, on small docs


def test_slug_follows_githubs_rule():
    assert slug("The vLLM engine (`--engine vllm`)") == "the-vllm-engine---engine-vllm"
    assert slug("Real results: a real pair on GSM8K (`make real`)") == "real-results-a-real-pair-on-gsm8k-make-real"
    assert slug("Run folders are checked, not trusted") == "run-folders-are-checked-not-trusted"
    assert slug("Training seniors (`trainer/`)") == "training-seniors-trainer"
    assert slug("See [the page](x.md) now") == "see-the-page-now"


def test_anchors_skip_code_blocks_and_number_repeated_headings(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n## Results\n\n```bash\n# not a heading\n```\n\n### Results ###\n")
    assert anchors(page) == {"title", "results", "results-1"}


def test_the_checker_finds_missing_files_anchors_and_images(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "img.png").write_bytes(b"\x89PNG")
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Some `code` section\n")
    (tmp_path / "README.md").write_text(
        "# Front\n\n"
        "[ok](docs/a.md) [ok anchor](docs/a.md#some-code-section) [self](#front) ![ok](img.png)\n"
        "[gone](docs/missing.md) [bad anchor](docs/a.md#nothing) [bad self](#nowhere)\n"
        "![gone image](docs/img.png) [anchor into an image](img.png#x) [web](https://example.org/#y)\n"
        "`[in code](nowhere.md)`\n```\n[in a fence](nowhere.md)\n```\n"
    )
    (tmp_path / "docs" / "b.md").write_text(
        "# B\n\n![up one](../img.png) [front](../README.md#front) [x](a.md#a-page)\n"
    )
    assert broken_links(tmp_path / "README.md", tmp_path) == [
        "README.md:4: docs/missing.md (no such file)",
        "README.md:4: docs/a.md#nothing (no heading with anchor #nothing in a.md)",
        "README.md:4: #nowhere (no heading with anchor #nowhere in README.md)",
        "README.md:5: docs/img.png (no such file)",
        "README.md:5: img.png#x (an anchor into a file that is not markdown)",
    ]
    assert broken_links(tmp_path / "docs" / "b.md", tmp_path) == []
    assert broken_links(tmp_path / "docs" / "a.md", tmp_path) == []


def test_the_front_page_check_fails_on_a_long_readme_or_an_unlinked_page(tmp_path):
    (tmp_path / "docs").mkdir()
    for name in ("a", "b"):
        (tmp_path / "docs" / f"{name}.md").write_text(f"# {name}\n")
    (tmp_path / "README.md").write_text("# Front\n\n[a](docs/a.md#a)\n")
    assert readme_problems(tmp_path) == ["README.md does not link docs/b.md"]
    (tmp_path / "README.md").write_text("# Front\n\n[a](docs/a.md) [b](docs/b.md)\n" + "line\n" * FRONT_PAGE_LINES)
    assert readme_problems(tmp_path) == [
        f"README.md has {FRONT_PAGE_LINES + 3} lines (at most 250: move sections to docs/)"
    ]
    (tmp_path / "README.md").write_text("# Front\n\n[a](docs/a.md) [b](docs/b.md)\n")
    assert readme_problems(tmp_path) == []
