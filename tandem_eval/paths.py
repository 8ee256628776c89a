"""Paths and names at the boundary: what a run records for a path argument, a label as a folder name,
whether a folder can be written, the text of a chat template file, so every command behaves the same
from any working directory.

    from tandem_eval.paths import absolute_spec, folder_name, not_writable, read_chat_template
    absolute_spec("ckpt/senior")      # "/home/me/ckpt/senior" (toy:NAME stays as given)
    folder_name("/tmp/x")             # "tmp-x": --label is a label, never a path
    not_writable("runs/a/solo")       # None, or "runs/a is not writable"
    check_out_not_file(Path("runs/a"))  # a ConfigError when runs/a is a file
    read_chat_template(Path("t.jinja"), "--chat-template")   # its text, checked to parse as Jinja
    cache_root()                      # ~/.cache/tandem-eval, or $TANDEM_EVAL_CACHE

Standard library only (the CLI imports it before `--help`; jinja2 only when a template is read).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import overload

TEMPLATE_CAP = 2**20  # a chat template file is text of a few KB; a bigger one is not a template
_LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")  # data.benchmarks.LOCAL_SUFFIXES (no pandas import)


CACHE_ENV = "TANDEM_EVAL_CACHE"  # overrides the cache root (default ~/.cache/tandem-eval)


def cache_root() -> Path:
    """Where tandem-eval caches what it can recompute (converted checkpoints, file hashes): never
    inside a checkpoint or a run folder."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "tandem-eval").expanduser()


SERVED = re.compile(r"https?://")  # a checkpoint named as a server: "URL[,URL...]#NAME" (--engine served)


def served_name(spec: str | os.PathLike) -> str | None:
    """The model name of a served checkpoint ("http://HOST:PORT/v1#NAME" -> NAME; "" without #NAME), or
    None when `spec` names a folder or a toy: checkpoint."""
    return str(spec).rpartition("#")[2] if SERVED.match(str(spec)) else None


@overload
def absolute_spec(spec: str) -> str: ...
@overload
def absolute_spec(spec: None) -> None: ...
@overload
def absolute_spec(spec: str | None) -> str | None: ...
def absolute_spec(spec: str | None) -> str | None:  # the overloads: a given spec stays a str, for mypy
    """A checkpoint argument as a run records it: `toy:NAME` and a server's URL#NAME as given, a path made
    absolute, so that a run made from one working directory is read, resumed and compared the same from
    any other."""
    if spec is None or str(spec).startswith("toy:") or SERVED.match(str(spec)):  # names, not paths
        return spec
    return os.path.abspath(os.path.expanduser(str(spec)))


def absolute_benchmarks(entries) -> tuple[str, ...]:
    """--benchmark values as a run records them: local files absolute, registry and set names as given."""

    def one(name: str) -> str:
        local = Path(name.strip()).suffix.lower() in _LOCAL_SUFFIXES
        return os.path.abspath(os.path.expanduser(name.strip())) if local else name

    return tuple(",".join(one(part) for part in str(e).split(",")) for e in entries)  # "a.jsonl,b.jsonl" too


_CHECKPOINT_DIR = re.compile(r"(checkpoint|step|ckpt)[-_]?\d+", re.IGNORECASE)


def senior_label(spec: str | os.PathLike) -> str:
    """The default label of a run of checkpoint `spec` (no `--label`): its folder's name, a bundled
    `toy:SCENARIO/NAME` its NAME (`toy:tandem` -> `toy-tandem`), a trainer's `RUN/checkpoint-N` (a
    name every training repeats) `RUN/checkpoint-N`, so its default --out, runs/RUN-checkpoint-N,
    is its own. The one rule: the CLI's runs, the lenses' solo runs and the read side's arms all
    take it, so runs of one senior make one arm. A served model's (`http://HOST:PORT/v1#NAME`) is NAME."""
    if (name := served_name(spec)) is not None:  # a served model: the name its servers give it
        return name or "served"
    path = Path(str(spec).replace("toy:", "toy-").rstrip("/"))
    if _CHECKPOINT_DIR.fullmatch(path.name) and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name or str(spec)


def folder_name(label: str, default: str = "senior") -> str:
    """A label as one folder name (runs/<name>): `--label` is a label, never a path, so separators,
    `..` and other characters outside letters, digits, . _ - become `-`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(label)).strip("-.") or default


def not_writable(path: str | os.PathLike) -> str | None:
    """Why files cannot be written at `path` (a folder, existing or to be created), or None: the
    nearest existing folder must be a writable folder. Checked before any work, so that a read-only
    run folder is one line up front rather than an error after minutes of scoring."""
    path = Path(path)
    parent = path
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable"
    return None


def check_out_not_file(path: Path) -> None:
    """--out names a folder (created if missing): a file there is refused, by the CLI for --out itself and
    by the plan for each run folder under it, in the one message."""
    if path.exists() and not path.is_dir():
        from .schemas import ConfigError

        raise ConfigError(f"--out {path} is a file; pass a folder path (it is created if missing)")


def read_chat_template(path: Path | None, option: str) -> str | None:
    """The text of a --chat-template FILE: a readable UTF-8 file whose Jinja parses."""
    from .files import read_regular
    from .schemas import ConfigError

    if path is None:
        return None
    if not path.exists():
        raise ConfigError(f"{option} {path}: no such file; pass a Jinja template file")
    try:
        text = read_regular(path, f"pass a Jinja template file as {option}", TEMPLATE_CAP, ConfigError).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{option} {path}: cannot read it as UTF-8 text ({type(e).__name__}); fix the file") from None
    if not text.strip():
        raise ConfigError(f"{option} {path} is empty; pass a Jinja chat template")
    from jinja2 import Environment, TemplateSyntaxError

    try:
        Environment().parse(text)
    except TemplateSyntaxError as e:
        msg = f"{option} {path}: Jinja syntax error at line {e.lineno}: {e.message}; fix the template"
        raise ConfigError(msg) from None
    return text
