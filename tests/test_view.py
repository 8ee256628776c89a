"""Tests for the trace viewer: token surfaces rebuild the decoded text, the page embeds traces
and renders them in headless Chromium (Debian's `chromium`; skipped with the reason if absent).

Run: .venv/bin/python -m pytest tests/test_view.py -q
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import typer
from report_fixtures import make_results, tokenizer
from typer.testing import CliRunner

from tandem_eval.report.cli import register
from tandem_eval.report.view import build_page, token_surfaces, trace_segments, write_page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return make_results(tmp_path_factory.mktemp("results"))


def _data(page: str) -> dict:
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_token_surfaces_concatenate_to_decoded_text():
    tok = tokenizer()
    text = "Step 1: 3 + 4 = 7.\n\nSo é ü → \\boxed{7}."  # multi-byte characters split over byte tokens
    ids = tok.encode(text)
    surfaces = token_surfaces(tok.convert_ids_to_tokens(ids))
    assert len(surfaces) == len(ids)
    assert "".join(surfaces) == tok.decode(ids) == text
    segs = trace_segments(ids, [1] * 5 + [0] * (len(ids) - 5), tok)
    assert [s[0] for s in segs] == ["senior", "junior"] and "".join(s[1] for s in segs) == text


def test_page_embeds_traces_with_authors_and_surprise(results):
    page = build_page(results / "tandem")
    assert 'class="trace' not in page.split("<script")[0]  # traces are drawn by the page's script
    assert "http://" not in page and "https://" not in page and "<link" not in page  # self-contained
    data = _data(page)
    modes = {t["m"] for t in data["traces"]}
    assert modes == {"solo", "handoff · paragraph", "handoff · takeover:1", "handoff · takeover:2"}
    solo = next(t for t in data["traces"] if t["m"] == "solo")
    hand = next(t for t in data["traces"] if t["m"] == "handoff · paragraph")
    assert len(solo["tok"]) == len(solo["a"]) == len(solo["s"]) and set(solo["a"]) == {"1"}
    assert set(hand["a"]) == {"0", "1"} and "s" not in hand  # surprise exists for solo CoTs only
    assert data["scale"] > 0 and data["total"] == len(data["traces"])


def test_max_traces_keeps_whole_problems(results):
    data = _data(build_page(results / "grpo" / "solo", max_traces=20))
    per_problem = {}
    for t in data["traces"]:
        per_problem.setdefault((t["b"], t["p"]), []).append(t["i"])
    assert len(data["traces"]) <= 20 and all(sorted(v) == list(range(8)) for v in per_problem.values())
    assert {b for b, _ in per_problem} == {"bench_a", "bench_b"}  # evenly spaced, not just the first


def test_view_cli(results, tmp_path):
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["view", str(results / "grpo" / "solo"), "--out", str(tmp_path / "p.html")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "p.html").stat().st_size > 1000
    res = CliRunner().invoke(app, ["view", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "does not exist" in res.output


def _chromium(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt-get install -y chromium)")
def test_page_renders_in_headless_chromium(results, tmp_path):
    page = write_page(results / "tandem", tmp_path / "view.html")
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path).stdout
    traces = re.findall(r'<div class="trace (?:right|wrong)"', dom)
    assert len(traces) == 20, dom[-2000:]  # the first page of traces, drawn by JavaScript
    body = dom.split('<main id="traces">')[1]
    assert body.count('<span class="tok sen" title="senior') > 100
    assert body.count('<span class="tok jun" title="junior') > 10  # handoff traces of the same problem
    assert re.search(r'class="tok sen" title="senior · −log p = [\d.]+" style="--a: 0\.\d+', body)  # shading
    shot = tmp_path / "shot.png"
    _chromium([f"--screenshot={shot}", "--window-size=1200,900", page.as_uri()], tmp_path)
    import matplotlib.image

    img = matplotlib.image.imread(shot)
    assert img.shape[:2] == (900, 1200)
    colors = {tuple(px) for px in (img[::7, ::7, :3] * 255).astype(int).reshape(-1, 3)}
    assert len(colors) > 20 and img[..., :3].std() > 0.02  # not a blank page
    blue = ((img[..., 2] > 0.6) & (img[..., 0] < 0.6)).mean()  # senior token backgrounds
    assert blue > 0.005
