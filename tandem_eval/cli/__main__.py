"""`python -m tandem_eval.cli`: the `tandem-eval` command without the console script."""

import sys

from .main import app

sys.exit(app())
