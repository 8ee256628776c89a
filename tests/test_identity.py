"""Which run is which: a senior's label is unique across runs, a handoff is paired with the solo run it
records, a junior's lens label is unique, and the shard-* parts of a merged run are not runs of their own.

    PYTHONPATH=$PWD python -m pytest -q tests/test_identity.py

Run folders are synthetic (tests/run_fixtures.py: no generation); the lens test scores them with the
tiny junior.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from run_fixtures import handoff_cfg, solo_cfg, write_run
from typer.testing import CliRunner

from tandem_eval.cli.main import app
from tandem_eval.generate.execute import merge_shards
from tandem_eval.report.collect import collect
from tandem_eval.run.runs import ReportError, find_run, runs_in, shard_dir, shard_parts

runner = CliRunner()
PROBLEMS = [("tiny", f"tiny/000{i}") for i in range(4)]


def _flags(ok: bool) -> dict:
    return {key: [ok, ok] for key in PROBLEMS}


def _handoff_with_its_solo(root: Path, senior: str, solo_ok: bool, handoff_ok: bool, label=None):
    """OUT/solo and OUT/handoff-paragraph of `senior`, the handoff recording its solo run as handoff does."""
    solo = write_run(root / "solo", solo_cfg(senior, n=2, ks=(1, 2), label=label), _flags(solo_ok))
    record = {"path": str(solo.path.resolve()), "fingerprint": solo.config()["fingerprint"], "differs": []}
    cfg = handoff_cfg(senior, "jr", n=2, ks=(1, 2), label=label)
    hand = write_run(root / "handoff-paragraph", cfg, _flags(handoff_ok), extra={"solo_run": record})
    hand.update_metrics({"solo_run": record["path"]})
    return solo, hand


@pytest.mark.parametrize("label", [None, "checkpoint-200"], ids=["no-label", "older-cli-default-label"])
def test_two_checkpoints_of_one_name_are_two_arms_and_a_handoff_gets_its_own_solo(tmp_path, label):
    a_solo = write_run(
        tmp_path / "runA/solo", solo_cfg("/ckpt/A/checkpoint-200", n=2, ks=(1, 2), label=label), _flags(True)
    )
    b_solo, b_hand = _handoff_with_its_solo(tmp_path / "runB", "/ckpt/B/checkpoint-200", False, False, label)
    col = collect([a_solo.path, b_hand.path])
    assert col.arms == ["A/checkpoint-200", "B/checkpoint-200"]
    assert col.solo("B/checkpoint-200").path.resolve() == b_solo.path.resolve()  # recorded, not A's
    assert col.solo("A/checkpoint-200").path.resolve() == a_solo.path.resolve()
    assert col.handoff("A/checkpoint-200", "paragraph") is None
    # the report's tax of B is B's own (0 points), never A's solo minus B's handoff (100)
    out = tmp_path / "report"
    result = runner.invoke(app, ["report", str(a_solo.path), str(b_hand.path), "--out", str(out), "--no-figures"])
    assert result.exit_code == 0, result.stderr
    rows = [line for line in (out / "table2.md").read_text().splitlines() if "B/checkpoint-200" in line]
    assert rows and all(line.rstrip(" |").endswith("0.0 ± 0.0") for line in rows), rows


def test_one_explicit_label_for_two_seniors_never_pairs_the_wrong_solo_run(tmp_path):
    write_run(tmp_path / "runA/solo", solo_cfg("/ckpt/A/c", n=2, ks=(1, 2), label="mine"), _flags(True))
    _, b_hand = _handoff_with_its_solo(tmp_path / "runB", "/ckpt/B/c", False, False, "mine")
    with pytest.raises(ReportError, match="was measured against the solo run"):
        collect([tmp_path / "runA/solo", b_hand.path])


def test_the_shard_parts_of_a_merged_run_are_not_runs(tmp_path):
    root = tmp_path / "ray-out"
    for i in range(2):
        cfg = solo_cfg("/ckpt/s", n=2, ks=(1, 2), num_shards=2, shard_index=i)
        write_run(shard_dir(root, i, 2) / "solo", cfg, {k: [True, False] for k in PROBLEMS[i::2]})
    (root / "shard-x-of-2").mkdir()  # not a shard's name: neither merged nor hidden
    assert shard_parts(root) == [root / "shard-0-of-2", root / "shard-1-of-2"]
    merge_shards([p / "solo" for p in shard_parts(root)], root / "solo")
    (run,) = collect([root]).runs
    assert run.path == (root / "solo").resolve() and run.per_problem([1]).shape[0] == 4
    assert [r.path for r in runs_in(root)] == [root / "solo"]
    assert find_run(root, "solo").path == root / "solo"


def test_two_junior_folders_of_one_name_get_two_lens_labels(tiny_pair, tmp_path):
    senior, junior = tiny_pair
    run = write_run(tmp_path / "run/solo", solo_cfg(senior, n=2, ks=(1, 2)), {PROBLEMS[0]: [True, False]}).path
    for d in ("J1", "J2"):
        shutil.copytree(junior, tmp_path / d / "junior")

    def legibility(jr: str, *extra: str):
        return runner.invoke(app, ["legibility", "--run", str(run), "--junior", jr, "--n-boot", "20", *extra])

    for d in ("J1", "J2", "J1"):  # the third call rescores J1 under its own label
        result = legibility(str(tmp_path / d / "junior"))
        assert result.exit_code == 0, (result.stderr, result.exception)
    lens = json.loads((run / "metrics.json").read_text())["lens"]
    assert sorted(lens) == ["J2-junior", "junior"]
    assert Path(lens["junior"]["legibility"]["junior"]) == (tmp_path / "J1/junior").resolve()
    assert Path(lens["J2-junior"]["legibility"]["junior"]) == (tmp_path / "J2/junior").resolve()
    assert sorted(p.name for p in (run / "lens").iterdir()) == ["J2-junior", "junior"]
    refused = legibility(str(tmp_path / "J2/junior"), "--junior-label", "junior")
    assert refused.exit_code == 2 and "--junior-label junior already holds" in refused.stderr


# ==== issue 33: checkpoints by content, one identity rule for every pairing ===================================
def test_a_checkpoint_is_identified_by_its_files_and_hashed_once(tiny_pair, tmp_path, monkeypatch):
    """checkpoint_content: a copy of the files hashes the same, replaced weights do not, trainer state
    does not count; each file is hashed once per version (the cache under TANDEM_EVAL_CACHE, never in
    the checkpoint), so a second command does not read gigabytes again."""
    import hashlib
    import os

    from tandem_eval import models

    monkeypatch.setenv("TANDEM_EVAL_CACHE", str(tmp_path / "cache"))
    senior = shutil.copytree(tiny_pair[0], tmp_path / "senior")
    for f in senior.iterdir():  # written a minute ago: files just written are hashed afresh each time
        os.utime(f, (f.stat().st_atime - 60, f.stat().st_mtime - 60))
    copy = shutil.copytree(senior, tmp_path / "copy")
    reads = []
    real = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda f, name: reads.append(f.name) or real(f, name))
    first = models.checkpoint_content(senior)
    assert reads and models.checkpoint_content(senior) == first and len(reads) == len(set(reads))  # cached
    assert models.checkpoint_content(copy) == first
    (copy / "optimizer.pt").write_bytes(b"trainer state")
    (copy / "tandem_meta.json").write_text("{}")
    assert models.checkpoint_content(copy) == first
    from safetensors.torch import load_file, save_file

    weights = load_file(copy / "model.safetensors")
    save_file({k: v * 2 for k, v in weights.items()}, copy / "model.safetensors", {"format": "pt"})
    assert models.checkpoint_content(copy) != first
    assert (tmp_path / "cache" / models.HASH_CACHE).is_file() and not list(copy.glob("*sha256*"))


def test_runs_from_before_content_hashes_keep_their_fingerprints_and_are_accepted():
    """Committed run folders (results/) recorded no checkpoint content: they verify as they are, and a
    command that hashes its checkpoint still finds them the same experiment (with a warning)."""
    import dataclasses

    from tandem_eval.config import EvalConfig, as_recorded, fingerprint_of
    from tandem_eval.run.results import find_runs, verify_run
    from tandem_eval.schemas import from_dict

    root = Path(__file__).resolve().parents[1] / "results" / "toy"
    run = next(rf for rf in find_runs(root / "self-paired") if rf.is_complete())
    raw = verify_run(run.path).config()
    assert "content" not in raw["config"]["senior"] and fingerprint_of(raw["config"]) == raw["fingerprint"]
    cfg = from_dict(EvalConfig, raw["config"])
    hashed = dataclasses.replace(cfg, senior=dataclasses.replace(cfg.senior, content="0" * 64))
    assert hashed.fingerprint() != raw["fingerprint"]
    legacy, unchecked = as_recorded(hashed, raw["config"])
    assert legacy.fingerprint() == raw["fingerprint"] and unchecked == ["the senior checkpoint"]


def test_replaced_junior_weights_at_one_path_get_their_own_lens_label(tiny_pair, tmp_path):
    """The same junior folder with other weights is another junior: its outputs get a label of their
    own, and the first junior's outputs stay (nothing lost)."""
    from safetensors.torch import load_file, save_file

    senior, junior = tiny_pair
    run = write_run(tmp_path / "run/solo", solo_cfg(senior, n=2, ks=(1, 2)), {PROBLEMS[0]: [True, False]}).path
    jr = shutil.copytree(junior, tmp_path / "J" / "junior")
    args = ["legibility", "--run", str(run), "--junior", str(jr), "--n-boot", "20", "-q"]
    assert runner.invoke(app, args).exit_code == 0
    weights = load_file(jr / "model.safetensors")
    save_file({k: v + 1 for k, v in weights.items()}, jr / "model.safetensors", {"format": "pt"})
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (result.stderr, result.exception)
    lens = json.loads((run / "metrics.json").read_text())["lens"]
    assert sorted(lens) == ["J-junior", "junior"]
    assert lens["junior"]["legibility"]["junior_content"] != lens["J-junior"]["legibility"]["junior_content"]
    assert {p.name for p in (run / "lens").iterdir()} == {"J-junior", "junior"}


def test_one_problem_id_naming_two_problems_is_never_a_pair(tmp_path):
    """Two files named test.jsonl with other rows give the same ids (file stem + row): compare pairs
    problems by content, so those are problems of one run each; --on-mismatch intersect keeps only
    the problems both runs hold by content."""
    from tandem_eval.report.compare import compare_values
    from tandem_eval.run.lens_layout import LensError
    from tandem_eval.run.runs import Run, pairing_problem, problem_values

    keys = {("test", f"test/000{i}"): [True, i % 2 == 0] for i in range(4)}
    a = write_run(tmp_path / "a", solo_cfg("/ckpt/s", n=2, ks=(1, 2), label="A"), keys)
    other = {("test", "test/0000"): "another problem", ("test", "test/0001"): "and another"}
    b = write_run(tmp_path / "b", solo_cfg("/ckpt/s", n=2, ks=(1, 2), label="B"), keys, texts=other)
    ra, rb = Run.load(a.path), Run.load(b.path)
    assert "2 of the 4 problem ids" in pairing_problem(ra, rb, "compared")
    assert pairing_problem(ra, Run.load(a.path), "compared") is None
    va, vb = problem_values(ra, "pass@1"), problem_values(rb, "pass@1")
    with pytest.raises(LensError, match="2 ids name other problems"):
        compare_values(va, vb)
    table = compare_values(va, vb, on_mismatch="intersect")
    assert set(table["n_problems"]) == {2}


def test_compare_names_the_junior_and_refuses_two_unless_asked(tmp_path):
    import pandas as pd

    lens = pd.DataFrame({"benchmark": ["tiny"] * 8, "problem_id": [k[1] for k in PROBLEMS for _ in range(2)]})
    lens = lens.assign(sample_idx=[0, 1] * 4, junior_nll_mean=[1.0 + i / 10 for i in range(8)])
    runs = {}
    for name, who in (("a", "/ckpt/a/junior"), ("b", "/ckpt/b/junior"), ("c", "/ckpt/a/junior")):
        rf = write_run(tmp_path / name, solo_cfg("/ckpt/s", n=2, ks=(1, 2)), _flags(True))
        rf.write_table("lens/junior/legibility.parquet", lens)
        rf.update_metrics({"lens": {"junior": {"legibility": {"junior": who}}}})
        runs[name] = str(rf.path)
    base = ["compare", "--metric", "junior_nll", "--n-boot", "20"]
    same = runner.invoke(app, [*base, runs["a"], runs["c"]])
    assert same.exit_code == 0 and "scored by junior junior (/ckpt/a/junior)" in " ".join(same.stdout.split())
    mixed = runner.invoke(app, [*base, runs["a"], runs["b"]])
    assert mixed.exit_code == 2 and "/ckpt/a/junior" in mixed.stderr and "/ckpt/b/junior" in mixed.stderr
    asked = runner.invoke(app, [*base, runs["a"], runs["b"], "--allow-junior-mismatch"])
    assert asked.exit_code == 0 and "(they differ)" in " ".join(asked.stdout.split())


def test_one_label_for_two_experiments_is_never_one_row(tmp_path):
    """Runs of one label on different benchmarks join into one arm only when they are one experiment:
    two token budgets (or seeds, or checkpoints) under one label are refused, naming the difference."""
    from tandem_eval.config import Sampling

    for name, bench, budget in (("a", "aime24", 3000), ("b", "aime25", 1000)):
        cfg = solo_cfg(
            "/ckpt/s", n=2, ks=(1, 2), label="X", benchmarks=(bench,), sampling=Sampling(max_new_tokens=budget)
        )
        write_run(tmp_path / name / "solo", cfg, {(bench, f"{bench}/0000"): [True, False]})
    with pytest.raises(ReportError, match="different experiments.*max_new_tokens"):
        collect([tmp_path / "a", tmp_path / "b"])


def test_a_handoff_is_read_only_beside_the_solo_run_it_measured(tmp_path):
    """The solo run a handoff recorded was regenerated (other settings, same folder): report of the
    handoff alone, report of the folder, and view refuse; so does an arm whose solo run is joined from
    parts none of which is the recorded one."""
    solo, hand = _handoff_with_its_solo(tmp_path / "out", "/ckpt/s", True, False)
    shutil.rmtree(solo.path)
    write_run(solo.path, solo_cfg("/ckpt/s", n=2, ks=(1, 2), seed=9), _flags(False))
    for inputs in ([hand.path], [tmp_path / "out"]):
        with pytest.raises(ReportError, match="was measured against the solo run"):
            collect(inputs)
    view = runner.invoke(app, ["view", str(tmp_path / "out"), "--out", str(tmp_path / "v.html")])
    assert view.exit_code == 2 and "was measured against" in view.stderr and not (tmp_path / "v.html").exists()
    more = write_run(tmp_path / "more", solo_cfg("/ckpt/s", n=2, ks=(1, 2), seed=9, benchmarks=("aime24",)),
                     {("aime24", "aime24/0000"): [True, True]})  # fmt: skip
    with pytest.raises(ReportError, match="was measured against the solo run"):
        collect([tmp_path / "out", more.path])


# ==== issue 45: content identity that a copy, a restored mtime or an edited cache cannot fool ===============
def _aged(folder: Path) -> None:
    """Every file's mtime a minute back, so the hash cache keeps its entries (files just written are
    hashed afresh each time)."""
    import os

    for f in folder.iterdir():
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))


def _other_weights(folder: Path) -> bytes:
    """model.safetensors of another checkpoint of the same architecture: the same size, other bytes."""
    from safetensors.torch import load_file, save

    weights = load_file(folder / "model.safetensors")
    other = save({k: v + 0.5 for k, v in weights.items()}, {"format": "pt"})
    assert len(other) == (folder / "model.safetensors").stat().st_size
    return other


def _rewrite_keeping_mtime(file: Path, data: bytes) -> None:
    """Rewrite `file` in place (same inode, same size) and set its mtime back to the nanosecond, as a
    backup or sync tool that preserves times does: only the ctime moves."""
    import os

    st = file.stat()
    with open(file, "r+b") as f:
        f.write(data)
    os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = file.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)


def test_weights_rewritten_in_place_with_the_mtime_restored_hash_as_what_is_there(tiny_pair, tmp_path, monkeypatch):
    from tandem_eval import models

    monkeypatch.setenv("TANDEM_EVAL_CACHE", str(tmp_path / "cache"))
    senior = shutil.copytree(tiny_pair[0], tmp_path / "senior")
    _aged(senior)
    first = models.checkpoint_content(senior)  # cached now, under the old stamp
    _rewrite_keeping_mtime(senior / "model.safetensors", _other_weights(senior))
    fresh = shutil.copytree(senior, tmp_path / "fresh")  # the same bytes, never cached
    assert models.checkpoint_content(senior) != first
    assert models.checkpoint_content(senior) == models.checkpoint_content(fresh)


def test_an_edited_cache_entry_does_not_hide_a_swap(tiny_pair, tmp_path, monkeypatch):
    """A cache entry whose stamp is edited to the swapped file's (but whose digests are the old file's)
    is caught by the partial digest of the file's first and last MiB."""
    from tandem_eval import models

    monkeypatch.setenv("TANDEM_EVAL_CACHE", str(tmp_path / "cache"))
    senior = shutil.copytree(tiny_pair[0], tmp_path / "senior")
    _aged(senior)
    first = models.checkpoint_content(senior)
    weights = senior / "model.safetensors"
    _rewrite_keeping_mtime(weights, _other_weights(senior))
    cache = tmp_path / "cache" / models.HASH_CACHE
    entries = json.loads(cache.read_text())
    st = weights.resolve().stat()
    entries[str(weights.resolve())][0] = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    cache.write_text(json.dumps(entries))
    assert models.checkpoint_content(senior) != first


def test_the_hash_cache_never_writes_through_a_planted_link(tiny_pair, tmp_path, monkeypatch):
    import os

    from tandem_eval import models

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("TANDEM_EVAL_CACHE", str(cache))
    victim = tmp_path / "victim.json"
    victim.write_text('{"not": "yours"}')
    (cache / models.HASH_CACHE).symlink_to(victim)
    (cache / f"{models.HASH_CACHE}.{os.getpid()}.tmp").symlink_to(victim)  # where a pid-named temporary would be
    senior = shutil.copytree(tiny_pair[0], tmp_path / "senior")
    _aged(senior)
    models.checkpoint_content(senior)
    assert victim.read_text() == '{"not": "yours"}'
    assert not (cache / models.HASH_CACHE).is_symlink() and json.loads((cache / models.HASH_CACHE).read_text())
    left = sorted(p.name for p in cache.iterdir() if not p.is_symlink())
    assert left == [models.HASH_CACHE]  # no temporary file left


@pytest.mark.parametrize("how", ["a-file", "read-only"])
def test_an_unusable_cache_root_hashes_without_the_cache_and_warns_once(tiny_pair, tmp_path, monkeypatch, caplog, how):
    import os

    from tandem_eval import models

    root = tmp_path / "cache"
    if how == "a-file":
        root.write_text("x")
    else:  # os.access faked: permission bits do not bind root, who runs CI
        root.mkdir()
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: str(root) not in str(p) and real(p, mode, **kw))
    monkeypatch.setenv("TANDEM_EVAL_CACHE", str(root))
    models._warn_once.cache_clear()
    senior = shutil.copytree(tiny_pair[0], tmp_path / "senior")
    _aged(senior)
    with caplog.at_level("WARNING", logger="tandem_eval.models"):
        a, b = models.checkpoint_content(senior), models.checkpoint_content(tiny_pair[0])
    warned = [r for r in caplog.records if "hash cache not used" in r.getMessage()]
    assert len(warned) == 1 and str(root) in warned[0].getMessage()
    assert a == b  # a copy: the same content, hashed in full
    assert root.is_file() if how == "a-file" else list(root.iterdir()) == []


def test_copies_touches_and_rewrites_between_commands_never_fool_the_content_hash(tiny_pair, tmp_path, monkeypatch):
    """A fuzz of what users and tools do to checkpoint files between two commands (copy, touch, rewrite
    the same bytes, rewrite other bytes with the mtime restored, replace the file, age it): after each
    step the cached content hash equals the hash of a fresh copy, which no cache entry has seen."""
    import os
    import random

    from tandem_eval import models

    monkeypatch.setenv("TANDEM_EVAL_CACHE", str(tmp_path / "cache"))
    ck = shutil.copytree(tiny_pair[0], tmp_path / "ck")
    _aged(ck)
    weights = ck / "model.safetensors"
    versions = [weights.read_bytes(), _other_weights(ck)]
    rng = random.Random(45)

    def touch():
        os.utime(weights)

    def same_bytes():
        _rewrite_keeping_mtime(weights, weights.read_bytes())

    def other_bytes():  # the version that is not there now
        _rewrite_keeping_mtime(weights, versions[weights.read_bytes() == versions[0]])

    def replace():
        tmp = ck / "w.tmp"
        tmp.write_bytes(versions[rng.randrange(2)])
        shutil.copystat(weights, tmp)  # the old times, a new inode
        os.replace(tmp, weights)

    def copy_back():
        shutil.copy2(tmp_path / "fresh" / "model.safetensors", weights) if (tmp_path / "fresh").exists() else None

    steps = [touch, same_bytes, other_bytes, replace, copy_back, lambda: _aged(ck)]
    for i in range(24):
        rng.choice(steps)()
        shutil.rmtree(tmp_path / "fresh", ignore_errors=True)
        fresh = shutil.copytree(ck, tmp_path / "fresh")
        with monkeypatch.context() as m:
            m.setenv("TANDEM_EVAL_CACHE", str(tmp_path / f"empty-{i}"))
            truth = models.checkpoint_content(fresh)
        assert models.checkpoint_content(ck) == truth, i


def test_another_limit_is_named_as_such_not_blamed_on_a_hub_dataset():
    """Two runs of other --limit: their problem lists differ because the limit does; config_diff named a
    changed hub dataset or registry first."""
    from tandem_eval.config import config_diff

    old = {"limit": 2, "inputs": {"files": [], "problems": "a", "n_problems": 2}}
    new = {"limit": 3, "inputs": {"files": [], "problems": "b", "n_problems": 3}}
    assert config_diff(old, new) == "limit: 2 -> 3"
    same = {"limit": 2, "inputs": {"files": [], "problems": "b", "n_problems": 2}}
    assert "a hub dataset or the benchmark registry changed" in config_diff(old, same)
