"""Run the user's program under the recorder's attribution, and say how it ended.

The program runs as ``__main__`` (instrumented with probes under event attribution, through ``runpy``
otherwise) or, for ``file.py::function``, its file is imported under another name and the zero-argument
function called. How it ended is the result's ``status``: finished, max_steps, timeout, interrupted,
no_barrier, exit (``sys.exit``), error (with the user's traceback and frames).
"""

from __future__ import annotations

import builtins
import os
import signal
import sys
import threading
import time
import traceback

from .event_attribution import install_probes, instrumented_code, make_event_mode, source_of
from .line_tracer import make_global_tracer
from .recorder import StopVerify

#: Frames of this package are never the user's: a traceback leaves them out.
CHILD_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "")


def run_program(rec, spec: dict) -> tuple:
    """(status, extra): how the program ended, and what the result says about it."""
    target = spec["target_file"]
    func = spec.get("function")
    status, extra = "finished", {}
    events = rec.attribution == "events"
    mode = None
    if events:
        install_probes(rec)
        mode = make_event_mode(rec)
    rec.t_start = rec.t_last_step = time.perf_counter()
    rec.cpu_last_step = time.process_time()
    rec.reset_iterations()
    if rec.trace_enabled:
        tracer = make_global_tracer(rec)
        threading.settrace(tracer)
        sys.settrace(tracer)
    try:
        if mode is not None:
            mode.__enter__()
        if func:
            status, extra = _call_function(rec, target, func, events)
        elif events:
            _exec_instrumented_main(rec, target)
        else:
            import runpy

            runpy.run_path(target, run_name="__main__")
    except StopVerify as exc:
        status = str(exc.args[0]) if exc.args else "max_steps"
        if status in ("timeout", "interrupted"):
            extra = {"timeout_stack": rec.timeout_stack}
        elif status == "no_barrier" and rec.no_barrier is None:
            status = "max_steps"
    except SystemExit as exc:
        code = exc.code
        status, extra = "exit", {"program_exit_code": code if isinstance(code, int) else (0 if code is None else 1)}
    except BaseException as exc:  # noqa: BLE001  (the user's crash is our report, not our crash)
        sys.settrace(None)
        if isinstance(exc, StopVerify):
            status = "max_steps"
        else:
            status, extra = "error", {"traceback": user_traceback(exc)}
            rec.where = _crash_frames(rec, exc)
    finally:
        sys.settrace(None)
        threading.settrace(None)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        if mode is not None:
            try:
                mode.__exit__(None, None, None)
            except Exception:  # noqa: BLE001  (the program left the mode stack unbalanced)
                pass
    if rec.trace_enabled:
        rec.flush()
    elif events:
        rec.flush(None)
    return status, extra


def _call_function(rec, target: str, func: str, events: bool) -> tuple:
    import importlib.util

    modname = "__xlalint_verify_target__"
    loader = rec.loader_class(modname, target) if events else None
    sp = importlib.util.spec_from_file_location(modname, target, loader=loader)
    mod = importlib.util.module_from_spec(sp)
    sys.modules[modname] = mod
    sp.loader.exec_module(mod)
    fn = getattr(mod, func, None)
    if fn is None or not callable(fn):
        sys.settrace(None)
        return "error", {
            "traceback": f"{target} has no function {func!r}",
            "error_kind": "no_function",
        }
    fn()
    return "finished", {}


def _exec_instrumented_main(rec, target: str) -> None:
    import types

    def read(path):
        with open(path, "rb") as fh:
            return fh.read()

    code = instrumented_code(source_of(rec, target, read), target, rec)
    main_mod = types.ModuleType("__main__")
    main_mod.__dict__.update(__file__=target, __cached__=None, __loader__=None, __package__=None,
                             __spec__=None, __builtins__=builtins)
    sys.modules["__main__"] = main_mod
    exec(code, main_mod.__dict__)


def _crash_frames(rec, exc: BaseException) -> list:
    """The user's frames of the exception's traceback, outermost first."""
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if rec.is_user(code.co_filename):
            frames.append({"path": os.path.realpath(code.co_filename), "line": tb.tb_lineno,
                           "function": code.co_name})
        tb = tb.tb_next
    return frames


def user_traceback(exc: BaseException) -> str:
    """The traceback without our frames, runpy's or importlib's (the user wants to see their code)."""
    noise = (CHILD_PACKAGE_DIR, os.sep + "runpy.py", "<frozen runpy", "<frozen importlib._bootstrap")
    out = []
    for chunk in traceback.format_exception(type(exc), exc, exc.__traceback__):
        if chunk.startswith('  File "') and any(n in chunk.split('"')[1] for n in noise):
            continue
        out.append(chunk)
    return "".join(out)
