"""The toy world's task: procedurally generated GSM8K-style multi-step arithmetic word problems.

A problem follows one character's stock of some item through `n_steps` arithmetic events
(start with boxes of items, buy, give away, double, split into piles...). Every event is one
step of the reference solution: one paragraph per step ("\\n\\n" between them), then the final
paragraph `The answer is \\boxed{N}.`. Three solution styles:

* plain:  "She buys 17 more, so she has 42 + 17 = 59 pens."
* jargon: "She buys 17 more, so she has 42 + 17 = <<42+17=59>>59 pens."  (GSM8K calculator
  annotations, the "jargon" of the predecessor paper's GSM8K experiment: redundant for the
  author, unseen -- and so confusing -- for a junior trained on plain solutions only.)
* shortcut: one paragraph "Quick count: (42 + 17 - 5) * 2 = 108." -- the whole chain at once, no
  intermediate results. A small model rarely gets it right, so a senior taught to mix it with
  plain solutions has a strategy choice that reward can fix: the RL headroom of the self-paired
  scenario (docs/toy-world.md).
* terse:  one cue and one equation per step, "He buys 17: 42+17=59" (the cue, the event's verb and
  number, says which sentence of the problem the step reads, as the plain lead does), and the same
  final paragraph: the same intermediate results as plain in about 60% of the tokens. Styles mix
  step by step (`mixed_solution`): under a token budget that plain CoTs overrun, the more steps are
  terse the likelier a CoT finishes: the emergent scenario's reward for a notation the initial
  senior (and so the junior) writes rarely, decided anew at every step.
* dialects A and B (the dialects scenario): the terse step in two notations of equal length and
  accuracy, A `He buys 17: 42+17=59` (= terse) and B `He buys 17; 24+71>95` (every number least
  significant digit first, so a reader of A continues from wrong numbers), one notation per CoT
  (`dialect_solution`): the junior learns A only, the initial senior both (trainer/toy/sft.py).

Splits are a function of the problem's arithmetic alone (a hash of its (op, a, b) chain), so a
test problem's computation never appears in training, whatever the wording, seed or difficulty.

    from trainer.toy.task import generate, write_benchmark
    problems = generate("test", 200, seed=0)
    write_benchmark("toy_test.jsonl", "test", 200, seed=0)
    python -m trainer.toy.task OUT.jsonl --split test --n 200   # same, from the shell
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SPLITS = ("train", "heldout", "test")
_SPLIT_BUCKETS = 20  # hash % 20: 0 -> test, 1 -> heldout, else train (5% / 5% / 90%)


@dataclass(frozen=True)
class Difficulty:
    """The difficulty knob: chain length and number ranges. The defaults are calibrated so that a
    0.6M-parameter senior trained ~7 CPU-minutes solves ~36% (sampled) of the test split; larger
    numbers (e.g. max_value 400) were out of reach for that budget."""

    min_steps: int = 2
    max_steps: int = 4
    max_operand: int = 20  # added / removed amounts, and the two numbers of the opening step
    max_factor: int = 3  # multipliers and divisors are drawn from 2..max_factor
    max_value: int = 60  # every intermediate result stays in 1..max_value

    def __post_init__(self):
        if not 1 <= self.min_steps <= self.max_steps:
            raise ValueError(f"need 1 <= min_steps <= max_steps, got {self}")
        if self.max_operand < 3 or self.max_factor < 2 or self.max_value < 20:
            raise ValueError(f"number ranges too small: {self}")


@dataclass(frozen=True)
class Step:
    """One arithmetic event; `a` is the running total before it (or the first number)."""

    op: str  # "+", "-", "*", "/"
    a: int
    b: int
    result: int
    plain: str  # the solution paragraph, plain style
    jargon: str  # the same paragraph with a calculator annotation
    terse: str = ""  # the same step as a cue and a bare equation


@dataclass(frozen=True)
class ToyProblem:
    problem_id: str
    split: str
    problem: str
    answer: str
    solution_plain: str
    solution_jargon: str
    n_steps: int
    steps: tuple[Step, ...]

    def solution(self, style: str) -> str:
        if style not in STYLES:
            raise ValueError(f"unknown style '{style}'; valid: {', '.join(STYLES)}")
        if style == "shortcut":
            return shortcut_solution(self.steps, self.answer)
        if style == "terse":
            return terse_solution(self.steps, self.answer)
        return self.solution_plain if style == "plain" else self.solution_jargon


STYLES = ("plain", "jargon", "shortcut", "terse")
SHORTCUT_LEAD = "Quick count:"


def shortcut_solution(steps: tuple[Step, ...] | list[Step], answer: str) -> str:
    """The whole chain as one expression (brackets where a product follows a sum), then the answer."""
    expr, additive = "", False
    for i, s in enumerate(steps):
        if i == 0:
            expr, additive = f"{s.a} {s.op} {s.b}", s.op in "+-"
        elif s.op in "*/" and additive:
            expr, additive = f"({expr}) {s.op} {s.b}", False
        else:
            expr, additive = f"{expr} {s.op} {s.b}", additive or s.op in "+-"
    return f"{SHORTCUT_LEAD} {expr} = {steps[-1].result}.\n\nThe answer is \\boxed{{{answer}}}."


def terse_solution(steps: tuple[Step, ...] | list[Step], answer: str) -> str:
    """One cue and one equation per paragraph ("He buys 17: 42+17=59"), then the answer paragraph."""
    return mixed_solution(steps, answer, [True] * len(steps))


# dialect -> (the separator after the cue, the sign before the result); A is the terse style itself. B
# also writes every number of its equation least significant digit first (42+17=59 -> 24+71>95): as long
# as A, but a reader of A who takes B's numbers for numbers continues from the wrong ones
DIALECTS = {"A": (":", "="), "B": (";", ">")}


def b_number(n: int) -> str:
    """A number as dialect B writes it: its digits reversed (59 -> "95", 60 -> "06", 6 -> "6")."""
    return str(n)[::-1]


def cue(step: Step) -> str:
    """The step's cue, the words before the terse separator ("He buys 17", or the name on step 1)."""
    return step.terse.split(": ", 1)[0]


def dialect_step(step: Step, dialect: str) -> str:
    """One step in dialect A (`He buys 17: 42+17=59`) or B (`He buys 17; 24+71>95`: every number of the
    equation as b_number writes it; the cue as in A)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect '{dialect}'; valid: {', '.join(DIALECTS)}")
    sep, sign = DIALECTS[dialect]
    a, b, r = (b_number(n) if dialect == "B" else str(n) for n in (step.a, step.b, step.result))
    return f"{cue(step)}{sep} {a}{step.op}{b}{sign}{r}"


def dialect_solution(steps: tuple[Step, ...] | list[Step], answer: str, dialect: str) -> str:
    """Every step in one dialect, then the answer paragraph (the dialects scenario's CoTs)."""
    return "\n\n".join([*(dialect_step(s, dialect) for s in steps), f"The answer is \\boxed{{{answer}}}."])


def mixed_solution(steps: tuple[Step, ...] | list[Step], answer: str, terse: list[bool]) -> str:
    """Step i in the terse style where terse[i], plain elsewhere, then the answer paragraph."""
    lines = [s.terse if t else s.plain for s, t in zip(steps, terse, strict=True)]
    return "\n\n".join([*lines, f"The answer is \\boxed{{{answer}}}."])


# ---------------------------------------------------------------- vocabulary of the world
NAMES = [
    ("Maya", "she", "her"),
    ("Tom", "he", "him"),
    ("Ana", "she", "her"),
    ("Omar", "he", "him"),
    ("Lena", "she", "her"),
    ("Sam", "he", "him"),
    ("Priya", "she", "her"),
    ("Ben", "he", "him"),
    ("Zoe", "she", "her"),
    ("Leo", "he", "him"),
    ("Nina", "she", "her"),
    ("Raj", "he", "him"),
]
ITEMS = [
    ("pens", "boxes"),
    ("apples", "baskets"),
    ("stickers", "sheets"),
    ("marbles", "bags"),
    ("cookies", "trays"),
    ("books", "shelves"),
    ("cards", "packs"),
    ("shells", "buckets"),
    ("eggs", "cartons"),
    ("beads", "jars"),
    ("coins", "purses"),
    ("toys", "crates"),
]
FRIENDS = ["a friend", "a classmate", "a cousin", "a neighbor", "the teacher", "the school"]
GIVERS = ["A friend", "Grandma", "The teacher", "A neighbor", "Dad", "Mom"]
COLORS = [("red", "blue"), ("small", "big"), ("old", "new"), ("green", "yellow")]
MULT_WORDS = {2: "doubles", 3: "triples"}

# Each event: (problem sentence, solution lead-in, terse cue); the plain solution adds
# ", so {p} has EQ {items}.", the terse one ": EQ".
_ADD = [
    ("{P} buys {b} more {items}.", "{P} buys {b} more", "{P} buys {b}"),
    ("{giver} gives {o} {b} {items}.", "{P} gets {b} more", "{P} gets {b}"),
    ("{P} finds {b} more {items}.", "{P} finds {b} more", "{P} finds {b}"),
]
_SUB = [
    ("{P} gives {b} {items} to {friend}.", "{P} gives away {b}", "{P} gives {b}"),
    ("{P} loses {b} {items}.", "{P} loses {b}", "{P} loses {b}"),
    ("{P} uses {b} of the {items}.", "{P} uses {b}", "{P} uses {b}"),
]
_MUL = [
    ("Then the number of {items} {p} has {mult}.", "The number {mult_past}", "The number {mult_past}"),
    ("{P} trades for {b} times as many {items} as {p} has.", "{P} now has {b} times as many", "{P} trades {b}"),
]
_DIV = [
    (
        "{P} splits the {items} into {b} equal piles and keeps one pile.",
        "{P} keeps one of {b} equal piles",
        "{P} splits {b}",
    ),
    (
        "{P} shares the {items} equally with {others} and keeps one share.",
        "{P} keeps one of {b} equal shares",
        "{P} shares {b}",
    ),
]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _equation(op: str, a: int, b: int, r: int, jargon: bool) -> str:
    note = f"<<{a}{op}{b}={r}>>" if jargon else ""
    return f"{a} {op} {b} = {note}{r}"


def _apply(op: str, a: int, b: int) -> int:
    return {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op]


def _choose_op(rng: random.Random, a: int, d: Difficulty) -> tuple[str, int]:
    """Pick an event applicable to the running total `a` that keeps values in 1..max_value."""
    options = []
    if a + 3 <= d.max_value:
        options += [("+", rng.randint(2, min(d.max_operand, d.max_value - a)))] * 3
    if a > 3:
        options += [("-", rng.randint(2, min(d.max_operand, a - 1)))] * 3
    factors = [k for k in range(2, d.max_factor + 1) if a * k <= d.max_value]
    if factors:
        options += [("*", rng.choice(factors))] * 2
    divisors = [k for k in range(2, d.max_factor + 1) if a % k == 0]
    if divisors:
        options += [("/", rng.choice(divisors))] * 2
    return rng.choice(options)


def _event_texts(rng: random.Random, op: str, b: int, ctx: dict) -> tuple[str, str, str]:
    """(problem sentence, solution lead-in, terse cue) for one event."""
    if op == "*" and b in MULT_WORDS and rng.random() < 0.5:
        q, s, c = _MUL[0]
        ctx = {**ctx, "mult": MULT_WORDS[b], "mult_past": MULT_WORDS[b][:-1] + "d"}
    else:
        q, s, c = rng.choice({"+": _ADD, "-": _SUB, "*": _MUL[1:], "/": _DIV}[op])
    others = f"{b - 1} friends" if b > 2 else "a friend"
    fill = {**ctx, "b": b, "others": others, "friend": rng.choice(FRIENDS), "giver": rng.choice(GIVERS)}
    return q.format(**fill), s.format(**fill), c.format(**fill)


def _build(rng: random.Random, d: Difficulty) -> tuple[str, list[Step]]:
    (name, p, o), (items, container) = rng.choice(NAMES), rng.choice(ITEMS)
    ctx = {"name": name, "p": p, "P": _cap(p), "o": o, "items": items}
    n_steps = rng.randint(d.min_steps, d.max_steps)
    if rng.random() < 0.5:  # opening: boxes of items (a product)
        b = rng.randint(2, d.max_factor + 3)  # "boxes of b": a times-table product
        a = rng.randint(2, max(2, min(10, d.max_value // b)))
        op, first = "*", f"{name} has {a} {container} with {b} {items} in each."
        lead, cue = f"{name} has {a} {container} of {b} {items}", name
    else:  # opening: two kinds of items (a sum)
        c1, c2 = rng.choice(COLORS)
        a, b = rng.randint(3, d.max_operand), rng.randint(3, d.max_operand)
        op, first = "+", f"{name} has {a} {c1} {items} and {b} {c2} {items}."
        lead, cue = f"{name} has {a} {c1} and {b} {c2} {items}", name
    sentences, leads, cues, ops = [first], [lead], [cue], [(op, a, b)]
    value = _apply(op, a, b)
    for _ in range(n_steps - 1):
        op, b = _choose_op(rng, value, d)
        q, s, c = _event_texts(rng, op, b, ctx)
        sentences.append(q)
        leads.append(s)
        cues.append(c)
        ops.append((op, value, b))
        value = _apply(op, value, b)
    steps = []
    for lead, cue, (op, a, b) in zip(leads, cues, ops):
        r = _apply(op, a, b)
        tail = f", so {p} has {{eq}} {items}."
        steps.append(
            Step(
                op,
                a,
                b,
                r,
                lead + tail.format(eq=_equation(op, a, b, r, False)),
                lead + tail.format(eq=_equation(op, a, b, r, True)),
                f"{cue}: {a}{op}{b}={r}",
            )
        )
    question = rng.choice([f"How many {items} does {name} have now?", f"How many {items} does {name} have at the end?"])
    return " ".join(sentences + [question]), steps


def signature_hash(steps: tuple[Step, ...] | list[Step]) -> str:
    """Hash of the arithmetic chain only: decides the split and the problem id."""
    key = ";".join(f"{s.op},{s.a},{s.b}" for s in steps)
    return hashlib.sha1(key.encode()).hexdigest()


def split_of(sig: str) -> str:
    bucket = int(sig[:8], 16) % _SPLIT_BUCKETS
    return "test" if bucket == 0 else "heldout" if bucket == 1 else "train"


def _render(problem: str, steps: list[Step], split: str, sig: str) -> ToyProblem:
    answer = str(steps[-1].result)
    final = f"The answer is \\boxed{{{answer}}}."
    plain = "\n\n".join([s.plain for s in steps] + [final])
    jargon = "\n\n".join([s.jargon for s in steps] + [final])
    return ToyProblem(f"toy-{split}-{sig[:12]}", split, problem, answer, plain, jargon, len(steps), tuple(steps))


def iter_problems(split: str, seed: int = 0, difficulty: Difficulty = Difficulty()) -> Iterator[ToyProblem]:
    """An endless, deterministic stream of distinct problems of one split."""
    if split not in SPLITS:
        raise ValueError(f"unknown split '{split}'; valid: {', '.join(SPLITS)}")
    rng = random.Random(f"toy/{split}/{seed}")
    seen: set[str] = set()
    while True:
        problem, steps = _build(rng, difficulty)
        sig = signature_hash(steps)
        if split_of(sig) != split or sig[:12] in seen:
            continue
        seen.add(sig[:12])
        yield _render(problem, steps, split, sig)


def generate(split: str, n: int, seed: int = 0, difficulty: Difficulty = Difficulty()) -> list[ToyProblem]:
    stream = iter_problems(split, seed, difficulty)
    return [next(stream) for _ in range(n)]


def write_benchmark(
    path: str | Path, split: str = "test", n: int = 200, seed: int = 0, difficulty: Difficulty = Difficulty()
) -> Path:
    """Write a benchmark .jsonl (problem_id, problem, answer, n_steps) loadable by
    `tandem_eval.data.load_benchmark(path)`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for p in generate(split, n, seed, difficulty):
            row = {"problem_id": p.problem_id, "problem": p.problem, "answer": p.answer, "n_steps": p.n_steps}
            f.write(json.dumps(row) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description="Write a toy-world benchmark .jsonl")
    ap.add_argument("out")
    ap.add_argument("--split", default="test", choices=SPLITS)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(write_benchmark(args.out, args.split, args.n, args.seed))


if __name__ == "__main__":
    main()
