"""Start-up of the commands that load no model, as a ratio to `python -c "import pandas"` (their floor:
every one reads run folders with pandas), measured side by side in one run.

    .venv/bin/python benchmarks/bench_startup.py                    # ~2 min on 2 busy CPU cores
    .venv/bin/python benchmarks/bench_startup.py --repeats 5 --run results/toy/jargon/tandem/seed0

Each repeat runs every command once, in turn (interleaved, so a load spike on a shared machine hits all
of them alike); a command's time is the median over repeats of its wall time as a fresh process. The
commands: `view RUN` (the trace page), `report --help`, `report RUN` (tables and figures of one small
run folder: a solo and a handoff run). Each also says whether torch, vLLM or transformers was imported
(issue 42: none of these commands may import them).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# runs the CLI as a console script would, then reports the heavy modules it imported on stderr's last line
PROBE = (
    "import runpy, sys\n"
    "sys.argv = ['tandem-eval', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('tandem_eval.cli', run_name='__main__')\n"
    "except SystemExit as e:\n    assert not e.code, e.code\n"
    "print('HEAVY=' + ','.join(m for m in ('torch', 'vllm', 'transformers') if m in sys.modules), file=sys.stderr)\n"
)


def _args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--run", type=Path, default=REPO / "results/toy/emergent/tandem/seed0", help="a small folder of run folders"
    )
    return ap.parse_args()


def timed(argv: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    heavy = next((line[6:] for line in reversed(proc.stderr.splitlines()) if line.startswith("HEAVY=")), "")
    return seconds, heavy


def main() -> None:
    args = _args()
    if not args.run.is_dir():
        raise SystemExit(f"error: {args.run} does not exist; pass --run FOLDER (a folder of run folders)")
    out = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    cli = [sys.executable, "-c", PROBE]
    commands = {
        "python -c 'import pandas'": [sys.executable, "-c", "import pandas"],
        "view RUN": [*cli, "view", str(args.run), "--out", str(out / "view.html")],
        "report --help": [*cli, "report", "--help"],
        "report RUN": [*cli, "report", str(args.run), "--out", str(out / "report")],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    heavy: dict[str, str] = {}
    for _ in range(args.repeats):
        for name, argv in commands.items():
            seconds, found = timed(argv)
            if argv[:3] == cli:  # the probed commands (the baseline runs bare)
                heavy[name] = found or "none"
            times[name].append(seconds)
    base = statistics.median(times["python -c 'import pandas'"])
    print(f"start-up, median of {args.repeats} interleaved runs (RUN = {args.run}):")
    print(f"{'command':28} {'median s':>9} {'x pandas':>9}  imports torch/vllm/transformers")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:28} {med:9.2f} {med / base:9.1f}  {heavy.get(name, '(not probed)')}")


if __name__ == "__main__":
    main()
