"""The communication tax from two lm-eval sample logs: one `schedule=solo` run and one handoff run.

lm-eval writes `samples_TASK_DATE.jsonl` per task with `--log_samples`; each line holds the doc id, the
metric values and (for `--model tandem`) the tandem info under `arguments.gen_args_0.arg_2.tandem`.

    from tandem_eval.integrations.lm_eval_tax import lm_eval_tax, read_samples
    tax = lm_eval_tax("out/solo", "out/paragraph", metric="exact_match")   # folders or .jsonl files
    tax["macro"]["pass@1"]["tax"]        # {"estimate": points, "low", "high", ...}
    df = read_samples("out/paragraph")   # one row per (task, doc, repeat): metric values, author_mask, ...

The tax is tandem_eval.metrics.tax.communication_tax with each task as a benchmark and each doc as a
problem, a sample "correct" when its metric value is > 0 (pass@1 = the task's mean for 0/1 metrics).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..metrics.tax import communication_tax
from ..schemas import N_BOOT, ConfigError

INFO_PATH = ("arguments", "gen_args_0", "arg_2", "tandem")


def sample_files(path: str | Path) -> list[Path]:
    """The lm-eval sample logs at path: a .jsonl file, or every samples_*.jsonl under a folder."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.rglob("samples_*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no samples_*.jsonl under {path}; run lm-eval with --output_path and --log_samples")
    return files


def read_samples(path: str | Path) -> pd.DataFrame:
    """One row per (task, doc_id, repeat) with every metric the log holds and the tandem info, if any."""
    rows = []
    for f in sample_files(path):
        task = f.stem.removeprefix("samples_").rsplit("_", 1)[0]  # samples_TASK_DATE.jsonl
        for line in f.read_text(encoding="utf-8").splitlines():
            s = json.loads(line)
            info = s
            for key in INFO_PATH:
                info = info.get(key, {}) if isinstance(info, dict) else {}
            infos = info if isinstance(info, list) and info else [{}]
            metrics = {m: s[m] for m in s.get("metrics", []) if m in s}
            for repeat, one in enumerate(infos):
                rows.append({"task": task, "doc_id": s["doc_id"], "repeat": repeat, "filter": s.get("filter"),
                             **metrics, **one})  # fmt: skip
    return pd.DataFrame(rows)


def _as_tax_samples(df: pd.DataFrame, metric: str, mode: str, filter_name: str | None, where) -> pd.DataFrame:
    if filter_name is not None:
        present = sorted({str(f) for f in df["filter"].dropna()}) if "filter" in df.columns else []
        if filter_name not in present:  # else: an empty table, and "samples is empty" deep in pass@k
            raise ConfigError(
                f"filter {filter_name!r} is not in the {mode} sample log {where}; its filters: "
                f"{', '.join(present) or 'none logged'}"
            )
        df = df[df["filter"] == filter_name]
    if metric not in df.columns:
        raise ValueError(f"metric {metric!r} is not in the sample log; found {sorted(set(df.columns) & _METRICS)}")
    one = df.drop_duplicates(["task", "doc_id", "repeat"])  # each filter logs the doc again: keep the first
    return pd.DataFrame(
        {
            "benchmark": one.task,
            "group": one.task,
            "problem_id": one.doc_id.astype(str),
            "sample_idx": one.repeat,
            "correct": one[metric].astype(float) > 0,
            "mode": mode,
        }
    )


_METRICS = {"exact_match", "acc", "acc_norm", "f1", "em", "pass@1"}


def lm_eval_tax(
    solo: str | Path, handoff: str | Path, metric: str = "exact_match", filter_name: str | None = None, n_boot=N_BOOT
) -> dict:
    """Solo, handoff, tax (points) and retention per task and macro with paired bootstrap CIs.

    filter_name picks one of the task's filters (default: the first logged for each doc)."""
    a = _as_tax_samples(read_samples(solo), metric, "solo", filter_name, solo)
    b = _as_tax_samples(read_samples(handoff), metric, "handoff", filter_name, handoff)
    return communication_tax(a, b, ks=[1], n_boot=n_boot)
