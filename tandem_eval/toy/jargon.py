"""Moved: the toy world's style detectors belong to its task, `from trainer.toy.styles import uses_jargon, is_terse`
(evaluation itself never reads them, and the library cannot import the trainer)."""

raise ImportError("tandem_eval.toy.jargon moved to trainer.toy.styles (uses_jargon, jargon_rate, is_terse)")
