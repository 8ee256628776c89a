"""The command line: a thin typer layer that parses options, builds one plan and calls one stage.

main (the `tandem-eval` app and its generate commands), lens (legibility, drift, compare), common
(the options every command shares, user errors as one line and exit 2), terminal (rich tables),
demo (`python -m tandem_eval.cli.demo`). The report and view commands live in tandem_eval/report/cli.py.

    tandem-eval --help              # the console script: tandem_eval.cli:app
    python -m tandem_eval.cli --help
"""

from .main import app

__all__ = ["app"]
