"""Durable files: atomic writes of text, JSON and parquet that a reader sees whole or not at all,
also after a power loss (write a temporary file, fsync, rename, fsync the folder); no write through a
symbolic link; the flock writer lock of a folder; a file's SHA-256.

    from tandem_eval.durable import atomic_write_json, folder_lock
    with folder_lock(run, run / ".lock"):
        atomic_write_json(run / "metrics.json", {"n_samples": 8}, root=run)   # root: never through a link

tandem_eval.results builds run folders on these (and re-exports the writers under their old names);
it checks a table against its schema (tandem_eval.schemas) before handing it here, so each write is
one call: the target checked, then written atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from .schemas import RunFolderError


def missing_dirs(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    return missing


def atomic_write_text(path: Path, text: str, root: Path | None = None) -> None:
    """Write `text` to `path` so that a reader sees the old file or the new one, never a part, also
    after a power loss: the temporary file is fsynced before the rename and the folder after it.
    The rename replaces a symbolic link at `path` rather than writing through it; with `root`, a link
    at `path` or on the way out of `root` is refused first (check_write_target)."""
    if root is not None:
        check_write_target(path, root)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    _replace_synced(tmp, path)


def atomic_write_json(path: Path, data, root: Path | None = None) -> None:
    text = json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=_json_default) + "\n"
    atomic_write_text(path, text, root)


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def atomic_write_parquet(path: Path, df: pd.DataFrame, root: Path | None = None) -> str:
    """Write `df` to `path` atomically (as atomic_write_text, `root` too) and return the file's SHA-256.
    A run folder checks the table against its schema first (RunFolder: schemas.check_frame)."""
    if root is not None:
        check_write_target(path, root)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    df.to_parquet(tmp, index=False)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _replace_synced(tmp, path)
    return sha256_file(path)


def _replace_synced(tmp: Path, path: Path) -> None:
    """Rename the fsynced `tmp` onto `path`, then fsync the folder so that the rename itself is durable."""
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_write_target(path: Path, root: Path | None = None) -> None:
    """Refuse (RunFolderError) a write that would follow a symbolic link: `path` itself a link (e.g. a
    planted view.html), or, with `root`, a folder on the way that leads out of `root` (a linked lens/)."""
    path = Path(path)
    if path.is_symlink():
        raise RunFolderError(
            f"{path} is a symbolic link (to {os.readlink(path)}); nothing is written through links: remove the link, "
            "or write elsewhere"
        )
    if root is not None:
        real_root = Path(root).resolve()
        parent = path.parent.resolve()
        if parent != real_root and real_root not in parent.parents:
            raise RunFolderError(
                f"{path} would be written outside the run folder {root} (a folder on the way is a link to "
                f"{parent}); nothing is written through links: replace the link with a real folder"
            )


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextlib.contextmanager
def folder_lock(folder: Path, lock_path: Path, wait_s: float = 0.0) -> Iterator[list[Path]]:
    """Hold `lock_path` (RUN/.lock) while writing `folder`: an exclusive flock, which the kernel
    releases when the holder exits or dies, so a lock never outlives its process and is never broken
    by guessing. The PID and host written into the file only name the holder in the error a second
    writer gets (after waiting up to wait_s). Not reentrant: a process that holds the lock must not take it again.
    Yields the folders it had to create (`folder` and missing parents, deepest first)."""
    created = missing_dirs(folder)
    folder.mkdir(parents=True, exist_ok=True)
    check_write_target(lock_path)
    deadline = time.monotonic() + wait_s
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() < deadline:
                time.sleep(0.02)
                continue
            holder = _lock_holder(lock_path)
            raise RunFolderError(
                f"{folder} is being written by another process (PID {holder.get('pid', 'unknown')} on "
                f"{holder.get('host', 'unknown')}, since {holder.get('started', 'unknown')}); wait for it to "
                f"finish (the lock {lock_path} is released when that process ends)"
            ) from None
        # The previous holder unlinks the file on release; a lock on that unlinked file excludes
        # nobody, so lock the file that is at the path now.
        if _same_file(fd, lock_path):
            break
        os.close(fd)
    try:
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(me) + "\n").encode())
        yield created
    finally:
        lock_path.unlink(missing_ok=True)  # still held: waiters on this file see it gone and retry
        os.close(fd)


def _lock_holder(lock_path: Path) -> dict:
    try:
        holder = json.loads(lock_path.read_text())
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino)
