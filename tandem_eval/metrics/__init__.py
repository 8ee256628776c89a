"""Metrics over run sample tables: pass@k, communication tax, and problem-level statistics.

    from tandem_eval.metrics import summarize_pass_at_k, communication_tax, paired_compare

Everything here reads pandas frames of samples (problem_id, benchmark, group, sample_idx,
correct, ...) and never loads a model. Statistics resample problems, not samples.
"""

from tandem_eval.metrics.passk import pass_at_k, per_problem_pass_at_k, summarize_pass_at_k
from tandem_eval.metrics.stats import (
    CI,
    Paired,
    bootstrap_ci,
    bootstrap_means,
    macro_mean,
    paired_compare,
    percentile_ci,
    sign_flip_p_value,
)
from tandem_eval.metrics.tax import communication_tax
from tandem_eval.schemas import to_jsonable

__all__ = [
    "CI",
    "Paired",
    "bootstrap_ci",
    "bootstrap_means",
    "communication_tax",
    "macro_mean",
    "paired_compare",
    "pass_at_k",
    "per_problem_pass_at_k",
    "percentile_ci",
    "sign_flip_p_value",
    "summarize_pass_at_k",
    "to_jsonable",
]
