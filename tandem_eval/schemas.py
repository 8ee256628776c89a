"""The one schema module: what a run folder's tables and JSON files hold, defined once.

- the keys: SAMPLE_KEY (one sample) and PROBLEM_KEY (one problem), and the sample columns;
- the parquet schemas of samples.parquet (and its shards) and of the lens tables legibility.parquet /
  drift.parquet. Every table is checked against its schema before it is written (`write_table`), and
  every reader checks the file's footer schema before reading (`read_table`), so a missing required
  column or a column of the wrong type is a one-line RunFolderError naming the file and the column
  instead of a KeyError deep inside a report (RunFolderError and the regular-file check that comes
  before a footer is read live in tandem_eval.files, with every other guarded read and write);
- JSON cleaning (`to_jsonable`: numpy scalars to Python, NaN/inf to null), strict loading of frozen
  dataclass configs (`from_dict`, `conform`), and the bootstrap defaults (N_BOOT, BOOT_SEED).

    from tandem_eval.schemas import PROBLEM_KEY, SCHEMAS, check_file, to_jsonable
    check_file("results/toy/jargon/tandem/seed0/solo/samples.parquet")   # raises RunFolderError if off
    print(markdown_columns("samples"))                                     # the column list of docs/run-folders.md

Each field's metadata says whether it is required and what it holds. Only required columns must be
present; every column listed must have its type when present (a string column may be string or
large_string, an integer column any integer width, a float column any float width, a list any list
of that element kind; an all-null optional column is accepted). Columns not listed are allowed:
the tables grow new columns without breaking older readers.

Standard library only at import (the CLI imports config, which loads through here, before `--help`):
pyarrow is imported when a schema is first used.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .files import RunFolderError, atomic_write_parquet, check_regular, read_parquet, read_parquet_schema

SAMPLE_KEY = ["benchmark", "problem_id", "sample_idx"]  # one sample of a run
PROBLEM_KEY = ["benchmark", "problem_id"]  # one problem (the unit every bootstrap resamples)
N_BOOT = 2000  # bootstrap resamples of problems, everywhere a CI is computed unless asked otherwise
BOOT_SEED = 0  # their seed: reports are byte-identical on a rerun
ALPHA = 0.05  # 95% intervals


@dataclass(frozen=True)
class Bootstrap:
    """How a CI is computed: resamples of problems, their seed, 1 - coverage (the defaults above)."""

    n_boot: int = N_BOOT
    seed: int = BOOT_SEED
    alpha: float = ALPHA


def _f(name: str, type_: str, doc: str, required: bool = False) -> tuple[str, str, str, bool]:
    """A column: name, arrow type by name (string, int64, float64, bool, list<int64> ...), doc, required."""
    return name, type_, doc, required


_KEYS = [
    _f("benchmark", "string", "benchmark name", True),
    _f("group", "string", "the benchmark's group (the macro averages groups); defaults to benchmark"),
    _f("problem_id", "string", "problem id, unique within its benchmark", True),
    _f("sample_idx", "int64", "sample index 0..n-1 of the problem", True),
]

_SAMPLES = [
    *_KEYS,
    _f("mode", "string", "solo | handoff"),
    _f("schedule", "string", "handoff schedule (solo for solo runs)"),
    _f("seed", "int64", "the trace's sampling seed"),
    _f("problem", "string", "problem text"),
    _f("prompt", "string", "the rendered prompt"),
    _f("text", "string", "the decoded CoT"),
    _f("prompt_ids", "list<int64>", "prompt token ids"),
    _f("token_ids", "list<int64>", "CoT token ids"),
    _f("author_mask", "list<int64>", "per CoT token: 1 = the senior wrote it, 0 = the junior"),
    _f("logprobs", "list<float64>", "the author's raw log-prob of each CoT token"),
    _f("gold", "string", "reference answer"),
    _f("extracted_answer", "string", "the answer the grader extracted (null: none)"),
    _f("correct", "bool", "graded correct", True),
    _f("grade_status", "string", "ok | no_answer | timeout | error | ungraded (stored while the grader failed)"),
    _f("finish_reason", "string", "eos | length"),
    _f("n_tokens", "int64", "CoT length in tokens"),
    _f("n_senior_tokens", "int64", "CoT tokens the senior wrote"),
    _f("senior_fraction", "float64", "n_senior_tokens / n_tokens"),
    _f("n_handoffs", "int64", "author changes in the CoT"),
]

_LENS_COMMON = [
    *_KEYS,
    _f("n_tokens", "int64", "CoT length in tokens"),
    _f("truncated", "bool", "the CoT hit the token budget (finish_reason length)"),
    _f("include_eos", "bool", "the final EOS token was scored"),
    _f("n_scored_tokens", "int64", "CoT tokens scored"),
    _f("correct", "bool", "the sample was graded correct"),
]

_LEGIBILITY = [
    *_LENS_COMMON,
    _f("n_junior_tokens", "int64", "tokens the junior scored (its own tokenization if vocabularies differ)"),
    _f("junior_nll_sum", "float64", "junior NLL of the CoT, nats"),
    _f("junior_nll_mean", "float64", "junior NLL per token, nats"),
    _f("n_bytes", "int64", "UTF-8 bytes of the CoT text without EOS"),
    _f("junior_bpb", "float64", "junior NLL in bits per byte of the CoT text"),
    _f("vocab_match", "bool", "senior and junior share the vocabulary"),
    _f("nll_bins", "list<float64>", "mean junior NLL per relative-position bin"),
    _f("junior_logprobs", "list<float32>", "junior log-prob of each scored token"),
]

_DRIFT = [
    *_LENS_COMMON,
    _f("method", "string", "exact | monte-carlo"),
    _f("kl_exact", "float64", "exact KL(senior || junior) per token, mean over the CoT"),
    _f("kl_reverse", "float64", "exact KL(junior || senior) per token, mean over the CoT"),
    _f("kl_k1", "float64", "Monte-Carlo k1 estimate per token, mean over the CoT"),
    _f("kl_k3", "float64", "Monte-Carlo k3 estimate per token, mean over the CoT"),
    _f("senior_nll_mean", "float64", "senior NLL per token"),
    _f("junior_nll_mean", "float64", "junior NLL per token"),
    _f("kl_bins", "list<float64>", "mean KL per relative-position bin"),
    _f("k1_bins", "list<float64>", "mean k1 per relative-position bin"),
    _f("kl_tokens", "list<float32>", "KL of each scored token"),
    _f("k1_tokens", "list<float32>", "k1 of each scored token"),
]

_COLUMNS = {"samples": _SAMPLES, "legibility": _LEGIBILITY, "drift": _DRIFT}
SAMPLE_COLUMNS = [c[0] for c in _SAMPLES]  # the sample table's columns, in order
_ARROW = {"samples": "SAMPLES", "legibility": "LEGIBILITY", "drift": "DRIFT"}


def _arrow_type(name: str):
    """pyarrow type of a type name: string, int64, float64, float32, bool, list<ELEMENT>."""
    import pyarrow as pa

    if name.startswith("list<"):
        return pa.list_(_arrow_type(name[5:-1]))
    return pa.bool_() if name == "bool" else getattr(pa, name)()


_BUILT: dict = {}


def _schemas() -> dict:
    """{table name: pyarrow schema}, built on first use (pyarrow is not imported before)."""
    if not _BUILT:
        import pyarrow as pa

        for table, columns in _COLUMNS.items():
            _BUILT[table] = pa.schema(
                [
                    pa.field(n, _arrow_type(t), metadata={"required": "1" if req else "0", "doc": doc})
                    for n, t, doc, req in columns
                ]
            )
    return _BUILT


def __getattr__(name: str):
    """SCHEMAS ({table: schema}) and SAMPLES / LEGIBILITY / DRIFT, built from the columns on first use."""
    if name == "SCHEMAS":
        return dict(_schemas())
    table = {v: k for k, v in _ARROW.items()}.get(name)
    if table is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _schemas()[table]


def schema_for(path: str | Path) -> tuple[str, Any] | None:
    """(table name, schema) of a run folder file by its name: samples.parquet and shards/part-*.parquet
    are samples, legibility.parquet / drift.parquet lens tables; None for any other table."""
    p = Path(path)
    if p.name == "samples.parquet" or (p.parent.name == "shards" and p.name.startswith("part-")):
        return "samples", _schemas()["samples"]
    if p.stem in _COLUMNS and p.suffix == ".parquet":
        return p.stem, _schemas()[p.stem]
    return None


def required(schema) -> list[str]:
    return [f.name for f in schema if f.metadata and f.metadata.get(b"required") == b"1"]


def _kind(t) -> str | None:
    """A pyarrow type's family: string, int, float, bool, list<ELEMENT FAMILY>, null; None for anything else."""
    import pyarrow as pa

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


def check_schema(got, want, where: str, fix: str) -> None:
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


def check_frame(df, path: str | Path, fix: str = "fix the code that builds this table") -> None:
    """Check a table (a DataFrame) about to be written to `path` against its schema (no-op for unknown tables)."""
    import pyarrow as pa

    spec = schema_for(path)
    if spec is None:
        return
    try:
        got = pa.Schema.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise RunFolderError(f"{path} cannot be written as parquet ({' '.join(str(e).split())}); {fix}") from None
    check_schema(got, spec[1], f"{path} ({spec[0]} table)", fix)


def check_file(path: str | Path, fix: str = "delete the run folder and rerun the command that wrote it") -> None:
    """Check a parquet file's footer schema against its table's schema; a file of no known table is
    only checked to be a regular file."""
    spec = schema_for(path)
    if spec is None:
        check_regular(path, fix)
        return
    check_schema(read_parquet_schema(path, fix), spec[1], f"{path} ({spec[0]} table)", fix)


def read_table(path: str | Path, columns: list[str] | None, fix: str):
    """A parquet table, its footer's schema checked first (as check_file), from the same open file; a
    damaged file, a missing required column or one of the wrong type is one line naming `fix`."""
    spec = schema_for(path)
    if spec is None:
        return read_parquet(path, columns, fix)
    return read_parquet(path, columns, fix, lambda got: check_schema(got, spec[1], f"{path} ({spec[0]} table)", fix))


def write_table(path: Path, df, root: Path | None = None) -> str:
    """files.atomic_write_parquet once the table passed its schema (check_frame): a bad table never
    reaches a run folder. Returns the SHA-256 of the bytes written."""
    check_frame(
        df, path, "nothing was written; the code that builds this table must produce it (tandem_eval/schemas.py)"
    )
    return atomic_write_parquet(path, df, root)


def markdown_columns(name: str) -> str:
    """The columns of table `name` as markdown lines (`name` type, required, doc): the list in docs/run-folders.md."""
    lines = []
    for f in _schemas()[name]:
        req = " (required)" if f.metadata.get(b"required") == b"1" else ""
        lines.append(f"- `{f.name}` {str(f.type).replace('item: ', '')}{req}: {f.metadata[b'doc'].decode()}")
    return "\n".join(lines)


# ---- JSON -----------------------------------------------------------------------------------


def to_jsonable(obj: Any) -> Any:
    """`obj` as strict JSON data: numpy scalars as Python numbers, NaN/inf as None (null: degenerate
    results are results), tuples as lists, keys as strings. The one JSON cleaning of every writer."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float):  # numpy's float64 too
        return float(obj) if math.isfinite(obj) else None
    if hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:  # other numpy scalars, without importing numpy
        return to_jsonable(obj.item())
    return obj


# ---- strict loading -------------------------------------------------------------------------


class ConfigError(ValueError):
    """A configuration value or combination is invalid; the message names the fix."""


def _coerce(tp, value, where: str):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if value is None else _coerce(args[0], value, where)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if origin is tuple:
        (inner, *_) = typing.get_args(tp)
        return tuple(_coerce(inner, v, where) for v in value)
    return value


def from_dict(cls, data: dict, where: str = "config"):
    """Build dataclass `cls` from `data`, refusing unknown keys (strict loading)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping for {cls.__name__}, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown} for {cls.__name__}; valid: {sorted(names)}")
    kwargs = {k: _coerce(hints[k], v, f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required key is missing
        raise ConfigError(f"{where}: {e}") from None


class TypeMismatch(Exception):
    """conform's refusal; its message names what was expected."""


def conform(value, tp: Any):
    """`value` as type `tp`, or TypeMismatch naming what was expected. Strict: no str->list splits,
    no float->int truncation, no bool as a number."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or tp is object:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise TypeMismatch(type_name(tp))
        members = [a for a in args if a is not type(None)]
        # exact matches first, so "wandb" for `str | list[str]` stays a string
        for a in sorted(members, key=lambda a: typing.get_origin(a) is not None):
            try:
                return conform(value, a)
            except TypeMismatch:
                continue
        raise TypeMismatch(type_name(tp))
    if origin is typing.Literal:
        if value in args:
            return value
        raise TypeMismatch(f"one of {list(args)}")
    if origin in (list, tuple):
        if isinstance(value, (list, tuple)):
            item = args[0] if args else Any
            return [conform(v, item) for v in value]
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and args:
            return [conform(value, args[0])]  # one value for a list field: a one-item list
        raise TypeMismatch(type_name(tp))
    if origin is dict or tp is dict:
        if isinstance(value, dict):
            return value
        raise TypeMismatch("a mapping")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise TypeMismatch("true or false")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeMismatch("an integer")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 1e-6 as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise TypeMismatch("a number")
    if tp is str:
        if isinstance(value, str):
            return value
        raise TypeMismatch("a string")
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if isinstance(value, (str, tp)):
            return value
        raise TypeMismatch(f"one of {[m.value for m in tp]}")
    return value  # trl/transformers objects (AcceleratorConfig ...): their own validation


def type_name(tp) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a mapping"}
    if tp in names:
        return names[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple):
        return f"a list of {type_name(args[0]) if args else 'values'}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) if a is not type(None) else "null" for a in args)
    return getattr(tp, "__name__", str(tp))


__all__ = [
    "ALPHA",
    "BOOT_SEED",
    "Bootstrap",
    "ConfigError",
    "N_BOOT",
    "PROBLEM_KEY",
    "RunFolderError",
    "SAMPLE_COLUMNS",
    "SAMPLE_KEY",
    "TypeMismatch",
    "check_file",
    "check_frame",
    "conform",
    "from_dict",
    "markdown_columns",
    "read_table",
    "schema_for",
    "to_jsonable",
    "write_table",
]


if __name__ == "__main__":  # python -m tandem_eval.schemas: the column lists of docs/run-folders.md
    for _name in _COLUMNS:
        print(f"`{_name}` columns:\n\n{markdown_columns(_name)}\n")
