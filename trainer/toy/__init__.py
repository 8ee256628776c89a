"""The toy world, one experiment folder (`make toy` = `python -m trainer.toy.world`).

* `task`, `styles`: seeded GSM8K-style multi-step arithmetic word problems, their solution styles
  (plain, jargon, shortcut, terse), disjoint train/heldout/test splits, and the style detectors.
* `models`: the shared byte-level BPE tokenizer, the project's prompt, Qwen3 model sizes.
* `sft`: the SFT recipes of the initial seniors and juniors; `evaluate_quick`: a quick solo check.
* `world`: the whole pipeline (data -> SFT -> lr check -> RL arms -> evaluation -> summary -> bundle).
* `summary` (with `aggregate`, `training`, `verdicts`, `markdown`, `figures`): results/toy/summary.json,
  the precondition and verdicts, summary.md, the README block and figures.
* `pilot`: a short run of the emergent scenario that checks its precondition before a full run.
"""
