"""Throughput of teacher-forced scoring vs generation, and of exact KL vs vLLM prompt log-probs.

    .venv/bin/python benchmarks/bench_scoring.py                 # ~1 min on 2 idle CPU cores
    .venv/bin/python benchmarks/bench_scoring.py --no-vllm --threads 1 --problems 2

One run on a medium tiny senior/junior pair (Qwen3 architecture, hidden 128, 4 layers) laid out like
a solo run (--problems x --n CoTs; the n CoTs of a problem share its prompt): the senior samples
the CoTs (HF engine, batch 32, temperature 1); the junior then teacher-forces the same CoTs.
Every rate counts CoT tokens (prompt tokens are processed but not counted) and is the best of
--repeats timed runs after one warm-up. The issue's target: HF scoring >= 5x HF generation.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def _best(fn, repeats: int, warmup=None) -> tuple[float, object]:
    (warmup or fn)()  # warm-up (allocator, kernels, KV store growth)
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=4, help="tiny-benchmark problems")
    ap.add_argument("--n", type=int, default=8, help="CoTs per problem (a solo run's samples share the prompt)")
    ap.add_argument("--max-new", type=int, default=128, help="tokens per CoT (random models rarely stop early)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default); 1 helps on a busy machine"
    )
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM prompt-log-prob row")
    return ap.parse_args()


def _pair(args):
    """The medium tiny senior/junior pair on HF engines and the solo-run-shaped prompts."""
    import torch

    from tandem_eval.config import Sampling
    from tandem_eval.data.benchmarks import load_benchmark
    from tandem_eval.data.prompts import prompt_ids
    from tandem_eval.engines.hf import HFEngine
    from tandem_eval.toy.tiny import TinySize, build_tiny_pair

    size = TinySize(hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, intermediate=256)
    senior_path, junior_path = build_tiny_pair(tempfile.mkdtemp(prefix="bench_scoring_"), size=size)
    sampling = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=args.max_new, max_context=1024)
    senior, junior = HFEngine(senior_path, sampling, max_batch=32), HFEngine(junior_path, sampling, max_batch=32)
    problems = load_benchmark("tiny")
    prompts = [
        prompt_ids(senior.tokenizer, problems[i // args.n % len(problems)].problem)
        for i in range(args.problems * args.n)
    ]
    n_params = sum(p.numel() for p in senior.model.parameters())
    print(
        f"models: {n_params / 1e6:.2f}M parameters, vocab {senior.vocab_size}; {args.problems} problems x {args.n} "
        f"CoTs x <= {args.max_new} tokens (prompts ~{sum(map(len, prompts)) // len(prompts)} tokens); "
        f"torch threads {torch.get_num_threads()}"
    )
    return senior, junior, junior_path, prompts


def _vllm_row(junior_path, prompts, conts, repeats):
    """vLLM's prompt log-probs on the junior, or None (with a line saying why) where vLLM cannot load."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from tandem_eval.config import Sampling
    from tandem_eval.engines import unavailable
    from tandem_eval.engines.vllm_engine import VLLMEngine

    why = unavailable("vllm")
    if why:
        print(f"skipping the vLLM row: {why}")
        return None
    t = time.perf_counter()
    v = VLLMEngine(junior_path, Sampling(temperature=0, max_context=1024), max_batch=64, kv_cache_gib=0.25)
    start = time.perf_counter() - t
    try:
        return (
            f"vLLM prompt log-probs (junior; start {start:.1f} s not counted)",
            _best(lambda: v.score(prompts, conts), repeats)[0],
        )
    finally:
        v.close()


def main() -> None:
    args = _args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from tandem_eval.engines.base import Request, generate
    from tandem_eval.engines.hf_scoring import kl_peak_bytes
    from tandem_eval.score import lens

    senior, junior, junior_path, prompts = _pair(args)

    def gen(n=len(prompts), max_new=args.max_new):
        reqs = [Request(i, p, max_new, seed=i) for i, p in enumerate(prompts[:n])]
        return [c.token_ids for c in generate(senior, reqs)]

    t_gen, conts = _best(gen, args.repeats, warmup=lambda: gen(n=32, max_new=8))
    n_tok = sum(len(c) for c in conts)
    opts = lens.LensOptions()
    rows = [
        ("HF generate (senior, batch 32, KV cache)", t_gen),
        (
            "HF score, one CoT per batch (batch_tokens=1)",
            _best(lambda: junior.score(prompts, conts, batch_tokens=1), args.repeats)[0],
        ),
        (
            "HF score, batched + shared prompts (HFEngine.score)",
            _best(lambda: junior.score(prompts, conts, batch_tokens=opts.batch_tokens), args.repeats)[0],
        ),
        (
            "HF exact KL, both models (HFEngine.exact_kl)",
            _best(lambda: senior.exact_kl(junior, prompts, prompts, conts), args.repeats)[0],
        ),
    ]
    if not args.no_vllm:
        rows += [r for r in [_vllm_row(junior_path, prompts, conts, args.repeats)] if r]
    print(f"\n{'path':<62} {'CoT tokens/s':>12} {'x generate':>10}")
    for name, secs in rows:
        print(f"{name:<62} {n_tok / secs:>12,.0f} {t_gen / secs:>10.1f}")
    ratio = t_gen / rows[2][1]
    print(
        f"\nbatched HF scoring / HF generation = {ratio:.1f}x (target >= 5x): {'OK' if ratio >= 5 else 'BELOW TARGET'}"
    )
    peak = kl_peak_bytes(opts.chunk, 151_936, 4096, 2560)
    print(
        f"exact-KL working set for a 4,096-token CoT, vocab 151,936, hidden 2,560, chunk {opts.chunk}: "
        f"{peak / 2**20:,.0f} MiB (unchunked: {kl_peak_bytes(4096, 151_936, 4096, 2560) / 2**30:.1f} GiB)"
    )


if __name__ == "__main__":
    main()
