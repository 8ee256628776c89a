"""Tiny random models of every common decoder-only family, built offline from transformers' configs.

Each family is a builder `(tokenizer, seed, size) -> model`: a randomly initialised fp32 causal LM
of that architecture sized for the shared BPE tokenizer of `tandem_eval.toy.tiny.train_tokenizer()`,
with head_dim >= 32 (vLLM-CPU's smallest head size), untied embeddings, eos/pad ids from the
tokenizer and small sliding windows (SLIDING_WINDOW tokens) on the families that have sliding
layers, so a test context longer than SLIDING_WINDOW really exercises sliding attention. The
lm_head is scaled as in tiny.py so greedy decoding is not all ties.

    from families import FAMILIES, build_family_model, save_family_model
    tok = train_tokenizer()
    model = build_family_model("gemma2", tok, seed=0)
    path = save_family_model(tmp_path / "gemma2", "gemma2", tok, seed=0)   # an HF folder

Used by tests/test_families.py (HF engine) and the vLLM family matrix.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tandem_eval.toy.tiny import TinySize, config_kwargs, sharpen

SLIDING_WINDOW = 16  # tokens; tests use longer contexts so sliding layers really slide


def _llama(tok, size):
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**config_kwargs(tok, size), head_dim=size.head_dim))


def _mistral(tok, size):
    from transformers import MistralConfig, MistralForCausalLM

    # Mistral slides on every layer
    config = MistralConfig(**config_kwargs(tok, size), head_dim=size.head_dim, sliding_window=SLIDING_WINDOW)
    return MistralForCausalLM(config)


def _qwen2(tok, size):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    # released Qwen2/2.5 checkpoints ship use_sliding_window=False; so do we
    return Qwen2ForCausalLM(Qwen2Config(**config_kwargs(tok, size)))


def _qwen3(tok, size):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    return Qwen3ForCausalLM(Qwen3Config(**config_kwargs(tok, size), head_dim=size.head_dim))


def _gemma2(tok, size):
    from transformers import Gemma2Config, Gemma2ForCausalLM

    # sliding and global layers alternate; attention and final logits are soft-capped
    config = Gemma2Config(
        **config_kwargs(tok, size),
        head_dim=size.head_dim,
        query_pre_attn_scalar=size.head_dim,
        sliding_window=SLIDING_WINDOW,
        attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0,
    )
    return Gemma2ForCausalLM(config)


def _gemma3(tok, size):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    # first layer sliding, last global (pattern 2), as layer_types
    layer_types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(size.layers)]
    config = Gemma3TextConfig(
        **config_kwargs(tok, size),
        head_dim=size.head_dim,
        query_pre_attn_scalar=size.head_dim,
        sliding_window=SLIDING_WINDOW,
        layer_types=layer_types,
    )
    return Gemma3ForCausalLM(config)


def _phi3(tok, size):
    from transformers import Phi3Config, Phi3ForCausalLM

    # fused qkv projection; head_dim = hidden / heads
    return Phi3ForCausalLM(Phi3Config(**config_kwargs(tok, size)))


def _olmo2(tok, size):
    from transformers import Olmo2Config, Olmo2ForCausalLM

    # q/k RMS norms before RoPE; head_dim = hidden / heads
    return Olmo2ForCausalLM(Olmo2Config(**config_kwargs(tok, size)))


FAMILIES = {
    "llama": _llama,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "gemma2": _gemma2,
    "gemma3": _gemma3,
    "phi3": _phi3,
    "olmo2": _olmo2,
}
SLIDING_FAMILIES = ("mistral", "gemma2", "gemma3")


def build_family_model(family: str, tokenizer, seed: int = 0, size: TinySize = TinySize()):
    """A randomly initialised fp32 causal LM of `family` (a key of FAMILIES), eval mode."""
    if family not in FAMILIES:
        raise KeyError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    if size.hidden // size.heads < 32 or size.head_dim < 32:
        raise ValueError("head_dim must be >= 32 (vLLM-CPU's smallest head size)")
    torch.manual_seed(seed)
    model = FAMILIES[family](tokenizer, size).to(torch.float32).eval()
    sharpen(model, tokenizer)
    model.generation_config.bos_token_id = None
    return model


def save_family_model(path: str | Path, family: str, tokenizer, seed: int = 0, size: TinySize = TinySize()) -> Path:
    """Write a tiny `family` model and the tokenizer as an HF checkpoint folder; return the path."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    build_family_model(family, tokenizer, seed, size).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
