"""HF transformers engine: the reference backend (CPU default), with continuous batching.

Each engine owns one model and a KV row store with one row per trace it has seen. A step runs one
forward pass over up to `max_batch` traces, packed into a single sequence: traces that need one
token (decode) or a few (a short catch-up) side by side with prefills of any length (a prompt, or
the paragraph the other model wrote since this model last saw the trace: the "catch-up"), the
longest split over steps (chunked prefill). Traces join and leave between steps, so neither model
waits for the other's stragglers, and a catch-up never costs a forward of its own.

The rows of the short feeds are kept in contiguous slots of the store (`_compact` swaps the rows of
traces that just came back into the front slots, about one row copy per handoff), so attention
reads their keys as a view; each long feed attends to its own row, also a view. No step gathers
the cache of non-contiguous rows.

Rows have different lengths, so generation bypasses transformers' cache and mask logic, through
public APIs only: the model's attention runs a function registered with transformers'
`AttentionInterface` ("tandem_rows_<original>"). During an engine forward the decoder is called
with `use_cache=False`, explicit per-row `position_ids` (RoPE) and a `_Rows` context passed as the
`tandem_rows` keyword, which transformers hands to every attention layer. With it, attention
writes the forward's new keys/values into the row store at each row's own positions (keyed by
`module.layer_idx`, shapes taken from the keys, so layers may differ), reads each row's past and
attends with a causal mask built from those positions, a sliding window when the layer passes
`sliding_window`, logit soft-capping when it passes `softcap`, and grouped-query heads. Without
the context (teacher forcing, the trainer's own training forward on the same model object) it is
the model's original attention. Embedding scaling, fused qkv, q/k norms and RoPE happen before
attention, so they need nothing here. This serves Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3 and
OLMo 2 (tests/test_families.py); `check_supported(config)` refuses, in one line, what cannot work
(encoder-decoders, recurrent/hybrid layers, models without the attention interface), and each new
engine checks once that its row path reproduces the model's own forward.

    engine = HFEngine("path/to/ckpt", Sampling(temperature=0))
    [completion] = generate(engine, [Request("t0", prompt_ids, max_tokens=64)])
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..config import Sampling
from ..models import SUPPORTED_FAMILIES as _FAMILIES
from ..models import ModelError, check_supported
from . import hf_scoring
from .base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, Completion, Request
from .sampling import sample_at_positions

MERGE_TOKENS = 4  # feeds this short share one batched, padded attention call (decode, word handoffs)
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
ATTENTION = "tandem_rows"  # registered attention names: ATTENTION + "_" + the model's original


class _RowStore:
    """Per-layer K/V [rows, kv_heads, capacity, head_dim], made on a layer's first write (so layers
    may differ in heads and head size), grown by doubling."""

    def __init__(self, rows: int = 8, length: int = 256):
        self.rows, self.length = rows, length
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}

    def ensure(self, rows: int, length: int) -> None:
        new_rows, new_len = self.rows, self.length
        while new_rows < rows:
            new_rows *= 2
        while new_len < length:
            new_len *= 2
        if (new_rows, new_len) == (self.rows, self.length):
            return
        for cache in (self.k, self.v):
            for i, old in cache.items():
                grown = old.new_zeros((new_rows, old.shape[1], new_len, old.shape[3]))
                grown[: old.shape[0], :, : old.shape[2]] = old
                cache[i] = grown
        self.rows, self.length = new_rows, new_len

    def swap(self, a: int, b: int, length: int) -> None:
        """Exchange the first `length` positions of rows a and b in every layer."""
        if length <= 0:
            return
        src, dst = torch.tensor([b, a]), torch.tensor([a, b])
        for cache in (self.k, self.v):
            for t in cache.values():
                t[dst, :, :length] = t[src, :, :length]  # the right side is a copy: a safe swap

    def layer(self, idx: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if idx not in self.k:
            shape = (self.rows, like.shape[1], self.length, like.shape[3])
            self.k[idx] = like.new_zeros(shape)
            self.v[idx] = like.new_zeros(shape)
        return self.k[idx], self.v[idx]


class _Rows:
    """One packed engine forward, shared by every attention layer. The model sees one sequence
    [1, T] of real tokens only: first the short feeds (`short_lens[r]` tokens each, at most
    MERGE_TOKENS), their rows at slots `short_slots` (contiguous after `_compact`, so their keys are a
    view of the store), attended together with their queries padded to `q_short` inside attention
    only; then each long feed, `long` = [(slot, start, n)], attending to its own row (a view too).
    Row r's query j sits at absolute position start_r + j; keys 0..start_r + j of its row are visible."""

    def __init__(self, store: _RowStore, short_slots: list[int], short_starts: list[int], short_lens, long, device):
        self.store, self.n_short, self.long = store, len(short_slots), long
        self.q_short = max(short_lens, default=0)
        self.n_short_tokens = sum(short_lens)
        j = torch.arange(self.q_short, device=device)
        self.short_pos = torch.tensor(short_starts, device=device, dtype=torch.long)[:, None] + j[None, :]
        self.short_len = int(self.short_pos.max()) + 1 if short_slots else 0
        a = short_slots[0] if short_slots else 0
        self.short_view = short_slots == list(range(a, a + len(short_slots)))  # else gather (rows not compacted)
        self.short_slots = torch.tensor(short_slots, device=device, dtype=torch.long)
        real = torch.tensor(
            [n > i for n in short_lens for i in range(self.q_short)], device=device, dtype=torch.bool
        ).view(-1)
        # where each packed short token sits in the padded [R * q_short] grid (None: no padding)
        self.grid = None if bool(real.all()) else real.nonzero().view(-1)
        pos = [self.short_pos.flatten()[real]] + [torch.arange(st, st + n, device=device) for _, st, n in long]
        slot = [self.short_slots.repeat_interleave(self.q_short)[real]] + [
            torch.full((n,), sl, device=device, dtype=torch.long) for sl, _, n in long
        ]
        self.pos, self.slot = torch.cat(pos), torch.cat(slot)  # [T]: each query's position and row
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
                a = int(self.short_slots[0])
                ks, vs = k_full[a : a + R, :, :L], v_full[a : a + R, :, :L]
            else:
                ks, vs = k_full[self.short_slots, :, :L], v_full[self.short_slots, :, :L]
            out = _attend(qs, ks, vs, self._mask(None, window), scaling, softcap).flatten(0, 1)
            outs.append(out if self.grid is None else out[self.grid])
        offset = self.n_short_tokens
        for i, (slot, start, n) in enumerate(self.long):
            ql = query[:, :, offset : offset + n]
            kl, vl = k_full[slot : slot + 1, :, : start + n], v_full[slot : slot + 1, :, : start + n]
            outs.append(_attend(ql, kl, vl, self._mask(i, window), scaling, softcap)[0])
            offset += n
        return torch.cat(outs)[None]

    def _mask(self, part: int | None, window: int | None) -> torch.Tensor:
        """Bool [R, 1, q, length] for the short block (part None) or long feed `part`: a query sees
        keys at positions <= its own, and with a sliding window only the last `window` of them
        (transformers' rule: kv > q - window). Padding queries (short block) sit after their row's
        real queries; they write no keys and their outputs are dropped."""
        if (part, window) not in self._masks:
            if part is None:
                pos = self.short_pos
            else:
                _, start, n = self.long[part]
                pos = torch.arange(start, start + n, device=self.pos.device)[None]
            keys = torch.arange(int(pos.max()) + 1, device=pos.device)[None, None, :]
            allowed = keys <= pos[:, :, None]
            if window is not None:
                allowed &= keys > pos[:, :, None] - window
            self._masks[(part, window)] = allowed[:, None]
        return self._masks[(part, window)]


def _attend(query, key, value, mask, scaling, softcap, dropout: float = 0.0, training: bool = False):
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
    `_attend`, which applies the cap that transformers' sdpa path would drop)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def attention(
        module,
        query,
        key,
        value,
        attention_mask,
        dropout=0.0,
        scaling=None,
        sliding_window=None,
        softcap=None,
        tandem_rows: _Rows | None = None,
        **kwargs,
    ):
        if tandem_rows is not None:
            return tandem_rows.attend(module.layer_idx, query, key, value, sliding_window, scaling, softcap), None
        if original == "eager" or (original == "sdpa" and softcap is not None):
            return _attend(query, key, value, attention_mask, scaling, softcap, dropout, module.training), None
        return ALL_ATTENTION_FUNCTIONS[original](
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            sliding_window=sliding_window,
            softcap=softcap,
            **kwargs,
        )

    return attention


def _switch_attention(model) -> str | None:
    """Make `model` attend through the row attention; return its original implementation's name
    (None if it was already switched). Masks outside engine forwards stay the original's."""
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
    if model.config._attn_implementation != name:
        raise ModelError(
            f"{type(model).__name__} does not let transformers switch its attention implementation, which the "
            f"HF engine needs; use a model such as {_FAMILIES}"
        )
    return original


@dataclass
class _Row:
    slot: int
    tokens: list[int] = field(default_factory=list)  # tokens whose K/V are in the store


@dataclass
class _Live:
    req: Request
    row: _Row
    pending: list[int]  # tokens to feed next (a long one over several forwards)
    new_tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


class HFEngine:
    name = "hf"
    may_overrun = False  # stops exactly at every stop token; the loop never needs to truncate
    full_distributions = True  # serves exact_kl (both models' full next-token distributions)

    def __init__(
        self,
        path_or_model,
        sampling: Sampling,
        dtype: str = "float32",
        max_batch: int = 32,
        device: str | None = None,
        tokenizer=None,
        prefill_tokens: int = 8192,
    ):
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        if isinstance(path_or_model, (str, Path)):
            check_supported(AutoConfig.from_pretrained(str(path_or_model)))  # before the weights load
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(path_or_model))
            self.model = AutoModelForCausalLM.from_pretrained(
                str(path_or_model), dtype=_DTYPES[dtype], attn_implementation="sdpa"
            )
            if device:
                self.model.to(device)
        else:  # an in-memory model (the trainer's live senior); weights may change between calls
            check_supported(path_or_model.config)
            self.model, self.tokenizer = path_or_model, tokenizer
        self.model.eval()
        self.sampling, self.max_batch, self.prefill_tokens = sampling, max_batch, prefill_tokens
        self.device = next(self.model.parameters()).device
        eos = self.model.generation_config.eos_token_id if self.model.generation_config else None
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = frozenset(
            eos + ([self.tokenizer.eos_token_id] if self.tokenizer.eos_token_id is not None else [])
        )
        self.vocab_size = len(self.tokenizer)  # logits past the tokenizer's vocabulary are padding
        self._original_attention = _switch_attention(self.model)
        self._store = _RowStore(rows=max(8, max_batch))
        self._decoder = self.model.get_decoder()
        self._head = self.model.get_output_embeddings()
        # A 4-D mask is taken as prepared by every family's mask code, so no mask is built; row
        # attention ignores it (it masks from positions).
        self._no_mask = torch.ones((1, 1, 1, 1), dtype=torch.bool, device=self.device)
        self._rows: dict[Hashable, _Row] = {}
        self._owner: dict[int, _Row] = {}  # slot -> the row held there (absent: free)
        self._live: dict[Hashable, _Live] = {}
        # cheap counters for benchmarks: forwards, rows fed (sum over forwards), tokens fed, tokens
        # generated, catch-up tokens (fed on a trace's return beyond the one token a decode step
        # feeds), row swaps, and forwards that had to gather non-contiguous rows (0 unless rows the
        # engine does not own are fed)
        self.stats = dict.fromkeys(("forwards", "rows", "tokens_fed", "generated", "catchup", "swaps", "gathers"), 0)
        self._check_rows_reproduce_forward()
        self.stats.update(dict.fromkeys(self.stats, 0))  # the check is not work

    # ---- protocol -------------------------------------------------------------------------
    def submit(self, request: Request) -> None:
        if request.key in self._live:
            raise ValueError(f"trace {request.key!r} already has a live request")
        if request.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        row = self._rows.get(request.key) or self._new_row(request.key)
        ctx = request.token_ids
        keep = len(row.tokens)
        if ctx[:keep] != row.tokens:  # not an extension of what we cached: recompute
            keep = 0
        keep = min(keep, len(ctx) - 1)  # the last token is always fed to get fresh logits
        if keep:
            self.stats["catchup"] += len(ctx) - keep - 1
        del row.tokens[keep:]
        self._live[request.key] = _Live(request, row, list(ctx[keep:]))

    def has_work(self) -> bool:
        return bool(self._live)

    def release(self, key: Hashable) -> None:
        self._live.pop(key, None)
        row = self._rows.pop(key, None)
        if row is not None:
            del self._owner[row.slot]

    def close(self) -> None:
        self._live.clear()
        self._rows.clear()
        self._owner.clear()
        self._store = _RowStore(rows=max(8, self.max_batch))
        if self._original_attention is not None:  # hand the (trainer's) model back as it came
            self.model.set_attn_implementation(self._original_attention)
            self._original_attention = None

    @torch.inference_mode()
    def step(self) -> list[Completion]:
        """One packed forward over up to max_batch traces (oldest requests first): decode rows,
        short catch-ups and prefills together, so a catch-up costs no forward of its own.

        Prefill tokens per forward are capped by `prefill_tokens`: a feed that does not fit is fed in
        chunks over the next steps and samples once its last chunk is in.
        """
        group = list(self._live.values())[: self.max_batch]
        short = [lv for lv in group if len(lv.pending) <= MERGE_TOKENS]
        budget = self.prefill_tokens - len(short) * max((len(lv.pending) for lv in short), default=0)
        feeds = {id(lv): lv.pending for lv in short}
        for lv in group:
            if len(lv.pending) > MERGE_TOKENS and (budget > 0 or not feeds):
                feeds[id(lv)] = lv.pending[: max(budget, 1)]
                budget -= len(feeds[id(lv)])
        fed = [lv for lv in group if id(lv) in feeds]
        logits = self._forward([lv.row for lv in fed], [feeds[id(lv)] for lv in fed])
        whole = []
        for i, lv in enumerate(fed):
            n = len(feeds[id(lv)])
            if n < len(lv.pending):  # a chunk of a long prefill: more next step, nothing to sample yet
                lv.pending = lv.pending[n:]
            else:
                whole.append(i)
        return self._sample([fed[i] for i in whole], logits[whole]) if whole else []

    # ---- internals ------------------------------------------------------------------------
    def _new_row(self, key: Hashable) -> _Row:
        """A row for trace `key` in the lowest free slot."""
        slot = next(s for s in itertools.count() if s not in self._owner)
        row = self._rows[key] = self._owner[slot] = _Row(slot)
        return row

    def _compact(self, rows: list[_Row]) -> None:
        """Move `rows` into slots 0..len(rows)-1, swapping with whatever holds those slots, so one
        view of the store holds their keys. Only rows that changed hands since the last forward move
        (about one swap per handoff), instead of a gather of every row's cache in every layer of
        every forward. Rows the engine does not own (its self-check) are left where they are."""
        n = len(rows)
        if any(self._owner.get(r.slot) is not r for r in rows):
            return
        inside = {r.slot for r in rows if r.slot < n}
        holes = (s for s in range(n) if s not in inside)
        for r in rows:
            if r.slot < n:
                continue
            hole, old = next(holes), r.slot
            other = self._owner.pop(hole, None)
            self._store.swap(hole, old, max(len(r.tokens), len(other.tokens) if other else 0))
            del self._owner[old]
            if other is not None:
                other.slot, self._owner[old] = old, other
            r.slot, self._owner[hole] = hole, r
            self.stats["swaps"] += 1

    def _forward(self, rows: list[_Row], feeds: list[list[int]]) -> torch.Tensor:
        """Feed `feeds[i]` after `rows[i]`'s cached tokens in one packed forward; return each feed's
        last-position logits [R, V], in `rows` order."""
        short = [i for i, f in enumerate(feeds) if len(f) <= MERGE_TOKENS]
        long = [i for i, f in enumerate(feeds) if len(f) > MERGE_TOKENS]
        q_short = max((len(feeds[i]) for i in short), default=0)
        length = max(len(r.tokens) + (q_short if i in short else len(f)) for i, (r, f) in enumerate(zip(rows, feeds)))
        self._store.ensure(max(len(self._owner), max(r.slot for r in rows) + 1), length)
        self._compact([rows[i] for i in short])
        short.sort(key=lambda i: rows[i].slot)  # query block r reads store row first + r
        if not self.model.config._attn_implementation.startswith(ATTENTION):  # another engine closed
            self._original_attention = _switch_attention(self.model)
        ctx = _Rows(
            self._store,
            [rows[i].slot for i in short],
            [len(rows[i].tokens) for i in short],
            [len(feeds[i]) for i in short],
            [(rows[i].slot, len(rows[i].tokens), len(feeds[i])) for i in long],
            self.device,
        )
        ids, last = [], [0] * len(rows)
        for i in short + long:  # real tokens only: short feeds are padded inside attention, not here
            last[i] = len(ids) + len(feeds[i]) - 1
            ids += feeds[i]
        hidden = self._decoder(
            input_ids=torch.tensor([ids], device=self.device),
            attention_mask=self._no_mask,
            position_ids=ctx.pos[None],
            use_cache=False,
            tandem_rows=ctx,
        ).last_hidden_state[0]
        for r, f in zip(rows, feeds):
            r.tokens.extend(f)
        st = self.stats
        st["forwards"] += 1
        st["rows"] += len(rows)
        st["tokens_fed"] += sum(map(len, feeds))
        st["gathers"] += ctx.n_short > 1 and not ctx.short_view  # rows not compacted: a per-layer copy
        return self._logits(hidden[torch.tensor(last, device=self.device)])[:, : self.vocab_size]

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits from final hidden states, with the output processing some families apply
        after the head (Gemma's final soft-capping, Cohere's scale, Granite's divisor). That this
        equals the model's own logits is checked when the engine is built."""
        cfg = self.model.config.get_text_config()
        logits = self._head(hidden)
        if getattr(cfg, "final_logit_softcapping", None):
            cap = cfg.final_logit_softcapping
            logits = torch.tanh(logits / cap) * cap
        if getattr(cfg, "logit_scale", None):
            logits = logits * cfg.logit_scale
        if getattr(cfg, "logits_scaling", None):
            logits = logits / cfg.logits_scaling
        return logits.float()

    @torch.inference_mode()
    def _check_rows_reproduce_forward(self) -> None:
        """Once per engine: a prefill then a catch-up through the row store must give the model's
        own log-probs (its plain forward). Catches architectures whose attention needs something
        the row path lacks (sinks, shared KV, ...) before they produce silently wrong traces."""
        n = 12
        ids = [(7 * i + 3) % self.vocab_size for i in range(n)]
        plain = torch.log_softmax(self.model(torch.tensor([ids], device=self.device)).logits[0].float(), -1)
        plain = plain[:, : self.vocab_size]
        row = _Row(0)
        got = [self._forward([row], [ids[:7]]), self._forward([row], [ids[7:]])]
        got = torch.log_softmax(torch.cat(got), -1)
        ref = torch.log_softmax(plain[[6, n - 1]], -1)
        top = ref.topk(min(20, ref.shape[-1]), dim=-1).indices
        diff = float((got.gather(1, top) - ref.gather(1, top)).abs().max())
        tol = 1e-3 if next(self.model.parameters()).dtype == torch.float32 else 0.25
        if not diff <= tol:
            arch = ", ".join(self.model.config.architectures or [type(self.model).__name__])
            raise ModelError(
                f"{arch}: the HF engine's row attention does not reproduce the model's own forward (log-prob "
                f"difference {diff:.3g}); this architecture needs attention features the engine lacks, use "
                f"--engine vllm or a model such as {_FAMILIES}"
            )

    def _sample(self, group: list[_Live], logits: torch.Tensor) -> list[Completion]:
        raw = torch.log_softmax(logits, dim=-1)
        s = self.sampling
        positions = [len(lv.req.token_ids) + len(lv.new_tokens) for lv in group]
        seeds = [lv.req.seed for lv in group]
        chosen = sample_at_positions(logits, s.temperature, s.top_k, s.top_p, seeds, positions).tolist()
        done = []
        self.stats["generated"] += len(group)
        for lv, tok, lp in zip(group, chosen, raw[torch.arange(len(group)), chosen].tolist()):
            lv.new_tokens.append(tok)
            lv.logprobs.append(lp)
            lv.pending = [tok]
            reason = (
                FINISH_EOS
                if tok in self.eos_ids
                else FINISH_STOP
                if tok in lv.req.stop_ids
                else FINISH_LENGTH
                if len(lv.new_tokens) >= lv.req.max_tokens
                else None
            )
            if reason:
                del self._live[lv.req.key]
                done.append(Completion(lv.req.key, lv.new_tokens, lv.logprobs, reason))
        return done

    # ---- teacher forcing ------------------------------------------------------------------
    @torch.inference_mode()
    def hidden_states(self, prompt: Sequence[int], continuation: Sequence[int]) -> torch.Tensor:
        """Final hidden states predicting each continuation token: [len(continuation), H]."""
        ids = torch.tensor([list(prompt) + list(continuation)], device=self.device)
        out = self._decoder(input_ids=ids).last_hidden_state[0]
        return out[len(prompt) - 1 : len(prompt) + len(continuation) - 1]

    def logits_chunks(self, hidden: torch.Tensor, chunk: int = 512):
        """Yield fp32 logits [<=chunk, V] for consecutive row blocks of `hidden` (bounded memory)."""
        for a in range(0, hidden.shape[0], chunk):
            yield self._logits(hidden[a : a + chunk])[:, : self.vocab_size]

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]], **kw) -> list[np.ndarray]:
        """Teacher-forced raw log p(continuation token | prefix), one float64 array per item, in batched
        forwards (hf_scoring.score; kw: batch_tokens, chunk, progress)."""
        return hf_scoring.score(self, prompts, continuations, **kw)

    def exact_kl(self, junior, prompts, junior_prompts, continuations, **kw) -> list[dict]:
        """KL(self || junior) and back along teacher-forced continuations (hf_scoring.exact_kl)."""
        return hf_scoring.exact_kl(self, junior, prompts, junior_prompts, continuations, **kw)
