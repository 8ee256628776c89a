"""Build the paper's evaluation sets as local files, OUT_DIR/<name>.jsonl, for `--benchmark`.

    python -m tandem_eval.data.build_paper_sets OUT_DIR --olympiad-src OLY.parquet   # from the hub
    python -m tandem_eval.data.build_paper_sets OUT_DIR --from-repo TANDEM_RLVR      # offline
    tandem-eval benchmarks --check OUT_DIR                  # sizes against the paper's
    tandem-eval solo -b OUT_DIR/aime24.jsonl -b OUT_DIR/aime25.jsonl -b OUT_DIR/aime26.jsonl \\
        -b OUT_DIR/amc23_25.jsonl -b OUT_DIR/minerva.jsonl -b OUT_DIR/olympiadbench.jsonl ...

Each file is named after its registry entry, so its problems join that entry's group (the three
AIME files pool into "aime") and the run's macro is labelled as the paper's. Columns: problem_id
("name/0000", source order), problem, answer, group, source.

What the paper's sets are, from the paper's public build script (CSSLab/Tandem-RLVR,
data/build_evals.py; the reproduction ChrisG777/Tandem-RLVR has the same script):
- aime24 (30): math-ai/aime24, split test; the answer is the first brace-free \\boxed{...} of the
  `solution` column.
- aime25 (30): math-ai/aime25, split test (problem, answer).
- aime26 (30): MathArena/aime_2026, first split (problem, answer).
- amc23_25 (121): math-ai/amc23 test (question, answer), then rawsh/2024_AMC12 (first split;
  problem, answer, exam) without the rows whose answer is one of AMC24_DROP, then
  sonthenguyen/amc12-2025-non-figure (first split; question, answer) without AMC25_DROP. The
  script calls the dropped answers ones its grader cannot grade (a choice letter, an interval, an
  expression with a free variable, a clock time).
- minerva (272): math-ai/minervamath, split test (question, answer).
- olympiadbench (581): built by the authors from a local parquet that has no public source; their
  repository ships the result as data/eval/olympiad/test.parquet. Only that file gives the set:
  pass the repository (--from-repo) or the file (--olympiad-src). The public
  Hothan/OlympiadBench OE_TO_maths_en_COMP config (the registry's `olympiadbench`, about 675 rows)
  is NOT it, and which of its rows the paper dropped is not documented.
- math500 (500, optional, not in the paper's macro): HuggingFaceH4/MATH-500, split test.
The paper's script applies no other filter and no deduplication; neither does this one. Problem
texts that occur twice in a set are logged, never dropped. A set whose size differs from the
paper's (the upstream dataset changed) is refused, not written. Answers are written as strings;
numbers print as in the loader (27.0 -> "27"), which grades the same as the script's str(27.0).

`--from-repo DIR` converts the shipped verl-format parquets (DIR/data/eval/<set>/test.parquet:
`prompt` = [{"role": "user", "content": problem + INSTRUCTION}], `reward_model.ground_truth`)
without any network; it is the way to get the exact sets, row order included.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from tandem_eval.data.benchmarks import BENCHMARKS
from tandem_eval.data.prompts import INSTRUCTION
from tandem_eval.data.rows import BenchmarkError, _as_text, _env_true, _hub_unreachable

log = logging.getLogger(__name__)

# Answers the paper's build drops (facts from its data/build_evals.py, copied as data).
AMC24_DROP = frozenset({"(0, \\frac{1}{2})", "[\\frac{3}{4}, \\frac{7}{8}]", "\\frac{\\pi}{2} - 2\\alpha", "D"})
AMC25_DROP = frozenset({"4{:}30", "k"})
PAPER_SETS = ("aime24", "aime25", "aime26", "amc23_25", "minerva", "olympiadbench")
OPTIONAL_SETS = ("math500",)
REPO_NAMES = {"olympiadbench": "olympiad"}  # our name -> the paper repository's folder name
_BOXED = re.compile(r"\\boxed\{([^{}]+)\}")

Item = tuple[str, str, str]  # (problem, answer, source)
Loader = Callable[[str, str | None], list[dict[str, Any]]]  # (hub id, split or None = first) -> rows


class BuildError(BenchmarkError):
    """A paper set could not be built; the message names the set and the fix."""


# ---------------------------------------------------------------- per-set rules (pure)


def boxed_answer(solution: str) -> str | None:
    """The first \\boxed{...} without nested braces (the paper's rule for math-ai/aime24)."""
    match = _BOXED.search(solution or "")
    return match.group(1) if match else None


def aime24_items(rows: Iterable[Mapping[str, Any]]) -> list[Item]:
    items = []
    for n, r in enumerate(rows, start=1):
        answer = boxed_answer(str(r.get("solution") or ""))
        if answer is None:
            raise BuildError(f"aime24: math-ai/aime24 row {n} has no \\boxed{{}} answer in its solution")
        items.append((r["problem"], answer, "math-ai/aime24"))
    return items


def plain_items(rows: Iterable[Mapping[str, Any]], problem_col: str, answer_col: str, source: str) -> list[Item]:
    return [(r[problem_col], r[answer_col], source) for r in rows]


def amc_items(
    amc23: Iterable[Mapping[str, Any]], amc24: Iterable[Mapping[str, Any]], amc25: Iterable[Mapping[str, Any]]
) -> list[Item]:
    """AMC 2023 whole, then AMC 2024 (source tagged by exam, e.g. amc24_12A) and AMC 2025 without
    the paper's dropped answers; order kept."""
    items = plain_items(amc23, "question", "answer", "math-ai/amc23")
    for r in amc24:
        if str(r["answer"]) not in AMC24_DROP:
            exam = str(r.get("exam") or "").split()  # e.g. "2024 AMC 12A" -> 12A
            items.append((r["problem"], r["answer"], f"rawsh/2024_AMC12 {exam[-1] if exam else ''}".strip()))
    items += [
        (r["question"], r["answer"], "sonthenguyen/amc12-2025-non-figure")
        for r in amc25
        if str(r["answer"]) not in AMC25_DROP
    ]
    return items


def verl_items(rows: Iterable[Mapping[str, Any]], where: str) -> list[Item]:
    """Rows of the paper's shipped verl parquets -> (problem, answer): the user turn minus the
    instruction the paper appended, and reward_model.ground_truth."""
    items = []
    for n, r in enumerate(rows, start=1):
        prompt = _plain(r.get("prompt"))
        truth = _plain(r.get("reward_model") or {}).get("ground_truth")
        users = [m for m in prompt or [] if isinstance(m, Mapping) and m.get("role") == "user"]
        if len(users) != 1 or truth is None:
            raise BuildError(f"{where} row {n}: expected one user turn in 'prompt' and reward_model.ground_truth")
        content = str(users[0].get("content", ""))
        if not content.endswith(INSTRUCTION):
            raise BuildError(f"{where} row {n}: the user turn does not end with the paper's instruction")
        items.append((content[: -len(INSTRUCTION)], truth, where))
    return items


def finish(name: str, items: list[Item]) -> list[dict[str, Any]]:
    """Size check against the paper's set, duplicate texts logged (kept), rows for the .jsonl."""
    expected = BENCHMARKS[name].paper_size
    if len(items) != expected:
        raise BuildError(
            f"{name}: built {len(items)} problems, the paper's set has {expected}; the source has changed, so "
            "this would not be the paper's set (nothing written for it); use --from-repo with the paper's files"
        )
    first: dict[str, int] = {}
    for i, (problem, _, _) in enumerate(items):
        key = str(problem).strip()
        if key in first:
            log.warning("%s: rows %d and %d have the same problem text (kept, as in the paper)", name, first[key], i)
        first.setdefault(key, i)
    rows = []
    for i, (problem, answer, source) in enumerate(items):
        try:  # a bool, infinite or dict ground truth is refused (as the loader does), never stringified
            text = _as_text(answer)
        except TypeError as exc:
            raise BuildError(f"{name}: row {i} ({source}): the answer {exc}") from None
        if not str(problem).strip() or text is None:
            raise BuildError(f"{name}: row {i} ({source}) has an empty problem or answer")
        rows.append(
            {
                "problem_id": f"{name}/{i:04d}",
                "problem": problem,
                "answer": text,
                "group": BENCHMARKS[name].group,
                "source": source,
            }
        )
    return rows


# ---------------------------------------------------------------- sources


def hub_items(name: str, load: Loader, olympiad_src: Path | None) -> list[Item]:
    """The items of one set from its public hub sources (olympiadbench: from `olympiad_src`)."""
    if name == "aime24":
        return aime24_items(load("math-ai/aime24", "test"))
    if name == "aime25":
        return plain_items(load("math-ai/aime25", "test"), "problem", "answer", "math-ai/aime25")
    if name == "aime26":
        return plain_items(load("MathArena/aime_2026", None), "problem", "answer", "MathArena/aime_2026")
    if name == "amc23_25":
        return amc_items(
            load("math-ai/amc23", "test"),
            load("rawsh/2024_AMC12", None),
            load("sonthenguyen/amc12-2025-non-figure", None),
        )
    if name == "minerva":
        return plain_items(load("math-ai/minervamath", "test"), "question", "answer", "math-ai/minervamath")
    if name == "math500":
        return plain_items(load("HuggingFaceH4/MATH-500", "test"), "problem", "answer", "HuggingFaceH4/MATH-500")
    if name == "olympiadbench" and olympiad_src is not None:
        return verl_items(_read_parquet(olympiad_src), str(olympiad_src))
    raise BuildError(_OLYMPIAD_FIX)


_OLYMPIAD_FIX = (
    "olympiadbench: the paper's 581-problem set has no public hub source; pass --from-repo DIR (a clone of "
    "CSSLab/Tandem-RLVR) or --olympiad-src DIR/data/eval/olympiad/test.parquet, or leave it out with --sets"
)


def repo_items(name: str, repo: Path) -> list[Item]:
    """The items of one set from the paper repository's shipped verl parquet."""
    folder = REPO_NAMES.get(name, name)
    for base in (repo / "data" / "eval", repo):
        path = base / folder / "test.parquet"
        if path.is_file():
            return verl_items(_read_parquet(path), str(path))
    raise BuildError(f"{name}: no {folder}/test.parquet in {repo} or {repo}/data/eval; pass the paper's repo")


def hub_loader() -> Loader:
    """datasets.load_dataset behind one reachability probe, failing with one line when offline."""
    offline = _env_true("HF_HUB_OFFLINE") or _env_true("HF_DATASETS_OFFLINE")
    if not offline:
        reason = _hub_unreachable()
        if reason:
            raise BuildError(
                f"cannot build the paper's sets from the HuggingFace hub ({reason}); run where the hub is "
                "reachable, or pass --from-repo DIR (a clone of CSSLab/Tandem-RLVR, no hub needed)"
            )

    def load(hub_id: str, split: str | None) -> list[dict[str, Any]]:
        import datasets

        try:
            ds = datasets.load_dataset(hub_id, split=split)
            if split is None:  # the paper takes the first split of these
                ds = ds[next(iter(ds.keys()))]
        except Exception as exc:  # noqa: BLE001 - network, auth, renamed dataset: one line
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            raise BuildError(f"cannot load hub dataset {hub_id} ({reason}); or pass --from-repo DIR") from None
        return ds.to_list()

    return load


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pandas as pd

    try:
        return pd.read_parquet(path).to_dict("records")
    except Exception as exc:  # noqa: BLE001
        raise BuildError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None


def _plain(value: Any) -> Any:
    """numpy arrays / nested records from parquet -> plain lists and dicts."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- writing


def build(
    out_dir: str | os.PathLike,
    sets: Iterable[str] = PAPER_SETS,
    *,
    repo: Path | None = None,
    olympiad_src: Path | None = None,
    load: Loader | None = None,
) -> dict[str, Path]:
    """Build `sets` into OUT_DIR/<name>.jsonl; returns name -> path. Every input is checked
    before anything is loaded (olympiadbench needs `repo` or `olympiad_src`)."""
    sets = list(dict.fromkeys(sets))
    unknown = [s for s in sets if s not in PAPER_SETS + OPTIONAL_SETS]
    if unknown:
        raise BuildError(f"unknown set(s) {unknown}; valid: {', '.join(PAPER_SETS + OPTIONAL_SETS)}")
    if "olympiadbench" in sets and repo is None and olympiad_src is None:
        raise BuildError(_OLYMPIAD_FIX)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise BuildError(f"{out} is a file; pass a folder for the sets")
    if repo is None and load is None:
        load = hub_loader()
    written = {}
    for name in sets:
        # cast: `load` is set above whenever repo is None
        items = repo_items(name, repo) if repo is not None else hub_items(name, cast(Loader, load), olympiad_src)
        written[name] = _write_jsonl(out / f"{name}.jsonl", finish(name, items))
        log.info("%s: %d problems -> %s", name, BENCHMARKS[name].paper_size, written[name])
    return written


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")  # never leave half a set under the real name
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tandem_eval.data.build_paper_sets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out_dir", type=Path, help="folder to write <name>.jsonl into")
    parser.add_argument("--sets", nargs="+", default=list(PAPER_SETS), help="which sets (default: the paper's six)")
    parser.add_argument("--from-repo", type=Path, default=None, help="a clone of CSSLab/Tandem-RLVR (offline)")
    parser.add_argument("--olympiad-src", type=Path, default=None, help="the paper's data/eval/olympiad/test.parquet")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        build(args.out_dir, args.sets, repo=args.from_repo, olympiad_src=args.olympiad_src)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.info("done; check with: tandem-eval benchmarks --check %s", args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
