"""Tokenizer, prompt format and model sizes of the toy world.

One byte-level BPE tokenizer (trained on the task's own corpus, both solution styles) serves
every toy model, so all seniors and juniors share it, as the method requires. Tokenizer and
models come from `tandem_eval.toy.tiny` (Qwen2-style BPE with ChatML; Qwen3ForCausalLM with head_dim
32 and untied embeddings, loadable by vLLM).

    from trainer.toy.models import toy_tokenizer, build_toy_model, prompt_text
    tok = toy_tokenizer()
    model = build_toy_model(tok, "senior", seed=0)
    text = prompt_text(tok, "Tom has 3 pens. ...")   # chat prefix ending in "assistant\\n"
"""

from __future__ import annotations

from functools import lru_cache

# The project's prompt (data/prompts.py): one user turn = problem + INSTRUCTION, chat template,
# assistant header. Re-exported so toy code and the evaluator can never disagree on it.
from tandem_eval.data.prompts import INSTRUCTION as PROMPT_SUFFIX
from tandem_eval.data.prompts import prompt_ids, prompt_text, user_message
from tandem_eval.toy.tiny import TinySize, build_model, train_tokenizer
from trainer.toy.task import Difficulty, generate

__all__ = [
    "PROMPT_SUFFIX",
    "SIZES",
    "build_toy_model",
    "check_tokenizer",
    "load_checkpoint",
    "prompt_ids",
    "prompt_text",
    "toy_tokenizer",
]


# BPE target; training stops at 619 tokens, when every word of the world is one token (digits
# always stay single tokens: the Qwen2 pre-tokenizer splits numbers into digits).
VOCAB_SIZE = 640
_CORPUS_PROBLEMS = 1500

# Parameters with the 619-token vocabulary (untied embeddings count twice): senior 602k (2.4 MB
# in fp32), small 153k, test 50k. All toy checkpoints (seniors and juniors) use "senior"; "small"
# is kept for experiments with a smaller junior; "test" is for unit tests.
SIZES: dict[str, TinySize] = {
    "senior": TinySize(hidden=128, layers=3, heads=4, kv_heads=2, head_dim=32, intermediate=256),
    "small": TinySize(hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, intermediate=128),
    "test": TinySize(hidden=32, layers=1, heads=1, kv_heads=1, head_dim=32, intermediate=64),
}


def _corpus(n: int = _CORPUS_PROBLEMS) -> list[str]:
    # The chat template's role names are included so "user"/"assistant" get whole tokens; the
    # special tokens themselves are added by train_tokenizer and must not be in the corpus.
    out = []
    for p in generate("train", n, seed=12345, difficulty=Difficulty()):
        out.append("user\n" + user_message(p.problem) + "\n")
        out.append("assistant\n" + p.solution_plain + "\n")
        out.append(p.solution_jargon)
        out.append(p.problem.replace(". ", "\n\n"))  # a bare "\n\n" pre-token -> "ĊĊ"
    return out


@lru_cache(maxsize=2)
def _cached_tokenizer(vocab_size: int):
    return train_tokenizer(_corpus(), vocab_size=vocab_size)


def toy_tokenizer(vocab_size: int = VOCAB_SIZE):
    """The toy world's tokenizer (deterministic; a fresh copy each call)."""
    import copy

    tok = copy.deepcopy(_cached_tokenizer(vocab_size))
    check_tokenizer(tok)
    return tok


def check_tokenizer(tok) -> None:
    """Fail loudly if the tokenizer lost a property the schedules rely on."""
    nl = tok.encode("\n\n", add_special_tokens=False)
    if len(nl) != 1:
        raise AssertionError(f'"\\n\\n" is {len(nl)} tokens, expected 1')
    pieces = tok.convert_ids_to_tokens(tok.encode("He has 4 pens.\n\nShe", add_special_tokens=False))
    if not any("ĊĊ" in t for t in pieces) or "Ġhas" not in pieces:
        raise AssertionError(f"unexpected tokenization {pieces}")


def build_toy_model(tokenizer, size: str | TinySize = "senior", seed: int = 0):
    """A fresh Qwen3ForCausalLM of a named toy size (fp32, untied embeddings, head_dim 32)."""
    if isinstance(size, str):
        if size not in SIZES:
            raise ValueError(f"unknown size '{size}'; valid: {', '.join(SIZES)}")
        size = SIZES[size]
    model = build_model(tokenizer, size, seed)
    # tiny.py scales lm_head x8 so *untrained* models are peaked; trained toy models start from
    # the standard init instead, which trains faster and more stably.
    import torch

    with torch.no_grad():
        model.lm_head.weight.div_(8.0)
    return model


def load_checkpoint(path, dtype: str = "float32"):
    """(model, tokenizer) from an HF-format toy checkpoint, in eval mode, fp32 by default."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    return model.eval(), tok
