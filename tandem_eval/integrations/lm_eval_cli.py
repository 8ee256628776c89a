"""`tandem-eval lm-eval ARGS...`: lm-evaluation-harness's own CLI with the `tandem` model registered first.

Every argument goes to lm-eval unchanged, so its options, tasks and built-in models (`--model hf`, ...) all work:

    tandem-eval lm-eval --model tandem --model_args senior=toy:tandem,schedule=paragraph \\
        --tasks gsm8k --apply_chat_template --output_path out/ --log_samples
    python -m tandem_eval.integrations.lm_eval_cli --model tandem ...   # the same without the typer app
"""

from __future__ import annotations

import sys


class LmEvalMissing(ImportError):
    """lm-eval is not installed."""


def run_lm_eval(argv: list[str]) -> None:
    """Run lm-eval's CLI on argv (without the program name), after registering `tandem`."""
    try:
        from lm_eval.__main__ import cli_evaluate
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] == "lm_eval":
            raise LmEvalMissing(
                'lm-eval is not installed; install the extra: pip install -e ".[lmeval]" (lm-eval[hf]==0.4.13)'
            ) from None
        raise
    from . import lm_eval_model  # noqa: F401  (registers "tandem")

    # lm-eval's HarnessCLI reads sys.argv (and inserts `run` when no subcommand is given).
    old = sys.argv
    sys.argv = ["lm-eval", *argv]
    try:
        cli_evaluate()
    finally:
        sys.argv = old


if __name__ == "__main__":
    run_lm_eval(sys.argv[1:])
