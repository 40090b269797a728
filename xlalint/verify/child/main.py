"""The child's run, phase by phase: read the spec, guard the processes, listen for a stop request, start
torch_xla and the hooks, run the program, write the result.

Whatever happens to the program (a crash, ``sys.exit``, ``os._exit``, the timeout, an interrupt, a
missing step barrier), the result file is written: the user's crash is the report, never the child's.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from .hooks import install_mode_hook, install_optimizer_hook, install_step_hook
from .process_tree import set_parent_death_signal, start_watchdog
from .program import run_program
from .recorder import Recorder, StopVerify
from .result_file import ResultWriter
from .stop_control import exit_writing_result, listen_for_stop


def main(spec_path: str) -> int:
    with open(spec_path) as fh:
        spec = json.load(fh)
    if not guard_processes(spec):
        return 0  # xlalint died before the guards were up
    rec = Recorder(spec)
    writer = ResultWriter(rec, spec["result_path"])
    listen_for_stop(rec, writer, spec.get("command_fd"))
    os_exit = exit_writing_result(writer)
    target = spec["target_file"]
    sys.argv = [target] + list(spec.get("argv", []))
    sys.path[0] = os.path.dirname(os.path.abspath(target))
    if not start_torch_xla(rec, writer):
        return 0
    os._exit = os_exit
    status, extra = run_program(rec, spec)
    writer.write(status, **extra)
    return 0


def guard_processes(spec: dict) -> bool:
    """The watchdog process and the parent-death signal; False when xlalint is already gone."""
    if spec.get("watchdog_fd") is not None:
        start_watchdog(int(spec["watchdog_fd"]), os.getpid())
    set_parent_death_signal()
    return not (spec.get("parent_pid") and os.getppid() != int(spec["parent_pid"]))


def start_torch_xla(rec, writer) -> bool:
    """Import torch and torch_xla, install the hooks, bring the device up and seed the generators before
    the user's code is timed. False (the result written) when it failed or the run was stopped meanwhile."""
    try:
        import torch  # noqa: F401
        import torch_xla
        import torch_xla.core.xla_model  # noqa: F401  (what user code usually imports first)

        rec.setup_counters()
        install_step_hook(rec)
        install_mode_hook(rec)
        install_optimizer_hook(rec)
        torch_xla.device()  # bring the device up before timing the user's code
        seed_everything(0)
        rec.start_totals = rec.totals()
    except StopVerify as exc:
        writer.write(str(exc.args[0]) if exc.args else "timeout", timeout_stack="(still starting torch_xla)")
        return False
    except BaseException as exc:  # noqa: BLE001
        writer.write("setup_error", traceback="".join(traceback.format_exception(exc)))
        return False
    return True


def seed_everything(seed: int) -> None:
    """Same data, same shapes, run after run: the graph-dump re-run that finds a recompile's root cause
    must see the graphs the first run saw, and a fixture's verdict must not depend on luck. A program
    that seeds its own generators overrides this."""
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
