"""lm-evaluation-harness model `tandem`: lm-eval's CLI and simple_evaluate on local tasks with the bundled toy pair.

Tasks are YAML files written into tmp (`dataset_path: json` + local `data_files`), so nothing is downloaded.
"""

import json
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("lm_eval")

from lm_eval import simple_evaluate  # noqa: E402
from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.api.registry import get_model  # noqa: E402
from lm_eval.loggers import EvaluationTracker  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from tandem_eval.data.prompts import user_message  # noqa: E402
from tandem_eval.integrations.lm_eval_cli import run_lm_eval  # noqa: E402
from tandem_eval.integrations.lm_eval_model import TandemLM  # noqa: E402
from tandem_eval.integrations.lm_eval_tax import lm_eval_tax, read_samples  # noqa: E402
from tandem_eval.models import TOY_DIR  # noqa: E402
from tandem_eval.schemas import ConfigError  # noqa: E402

SENIOR, JUNIOR = "toy:self-paired/tandem", "toy:self-paired/junior"
TASK, MC_TASK = "tandem_toy_arith", "tandem_toy_choice"
N_DOCS = 6


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    """A generate_until task (boxed exact match) and a multiple-choice task on the toy test problems."""
    d = tmp_path_factory.mktemp("tasks")
    rows = [json.loads(line) for line in (TOY_DIR.parent / "data" / "test.jsonl").read_text().splitlines()[:N_DOCS]]
    data = d / "arith.jsonl"
    data.write_text("".join(json.dumps({**r, "prompt": user_message(r["problem"])}) + "\n" for r in rows))
    choice = d / "choice.jsonl"
    choice.write_text(
        "".join(json.dumps({**r, "choices": [r["answer"], str(int(r["answer"]) + 7)], "label": 0}) + "\n" for r in rows)
    )
    (d / "arith.yaml").write_text(
        f"task: {TASK}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
        "output_type: generate_until\ndoc_to_text: '{{prompt}}'\ndoc_to_target: '{{answer}}'\n"
        "generation_kwargs:\n  until: ['<|im_end|>']\n  max_gen_toks: 96\n  do_sample: false\n"
        "filter_list:\n  - name: boxed\n    filter:\n      - function: regex\n"
        "        regex_pattern: 'boxed\\{(-?[0-9]+)\\}'\n      - function: take_first\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n"
    )
    (d / "choice.yaml").write_text(
        f"task: {MC_TASK}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {choice}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{problem}} The answer is'\n"
        "doc_to_choice: choices\ndoc_to_target: label\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
    )
    return d


@pytest.fixture(scope="module")
def paragraph_run(task_dir, tmp_path_factory):
    """What `tandem-eval lm-eval --model tandem ... schedule=paragraph` runs (in-process): results + sample logs."""
    out = tmp_path_factory.mktemp("lm-eval-paragraph")
    args = ["--model", "tandem", "--model_args", f"senior={SENIOR},junior={JUNIOR},schedule=paragraph"]
    args += ["--tasks", TASK, "--include_path", str(task_dir), "--apply_chat_template", "--batch_size", "8"]
    run_lm_eval([*args, "--output_path", str(out), "--log_samples"])
    return out


def _tm(task_dir):
    return TaskManager(include_path=str(task_dir), include_defaults=False)  # skip indexing lm-eval's own tasks


def test_cli_writes_lm_eval_results_and_samples_with_author_masks(paragraph_run):
    [results] = paragraph_run.rglob("results_*.json")
    assert 0 <= json.loads(results.read_text())["results"][TASK]["exact_match,boxed"] <= 1
    samples = read_samples(paragraph_run)
    assert len(samples) == N_DOCS and set(samples.schedule) == {"paragraph"}
    for row in samples.itertuples():
        assert len(row.author_mask) == row.n_tokens == len(row.token_ids) > 0
        assert row.n_handoffs == sum(a != b for a, b in zip(row.author_mask, row.author_mask[1:]))
        assert row.author_mask[0] == 1  # the senior writes the first paragraph
    assert (samples.n_handoffs > 0).any() and {0, 1} <= {a for m in samples.author_mask for a in m}


def test_tandem_eval_lm_eval_forwards_to_lm_evals_cli():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "tandem_eval.cli", "lm-eval", "run", "--help"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and "--model_args" in out.stdout and "--log_samples" in out.stdout


def test_solo_run_and_tax_from_both_sample_logs(paragraph_run, task_dir, tmp_path):
    tracker = EvaluationTracker(output_path=str(tmp_path / "solo"))
    out = simple_evaluate(
        evaluation_tracker=tracker,
        model="tandem",
        model_args=f"senior={SENIOR},schedule=solo",
        tasks=[TASK],
        task_manager=_tm(task_dir),
        apply_chat_template=True,
        log_samples=True,
    )
    samples = out.pop("samples")
    tracker.save_results_aggregated(results=out, samples=samples)
    tracker.save_results_samples(task_name=TASK, samples=samples[TASK])
    solo = read_samples(tmp_path / "solo")
    assert all(set(m) == {1} for m in solo.author_mask) and (solo.n_handoffs == 0).all()

    tax = lm_eval_tax(tmp_path / "solo", paragraph_run, metric="exact_match", n_boot=200)
    para = read_samples(paragraph_run)
    expected = 100 * (solo.exact_match.mean() - para.exact_match.mean())
    assert math.isclose(tax["per_benchmark"][TASK]["pass@1"]["tax"]["estimate"], expected, abs_tol=1e-9)
    assert tax["per_benchmark"][TASK]["pass@1"]["n_problems"] == N_DOCS


@pytest.fixture(scope="module")
def lm():
    return TandemLM(senior=SENIOR, junior=JUNIOR, schedule="paragraph", batch_size=4)


def _gen(lm, until, do_sample=False, doc_id=0):
    ctx = lm.apply_chat_template([{"role": "user", "content": user_message("Ana has 3 apples and buys 4 more.")}])
    kwargs = {"until": until, "max_gen_toks": 64, "do_sample": do_sample, "temperature": 1.0}
    return Instance("generate_until", {}, (ctx, kwargs), 0, metadata=("t", doc_id, 1))


def test_stop_sequences_cut_the_text_and_its_author_mask(lm):
    whole, cut = _gen(lm, []), _gen(lm, ["\n\n"])
    [full_text], [first] = lm.generate_until([whole]), lm.generate_until([cut])
    assert "\n\n" in full_text and full_text.startswith(first) and "\n\n" not in first
    info = cut.args[2]["tandem"][0]
    assert info["finish_reason"] == "stop" and set(info["author_mask"]) == {1} and info["n_handoffs"] == 0
    assert lm.tokenizer.decode(info["token_ids"]).startswith(first)


def test_repeats_get_their_own_seeds_and_reproduce(lm):
    req = _gen(lm, [], do_sample=True)
    texts = lm.generate_until([req, req])  # lm-eval passes an Instance `repeats` times
    infos = req.args[2]["tandem"]
    assert len(infos) == 2 and infos[0]["seed"] != infos[1]["seed"]
    again = _gen(lm, [], do_sample=True)
    assert lm.generate_until([again, again]) == texts


def test_loglikelihood_is_the_chosen_models_teacher_forced_score(lm, task_dir):
    ctx, cont = "Ana has 3 apples.", " She buys 4 more."
    [(lp, greedy)] = lm.loglikelihood([Instance("loglikelihood", {}, (ctx, cont), 0)])
    c_ids, t_ids = lm.tok_encode(ctx), lm.tok_encode(ctx + cont)[len(lm.tok_encode(ctx)) :]
    assert math.isclose(lp, lm.engines["senior"].score([c_ids], [t_ids])[0].sum(), rel_tol=1e-5)
    assert isinstance(greedy, bool)
    junior_lm = TandemLM(senior=SENIOR, junior=JUNIOR, schedule="solo", score_with="junior")
    [(jlp, _)] = junior_lm.loglikelihood([Instance("loglikelihood", {}, (ctx, cont), 0)])
    assert math.isclose(jlp, lm.engines["junior"].score([c_ids], [t_ids])[0].sum(), rel_tol=1e-5)
    [rolling] = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (ctx + cont,), 0)])
    assert rolling < 0 and math.isfinite(rolling)
    out = simple_evaluate(model=lm, tasks=[MC_TASK], task_manager=_tm(task_dir))
    assert 0 <= out["results"][MC_TASK]["acc,none"] <= 1


def test_builtin_models_stay_registered_and_bad_args_fail_in_one_line(tiny_pair):
    assert get_model("tandem") is TandemLM
    assert get_model("hf").__name__ == "HFLM"
    with pytest.raises(ConfigError, match="unknown model_args"):
        TandemLM(senior=SENIOR, schedule="solo", schedul="word")
    with pytest.raises(ConfigError, match="needs a junior"):
        TandemLM(senior=tiny_pair[0], schedule="paragraph")  # no junior given, none in tandem_meta.json


def test_paragraph_samples_equal_tandem_evals_own_greedy_handoff(paragraph_run, task_dir, tmp_path):
    from tandem_eval.config import EvalConfig, ModelSpec, Sampling
    from tandem_eval.generate.execute import run_eval

    cfg = EvalConfig(
        senior=ModelSpec(SENIOR),
        junior=ModelSpec(JUNIOR),
        mode="handoff",
        schedule="paragraph",
        benchmarks=(str(task_dir / "arith.jsonl"),),
        n=1,
        ks=(1,),
        sampling=Sampling(temperature=0.0, top_p=1.0, top_k=0, max_new_tokens=96),
    )
    own = run_eval(cfg, tmp_path / "own", progress=False).load_samples().set_index("problem_id")
    logged = [json.loads(line) for f in paragraph_run.rglob("samples_*.jsonl") for line in f.read_text().splitlines()]
    for s in logged:
        info = s["arguments"]["gen_args_0"]["arg_2"]["tandem"][0]
        row = own.loc[s["doc"]["problem_id"]]
        assert s["resps"][0][0] == row.text and info["author_mask"] == list(row.author_mask)


def test_is_greedy_says_whether_each_token_is_the_argmax(lm):
    """is_greedy from the engine protocol (greedy decoding) against a plain transformers forward's argmax."""
    import torch
    from transformers import AutoModelForCausalLM

    from tandem_eval.models import resolve_model

    ctx = lm.tok_encode("Ana has 3 apples and buys 4 more. She has")
    model = AutoModelForCausalLM.from_pretrained(str(resolve_model(SENIOR)))
    ids = list(ctx)
    with torch.inference_mode():
        for _ in range(6):  # the argmax continuation, token by token
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    greedy = ids[len(ctx) :]
    [(lp, is_greedy)] = lm._loglikelihood_tokens([(None, ctx, greedy)])
    assert is_greedy and math.isfinite(lp)
    other = greedy[:-1] + [(greedy[-1] + 1) % len(lm.tokenizer)]  # the last token is not the argmax
    [(lp_other, not_greedy)] = lm._loglikelihood_tokens([(None, ctx, other)])
    assert not not_greedy and lp_other < lp
