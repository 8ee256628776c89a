"""The tiny offline senior/junior pairs, under the trainer's name: tandem_eval.toy.tiny holds them (the
demo builds its fallback pair there, and the library never imports the trainer).

    python -m trainer.tiny OUT_DIR        # = python -m tandem_eval.toy.tiny OUT_DIR
"""

from __future__ import annotations

import sys

from tandem_eval.toy.tiny import (  # noqa: F401  (the names trainer code and tests import from here)
    CHATML_TEMPLATE,
    TinySize,
    build_model,
    build_tiny_pair,
    config_kwargs,
    save_pair,
    sharpen,
    train_tokenizer,
)

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m trainer.tiny OUT_DIR")
    print(*build_tiny_pair(sys.argv[1]), sep="\n")
