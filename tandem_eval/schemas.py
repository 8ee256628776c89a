"""Parquet schemas of a run folder's tables, in code: samples.parquet (and its shards) and the lens
tables legibility.parquet / drift.parquet. The writer (tandem_eval.results) checks every table
against its schema before writing, and every reader checks the file's footer schema before reading,
so a missing required column or a column of the wrong type is a one-line RunFolderError naming the
file and the column instead of a KeyError deep inside a report.

    from tandem_eval.schemas import SCHEMAS, check_frame, check_file, schema_for
    check_file("results/toy/jargon/tandem/seed0/solo/samples.parquet")   # raises RunFolderError if off
    print(markdown_columns("samples"))                                     # the README's column list

Each field's metadata says whether it is required and what it holds. Only required columns must be
present; every column listed must have its type when present (a string column may be string or
large_string, an integer column any integer width, a float column any float width, a list any list
of that element kind; an all-null optional column is accepted). Columns not listed are allowed:
the tables grow new columns without breaking older readers.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tandem_eval.results import RunFolderError  # results imports this module lazily (no cycle)


def _f(name: str, type_: pa.DataType, doc: str, required: bool = False) -> pa.Field:
    return pa.field(name, type_, metadata={"required": "1" if required else "0", "doc": doc})


_KEYS = [
    _f("benchmark", pa.string(), "benchmark name", True),
    _f("group", pa.string(), "the benchmark's group (the macro averages groups); defaults to benchmark"),
    _f("problem_id", pa.string(), "problem id, unique within its benchmark", True),
    _f("sample_idx", pa.int64(), "sample index 0..n-1 of the problem", True),
]

SAMPLES = pa.schema(
    [
        *_KEYS,
        _f("mode", pa.string(), "solo | handoff"),
        _f("schedule", pa.string(), "handoff schedule (solo for solo runs)"),
        _f("seed", pa.int64(), "the trace's sampling seed"),
        _f("problem", pa.string(), "problem text"),
        _f("prompt", pa.string(), "the rendered prompt"),
        _f("text", pa.string(), "the decoded CoT"),
        _f("prompt_ids", pa.list_(pa.int64()), "prompt token ids"),
        _f("token_ids", pa.list_(pa.int64()), "CoT token ids"),
        _f("author_mask", pa.list_(pa.int64()), "per CoT token: 1 = the senior wrote it, 0 = the junior"),
        _f("logprobs", pa.list_(pa.float64()), "the author's raw log-prob of each CoT token"),
        _f("gold", pa.string(), "reference answer"),
        _f("extracted_answer", pa.string(), "the answer the grader extracted (null: none)"),
        _f("correct", pa.bool_(), "graded correct", True),
        _f("grade_status", pa.string(), "ok | no_answer | timeout | error"),
        _f("finish_reason", pa.string(), "eos | length"),
        _f("n_tokens", pa.int64(), "CoT length in tokens"),
        _f("n_senior_tokens", pa.int64(), "CoT tokens the senior wrote"),
        _f("senior_fraction", pa.float64(), "n_senior_tokens / n_tokens"),
        _f("n_handoffs", pa.int64(), "author changes in the CoT"),
    ]
)

_LENS_COMMON = [
    *_KEYS,
    _f("n_tokens", pa.int64(), "CoT length in tokens"),
    _f("truncated", pa.bool_(), "the CoT hit the token budget (finish_reason length)"),
    _f("include_eos", pa.bool_(), "the final EOS token was scored"),
    _f("n_scored_tokens", pa.int64(), "CoT tokens scored"),
    _f("correct", pa.bool_(), "the sample was graded correct"),
]

LEGIBILITY = pa.schema(
    [
        *_LENS_COMMON,
        _f("n_junior_tokens", pa.int64(), "tokens the junior scored (its own tokenization if vocabularies differ)"),
        _f("junior_nll_sum", pa.float64(), "junior NLL of the CoT, nats"),
        _f("junior_nll_mean", pa.float64(), "junior NLL per token, nats"),
        _f("n_bytes", pa.int64(), "UTF-8 bytes of the CoT text without EOS"),
        _f("junior_bpb", pa.float64(), "junior NLL in bits per byte of the CoT text"),
        _f("vocab_match", pa.bool_(), "senior and junior share the vocabulary"),
        _f("nll_bins", pa.list_(pa.float64()), "mean junior NLL per relative-position bin"),
        _f("junior_logprobs", pa.list_(pa.float32()), "junior log-prob of each scored token"),
    ]
)

DRIFT = pa.schema(
    [
        *_LENS_COMMON,
        _f("method", pa.string(), "exact | monte-carlo"),
        _f("kl_exact", pa.float64(), "exact KL(senior || junior) per token, mean over the CoT"),
        _f("kl_reverse", pa.float64(), "exact KL(junior || senior) per token, mean over the CoT"),
        _f("kl_k1", pa.float64(), "Monte-Carlo k1 estimate per token, mean over the CoT"),
        _f("kl_k3", pa.float64(), "Monte-Carlo k3 estimate per token, mean over the CoT"),
        _f("senior_nll_mean", pa.float64(), "senior NLL per token"),
        _f("junior_nll_mean", pa.float64(), "junior NLL per token"),
        _f("kl_bins", pa.list_(pa.float64()), "mean KL per relative-position bin"),
        _f("k1_bins", pa.list_(pa.float64()), "mean k1 per relative-position bin"),
        _f("kl_tokens", pa.list_(pa.float32()), "KL of each scored token"),
        _f("k1_tokens", pa.list_(pa.float32()), "k1 of each scored token"),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {"samples": SAMPLES, "legibility": LEGIBILITY, "drift": DRIFT}


def schema_for(path: str | Path) -> tuple[str, pa.Schema] | None:
    """(table name, schema) of a run folder file by its name: samples.parquet and shards/part-*.parquet
    are samples, legibility.parquet / drift.parquet lens tables; None for any other table."""
    p = Path(path)
    if p.name == "samples.parquet" or (p.parent.name == "shards" and p.name.startswith("part-")):
        return "samples", SAMPLES
    if p.stem in SCHEMAS and p.suffix == ".parquet":
        return p.stem, SCHEMAS[p.stem]
    return None


def required(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if f.metadata and f.metadata.get(b"required") == b"1"]


def _kind(t: pa.DataType) -> str | None:
    """A type's family: string, int, float, bool, list<ELEMENT FAMILY>, null; None for anything else."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        inner = _kind(t.value_type)
        return f"list<{inner}>"
    return None


def check_schema(got: pa.Schema, want: pa.Schema, where: str, fix: str) -> None:
    """Raise RunFolderError (one line naming `where` and the column) if `got` lacks a required column
    of `want` or holds one of its columns with another type family."""
    names = set(got.names)
    for name in required(want):
        if name not in names:
            raise RunFolderError(f"{where} lacks the required column {name!r}; {fix}")
    for field in want:
        if field.name not in names:
            continue
        have = _kind(got.field(field.name).type)
        need = _kind(field.type)
        # an all-null optional column (e.g. no answer extracted anywhere) carries no type; a list
        # whose elements are all null likewise
        ok = have == need or (have == "null" and field.name not in required(want)) or have == "list<null>"
        ok = ok or (have, need) in {("list<int>", "list<float>"), ("int", "float")}  # integral floats widen
        if not ok:
            raise RunFolderError(
                f"{where}: column {field.name!r} has type {got.field(field.name).type}, expected {field.type}; {fix}"
            )


def check_frame(df: pd.DataFrame, path: str | Path, fix: str = "fix the code that builds this table") -> None:
    """Check a table about to be written to `path` against its schema (no-op for unknown tables)."""
    spec = schema_for(path)
    if spec is None:
        return
    try:
        got = pa.Schema.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise RunFolderError(f"{path} cannot be written as parquet ({' '.join(str(e).split())}); {fix}") from None
    check_schema(got, spec[1], f"{path} ({spec[0]} table)", fix)


def check_file(path: str | Path, fix: str = "delete the run folder and rerun the command that wrote it") -> None:
    """Check a parquet file's footer schema against its table's schema (no-op for unknown tables)."""
    spec = schema_for(path)
    if spec is None:
        return
    try:
        got = pq.read_schema(path)
    except Exception as e:  # truncated/foreign files raise pyarrow and OS errors of several types
        raise RunFolderError(f"{path} is unreadable ({type(e).__name__}: truncated or damaged); {fix}") from None
    check_schema(got, spec[1], f"{path} ({spec[0]} table)", fix)


def markdown_columns(name: str) -> str:
    """The columns of table `name` as markdown lines (`name` type, required, doc): the README's list."""
    lines = []
    for f in SCHEMAS[name]:
        req = " (required)" if f.metadata.get(b"required") == b"1" else ""
        lines.append(f"- `{f.name}` {str(f.type).replace('item: ', '')}{req}: {f.metadata[b'doc'].decode()}")
    return "\n".join(lines)


__all__ = ["SCHEMAS", "SAMPLES", "LEGIBILITY", "DRIFT", "check_file", "check_frame", "markdown_columns", "schema_for"]


if __name__ == "__main__":  # python -m tandem_eval.schemas: the README's column lists
    for _name in SCHEMAS:
        print(f"`{_name}` columns:\n\n{markdown_columns(_name)}\n")
