"""Co-generation throughput: solo vs paragraph vs word handoff vs a lockstep reference, side by side.

Lockstep is what the paper's patched vLLM does: both models run a forward pass at every token of
every trace (the non-author just consumes the token). Our loop instead lets each model serve only
the traces whose turn it is, with a catch-up prefill when a trace comes back. All measurements use
the same tiny models, engine, batch size and prompts in one process; each is repeated and the best
of the repeats is kept (these machines are noisy; rounds interleave the modes and a warm-up round is
discarded), and ratios are to solo on the same backend.

    python benchmarks/bench_cogen.py [--traces 64] [--tokens 256] [--batch 32] [--repeats 2] [--threads 1] [--vllm]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch

from tandem_eval.config import Sampling
from tandem_eval.engines.base import position_uniform
from tandem_eval.engines.hf import HFEngine, _filtered_probs, _Row
from tandem_eval.schedules import make_schedule
from tandem_eval.tandem import TraceSpec, cogenerate, trace_seed
from trainer.tiny import TinySize, build_model, save_pair, train_tokenizer

SAMPLING = Sampling(temperature=1.0, top_p=1.0, top_k=0)


def build_models(root: str):
    tok = train_tokenizer()
    size = TinySize(hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, intermediate=256)
    return save_pair(root, tok, build_model(tok, size, 0), build_model(tok, size, 1))


def specs(tok, n: int, tokens: int):
    prompt = tuple(tok.encode("Tom has 3 apples and buys 4 more.\n\nHow many apples does Tom have?"))
    return [TraceSpec(i, prompt, trace_seed(0, "bench", i), tokens) for i in range(n)]


def run_cogen(senior, junior, schedule: str, n: int, tokens: int, batch: int, pool_factor: int = 2) -> float:
    sched = make_schedule(schedule, senior.tokenizer)
    pool = batch if schedule == "solo" else pool_factor * batch
    t0 = time.perf_counter()
    total = sum(
        len(t.token_ids)
        for t in cogenerate(
            specs(senior.tokenizer, n, tokens), senior, None if schedule == "solo" else junior, sched, pool
        )
    )
    return total / (time.perf_counter() - t0)


@torch.inference_mode()
def run_lockstep(senior: HFEngine, junior: HFEngine, schedule: str, n: int, tokens: int, batch: int) -> float:
    """Both models forward every token of every trace; the schedule's author's logits are sampled."""
    sched = make_schedule(schedule, senior.tokenizer)
    total, t0 = 0, time.perf_counter()
    all_specs = specs(senior.tokenizer, n, tokens)
    for a in range(0, n, batch):  # lockstep runs fixed batches: all traces advance together
        group = all_specs[a : a + batch]
        rngs = [np.random.default_rng(s.seed) for s in group]
        states = [sched.init(r) for r in rngs]
        rows = {e: [_new_row(e, ("ls", s.key)) for s in group] for e in (senior, junior)}
        feeds = [list(s.prompt_ids) for s in group]
        for step in range(tokens):
            logits = {e: e._forward(rows[e], feeds) for e in (senior, junior)}
            mixed = torch.stack([logits[senior if st.author else junior][i] for i, st in enumerate(states)])
            probs = _filtered_probs(mixed / SAMPLING.temperature, SAMPLING.top_k, SAMPLING.top_p)
            u = torch.tensor([position_uniform(s.seed, len(s.prompt_ids) + step) for s in group], dtype=probs.dtype)
            cdf = probs.cumsum(-1)
            chosen = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(1).clamp_(max=probs.shape[1] - 1)
            for i, tok in enumerate(chosen.tolist()):
                sched.advance(states[i], tok, rngs[i])
            feeds = [[t] for t in chosen.tolist()]
            total += len(group)
        for e in (senior, junior):
            for s in group:
                e.release(("ls", s.key))
    return total / (time.perf_counter() - t0)


def _new_row(engine: HFEngine, key) -> _Row:
    row = engine._rows[key] = _Row(engine._alloc())
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--vllm", action="store_true", help="also measure the vLLM backend (cogen only)")
    ap.add_argument("--pool-factor", type=int, default=2, help="live traces = factor x batch for handoff")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1 is stable on a shared 2-core machine; 2 collapses under contention)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as root:
        sp, jp = build_models(root)
        senior, junior = HFEngine(sp, SAMPLING, max_batch=args.batch), HFEngine(jp, SAMPLING, max_batch=args.batch)
        n, t, b = args.traces, args.tokens, args.batch
        pf = args.pool_factor
        modes = {
            f"hf {s}": (lambda s=s: run_cogen(senior, junior, s, n, t, b, pf)) for s in ("solo", "paragraph", "word")
        }
        modes.update(
            {f"hf lockstep-{s}": (lambda s=s: run_lockstep(senior, junior, s, n, t, b)) for s in ("paragraph", "word")}
        )
        if args.vllm:
            from tandem_eval.engines.vllm_engine import VLLMEngine

            vs, vj = VLLMEngine(sp, SAMPLING, max_batch=b), VLLMEngine(jp, SAMPLING, max_batch=b)
            modes.update(
                {f"vllm {s}": (lambda s=s: run_cogen(vs, vj, s, n, t, b, pf)) for s in ("solo", "paragraph", "word")}
            )
        # Rounds interleave the modes (drifting machine load hits all of them alike); round 0 warms up
        # caches and allocations and is discarded; each mode keeps its best round.
        best = {name: 0.0 for name in modes}
        for round_ in range(args.repeats + 1):
            for name, fn in modes.items():
                tps = fn()
                if round_:
                    best[name] = max(best[name], tps)
        results = list(best.items())
    base = {r[0].split()[0]: r[1] for r in results if r[0].endswith(" solo")}
    print(f"{'mode':<22}{'tok/s':>10}{'x solo':>9}   (traces={n}, tokens={t}, batch={b}, best of {args.repeats})")
    for name, tps in results:
        print(f"{name:<22}{tps:>10.0f}{tps / base[name.split()[0]]:>9.2f}")


if __name__ == "__main__":
    main()
