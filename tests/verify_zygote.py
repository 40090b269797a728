"""One torch_xla start-up per pytest worker for the ``--verify`` runs of tests that are about the report.

Each ``--verify`` run starts a child process (``xlalint/verify/runner.py``: ``python CHILD spec.json``),
and about 5 of the 7 CPU seconds a small fixture costs are that child importing torch and torch_xla. Here a
server process (tests/verify_zygote_server.py) imports them once and forks each child from that state,
before any device exists; the forked process then runs the very same entry script, with the same streams,
working directory, environment, session and pipes as ``subprocess.Popen`` would give it.

``forked_children()`` routes the runner's ``Popen`` of its child there for as long as it is active (a
child whose environment differs from the server's gets a server started with it), and every other
``Popen`` (another interpreter's child too) to ``subprocess`` as before. What the runner does with the
process (its wait loop, the timeout's request on the command pipe, ``kill_tree`` of its session, the
watchdog pipe) is unchanged. One thing differs, and is adjusted here: the child's parent is the server,
so the spec's ``parent_pid`` (the child's check that xlalint is still there) names the server.

The servers also compile as ``fast_compile`` says: XLA's CPU backend at optimization level 0, without
its expensive LLVM passes. A small fixture's graphs then compile 2-3 times faster (the compiles, not the
imports, are most of what is left of its cost), and nothing a test reads changes: the same graphs are
built, cut, compiled, cached, transferred and fall back to the CPU; only how fast the compiled code runs
differs, and no verdict depends on a time.

Tests about the child process itself (signals, a compile that must outlast the timeout, ``xlalint --verify``
on the command line) do not use it; tests/test_verify_zygote.py checks that a forked child reports what a
started one does.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import types

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "verify_zygote_server.py")
#: A run with IR graph dumps (runner.child_env) names its dump file here. Its other variables (XLA_IR_DEBUG,
#: the format) are read by torch_xla when it is imported: those runs fork from a server started with them.
DUMP_FILE = "XLA_SAVE_TENSORS_FILE"
#: Variables of one run, read after the fork: set in the forked child, not a reason for a server of its own
#: (the run's dump file, read when the first graph is saved; pytest's name of the test running).
PER_RUN = (DUMP_FILE, "PYTEST_CURRENT_TEST")
#: XLA's CPU backend at optimization level 0, without its expensive LLVM passes: faster compiles of the
#: same graphs (an unknown flag would make torch_xla abort: these are XLA's own, checked on start-up).
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
POPEN_KEYWORDS = {"stdin", "stdout", "stderr", "env", "cwd", "start_new_session", "pass_fds"}


def fast_compile(env: dict) -> dict:
    """``env`` for a process that runs torch_xla to count its graphs, not to time them: ``FAST_COMPILE``
    before any XLA_FLAGS of the caller's (a later flag wins)."""
    return {**env, "XLA_FLAGS": f"{FAST_COMPILE} {env.get('XLA_FLAGS', '')}".strip()}


class Zygote:
    """A server process, started with the environment of the children it forks (but their own dump file),
    and ``fast_compile``."""

    def __init__(self, env: dict):
        self.given = env
        env = fast_compile(env)
        self.dir = tempfile.mkdtemp(prefix="xlalint-zygote-")
        self.path = os.path.join(self.dir, "socket")
        code = f"exec(compile(open({SERVER!r}).read(), '<xlalint-test-zygote>', 'exec'))"
        self.proc = subprocess.Popen([sys.executable, "-c", code, self.path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        ready = self.proc.stdout.readline()
        if ready != b"ready\n":
            self.close()
            raise RuntimeError(f"the verify zygote did not start (exit status {self.proc.poll()})")

    def popen(self, args, *, stdin, stdout, stderr, env, cwd, start_new_session, pass_fds) -> "ForkedChild":
        spec_path = args[2]
        with open(spec_path) as fh:
            spec = json.load(fh)
        if spec.get("parent_pid"):
            spec["parent_pid"] = self.proc.pid  # the forked child's parent
            with open(spec_path, "w") as fh:
                json.dump(spec, fh)
        request = {"argv": list(args[1:]), "cwd": cwd or os.getcwd(), "fds": list(pass_fds),
                   "env": {k: env[k] for k in PER_RUN if k in env}}
        devnull = os.open(os.devnull, os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            socket.send_fds(conn, [json.dumps(request).encode()],
                            [devnull, stdout.fileno(), stderr.fileno(), *pass_fds])
            pid = conn.recv(64)
        except BaseException:
            conn.close()
            raise
        finally:
            os.close(devnull)
        if not pid:
            conn.close()
            raise RuntimeError("the verify zygote did not fork the child")
        return ForkedChild(args, int(pid), conn)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # the server's signal to exit
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ForkedChild:
    """What the runner uses of a ``subprocess.Popen``: pid, returncode, wait(timeout), poll(), kill()."""

    def __init__(self, args, pid: int, conn: socket.socket):
        self.args, self.pid, self.conn = args, pid, conn
        self.returncode = None

    def _collect(self, timeout) -> None:
        if self.returncode is not None:
            return
        ready, _, _ = select.select([self.conn], [], [], timeout)
        if ready:
            data = self.conn.recv(64)
            self.conn.close()
            if not data:
                raise RuntimeError(f"the verify zygote died while its child {self.pid} ran")
            self.returncode = int(data)

    def poll(self):
        self._collect(0)
        return self.returncode

    def wait(self, timeout=None):
        self._collect(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


class Zygotes:
    """This process's servers, started on first use: one for the runner's plain children, one for its runs
    with IR graph dumps, each with the environment of the child that asked for it. A child whose environment
    differs from its server's (a test changed os.environ, torch_xla imported in the test process added its
    variables) gets a new server with its own: the old one ends."""

    def __init__(self):
        self.lock = threading.Lock()
        self.servers: dict = {}  # "plain" | "dump" -> Zygote
        self.restarted: list = []  # the variables that differed, each time a server was replaced
        self.retired: list = []  # the servers replaced
        self.forked = 0  # children forked, for the tests that check it was used

    @staticmethod
    def kind(args, kwargs) -> str | None:
        """Which server forks this Popen call's process: None unless it is the runner's child, run by this
        interpreter, as run_child starts it."""
        from xlalint.verify import runner

        if len(args) != 3 or list(args[:2]) != [sys.executable, runner.CHILD] or set(kwargs) != POPEN_KEYWORDS:
            return None
        if not kwargs["start_new_session"] or kwargs["stdin"] != subprocess.DEVNULL:
            return None
        return "dump" if DUMP_FILE in kwargs["env"] else "plain"

    def route(self, args, kwargs, started=frozenset()) -> str | None:
        """``kind``, but None for a child of a program in ``started`` (real paths)."""
        kind = self.kind(args, kwargs)
        if kind is None:
            return None
        with open(args[2]) as fh:
            target = os.path.realpath(json.load(fh)["target_file"])
        return None if target in started else kind

    def server(self, kind: str, env: dict) -> Zygote:
        """The server of ``kind`` started with ``env`` (but the run's own dump file)."""
        env = {k: v for k, v in env.items() if k not in PER_RUN}
        with self.lock:
            z = self.servers.get(kind)
            if z is not None and z.given != env:  # its children may still run: it ends with the others
                self.restarted.append(sorted(k for k in set(env) | set(z.given) if env.get(k) != z.given.get(k)))
                self.retired.append(z)
                z = None
            if z is None or z.proc.poll() is not None:
                z = self.servers[kind] = Zygote(env)
            return z

    def close(self) -> None:
        with self.lock:
            for z in [*self.servers.values(), *self.retired]:
                z.close()
            self.servers.clear()
            self.retired.clear()


_zygotes: Zygotes | None = None


def zygotes() -> Zygotes:
    global _zygotes
    if _zygotes is None:
        _zygotes = Zygotes()
    return _zygotes


def stop() -> None:
    """End this process's servers (the session's end)."""
    global _zygotes
    if _zygotes is not None:
        _zygotes.close()
        _zygotes = None


@contextlib.contextmanager
def forked_children(started=()):
    """While active, the runner's children are forked from the servers (``zygotes()``), but those of the
    programs in ``started`` (their tests are about the process: they are started as before); every other
    ``Popen`` is ``subprocess``'s."""
    from xlalint.verify import runner

    zs = zygotes()
    started = frozenset(os.path.realpath(p) for p in started)

    def popen(args, **kwargs):
        kind = zs.route(args, kwargs, started)
        if kind is None:
            return subprocess.Popen(args, **kwargs)
        child = zs.server(kind, kwargs["env"]).popen(args, **kwargs)
        zs.forked += 1
        return child

    routed = types.SimpleNamespace(**{k: getattr(subprocess, k) for k in dir(subprocess) if not k.startswith("__")})
    routed.Popen = popen
    saved = runner.subprocess
    runner.subprocess = routed
    try:
        yield zs
    finally:
        runner.subprocess = saved
