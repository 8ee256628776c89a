"""Synthetic run folders for the report, view and notebook tests (no model is involved).

    from report_fixtures import make_results, make_run
    root = make_results(tmp_path)    # 2 arms x (solo, handoff paragraph, takeover:1/2) x 2 benchmarks,
                                     # legibility/drift parquets, a trainer log with periodic evals

Traces are short arithmetic "CoTs" tokenized with a real byte-level BPE tokenizer trained here in
a second (saved as each senior's checkpoint folder, so `tandem-eval view` can split tokens), and
correct flags are random with a fixed seed. Everything is written through RunFolder, like a real
evaluation.
"""

from __future__ import annotations

import json
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from tandem_eval.config import EvalConfig, ModelSpec
from tandem_eval.metrics.passk import summarize_pass_at_k
from tandem_eval.run.results import RunFolder

BENCHMARKS = {"bench_a": 6, "bench_b": 5}  # name -> problems (group = name)
ARMS = {"grpo": 0.45, "tandem": 0.6}  # arm -> base solve rate
N, KS = 8, (1, 2, 4, 8)


@lru_cache(maxsize=1)
def tokenizer():
    from transformers import Qwen2Tokenizer

    corpus = [f"Step {i}: {i} + {i} = {2 * i}.\n\nSo the answer is \\boxed{{{2 * i}}}." for i in range(40)]
    tok = Qwen2Tokenizer().train_new_from_iterator(corpus * 5, vocab_size=320)
    tok.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    return tok


def save_tokenizer(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if not (path / "tokenizer_config.json").exists():
        tokenizer().save_pretrained(str(path))
    return path


def trace_paragraphs(a: int, b: int, answer: int) -> list[str]:
    return [
        f"Step 1: {a} + {b} = {a + b}.\n\n",
        f"Step 2: {a + b} * 2 = {2 * (a + b)}.\n\n",
        f"So the answer is \\boxed{{{answer}}}.",
    ]


def make_run(
    path: Path,
    senior: Path,
    flags: dict,
    mode: str = "solo",
    schedule: str = "solo",
    label: str | None = None,
    ks=KS,
    side_tables: bool = False,
    extra: dict | None = None,
) -> RunFolder:
    """A complete run folder. flags: {(benchmark, problem_id): [correct per sample]}."""
    tok = tokenizer()
    n = max(len(v) for v in flags.values())
    cfg = EvalConfig(
        senior=ModelSpec(str(senior)),
        junior=ModelSpec(str(senior.parent / "junior")),
        mode=mode,
        schedule=schedule,
        benchmarks=tuple(sorted({b for b, _ in flags})),
        n=n,
        ks=tuple(ks),
        seed=0,
        label=label,
    )
    rf = RunFolder(path)
    rf.init(cfg, extra)
    rows, legi, drift = [], [], []
    for (bench, pid), sample_flags in sorted(flags.items()):
        a, b = zlib.crc32(pid.encode()) % 9 + 1, len(pid) % 7 + 1
        gold = 2 * (a + b)
        for i, ok in enumerate(sample_flags):
            answer = gold if ok else gold + 1 + i
            ids, mask = [], []
            for j, para in enumerate(trace_paragraphs(a, b, answer)):
                piece = tok.encode(para)
                author = 1 if mode == "solo" or j % 2 == 0 else 0
                if schedule.startswith("takeover:"):
                    author = 1 if j < int(schedule.split(":")[1]) else 0
                ids += piece
                mask += [author] * len(piece)
            text = tok.decode(ids)
            rng = np.random.default_rng(zlib.crc32(f"{path.name}{pid}{i}".encode()))
            rows.append(
                {
                    "problem_id": pid,
                    "benchmark": bench,
                    "group": bench,
                    "sample_idx": i,
                    "mode": mode,
                    "schedule": schedule,
                    "seed": 0,
                    "prompt": f"What is 2 * ({a} + {b})?",
                    "text": text,
                    "prompt_ids": [1, 2, 3],
                    "token_ids": ids,
                    "author_mask": mask,
                    "logprobs": (-rng.exponential(0.3, len(ids))).tolist(),
                    "gold": str(gold),
                    "extracted_answer": str(answer),
                    "correct": bool(ok),
                    "grade_status": "ok",
                    "finish_reason": "eos",
                    "n_tokens": len(ids),
                    "n_senior_tokens": int(sum(mask)),
                    "senior_fraction": sum(mask) / len(mask),
                    "n_handoffs": int(np.abs(np.diff(mask)).sum()),
                }
            )
            nll = rng.exponential(0.8 if "grpo" in str(senior) else 0.5, len(ids))
            kl = rng.exponential(0.2 if "grpo" in str(senior) else 0.1, len(ids))
            key = {"benchmark": bench, "problem_id": pid, "sample_idx": i, "n_tokens": len(ids)}
            # the columns the real lens writes (tandem_eval.score.lens.legibility): per-token junior
            # log-probs of the CoT without its final EOS token, and 20 relative-position bins
            scored = nll[:-1]
            legi.append(
                {
                    **key,
                    "junior_nll_sum": float(scored.sum()),
                    "junior_nll_mean": float(scored.mean()),
                    "nll_bins": np.resize(scored, 20).tolist(),
                    "junior_logprobs": (-scored).astype(np.float32).tolist(),
                }
            )
            drift.append(
                {
                    **key,
                    "kl_exact": float(kl.mean()),
                    "kl_k1": float(kl.mean() * 1.1),
                    "kl_k3": float(kl.mean() * 0.9),
                    "kl_reverse": float(kl.mean()),
                    "truncated": False,
                    "kl_bins": np.resize(kl, 20).tolist(),
                    "kl_tokens": kl.astype(np.float32).tolist(),
                }
            )
    rf.append_shard(rows)
    import pandas as pd

    samples = pd.DataFrame(rows)
    rf.finalize({"pass_at_k": summarize_pass_at_k(samples, [k for k in ks if k <= n])})
    if side_tables:  # the lens layout: RUN/lens/<junior label>/, recorded in COMPLETE as the lens commands do
        rf.write_table("lens/junior/legibility.parquet", pd.DataFrame(legi))
        rf.write_table("lens/junior/drift.parquet", pd.DataFrame(drift))
    return rf


def random_flags(arm_rate: float, seed: int) -> dict:
    """{(benchmark, problem_id): [bool] * N}: per-problem difficulty shared by all arms (seed 0)."""
    difficulty = np.random.default_rng(0)
    rng = np.random.default_rng(seed)
    flags = {}
    for bench, n_problems in BENCHMARKS.items():
        for p in range(n_problems):
            rate = float(np.clip(arm_rate + difficulty.uniform(-0.4, 0.4), 0.02, 0.98))
            flags[(bench, f"{bench}/{p:04d}")] = [bool(x) for x in rng.random(N) < rate]
    return flags


def degrade(flags: dict, loss: float, seed: int) -> dict:
    """A handoff version of solo flags: each correct sample stays correct w.p. 1 - loss."""
    rng = np.random.default_rng(seed)
    return {key: [bool(f and rng.random() >= loss) for f in v] for key, v in flags.items()}


def make_results(root: Path) -> Path:
    """The synthetic results folder described in the module docstring; returns `root`."""
    root = Path(root)
    for a, (arm, rate) in enumerate(sorted(ARMS.items())):
        senior = save_tokenizer(root / "checkpoints" / arm)
        solo = random_flags(rate, 10 + a)
        make_run(root / arm / "solo", senior, solo, side_tables=True)
        loss = 0.3 if arm == "grpo" else 0.05
        make_run(root / arm / "handoff-paragraph", senior, degrade(solo, loss, 20 + a), "handoff", "paragraph")
        for n_takeover in (1, 2):
            make_run(
                root / arm / f"handoff-takeover:{n_takeover}",
                senior,
                degrade(solo, 2 * loss / n_takeover, 30 + n_takeover),
                "handoff",
                f"takeover:{n_takeover}",
            )
    train = root / "train" / "tandem"
    train.mkdir(parents=True, exist_ok=True)
    (train / "tandem_meta.json").write_text(json.dumps({"arm": "tandem", "junior": "toy:junior"}))
    rng = np.random.default_rng(5)
    lines = [
        json.dumps(
            {
                "step": s,
                "reward": 0.3 + s / 100 + rng.normal(0, 0.02),
                "accuracy": 0.3 + s / 100,
                "senior_fraction": 0.5 + rng.normal(0, 0.01),
                "kl": 0.01 * s,
                "truncation_rate": 1.0 if s < 5 else 0.25,
                "response_length": 120 - s,
            }
        )
        for s in range(1, 31)
    ]
    (train / "train_log.jsonl").write_text("\n".join(lines) + "\n")
    for step in (10, 20, 30):
        ckpt = save_tokenizer(train / f"checkpoint-{step}")
        make_run(train / "evals" / f"step-{step:05d}", ckpt, random_flags(0.4 + step / 100, step), ks=(1, 2, 4))
    return root
