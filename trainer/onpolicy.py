"""Are a recipe's rollouts on-policy? Its rollout log-probs of the senior's tokens against trl's own.

trl's GRPOTrainer compares the log-probs a rollout returns with the ones it recomputes for the same
tokens, log_softmax(logits / temperature) (its fused LM head), but only on vLLM with the
importance-sampling correction on. This check does the same computation on any engine: it builds the
recipe's trainer, runs one rollout batch, and reports the largest |rollout - recomputed| log-prob over
the senior's positions (env_mask 1; junior tokens carry the junior's log-probs and get no loss).

    python -m trainer.onpolicy --recipe trainer/recipes/cpu-grpo.yaml --set senior=toy:self-paired/tandem
    python -m trainer.onpolicy --recipe trainer/recipes/cpu-tandem.yaml --tolerance 1e-3    # exit 1 above it

One JSON line on stdout: arm, engine, dtype, rollouts, senior tokens, max and mean gap (nats).
tests/test_trainer.py uses `recomputed_logprobs` and `senior_logprob_gap` on both engines;
benchmarks/gpu_check.py runs this command on a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import torch


def recomputed_logprobs(model, prompt, completion, temperature: float) -> np.ndarray:
    """trl's per-token log-probs of `completion` after `prompt`: log_softmax(logits / T) over every model row
    at each completion position (float64 numpy, one per completion token)."""
    ids = torch.tensor([list(prompt) + list(completion)], device=model.device)
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(1, torch.tensor(completion, device=model.device)[:, None])[:, 0].double().cpu().numpy()


def senior_gaps(model, out: dict, temperature: float) -> np.ndarray:
    """|rollout log-prob - recomputed| at every senior position (env_mask 1) of a rollout dict."""
    gaps = []
    for prompt, completion, lps, mask in zip(
        out["prompt_ids"], out["completion_ids"], out["logprobs"], out["env_mask"]
    ):
        ref = recomputed_logprobs(model, prompt, completion, temperature)
        gaps.append(np.abs(np.asarray(lps, dtype=np.float64) - ref)[np.asarray(mask, bool)])
    return np.concatenate(gaps) if gaps else np.zeros(0)


def senior_logprob_gap(model, out: dict, temperature: float) -> float:
    """The largest |rollout log-prob - trl's| over the senior's positions of a rollout dict (0 if none)."""
    return float(senior_gaps(model, out, temperature).max(initial=0.0))


def check(recipe, n_prompts: int = 2) -> dict:
    """One rollout batch of `recipe`'s trainer (its first `n_prompts` training prompts, each group_size
    times) against the trainer's model."""
    from .run import build_trainer

    trainer = build_trainer(recipe)
    try:
        group = recipe.num_generations
        prompts = [trainer.train_dataset[i]["prompt"] for i in range(n_prompts) for _ in range(group)]
        out = trainer.tandem_rollout(prompts, trainer)
        gaps = senior_gaps(trainer.model, out, recipe.temperature)
    finally:
        trainer.tandem_rollout.close()
        trainer.reward.close()
    return {
        "arm": recipe.arm,
        "engine": recipe.engine,
        "dtype": recipe.dtype,
        "rollouts": len(out["completion_ids"]),
        "senior_tokens": int(gaps.size),
        "tokens": int(sum(map(len, out["completion_ids"]))),
        "max_gap": float(gaps.max(initial=0.0)),
        "mean_gap": float(gaps.mean()) if gaps.size else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    from .recipe import load_recipe

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", required=True, help="a trainer recipe (YAML)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="recipe overrides, as tandem-train")
    ap.add_argument("--prompts", type=int, default=2, help="training prompts in the batch (each group_size times)")
    ap.add_argument("--tolerance", type=float, default=1e-3, help="exit 1 when the max gap (nats) exceeds it")
    a = ap.parse_args(argv)
    result = check(load_recipe(a.recipe, a.set), a.prompts)
    result["tolerance"] = a.tolerance
    print(json.dumps(result))
    return 0 if result["max_gap"] <= a.tolerance and result["senior_tokens"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
