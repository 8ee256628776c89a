"""Benchmark sources as validated problems: a local file (.jsonl/.json/.parquet/.csv) or a hub
dataset read into rows, and the rows checked one by one (UTF-8, types, empties, duplicate ids, one
group per file) into `Problem`s, each bad row reported by its line or row number.

    from tandem_eval.data.rows import read_local, to_problems
    rows, where, columns, sha256 = read_local(Path("my.jsonl"))   # sha256: of the bytes parsed
    problems = to_problems(rows, spec=spec, where=where, columns=columns)   # spec: a BenchmarkSpec

tandem_eval.data.benchmarks (the registry and the loaders) is built on these.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import socket
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

LOCAL_FIX = "pass a local file: --benchmark path.jsonl (columns problem, answer)"
HUB_PROBE_TIMEOUT_S = 3.0  # one TCP connect; datasets' own retries take ~25 s when offline


class BenchmarkError(ValueError):
    """A benchmark could not be loaded; the message says which one and how to fix it."""


@dataclass(frozen=True)
class Problem:
    problem_id: str  # stable, unique within its benchmark (hub ids are prefixed "name/")
    benchmark: str
    group: str  # macro-averaging group: aime24/25/26 all pool into "aime"
    problem: str
    answer: str  # reference answer as a string; graded with math-verify downstream


# ---------------------------------------------------------------- reading sources
Rows = Iterable[tuple[str, dict[str, Any]]]


class Source(NamedTuple):
    """What a reader returns: `rows` yield (row label, record dict); `where` names the source in error
    messages; `columns` are those present (for "missing column" errors); `sha256` is the SHA-256 of the
    bytes the rows were parsed from (None for a hub dataset, whose content counts through its problems).
    A file is read once: the digest a run records is of the very bytes its problems came from."""

    rows: Rows
    where: str
    columns: list[str]
    sha256: str | None


_TOO_DEEP = (
    "JSON nested too deeply to read (deeper than Python's recursion limit); a row holds a problem and an "
    "answer: fix or remove it"
)


def read_local(path: Path, check: Callable[[str], None] | None = None) -> Source:
    """A local file's rows (.jsonl/.json/.parquet/.csv) and the SHA-256 of the bytes they came from;
    `check` is called with that digest before the bytes are parsed (a packaged file's recorded one)."""
    suffix = path.suffix.lower()
    data = path.read_bytes()  # once: parsed below and hashed here
    digest = hashlib.sha256(data).hexdigest()
    if check is not None:
        check(digest)
    if suffix in (".jsonl", ".json"):
        text = _utf8(data, path)
        if suffix == ".json":
            with contextlib.suppress(json.JSONDecodeError):
                try:
                    parsed = json.loads(text)
                except RecursionError:
                    raise BenchmarkError(f"{path}: {_TOO_DEEP}") from None
                if isinstance(parsed, list):
                    if not all(isinstance(r, dict) for r in parsed):
                        raise BenchmarkError(f"{path}: expected a JSON list of objects (or one object per line)")
                    return Source(_numbered(parsed, "row"), str(path), _union_keys(parsed), digest)
                # a single object is a one-line JSON-lines file: fall through
        records = list(_jsonl_records(text, path))  # .jsonl, or .json written as JSON lines
        return Source(((f"line {n}", r) for n, r in records), str(path), _union_keys(r for _, r in records), digest)
    import pandas as pd  # local import: only file benchmarks need it

    try:
        # dtype=str for CSV keeps ids and answers verbatim ("007" must not become 7).
        if suffix == ".parquet":
            df = pd.read_parquet(io.BytesIO(data))
        else:
            df = pd.read_csv(io.StringIO(_utf8(data, path)), dtype=str, keep_default_na=False)
    except BenchmarkError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes one clear line
        raise BenchmarkError(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc
    return Source(_numbered(df.to_dict("records"), "row"), str(path), [str(c) for c in df.columns], digest)


def _utf8(data: bytes, path: Path) -> str:
    """The file's bytes as text; bytes that are not UTF-8 are reported by line, not as a traceback."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BenchmarkError(
            f"{path} line {line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "re-save the file as UTF-8"
        ) from None


def _jsonl_records(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    # JSON lines end at "\n" only: str.splitlines() would also split inside a string holding a raw
    # U+2028, U+0085 or form feed, all valid in JSON text (json.dumps(..., ensure_ascii=False) writes them)
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue  # blank lines (e.g. a trailing newline) are not rows
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(f"{path} line {n}: invalid JSON ({exc.msg})") from exc
        except RecursionError:  # json's parser recurses per nesting level
            raise BenchmarkError(f"{path} line {n}: {_TOO_DEEP}") from None
        if not isinstance(record, dict):
            raise BenchmarkError(f"{path} line {n}: expected a JSON object, got {type(record).__name__}")
        yield n, record


def read_hub(spec) -> Source:
    where = f"hub dataset {spec.hub_id} ({spec.config or 'default'}/{spec.split})"

    def fail(reason: str) -> BenchmarkError:
        reason = " ".join(reason.split())[:300]  # one line, bounded
        return BenchmarkError(
            f"benchmark '{spec.name}' needs hub dataset '{spec.hub_id}', which "
            f"could not be loaded ({reason}); {LOCAL_FIX}"
        )

    import datasets

    offline = _env_true("HF_HUB_OFFLINE") or _env_true("HF_DATASETS_OFFLINE") or bool(datasets.config.HF_HUB_OFFLINE)
    if not offline:
        # Probe once, quickly: unreachable hubs otherwise cost ~25 s of retries per benchmark.
        reason = _hub_unreachable()
        if reason:
            raise fail(f"{reason}; set HF_HUB_OFFLINE=1 to use a cached copy")
    try:
        with _forced_offline(offline):
            ds = datasets.load_dataset(spec.hub_id, spec.config, split=spec.split)
    except Exception as exc:  # noqa: BLE001 - network, auth, missing cache: all one fix
        prefix = "offline and not cached: " if offline else ""
        raise fail(f"{prefix}{type(exc).__name__}: {exc}") from exc
    return Source(_numbered(ds.to_list(), "row"), where, list(ds.column_names), None)


def _hub_unreachable() -> str | None:
    from huggingface_hub import constants

    url = urllib.parse.urlparse(constants.ENDPOINT)  # honours HF_ENDPOINT mirrors
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"hub {url.hostname} unreachable: {exc}"
    return None


@contextlib.contextmanager
def _forced_offline(offline: bool) -> Iterator[None]:
    """datasets and huggingface_hub read HF_HUB_OFFLINE once, at import; an env var set later
    (by a test or a CLI flag) would be ignored and the load would go to the network."""
    if not offline:
        yield
        return
    import datasets
    from huggingface_hub import constants

    saved = datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved


# ---------------------------------------------------------------- validation


def to_problems(  # spec: the BenchmarkSpec whose columns, id and group rules apply
    rows: Rows,
    *,
    spec,
    where: str,
    columns: list[str],
    group_col: str | None = None,
    fixed_group: str | None = None,
) -> list[Problem]:
    needed = [spec.problem_col, spec.answer_col] + ([spec.id_col] if spec.id_col else [])
    if not columns:  # no field at all: "missing column" would send the user looking for one column
        raise BenchmarkError(
            f"{where} holds no fields (an empty file, or rows without any); pass a file with one problem per row, "
            f"with {spec.problem_col!r} and {spec.answer_col!r} fields"
        )
    for col in needed:
        if col not in columns:
            raise BenchmarkError(f"missing column '{col}' in {where} (columns present: {', '.join(columns) or 'none'})")
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    groups: dict[str, str] = {}  # group -> first row that named it
    fields = (("problem", spec.problem_col), ("answer", spec.answer_col), ("id", spec.id_col), ("group", group_col))
    for index, (label, record) in enumerate(rows):
        values: dict[str, Any] = {}  # text, or None for a missing group (the other fields are checked below)
        for field, col in fields:
            if col is None:
                continue
            if col not in record:  # JSON lines may differ row to row
                if field == "group":
                    continue  # an optional column
                raise BenchmarkError(
                    f"missing column '{col}' in {where} {label} (columns present: {', '.join(record) or 'none'})"
                )
            marker = spec.answer_marker if field == "answer" else None
            try:
                values[field] = _as_text(record[col], marker, allow_numbers=field in ("answer", "id"))
            except TypeError as exc:
                raise BenchmarkError(f"{where} {label}: {field} (column '{col}') {exc}") from None
            if values[field] is None and field != "group":
                raise BenchmarkError(f"empty {field} (column '{col}') at {label} of {where}")
        if spec.id_col is None:
            pid = f"{spec.name}/{index:04d}"
        else:  # hub (and packaged) ids are prefixed so aime24/25/26 ids never collide when pooled
            prefixed = spec.hub_id is not None or getattr(spec, "package", None) is not None
            pid = f"{spec.name}/{values['id']}" if prefixed else values["id"]
        if pid in seen:
            raise BenchmarkError(
                f"duplicate problem id '{pid}' in {where} ({seen[pid]} and {label}); give each row its own id"
            )
        seen[pid] = label
        group = spec.group
        if values.get("group") is not None:
            group = values["group"]
            groups.setdefault(group, label)
        problems.append(Problem(pid, spec.name, group, values["problem"], values["answer"]))
    if not problems:
        raise BenchmarkError(f"no problems in {where}")
    if groups:
        _check_group_column(groups, problems, where, fixed_group)
    return problems


def _check_group_column(groups: dict[str, str], problems: list[Problem], where: str, fixed: str | None) -> None:
    """A benchmark belongs to exactly one group (pass@k and the macro rely on it)."""
    if len(groups) > 1 or len(set(p.group for p in problems)) > 1:
        named = ", ".join(f"'{g}' ({row})" for g, row in groups.items())
        raise BenchmarkError(
            f"{where}: the 'group' column must hold one value for the whole file (a file is one benchmark), "
            f"found {named}{' and rows without one' if len(groups) == 1 else ''}; split the file by group"
        )
    (found,) = groups
    if fixed is not None and fixed != found:
        raise BenchmarkError(f"{where}: --group {fixed} contradicts its 'group' column ('{found}'); drop one")


def _as_text(value: Any, marker: str | None = None, *, allow_numbers: bool = True) -> str | None:
    """Source values -> non-empty string, or None if empty. Ints and integral floats print as
    integers (a parquet column with a gap turns 27 into 27.0); lists (OlympiadBench) join.
    Anything else (dicts, booleans, infinities, bytes, ...) raises TypeError: stringifying it
    would grade against "{'a': 1}" or "True" without anyone noticing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "tolist"):  # numpy scalars and arrays from parquet
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        parts = [p for p in (_scalar_text(v, allow_numbers, "a list holding ") for v in value) if p is not None]
        text = ", ".join(parts)
    else:
        text = _scalar_text(value, allow_numbers, "") or ""
    if marker and marker in text:
        text = text.rsplit(marker, 1)[1].strip()
        if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", text):
            text = text.replace(",", "")  # GSM8K writes some answers as "1,000"
    return text or None


def _scalar_text(value: Any, allow_numbers: bool, context: str) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        try:  # an escaped lone surrogate ("\\ud800") parses as JSON but is no text a tokenizer can encode
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise TypeError(
                f"holds the lone surrogate U+{ord(value[exc.start]):04X} at character {exc.start}, which is not "
                "text; fix or drop that escape"
            ) from None
        return value.strip() or None
    wanted = "a string or a finite number" if allow_numbers else "a string"
    fix = f'; write it as {wanted}, e.g. "42"' if allow_numbers else f"; write it as {wanted}"
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    if allow_numbers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if allow_numbers and isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    raise TypeError(f"is {context}{type(value).__name__} {shown}, not {wanted}{fix}")


def _numbered(records: Iterable[dict[str, Any]], unit: str) -> Rows:
    return ((f"{unit} {n}", r) for n, r in enumerate(records, start=1))


def _union_keys(records: Iterable[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for r in records:
        keys.update(dict.fromkeys(r))
    return list(keys)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
