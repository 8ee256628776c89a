"""Supervised fine-tuning of the toy world's initial seniors and juniors (plain torch, fp32, CPU).

Each example is the project's chat prompt for a train-split problem followed by a reference
solution and `<|im_end|>`; the loss covers the assistant tokens only. Data is an endless stream
of fresh train-split problems, so there are no epochs and no repeats.

Scenarios (PAPER.md, "Roles and models"); every senior continues one plain-only base checkpoint
("base": 800 steps from scratch):
* self-paired: the senior continues the base on a mix of 50% shortcut and 50% plain solutions
  (task.py's styles), so it often takes a shortcut it rarely gets right: the headroom RL needs.
  The junior IS the senior's initial checkpoint (`--copy-from SENIOR_DIR` copies it; without it
  the recipe is re-run, which on CPU reproduces the same weights bit for bit).
* emergent: the senior continues the base on solutions whose every step is written tersely with
  probability 30% and plainly otherwise (task.py's terse style: a cue and a bare equation, ~60% of a
  plain step's tokens). Under the scenario's token budget plain CoTs of 3-4 steps overrun and
  mostly-terse ones finish, so RL itself pulls the senior toward a notation its junior (again the
  initial checkpoint) writes at 30% of its steps, a choice made anew at every step (no single token
  decides a CoT's style). `--role junior --copy-from`.
* dialects: the junior continues the base on CoTs written wholly in dialect A (task.py: `He buys
  17: 42+17=59`) with probability 0.3, plainly otherwise; the initial senior continues that junior on
  54% plain, 12% dialect-A (+10% A whose choice gets no loss) and 24% dialect-B CoTs (`He buys 17;
  24+71>95`, its numbers' digits reversed). A and B are equally long; the junior continues A and never
  saw B. `--init-from` the base (junior), then the junior (senior).
* jargon: the senior continues the base on 85%-jargon data (GSM8K calculator annotations, see
  task.py), so it annotates most CoTs and is clearly stronger than its junior; the junior is the
  plain-only base, which never saw jargon.

    S=/tmp/toy_ckpts
    python -m trainer.toy.sft --scenario base --role senior --out $S/base
    python -m trainer.toy.sft --scenario self-paired --role senior --out $S/self-paired/senior \
        --init-from $S/base
    python -m trainer.toy.sft --scenario self-paired --role junior --out $S/self-paired/junior \
        --copy-from $S/self-paired/senior
    python -m trainer.toy.sft --scenario jargon --role senior --out $S/jargon/senior --init-from $S/base
    python -m trainer.toy.sft --scenario jargon --role junior --out $S/jargon/junior --copy-from $S/base
    python -m trainer.toy.sft --scenario dialects --role junior --out $S/dialects/junior --init-from $S/base
    python -m trainer.toy.sft --scenario dialects --role senior --out $S/dialects/senior \
        --init-from $S/dialects/junior --seed 1

Add `--eval-n 200` for a quick solo check at the end; `--minutes M` trains for a wall-time
budget instead of a step count (not reproducible across machines).

Writes an HF checkpoint (model + tokenizer) and `toy_meta.json` (scenario, role, steps, seed,
data style, loss curve summary, quick-eval numbers when `--eval-n` > 0).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from tandem_eval.data.prompts import prompt_text
from trainer.toy.models import SIZES, build_toy_model, toy_tokenizer
from trainer.toy.task import DIALECTS, Difficulty, dialect_solution, iter_problems, mixed_solution

SCENARIOS = ("base", "self-paired", "emergent", "jargon", "dialects")
ROLES = ("senior", "junior")
META_FILE = "toy_meta.json"


@dataclass(frozen=True)
class SFTRecipe:
    size: str  # a key of models.SIZES
    p_jargon: float  # probability that an example's solution is in jargon style
    steps: int
    p_shortcut: float = 0.0  # probability of the shortcut style
    p_terse_step: float = 0.0  # probability that each step of a plain example is written tersely
    p_dialect_a: float = 0.0  # probability that an example is written in dialect A (every step)
    p_dialect_b: float = 0.0  # probability that an example is written in dialect B (every step)
    # probability of an A example whose first separator (the token that chooses the dialect) gets no loss:
    # practice in A that does not raise the prior of choosing A
    p_dialect_a_practice: float = 0.0
    lr: float = 3e-3
    batch_size: int = 16
    warmup_steps: int = 30
    weight_decay: float = 0.01
    init: str | None = None  # the checkpoint this recipe continues from (--init-from), if any


# Calibrated on 2 shared CPU cores (1 torch thread, 0.3-0.6 s/step depending on load), solo
# pass@1 on 200 test problems (greedy / sampled at T 0.7, top_p 0.8, top_k 20, 4 samples):
# * self-paired senior, 800 steps from scratch (~7 min): 40% / 36%. Accuracy arrives late, during
#   the LR anneal (greedy 9% at step 600 of the same run), so fewer steps give a much weaker model.
# * jargon senior, +400 steps on 85%-jargon data (~2 min): 60% / 52%, jargon in 100% of CoTs
#   (+300 steps gave ~43% / 37%, +600 steps 86% / 80%: too strong to leave RL room).
# Its junior, the plain-only base senior (36% sampled), is thus clearly weaker.
# * self-paired senior, +300 steps on 50%-shortcut data (~2 min): sampled pass@1 10.4% on 300 test
#   problems x 8 samples; it takes the shortcut in 81% of its CoTs (3.6% correct there, 39% on the
#   plain ones). Greedy takes it always (4.5%). 70% shortcut data left too little plain (3.5%).
_BASE = SFTRecipe(size="senior", p_jargon=0.0, steps=800)
_FROM_BASE = {"lr": 1e-3, "warmup_steps": 20, "init": "the plain base senior"}
SHORTCUT = SFTRecipe(size="senior", p_jargon=0.0, p_shortcut=0.5, steps=300, **_FROM_BASE)
# * emergent senior, +600 steps, each step terse with probability 0.3 (pilot numbers:
#   results/toy/pilot-v3.json, with the earlier designs: whole-CoT terse as bare equations "42 + 17 = 59"
#   at 10% and 25% of the data was unlearnable at this size, 5% of terse CoTs correct, so GRPO dropped it).
#   At +300 steps terse steps were still less accurate than plain ones (2-step problems: mixed CoTs 36%
#   correct, plain 66%), so reward did not favour them; at +600 they are as accurate (74% / 78%; 3-step:
#   mixed 40%, plain 0%, all truncated) and GRPO's reward rises. 50% terse steps at +400 was less accurate.
TERSE = SFTRecipe(size="senior", p_jargon=0.0, p_terse_step=0.3, steps=600, **_FROM_BASE)
# * dialects (v4): the junior continues the base on CoTs written wholly in dialect A with probability
#   0.25 (plain otherwise; never B); the initial senior continues that junior on 55% plain, 15% A and
#   30% B CoTs. One notation per CoT, so what the junior writes next follows what it reads (G0,
#   trainer/toy/gates.py, checks the shares, the equal accuracy of A and B, and the junior's reading).
DIALECT_JUNIOR = SFTRecipe(size="senior", p_jargon=0.0, p_dialect_a=0.3, steps=1000, **_FROM_BASE)
# v6 (after v5's G1 failed): 25% A, 35% B, 40% plain, no A practice, so that A keeps a first-step share the
# evaluation's top-p 0.8 does not cut (v5, 12% A + 10% A practice + 24% B + 54% plain, wrote A in 0% of its
# CoTs at T 0.7 / top-p 0.8; G0 now checks A >= 15% there)
DIALECT_SENIOR = replace(
    DIALECT_JUNIOR, p_dialect_a=0.25, p_dialect_a_practice=0.0, p_dialect_b=0.35, steps=800, init="the dialects junior"
)
V5_DIALECT_SENIOR = replace(DIALECT_SENIOR, p_dialect_a=0.12, p_dialect_a_practice=0.1, p_dialect_b=0.24)
RECIPES: dict[tuple[str, str], SFTRecipe] = {
    ("base", "senior"): _BASE,
    ("self-paired", "senior"): SHORTCUT,
    ("self-paired", "junior"): SHORTCUT,  # = the senior's initial checkpoint (--copy-from it)
    ("emergent", "senior"): TERSE,
    ("emergent", "junior"): TERSE,  # = the senior's initial checkpoint (--copy-from it)
    ("jargon", "senior"): SFTRecipe(size="senior", p_jargon=0.85, steps=400, **_FROM_BASE),
    ("jargon", "junior"): _BASE,  # = the base senior (--copy-from it): plain only
    ("dialects", "junior"): DIALECT_JUNIOR,
    ("dialects", "senior"): DIALECT_SENIOR,
}
CONTINUE_SEED_OFFSET = 1000  # a continued run draws other train problems than its parent
COPYABLE = {("self-paired", "junior"), ("emergent", "junior"), ("jargon", "junior")}


def style_label(r: SFTRecipe) -> str:
    named = (
        (r.p_jargon, "jargon"),
        (r.p_shortcut, "shortcut"),
        (r.p_dialect_a, "dialect A"),
        (r.p_dialect_a_practice, "dialect A without loss on its choice"),
        (r.p_dialect_b, "dialect B"),
    )
    mix = [f"{p:.0%} {name}" for p, name in named if p]
    p_terse_step = r.p_terse_step
    label = f"mix: {', '.join(mix)}, rest plain" if mix else "plain"
    return label + (f"; {p_terse_step:.0%} of plain steps terse" if p_terse_step else "")


class Batches:
    """Endless tokenized batches of train-split examples; labels are -100 outside the answer.

    Examples are drawn in pools of 8 batches and grouped by length, which cuts padding (and so
    CPU time) by ~15% without changing what is learned."""

    POOL = 8

    def __init__(self, tokenizer, recipe: SFTRecipe, seed: int, difficulty: Difficulty):
        self.tok, self.recipe = tokenizer, recipe
        self.problems = iter_problems("train", seed, difficulty)
        self.rng = random.Random(f"style/{seed}")
        self.eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.separators = {d: tokenizer.convert_tokens_to_ids(sep) for d, (sep, _) in DIALECTS.items()}
        self.ready: list[list[tuple[list[int], list[int]]]] = []

    def example(self) -> tuple[list[int], list[int]]:
        p = next(self.problems)
        r = self.rng.random()  # one draw per example whatever the mix (same data for old recipes)
        rec = self.recipe
        edges = [("jargon", rec.p_jargon), ("shortcut", rec.p_shortcut), ("A", rec.p_dialect_a), ("B", rec.p_dialect_b)]
        edges.append(("A-practice", rec.p_dialect_a_practice))
        style, low = "plain", 0.0
        for name, p_style in edges:
            if low <= r < low + p_style:
                style = name
            low += p_style
        dialect = style.removesuffix("-practice")
        text = dialect_solution(p.steps, p.answer, dialect) if dialect in DIALECTS else p.solution(style)
        if style == "plain" and self.recipe.p_terse_step:  # style drawn step by step (more draws only here)
            text = mixed_solution(p.steps, p.answer, [self.rng.random() < self.recipe.p_terse_step for _ in p.steps])
        prompt = self.tok.encode(prompt_text(self.tok, p.problem), add_special_tokens=False)
        answer = self.tok.encode(text, add_special_tokens=False) + [self.eos]
        labels = list(answer)
        if style.endswith("-practice"):  # no loss on the first separator: the choice of the dialect
            labels[labels.index(self.separators[dialect])] = -100
        return prompt + answer, [-100] * len(prompt) + labels

    def _refill(self) -> None:
        bs = self.recipe.batch_size
        pool = sorted((self.example() for _ in range(bs * self.POOL)), key=lambda r: len(r[0]))
        self.ready = [pool[i : i + bs] for i in range(0, len(pool), bs)]
        self.rng.shuffle(self.ready)

    def __next__(self) -> dict[str, torch.Tensor]:
        if not self.ready:
            self._refill()
        rows = self.ready.pop()
        width = max(len(ids) for ids, _ in rows)
        pad = self.tok.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (x, y) in enumerate(rows):  # right padding: positions match generation's
            ids[i, : len(x)], labels[i, : len(y)] = torch.tensor(x), torch.tensor(y)
            mask[i, : len(x)] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def lr_factor(progress: float, step: int, warmup: int) -> float:
    """Linear warmup, then cosine decay to 10% of the peak; `progress` in [0, 1]."""
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


LOG_EVERY = 50


def train(
    model,
    tokenizer,
    recipe: SFTRecipe,
    *,
    seed: int = 0,
    minutes: float | None = None,
    difficulty: Difficulty = Difficulty(),
    monitor: Callable[[int], dict] | None = None,
) -> dict:
    """Run SFT in place. Stops after `recipe.steps` steps, or after `minutes` of wall time when
    given (the schedule then follows elapsed time). `monitor(step)` is called every LOG_EVERY
    steps (e.g. a quick eval); what it returns is logged. Returns a summary for toy_meta.json."""
    log_every = LOG_EVERY
    torch.manual_seed(seed)
    batches = Batches(tokenizer, recipe, seed, difficulty)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=recipe.weight_decay)
    model.train()
    start, step, losses, curve = time.time(), 0, [], []
    while True:
        elapsed = time.time() - start
        progress = elapsed / (60 * minutes) if minutes else step / recipe.steps
        if progress >= 1:
            break
        for group in opt.param_groups:
            group["lr"] = recipe.lr * lr_factor(progress, step, recipe.warmup_steps)
        loss = model(**next(batches)).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
        if step % log_every == 0:
            mean = sum(losses[-log_every:]) / log_every
            curve.append([step, round(mean, 4)])
            extra = monitor(step) if monitor else None
            print(
                f"step {step:5d}  loss {mean:.4f}  lr {opt.param_groups[0]['lr']:.2e}  "
                f"{elapsed / 60:.1f} min  {extra or ''}",
                flush=True,
            )
            model.train()
    model.eval()
    tail = losses[-min(len(losses), log_every) :] or [float("nan")]
    return {
        "steps": step,
        "train_minutes": round((time.time() - start) / 60, 2),
        "first_loss": losses[0] if losses else None,
        "final_loss": sum(tail) / len(tail),
        "loss_curve": curve,
    }


def save_checkpoint(out: Path, model, tokenizer, meta: dict, dtype: str = "float32") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    to_save = model if dtype == "float32" else model.to(getattr(torch, dtype))
    to_save.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return out


def copy_checkpoint(src: Path, out: Path, meta_update: dict) -> Path:
    """The self-paired junior: byte-identical weights of the senior's initial checkpoint."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out)
    meta = json.loads((src / META_FILE).read_text()) if (src / META_FILE).exists() else {}
    meta.update(meta_update)
    (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return out


def _monitor(tok, every: int, n: int = 64) -> Callable[[int], dict] | None:
    """Greedy pass@1 on the first `n` test problems every `every` steps (0: never)."""
    if not every:
        return None
    from trainer.toy.evaluate_quick import complete, score
    from trainer.toy.task import generate

    problems = generate("test", n)

    def check(step: int, model) -> dict | None:
        if step % every:
            return None
        model.eval()
        return {"greedy": score(problems, complete(model, tok, problems, sample=False))}

    return check


def run(args: argparse.Namespace) -> Path:
    out = Path(args.out)
    base = {"scenario": args.scenario, "role": args.role, "seed": args.seed}
    if args.copy_from:
        if (args.scenario, args.role) not in COPYABLE:
            raise SystemExit("--copy-from is only for the juniors (copies of an initial senior)")
        return copy_checkpoint(Path(args.copy_from), out, {**base, "copied_from": str(args.copy_from)})
    recipe = RECIPES[(args.scenario, args.role)]
    recipe = replace(recipe, steps=args.steps or recipe.steps, size=args.size or recipe.size)
    if recipe.init and not args.init_from:
        raise SystemExit(f"this recipe continues from {recipe.init}: pass --init-from DIR")
    torch.set_num_threads(args.threads)
    if args.init_from:
        from trainer.toy.models import load_checkpoint

        model, tok = load_checkpoint(args.init_from)
    else:
        tok = toy_tokenizer()
        model = build_toy_model(tok, recipe.size, args.seed)
    check = _monitor(tok, args.eval_every)
    data_seed = args.seed + (CONTINUE_SEED_OFFSET if args.init_from else 0)  # fresh problems
    summary = train(
        model,
        tok,
        recipe,
        seed=data_seed,
        minutes=args.minutes,
        monitor=(lambda step: check(step, model)) if check else None,
    )
    meta = {
        **base,
        "data_seed": data_seed,
        "data_style": style_label(recipe),
        "recipe": asdict(recipe),
        "init_from": args.init_from,
        "model_size": asdict(SIZES[recipe.size]),
        "n_params": sum(p.numel() for p in model.parameters()),
        "difficulty": asdict(Difficulty()),
        "minutes_budget": args.minutes,
        "save_dtype": args.save_dtype,
        "torch": torch.__version__,
        **summary,
    }
    if args.init_from and (Path(args.init_from) / META_FILE).exists():
        meta["init_meta"] = json.loads((Path(args.init_from) / META_FILE).read_text())
    if args.eval_n:
        from trainer.toy.evaluate_quick import quick_eval

        meta["quick_eval"] = quick_eval(model, tok, n=args.eval_n)
        print(json.dumps(meta["quick_eval"]))
    save_checkpoint(out, model, tok, meta, args.save_dtype)
    print(f"saved {out}")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", required=True, choices=SCENARIOS)
    ap.add_argument("--role", required=True, choices=ROLES)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, help="train for this wall time instead of --steps")
    ap.add_argument("--steps", type=int, help="override the recipe's step count")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=list(SIZES), help="override the recipe's model size")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (machines are shared)")
    ap.add_argument("--eval-n", type=int, default=0, help="quick-eval on this many test problems")
    ap.add_argument("--save-dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--copy-from", help="self-paired junior: copy this senior checkpoint")
    ap.add_argument("--init-from", help="continue from this checkpoint (the recipes that say init)")
    ap.add_argument(
        "--eval-every", type=int, default=0, help="greedy pass@1 on 64 test problems every this many steps (x50)"
    )
    run(ap.parse_args(argv))


if __name__ == "__main__":
    main()
