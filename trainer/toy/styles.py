"""The toy world's style detectors: does a CoT carry GSM8K-style calculator annotations `<<a+b=c>>`
(jargon)? Does it open in the terse notation, a bare equation `42 + 17 = 59` as its first paragraph?

The toy summary (trainer/toy/aggregate.py) reports the jargon and terse rates of each arm's CoTs;
the task generator that writes these styles is trainer/toy/task.py.

    from trainer.toy.styles import uses_jargon, jargon_rate, is_terse
    uses_jargon("so 42 + 17 = <<42+17=59>>59 pens")   # True
    is_terse("42 + 17 = 59\n\n59 - 5 = 54")          # True
"""

from __future__ import annotations

import re

_ANNOTATION = re.compile(r"<<[^<>\n]*=[^<>\n]*>>")
_ARITHMETIC = re.compile(r"\d\s*[-+*/]\s*\d")


def uses_jargon(text: str) -> bool:
    """True if the text carries at least one calculator annotation `<<a op b=c>>`."""
    return bool(_ANNOTATION.search(text))


def jargon_rate(text: str) -> float:
    """Fraction of the paragraphs doing arithmetic that carry an annotation (0.0 if none do
    arithmetic). 1.0 for a jargon-style reference solution, 0.0 for a plain one."""
    paragraphs = [p for p in text.split("\n\n") if _ARITHMETIC.search(p) or _ANNOTATION.search(p)]
    if not paragraphs:
        return 0.0
    return sum(bool(_ANNOTATION.search(p)) for p in paragraphs) / len(paragraphs)


_TERSE_LINE = re.compile(r"\d+ [-+*/] \d+ = \d+")


def is_terse(text: str) -> bool:
    """True if the CoT opens in the terse style (its first paragraph a bare equation)."""
    return _TERSE_LINE.fullmatch(text.strip().split("\n\n", 1)[0].strip()) is not None
