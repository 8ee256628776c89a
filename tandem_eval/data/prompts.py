"""The paper's prompt: one user turn = problem + INSTRUCTION, rendered by the chat template.

    from tandem_eval.data.prompts import prompt_ids, prompt_text
    ids = prompt_ids(tokenizer, problem.problem)    # list[int], ends with the assistant header
    text = prompt_text(tokenizer, problem.problem)  # same prompt as a string (for logs/vLLM)

Senior and junior share one tokenizer, so one prompt serves both. Thinking is disabled
(`enable_thinking=False`, as in the paper); templates that do not know the flag ignore it.
`chat_template` overrides the tokenizer's own template (the CLI's --chat-template FILE).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INSTRUCTION = (
    " Solve the following math problem step by step. Put your final answer inside "
    "\\boxed{}, like \\boxed{42} or \\boxed{\\frac{1}{2}}."
)


class PromptError(ValueError):
    """The tokenizer cannot build the prompt; the message says how to fix it."""


def user_message(problem: str) -> str:
    """The single user turn: the problem text followed by the instruction (which starts with
    a space, so the two never run together)."""
    return problem + INSTRUCTION


def _messages(problem: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": user_message(problem)}]


def _template(tokenizer: Any, chat_template: str | None) -> str:
    template = chat_template or getattr(tokenizer, "chat_template", None)
    if not template:
        path = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise PromptError(
            f"tokenizer at {path} has no chat_template; add one to tokenizer_config.json or pass --chat-template FILE"
        )
    return template


def prompt_text(tokenizer: Any, problem: str, *, chat_template: str | None = None) -> str:
    """The rendered prompt string, ending with the generation prompt (assistant header)."""
    return tokenizer.apply_chat_template(
        _messages(problem),
        chat_template=_template(tokenizer, chat_template),
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )


def prompt_ids(tokenizer: Any, problem: str, *, chat_template: str | None = None) -> list[int]:
    """Token ids of the rendered prompt; no BOS/EOS is added beyond what the template writes."""
    out = tokenizer.apply_chat_template(
        _messages(problem),
        chat_template=_template(tokenizer, chat_template),
        tokenize=True,
        add_generation_prompt=True,
        enable_thinking=False,
        return_dict=False,
    )
    return _as_id_list(out)


def _as_id_list(out: Any) -> list[int]:
    """transformers 5 returns list[int] with return_dict=False, but BatchEncoding/dict by
    default, and some tokenizer classes ignore the flag; tensors and a batch of one also occur."""
    if isinstance(out, Mapping) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if out and isinstance(out[0], (list, tuple)):
        if len(out) != 1:
            raise PromptError(f"expected one prompt, got a batch of {len(out)}")
        out = out[0]
    return [int(i) for i in out]
