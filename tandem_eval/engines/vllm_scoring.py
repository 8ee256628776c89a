"""Teacher forcing on a vLLM engine: per-token log-probs from vLLM's prompt log-probs.

`VLLMEngine.score` delegates here (the engine protocol's `score`, see base.py). Each item becomes
one request over prompt + continuation with `prompt_logprobs=0` (each position's own token; such
requests also skip prefix-cache reads, so every position is computed), run through the engine's
`complete` (one-off requests beside live segments). Items are queued in waves of at most
WAVE_TOKENS tokens; vLLM's scheduler batches within a wave. Generation requests may share the
engine: what they finish meanwhile is kept for the engine's next `step()`.

vLLM has no full next-token distributions here (VLLMEngine.full_distributions is False), so drift
on vLLM uses the Monte-Carlo estimators k1/k3 (lens.drift).

    lps = vllm_engine.score(prompts, conts)    # list of float64 arrays
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

WAVE_TOKENS = 64 * 4096  # prompt + continuation tokens queued at once


def score(
    engine, prompts: Sequence[Sequence[int]], conts: Sequence[Sequence[int]], progress: Callable | None = None
) -> list[np.ndarray]:
    """Raw log p(conts[i] | prompts[i] + conts[i][:t]) per item; `progress(n)` after each wave of n items."""
    if len(prompts) != len(conts):
        raise ValueError("prompts and continuations must have the same length")
    results: list[np.ndarray] = []
    wave: list[tuple[list[int], list[int]]] = []
    tokens = 0
    for i, (p, c) in enumerate(zip(prompts, conts)):
        wave.append((list(p), list(c)))
        tokens += len(p) + len(c)
        if i + 1 == len(prompts) or tokens >= WAVE_TOKENS:
            results += _wave(engine, wave)
            if progress:
                progress(len(wave))
            wave, tokens = [], 0
    return results


def tokens_input(ids: list[int]):
    """vLLM 0.32's engine-input form of a token prompt (vLLM warns that raw dict prompts go away)."""
    try:
        from vllm.inputs.engine import tokens_input
    except ImportError:  # older vLLM
        return {"prompt_token_ids": list(ids)}
    return tokens_input(list(ids))


def _params():
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        temperature=0.0,
        max_tokens=1,
        prompt_logprobs=0,  # each prompt position's own token; also skips prefix-cache reads
        detokenize=False,
        output_kind=RequestOutputKind.FINAL_ONLY,
    )


def _wave(engine, items: list[tuple[list[int], list[int]]]) -> list[np.ndarray]:
    """One wave of (prompt, continuation) items through the engine's one-off requests, in item order."""
    results: list[np.ndarray | None] = [None] * len(items)
    todo = []  # (index, ids, n_prompt)
    for i, (p, c) in enumerate(items):
        if not p:
            raise ValueError("score needs a non-empty prompt (the first token has no log-prob)")
        if not c:
            results[i] = np.zeros(0, dtype=np.float64)
            continue
        if len(p) + len(c) >= engine.max_context:
            raise ValueError(
                f"prompt + continuation ({len(p) + len(c)} tokens) must be < max_context {engine.max_context}"
            )
        todo.append((i, p + c, len(p)))
    # Generation requests may share the engine: complete() keeps what they finish for its next step().
    outputs = engine.complete([ids for _, ids, _ in todo], _params())
    for (i, ids, n), out in zip(todo, outputs):
        plp = out.prompt_logprobs  # [None, {ids[1]: Logprob}, ...]
        results[i] = np.array([plp[j][ids[j]].logprob for j in range(n, len(ids))], dtype=np.float64)
    return results  # type: ignore[return-value]
