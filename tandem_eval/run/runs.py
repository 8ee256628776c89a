"""The read side of run folders: find runs, load their samples and lens tables, and get per-problem
values of any metric with the run's metadata. Reports, `compare`, `view`, the notebooks and the toy
world's summary all read runs through this module (nothing else opens a run folder to compute).

    from tandem_eval.run.runs import Run, find_run, problem_values, runs_in
    run = Run.load("results/toy/jargon/tandem/seed0/solo")
    run.meta                                   # {"senior": "jargon/tandem/s0", "arm": "jargon/tandem", "seed": 0, ...}
    problem_values(run, "pass@4")              # index (benchmark, problem_id); columns value (percent), group, content
    problem_values(run, "kl_exact")            # from the run's drift table of its junior (lens_layout.lens_file)
    tok = run_tokenizer(run.config)            # the senior's tokenizer (paths and toy: names alike)

Metrics (METRICS): pass@K (also solo_pass@K / handoff_pass@K, which check the run's mode), junior_nll,
junior_bpb, kl_exact, kl_reverse, kl_k1, kl_k3; tax@K per problem needs two runs (`tax_values`).
Arm and seed: a label `ARM/sN` (what the toy world writes, and the trainer's tandem_meta.json `arm`)
or a `seedN` folder above the run names the seed; the arm is the label without it. Checkpoint
names (`toy:NAME` and paths) are resolved by tandem_eval.models.resolve_model only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from tandem_eval.config import config_diff, fingerprint_of
from tandem_eval.files import RunFolderError, check_regular
from tandem_eval.metrics.passk import per_problem_pass_at_k
from tandem_eval.metrics.registry import COMPARABLE, LENS_METRICS, drift_columns, is_pass, lookup
from tandem_eval.paths import senior_label, served_name
from tandem_eval.run.lens_layout import LensError, junior_label, lens_file, lens_juniors
from tandem_eval.run.results import RunFolder, find_runs, verify_run
from tandem_eval.schemas import PROBLEM_KEY, SAMPLE_KEY, check_file

RESULTS_ENV = "TANDEM_EVAL_RESULTS"  # overrides where find_results() looks (tests, CI, other worlds)
_SEED_LABEL = re.compile(r"^(?P<arm>.+)/s(?:eed)?(?P<seed>\d+)$")
_SEED_DIR = re.compile(r"^seed(\d+)$")
DRIFT_ORDER = tuple(drift_columns())  # "kl": the first of these a drift table holds (metrics/registry.py)
METRICS = COMPARABLE  # what compare reads (tandem_eval.metrics.registry defines each)


class ReportError(RuntimeError):
    """The inputs cannot make a report as asked; the message names the fix."""


def find_results(world: str | None = None, start: str | Path | None = None) -> Path:
    """The repository's `results/` folder (or `results/WORLD`), found without `cd ..` tricks.

    Order: $TANDEM_EVAL_RESULTS; a `results/` folder next to a pyproject.toml in `start` (default:
    the current directory) or any parent; the `results/` next to the installed package's source.
    """
    candidates: list[Path] = []
    if os.environ.get(RESULTS_ENV):
        candidates.append(Path(os.environ[RESULTS_ENV]).expanduser())
    here = Path(start or Path.cwd()).resolve()
    candidates += [
        d / "results" for d in (here, *here.parents) if (d / "results").is_dir() and (d / "pyproject.toml").exists()
    ]
    # tandem_eval/run/runs.py -> the checkout holding tandem_eval/ (parents[2]; it was one folder too high before)
    candidates.append(Path(__file__).resolve().parents[2] / "results")
    for root in candidates:
        path = root / world if world else root
        if path.is_dir():
            return path
    raise ReportError(
        f"no results folder{f' for {world!r}' if world else ''} found (looked in "
        f"{', '.join(str(c) for c in candidates)}); set ${RESULTS_ENV} or pass run folders"
    )


@dataclass
class Run:
    """One run folder, read lazily and cached. `label` is its arm; `step` is set for training evals."""

    path: Path
    config: dict
    label: str
    mode: str
    schedule: str
    ks: tuple[int, ...]
    fingerprint: str | None = None
    step: int | None = None
    junior: str | None = None  # lens outputs of this junior label ("" = the older one-junior layout)
    parts: tuple = ()  # runs of one label on different benchmarks, read as one
    keep: frozenset | None = None  # only these (benchmark, problem_id) keys (Run.restrict)
    solo_record: dict | None = None  # a handoff run's record of the solo run its tax was measured against
    _pp: dict = field(default_factory=dict, repr=False)  # cache: per-problem pass@k, side tables

    @classmethod
    def load(cls, path: str | Path, step: int | None = None) -> Run:
        rf = RunFolder(path)
        if not rf.config_path.exists():
            raise ReportError(
                f"{path} is not a run folder (no config.json); pass folders written by "
                "`tandem-eval solo/handoff`, or a results folder holding them"
            )
        raw = rf.config()
        cfg = raw.get("config", raw)
        if step is None and raw.get("step") is not None:
            step = int(raw["step"])
        return cls(
            Path(path),
            cfg,
            run_label(cfg),
            cfg.get("mode", "solo"),
            cfg.get("schedule", "solo"),
            tuple(int(k) for k in cfg.get("ks", (1,))),
            raw.get("fingerprint"),
            step,
            solo_record=raw.get("solo_run") if isinstance(raw.get("solo_run"), dict) else None,
        )

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.path)

    @cached_property
    def _samples(self) -> pd.DataFrame:
        if self.parts:
            df = pd.concat([p.samples() for p in self.parts], ignore_index=True)
        else:
            df = self.folder.load_samples()
        if "group" not in df.columns or df["group"].isna().any():
            df = df.assign(group=df.get("group", df["benchmark"]).fillna(df["benchmark"]))
        return _keep(df, self.keep)

    def restrict(self, keys) -> Run:
        """A view of this run holding only the problems `keys` ((benchmark, problem_id) pairs)."""
        return dataclasses.replace(self, keep=frozenset(keys), _pp={})

    def problem_keys(self) -> set[tuple[str, str]]:
        s = self.samples()
        return set(zip(s["benchmark"], s["problem_id"].astype(str)))

    def contents(self) -> pd.Series:
        """Each problem's content id (index PROBLEM_KEY): the SHA-256 of its benchmark, text and gold
        answer as the samples hold them, so two runs pair a problem only when it is the same problem,
        never because two files share a name and a row position ("" where the samples hold no text)."""
        if "contents" not in self._pp:
            s = self.samples()
            cols = [c for c in ("problem", "gold") if c in s.columns]
            first = s.groupby(PROBLEM_KEY, sort=True)[cols].first() if cols else None
            if first is None:
                ids = pd.Series("", index=pd.MultiIndex.from_frame(s[PROBLEM_KEY].drop_duplicates()))
            else:
                ids = pd.Series(
                    [_content_id(key, *row) for key, row in zip(first.index, first.itertuples(index=False))],
                    index=first.index,
                    dtype=object,
                )
            self._pp["contents"] = ids.sort_index()
        return self._pp["contents"]

    def problem_set(self) -> frozenset:
        """The problems this run holds, by content: {(benchmark, problem_id, content id)}."""
        return frozenset((b, str(p), c) for (b, p), c in self.contents().items())

    def lens_juniors(self) -> list[str]:
        """Junior labels with lens outputs in this run ("" = the older layout), sorted."""
        runs = self.parts or (self,)
        return sorted({j for r in runs for j in lens_juniors(r.path)})

    def junior_name(self) -> str | None:
        """Display name of the junior whose lens outputs are read (None: no lens output)."""
        j = self.junior if self.junior is not None else next(iter(self.lens_juniors()), None)
        if j == "":
            spec = (self.metrics().get("legibility") or self.metrics().get("drift") or {}).get("junior")
            return junior_label(spec) if spec else "junior"
        return j

    @property
    def meta(self) -> dict:
        """senior (the label), arm, seed (None when unknown), mode, schedule, junior (lens outputs shown)."""
        arm, seed = split_seed(self.label, self.path)
        return {
            "senior": self.label,
            "arm": arm,
            "seed": seed,
            "mode": self.mode,
            "schedule": self.schedule,
            "junior": self.junior_name(),
        }

    @property
    def arm(self) -> str:
        return split_seed(self.label, self.path)[0]

    @property
    def seed(self) -> int | None:
        return split_seed(self.label, self.path)[1]

    def samples(self) -> pd.DataFrame:
        """The sample table (one row per problem x sample index); `group` defaults to benchmark."""
        return self._samples

    def metrics(self) -> dict:
        return self.folder.metrics()

    def per_problem(self, ks) -> pd.DataFrame:
        """Per-problem pass@k (fractions 0-1), one row per (benchmark, problem_id); cached per ks."""
        key = tuple(sorted(set(int(k) for k in ks)))
        if key not in self._pp:
            self._pp[key] = per_problem_pass_at_k(self.samples(), list(key))
        return self._pp[key]

    def groups(self) -> dict[str, str]:
        """benchmark -> group."""
        s = self.samples()
        return dict(zip(s["benchmark"], s["group"]))

    def side_path(self, name: str) -> Path | None:
        """This run's `legibility` / `drift` parquet for its junior (either layout), or None."""
        if self.junior == "":
            path = self.path / f"{name}.parquet"
            return path if path.exists() else None
        try:
            return lens_file(self.path, name, self.junior or None)
        except LensError:
            return None

    def side_columns(self, name: str) -> dict[str, bool]:
        """Columns of the run's `legibility` / `drift` parquet -> whether each holds per-token arrays."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.parts:
            return {c: a for p in self.parts for c, a in p.side_columns(name).items()}
        path = self.side_path(name)
        if path is None:
            return {}
        check_regular(path, f"rerun `tandem-eval {name}` on {self.path}")  # a FIFO or /dev/zero is never read
        schema = pq.read_schema(path)
        return {f.name: pa.types.is_list(f.type) or pa.types.is_large_list(f.type) for f in schema}

    def side_table(self, name: str, arrays: bool = False) -> pd.DataFrame | None:
        """`legibility` or `drift` parquet of this run (group added), or None if absent. Per-token
        array columns are read only with arrays=True (they can be gigabytes); scalar reads are cached."""
        columns = self.side_columns(name)
        if not columns:
            return None
        cache_key = ("side", name)
        if not arrays and cache_key in self._pp:
            return self._pp[cache_key]
        if self.parts:
            tables = [t for p in self.parts if (t := p.side_table(name, arrays)) is not None]
            df = _keep(pd.concat(tables, ignore_index=True), self.keep) if tables else None
            if not arrays:
                self._pp[cache_key] = df
            return df
        path = cast(Path, self.side_path(name))  # cast: it has columns (above), so its table exists
        check_file(path, f"rerun `tandem-eval {name}` on {self.path}")  # its schema (tandem_eval/schemas.py)
        self.folder.verify(complete=False)  # and only as COMPLETE records it (never an unrecorded table)
        df = pd.read_parquet(path, columns=[c for c, is_list in columns.items() if arrays or not is_list])
        if "group" not in df.columns:
            df["group"] = df["benchmark"].map(self.groups()).fillna(df["benchmark"])
        df = df.sort_values([c for c in SAMPLE_KEY if c in df.columns], kind="stable").reset_index(drop=True)
        df = _keep(df, self.keep)
        if not arrays:
            self._pp[cache_key] = df
        return df


def _content_id(key, problem=None, gold=None) -> str:
    """A problem's content id (see Run.contents)."""
    text = json.dumps([str(key[0]), None if problem is None else str(problem), None if gold is None else str(gold)])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _keep(df: pd.DataFrame, keys: frozenset | None) -> pd.DataFrame:
    """Rows of `df` whose (benchmark, problem_id) is in `keys` (all rows when keys is None)."""
    if keys is None:
        return df
    mask = [(b, str(p)) in keys for b, p in zip(df["benchmark"], df["problem_id"])]
    return df[mask].reset_index(drop=True)


def run_label(cfg: dict) -> str:
    """Display name of a run's senior: config label, else paths.senior_label of its checkpoint."""
    if cfg.get("label"):
        return str(cfg["label"])
    return senior_label(model_path(cfg))


def model_path(cfg: dict) -> str:
    """The checkpoint a run's arm is: the senior's, in every schedule. A junior-solo run names the
    senior too (its row is that senior's arm, beside its solo and handoff runs), so a junior-solo,
    a paragraph and a solo run of one senior in one folder make one arm."""
    return str((cfg.get("senior") or {}).get("path") or "senior")


def has_path_label(cfg: dict) -> bool:
    """The run's label is derived from its checkpoint's path (no `--label` was given): the CLI's
    default (paths.senior_label) or none at all."""
    path = model_path(cfg)
    # the folder name alone: the default of runs made before senior_label named RUN/checkpoint-N
    older = Path(path.replace("toy:", "toy-").rstrip("/")).name
    return not cfg.get("label") or str(cfg["label"]) in (senior_label(path), older)


def disambiguate_labels(runs: list[Run]) -> None:
    """Path-derived labels that two different checkpoints share (`A/checkpoint-200` and
    `B/checkpoint-200` are both `checkpoint-200`) become the shortest path suffix telling the
    checkpoints apart, so that one arm never mixes two seniors. Labels given with `--label` stay."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.label, []).append(r)
    for same in groups.values():
        ids = {_model_id(r.config) for r in same}
        if len(ids) < 2:
            continue
        parts = {i: Path(i.replace("toy:", "toy/")).parts for i in ids}
        for depth in range(2, max(len(v) for v in parts.values()) + 1):
            names = {i: "/".join(v[-depth:]) for i, v in parts.items()}
            if len(set(names.values())) == len(ids):
                break
        for r in same:
            if has_path_label(r.config):
                r.label = names[_model_id(r.config)]


def _model_id(cfg: dict) -> str:
    path = model_path(cfg)
    return path if path.startswith("toy:") else str(Path(path).expanduser().resolve())


_SHARD_DIR = re.compile(r"^shard-\d+-of-\d+$")


def shard_dir(out_root: str | Path, index: int, num_shards: int) -> Path:
    """Where shard `index` of `num_shards` writes its run folders: OUT/shard-I-of-N (the CLI's --num-shards and
    the Ray driver's tasks alike)."""
    return Path(out_root) / f"shard-{index}-of-{num_shards}"


def shard_parts(out_root: str | Path) -> list[Path]:
    """Every shard folder under `out_root` (shard_dir's names), sorted by name; merging refuses a mix of
    --num-shards (execute.merge_shards)."""
    root = Path(out_root)
    return sorted(p for p in root.iterdir() if _SHARD_DIR.match(p.name) and p.is_dir()) if root.is_dir() else []


def run_folders(root: str | Path) -> list[RunFolder]:
    """find_runs(root) without the parts of merged runs: ROOT/shard-I-of-N/KIND is left out when
    ROOT/KIND (what `merge`, or `--ray-workers`, made of the shards) exists, so readers see the
    merged run once, never its shards as further runs."""
    return [rf for rf in find_runs(root) if not is_merged_part(rf.path)]


def is_merged_part(path: Path) -> bool:
    path = Path(path)
    return bool(_SHARD_DIR.match(path.parent.name)) and (path.parent.parent / path.name / "config.json").exists()


def split_seed(label: str, path: Path | None = None) -> tuple[str, int | None]:
    """(arm, seed) of a run: a label `ARM/sN` (or `ARM/seedN`) names both; else a `seedN` folder
    among the run folder's two parents names the seed and the label is the arm; else seed None."""
    m = _SEED_LABEL.match(label)
    if m:
        return m["arm"], int(m["seed"])
    for parent in path.parents[:2] if path is not None else ():
        d = _SEED_DIR.match(parent.name)
        if d:
            return label, int(d.group(1))
    return label, None


def metric_mode(metric: str) -> str:
    """The run mode a metric is read from (solo or handoff); raises LensError on an unknown metric."""
    found = lookup(metric)
    if found and found[1] is not None and found[1] < 1:
        raise LensError(f"{metric}: K must be an integer >= 1 (e.g. {metric.split('@')[0]}@1)")
    if found is None or found[0].mode == "any":  # plain pass@K is per run: compare names the mode
        raise LensError(f"unknown metric {metric!r}; valid: {', '.join(METRICS)} (K a number, e.g. handoff_pass@4)")
    return found[0].mode


def problem_values(run: Run, metric: str, exclude_truncated: bool = False) -> pd.DataFrame:
    """THE per-problem value of `metric` for one run: index (benchmark, problem_id) sorted, columns
    value and group. pass@K in percent (every sample counts: exclude_truncated applies to lens
    metrics only); lens metrics are the mean over the problem's samples of the per-sample column of
    the run's lens table for its junior (`run.junior`; raises LensError naming the choices)."""
    found = lookup(metric)
    if found and is_pass(found[0]):
        k = cast(int, found[1])  # cast: a pass@K metric always carries its K
        most = int(run.samples().groupby(PROBLEM_KEY).size().max()) if len(run.samples()) else 0
        if k > most:  # every problem NaN: a reader pairing two runs would only say "no shared value"
            raise LensError(
                f"{metric}: {run.path} holds {most} sample(s) per problem and pass@k needs k <= n; pass a k of at "
                f"most {most} (the run reports k = {', '.join(map(str, run.ks))})"
            )
        pp = run.per_problem([k]).set_index(PROBLEM_KEY)
        return _with_contents(pd.DataFrame({"value": pp[f"pass@{k}"] * 100.0, "group": pp["group"]}), run)
    if metric not in LENS_METRICS:
        metric_mode(metric)  # raises, naming the valid metrics
        raise LensError(f"{metric} needs a solo and a handoff run; use tax_values(solo, handoff, K)")
    per_sample, _ = sample_values(run, metric, exclude_truncated)
    g = per_sample.groupby(PROBLEM_KEY, sort=True)
    return _with_contents(pd.DataFrame({"value": g["value"].mean(), "group": g["group"].first()}), run)


def _with_contents(values: pd.DataFrame, run: Run) -> pd.DataFrame:
    """Per-problem values with each problem's content id (column `content`), which pairing checks."""
    return values.assign(content=run.contents().reindex(values.index).fillna("").to_numpy())


def sample_values(run: Run, metric: str, exclude_truncated: bool = False) -> tuple[pd.DataFrame, str]:
    """Per-sample values of a lens metric (rows with a value): (frame of benchmark, problem_id, group,
    value; the source column). metric "kl" is the first drift estimator the table holds (exact first).
    Raises LensError when the run has no such table or column."""
    if metric == "kl":
        df = run.side_table("drift")
        have = [] if df is None else [m for m in DRIFT_ORDER if m in df.columns and df[m].notna().any()]
        metric = have[0] if have else "kl_exact"
    if metric not in LENS_METRICS:
        raise LensError(f"{metric!r} is not a lens metric; valid: {', '.join(LENS_METRICS)}")
    name, column = LENS_METRICS[metric]
    df = run.side_table(name)
    if df is None:
        if not run.parts:
            lens_file(run.path, name, run.junior or None)  # raises the LensError that names the fix
        raise LensError(f"{run.path} has no {name} output; run `tandem-eval {name} --run RUN --junior PATH` first")
    if exclude_truncated and "truncated" in df.columns:
        df = df[~df["truncated"].astype(bool)]
    source = column
    if column == "junior_nll_mean" and not (column in df.columns and df[column].notna().any()):
        if {"junior_nll_sum", "n_tokens"} <= set(df.columns):  # older legibility tables: a sum per CoT
            source = "junior_nll_sum/n_tokens"
            df = df.assign(junior_nll_mean=df["junior_nll_sum"] / df["n_tokens"].replace(0, np.nan))
    if column not in df.columns:
        raise LensError(f"{run.path}: its {name} table has no {column} column; rerun `tandem-eval {name}`")
    if metric == "junior_nll" and "vocab_match" in df.columns and not df["vocab_match"].astype(bool).all():
        # nats per token of another tokenizer: not the unit of a same-vocabulary junior's NLL
        raise LensError(
            f"{run.path}: its junior has another tokenizer, so its NLL is per junior token, not comparable with "
            "nats per shared token; use junior_bpb (bits per byte) for juniors with different vocabularies"
        )
    out = df[[*PROBLEM_KEY, "group"]].assign(value=pd.to_numeric(df[column], errors="coerce"))
    return out.dropna(subset=["value"]), source


def tax_values(solo: Run, handoff: Run, k: int) -> pd.DataFrame:
    """Per-problem communication tax solo - handoff pass@k (points), on the problems both runs hold."""
    a, b = problem_values(solo, f"pass@{k}"), problem_values(handoff, f"pass@{k}")
    both = a.index.intersection(b.index)
    return pd.DataFrame({"value": a["value"][both] - b["value"][both], "group": a["group"][both]})


# ---- identity: which runs may be paired ---------------------------------------------------------------
def recorded_solo(handoff: Run) -> str | None:
    """The solo run folder a handoff run names: metrics.json's (the run its tax was computed from; a merged
    run's), else config.json's record; None for a handoff from before the record."""
    return handoff.metrics().get("solo_run") or (handoff.solo_record or {}).get("path")


def measured_solo_path(handoff: Run) -> Path | None:
    """Where the solo run a handoff run's tax was measured against is on this machine: the folder its
    metrics.json records (the run the tax was computed from; a merged run's), else its config.json's
    record, else its sibling OUT/solo (the `handoff` command's layout, in a results folder moved since it
    ran); None when none of them holds a config.json. Which run it is, is then checked by fingerprint
    (pairing_problem "measured"), so a sibling that is another experiment is refused there."""
    for cand in (recorded_solo(handoff), handoff.path.parent / "solo"):
        if cand and (Path(cand) / "config.json").exists():
            return Path(cand).resolve()
    return None


# Settings that may differ between one arm's runs on different benchmarks (read as one run).
_PER_BENCHMARK = ("benchmarks", "inputs", "limit", "group", "ks", "label")


def pairing_problem(a: Run, b: Run, how: str) -> str | None:
    """THE identity rule of every reader that puts two runs side by side: why `a` and `b` may not be
    paired `how`, or None. Answered from what the runs recorded (fingerprints, settings, problem
    contents), never from labels, folder names or row positions.

    how="measured": `b` is the solo run whose tax handoff `a` measured: its fingerprint is the one `a`
      recorded (config.json "solo_run"); a joined arm (Run.parts) must hold that run among its parts.
      (the report's arms, view's columns, compare's tax@K; a handoff from before the record: not checked)
    how="joined": one senior's runs on different benchmarks, read as one arm: the same settings but the
      benchmarks they read (not two token budgets, seeds or checkpoints under one label)
    how="compared": the problems both hold by id are the same problems: one text and gold answer in both
      runs (compare, the report's problem sets, view's columns)."""
    if how == "measured":
        want = (a.solo_record or {}).get("fingerprint")
        recorded = recorded_solo(a)
        if want is None and recorded and (Path(recorded) / "config.json").exists():  # a merged run's metrics only
            want = RunFolder(recorded).config().get("fingerprint")
        have = [p.fingerprint for p in (b.parts or (b,))]
        if want is None or want in have:
            return None
        return (
            f"{a.path} was measured against the solo run {recorded} (fingerprint {want}), not "
            f"{b.path} (fingerprint {', '.join(str(h) for h in have)}: another experiment)"
        )
    if how == "joined":
        strip = lambda r: {k: v for k, v in r.config.items() if k not in _PER_BENCHMARK}  # noqa: E731
        if fingerprint_of(strip(a)) == fingerprint_of(strip(b)):
            return None
        return f"{a.path} and {b.path} differ in {config_diff(strip(a), strip(b))}"
    if how == "compared":
        ca, cb = a.contents(), b.contents()
        shared = ca.index.intersection(cb.index)
        differ = [k for k in shared if ca[k] and cb[k] and ca[k] != cb[k]]
        if not differ:
            return None
        return (
            f"{len(differ)} of the {len(shared)} problem ids {a.path} and {b.path} share hold other problems in each "
            f"(e.g. {'/'.join(map(str, differ[0]))}: another text or answer; files of one name with other rows)"
        )
    raise ValueError(f"unknown pairing {how!r}; valid: measured, joined, compared")


def differing_contents(a: pd.DataFrame, b: pd.DataFrame) -> pd.Index:
    """Problem ids two runs' per-problem values (problem_values) share whose contents differ: the
    same id naming two problems, which pairing treats as problems of one run only."""
    shared = a.index.intersection(b.index)
    if "content" not in a or "content" not in b:
        return shared[:0]
    ca, cb = a["content"].reindex(shared), b["content"].reindex(shared)
    return shared[(ca != cb) & (ca != "") & (cb != "")]


def recorded_juniors(run: Run) -> dict[str, dict]:
    """{lens label: {"path", "content"}}: the junior checkpoint each of `run`'s lens outputs was scored
    by, as metrics.json recorded it (path and content None where it did not)."""
    metrics = run.metrics()
    lens = cast(dict, metrics["lens"]) if isinstance(metrics.get("lens"), dict) else {}  # cast: checked a dict
    out = {}
    for label in run.lens_juniors():
        kinds = lens.get(label) if label else {k: metrics.get(k) for k in ("legibility", "drift")}
        entry = next((e for e in (kinds or {}).values() if isinstance(e, dict) and e.get("junior")), {})
        out[label] = junior_id(entry.get("junior"), entry.get("junior_content"))
    return out


_BUNDLED = re.compile(r"/tandem_eval/toy/checkpoints/(.+?)/?$")


def junior_id(path: str | None, content: str | None = None) -> dict:
    """A junior checkpoint as pairing compares it: its folder resolved, a bundled one as `toy:NAME`
    wherever the package lives (runs record resolved folders), and its content hash."""
    from tandem_eval.models import ModelError, resolve_model

    if path and served_name(path) is None:  # a served junior's URL#NAME is compared as recorded
        try:
            path = str(resolve_model(path) if str(path).startswith("toy:") else Path(path).expanduser().resolve())
        except ModelError:
            path = str(path)
        bundled = _BUNDLED.search(path)
        path = f"toy:{bundled.group(1)}" if bundled else path
    return {"path": path, "content": content}


def lens_junior(run: Run) -> dict:
    """The junior whose lens outputs `run` shows: {"label", "path", "content"} (recorded_juniors)."""
    label = run.junior if run.junior is not None else next(iter(run.lens_juniors()), None)
    # no label (None: no lens output) finds no entry, hence the default
    return {"label": run.junior_name(), **recorded_juniors(run).get(label, junior_id(None))}  # type: ignore[arg-type]


def same_junior(a: dict, b: dict) -> bool:
    """Two lens juniors (lens_junior) are one checkpoint: equal content hashes where both recorded one,
    else the same checkpoint folder."""
    if a.get("content") and b.get("content"):
        return a["content"] == b["content"]
    return a.get("path") is not None and a.get("path") == b.get("path")


def find_run(path: str | Path, mode: str) -> Run:
    """PATH itself if it is a run folder (verified; of `mode`), else the one complete run of `mode` under it."""
    path = Path(path)
    if (path / "config.json").exists():
        run = Run.load(verify_run(path).path)
        if run.mode != mode:
            raise LensError(f"{path} is a {run.mode} run but the metric needs a {mode} run; pass that run's folder")
        return run
    if not path.is_dir():
        raise RunFolderError(f"{path} does not exist; pass a run folder (or a folder holding one {mode} run)")
    cands = [rf for rf in run_folders(path) if rf.config()["config"]["mode"] == mode]
    if len(cands) != 1:
        names = ", ".join(str(rf.path) for rf in cands) or "none"
        raise LensError(f"{path} holds {len(cands)} {mode} runs ({names}); pass exactly one run folder")
    return Run.load(verify_run(cands[0].path).path)


def runs_in(path: str | Path) -> list[Run]:
    """The run folder at `path`, or every run folder below it (a handoff --out, a results folder)."""
    path = Path(path)
    if not path.exists():
        raise ReportError(f"{path} does not exist; pass a run folder written by `tandem-eval solo/handoff`")
    if (path / "config.json").exists():
        return [Run.load(path)]
    runs = [Run.load(rf.path) for rf in run_folders(path)]
    if not runs:
        raise ReportError(
            f"{path} holds no run folder (no config.json below it); pass a folder written by `tandem-eval solo/handoff`"
        )
    return runs


def run_tokenizer(cfg: dict, override: str | Path | None = None):
    """A run's tokenizer vocabulary (override, else the senior's, else the junior's checkpoint), or None
    with a warning when none loads (an explicit override that fails raises ReportError). Recorded names
    go through models.recorded_checkpoint (toy:NAME, and a path from another machine found in this
    install); only tokenizer files are read, with models.load_vocabulary (no transformers, no torch)."""
    from tandem_eval.models import ModelError, load_vocabulary, recorded_checkpoint

    # a served model's tokenizer is the folder the run recorded for it (its path names a server)
    specs = [cfg.get(r) or {} for r in ("senior", "junior")]
    candidates = [override] if override else [s.get("tokenizer") or s.get("path") for s in specs]
    errors = []
    for c in filter(None, candidates):
        try:
            return load_vocabulary(recorded_checkpoint(c))
        except ModelError as e:
            errors.append(f"{c}: {e}")
    if override:
        raise ReportError(f"cannot load the tokenizer {override}: {'; '.join(errors)}")
    warnings.warn(
        "no tokenizer for token boundaries ("
        + "; ".join(errors or ["none recorded"])
        + "); showing plain text. Pass a tokenizer folder: `--tokenizer PATH` (view), run_tokenizer(cfg, PATH)",
        stacklevel=2,
    )
    return None
