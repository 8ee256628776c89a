"""The toy world: the paper's whole experiment at a size that runs on 2 CPU cores.

* `task`: seeded GSM8K-style multi-step arithmetic word problems, plain and "jargon"
  (calculator-annotated) reference solutions, disjoint train/heldout/test splits, benchmark
  files, and the jargon detector.
* `models`: the shared byte-level BPE tokenizer, the project's prompt, Qwen3 model sizes.
* `sft`: the SFT recipes of the initial seniors and juniors (self-paired and jargon scenarios).
* `evaluate_quick`: a quick greedy / sampled solo pass@1 check of a checkpoint.
"""
