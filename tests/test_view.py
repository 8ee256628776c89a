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
from report_fixtures import make_results, tokenizer
from run_fixtures import reseal
from typer.testing import CliRunner

from tandem_eval.cli.main import app  # as users call it: user errors are the CLI's one line, exit 2
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
    # solo shading = the lens's per-token junior log-probs (final EOS not scored: last value None)
    assert len(solo["tok"]) == len(solo["a"]) == len(solo["s"]) and set(solo["a"]) == {"1"}
    assert solo["src"] == "lens" and solo["s"][-1] is None and all(x is not None for x in solo["s"][:-1])
    # handoff shading = the junior's own log-probs, on the junior's tokens only
    assert set(hand["a"]) == {"0", "1"} and hand["src"] == "own"
    assert all((x is None) == (a == "1") for x, a in zip(hand["s"], hand["a"]))
    assert solo["jr"] == "junior" and hand["jr"] == "junior"  # each trace names its junior
    assert data["scale"] > 0 and data["total"] == len(data["traces"])
    summary = {(r["run"], r["m"]): r for r in data["summary"]}
    assert set(summary) == {("tandem", m) for m in modes}
    assert {"acc", "trunc", "status", "junior", "n"} <= set(summary[("tandem", "solo")])


HOSTILE = ["<!--<script>", "</script><script>alert(1)</script>", "<![CDATA[", "a & b > c", "line\u2028sep\u2029"]


def test_embedded_json_escapes_every_html_parser_state():
    from tandem_eval.report.view import embed_json

    text = embed_json({"x": HOSTILE})
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"x": HOSTILE}


def _hostile_run(root: Path) -> Path:
    """A run whose problem, prompt, generated text and answers carry HTML parser traps."""
    import pandas as pd

    from tandem_eval.schemas import write_table

    src = make_results(root / "src") / "grpo" / "solo"
    run = root / "hostile" / "solo"
    shutil.copytree(src, run)
    df = pd.read_parquet(run / "samples.parquet")
    tok = tokenizer()
    for i in df.index:
        trap = HOSTILE[i % len(HOSTILE)]
        df.at[i, "prompt"] = f"{trap} What is 1 + 1?"
        df.at[i, "problem"] = trap
        text = f"{trap}\n\n\\boxed{{2}}"
        df.at[i, "token_ids"] = tok.encode(text)
        df.at[i, "author_mask"] = [1] * len(df.at[i, "token_ids"])
        df.at[i, "text"] = text
        df.at[i, "extracted_answer"] = None if i % 2 else trap
    write_table(run / "samples.parquet", df)
    shutil.rmtree(run / "lens")  # token counts changed: no lens output for this run
    reseal(run)
    return run


def test_max_traces_keeps_whole_problems(results):
    data = _data(build_page(results / "grpo" / "solo", max_traces=20))
    per_problem = {}
    for t in data["traces"]:
        per_problem.setdefault((t["b"], t["p"]), []).append(t["i"])
    assert len(data["traces"]) <= 20 and all(sorted(v) == list(range(8)) for v in per_problem.values())
    assert {b for b, _ in per_problem} == {"bench_a", "bench_b"}  # evenly spaced, not just the first


def test_view_cli(results, tmp_path):
    res = CliRunner().invoke(app, ["view", str(results / "grpo" / "solo"), "--out", str(tmp_path / "p.html")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "p.html").stat().st_size > 1000
    res = CliRunner().invoke(app, ["view", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "does not exist" in res.output
    # a page of no traces, or of another junior's surprise than the one named: refused, nothing written
    solo = str(results / "grpo" / "solo")
    for bad, said in (
        (["--max-traces", "0"], "--max-traces must be an integer >= 1"),
        (["--junior", "nope"], "'junior'"),
    ):
        res = CliRunner().invoke(app, ["view", solo, "--out", str(tmp_path / "bad.html"), *bad])
        assert res.exit_code == 2 and said in res.output, res.output
    assert not (tmp_path / "bad.html").exists()
    res = CliRunner().invoke(app, ["view", solo, "--out", str(tmp_path / "j.html"), "--junior", "junior"])
    assert res.exit_code == 0 and _data((tmp_path / "j.html").read_text())["traces"][0]["jr"], res.output


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
def test_hostile_text_renders_every_trace_in_chromium(tmp_path):
    run = _hostile_run(tmp_path)
    page = write_page(run, tmp_path / "hostile.html")
    assert "<!--<script>" not in page.read_text().split('<script id="data"')[1].split("</script>")[0]
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path).stdout
    assert len(re.findall(r'<div class="trace (?:right|wrong)"', dom)) == 10, dom[-2000:]  # the page's script ran
    body = dom.split('<main id="traces">')[1]
    for trap in ("&lt;!--&lt;script&gt;", "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;![CDATA["):
        assert trap in body  # shown as text, not parsed as markup
    assert "answer <b>none extracted</b>" in body and "answer <b>nan</b>" not in body


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt-get install -y chromium)")
def test_page_renders_in_headless_chromium(results, tmp_path):
    page = write_page(results / "tandem", tmp_path / "view.html")
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path).stdout
    rows = re.findall(r'<div class="pair" style="grid-template-columns: repeat\((\d), minmax\(0px, 1fr\)\);"', dom)
    assert rows == ["4"] * 10, dom[-2000:]  # one row per problem and sample; solo | handoff ... in columns
    traces = re.findall(r'<div class="trace (?:right|wrong)" data-benchmark="[^"]*" data-problem="[^"]*" '
                        r'data-correct="\d" data-mode="([^"]*)"', dom)  # fmt: skip
    assert len(traces) == 40 and traces[:4] == sorted(set(traces))
    body = dom.split('<main id="traces">')[1]
    assert body.count('<span class="tok sen" title="senior') > 100
    assert body.count('<span class="tok jun') > 10  # handoff traces of the same problem
    # shaded tokens from the lens output (solo) and from the junior's own log-probs (handoff)
    assert len(re.findall(r'class="tok sen" title="senior · −log p = [\d.]+" style="--a: 0\.\d+', body)) > 50
    assert re.search(r'class="tok jun post" title="junior · −log p = [\d.]+ · junior token 1 after a handoff" '
                     r'style="--a: 0\.\d+', body)  # fmt: skip
    assert body.count('class="ho-mark"') > 10 and "junior surprise right after handoffs" in body
    assert 'junior <b class="junior">junior</b>' in body
    summary = dom.split('<table id="summary">')[1].split("</table>")[0]
    assert summary.count("<tr>") == 5 and "%" in summary  # header + 4 runs: accuracy, truncation
    shot = tmp_path / "shot.png"
    _chromium([f"--screenshot={shot}", "--window-size=1200,900", page.as_uri()], tmp_path)
    import matplotlib.image

    img = matplotlib.image.imread(shot)
    assert img.shape[:2] == (900, 1200)
    colors = {tuple(px) for px in (img[::7, ::7, :3] * 255).astype(int).reshape(-1, 3)}
    assert len(colors) > 20 and img[..., :3].std() > 0.02  # not a blank page
    blue = ((img[..., 2] > 0.6) & (img[..., 0] < 0.6)).mean()  # senior token backgrounds
    assert blue > 0.005


def test_view_of_a_toy_tandem_run_loads_its_tokenizer(tmp_path):
    """`toy:tandem` goes through models.resolve_model (toy:NAME = the self-paired scenario's), so the page
    splits tokens with the bundled tokenizer instead of warning and showing plain text."""
    import warnings

    from run_fixtures import solo_cfg, write_run

    from tandem_eval.models import load_tokenizer as load_at
    from tandem_eval.models import resolve_model
    from tandem_eval.run.runs import Run, run_tokenizer

    rf = write_run(tmp_path / "solo", solo_cfg("toy:tandem"), {("tiny", "tiny/0000"): [True, False]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the old resolver warned "no tokenizer" and returned None
        tok = run_tokenizer(Run.load(rf.path).config)
        page = build_page(rf.path)
    want = load_at(resolve_model("toy:tandem"))
    assert tok is not None and tok.get_vocab() == want.get_vocab()
    assert '"tok"' in page, "traces carry token surfaces only when a tokenizer loaded"


def test_vocabulary_reads_what_transformers_reads(tmp_path):
    """models.Vocabulary (the `tokenizers` library, no torch) gives the same tokens, special ids and vocabulary
    as transformers' tokenizer, on the bundled toy tokenizers and on the fixtures' byte-level BPE."""
    from tandem_eval.models import TOY_DIR, Vocabulary, load_tokenizer

    fixture = tmp_path / "tok"
    tokenizer().save_pretrained(str(fixture))
    folders = [fixture, *sorted(p.parent for p in TOY_DIR.glob("*/*/tokenizer.json"))]
    assert len(folders) > 1
    for folder in folders:
        want, got = load_tokenizer(folder), Vocabulary(folder)
        ids = list(range(len(want)))
        assert got.convert_ids_to_tokens(ids) == want.convert_ids_to_tokens(ids), folder
        assert got.all_special_ids == sorted(want.all_special_ids), folder
        assert got.get_vocab() == want.get_vocab() and len(got) == len(want), folder


def test_checkpoints_recorded_on_another_machine_resolve_to_the_bundle(tmp_path):
    """A run folder written elsewhere records absolute paths that do not exist here: the bundled checkpoint
    is found by its folder inside this install, or by the source its tandem_meta.json records; an unknown
    path is a ModelError naming it, and run_tokenizer's warning names it (no model is loaded either way)."""
    import warnings

    from tandem_eval.models import TOY_DIR, ModelError, bundled_sources, recorded_checkpoint
    from tandem_eval.run.runs import run_tokenizer

    bundled = TOY_DIR / "emergent" / "tandem"
    elsewhere = Path("/no/such/machine/checkout/tandem_eval/toy/checkpoints/emergent/tandem")
    assert recorded_checkpoint(elsewhere) == bundled
    assert recorded_checkpoint("toy:emergent/tandem") == bundled
    meta = json.loads((bundled / "tandem_meta.json").read_text())
    source = f"{meta['recipe']['output_dir']}/checkpoint-{meta['optimizer_step']}"
    assert not Path(source).exists() and bundled_sources()[source] == bundled
    assert recorded_checkpoint(source) == bundled
    assert recorded_checkpoint(meta["recipe"]["junior"]) == TOY_DIR / "emergent" / "junior"
    with pytest.raises(ModelError, match="/no/such/machine/init"):
        recorded_checkpoint("/no/such/machine/init")  # a one-part suffix never matches a folder here
    cfg = {"senior": {"path": str(elsewhere)}, "junior": None}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tok = run_tokenizer(cfg)
    assert tok is not None and len(tok) > 0
    with pytest.warns(UserWarning, match="/no/such/machine/x/checkpoint-1"):
        assert run_tokenizer({"senior": {"path": "/no/such/machine/x/checkpoint-1"}}) is None


def test_committed_toy_runs_find_their_tokenizer_without_the_writers_paths():
    """results/toy's seed-0 runs were written in another checkout (/work/wt-toy/...): their tokenizer
    is found in the bundle, so the notebooks and `view` split tokens without a warning."""
    import warnings

    from tandem_eval.run.runs import Run, run_tokenizer

    run_dir = Path(__file__).resolve().parents[1] / "results/toy/emergent/tandem/seed0/handoff-paragraph"
    if not (run_dir / "config.json").exists():
        pytest.skip("results/toy/emergent is not committed in this checkout")
    cfg = Run.load(run_dir).config
    assert not Path(cfg["senior"]["path"]).exists()  # the premise: recorded on another machine
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run_tokenizer(cfg) is not None
