"""`python -m tandem_eval.toy.aggregate`: moved; prints the new command and exits 2."""

import sys

from tandem_eval.toy.aggregate import NEW_COMMAND

print(f"error: tandem_eval.toy.aggregate moved to the toy experiment; run `{NEW_COMMAND}`", file=sys.stderr)
sys.exit(2)
