"""The process's one thread with a big stack, where the parse and the walk run.

libcst's native parser recurses once per nesting level of any kind (``a and a and ...``, long ``elif``
chains), and so does the semantic model's walk (a 10,000-operand ``and`` chain is valid Python): on an
ordinary thread such valid code would crash the interpreter.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from typing import Optional

PARSE_STACK_SIZE = 512 * 1024 * 1024

# The walk of the semantic model recurses once per nesting level too: on the big stack it may go this deep.
WALK_RECURSION_LIMIT = 200_000


def on_big_stack(fn, *args):
    """Run ``fn(*args)`` on a thread with a big stack: libcst's native parser and the model's walk
    recurse per nesting level, and a deep-but-valid file must not crash the interpreter.

    The thread is started once per process and kept (``_BigStack``): a new thread for each call (two
    per file) cost 5-10% of a parse, its stack's pages faulted in anew every time. Callers take turns;
    a call made on that thread (a nested one) runs where it is."""
    if sys.getrecursionlimit() < WALK_RECURSION_LIMIT:
        sys.setrecursionlimit(WALK_RECURSION_LIMIT)
    if threading.current_thread() is _BIG_STACK.thread:
        return fn(*args)
    with _BIG_STACK.lock:
        worker = _BIG_STACK.running()
        if worker is None:  # pragma: no cover - a platform without settable stacks
            return fn(*args)
        reply: queue.SimpleQueue = queue.SimpleQueue()
        worker.put((fn, args, reply))
        ok, value = reply.get()
    if not ok:
        raise value
    return value


class _BigStack:
    """The process's one thread with a big stack (``on_big_stack``), started on first use and again
    in a forked child (a fork copies no thread but the one that forked)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: Optional[threading.Thread] = None
        self.requests: Optional[queue.SimpleQueue] = None
        self.pid = -1

    def running(self) -> Optional[queue.SimpleQueue]:
        """The request queue of a live big-stack thread, started if need be; None if none can be."""
        if self.thread is not None and self.pid == os.getpid() and self.thread.is_alive():
            return self.requests
        try:
            old = threading.stack_size(PARSE_STACK_SIZE)
        except (ValueError, RuntimeError):  # pragma: no cover - a platform without settable stacks
            return None
        requests: queue.SimpleQueue = queue.SimpleQueue()
        try:
            t = threading.Thread(target=_serve, args=(requests,), name="xlalint-parse", daemon=True)
            t.start()
        finally:
            threading.stack_size(old)
        self.thread, self.requests, self.pid = t, requests, os.getpid()
        return requests

    def after_fork(self) -> None:
        self.__init__()


def _serve(requests: queue.SimpleQueue) -> None:
    while True:
        fn, args, reply = requests.get()
        try:
            value = (True, fn(*args))
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            value = (False, e)
        reply.put(value)
        del fn, args, reply, value  # nothing of a request outlives it


_BIG_STACK = _BigStack()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_BIG_STACK.after_fork)
