"""The toy world's style detectors: does a CoT carry GSM8K-style calculator annotations `<<a+b=c>>`
(jargon)? Which of its steps are in the terse notation, a cue and a bare equation `He buys 17: 42+17=59`?

The toy summary (trainer/toy/aggregate.py) reports the jargon and terse rates of each arm's CoTs;
the task generator that writes these styles is trainer/toy/task.py.

    from trainer.toy.styles import uses_jargon, jargon_rate, is_terse, terse_rate
    uses_jargon("so 42 + 17 = <<42+17=59>>59 pens")                          # True
    terse_rate("Sam: 3*5=15\n\nHe loses 5, so he has 15 - 5 = 10 pens.")    # 0.5
    is_terse("Sam: 3*5=15\n\nHe loses 5: 15-5=10")                           # True
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


# a terse step: a cue (capitalised word, more words, maybe a number), a colon, an equation without spaces
_TERSE_STEP = re.compile(r"[A-Z][a-z]*( [a-z]+)*( \d+)?: \d+[-+*/]\d+=\d+")


def _steps(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if _ARITHMETIC.search(p)]


def terse_rate(text: str) -> float:
    """Fraction of the paragraphs doing arithmetic that are terse steps (0.0 if none do arithmetic)."""
    steps = _steps(text)
    return sum(_TERSE_STEP.fullmatch(p) is not None for p in steps) / len(steps) if steps else 0.0


def is_terse(text: str) -> bool:
    """True if every step of the CoT is terse (and it has at least one)."""
    steps = _steps(text)
    return bool(steps) and all(_TERSE_STEP.fullmatch(p) is not None for p in steps)
