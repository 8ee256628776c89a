"""Benchmarks and prompts: what the senior and junior are asked to solve, and how.

    from tandem_eval.data import load_benchmarks, prompt_ids
    for p in load_benchmarks(["tiny", "my.jsonl"], limit=3):  # a run's problems, ids unique
        ids = prompt_ids(tokenizer, p.problem)

See `benchmarks.py` for the registry (`BENCHMARKS`, `BENCHMARK_SETS`) and local-file rules,
`prompts.py` for the paper's prompt, `build_paper_sets.py` for the paper's exact sets as local files.
"""

from tandem_eval.data.benchmarks import (
    BENCHMARK_SETS,
    BENCHMARKS,
    OTHER_MACRO_LABEL,
    PAPER_GROUP_SIZES,
    PAPER_MACRO_GROUPS,
    PAPER_MACRO_LABEL,
    BenchmarkSpec,
    load_benchmark,
    load_benchmarks,
    paper_set_reasons,
    resolve_benchmarks,
)
from tandem_eval.data.prompts import (
    INSTRUCTION,
    PromptError,
    prompt_ids,
    prompt_text,
    user_message,
)
from tandem_eval.data.rows import BenchmarkError, Problem

__all__ = [
    "BENCHMARKS",
    "BENCHMARK_SETS",
    "OTHER_MACRO_LABEL",
    "PAPER_GROUP_SIZES",
    "PAPER_MACRO_GROUPS",
    "PAPER_MACRO_LABEL",
    "BenchmarkError",
    "BenchmarkSpec",
    "INSTRUCTION",
    "Problem",
    "PromptError",
    "load_benchmark",
    "load_benchmarks",
    "paper_set_reasons",
    "prompt_ids",
    "prompt_text",
    "resolve_benchmarks",
    "user_message",
]
