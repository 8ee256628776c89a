"""The toy world's style detectors: does a CoT carry GSM8K-style calculator annotations `<<a+b=c>>`
(jargon)? Which of its steps are in the terse notation, a cue and a bare equation `He buys 17: 42+17=59`?
Which dialect is a CoT written in (the dialects scenario: A `He buys 17: 42+17=59`, B `He buys 17;
24+71>95`, plain, or mixed)?

The toy summary (trainer/toy/aggregate.py) reports the jargon and terse rates of each arm's CoTs;
the task generator that writes these styles is trainer/toy/task.py.

    from trainer.toy.styles import uses_jargon, jargon_rate, is_terse, terse_rate
    uses_jargon("so 42 + 17 = <<42+17=59>>59 pens")                          # True
    terse_rate("Sam: 3*5=15\n\nHe loses 5, so he has 15 - 5 = 10 pens.")    # 0.5
    is_terse("Sam: 3*5=15\n\nHe loses 5: 15-5=10")                           # True
    cot_dialect("Sam; 3*5>15\n\nHe loses 5; 15-5>10\n\nThe answer is \\boxed{10}.")   # "B"
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


# the dialects scenario: a step's notation is fixed by the separator right after its cue (the token a
# model chooses it with); A's sign is "=", B's ">"; a step with one dialect's separator and the other's
# sign is neither ("other")
_DIALECT_LEAD = re.compile(r"[A-Z][a-z]*(?: [a-z]+)*(?: \d+)?([:;]) ")
DIALECT_NAMES = ("A", "B", "plain", "mixed")  # what cot_dialect returns ("mixed" also for "other" steps)


def step_dialect(paragraph: str) -> str | None:
    """ "A", "B", "other" (a separator of one dialect with the other's sign) or "plain" (a comma or a
    spaced equation: ", so she has 3 * 5 = 15") of one CoT paragraph, read from its start, so a paragraph
    cut by the token budget has one once its notation shows; None for the answer paragraph, empty ones
    and a cut one whose notation does not show yet ("He buys 17")."""
    p = paragraph.strip()
    if not p or p.startswith("The answer is"):
        return None
    m = _DIALECT_LEAD.match(p)
    if m is None:
        return "plain" if "," in p or " = " in p else None
    dialect = "A" if m.group(1) == ":" else "B"
    wrong_sign = ">" if dialect == "A" else "="
    return "other" if wrong_sign in p[m.end() :] else dialect


def cot_dialect(text: str) -> str:
    """The dialect a CoT is written in: "A", "B" or "plain" when all its steps agree (a step cut by the
    budget counts), "mixed" otherwise (also for a hybrid step, and for a CoT with no step)."""
    styles = {d for d in map(step_dialect, text.split("\n\n")) if d is not None}
    return styles.pop() if len(styles) == 1 and styles <= {"A", "B", "plain"} else "mixed"


def first_dialect(text: str) -> str | None:
    """The dialect of the CoT's first step ("A", "B", "plain", "other"; None without one): the choice a
    handoff's senior makes before the junior writes."""
    return next((d for d in map(step_dialect, text.split("\n\n")) if d is not None), None)
