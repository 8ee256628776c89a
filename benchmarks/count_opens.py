"""How often one command opens the files it reads: run-folder files (under --out) and the benchmark file,
counted with strace for `tandem-eval handoff` (the bundled toy pair, the tiny benchmark, --n 1 --limit 2),
the same command again (both runs complete: reused), and `tandem-eval legibility --run OUT/solo`.

Counts are of successful open/openat calls, so they are the same on any machine for the same code; they
say how often a command re-reads what it has already read (issue 41: "each question answered once").
`--base REV` counts the same commands on the tree at git revision REV too (a temporary worktree), side
by side. Needs strace (Debian: apt install strace).

    python benchmarks/count_opens.py                  # this tree
    python benchmarks/count_opens.py --base ed6c075   # and the tree at ed6c075
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK_FILE = "tiny_math.jsonl"  # what --benchmark tiny reads
COMMANDS = {
    "handoff": ["handoff", "--benchmark", "tiny", "--n", "1", "--limit", "2", "--out", "out", "-q"],
    "rerun": ["handoff", "--benchmark", "tiny", "--n", "1", "--limit", "2", "--out", "out", "-q"],
    "legibility": ["legibility", "--run", "out/solo", "-q"],
}
OPENED = re.compile(r'open(?:at)?\((?:AT_FDCWD, )?"([^"]+)".*\) = \d+$')  # a successful open and its path


def count(tree: Path) -> dict[str, collections.Counter]:
    """{command: Counter({path opened: times})} for the commands run in order, on the code at `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out: dict[str, collections.Counter] = {}
    with tempfile.TemporaryDirectory() as work:
        for name, args in COMMANDS.items():
            trace = Path(work) / f"trace.{name}"
            # -ff: one file per thread, so no call is split across lines by another thread's
            cmd = ["strace", "-ff", "-qq", "-e", "trace=open,openat", "-o", str(trace), sys.executable]
            done = subprocess.run([*cmd, "-m", "tandem_eval.cli", *args], cwd=work, env=env, capture_output=True)
            if done.returncode:
                raise SystemExit(f"{name} failed on {tree}: {done.stderr.decode()[-2000:]}")
            lines = [line for f in Path(work).glob(f"trace.{name}.*") for line in f.read_text().splitlines()]
            paths = (m.group(1) for line in lines if (m := OPENED.search(line)))
            out[name] = collections.Counter(p for p in paths if p.startswith("out/") or p.endswith(BENCHMARK_FILE))
    return out


def _row(counts: collections.Counter) -> tuple[int, int]:
    """(opens of run-folder files, opens of the benchmark file)."""
    bench = sum(n for p, n in counts.items() if p.endswith(BENCHMARK_FILE))
    return sum(counts.values()) - bench, bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="a git revision to count side by side (checked out in a temporary worktree)")
    ap.add_argument("--files", action="store_true", help="list each run-folder file and its opens, per command")
    args = ap.parse_args()
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed; install it (Debian: apt install strace) and rerun")
    trees = {"this tree": ROOT}
    base_dir = None
    if args.base:
        base_dir = Path(tempfile.mkdtemp()) / "base"
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "add", "-q", "--detach", str(base_dir), args.base], check=True)
        trees = {args.base: base_dir, **trees}
    try:
        results = {label: count(tree) for label, tree in trees.items()}
    finally:
        if base_dir is not None:
            subprocess.run([*git, "remove", "--force", str(base_dir)], check=False)
    print("| command | " + " | ".join(f"{label}: run-folder / benchmark opens" for label in results) + " |")
    print("|---|" + "---:|" * len(results))
    for name in COMMANDS:
        cells = [" / ".join(map(str, _row(r[name]))) for r in results.values()]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.files:
        for label, r in results.items():
            for name, counts in r.items():
                print(f"\n{label}, {name}:")
                for path, n in counts.most_common():
                    print(f"  {n:3d}  {path}")


if __name__ == "__main__":
    main()
