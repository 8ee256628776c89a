"""Durable files: atomic writes of text, JSON and parquet that a reader sees whole or not at all,
also after a power loss (write a temporary file, fsync, rename, fsync the folder); no write through a
symbolic link; the flock writer lock of a folder; a file's SHA-256.

    from tandem_eval.run.durable import atomic_write_json, folder_lock
    with folder_lock(run, run / ".lock"):
        atomic_write_json(run / "metrics.json", {"n_samples": 8}, root=run)   # root: never through a link

tandem_eval.run.results builds run folders on these; it checks a table against its schema
(tandem_eval.schemas) before handing it here, so each write is one call: the target checked, then
written atomically.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..schemas import RunFolderError, check_regular, read_regular


def missing_dirs(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    return missing


def atomic_write_bytes(path: Path, data: bytes, root: Path | None = None) -> None:
    """Write `data` to `path` so that a reader sees the old file or the new one, never a part, also
    after a power loss: the temporary file is fsynced before the rename and the folder after it.
    The rename replaces a symbolic link at `path` rather than writing through it; with `root`, a link
    at `path` or on the way out of `root` is refused first (check_write_target). A full disk or a
    read-only file system is one RunFolderError, and no temporary file is left behind."""
    if root is not None:
        check_write_target(path, root)
    tmp = _tmp_name(path)
    with _no_partial_file(path, tmp):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        _replace_synced(tmp, path)


def atomic_write_text(path: Path, text: str, root: Path | None = None) -> None:
    """atomic_write_bytes of `text` as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), root)


def atomic_write_json(path: Path, data, root: Path | None = None) -> None:
    text = json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=_json_default) + "\n"
    atomic_write_text(path, text, root)


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def atomic_write_parquet(path: Path, df: pd.DataFrame, root: Path | None = None) -> str:
    """Write `df` to `path` atomically (as atomic_write_bytes, `root` too) and return the file's SHA-256.
    A run folder checks the table against its schema first (RunFolder: schemas.check_frame)."""
    if root is not None:
        check_write_target(path, root)
    tmp = _tmp_name(path)
    with _no_partial_file(path, tmp):
        df.to_parquet(tmp, index=False)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _replace_synced(tmp, path)
    return sha256_file(path)


def _tmp_name(path: Path) -> Path:
    """The temporary file beside `path` (hidden: readers and `tables()` never see it)."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


# What a failed write tells the user to do, by errno (others: check the disk).
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG)
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def write_failed(path: Path, e: OSError) -> RunFolderError:
    """A failed write as one line naming the file, the reason and the fix (nothing written is partial)."""
    name = errno.errorcode.get(e.errno or 0, "OSError")
    if e.errno in _FULL:
        fix = "free some space (or pass another --out) and rerun the command: files already there are unchanged"
    elif e.errno in _READ_ONLY:
        fix = "the file system or folder is read-only: write elsewhere (another --out) or make it writable"
    else:
        fix = "check the disk and rerun the command: files already there are unchanged"
    return RunFolderError(f"cannot write {path}: {e.strerror or e} ({name}); {fix}")


@contextlib.contextmanager
def _no_partial_file(path: Path, tmp: Path) -> Iterator[None]:
    """Remove the temporary file of a write that did not finish (a full disk, a kill, an error), and
    turn an OSError into one RunFolderError line."""
    try:
        yield
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, RunFolderError):
            raise write_failed(path, e) from None
        raise


def make_dirs(path: Path) -> None:
    """`path` and its parents as folders; a full disk or read-only file system is one RunFolderError."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RunFolderError(f"{path} is a file; pass a folder path") from None
    except OSError as e:
        raise write_failed(Path(path), e) from None


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
    """The SHA-256 of a regular file (a folder, FIFO or device is a RunFolderError: never read)."""
    check_regular(path, "restore the file")
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
    make_dirs(folder)
    try:
        fd = _acquire(folder, lock_path, wait_s)
    except BaseException:
        remove_empty(created)  # a refused (or failed) lock leaves no folder it made
        raise
    try:
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        with contextlib.suppress(OSError):  # the holder's name is only for messages: a full disk must not stop here
            os.ftruncate(fd, 0)
            os.write(fd, (json.dumps(me) + "\n").encode())
        yield created
    finally:
        lock_path.unlink(missing_ok=True)  # still held: waiters on this file see it gone and retry
        os.close(fd)


def _acquire(folder: Path, lock_path: Path, wait_s: float) -> int:
    """An fd holding the exclusive flock of the file at `lock_path` (see folder_lock)."""
    check_write_target(lock_path)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise write_failed(lock_path, e) from None
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
            return fd
        os.close(fd)


def remove_empty(folders: list[Path]) -> None:
    """Remove each of `folders` (deepest first) that is empty: undo folders a failed command made."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:  # not empty (someone else's files) or already gone
            pass


def live_holder(lock_path: Path) -> dict | None:
    """The holder ({"pid", "host", "started"}) of the lock at `lock_path` while a live process holds it,
    else None. For readers: it opens an existing lock file read-only and creates nothing."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None  # no lock file (no writer), or a link: nobody holds it through this path
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _lock_holder(lock_path)
    except OSError:
        return None
    finally:
        os.close(fd)  # closing the file releases a shared lock this probe took
    return None


def _lock_holder(lock_path: Path) -> dict:
    try:
        holder = json.loads(read_regular(lock_path, "", cap=4096))
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
