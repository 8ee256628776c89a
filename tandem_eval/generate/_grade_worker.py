"""One math-verify grading worker: a plain subprocess speaking JSON lines over stdin/stdout.

`tandem_eval.generate.grading.Grader` starts it as `python -m tandem_eval.generate._grade_worker`, a fresh
interpreter that never imports the caller's `__main__` (multiprocessing's spawn/forkserver
re-run the calling script, which breaks scripts without an `if __name__ == "__main__":` guard).
The parent enforces the per-item deadline by killing this process, so nothing here relies on
SIGALRM (which only works on the main thread of the parent).

Protocol (one JSON value per line, UTF-8):
  worker -> parent   "ready"                          once, after the warm-up
  parent -> worker   [[idx, extracted, gold], ...]    a batch; EOF on stdin = stop
  worker -> parent   [idx, status, correct, detail]   one line per item, in batch order

By hand: printf '[[0, "0.5", "\\\\frac12"]]\\n' | python -m tandem_eval.generate._grade_worker
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time

_EXTRA_MEMORY = 4 << 30  # address space the worker may add on top of its start-up size


def math_verify_equal(extracted: str, gold: str) -> bool:
    """math-verify's verdict on one (extracted answer, gold) pair, in this process."""
    from math_verify import parse, verify

    # Both sides are wrapped in \boxed{} so math-verify reads them as LaTeX. Its own timeouts
    # are disabled (None): they use SIGALRM, and the parent enforces the deadline by killing.
    # raise_on_error stays False, math-verify's reference behaviour: a side that fails to parse
    # or compare counts as "not equal" (status ok, wrong), as in other math-verify evaluations.
    g = parse("\\boxed{" + gold + "}", parsing_timeout=None)
    p = parse("\\boxed{" + extracted + "}", parsing_timeout=None)
    return bool(verify(g, p, timeout_seconds=None))


def cap_memory() -> None:
    """Best effort: a sympy blow-up fails with MemoryError instead of exhausting the machine."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = size + _EXTRA_MEMORY
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ImportError, OSError, ValueError):
        pass


def serve(inp, out, compare=math_verify_equal) -> None:
    """Answer batches read from text stream `inp` on text stream `out` until EOF."""
    compare("\\frac{1}{2}", "0.5")  # warm-up (imports, parser set-up) before any deadline runs
    _send(out, "ready")
    for line in inp:
        if not line.strip():
            continue
        for idx, extracted, gold in json.loads(line):
            try:
                reply = [idx, "ok", compare(extracted, gold), "math-verify"]
            except Exception as e:  # noqa: BLE001 -- any failure of one item is that item's
                reply = [idx, "error", False, f"{type(e).__name__}: {str(e)[:200]}"]
            _send(out, reply)


def _send(out, value) -> None:
    out.write(json.dumps(value) + "\n")
    out.flush()


def _exit_when_orphaned(parent: int) -> None:
    # A parent killed with SIGKILL cannot kill us; a hung sympy call would then run on forever.
    # (Not PR_SET_PDEATHSIG: it fires when the parent *thread* exits, and grade() may run in one.)
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)


def main() -> None:
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # it warns that its timeouts are off
    # The protocol gets a private copy of stdout; fd 1 then points at stderr, so a library that
    # prints cannot corrupt the protocol (what it prints shows up in the parent's error reports).
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    cap_memory()
    serve(sys.stdin, proto)


if __name__ == "__main__":
    main()
