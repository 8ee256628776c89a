"""The toy world, as far as evaluation needs it: the paper's experiment at a size that runs on 2 CPU cores.

* `checkpoints/`, `data/`: the bundled toy seniors/juniors (`toy:NAME`, see tandem_eval.models) and
  the test set, package data so `make demo` and the default `tandem-eval handoff` work after install.

The experiment itself (task, style detectors, SFT, `make toy`, the summary and verdicts) is one folder
outside the library, trainer/toy/.
"""
