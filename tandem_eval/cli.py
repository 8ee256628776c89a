"""`tandem-eval`: the command line. Thin commands over pipeline, lens and report.

    tandem-eval solo --senior CKPT --benchmark tiny --n 8
    tandem-eval handoff --senior CKPT --junior JR --schedule paragraph --out runs/ckpt
    tandem-eval handoff                      # the bundled toy-world tandem senior and its junior
    tandem-eval merge runs/ckpt              # join --num-shards outputs
    tandem-eval benchmarks                   # list the benchmark registry
    tandem-eval benchmarks --check DIR       # are DIR's files the paper's sets? (sizes)

Every error a user can cause prints one line on stderr naming the problem and the fix, and exits
with 2 (option parsing errors included); a bug keeps its traceback. Progress and log records go to
stderr, the results tables to stdout, last.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup
from typer.exceptions import TyperException

from .config import ConfigError, EvalConfig, ModelSpec, Sampling, default_ks, json_safe


class OneLineErrors(TyperGroup):
    """Option parsing errors (a bad integer, an unknown option) as one line on stderr, exit 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except TyperException as e:  # typer's (vendored click's) ClickException family
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `tandem-eval`: the help text
                e.show()
                sys.exit(e.exit_code)
            ctx = getattr(e, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            print(f"error: {_one_line(e.format_message())}{hint}", file=sys.stderr)
            sys.exit(getattr(e, "exit_code", 2))
        except typer.Abort:
            print("Aborted!", file=sys.stderr)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Evaluate tandem seniors: solo and handoff pass@k, communication tax, legibility, drift.",
)
console = Console()
DEFAULT_SENIOR = "toy:self-paired/tandem"


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (printed as one line), not a bug (printed with a traceback)."""
    from .data import BenchmarkError, PromptError
    from .grading import GraderVersionError
    from .models import ModelError
    from .results import RunFolderError

    return (
        ConfigError,
        BenchmarkError,
        PromptError,
        GraderVersionError,
        ModelError,
        RunFolderError,
        NotImplementedError,
        FileNotFoundError,
    )


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def fail(message: str) -> None:
    """The one user-error path: `error: MESSAGE` as one line on stderr, exit code 2."""
    print(f"error: {_one_line(message)}", file=sys.stderr, flush=True)
    raise typer.Exit(2)


def setup_logging(verbose: bool = False, quiet: bool = False) -> None:
    """tandem_eval's records (progress included) on stderr: INFO by default, DEBUG with -v, warnings
    only with -q. Other libraries' chatter (vLLM INFO lines, transformers warnings) only with -v."""
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logger = logging.getLogger("tandem_eval")
    for h in [h for h in logger.handlers if getattr(h, "tandem_cli", False)]:
        logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.tandem_cli = True
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(level)
    if not verbose:  # read by vLLM at import; the user's own setting wins
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity(logging.INFO if verbose else logging.ERROR)
    if verbose:  # transformers' "Loading weights" bars only with -v
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()


def guarded(fn):
    """Run a command body, turning user errors into a one-line message and exit code 2."""
    try:
        return fn()
    except user_errors() as e:
        fail(str(e))


def parse_ks(text: str | None, n: int | None = None) -> tuple[int, ...]:
    """--k as sorted unique ints; when not given, the powers of two <= n plus n (config.default_ks)."""
    if text is None:
        return default_ks(n or 1)
    try:
        ks = tuple(sorted({int(k) for k in text.split(",") if k.strip()}))
    except ValueError:
        raise ConfigError(f"--k must be comma-separated integers like 1,2,4,8; got {text!r}") from None
    if not ks:
        raise ConfigError("--k needs at least one value")
    return ks


def _default_senior(senior: str | None) -> str:
    if senior:
        return senior
    from .models import toy_names

    if f"{DEFAULT_SENIOR}" in toy_names():
        return DEFAULT_SENIOR
    raise ConfigError("no --senior given and no bundled toy checkpoints in this install; pass --senior PATH")


def _default_junior(senior: str, junior: str | None) -> str:
    if junior:
        return junior
    from .models import junior_from_metadata, resolve_model

    found = junior_from_metadata(resolve_model(senior))
    if found:
        return found
    raise ConfigError(f"no --junior given and {senior} has no tandem_meta.json naming one; pass --junior PATH")


# Options shared by solo and handoff (typer needs them spelled out per command).
Senior = typer.Option(
    None,
    "--senior",
    help="Senior checkpoint: an HF-format folder, or toy:NAME. Default: the bundled toy tandem senior.",
)
Bench = typer.Option(
    ["tiny"],
    "--benchmark",
    "-b",
    help="Registry name (see `tandem-eval benchmarks`), set (`paper`), or a .jsonl/.parquet/.csv file. Repeatable.",
)
GroupOpt = typer.Option(
    None,
    "--group",
    help="Macro group of a single local --benchmark file (default: its 'group' column, else the registry "
    "group of its stem, e.g. aime24.jsonl -> aime, else its benchmark name).",
)
N = typer.Option(8, "--n", help="Samples per problem.")
K = typer.Option(
    None, "--k", help="pass@k values, comma-separated (each <= --n). Default: the powers of two <= n, plus n."
)
EngineOpt = typer.Option("hf", "--engine", help="hf (reference, CPU default) or vllm.")
Out = typer.Option(None, "--out", help="Output folder. Default: runs/<senior name>.")
Limit = typer.Option(None, "--limit", help="Only the first N problems of each benchmark.")
Seed = typer.Option(0, "--seed", help="Run seed; each sample's seed derives from (seed, problem id, sample index).")
Batch = typer.Option(32, "--batch-size", help="Traces per forward pass (handoff keeps 2x as many live).")
Temp = typer.Option(0.7, "--temperature")
TopP = typer.Option(0.8, "--top-p")
TopK = typer.Option(20, "--top-k", help="0 disables top-k.")
MaxNew = typer.Option(3000, "--max-new-tokens", help="Shared senior+junior token budget per trace.")
MaxCtx = typer.Option(4096, "--max-context", help="Prompt + generation limit.")
Dtype = typer.Option("float32", "--dtype", help="float32, bfloat16 or float16.")
TP = typer.Option(1, "--tensor-parallel-size", help="vLLM tensor parallelism (GPUs per model).")
Shards = typer.Option(1, "--num-shards", help="Split problems across N processes (then `tandem-eval merge`).")
ShardIdx = typer.Option(0, "--shard-index", help="Which shard this process runs (0..N-1).")
GraderMismatch = typer.Option(
    False,
    "--allow-grader-mismatch",
    help="Accept math-verify/latex2sympy2_extended versions other than the pinned ones (recorded).",
)
Label = typer.Option(None, "--label", help="Display name of this senior in reports.")
ChatTemplate = typer.Option(
    None,
    "--chat-template",
    help="A Jinja chat-template file to use instead of the tokenizer's own (recorded in the run).",
)
JuniorChatTemplate = typer.Option(
    None,
    "--junior-chat-template",
    help="A Jinja chat-template file for the junior (used when its tokenizer differs; recorded in the run).",
)
Quiet = typer.Option(False, "--quiet", "-q", help="No progress and no info records; errors and results only.")
Verbose = typer.Option(False, "--verbose", "-v", help="Debug records, and vLLM's/transformers' own log lines.")
RayWorkers = typer.Option(
    None, "--ray-workers", help="Run N problem shards as Ray tasks on a local Ray (then merge); see README."
)
RayAddress = typer.Option(
    None, "--ray-address", help="Run the shards on an existing Ray cluster (HOST:6379 or auto); one per GPU/node."
)


def _ray_plan(workers: int | None, address: str | None):
    """A RayPlan when --ray-workers/--ray-address is given, else None (one process)."""
    if workers is None and address is None:
        return None
    from .distributed import RayPlan

    return RayPlan(workers=workers, address=address)


def read_chat_template(path: Path | None, option: str) -> str | None:
    """The text of a --chat-template FILE: a readable UTF-8 file whose Jinja parses."""
    if path is None:
        return None
    if not path.is_file():
        raise ConfigError(f"{option} {path}: no such file; pass a Jinja template file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{option} {path}: cannot read it as UTF-8 text ({type(e).__name__}); fix the file") from None
    if not text.strip():
        raise ConfigError(f"{option} {path} is empty; pass a Jinja chat template")
    from jinja2 import Environment, TemplateSyntaxError

    try:
        Environment().parse(text)
    except TemplateSyntaxError as e:
        msg = f"{option} {path}: Jinja syntax error at line {e.lineno}: {e.message}; fix the template"
        raise ConfigError(msg) from None
    return text


def _config(
    mode,
    senior,
    junior,
    schedule,
    benchmark,
    n,
    k,
    engine,
    limit,
    seed,
    batch_size,
    sampling,
    dtype,
    tp,
    num_shards,
    shard_index,
    allow_grader,
    allow_vocab,
    label,
    chat_template=None,
    group=None,
    junior_chat_template=None,
) -> EvalConfig:
    return EvalConfig(
        senior=ModelSpec(senior, dtype),
        junior=ModelSpec(junior, dtype) if junior else None,
        mode=mode,
        schedule=schedule,
        benchmarks=tuple(benchmark),
        n=n,
        ks=parse_ks(k, n),
        seed=seed,
        limit=limit,
        engine=engine,
        sampling=sampling,
        batch_size=batch_size,
        tensor_parallel_size=tp,
        num_shards=num_shards,
        shard_index=shard_index,
        allow_vocab_mismatch=allow_vocab,
        allow_grader_mismatch=allow_grader,
        label=label or Path(senior.replace("toy:", "toy-")).name,
        group=group,
        chat_template=read_chat_template(chat_template, "--chat-template"),
        junior_chat_template=read_chat_template(junior_chat_template, "--junior-chat-template"),
    )


def _out_dir(out: Path | None, cfg: EvalConfig) -> Path:
    if out is not None and out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; pass a folder path (it is created if missing)")
    root = out or Path("runs") / (cfg.label or "senior")
    return root / f"shard-{cfg.shard_index}-of-{cfg.num_shards}" if cfg.num_shards > 1 else root


@app.command()
def solo(
    senior: str | None = Senior,
    benchmark: list[str] = Bench,
    group: str | None = GroupOpt,
    n: int = N,
    k: str = K,
    engine: str = EngineOpt,
    out: Path | None = Out,
    limit: int | None = Limit,
    seed: int = Seed,
    batch_size: int = Batch,
    temperature: float = Temp,
    top_p: float = TopP,
    top_k: int = TopK,
    max_new_tokens: int = MaxNew,
    max_context: int = MaxCtx,
    dtype: str = Dtype,
    tensor_parallel_size: int = TP,
    num_shards: int = Shards,
    shard_index: int = ShardIdx,
    allow_grader_mismatch: bool = GraderMismatch,
    label: str | None = Label,
    chat_template: Path | None = ChatTemplate,
    quiet: bool = Quiet,
    verbose: bool = Verbose,
    ray_workers: int | None = RayWorkers,
    ray_address: str | None = RayAddress,
):
    """The senior alone: n samples per problem, unbiased pass@k per benchmark and macro."""
    from .pipeline import run_eval

    setup_logging(verbose, quiet)

    def body():
        sampling = Sampling(temperature, top_p, top_k, max_new_tokens, max_context)
        cfg = _config(
            "solo",
            _default_senior(senior),
            None,
            "solo",
            benchmark,
            n,
            k,
            engine,
            limit,
            seed,
            batch_size,
            sampling,
            dtype,
            tensor_parallel_size,
            num_shards,
            shard_index,
            allow_grader_mismatch,
            False,
            label,
            chat_template,
            group,
        )
        plan = _ray_plan(ray_workers, ray_address)
        if plan is not None:
            from .distributed import ray_solo

            rf = ray_solo(cfg, _out_dir(out, cfg), plan)
        else:
            rf = run_eval(cfg, _out_dir(out, cfg) / "solo", progress=not quiet)
        console.print(f"run folder: {rf.path}")
        print_passk({"solo": rf.metrics()["pass_at_k"]}, cfg.ks)

    guarded(body)


@app.command()
def handoff(
    senior: str | None = Senior,
    junior: str | None = typer.Option(
        None, "--junior", help="Junior checkpoint. Default: the one in the senior's tandem_meta.json."
    ),
    schedule: str = typer.Option(
        "paragraph", "--schedule", help="paragraph (paper), word[:P[:K]], sentence, chunk:N, takeover:N, junior-solo."
    ),
    benchmark: list[str] = Bench,
    group: str | None = GroupOpt,
    n: int = N,
    k: str = K,
    engine: str = EngineOpt,
    out: Path | None = Out,
    limit: int | None = Limit,
    seed: int = Seed,
    batch_size: int = Batch,
    temperature: float = Temp,
    top_p: float = TopP,
    top_k: int = TopK,
    max_new_tokens: int = MaxNew,
    max_context: int = MaxCtx,
    dtype: str = Dtype,
    tensor_parallel_size: int = TP,
    num_shards: int = Shards,
    shard_index: int = ShardIdx,
    allow_grader_mismatch: bool = GraderMismatch,
    allow_vocab_mismatch: bool = typer.Option(
        False, "--allow-vocab-mismatch", help="Allow a junior with a different tokenizer (text-level handoff)."
    ),
    solo_run: Path | None = typer.Option(
        None, "--solo-run", help="Reuse this complete solo run folder instead of OUT/solo (it must match, see below)."
    ),
    allow_solo_mismatch: bool = typer.Option(
        False,
        "--allow-solo-mismatch",
        help="Reuse a solo run that differs in senior, seed, sampling, budget, chat template, benchmarks or "
        "grader (the differences are recorded in the handoff run's config.json).",
    ),
    label: str | None = Label,
    chat_template: Path | None = ChatTemplate,
    junior_chat_template: Path | None = JuniorChatTemplate,
    quiet: bool = Quiet,
    verbose: bool = Verbose,
    ray_workers: int | None = RayWorkers,
    ray_address: str | None = RayAddress,
):
    """Senior and junior alternate reasoning steps; reports solo vs handoff pass@k, tax and retention."""
    from .pipeline import run_handoff
    from .schedules import parse_schedule

    setup_logging(verbose, quiet)

    def body():
        parse_schedule(schedule)
        if schedule == "solo":
            raise ConfigError("--schedule solo is not a handoff; use `tandem-eval solo`")
        s = _default_senior(senior)
        sampling = Sampling(temperature, top_p, top_k, max_new_tokens, max_context)
        cfg = _config(
            "handoff",
            s,
            _default_junior(s, junior),
            schedule,
            benchmark,
            n,
            k,
            engine,
            limit,
            seed,
            batch_size,
            sampling,
            dtype,
            tensor_parallel_size,
            num_shards,
            shard_index,
            allow_grader_mismatch,
            allow_vocab_mismatch,
            label,
            chat_template,
            group,
            junior_chat_template,
        )
        plan = _ray_plan(ray_workers, ray_address)
        if plan is not None:
            from .distributed import ray_handoff

            solo_rf, handoff_rf, tax = ray_handoff(cfg, _out_dir(out, cfg), plan, solo_run, allow_solo_mismatch)
        else:
            solo_rf, handoff_rf, tax = run_handoff(
                cfg, _out_dir(out, cfg), solo_run, progress=not quiet, allow_solo_mismatch=allow_solo_mismatch
            )
        console.print(f"run folders: {solo_rf.path}  {handoff_rf.path}")
        print_passk({"solo": solo_rf.metrics()["pass_at_k"], "handoff": handoff_rf.metrics()["pass_at_k"]}, cfg.ks)
        print_tax(tax, cfg.ks)

    guarded(body)


@app.command()
def merge(root: Path = typer.Argument(..., help="The --out folder whose shard-I-of-N subfolders to merge.")):
    """Merge the outputs of --num-shards N processes into ROOT/solo and ROOT/handoff-* (and recompute the tax)."""
    from .metrics.tax import communication_tax
    from .pipeline import merge_shards

    def body():
        parts = sorted(p for p in root.glob("shard-*-of-*") if p.is_dir())
        if not parts:
            raise FileNotFoundError(f"no shard-I-of-N folders under {root}; run with --num-shards first")
        kinds = sorted({c.name for p in parts for c in p.iterdir() if (c / "config.json").exists()})
        merged = {kind: merge_shards([p / kind for p in parts], root / kind) for kind in kinds}
        for kind, rf in merged.items():
            if kind.startswith("handoff") and "solo" in merged:
                ks = list(rf.config()["config"]["ks"])
                rf.update_metrics(
                    {
                        "tax": json_safe(communication_tax(merged["solo"].load_samples(), rf.load_samples(), ks)),
                        "solo_run": str(merged["solo"].path.resolve()),
                    }
                )
            console.print(f"merged {len(parts)} shards -> {rf.path}")

    guarded(body)


@app.command()
def benchmarks(
    check: Path | None = typer.Option(
        None, "--check", help="A folder of benchmark files: print each set's size against the paper's."
    ),
):
    """List the benchmark registry (name, group, source, sizes), or --check DIR against the paper's sets."""
    from .data import BENCHMARK_SETS, BENCHMARKS

    if check is not None:
        guarded(lambda: _check_sets(check))
        return
    table = Table("name", "group", "source", "size", "paper", "description")
    for name, spec in BENCHMARKS.items():
        size, paper = (str(v) if v is not None else "-" for v in (spec.size, spec.paper_size))
        table.add_row(name, spec.group, str(spec.path or spec.hub_id), size, paper, spec.description)
    console.print(table)
    for name, members in BENCHMARK_SETS.items():
        console.print(f"set {name}: {', '.join(members)}")


def _check_sets(folder: Path) -> None:
    """Rows: each file's benchmark and each group, size vs the paper's; exit 1 if not the paper's sets."""
    from .data.benchmarks import check_paper_sets

    rows, reasons = check_paper_sets(folder)
    table = Table("benchmark", "group", "problems", "paper", "match", title=f"benchmark sets in {folder}")
    for r in rows:
        match = "-" if r["paper"] is None else ("yes" if r["match"] else "NO")
        table.add_row(r["benchmark"], r["group"], str(r["problems"]), str(r["paper"] or "-"), match)
    console.print(table)
    if reasons:
        console.print(f"not the paper's sets: {'; '.join(reasons)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    console.print("the paper's four groups at the paper's sizes (texts not compared)")


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def print_passk(runs: dict[str, dict], ks) -> None:
    """One table: rows = benchmarks, groups and macro; columns = pass@k per run."""
    first = next(iter(runs.values()))
    label = _macro_label(first)
    table = Table(title="pass@k (%)", caption=_macro_caption(first))
    table.add_column("benchmark")
    for name in runs:
        for k in ks:
            table.add_column(f"{name} @{k}", justify="right")
    rows = [(b, "per_benchmark") for b in first["per_benchmark"]]
    rows += [(g, "per_group") for g in first["per_group"] if g not in first["per_benchmark"]]
    for name, level in rows + [(label, None)]:
        cells = [
            (r["macro"] if level is None else r[level].get(name, {})).get(f"pass@{k}")
            for r in runs.values()
            for k in ks
        ]
        table.add_row(name, *map(_fmt, cells))
    console.print(table)


def _macro_label(summary: dict) -> str:
    """ "macro" only for the paper's four sets; runs written before the label existed are judged by size."""
    if "macro_label" in summary:
        return summary["macro_label"]
    from .metrics.passk import macro_provenance

    return macro_provenance(summary.get("n_problems", {}).get("per_group", {}))["macro_label"]


def _macro_caption(summary: dict) -> str | None:
    reasons = summary.get("paper_sets_reasons")
    return f"{_macro_label(summary)}: {'; '.join(reasons)}" if reasons else None


def print_tax(tax: dict, ks) -> None:
    """Rows = (group or macro, k); solo and handoff pass@k, tax in points and retention, with 95% CIs."""
    table = Table(title="communication tax = solo - handoff (points); retention = handoff / solo; 95% CI")
    for col in ("scope", "k", "solo", "handoff", "tax [CI]", "retention [CI]", "p"):
        table.add_column(col, justify="right")
    levels = list(tax["per_group"].items()) + [(tax.get("macro_label", "macro"), tax["macro"])]
    for name, entry in levels:
        for k in ks:
            e = entry.get(f"pass@{k}", {})
            if "tax" not in e:
                continue
            t, r = e["tax"], e["retention"]
            ret = (
                "-"
                if r["estimate"] is None
                else (
                    f"{100 * r['estimate']:.1f}% "
                    f"[{_fmt(r['low'] and 100 * r['low'])}, {_fmt(r['high'] and 100 * r['high'])}]"
                )
            )
            table.add_row(
                name,
                str(k),
                _fmt(e["solo"]["estimate"]),
                _fmt(e["handoff"]["estimate"]),
                f"{_fmt(t['estimate'])} [{_fmt(t['low'])}, {_fmt(t['high'])}]",
                ret,
                _fmt(e.get("tax_p_value")),
            )
    console.print(table)


@app.command()
def regrade(
    run: Path = typer.Argument(..., help="A complete run folder (solo or handoff)."),
    timeout: float = typer.Option(5.0, "--timeout", help="Per-item math-verify deadline, seconds."),
    show: int = typer.Option(20, "--show", help="Changed verdicts to list (all are in regrade.parquet)."),
    allow_grader_mismatch: bool = GraderMismatch,
    quiet: bool = Quiet,
):
    """Re-grade a finished run with the installed grader (no regeneration); writes RUN/regrade.parquet."""
    from .regrade import print_regrade
    from .regrade import regrade as regrade_run

    guarded(lambda: print_regrade(regrade_run(run, timeout, allow_grader_mismatch, progress=not quiet), show))


@app.command(
    "lm-eval",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def lm_eval_cmd(ctx: typer.Context):
    """lm-evaluation-harness's CLI with the `tandem` model registered: every argument goes to lm-eval."""
    from .integrations.lm_eval_cli import LmEvalMissing, run_lm_eval

    try:
        guarded(lambda: run_lm_eval(list(ctx.args)))
    except LmEvalMissing as e:
        fail(str(e))


def _register_optional() -> None:
    """Commands from other modules (legibility/drift/compare, report/view), when present."""
    import importlib

    for module in ("tandem_eval.cli_lens", "tandem_eval.report.cli"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue
        mod.register(app)


_register_optional()

if __name__ == "__main__":
    sys.exit(app())
