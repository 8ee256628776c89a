"""The toy world's training side (run by trainer/toy_world.py).

* `task`: seeded GSM8K-style multi-step arithmetic word problems, plain and "jargon"
  (calculator-annotated) reference solutions, disjoint train/heldout/test splits, benchmark files.
* `models`: the shared byte-level BPE tokenizer, the project's prompt, Qwen3 model sizes.
* `sft`: the SFT recipes of the initial seniors and juniors (self-paired and jargon scenarios).
* `evaluate_quick`: a quick greedy / sampled solo pass@1 check of a checkpoint during SFT.
"""
