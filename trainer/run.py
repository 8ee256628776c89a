"""Wiring: recipe -> checkpoints, data, tokenizer, rollout, reward, trl config -> trained run.

    from trainer.recipe import load_recipe
    from trainer.run import train
    out_dir = train(load_recipe("trainer/recipes/cpu-tandem.yaml"))

Output folder: `recipe.yaml` (resolved), `train_log.jsonl`, `checkpoint-N/` (HF format +
tandem_meta.json; N = step x updates_per_step), optionally `evals/` and `eval_log.jsonl`.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path

import yaml

from tandem_eval.devices import torch_dtype
from tandem_eval.engines import backend
from tandem_eval.schemas import ConfigError

from .recipe import Recipe, recipe_to_dict, trl_batch_fields

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental" in trl 1.16


def resolve_checkpoint(name: str, role: str) -> Path:
    """A checkpoint folder for `name`: a path, a bundled `toy:NAME`, or `tiny:DIR` (a random tiny
    senior/junior pair from tandem_eval.toy.tiny, built in DIR on first use; role picks which)."""
    if name.startswith("tiny:"):
        root = Path(name[5:])
        if not (root / "senior" / "config.json").exists():
            from tandem_eval.toy.tiny import build_tiny_pair

            build_tiny_pair(root)
        return (root / role).resolve()
    from tandem_eval.models import resolve_model

    return resolve_model(name).resolve()


def resolve_kl_ref(recipe: Recipe, senior: Path, junior: Path) -> Path:
    """The KL reference checkpoint: `junior` = the frozen junior (the paper's KL-reg ablation; the senior
    itself when self-paired), `init` = the senior's initial checkpoint, else a checkpoint path."""
    if recipe.kl_ref == "init":
        return senior
    if recipe.kl_ref == "junior":
        return junior
    return resolve_checkpoint(recipe.kl_ref, "senior")


def check_vocabularies(senior: Path, others: dict[str, Path]) -> None:
    """One vocabulary for the senior and every model it trains against (the junior whose tokens it
    continues, the KL reference), checked from the tokenizers before any model loads.

    The one check evaluation uses too (tandem_eval.models.check_pair). A reordered vocabulary of the
    same size would otherwise train silently on wrong token ids, and a different size die with an
    IndexError."""
    from tandem_eval.models import ModelError, check_pair

    for role, path in others.items():
        if path != senior and not check_pair(senior, path, allow_mismatch=True):
            raise ModelError(
                f"the {role} {path} has a different vocabulary from the senior {senior} (same strings must map "
                f"to the same token ids); training needs one vocabulary: use a {role} of the senior's model family"
            )


TOY_TRAIN_N, TOY_TRAIN_SEED = 2000, 2000  # the toy world's RL training problems (trainer.toy.world.stage_data)


def toy_problems(recipe: Recipe) -> list | None:
    """`train_data: toy:SCENARIO`: the toy world's RL training problems of that scenario (its difficulty, seed
    2000, `train_limit` or 2000 of them), generated here rather than shipped, so the bundled toy seniors train
    on their own task (cpu-toy-tandem.yaml); None for any other train_data."""
    if not recipe.train_data.startswith("toy:"):
        return None
    from trainer.toy.aggregate import SCENARIOS
    from trainer.toy.scales import DIFFICULTIES
    from trainer.toy.task import Difficulty, generate

    scenario = recipe.train_data.removeprefix("toy:")
    if scenario not in SCENARIOS:
        raise ConfigError(f"train_data {recipe.train_data!r}: no such toy scenario; valid: "
                          + ", ".join(f"toy:{sc}" for sc in SCENARIOS))  # fmt: skip
    n = recipe.train_limit or TOY_TRAIN_N
    return generate("train", n, seed=TOY_TRAIN_SEED, difficulty=DIFFICULTIES.get(scenario, Difficulty()))


def load_train_dataset(recipe: Recipe, tokenizer):
    """trl dataset: one row per problem with `prompt` (the problem text), `answer`, `problem_id`.

    Problems whose chat prompt does not fit are dropped with a warning: longer than
    max_prompt_tokens (the paper: 1,024), or filling max_context."""
    from datasets import Dataset

    from tandem_eval.data import load_benchmark, prompt_ids

    limit = min(recipe.max_prompt_tokens or recipe.max_context, recipe.max_context - 1)
    problems = toy_problems(recipe) or load_benchmark(recipe.train_data, limit=recipe.train_limit)
    rows = [
        {"prompt": p.problem, "answer": p.answer, "problem_id": p.problem_id}
        for p in problems
        if len(prompt_ids(tokenizer, p.problem)) <= limit
    ]
    if len(rows) < len(problems):
        warnings.warn(
            f"dropped {len(problems) - len(rows)} of {len(problems)} training problems whose prompt is longer "
            f"than {limit} tokens",
            stacklevel=2,
        )
    if len(rows) < recipe.prompts_per_step:
        raise ConfigError(
            f"{recipe.train_data} has {len(rows)} usable problems; a step needs "
            f"prompts_per_step={recipe.prompts_per_step}"
        )
    return Dataset.from_list(rows)


def build_trainer(recipe: Recipe, recipe_file: str | None = None):
    """The configured TandemGRPOTrainer (nothing trained yet). The recipe is the trl config."""
    from accelerate import PartialState
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .grpo import TandemGRPOTrainer
    from .rewards import CorrectnessReward
    from .rollout import TandemRollout

    senior = resolve_checkpoint(recipe.senior, "senior")
    junior = resolve_checkpoint(recipe.junior, "junior") if recipe.junior else senior  # self-paired default
    ref = resolve_kl_ref(recipe, senior, junior) if recipe.beta else None
    check_vocabularies(
        senior,
        {**({"junior": junior} if recipe.uses_junior_model else {}), **({"KL reference": ref} if ref else {})},
    )
    n = PartialState().num_processes
    split = trl_batch_fields(recipe, n)
    if any(getattr(recipe, k) != split[k] for k in ("gradient_accumulation_steps", "steps_per_generation")):
        raise ConfigError(f"the recipe was resolved for another number of processes than this run's {n} (WORLD_SIZE)")
    if backend(recipe.engine).trl_colocate:  # its workarounds go in before trl builds its colocate LLM
        from .vllm_compat import install

        install(recipe)
    tokenizer = AutoTokenizer.from_pretrained(str(senior))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dataset = load_train_dataset(recipe, tokenizer)
    model = AutoModelForCausalLM.from_pretrained(str(senior), dtype=torch_dtype(recipe.dtype))
    rollout = TandemRollout(
        recipe, tokenizer, junior if recipe.uses_junior_model else None, {r["prompt"]: r["problem_id"] for r in dataset}
    )
    reward = CorrectnessReward(recipe.grade_timeout, recipe.allow_grader_mismatch)
    with rendezvous_kept():
        return TandemGRPOTrainer(
            recipe=recipe,
            rollout=rollout,
            junior_path=junior,
            senior_path=senior,
            ref_path=ref,
            reward=reward,
            recipe_file=recipe_file,
            model=model,
            args=recipe,
            train_dataset=dataset,
            processing_class=tokenizer,
        )


# torch.distributed's rendezvous variables. trl's colocated vLLM writes them into os.environ for its one-process
# group (trl/generation/vllm_generation.py, trl/trainer/utils.py), on a port this process then holds. Left there, a
# training started later from this process (a notebook's next cell, or a subprocess inheriting them, as the test
# suite's workers start `python -m trainer`) reads LOCAL_RANK, makes a gloo group of its own on that port, and
# fails with EADDRINUSE. The group trl made keeps working without them.
RENDEZVOUS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@contextlib.contextmanager
def rendezvous_kept():
    """Leave the rendezvous variables (RENDEZVOUS) as they were before the block: a launcher's stay, ones the
    block wrote are removed."""
    before = {name: os.environ.get(name) for name in RENDEZVOUS}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_output_dir(output_dir: str | os.PathLike) -> None:
    """output_dir is a folder that exists or can be made: a file at it (or above it) or a read-only
    parent is one line now, not a FileExistsError once the models have loaded."""
    from tandem_eval.paths import not_writable

    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"output_dir {out} is a file; set output_dir to a folder (--set output_dir=PATH)")
    if reason := not_writable(out):
        raise ConfigError(f"output_dir {out} cannot be created or written: {reason}; set another output_dir")


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
    check_output_dir(recipe.output_dir)  # before any model loads: the folder is first written after they do
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
