"""The toy world's summary as markdown: the tables of arms and differences, the precondition and
verdict tables, power, training and lr-check lines; summary.md and the toy-summary block of docs/toy-world.md.

    from trainer.toy.markdown import block_markdown, update_readme
"""

from __future__ import annotations

import re
from pathlib import Path

from tandem_eval.files import atomic_write_text
from tandem_eval.metrics.registry import fmt_value
from trainer.toy.aggregate import DECIMALS, LABELS, K
from trainer.toy.verdicts import TAX_EFFECT, UNINFORMATIVE, conservative, fmt_ci

README_BEGIN, README_END = "<!-- toy-summary:begin -->", "<!-- toy-summary:end -->"


def _cell(cell: dict | None, m: str) -> str:
    if not cell:
        return "–"
    return fmt_value(cell["mean"], *cell["ci"], DECIMALS.get(m, 1))


def arms_table(summary: dict) -> list[str]:
    cols = ["solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "junior_nll", "kl_exact", "jargon", "terse"]
    lines = [
        "| scenario | arm | " + " | ".join(LABELS[c] for c in cols) + " | seeds × samples × problems |",
        "|:--|:--|" + "--:|" * len(cols) + "--:|",
    ]
    for sc, entry in summary["scenarios"].items():
        for arm, c in entry["arms"].items():
            name = f"{arm} (= init)" if c.get("same_as") else arm
            dims = f"{c['n_seeds']} × {c['n_samples']} × {c['n_problems']}"
            lines.append(f"| {sc} | {name} | " + " | ".join(_cell(c.get(m), m) for m in cols) + f" | {dims} |")
    return lines


def differences_table(summary: dict) -> list[str]:
    cols = ["solo_pass@1", "solo_pass@4", "handoff_pass@4", "tax@4", "junior_nll", "kl_exact"]
    lines = [
        "| scenario | difference | " + " | ".join(LABELS[c] for c in cols) + " | seeds paired |",
        "|:--|:--|" + "--:|" * len(cols) + ":--|",
    ]
    for sc, entry in summary["scenarios"].items():
        for name, d in entry["differences"].items():
            cells = [fmt_ci(d[m], DECIMALS.get(m, 1), True) if m in d else "–" for m in cols]
            lines.append(f"| {sc} | {name} | " + " | ".join(cells) + f" | {_seeds_cell(name, d)} |")
    return lines


def _seeds_cell(name: str, d: dict) -> str:
    """The seeds a difference pairs, and those only one arm has (left out, named)."""
    text = ", ".join(str(x) for x in d.get("paired_seeds", []))
    arms = dict(zip("ab", name.split(" - ")))
    left = [f"{arms[k]} {', '.join(str(x) for x in v)}" for k, v in d.get("unpaired_seeds", {}).items() if v]
    return text + (f" ({'; '.join(left)} unpaired, left out)" if left else "")


def precondition_line(entry: dict) -> str:
    pre = entry.get("precondition")
    if not pre:
        return ""

    def part(name, key, decimals):
        c = pre.get(key)
        if not c:
            return f"{name} –"
        boot = fmt_ci({"mean": c["mean"], "ci": c["bootstrap_ci"]}, decimals, True)
        seed = fmt_ci({"mean": c["mean"], "ci": c["seed_ci"]}, decimals, True) if c["seed_ci"] else "– (one seed)"
        return f"{name} {boot} (seed-level {seed})"

    verdict = "holds" if pre["holds"] else f"fails: every claim on tandem is {UNINFORMATIVE}"
    planted = f"grpo's {part('tax@4', 'grpo_tax@4', 1)}; grpo − init " if "grpo_tax@4" in pre else ""
    return (
        f"Precondition ({pre['rule']}): {planted}{part('tax@4', 'grpo_tax@4_minus_init', 1)}; "
        f"{part('junior NLL', 'grpo_junior_nll_minus_init', 3)}. **{verdict}**."
    )


def cell(text: str) -> str:
    """Text as one markdown table cell: a rule's own bars (|A - B|) escaped, else they split the row."""
    return text.replace("|", "\\|")


def gate_lines(entry: dict) -> list[str]:
    """A gated scenario's gates, each check PASS/FAIL with its number and rule."""
    lines = []
    for name, g in entry.get("gates", {}).items():
        lines += [
            f"Gate {name}: **{'PASS' if g['pass'] else 'FAIL'}**",
            "",
            "| check | value | rule | |",
            "|:--|--:|:--|:--|",
        ]
        for key, c in g["checks"].items():
            value = "–" if c["value"] is None else f"{c['value']:.3g}"
            lines.append(f"| {key} | {value} | {cell(c['rule'])} | {'PASS' if c['pass'] else 'FAIL'} |")
        lines.append("")
    return lines


def earlier_lines(scenario: str, entry: dict) -> list[str]:
    """One line per earlier design of a gated scenario (summary.earlier_designs): where it stopped, and where
    its gates are kept."""
    lines = []
    for version, d in entry.get("earlier_designs", {}).items():
        gates = ", ".join(f"{name} {'PASS' if g['pass'] else 'FAIL'}" for name, g in d["gates"].items())
        stop = f"stopped at {d['stopped_at']}" if d["stopped_at"] else "no gate failed"
        lines += [f"Earlier design {version}: {stop} ({gates}; `results/toy/{scenario}-{version}/gates.json`).", ""]
    return lines


def diagnosis_lines(entry: dict) -> list[str]:
    """A stopped scenario's diagnosis from its gate's samples (trainer/toy/diagnosis.py), when recorded."""
    return diagnosis_table(entry["diagnosis"]) if "diagnosis" in entry else []


def diagnosis_table(diag: dict) -> list[str]:
    """A diagnosis (trainer/toy/diagnosis.py) in markdown: one table of the recomputed checks (CI, within
    noise or not) and the predicted headroom."""
    out = [
        f"Diagnosis from G0's samples (`{diag['source']}`, {diag['n_problems']} problems x {diag['n_samples']} "
        f"samples; {diag['ci']}):",
        "",
        "| check | value [95% CI] | rule | outcome |",
        "|:--|:--|:--|:--|",
    ]
    for name, row in {**diag["checks"], **diag["predicted_headroom"]}.items():
        lo, hi = row["ci"]
        verdict = ("PASS" if row["pass"] else "FAIL") + (" (within noise)" if row["within_noise"] else "")
        out.append(f"| {name} | {row['value']:.3g} [{lo:.3g}, {hi:.3g}] | {cell(row['rule'])} | {verdict} |")
    fit = diag["fit"]
    out += ["", "Two-point model fit: " + "; ".join(f"{k} {v:.1f}" for k, v in fit.items()) + ".", ""]
    return out


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.2g}"


def claim_lines(entry: dict, key: str = "claims") -> list[str]:
    """A gated scenario's pre-registered verdicts (trainer/toy/claims.py): the seed-level paired t with its
    Holm-adjusted p, the same claim at matched solo accuracy, the bootstrap sensitivity check. key
    "claims_v4_reanalysis": the same rules applied after the fact to an older scenario's runs."""
    cl = entry.get(key) or {}
    if "not_run" in cl:
        return [f"Verdicts: not run ({cl['not_run']}).", ""]
    if not cl:
        return []
    pre = cl["precondition"]
    lines = [
        f"Precondition ({pre['rule']}): {pre['mean']:+.1f} pts, p {_p(pre['p'])}: "
        f"**{'holds' if pre['holds'] else 'fails'}**.",
        "",
        "| claim | tandem − grpo (seeds) | seed-level 95% CI | p (one-sided; TOST) | p Holm | at matched solo: "
        "residual, p Holm | bootstrap endpoint at the claim's Holm level ± MC s.e. (20,000) | outcome |",
        "|:--|--:|:--|--:|--:|:--|:--|:--|",
    ]
    for c in cl["claims"]:
        dec = DECIMALS.get(c["metric"], 1)
        ci = c.get("ci90") if c["test"] == "tost" else c.get("seed_ci95")
        ci_text = "–" if not ci else f"[{ci[0]:+.{dec}f}, {ci[1]:+.{dec}f}]" + (" (90%)" if c["test"] == "tost" else "")
        m = c.get("matched_solo")
        matched = "–" if not m else f"{m['mean']:+.{dec}f}, {_p(m.get('p_holm'))}"
        b = c.get("bootstrap") or {}
        ends = ", ".join(
            f"{100 * float(q):.4g}%: {v:+.{dec}f} ± {b['mc_se'][q]:.{dec}f}" for q, v in b.get("endpoints", {}).items()
        )
        flags = (" borderline" if b.get("borderline") else "") + (
            "" if b.get("agrees_with_t", True) else " (disagrees)"
        )
        lines.append(
            f"| {c['claim']} ({c['metric']}) | {c['mean']:+.{dec}f} ({c['n_seeds']}) | {ci_text} | {_p(c['p'])} "
            f"| {_p(c['p_holm'])} | {matched} | {ends or '–'}{flags} | {c['outcome']} |"
        )
    lines += ["", *arm_lines(cl), *kl_lines(cl)]
    return lines


def arm_lines(cl: dict) -> list[str]:
    """Which arms the verdicts read: older folder names read under their current ones, the matched-solo
    line's arms, and the pre-registered arms this scenario's design never trained."""
    rules = cl.get("rules", {})
    renamed = ", ".join(f"{a} as {c}" for a, c in rules.get("arm_names", {}).items())
    line = ", ".join(rules.get("line_arms", []))
    text = f"Arms read: {'folders ' + renamed + '; ' if renamed else ''}matched-solo line fitted on {line}"
    missing = rules.get("not_in_design")
    return [text + (f"; not in this scenario's design: {', '.join(missing)}." if missing else "."), ""]


def kl_lines(cl: dict) -> list[str]:
    """The kl arms against tandem (descriptive, two-sided seed-level t; not in the Holm family)."""
    kl = cl.get("kl_vs_tandem") or {}
    if not kl:
        return []
    cols = ("solo_pass@4", "handoff_pass@4", "tax@4")
    head = " | ".join(f"{LABELS[m]}: mean [seed-level 95% CI], p" for m in cols)
    lines = [f"| difference (descriptive, two-sided) | {head} |", "|:--|" + "--:|" * len(cols)]
    for name, cells in kl.items():
        parts = []
        for m in cols:
            c = cells[m]
            ci = f" [{c['seed_ci95'][0]:+.1f}, {c['seed_ci95'][1]:+.1f}]" if c.get("seed_ci95") else ""
            parts.append("–" if c["mean"] is None else f"{c['mean']:+.1f}{ci}, {_p(c['p_two_sided'])}")
        lines.append(f"| {name} | " + " | ".join(parts) + " |")
    return [*lines, ""]


def dialect_lines(summary: dict) -> list[str]:
    """A gated scenario's dialect readings: each arm's test-set shares and held-out shares along RL, and
    tandem's rollout reward by who chose step 1's dialect."""
    lines = []
    for sc, entry in summary["scenarios"].items():
        readings = entry.get("dialects")
        if not readings:
            continue
        lines += [
            f"Dialects ({sc}): % of each arm's solo CoTs in A, B, plain or mixed on the test set (mean over seeds), "
            "and A / B on the held-out set along RL (step 0: the initial senior; mean over seeds):",
            "",
            "| arm | A | B | plain | mixed | held-out A / B by step |",
            "|:--|--:|--:|--:|--:|:--|",
        ]
        for arm, r in readings.items():
            t = r.get("test") or {}
            cells = [f"{t[d]:.1f}" if d in t else "–" for d in ("A", "B", "plain", "mixed")]
            tr = r.get("training")
            curve = ", ".join(f"{row[0]}: {row[1]:.0f} / {row[2]:.0f}" for row in tr["rows"]) if tr else "–"
            lines.append(f"| {arm} | " + " | ".join(cells) + f" | {curve} |")
        roll = (readings.get("tandem") or {}).get("rollouts")
        if roll:
            lines += [
                "",
                "Tandem's rollouts by who wrote the token that chose step 1's dialect (all seeds):",
                "",
                "| chooser | dialect | rollouts, first 10 steps | reward | rollouts, last 10 steps | reward |",
                "|:--|:--|--:|--:|--:|--:|",
            ]
            first = {(r["chooser"], r["dialect"]): r for r in roll["first10"]}
            last = {(r["chooser"], r["dialect"]): r for r in roll["last10"]}
            for key in sorted(set(first) | set(last)):
                cells = []
                for part in (first.get(key), last.get(key)):
                    cells += [str(part["n"]), f"{part['reward']:.3f}"] if part else ["0", "–"]
                lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def verdict_lines(summary: dict) -> list[str]:
    lines = []
    for sc, entry in summary["scenarios"].items():
        lines += [f"**{sc}**", ""]
        if "gates" in entry:  # v4: gates, then the pre-registered verdicts
            lines += earlier_lines(sc, entry) + gate_lines(entry) + diagnosis_lines(entry) + claim_lines(entry)
            continue
        if line := precondition_line(entry):
            lines += [line, ""]
        lines += [
            "| claim | rule (stated before the numbers) | bootstrap 95% CI "
            "| seed-level 95% CI (t, S − 1 df) | outcome |",
            "|:--|:--|:--|:--|:--|",
        ]
        lines += [
            f"| {v['claim']} | {v['rule']} | {v['bootstrap']} | {v['seed_level']} | {v['outcome']}"
            + (f" (the rule alone: {v['rule_outcome']})" if "rule_outcome" in v else "")
            + " |"
            for v in entry["verdicts"]
        ]
        lines.append("")
        if entry.get("claims_v4_reanalysis"):
            lines += ["The same runs under v4's rules (a re-analysis after the fact, not pre-registered for them):", ""]
            lines += claim_lines(entry, "claims_v4_reanalysis")
    return lines


def power_lines(summary: dict) -> list[str]:
    lines = []
    for sc, entry in summary["scenarios"].items():
        hw = {
            a: (c["tax@4"]["ci"][1] - c["tax@4"]["ci"][0]) / 2
            for a, c in entry["arms"].items()
            if a in ("grpo", "tandem") and "tax@4" in c
        }
        d = entry["differences"].get("tandem - grpo", {}).get("tax@4")
        if not hw:
            continue
        parts = ", ".join(f"{a} ±{h:.1f}" for a, h in hw.items())
        line = f"- {sc}: tax@4 CI half-width {parts} pts"
        if d:
            dhw = (d["ci"][1] - d["ci"][0]) / 2
            line += f"; paired tandem − grpo tax@4 difference: bootstrap ±{dhw:.1f}"
            if d.get("seed_ci"):
                line += f", seed-level ±{(d['seed_ci'][1] - d['seed_ci'][0]) / 2:.1f}"
            ci = conservative(d)
            hw = (ci[1] - ci[0]) / 2 if ci else float("inf")
            verdict = "resolves" if hw <= TAX_EFFECT else "cannot resolve"
            line += f" pts (target ≤ {TAX_EFFECT:g}): {verdict} a {TAX_EFFECT:g}-point effect"
        lines.append(line + ".")
    return lines


def training_lines(summary: dict) -> list[str]:
    lines = [
        "| scenario | arm | reward, first → last 10 steps | zero-variance groups, first → last 10 "
        "| held-out solo pass@1 by step |",
        "|:--|:--|--:|--:|:--|",
    ]
    for sc, entry in summary["scenarios"].items():
        for arm, t in entry["training"].items():
            curve = ", ".join(f"{s}: {v:.1f}" for s, v in t["heldout_pass@1"])
            lines.append(
                f"| {sc} | {arm} | {t['reward_first10']:.3f} → {t['reward_last10']:.3f} "
                f"| {t['zero_std_first10']:.2f} → {t['zero_std_last10']:.2f} | {curve} |"
            )
    return lines


def sweep_lines(summary: dict) -> list[str]:
    sw = summary.get("lr_sweep")
    if not sw:
        return []
    chosen = sw["chosen_lr"]
    if isinstance(chosen, dict):  # one lr per arm (v3); v2 swept grpo only
        runs_use = ", ".join(f"{a} {lr:g}" for a, lr in chosen.items())
        head = f"Learning-rate check ({sw['scenario']}, seed {sw['seed']}; {sw['rule']}; the full runs use {runs_use}):"
    else:
        head = f"Learning-rate sweep ({sw['arm']}, {sw['scenario']}, seed {sw['seed']}; the full runs use {chosen:g}):"
    lines = [
        head,
        "",
        "| arm | lr | steps | reward, first → second half | zero-variance groups | held-out solo pass@1 at the end |",
        "|:--|--:|--:|--:|--:|--:|",
    ]

    def num(x, spec):
        return "–" if x is None else format(x, spec)

    for r in sw["runs"]:
        lines.append(
            f"| {r.get('arm', sw.get('arm'))} | {r['lr']:g} | {r['steps']} | {num(r['reward_first_half'], '.3f')} → "
            f"{num(r['reward_second_half'], '.3f')} | {num(r['zero_std_mean'], '.2f')} "
            f"| {num(r['heldout_pass@1'], '.1f')} |"
        )
    return lines


def block_markdown(summary: dict) -> str:
    """The toy-summary block of docs/toy-world.md (also the body of summary.md)."""
    lines = [
        "Verdicts (each rule and threshold stated before its result; differences pair seed S of one arm with",
        "seed S of the other, which share an evaluation seed, and each problem with itself; a seed only one arm",
        "has is left out and named; each outcome rests on the wider of the two CIs, and a rule that fails says no):",
        "",
        *verdict_lines(summary),
        *dialect_lines(summary),
        "Per arm (mean over seeds × problems ± half-width of the 95% CI; seeds and problems resampled):",
        "",
        *arms_table(summary),
        "",
        "Paired differences (mean [95% CI]):",
        "",
        *differences_table(summary),
        "",
        "Power of the design:",
        "",
        *power_lines(summary),
        "",
        "Training (mean over seeds; held-out: 100 held-out problems, step 0 = the initial senior):",
        "",
        *training_lines(summary),
        "",
        *sweep_lines(summary),
    ]
    return "\n".join(lines).rstrip() + "\n"


def summary_markdown(summary: dict) -> str:
    head = [
        "# Toy world summary",
        "",
        "Written by `python -m trainer.toy.summary results/toy` from `summary.json` (same folder).",
        "",
        "",
    ]
    per_seed = []
    for sc, entry in summary["scenarios"].items():
        if entry.get("tax_vs_grpo_per_seed"):
            per_seed += [
                f"Per-seed paired tax@{K} difference tandem − grpo, {sc} (`tandem-eval compare --metric tax@{K}`):",
                "",
                "| seed | tandem tax@4 | grpo tax@4 | Δ (pts) | 95% CI | p |",
                "|:--|--:|--:|--:|--:|--:|",
                *(
                    f"| {t['seed']} | {t['a']:.1f} | {t['b']:.1f} | {t['diff']:+.1f} "
                    f"| [{t['low']:+.1f}, {t['high']:+.1f}] | {t['p_value']:.3g} |"
                    for t in entry["tax_vs_grpo_per_seed"]
                ),
                "",
            ]
    return "\n".join(head) + block_markdown(summary) + ("\n" + "\n".join(per_seed) if per_seed else "")


def update_readme(readme: str | Path, summary: dict) -> None:
    """Replace the block between README_BEGIN and README_END with block_markdown(summary)."""
    readme = Path(readme)
    text = readme.read_text()
    pattern = re.compile(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{readme} has no {README_BEGIN} ... {README_END} block")
    new = f"{README_BEGIN}\n{block_markdown(summary)}{README_END}"
    atomic_write_text(readme, pattern.sub(lambda _: new, text))


def readme_block(readme: str | Path) -> str:
    """The current text between a file's toy-summary markers (for the regeneration test)."""
    text = Path(readme).read_text()
    return text.split(README_BEGIN, 1)[1].split(README_END, 1)[0].lstrip("\n")
