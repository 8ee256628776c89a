"""The generate stage's input checks beside the checkpoints' own (models.check_models): out folders,
prompt lengths, and a reused solo run. Nothing here loads weights or writes a file;
each failure is a user error with a one-line message naming the fix. plan.validate runs them once
per command, before any engine loads.

    check_out_path("runs/x/solo", cfg)                    # an --out can hold this run
    prompts = check_prompts(cfg, tok, problems)           # every prompt's ids; one fits the context
    record = check_solo_reuse(cfg, RunFolder("runs/x/solo"), allow_mismatch=False, how="--solo-run")
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..config import EvalConfig, as_recorded, inputs_diff, solo_config, to_dict
from ..data import Problem, prompt_ids
from ..models import Checkpoint, resolve_model
from ..paths import check_out_not_file, not_writable
from ..run.results import RunFolder
from ..schemas import ConfigError, RunFolderError
from .grading import check_grader_versions

log = logging.getLogger(__name__)


def check_out_folder(rf: RunFolder, cfg: EvalConfig | None, fingerprint: str | None = None) -> RunFolder:
    """The output folder `rf` can be created (or reused): no file in the way, a writable parent, no live
    writer holding it, and an existing run there holds the same experiment as `cfg` (`fingerprint`: cfg's,
    as the plan computed it; cfg None: the settings are not compared). `rf` keeps the config.json record it
    read, so the command reads it once. Returns `rf`."""
    path = rf.path
    check_out_not_file(path)
    if holder := _enclosing_run(path):
        raise ConfigError(
            f"--out would put the run folder {path} inside the run folder {holder} (every reader would then "
            f"refuse {holder}); pass an --out outside it, such as {holder.parent}"
        )
    reason = not_writable(path)
    if reason:
        raise ConfigError(f"--out {path}: {reason}; pass another --out")
    if rf.lock_path.exists():  # a live writer refuses before any model loads (a dead one: nothing)
        with rf.lock():
            pass
    if cfg is not None:
        rf.check_holds(cfg, fingerprint)
    return rf


def _enclosing_run(path: Path) -> Path | None:
    """The nearest folder above `path` that is a run folder (its config.json beside samples, a shard
    table or a COMPLETE marker), or None: a run folder never holds another."""
    for above in Path(os.path.abspath(path)).parents:
        rf = RunFolder(above)
        if rf.config_path.is_file() and (rf.done_path.exists() or rf.samples_path.exists() or rf.shards()):
            return above
    return None


def check_solo_problems(solo: RunFolder, samples, problems: list[Problem], how: str) -> None:
    """A reused solo run covers exactly the handoff's problems, refused up front (the tax pairs them
    problem by problem, so a difference would only surface after every handoff sample was generated).
    --allow-solo-mismatch never allows it: it admits other settings, not other problems."""
    have = set(map(tuple, samples[["benchmark", "problem_id"]].drop_duplicates().itertuples(index=False)))
    want = {(p.benchmark, p.problem_id) for p in problems}
    if have != want:
        raise RunFolderError(
            f"{how} {solo.path} covers other problems than this handoff ({len(want - have)} of its {len(want)} "
            f"problems have no solo samples, {len(have - want)} solo problems are not in it); "
            "--allow-solo-mismatch allows a solo run of other settings (senior, seed, sampling, budget, chat "
            "template, grader), never of other problems: pass a solo run of the same --benchmark/--limit/--num-shards, "
            "or omit --solo-run to make one"
        )


def check_out_path(path: str | Path, cfg: EvalConfig | None = None) -> None:
    """check_out_folder of a folder path."""
    check_out_folder(RunFolder(path), cfg)


def check_prompts(cfg: EvalConfig, tok, problems: list[Problem]) -> dict[tuple[str, str], tuple[int, ...]]:
    """Every problem's prompt ids by (benchmark, problem id). Refuses a context no prompt fits in;
    warns (by name) about problems that get 0 tokens."""
    prompts = {
        (p.benchmark, p.problem_id): tuple(prompt_ids(tok, p.problem, chat_template=cfg.chat_template))
        for p in problems
    }
    ctx = cfg.sampling.max_context
    lengths = {key: len(ids) for key, ids in prompts.items()}
    too_long = {key: n for key, n in lengths.items() if n >= ctx}
    if len(too_long) == len(lengths):
        raise ConfigError(
            f"--max-context {ctx} leaves no room to generate: every prompt is at least {min(lengths.values())} "
            f"tokens; raise --max-context above {max(lengths.values())}"
        )
    if too_long:
        # an id that already names its benchmark (tiny/0001) is shown as it is, not as tiny/tiny/0001
        shown = [pid if str(pid).startswith(f"{b}/") else f"{b}/{pid}" for b, pid in list(too_long)[:5]]
        names = ", ".join(shown) + (" ..." if len(too_long) > 5 else "")
        log.warning(
            "%d problem(s) have prompts of >= --max-context %d tokens and get 0-token samples: %s; "
            "raise --max-context to generate for them",
            len(too_long),
            ctx,
            names,
        )
    return prompts


# ---- a reused solo run -----------------------------------------------------------------------------
# Fields of a solo run that must equal the handoff's own for the tax to compare like with like
# (sharding, batch size, label and the k list do not change samples' meaning).
SOLO_REUSE_FIELDS = (
    "mode",
    "schedule",
    "senior",
    "seed",
    "sampling",
    "n",
    "benchmarks",
    "limit",
    "engine",
    "chat_template",
    "group",
    "inputs",
)


def solo_reuse_differences(cfg: EvalConfig, solo: RunFolder) -> list[str]:
    """Fields in which the complete solo run `solo` differs from the solo run `cfg`'s handoff needs,
    each as 'field (run value vs needed value)'; the grader's versions count as the field `grader`."""
    return _differences(cfg, solo.record)


def _differences(
    cfg: EvalConfig, raw: dict, grader_versions: dict | None = None, senior: Checkpoint | None = None
) -> list[str]:
    """solo_reuse_differences against a solo run's checked config.json `raw`; `grader_versions` and
    `senior`: this command's, as its plan read and resolved them (None: read or resolved here)."""
    versions = check_grader_versions(True) if grader_versions is None else grader_versions
    grader = {k: v for k, v in versions.items() if k != "mismatch"}
    have, want = raw["config"], to_dict(solo_config(cfg))
    senior_diffs = _senior_differences(have.get("senior"), want.get("senior"), senior)
    inputs = inputs_diff(have.get("inputs"), want.get("inputs"))  # none for a run from before inputs were hashed
    diffs = []
    for key in SOLO_REUSE_FIELDS:
        a, b = have.get(key), want.get(key)
        if key == "senior" and a != b and isinstance(a, dict) and isinstance(b, dict):
            diffs += senior_diffs
        elif key == "inputs":
            diffs += inputs
        elif isinstance(a, dict) and isinstance(b, dict):
            diffs += [
                f"{key}.{k} ({a.get(k)!r} vs {b.get(k)!r})" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)
            ]
        elif a != b:
            shown = (lambda v: "custom" if v else "tokenizer's own") if key == "chat_template" else repr
            diffs.append(f"{key} ({shown(a)} vs {shown(b)})")
    recorded = {k: v for k, v in (raw.get("grader") or {}).items() if k != "mismatch"}
    if recorded != grader:
        diffs.append(f"grader ({recorded or 'unrecorded'} vs {grader})")
    return diffs


def _senior_differences(a, b, here: Checkpoint | None = None) -> list[str]:
    """How a solo run's recorded senior `a` differs from this command's `b`: dtype, and checkpoint (two
    spellings of one folder are the same). `here`: `b` as the plan resolved it, so only the solo run's
    path, a string from another command, is resolved again."""
    if a == b or not isinstance(a, dict) or not isinstance(b, dict):
        return []
    diffs = [f"senior.dtype ({a.get('dtype')} vs {b.get('dtype')})"] if a.get("dtype") != b.get("dtype") else []
    if a.get("content") and b.get("content") and a["content"] != b["content"]:  # replaced weights, same path
        diffs.append(
            f"senior checkpoint content ({b.get('path')} changed since the solo run: sha256 {a['content'][:12]} "
            f"then, {b['content'][:12]} now)"
        )
    if a.get("path") != b.get("path"):
        # a served senior is named by its server, not a folder: two spellings of it are two servers
        same = here is None or here.server is None
        try:
            # a missing path raises here (None is no checkpoint) and so counts as not the same
            ours = resolve_model(b.get("path")) if here is None else here.path  # type: ignore[arg-type]
            same = same and resolve_model(a.get("path")).resolve() == ours.resolve()  # type: ignore[arg-type]
        except Exception:  # a moved or deleted checkpoint cannot be shown to be the same one
            same = False
        diffs += [] if same else [f"senior ({a.get('path')} vs {b.get('path')})"]
    return diffs


def check_solo_reuse(
    cfg: EvalConfig,
    solo: RunFolder,
    allow_mismatch: bool,
    how: str,
    grader_versions: dict | None = None,
    senior: Checkpoint | None = None,
) -> dict:
    """Refuse a solo run that does not match the handoff (unless allowed); the record for config.json.
    `grader_versions` and `senior`: the command's, as its plan read and resolved them (None: read or
    resolved here)."""
    raw = solo.record
    diffs = _differences(cfg, raw, grader_versions, senior)
    if diffs and not allow_mismatch:
        raise RunFolderError(
            f"{how} {solo.path} is not this senior's solo run under the handoff's settings: differs in "
            f"{'; '.join(diffs)}. Pass the matching solo run (or a new --out), or --allow-solo-mismatch to use it "
            "anyway"
        )
    unchecked = as_recorded(solo_config(cfg), raw["config"])[1]
    if unchecked:
        log.warning("%s predates content hashes of %s: not checked", solo.path, " and ".join(unchecked))
    return solo_record(solo.path, raw["fingerprint"], diffs, allow_mismatch)


def solo_record(path: Path, fingerprint: str, diffs: list[str], allow_mismatch: bool) -> dict:
    """What a handoff run's config.json records of the solo run its tax compares with."""
    return {
        "path": str(Path(path).resolve()),
        "fingerprint": fingerprint,
        "differs": diffs,
        "allow_solo_mismatch": bool(allow_mismatch),
    }
