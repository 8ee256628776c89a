"""The HTTP side of the served engine (served.py): JSON calls to OpenAI-compatible servers.

One `Client` holds one or more base URLs of servers serving the same model and spreads calls over
them round-robin. A call that fails to connect, times out, breaks mid-response or gets a 5xx is
retried (on the next URL) with exponential backoff; a 4xx is the request's fault and raises at once.
Every failure is one `ServerError` line naming the server(s) it tried.

    client = Client(["http://127.0.0.1:8000"], timeout=60, retries=3)
    client.post("/v1/completions", {"model": "m", "prompt": [1, 2], "max_tokens": 4})

It uses the standard library (urllib) only: thread-safe, one connection per call, which costs
nothing measurable on loopback next to a forward pass; the engine runs calls from a thread pool.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
import urllib.error
import urllib.request

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
