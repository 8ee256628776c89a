"""vLLM v1 logits processor that samples with our position-keyed randomness (imports vLLM: load lazily).

`VLLMEngine` passes `PositionKeyedSampler` to vLLM (`logits_processors=`) and marks each sampling
request with `SamplingParams.extra_args[SAMPLER_KEY] = sampler_args(...)`. For those rows the
processor computes the token HF would sample from the same logits (sampling.py: temperature,
top-k then top-p, inverse-CDF draw with `position_uniform(seed, position)`), then leaves that
token's logit finite and sets every other logit to -inf. The request itself runs greedy in vLLM
(temperature 0), so vLLM's own sampling picks exactly that token. Requests without the key (greedy
generation on an evaluation engine, scoring) are untouched.

The finite logit left for the chosen token is its log-prob at the request's temperature,
log_softmax(logits / T)[token] over every model row (T = 1 for greedy rows), which is what trl
recomputes for a rollout token. Which log-prob a request returns is then the LLM's
`logprobs_mode`'s choice:
* "raw_logprobs" (tandem_eval's own engines): vLLM takes log-softmax of the raw logits BEFORE the
  processors that are not argmax-invariant run, so our rewrite does not touch it: raw log-probs;
* "processed_logits" (the trainer's colocate senior): vLLM returns the logits as the processors
  left them, i.e. the value written here: the temperature-scaled log-prob. (vLLM's
  "processed_logprobs", trl's own choice, would return log-softmax of a one-hot row: 0 for every
  token, so trl's importance ratio would compare its log-probs with zeros.)

Over an OpenAI-compatible server (engines/served.py: `--logits-processors` names this class), the
request's `vllm_xargs` can carry only flat values (a string, a number or a list of them), so the
args travel as the list `sampler_list(...)` (the `_FIELDS` in order); `_args` reads either form.

Position of the token being sampled = the chunk's context length (`start`: the whole trace so far,
also for a resumed session, whose earlier tokens vLLM moves into its prompt) + the tokens vLLM has
generated for the chunk so far (the `output_tok_ids` list vLLM hands over when the request joins
the batch is live: it grows as tokens are generated, and keeps its length across preemption; a
resumed session joins again with a new list and its chunk's params).

The batch bookkeeping follows vLLM's documented `BatchUpdate` (removed, added, moved; tested on a
synthetic update in tests/test_vllm_engine.py), not a vLLM helper. vLLM's "model runner V2" (vLLM
0.33's GPU default) has another processor interface: VLLMEngine selects the V1 runner explicitly
(VLLM_USE_V2_MODEL_RUNNER=0) and refuses an LLM that runs V2.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from .sampling import sample_at_positions

SAMPLER_KEY = "tandem_position_keyed"
_FIELDS = ("seed", "start", "temperature", "top_k", "top_p", "vocab")


def sampler_args(seed: int, start: int, temperature: float, top_k: int, top_p: float, vocab: int) -> dict:
    """The extra_args entry for one request: trace seed, segment start position, sampling settings, and
    how many logit rows are real tokens (the tokenizer's size; padding rows are never sampled, as on HF)."""
    return {
        "seed": int(seed) & ((1 << 64) - 1),  # mix64 masks to 64 bits anyway; vLLM wants ints < 2**64
        "start": int(start),
        "temperature": float(temperature),
        "top_k": int(top_k),
        "top_p": float(top_p),
        "vocab": int(vocab),
    }


def sampler_list(seed: int, start: int, temperature: float, top_k: int, top_p: float, vocab: int) -> list:
    """The same args as a flat list (`_FIELDS` order): the form a server's `vllm_xargs` can carry."""
    return [sampler_args(seed, start, temperature, top_k, top_p, vocab)[f] for f in _FIELDS]


def _args(sampling_params) -> dict | None:
    """A request's sampler args (dict form, or the list form of a served request), or None."""
    args = ((sampling_params.extra_args or {}) if sampling_params is not None else {}).get(SAMPLER_KEY)
    if isinstance(args, list):
        if len(args) != len(_FIELDS):
            raise ValueError(f"extra_args[{SAMPLER_KEY!r}] as a list needs {len(_FIELDS)} values: {_FIELDS}")
        args = dict(zip(_FIELDS, args))
        for f in ("seed", "start", "top_k", "vocab"):
            args[f] = int(args[f])
    return args


class PositionKeyedSampler(LogitsProcessor):
    """Replaces vLLM's draw by ours for requests carrying `extra_args[SAMPLER_KEY]`."""

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        # batch row -> (the request's sampler_args, its live list of generated token ids)
        self._rows: dict[int, tuple[dict, list[int]]] = {}

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        args = _args(sampling_params)
        if args is None:
            return
        missing = [f for f in _FIELDS if f not in args]
        if missing:
            raise ValueError(f"extra_args[{SAMPLER_KEY!r}] lacks {missing}")
        if not args["temperature"] >= 0:
            raise ValueError("position-keyed sampling needs temperature >= 0 (0: greedy, the raw log-prob written)")

    def is_argmax_invariant(self) -> bool:
        return False  # it decides the token: it must run for greedy requests too

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Follow the persistent batch, in the order vLLM's interface documents: removed, added, moved.
        (A resumed session is removed and added again, with its new chunk's params.)"""
        if batch_update is None:
            return
        rows = self._rows
        for index in batch_update.removed:
            rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            args = _args(params)
            if args is None:
                rows.pop(index, None)
            else:
                rows[index] = (args, output_ids)
        for a, b, direction in batch_update.moved:
            row_a, row_b = rows.pop(a, None), rows.pop(b, None)
            if row_a is not None:
                rows[b] = row_a
            if row_b is not None and direction == MoveDirectionality.SWAP:
                rows[a] = row_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._rows:
            return logits
        # Rows sharing settings are drawn together (in practice one group: an engine has one Sampling).
        groups: dict[tuple, list[int]] = defaultdict(list)
        for row, (args, _) in self._rows.items():
            groups[(args["temperature"], args["top_k"], args["top_p"], args["vocab"])].append(row)
        for (temperature, top_k, top_p, vocab), rows in groups.items():
            rows.sort()
            seeds = [self._rows[r][0]["seed"] for r in rows]
            positions = [self._rows[r][0]["start"] + len(self._rows[r][1]) for r in rows]
            index = torch.tensor(rows, device=logits.device)
            chosen = sample_at_positions(logits[index, :vocab], temperature, top_k, top_p, seeds, positions)
            chosen = chosen.to(logits.device)
            # the chosen token's log-prob at the sampling temperature, over every row (as trl): what a
            # "processed_logits" LLM returns (module docstring); the only finite logit left, so greedy picks it
            scale = temperature if temperature > 0 else 1.0
            logp = torch.log_softmax(logits[index].float() / scale, dim=-1).gather(1, chosen[:, None])[:, 0]
            logits[index] = float("-inf")
            logits[index, chosen] = logp.to(logits.dtype)
        return logits
