"""Pieces every `tandem-eval` command shares: option types, the user-error list, the one error path.

    from tandem_eval.cli.common import SeniorOpt, EngineOpt, fail
    def solo(senior: SeniorOpt = None, engine: EngineOpt = "hf"): ...

Each option is defined once here (typer `Annotated` types) and used by tandem_eval/cli/main.py and
tandem_eval/cli/lens.py, so `--engine` or `--senior` read the same in every command; the options of
solo and handoff alone (`--k`, `--seed`, sampling, shards, Ray) close the module. Choices with a
fixed set (`--engine`, `--dtype`) are `Literal`s: typer refuses other values before a command runs.
This module imports only typer, the standard library and the engine registry (which loads no engine):
`tandem-eval --help` must not pay for torch.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from ..engines import ENGINES

# ---- user errors ------------------------------------------------------------------------------

# Exceptions that mean bad input (one line, exit 2), not a bug (traceback), by defining module.
# Looked up in sys.modules only: an exception class whose module was never imported cannot have been
# raised, and importing e.g. tandem_eval.models (transformers) just to name ModelError would cost seconds.
_USER_ERRORS = {
    "tandem_eval.config": ("ConfigError",),
    "tandem_eval.data.benchmarks": ("BenchmarkError",),
    "tandem_eval.data.prompts": ("PromptError",),
    "tandem_eval.files": ("RunFolderError",),
    "tandem_eval.generate.grading": ("GraderVersionError", "GradingIncomplete"),
    "tandem_eval.models": ("ModelError",),
    "tandem_eval.run.lens_layout": ("LensError",),
    "tandem_eval.run.runs": ("ReportError",),
}


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (printed as one line), not a bug (printed with a traceback)."""
    found = [
        getattr(sys.modules[module], name) for module, names in _USER_ERRORS.items() if module in sys.modules
        for name in names
    ]  # fmt: skip
    return (*found, NotImplementedError, FileNotFoundError)


def one_line(message: str) -> str:
    return " ".join(str(message).split())


def fail(message: str) -> None:
    """The one user-error path: `error: MESSAGE` as one line on stderr, exit code 2."""
    print(f"error: {one_line(message)}", file=sys.stderr, flush=True)
    raise typer.Exit(2)


# ---- options shared by several commands --------------------------------------------------------

if TYPE_CHECKING:
    Engine = str
else:  # typer offers the engine registry's names as --engine's choices (engines.ENGINES, imported without torch)
    Engine = Literal[tuple(ENGINES)]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]  # devices.DTYPE_CHOICES

SeniorOpt = Annotated[
    str | None,
    typer.Option(
        "--senior",
        help="Senior checkpoint: an HF-format folder, or toy:NAME; with --engine served, a server as "
        "http://HOST:PORT/v1#NAME (several: URL,URL#NAME). Default: the bundled toy tandem senior "
        "(legibility/drift: the senior of --run).",
    ),
]
JuniorOpt = Annotated[
    str | None,
    typer.Option(
        "--junior",
        help="Junior checkpoint: an HF-format folder, or toy:NAME; with --engine served, a server as "
        "http://HOST:PORT/v1#NAME. Default: the junior named in the senior's tandem_meta.json.",
    ),
]
BenchmarkOpt = Annotated[
    list[str],
    typer.Option(
        "--benchmark",
        "-b",
        help="Registry name (see `tandem-eval benchmarks`), set (`paper`), or a .jsonl/.parquet/.csv file. Repeatable.",
    ),
]
NOpt = Annotated[int, typer.Option("--n", help="Samples per problem.")]
LimitOpt = Annotated[int | None, typer.Option("--limit", help="Only the first N problems of each benchmark.")]
EngineOpt = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="hf (reference, CPU default; exact KL when scoring), vllm (fast generation; prompt log-probs) or "
        "served (models behind OpenAI-compatible vLLM servers: --senior/--junior URL#NAME; docs/usage.md).",
    ),
]
TokenizerOpt = Annotated[
    Path | None,
    typer.Option(
        "--tokenizer",
        help="--engine served: a local folder with the served models' tokenizer files (runs tokenize here, "
        "token-exact; checked against each server). Default: the model folder the server reports, if it is here.",
    ),
]
ApiKeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        help="--engine served: the environment variable holding the servers' API key (the key vllm serve was given). "
        "Default: VLLM_API_KEY.",
    ),
]
DtypeOpt = Annotated[
    Dtype,
    typer.Option(
        "--dtype",
        help="Model weights' dtype; auto: bfloat16 on a CUDA GPU, float32 on CPU (the resolved one is recorded "
        "in the run; log-probs are computed in fp32).",
    ),
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Output folder: runs go to OUT/solo and OUT/handoff-*. Default: runs/<senior label>."),
]
LabelOpt = Annotated[str | None, typer.Option("--label", help="Display name of this senior in reports.")]
AllowVocabOpt = Annotated[
    bool,
    typer.Option(
        "--allow-vocab-mismatch",
        help="Allow a junior with a different tokenizer (handoff: at the text level; legibility: bits per "
        "byte of the CoT text).",
    ),
]
ChatTemplateOpt = Annotated[
    Path | None,
    typer.Option(
        "--chat-template",
        help="A Jinja chat-template file to use instead of the tokenizer's own (recorded in the run).",
    ),
]
JuniorChatTemplateOpt = Annotated[
    Path | None,
    typer.Option(
        "--junior-chat-template",
        help="A Jinja chat-template file for the junior (needed when its tokenizer differs or it has "
        "no template of its own; recorded).",
    ),
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        help="CPU threads for torch (default: the free cores, i.e. the machine's cores less the 1-minute load "
        "average; recorded in the run, not in its fingerprint). Give each of several processes on one machine "
        "its share.",
    ),
]
NBootOpt = Annotated[int, typer.Option("--n-boot", min=1, help="Bootstrap resamples of problems for the CIs.")]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the results on stdout as one JSON object (each run's results.json: config, versions, every "
        "metric with its CI and n) instead of tables; logs stay on stderr.",
    ),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress and no info records; errors and results only.")
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Debug records, and vLLM's/transformers' own log lines.")
]


# ---- options of solo and handoff only ------------------------------------------------------------
GroupOpt = Annotated[
    str | None,
    typer.Option(
        "--group",
        help="Macro group of a single local --benchmark file (default: its 'group' column, else the registry "
        "group of its stem, e.g. aime24.jsonl -> aime, else its benchmark name).",
    ),
]
KOpt = Annotated[
    str | None,
    typer.Option("--k", help="pass@k values, comma-separated (each <= --n). Default: the powers of two <= n, plus n."),
]
SeedOpt = Annotated[
    int, typer.Option("--seed", help="Run seed; each sample's seed derives from (seed, problem id, sample index).")
]
BatchOpt = Annotated[int, typer.Option("--batch-size", help="Traces per forward pass (handoff keeps 2x as many live).")]
TempOpt = Annotated[float, typer.Option("--temperature", help="Sampling temperature (0 = greedy).")]
TopPOpt = Annotated[float, typer.Option("--top-p", help="Nucleus sampling mass (1 disables it).")]
TopKOpt = Annotated[int, typer.Option("--top-k", help="0 disables top-k.")]
MaxNewOpt = Annotated[int, typer.Option("--max-new-tokens", help="Shared senior+junior token budget per trace.")]
MaxCtxOpt = Annotated[int, typer.Option("--max-context", help="Prompt + generation limit.")]
TPOpt = Annotated[int, typer.Option("--tensor-parallel-size", help="vLLM tensor parallelism (GPUs per model).")]
ShardsOpt = Annotated[
    int, typer.Option("--num-shards", help="Split problems across N processes (then `tandem-eval merge`).")
]
ShardIdxOpt = Annotated[int, typer.Option("--shard-index", help="Which shard this process runs (0..N-1).")]
GraderMismatchOpt = Annotated[
    bool,
    typer.Option(
        "--allow-grader-mismatch",
        help="Accept math-verify/latex2sympy2_extended versions other than the pinned ones (recorded).",
    ),
]
GraderStartupOpt = Annotated[
    float,
    typer.Option(
        "--grader-startup-timeout",
        min=1.0,
        help="Seconds a grading worker may take to start (math-verify's cold import). If grading fails, the "
        "samples are kept ungraded and rerunning the command only grades them.",
    ),
]
# handoff alone
ScheduleOpt = Annotated[
    str,
    typer.Option("--schedule", help="paragraph (paper), word[:P[:K]], sentence, chunk:N, takeover:N, junior-solo."),
]
SoloRunOpt = Annotated[
    Path | None,
    typer.Option(
        "--solo-run",
        help="Reuse this complete solo run folder instead of OUT/solo (it must match this run's senior, seed, "
        "sampling, budget, chat template, benchmarks and grader; else see --allow-solo-mismatch).",
    ),
]
AllowSoloMismatchOpt = Annotated[
    bool,
    typer.Option(
        "--allow-solo-mismatch",
        help="Reuse a solo run that differs in senior, seed, sampling, budget, chat template, benchmark files' "
        "content or grader (the differences are recorded in the handoff run's config.json); never one of other "
        "problems (the tax pairs problem by problem).",
    ),
]
RayWorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--ray-workers", help="Run N problem shards as Ray tasks on a local Ray (then merge); see docs/usage.md."
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address", help="Run the shards on an existing Ray cluster (HOST:6379 or auto); one per GPU/node."
    ),
]
