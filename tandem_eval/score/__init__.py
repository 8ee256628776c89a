"""The score stage: legibility and drift of a senior's solo run folder (it reads run folders, never
generates them; `tandem-eval legibility --senior` composes generate then score in the CLI).

stage (the request checked once, then executed: RUN/lens/<junior label>/<kind>.parquet and the
summary in metrics.json), lens (the per-sample computations: junior NLL, exact and sampled KL).

    from tandem_eval import score
    scored = score.legibility("runs/quick/solo")                    # the junior from tandem_meta.json
    scored = score.drift("runs/quick/solo", junior="toy:self-paired/junior", engine="hf")

The names below are stage's; they load on first use (stage imports the engines and torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .stage import (
        Checked,
        LensPlan,
        Scored,
        ScoreRequest,
        check_inputs,
        drift,
        execute,
        legibility,
        prepare,
        run_lens,
        solo_run_config,
    )

__all__ = [
    "Checked",
    "LensPlan",
    "ScoreRequest",
    "Scored",
    "check_inputs",
    "drift",
    "execute",
    "legibility",
    "prepare",
    "run_lens",
    "solo_run_config",
]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.stage"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
