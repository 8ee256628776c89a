"""The toy world's RL logs: the training summary (reward, zero-variance groups, held-out curve), the
score the checkpoint rule ranks by, and the learning-rate check (which lr each arm takes).

    from trainer.toy.training import choose_lr, heldout_score, read_jsonl
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tandem_eval.files import atomic_write_json
from tandem_eval.report.collect import read_train_log
from tandem_eval.schemas import to_jsonable


def read_jsonl(path: Path) -> list[dict]:
    """A trainer log's records by step (report.collect.read_train_log), [] when there is none. A resumed
    run re-logs the steps after its last checkpoint: the later record of a step wins."""
    if not path.exists():
        return []
    df = read_train_log(path)
    return (df.drop_duplicates("step", keep="last") if "step" in df else df).to_dict("records")


def heldout_pass1(record: dict) -> float | None:
    solo = record.get("solo") or {}
    return (solo.get("macro") or {}).get("pass@1")


def training_summary(scenario_dir: Path, arm: str) -> dict:
    """Reward and zero-variance-group fraction (mean of the first and last 10 steps, over seeds) and
    the held-out solo pass@1 curve (mean over seeds; step 0 = the initial senior) with its n per point
    ("heldout_n": [step, seeds, problems], the figures' n: a step not every seed reached has fewer)."""
    logs = [read_jsonl(p) for p in sorted(scenario_dir.glob(f"{arm}/seed*/train/train_log.jsonl"))]
    logs = [rows for rows in logs if rows]
    if not logs:
        return {}

    def window(key: str, part: slice) -> float:
        return float(np.mean([np.mean([r[key] for r in rows[part]]) for rows in logs]))

    curve: dict[int, list[float]] = {}
    problems: dict[int, set[int]] = {}

    def add(step: int, rec: dict) -> None:
        curve.setdefault(step, []).append(heldout_pass1(rec))
        problems.setdefault(step, set()).add(((rec.get("solo") or {}).get("n_problems") or {}).get("macro"))

    for rec in read_jsonl(scenario_dir / "init" / "heldout.jsonl"):
        add(0, rec)
    for p in sorted(scenario_dir.glob(f"{arm}/seed*/train/eval_log.jsonl")):
        for rec in read_jsonl(p):
            if heldout_pass1(rec) is not None:
                add(int(rec["step"]), rec)
    return {
        "n_seeds": len(logs),
        "steps": max(len(rows) for rows in logs),
        "reward_first10": window("reward", slice(0, 10)),
        "reward_last10": window("reward", slice(-10, None)),
        "zero_std_first10": window("frac_reward_zero_std", slice(0, 10)),
        "zero_std_last10": window("frac_reward_zero_std", slice(-10, None)),
        "per_step": {
            k: [float(np.mean([rows[i][k] for rows in logs if i < len(rows)])) for i in range(len(logs[0]))]
            for k in ("reward", "frac_reward_zero_std")
        },
        "heldout_pass@1": [[s, float(np.mean(v))] for s, v in sorted(curve.items())],
        "heldout_n": [[s, len(v), max((n for n in problems[s] if n), default=None)] for s, v in sorted(curve.items())],
    }


def heldout_score(record: dict) -> float | None:
    """The checkpoint-selection score of a held-out record: solo pass@4 (the paper's rule), pass@1
    where the held-out n is below 4."""
    macro = (record.get("solo") or {}).get("macro") or {}
    return macro.get("pass@4", macro.get("pass@1"))


def choose_lr(runs: dict[tuple[str, float], Path]) -> dict[str, float]:
    """{arm: lr}: per arm, the lr whose sweep run ends with the best held-out score (the checkpoint
    rule's score; a tie goes to the smaller lr). Arms without any held-out record are left out."""
    best: dict[str, tuple[float, float]] = {}
    for (arm, lr), out in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        evals = read_jsonl(Path(out) / "eval_log.jsonl")
        score = heldout_score(evals[-1]) if evals else None
        if score is not None and (arm not in best or score > best[arm][0]):
            best[arm] = (score, lr)
    return {arm: lr for arm, (_, lr) in best.items()}


def write_lr_sweep(
    results: str | Path, runs: dict[tuple[str, float], Path], chosen: dict[str, float], scenario: str
) -> dict:
    """results/lr_sweep.json from the sweep's run folders ({(arm, lr): output_dir}) and the lr each arm
    chose (choose_lr)."""
    rows = []
    for (arm, lr), out in sorted(runs.items()):
        log, evals = read_jsonl(Path(out) / "train_log.jsonl"), read_jsonl(Path(out) / "eval_log.jsonl")
        half = max(1, len(log) // 2)
        rows.append(
            {
                "arm": arm,
                "lr": lr,
                "steps": len(log),
                "reward_first_half": float(np.mean([r["reward"] for r in log[:half]])) if log else None,
                "reward_second_half": float(np.mean([r["reward"] for r in log[half:]])) if log[half:] else None,
                "zero_std_mean": float(np.mean([r["frac_reward_zero_std"] for r in log])) if log else None,
                "heldout_pass@1": heldout_pass1(evals[-1]) if evals else None,
                "heldout_score": heldout_score(evals[-1]) if evals else None,
            }
        )
    sweep = to_jsonable(
        {
            "scenario": scenario,
            "seed": 0,
            "rule": "per arm, the lr with the best held-out solo pass@4 at the end of the sweep run",
            "chosen_lr": chosen,
            "runs": rows,
        }
    )
    atomic_write_json(Path(results) / "lr_sweep.json", sweep)
    return sweep
