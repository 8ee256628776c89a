"""Peak memory of a self-paired handoff (junior = the senior's own checkpoint) against solo, HF engine.

A self-paired junior shares the senior's loaded model (models.shares_senior_model): one set of
weights, two engines with their own KV rows. Each command runs as its own `tandem-eval` process on
a random checkpoint of SmolLM2-135M's shape (bench_cogen.save_135m_senior); its peak RSS is the
child's ru_maxrss (os.wait4). The target: self-paired handoff <= 1.3x solo.

    python benchmarks/bench_self_paired_rss.py [--work /tmp/rss] [--tokens 16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cogen import save_135m_senior  # noqa: E402


def peak_rss_mb(argv: list[str]) -> float:
    """Peak resident memory (MiB) of one child process running argv (which must succeed)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path(tempfile.mkdtemp(prefix="rss-")))
    ap.add_argument("--tokens", type=int, default=16, help="--max-new-tokens of each run")
    args = ap.parse_args()
    ckpt = save_135m_senior(args.work)
    common = ["--limit", "1", "--n", "1", "--k", "1", "--max-new-tokens", str(args.tokens), "-q"]
    cli = [sys.executable, "-m", "tandem_eval.cli"]
    solo = peak_rss_mb([*cli, "solo", "--senior", str(ckpt), "--out", str(args.work / "solo"), *common])
    pair = peak_rss_mb(
        [*cli, "handoff", "--senior", str(ckpt), "--junior", str(ckpt), "--out", str(args.work / "pair"), *common]
    )
    print(f"peak RSS: solo {solo:.0f} MiB, self-paired handoff {pair:.0f} MiB ({pair / solo:.2f}x solo)")


if __name__ == "__main__":
    main()
