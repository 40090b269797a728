"""The server side of tests/verify_zygote.py: a process that has imported torch and torch_xla once and forks,
for each request, a child that runs ``xlalint/verify/child/__main__.py`` as ``python CHILD spec.json``
would (its standard streams, its working directory, its command and watchdog pipes at the descriptor
numbers the spec names, a session of its own).

It runs as ``python -c`` with its code compiled under a ``<...>`` file name, so that none of its frames is
ever the user's code to the child's recorder (which treats ``<...>`` names as no file). Standard library
only, besides torch and torch_xla; it exits when its standard input (a pipe from the test process) has
closed and its children have ended.

Protocol, on a SOCK_SEQPACKET Unix socket, one connection per run: the client sends one message, JSON
``{"argv": [CHILD, spec], "cwd": ..., "env": {name: value set in the child}, "fds": [numbers]}`` with
the descriptors stdin, stdout, stderr and then those to place at ``fds``; the server answers ``pid`` and,
when the child has ended, its exit code as ``subprocess`` gives it (negative: killed by that signal).
"""

import json
import os
import runpy
import select
import socket
import sys


def run_child(request: dict, fds: list) -> None:
    """In the forked process: become what ``subprocess.Popen([python, CHILD, spec], start_new_session=True,
    pass_fds=...)`` starts, then run the child's entry script as ``__main__``. Never returns."""
    try:
        os.setsid()
        import fcntl

        above = max([2, *request["fds"], *fds]) + 1  # out of the way of every number the child must own
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, above) for fd in fds]
        for target, fd in zip([0, 1, 2] + list(request["fds"]), moved):
            os.dup2(fd, target)  # inheritable, as Popen's pass_fds are
        keep = sorted({0, 1, 2, *request["fds"]})
        lo = 0
        for k in keep:
            if lo < k:  # os.closerange(k, k) would close every descriptor (close_range(k, k - 1))
                os.closerange(lo, k)
            lo = k + 1
        os.closerange(lo, 65536)
        os.chdir(request["cwd"])
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        runpy.run_path(request["argv"][0], run_name="__main__")  # ends with os._exit
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(1)


def serve(path: str) -> None:
    import torch  # noqa: F401  (what the child imports first: xlalint/verify/child/main.py)
    import torch_xla  # noqa: F401
    import torch_xla.core.xla_model  # noqa: F401

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(64)
    print("ready", flush=True)
    waiting = {}  # pid -> the connection that waits for its exit code
    closing = False  # the test process closed our standard input: end when the running children have
    while not (closing and not waiting):
        watched = [srv] if closing else [srv, sys.stdin]
        ready, _, _ = select.select(watched, [], [], 0.02 if waiting else None)
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if not pid:
                break
            conn = waiting.pop(pid, None)
            if conn is not None:
                try:
                    conn.send(str(os.waitstatus_to_exitcode(status)).encode())
                except OSError:
                    pass
                conn.close()
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            closing = True  # the test process is done with us, or gone (the children have their watchdogs)
            continue
        if srv not in ready:
            continue
        conn, _ = srv.accept()
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 16)
        request = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            srv.close()
            conn.close()
            run_child(request, fds)
        for fd in fds:
            os.close(fd)
        conn.send(str(pid).encode())
        waiting[pid] = conn


if __name__ == "__main__":
    serve(sys.argv[1])
