"""How a run is stopped from outside, and what the program's own ``os._exit`` does to it.

A stop request (the timeout, or xlalint was interrupted) comes as a line on the command pipe. The control
thread notes where the program is, writes what was measured so far at once (the main thread may be deep in
an XLA compile, which releases the GIL but does not return to Python for minutes), then raises StopVerify
in the main thread through SIGUSR1.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from .recorder import StopVerify


def format_where(where: list) -> list:
    return [f'  File "{w["path"]}", line {w["line"]}, in {w["function"]}\n' for w in where]


def listen_for_stop(rec, writer, command_fd) -> None:
    """SIGUSR1 raises StopVerify in the main thread; the control thread (when xlalint gave a command pipe)
    turns each request on the pipe into a partial result and that signal."""

    def control(fd: int):
        buf = b""
        while True:
            try:
                chunk = os.read(fd, 256)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                return  # xlalint closed it: the watchdog process takes care of the rest
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                reason = line.decode("ascii", "replace").strip() or "timeout"
                rec.note_stop(reason)
                try:
                    writer.write(reason, final=False, timeout_stack="".join(format_where(rec.where)))
                except Exception:  # noqa: BLE001
                    pass
                try:
                    signal.pthread_kill(rec.main_thread, signal.SIGUSR1)
                except (OSError, ValueError):
                    pass

    def on_stop(signum, frame):
        reason = rec.stop_reason if rec.stop_reason in ("timeout", "interrupted") else "timeout"
        rec.stop_requested = True
        if not rec.where:
            rec.where = rec.user_stack(frame)
        rec.timeout_stack = "".join(format_where(rec.where))
        raise StopVerify(reason)

    rec.timeout_stack = ""
    signal.signal(signal.SIGUSR1, on_stop)
    if command_fd is not None:
        threading.Thread(target=control, args=(int(command_fd),), name="xlalint-verify-control",
                         daemon=True).start()


def exit_writing_result(writer):
    """What ``os._exit`` becomes while the program runs: os._exit in user code skips every finally, so the
    result is written first."""
    real_exit = os._exit

    def _exit(code):
        try:
            writer.write("os_exit", program_exit_code=int(code))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            real_exit(0)

    return _exit
