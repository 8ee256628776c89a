"""The HF engine's KV row store and the packed row attention its forwards run (used by hf.py).

`RowStore` keeps one KV row per trace an engine has seen: per-layer K/V tensors
[rows, kv_heads, capacity, head_dim], which slot holds which trace, and how many of its tokens are
cached. `PackedForward` is one engine forward: the model sees a single sequence [1, T] of real
tokens (short feeds, then long ones), and every attention layer writes the new keys/values into
each row at its own positions and attends to that row's past.

Rows have different lengths, so generation bypasses transformers' cache and mask logic, through
public APIs only: the model's attention runs a function registered with transformers'
`AttentionInterface` ("tandem_rows_<original>", `switch_attention`). During an engine forward the
decoder is called with `use_cache=False`, explicit per-row `position_ids` (RoPE) and a
`PackedForward` passed as the `tandem_rows` keyword, which transformers hands to every attention
layer. With it, attention writes the forward's new keys/values into the store (keyed by
`module.layer_idx`, shapes taken from the keys, so layers may differ), reads each row's past and
attends with a causal mask built from positions, a sliding window when the layer passes
`sliding_window`, logit soft-capping when it passes `softcap`, and grouped-query heads. Without
the context (teacher forcing, the trainer's own training forward on the same model object) it is
the model's original attention.

No forward gathers the cache of non-contiguous rows: the rows of the short feeds are kept in
contiguous slots (`RowStore.compact` swaps the rows of traces that just came back into the front
slots, about one row copy per handoff), so attention reads their keys as a view; each long feed
attends to its own row, also a view. Tested through the engine (tests/test_engine_hf.py).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

MERGE_TOKENS = 4  # feeds this short share one batched, padded attention call (decode, word handoffs)
SHARE_MIN = 16  # a new trace copies another row's cached prefix (its prompt) when they share this many tokens
ATTENTION = "tandem_rows"  # registered attention names: ATTENTION + "_" + the model's original


@dataclass
class Row:
    slot: int
    tokens: list[int] = field(default_factory=list)  # tokens whose K/V are in the store
    born: int = 0  # the order in which the store first saw the trace (the engine serves older ones first)


class RowStore:
    """Per-layer K/V [rows, kv_heads, capacity, head_dim], made on a layer's first write (so layers
    may differ in heads and head size), grown by doubling; and the rows: trace key -> `Row`, slot
    -> the row held there (absent: free)."""

    def __init__(self, rows: int = 8, length: int = 256):
        self.capacity, self.length = rows, length
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}
        self.rows: dict[Hashable, Row] = {}
        self.owner: dict[int, Row] = {}
        self._born = itertools.count()

    def row(self, key: Hashable) -> Row:
        """Trace `key`'s row; a new one in the lowest free slot if it has none."""
        if key not in self.rows:
            slot = next(s for s in itertools.count() if s not in self.owner)
            self.rows[key] = self.owner[slot] = Row(slot, born=next(self._born))
        return self.rows[key]

    def drop(self, key: Hashable) -> None:
        row = self.rows.pop(key, None)
        if row is not None:
            del self.owner[row.slot]

    def adopt(self, row: Row, ctx: list[int]) -> int:
        """Copy into the empty `row` the K/V of the longest cached prefix of `ctx` another row holds
        (at least SHARE_MIN tokens: the samples of one problem share its prompt); return its length.
        Keys and values at a position depend only on the tokens up to it, so this equals recomputing."""
        donor, n = None, SHARE_MIN - 1
        for other in self.rows.values():
            if other is row or len(other.tokens) <= n or other.tokens[:SHARE_MIN] != ctx[:SHARE_MIN]:
                continue
            m = next((i for i, (a, b) in enumerate(zip(other.tokens, ctx)) if a != b), min(len(other.tokens), len(ctx)))
            if m > n:
                donor, n = other, m
        if donor is None:
            return 0
        self.ensure(row.slot + 1, n)
        for cache in (self.k, self.v):
            for t in cache.values():
                t[row.slot, :, :n] = t[donor.slot, :, :n]
        row.tokens = list(ctx[:n])
        return n

    def reserve(self, rows: int, length: int) -> None:
        """Size the store for `rows` traces of up to `length` tokens before its first write, so it is
        allocated once at that size instead of grown by doubling (each growth leaves the old tensors to
        the allocator, and doubling overshoots: a 662-token trace got 1024 positions per row)."""
        if self.k:  # already written: grow as usual
            self.ensure(rows, length)
            return
        self.capacity = max(self.capacity, rows)
        self.length = max(self.length, -(-length // 64) * 64)

    def ensure(self, rows: int, length: int) -> None:
        new_rows, new_len = self.capacity, self.length
        while new_rows < rows:
            new_rows *= 2
        while new_len < length:
            new_len *= 2
        if (new_rows, new_len) == (self.capacity, self.length):
            return
        for cache in (self.k, self.v):
            for i, old in cache.items():
                grown = old.new_zeros((new_rows, old.shape[1], new_len, old.shape[3]))
                grown[: old.shape[0], :, : old.shape[2]] = old
                cache[i] = grown
        self.capacity, self.length = new_rows, new_len

    def compact(self, rows: list[Row]) -> int:
        """Move `rows` into slots 0..len(rows)-1, swapping with whatever holds those slots, so one
        view of the store holds their keys; return the number of swaps. Only rows that changed hands
        since the last forward move (about one swap per handoff), instead of a gather of every row's
        cache in every layer of every forward. Rows the store does not own (the engine's self-check)
        are left where they are."""
        n, swaps = len(rows), 0
        if any(self.owner.get(r.slot) is not r for r in rows):
            return 0
        inside = {r.slot for r in rows if r.slot < n}
        holes = (s for s in range(n) if s not in inside)
        for r in rows:
            if r.slot < n:
                continue
            hole, old = next(holes), r.slot
            other = self.owner.pop(hole, None)
            self._swap(hole, old, max(len(r.tokens), len(other.tokens) if other else 0))
            del self.owner[old]
            if other is not None:
                other.slot, self.owner[old] = old, other
            r.slot, self.owner[hole] = hole, r
            swaps += 1
        return swaps

    def _swap(self, a: int, b: int, length: int) -> None:
        """Exchange the first `length` positions of rows a and b in every layer."""
        if length <= 0:
            return
        device = next(iter(self.k.values())).device if self.k else "cpu"  # index tensors on the cache's device
        src, dst = torch.tensor([b, a], device=device), torch.tensor([a, b], device=device)
        for cache in (self.k, self.v):
            for t in cache.values():
                t[dst, :, :length] = t[src, :, :length]  # the right side is a copy: a safe swap

    def layer(self, idx: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if idx not in self.k:
            shape = (self.capacity, like.shape[1], self.length, like.shape[3])
            self.k[idx] = like.new_zeros(shape)
            self.v[idx] = like.new_zeros(shape)
        return self.k[idx], self.v[idx]


class PackedForward:
    """One packed engine forward, shared by every attention layer. The model sees one sequence
    [1, T] of real tokens only: first the short feeds (`short_lens[r]` tokens each, at most
    MERGE_TOKENS), their rows at slots `short_slots` (contiguous after `RowStore.compact`, so their
    keys are a view of the store), attended together with their queries padded to `q_short` inside
    attention only; then each long feed, `long` = [(slot, start, n)], attending to its own row (a
    view too). Row r's query j sits at absolute position start_r + j; keys 0..start_r + j of its
    row are visible."""

    def __init__(self, store: RowStore, short_slots: list[int], short_starts: list[int], short_lens, long, device):
        # Every index, position and length is computed from Python ints and made on `device` once: no
        # forward reads a device tensor back (on a GPU each read would wait for the queued kernels).
        self.store, self.n_short, self.long, self.device = store, len(short_slots), long, device
        self.q_short = max(short_lens, default=0)
        self.n_short_tokens = sum(short_lens)
        j = torch.arange(self.q_short, device=device)
        self.short_pos = torch.tensor(short_starts, device=device, dtype=torch.long)[:, None] + j[None, :]
        self.short_len = max(short_starts, default=-self.q_short) + self.q_short  # keys the short block reads
        self.short_first = short_slots[0] if short_slots else 0
        self.short_view = short_slots == list(range(self.short_first, self.short_first + len(short_slots)))
        self.short_slots = torch.tensor(short_slots, device=device, dtype=torch.long)  # else gathered
        # where each packed short token sits in the padded [R * q_short] grid (None: no padding)
        grid = [r * self.q_short + i for r, n in enumerate(short_lens) for i in range(n)]
        self.grid = None if len(grid) == len(short_lens) * self.q_short else torch.tensor(grid, device=device)
        pos = [st + i for st, n in zip(short_starts, short_lens) for i in range(n)]
        slot = [sl for sl, n in zip(short_slots, short_lens) for _ in range(n)]
        for sl, st, n in long:
            pos += range(st, st + n)
            slot += [sl] * n
        # [T]: each query's position and row
        self.pos = torch.tensor(pos, device=device, dtype=torch.long)
        self.slot = torch.tensor(slot, device=device, dtype=torch.long)
        self._masks: dict[tuple, torch.Tensor] = {}

    def attend(self, layer: int, query, key, value, window: int | None, scaling, softcap) -> torch.Tensor:
        """Write this forward's keys/values ([1, Hkv, T, D]) into the store, attend; return [1, T, H, D]."""
        k_full, v_full = self.store.layer(layer, key)
        for full, new in ((k_full, key), (v_full, value)):
            full[self.slot, :, self.pos] = new[0].transpose(0, 1).to(full.dtype)  # [T, Hkv, D] at (row, pos)
        outs = []
        if self.n_short:
            R, q, L = self.n_short, self.q_short, self.short_len
            qs = query[0, :, : self.n_short_tokens]  # [H, tokens, D]
            if self.grid is not None:  # pad queries to q per row (padding sits after real queries)
                padded = qs.new_zeros((qs.shape[0], R * q, qs.shape[2]))
                padded[:, self.grid] = qs
                qs = padded
            qs = qs.unflatten(1, (R, q)).transpose(0, 1)  # [R, H, q, D]
            if self.short_view:
                a = self.short_first
                ks, vs = k_full[a : a + R, :, :L], v_full[a : a + R, :, :L]
            else:
                ks, vs = k_full[self.short_slots, :, :L], v_full[self.short_slots, :, :L]
            out = attend(qs, ks, vs, self._mask(None, window), scaling, softcap).flatten(0, 1)
            outs.append(out if self.grid is None else out[self.grid])
        offset = self.n_short_tokens
        for i, (slot, start, n) in enumerate(self.long):
            ql = query[:, :, offset : offset + n]
            kl, vl = k_full[slot : slot + 1, :, : start + n], v_full[slot : slot + 1, :, : start + n]
            outs.append(attend(ql, kl, vl, self._mask(i, window), scaling, softcap)[0])
            offset += n
        return torch.cat(outs)[None]

    def _mask(self, part: int | None, window: int | None) -> torch.Tensor:
        """Bool [R, 1, q, length] for the short block (part None) or long feed `part`: a query sees
        keys at positions <= its own, and with a sliding window only the last `window` of them
        (transformers' rule: kv > q - window). Padding queries (short block) sit after their row's
        real queries; they write no keys and their outputs are dropped."""
        if (part, window) not in self._masks:
            if part is None:
                pos, length = self.short_pos, self.short_len
            else:
                _, start, n = self.long[part]
                pos, length = torch.arange(start, start + n, device=self.device)[None], start + n
            keys = torch.arange(length, device=self.device)[None, None, :]
            allowed = keys <= pos[:, :, None]
            if window is not None:
                allowed &= keys > pos[:, :, None] - window
            self._masks[(part, window)] = allowed[:, None]
        return self._masks[(part, window)]


def attend(query, key, value, mask, scaling, softcap, dropout: float = 0.0, training: bool = False):
    """Attention over [B, H, q, D] queries and [B, Hkv, k, D] keys (GQA), returning [B, q, H, D].
    `mask`: bool (True = attend) or additive float, broadcastable to [B, H, q, k]; None = causal
    aligned to the last key (transformers' convention when it skips an all-causal mask)."""
    groups = query.shape[1] // key.shape[1]
    if mask is None:
        q_len, k_len = query.shape[2], key.shape[2]
        mask = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device).tril(k_len - q_len)
    if softcap is None:
        out = F.scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=mask,
            dropout_p=dropout if training else 0.0,
            scale=scaling,
            enable_gqa=groups > 1,
        )
        return out.transpose(1, 2).contiguous()
    if groups > 1:
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scores = torch.matmul(query, key.transpose(2, 3)) * (scaling if scaling is not None else query.shape[-1] ** -0.5)
    scores = torch.tanh(scores / softcap) * softcap
    if mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    else:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous()


def _row_attention(original: str):
    """The registered attention: the row store when an engine forward passes `tandem_rows`, else
    the model's `original` implementation (eager, and sdpa with soft-capping, are computed by
    `attend`, which applies the cap that transformers' sdpa path would drop)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def attention(module, query, key, value, attention_mask, tandem_rows: PackedForward | None = None, **kwargs):
        # transformers passes dropout, scaling, sliding_window and softcap as keywords (its attention
        # interface); the original implementation gets them back unchanged
        scaling, softcap = kwargs.get("scaling"), kwargs.get("softcap")
        if tandem_rows is not None:
            window = kwargs.get("sliding_window")
            return tandem_rows.attend(module.layer_idx, query, key, value, window, scaling, softcap), None
        if original == "eager" or (original == "sdpa" and softcap is not None):
            dropout = kwargs.get("dropout", 0.0)
            return attend(query, key, value, attention_mask, scaling, softcap, dropout, module.training), None
        return ALL_ATTENTION_FUNCTIONS[original](module, query, key, value, attention_mask, **kwargs)

    return attention


def switch_attention(model) -> str | None:
    """Make `model` attend through the row attention; return its original implementation's name
    (None if it was already switched), or "" if the model would not switch (the caller refuses it).
    Masks outside engine forwards stay the original's."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    original = model.config._attn_implementation or "eager"
    if original.startswith(ATTENTION):
        return None
    name = f"{ATTENTION}_{re.sub(r'[^0-9A-Za-z]', '_', original)}"  # "/" or ":" would mean a hub kernel
    AttentionInterface.register(name, _row_attention(original))
    if original in ALL_MASK_ATTENTION_FUNCTIONS:
        AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[original])
    model.set_attn_implementation(name)
    return original if model.config._attn_implementation == name else ""
