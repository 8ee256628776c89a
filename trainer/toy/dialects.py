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

import numpy as np
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


def summarize(scenario_dir: Path, runs: dict) -> dict:
    """The scenario's dialect readings for summary.json, per arm: "test" (% of its test-set solo CoTs in
    each dialect, mean over seeds, and per seed), "training" ([step, A, B, plain, mixed] held-out shares,
    mean over seeds; step 0 the initial senior's), "rollouts" (per chooser of step 1's dialect and that
    dialect: rollouts and mean reward, over all seeds and steps, and over the first and last 10 steps)."""
    out: dict = {}
    init_rec = scenario_dir / "init" / "heldout.jsonl"
    init_shares = json.loads(init_rec.read_text().splitlines()[0]).get("dialects") if init_rec.exists() else None
    for arm, seeds in runs.items():
        per_seed = {s: shares(m["solo"].samples()["text"]) for s, m in sorted(seeds.items()) if "solo" in m}
        entry: dict = {}
        if per_seed:
            entry["test"] = {
                **{d: float(np.mean([v[d] for v in per_seed.values()])) for d in DIALECT_NAMES},
                "per_seed": {int(s): {d: v[d] for d in DIALECT_NAMES} for s, v in per_seed.items()},
            }
        logs = [json.loads(p.read_text()) for p in sorted(scenario_dir.glob(f"{arm}/seed*/train/dialects.json"))]
        if logs:
            curve = pd.DataFrame([r for log in logs for r in log["heldout"]])
            rows = [] if init_shares is None else [[0, *(init_shares[d] for d in DIALECT_NAMES)]]
            if len(curve):
                mean = curve.groupby("step")[list(DIALECT_NAMES)].mean()
                rows += [[int(step), *map(float, r)] for step, r in mean.iterrows()]
            # the seeds behind the curve: those with a held-out evaluation (a run still training may have none)
            seeds = sum(1 for log in logs if log["heldout"])
            entry["training"] = {"columns": ["step", *DIALECT_NAMES], "rows": rows, "n_seeds": seeds}
            entry["rollouts"] = rollout_table([r for log in logs for r in log["rollouts"]])
        if entry:
            out[arm] = entry
    return out


def rollout_table(rows: list[dict]) -> dict:
    """Rollouts and mean reward by (chooser, dialect), over all steps and the first / last 10."""
    if not rows:
        return {}
    df = pd.DataFrame(rows)
    df["total"] = df["n"] * df["reward"]
    last = df["step"].max()

    def table(part: pd.DataFrame) -> list[dict]:
        g = part.groupby(["chooser", "dialect"])[["n", "total"]].sum().reset_index()
        return [{"chooser": r.chooser, "dialect": r.dialect, "n": int(r.n), "reward": float(r.total / r.n)}
                for r in g.itertuples()]  # fmt: skip

    return {"all": table(df), "first10": table(df[df["step"] <= 10]), "last10": table(df[df["step"] > last - 10])}
