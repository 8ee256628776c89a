"""The toy world, one experiment folder (`make toy` = `python -m trainer.toy.world`).

* `task`, `styles`: seeded GSM8K-style multi-step arithmetic word problems, their solution styles
  (plain, jargon, shortcut, terse, dialects A and B), disjoint train/heldout/test splits, and the style
  detectors.
* `models`: the shared byte-level BPE tokenizer, the project's prompt, Qwen3 model sizes.
* `sft`: the SFT recipes of the initial seniors and juniors; `evaluate_quick`: a quick solo check.
* `world`: the whole pipeline (data -> SFT -> gates G0 and G1 (`gates`) -> RL arms -> evaluation ->
  summary -> bundle -> one report per scenario); `scales`: its settings.
* `summary` (with `aggregate`, `training`, `verdicts`, `claims`, `dialects`, `markdown`, `figures`):
  results/toy/summary.json, the gates, v4's pre-registered verdicts (`claims`) and v3's (`verdicts`), the
  dialect readings along RL, summary.md, the toy-summary block of docs/toy-world.md and figures.
* `pilot`: a short run of the emergent scenario (v3) that checks its precondition before a full run.
"""
