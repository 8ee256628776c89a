"""Served backend of the engine protocol (base.py): a model behind an OpenAI-compatible vLLM server.

    from tandem_eval.engines import load_engine
    engine = load_engine("served", "http://127.0.0.1:8000#senior", Sampling(), tokenizer="path/to/ckpt")
    # several servers of one model: "http://a:8000,http://b:8000#senior" (balanced round-robin)

Start a server (vLLM 0.32; `vllm serve` works too where its console script does) with our sampler,
so traces equal the in-process engines' on the same seeds:

    python -m vllm.entrypoints.openai.api_server --model CKPT --served-model-name senior \
        --dtype float32 --enable-prefix-caching \
        --logits-processors tandem_eval.engines.vllm_sampler:PositionKeyedSampler

Each segment is one or more `/v1/completions` calls over the whole trace so far (token ids in,
token ids out; the server's prefix cache finds the trace's earlier blocks), run from a bounded
thread pool (`max_batch` calls at a time); `step()` returns the segments whose last call came
back finished. As on the in-process vLLM engine, a call stops at every stop id and EOS (kept in the
output) and after `until.max_run()` tokens, `until` is fed every token, and where it did not fire
the segment goes on with a new call. Each returned log-prob is the server's raw one (vLLM's default
`logprobs_mode`, base.py's "raw").

Sampling: where the server runs `PositionKeyedSampler` (probed once at start: it rejects a
malformed argument list), each call carries our sampler's arguments in `vllm_xargs` and runs greedy
in vLLM, so a token is a function of (trace seed, position, logits) exactly as in-process. Where it
does not, vLLM samples with its own generator seeded by mix64(trace seed, segment start): a trace
is reproducible, but its tokens are not the in-process engines' and a handoff changes them.

`score` is one call per item with `prompt_logprobs=0`: the raw teacher-forced log-prob of each
continuation token. There are no full next-token distributions over HTTP (no exact KL).

Start-up checks (GET /v1/models on every URL): an unreachable server or one not serving the model
is one `ServerError` line naming it; so is a server that dies mid-run (after `retries` tries).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..models import Checkpoint, ModelError, load_tokenizer
from .base import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, LOGPROBS_RAW, Completion, mix64
from .segments import Segment, SegmentQueue
from .served_http import Client, ServerError

__all__ = ["ServedEngine", "ServedOptions", "ServerError", "api_key", "identify", "parse_target"]

SAMPLER_KEY = "tandem_position_keyed"  # vllm_sampler.SAMPLER_KEY (that module imports vLLM; this one must not)
API_KEY_ENV = "VLLM_API_KEY"  # where `vllm serve` reads its own --api-key from: the default for its clients too
# tokenized by the server and by the local tokenizer before any work: digits, spaces, a paragraph break and
# non-ASCII characters, where two tokenizers of one family but other versions differ first
PROBE_TEXT = "Check: 12 + 7 = 19, so x² ≈ 3.5 —   résumé 東京.\n\nThen \\boxed{19}."


def api_key(env: str | None = None) -> str | None:
    """The servers' API key from the environment variable `env` (None: VLLM_API_KEY); None when unset."""
    return os.environ.get(env or API_KEY_ENV) or None


def _listing(client: Client, url: str, model: str) -> dict:
    """What server `url` lists for `model` (GET /v1/models: id, root, max_model_len); unreachable or not
    serving it: one ServerError naming the server."""
    try:
        listing = client.get(url, "/v1/models")
    except Exception as e:  # anything: the server is not a usable OpenAI-compatible one
        code = getattr(e, "code", None)
        why = (
            "HTTP 401: pass its key in VLLM_API_KEY, or name the variable with --api-key-env"
            if code == 401
            else (f"{type(e).__name__}: {getattr(e, 'reason', e)}")
        )
        raise ServerError(f"server {url} is unreachable ({why})") from None
    models = {m.get("id"): m for m in listing.get("data", [])}
    if model not in models:
        served = ", ".join(map(str, models)) or "none"
        raise ServerError(f"server {url} does not serve model {model!r}; it serves: {served}")
    return models[model]


def runs_our_sampler(client: Client, model: str) -> bool:
    """True when the server runs PositionKeyedSampler: it refuses a malformed argument list (HTTP 400
    naming the key); a server without it ignores vllm_xargs."""
    body = {"model": model, "prompt": [0], "max_tokens": 1, "vllm_xargs": {SAMPLER_KEY: [0]}}
    try:
        client.post("/v1/completions", body)
    except ServerError as e:
        if SAMPLER_KEY in str(e):
            return True
        raise
    return False


def identify(spec: str, tokenizer: str | None, api_key_env: str | None = None) -> Checkpoint:
    """A served model as a command's checkpoint, checked before any work: every server of "URL[,URL]#NAME"
    is reachable and serves NAME (one ServerError line naming the server otherwise), the tokenizer folder
    (`tokenizer`, else the model folder the server reports, where it exists here) tokenizes PROBE_TEXT as
    the server does (one ModelError line otherwise), and what a run records of it: the model's name, the
    server's model folder, context window and vLLM version, the URLs, and whether the servers run our
    sampler (then a trace's random numbers are the in-process engines', shared with a solo run's)."""
    urls, model = parse_target(spec)
    if not model:
        raise ModelError(f"served model {spec!r}: name the model as URL#NAME (the server's served model name)")
    client = Client(urls, timeout=30.0, retries=0, api_key=api_key(api_key_env))
    listed = [_listing(client, url, model) for url in client.urls]
    root = listed[0].get("root")
    folder = tokenizer or root
    if folder is None or not Path(str(folder)).is_dir():
        where = f"--tokenizer {tokenizer}" if tokenizer else f"the server's model folder {root!r}"
        raise ModelError(
            f"served model {spec}: {where} is not a folder here; pass --tokenizer DIR, a local copy of the "
            "served model's tokenizer files (token-exact runs tokenize here)"
        )
    tok = load_tokenizer(Path(str(folder)))
    mine = tok.encode(PROBE_TEXT, add_special_tokens=False)
    theirs = client.post("/tokenize", {"model": model, "prompt": PROBE_TEXT, "add_special_tokens": False})
    if list(theirs.get("tokens") or []) != mine:
        raise ModelError(
            f"the tokenizer at {folder} does not tokenize as server {client.urls[0]} does for {model!r} (a test "
            f"sentence: {len(mine)} vs {len(theirs.get('tokens') or [])} tokens); pass --tokenizer with the served "
            "model's own tokenizer files"
        )
    try:
        version = client.get(client.urls[0], "/version").get("version")
    except Exception:  # noqa: BLE001 - an older or other OpenAI-compatible server: the version is unknown
        version = None
    identity = {
        "model": model,
        "root": root,
        "max_model_len": min(int(m.get("max_model_len") or 0) for m in listed) or None,
        "vllm_version": version,
        "urls": client.urls,
        "shared_sampler": runs_our_sampler(client, model),
    }
    return Checkpoint(Path(str(folder)).resolve(), spec, identity)


def parse_target(target, model: str | None = None) -> tuple[list[str], str | None]:
    """("URL[,URL...]#NAME" or a list of URLs, an explicit model name) -> (base URLs, model name or None)."""
    if isinstance(target, list | tuple):
        return [str(u) for u in target], model
    urls, _, name = str(target).partition("#")
    return [u for u in urls.split(",") if u], model or name or None


@dataclass(frozen=True)
class ServedOptions:
    """ServedEngine's keyword options."""

    model: str | None = None  # the served model's name, where the path does not end in #NAME
    # the checkpoint folder with the model's tokenizer and generation_config (EOS ids); default: the
    # model folder the server reports, where it exists on this machine
    tokenizer: str | Path | None = None
    max_batch: int = 16  # calls in flight at a time (the thread pool's size)
    timeout: float = 120.0  # seconds per call
    retries: int = 3  # more tries of a call failing to connect, timing out or answering 5xx
    backoff: float = 0.5  # seconds before the first retry, doubling
    dtype: str = "auto"  # every engine takes it; a served model's is the server's --dtype: not used
    # the environment variable holding the servers' API key (sent as a bearer token when set); None: VLLM_API_KEY
    api_key_env: str | None = None
    # what identify() found of these servers (a command's plan asked them already: load_engine passes a served
    # Checkpoint's identity): the context window, model folder and sampler are taken from it, not asked again
    identity: dict | None = None


class ServedEngine(SegmentQueue):
    """The engine protocol over HTTP to vLLM's OpenAI-compatible server."""

    name = "served"
    may_overrun = False  # every call stops at stop ids and forced decisions; `until` is checked there
    full_distributions = False  # prompt log-probs of the given tokens only: drift falls back to k1/k3
    logprobs = LOGPROBS_RAW
    live_counter = "generated"  # bumped as each call's tokens come back

    def __init__(self, path, sampling, **options):
        """`path`: "URL[,URL...]#NAME" (or a list of URLs, with `model=`); `options`: ServedOptions fields
        (an unknown one: TypeError naming it)."""
        opts = ServedOptions(**options)
        urls, self.model = parse_target(path, opts.model)
        if not self.model:
            raise ModelError(f"served model {path!r}: name the model as URL#NAME (the server's served model name)")
        self.sampling = sampling
        self.client = Client(urls, opts.timeout, opts.retries, opts.backoff, api_key(opts.api_key_env))
        known = opts.identity
        if known is None:
            self.server_context, root = self._check_servers()
        else:
            self.server_context, root = known.get("max_model_len") or sampling.max_context, known.get("root")
        self.max_context = min(sampling.max_context, self.server_context)
        self.tokenizer, self.eos_ids = _tokenizer(opts.tokenizer or root, self)
        sampled = sampling.temperature > 0
        self.position_keyed = sampled and (
            bool(known.get("shared_sampler")) if known is not None else self._runs_our_sampler()
        )
        self.max_batch = opts.max_batch
        self._pool = ThreadPoolExecutor(opts.max_batch, thread_name_prefix="served")
        self._init_segments()  # queued segments wait for a call slot
        self._calls: dict[Future, Segment] = {}
        self._stops: dict[int, tuple[frozenset[int], list[int]]] = {}
        # segments (requests of the loop), calls serving them, tokens generated; the client's own
        # (calls, retries, seconds) are merged in by `step`
        self.stats = {"segments": 0, "chunks": 0, "generated": 0, **self.client.stats}

    def __repr__(self) -> str:
        return f"ServedEngine({','.join(self.client.urls)}#{self.model})"

    # -- start-up checks ----------------------------------------------------------------------

    def _check_servers(self) -> tuple[int, str | None]:
        """Every server serves `self.model`: (the smallest context window, the checkpoint folder the
        first reports). Unreachable or not serving it: one ServerError naming the server."""
        listed = [_listing(self.client, url, self.model) for url in self.client.urls]
        contexts = [int(m.get("max_model_len") or self.sampling.max_context) for m in listed]
        return min(contexts), listed[0].get("root")

    def _runs_our_sampler(self) -> bool:
        return runs_our_sampler(self.client, self.model)

    # -- generation ---------------------------------------------------------------------------

    def _body(self, seg: Segment) -> dict:
        """One /v1/completions call continuing `seg`: at most up to its next decision point."""
        req, ctx = seg.req, seg.req.token_ids + seg.ids
        n = seg.limit - len(seg.ids)
        run = req.until.max_run() if req.until is not None else None
        if run is not None:  # stop at a forced decision (word:P:K after K tokens), where until may fire
            n = min(n, max(run, 1))
        s = self.sampling
        body = {
            "model": self.model,
            "prompt": ctx,
            "max_tokens": n,
            "stop_token_ids": self._stop_list(req.stop_ids),
            "logprobs": 0,  # the sampled token's raw log-prob
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            # the server's generation_config defaults must not change the distribution
            "repetition_penalty": 1.0,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
            "min_p": 0.0,
            "temperature": 0.0,
        }
        if s.temperature > 0 and self.position_keyed:  # vLLM runs greedy on the one logit our sampler leaves
            args = [req.seed & ((1 << 64) - 1), len(ctx), s.temperature, s.top_k, s.top_p, len(self.tokenizer)]
            body["vllm_xargs"] = {SAMPLER_KEY: args}  # vllm_sampler.sampler_list's order
        elif s.temperature > 0:
            body.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k if s.top_k > 0 else -1)
            body["seed"] = mix64(req.seed, len(ctx)) >> 1  # vLLM wants a signed 64-bit seed
        return body

    def _stop_list(self, stop_ids: frozenset[int]) -> list[int]:
        """Stop ids + EOS ids within the vocabulary, sorted; cached by the set's identity (a schedule
        hands out the same few sets, a word schedule's holding most of the vocabulary)."""
        hit = self._stops.get(id(stop_ids))
        if hit is None or hit[0] is not stop_ids:
            if len(self._stops) >= 16:
                self._stops.clear()
            vocab = len(self.tokenizer)
            hit = self._stops[id(stop_ids)] = (stop_ids, sorted(t for t in stop_ids | self.eos_ids if 0 <= t < vocab))
        return hit[1]

    def _launch(self) -> None:
        while self._queue and len(self._calls) < self.max_batch:
            seg = self._segments[self._queue.popleft()]
            self._calls[self._pool.submit(self.client.post, "/v1/completions", self._body(seg))] = seg
            self.stats["chunks"] += 1

    def _take(self, seg: Segment, out: dict) -> None:
        """Add one call's tokens to its segment; finish it, or queue its next call."""
        choice = out["choices"][0]
        lp = choice.get("logprobs") or {}
        ids = [int(t.rpartition(":")[2]) for t in lp.get("tokens") or []]  # "token_id:271"
        lps = (float(logp) for logp in lp.get("token_logprobs") or [])
        self._absorb(seg, ids, lps, ServerError(f"{self!r} ran past the end of a segment of trace {seg.req.key!r}"))
        self.stats["generated"] += len(ids)
        if choice.get("finish_reason") not in ("stop", "length") or not ids:
            raise ServerError(f"{self!r} ended a call with {choice.get('finish_reason')!r} after {len(ids)} tokens")
        reason = self._finish_reason(seg, choice["finish_reason"])
        if reason is None:  # a decision point that kept the author: the segment goes on
            self._queue.appendleft(seg.req.key)
            return
        self._finish(seg, reason)

    def _finish_reason(self, seg: Segment, server: str) -> str | None:
        last = seg.ids[-1]
        if last in self.eos_ids or (server == "stop" and last not in seg.req.stop_ids):
            return FINISH_EOS  # (the second: an end the server's model knows and our tokenizer does not)
        if seg.ended:
            return FINISH_STOP
        return FINISH_LENGTH if len(seg.ids) >= seg.limit else None

    def step(self) -> list[Completion]:
        """Start calls for queued segments, then take the calls that came back (waiting up to 50 ms
        for one when nothing is ready); returns the segments that finished."""
        self._launch()
        if self._calls and not self._ready:
            done, _ = wait(list(self._calls), timeout=0.05, return_when=FIRST_COMPLETED)
            for fut in done:
                seg = self._calls.pop(fut)
                out = fut.result()  # a failed call: its ServerError, naming the server
                if self._segments.get(seg.req.key) is seg:  # else released meanwhile
                    self._take(seg, out)
            self._launch()
        self.stats.update(self.client.stats)
        return self._take_ready()

    def release(self, key: Hashable) -> None:
        """The trace is over (or abandoned): drop its segment; a call in flight is left to finish and ignored."""
        self._forget(key)
        self._drop_ready(key)

    # -- scoring ------------------------------------------------------------------------------

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]], **kw) -> list[np.ndarray]:
        """Teacher-forced raw log p(continuation[i] | prompt + continuation[:i]), float64 arrays, from the
        server's prompt log-probs (one call per item, `max_batch` at a time; kw: progress(n))."""
        if len(prompts) != len(continuations):
            raise ValueError("prompts and continuations must have the same length")
        progress = kw.get("progress")
        items = [(list(p), list(c)) for p, c in zip(prompts, continuations)]
        for p, c in items:
            if not p:
                raise ValueError("score needs a non-empty prompt (the first token has no log-prob)")
            if len(p) + len(c) >= self.server_context:
                raise ValueError(f"prompt + continuation ({len(p) + len(c)} tokens) must be < {self.server_context}")
        futures = [self._pool.submit(self._score_one, p, c) if c else None for p, c in items]
        out = []
        for f in futures:
            out.append(f.result() if f is not None else np.zeros(0, dtype=np.float64))
            if progress:
                progress(1)
        return out

    def _score_one(self, prompt: list[int], cont: list[int]) -> np.ndarray:
        ids = prompt + cont
        body = {"model": self.model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
        plp = self.client.post("/v1/completions", body)["choices"][0]["prompt_logprobs"]  # [None, {"id": {...}}, ...]
        return np.array([plp[j][str(ids[j])]["logprob"] for j in range(len(prompt), len(ids))], dtype=np.float64)

    def exact_kl(self, *args, **kw):
        raise NotImplementedError("a served model has no full next-token distributions (full_distributions is False)")

    def close(self) -> None:
        """Stop starting calls; calls in flight finish in the background and are dropped."""
        self._segments.clear()
        self._queue.clear()
        self._calls.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _tokenizer(where, engine: ServedEngine):
    """The model's tokenizer and EOS ids from a checkpoint folder (tokenizer + generation_config)."""
    if where is None or not Path(str(where)).is_dir():
        raise ModelError(
            f"{engine!r}: pass tokenizer=DIR, a folder with the served model's tokenizer "
            f"(the server's model folder {where!r} is not here)"
        )
    from .vllm_start import tokenizer_and_eos  # transformers only; vLLM is not imported

    return tokenizer_and_eos(where)
