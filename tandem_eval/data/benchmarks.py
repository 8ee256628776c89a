"""Benchmark registry and loaders: a name or a local file in, a list of `Problem`s out.

    from tandem_eval.data import load_benchmark, resolve_benchmarks
    problems = load_benchmark("tiny")                          # bundled, offline
    problems = load_benchmark("aime24", limit=5)               # HuggingFace hub (or its cache)
    problems = load_benchmark("my.jsonl", problem_col="question", answer_col="gold")
    names = resolve_benchmarks("paper")                        # -> ["aime24", ..., "olympiadbench"]

`BENCHMARKS` is a plain dict name -> `BenchmarkSpec` (hub id, config, split, columns). Hub
benchmarks go through `datasets.load_dataset`; when the hub cannot be reached and nothing is
cached we fail fast with a `BenchmarkError` that says how to pass a local file instead. Local
files (.jsonl/.json/.parquet/.csv) are validated row by row, so a bad row is reported by its
line number rather than surfacing later as a grading mystery.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
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


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    group: str
    hub_id: str | None  # None: bundled file in `path`
    config: str | None
    split: str
    problem_col: str
    answer_col: str
    description: str
    id_col: str | None = None  # None: ids are "name/0000", "name/0001", ... by row order
    answer_marker: str | None = None  # keep only the text after this marker (GSM8K "####")
    path: Path | None = None


_HERE = Path(__file__).resolve().parent

BENCHMARKS: dict[str, BenchmarkSpec] = {
    s.name: s
    for s in [
        BenchmarkSpec(
            "aime24",
            "aime",
            "HuggingFaceH4/aime_2024",
            None,
            "train",
            "problem",
            "answer",
            "AIME 2024 I+II, 30 integer answers (lighteval's aime24).",
            id_col="id",
        ),
        BenchmarkSpec(
            "aime25",
            "aime",
            "MathArena/aime_2025",
            None,
            "train",
            "problem",
            "answer",
            "AIME 2025 I+II, 30 integer answers (MathArena).",
            id_col="problem_idx",
        ),
        BenchmarkSpec(
            "aime26",
            "aime",
            "MathArena/aime_2026",
            None,
            "train",
            "problem",
            "answer",
            "AIME 2026 I+II, 30 integer answers (MathArena).",
            id_col="problem_idx",
        ),
        BenchmarkSpec(
            "amc23_25",
            "amc",
            "math-ai/amc23",
            None,
            "test",
            "question",
            "answer",
            "AMC. The hub id covers AMC 2023 only (40 problems); the paper's 121-problem "
            "AMC 2023-2025 set has no single public hub id: pass it as a local file.",
        ),
        BenchmarkSpec(
            "minerva",
            "minerva",
            "math-ai/minervamath",
            None,
            "test",
            "question",
            "answer",
            "Minerva math (OCWCourses), 272 problems.",
        ),
        BenchmarkSpec(
            "olympiadbench",
            "olympiadbench",
            "Hothan/OlympiadBench",
            "OE_TO_maths_en_COMP",
            "train",
            "question",
            "final_answer",
            "OlympiadBench open-ended text-only English math (~675 rows; the paper reports "
            "581 after its own filtering). List answers are joined with ', '.",
            id_col="id",
        ),
        BenchmarkSpec(
            "math500",
            "math500",
            "HuggingFaceH4/MATH-500",
            None,
            "test",
            "problem",
            "answer",
            "MATH-500 (Let's Verify Step by Step subset); optional in the macro.",
            id_col="unique_id",
        ),
        BenchmarkSpec(
            "gsm8k",
            "gsm8k",
            "openai/gsm8k",
            "main",
            "test",
            "question",
            "answer",
            "GSM8K test, 1,319 problems; the answer is the text after '####'.",
            answer_marker="####",
        ),
        BenchmarkSpec(
            "deepscaler",
            "deepscaler",
            "agentica-org/DeepScaleR-Preview-Dataset",
            None,
            "train",
            "problem",
            "answer",
            "DeepScaleR-Preview training problems (~40k; the paper holds out 1,000, seed 0).",
        ),
        BenchmarkSpec(
            "tiny",
            "tiny",
            None,
            None,
            "train",
            "problem",
            "answer",
            "24 hand-written one- and two-step arithmetic word problems (bundled, offline).",
            id_col="problem_id",
            path=_HERE / "tiny_math.jsonl",
        ),
    ]
}

# Named sets of benchmarks; the paper's macro average weights each *group* equally.
BENCHMARK_SETS: dict[str, tuple[str, ...]] = {
    "paper": ("aime24", "aime25", "aime26", "amc23_25", "minerva", "olympiadbench"),
    "paper+math500": ("aime24", "aime25", "aime26", "amc23_25", "minerva", "olympiadbench", "math500"),
}
PAPER_MACRO_GROUPS: tuple[str, ...] = ("aime", "amc", "minerva", "olympiadbench")


def resolve_benchmarks(names: str | Sequence[str]) -> list[str]:
    """Expand set names and comma lists: "paper,gsm8k" -> [aime24, ..., gsm8k]. Order kept,
    duplicates dropped; file paths pass through unchanged (load_benchmark validates them)."""
    items = names.split(",") if isinstance(names, str) else list(names)
    out: list[str] = []
    for item in (str(i).strip() for i in items):
        for name in BENCHMARK_SETS.get(item, (item,)):
            if name and name not in out:
                out.append(name)
    return out


def load_benchmark(
    name_or_path: str | os.PathLike,
    *,
    problem_col: str = "problem",
    answer_col: str = "answer",
    id_col: str | None = None,
    limit: int | None = None,
) -> list[Problem]:
    """Load a registry benchmark or a local file as a list of Problems (first `limit` rows).

    The column arguments apply to local files only; registry entries use their spec's columns.
    A local file without `id_col` uses its "problem_id" or "id" column when present, else
    "stem/0000"-style ids by row order."""
    key = os.fspath(name_or_path)
    if key in BENCHMARKS:
        spec = BENCHMARKS[key]
        if spec.hub_id is None:
            assert spec.path is not None
            rows, where, columns = _read_local(spec.path)
        else:
            rows, where, columns = _read_hub(spec)
        problems = _to_problems(rows, spec=spec, where=where, columns=columns)
    elif Path(key).suffix.lower() in LOCAL_SUFFIXES:
        path = Path(key)
        if not path.is_file():
            raise BenchmarkError(f"benchmark file not found: {path}")
        rows, where, columns = _read_local(path)
        if id_col is None:
            id_col = next((c for c in ("problem_id", "id") if c in columns), None)
        spec = BenchmarkSpec(
            path.stem,
            path.stem,
            None,
            None,
            "",
            problem_col,
            answer_col,
            f"local file {path}",
            id_col=id_col,
            path=path,
        )
        problems = _to_problems(rows, spec=spec, where=where, columns=columns)
    else:
        hint = f" ('{key}' is a benchmark set; expand it with resolve_benchmarks)" if key in BENCHMARK_SETS else ""
        raise BenchmarkError(
            f"unknown benchmark '{key}'; valid: {', '.join(BENCHMARKS)} or a path to a .jsonl/.parquet file{hint}"
        )
    return problems if limit is None else problems[: max(limit, 0)]


# ---------------------------------------------------------------- reading sources
# Each reader returns (rows, where, columns): rows yield (row label, record dict); `where`
# names the source in error messages; columns are those present (for "missing column" errors).

Rows = Iterable[tuple[str, dict[str, Any]]]


def _read_local(path: Path) -> tuple[Rows, str, list[str]]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        text = path.read_text(encoding="utf-8")
        if suffix == ".json":
            with contextlib.suppress(json.JSONDecodeError):
                data = json.loads(text)
                if isinstance(data, list):
                    if not all(isinstance(r, dict) for r in data):
                        raise BenchmarkError(f"{path}: expected a JSON list of objects (or one object per line)")
                    return _numbered(data, "row"), str(path), _union_keys(data)
                # a single object is a one-line JSON-lines file: fall through
        records = list(_jsonl_records(text, path))  # .jsonl, or .json written as JSON lines
        return ((f"line {n}", r) for n, r in records), str(path), _union_keys(r for _, r in records)
    import pandas as pd  # local import: only file benchmarks need it

    try:
        # dtype=str for CSV keeps ids and answers verbatim ("007" must not become 7).
        df = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes one clear line
        raise BenchmarkError(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc
    return _numbered(df.to_dict("records"), "row"), str(path), [str(c) for c in df.columns]


def _jsonl_records(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue  # blank lines (e.g. a trailing newline) are not rows
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(f"{path} line {n}: invalid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise BenchmarkError(f"{path} line {n}: expected a JSON object, got {type(record).__name__}")
        yield n, record


def _read_hub(spec: BenchmarkSpec) -> tuple[Rows, str, list[str]]:
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
    return _numbered(ds.to_list(), "row"), where, list(ds.column_names)


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


def _to_problems(rows: Rows, *, spec: BenchmarkSpec, where: str, columns: list[str]) -> list[Problem]:
    needed = [spec.problem_col, spec.answer_col] + ([spec.id_col] if spec.id_col else [])
    for col in needed:
        if col not in columns:
            raise BenchmarkError(f"missing column '{col}' in {where} (columns present: {', '.join(columns) or 'none'})")
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for index, (label, record) in enumerate(rows):
        values = {}
        for field, col in (("problem", spec.problem_col), ("answer", spec.answer_col), ("id", spec.id_col)):
            if col is None:
                continue
            if col not in record:  # JSON lines may differ row to row
                raise BenchmarkError(
                    f"missing column '{col}' in {where} {label} (columns present: {', '.join(record) or 'none'})"
                )
            marker = spec.answer_marker if field == "answer" else None
            values[field] = _as_text(record[col], marker)
            if values[field] is None:
                raise BenchmarkError(f"empty {field} (column '{col}') at {label} of {where}")
        if spec.id_col is None:
            pid = f"{spec.name}/{index:04d}"
        else:  # hub ids are prefixed so aime24/25/26 ids never collide when pooled
            pid = values["id"] if spec.hub_id is None else f"{spec.name}/{values['id']}"
        if pid in seen:
            raise BenchmarkError(f"duplicate problem id '{pid}' in {where} ({seen[pid]} and {label})")
        seen[pid] = label
        problems.append(Problem(pid, spec.name, spec.group, values["problem"], values["answer"]))
    if not problems:
        raise BenchmarkError(f"no problems in {where}")
    return problems


def _as_text(value: Any, marker: str | None = None) -> str | None:
    """Source values -> non-empty string, or None if empty. Ints and integral floats print as
    integers (a parquet column with a gap turns 27 into 27.0); lists (OlympiadBench) join."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "tolist"):  # numpy scalars and arrays from parquet
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        parts = [p for p in (_as_text(v) for v in value) if p is not None]
        return ", ".join(parts) or None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if marker and marker in text:
        text = text.rsplit(marker, 1)[1].strip()
        if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", text):
            text = text.replace(",", "")  # GSM8K writes some answers as "1,000"
    return text or None


def _numbered(records: Iterable[dict[str, Any]], unit: str) -> Rows:
    return ((f"{unit} {n}", r) for n, r in enumerate(records, start=1))


def _union_keys(records: Iterable[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for r in records:
        keys.update(dict.fromkeys(r))
    return list(keys)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
