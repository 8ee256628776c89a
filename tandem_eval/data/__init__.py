"""Benchmarks and prompts: what the senior and junior are asked to solve, and how.

    from tandem_eval.data import load_benchmark, prompt_ids
    for p in load_benchmark("tiny", limit=3):
        ids = prompt_ids(tokenizer, p.problem)

See `benchmarks.py` for the registry (`BENCHMARKS`, `BENCHMARK_SETS`) and local-file rules,
`prompts.py` for the paper's prompt.
"""

from tandem_eval.data.benchmarks import (
    BENCHMARK_SETS,
    BENCHMARKS,
    PAPER_MACRO_GROUPS,
    BenchmarkError,
    BenchmarkSpec,
    Problem,
    load_benchmark,
    resolve_benchmarks,
)
from tandem_eval.data.prompts import (
    INSTRUCTION,
    PromptError,
    prompt_ids,
    prompt_text,
    user_message,
)

__all__ = [
    "BENCHMARKS",
    "BENCHMARK_SETS",
    "PAPER_MACRO_GROUPS",
    "BenchmarkError",
    "BenchmarkSpec",
    "INSTRUCTION",
    "Problem",
    "PromptError",
    "load_benchmark",
    "prompt_ids",
    "prompt_text",
    "resolve_benchmarks",
    "user_message",
]
