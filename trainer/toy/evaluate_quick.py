"""Quick solo check of a toy checkpoint: greedy and sampled pass@1 on the toy test split.

An internal sanity check for calibrating the toy world, not the project's evaluator: plain HF
`generate` in left-padded batches, grading by exact match of the last `\\boxed{}` content.
Sampling uses the paper's settings (temperature 0.7, top_p 0.8, top_k 20).

    python -m trainer.toy.evaluate_quick /tmp/toy_ckpts/jargon/senior --n 200 --samples 4
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from tandem_eval.data.prompts import prompt_text
from trainer.toy.models import load_checkpoint
from trainer.toy.styles import jargon_rate, uses_jargon
from trainer.toy.task import ToyProblem, generate

SAMPLING = {"do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20}
MODEL_SAMPLING = {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0}  # the model's own distribution


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\boxed{"), 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j].strip()
    return None


def complete(
    model,
    tok,
    problems: list[ToyProblem],
    *,
    sample: bool,
    seed: int = 0,
    batch_size: int = 64,
    max_new_tokens: int = 320,
    prefixes: list[str] | None = None,
    sampling: dict | None = None,
) -> list[str]:
    """One completion per problem (the assistant text, special tokens dropped). `prefixes[i]`, when
    given, is forced as the start of problem i's answer: it is part of the returned text and of its
    `max_new_tokens` budget (a prefix of m tokens leaves max_new_tokens - m to generate). `sampling`:
    generate()'s decoding when sampling (default SAMPLING, the paper's evaluation decoding)."""
    tok.padding_side = "left"
    texts, gen = [], ((sampling or SAMPLING) if sample else {"do_sample": False})
    prefixes = prefixes or [""] * len(problems)
    torch.manual_seed(seed)
    for i in range(0, len(problems), batch_size):
        heads = prefixes[i : i + batch_size]
        prompts = [prompt_text(tok, p.problem) + h for p, h in zip(problems[i : i + batch_size], heads)]
        # each row's own budget: generation runs to the longest and cuts the others (the first tokens a
        # model samples do not depend on where it will be stopped, so a cut equals a shorter budget)
        left = [max_new_tokens - len(tok.encode(h, add_special_tokens=False)) for h in heads]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(
                **enc,
                max_new_tokens=max(1, max(left)),
                **gen,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
            )
        new = out[:, enc["input_ids"].shape[1] :]
        texts += [h + tok.decode(row[: max(0, n)], skip_special_tokens=True) for h, row, n in zip(heads, new, left)]
    return texts


def score(problems: list[ToyProblem], texts: list[str]) -> dict:
    correct = [last_boxed(t) == p.answer for p, t in zip(problems, texts)]
    return {
        "pass@1": sum(correct) / len(correct),
        "jargon_cots": sum(map(uses_jargon, texts)) / len(texts),
        "jargon_rate": sum(map(jargon_rate, texts)) / len(texts),
        "boxed": sum(last_boxed(t) is not None for t in texts) / len(texts),
    }


def quick_eval(model, tok, n: int = 200, samples: int = 1, seed: int = 0, show: int = 0) -> dict:
    """Greedy pass@1 and sampled pass@1 (mean over `samples` samples per problem)."""
    problems = generate("test", n, seed=0)
    t0 = time.time()
    greedy = complete(model, tok, problems, sample=False)
    res = {"n": n, "greedy": score(problems, greedy)}
    sampled = [complete(model, tok, problems, sample=True, seed=seed + s) for s in range(samples)]
    runs = [score(problems, texts) for texts in sampled]
    res["sampled"] = {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}
    res["sampled_pass@1_per_seed"] = [r["pass@1"] for r in runs]
    res["samples"], res["eval_seconds"] = samples, round(time.time() - t0, 1)
    for p, t in list(zip(problems, greedy))[:show]:
        print(f"--- {p.problem_id} (answer {p.answer})\n{t}")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description="Quick solo pass@1 of a toy checkpoint")
    ap.add_argument("checkpoint")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--samples", type=int, default=1, help="sampled completions per problem")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--show", type=int, default=0, help="print this many greedy completions")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.checkpoint)
    print(json.dumps(quick_eval(model, tok, args.n, args.samples, args.seed, args.show), indent=2))


if __name__ == "__main__":
    main()
