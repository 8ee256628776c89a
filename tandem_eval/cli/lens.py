"""CLI commands `legibility`, `drift` and `compare` (registered on the main app by cli.py).

    tandem-eval legibility --junior JUNIOR --run runs/senior/solo      # junior NLL of the solo CoTs
    tandem-eval drift --junior JUNIOR --run runs/senior/solo           # exact KL (hf) or k1/k3 (vllm)
    tandem-eval compare runs/tandem runs/grpo --metric handoff_pass@4  # paired table, CIs, p-values

Each lens writes RUN/lens/<junior label>/legibility.parquet or .../drift.parquet (one row per
sample; the label is --junior-label, default the junior checkpoint's folder name) and merges its
summary into RUN/metrics.json under "lens" -> <junior label>, so several juniors can score the same
CoTs. The final EOS token is left out unless --include-eos. Without --run a solo run of --senior is
produced (or reused, resumably) under --out first: the one place generate then score are composed
(`solo_then_lens`; the stages never call each other). The commands are a shell over the score stage
(tandem_eval.score: the same call from Python); the computations live in tandem_eval.score.lens.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Annotated, Literal

import typer

from ..schemas import N_BOOT  # standard library only at import
from .common import (
    AllowVocabOpt,
    ApiKeyEnvOpt,
    BenchmarkOpt,
    ChatTemplateOpt,
    DtypeOpt,
    EngineOpt,
    JsonOpt,
    JuniorChatTemplateOpt,
    JuniorOpt,
    LabelOpt,
    LimitOpt,
    NBootOpt,
    NOpt,
    OutOpt,
    QuietOpt,
    SeniorOpt,
    ThreadsOpt,
    TokenizerOpt,
    VerboseOpt,
)

# compare, lens and runs import pandas and torch: imported inside the commands, so that
# `tandem-eval --help` stays fast. Errors (LensError and the others) print one line via cli.CLIGroup.

log = logging.getLogger(__name__)


def _print_summary(summary: dict, metric: str, title: str) -> None:
    from .terminal import show

    entry = summary.get(metric)
    if entry is None:
        return
    unit = summary.get("units", {}).get(metric) or ("bits/byte" if metric == "junior_bpb" else summary["unit"])
    fmt = lambda e: "-" if e.get("estimate") is None else f"{e['estimate']:.4f} [{e['low']:.4f}, {e['high']:.4f}]"  # noqa: E731
    a, c = entry["all"], entry["no_truncated"]
    rows = [
        [g, fmt(a["per_group"][g]), fmt(c["per_group"].get(g, {})), str(a["per_group"][g]["n_problems"])]
        for g in a["per_group"]
    ]
    if len(rows) > 1:  # one group: the macro is that group's row again
        rows.append(["macro", fmt(a["macro"]), fmt(c["macro"]), str(a["macro"].get("n_problems", "-"))])
    header = ["group", "all samples", "without truncated", "problems"]
    show(f"{title} ({unit}; 95% CI over problems)", header, rows, right=(1, 2, 3))
    typer.echo(f"{summary['n_truncated']} of {summary['n_samples']} CoTs hit the length budget (truncated)")


# ---- commands ------------------------------------------------------------------------------
# --senior, --junior, --out, --benchmark, --n, --limit, --engine, --dtype, --label are cli/common.py's (the
# same as solo/handoff): --out/--benchmark/--n/--limit/--label describe the solo run made when --run
# is not given.
RunOpt = Annotated[
    Path | None,
    typer.Option("--run", help="The senior's complete SOLO run folder; default: produce/reuse one under --out."),
]
ChunkOpt = Annotated[
    int, typer.Option("--chunk", min=1, help="Positions per logits block (exact-KL memory: 3*chunk*vocab*4 bytes).")
]
BinsOpt = Annotated[int, typer.Option("--bins", min=1, help="Relative-position bins of the per-position curve.")]
BatchTokOpt = Annotated[int, typer.Option("--batch-tokens", min=1, help="Padded tokens per teacher-forced HF forward.")]
JuniorLabelOpt = Annotated[
    str | None,
    typer.Option(
        "--junior-label",
        help="Name of the junior's outputs (RUN/lens/LABEL/); default: the junior checkpoint's folder name.",
    ),
]
AdoptOpt = Annotated[
    bool,
    typer.Option(
        "--adopt",
        help="Record the table an interrupted run of this command wrote but did not record, as it is "
        "(checked: one row per sample), instead of scoring again.",
    ),
]
IncludeEosOpt = Annotated[
    bool,
    typer.Option(
        "--include-eos", help="Also score the final EOS token (default: the CoT text without it, as the paper)."
    ),
]


def legibility_cmd(
    senior: SeniorOpt = None,
    junior: JuniorOpt = None,
    run: RunOpt = None,
    out: OutOpt = None,
    benchmark: BenchmarkOpt = ["tiny"],  # noqa: B006 (typer copies list defaults)
    n: NOpt = 8,
    limit: LimitOpt = None,
    engine: EngineOpt = "hf",
    dtype: DtypeOpt = "auto",
    chunk: ChunkOpt = 256,
    bins: BinsOpt = 20,
    batch_tokens: BatchTokOpt = 8192,
    n_boot: NBootOpt = N_BOOT,
    junior_label: JuniorLabelOpt = None,
    include_eos: IncludeEosOpt = False,
    label: LabelOpt = None,
    allow_vocab_mismatch: AllowVocabOpt = False,
    chat_template: ChatTemplateOpt = None,
    junior_chat_template: JuniorChatTemplateOpt = None,
    threads: ThreadsOpt = None,
    tokenizer: TokenizerOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    adopt: AdoptOpt = False,
    json_out: JsonOpt = False,
):
    """Legibility: the junior's per-token NLL (nats/token; bits/byte for a junior with another tokenizer)
    of the senior's solo CoTs. Lower = more legible."""
    _lens_command("legibility", locals())


def drift_cmd(
    senior: SeniorOpt = None,
    junior: JuniorOpt = None,
    run: RunOpt = None,
    out: OutOpt = None,
    benchmark: BenchmarkOpt = ["tiny"],  # noqa: B006 (typer copies list defaults)
    n: NOpt = 8,
    limit: LimitOpt = None,
    engine: EngineOpt = "hf",
    dtype: DtypeOpt = "auto",
    chunk: ChunkOpt = 256,
    bins: BinsOpt = 20,
    batch_tokens: BatchTokOpt = 8192,
    n_boot: NBootOpt = N_BOOT,
    junior_label: JuniorLabelOpt = None,
    include_eos: IncludeEosOpt = False,
    label: LabelOpt = None,
    chat_template: ChatTemplateOpt = None,
    junior_chat_template: JuniorChatTemplateOpt = None,
    threads: ThreadsOpt = None,
    tokenizer: TokenizerOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    adopt: AdoptOpt = False,
    json_out: JsonOpt = False,
):
    """Drift: KL(senior || junior) of next-token distributions along the senior's solo CoTs (nats/token)."""
    _lens_command("drift", locals())


def _lens_command(kind: str, args: dict) -> None:
    """A lens command's options -> solo_then_lens (the score stage's calls a notebook makes); the summary printed."""
    from ..paths import read_chat_template
    from ..score import stage as score
    from ..score.lens import LensOptions
    from .main import setup_logging

    setup_logging(args["verbose"], args["quiet"])
    opts = LensOptions(
        chunk=args["chunk"],
        bins=args["bins"],
        batch_tokens=args["batch_tokens"],
        n_boot=args["n_boot"],
        allow_vocab_mismatch=args.get("allow_vocab_mismatch", False),  # drift refuses other vocabularies
        include_eos=args["include_eos"],
    )
    from ..devices import check_threads

    check_threads(args["threads"])  # before any model loads, as solo/handoff do
    fields = {f.name for f in dataclasses.fields(score.ScoreRequest)}
    req = score.ScoreRequest(
        **{k: v for k, v in args.items() if k in fields and "template" not in k and k != "tokenizer"},
        tokenizer=str(args["tokenizer"]) if args["tokenizer"] else None,
        benchmarks=tuple(args["benchmark"]),
        chat_template=read_chat_template(args["chat_template"], "--chat-template"),
        junior_chat_template=read_chat_template(args["junior_chat_template"], "--junior-chat-template"),
    )
    scored = solo_then_lens(kind, req, opts, progress=not args["quiet"])
    summary, jlabel = scored.summary, scored.junior_label
    if args["json_out"]:  # the solo run's results: its lens summaries are in its metrics, under "lens"
        from ..run.results import verify_run
        from .terminal import print_json

        lens = {"junior": jlabel, "kind": kind, "table": str(scored.table)}
        print_json({"solo": verify_run(scored.run).results(), "lens": lens})
        return
    primary = summary.get("primary", "kl_exact" if "kl_exact" in summary else "kl_k1")
    _print_summary(summary, primary, f"{kind} ({jlabel}): {primary}")
    typer.echo(f"wrote {scored.table} and {scored.run / 'metrics.json'} [lens.{jlabel}.{kind}]")


def solo_then_lens(kind: str, req, opts, progress: bool = False):
    """A lens command: every check first (score.prepare), then without --run the senior's solo run made
    or reused by the generate stage, then the score stage on that run folder. The stages never call
    each other; this command composes them."""
    from ..generate import execute as generate
    from ..run.results import DifferentRun
    from ..score import stage as score

    plan = score.prepare(kind, req, opts)
    if plan.run is None:  # --senior without --run: the generate stage makes (or reuses) the solo run
        cfg, out = score.solo_run_config(plan.request, plan.checked)
        log.info("solo run of %s -> %s (reused if already there)", req.senior, out)
        try:
            made = generate.run_eval(cfg, out, progress=progress)
        except DifferentRun as e:  # refused by the plan, before any work: a run made with options we lack
            raise DifferentRun(
                f"{e.path} holds a solo run of other settings ({e.diff}); score it as it is with `tandem-eval "
                f"{kind} --run {e.path}`, or pass another --out",
                e.path,
                e.diff,
            ) from None
        plan = plan.scoring(made)
    return score.execute(plan, progress)


# compare's arguments and options
RunAArg = Annotated[Path, typer.Argument(help="Run (or a folder holding one run of the metric's mode): A.")]
RunBArg = Annotated[Path, typer.Argument(help="Run B, on the same problems. The table shows A - B.")]
MetricOpt = Annotated[
    str,
    typer.Option(
        "--metric",
        "-m",
        help="solo_pass@K | handoff_pass@K | tax@K | retention@K | junior_nll | junior_bpb | kl_exact | "
        "kl_reverse | kl_k1 | kl_k3 (tax/retention: A and B are handoff runs; each is paired with its solo run)",
    ),
]
NoTruncatedOpt = Annotated[
    bool, typer.Option("--no-truncated", help="Lens metrics: leave out CoTs that hit the length budget.")
]
OnMismatchOpt = Annotated[
    Literal["raise", "intersect"],
    typer.Option("--on-mismatch", help="Problems in only one run: raise, or intersect (compare shared)."),
]
LensJuniorOpt = Annotated[
    str | None,
    typer.Option("--junior", help="Lens metrics: the junior label whose outputs to read (when a run has several)."),
]
AllowJuniorMismatchOpt = Annotated[
    bool,
    typer.Option(
        "--allow-junior-mismatch",
        help="Lens metrics: compare runs whose outputs were scored by different juniors (named in the title).",
    ),
]


def compare_cmd(
    run_a: RunAArg,
    run_b: RunBArg,
    metric: MetricOpt,
    no_truncated: NoTruncatedOpt = False,
    on_mismatch: OnMismatchOpt = "raise",
    n_boot: NBootOpt = N_BOOT,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap/permutation seed.")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the table as JSON here.")] = None,
    junior: LensJuniorOpt = None,
    allow_junior_mismatch: AllowJuniorMismatchOpt = False,
):
    """Paired comparison of two runs on one metric: A - B per benchmark group and macro, with a
    bootstrap CI over problems and a sign-flip permutation p-value."""
    from ..files import atomic_write_json
    from ..metrics.registry import LENS_METRICS
    from ..report import compare
    from ..run import runs
    from ..schemas import Bootstrap, to_jsonable

    mode = runs.metric_mode(metric)
    juniors = None
    if compare.is_tax_metric(metric):  # tax@K / retention@K: each handoff run with its own solo run
        a, b = (runs.find_run(p, "handoff").folder for p in (run_a, run_b))
        table = compare.tax_compare(a, b, metric, Bootstrap(n_boot=n_boot, seed=seed), on_mismatch)
    else:
        pair = [runs.find_run(p, mode) for p in (run_a, run_b)]
        vals = []
        for run in pair:
            run.junior = junior
            vals.append(runs.problem_values(run, metric, no_truncated))
        if metric in LENS_METRICS:  # who scored them: one junior, named in the title
            juniors = compare.check_juniors(pair[0], pair[1], allow_junior_mismatch)
        table = compare.compare_values(vals[0], vals[1], Bootstrap(n_boot=n_boot, seed=seed), on_mismatch)
    _print_compare(table, metric, run_a, run_b, juniors)
    if json_out:  # whole or not at all, never through a planted link (the durable writer)
        record = {"metric": metric, "a": str(run_a), "b": str(run_b), "no_truncated": no_truncated}
        if juniors is not None:
            record["juniors"] = {"a": juniors[0], "b": juniors[1]}
        atomic_write_json(json_out, {**record, "rows": to_jsonable(table.to_dict("records"))}, json_out.parent)


def _print_compare(table, metric: str, a: Path, b: Path, juniors: tuple[dict, dict] | None = None) -> None:
    from ..metrics.registry import fmt_p
    from .terminal import show

    unit = {"tax": "points", "retention": "handoff / solo"}.get(metric.split("@")[0])
    unit = unit or ("points" if "pass@" in metric else "nats/token" if metric != "junior_bpb" else "bits/byte")
    scored = ""
    if juniors is not None:  # a lens metric names who scored it
        ja, jb = (j["label"] if j.get("path") is None else f"{j['label']} ({j['path']})" for j in juniors)
        scored = f"; scored by junior {ja}" if ja == jb else f"; scored by juniors A: {ja}, B: {jb} (they differ)"
    rows = [
        [
            r["group"],
            f"{r['a']:.4f}",
            f"{r['b']:.4f}",
            f"{r['diff']:+.4f}",
            f"[{r['low']:+.4f}, {r['high']:+.4f}]",
            fmt_p(r["p_value"]),
            str(r["n_problems"]),
        ]
        for r in table.to_dict("records")
    ]
    header = ["group", "A", "B", "A - B", "95% CI", "p", "problems"]
    title = f"{metric}: A = {a}, B = {b} ({unit}; A - B, 95% paired bootstrap CI{scored})"
    show(title, header, rows, right=range(1, 7))


def register(app: typer.Typer) -> None:
    """Add `legibility`, `drift` and `compare` to a typer app (`tandem-eval` imports them lazily instead,
    see cli.LAZY_COMMANDS; its group turns user errors into one line)."""
    app.command("legibility")(legibility_cmd)
    app.command("drift")(drift_cmd)
    app.command("compare")(compare_cmd)
