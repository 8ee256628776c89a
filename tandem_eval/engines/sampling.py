"""Position-keyed sampling shared by the engines: the same token for the same logits, seed and position.

A token at absolute position p of a trace seeded s is drawn by inverse CDF with the uniform
`position_uniform(s, p)` from the temperature-scaled distribution filtered by top-k, then top-p
(vLLM's order). Because the draw depends only on (seed, position) and the logits, a trace's tokens
do not depend on its batch-mates, on how it was split into segments (a handoff re-submits the
trace), or on the backend: HF and vLLM draw the same token from the same logits.

    from tandem_eval.engines.sampling import sample_at_positions
    tokens = sample_at_positions(logits, sampling, seeds=[7, 7], positions=[12, 40])  # logits [2, V]

The HF engine's `_sample` calls `sample_at_positions`; the vLLM engine runs the same computation
inside a logits processor (vllm_sampler.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .base import position_uniform


def filtered_probs(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Softmax after top-k then top-p filtering (vLLM's order), in vocabulary order. `logits`: [R, V],
    already divided by the temperature; top_k <= 0 or >= V and top_p == 1 disable the filters."""
    if top_k and 0 < top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        sorted_p, idx = probs.sort(dim=-1, descending=True)
        # keep the smallest prefix whose mass reaches top_p (the top token is always kept)
        drop_sorted = (sorted_p.cumsum(-1) - sorted_p) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, idx, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
    return probs


def draw(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw per row: the first token whose cumulative (unnormalised) mass reaches u * total."""
    cdf = probs.cumsum(dim=-1)
    chosen = torch.searchsorted(cdf, (uniforms.to(cdf.dtype) * cdf[:, -1])[:, None]).squeeze(1)
    return chosen.clamp_(max=probs.shape[1] - 1)


def sample_at_positions(
    logits: torch.Tensor,
    temperature: float,
    top_k: int,
    top_p: float,
    seeds: Sequence[int],
    positions: Sequence[int],
) -> torch.Tensor:
    """Token ids [R] drawn from raw fp32 `logits` [R, V] with `position_uniform(seeds[r], positions[r])`."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = filtered_probs(logits.float() / temperature, top_k, top_p)
    u = torch.tensor([position_uniform(s, p) for s, p in zip(seeds, positions)], dtype=probs.dtype)
    return draw(probs, u.to(probs.device))
