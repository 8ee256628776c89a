"""`make demo`: the whole evaluation on the bundled default, in a few minutes on a laptop CPU.

Runs, through the real CLI commands: solo + paragraph handoff (pass@k, communication tax), the
junior's legibility of the senior's solo CoTs, KL drift, and the report. The default pair is the
bundled toy world's tandem senior and its junior; when this install has no toy checkpoints, a tiny
random pair is built on the fly (its accuracy is ~0: it shows the pipeline, not a result).

    python -m tandem_eval.demo [--out runs/demo] [--n 4] [--limit 8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .cli import DEFAULT_SENIOR, app, console
from .models import junior_from_metadata, resolve_model, toy_names


def _pair(out: Path) -> tuple[str, str, str]:
    """(senior, junior, benchmark) for the demo."""
    if DEFAULT_SENIOR in toy_names():
        junior = junior_from_metadata(resolve_model(DEFAULT_SENIOR))
        bench = Path(__file__).resolve().parent / "toy" / "data" / "test.jsonl"
        return DEFAULT_SENIOR, junior, str(bench) if bench.exists() else "tiny"
    try:  # the test-model builder lives with the trainer (a source checkout has it; a wheel too)
        from trainer.tiny import build_tiny_pair
    except ImportError:
        raise SystemExit("no bundled toy checkpoints and no trainer package to build a tiny pair") from None

    console.print("[yellow]no bundled toy checkpoints: building a tiny random senior/junior pair[/]")
    senior, junior = build_tiny_pair(out / "models")
    return str(senior), str(junior), "tiny"


def _cli(args: list[str]) -> None:
    console.rule(" ".join(["tandem-eval", *args[:1]]))
    app(args, standalone_mode=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("runs/demo"))
    ap.add_argument("--n", type=int, default=4, help="samples per problem")
    ap.add_argument("--limit", type=int, default=50, help="problems")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    args = ap.parse_args()
    senior, junior, bench = _pair(args.out)
    common = [
        "--benchmark",
        bench,
        "--n",
        str(args.n),
        "--k",
        ",".join(str(k) for k in (1, 2, 4) if k <= args.n),
        "--limit",
        str(args.limit),
        "--max-new-tokens",
        str(args.max_new_tokens),
    ]
    _cli(["handoff", "--senior", senior, "--junior", junior, "--out", str(args.out), *common])
    solo = args.out / "solo"
    _cli(["legibility", "--senior", senior, "--junior", junior, "--run", str(solo)])
    _cli(["drift", "--senior", senior, "--junior", junior, "--run", str(solo)])
    _cli(["report", str(args.out), "--out", str(args.out / "report")])
    metrics = json.loads((solo / "metrics.json").read_text())
    console.rule("done")
    console.print(f"senior {senior}  junior {junior}  benchmark {bench}")
    console.print(f"run folders: {solo}  {args.out / 'handoff-paragraph'}  (samples.parquet, metrics.json)")
    console.print(
        f"legibility/drift: {solo / 'lens'}/<junior>/{{legibility,drift}}.parquet  "
        f"(metrics.json lens entries {sorted(metrics.get('lens', {}))})"
    )
    console.print(f"report: {args.out / 'report'}")


if __name__ == "__main__":
    main()
