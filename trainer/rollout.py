"""The rollout function handed to trl's GRPOTrainer: tandem_eval's co-generation loop in, trl's
rollout dict out, with the author mask as trl's `env_mask` (1 = senior = trained token).

trl calls `TandemRollout(prompts, trainer)` once per rollout batch ("step") on every process, with
that process's slice of the batch; each prompt already appears group_size times in a row. We
build one `TraceSpec` per entry, run `tandem_eval.generate.tandem.cogenerate` with the live senior (the
model being trained) and the frozen junior, and return

    prompt_ids     [B][P_i]  the paper's chat prompt (tandem_eval.data.prompt_ids)
    completion_ids [B][T_i]  the whole co-generated answer: senior AND junior tokens, in order
    logprobs       [B][T_i]  each token's log-prob under its author (see "log-probs" below)
    env_mask       [B][T_i]  the author mask: 1 = senior wrote it (gets loss), 0 = junior (context only)

The `grpo`, `kl-reg` and `grpo-g16` arms use the same function with the `solo` schedule and no
junior engine: their mask is all ones, so every arm goes through exactly the same trl code.

Log-probs: on every engine and arm the senior's tokens carry the log-probs trl itself computes for
them, log_softmax(logits / temperature) before top-k/top-p (the engines' "sampling" log-probs,
tandem_eval/engines/base.py); `_senior_engine` refuses an engine that returns anything else. trl
reads them for vLLM's importance-sampling correction (`vllm_importance_sampling_correction`, its
default; `use_vllm=False` on the HF engine, where trl ignores them); its PPO ratios use its own
recomputed log-probs. Junior positions carry the junior's raw log-probs and are masked out of the
correction by `env_mask` (trl multiplies the log-prob difference by the loss mask).

Fail closed (`check_authorship`): a tandem batch with no junior tokens, no senior tokens, or a
senior-token fraction outside the recipe's band (paper: [0.3, 0.7] at p = 0.5) raises
`AuthorshipError`; so does a solo arm with junior tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from pathlib import Path

import torch

from tandem_eval.data import prompt_ids
from tandem_eval.engines import backend, load_engine
from tandem_eval.engines.base import FINISH_LENGTH, LOGPROBS_SAMPLING
from tandem_eval.generate.schedules import make_schedule, needs_junior
from tandem_eval.generate.tandem import Trace, TraceSpec, budget, cogenerate, trace_seed

from .recipe import Recipe


class AuthorshipError(RuntimeError):
    """The rollouts do not have the authorship the arm requires; training would be the wrong algorithm."""


@dataclass
class RolloutStats:
    """Counts over one rollout batch (summed over processes)."""

    traces: int = 0
    tokens: int = 0
    senior_tokens: int = 0
    handoffs: int = 0
    segments: int = 0
    truncated: int = 0

    @classmethod
    def of(cls, traces: list[Trace]) -> RolloutStats:
        s = cls()
        for t in traces:
            s.traces += 1
            s.tokens += len(t.token_ids)
            s.senior_tokens += int(sum(t.author_mask))
            s.handoffs += t.n_handoffs
            s.segments += (t.n_handoffs + 1) if t.token_ids else 0
            s.truncated += t.finish_reason == FINISH_LENGTH
        return s

    def gathered(self, accelerator) -> RolloutStats:
        local = torch.tensor(astuple(self), dtype=torch.long, device=accelerator.device)
        total = accelerator.gather(local).view(-1, len(local)).sum(0)
        return RolloutStats(*map(int, total.tolist()))

    @property
    def junior_tokens(self) -> int:
        return self.tokens - self.senior_tokens

    @property
    def senior_fraction(self) -> float:
        return self.senior_tokens / self.tokens if self.tokens else float("nan")

    def metrics(self) -> dict[str, float]:
        n = max(self.traces, 1)
        return {
            "senior_fraction": self.senior_fraction,  # token-weighted over the batch
            "switches_per_seq": self.handoffs / n,
            "tokens_per_segment": self.tokens / max(self.segments, 1),
            "response_length": self.tokens / n,  # senior + junior tokens
            "truncation_rate": self.truncated / n,
        }


def check_authorship(stats: RolloutStats, recipe: Recipe, step: int) -> None:
    """Fail closed when the batch's authorship does not match the arm (see module docstring)."""
    where = f"step {step} ({stats.traces} rollouts, {stats.tokens} tokens, schedule {recipe.schedule!r})"
    if not needs_junior(recipe.schedule):
        if stats.junior_tokens:
            raise AuthorshipError(f"arm {recipe.arm!r} is solo but {where} has {stats.junior_tokens} junior tokens")
        return
    if stats.junior_tokens == 0:
        raise AuthorshipError(
            f"tandem rollouts of {where} contain no junior tokens: the junior never wrote, so "
            "this would silently be plain GRPO; check the schedule and the junior engine"
        )
    if stats.senior_tokens == 0:
        raise AuthorshipError(f"tandem rollouts of {where} contain no senior tokens: nothing to train on")
    band = recipe.fraction_band()
    if band is not None and not band[0] <= stats.senior_fraction <= band[1]:
        raise AuthorshipError(
            f"senior-token fraction {stats.senior_fraction:.3f} of {where} is outside "
            f"[{band[0]}, {band[1]}]; the schedule or the author mask is broken "
            "(set senior_fraction_band to change the band)"
        )


class TandemRollout:
    """`rollout_func` for trl's GRPOTrainer (see module docstring)."""

    def __init__(self, recipe: Recipe, tokenizer, junior_path: Path | None, problem_ids: dict[str, str]):
        self.recipe, self.tokenizer, self.junior_path = recipe, tokenizer, junior_path
        self.problem_ids = problem_ids  # prompt text -> problem id (for per-trace seeds)
        self.schedule = make_schedule(recipe.schedule, tokenizer)
        self.co_generate = needs_junior(recipe.schedule)
        self._junior = None  # engine, built on first use and kept (the junior is frozen)
        self.last_stats: RolloutStats | None = None  # of the latest batch, all processes
        self.last_local_senior_tokens = 0

    # ---- trl entry point ----------------------------------------------------------------
    def __call__(self, prompts: list, trainer) -> dict:
        step = trainer.state.global_step // self.recipe.updates_per_step
        offset = trainer.accelerator.process_index * len(prompts)
        specs = []
        for i, prompt in enumerate(prompts):
            text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
            ids = tuple(prompt_ids(self.tokenizer, text))
            pid = self.problem_ids.get(text, text)
            n_new = budget(len(ids), self.recipe.max_completion_length, self.recipe.max_context)
            seed = trace_seed(self.recipe.seed, f"train/{step}/{pid}", offset + i)
            specs.append(TraceSpec(i, ids, seed, n_new))
        traces = self.generate(specs, trainer)

        local = RolloutStats.of(traces)
        self.last_local_senior_tokens = local.senior_tokens
        self.last_stats = local.gathered(trainer.accelerator)
        check_authorship(self.last_stats, self.recipe, step)  # same verdict on every process
        return {
            "prompt_ids": [list(t.prompt_ids) for t in traces],
            "completion_ids": [list(t.token_ids) for t in traces],
            "logprobs": [list(t.logprobs) for t in traces],
            # --- TANDEM CHANGE (vs. plain GRPO) -------------------------------------------------
            # The loss mask is the author mask: junior-written tokens stay in the context (the
            # senior is trained to continue them) but get no loss, no advantage, no KL, and do not
            # count in the token-mean's denominator. All ones for the solo arms.
            "env_mask": [list(t.author_mask) for t in traces],
        }

    # ---- generation ---------------------------------------------------------------------
    def generate(self, specs: list[TraceSpec], trainer) -> list[Trace]:
        """Co-generate every spec; traces in spec order."""
        pool = self.recipe.rollout_batch * (2 if self.co_generate else 1)
        with self._senior_engine(trainer) as senior:
            junior = self.junior_engine(trainer) if self.co_generate else None
            done = {t.key: t for t in cogenerate(specs, senior, junior, self.schedule, pool_size=pool)}
        empty = [s.key for s in specs if not done[s.key].token_ids]
        if empty:
            raise RuntimeError(
                f"{len(empty)} rollout(s) have no tokens (prompt longer than max_context "
                f"{self.recipe.max_context}?); filter such problems out of the training data"
            )
        return [done[s.key] for s in specs]

    @contextmanager
    def _senior_engine(self, trainer) -> Iterator:
        with self._open_senior(trainer) as engine:
            if engine.logprobs != LOGPROBS_SAMPLING:  # trl would compare its log-probs with other numbers
                raise RuntimeError(
                    f"the senior's {engine.name} engine returns {engine.logprobs!r} log-probs; rollouts need "
                    f"{LOGPROBS_SAMPLING!r} ones (temperature-scaled, as trl recomputes them)"
                )
            yield engine

    @contextmanager
    def _open_senior(self, trainer) -> Iterator:
        if backend(self.recipe.engine).trl_colocate:  # the senior lives in trl's colocate engine
            from .vllm_compat import colocate_senior_engine

            engine = colocate_senior_engine(
                trainer, self.recipe.rollout_sampling, self.tokenizer, self.recipe.rollout_batch
            )
            try:
                yield engine
            finally:
                # The loop released the batch's traces; close whatever is left (an abandoned batch) so
                # no KV computed with these weights survives trl's next weight sync.
                engine.close_sessions()
            return
        from trl.models import unwrap_model_for_generation

        # The live senior: the very model being trained (gathered under ZeRO-3). A fresh engine per
        # batch, so no KV cache computed with the previous weights survives an update.
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            was_training = model.training  # HFEngine switches to eval(); trl reads .training
            # a backend that shares_weights runs on the loaded model itself (the HF engine)
            engine = load_engine(
                self.recipe.engine,
                model,
                self.recipe.rollout_sampling,
                tokenizer=self.tokenizer,
                max_batch=self.recipe.rollout_batch,
                logprobs=LOGPROBS_SAMPLING,
            )
            try:
                yield engine
            finally:
                engine.close()
                model.train(was_training)

    def junior_engine(self, trainer):
        if self._junior is None:
            if self.junior_path is None:
                raise ValueError("the schedule hands off to the junior, but the recipe resolved no junior")
            if backend(self.recipe.engine).trl_colocate:  # beside trl's engine: its share of GPU memory
                from .vllm_compat import junior_vllm_engine

                self._junior = junior_vllm_engine(self.junior_path, self.recipe)
            else:
                self._junior = load_engine(
                    self.recipe.engine,
                    str(self.junior_path),
                    self.recipe.rollout_sampling,
                    dtype=self.recipe.dtype,
                    max_batch=self.recipe.rollout_batch,
                    device=str(trainer.accelerator.device),
                )
        return self._junior

    def close(self) -> None:
        if self._junior is not None:
            self._junior.close()
            self._junior = None
