"""Benchmark registry and loaders: a name or a local file in, a list of `Problem`s out.

    from tandem_eval.data import load_benchmark, resolve_benchmarks
    problems = load_benchmark("tiny")                          # bundled, offline
    problems = load_benchmark("aime24", limit=5)               # HuggingFace hub (or its cache)
    problems = load_benchmark("my.jsonl", problem_col="question", answer_col="gold")
    names = resolve_benchmarks("paper")                        # -> ["aime24", ..., "olympiadbench"]
    problems = load_benchmarks(["a/test.jsonl", "b/test.jsonl"])  # one run: "a/test", "b/test"

`BENCHMARKS` is a plain dict name -> `BenchmarkSpec` (hub id, config, split, columns). Hub
benchmarks go through `datasets.load_dataset`; when the hub cannot be reached and nothing is
cached we fail fast with a `BenchmarkError` that says how to pass a local file instead. Local
files (.jsonl/.json/.parquet/.csv) are validated row by row (UTF-8, types, empties, duplicate
ids), so a bad row is reported by its line number rather than surfacing later as a grading mystery.

Groups: a local file's group is its `group` column, else the registry group of its stem (so
aime24.jsonl, aime25.jsonl, aime26.jsonl pool into "aime"), else its benchmark name; `group=` (the CLI's
--group) names it for a single file. Identity: a problem is (benchmark, problem_id); within one run
benchmark names are unique (files whose stems collide are named by their paths: "a/test"), so no
problem of any file is ever merged with, or dropped for, another's.

The paper's sets: each entry records the rows its source should yield (`size`) and the size of the
paper's set of that name (`paper_size`); `paper_set_reasons` says why a run's groups are not the
paper's four (aime 90, amc 121, minerva 272, olympiadbench 581), in which case its macro is
reported as "macro over these groups". build_paper_sets.py writes the exact sets as local files.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import re
import socket
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
LOCAL_FIX = "pass a local file: --benchmark path.jsonl (columns problem, answer)"
HUB_PROBE_TIMEOUT_S = 3.0  # one TCP connect; datasets' own retries take ~25 s when offline
log = logging.getLogger(__name__)


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
    size: int | None = None  # rows this source yields (None: not pinned); a mismatch is logged
    paper_size: int | None = None  # size of the paper's set of this name (None: not in the paper)
    paper_source: str = ""  # how the paper built that set (CSSLab/Tandem-RLVR data/build_evals.py)


_HERE = Path(__file__).resolve().parent

# What the paper's sets are, from its public build script (CSSLab/Tandem-RLVR data/build_evals.py).
_PAPER_BUILD = "the paper's set (CSSLab/Tandem-RLVR data/build_evals.py): "

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
            size=30,
            paper_size=30,
            paper_source=_PAPER_BUILD + "math-ai/aime24 test, answer = the \\boxed{} of its solution",
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
            size=30,
            paper_size=30,
            paper_source=_PAPER_BUILD + "math-ai/aime25 test",
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
            size=30,
            paper_size=30,
            paper_source=_PAPER_BUILD + "MathArena/aime_2026",
        ),
        BenchmarkSpec(
            "amc23_25",
            "amc",
            "math-ai/amc23",
            None,
            "test",
            "question",
            "answer",
            "AMC 2023 only (40 problems). NOT the paper's 121-problem AMC 2023-2025 set, which has no "
            "single hub id: build it with `python -m tandem_eval.data.build_paper_sets DIR`.",
            size=40,
            paper_size=121,
            paper_source=_PAPER_BUILD + "math-ai/amc23 (40) + rawsh/2024_AMC12 minus rows with 4 answers "
            "it cannot grade + sonthenguyen/amc12-2025-non-figure minus rows with 2 such answers = 121",
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
            size=272,
            paper_size=272,
            paper_source=_PAPER_BUILD + "math-ai/minervamath test",
        ),
        BenchmarkSpec(
            "olympiadbench",
            "olympiadbench",
            "Hothan/OlympiadBench",
            "OE_TO_maths_en_COMP",
            "train",
            "question",
            "final_answer",
            "OlympiadBench open-ended text-only English math (about 675 rows). NOT the paper's 581-problem "
            "set, which has no public hub source (see build_paper_sets --from-repo). List answers join with ', '.",
            id_col="id",
            paper_size=581,
            paper_source=_PAPER_BUILD + "a local parquet with no public hub source; the built set ships in "
            "that repository as data/eval/olympiad/test.parquet",
        ),
        BenchmarkSpec(
            "math500",
            "math500",
            "HuggingFaceH4/MATH-500",
            None,
            "test",
            "problem",
            "answer",
            "MATH-500 (Let's Verify Step by Step subset); optional, not in the paper's macro.",
            id_col="unique_id",
            size=500,
            paper_size=500,
            paper_source=_PAPER_BUILD + "HuggingFaceH4/MATH-500 test",
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
            size=1319,
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
            size=24,
        ),
    ]
}

# Named sets of benchmarks; the paper's macro average weights each *group* equally.
# `paper` names the registry entries closest to the paper's sets; from the hub they are NOT the
# paper's sets (amc23_25 and olympiadbench differ), and a run says so (see paper_set_reasons).
BENCHMARK_SETS: dict[str, tuple[str, ...]] = {
    "paper": ("aime24", "aime25", "aime26", "amc23_25", "minerva", "olympiadbench"),
    "paper+math500": ("aime24", "aime25", "aime26", "amc23_25", "minerva", "olympiadbench", "math500"),
}
# The paper's macro: these four groups, these sizes (AIME 2024+2025+2026 pooled = 90).
PAPER_GROUP_SIZES: dict[str, int] = {"aime": 90, "amc": 121, "minerva": 272, "olympiadbench": 581}
PAPER_MACRO_GROUPS: tuple[str, ...] = tuple(PAPER_GROUP_SIZES)
PAPER_MACRO_LABEL = "macro"  # the paper's name for the equal-weight mean of its four groups
OTHER_MACRO_LABEL = "macro over these groups"  # any other set of groups or sizes


def paper_set_reasons(n_per_group: Mapping[str, int]) -> list[str]:
    """Why groups with these problem counts are not the paper's four sets ([] when they match).

    Only names and sizes are compared (the texts cannot be checked without the paper's files)."""
    missing = [g for g in PAPER_MACRO_GROUPS if g not in n_per_group]
    reasons = [f"missing group(s) {', '.join(missing)}"] if missing else []
    reasons += [
        f"'{g}' has {int(n_per_group[g])} problems (paper: {size})"
        for g, size in PAPER_GROUP_SIZES.items()
        if g in n_per_group and int(n_per_group[g]) != size
    ]
    extra = sorted(str(g) for g in n_per_group if g not in PAPER_GROUP_SIZES)
    if extra:
        reasons.append(f"extra group(s) {', '.join(extra)}")
    return reasons


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


def benchmark_files(names: str | Sequence[str | os.PathLike]) -> list[tuple[str, Path]]:
    """(entry, file) of each benchmark of a run that is read from a file: local files as given and
    bundled registry entries; hub datasets have no file (their content counts through the problems)."""
    entries = resolve_benchmarks([os.fspath(n) for n in ([names] if isinstance(names, (str, os.PathLike)) else names)])
    files = []
    for e in entries:
        if e in BENCHMARKS:
            if BENCHMARKS[e].path is not None:
                files.append((e, Path(BENCHMARKS[e].path)))
        elif Path(e).suffix.lower() in LOCAL_SUFFIXES:
            files.append((e, Path(e)))
    return files


def load_benchmarks(
    names: str | Sequence[str | os.PathLike],
    *,
    limit: int | None = None,
    group: str | None = None,
) -> list[Problem]:
    """All problems of one run's benchmarks (names, sets or local files), in order.

    Benchmark names are unique within the run, so (benchmark, problem_id) is too: local files whose
    stems collide (with each other or a registry name) are named by the shortest distinguishing
    path ("a/test", "b/test"). `group` (the CLI's --group) sets the group of a single local file."""
    entries = resolve_benchmarks([os.fspath(n) for n in ([names] if isinstance(names, (str, os.PathLike)) else names)])
    local = [e for e in entries if e not in BENCHMARKS and Path(e).suffix.lower() in LOCAL_SUFFIXES]
    if group is not None and (len(entries) != 1 or len(local) != 1):
        raise BenchmarkError(
            f"--group {group} names the group of a single local file, but the run has {len(entries)} benchmark(s) "
            f"({', '.join(entries)}); pass one file, or give each file a 'group' column"
        )
    local = _unique_files(local)
    names_for = _local_names(local, taken=[e for e in entries if e in BENCHMARKS])
    problems: list[Problem] = []
    for entry in entries:
        if entry in names_for:
            problems += load_benchmark(entry, limit=limit, group=group, name=names_for[entry])
        else:  # a registry name, or an unknown name (load_benchmark's error lists the valid ones)
            problems += load_benchmark(entry, limit=limit)
    return problems


def _unique_files(paths: list[str]) -> list[str]:
    """Refuse one file given twice under two spellings (its problems would be counted twice)."""
    seen: dict[Path, str] = {}
    for p in paths:
        real = Path(p).resolve()
        if real in seen:
            raise BenchmarkError(f"benchmark file given twice: '{seen[real]}' and '{p}' are one file; pass it once")
        seen[real] = p
    return paths


def _local_names(paths: list[str], taken: list[str]) -> dict[str, str]:
    """Benchmark name of each local file: its stem, or where stems collide the shortest path
    suffix that tells the files apart ("a/test" vs "b/test")."""
    names = {p: Path(p).stem for p in paths}
    stems: dict[str, list[str]] = {}
    for p in paths:
        stems.setdefault(Path(p).stem, []).append(p)
    for stem, same in stems.items():
        if len(same) == 1 and stem not in taken:
            continue
        parts = {p: Path(p).resolve().with_suffix("").parts for p in same}
        for depth in range(2, max(len(v) for v in parts.values()) + 1):
            cand = {p: "/".join(v[-depth:]) for p, v in parts.items()}
            if len(set(cand.values())) == len(same) and not set(cand.values()) & set(taken):
                names.update(cand)
                break
        else:
            raise BenchmarkError(
                f"benchmark files {' and '.join(repr(p) for p in same)} cannot be told apart by path "
                "(same folder and name); rename one"
            )
    return names


def load_benchmark(
    name_or_path: str | os.PathLike,
    *,
    problem_col: str = "problem",
    answer_col: str = "answer",
    id_col: str | None = None,
    limit: int | None = None,
    group: str | None = None,
    name: str | None = None,
) -> list[Problem]:
    """Load a registry benchmark or a local file as a list of Problems (first `limit` rows).

    The column arguments apply to local files only; registry entries use their spec's columns.
    A local file without `id_col` uses its "problem_id" or "id" column when present, else
    "name/0000"-style ids by row order. A local file's benchmark name is `name` (default: its
    stem; load_benchmarks passes path-based names where stems collide); its group is `group`,
    else its "group" column, else the registry group of its stem, else its benchmark name."""
    key = os.fspath(name_or_path)
    if key in BENCHMARKS:
        spec = BENCHMARKS[key]
        if spec.hub_id is None:
            assert spec.path is not None
            rows, where, columns = _read_local(spec.path)
        else:
            rows, where, columns = _read_hub(spec)
        problems = _to_problems(rows, spec=spec, where=where, columns=columns)
        if spec.size is not None and len(problems) != spec.size:
            log.warning("%s: %d problems, %d expected; the source has changed", where, len(problems), spec.size)
    elif Path(key).suffix.lower() in LOCAL_SUFFIXES:
        path = Path(key)
        if not path.is_file():
            raise BenchmarkError(f"benchmark file not found: {path}")
        rows, where, columns = _read_local(path)
        if id_col is None:
            id_col = next((c for c in ("problem_id", "id") if c in columns), None)
        registry = BENCHMARKS.get(path.stem)
        spec = BenchmarkSpec(
            name or path.stem,
            group or (registry.group if registry else name or path.stem),
            None,
            None,
            "",
            problem_col,
            answer_col,
            f"local file {path}",
            id_col=id_col,
            path=path,
        )
        group_col = "group" if "group" in columns else None
        problems = _to_problems(rows, spec=spec, where=where, columns=columns, group_col=group_col, fixed_group=group)
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
        text = _read_utf8(path)
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
        if suffix == ".parquet":
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(io.StringIO(_read_utf8(path)), dtype=str, keep_default_na=False)
    except BenchmarkError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes one clear line
        raise BenchmarkError(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc
    return _numbered(df.to_dict("records"), "row"), str(path), [str(c) for c in df.columns]


def _read_utf8(path: Path) -> str:
    """The file as text; bytes that are not UTF-8 are reported by line, not as a traceback."""
    data = path.read_bytes()
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


def _to_problems(
    rows: Rows,
    *,
    spec: BenchmarkSpec,
    where: str,
    columns: list[str],
    group_col: str | None = None,
    fixed_group: str | None = None,
) -> list[Problem]:
    needed = [spec.problem_col, spec.answer_col] + ([spec.id_col] if spec.id_col else [])
    for col in needed:
        if col not in columns:
            raise BenchmarkError(f"missing column '{col}' in {where} (columns present: {', '.join(columns) or 'none'})")
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    groups: dict[str, str] = {}  # group -> first row that named it
    fields = (("problem", spec.problem_col), ("answer", spec.answer_col), ("id", spec.id_col), ("group", group_col))
    for index, (label, record) in enumerate(rows):
        values = {}
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
        else:  # hub ids are prefixed so aime24/25/26 ids never collide when pooled
            pid = values["id"] if spec.hub_id is None else f"{spec.name}/{values['id']}"
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


def check_paper_sets(folder: str | os.PathLike) -> tuple[list[dict[str, Any]], list[str]]:
    """Sizes of a folder's benchmark files against the paper's (`tandem-eval benchmarks --check`).

    Returns (rows, reasons): one row per benchmark and one per group ({"benchmark", "group",
    "problems", "paper", "match"}; paper None where the paper has no such set) and the reasons the
    paper's four groups are not all there at the paper's sizes ([] when they are). Other files
    (math500, ...) are listed but do not count against the match."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BenchmarkError(f"--check {folder}: not a folder; pass the folder build_paper_sets wrote")
    files = sorted(str(p) for p in folder.iterdir() if p.is_file() and p.suffix.lower() in LOCAL_SUFFIXES)
    if not files:
        raise BenchmarkError(f"no benchmark files ({', '.join(LOCAL_SUFFIXES)}) in {folder}")
    problems = load_benchmarks(files)
    per_bench: dict[tuple[str, str], int] = {}
    per_group: dict[str, int] = {}
    for p in problems:
        per_bench[(p.benchmark, p.group)] = per_bench.get((p.benchmark, p.group), 0) + 1
        per_group[p.group] = per_group.get(p.group, 0) + 1
    rows = []
    for (bench, group), n in per_bench.items():
        spec = BENCHMARKS.get(bench)
        paper = spec.paper_size if spec else None
        rows.append({"benchmark": bench, "group": group, "problems": n, "paper": paper, "match": paper == n})
    for group, n in sorted(per_group.items()):
        paper = PAPER_GROUP_SIZES.get(group)
        rows.append({"benchmark": f"group {group}", "group": group, "problems": n, "paper": paper, "match": paper == n})
    reasons = paper_set_reasons({g: n for g, n in per_group.items() if g in PAPER_GROUP_SIZES})
    return rows, reasons
