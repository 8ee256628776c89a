"""Finding run folders and grouping them into arms: the data layer of reports, notebooks and analyses.

    from tandem_eval.report.collect import collect, find_results
    col = collect([find_results("toy")])         # every run folder and trainer log under results/toy
    col.arms                                       # ["base", "grpo", "tandem"] (sorted labels)
    col.solo("tandem").samples()                   # the sample table of tandem's solo run
    col.handoff("tandem", "paragraph").per_problem([1, 4])

An arm is one senior, named by its run's `label` (`--label` when the run was made, else the senior
checkpoint's folder name; `collect(..., labels={RUN: NAME})` relabels without touching folders).
Each arm has at most one solo run and one run per handoff schedule; two runs with one label are
joined when they cover different benchmarks. A handoff made with `--solo-run` brings that solo run
into its arm. Lens outputs (legibility, drift) are read for one junior per solo run (`Run.junior`,
chosen by `Collection.pick_juniors`). Run folders below a folder
holding a trainer log (`train_log.jsonl`) are that training's periodic evaluations: they feed the
training-dynamics figure (by step), not the tables. Nothing here loads a model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pandas as pd

from tandem_eval.files import read_regular
from tandem_eval.paths import folder_name
from tandem_eval.run.results import RunFolder
from tandem_eval.run.runs import (
    ReportError,
    Run,
    disambiguate_labels,
    junior_id,
    measured_solo_path,
    pairing_problem,
    recorded_juniors,
    recorded_solo,
    run_folders,
    same_junior,
    split_seed,
)

TRAIN_LOG = "train_log.jsonl"
_STEP_RE = re.compile(r"(?:step|checkpoint|ckpt)[-_]?(\d+)", re.IGNORECASE)


@dataclass
class TrainLog:
    """One training's per-step log and its periodic evaluation runs."""

    arm: str
    path: Path
    log: pd.DataFrame
    evals: list[Run]


@dataclass
class Collection:
    runs: list[Run]
    trainings: list[TrainLog]
    junior: str | None = None  # preferred junior label for lens outputs (report --junior)
    _juniors: dict | None = field(default=None, repr=False)
    # the report's arm -> color map (style module docstring): made once from every label of the whole
    # collection; a problem-set sub-collection asks its `parent`, so every figure of a report agrees
    colors: dict[str, str] = field(default_factory=dict, repr=False)
    parent: Collection | None = field(default=None, repr=False)

    def palette(self) -> dict[str, str]:
        """The report's colors (made on first use): every run label, training arm and training
        evaluation's label, with and without its seed suffix (by_seed figures draw runs, others arms)."""
        if self.parent is not None:
            return self.parent.palette()
        if not self.colors:
            from tandem_eval.report import style  # matplotlib: only once a figure is drawn

            labels = {r.label for r in self.runs} | {t.arm for t in self.trainings}
            labels |= {e.label for t in self.trainings for e in t.evals}
            labels |= {split_seed(label)[0] for label in labels}
            self.colors.update(style.arm_colors(labels))
        return self.colors

    def pick_juniors_once(self) -> dict[str, str]:
        """pick_juniors(self.junior) on first use; {arm: junior name} afterwards."""
        if self._juniors is None:
            self._juniors = self.pick_juniors(self.junior)
        return self._juniors

    @property
    def arms(self) -> list[str]:
        return sorted({r.label for r in self.runs})

    def _find(self, arm: str, mode: str, schedule: str | None = None) -> Run | None:
        for r in self.runs:
            if r.label == arm and r.mode == mode and (schedule is None or r.schedule == schedule):
                return r
        return None

    def solo(self, arm: str) -> Run | None:
        return self._find(arm, "solo")

    def handoff(self, arm: str, schedule: str) -> Run | None:
        return self._find(arm, "handoff", schedule)

    def handoff_schedules(self) -> list[str]:
        """Handoff schedules other than takeover:N (those make the dose curve), sorted."""
        return sorted({r.schedule for r in self.runs if r.mode == "handoff" and not is_takeover(r.schedule)})

    def primary_schedule(self) -> str | None:
        """The schedule of the main table: the paper's `paragraph` when present, else the first."""
        schedules = self.handoff_schedules()
        return "paragraph" if "paragraph" in schedules else (schedules[0] if schedules else None)

    def takeover_runs(self) -> dict[str, dict[int, Run]]:
        """arm -> {N: run} for runs with schedule takeover:N."""
        out: dict[str, dict[int, Run]] = {}
        for r in self.runs:
            if r.mode == "handoff" and is_takeover(r.schedule):
                out.setdefault(r.label, {})[int(r.schedule.split(":")[1])] = r
        return {a: dict(sorted(v.items())) for a, v in sorted(out.items())}

    def common_ks(self) -> list[int]:
        sets = [set(r.ks) for r in self.runs]
        return sorted(set.intersection(*sets)) if sets else []

    def pick_juniors(self, junior: str | None = None) -> dict[str, str]:
        """Choose whose lens outputs each solo run shows: `junior` where the run has it, else its only
        junior, else the junior of the arm's handoff runs, else the first by name (with a warning).
        Returns {arm: junior display name} for arms with lens outputs. A `junior` no run holds is refused
        (a mistyped label would otherwise show another junior's outputs without a word)."""
        if junior is not None:
            held = sorted({j for r in self.runs if r.mode == "solo" for j in r.lens_juniors()})
            if junior not in held:
                raise ReportError(
                    f"--junior {junior!r}: no run here holds lens outputs of that junior; "
                    + (f"the runs hold {', '.join(map(repr, held))}" if held else "none holds lens outputs")
                    + " (pass one of those labels, or drop --junior)"
                )
        out = {}
        for r in self.runs:
            have = r.lens_juniors()
            if r.mode != "solo" or not have:
                continue
            # the junior of the arm's handoff runs, matched by checkpoint (and content), never by folder name
            recorded = recorded_juniors(r)
            handoff_juniors = {
                j
                for h in self.runs
                if h.label == r.label and h.mode == "handoff" and (h.config.get("junior") or {}).get("path")
                for j in have
                if same_junior(recorded[j], junior_id(h.config["junior"]["path"], h.config["junior"].get("content")))
            }
            if junior is not None and junior in have:
                r.junior = junior
            elif len(have) == 1:
                r.junior = have[0]
            elif len(handoff_juniors & set(have)) == 1:
                r.junior = next(iter(handoff_juniors & set(have)))
            else:
                r.junior = have[0]
                warnings.warn(
                    f"{r.label}: lens outputs of juniors {have} in {r.path}; showing {have[0]!r} (pass --junior LABEL)",
                    stacklevel=2,
                )
            _check_lens_junior(r, recorded.get(r.junior), self.runs)
            # the run's cache keys lens tables by kind, not junior: it may hold another junior's table
            r._pp.clear()
            for part in r.parts:
                part.junior = r.junior if r.junior in part.lens_juniors() else None
                part._pp.clear()
            out[r.label] = cast(str, r.junior_name())  # cast: a run with a chosen junior has its name
        return out


def _check_lens_junior(solo, scored: dict | None, runs) -> None:
    """Refuse a row that would pair `solo`'s lens outputs (scored by the junior `scored`) with a handoff
    of its arm whose junior has the same folder but other content (weights replaced between the two
    commands): the legibility shown would not be the handoff's junior's."""
    if not scored or not scored.get("content"):
        return
    for h in runs:
        spec = h.config.get("junior") or {}
        if h.label != solo.label or h.mode != "handoff" or not spec.get("content"):
            continue
        theirs = junior_id(spec.get("path"), spec.get("content"))
        if theirs["path"] == scored["path"] and theirs["content"] != scored["content"]:
            raise ReportError(
                f"{solo.path}: its lens outputs ({solo.junior!r}) were scored by junior {scored['path']} with "
                f"content sha256 {scored['content'][:12]}, but {h.path} ran that folder with content "
                f"{theirs['content'][:12]} (its weights were replaced in between); rescore with the handoff's "
                "junior (tandem-eval legibility --run ...) or report the runs separately"
            )


@dataclass
class ProblemSet:
    """Runs that read the same problems (by content): one table and one figure set of a report.
    `name` is a folder name; `title` says what the table compares (and, intersected, what was dropped)."""

    name: str
    title: str | None
    col: Collection


def problem_sets(col: Collection, intersect: bool = False) -> list[ProblemSet]:
    """The report's comparable groups. Arms are grouped by the problems they hold, by content (an
    arm's solo run, else its first run: runs.Run.problem_set), so no table averages or bolds over
    different problems. With `intersect`, one group instead: every run restricted to the problems
    all of them hold, its title naming what was dropped. One problem set: the collection as it is."""
    arms: dict[str, frozenset] = {}
    for label in col.arms:
        run = col.solo(label) or next(r for r in col.runs if r.label == label)
        arms[label] = run.problem_set()
    # frozensets do not sort (`<` is "subset of"): ordered by their members, so the sets' folders and tables
    # come out in one order on every run
    sets = sorted(set(arms.values()), key=lambda ps: sorted(ps))
    if len(sets) <= 1:
        return [ProblemSet("", None, col)]
    union = frozenset().union(*sets)
    if intersect:
        common = frozenset.intersection(*sets)
        if not common:
            raise ReportError(
                f"the runs share no problem ({len(union)} in all, in {len(sets)} problem sets); drop --intersect to "
                "get one table per problem set"
            )
        keys = {(b, p) for b, p, _ in common}
        runs = [r.restrict(keys) for r in col.runs]
        dropped = sorted({b for b, _, _ in union - common})
        title = (
            f"Problems every run holds: {len(common)} of {len(union)} (--intersect dropped {len(union) - len(common)} "
            f"held by only some runs, from {', '.join(dropped)})"
        )
        return [ProblemSet("", title, Collection(runs, col.trainings, col.junior, parent=col))]
    names = _set_names({ps: [a for a, s in arms.items() if s == ps] for ps in sets})
    groups = []
    for ps in sets:
        labels = {a for a, s in arms.items() if s == ps}
        runs = [r for r in col.runs if r.label in labels]
        arm_names = {r.arm for r in runs}
        trainings = [t for t in col.trainings if t.arm in arm_names or t.arm in labels]
        benches = sorted({b for b, _, _ in ps})
        count = f"{len(ps)} problem{'s' if len(ps) != 1 else ''}"
        title = f"Problem set {names[ps]}: {count} ({', '.join(benches)}); arms {', '.join(sorted(arm_names))}"
        groups.append(ProblemSet(names[ps], title, Collection(runs, trainings, col.junior, parent=col)))
    return groups


def _set_names(arms_of: dict[frozenset, list[str]]) -> dict[frozenset, str]:
    """A folder name per problem set: the arms' shared label prefix (`emergent` of `emergent/grpo/s0`)
    where that tells the sets apart, else the benchmarks and a short hash of the problems."""
    prefixes = {ps: {a.split("/")[0] for a in arms if "/" in a} for ps, arms in arms_of.items()}
    if all(len(p) == 1 for p in prefixes.values()) and len({next(iter(p)) for p in prefixes.values()}) == len(arms_of):
        return {ps: folder_name(next(iter(p))) for ps, p in prefixes.items()}
    out = {}
    for ps in arms_of:
        digest = hashlib.sha256(json.dumps(sorted(ps)).encode()).hexdigest()[:8]
        out[ps] = folder_name(f"{'+'.join(sorted({b for b, _, _ in ps}))}-{digest}")
    return out


def is_takeover(schedule: str) -> bool:
    return schedule.startswith("takeover:") and schedule.split(":")[1].isdigit()


def _step_of(run: Run, train_dir: Path) -> int | None:
    if run.step is not None:
        return run.step
    rel = run.path.relative_to(train_dir).as_posix()
    senior = str((run.config.get("senior") or {}).get("path", ""))
    for text in (rel, senior):
        m = _STEP_RE.findall(text)
        if m:
            return int(m[-1])
    return None


def _train_arm(train_dir: Path, log: pd.DataFrame) -> str:
    from tandem_eval.models import metadata

    arm = metadata(train_dir).get("arm")  # a checked tandem_meta.json (a regular file holding an object)
    if arm:
        return str(arm)
    if "arm" in log.columns and log["arm"].notna().any():
        return str(log["arm"].dropna().iloc[0])
    return train_dir.name


def read_train_log(path: str | Path) -> pd.DataFrame:
    """A trainer's JSON-lines log as a frame sorted by step (non-JSON lines are skipped)."""
    rows = []
    fix = "restore the trainer's log, or move it away"
    for line in read_regular(path, fix, error=ReportError).decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                # the trainer appends a line per step: a log read while it trains may end in a half-written one
                continue
    df = pd.DataFrame(rows)
    if "step" in df.columns:
        df = df.sort_values("step", kind="stable").reset_index(drop=True)
    return df


def collect(
    inputs, include_incomplete: bool = False, labels: dict | None = None, junior: str | None = None
) -> Collection:
    """Run folders (or folders holding them) -> a Collection of arms' runs and training logs.
    labels: {run folder (or a folder above runs, or a current label): new label}."""
    inputs = [Path(p) for p in ([inputs] if isinstance(inputs, (str, Path)) else inputs)]
    if not inputs:
        raise ReportError("no inputs: pass run folders or a results folder")
    paths: list[Path] = []
    train_dirs: list[Path] = []
    for p in inputs:
        if not p.exists():
            raise ReportError(f"{p} does not exist")
        if (p / "config.json").exists():
            paths.append(p)
        paths += [rf.path for rf in run_folders(p)]  # a merged run once, not again as its shard-* parts
        train_dirs += sorted(t.parent for t in p.rglob(TRAIN_LOG))
    # a run reached from two inputs (its folder and a folder above it) is read once
    paths = sorted({q.resolve() for q in paths})
    train_dirs = sorted({t.resolve() for t in train_dirs})
    runs: list[Run] = []
    evals: dict[Path, list[Run]] = {t: [] for t in train_dirs}
    for path in paths:
        if not include_incomplete and not RunFolder(path).is_complete():
            warnings.warn(f"skipping incomplete run {path} (no COMPLETE marker)", stacklevel=2)
            continue
        owner = next((t for t in train_dirs if t in path.parents), None)
        run = Run.load(path)
        if owner is None:
            runs.append(run)
        else:
            run.step = _step_of(run, owner)
            if run.step is None:
                warnings.warn(
                    f"{path} is below the training folder {owner} but names no step "
                    '(step-N / checkpoint-N in its path, or "step" in config.json); ignored',
                    stacklevel=2,
                )
            else:
                evals[owner].append(run)
    trainings = []
    for t in train_dirs:
        log = read_train_log(t / TRAIN_LOG)
        arm = _train_arm(t, log)
        for r in evals[t]:
            r.label = arm
        trainings.append(TrainLog(arm, t, log, sorted(evals[t], key=lambda r: (r.step, str(r.path)))))
    if not runs and not trainings:
        raise ReportError(f"no run folders or trainer logs under {', '.join(map(str, inputs))}")
    disambiguate_labels(runs)
    relabel(runs, labels or {})
    col = Collection(_attach_solo_runs(_dedupe(runs)), trainings, junior)
    col.pick_juniors_once()
    return col


def parse_labels(items) -> dict[str, str]:
    """["RUN=NAME", ...] (the report's --label) -> {RUN: NAME}."""
    out = {}
    for item in items or []:
        # at the last '=': a run folder's path may contain one (a NAME then cannot)
        run, sep, name = str(item).rpartition("=")
        if not sep or not run or not name.strip():
            raise ReportError(f"--label {item!r}: expected RUN=NAME (a run folder or a current label, then the name)")
        out[run] = name.strip()
    return out


def relabel(runs: list[Run], labels: dict[str, str]) -> None:
    """Apply {RUN: NAME}: RUN is a run folder, a folder above run folders, or a label runs have now. A
    label names a senior: a handoff run and the solo run it was measured against stay one row, so where
    --label names only one of the two, the other follows (_follow_solo_pairs)."""
    named: dict[int, str] = {}  # id(run) -> the --label that renamed it
    for key, name in labels.items():
        where = Path(key).expanduser().resolve() if Path(key).expanduser().exists() else None
        hit = [
            r for r in runs if (where is not None and (r.path == where or where in r.path.parents)) or r.label == key
        ]
        if not hit:
            raise ReportError(
                f"--label {key}={name}: no run folder or label {key!r} among the inputs "
                f"(labels: {', '.join(sorted({r.label for r in runs}))})"
            )
        for r in hit:
            r.label = name
            named[id(r)] = f"{key}={name}"
    _follow_solo_pairs(runs, named)


def _follow_solo_pairs(runs: list[Run], named: dict[int, str]) -> None:
    """After --label: a handoff run and the solo run it was measured against (runs.measured_solo_path),
    both among `runs`, take the label --label gave either of them; --label giving them two names is refused
    (the tax needs both in one row). Runs --label did not touch keep theirs."""
    if not named:  # no --label: nothing to follow (and no handoff's records to read again)
        return
    solos = {r.path.resolve(): r for r in runs if r.mode == "solo"}
    for h in runs:
        path = measured_solo_path(h) if h.mode == "handoff" else None
        solo = solos.get(path) if path is not None else None
        if solo is None or solo.label == h.label or (id(h) not in named and id(solo) not in named):
            continue
        if id(h) in named and id(solo) in named:
            raise ReportError(
                f"--label {named[id(solo)]} and --label {named[id(h)]} give the solo run {solo.path} and the "
                f"handoff run {h.path} measured against it two names; they are one senior's row (its tax needs "
                f"both): give them one name, e.g. --label {h.path.parent}=NAME"
            )
        if id(solo) in named:
            h.label = solo.label
        else:
            solo.label = h.label


def _attach_solo_runs(runs: list[Run]) -> list[Run]:
    """A handoff is paired with the solo run it was measured against (recorded in its config.json
    and metrics.json), never with another that merely shares its label: an arm whose solo run is
    not the recorded one is refused (runs.pairing_problem); an arm with handoff runs but no solo run
    gets the recorded one (e.g. `--solo-run`) when it is still that run, so its solo and tax show."""
    check_pairs(runs)
    solos = {r.label: r for r in runs if r.mode == "solo"}
    extra = {}
    for r in runs:
        if r.mode != "handoff" or r.label in solos or r.label in extra:
            continue
        path = measured_solo_path(r)  # the recorded folder, else the sibling OUT/solo of a moved results folder
        if path is None or not RunFolder(path).is_complete():
            recorded = recorded_solo(r)
            if path is not None or recorded:
                warnings.warn(
                    f"{r.label}: the solo run {path or recorded} its handoff was measured against is "
                    f"{'incomplete' if path else 'missing (and no sibling solo/)'}: no solo or tax shown",
                    stacklevel=2,
                )
            continue
        solo = Run.load(path)
        solo.label = r.label
        if reason := pairing_problem(r, solo, "measured"):  # regenerated at the recorded path since
            raise ReportError(f"{reason}; restore that solo run, or rerun the handoff against this one")
        extra[r.label] = solo
    return sorted(runs + list(extra.values()), key=lambda r: (r.label, r.mode, r.schedule))


def check_pairs(runs: list[Run]) -> None:
    """Every handoff among `runs` beside a solo run of its label (one arm, one row, one view column)
    was measured against that solo run (runs.pairing_problem "measured"); else ReportError naming both."""
    solos: dict[str, list[Run]] = {}
    for r in runs:
        if r.mode == "solo":
            solos.setdefault(r.label, []).append(r)
    for r in runs:
        for solo in solos.get(r.label, []) if r.mode == "handoff" else []:
            if reason := pairing_problem(r, solo, "measured"):
                raise ReportError(
                    f"{reason}; pass the recorded solo run, or label the runs apart (`report --label RUN=NAME`)"
                )


def _dedupe(runs: list[Run]) -> list[Run]:
    """One run per (arm, mode, schedule). Copies of one experiment (same fingerprint, e.g. the
    solo/ folder each `handoff` command writes) collapse to the first; runs on different
    benchmarks join into one (Run.parts); different runs on shared benchmarks refuse."""
    seen: dict[tuple, list[Run]] = {}
    # by path, so which copy counts as the first does not depend on the order of the inputs
    for r in sorted(runs, key=lambda r: str(r.path)):
        key = (r.label, r.mode, r.schedule)
        same = seen.setdefault(key, [])
        if any(o.fingerprint == r.fingerprint and r.fingerprint is not None for o in same):
            continue
        benches = set(r.samples()["benchmark"]) if same else set()
        clash = next((o for o in same if benches & set(o.samples()["benchmark"])), None)
        other = next((reason for o in same if (reason := pairing_problem(o, r, "joined"))), None)
        if clash is None and other is not None:  # one label, two experiments: never one row
            raise ReportError(
                f"two {r.mode} runs ({r.schedule}) are both labelled {r.label!r} but are different experiments: "
                f"{other}; give them distinct labels (`--label` when running, or `report --label RUN=NAME`)"
            )
        if clash is not None:
            raise ReportError(
                f"two different {r.mode} runs ({r.schedule}) are both labelled {r.label!r} and share benchmarks "
                f"{sorted(benches & set(clash.samples()['benchmark']))}: {clash.path} and {r.path}; give them "
                "distinct labels (`--label` when running, or `report --label RUN=NAME`) or pass only one of them"
            )
        same.append(r)
    out = []
    for same in seen.values():
        if len(same) == 1:
            out.append(same[0])
        else:  # one senior's runs on different benchmarks: one arm, read as one run
            first = same[0]
            ks = tuple(sorted(set.intersection(*(set(r.ks) for r in same))))
            # only the ks every part has; no fingerprint: the joined run is no one experiment, so no run is its copy
            out.append(dataclasses.replace(first, ks=ks, fingerprint=None, parts=tuple(same), _pp={}))
    return sorted(out, key=lambda r: (r.label, r.mode, r.schedule))
