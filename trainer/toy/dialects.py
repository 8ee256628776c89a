"""The dialects scenario's readings along RL: which dialect each arm writes at every held-out evaluation,
and (tandem) whose token chose step 1's dialect in each rollout, with the reward those rollouts got.

Step 1's cue is the character's name, so the token right after it (":" for A, ";" for B, " has" for
plain) chooses the CoT's dialect; in a tandem rollout the word schedule gives that token to the senior
or the junior (trainer's rollouts.jsonl: the text by author). The junior never writes B.

    from trainer.toy.dialects import training_dialects
    training_dialects(Path("runs/toy/train/dialects/tandem/seed0"))
    # {"heldout": [{"step": 10, "A": 61.2, "B": 20.1, "plain": 17.0, "mixed": 1.7, "n": 1600}, ...],
    #  "rollouts": [{"step": 1, "chooser": "junior", "dialect": "A", "n": 9, "reward": 0.56}, ...]}
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from trainer.toy.styles import DIALECT_NAMES, cot_dialect, first_dialect

AUTHORS = {1: "senior", 0: "junior"}


def shares(texts: pd.Series | list[str]) -> dict:
    """% of CoTs in each dialect (styles.cot_dialect), and how many CoTs."""
    d = pd.Series([cot_dialect(t) for t in texts], dtype=object)
    return {**{name: 100.0 * float((d == name).mean()) if len(d) else 0.0 for name in DIALECT_NAMES}, "n": len(d)}


def heldout_dialects(run_dir: Path) -> list[dict]:
    """Per held-out evaluation of a training run (OUTPUT_DIR/evals/step-N/solo): the dialect shares of its
    solo CoTs, by step."""
    out = []
    for solo in sorted(run_dir.glob("evals/step-*/solo/samples.parquet")):
        step = int(solo.parent.parent.name.removeprefix("step-"))
        out.append({"step": step, **shares(pd.read_parquet(solo, columns=["text"])["text"])})
    return out


def chooser(segments: list[list]) -> tuple[str, str | None]:
    """(who wrote the token after step 1's cue, step 1's dialect) of one rollout's [author, text] segments."""
    text = "".join(t for _, t in segments)
    name_end = len(text.lstrip().split(" ", 1)[0].rstrip(":;"))  # the cue of step 1: the character's name
    at = len(text) - len(text.lstrip()) + name_end
    pos, who = 0, None
    for author, piece in segments:
        if pos <= at < pos + len(piece):
            who = AUTHORS[int(author)]
            break
        pos += len(piece)
    return who or "none", first_dialect(text)


def rollout_dialects(run_dir: Path) -> list[dict]:
    """Per RL step and (chooser, step-1 dialect): how many rollouts and their mean reward, from
    OUTPUT_DIR/rollouts.jsonl (the trainer's log_rollouts); [] without one."""
    path = run_dir / "rollouts.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            who, dialect = chooser(r["segments"])
            rows.append({"step": r["step"], "chooser": who, "dialect": dialect or "none", "reward": r["reward"]})
    df = pd.DataFrame(rows)
    if df.empty:
        return []
    g = df.groupby(["step", "chooser", "dialect"])["reward"].agg(["size", "mean"]).reset_index()
    return [
        {"step": int(r.step), "chooser": r.chooser, "dialect": r.dialect, "n": int(r.size), "reward": float(r.mean)}
        for r in g.itertuples()
    ]


def training_dialects(run_dir: Path) -> dict:
    """{"heldout": heldout_dialects, "rollouts": rollout_dialects} of one training run."""
    return {"heldout": heldout_dialects(run_dir), "rollouts": rollout_dialects(run_dir)}
