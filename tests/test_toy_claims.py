"""The dialects scenario's pre-registered verdicts and gates on constructed data: Holm, TOST, the
conditions that keep a weaker senior from meeting "lower tax", the bootstrap's Monte-Carlo s.e., G1 from
pilot folders, and who chose step 1's dialect in a rollout.

PYTHONPATH=$PWD python -m pytest -q tests/test_toy_claims.py
"""

import json

import numpy as np
import pandas as pd
import pytest

from tandem_eval.schemas import RunFolderError
from trainer.toy import claims, dialects, gates, scales


def test_holm_is_the_step_down_correction():
    adj = claims.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": float("nan")})
    assert adj["a"] == pytest.approx(0.03) and adj["c"] == pytest.approx(0.06) and adj["b"] == pytest.approx(0.06)
    assert np.isnan(adj["d"])  # left out of the family
    assert claims.holm({"a": 0.5, "b": 0.6})["a"] == pytest.approx(1.0)  # capped at 1, never below an earlier one


def test_tost_needs_the_90_percent_interval_inside_the_margin():
    near = claims.tost(np.array([0.5, -0.5, 1.0, 0.0, -1.0, 0.3, 0.2, -0.1]))
    assert near["p"] < 0.05 and -5 < near["ci90"][0] and near["ci90"][1] < 5
    far = claims.tost(np.array([-6.0, -4.0, -8.0, -5.0, -7.0, -3.0, -6.5, -5.5]))
    assert far["p"] > 0.05


def test_order_statistic_se_matches_the_spread_of_repeated_bootstraps():
    rng = np.random.default_rng(1)
    ses = [claims.order_statistic_se(rng.normal(size=20_000), 0.95) for _ in range(3)]
    q = [np.quantile(rng.normal(size=20_000), 0.95) for _ in range(200)]
    assert all(0.5 * np.std(q) < s < 2 * np.std(q) for s in ses)


def _frame(rng, solo, hand, nll, kl, seeds=range(8), n=30):
    rows = []
    for s in seeds:
        so, ha = solo + rng.normal(0, 1.5), hand + rng.normal(0, 1.5)
        for p in range(n):
            x, y = np.clip(so + rng.normal(0, 15), 0, 100), np.clip(ha + rng.normal(0, 15), 0, 100)
            rows.append({"benchmark": "t", "problem_id": f"p{p}", "seed": s, "group": "t", "solo_pass@4": x,
                         "handoff_pass@4": y, "tax@4": x - y, "junior_nll": nll + rng.normal(0, 0.01),
                         "kl_exact": kl + rng.normal(0, 0.01)})  # fmt: skip
    return pd.DataFrame(rows).set_index(["benchmark", "problem_id"])


def _world(tandem: tuple, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "init": _frame(rng, 30, 20, 0.1, 0.0),
        "grpo": _frame(rng, 80, 30, 0.5, 0.3),
        "grpo-g16": _frame(rng, 82, 31, 0.5, 0.3, seeds=range(4)),
        "kl-init@0.1": _frame(rng, 70, 28, 0.45, 0.25, seeds=range(6)),
        "tandem": _frame(rng, *tandem),
        "kl-junior@0.1": _frame(rng, 72, 35, 0.3, 0.2, seeds=range(6)),
    }


@pytest.fixture(autouse=True)
def few_resamples(monkeypatch):
    monkeypatch.setattr(claims, "N_BOOT_VERDICT", 2000)  # the verdict's 20,000 cost ~10 s here


def test_a_real_effect_is_yes_and_carries_holm_tost_and_the_bootstrap():
    out = claims.evaluate(_world((79, 70, 0.2, 0.1)))
    by = {c["claim"]: c for c in out["claims"]}
    assert out["precondition"]["holds"]
    assert by["Lower communication tax"]["outcome"] == "yes" and by["Solo parity"]["outcome"] == "yes (parity)"
    for c in out["claims"]:
        assert c["p_holm"] >= c["p"] and c["n_seeds"] == 8
        assert {"endpoints", "mc_se", "borderline", "agrees_with_t"} <= set(c["bootstrap"])
    assert by["Lower communication tax"]["matched_solo"]["mean"] < 0


def test_a_weaker_senior_lowers_the_tax_but_the_claim_says_no():
    # tandem on grpo's path, further back: lower solo, the same handoff, so a lower tax at lower accuracy
    out = claims.evaluate(_world((60, 30, 0.5, 0.3)))
    by = {c["claim"]: c for c in out["claims"]}
    tax = by["Lower communication tax"]
    assert tax["mean"] < -10 and tax["p_holm"] < 0.05  # the raw test alone would say yes
    assert tax["outcome"].startswith("no") and not tax["conditions"]["solo parity"]
    assert by["Solo parity"]["outcome"].startswith("no")


def test_without_the_precondition_every_claim_is_uninformative():
    w = _world((79, 70, 0.2, 0.1))
    w["init"] = _frame(np.random.default_rng(5), 80, 30, 0.5, 0.3)  # init pays grpo's tax already
    out = claims.evaluate(w)
    assert not out["precondition"]["holds"]
    assert all(c["outcome"] == claims.UNINFORMATIVE and "rule_outcome" in c for c in out["claims"])


def test_v3_arm_names_resolve_through_the_alias_table():
    assert scales.KIND_ALIASES == {"kl-reg": "kl-init"}  # derived from KL_KINDS / KL_REFS
    assert scales.canonical_arm("kl-reg@0.1") == "kl-init@0.1" and scales.canonical_arm("kl-reg@1") == "kl-init@1"
    assert [scales.canonical_arm(a) for a in ("grpo", "kl-init@0.1", "kl-junior@0.1")] == [
        "grpo", "kl-init@0.1", "kl-junior@0.1"]  # fmt: skip
    # v3's design as committed: kl-reg arms toward init, no kl-junior; so the re-analysis needs kl-init@0.1
    assert "kl-init@0.1" in scales.designed_arms("emergent") and "kl-junior@0.1" not in scales.designed_arms("emergent")
    need = claims.required_arms(scales.designed_arms("emergent"))
    assert need["line"] == claims.LINE_ARMS and need["kl"] == ("kl-init@0.1",)


def test_a_v3_named_arm_is_read_under_its_v4_name_line_on_four_arms_and_kl_filled():
    w = _world((79, 70, 0.2, 0.1))
    w["kl-reg@0.1"] = w.pop("kl-init@0.1")  # v3's folder name
    del w["kl-junior@0.1"]  # v3 never trained it
    out = claims.evaluate(w, "results/toy/emergent", scales.designed_arms("emergent"))
    tax = next(c for c in out["claims"] if c["claim"] == "Lower communication tax")
    line = tax["matched_solo"]
    assert line["line_arms"] == list(claims.LINE_ARMS) and line["n_points"] == 8 + 8 + 4 + 6  # every arm-seed
    assert list(out["kl_vs_tandem"]) == ["kl-init@0.1 - tandem"]
    assert out["rules"]["arm_names"] == {"kl-reg@0.1": "kl-init@0.1"}
    assert out["rules"]["not_in_design"] == ["kl-junior@0.1"]


@pytest.mark.parametrize("arm", ["grpo-g16", "kl-init@0.1", "kl-junior@0.1", "init"])
def test_a_missing_pre_registered_arm_refuses_instead_of_fitting_on_fewer(arm):
    w = _world((79, 70, 0.2, 0.1))
    del w[arm]
    with pytest.raises(claims.MissingArm, match=rf"results/toy/dialects: pre-registered arm '{arm}' has no runs"):
        claims.evaluate(w, "results/toy/dialects")
    # a v3 folder missing its kl-reg@0.1: the refusal names the older name too
    v3 = _world((79, 70, 0.2, 0.1))
    del v3["kl-junior@0.1"], v3["kl-init@0.1"]
    with pytest.raises(claims.MissingArm, match=r"'kl-init@0.1' has no runs"):
        claims.evaluate(v3, "results/toy/emergent", scales.designed_arms("emergent"))


def test_two_folders_naming_one_arm_refuse():
    w = _world((79, 70, 0.2, 0.1))
    w["kl-reg@0.1"] = w["kl-init@0.1"]
    with pytest.raises(RunFolderError, match="'kl-init@0.1' and 'kl-reg@0.1' are the same arm"):
        claims.evaluate(w, "results/toy/dialects")


def test_the_bootstrap_is_read_at_each_claims_holm_level():
    assert claims.holm_levels({"a": 0.04, "b": 0.001, "c": 0.3, "d": float("nan")}) == pytest.approx(
        {"a": 0.025, "b": 0.05 / 3, "c": 0.05, "d": float("nan")}, nan_ok=True)  # fmt: skip
    out = claims.evaluate(_world((79, 70, 0.2, 0.1)))
    levels = claims.holm_levels({c["claim"]: c["p"] for c in out["claims"]})
    for c in out["claims"]:
        b = c["bootstrap"]
        assert b["holm_level"] == pytest.approx(levels[c["claim"]])
        qs = sorted(float(q) for q in b["endpoints"])
        level = b["holm_level"]
        assert qs == pytest.approx([level, 1 - level] if c["test"] == "tost" else [1 - level])
        assert b["agrees_with_t"] == (b["bootstrap_met"] == (c["p_holm"] < claims.ALPHA))
    # a bound that clears 0 unadjusted but not at the Holm level is no disagreement with a Holm "no"
    draws = np.random.default_rng(0).normal(-1.8, 1.0, 20_000)  # 95% bound about -0.16, 98.75% about +0.44
    sens = claims._sensitivity({"mean": -1.8, "draws": draws, "n_boot": 20_000}, "less", 0.05 / 4, False)
    assert not sens["bootstrap_met"] and sens["agrees_with_t"]
    assert np.quantile(draws, 0.95) < 0  # the old, unadjusted reading would have "disagreed"


def _pilot_run(root, arm, seed, curve, pass1=None):
    """A pilot run folder: `curve` rows (step, solo pass@4, handoff pass@4 or None, B share %); `pass1`:
    {step: (solo pass@1, handoff pass@1 or None)} where the run records pass@1 too."""
    run = root / arm / f"seed{seed}"
    run.mkdir(parents=True)
    lines = []
    for step, solo, hand, b_share in curve:
        p1 = (pass1 or {}).get(step, (None, None))
        rec = {"step": step, "solo": {"macro": {"pass@4": solo, **({"pass@1": p1[0]} if p1[0] is not None else {})}}}
        if hand is not None:  # the hook's handoff (else world.heldout_handoff's, at the plateau only)
            rec["handoff"] = {"macro": {"pass@4": hand, **({"pass@1": p1[1]} if p1[1] is not None else {})}}
        lines.append(json.dumps(rec))
        folder = run / "evals" / f"step-{step:06d}" / "solo"
        folder.mkdir(parents=True)
        n_b = int(round(b_share))
        texts = ["Sam; 3*5>51\n\nHe buys 2; 15+2>71"] * n_b + ["Sam: 3*5=15\n\nHe buys 2: 15+2=17"] * (100 - n_b)
        pd.DataFrame({"text": texts}).to_parquet(folder / "samples.parquet")
    (run / "eval_log.jsonl").write_text("\n".join(lines) + "\n")
    return run


def _init_heldout(tmp_path, solo=40.0, hand=30.0, name="init", solo1=None, hand1=None):
    """A held-out handoff run folder as G1 reads it (default: the initial senior's, solo pass@4 40, handoff 30;
    pass@1 where given)."""
    init = tmp_path / name
    for folder, p4, p1 in (("solo", solo, solo1), ("handoff-paragraph", hand, hand1)):
        (init / folder).mkdir(parents=True)
        macro = {"pass@4": p4, **({"pass@1": p1} if p1 is not None else {})}
        (init / folder / "metrics.json").write_text(json.dumps({"pass_at_k": {"macro": macro}}))
    pd.DataFrame({"text": ["Sam has 3 boxes, so he has 3 * 5 = 15"] * 10}).to_parquet(init / "solo" / "samples.parquet")
    return init


def test_g1_reads_the_pilot_curves_and_the_initial_senior(tmp_path):
    init = _init_heldout(tmp_path)
    runs = {
        "grpo": [_pilot_run(tmp_path, "grpo", s, [(10, 70, 40, 60), (20, 80, 40, 90)]) for s in (100, 101)],
        "tandem": [_pilot_run(tmp_path, "tandem", s, [(10, 70, 60, 20), (20, 78, 70, 10)]) for s in (100, 101)],
    }
    g = gates.g1(runs, init, gates.V5_G1)  # v5's rules: everything at pass@4
    c = g["checks"]
    assert c["grpo B share (%)"]["value"] == 90 and c["grpo B share (%)"]["pass"]
    assert c["grpo - init tax@4 (pts)"]["value"] == 30  # (80 - 40) - (40 - 30)
    assert c["tandem A share (%)"]["value"] == 90 and c["tandem - grpo solo pass@4 (pts)"]["value"] == -2
    plateau = c["grpo solo pass@4, change from the previous evaluation (pts)"]
    assert plateau["value"] == 10 and not plateau["pass"] and not g["pass"]  # still climbing: no plateau
    assert g["numbers"]["plateau_step"] is None and g["numbers"]["steps"] == 20  # read at the last evaluation
    lines = []
    gates.print_gate("G1", g, out=type("W", (), {"write": lambda self, s: lines.append(s)})())
    assert "G1: FAIL" in "".join(lines) and "PASS  grpo B share" in "".join(lines)


def test_g1_takes_the_full_runs_step_count_at_grpos_plateau(tmp_path):
    init = _init_heldout(tmp_path)
    grpo = [(10, 60, None, 50), (20, 75, None, 80), (30, 77, None, 90), (40, 60, None, 95)]  # plateau at 30
    tandem = [(10, 60, 50, 60), (20, 70, 60, 40), (30, 74, 70, 30), (40, 75, 70, 20)]  # B share falls
    runs = {"grpo": [_pilot_run(tmp_path, "grpo", s, grpo) for s in (100, 101)],
            "tandem": [_pilot_run(tmp_path, "tandem", s, tandem) for s in (100, 101)]}  # fmt: skip
    for run in runs["grpo"]:  # GRPO's held-out handoff at its plateau (world.heldout_handoff), with its own solo
        _init_heldout(run / "heldout-handoff", solo=77.0, hand=35.0, name="step-000030")
    g = gates.g1(runs, init, gates.V5_G1)
    assert g["numbers"]["steps"] == 30 and g["pass"]  # every check read at step 30, not at the last (40)
    assert g["checks"]["tandem - grpo solo pass@4 (pts)"]["value"] == -3
    assert g["checks"]["grpo - init tax@4 (pts)"]["value"] == 32  # (77 - 35) - (40 - 30)


def test_v6_g1_reads_the_precondition_at_pass_1_and_pass_4_and_the_plateau_on_pass_1(tmp_path):
    # pass@4 saturates (97 -> 99: a v5 "plateau" at step 20) while pass@1 still climbs to step 30
    init = _init_heldout(tmp_path, solo=85.0, hand=25.0, solo1=39.0, hand1=11.0)  # tax@4 60, tax@1 28
    grpo = [(10, 97, None, 60), (20, 99, None, 85), (30, 99, None, 90)]
    grpo1 = {10: (50, None), 20: (65, None), 30: (67, None)}
    tandem = [(10, 96, 60, 30), (20, 98, 70, 20), (30, 98, 72, 20)]
    tandem1 = {10: (48, 30), 20: (62, 40), 30: (64, 45)}
    runs = {"grpo": [_pilot_run(tmp_path, "grpo", s, grpo, grpo1) for s in scales.PILOT_SEEDS],
            "tandem": [_pilot_run(tmp_path, "tandem", s, tandem, tandem1) for s in scales.PILOT_SEEDS]}  # fmt: skip
    for run in runs["grpo"]:
        for step in (20, 30):  # GRPO's held-out handoff at the step each rule's plateau reads
            name = f"step-{step:06d}"
            _init_heldout(run / "heldout-handoff", solo=99.0, hand=45.0, name=name, solo1=67.0, hand1=20.0)
    v6, v5 = gates.g1(runs, init), gates.g1(runs, init, gates.V5_G1)
    assert (v5["numbers"]["steps"], v6["numbers"]["steps"]) == (20, 30)  # pass@1's plateau, not pass@4's
    c = v6["checks"]
    assert c["grpo - init tax@1 (pts)"]["value"] == 19 and c["grpo - init tax@1 (pts)"]["pass"]  # (67-20) - (39-11)
    assert c["grpo - init tax@4 (pts)"]["value"] == -6 and not c["grpo - init tax@4 (pts)"]["pass"]  # (99-45) - 60
    assert c["tandem - grpo solo pass@1 (pts)"]["value"] == -3 and not v6["pass"]
    assert "grpo - init tax@1 (pts)" not in v5["checks"]
    assert not set(scales.PILOT_SEEDS) & {*scales.V5_PILOT_SEEDS, *range(8)}  # fresh: v5's spent, the full run's


def test_two_point_pass_at_k_in_closed_form():
    tp = gates.two_point_pass_at_k
    assert tp({"A": 0.5}, {"A": 1.0}, 4) == pytest.approx(50.0)  # pure A: pass@k = the fraction, any k
    assert tp({"A": 0.5}, {"A": 0.5}, 1) == pytest.approx(25.0)
    assert tp({"A": 0.5}, {"A": 0.5}, 2) == pytest.approx(100 * 0.5 * (1 - 0.5**2))
    # two dialects, independent: a problem fails if, for every dialect that solves it, no sample picks it
    a, b, sa, sb = 0.8, 0.3, 0.1, 0.6
    fail = (1 - a) * (1 - b) + a * (1 - b) * (1 - sa) ** 4 + (1 - a) * b * (1 - sb) ** 4 + a * b * (1 - sa - sb) ** 4
    assert tp({"A": a, "B": b}, {"A": sa, "B": sb}, 4) == pytest.approx(100 * (1 - fail))


def test_headroom_would_have_stopped_v5_before_its_pilot():
    """H on the committed v5 aggregates (results/toy/dialects-v5: gates.json's G0 numbers, init/heldout.jsonl):
    the tax at 100% B (the senior forced into B minus the junior after B) leaves +6.0 points over the
    initial senior's held-out tax@4, below +15 (and below G1's +10), but +38 at pass@1."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "results" / "toy" / "dialects-v5"
    h = gates.headroom_of(results)
    g0 = json.loads((results / "gates.json").read_text())["G0"]["numbers"]["accuracy_pct"]
    init = json.loads((results / "init" / "heldout.jsonl").read_text().splitlines()[0])
    ceiling = g0["senior forced B"] - g0["junior after B"]
    for k in (1, 4):
        tax = init["solo"]["macro"][f"pass@{k}"] - init["handoff"]["macro"][f"pass@{k}"]
        c = h["checks"][f"predicted grpo - init tax@{k} ceiling (pts)"]
        assert c["value"] == pytest.approx(ceiling - tax, abs=1e-4)
    assert h["checks"]["predicted grpo - init tax@4 ceiling (pts)"]["value"] == pytest.approx(6.0, abs=0.05)
    assert not h["checks"]["predicted grpo - init tax@4 ceiling (pts)"]["pass"] and not h["pass"]
    assert h["checks"]["predicted grpo - init tax@1 ceiling (pts)"]["pass"]
    # the model's fit: the initial senior's held-out solo and handoff, from its dialect shares alone
    for k in (1, 4):
        for part in ("init_solo", "init_handoff"):
            f = h["numbers"]["fit"][f"pass@{k}"][part]
            assert abs(f["predicted"] - f["measured"]) < 2.5, (k, part, f)


def test_headroom_names_what_is_missing(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        gates.main(["headroom", "--results", str(tmp_path)])
    assert e.value.code == 2 and "needs gates.json with G0 and init/heldout.jsonl" in capsys.readouterr().err


def test_the_chooser_of_step_ones_dialect_is_the_author_of_the_token_after_the_name():
    junior_a = [[1, "Sam"], [0, ": 3*5=15\n\nHe buys 2: 15+2=17"]]
    senior_b = [[0, "Sa"], [1, "m; 3*5>51"], [0, "\n\nHe buys"]]
    plain = [[1, "Sam has 3 boxes"], [0, ", so he has 3 * 5 = 15"]]
    assert dialects.chooser(junior_a) == ("junior", "A")
    assert dialects.chooser(senior_b) == ("senior", "B")
    assert dialects.chooser(plain) == ("senior", "plain")


def test_the_committed_g0_checks_follow_from_its_numbers():
    """results/toy/dialects-v5/gates.json: each G0 check is what its rule says of the recorded numbers (the
    gate's verdict is recomputable from what it recorded, not only stored)."""
    import json
    from pathlib import Path

    from trainer.toy import gates

    g0 = json.loads((Path(__file__).resolve().parents[1] / "results/toy/dialects-v5/gates.json").read_text())["G0"]
    n = g0["numbers"]
    args = (n["dialect_shares_pct"]["senior (T 1)"], n["accuracy_pct"], n["junior_nll_reference"])
    checks = gates._g0_checks(*args, rules=gates.V5_G0)  # the rules it was read with
    assert {k: (c["pass"], round(c["value"], 4)) for k, c in checks.items()} == {
        k: (c["pass"], round(c["value"], 4)) for k, c in g0["checks"].items()
    }
    # v6's G0 on the same numbers: A's 0% at the evaluation decoding fails its new check
    v6 = gates._g0_checks(*args, shares_eval=n["dialect_shares_pct"]["senior"])
    assert v6["init A share at the evaluation decoding (%)"] == {"value": 0.0, "rule": ">= 15 (T 0.7, top-p 0.8)",
                                                                  "pass": False}  # fmt: skip
