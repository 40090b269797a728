"""Run the user's program in a child process under torch_xla and bring back what it recorded.

A crash, a hang or an ``os._exit`` in the user's code ends the child, never xlalint.

The child (``child/``) runs by its path and imports nothing of this side; this side takes one plain helper
from it, ``child.process_tree.kill_tree``, to end the child's whole process tree.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from xlalint.verify import graphs as graphs_mod
from xlalint.verify.child.process_tree import kill_tree

#: The child's entry script, run by its path (xlalint/verify/child/__main__.py says why).
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child", "__main__.py")

#: After the timeout the child gets this long to stop the program and write what it saw, then it is killed.
GRACE_SECONDS = 10.0
#: After SIGINT/SIGTERM/SIGHUP the child gets this long to stop and write what it measured, then it is killed.
INTERRUPT_GRACE_SECONDS = 3.0

#: The signals that end a --verify run (and the program it runs) with the report of what was measured so far.
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


class Interrupts:
    """While active (main thread only), SIGINT, SIGTERM and SIGHUP do not kill xlalint: they are recorded,
    the running child is asked to stop, and the caller reports what was measured, marked as interrupted."""

    signum: int | None = None

    @classmethod
    @contextlib.contextmanager
    def catch(cls):
        if threading.current_thread() is not threading.main_thread():
            yield cls
            return
        cls.signum = None
        old = {}

        def handler(signum, frame):
            if cls.signum is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt  # a second Ctrl-C: stop waiting (the child is still killed)
            cls.signum = signum

        try:
            for sig in STOP_SIGNALS:
                old[sig] = signal.signal(sig, handler)
            yield cls
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)

    @classmethod
    def name(cls) -> str | None:
        return signal.Signals(cls.signum).name if cls.signum else None


@dataclass
class RawRun:
    target_file: str
    function: str | None
    result: dict | None  # what the child wrote; None when it died without writing
    returncode: int | None
    stdout: str
    stderr: str
    elapsed: float
    timed_out: bool
    killed: bool
    interrupted: str | None = None  # SIGINT | SIGTERM | SIGHUP when xlalint was asked to stop
    graphs: list = field(default_factory=list)  # graphs_mod.Graph, in dump order


def _kill_group(proc) -> None:
    """The child's whole session (it is a session leader), every process it started, and the child."""
    kill_tree(proc.pid)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def split_target(target: str) -> tuple:
    """``path/to/file.py::function`` -> (file, function); ``train.py`` -> (file, None)."""
    if "::" in target:
        path, func = target.rsplit("::", 1)
        return path, (func or None)
    return target, None


def project_root(target_file: str) -> str | None:
    """The user's project: the nearest directory at or above the program with a pyproject.toml, setup.py,
    setup.cfg or .git (the linter's own notion, semantics/project.py). None when there is none."""
    from xlalint.semantics.project import marked_root

    return marked_root(os.path.dirname(os.path.realpath(target_file)))


def child_env(dump_path: str | None) -> dict:
    env = dict(os.environ)
    env.setdefault("PJRT_DEVICE", "CPU")  # whatever the user set, else the CPU device
    if dump_path:
        env["XLA_IR_DEBUG"] = "1"  # every IR node carries the file:line that created it
        env["XLA_SAVE_TENSORS_FILE"] = dump_path
        env["XLA_SAVE_TENSORS_FMT"] = "text"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_child(
    target: str,
    program_args: list,
    *,
    max_steps: int = 20,
    timeout: float = 300.0,
    trace: bool | str = True,
    graph_dumps: bool = True,
    python: str | None = None,
    user_roots: list | None = None,
    sources: dict | None = None,
) -> RawRun:
    """Run the program in the child. ``sources``: {real path: text} run instead of those user files'
    contents (``--fix-impact``'s fixed copies, held in memory: the files are never written)."""
    target_file, function = split_target(target)
    target_file = os.path.abspath(target_file)
    with tempfile.TemporaryDirectory(prefix="xlalint-verify-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        dump_path = os.path.join(tmp, "graphs.txt") if graph_dumps else None
        # The user's code: any module under the project root (else the program's directory and the working
        # directory); site-packages, the standard library and xlalint itself never are.
        root = project_root(target_file)
        roots = user_roots or ([root] if root else [os.path.dirname(target_file), os.getcwd()])
        spec = {
            "target_file": target_file,
            "function": function,
            "argv": list(program_args),
            "max_steps": max_steps,
            "result_path": result_path,
            "dump_path": dump_path,
            "user_roots": roots,
            "trace": bool(trace),
            "attribution": "lines" if trace == "lines" else "events",
            "sources": {os.path.realpath(p): text for p, text in (sources or {}).items()},
        }
        spec_path = os.path.join(tmp, "spec.json")
        out_path = os.path.join(tmp, "stdout.txt")
        err_path = os.path.join(tmp, "stderr.txt")
        t0 = time.monotonic()
        timed_out = killed = False
        interrupted = None
        # Two pipes: commands ("timeout", "interrupted") to the child's control thread, and a watchdog pipe
        # xlalint never writes to: its EOF (xlalint is gone, even by SIGKILL) makes the child's watchdog
        # process kill the program's whole session.
        cmd_r, cmd_w = os.pipe()
        dog_r, dog_w = os.pipe()
        spec.update(command_fd=cmd_r, watchdog_fd=dog_r, parent_pid=os.getpid())
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                proc = subprocess.Popen(
                    [python or sys.executable, CHILD, spec_path],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=child_env(dump_path),
                    cwd=os.getcwd(),
                    start_new_session=True,  # its threads and children die with it
                    pass_fds=(cmd_r, dog_r),
                )
            finally:
                os.close(cmd_r)
                os.close(dog_r)

            def ask(reason: str) -> None:
                try:
                    os.write(cmd_w, reason.encode() + b"\n")
                except OSError:
                    pass

            try:
                asked_at = grace = None
                deadline = t0 + timeout
                while True:
                    try:
                        proc.wait(timeout=0.05)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    now = time.monotonic()
                    if Interrupts.signum and interrupted is None:
                        interrupted = Interrupts.name()
                        ask("interrupted")
                        asked_at, grace = now, INTERRUPT_GRACE_SECONDS
                    elif asked_at is None and now >= deadline:
                        timed_out = True
                        ask("timeout")  # the child stops the program and writes its result
                        asked_at, grace = now, GRACE_SECONDS
                    elif asked_at is not None and now - asked_at > grace:
                        killed = True  # stuck where a signal cannot reach Python code
                        break
            finally:
                # A normal end, a timeout or a Ctrl-C here: nothing of the child's session (its own
                # processes included: it runs in a session of its own) outlives this call.
                _kill_group(proc)
                os.close(cmd_w)
                os.close(dog_w)
        elapsed = time.monotonic() - t0
        result = None
        if os.path.exists(result_path):
            with open(result_path) as fh:
                result = json.load(fh)
        graphs = []
        if dump_path and result is not None:
            names = sorted(n for n in os.listdir(tmp) if n.startswith("graphs.txt"))
            graphs = graphs_mod.parse(graphs_mod.read_dump([os.path.join(tmp, n) for n in names]))
        with open(out_path, errors="replace") as fh:
            stdout = fh.read()
        with open(err_path, errors="replace") as fh:
            stderr = fh.read()
    return RawRun(
        target_file=target_file,
        function=function,
        result=result,
        returncode=proc.returncode,
        stdout=stdout,
        stderr=stderr,
        elapsed=elapsed,
        timed_out=timed_out,
        killed=killed,
        interrupted=interrupted,
        graphs=graphs,
    )
