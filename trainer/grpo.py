"""`TandemGRPOTrainer`: trl's GRPOTrainer plus the few things tandem training needs around it.

The GRPO loss itself is trl's, untouched. What this subclass adds, each a small labelled change:

* KL-REG CHANGE: trl builds its KL reference model from the senior's own initial checkpoint; we
  build it from `kl_ref`: the frozen junior (`junior`, the paper's KL-reg ablation and the default),
  the senior's initial checkpoint (`init`), or a path (all identical in self-paired runs). The per-token k3 estimate
  is clamped to [-kl_clamp, kl_clamp] (10, as verl's low_var_kl).
* MASK CHECK: after trl has built the loss inputs, the number of loss tokens must equal the number
  of senior-authored tokens the rollout returned -- the paper's code silently trained plain GRPO
  when the author mask was lost; ours stops instead (AuthorshipError).
* Logging: trl's own log keys, unrenamed, go to `report_to` (trackio by default), together with
  the tandem metrics prefixed `tandem/` (senior fraction, handoffs per sequence, tokens per
  segment, KL to the junior when the KL reference is the junior); one JSON line per step in
  OUTPUT_DIR/train_log.jsonl is the offline record (short names, see `_record`); with `log_rollouts`,
  OUTPUT_DIR/rollouts.jsonl holds every rollout's reward and its text by author.
* NO-SIGNAL WARNING: when every group of rollouts scored the same (trl's frac_reward_zero_std = 1)
  for NO_SIGNAL_STEPS steps in a row, GRPO's advantages are all 0 and the weights do not move: one
  logged warning says so and what to change (a senior that solves some of the problems, a larger
  group, a longer completion budget), instead of a run that logs reward 0 and says nothing.
* Checkpoints: every checkpoint folder gets `tandem_meta.json` (arm, junior, step, recipe, seed,
  schedule) and a model card `README.md` (arm, junior, schedule, recipe, steps, and the held-out
  pass@k and tax when the evaluation hook ran); the last step is always saved, and the periodic
  evaluation hook runs on saved checkpoints (`trainer/evaluation.py`). `push_to_hub` is trl's and
  pushes the same card.

Steps: one "step" = one rollout batch = `updates_per_step` optimizer updates; trl's global_step
counts optimizer updates, so HF checkpoint folders are `checkpoint-{step * updates_per_step}`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from contextlib import contextmanager
from pathlib import Path

import torch
import yaml
from transformers import ProgressCallback, TrainerCallback
from trl import GRPOTrainer

from tandem_eval.models import META_FILE

from .recipe import Recipe, recipe_to_dict
from .rollout import AuthorshipError, TandemRollout

LOG_FILE = "train_log.jsonl"
NO_SIGNAL_STEPS = 3  # flat steps in a row before the no-signal warning (one flat step is common early on)
log = logging.getLogger(__name__)
ROLLOUT_FILE = "rollouts.jsonl"


@contextmanager
def _reference_from(ref_path: Path | None):
    """--- KL-REG CHANGE: make trl load its reference model from `ref_path` (kl_ref resolved).

    trl 1.16 builds the reference with `create_model_from_path(<the senior's path>, ...)` inside
    GRPOTrainer.__init__ (then prepares it for DeepSpeed/FSDP exactly like the senior). We pin the
    path during __init__ only -- to the senior's initial checkpoint too, so the reference is the
    recipe's `senior` whatever trl reads from the model config; `loaded` records the call so the
    caller can check it happened (a trl that builds the reference differently fails loudly instead
    of regularising toward the wrong model)."""
    import trl.trainer.grpo_trainer as grpo_module

    original, loaded = grpo_module.create_model_from_path, []

    def from_ref(model_id, *args, **kwargs):
        loaded.append(model_id)
        return original(str(ref_path), *args, **kwargs)

    if ref_path is not None:
        grpo_module.create_model_from_path = from_ref
    try:
        yield loaded
    finally:
        grpo_module.create_model_from_path = original


def k3_log_ratio_bounds(clamp: float) -> tuple[float, float]:
    """The log-ratios d = log pi_ref - log pi where k3(d) = e^d - d - 1 equals `clamp`.

    k3 is convex with k3(0) = 0, so clamping d to these bounds gives exactly verl's low_var_kl,
    clamp(k3, -C, C), in value and in gradient (zero where the clamp binds)."""
    k3 = lambda d: math.exp(d) - d - 1.0  # noqa: E731
    lo, hi = -clamp - 1.0, 0.0  # k3 falls from >= C to 0 on [lo, 0]
    for _ in range(100):
        m = (lo + hi) / 2
        lo, hi = (m, hi) if k3(m) > clamp else (lo, m)
    neg = (lo + hi) / 2
    lo, hi = 0.0, math.log(clamp + 1.0) + 1.0  # k3 rises from 0 to >= C on [0, hi]
    for _ in range(100):
        m = (lo + hi) / 2
        lo, hi = (lo, m) if k3(m) > clamp else (m, hi)
    return neg, (lo + hi) / 2


class _ClampedLogRatio(torch.Tensor):
    """The reference log-probs, as trl's `_compute_loss` receives them: `ref - logp` (trl's k3 is
    exp(ref - logp) - (ref - logp) - 1) comes out clamped to `k3_log_ratio_bounds`, so the
    per-token KL is clamped as verl does without copying trl's loss code."""

    bounds: tuple[float, float] = (-math.inf, math.inf)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        if isinstance(out, torch.Tensor):
            out = out.as_subclass(torch.Tensor)  # nothing downstream stays a _ClampedLogRatio
            if func in (torch.Tensor.sub, torch.Tensor.__sub__, torch.sub) and isinstance(args[0], cls):
                out = out.clamp(*args[0].bounds)  # ref - logp, the log-ratio
        return out


class TandemGRPOTrainer(GRPOTrainer):
    def __init__(
        self,
        *,
        recipe: Recipe,
        rollout: TandemRollout,
        junior_path: Path | None,
        reward,
        senior_path: Path | None = None,
        ref_path: Path | None = None,
        recipe_file: str | None = None,
        **kwargs,
    ):
        self.recipe, self.tandem_rollout, self.junior_path, self.reward = recipe, rollout, junior_path, reward
        self.senior_path, self.ref_path, self.recipe_file = senior_path, ref_path, recipe_file
        self.last_eval: dict | None = None  # the evaluation hook's latest record (for the model card)
        kl_toward = ref_path if recipe.beta else None
        with _reference_from(kl_toward) as loaded:
            super().__init__(reward_funcs=[reward], rollout_func=rollout, **kwargs)
        if kl_toward is not None and len(loaded) != 1:
            raise RuntimeError(
                "trl did not build its reference model through create_model_from_path; the KL "
                "penalty cannot be pointed at kl_ref with this trl version (pinned: 1.16.0)"
            )
        self.log_path = Path(self.args.output_dir) / LOG_FILE
        self._t0 = time.time()
        self._flat_steps = 0  # consecutive steps whose every group had zero reward variance
        self.add_callback(_CheckpointCallback(self))
        if any(isinstance(c, ProgressCallback) for c in self.callback_handler.callbacks):
            # the bar in the steps the recipe asked for (rollout batches), not trl's optimizer updates
            # (a `steps: 4` run with updates_per_step 2 showed 0/8)
            self.remove_callback(ProgressCallback)
            self.add_callback(_StepProgress(recipe.updates_per_step))

    @property
    def kl_to_junior(self) -> bool:
        """The KL penalty's reference is the junior (kl_ref: junior, or init when self-paired)."""
        return bool(self.beta) and self.ref_path is not None and self.ref_path == self.junior_path

    # ---- clamped k3 ---------------------------------------------------------------------
    def _compute_loss(self, model, inputs):
        if self.beta != 0.0 and self.recipe.kl_clamp is not None and "ref_per_token_logps" in inputs:
            # --- KL-REG CHANGE: verl's low_var_kl clamp (see _ClampedLogRatio).
            ref = inputs["ref_per_token_logps"].as_subclass(_ClampedLogRatio)
            ref.bounds = k3_log_ratio_bounds(self.recipe.kl_clamp)
            inputs = {**inputs, "ref_per_token_logps": ref}
        return super()._compute_loss(model, inputs)

    def create_model_card(self, model_name=None, dataset_name=None, tags=None, **kwargs):
        """trl's hook (push_to_hub, end of training): our card, for the latest step, in output_dir."""
        if self.is_world_process_zero():
            step = self.state.global_step // self.recipe.updates_per_step
            model_card(self, step, self.last_eval).save(Path(self.args.output_dir) / "README.md")

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
        if self.recipe.log_rollouts:
            self._log_rollouts(out)
        return out

    def _log_rollouts(self, out: dict) -> None:
        """log_rollouts: one JSON line per rollout of this batch in OUTPUT_DIR/rollouts.jsonl (one file per
        process, rollouts-rank<i>.jsonl, when there are several): the step it trains (train_log's), its
        reward, and its text as [author, text] segments (1 = senior; the author mask decoded run by run)."""
        step = self.state.global_step // self.recipe.updates_per_step + 1
        rank = self.accelerator.process_index
        name = ROLLOUT_FILE if self.accelerator.num_processes == 1 else f"rollouts-rank{rank}.jsonl"
        rows = zip(out["completion_ids"].tolist(), out["completion_mask"].tolist(), out["tool_mask"].tolist())
        lines = []
        for (ids, keep, authors), reward in zip(rows, self.reward.last_rewards, strict=True):
            segments: list[list] = []
            for tok, k, a in zip(ids, keep, authors):
                if not k:
                    break
                if segments and segments[-1][0] == int(a):
                    segments[-1][1].append(tok)
                else:
                    segments.append([int(a), [tok]])
            text = [[a, self.processing_class.decode(t, skip_special_tokens=True)] for a, t in segments]
            lines.append(json.dumps({"step": step, "reward": reward, "segments": text}))
        with open(Path(self.args.output_dir) / name, "a") as f:
            f.write("".join(line + "\n" for line in lines))

    # ---- logging ------------------------------------------------------------------------
    def log(self, logs: dict, start_time: float | None = None) -> None:
        is_step = self.model.training and "loss" in logs
        stats = self.tandem_rollout.last_stats
        if is_step and stats is not None:
            logs.update({f"tandem/{k}": v for k, v in stats.metrics().items()})
        kl = [v for v in self._metrics["train"].get("kl", []) if not math.isnan(v)]
        if is_step and self.kl_to_junior and kl:
            logs["tandem/kl_to_junior"] = sum(kl) / len(kl)  # = trl's `kl` (averaged as trl does)
        # trl adds its metrics to `logs` in place (its own keys, unrenamed), then report_to
        super().log(logs, start_time)
        if is_step and self.is_world_process_zero():
            with open(self.log_path, "a") as f:
                f.write(json.dumps(self._record(logs)) + "\n")
            self._check_signal(logs)

    def _check_signal(self, logs: dict) -> None:
        """The no-signal warning (module docstring), once per run of flat steps."""
        self._flat_steps = self._flat_steps + 1 if logs.get("frac_reward_zero_std") == 1.0 else 0
        if self._flat_steps == NO_SIGNAL_STEPS:
            log.warning(
                "no learning signal: every rollout of each prompt scored the same (reward %s) for the last %d "
                "steps, so GRPO's advantages are 0 and the weights do not change. Start from a senior that already "
                "solves some of these problems (`python -m trainer.engine_curves` shows the toy world's "
                "toy:emergent/init learning on its own task), raise num_generations, or raise "
                "max_completion_length if the rollouts hit it (tandem/truncation_rate %s)",
                logs.get("reward"),
                NO_SIGNAL_STEPS,
                logs.get("tandem/truncation_rate"),
            )

    def _record(self, logs: dict) -> dict:
        gs, upd = self.state.global_step, self.recipe.updates_per_step
        rec = {
            "step": gs // upd,
            "optimizer_step": gs,
            "reward": logs.get("reward"),
            "accuracy": logs.get("rewards/correct/mean"),
        }
        rec.update({k.removeprefix("tandem/"): v for k, v in logs.items() if k.startswith("tandem/")})
        if self.beta != 0.0:  # trl's k3 estimate (clamped) toward kl_ref
            rec["kl"], rec["kl_ref"] = logs.get("kl"), self.recipe.kl_ref
            if self.kl_to_junior:
                rec["kl_to_junior"] = logs.get("kl")
        for key, name in (
            ("loss", "loss"),
            ("grad_norm", "grad_norm"),
            ("learning_rate", "lr"),
            ("entropy", "entropy"),
            ("clip_ratio/region_mean", "clip_ratio"),
            ("frac_reward_zero_std", "frac_reward_zero_std"),
            # trl's rollout/trainer log-prob agreement (vLLM with the importance-sampling correction on)
            ("sampling/sampling_logp_difference/mean", "sampling_logp_difference"),
            ("sampling/importance_sampling_ratio/mean", "is_ratio"),
        ):
            if key in logs:
                rec[name] = logs[key]
        rec["grade_status"] = dict(self.reward.last_status)
        rec["elapsed_s"] = round(time.time() - self._t0, 2)
        return rec

    def truncate_log(self, after_step: int) -> None:
        """On resume: drop the step log's and the rollout logs' lines of steps after the checkpoint (they
        will be redone)."""
        if not self.is_world_process_zero():
            return
        for path in (self.log_path, *self.log_path.parent.glob("rollouts*.jsonl")):
            if not path.exists():
                continue
            keep = [
                line
                for line in path.read_text().splitlines()
                if line.strip() and json.loads(line)["step"] <= after_step
            ]
            path.write_text("".join(line + "\n" for line in keep))


def write_meta(ckpt: Path, trainer: TandemGRPOTrainer) -> dict:
    recipe = trainer.recipe
    meta = {
        "arm": recipe.arm,
        "junior": str(trainer.junior_path) if trainer.junior_path else None,
        # the KL reference as resolved (a path), or None when the run has no KL term (beta 0): the
        # recipe's kl_ref choice (recorded under "recipe") then applies to nothing
        "kl_ref": str(trainer.ref_path) if recipe.beta and trainer.ref_path else None,
        "beta": recipe.beta,
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


def model_card(trainer: TandemGRPOTrainer, step: int, evaluation: dict | None = None):
    """A huggingface_hub ModelCard for the senior at `step`: arm, junior, schedule, recipe, steps,
    and the held-out solo/handoff pass@k and tax when the evaluation hook ran at this step."""
    from huggingface_hub import ModelCard, ModelCardData

    r = trainer.recipe
    senior = _public(r.senior if trainer.senior_path is None else str(trainer.senior_path))
    junior = _public(str(trainer.junior_path)) if trainer.junior_path else "(none)"
    data = ModelCardData(
        library_name="transformers",
        tags=["trl", "grpo", "tandem-eval", f"arm:{r.arm}"],
        base_model=r.senior if re.fullmatch(r"[\w.-]+/[\w.-]+", r.senior) and not Path(r.senior).exists() else None,
    )
    rows = [
        ("arm", f"`{r.arm}`"),
        ("initial senior", f"`{senior}`"),
        ("junior", f"`{junior}`"),
        ("rollout schedule", f"`{r.schedule}`"),
        ("recipe", f"`{_public(trainer.recipe_file) if trainer.recipe_file else '(built in code)'}` (resolved below)"),
        ("training steps", f"{step} rollout batches = {step * r.updates_per_step} optimizer updates"),
        ("seed", str(r.seed)),
    ]
    if r.beta:
        ref = _public(trainer.ref_path)
        rows.append(("KL penalty", f"beta {r.beta}, k3 clamped to {r.kl_clamp}, reference `{ref}`"))
    lines = [
        f"# {Path(r.output_dir).name}: {r.arm} senior, step {step}",
        "",
        "Trained with the tandem-eval trainer (trl `GRPOTrainer`; the loss covers senior-written tokens only "
        "when rollouts are co-generated with the junior).",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in rows),
        "",
    ]
    if evaluation and evaluation.get("step") == step:
        lines += ["## Held-out evaluation", "", *_eval_lines(evaluation, r.eval.schedule), ""]
    else:
        lines += ["## Held-out evaluation", "", "The evaluation hook did not run at this step.", ""]
    recipe = {k: _public(v) if isinstance(v, str) else v for k, v in recipe_to_dict(r).items()}
    lines += ["## Recipe", "", "```yaml", yaml.safe_dump(recipe, sort_keys=False).rstrip(), "```", ""]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines))


def _public(value) -> str:
    """A path as a model card may show it: `push_to_hub` publishes the card, and another reader's machine
    has none of this one's folders, so a local absolute path becomes its folder name, marked local
    (a hub id, a `toy:`/`tiny:` name, a relative path or a plain value stays as it is)."""
    text = str(value)
    path = Path(text).expanduser()
    if text.startswith(("/", "~")) and path.is_absolute():
        return f"{path.name} (local folder)"
    return text


def _eval_lines(rec: dict, schedule: str) -> list[str]:
    """Macro pass@k (percent) of the solo and handoff runs and the tax, each with its 95% bootstrap CI
    over problems, and n (problems, samples per problem), as a Markdown table."""

    def fmt(v, ci=None):
        if v is None:
            return "-"
        return f"{v:.2f}" if not ci or None in ci else f"{v:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"

    solo_rec, handoff_rec = rec.get("solo") or {}, rec.get("handoff") or {}
    solo, handoff = solo_rec.get("macro") or {}, handoff_rec.get("macro") or {}
    solo_ci = (solo_rec.get("ci") or {}).get("macro") or {}
    handoff_ci = (handoff_rec.get("ci") or {}).get("macro") or {}
    tax = ((rec.get("tax") or {}).get("macro")) or {}
    ks = list(solo) or list(handoff)
    n = (solo_rec.get("n_problems") or {}).get("macro")
    size = f"n = {n} problems x {rec['n']} samples each" if n and rec.get("n") else "n not recorded"
    out = [f"Macro over the held-out groups, percent, 95% bootstrap CI over problems ({size}); "
           f"handoff schedule `{schedule}`.", ""]  # fmt: skip
    out += ["| | " + " | ".join(ks) + " |", "|---|" + "---|" * len(ks)]
    out.append("| solo | " + " | ".join(fmt(solo.get(k), solo_ci.get(k)) for k in ks) + " |")
    if handoff:
        out.append("| handoff | " + " | ".join(fmt(handoff.get(k), handoff_ci.get(k)) for k in ks) + " |")
    if tax:
        cells = []
        for k in ks:
            t = (tax.get(k) or {}).get("tax", {})
            cells.append(fmt(t.get("estimate"), [t.get("low"), t.get("high")]))
        out.append("| tax | " + " | ".join(cells) + " |")
    return out


class _StepProgress(TrainerCallback):
    """A tqdm bar over rollout batches ("steps" of the recipe): transformers' ProgressCallback counts
    optimizer updates, `updates_per_step` per batch."""

    def __init__(self, updates_per_step: int):
        self.per, self.bar = max(1, updates_per_step), None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            from tqdm.auto import tqdm

            total = -(-state.max_steps // self.per) if state.max_steps > 0 else None
            self.bar = tqdm(total=total, initial=state.global_step // self.per, unit="step", desc="training")

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None and state.global_step % self.per == 0:
            self.bar.update(state.global_step // self.per - self.bar.n)

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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
        step = state.global_step // tr.recipe.updates_per_step
        if state.is_world_process_zero and ckpt.is_dir():
            write_meta(ckpt, tr)
            model_card(tr, step).save(ckpt / "README.md")
        every = tr.recipe.eval.every
        if every and step % every == 0:
            if state.is_world_process_zero:
                from .evaluation import evaluate_checkpoint

                tr.last_eval = evaluate_checkpoint(ckpt, tr.junior_path, tr.recipe, step)
                if ckpt.is_dir():
                    model_card(tr, step, tr.last_eval).save(ckpt / "README.md")
            tr.accelerator.wait_for_everyone()
        return control
