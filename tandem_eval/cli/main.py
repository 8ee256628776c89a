"""`tandem-eval`: the command line. Thin commands over the generate stage (plan, generate), lens and report.

    tandem-eval solo --senior CKPT --benchmark tiny --n 8
    tandem-eval handoff --senior CKPT --junior JR --schedule paragraph --out runs/ckpt
    tandem-eval handoff                      # the bundled toy-world tandem senior and its junior
    tandem-eval merge runs/ckpt              # join --num-shards outputs
    tandem-eval benchmarks                   # list the benchmark registry
    tandem-eval benchmarks --check DIR       # are DIR's files the paper's sets? (sizes)

Every error a user can cause prints one line on stderr naming the problem and the fix, and exits
with 2 (option parsing errors included; `tandem-eval --debug CMD` shows its traceback); a bug keeps
its traceback. Shared options live in cli/common.py; legibility/drift/compare (cli/lens.py) and
report/view (report/cli) are imported only when they run, so `--help` does not import torch.
Progress and log records go to stderr, the results tables to stdout, last.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import logging
import os
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException

from ..config import EvalConfig, ModelSpec, Sampling, default_ks
from ..devices import resolve_dtype
from ..paths import (
    absolute_benchmarks,
    absolute_spec,
    check_out_not_file,
    folder_name,
    not_writable,
    read_chat_template,
    senior_label,
)
from ..schemas import ConfigError
from .common import (
    AllowSoloMismatchOpt,
    AllowVocabOpt,
    ApiKeyEnvOpt,
    BatchOpt,
    BenchmarkOpt,
    ChatTemplateOpt,
    DtypeOpt,
    EngineOpt,
    GraderMismatchOpt,
    GraderStartupOpt,
    GroupOpt,
    JsonOpt,
    JuniorChatTemplateOpt,
    JuniorOpt,
    KOpt,
    LabelOpt,
    LimitOpt,
    MaxCtxOpt,
    MaxNewOpt,
    NOpt,
    OutOpt,
    QuietOpt,
    RayAddressOpt,
    RayWorkersOpt,
    ScheduleOpt,
    SeedOpt,
    SeniorOpt,
    ShardIdxOpt,
    ShardsOpt,
    SoloRunOpt,
    TempOpt,
    ThreadsOpt,
    TokenizerOpt,
    TopKOpt,
    TopPOpt,
    TPOpt,
    VerboseOpt,
    fail,
    one_line,
    user_errors,
)
from .terminal import console, print_benchmarks, print_json, print_outcomes, print_paper_sets, print_passk, print_tax

if TYPE_CHECKING:  # annotations only: the CLI imports models where a command resolves a checkpoint
    from ..models import Checkpoints

# Commands living in other modules, imported only when one of them runs (or shows its own --help):
# they import pandas and torch, which would make every `tandem-eval --help` take seconds.
# name -> (module, function); tandem_eval/report is absent from a minimal install.
LAZY_COMMANDS = {
    "legibility": ("tandem_eval.cli.lens", "legibility_cmd"),
    "drift": ("tandem_eval.cli.lens", "drift_cmd"),
    "compare": ("tandem_eval.cli.lens", "compare_cmd"),
    "report": ("tandem_eval.report.cli", "report"),
    "view": ("tandem_eval.report.cli", "view"),
}


def _module_file(module: str) -> Path:
    return Path(__file__).resolve().parents[1].joinpath(*module.split(".")[1:]).with_suffix(".py")


def _docstring(module: str, function: str) -> str:
    """A function's docstring read from its source file, without importing the module."""
    for node in ast.parse(_module_file(module).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return inspect.cleandoc(ast.get_docstring(node) or "")
    return ""


class CLIGroup(TyperGroup):
    """The `tandem-eval` group: lazily imported commands and the one error path.

    Option parsing errors (a bad integer, an unknown option, a value outside a choice) and user errors
    raised by a command (tandem_eval.cli.common.user_errors) print one line on stderr and exit 2;
    `tandem-eval --debug ...` shows a user error's traceback instead. Any other exception is a bug
    and keeps its traceback.
    """

    def list_commands(self, ctx) -> list[str]:
        lazy = [name for name, (module, _) in LAZY_COMMANDS.items() if _module_file(module).exists()]
        return [*super().list_commands(ctx), *(n for n in lazy if n not in self.commands)]

    def get_command(self, ctx, name: str):
        """The command, or for a lazy one not yet imported, a stand-in carrying its help text (the
        command list of `--help`); resolve_command imports the real one before it runs."""
        if name in self.commands or name not in LAZY_COMMANDS or not _module_file(LAZY_COMMANDS[name][0]).exists():
            return _plain_flags(super().get_command(ctx, name))
        return TyperCommand(name=name, help=_docstring(*LAZY_COMMANDS[name]))

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        if name in LAZY_COMMANDS and name not in self.commands:
            module, function = LAZY_COMMANDS[name]
            one = typer.Typer(add_completion=False)
            one.command(name)(getattr(importlib.import_module(module), function))
            cmd = self.commands[name] = typer.main.get_command(one)  # a single command, not a group
        return name, _plain_flags(cmd), rest

    def invoke(self, ctx):
        debug = bool(ctx.params.get("debug"))
        with warnings.catch_warnings():  # restores Python's own warning printer when the command returns
            if not debug:  # `warning: MESSAGE`, one line, as errors are (Python's adds the file and source line)
                warnings.showwarning = _warning_line
            try:
                return super().invoke(ctx)
            except Exception as e:
                if isinstance(e, user_errors()) and not debug:
                    fail(str(e))
                raise

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not sys.stdout.isatty():
            # --help piped to a file or a pager: rich would lay it out for 80 columns and cut option names
            # ("--allow-grader-mismat…"); a wide layout keeps every name and help text whole. rich reads
            # COLUMNS when typer creates its help console, after this.
            os.environ.setdefault("COLUMNS", "200")
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            with _sigterm_as_exit():
                rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except TyperException as e:  # typer's (vendored click's) ClickException family
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `tandem-eval`: the help text
                e.show()
                sys.exit(e.exit_code)
            ctx = getattr(e, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            print(f"error: {one_line(e.format_message())}{hint}", file=sys.stderr)
            sys.exit(getattr(e, "exit_code", 2))
        except typer.Abort:
            print("Aborted!", file=sys.stderr)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning a command raises, as the CLI prints it: `warning: MESSAGE` on one line of stderr, and
    nothing under -q, whose promise is errors and results only (setup_logging sets tandem_eval's level)."""
    if logging.getLogger("tandem_eval").isEnabledFor(logging.WARNING):
        print(f"warning: {one_line(str(message))}", file=file or sys.stderr, flush=True)


def _plain_flags(cmd):
    """`cmd` with its on/off flags shown without a type (typer >= 0.20 labels each `<bool>`, as if it
    took a value): an empty metavar is what the help prints in the type column."""
    for param in getattr(cmd, "params", ()):
        if getattr(param, "is_bool_flag", False) and param.metavar is None:
            param.metavar = ""
    return cmd


@contextlib.contextmanager
def _sigterm_as_exit():
    """SIGTERM (`kill`, a scheduler's stop) raises SystemExit(143) in the command, as Ctrl-C raises
    KeyboardInterrupt, so its cleanup runs: a run folder that holds no sample yet is removed, locks
    are released, temporary files deleted. Python's default would end the process on the spot."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


app = typer.Typer(
    cls=CLIGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Evaluate tandem seniors: solo and handoff pass@k, communication tax, legibility, drift.",
)
DEFAULT_SENIOR = "toy:self-paired/tandem"


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of user errors too (not just one line).")
    ] = False,
):
    pass  # read back by CLIGroup.invoke from the context's params


def setup_logging(verbose: bool = False, quiet: bool = False) -> None:
    """tandem_eval's records (progress included) on stderr: INFO by default, DEBUG with -v, errors
    only with -q (its help promises "errors and results only": a warning is a record too, and
    what it warns of stays in the run folder's metrics.json and config.json). Other libraries'
    chatter (vLLM INFO lines, transformers warnings) only with -v."""
    level = logging.DEBUG if verbose else logging.ERROR if quiet else logging.INFO
    logger = logging.getLogger("tandem_eval")
    for h in [h for h in logger.handlers if getattr(h, "tandem_cli", False)]:
        logger.removeHandler(h)
    if sys.stderr.isatty():  # rich's handler on a terminal; plain timestamped lines in log files
        from rich.console import Console
        from rich.logging import RichHandler

        handler: logging.Handler = RichHandler(
            console=Console(stderr=True), show_path=False, log_time_format="%H:%M:%S"
        )
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    handler.tandem_cli = True  # type: ignore[attr-defined]  # our mark, so a second call replaces only ours
    logger.addHandler(handler)
    logger.setLevel(level)
    # vLLM's own log level is set by the vLLM engine from its `verbose` switch (-v); see vllm_engine.py
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity(logging.INFO if verbose else logging.ERROR)
    if verbose:  # transformers' "Loading weights" bars only with -v
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()


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
    from ..models import toy_names

    if f"{DEFAULT_SENIOR}" in toy_names():
        return DEFAULT_SENIOR
    raise ConfigError("no --senior given and no bundled toy checkpoints in this install; pass --senior PATH")


def _default_junior(senior: str, junior: str | None) -> tuple[str, Checkpoints | None]:
    """`junior`, else the one the senior's trainer recorded (models.default_junior), with the senior's
    checkpoint as resolved to read it (passed on to the plan, which then resolves it no more)."""
    if junior:
        return junior, None
    from ..models import Checkpoint, Checkpoints, default_junior, resolve_model

    folder = resolve_model(senior)
    return default_junior(folder, senior), Checkpoints(Checkpoint(folder))


def _ray_plan(workers: int | None, address: str | None):
    """A RayPlan when --ray-workers/--ray-address is given, else None (one process)."""
    if workers is None and address is None:
        return None
    from ..generate.distributed import RayPlan

    return RayPlan(workers=workers, address=address)


# Command options that are not EvalConfig fields: where and how the command runs.
_NOT_CONFIG = (
    "out",
    "json_out",
    "quiet",
    "verbose",
    "ray_workers",
    "ray_address",
    "solo_run",
    "allow_solo_mismatch",
    "grader_startup_timeout",
)
_SAMPLING = ("temperature", "top_p", "top_k", "max_new_tokens", "max_context")


def run_config(mode: str, options: dict) -> EvalConfig:
    """The run's EvalConfig from a solo or handoff command's options (its parameters by name): the
    default senior (and junior), sampling, paths recorded absolute (the run reads the same from any
    working directory), --k, the label and the chat templates; other options are EvalConfig fields."""
    return run_inputs(mode, options)[0]


def run_inputs(mode: str, options: dict) -> tuple[EvalConfig, Checkpoints | None]:
    """run_config, and the checkpoints it resolved on the way (the senior, when its tandem_meta.json names
    the default junior), for the plan to take as they are; None when it resolved none."""
    from ..devices import check_threads
    from ..generate.grading import check_startup_timeout

    # the options that are not EvalConfig's to check, first: each refused before any work is done
    check_startup_timeout(options["grader_startup_timeout"])
    check_threads(options["threads"])
    from ..engines import backend, unavailable

    if reason := unavailable(options["engine"]):
        raise ConfigError(reason)
    o = {key: value for key, value in options.items() if key not in _NOT_CONFIG}
    served = backend(options["engine"]).remote  # --senior/--junior name servers, not folders
    tokenizer = o.pop("tokenizer")
    if served and not o["senior"]:
        raise ConfigError("--engine served needs --senior http://HOST:PORT/v1#NAME (a server and its model name)")
    if tokenizer is not None and not served:
        raise ConfigError("--tokenizer is the tokenizer folder of served models; drop it, or pass --engine served")
    senior = _default_senior(o.pop("senior"))
    junior = o.pop("junior", None)
    if mode == "handoff" and served and not junior:
        raise ConfigError("--engine served needs --junior http://HOST:PORT/v1#NAME (a server and its model name)")
    junior, resolved = _default_junior(senior, junior) if mode == "handoff" else (None, None)
    tok_dir = absolute_spec(str(tokenizer)) if tokenizer is not None else None
    sampling = Sampling(*(o.pop(name) for name in _SAMPLING))
    dtype, k, label = o.pop("dtype"), o.pop("k"), o.pop("label")
    fields = dict(
        mode=mode,
        schedule=o.pop("schedule", "solo"),
        benchmarks=absolute_benchmarks(o.pop("benchmark")),
        ks=parse_ks(k, o["n"]),
        sampling=sampling,
        label=label or senior_label(senior),
        chat_template=read_chat_template(o.pop("chat_template"), "--chat-template"),
        junior_chat_template=read_chat_template(o.pop("junior_chat_template", None), "--junior-chat-template"),
    )
    # concrete before the run is fingerprinted (auto: bf16 on a GPU, fp32 on CPU, as every CPU run so far);
    # last, because it imports torch: the cheap checks above answer bad input first
    dtype = resolve_dtype(dtype)
    cfg = EvalConfig(
        senior=ModelSpec(absolute_spec(senior), dtype, tokenizer=tok_dir),
        junior=ModelSpec(absolute_spec(junior), dtype, tokenizer=tok_dir) if junior else None,
        **fields,
        **o,
    )
    return cfg, resolved


def _check_handoff_schedule(schedule: str) -> None:
    """--schedule solo is no handoff. Every other spelling is parsed and checked once, by the plan
    (generate/plan.validate), which carries the parsed schedule to the runs."""
    if schedule == "solo":
        raise ConfigError("--schedule solo is not a handoff; use `tandem-eval solo`")


def _out_dir(out: Path | None, cfg: EvalConfig) -> Path:
    """The folder a solo/handoff command's runs go under: --out (default runs/<label>), or this shard's
    folder in it (the one shard layout that `merge` and the Ray driver read)."""
    from ..run.runs import shard_dir

    if out is not None:
        check_out_not_file(out)
    root = out or Path("runs") / folder_name(cfg.label or "senior")
    return shard_dir(root, cfg.shard_index, cfg.num_shards) if cfg.num_shards > 1 else root


@app.command()
def solo(
    senior: SeniorOpt = None,
    benchmark: BenchmarkOpt = ["tiny"],  # noqa: B006 (typer copies list defaults)
    group: GroupOpt = None,
    n: NOpt = 8,
    k: KOpt = None,
    engine: EngineOpt = "hf",
    out: OutOpt = None,
    limit: LimitOpt = None,
    seed: SeedOpt = 0,
    batch_size: BatchOpt = 32,
    temperature: TempOpt = 0.7,
    top_p: TopPOpt = 0.8,
    top_k: TopKOpt = 20,
    max_new_tokens: MaxNewOpt = 3000,
    max_context: MaxCtxOpt = 4096,
    dtype: DtypeOpt = "auto",
    tensor_parallel_size: TPOpt = 1,
    num_shards: ShardsOpt = 1,
    shard_index: ShardIdxOpt = 0,
    allow_grader_mismatch: GraderMismatchOpt = False,
    grader_startup_timeout: GraderStartupOpt = 600.0,
    label: LabelOpt = None,
    chat_template: ChatTemplateOpt = None,
    threads: ThreadsOpt = None,
    tokenizer: TokenizerOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    json_out: JsonOpt = False,
    ray_workers: RayWorkersOpt = None,
    ray_address: RayAddressOpt = None,
):
    """The senior alone: n samples per problem, unbiased pass@k per benchmark and macro."""
    options = dict(locals())  # the command's options, before any other local name
    setup_logging(verbose, quiet)
    cfg = run_config("solo", options)
    ray = _ray_plan(ray_workers, ray_address)
    if ray is not None:
        from ..generate.distributed import ray_solo

        rf = ray_solo(cfg, _out_dir(out, cfg), ray)
    else:
        from ..generate.execute import run_eval

        rf = run_eval(cfg, _out_dir(out, cfg) / "solo", progress=not quiet, grader_startup_s=grader_startup_timeout)
    from ..generate.execute import verified_metrics

    metrics = verified_metrics(rf, cfg.ks)  # pass@k from the verified samples, not a metrics.json edited since
    if json_out:
        print_json({"solo": rf.results(metrics)})
        return
    console.print(f"run folder: {rf.path}")
    print_passk({"solo": metrics["pass_at_k"]}, cfg.ks)
    print_outcomes({"solo": metrics})


@app.command()
def handoff(
    senior: SeniorOpt = None,
    junior: JuniorOpt = None,
    schedule: ScheduleOpt = "paragraph",
    benchmark: BenchmarkOpt = ["tiny"],  # noqa: B006 (typer copies list defaults)
    group: GroupOpt = None,
    n: NOpt = 8,
    k: KOpt = None,
    engine: EngineOpt = "hf",
    out: OutOpt = None,
    limit: LimitOpt = None,
    seed: SeedOpt = 0,
    batch_size: BatchOpt = 32,
    temperature: TempOpt = 0.7,
    top_p: TopPOpt = 0.8,
    top_k: TopKOpt = 20,
    max_new_tokens: MaxNewOpt = 3000,
    max_context: MaxCtxOpt = 4096,
    dtype: DtypeOpt = "auto",
    tensor_parallel_size: TPOpt = 1,
    num_shards: ShardsOpt = 1,
    shard_index: ShardIdxOpt = 0,
    allow_grader_mismatch: GraderMismatchOpt = False,
    grader_startup_timeout: GraderStartupOpt = 600.0,
    allow_vocab_mismatch: AllowVocabOpt = False,
    solo_run: SoloRunOpt = None,
    allow_solo_mismatch: AllowSoloMismatchOpt = False,
    label: LabelOpt = None,
    chat_template: ChatTemplateOpt = None,
    junior_chat_template: JuniorChatTemplateOpt = None,
    threads: ThreadsOpt = None,
    tokenizer: TokenizerOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    json_out: JsonOpt = False,
    ray_workers: RayWorkersOpt = None,
    ray_address: RayAddressOpt = None,
):
    """Senior and junior alternate reasoning steps; reports solo vs handoff pass@k, tax and retention."""
    options = dict(locals())  # the command's options, before any other local name
    setup_logging(verbose, quiet)
    _check_handoff_schedule(schedule)
    cfg, resolved = run_inputs("handoff", options)
    ray = _ray_plan(ray_workers, ray_address)
    if ray is not None:
        from ..generate.distributed import ray_handoff

        solo_rf, handoff_rf, tax = ray_handoff(cfg, _out_dir(out, cfg), ray, solo_run, allow_solo_mismatch)
    else:
        from ..generate.execute import run_handoff

        solo_rf, handoff_rf, tax = run_handoff(
            cfg,
            _out_dir(out, cfg),
            solo_run,
            progress=not quiet,
            allow_solo_mismatch=allow_solo_mismatch,
            grader_startup_s=grader_startup_timeout,
            checkpoints=resolved,
        )
    from ..generate.execute import verified_metrics

    folders = {"solo": solo_rf, "handoff": handoff_rf}
    metrics = {name: verified_metrics(rf, cfg.ks) for name, rf in folders.items()}  # each metrics.json read once
    if json_out:  # the tax is in the handoff run's metrics
        print_json({name: rf.results(metrics[name]) for name, rf in folders.items()})
        return
    console.print(f"run folders: {solo_rf.path}  {handoff_rf.path}")
    print_passk({name: m["pass_at_k"] for name, m in metrics.items()}, cfg.ks)
    print_outcomes(metrics)
    print_tax(tax, cfg.ks)


@app.command()
def merge(root: Path = typer.Argument(..., help="The --out folder whose shard-I-of-N subfolders to merge.")):
    """Merge the outputs of --num-shards N processes into ROOT/solo and ROOT/handoff-* (and recompute the tax)."""
    from ..generate.execute import merge_runs
    from ..run.runs import shard_parts

    parts = shard_parts(root)
    if not parts:
        raise FileNotFoundError(f"no shard-I-of-N folders under {root}; run with --num-shards first")
    kinds = sorted({c.name for p in parts for c in p.iterdir() if (c / "config.json").exists()})
    for rf in merge_runs(root, parts, kinds).values():
        console.print(f"merged {len(parts)} shards -> {rf.path}")


@app.command()
def benchmarks(
    check: Path | None = typer.Option(
        None, "--check", help="A folder of benchmark files: print each set's size against the paper's."
    ),
):
    """List the benchmark registry (name, group, source, sizes), or --check DIR against the paper's sets."""
    from ..data import BENCHMARK_SETS, BENCHMARKS

    if check is not None:
        _check_sets(check)
        return
    print_benchmarks(BENCHMARKS, BENCHMARK_SETS)


def _check_sets(folder: Path) -> None:
    """Rows: each file's benchmark and each group, size vs the paper's; exit 1 if not the paper's sets."""
    from ..data.benchmarks import check_paper_sets

    rows, reasons = check_paper_sets(folder)
    print_paper_sets(rows, folder)
    if reasons:
        console.print(f"not the paper's sets: {'; '.join(reasons)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    console.print("the paper's four groups at the paper's sizes (texts not compared)")


@app.command()
def regrade(
    run: Path = typer.Argument(..., help="A complete run folder (solo or handoff)."),
    timeout: float = typer.Option(5.0, "--timeout", help="Per-item math-verify deadline, seconds."),
    show: int = typer.Option(20, "--show", help="Changed verdicts to list (all are in regrade.parquet)."),
    allow_grader_mismatch: GraderMismatchOpt = False,
    quiet: QuietOpt = False,
):
    """Re-grade a finished run with the installed grader (no regeneration); writes RUN/regrade.parquet."""
    from ..generate.regrade import regrade as regrade_run
    from .terminal import print_regrade

    setup_logging(quiet=quiet)  # its records on this command's stderr, as every command's

    reason = not_writable(run) if run.is_dir() else None  # regrade.json/.parquet go into RUN: checked first
    if reason:
        raise ConfigError(f"regrade writes into {run}, but {reason}; make it writable or copy the run folder")
    print_regrade(regrade_run(run, timeout, allow_grader_mismatch, progress=not quiet), show)


@app.command(
    "lm-eval",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def lm_eval_cmd(ctx: typer.Context):
    """lm-evaluation-harness's CLI with the `tandem` model registered: every argument goes to lm-eval."""
    from ..integrations.lm_eval_cli import LmEvalMissing, run_lm_eval

    try:
        run_lm_eval(list(ctx.args))
    except LmEvalMissing as e:
        fail(str(e))


if __name__ == "__main__":
    sys.exit(app())
