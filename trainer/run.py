"""Wiring: recipe -> checkpoints, data, tokenizer, rollout, reward, trl config -> trained run.

    from trainer.recipe import load_recipe
    from trainer.run import train
    out_dir = train(load_recipe("trainer/recipes/cpu-tandem.yaml"))

Output folder: `recipe.yaml` (resolved), `train_log.jsonl`, `checkpoint-N/` (HF format +
tandem_meta.json; N = step x updates_per_step), optionally `evals/` and `eval_log.jsonl`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import yaml

from tandem_eval.config import ConfigError

from .recipe import Recipe, grpo_config_kwargs, recipe_to_dict

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental" in trl 1.16


def resolve_checkpoint(name: str, role: str) -> Path:
    """A checkpoint folder for `name`: a path, a bundled `toy:NAME`, or `tiny:DIR` (a random tiny
    senior/junior pair from tandem_eval.tiny, built in DIR on first use; role picks which)."""
    if name.startswith("tiny:"):
        root = Path(name[5:])
        if not (root / "senior" / "config.json").exists():
            from tandem_eval.tiny import build_tiny_pair

            build_tiny_pair(root)
        return (root / role).resolve()
    from tandem_eval.models import resolve_model

    return resolve_model(name).resolve()


def load_train_dataset(recipe: Recipe, tokenizer):
    """trl dataset: one row per problem with `prompt` (the problem text), `answer`, `problem_id`."""
    from datasets import Dataset

    from tandem_eval.data import load_benchmark, prompt_ids

    problems = load_benchmark(recipe.train_data, limit=recipe.train_limit)
    rows = [
        {"prompt": p.problem, "answer": p.answer, "problem_id": p.problem_id}
        for p in problems
        if len(prompt_ids(tokenizer, p.problem)) < recipe.max_context
    ]
    if len(rows) < len(problems):
        warnings.warn(
            f"dropped {len(problems) - len(rows)} training problems whose prompt fills max_context", stacklevel=2
        )
    if len(rows) < recipe.prompts_per_step:
        raise ConfigError(
            f"{recipe.train_data} has {len(rows)} usable problems; a step needs "
            f"prompts_per_step={recipe.prompts_per_step}"
        )
    return Dataset.from_list(rows)


def build_trainer(recipe: Recipe, recipe_file: str | None = None):
    """The configured TandemGRPOTrainer (nothing trained yet)."""
    import torch
    from accelerate import PartialState
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from .grpo import TandemGRPOTrainer
    from .rewards import CorrectnessReward
    from .rollout import TandemRollout

    senior = resolve_checkpoint(recipe.senior, "senior")
    junior = resolve_checkpoint(recipe.junior, "junior") if recipe.junior else senior  # self-paired default
    if recipe.engine == "vllm":
        from .vllm_compat import install

        install(recipe)
    args = GRPOConfig(**grpo_config_kwargs(recipe, PartialState().num_processes))
    tokenizer = AutoTokenizer.from_pretrained(str(senior))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dataset = load_train_dataset(recipe, tokenizer)
    model = AutoModelForCausalLM.from_pretrained(str(senior), dtype=getattr(torch, recipe.dtype))
    rollout = TandemRollout(
        recipe, tokenizer, junior if recipe.uses_junior_model else None, {r["prompt"]: r["problem_id"] for r in dataset}
    )
    reward = CorrectnessReward(recipe.grade_timeout, recipe.allow_grader_mismatch)
    return TandemGRPOTrainer(
        recipe=recipe,
        rollout=rollout,
        junior_path=junior,
        reward=reward,
        recipe_file=recipe_file,
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )


def find_resume(recipe: Recipe, resume: str | None) -> str | None:
    """`auto` = the latest checkpoint in output_dir (None if there is none); else a path."""
    from transformers.trainer_utils import get_last_checkpoint

    out = Path(recipe.output_dir)
    if resume is None:
        if out.is_dir() and get_last_checkpoint(str(out)):
            raise ConfigError(
                f"{out} already holds checkpoints; pass --resume auto to continue that run, "
                "or choose another output_dir"
            )
        return None
    path = (
        get_last_checkpoint(str(out)) if resume == "auto" and out.is_dir() else (None if resume == "auto" else resume)
    )
    if path is None:
        return None
    from tandem_eval.models import metadata

    meta = metadata(Path(path))
    for key in ("arm", "schedule", "seed"):
        if meta and meta.get(key) != getattr(recipe, key):
            raise ConfigError(
                f"cannot resume {path}: its {key} is {meta.get(key)!r}, the recipe says {getattr(recipe, key)!r}"
            )
    return str(path)


def train(recipe: Recipe, recipe_file: str | None = None, resume: str | None = None) -> Path:
    """Train a recipe end to end (or continue from a checkpoint); returns the output folder."""
    checkpoint = find_resume(recipe, resume)
    trainer = build_trainer(recipe, recipe_file)
    out = Path(recipe.output_dir)
    try:
        if trainer.is_world_process_zero():
            out.mkdir(parents=True, exist_ok=True)
            (out / "recipe.yaml").write_text(yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False))
            if checkpoint is not None:
                from tandem_eval.models import metadata

                step = metadata(Path(checkpoint)).get("step")
                if step is None:  # an HF checkpoint without our metadata: checkpoint-N, N optimizer updates
                    step = int(Path(checkpoint).name.rsplit("-", 1)[-1]) // recipe.updates_per_step
                trainer.truncate_log(step)
        trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        trainer.tandem_rollout.close()
        trainer.reward.close()
    return out
