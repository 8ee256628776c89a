"""The generate stage's input checks beside the checkpoints' own (models.check_models): out folders,
the engine, prompt lengths, and a reused solo run. Nothing here loads weights or writes a file;
each failure is a user error with a one-line message naming the fix. plan.validate runs them once
per command, before any engine loads.

    check_out_paths({Path("runs/x/solo"): cfg})           # an --out can hold this run
    prompts = check_prompts(cfg, tok, problems)           # every prompt's ids; one fits the context
    record = check_solo_reuse(cfg, RunFolder("runs/x/solo"), allow_mismatch=False, how="--solo-run")
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from .config import ConfigError, EvalConfig, config_diff, inputs_diff, solo_config, to_dict
from .data import Problem, prompt_ids
from .engines import unavailable
from .grading import check_grader_versions
from .models import resolve_model
from .paths import not_writable
from .results import RunFolder, RunFolderError

log = logging.getLogger(__name__)


def check_out_paths(targets: Mapping[Path, EvalConfig | None]) -> None:
    """Each output folder can be created (or reused): no file in the way, a writable parent, no live
    writer holding it, and an existing run there holds the same experiment as its config (None: the
    settings are not compared)."""
    for path, cfg in targets.items():
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise ConfigError(f"--out {path} is a file; pass a folder path (it is created if missing)")
        reason = not_writable(path)
        if reason:
            raise ConfigError(f"--out {path}: {reason}; pass another --out")
        if RunFolder(path).lock_path.exists():  # a live writer refuses before any model loads (a dead one: nothing)
            with RunFolder(path).lock():
                pass
        if cfg is not None:
            _check_same_run(path, cfg)


def check_out_path(path: str | Path, cfg: EvalConfig | None = None) -> None:
    """check_out_paths for one folder."""
    check_out_paths({Path(path): cfg})


def _check_same_run(path: Path, cfg: EvalConfig) -> None:
    """An existing run at `path` holds the experiment `cfg`; the refusal names the differences."""
    config_path = path / "config.json"
    if not config_path.exists():
        return
    try:
        fingerprint = json.loads(config_path.read_text(encoding="utf-8"))["fingerprint"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise RunFolderError(f"{config_path} is damaged; pass a new --out, or delete {path} to restart") from None
    if fingerprint == cfg.fingerprint():
        return
    old = RunFolder(path).config()["config"]  # refuses an edited config.json
    if old.get("inputs") is None and fingerprint == replace(cfg, inputs=None).fingerprint():
        log.warning("%s predates content hashes of benchmark files: their content is not checked", path)
        return  # the same settings, but its files cannot be checked
    raise RunFolderError(
        f"{path} holds a different run ({config_diff(old, to_dict(cfg))}); pass a new --out, or delete the folder "
        "to start over"
    )


def check_engine(engine: str) -> None:
    """The backend can be loaded here."""
    if reason := unavailable(engine):
        raise ConfigError(reason)


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
        names = ", ".join(f"{b}/{pid}" for b, pid in list(too_long)[:5]) + (" ..." if len(too_long) > 5 else "")
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
    want, raw = to_dict(solo_config(cfg)), solo.config()
    have = raw["config"]
    diffs = []
    for key in SOLO_REUSE_FIELDS:
        a, b = have.get(key), want.get(key)
        if key == "senior" and a != b and isinstance(a, dict) and isinstance(b, dict):
            if a.get("dtype") != b.get("dtype"):
                diffs.append(f"senior.dtype ({a.get('dtype')} vs {b.get('dtype')})")
            if not _same_checkpoint(a.get("path"), b.get("path")):
                diffs.append(f"senior ({a.get('path')} vs {b.get('path')})")
        elif key == "inputs":  # nothing for a run from before inputs were hashed (check_solo_reuse warns)
            diffs += inputs_diff(a, b)
        elif isinstance(a, dict) and isinstance(b, dict):
            diffs += [
                f"{key}.{k} ({a.get(k)!r} vs {b.get(k)!r})" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)
            ]
        elif a != b:
            shown = (lambda v: "custom" if v else "tokenizer's own") if key == "chat_template" else repr
            diffs.append(f"{key} ({shown(a)} vs {shown(b)})")
    grader = {k: v for k, v in check_grader_versions(True).items() if k != "mismatch"}
    recorded = {k: v for k, v in (raw.get("grader") or {}).items() if k != "mismatch"}
    if recorded != grader:
        diffs.append(f"grader ({recorded or 'unrecorded'} vs {grader})")
    return diffs


def _same_checkpoint(a: str | None, b: str | None) -> bool:
    if a == b:
        return True
    try:
        return resolve_model(a).resolve() == resolve_model(b).resolve()
    except Exception:  # a moved or deleted checkpoint cannot be shown to be the same one
        return False


def check_solo_reuse(cfg: EvalConfig, solo: RunFolder, allow_mismatch: bool, how: str) -> dict:
    """Refuse a solo run that does not match the handoff (unless allowed); the record for config.json."""
    diffs = solo_reuse_differences(cfg, solo)
    if diffs and not allow_mismatch:
        raise RunFolderError(
            f"{how} {solo.path} is not this senior's solo run under the handoff's settings: differs in "
            f"{'; '.join(diffs)}. Pass the matching solo run (or a new --out), or --allow-solo-mismatch to use it "
            "anyway"
        )
    if solo.config()["config"].get("inputs") is None:
        log.warning("%s predates content hashes of benchmark files: their content is not checked", solo.path)
    return solo_record(solo.path, solo.config()["fingerprint"], diffs, allow_mismatch)


def solo_record(path: Path, fingerprint: str, diffs: list[str], allow_mismatch: bool) -> dict:
    """What a handoff run's config.json records of the solo run its tax compares with."""
    return {
        "path": str(Path(path).resolve()),
        "fingerprint": fingerprint,
        "differs": diffs,
        "allow_solo_mismatch": bool(allow_mismatch),
    }
