"""The generate stage's former module name (until 2026-12-01): old imports keep working, with a warning.

Every name here is served by tandem_eval.compat from its home (generate, plan, checks, models,
config, progress); new code imports from those.

    from tandem_eval.generate.pipeline import run_handoff   # works, warns: use tandem_eval.generate
"""

from __future__ import annotations

from ..compat import FORMER_NAMES, former_name

__all__ = sorted(FORMER_NAMES[__name__])


def __getattr__(name: str):
    return former_name(__name__, name)
