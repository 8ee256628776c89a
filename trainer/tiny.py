"""`python -m trainer.tiny OUT_DIR`: the tiny offline senior/junior pair, built by tandem_eval.toy.tiny
(its home: the demo builds its fallback pair there, and the library never imports the trainer).
Code imports it from tandem_eval.toy.tiny."""

from __future__ import annotations

import sys

from tandem_eval.toy.tiny import build_tiny_pair

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m trainer.tiny OUT_DIR")
    print(*build_tiny_pair(sys.argv[1]), sep="\n")
