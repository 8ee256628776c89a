"""HF transformers engine: the reference backend (CPU default), with continuous batching.

Each engine owns one model and a KV row store with one row per trace it has seen. A step runs one
forward pass over up to `max_batch` traces, packed into a single sequence: traces that need one
token (decode) or a few (a short catch-up) side by side with prefills of any length (a prompt, or
the paragraph the other model wrote since this model last saw the trace: the "catch-up"), the
longest split over steps (chunked prefill). Traces join and leave between steps, so neither model
waits for the other's stragglers, and a catch-up never costs a forward of its own. A new trace
copies the keys and values of the longest cached prefix another trace holds (the samples of a
problem share its prompt) instead of recomputing them.

The store (`hf_rows.RowStore`) keeps the rows of the short feeds in contiguous slots, so no
forward gathers the cache of non-contiguous rows; the model attends through a registered row
attention (`hf_rows.PackedForward`) that writes and reads each row at its own positions, through
transformers' public attention interface only. This serves Llama, Mistral, Qwen2/3, Gemma 2/3,
Phi-3 and OLMo 2 (tests/test_families.py); `check_supported(config)` refuses, in one line, what cannot work
(encoder-decoders, recurrent/hybrid layers, models without the attention interface), and each new
engine checks once that its row path reproduces the model's own forward.

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
from ..devices import default_device, torch_dtype
from ..models import SUPPORTED_FAMILIES as _FAMILIES
from ..models import ModelError, check_supported
from . import hf_scoring
from .base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, LOGPROBS_RAW, Completion, Request, logprob_temperature
from .hf_rows import ATTENTION, MERGE_TOKENS, SHARE_MIN, PackedForward, Row, RowStore, switch_attention
from .sampling import sample_at_positions


@dataclass
class _Segment:
    """A trace's live request on this engine: the segment it is writing."""

    req: Request
    row: Row
    pending: list[int]  # tokens to feed next (a long one over several forwards)
    new_tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


class HFEngine:
    name = "hf"
    may_overrun = False  # stops exactly where a segment ends (`Request.until`); the loop never truncates
    full_distributions = True  # serves exact_kl (both models' full next-token distributions)
    live_counter = "generated"  # the `stats` entry that grows per sampled token (the progress display's count)

    def __init__(
        self,
        path_or_model,
        sampling: Sampling,
        dtype: str = "auto",
        max_batch: int = 32,
        device: str | None = None,
        tokenizer=None,
        prefill_tokens: int = 8192,
        logprobs: str = LOGPROBS_RAW,
    ):
        """`logprobs`: what each sampled token's log-prob is, "raw" (evaluation) or "sampling" (the
        trainer's rollouts: temperature-scaled, as trl recomputes them; base.py)."""
        logprob_temperature(logprobs, sampling.temperature)  # refuses an unknown kind before any weights load
        self.logprobs = logprobs
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        if isinstance(path_or_model, (str, Path)):
            check_supported(AutoConfig.from_pretrained(str(path_or_model)))  # before the weights load
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(path_or_model))
            device = device or default_device()  # the GPU when there is one (devices.py decides)
            self.model = AutoModelForCausalLM.from_pretrained(
                str(path_or_model), dtype=torch_dtype(dtype, device), attn_implementation="sdpa"
            )
            self.model.to(device)  # type: ignore[arg-type]  # transformers types its wrapped .to() as taking a model
        else:  # an in-memory model (the trainer's live senior, on its device); weights may change between calls
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
        self._original_attention = self._switch_attention()
        self._store = RowStore(rows=max(8, max_batch))
        self._decoder = self.model.get_decoder()
        self._head = self.model.get_output_embeddings()
        # A 4-D mask is taken as prepared by every family's mask code, so no mask is built; row
        # attention ignores it (it masks from positions).
        self._no_mask = torch.ones((1, 1, 1, 1), dtype=torch.bool, device=self.device)
        self._live: dict[Hashable, _Segment] = {}
        # cheap counters for benchmarks: forwards, rows fed (sum over forwards), tokens fed, tokens
        # generated, catch-up tokens (fed on a trace's return beyond the one token a decode step
        # feeds), row swaps, and forwards that had to gather non-contiguous rows (0 unless rows the
        # engine does not own are fed), prefix tokens copied from another row instead of computed, and
        # segments (requests: one per author turn)
        self.stats = dict.fromkeys(
            ("forwards", "rows", "tokens_fed", "generated", "catchup", "swaps", "gathers", "shared", "segments"), 0
        )
        self._check_rows_reproduce_forward()
        self.stats.update(dict.fromkeys(self.stats, 0))  # the check is not work
        self._store = RowStore(rows=max(8, max_batch))  # unwritten: the first requests size it (reserve)

    # ---- protocol -------------------------------------------------------------------------
    def submit(self, request: Request) -> None:
        if request.key in self._live:
            raise ValueError(f"trace {request.key!r} already has a live request")
        if request.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        self.stats["segments"] += 1
        ctx = request.token_ids
        self._store.reserve(self.max_batch, len(ctx) + request.max_tokens)  # a no-op once written
        row = self._store.row(request.key)
        keep = len(row.tokens)
        if ctx[:keep] != row.tokens:  # not an extension of what we cached: recompute
            keep = 0
        keep = min(keep, len(ctx) - 1)  # the last token is always fed to get fresh logits
        if keep:
            self.stats["catchup"] += len(ctx) - keep - 1
        del row.tokens[keep:]
        self._live[request.key] = _Segment(request, row, list(ctx[keep:]))

    def has_work(self) -> bool:
        return bool(self._live)

    def release(self, key: Hashable) -> None:
        self._live.pop(key, None)
        self._store.drop(key)

    def close(self) -> None:
        self._live.clear()
        self._store = RowStore(rows=max(8, self.max_batch))
        if self._original_attention is not None:  # hand the (trainer's) model back as it came
            self.model.set_attn_implementation(self._original_attention)
            self._original_attention = None

    @torch.inference_mode()
    def step(self) -> list[Completion]:
        """One packed forward over up to max_batch traces (oldest traces first): decode rows,
        short catch-ups and prefills together, so a catch-up costs no forward of its own.

        Prefill tokens per forward are capped by `prefill_tokens`: a feed that does not fit is fed in
        chunks over the next steps and samples once its last chunk is in.
        """
        group = list(self._live.values())
        if len(group) > self.max_batch:  # a trace back from the other model does not queue behind younger ones
            group = sorted(group, key=lambda sg: sg.row.born)[: self.max_batch]
        group = self._share_prefixes(group)
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
    def _share_prefixes(self, group: list[_Segment]) -> list[_Segment]:
        """New traces (nothing cached) copy the longest cached prefix another row holds instead of
        recomputing it (the samples of a problem, or the traces of a training group, share the
        prompt). Of new traces that start alike in this step only the first is fed; the others
        leave the step and copy from it at the next one. Returns the segments to feed now."""
        heads, out = set(), []
        for sg in group:
            if sg.row.tokens or len(sg.pending) <= SHARE_MIN:
                out.append(sg)
                continue
            n = self._store.adopt(sg.row, sg.pending[:-1])  # the last token is fed, for fresh logits
            if n:
                sg.pending = sg.pending[n:]
                self.stats["shared"] += n
            elif tuple(sg.pending[:SHARE_MIN]) in heads:
                continue  # a sibling computes this prefix now
            else:
                heads.add(tuple(sg.pending[:SHARE_MIN]))
            out.append(sg)
        return out

    def _forward(self, rows: list[Row], feeds: list[list[int]]) -> torch.Tensor:
        """Feed `feeds[i]` after `rows[i]`'s cached tokens in one packed forward; return each feed's
        last-position logits [R, V], in `rows` order."""
        short = [i for i, f in enumerate(feeds) if len(f) <= MERGE_TOKENS]
        long = [i for i, f in enumerate(feeds) if len(f) > MERGE_TOKENS]
        q_short = max((len(feeds[i]) for i in short), default=0)
        length = max(len(r.tokens) + (q_short if i in short else len(f)) for i, (r, f) in enumerate(zip(rows, feeds)))
        self._store.ensure(max(len(self._store.owner), max(r.slot for r in rows) + 1), length)
        self.stats["swaps"] += self._store.compact([rows[i] for i in short])
        short.sort(key=lambda i: rows[i].slot)  # query block r reads store row first + r
        if not self.model.config._attn_implementation.startswith(ATTENTION):  # another engine closed
            self._original_attention = self._switch_attention()
        ctx = PackedForward(
            self._store,
            [rows[i].slot for i in short],
            [len(rows[i].tokens) for i in short],
            [len(feeds[i]) for i in short],
            [(rows[i].slot, len(rows[i].tokens), len(feeds[i])) for i in long],
            self.device,
        )
        ids: list[int] = []
        last = [0] * len(rows)
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

    def _switch_attention(self) -> str | None:
        """Route the model's attention through the row attention (hf_rows); its original name."""
        original = switch_attention(self.model)
        if original == "":
            raise ModelError(
                f"{type(self.model).__name__} does not let transformers switch its attention implementation, "
                f"which the HF engine needs; use a model such as {_FAMILIES}"
            )
        return original

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
        row = Row(0)
        parts = [self._forward([row], [ids[:7]]), self._forward([row], [ids[7:]])]
        got = torch.log_softmax(torch.cat(parts), -1)
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

    def _sample(self, group: list[_Segment], logits: torch.Tensor) -> list[Completion]:
        # over the tokenizer's vocabulary (logits are sliced to it); trl normalises over every model
        # row, which differs only on padded checkpoints, by the padding rows' (untrained) mass
        s = self.sampling
        logp = torch.log_softmax(logits / logprob_temperature(self.logprobs, s.temperature), dim=-1)
        positions = [len(lv.req.token_ids) + len(lv.new_tokens) for lv in group]
        seeds = [lv.req.seed for lv in group]
        chosen = sample_at_positions(logits, s.temperature, s.top_k, s.top_p, seeds, positions)  # [R], on the device
        lps = logp.gather(1, chosen[:, None])[:, 0].tolist()
        done = []
        self.stats["generated"] += len(group)
        for lv, tok, lp in zip(group, chosen.tolist(), lps):
            lv.new_tokens.append(tok)
            lv.logprobs.append(lp)
            lv.pending = [tok]
            until = lv.req.until  # fed every token: it tracks the schedule through the segment
            ends = until(tok) if until is not None else tok in lv.req.stop_ids
            reason = (
                FINISH_EOS
                if tok in self.eos_ids
                else FINISH_STOP
                if ends
                else FINISH_LENGTH
                if len(lv.new_tokens) >= lv.req.max_tokens
                else None
            )
            if reason:
                del self._live[lv.req.key]
                done.append(Completion(lv.req.key, lv.new_tokens, lv.logprobs, reason))
        return done

    # ---- teacher forcing ------------------------------------------------------------------
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
