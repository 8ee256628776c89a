"""Parquet schemas in code (tandem_eval/schemas.py): checked when a run folder's tables are written
and when they are read, each violation a one-line RunFolderError naming the file and the column;
the committed toy runs satisfy them.

Run: .venv/bin/python -m pytest tests/test_schemas.py -q
"""

from pathlib import Path

import pandas as pd
import pytest
from run_fixtures import solo_cfg, write_run

from tandem_eval.run.results import RunFolder
from tandem_eval.run.runs import Run, problem_values
from tandem_eval.schemas import SCHEMAS, RunFolderError, check_file, markdown_columns

FLAGS = {("tiny", f"tiny/{i:04d}"): [True, i % 2 == 0] for i in range(3)}
TOY = Path(__file__).resolve().parent.parent / "results" / "toy"


@pytest.fixture
def solo(tmp_path):
    return write_run(tmp_path / "solo", solo_cfg("toy:a", n=2, ks=(1, 2)), FLAGS)


def _one_line(e) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_writing_samples_without_a_required_column_is_refused_naming_file_and_column(tmp_path):
    rf = RunFolder(tmp_path / "run")
    with pytest.raises(RunFolderError) as e:
        rf.append_shard([{"benchmark": "tiny", "problem_id": "p0", "sample_idx": 0}])  # no `correct`
    msg = _one_line(e)
    assert "part-00000.parquet" in msg and "'correct'" in msg
    assert not list((tmp_path / "run" / "shards").glob("*.parquet"))  # nothing written


def test_writing_a_lens_table_with_a_wrongly_typed_column_is_refused(solo):
    table = pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["tiny/0000"], "sample_idx": [0], "kl_exact": ["x"]})
    with pytest.raises(RunFolderError) as e:
        solo.write_table("lens/jr/drift.parquet", table)
    msg = _one_line(e)
    assert "drift.parquet" in msg and "'kl_exact'" in msg and "string" in msg
    assert not (solo.path / "lens" / "jr" / "drift.parquet").exists()


def test_reading_samples_with_a_wrongly_typed_column_is_refused_naming_file_and_column(solo):
    df = solo.load_samples()
    solo.done_path.unlink()  # an unfinished run: shards are read without integrity records
    solo.shard_dir.mkdir()
    df.assign(sample_idx=df["sample_idx"].astype(str)).to_parquet(solo.shard_dir / "part-00000.parquet")
    solo.samples_path.unlink()
    with pytest.raises(RunFolderError) as e:
        solo.load_samples()
    msg = _one_line(e)
    assert "part-00000.parquet" in msg and "'sample_idx'" in msg


def test_reading_a_lens_table_without_a_key_column_is_refused(solo):
    path = solo.path / "lens" / "jr" / "legibility.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame({"benchmark": ["tiny"], "sample_idx": [0], "junior_nll_mean": [1.0]}).to_parquet(path)
    with pytest.raises(RunFolderError) as e:
        check_file(path)
    assert "'problem_id'" in _one_line(e)
    with pytest.raises(RunFolderError, match="legibility.parquet.*'problem_id'"):
        Run.load(solo.path).side_table("legibility")


def test_optional_columns_may_be_absent_and_unknown_columns_are_kept(solo):
    table = pd.DataFrame({"benchmark": ["tiny"], "problem_id": ["tiny/0000"], "sample_idx": [0], "extra": [1.0]})
    path = solo.write_table("lens/jr/legibility.parquet", table)
    check_file(path)
    assert list(pd.read_parquet(path).columns) == ["benchmark", "problem_id", "sample_idx", "extra"]


def test_committed_toy_runs_satisfy_the_schemas():
    files = sorted(TOY.rglob("*.parquet"))
    kinds = {f.stem for f in files}
    assert {"samples", "legibility", "drift"} <= kinds
    for f in files:
        check_file(f)
    run = Run.load(next(TOY.rglob("solo/config.json")).parent)
    assert len(problem_values(run, "kl_exact")) > 0  # reads through the checked path


def test_run_folder_docs_list_the_sample_columns_from_the_schema():
    page = (TOY.parent.parent / "docs" / "run-folders.md").read_text()
    for name in SCHEMAS:  # regenerate with `python -m tandem_eval.schemas` when a schema changes
        assert markdown_columns(name) in page


def test_json_cleaning_turns_numpy_scalars_into_numbers_and_nan_into_null():
    import json

    import numpy as np

    from tandem_eval.schemas import to_jsonable

    raw = {"a": (np.float64("nan"), np.float32(1.5), np.int64(3), np.bool_(True)), 2: [float("inf"), None, "x"]}
    clean = to_jsonable(raw)
    assert clean == {"a": [None, 1.5, 3, True], "2": [None, None, "x"]}
    assert [type(v) for v in clean["a"][1:]] == [float, int, bool]
    json.dumps(clean, allow_nan=False)  # strict JSON


def test_strict_loading_refuses_unknown_keys_and_the_recipe_types_are_strict():
    from tandem_eval.config import Sampling
    from tandem_eval.schemas import ConfigError, TypeMismatch, conform, from_dict

    assert from_dict(Sampling, {"temperature": 0.5}).temperature == 0.5
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['temprature'\]"):
        from_dict(Sampling, {"temprature": 0.5})
    assert conform([1, 2], list[int]) == [1, 2] and conform("1e-6", float) == 1e-6
    for value, tp in ((True, int), (1.5, int), ("a,b", list[int]), (float("nan"), str)):
        with pytest.raises(TypeMismatch):
            conform(value, tp)


def test_the_schema_module_imports_no_pyarrow_or_pandas_and_owns_run_folder_error():
    import subprocess
    import sys

    code = "import sys, tandem_eval.config; print([m for m in ('pyarrow', 'pandas') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # the CLI imports config (and so this module) before --help
    from tandem_eval import schemas

    assert RunFolderError is schemas.RunFolderError  # results re-exports it: one class, no import circle
    assert schemas.SAMPLES.names[: len(schemas.SAMPLE_KEY) + 1] == ["benchmark", "group", "problem_id", "sample_idx"]
    assert set(schemas.SAMPLE_KEY) <= set(schemas.SAMPLE_COLUMNS) and schemas.SAMPLE_KEY[:2] == schemas.PROBLEM_KEY


def test_a_table_is_read_and_recorded_from_one_open_file(solo, monkeypatch):
    """A table's schema and rows come from one open file, checked with fstat (a path checked first and
    opened again after could be swapped in between: a FIFO would then block the reader), and COMPLETE's
    record of it (rows, SHA-256) from one open too. Before, each took two opens."""
    import os

    from tandem_eval import files
    from tandem_eval.run.results import _table_record
    from tandem_eval.schemas import read_table

    opened, real_open = [], os.open

    def counted(path, *args, **kw):
        opened.append(Path(path).name)
        return real_open(path, *args, **kw)

    monkeypatch.setattr(files.os, "open", counted)
    df = read_table(solo.samples_path, None, "fix")
    assert len(df) == 6 and opened.count("samples.parquet") == 1
    opened.clear()
    assert _table_record(solo.samples_path)["rows"] == 6 and opened.count("samples.parquet") == 1


def test_a_fifo_where_a_table_should_be_is_refused_without_blocking(solo):
    import os

    from tandem_eval.schemas import read_table

    fifo = solo.path / "legibility.parquet"
    os.mkfifo(fifo)
    with pytest.raises(RunFolderError, match="is a FIFO, not a regular file"):
        read_table(fifo, None, "fix")
