"""The toy world's summary on constructed data: the verdict logic (rules stated before the results, the
more conservative CI, the precondition gate), paired differences with their seed-level t interval, the
README block writer, and the summary command's bad input.

PYTHONPATH=$PWD python -m pytest -q tests/test_toy_summary.py
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from trainer.toy import aggregate, markdown, verdicts
from trainer.toy import summary as toy_summary

REPO = Path(__file__).resolve().parent.parent


def test_update_readme_replaces_only_the_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{markdown.README_BEGIN}\nSTALE-BLOCK\n{markdown.README_END}\nafter\n")
    summary = {"scenarios": {}}
    markdown.update_readme(readme, summary)
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n") and text.endswith(f"{markdown.README_END}\nafter\n")
    assert "STALE-BLOCK" not in text and markdown.readme_block(readme) == markdown.block_markdown(summary)
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="toy-summary"):
        markdown.update_readme(readme, summary)


def _cell(lo, hi, seed=None):
    """A difference cell: bootstrap CI [lo, hi], seed-level CI `seed` (default: the same)."""
    return {"mean": (lo + hi) / 2, "ci": [lo, hi], "seed_ci": list(seed or (lo, hi))}


def _scenario(**diffs):
    base = {
        "grpo - init": {"solo_pass@1": _cell(20, 30), "tax@4": _cell(2, 9), "junior_nll": _cell(0.1, 0.3)},
        "tandem - grpo": {
            "solo_pass@1": _cell(-4, 4),
            "tax@4": _cell(-2, 2.5),
            "junior_nll": _cell(-0.2, -0.1),
            "kl_exact": _cell(-0.01, 0.02),
        },
        "kl-reg@0.1 - tandem": {"solo_pass@4": _cell(-1, 1), "handoff_pass@4": _cell(-9, -2)},
        "kl-reg@1 - tandem": {"solo_pass@4": _cell(-2, 2), "handoff_pass@4": _cell(-1, 1)},
    }
    for name, cells in diffs.items():
        base[name.replace("_", " ").replace(" minus ", " - ")] = {**base.get(name, {}), **cells}
    arms = {"grpo": {}, "tandem": {}, **{d.split(" - ")[0]: {} for d in base if d.startswith("kl-reg@")}}
    return {"arms": arms, "differences": base}


def _outcomes(sc):
    return {x["claim"]: x["outcome"] for x in verdicts.verdicts(sc)}


def test_verdicts_follow_the_stated_thresholds():
    sc = _scenario()
    assert verdicts.precondition(sc["differences"])["holds"]
    v = _outcomes(sc)
    assert v["RL moves the senior"] == "yes"
    assert v["Solo parity"] == "yes (parity)"
    assert v["Lower communication tax"].startswith("no: no effect of 3+ pts")
    assert v["Better legibility"] == "yes" and v["Lower drift"] == "no: no difference detected"
    assert v["KL-reg does not give tandem's combination"] == "no: kl-reg@1 is indistinguishable from tandem on both"
    sc["differences"]["tandem - grpo"]["tax@4"] = _cell(-8, -1)
    sc["differences"]["grpo - init"]["solo_pass@1"] = _cell(-1, 9)
    v = _outcomes(sc)
    assert v["Lower communication tax"] == "yes" and v["RL moves the senior"].startswith("no")


def test_a_failed_kl_rule_says_no_when_every_ci_is_above_zero():
    # v2's kl-reg@0.1 - tandem: solo +3.7 [+0.4, +7.3], handoff +2.7 [+0.2, +5.0]: better on both, so the
    # rule "one CI below 0 and none above" fails for that coefficient even though the others pass
    sc = _scenario()
    sc["differences"]["kl-reg@0.1 - tandem"] = {"solo_pass@4": _cell(0.4, 7.3), "handoff_pass@4": _cell(0.2, 5.0)}
    sc["differences"]["kl-reg@1 - tandem"] = {"solo_pass@4": _cell(-18.8, -8.1), "handoff_pass@4": _cell(-21.5, -13)}
    sc["differences"]["kl-reg@10 - tandem"] = {"solo_pass@4": _cell(-30, -18), "handoff_pass@4": _cell(-33, -23)}
    sc["arms"]["kl-reg@10"] = {}
    out = _outcomes(sc)["KL-reg does not give tandem's combination"]
    assert out == "no: kl-reg@0.1 is better than tandem on solo and handoff"
    del sc["differences"]["kl-reg@0.1 - tandem"], sc["arms"]["kl-reg@0.1"]
    assert _outcomes(sc)["KL-reg does not give tandem's combination"].startswith("yes")


def test_verdicts_use_the_more_conservative_ci_and_need_two_seeds():
    # bootstrap says tandem's tax is lower, the seed-level t interval crosses 0: the claim is not shown
    sc = _scenario(**{"tandem - grpo": {"tax@4": _cell(-6, -1, seed=(-9, 2))}})
    assert _outcomes(sc)["Lower communication tax"].startswith("no: no effect detected")
    assert verdicts.conservative(sc["differences"]["tandem - grpo"]["tax@4"]) == (-9, 2)
    sc["differences"]["tandem - grpo"]["tax@4"] = {"mean": -3.0, "ci": [-6, -1], "seed_ci": None}
    assert _outcomes(sc)["Lower communication tax"] == verdicts.ONE_SEED


def test_a_failed_precondition_makes_every_claim_on_tandem_uninformative():
    # v2's self-paired: grpo - init tax@4 -4.1 [-7.1, -1.2], junior NLL -0.071: GRPO pays no tax
    sc = _scenario(**{"grpo - init": {"tax@4": _cell(-7.1, -1.2), "junior_nll": _cell(-0.075, -0.067)}})
    pre = verdicts.precondition(sc["differences"])
    assert not pre["holds"] and pre["grpo_tax@4_minus_init"]["ci"] == [-7.1, -1.2]
    out = {x["claim"]: x for x in verdicts.verdicts(sc)}
    assert out["RL moves the senior"]["outcome"] == "yes"  # not a claim on tandem
    for claim in (
        "Solo parity",
        "Lower communication tax",
        "Better legibility",
        "KL-reg does not give tandem's combination",
    ):
        assert out[claim]["outcome"] == verdicts.UNINFORMATIVE and out[claim]["rule_outcome"]
    # a tax with a CI above 0 but a junior that reads GRPO no worse: still no precondition
    sc = _scenario(**{"grpo - init": {"junior_nll": _cell(-0.01, 0.02)}})
    assert not verdicts.precondition(sc["differences"])["holds"]
    # one paired seed: no seed-level CI, so the precondition cannot hold
    sc = _scenario()
    sc["differences"]["grpo - init"]["tax@4"]["seed_ci"] = None
    assert not verdicts.precondition(sc["differences"])["holds"]


def _frame(seeds, shift, n_problems=40, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for s in seeds:
        for p in range(n_problems):
            rows.append({"benchmark": "test", "problem_id": f"p{p}", "seed": s, "group": "test",
                         "tax@4": shift + s + rng.normal(0, 5)})  # fmt: skip
    return pd.DataFrame(rows).set_index(["benchmark", "problem_id"])


def test_difference_names_the_seeds_it_cannot_pair_and_adds_a_seed_level_t_interval():
    grpo, init = _frame([0, 1, 2], shift=4.0, seed=1), _frame([0], shift=0.0, seed=2)
    d = aggregate.difference(grpo, init)
    assert d["paired_seeds"] == [0] and d["unpaired_seeds"] == {"a": [1, 2], "b": []}
    assert d["tax@4"]["seed_ci"] is None  # one paired seed: no seed-level interval
    tandem = _frame([0, 1, 2], shift=1.0, seed=3)
    d = aggregate.difference(tandem, grpo)
    assert d["paired_seeds"] == [0, 1, 2] and d["unpaired_seeds"] == {"a": [], "b": []}
    a, b = tandem.reset_index(), grpo.reset_index()
    per_seed = (a["tax@4"] - b["tax@4"]).groupby(a["seed"]).mean().to_numpy()
    half = stats.t.ppf(0.975, 2) * per_seed.std(ddof=1) / np.sqrt(3)
    assert d["tax@4"]["seed_ci"] == pytest.approx([per_seed.mean() - half, per_seed.mean() + half])
    assert d["tax@4"]["mean"] == pytest.approx(per_seed.mean())


def test_summary_names_a_folder_without_toy_results(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        toy_summary.main([str(tmp_path / "nope")])
    assert exit_.value.code == 2 and "no toy-world scenario folder" in capsys.readouterr().err


def test_the_old_summary_command_names_the_new_one():
    # the library cannot import the trainer: the moved command only says where it went
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-m", "tandem_eval.toy.aggregate"], capture_output=True, text=True, env=env)
    assert res.returncode == 2 and "python -m trainer.toy.summary" in res.stderr


def test_a_planted_tax_is_gated_on_grpos_own_tax():
    """jargon (the junior is the plain base, not the initial senior): SFT planted the tax, so the gate is
    GRPO's own tax@4 with both CIs above 0, whatever grpo − init shows (v2: grpo 55.0, grpo − init -5.3)."""
    sc = _scenario(**{"grpo - init": {"tax@4": _cell(-11.1, 0.2), "junior_nll": _cell(-0.012, 0.017)}})
    arms = {"grpo": {"tax@4": _cell(47.6, 62.4, seed=(50.1, 59.9))}}
    assert not verdicts.precondition(sc["differences"])["holds"]  # the self-paired rule would fail
    pre = verdicts.precondition(sc["differences"], arms, planted=True)
    assert pre["holds"] and pre["rule"] == verdicts.PLANTED_RULE and pre["grpo_tax@4"]["ci"] == [47.6, 62.4]
    assert pre["grpo_tax@4_minus_init"]["mean"] == pytest.approx(-5.45)  # still reported
    sc["precondition"] = pre
    out = {x["claim"]: x for x in verdicts.verdicts(sc)}
    assert out["Lower communication tax"]["outcome"] != verdicts.UNINFORMATIVE
    # one seed (no seed-level CI), a CI reaching 0, or no grpo arm: no gate
    one_seed = {"mean": 50.0, "ci": [40.0, 60.0], "seed_ci": None}
    for cell in (one_seed, _cell(-1, 60)):
        assert not verdicts.precondition(sc["differences"], {"grpo": {"tax@4": cell}}, planted=True)["holds"]
    assert not verdicts.precondition(sc["differences"], {}, planted=True)["holds"]


def test_arms_found_in_run_folders_read_in_the_pipelines_order(tmp_path):
    # `make toy` summarises with Scale.arms' order and `python -m trainer.toy.summary` with the folders
    # it finds: both must write the same summary.json, whatever order the filesystem lists folders in
    from trainer.toy.scales import SCALES

    full = SCALES["emergent"].arms("emergent")
    for arm in ("kl-reg@1", "grpo-g16", "init", "kl-reg@0.1", "tandem", "grpo", "kl-reg@10"):
        (tmp_path / "emergent" / arm).mkdir(parents=True)
    found = toy_summary.arms_found(tmp_path)["emergent"]
    assert found == (*full, "kl-reg@10")


def test_handoff_styles_reads_the_seniors_and_the_juniors_step():
    from trainer.toy.handoff_styles import step_styles

    samples = pd.DataFrame(
        {
            "text": [
                "Sam: 3*5=15\n\nHe loses 5: 15-5=10\n\nThe answer is \\boxed{10}.",
                "Sam: 3*5=15\n\nHe loses 5, so he has 15 - 5 = 10 pens.",
                "Sam has 3 boxes of 5 pens, so 3 * 5 = 15 pens.",
            ],
            "finish_reason": ["eos", "length", "length"],
        }
    )
    got = step_styles(samples)
    assert got["senior_terse"].tolist() == [True, True, False]
    assert got["junior_terse"].tolist() == [True, False, None]
    assert got["truncated"].tolist() == [False, True, True]


def test_handoff_styles_names_a_missing_folder(tmp_path, capsys):
    from trainer.toy import handoff_styles

    with pytest.raises(SystemExit) as e:
        handoff_styles.main([str(tmp_path / "nowhere")])
    assert e.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_a_failed_gate_is_summarised_as_the_stop_it_is(tmp_path):
    """A gated scenario whose gate failed has no run folders (the full run never started): its entry holds
    the gates and "not run", the other scenarios are summarised as before, and the verdict block says which
    gate stopped it, with its numbers."""
    import json

    sc = tmp_path / "dialects"
    sc.mkdir()
    check = {"pass": False, "rule": ">= +10", "value": -5.4}
    gates = {"G0": {"pass": True, "checks": {}}, "G1": {"pass": False, "checks": {"grpo - init tax@4 (pts)": check}}}
    (sc / "gates.json").write_text(json.dumps(gates))
    summary = toy_summary.build_summary(tmp_path, {"dialects": ("grpo", "tandem")})
    entry = summary["scenarios"]["dialects"]
    assert entry["stopped_at"] == "G1" and entry["gates"] == gates and entry["arms"] == {}
    assert "G1 failed" in entry["claims"]["not_run"]
    block = markdown.block_markdown(summary)
    assert "Gate G1: **FAIL**" in block and "| grpo - init tax@4 (pts) | -5.4 | >= +10 | FAIL |" in block
    assert "not run (gate G1 failed" in block
    (sc / "gates.json").write_text(json.dumps({"G0": gates["G0"]}))  # no failed gate: the runs are read
    assert toy_summary.stopped_entry(sc) is None


def test_summary_refuses_in_one_line_when_a_pre_registered_arm_is_missing(tmp_path, capsys):
    """The committed v3 runs (seeds 0-1) without kl-reg@0.1, v4's kl-init@0.1: the re-analysis needs it for
    its matched-solo line and kl comparison, so the summary exits 2 naming the arm and the folder."""
    import shutil

    src, dst = REPO / "results" / "toy" / "emergent", tmp_path / "emergent"
    for arm in ("init", "grpo", "tandem", "grpo-g16"):
        for seed in ("seed0", "seed1"):
            shutil.copytree(src / arm / seed, dst / arm / seed)
    with pytest.raises(SystemExit) as exit_:
        toy_summary.main([str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert f"{dst}: pre-registered arm 'kl-init@0.1' has no runs (nor under its older name kl-reg@0.1)" in err
