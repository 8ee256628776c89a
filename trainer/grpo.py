"""`TandemGRPOTrainer`: trl's GRPOTrainer plus the few things tandem training needs around it.

The GRPO loss itself is trl's, untouched. What this subclass adds, each a small labelled change:

* KL-REG CHANGE: trl builds its KL reference model from the senior's own initial checkpoint; here
  it is built from the junior's (identical in the paper's self-paired runs, not otherwise).
* MASK CHECK: after trl has built the loss inputs, the number of loss tokens must equal the number
  of senior-authored tokens the rollout returned -- the paper's code silently trained plain GRPO
  when the author mask was lost; ours stops instead (AuthorshipError).
* Logging: one JSON line per step in OUTPUT_DIR/train_log.jsonl (and the same values, prefixed
  `tandem/`, through trl's report_to).
* Checkpoints: every checkpoint folder gets `tandem_meta.json` (arm, junior, step, recipe, seed,
  schedule), the last step is always saved, and the periodic evaluation hook runs on saved
  checkpoints (`trainer/evaluation.py`).

Steps: one "step" = one rollout batch = `updates_per_step` optimizer updates; trl's global_step
counts optimizer updates, so HF checkpoint folders are `checkpoint-{step * updates_per_step}`.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path

from transformers import TrainerCallback
from trl import GRPOTrainer

from tandem_eval.models import META_FILE

from .recipe import Recipe, recipe_to_dict
from .rollout import AuthorshipError, TandemRollout

LOG_FILE = "train_log.jsonl"


@contextmanager
def _reference_from(junior_path: Path | None):
    """--- KL-REG CHANGE: make trl load its reference model from the junior's checkpoint.

    trl 1.16 builds the reference with `create_model_from_path(<the senior's path>, ...)` inside
    GRPOTrainer.__init__ (then prepares it for DeepSpeed/FSDP exactly like the senior). We swap the
    path for the junior's during __init__ only; `loaded` records the call so the caller can check
    it happened (a trl that builds the reference differently fails loudly instead of regularising
    toward the wrong model)."""
    import trl.trainer.grpo_trainer as grpo_module

    original, loaded = grpo_module.create_model_from_path, []

    def from_junior(model_id, *args, **kwargs):
        loaded.append(model_id)
        return original(str(junior_path), *args, **kwargs)

    if junior_path is not None:
        grpo_module.create_model_from_path = from_junior
    try:
        yield loaded
    finally:
        grpo_module.create_model_from_path = original


class TandemGRPOTrainer(GRPOTrainer):
    def __init__(
        self,
        *,
        recipe: Recipe,
        rollout: TandemRollout,
        junior_path: Path | None,
        reward,
        recipe_file: str | None = None,
        **kwargs,
    ):
        self.recipe, self.tandem_rollout, self.junior_path, self.reward = recipe, rollout, junior_path, reward
        self.recipe_file = recipe_file
        kl_toward = junior_path if recipe.kl_coef else None
        with _reference_from(kl_toward) as loaded:
            super().__init__(reward_funcs=[reward], rollout_func=rollout, **kwargs)
        if kl_toward is not None and len(loaded) != 1:
            raise RuntimeError(
                "trl did not build its reference model through create_model_from_path; the KL "
                "penalty cannot be pointed at the junior with this trl version (pinned: 1.16.0)"
            )
        self.log_path = Path(self.args.output_dir) / LOG_FILE
        self._t0 = time.time()
        self.add_callback(_CheckpointCallback(self))

    # ---- mask check ---------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        # --- TANDEM CHANGE (check): the author mask must be the loss mask, token for token.
        if "tool_mask" not in out:
            raise AuthorshipError("trl dropped the rollout's env_mask: the loss would cover junior tokens")
        n_loss = int((out["completion_mask"] * out["tool_mask"]).sum())
        if n_loss != self.tandem_rollout.last_local_senior_tokens:
            raise AuthorshipError(
                f"the loss mask covers {n_loss} tokens but the rollouts have "
                f"{self.tandem_rollout.last_local_senior_tokens} senior tokens"
            )
        return out

    # ---- logging ------------------------------------------------------------------------
    def log(self, logs: dict, start_time: float | None = None) -> None:
        is_step = self.model.training and "loss" in logs
        stats = self.tandem_rollout.last_stats
        if is_step and stats is not None:
            logs.update({f"tandem/{k}": v for k, v in stats.metrics().items()})
        super().log(logs, start_time)  # trl adds its metrics to `logs` in place, then report_to
        if is_step and self.is_world_process_zero():
            with open(self.log_path, "a") as f:
                f.write(json.dumps(self._record(logs)) + "\n")

    def _record(self, logs: dict) -> dict:
        gs, upd = self.state.global_step, self.recipe.updates_per_step
        rec = {
            "step": gs // upd,
            "optimizer_step": gs,
            "reward": logs.get("reward"),
            "accuracy": logs.get("rewards/correct/mean"),
        }
        rec.update({k.removeprefix("tandem/"): v for k, v in logs.items() if k.startswith("tandem/")})
        if self.beta != 0.0:  # trl's k3 estimate; the reference model is the junior (see above)
            rec["kl_to_junior"] = logs.get("kl")
        for key, name in (
            ("loss", "loss"),
            ("grad_norm", "grad_norm"),
            ("learning_rate", "lr"),
            ("entropy", "entropy"),
            ("clip_ratio/region_mean", "clip_ratio"),
            ("frac_reward_zero_std", "frac_reward_zero_std"),
        ):
            if key in logs:
                rec[name] = logs[key]
        rec["grade_status"] = dict(self.reward.last_status)
        rec["elapsed_s"] = round(time.time() - self._t0, 2)
        return rec

    def truncate_log(self, after_step: int) -> None:
        """On resume: drop log lines of steps after the checkpoint (they will be redone)."""
        if not self.log_path.exists() or not self.is_world_process_zero():
            return
        keep = [
            line
            for line in self.log_path.read_text().splitlines()
            if line.strip() and json.loads(line)["step"] <= after_step
        ]
        self.log_path.write_text("".join(line + "\n" for line in keep))


def write_meta(ckpt: Path, trainer: TandemGRPOTrainer) -> dict:
    recipe = trainer.recipe
    meta = {
        "arm": recipe.arm,
        "junior": str(trainer.junior_path) if trainer.junior_path else None,
        "step": trainer.state.global_step // recipe.updates_per_step,
        "optimizer_step": trainer.state.global_step,
        "recipe": recipe_to_dict(recipe),
        "recipe_file": trainer.recipe_file,
        "seed": recipe.seed,
        "schedule": recipe.schedule,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (ckpt / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


class _CheckpointCallback(TrainerCallback):
    def __init__(self, trainer: TandemGRPOTrainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            control.should_save = True  # the final weights are always a checkpoint
        return control

    def on_save(self, args, state, control, **kwargs):
        tr = self.trainer
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and ckpt.is_dir():
            write_meta(ckpt, tr)
        step = state.global_step // tr.recipe.updates_per_step
        every = tr.recipe.eval.every
        if every and step % every == 0:
            if state.is_world_process_zero:
                from .evaluation import evaluate_checkpoint

                evaluate_checkpoint(ckpt, tr.junior_path, tr.recipe, step)
            tr.accelerator.wait_for_everyone()
        return control
