"""The score stage: legibility and drift of a senior's solo run folder, from Python or the CLI.

`tandem-eval legibility` / `drift` (cli/lens.py) are thin shells over these two functions; a
notebook gets the same files and numbers:

    from tandem_eval import score
    scored = score.legibility("runs/quick/solo")                    # the junior from tandem_meta.json
    scored = score.drift("runs/quick/solo", junior="toy:self-paired/junior", engine="hf")
    scored.summary["kl_exact"]["all"]["macro"]                       # the metrics.json entry
    pd.read_parquet(scored.table)                                    # one row per sample

Each call checks its inputs before any weights load, scores the solo CoTs with the junior (and for
exact drift the senior), writes RUN/lens/<junior label>/<kind>.parquet, records it in COMPLETE
and merges its summary into RUN/metrics.json under "lens" -> <junior label> -> <kind>. The stage
reads run folders only: `tandem-eval legibility --senior` without `--run` is the CLI's composition
(cli/lens.py solo_then_lens: the generate stage makes or reuses the solo run, then this stage scores it;
from Python, `generate.run_eval` then `score.legibility`). The computations are tandem_eval.score.lens; the
teacher forcing is the engines' (engines/base.py).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..config import EvalConfig, ModelSpec, Sampling, default_ks
from ..devices import resolve_dtype, use_threads
from ..metrics.registry import DRIFT_ESTIMATORS
from ..models import Checkpoint
from ..paths import absolute_benchmarks, absolute_spec, folder_name, not_writable, senior_label, served_name
from ..run.lens_layout import LENS_DIR, LENS_KINDS, LensError, junior_label
from ..schemas import SAMPLE_KEY
from . import lens
from .lens import LensOptions

if TYPE_CHECKING:  # for the annotations only: the functions below import results where they use it
    from ..run.results import Amendment, RunFolder

log = logging.getLogger(__name__)
KINDS = LENS_KINDS  # ("legibility", "drift")


@dataclass(frozen=True)
class ScoreRequest:
    """Which CoTs a lens scores, with which junior and backend; the solo settings (benchmarks, n,
    limit, label, chat_template) describe the solo run made when `run` is not given."""

    run: str | Path | None = None  # the senior's complete SOLO run folder
    junior: str | None = None  # default: the junior the senior's trainer recorded (tandem_meta.json)
    senior: str | None = None  # checked against the run's; needed without `run`
    out: str | Path | None = None  # where the solo run is made without `run` (OUT/solo)
    junior_label: str | None = None  # RUN/lens/LABEL/; default: the junior checkpoint's folder name
    engine: str = "hf"  # a backend with exact_kl (hf): exact KL; else (vllm) k1/k3 from the stored senior log-probs
    dtype: str = "auto"  # the weights' dtype (devices.resolve_dtype: bf16 on a GPU, fp32 on CPU); recorded
    threads: int | None = None  # torch CPU threads (default: every core)
    chat_template: str | None = None  # the senior's template text, for the solo run made without `run`
    junior_chat_template: str | None = None  # template text replacing the junior tokenizer's own
    adopt: bool = False  # record a table an interrupted call wrote but did not record, instead of scoring
    benchmarks: tuple[str, ...] = ("tiny",)
    n: int = 8
    limit: int | None = None
    label: str | None = None
    # served models (engine served): the local folder with their tokenizer files (default: the model folder
    # the server reports) and the environment variable holding the servers' API key (default: VLLM_API_KEY)
    tokenizer: str | None = None
    api_key_env: str | None = None


@dataclass(frozen=True)
class Scored:
    """What a lens call wrote: the table, its junior label and its metrics.json summary."""

    run: Path
    table: Path
    junior_label: str
    summary: dict


@dataclass(frozen=True)
class Checked:
    """The request's inputs after the checks: specs as named, the checkpoints as resolved (once, here),
    the senior's tokenizer, the verified run (if given; the CLI sets the solo run it made for `senior`)."""

    senior_spec: str
    junior_spec: str
    senior_tok: object
    opts: LensOptions
    rf: RunFolder | None
    senior: Checkpoint
    junior: Checkpoint
    unchecked: str | None = None  # why the run's senior checkpoint cannot be checked (a run from before hashes)


@dataclass(frozen=True)
class LensPlan:
    """A checked lens command, shaped like the generate stage's Plan: which lens, the request with its
    dtype concrete, and what the checks found (Checked: the checkpoints resolved once, the verified run
    folder). `prepare` makes it before any weights load; `execute` runs it without checking again."""

    kind: str
    request: ScoreRequest
    checked: Checked

    @property
    def run(self) -> RunFolder | None:
        """The solo run folder to score (None until the CLI made one for a --senior without --run)."""
        return self.checked.rf

    def scoring(self, rf: RunFolder) -> LensPlan:
        """This plan scoring the run folder `rf` (the solo run made for its senior)."""
        return dataclasses.replace(self, checked=dataclasses.replace(self.checked, rf=rf))


def legibility(
    run=None, junior: str | None = None, *, options: LensOptions = LensOptions(), progress: bool = False, **request
) -> Scored:
    """The junior's per-token NLL of the solo CoTs in `run` (see module doc); `request`: the other
    ScoreRequest fields (senior, engine, junior_label, ...). Returns what was written."""
    return _from_python("legibility", ScoreRequest(run=run, junior=junior, **request), options, progress)


def drift(
    run=None, junior: str | None = None, *, options: LensOptions = LensOptions(), progress: bool = False, **request
) -> Scored:
    """KL(senior || junior) along the solo CoTs in `run`: exact on an engine with exact_kl ("hf"), else k1/k3."""
    return _from_python("drift", ScoreRequest(run=run, junior=junior, **request), options, progress)


# The checks word their fixes as the CLI's flags; a Python caller reads its keyword arguments instead.
_KEYWORDS = {
    **{f.name.replace("_", "-"): f.name for f in dataclasses.fields(ScoreRequest)},
    "benchmark": "benchmarks",  # repeatable on the CLI, a tuple in Python
    "adopt": "adopt=True",  # switches: the value a caller passes
    "allow-vocab-mismatch": "options=LensOptions(allow_vocab_mismatch=True)",
}
_FLAG = re.compile(r"--([a-z][a-z-]*)(?: ([A-Z][A-Z_]*)\b)?")


def python_wording(message: str) -> str:
    """`message` with each CLI flag outside `backticks` (a command to run stays one) as the keyword a
    Python caller passes: "pass --run SOLO_RUN_DIR" -> "pass run=SOLO_RUN_DIR"."""

    def keyword(m: re.Match) -> str:
        name = _KEYWORDS.get(m.group(1))
        if name is None:
            return m.group(0)
        return f"{name}={m.group(2)}" if m.group(2) and "=" not in name else name

    parts = message.split("`")
    return "`".join(_FLAG.sub(keyword, p) if i % 2 == 0 else p for i, p in enumerate(parts))


def _from_python(kind: str, req: ScoreRequest, opts: LensOptions, progress: bool) -> Scored:
    try:
        return run_lens(kind, req, opts, progress)
    except LensError as e:
        raise LensError(python_wording(str(e))) from None


def run_lens(kind: str, req: ScoreRequest, opts: LensOptions = LensOptions(), progress: bool = False) -> Scored:
    """Score the senior's solo CoTs in the run folder `req.run` with the junior. The score stage only
    reads run folders: a solo run made first for `req.senior` is the CLI's composition
    (cli/lens.py solo_then_lens: generate, then this stage)."""
    plan = prepare(kind, req, opts)
    if plan.run is None:
        raise LensError(
            f"the score stage reads an existing solo run folder: pass --run SOLO_RUN_DIR (`tandem-eval {kind} "
            "--senior PATH` makes one first)"
        )
    return execute(plan, progress)


def prepare(kind: str, req: ScoreRequest, opts: LensOptions) -> LensPlan:
    """Every check before any weights load (`check_inputs`), and the request with its dtype concrete."""
    if kind not in KINDS:
        raise LensError(f"unknown lens {kind!r}; valid: {', '.join(KINDS)}")
    checked = check_inputs(kind, req, opts)
    req = dataclasses.replace(req, dtype=resolve_dtype(req.dtype))  # concrete before any record
    return LensPlan(kind, req, checked)


def execute(plan: LensPlan, progress: bool = False) -> Scored:
    """Score the checked run folder of `plan` (prepare's) and write the lens table into it."""
    kind, req, checked = plan.kind, plan.request, plan.checked
    opts, rf = checked.opts, cast("RunFolder", plan.run)  # cast: callers pass a run folder (run_lens checks)
    reason = not_writable(rf.path / LENS_DIR)  # refused before any model loads, not after scoring
    if reason:
        raise LensError(f"{kind} writes into {rf.path}, but {reason}; make it writable or copy the run folder")
    # a served junior is recorded by its server target (its tokenizer folder is not the model)
    junior = {"path": checked.junior.server or checked.junior.path.resolve(), "content": checked.junior.content()}
    with rf.amending() as amend:  # one writer: the label is chosen, the table written and recorded under the lock
        jlabel = _unique_junior_label(rf, req.junior_label, checked.junior_spec, junior)
        table = f"{LENS_DIR}/{jlabel}/{kind}.parquet"
        from ..files import check_write_target

        check_write_target(rf.path / table, rf.path)  # before any scoring: a linked lens/ is refused up front
        samples = rf.load_samples()
        if samples.empty:
            raise LensError(f"{rf.path} has no samples; rerun the solo evaluation")
        if checked.unchecked:
            log.warning("%s", checked.unchecked)
        if req.adopt:
            per_sample = _adopted(rf, table, samples)
        else:
            use_threads(req.threads)
            models = (checked.senior, checked.junior, checked.senior_tok)
            per_sample = _score(kind, samples, models, req, opts, progress)
        senior = checked.senior.server or checked.senior.path
        where = {"junior": str(junior["path"]), "junior_content": junior["content"], "senior": str(senior)}
        return _store(
            kind, amend, per_sample, opts, (table, req.adopt), {**where, "engine": req.engine, "dtype": req.dtype}
        )


# ---- checks (before any weights load) ----------------------------------------------------------
def _model_path(spec: str, role: str) -> Path:
    from ..models import resolve_model  # HF folders and bundled toy:NAME checkpoints

    try:
        return resolve_model(spec)
    except ValueError as e:
        raise LensError(f"{role}: {e}") from None


def _checkpoint(spec: str, role: str, req: ScoreRequest, recorded: dict | None = None) -> Checkpoint:
    """Checkpoint `spec` resolved once for this command: a folder or toy:NAME (resolve_model), or a served
    model. A served model is asked through its servers (engines.resolve_checkpoint), except the senior of
    a given run (`recorded`: its config.json record), whose CoTs are read, not regenerated: its servers
    need not be up, and its tokenizer folder is the one the run recorded (or the model folder its server
    reported, or --tokenizer)."""
    from ..engines import backend, resolve_checkpoint

    if served_name(spec) is None:
        return Checkpoint(_model_path(spec, role))
    if recorded is not None:
        identity = (recorded.get("servers") or {}).get(role)
        given = [recorded["config"][role].get("tokenizer"), (identity or {}).get("root"), req.tokenizer]
        folder = next((Path(f) for f in given if f and Path(f).is_dir()), None)
        if folder is None:
            raise LensError(
                f"{role} {spec} was a served model: pass --tokenizer DIR, a local copy of its tokenizer files"
            )
        return Checkpoint(folder.resolve(), spec, identity)
    if backend(req.engine).resolves is None:
        raise LensError(f"{role} {spec} is a server: pass --engine served (or the checkpoint's folder)")
    return resolve_checkpoint(req.engine, spec, req.tokenizer, req.api_key_env)


def _junior_spec(junior: str | None, senior: Checkpoint, named: str) -> str:
    """`junior`, else the junior the senior's trainer recorded (tandem_meta.json), as `handoff` does."""
    from ..models import ModelError, default_junior

    if junior:
        return junior
    try:
        return default_junior(senior.path, named)
    except ModelError as e:
        raise LensError(str(e)) from None


def _given_run(req: ScoreRequest) -> tuple[RunFolder, dict]:
    """The verified solo run `req.run` (its own lens table may be unrecorded: this call rewrites or adopts it)
    and its config.json record (config, servers, ...), read once here for every check that needs it."""
    from ..run.results import RunFolder, verify_run

    # before any weights load (and before verify's notes on an older marker): the table is recorded in COMPLETE
    RunFolder(cast(str | Path, req.run)).check_sealed("a lens command")
    rf = verify_run(cast(str | Path, req.run), allow_unrecorded=True)  # cast: called only when a run is given
    record = rf.record
    cfg = record["config"]
    if (cfg["mode"], cfg["schedule"]) != ("solo", "solo"):
        raise LensError(
            f"{req.run} is a {cfg['mode']}/{cfg['schedule']} run; legibility and drift read the senior's "
            "SOLO CoTs: pass its solo run folder"
        )
    if req.senior is not None and _same_place(req.senior) != _same_place(cfg["senior"]["path"]):
        raise LensError(
            f"{req.run} was generated by senior {cfg['senior']['path']}, not {req.senior}; drop --senior or "
            "pass the matching run"
        )
    if req.chat_template is not None and req.chat_template != cfg.get("chat_template"):
        raise LensError(
            f"--chat-template renders the prompts of a new solo run, but {req.run} was already rendered with "
            "the template recorded in its config.json; drop --chat-template (or drop --run)"
        )
    return rf, record


def _same_place(spec: str) -> str:
    """Where checkpoint `spec` is, for comparing two names of it: a server's URL#NAME as given, a folder resolved."""
    return spec if served_name(spec) is not None else str(_model_path(spec, "senior").resolve())


def _check_senior_unchanged(rf, config: dict, senior: Checkpoint) -> str | None:
    """The senior checkpoint holds the weights that wrote the run's CoTs (its recorded content hash in
    `config`, the run's recorded config): drift would score them with other weights, legibility read them
    with another tokenizer. Returns the warning for a run from before these hashes (logged once every
    check has passed)."""
    spec = senior.server or senior.path
    recorded = (config.get("senior") or {}).get("content")
    if recorded is None:
        return f"{rf.path} predates content hashes of checkpoints: its senior {spec} is not checked"
    now = senior.content()  # a served senior: its recorded identity and the tokenizer files here
    if now != recorded:
        raise LensError(
            f"the senior checkpoint {spec} changed since {rf.path} was generated (sha256 {recorded[:12]} then, "
            f"{now[:12]} now): its CoTs were written by other weights; restore the checkpoint, or rerun the solo "
            "run into a new --out"
        )
    return None


# the settings of the solo run a lens command makes without --run, as the CLI spells them
_SOLO_SETTINGS = {
    "benchmarks": "--benchmark",
    "n": "--n",
    "limit": "--limit",
    "label": "--label",
    "out": "--out",
    "chat_template": "--chat-template",
}


def _solo_settings_given(req: ScoreRequest) -> list[str]:
    """The solo-run settings `req` gives other than their defaults: with a --run they would be ignored."""
    default = ScoreRequest()
    return [opt for name, opt in _SOLO_SETTINGS.items() if getattr(req, name) != getattr(default, name)]


def check_inputs(kind: str, req: ScoreRequest, opts: LensOptions) -> Checked:
    """Every cheap check before any weights load (as `solo` runs them: config, safetensors headers,
    tokenizers, vocabularies, chat templates); the solo run's own settings are checked by run_eval."""
    from ..engines import backend, unavailable
    from ..models import check_files, check_folder, check_template, load_tokenizer

    if req.run is None and req.senior is None:
        raise LensError("pass --run SOLO_RUN_DIR, or --senior PATH to produce (or reuse) a solo run")
    if req.run is not None and (ignored := _solo_settings_given(req)):
        raise LensError(
            f"{', '.join(ignored)} describe the solo run made without --run; --run {req.run} is scored as it was "
            "generated (every CoT of it): drop them, or drop --run to make or reuse a solo run of those settings"
        )
    if reason := unavailable(req.engine):
        raise LensError(reason)
    rf, record = _given_run(req) if req.run is not None else (None, None)
    recorded = record["config"] if record is not None else None
    senior_template = recorded.get("chat_template") if recorded is not None else req.chat_template
    # recorded absolute; cast: without --senior, --run was given (checked above), so its config was read
    senior_spec = req.senior or cast(dict, recorded)["senior"]["path"]
    senior = _checkpoint(senior_spec, "senior", req, record)
    unchecked = _check_senior_unchanged(rf, cast(dict, recorded), senior) if rf is not None else None
    junior_spec = _junior_spec(req.junior, senior, senior_spec)
    junior = _checkpoint(junior_spec, "junior", req)
    junior_tok = check_files(junior)
    # the senior's weights load for exact KL and for a new solo run; legibility of a run needs its tokenizer
    loads_senior = senior.server is None and (rf is None or (kind == "drift" and backend(req.engine).exact_kl))
    senior_tok = check_folder(senior.path) if loads_senior else load_tokenizer(senior.path)
    if not lens.vocab_matches(senior_tok, junior_tok):
        if kind == "drift":
            lens.require_shared_vocab(senior_tok, junior_tok)
        if not opts.allow_vocab_mismatch:
            raise LensError(
                "senior and junior tokenizers differ; pass --allow-vocab-mismatch to compare them in bits "
                "per byte of the CoT text instead of nats per shared token"
            )
    if rf is None:
        check_template(senior_tok, senior_template, "senior", senior_spec, "--chat-template")
    opts = dataclasses.replace(
        opts, senior_chat_template=senior_template, junior_chat_template=req.junior_chat_template
    )
    if lens.junior_renders_prompt(senior_tok, junior_tok, opts):  # else it reads the stored prompt ids
        check_template(junior_tok, req.junior_chat_template, "junior", junior_spec, "--junior-chat-template")
    return Checked(senior_spec, junior_spec, senior_tok, opts, rf, senior, junior, unchecked)


def solo_run_config(req: ScoreRequest, checked: Checked) -> tuple[EvalConfig, Path]:
    """The config and folder of the senior's solo run a request without `run` needs, as `tandem-eval solo`
    would make it (the CLI makes it with the generate stage, then scores it here)."""
    senior = cast(str, req.senior)  # cast: a solo run is made only for a given --senior (no --run)
    fields: dict[str, Any] = {
        "benchmarks": absolute_benchmarks(tuple(req.benchmarks)),
        "n": req.n,
        "ks": default_ks(req.n),  # the one --k default rule, so the same settings give one fingerprint
        "limit": req.limit,
        "engine": req.engine,
        "threads": req.threads,
        "chat_template": checked.opts.senior_chat_template,
        "api_key_env": req.api_key_env,
    }
    label = req.label or senior_label(senior)  # the same label (and folder) `tandem-eval handoff` uses
    fields = {k: v for k, v in fields.items() if v is not None}
    tokenizer = absolute_spec(req.tokenizer) if req.tokenizer else None  # a served senior's tokenizer folder
    senior_spec = ModelSpec(absolute_spec(senior), req.dtype, tokenizer=tokenizer)  # the lens's dtype, as solo's
    cfg = EvalConfig(senior=senior_spec, mode="solo", schedule="solo", label=label, **fields)
    out = Path(req.out) / "solo" if req.out else Path("runs") / folder_name(label) / "solo"
    return cfg, out


def _unique_junior_label(rf, explicit: str | None, spec: str, junior: dict) -> str:
    """The lens label of this junior in run `rf`: `explicit`, else the checkpoint's folder name; a
    default label that already holds another junior's outputs (two folders both named `junior`, or
    the same folder whose weights were replaced since) becomes PARENT-NAME, then NAME-2, NAME-3...;
    an explicit one that does is refused. `junior`: {"path": resolved folder, "content": its hash}."""
    recorded = {}  # label -> (the junior checkpoint whose outputs it holds, its content hash if recorded)
    for name, kinds in _lens_entries(rf).items():
        entries = [e for e in kinds.values() if isinstance(e, dict) and e.get("junior")]
        if entries:
            where = entries[0]["junior"]  # a served junior's URL#NAME as recorded, a folder resolved
            recorded[name] = (
                where if served_name(where) is not None else Path(where).resolve(),
                entries[0].get("junior_content"),
            )

    def free(label: str) -> bool:
        path, content = recorded.get(label, (junior["path"], None))
        return path == junior["path"] and content in (None, junior["content"])

    if explicit:
        label = junior_label(explicit)
        if not free(label):
            raise LensError(
                f"--junior-label {label} already holds the outputs of junior {recorded[label][0]} (other weights) in "
                f"{rf.path}; pass another --junior-label"
            )
        return label
    base = junior_label(spec)
    parent = junior["path"].parent.name if isinstance(junior["path"], Path) else ""  # a server has no parent folder
    candidates = [base] + ([folder_name(f"{parent}-{base}")] if parent and not spec.startswith("toy:") else [])
    candidates += [f"{base}-{i}" for i in range(2, len(recorded) + 3)]
    return next(c for c in candidates if free(c))


# ---- scoring and recording ---------------------------------------------------------------------
def _engine(req: ScoreRequest, checkpoint: Checkpoint, max_len: int, tokenizer=None):
    """A teacher-forcing engine (temperature 0: nothing is sampled) through the one engine factory;
    `tokenizer`: an already loaded tokenizer (the same files), not loaded again where the backend takes one.
    A served checkpoint's engine reads its tokenizer from the folder checked against its servers."""
    from ..engines import backend, load_engine

    facts = backend(req.engine)
    context = {"max_context": max_len + 8} if facts.sized_context else {}
    shared = {"tokenizer": tokenizer} if facts.shares_weights and tokenizer is not None else {}
    sampling = Sampling(temperature=0, **context)
    return load_engine(req.engine, checkpoint, sampling, dtype=req.dtype, api_key_env=req.api_key_env, **shared)


def _score(kind: str, samples, models: tuple, req: ScoreRequest, opts: LensOptions, progress: bool):
    """The per-sample lens table: the junior (and for exact drift the senior) reads every CoT.
    models = (senior checkpoint, junior checkpoint, senior tokenizer)."""
    from ..engines import backend, load_engine
    from ..models import same_tokenizer, same_weights
    from ..progress import progress_reporter

    senior, junior, senior_tok = models
    senior_path, junior_path = senior.path, junior.path
    # vLLM's context must hold the longest prompt + CoT (+ slack for a junior template's longer prefix).
    max_len = int(max(len(p) + len(t) for p, t in zip(samples.prompt_ids, samples.token_ids))) + 64
    if junior.server is not None:  # its window is what its servers report
        limit = (junior.identity or {}).get("max_model_len") or max_len
    else:
        limit = json.loads((junior_path / "config.json").read_text()).get("max_position_embeddings") or max_len
    one_tok = same_tokenizer(senior_path, junior_path)
    j_engine = _engine(req, junior, min(max_len, limit - 8), tokenizer=senior_tok if one_tok else None)
    s_engine = None
    per_cot = max(1, int(sum(len(t) for t in samples.token_ids) / len(samples)))  # tokens per CoT, for the rate
    try:
        facts = backend(req.engine)
        if kind == "drift" and facts.exact_kl:  # exact KL reads the senior's distributions too
            if facts.shares_weights and same_weights(senior_path, junior_path):  # self-paired: one loaded model
                s_engine = load_engine(
                    req.engine, j_engine.model, Sampling(temperature=0), tokenizer=j_engine.tokenizer
                )
            else:
                s_engine = _engine(req, senior, max_len, tokenizer=senior_tok)
        what = f"{kind}: {junior_label(junior.server or junior_path)} reads {len(samples)} CoTs"
        with progress_reporter(len(samples), what, enabled=progress) as bar:

            def advance(n: int) -> None:  # n CoTs scored
                for _ in range(n):
                    bar.advance(per_cot)

            if kind == "legibility":
                return lens.legibility(samples, j_engine, senior_tok=senior_tok, opts=opts, progress=advance)
            return lens.drift(samples, j_engine, senior=s_engine, senior_tok=senior_tok, opts=opts, progress=advance)
    finally:
        for e in (j_engine, s_engine):
            if e is not None:
                e.close()


def _summary_fields(kind: str, per_sample, opts: LensOptions) -> tuple[dict, list[str], list[str]]:
    """(metrics.json fields beside the CIs, metric columns, curve columns) of a lens table."""
    extra = {
        "include_eos": opts.include_eos,
        "scope": "CoT tokens" + (" including the final EOS" if opts.include_eos else " without the final EOS"),
        "chunk": opts.chunk,
        "temperature": 1.0,
        "logprobs": "raw logits, sliced to the tokenizer vocabulary",
        "junior_chat_template": "custom" if opts.junior_chat_template else "tokenizer's own",
    }
    if kind == "drift":
        extra.update(method=str(per_sample["method"].iloc[0]), direction="KL(senior || junior); lower = less drift")
        return extra, list(DRIFT_ESTIMATORS), ["kl_bins", "k1_bins"]  # read now: an estimator registered later counts
    matched = bool(per_sample["vocab_match"].all())
    extra.update(
        # one unit per metric: nats per (shared) token only when the vocabularies match
        unit="nats/token" if matched else "bits/byte",
        units={"junior_nll_mean": "nats/token", "junior_bpb": "bits/byte"} if matched else {"junior_bpb": "bits/byte"},
        vocab_match=matched,
        allow_vocab_mismatch=opts.allow_vocab_mismatch,
        primary="junior_nll_mean" if matched else "junior_bpb",
        direction="lower = more legible",
    )
    return extra, lens.LEGIBILITY_METRICS if matched else ["junior_bpb"], ["nll_bins"]


def _store(kind: str, amend: Amendment, per_sample, opts: LensOptions, target: tuple[str, bool], where: dict) -> Scored:
    """The lens table `target` = (path in the run, adopted: already written) recorded in COMPLETE, and
    its summary merged into metrics.json (other juniors' and kinds' entries stay); `amend`: the run
    folder as amending() hands it (results.Amendment: verified under the lock this command holds)."""
    rf = amend.folder
    table, adopted = target
    jlabel = Path(table).parent.name
    fields, metrics, curves = _summary_fields(kind, per_sample, opts)
    extra = {**where, "junior_label": jlabel, **fields}
    summary = lens.summarize(per_sample, metrics, curves, opts, extra)
    # recorded in COMPLETE (row count + hash) so every reader verifies the lens table like samples.parquet
    if adopted:
        amend.record_table(table)
        path = rf.path / table
    else:
        path = amend.add_table(table, per_sample)
    by_junior = _lens_entries(rf)
    by_junior.setdefault(jlabel, {})[kind] = summary
    rf.update_metrics({"lens": by_junior})
    return Scored(rf.path, path, jlabel, summary)


def _lens_entries(rf) -> dict:
    """metrics.json's "lens" entry: {junior label: {kind: summary}}, refused in one line when it is
    not that shape (an edited or damaged file), never a traceback."""
    from ..schemas import RunFolderError

    lens = rf.metrics().get("lens") or {}
    if not isinstance(lens, dict) or not all(isinstance(v, dict) for v in lens.values()):
        raise RunFolderError(
            f'{rf.metrics_path}: its "lens" entry is not an object of juniors (edited or damaged); restore '
            'metrics.json, or remove its "lens" key and rerun the lens commands'
        )
    return lens


def _adopted(rf, table: str, samples):
    """adopt: the table a lens call wrote but did not record (it was stopped in between), checked to
    hold one row per sample of this run, to be recorded as it is instead of scored again."""
    from ..schemas import read_table

    path = rf.path / table
    if not path.exists():
        raise LensError(f"--adopt: {path} does not exist; run the command without --adopt to compute it")
    per_sample = read_table(path, None, "run the command without --adopt to compute it again")
    key = SAMPLE_KEY
    have = sorted(map(tuple, per_sample[key].astype(str).values.tolist()))
    if have != sorted(map(tuple, samples[key].astype(str).values.tolist())):
        raise LensError(
            f"--adopt: {path} does not hold one row per sample of {rf.path}; run the command without --adopt to "
            "compute it again"
        )
    return per_sample
