"""Who writes which notation in the emergent scenario's paragraph handoffs: the senior's first step
and the junior's second step, terse or plain, per arm. It asks whether anything the senior writes
changes the junior's notation (the only way a handoff-trained senior could lower the tax there).

    python -m trainer.toy.handoff_styles                       # results/toy/emergent
    python -m trainer.toy.handoff_styles results/toy/emergent --csv styles.csv

In a paragraph handoff (`--schedule paragraph`) the senior writes the first paragraph and the junior
the second, so a 2-step CoT's step 1 is the senior's and step 2 the junior's. Rates pool every seed,
problem and sample of an arm (counts in `n`); the summary's CIs are in results/toy/summary.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

import pandas as pd

from tandem_eval.run.runs import ReportError, runs_in
from trainer.toy.scales import arm_order
from trainer.toy.styles import is_terse


def step_styles(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per handoff sample: senior_terse (step 1), junior_terse (step 2; None when the CoT has
    no second paragraph), truncated (the CoT hit the token budget)."""
    rows = []
    for text, finish in zip(samples["text"], samples["finish_reason"], strict=True):
        paragraphs = [p.strip() for p in text.split("\n\n")]
        second = paragraphs[1] if len(paragraphs) > 1 else None
        rows.append(
            {
                "senior_terse": is_terse(paragraphs[0]),
                "junior_terse": None if second is None else is_terse(second),
                "truncated": finish == "length",
            }
        )
    return pd.DataFrame(rows, columns=["senior_terse", "junior_terse", "truncated"])


def arm_table(scenario_dir: Path) -> pd.DataFrame:
    """Per arm: % of senior steps terse, the junior's terse % after a terse and after a plain senior
    step (and how many second steps followed a plain one), % of handoff CoTs truncated, and the number
    of handoff samples."""
    parts: dict[str, list[pd.DataFrame]] = {}
    for run in runs_in(scenario_dir):
        if run.mode == "handoff":
            parts.setdefault(run.arm.split("/")[-1], []).append(step_styles(run.samples()))
    rows = {}
    for arm in sorted(parts, key=lambda a: (a != "init", arm_order(a))):
        s = pd.concat(parts[arm], ignore_index=True)
        second = s.dropna(subset=["junior_terse"])
        after = second.groupby("senior_terse")["junior_terse"].mean()
        n_plain = int((~second["senior_terse"]).sum())
        rows[arm] = {
            "senior step terse (%)": 100 * s["senior_terse"].mean(),
            "junior step terse after terse (%)": 100 * after.get(True, float("nan")),
            "junior step terse after plain (%)": 100 * after.get(False, float("nan")),
            "n after plain": n_plain,
            "truncated (%)": 100 * s["truncated"].mean(),
            "n": len(s),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("arm")


def _refuse(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)  # one line and exit 2, as every tandem-eval command
    raise SystemExit(2)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", nargs="?", type=Path, default=Path("results/toy/emergent"))
    ap.add_argument("--csv", type=Path, help="also write the table as CSV")
    args = ap.parse_args(argv)
    try:
        table = arm_table(args.scenario)
    except ReportError as e:
        _refuse(str(e))
    if table.empty:
        _refuse(f"no handoff runs under {args.scenario}; pass a scenario folder such as results/toy/emergent")
    if args.csv:
        table.to_csv(args.csv)
    print(table.round(1).to_string())


if __name__ == "__main__":
    main()
