"""The generate stage: a checked plan of solo and handoff runs, executed into run folders.

plan (every input checked once, before any weights load), checks (out paths, solo reuse), execute
(engines, the co-generation loop of tandem, grading, pass@k and the tax into metrics.json, merging
--num-shards parts), schedules (when the junior takes over), grading (+ its worker process), regrade,
distributed (Ray).

    from tandem_eval.generate import run_handoff
    solo, handoff, tax = run_handoff(EvalConfig(senior=ModelSpec("ckpt"), junior=ModelSpec("jr"),
                                                mode="handoff", schedule="paragraph"), "runs/ckpt")

The names below are execute's (reproducibility: plan's); they load on first use, so that importing one
of this package's light modules (schedules, grading's worker) does not import pandas and the engines.
The function `execute` is `tandem_eval.generate.execute.execute`: a package cannot hold a function and a
module of one name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .execute import (
        close_engines,
        load_engines,
        merge_runs,
        merge_shards,
        open_engines,
        run_eval,
        run_handoff,
        summarize,
    )
    from .plan import reproducibility

__all__ = [
    "close_engines",
    "load_engines",
    "merge_runs",
    "merge_shards",
    "open_engines",
    "reproducibility",
    "run_eval",
    "run_handoff",
    "summarize",
]


_HOMES = {"reproducibility": "plan"}  # the plan records it with each run; the other names are execute's


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES.get(name, 'execute')}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
