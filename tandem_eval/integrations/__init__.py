"""Bridges from tandem-eval to other evaluation tools.

* `lm_eval_model`: the lm-evaluation-harness model `tandem` (importing the module registers it).
* `lm_eval_cli`: `tandem-eval lm-eval ...` = lm-eval's own CLI with `tandem` registered first.
* `lm_eval_tax`: the communication tax from two lm-eval sample logs (solo and handoff).

Each needs the `lmeval` extra (`pip install -e ".[lmeval]"`); nothing here is imported by the core package.
"""
