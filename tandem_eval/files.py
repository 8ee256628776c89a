"""Guarded files, in one place: every read that must meet a regular file of a bounded size, every
write that must land whole and never through a link, the folders they need, a file's SHA-256 and a
folder's writer lock; and RunFolderError, the one line each refusal is.

- reading: only regular files (`check_regular` for readers that hand a path to a library, `read_regular`
  for the bytes, capped: JSON_CAP), a run folder's JSON file parsed and checked (`read_json`,
  `parse_json`), a parquet file's footer and table (`read_parquet_schema`, `read_parquet`: a damaged
  file is one line) and its row count with its SHA-256 (`parquet_record`); each from one open file,
  checked with fstat (`open_regular`: the file read is the file checked);
- writing: atomic and durable text, JSON and parquet (`atomic_write_*`: a temporary file, fsync,
  rename, fsync of the folder; a reader sees the old file or the new one, also after a power loss),
  never through a symbolic link (`check_write_target`); a failed write leaves no temporary file and is
  one RunFolderError naming the fix (`write_failed`);
- folders: made (`make_dirs`), the ones a command made for nothing removed again (`missing_dirs`,
  `remove_empty`);
- `folder_lock` (an exclusive flock on FOLDER/.lock, its holder named to a second writer; `live_holder`
  for readers).

    from tandem_eval.files import atomic_write_json, folder_lock, read_json
    with folder_lock(run, run / ".lock"):
        atomic_write_json(run / "metrics.json", {"n_samples": 8}, root=run)   # root: never through a link
    read_json(run / "metrics.json", "metrics.json", dict)                    # a regular file, an object

What the files mean is above this module: a run folder's layout and records (tandem_eval.run.results),
its tables' schemas (tandem_eval.schemas, which checks a table before it is handed here). Standard
library only at import, as schemas (the CLI imports both before `--help`): pandas and pyarrow are
imported by the calls that read or write parquet.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import socket
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


class RunFolderError(ValueError):
    """A run folder cannot be used as asked; the message names the fix.

    A ValueError so that every command's bad-input handler (including report/view) prints it as one line."""


# ---- reading: regular files, capped ---------------------------------------------------------
# Every reader of a run folder, a checkpoint's small files and a chat template opens only regular
# files: a folder, FIFO (blocks forever), device (/dev/zero never ends) or socket where a file is
# expected is one line naming it, before a byte is read; small files are also capped in size.
RESTORE = "restore it, or delete the run folder and rerun the command that wrote it"  # a damaged run-folder file
JSON_CAP = 256 * 2**20  # config.json, metrics.json, COMPLETE, a checkpoint's config and metadata
_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
)
_KINDS += ((stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(path: Path, st: os.stat_result, fix: str, error: type[Exception]) -> Exception:
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    link = f" (a link to {os.readlink(path)})" if path.is_symlink() else ""
    return error(f"{path} is {kind}{link}, not a regular file; {fix}")


def check_regular(path: str | Path, fix: str, error: type[Exception] = RunFolderError) -> None:
    """Refuse (`error`, one line) a `path` that exists but is not a regular file (a link to one is
    fine). For readers that hand the path to a library (pyarrow, transformers)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return  # missing (or unreadable): the reader reports it as it does today
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st, fix, error)


@contextlib.contextmanager
def open_regular(path: str | Path, fix: str, error: type[Exception] = RunFolderError) -> Iterator[io.BufferedReader]:
    """`path` open for reading, when it is a regular file; anything else is `error` naming `fix`. Opened
    without blocking (a FIFO would wait for a writer forever) and checked with fstat on the open file, so
    the file read is the file checked (a path checked first and opened after could be swapped between).
    A missing file raises the OSError, for the caller to word."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(Path(path), st, fix, error)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_regular(path: str | Path, fix: str, cap: int = JSON_CAP, error: type[Exception] = RunFolderError) -> bytes:
    """The bytes of the regular file `path` (open_regular), at most `cap` of them; anything else is
    `error` naming `fix`."""
    with open_regular(path, fix, error) as f:
        size = os.fstat(f.fileno()).st_size
        if size > cap:
            raise error(f"{path} is {size} bytes, more than the {cap} such a file can hold; {fix}")
        data = f.read(cap + 1)
    if len(data) > cap:  # grew while being read
        raise error(f"{path} holds more than the {cap} bytes such a file can hold; {fix}")
    return data


def read_json(path: Path, what: str, kind: type | None = None):
    """A run folder's JSON file (a regular file of at most JSON_CAP bytes), parsed; with `kind`, its top
    level must be that type (metrics.json and COMPLETE: an object). `what` names the file in the line a
    damaged one is."""
    try:
        raw = read_regular(path, RESTORE)
    except OSError as e:
        raise _damaged(path, what, f"unreadable: {e.strerror or e}") from None
    return parse_json(path, what, raw, kind)


def parse_json(path: Path, what: str, raw: bytes, kind: type | None = None):
    """read_json of the bytes `raw` already read from `path` (COMPLETE: told apart from an older
    timestamp marker first, then parsed from the same bytes)."""
    try:
        data = json.loads(raw.decode("utf-8"))
        if kind is None or isinstance(data, kind):
            return data
        reason = f"a JSON {type(data).__name__}, not an object"
    except UnicodeDecodeError:
        reason = "not UTF-8 text"
    except json.JSONDecodeError as e:
        reason = f"invalid JSON at line {e.lineno}"
    raise _damaged(path, what, reason)


def _damaged(path: Path, what: str, reason: str) -> RunFolderError:
    return RunFolderError(
        f"{path} is damaged ({what}: {reason}); restore it, or delete the run folder and rerun the command that "
        "wrote it"
    )


def parquet_record(path: Path, fix: str = RESTORE) -> tuple[int, str]:
    """A parquet file's row count (from its footer) and SHA-256, from one open of the regular file (what
    COMPLETE records of a run folder's table); a folder, FIFO or damaged file is one line naming `fix`."""
    import pyarrow.parquet as pq

    with _parquet(path, fix) as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
        f.seek(0)
        return int(_readable(path, fix, lambda: pq.ParquetFile(f).metadata.num_rows)), digest


def read_parquet_schema(path: str | Path, fix: str):
    """The schema in a parquet file's footer, from a regular file (pyarrow would read a folder as a
    dataset and block on a FIFO); a damaged file is one line naming `fix`."""
    import pyarrow.parquet as pq

    with _parquet(path, fix) as f:
        return _readable(path, fix, lambda: pq.read_schema(f))


def read_parquet(
    path: str | Path, columns: list[str] | None, fix: str, check: Callable[[Any], None] | None = None
) -> pd.DataFrame:
    """A parquet file's table (`columns`: those only), from a regular file; a damaged one is one line
    naming `fix`. `check`: called with the footer's schema before the table is read, from the same open
    file (schemas.read_table refuses a table of the wrong schema there)."""
    import pandas as pd
    import pyarrow.parquet as pq

    with _parquet(path, fix) as f:
        if check is not None:
            check(_readable(path, fix, lambda: pq.read_schema(f)))
            f.seek(0)
        return _readable(path, fix, lambda: pd.read_parquet(f, columns=columns))


@contextlib.contextmanager
def _parquet(path: str | Path, fix: str) -> Iterator[io.BufferedReader]:
    """open_regular for a parquet reader: a missing or unreadable file is the same one line as a damaged one."""
    with contextlib.ExitStack() as held:
        try:
            f = held.enter_context(open_regular(path, fix))
        except OSError as e:
            raise _unreadable(path, e, fix) from None
        yield f


def _readable(path: str | Path, fix: str, read: Callable[[], Any]) -> Any:
    """`read()`, its failure on a truncated or foreign file (pyarrow and OS errors of several types) one line."""
    try:
        return read()
    except Exception as e:
        raise _unreadable(path, e, fix) from None


def _unreadable(path: str | Path, e: BaseException, fix: str) -> RunFolderError:
    return RunFolderError(f"{path} is not a readable parquet file ({type(e).__name__}: truncated or damaged); {fix}")


# ---- writing: atomic, durable, never through a link -------------------------------------------


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
    """Write `df` to `path` as parquet, atomically (atomic_write_bytes, `root` too), and return the SHA-256
    of the bytes written. The table is encoded in memory first: a table pyarrow cannot encode fails before
    any file is touched, the file goes through the one no-follow atomic write, and its hash needs no
    second read. A run folder checks the table against its schema first (schemas.write_table)."""
    encoded = io.BytesIO()
    df.to_parquet(encoded, index=False)
    data = encoded.getvalue()
    atomic_write_bytes(path, data, root)
    return hashlib.sha256(data).hexdigest()


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


# ---- folders ---------------------------------------------------------------------------------


def missing_dirs(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    return missing


def make_dirs(path: Path) -> None:
    """`path` and its parents as folders; a full disk or read-only file system is one RunFolderError."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RunFolderError(f"{path} is a file; pass a folder path") from None
    except OSError as e:
        raise write_failed(Path(path), e) from None


def remove_empty(folders: list[Path]) -> None:
    """Remove each of `folders` (deepest first) that is empty: undo folders a failed command made."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:  # not empty (someone else's files) or already gone
            pass


# ---- a file's content, a folder's writer -------------------------------------------------------


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
