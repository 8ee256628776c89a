"""Text-level handoff: serve a junior whose tokenizer differs from the senior's.

Token-level handoff needs one vocabulary. With `--allow-vocab-mismatch` the junior engine is
wrapped in `RetokenizingEngine`: the trace stays in the senior's token ids; on each junior turn
the generated text so far is decoded and re-tokenized for the junior (after the junior's own chat
prompt for the problem), the junior generates in its vocabulary, and its text is re-tokenized with
the senior's tokenizer. The junior stops at its own vocabulary's candidate tokens for the same
schedule (`junior_stops`, computed by the caller from the schedule: engines know nothing of
schedules); if the re-tokenized text crosses a handoff point, the co-generation loop keeps the text
up to that point only (`may_overrun`). Junior log-probs have no per-senior-token meaning and are
recorded as NaN. The run's config records `allow_vocab_mismatch`.

    stops = make_schedule("paragraph", junior_tokenizer).stop_ids(State(author=JUNIOR))  # the caller's
    junior = RetokenizingEngine(HFEngine(junior_path, sampling), senior_tokenizer, stops)
    junior.register(trace_key, junior_prompt_ids)
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from .base import FINISH_EOS, Completion, Request


class RetokenizingEngine:
    may_overrun = True  # re-tokenized text may run past a handoff point; the loop truncates
    full_distributions = False  # no per-senior-token distributions across vocabularies

    def __init__(self, inner, senior_tokenizer, junior_stops: frozenset[int]):
        self.inner, self.outer_tok = inner, senior_tokenizer
        self.name = f"{inner.name}+retokenize"
        self.logprobs = inner.logprobs  # the inner engine's kind (recorded as NaN here: docstring)
        # keeps no `stats` of its own: the progress display counts the inner engine's (progress.py)
        self.live_counter = inner.live_counter
        self.tokenizer = senior_tokenizer
        self.eos_ids = frozenset([senior_tokenizer.eos_token_id])
        # The junior stops where the same schedule, read in the junior's vocabulary, might switch.
        self._stops = frozenset(junior_stops)
        self._prompts: dict[Hashable, list[int]] = {}
        self._prompt_len: dict[Hashable, int] = {}
        self._max: dict[Hashable, int] = {}

    def register(self, key: Hashable, junior_prompt_ids: list[int], senior_prompt_len: int) -> None:
        self._prompts[key] = list(junior_prompt_ids)
        self._prompt_len[key] = senior_prompt_len

    def submit(self, req: Request) -> None:
        if req.key not in self._prompts:
            raise KeyError(f"trace {req.key!r} has no junior prompt; call register() first")
        text = self.outer_tok.decode(req.token_ids[self._prompt_len[req.key] :])
        ids = self._prompts[req.key] + self.inner.tokenizer.encode(text, add_special_tokens=False)
        # The junior stops at its own vocabulary's candidates (or a forced decision), never by the
        # senior-vocabulary `until`; the loop keeps its text up to the handoff.
        run = req.until.max_run() if req.until is not None else None
        n = req.max_tokens if run is None else min(req.max_tokens, run)
        self._max[req.key] = n
        self.inner.submit(Request(req.key, ids, n, self._stops, req.seed))

    def step(self) -> list[Completion]:
        out = []
        for c in self.inner.step():
            eos = c.finish_reason == FINISH_EOS
            body = [t for t in c.token_ids if t not in self.inner.eos_ids]
            ids = self.outer_tok.encode(self.inner.tokenizer.decode(body), add_special_tokens=False)
            ids = ids[: self._max.pop(c.key) - int(eos)]
            if eos or not ids:  # a junior turn that yields no text ends the trace (no progress otherwise)
                ids.append(self.outer_tok.eos_token_id)
            out.append(Completion(c.key, ids, [math.nan] * len(ids), c.finish_reason))
        return out

    def has_work(self) -> bool:
        return self.inner.has_work()

    def release(self, key: Hashable) -> None:
        self.inner.release(key)
        self._prompts.pop(key, None)
        self._prompt_len.pop(key, None)

    def score(self, prompts, continuations, **kw):
        raise NotImplementedError(
            "teacher-forced log-probs need one vocabulary; across vocabularies `tandem-eval legibility "
            "--allow-vocab-mismatch` scores the re-tokenized text in bits per byte"
        )

    def exact_kl(self, junior, prompts, junior_prompts, continuations, **kw):
        raise NotImplementedError("KL over different vocabularies is undefined; drift needs one shared tokenizer")

    def close(self) -> None:
        self.inner.close()
