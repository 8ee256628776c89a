"""Batched teacher forcing on an HF engine: per-token log-probs and exact KL between two models.

`HFEngine.score` and `HFEngine.exact_kl` delegate here (the engine protocol's scoring methods, see
base.py). Items are scored in forward batches of at most `batch_tokens` padded tokens: the CoTs of
one prompt (a solo run's n samples of a problem) share a batch whose prompt runs once (its KV
cache repeated for every CoT); lone prompts go into right-padded batches. Logits are made from the
final hidden states in blocks of `chunk` positions, so exact KL keeps 3 fp32 [chunk, V] blocks
alive whatever the CoT length (chunk 256, V = 151,936: 445 MiB, measured 449 MiB on CPU; see
`kl_peak_bytes`). Log-probs are raw (temperature 1), over the tokenizer vocabulary.

    lps = engine.score(prompts, conts, batch_tokens=8192, chunk=256)   # list of float64 arrays
    rows = senior.exact_kl(junior, senior_prompts, junior_prompts, conts)  # per item: kl, kl_reverse, ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

BATCH_TOKENS = 8192  # padded tokens per teacher-forced forward (several CoTs at once)
CHUNK = 256  # positions per logits block
Progress = Callable[[int], None]  # called with the number of items just finished
KL_COLUMNS = ("kl", "kl_reverse", "senior_lp", "junior_lp")


def kl_peak_bytes(chunk: int, vocab: int, n_tokens: int = 0, hidden: int = 0) -> int:
    """Peak bytes of the exact-KL working set: 3 fp32 [chunk, vocab] blocks (senior logits, junior
    logits, one work buffer) plus both models' fp32 hidden states [n_tokens, hidden]."""
    rows = min(chunk, n_tokens) if n_tokens else chunk
    return 3 * rows * vocab * 4 + 2 * n_tokens * hidden * 4


def _batches(lengths: Sequence[int], budget: int, items: Sequence[int] | None = None) -> list[list[int]]:
    """Item indices grouped longest first so that n_items * longest <= budget (one item at least)."""
    order = sorted(range(len(lengths)) if items is None else items, key=lambda i: -lengths[i])
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and (len(cur) + 1) * lengths[cur[0]] > budget:
            out.append(cur)
            cur = []
        cur.append(i)
    return out + ([cur] if cur else [])


def plan(
    prompts: Sequence[Sequence[int]], conts: Sequence[Sequence[int]], budget: int, other=None
) -> list[tuple[list[int], bool]]:
    """Forward batches as (item indices, shared). CoTs of one prompt share a batch whose prompt is
    run once ("shared"); lone prompts go into padded batches. `other`: a second model's prompts
    (exact KL), grouped jointly so both models can share."""
    other = other or prompts
    by_prompt: dict[tuple, list[int]] = {}
    for i, (p, q) in enumerate(zip(prompts, other)):
        by_prompt.setdefault((tuple(p), tuple(q)), []).append(i)
    cont_len = [len(c) for c in conts]
    batches = [(b, True) for g in by_prompt.values() if len(g) > 1 for b in _batches(cont_len, budget, g)]
    singles = [g[0] for g in by_prompt.values() if len(g) == 1]
    full_len = [max(len(p), len(q)) + len(c) for p, q, c in zip(prompts, other, conts)]
    return batches + [(b, False) for b in _batches(full_len, budget, singles)]


def _padded(prompts, conts, shared: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input ids (the CoTs alone when shared, else prompt + CoT) and the attention mask
    (which also covers the shared prompt's cached positions)."""
    n_prompt = len(prompts[0]) if shared else 0
    seqs = [list(c) if shared else list(p) + list(c) for p, c in zip(prompts, conts)]
    ids = torch.zeros((len(seqs), max(map(len, seqs))), dtype=torch.long)
    mask = torch.zeros((len(seqs), n_prompt + ids.shape[1]), dtype=torch.long)
    for i, seq in enumerate(seqs):
        ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[i, : n_prompt + len(seq)] = 1
    return ids, mask


def hidden(engine, prompts, conts, shared: bool = False) -> torch.Tensor:
    """Final hidden states predicting every continuation token, concatenated over items: [sum len, H].
    Padded batch: one right-padded forward (padding is masked and sits after every real token).
    Shared (all prompts equal): the prompt runs once; its KV cache is repeated for every CoT."""
    decoder, dev = engine.model.get_decoder(), engine.device
    if max(map(len, conts)) == 0:
        return torch.zeros((0, engine.model.config.hidden_size), device=dev)
    ids, mask = _padded(prompts, conts, shared)
    if not shared:
        h = decoder(input_ids=ids.to(dev), attention_mask=mask.to(dev)).last_hidden_state
        return torch.cat([h[i, len(p) - 1 : len(p) + len(c) - 1] for i, (p, c) in enumerate(zip(prompts, conts))])
    pre = decoder(input_ids=torch.tensor([list(prompts[0])], device=dev), use_cache=True)
    cache, first = pre.past_key_values, pre.last_hidden_state[0, -1:]  # `first` predicts every CoT's token 0
    cache.batch_repeat_interleave(len(conts))
    h = decoder(
        input_ids=ids.to(dev), attention_mask=mask.to(dev), past_key_values=cache, use_cache=True
    ).last_hidden_state
    return torch.cat([torch.cat([first, h[i, : len(c) - 1]]) for i, c in enumerate(conts) if len(c)])


def _split(flat: torch.Tensor, lengths: list[int]) -> list[np.ndarray]:
    return [x.double().cpu().numpy() for x in torch.split(flat, lengths)]


def _check(prompts, conts) -> None:
    if len(prompts) != len(conts):
        raise ValueError("prompts and continuations must have the same length")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("an empty prompt cannot be teacher-forced (the first token has no context)")


@torch.inference_mode()
def score(
    engine,
    prompts: Sequence[Sequence[int]],
    conts: Sequence[Sequence[int]],
    *,
    batch_tokens: int = BATCH_TOKENS,
    chunk: int = CHUNK,
    progress: Progress | None = None,
) -> list[np.ndarray]:
    """Raw log p(cont[i] | prompt + cont[:i]) per item (float64 arrays), in batched forwards."""
    _check(prompts, conts)
    out: list[np.ndarray | None] = [None] * len(prompts)
    for batch, shared in plan(prompts, conts, batch_tokens):
        ps, cs = [prompts[i] for i in batch], [conts[i] for i in batch]
        target = torch.tensor([t for c in cs for t in c], dtype=torch.long, device=engine.device)
        parts, a = [], 0
        for logits in engine.logits_chunks(hidden(engine, ps, cs, shared), chunk):
            t = target[a : a + len(logits)]
            parts.append(logits.gather(1, t[:, None])[:, 0] - logits.logsumexp(-1))
            a += len(logits)
            del logits  # free this block before the generator makes the next one
        for i, r in zip(batch, _split(torch.cat(parts) if parts else torch.zeros(0), [len(c) for c in cs])):
            out[i] = r
        if progress:
            progress(len(batch))
    return out  # type: ignore[return-value]


def _kl_block(ls: torch.Tensor, lj: torch.Tensor, t: torch.Tensor):
    """Raw logits blocks [c, V] (overwritten) + targets [c] -> (KL(s||j), KL(j||s), log p_s(t), log p_j(t)).
    At most 3 [c, V] buffers are alive: ls, lj and one work buffer (also logsumexp's temporary)."""
    ls.sub_(ls.logsumexp(-1, keepdim=True))
    lj.sub_(lj.logsumexp(-1, keepdim=True))
    lps, lpj = ls.gather(1, t[:, None])[:, 0], lj.gather(1, t[:, None])[:, 0]
    d = lj.neg_().add_(ls)  # d = log p_s - log p_j, in lj's buffer
    work = ls.exp()  # p_s
    kl = work.mul_(d).sum(-1)
    torch.sub(ls, d, out=work).exp_()  # p_j = exp(log p_s - d)
    rev = work.mul_(d).sum(-1).neg_()
    # KL >= 0; fp32 rounding can give -1e-8 when the distributions coincide.
    return kl.clamp_min_(0), rev.clamp_min_(0), lps, lpj


@torch.inference_mode()
def exact_kl(
    senior,
    junior,
    senior_prompts: Sequence[Sequence[int]],
    junior_prompts: Sequence[Sequence[int]],
    conts: Sequence[Sequence[int]],
    *,
    batch_tokens: int = BATCH_TOKENS,
    chunk: int = CHUNK,
    progress: Progress | None = None,
) -> list[dict[str, np.ndarray]]:
    """Per item, per position (KL_COLUMNS): KL(senior || junior), KL(junior || senior) over the full
    vocabulary, and both models' log-probs of the CoT token; each model reads its own prompt."""
    if not getattr(junior, "full_distributions", False):
        raise ValueError(f"exact KL needs both models' full distributions; the {junior.name} engine has none")
    _check(junior_prompts, conts)
    _check(senior_prompts, conts)
    out: list[dict | None] = [None] * len(conts)
    for batch, shared in plan(junior_prompts, conts, batch_tokens, senior_prompts):
        cs = [conts[i] for i in batch]
        target = torch.tensor([t for c in cs for t in c], dtype=torch.long, device=senior.device)
        hs = hidden(senior, [senior_prompts[i] for i in batch], cs, shared)
        hj = hidden(junior, [junior_prompts[i] for i in batch], cs, shared)
        cols: list[list[torch.Tensor]] = [[], [], [], []]
        a = 0
        for ls, lj in zip(senior.logits_chunks(hs, chunk), junior.logits_chunks(hj, chunk)):
            for col, x in zip(cols, _kl_block(ls, lj.to(ls.device), target[a : a + len(ls)])):
                col.append(x)
            a += len(ls)
            del ls, lj  # else both blocks stay alive while zip() builds the next two (4 blocks, not 3)
        split = [_split(torch.cat(c) if c else torch.zeros(0), [len(c) for c in cs]) for c in cols]
        for k, i in enumerate(batch):
            out[i] = dict(zip(KL_COLUMNS, (s[k] for s in split)))
        if progress:
            progress(len(batch))
    return out  # type: ignore[return-value]
