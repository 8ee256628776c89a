"""Deprecated names of tandem_eval, in one place: old code keeps running while it moves to the new names.

A module that lost names a release documented serves them through its `__getattr__`, which asks
`former_name` here: the object comes from its new home, with a FutureWarning (shown once per calling
line, as Python shows warnings) that names the import to write instead. New code never imports this module.

    from tandem_eval.grading import grade      # works, warns: use tandem_eval.generate.grading

Served (old name -> new name, since), for one more release:
- tandem_eval.grading.NAME -> tandem_eval.generate.grading.NAME (2026-12-03, the stage packages; served
  since 2026-12-06, when `from tandem_eval.grading import grade`, the documented Python path, raised
  ImportError): grade, Grade, Grader, extract_answer, normalize_answer, fast_match, as_gold, ungraded,
  check_grader_versions, check_startup_timeout, GraderVersionError, GraderWorkerError, GradingIncomplete,
  PINNED, STARTUP_TIMEOUT_S, UNGRADED.

Retired (2026-12-06): names that were forwarded for a few days but that no release's README, docs or
notebooks ever named. They raise AttributeError/ImportError now; the new homes, for old code:
- tandem_eval.generate.pipeline (the module; 2026-12-01, plan/execute split): run_eval, run_handoff,
  execute, merge_runs, merge_shards, open_engines, close_engines, summarize -> tandem_eval.generate.execute;
  use_threads -> tandem_eval.devices; validate, Validated, load_inputs, load_problems, handoff_dirname ->
  tandem_eval.generate.plan; check_out_path, check_solo_reuse, solo_reuse_differences, SOLO_REUSE_FIELDS ->
  tandem_eval.generate.checks; check_model, check_models, check_template, shares_senior_model ->
  tandem_eval.models; solo_config -> tandem_eval.config; live_token_counter -> tandem_eval.progress.
- tandem_eval.run.runs.load_tokenizer -> tandem_eval.run.runs.run_tokenizer (models.load_tokenizer loads a
  tokenizer from a path, a different thing).
- tandem_eval.run.results: config_fingerprint, fingerprint_of -> tandem_eval.config.fingerprint_of;
  atomic_write_text, atomic_write_json, check_regular, check_write_target, folder_lock, read_regular ->
  tandem_eval.files; sha256_file -> hashlib.file_digest (tandem_eval.files.parquet_record hashes a table
  as it reads it; atomic_write_parquet returns the hash of the bytes it wrote); PACKAGES, git_commit ->
  tandem_eval.run.provenance; require_complete -> tandem_eval.run.results.verify_run.
- tandem_eval.config.json_safe -> tandem_eval.schemas.to_jsonable.
- tandem_eval.generate.use_threads -> tandem_eval.devices.use_threads.
- tandem_eval.score.lens: LENS_DIR, LENS_KINDS, junior_label, lens_file, lens_juniors ->
  tandem_eval.run.lens_layout (lens.LensError stays importable: the computation raises it).

Moved modules (old path -> new path, 2026-12-03: stages as packages over the run-folder package).
The old paths are gone, with no forwarder (a module at each old path would keep the flat layout
alive); old code imports the new path:
- the run folder: tandem_eval.results -> tandem_eval.run.results, runs -> run.runs, durable ->
  tandem_eval.files (2026-12-06), provenance -> run.provenance, lens_layout -> run.lens_layout;
- the generate stage: tandem_eval.generate (the module) -> tandem_eval.generate.execute (the package
  tandem_eval.generate still offers run_eval, run_handoff, merge_shards, ...; the function execute is
  tandem_eval.generate.execute.execute), plan -> generate.plan, checks -> generate.checks, tandem ->
  generate.tandem, schedules -> generate.schedules, grading -> generate.grading, _grade_worker ->
  generate._grade_worker (python -m tandem_eval.generate._grade_worker), regrade -> generate.regrade,
  distributed -> generate.distributed;
- the score stage: tandem_eval.score (the module) -> tandem_eval.score.stage (the package
  tandem_eval.score still offers legibility, drift, run_lens, ...), lens -> score.lens;
- the read side: tandem_eval.compare -> tandem_eval.report.compare;
- the command line: tandem_eval.cli (the module) -> tandem_eval.cli.main (the package tandem_eval.cli
  still offers app, and python -m tandem_eval.cli runs it), cli_common -> cli.common, cli_lens ->
  cli.lens, terminal -> cli.terminal, demo -> cli.demo.
Two old paths were commands and still run as such (files that only run the new module):
`python -m tandem_eval.demo` and `python -m tandem_eval.grading ANSWER GOLD` (whose grader names are
served, above).

Removed without a forwarder (what to write instead, since):
- generate.summarize(samples, cfg) -> summarize(samples, cfg.ks) (2026-12-01).
- generate.run_metrics(rf, ks, solo), generate.tax_metrics(solo, samples, ks): execute() writes
  metrics.json and the tax from the samples in memory; a finished run's are RunFolder(path).metrics()
  (2026-12-02).
- checks.check_engine(engine) -> `if reason := tandem_eval.engines.unavailable(engine): ...` (2026-12-02).
- report.build_report(..., n_boot=, seed=) -> build_report(..., boot=Bootstrap(n_boot=, seed=)) (2026-12-01).
- python -m trainer.toy_world -> python -m trainer.toy.world (2026-12-02; the library may not import
  the trainer, so no forwarder can live here).
- Helpers that moved inside a package, imported from their modules: metrics.stats.to_jsonable ->
  schemas; report.tables COLUMNS/scoped_ci/passk_cis -> report.cells; report.figures
  arm_labels/pooled_cis/degenerate_reason -> report.panels, fig_training/training_evals ->
  report.training_figures; report.collect's run names -> tandem_eval.run.runs; data.benchmarks
  BenchmarkError/Problem/LOCAL_FIX -> data.rows (or tandem_eval.data); generate.live_token_counter ->
  progress; trainer.recipe ARMS/Arm -> trainer.recipe_checks; trainer.toy.task's style detectors ->
  trainer.toy.styles (2026-12-01).
"""

from __future__ import annotations

import importlib
import warnings

_BOUNDARIES = "2026-12-03"  # the stage packages
# the grader's public names, as `from tandem_eval.grading import grade` reached them before the stage packages
_GRADER = (
    "PINNED",
    "STARTUP_TIMEOUT_S",
    "UNGRADED",
    "Grade",
    "Grader",
    "GraderVersionError",
    "GraderWorkerError",
    "GradingIncomplete",
    "as_gold",
    "check_grader_versions",
    "check_startup_timeout",
    "extract_answer",
    "fast_match",
    "grade",
    "normalize_answer",
    "ungraded",
)

# old module -> {old name: ("new.module", "new_name", since)}
FORMER_NAMES: dict[str, dict[str, tuple[str, str, str]]] = {
    # a module that only runs the grader's command (python -m tandem_eval.grading ANSWER GOLD); its names
    # were the documented Python path (README: `from tandem_eval.grading import grade`)
    "tandem_eval.grading": {name: ("tandem_eval.generate.grading", name, _BOUNDARIES) for name in _GRADER},
}


def former_name(module: str, name: str):
    """`module.name` as it used to be, fetched from its new home with a FutureWarning naming that home;
    AttributeError, as for any missing attribute, when `name` never lived in `module`."""
    try:
        new_module, new_name, since = FORMER_NAMES[module][name]
    except KeyError:
        raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
    warnings.warn(
        f"{module}.{name} is a former name (moved {since}); use `from {new_module} import {new_name}`",
        FutureWarning,
        stacklevel=3,  # the line that asked for the name: former_name <- the module's __getattr__ <- it
    )
    return getattr(importlib.import_module(new_module), new_name)
