"""The toy world, as far as evaluation needs it: the paper's experiment at a size that runs on 2 CPU cores.

* `checkpoints/`, `data/`: the bundled toy seniors/juniors (`toy:NAME`, see tandem_eval.models) and
  the test set, package data so `make demo` and the default `tandem-eval handoff` work after install.
* `jargon`: the jargon detector (calculator annotations in a CoT).
* `aggregate`: the toy world's summary tables over arms and seeds.

Training-side code lives in trainer/: the task generator and the SFT of the initial seniors and
juniors in trainer/toy/, the whole pipeline in trainer/toy_world.py.
"""
