"""Moved: the toy world's summary is part of the toy experiment, `python -m trainer.toy.summary results/toy`.

The evaluation library cannot import the trainer, so this name only says where the code went
(`python -m tandem_eval.toy.aggregate` prints the new command and exits 2).
"""

NEW_COMMAND = "python -m trainer.toy.summary results/toy [--readme docs/toy-world.md]"


def __getattr__(name: str):
    raise AttributeError(
        f"tandem_eval.toy.aggregate moved to trainer.toy (summary, aggregate, verdicts); run `{NEW_COMMAND}`"
    )
