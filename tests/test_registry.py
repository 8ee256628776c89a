"""The metric registry (tandem_eval/metrics/registry.py): each metric defined once, read by Table 2,
runs, compare and the toy summary; names with @K; the one cell formatting.

Run: .venv/bin/python -m pytest tests/test_registry.py -q
"""

import pytest

from tandem_eval import schemas
from tandem_eval.metrics.registry import LENS_METRICS, METRICS, fixed, fmt_interval, fmt_value, header, lookup
from tandem_eval.report.cells import COLUMNS
from tandem_eval.run import runs
from tandem_eval.run.lens_layout import LensError


def test_names_with_k_resolve_and_unknown_names_do_not():
    assert lookup("handoff_pass@4") == (METRICS["handoff_pass@K"], 4)
    assert lookup("kl_exact") == (METRICS["kl_exact"], None)
    assert lookup("pass@K") is None and lookup("tax@") is None and lookup("nll") is None
    assert header("tax@4") == "tax@4 (pts)" and header("solo_pass@1") == "solo pass@1 (%)"


def test_every_lens_metric_reads_a_column_its_lens_table_schema_defines():
    for name, (table, column) in LENS_METRICS.items():
        assert column in schemas.SCHEMAS[table].names, (name, table, column)
    assert runs.LENS_METRICS is LENS_METRICS  # the read side uses the registry, not a copy


def test_metric_modes_come_from_the_registry():
    assert runs.metric_mode("tax@4") == "handoff" and runs.metric_mode("junior_bpb") == "solo"
    for bad in ("pass@4", "pass@0", "nll", "tax@K"):  # plain pass@K names no mode; K must be a number >= 1
        with pytest.raises(LensError):
            runs.metric_mode(bad)


def test_table2_columns_show_the_registry_metadata():
    by_key = {c.key: c for c in COLUMNS}
    assert by_key["nll"].metric is METRICS["junior_nll"] and by_key["bpb"].metric.unit == "bits/byte"
    assert [c.decimals for c in COLUMNS] == [METRICS[c.metric.name].decimals for c in COLUMNS]
    assert by_key["tax"].better == "min" and by_key["solo"].better == "max"


def test_cell_formatting():
    assert fmt_value(55.61, 53.5, 57.7, 1) == "55.6 ± 2.1"
    assert fmt_value(float("nan"), 1, 2, 1) == "–" and fmt_value(1.0, float("nan"), 2.0, 2) == "1.00"
    assert fixed(-0.04, 1) == "0.0"  # never "-0.0"
    assert fmt_interval(1.25, [-0.5, 3.0], 1, signed=True) == "+1.2 [-0.5, +3.0]"
    assert fmt_interval(1.0, None) == "–"
