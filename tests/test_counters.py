"""How often one command asks the same question: checkpoint resolutions (`models.resolve_model`),
schedule parses (`parse_schedule`), run fingerprints (`fingerprint_of`) and config.json reads
(`RunFolder.config`), counted for `tandem-eval handoff` (two run folders, two checkpoints) and
`tandem-eval legibility --run` on the bundled toy pair, and for the same handoff rerun (both runs
complete). The figures are today's (issue 41 measured them: the goal is one per checkpoint, one parse,
one fingerprint per run, one config read per run folder); a change that asks more often fails here, one
that asks less lowers the figure.

    PYTHONPATH=$PWD python -m pytest -q tests/test_counters.py      # ~1 min on 2 cores
"""

from __future__ import annotations

import collections
import sys

from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.run.results import RunFolder

COUNTED = (
    ("tandem_eval.models", "resolve_model"),
    ("tandem_eval.generate.schedules", "parse_schedule"),
    ("tandem_eval.config", "fingerprint_of"),
)
# measured on the tiny benchmark, --n 1 --limit 2 (issue 41: handoff 11, 6, 11, 8 before check_models resolved
# each checkpoint once, each run parsed its schedule once and finalize read config.json once, then 9, 4, 9, 6
# before the plan carried the parsed schedule and each run's fingerprint and a run folder kept its record, and
# checkpoints were passed on as resolved values (models.Checkpoint); legibility 10, 9, 9 before its checks read
# the run's config once, then 10, 6, 6; the goal in brackets). A handoff reads no config.json: the two folders it
# writes keep the records they wrote (absent = 0). Its 2 resolutions: the CLI resolves the senior to read the
# default junior from its tandem_meta.json and passes it on; the plan resolves the junior.
HANDOFF = {"resolve_model": 2, "parse_schedule": 1, "fingerprint_of": 2}  # [2, 1, 2, 2]
# The same command again, both runs complete: each folder's config.json read once (the plan opens each folder
# once and execute reuses what it read; 2 reads of the handoff's before), each record's settings re-hashed
# as it is read, and the handoff's own fingerprint to compare with (4 before).
RERUN = {"resolve_model": 2, "parse_schedule": 1, "fingerprint_of": 3, "RunFolder.config": 2}  # [2, 1, 3, 2]
LEGIBILITY = {"resolve_model": 2, "fingerprint_of": 1, "RunFolder.config": 1}  # [2, 0, 1, 1]


def _counting(monkeypatch) -> collections.Counter:
    """Wrap each counted function wherever a module of the library holds it (imported by name)."""
    import tandem_eval.cli.lens  # noqa: F401  # the commands' modules, so their imported names are wrapped too
    import tandem_eval.generate.execute  # noqa: F401
    import tandem_eval.score.stage  # noqa: F401

    counts: collections.Counter = collections.Counter()
    for home, name in COUNTED:
        original = vars(sys.modules[home])[name]

        def counted(*a, _name=name, _f=original, **kw):
            counts[_name] += 1
            return _f(*a, **kw)

        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("tandem_eval") and vars(module).get(name) is original:
                monkeypatch.setattr(module, name, counted)
    config = RunFolder.config

    def read_config(self):
        counts["RunFolder.config"] += 1
        return config(self)

    monkeypatch.setattr(RunFolder, "config", read_config)
    return counts


def test_a_handoff_its_rerun_and_a_legibility_ask_each_question_as_often_as_measured(tmp_path, monkeypatch):
    counts = _counting(monkeypatch)
    args = ["handoff", "--benchmark", "tiny", "--n", "1", "--limit", "2", "--out", str(tmp_path), "-q"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert dict(counts) == HANDOFF
    counts.clear()
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert dict(counts) == RERUN
    counts.clear()
    res = CliRunner().invoke(app, ["legibility", "--run", str(tmp_path / "solo"), "-q"])
    assert res.exit_code == 0, res.output
    assert dict(counts) == LEGIBILITY


def test_a_reused_solo_run_of_another_spelling_resolves_only_its_own_path(tmp_path, monkeypatch):
    """--solo-run recorded with the senior's folder path, the handoff naming it toy:tandem: the same folder,
    so the run is reused. The plan's senior (resolved once, by the CLI) is what the recorded path is compared
    with: 3 resolutions (the senior, the junior, the solo run's recorded path); the current senior was
    resolved a second time before."""
    from tandem_eval.models import resolve_model

    folder = str(resolve_model("toy:tandem"))
    common = ["--benchmark", "tiny", "--n", "1", "--limit", "2", "-q"]
    res = CliRunner().invoke(app, ["solo", "--senior", folder, "--out", str(tmp_path / "by-path"), *common])
    assert res.exit_code == 0, res.output
    counts = _counting(monkeypatch)
    solo = tmp_path / "by-path" / "solo"
    args = ["handoff", "--senior", "toy:tandem", "--solo-run", str(solo), "--out", str(tmp_path / "h"), *common]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert counts["resolve_model"] == 3
    (handoff,) = (tmp_path / "h").glob("handoff-*")  # the solo run reused: no OUT/solo made
    assert not (tmp_path / "h" / "solo").exists()
    assert RunFolder(handoff).config()["solo_run"]["differs"] == []
