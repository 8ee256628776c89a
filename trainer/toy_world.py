"""Deprecated entry point of `make toy`: the toy world now lives in one experiment folder, trainer/toy/.

python -m trainer.toy.world [...]      # the command; this module forwards to it with a warning
"""

from __future__ import annotations

import logging

from trainer.toy import scales, world

NEW_COMMAND = "python -m trainer.toy.world"


def __getattr__(name: str):
    # `from trainer import toy_world; toy_world.SCALES` keeps working: every name is the new modules'
    return getattr(world if hasattr(world, name) else scales, name)


def main(argv=None) -> None:
    logging.getLogger(__name__).warning("trainer.toy_world is deprecated; run `%s` instead", NEW_COMMAND)
    world.main(argv)


if __name__ == "__main__":
    logging.basicConfig(format="%(levelname)s %(message)s")
    main()
