"""The wrappers the child puts around torch_xla and torch, each reporting to the ``Recorder``.

- The step barrier: every barrier (``torch_xla.sync()``, ``xm.mark_step()``, ``xm.optimizer_step(barrier=
  True)``, an ``MpDeviceLoader`` iteration) goes through ``torch_xla._XLAC._xla_step_marker``; its wrapper
  records the per-step totals and stops the program once ``max_steps`` steps have run.
- ``nn.Module.train``: whether the model is in eval mode when a graph compiles (XLA004's evidence).
- A global optimizer step post-hook: a training loop that never reaches a barrier (a missing step barrier).
"""

from __future__ import annotations

import os
import sys
import time

from .recorder import StopVerify

#: Optimizer steps of one optimizer with no barrier in between, each with a larger pending graph, after
#: which the run is stopped and the missing barrier named (nanoGPT: iterations of 3.3, 4.7, 12.8, 20 s...).
NO_BARRIER_ITERATIONS = 3


def install_step_hook(rec):
    import torch_xla

    X = torch_xla._XLAC
    real = X._xla_step_marker

    def _xla_step_marker(*args, **kwargs):
        if rec.stop_requested and rec.step > rec.max_steps:
            # The program swallowed StopVerify (or tracing is off): stop at the next barrier.
            raise StopVerify(rec.stop_reason)
        events = rec.attribution == "events"
        if events:
            rec.flush(sys._getframe(1))
        t0 = time.perf_counter()
        rec.inside = ("a step barrier (torch_xla.sync / xm.mark_step)", t0)
        try:
            result = real(*args, **kwargs)
        finally:
            rec.inside = None
        if events:
            # the step's compile and execution: charged to the barrier's caller, with the time it waited
            rec.flush(sys._getframe(1), time.perf_counter() - t0)
        rec.end_step()
        return result

    X._xla_step_marker = _xla_step_marker


def install_mode_hook(rec):
    """Know whether the model is in eval mode when a graph compiles (XLA004's evidence)."""
    import torch.nn as nn

    real_train = nn.Module.train
    depth = [0]

    def train(module, mode=True):
        depth[0] += 1
        try:
            return real_train(module, mode)
        finally:
            depth[0] -= 1
            if depth[0] == 0:  # the outermost call (not the recursion into children)
                if rec.attribution == "lines":
                    rec.flush()
                elif rec.attribution == "events":
                    rec.flush(sys._getframe(1))
                rec.eval_mode = not bool(mode)

    train.__doc__ = real_train.__doc__
    nn.Module.train = train


def install_optimizer_hook(rec):
    """Each ``optimizer.step()`` of a training loop: with no step barrier since the previous one of the
    same optimizer, measure the pending graph of its first parameter (IR nodes) and what the iteration
    cost; when it grew for NO_BARRIER_ITERATIONS iterations in a row, stop: the barrier is missing."""
    import torch_xla
    from torch.optim.optimizer import register_optimizer_step_post_hook

    X = torch_xla._XLAC
    rec.since_barrier = {}  # id(optimizer) -> [iteration rows]

    def ir_nodes(opt):
        for group in opt.param_groups:
            for p in group["params"]:
                try:
                    text = X._get_xla_tensors_text([p])
                except Exception:  # noqa: BLE001
                    return None
                return sum(1 for ln in text.splitlines() if ln.lstrip().startswith("%"))
        return None

    def hook(opt, args, kwargs):
        rows = rec.since_barrier.setdefault(id(opt), [])
        if len(rows) >= NO_BARRIER_ITERATIONS or rec.stop_requested:
            return
        now = time.perf_counter()
        ct = rec.metric_data("CompileTime")
        row = {
            "ir_nodes": ir_nodes(opt),
            "uncached": rec.counter_value("UncachedCompile") or 0,
            "cached": rec.counter_value("CachedCompile") or 0,
            "d2h": rec.read_d2h(),
            "compile_ns": ct[1] if ct else 0,
            "t": now,
        }
        rows.append(row)
        sizes = [r["ir_nodes"] for r in rows]
        if len(rows) < NO_BARRIER_ITERATIONS or None in sizes:
            return
        if all(b > a for a, b in zip(sizes, sizes[1:])):
            cur, callers = rec.locate(sys._getframe(1))
            frames = [cur] + list(callers)
            rec.no_barrier = no_barrier_record(cur, callers, rows, rec.iter_base)
            rec.where = [{"path": os.path.realpath(f), "line": ln, "function": ""} for f, ln in reversed(frames)]
            rec.stop_requested = True
            rec.stop_reason = "no_barrier"
            raise StopVerify("no_barrier")

    register_optimizer_step_post_hook(hook)


def no_barrier_record(cur, callers, rows: list, base: dict) -> dict:
    """What the result says of a missing barrier: the ``optimizer.step()`` line and its user callers, and
    per iteration the pending graph's IR nodes and what the iteration cost (counted from the last barrier,
    or the start, for the first)."""

    def delta(i, name):
        return rows[i][name] - (rows[i - 1][name] if i else base[name])

    return {
        "step_line": [os.path.realpath(cur[0]), cur[1]],
        "callers": [[os.path.realpath(f), ln] for f, ln in callers],
        "iterations": [
            {
                "ir_nodes": r["ir_nodes"],
                "uncached": delta(i, "uncached"),
                "cached": delta(i, "cached"),
                "transfers": delta(i, "d2h"),
                "compile_s": round(delta(i, "compile_ns") / 1e9, 3),
                "wall_s": round(delta(i, "t"), 3),
            }
            for i, r in enumerate(rows)
        ],
    }
