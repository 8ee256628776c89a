"""The generate stage under its former module name: every name is importable here as before.

The stage lives in three modules now: `plan` (plan once: resolve and check a command's inputs, with
the checks of `models` (checkpoints) and `checks` (the rest)) and `generate` (execute a plan into
run folders, merge shards). New code imports from those.

    from tandem_eval.pipeline import run_handoff   # = tandem_eval.generate.run_handoff
"""

from __future__ import annotations

from .checks import SOLO_REUSE_FIELDS, check_out_path, check_solo_reuse, solo_reuse_differences
from .config import solo_config
from .generate import (
    close_engines,
    execute,
    merge_runs,
    merge_shards,
    open_engines,
    run_eval,
    run_handoff,
    summarize,
    use_threads,
)
from .models import check_model, check_models, check_template, shares_senior_model
from .plan import Validated, handoff_dirname, load_inputs, load_problems, validate
from .progress import live_token_counter

__all__ = [
    "SOLO_REUSE_FIELDS",
    "Validated",
    "check_model",
    "check_models",
    "check_out_path",
    "check_solo_reuse",
    "check_template",
    "close_engines",
    "execute",
    "handoff_dirname",
    "live_token_counter",
    "load_inputs",
    "load_problems",
    "merge_runs",
    "merge_shards",
    "open_engines",
    "run_eval",
    "run_handoff",
    "shares_senior_model",
    "solo_config",
    "solo_reuse_differences",
    "summarize",
    "use_threads",
    "validate",
]
