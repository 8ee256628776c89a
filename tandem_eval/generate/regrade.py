"""Re-grade a finished run folder with the installed grader, without regenerating anything.

Reads RUN/samples.parquet (a complete run: COMPLETE marker present), grades every stored text
against its gold answer again, and writes beside the stored verdicts (which stay untouched):

    RUN/regrade.parquet   one row per sample: benchmark, group, problem_id, sample_idx, mode, gold,
                          old_/new_ correct, grade_status, extracted_answer; new_detail; changed;
                          old_grader / new_grader (package versions)
    RUN/regrade.json      grader versions, counts, and pass@k with the stored and the new verdicts

The way lighteval re-scores stored details: useful after a grader fix or upgrade, or to audit a
run made elsewhere. From the shell: `tandem-eval regrade RUN`; from Python:

    from tandem_eval.generate.regrade import regrade
    result = regrade("runs/my-senior/solo")      # RegradeResult: .table, .changed, .pass_at_k
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..files import atomic_write_json
from ..metrics.passk import summarize_pass_at_k
from ..run.results import Amendment, RunFolder, verify_run
from ..schemas import ConfigError
from .grading import PINNED, Grader, check_grader_versions

KEY = ["benchmark", "group", "problem_id", "sample_idx", "mode"]
TABLE = "regrade.parquet"


@dataclass(frozen=True)
class RegradeResult:
    path: Path  # the run folder
    table: pd.DataFrame  # what regrade.parquet holds
    pass_at_k: dict  # {"stored": summary, "regraded": summary}, as summarize_pass_at_k gives
    ks: tuple[int, ...]

    @property
    def changed(self) -> pd.DataFrame:
        """Samples whose verdict (correct or grade_status) differs between stored and regraded."""
        return self.table[self.table["changed"]]


def _versions_text(versions: dict | None) -> str:
    if not versions:
        return "unknown"
    return " ".join(f"{p}=={versions.get(p) or 'missing'}" for p in PINNED)


def regrade(
    run: str | Path,
    timeout: float = 5.0,
    allow_grader_mismatch: bool = False,
    progress: bool = False,
    n_workers: int | None = None,
) -> RegradeResult:
    """Grade every sample of complete run folder `run` again; write regrade.parquet/json there."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        # 0 or less would turn every verdict into a timeout and record that as the run's regrade
        raise ConfigError(f"--timeout must be a number of seconds > 0, got {timeout}; the default is 5")
    # its own table may be unrecorded (a regrade stopped before recording it): this call rewrites it
    RunFolder(run).check_sealed("regrade")  # it records regrade.parquet in COMPLETE
    rf = verify_run(run, rewriting=TABLE)
    new_versions = check_grader_versions(allow_grader_mismatch)
    with rf.amending(rewriting=TABLE) as amend:  # one writer of the folder from here to the record
        return _regrade(amend, timeout, new_versions, progress, n_workers)


def _regrade(
    amend: Amendment, timeout: float, new_versions: dict, progress: bool, n_workers: int | None
) -> RegradeResult:
    """regrade's work on the verified run `amend.folder`, whose lock the caller holds (results.Amendment)."""
    rf = amend.folder
    stored = rf.record
    samples = rf.load_samples().reset_index(drop=True)
    pairs = list(zip(samples["text"], samples["gold"]))
    with Grader(n_workers) as grader:
        if progress and pairs:
            from rich.progress import Progress

            with Progress(transient=True) as bar:
                task = bar.add_task("regrading", total=len(pairs))
                grades = grader.grade_many(pairs, timeout, lambda n, _: bar.update(task, completed=n))
        else:
            grades = grader.grade_many(pairs, timeout)
    table = samples[[*KEY, "gold"]].copy()
    table["old_correct"] = samples["correct"].astype(bool)
    table["old_grade_status"] = samples["grade_status"]
    table["old_extracted_answer"] = samples["extracted_answer"]
    table["new_correct"] = [g.correct for g in grades]
    table["new_grade_status"] = [g.status for g in grades]
    table["new_extracted_answer"] = [g.extracted for g in grades]
    table["new_detail"] = [g.detail for g in grades]
    table["changed"] = (table.old_correct != table.new_correct) | (table.old_grade_status != table.new_grade_status)
    table["old_grader"] = _versions_text(stored.get("grader"))
    table["new_grader"] = _versions_text(new_versions)

    ks = tuple(stored["config"]["ks"])
    pass_at_k = {
        "stored": summarize_pass_at_k(samples, list(ks)),
        "regraded": summarize_pass_at_k(samples.assign(correct=table["new_correct"]), list(ks)),
    }
    atomic_write_json(  # first: the table's record in COMPLETE, last, is what makes the regrade count
        rf.path / "regrade.json",
        {
            "grader": {"stored": stored.get("grader"), "regraded": new_versions},
            "timeout_s": timeout,
            "n_samples": len(table),
            "n_changed": int(table["changed"].sum()),
            "grade_status": {k: int(v) for k, v in table["new_grade_status"].value_counts().sort_index().items()},
            "pass_at_k": pass_at_k,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        rf.path,
    )
    amend.add_table(TABLE, table)  # recorded in COMPLETE, verified by every reader
    return RegradeResult(rf.path, table, pass_at_k, ks)
