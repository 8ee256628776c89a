"""HF transformers engine: the reference backend (CPU default), with continuous batching.

Each engine owns one model and a KV store with one row per live trace. A step runs at most two
forward passes: one "catch-up" prefill for traces that arrived with several unseen tokens (their
prompt, or the tokens the other model wrote since this model last saw the trace) and one decode
pass for traces that need a single token. Traces join and leave between steps, so neither model
waits for the other's stragglers.

Rows have different lengths, so we bypass transformers' own cache/mask logic: `_RowCache` writes
each new key/value at the row's own positions and hands attention a gathered [R, H, T, D] view,
and we pass an explicit 4-D additive mask (`attention_mask={"full_attention": mask}`) plus
per-row `position_ids` for RoPE. Works for decoder-only models whose attention calls
`past_key_values.update(k, v, layer_idx)` (Llama/Qwen families); sliding-window layers are not
supported by this path.

    engine = HFEngine("path/to/ckpt", Sampling(temperature=0))
    [completion] = generate(engine, [Request("t0", prompt_ids, max_tokens=64)])
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..config import Sampling
from .base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, Completion, Request, position_uniform

MERGE_TOKENS = 4  # catch-ups this short join the decode forward
PREFILL_PATIENCE = 4  # steps a long catch-up may wait for others to batch with
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class _KVStore:
    """Per-layer K/V tensors [rows, kv_heads, capacity, head_dim], grown by doubling."""

    def __init__(self, n_layers, kv_heads, head_dim, dtype, device, rows=8, length=256):
        shape = (rows, kv_heads, length, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]

    @property
    def rows(self) -> int:
        return self.k[0].shape[0]

    @property
    def length(self) -> int:
        return self.k[0].shape[2]

    def ensure(self, rows: int, length: int) -> None:
        new_rows, new_len = self.rows, self.length
        while new_rows < rows:
            new_rows *= 2
        while new_len < length:
            new_len *= 2
        if (new_rows, new_len) == (self.rows, self.length):
            return
        for cache in (self.k, self.v):
            for i, old in enumerate(cache):
                grown = old.new_zeros((new_rows, old.shape[1], new_len, old.shape[3]))
                grown[: old.shape[0], :, : old.shape[2]] = old
                cache[i] = grown


class _RowCache:
    """Duck-typed transformers Cache for one forward over rows `slots` writing at `write_pos`."""

    def __init__(self, store: _KVStore, slots: torch.Tensor, write_pos: torch.Tensor, length: int):
        self.store, self.slots, self.write_pos, self.length = store, slots, write_pos, length
        first = int(slots[0])
        # Contiguous rows (the common solo case) are a view, not a gather copy.
        self.contiguous = bool(torch.equal(slots, torch.arange(first, first + len(slots))))

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        out = []
        for cache, new in ((self.store.k, key_states), (self.store.v, value_states)):
            full = cache[layer_idx]
            # [R, H, q, D] -> rows x positions advanced indexing wants [R, q, H, D]
            full[self.slots[:, None], :, self.write_pos] = new.transpose(1, 2).to(full.dtype)
            if self.contiguous:
                a = int(self.slots[0])
                out.append(full[a : a + len(self.slots), :, : self.length])
            else:
                out.append(full[self.slots, :, : self.length])
        return out[0], out[1]


@dataclass
class _Row:
    slot: int
    tokens: list[int] = field(default_factory=list)  # tokens whose K/V are in the store


@dataclass
class _Live:
    req: Request
    row: _Row
    pending: list[int]  # tokens to feed in the next forward
    new_tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    waited: int = 0  # steps spent waiting for a catch-up prefill


class HFEngine:
    name = "hf"

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
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(path_or_model, (str, Path)):
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(path_or_model))
            self.model = AutoModelForCausalLM.from_pretrained(
                str(path_or_model), dtype=_DTYPES[dtype], attn_implementation="sdpa"
            )
            if device:
                self.model.to(device)
        else:  # an in-memory model (the trainer's live senior); weights may change between calls
            self.model, self.tokenizer = path_or_model, tokenizer
        self.model.eval()
        self.sampling, self.max_batch, self.prefill_tokens = sampling, max_batch, prefill_tokens
        self.device = next(self.model.parameters()).device
        cfg = self.model.config
        eos = self.model.generation_config.eos_token_id if self.model.generation_config else None
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = frozenset(
            eos + ([self.tokenizer.eos_token_id] if self.tokenizer.eos_token_id is not None else [])
        )
        self.vocab_size = len(self.tokenizer)  # logits past the tokenizer's vocabulary are padding
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        param = next(self.model.parameters())
        self._store = _KVStore(
            cfg.num_hidden_layers, kv_heads, head_dim, param.dtype, self.device, rows=max(8, max_batch)
        )
        self._decoder = self.model.get_decoder()
        self._head = self.model.get_output_embeddings()
        self._rows: dict[Hashable, _Row] = {}
        self._free: list[int] = []
        self._live: dict[Hashable, _Live] = {}

    # ---- protocol -------------------------------------------------------------------------
    def submit(self, request: Request) -> None:
        if request.key in self._live:
            raise ValueError(f"trace {request.key!r} already has a live request")
        if request.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        row = self._rows.get(request.key)
        if row is None:
            row = self._rows[request.key] = _Row(self._alloc())
        ctx = request.token_ids
        keep = len(row.tokens)
        if ctx[:keep] != row.tokens:  # not an extension of what we cached: recompute
            keep = 0
        keep = min(keep, len(ctx) - 1)  # the last token is always fed to get fresh logits
        del row.tokens[keep:]
        self._live[request.key] = _Live(request, row, list(ctx[keep:]))

    def has_work(self) -> bool:
        return bool(self._live)

    def release(self, key: Hashable) -> None:
        self._live.pop(key, None)
        row = self._rows.pop(key, None)
        if row is not None:
            self._free.append(row.slot)

    def close(self) -> None:
        self._live.clear()
        self._rows.clear()

    @torch.inference_mode()
    def step(self) -> list[Completion]:
        """One decode forward over up to max_batch traces, plus (sometimes) one batched prefill.

        Short catch-ups (<= MERGE_TOKENS unseen tokens, e.g. a word-schedule handoff) ride in the
        decode forward, padded. Long ones (a prompt, a paragraph the other model wrote) are
        prefilled together once enough of them wait, or when one has waited PREFILL_PATIENCE
        steps, or when nothing else is runnable: on small models a forward costs about the same
        whatever its size, so fewer, fuller forwards mean more tokens per second.
        """
        live = list(self._live.values())
        short = [lv for lv in live if len(lv.pending) <= MERGE_TOKENS][: self.max_batch]
        long = [lv for lv in live if len(lv.pending) > MERGE_TOKENS]
        for lv in long:
            lv.waited += 1
        groups = [short] if short else []
        if long and (
            not short or len(long) >= max(1, self.max_batch // 4) or max(lv.waited for lv in long) >= PREFILL_PATIENCE
        ):
            groups = self._chunks(long[: self.max_batch]) + groups
        done = []
        for group in groups:
            logits = self._forward([lv.row for lv in group], [lv.pending for lv in group])
            done += self._sample(group, logits)
        return done

    # ---- internals ------------------------------------------------------------------------
    def _alloc(self) -> int:
        if self._free:
            return self._free.pop()
        slot = len(self._rows) + len(self._free)
        used = {r.slot for r in self._rows.values()}
        while slot in used:
            slot += 1
        return slot

    def _chunks(self, group: list[_Live]) -> list[list[_Live]]:
        """Split prefill rows so each padded forward stays under `prefill_tokens`."""
        group = sorted(group, key=lambda lv: len(lv.pending))
        out, cur = [], []
        for lv in group:
            if cur and (len(cur) + 1) * len(lv.pending) > self.prefill_tokens:
                out.append(cur)
                cur = []
            cur.append(lv)
        return out + ([cur] if cur else [])

    def _forward(self, rows: list[_Row], feeds: list[list[int]]) -> torch.Tensor:
        """Feed `feeds[i]` after `rows[i]`'s cached tokens; return last-position logits [R, V]."""
        R, q = len(rows), max(len(f) for f in feeds)
        starts = torch.tensor([len(r.tokens) for r in rows], device=self.device)
        ids = torch.zeros((R, q), dtype=torch.long, device=self.device)
        for i, f in enumerate(feeds):
            ids[i, : len(f)] = torch.tensor(f)
        j = torch.arange(q, device=self.device)
        pos = starts[:, None] + j[None, :]  # [R, q] absolute positions (padding included)
        length = int(starts.max()) + q
        self._store.ensure(max(r.slot for r in rows) + 1, length)
        slots = torch.tensor([r.slot for r in rows], device=self.device)
        # Query j of row r may attend keys 0..start_r + j: its own past plus causal new tokens.
        # Keys written by padding queries sit after every real query's position, so they stay hidden.
        allowed = torch.arange(length, device=self.device)[None, None, :] <= pos[:, :, None]
        dtype = self._store.k[0].dtype
        mask = torch.zeros(allowed.shape, dtype=dtype, device=self.device)
        mask.masked_fill_(~allowed, torch.finfo(dtype).min)
        cache = _RowCache(self._store, slots, pos, length)
        hidden = self._decoder(
            input_ids=ids,
            attention_mask={"full_attention": mask[:, None]},
            position_ids=pos,
            past_key_values=cache,
            use_cache=True,
        ).last_hidden_state
        last = torch.tensor([len(f) - 1 for f in feeds], device=self.device)
        for r, f in zip(rows, feeds):
            r.tokens.extend(f)
        return self._head(hidden[torch.arange(R), last]).float()[:, : self.vocab_size]

    def _sample(self, group: list[_Live], logits: torch.Tensor) -> list[Completion]:
        raw = torch.log_softmax(logits, dim=-1)
        s = self.sampling
        if s.temperature == 0:
            chosen = logits.argmax(dim=-1).tolist()
        else:
            probs = _filtered_probs(logits / s.temperature, s.top_k, s.top_p)
            u = torch.tensor(
                [position_uniform(lv.req.seed, len(lv.req.token_ids) + len(lv.new_tokens)) for lv in group],
                dtype=probs.dtype,
                device=probs.device,
            )
            cdf = probs.cumsum(dim=-1)
            chosen = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(1)
            chosen = chosen.clamp_(max=probs.shape[1] - 1).tolist()
        done = []
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
            yield self._head(hidden[a : a + chunk]).float()[:, : self.vocab_size]

    @torch.inference_mode()
    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Teacher-forced raw log p(continuation token | prefix), one float64 array per item."""
        out = []
        for prompt, cont in zip(prompts, continuations):
            if len(cont) == 0:
                out.append(np.zeros(0))
                continue
            target = torch.tensor(list(cont), device=self.device)
            parts, a = [], 0
            for logits in self.logits_chunks(self.hidden_states(prompt, cont)):
                lp = torch.log_softmax(logits, dim=-1)
                parts.append(lp[torch.arange(len(lp)), target[a : a + len(lp)]])
                a += len(lp)
            out.append(torch.cat(parts).double().cpu().numpy())
        return out


def _filtered_probs(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Softmax after top-k then top-p filtering (vLLM's order), in vocabulary order."""
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
