"""The child process of ``xlalint --verify``: run the user's program under torch_xla and record counters per line.

Run as a plain script (``python _child.py spec.json``), never imported by the parent: it must not depend on
the rest of xlalint, and nothing here may outlive a crash of the user's code. Writes one JSON result file.

How attribution works (see README of the package for the measurements):
- ``sys.settrace`` with a global tracer that returns a local tracer ONLY for frames of user files, so
  library frames cost one cheap call event and no line events.
- At every line/return event of a user frame, a cheap gate (4 counters, ~0.3 us each) is compared with the
  last snapshot; when it moved, the exact figures (TransferFromDeviceTime sample count, which costs up to
  ~50 us with 1024 samples kept, and the ``aten::*`` counters, ~3 us) are read and the difference is
  charged to the line that was executing since the last event.
- Step barriers all go through ``torch_xla._XLAC._xla_step_marker``; a wrapper records the per-step totals
  and asks the tracer to stop the program at the next user line once ``max_steps`` steps have run.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import signal
import sys
import sysconfig
import threading
import time
import traceback


class StopVerify(BaseException):
    """Raised into the user's program to end it after max_steps steps or at the timeout.

    A BaseException so that ``except Exception:`` in user code does not swallow it.
    """


GATE_COUNTERS = ("UncachedCompile", "CachedCompile", "xla::_to_cpu", "xla::_to_copy")


def _proc_table() -> dict:
    """pid -> (ppid, sid) for every process we can see (Linux /proc); {} elsewhere."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open(f"/proc/{n}/stat", "rb") as fh:
                data = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        rest = data[data.rfind(")") + 2:].split()  # after "pid (comm) "
        try:
            out[int(n)] = (int(rest[1]), int(rest[3]))  # state ppid pgrp session
        except (IndexError, ValueError):
            continue
    return out


def kill_tree(root: int, sig: int = signal.SIGKILL, spare: int | None = None) -> list:
    """Send ``sig`` to ``root``'s whole session and to every descendant of ``root`` (a process the program
    started in a session of its own too). Descendants are found BEFORE anything is killed: once their parent
    is gone they are re-parented and could not be found any more. Returns the pids signalled."""
    table = _proc_table()
    victims = {p for p, (_pp, sid) in table.items() if sid == root}
    victims.add(root)
    grew = True
    while grew:
        grew = False
        for p, (pp, _sid) in table.items():
            if pp in victims and p not in victims:
                victims.add(p)
                grew = True
    victims.discard(spare)
    for p in sorted(victims, key=lambda p: p != root):  # the program itself first: it stops spawning
        try:
            os.kill(p, sig)
        except OSError:
            pass
    if spare != root:
        try:
            os.killpg(root, sig)
        except OSError:
            pass
    return sorted(victims)


def _start_watchdog(fd: int, child_pid: int) -> None:
    """Fork a tiny process that waits for EOF on the watchdog pipe (xlalint holds the other end). EOF means
    xlalint is gone, even by SIGKILL: the watchdog kills the program's whole session, itself last.
    Forked before torch or any thread exists, it runs no Python code of the program's."""
    pid = os.fork()
    if pid:
        os.close(fd)
        return
    try:
        try:
            os.setpgid(0, 0)  # its own group: a killpg of the program's group does not take it early
        except OSError:
            pass
        while True:
            try:
                if not os.read(fd, 64):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        kill_tree(child_pid, spare=os.getpid())
    finally:
        os._exit(0)


def _set_parent_death_signal() -> None:
    """PR_SET_PDEATHSIG: the kernel kills this process when xlalint dies (Linux; a no-op elsewhere)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


def _is_library_path(path: str, excluded: tuple) -> bool:
    parts = path.replace("\\", "/").split("/")
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return path.startswith(excluded)


class Recorder:
    def __init__(self, spec: dict):
        self.spec = spec
        self.max_steps = int(spec["max_steps"])
        self.roots = tuple(os.path.join(os.path.realpath(r), "") for r in spec["user_roots"])
        here = os.path.dirname(os.path.realpath(__file__))
        # xlalint itself, the standard library and the interpreter prefixes are never user code.
        excluded = {os.path.join(here, "")}
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            p = sysconfig.get_paths().get(key)
            if p:
                excluded.add(os.path.join(os.path.realpath(p), ""))
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix):
            excluded.add(os.path.join(os.path.realpath(p), ""))
        self.excluded = tuple(excluded)
        self.target = os.path.realpath(spec["target_file"])
        self.is_user_cache: dict = {}
        self.step = 0
        self.stop_requested = False
        self.stop_reason = None
        self.cur = None  # (filename, line) executing since the last event
        self.hits: dict = {}  # (file, line, step) -> count
        self.events: dict = {}  # (file, line, step) -> [d2h, uncached, cached, {aten: n}, eval_uncached]
        self.via: dict = {}  # the same, charged to each user caller on the event's stack
        self.paths: dict = {}  # (file, line) -> {(caller (file, line), ...): n}
        self.user_code: dict = {}  # code object -> is it the user's
        self.attribution = spec.get("attribution", "events") if spec.get("trace", True) else "off"
        self.probe_counts: list = []  # probe id -> runs since the last step barrier
        self.probe_spans: list = []  # probe id -> (file, first line, last line)
        self.probe_hits: dict = {}  # (probe id, step) -> runs
        self.op = None  # the torch function the main thread is in (event attribution), and since when
        self.op_t0 = 0.0
        self.mode_code = None
        self.steps: list = []
        self.t_start = time.perf_counter()
        self.t_last_step = self.t_start
        self.cpu_last_step = time.process_time()
        self.trace_enabled = bool(spec.get("trace", True)) and spec.get("attribution", "events") == "lines"
        self.dump_glob = spec.get("dump_path")
        self.eval_mode = False  # set by the user's last model.eval()/model.train(False) call
        self.main_thread = threading.get_ident()
        self.no_barrier = None
        self.since_barrier = {}
        self.iter_base = {}
        self.inside = None  # (what, perf_counter at entry) while the main thread is inside a torch_xla barrier
        self.where: list = []  # the user's frames when the run was stopped (timeout, interrupt)
        self.stopped_inside = None

    def user_stack(self, frame) -> list:
        """The user's frames of a stack, outermost first: [{"path", "line", "function"}]."""
        out = []
        while frame is not None:
            code = frame.f_code
            if self.is_user(code.co_filename):
                out.append({"path": os.path.realpath(code.co_filename), "line": frame.f_lineno, "function": code.co_name})
            frame = frame.f_back
        out.reverse()
        return out

    def note_stop(self, reason: str) -> None:
        """Called from the control thread: remember where the main thread is and what it is doing."""
        self.stop_reason = reason
        self.stop_requested = True
        frame = sys._current_frames().get(self.main_thread)
        self.where = self.user_stack(frame)
        inside = self.inside
        info = {}
        if inside is None and frame is not None and frame.f_code is self.mode_code and self.op is not None:
            name = getattr(self.op, "__qualname__", None) or getattr(self.op, "__name__", None) or str(self.op)
            inside = (f"`{name}`", self.op_t0)
        if inside is not None:
            info = {"what": inside[0], "seconds": round(time.perf_counter() - inside[1], 2)}
        try:
            uc = self._cv("UncachedCompile") or 0
            ct = self._md("CompileTime")
            done = ct[0] if ct else 0
            if uc > done:
                # UncachedCompile counts a compile when it starts, CompileTime when it ends.
                info["compiling"] = True
        except Exception:  # noqa: BLE001
            pass
        self.stopped_inside = info or None

    # -- user files -----------------------------------------------------------------------------------
    def is_user(self, filename: str) -> bool:
        r = self.is_user_cache.get(filename)
        if r is None:
            if filename.startswith("<"):
                r = False
            else:
                real = os.path.realpath(filename)
                if real == self.target:
                    r = True
                elif _is_library_path(real, self.excluded):
                    r = False
                else:
                    r = real.startswith(self.roots)
            self.is_user_cache[filename] = r
        return r

    # -- counters -----------------------------------------------------------------------------------
    def setup_counters(self):
        import torch_xla

        X = torch_xla._XLAC
        self._cv = X._xla_counter_value
        self._md = X._xla_metric_data
        self._names = X._xla_counter_names
        self.gate = self.read_gate()
        self.d2h = self.read_d2h()
        self.aten = self.read_aten()

    def read_gate(self):
        cv = self._cv
        return (cv("UncachedCompile"), cv("CachedCompile"), cv("xla::_to_cpu"), cv("xla::_to_copy"))

    def read_d2h(self) -> int:
        m = self._md("TransferFromDeviceTime")
        return m[0] if m else 0

    def read_aten(self) -> dict:
        cv = self._cv
        return {n: cv(n) for n in self._names() if n.startswith("aten::") or n == "xla::_local_scalar_dense"}

    def flush(self, frame=None):
        """Charge whatever moved since the last check: to the innermost user frame at or above ``frame``
        (event attribution), or to the line that was running (self.cur, the line tracer)."""
        gate = self.read_gate()
        old = self.gate
        if gate == old:
            return
        self.gate = gate
        d2h = self.read_d2h()
        aten = self.read_aten()
        dd = d2h - self.d2h
        duc = (gate[0] or 0) - (old[0] or 0)
        dcc = (gate[1] or 0) - (old[1] or 0)
        fb = {}
        for n, v in aten.items():
            dv = v - self.aten.get(n, 0)
            if dv:
                fb[n] = dv
        self.d2h = d2h
        self.aten = aten
        if not (dd or duc or dcc or fb):
            return
        if frame is not None:
            cur, callers = self.locate(frame)
        else:
            cur, callers = (self.cur or ("<startup>", 0)), ()
        step = self.step
        eval_uc = duc if self.eval_mode else 0
        self._add(self.events, (cur[0], cur[1], step), dd, duc, dcc, fb, eval_uc)
        if callers:
            # The same event, seen from each caller up the stack: a finding at a caller's line ("log(loss)"
            # in train.py) is on this event's stack and explains it; the event itself is charged once, above.
            for c in set(callers):
                self._add(self.via, (c[0], c[1], step), dd, duc, dcc, fb, eval_uc)
            per = self.paths.setdefault(cur, {})
            if len(per) < 8 or callers in per:
                per[callers] = per.get(callers, 0) + 1

    @staticmethod
    def _add(table, key, dd, duc, dcc, fb, eval_uc):
        ev = table.get(key)
        if ev is None:
            ev = table[key] = [0, 0, 0, {}, 0]
        ev[0] += dd
        ev[1] += duc
        ev[2] += dcc
        ev[4] += eval_uc
        for n, v in fb.items():
            ev[3][n] = ev[3].get(n, 0) + v

    def locate(self, frame):
        """(file, line) of the innermost user frame at or above ``frame``, and its user callers, innermost first."""
        uc = self.user_code
        is_user = self.is_user
        f = frame
        while f is not None:
            code = f.f_code
            u = uc.get(code)
            if u is None:
                u = uc[code] = is_user(code.co_filename)
            if u:
                break
            f = f.f_back
        if f is None:
            return ("<startup>", 0), ()
        cur = (f.f_code.co_filename, f.f_lineno)
        callers = []
        g = f.f_back
        while g is not None:
            code = g.f_code
            u = uc.get(code)
            if u is None:
                u = uc[code] = is_user(code.co_filename)
            if u:
                callers.append((code.co_filename, g.f_lineno))
            g = g.f_back
        return cur, tuple(callers)

    def totals(self) -> dict:
        cv = self._cv
        return {
            "uncached": cv("UncachedCompile") or 0,
            "cached": cv("CachedCompile") or 0,
            "executions": cv("ExecuteComputation") or 0,
            "d2h": self.read_d2h(),
            "aten": self.read_aten(),
        }

    # -- tracing ----------------------------------------------------------------------------------
    def make_global_tracer(self):
        """The tracer for 'call' events: it runs for EVERY Python call (~38,000 per step of a 12-block MLP
        with AdamW), so the library case is one dict lookup on the code object and a return."""
        user_code: dict = {}  # code object -> bool
        is_user = self.is_user
        local = self.local_tracer
        thread_tracer = self.thread_tracer
        get_ident = threading.get_ident
        main = self.main_thread
        rec = self

        def global_tracer(frame, event, arg):
            code = frame.f_code
            u = user_code.get(code)
            if u is None:
                u = user_code[code] = is_user(code.co_filename)
            if not u:
                return None
            if get_ident() != main:
                # Another thread (an MpDeviceLoader worker running the user's collate_fn): count that its
                # lines ran, but charge no counter to them; the counters are process-wide.
                return thread_tracer
            rec.flush()
            rec.cur = (code.co_filename, frame.f_lineno)
            return local

        return global_tracer

    def local_tracer(self, frame, event, arg):
        if event == "line":
            if self.stop_requested:
                raise StopVerify(self.stop_reason)
            self.flush()
            cur = self.cur = (frame.f_code.co_filename, frame.f_lineno)
            key = (cur[0], cur[1], self.step)
            self.hits[key] = self.hits.get(key, 0) + 1
        elif event == "return":
            self.flush()
            # Back in the caller: charge what follows to the nearest user frame up the stack.
            f = frame.f_back
            while f is not None and not self.is_user(f.f_code.co_filename):
                f = f.f_back
            self.cur = (f.f_code.co_filename, f.f_lineno) if f is not None else None
        return self.local_tracer

    def thread_tracer(self, frame, event, arg):
        if event == "line":
            key = (frame.f_code.co_filename, frame.f_lineno, self.step)
            self.hits[key] = self.hits.get(key, 0) + 1
        return self.thread_tracer

    # -- a missing step barrier ------------------------------------------------------------------------
    #: Optimizer steps of one optimizer with no barrier in between, each with a larger pending graph, after
    #: which the run is stopped and the missing barrier named (nanoGPT: iterations of 3.3, 4.7, 12.8, 20 s...).
    NO_BARRIER_ITERATIONS = 3

    def install_optimizer_hook(self):
        """Each ``optimizer.step()`` of a training loop: with no step barrier since the previous one of the
        same optimizer, measure the pending graph of its first parameter (IR nodes) and what the iteration
        cost; when it grew for NO_BARRIER_ITERATIONS iterations in a row, stop: the barrier is missing."""
        import torch_xla
        from torch.optim.optimizer import register_optimizer_step_post_hook

        X = torch_xla._XLAC
        rec = self
        self.since_barrier: dict = {}  # id(optimizer) -> [iteration rows]

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
            if len(rows) >= rec.NO_BARRIER_ITERATIONS or rec.stop_requested:
                return
            now = time.perf_counter()
            ct = rec._md("CompileTime")
            row = {
                "ir_nodes": ir_nodes(opt),
                "uncached": rec._cv("UncachedCompile") or 0,
                "cached": rec._cv("CachedCompile") or 0,
                "d2h": rec.read_d2h(),
                "compile_ns": ct[1] if ct else 0,
                "t": now,
            }
            rows.append(row)
            sizes = [r["ir_nodes"] for r in rows]
            if len(rows) < rec.NO_BARRIER_ITERATIONS or None in sizes:
                return
            if all(b > a for a, b in zip(sizes, sizes[1:])):
                cur, callers = rec.locate(sys._getframe(1))
                frames = [cur] + list(callers)
                rec.no_barrier = {
                    "step_line": [os.path.realpath(cur[0]), cur[1]],
                    "callers": [[os.path.realpath(f), ln] for f, ln in callers],
                    "iterations": [
                        {
                            "ir_nodes": r["ir_nodes"],
                            "uncached": r["uncached"] - (rows[i - 1]["uncached"] if i else rec.iter_base["uncached"]),
                            "cached": r["cached"] - (rows[i - 1]["cached"] if i else rec.iter_base["cached"]),
                            "transfers": r["d2h"] - (rows[i - 1]["d2h"] if i else rec.iter_base["d2h"]),
                            "compile_s": round((r["compile_ns"] - (rows[i - 1]["compile_ns"] if i
                                                                   else rec.iter_base["compile_ns"])) / 1e9, 3),
                            "wall_s": round(r["t"] - (rows[i - 1]["t"] if i else rec.iter_base["t"]), 3),
                        }
                        for i, r in enumerate(rows)
                    ],
                }
                rec.where = [{"path": os.path.realpath(f), "line": ln, "function": ""} for f, ln in reversed(frames)]
                rec.stop_requested = True
                rec.stop_reason = "no_barrier"
                raise StopVerify("no_barrier")

        register_optimizer_step_post_hook(hook)

    def reset_iterations(self):
        """A step barrier (or the start): iterations are counted from here."""
        self.since_barrier = {}
        ct = self._md("CompileTime")
        self.iter_base = {
            "uncached": self._cv("UncachedCompile") or 0,
            "cached": self._cv("CachedCompile") or 0,
            "d2h": self.read_d2h(),
            "compile_ns": ct[1] if ct else 0,
            "t": time.perf_counter(),
        }

    def install_mode_hook(self):
        """Know whether the model is in eval mode when a graph compiles (XLA004's evidence)."""
        import torch.nn as nn

        real_train = nn.Module.train
        rec = self
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

    # -- steps --------------------------------------------------------------------------------------
    def install_step_hook(self):
        import torch_xla

        X = torch_xla._XLAC
        real = X._xla_step_marker
        rec = self

        def _xla_step_marker(*args, **kwargs):
            if rec.stop_requested and rec.step > rec.max_steps:
                # The program swallowed StopVerify (or tracing is off): stop at the next barrier.
                raise StopVerify(rec.stop_reason)
            events = rec.attribution == "events"
            if events:
                rec.flush(sys._getframe(1))
            rec.inside = ("a step barrier (torch_xla.sync / xm.mark_step)", time.perf_counter())
            try:
                result = real(*args, **kwargs)
            finally:
                rec.inside = None
            if events:
                rec.flush(sys._getframe(1))  # the step's compile and execution: charged to the barrier's caller
            rec.end_step()
            return result

        X._xla_step_marker = _xla_step_marker

    def dump_size(self) -> int:
        path = self.dump_glob
        if not path:
            return 0
        total = 0
        d = os.path.dirname(path)
        base = os.path.basename(path)
        try:
            for n in os.listdir(d):
                if n.startswith(base):
                    total += os.path.getsize(os.path.join(d, n))
        except OSError:
            pass
        return total

    def fold_probes(self, step: int) -> None:
        counts = self.probe_counts
        ph = self.probe_hits
        for i, n in enumerate(counts):
            if n:
                counts[i] = 0
                key = (i, step)
                ph[key] = ph.get(key, 0) + n

    def end_step(self):
        if self.trace_enabled:
            self.flush()
        now = time.perf_counter()
        if self.probe_counts:
            self.fold_probes(self.step)
        tot = self.totals()
        tot["wall"] = now - self.t_last_step
        cpu = time.process_time()
        tot["cpu"] = cpu - self.cpu_last_step
        tot["dump_offset"] = self.dump_size()
        self.steps.append(tot)
        if self.since_barrier:
            self.reset_iterations()
        self.t_last_step = time.perf_counter()  # do not charge our own bookkeeping to the next step
        self.cpu_last_step = time.process_time()
        self.step += 1
        if self.step >= self.max_steps and not self.stop_requested:
            self.stop_requested = True
            self.stop_reason = "max_steps"
            if not self.trace_enabled:
                raise StopVerify("max_steps")

    # -- result -------------------------------------------------------------------------------------
    def result(self, status: str, **extra) -> dict:
        lines: dict = {}
        hits = dict(self.hits)  # copies: the control thread may write a partial result while the program runs
        # Probes: runs since the last barrier belong to the step after it (the tail), like the tracer's lines.
        probe_hits = dict(self.probe_hits)
        for i, n in enumerate(list(self.probe_counts)):
            if n:
                probe_hits[(i, self.step)] = probe_hits.get((i, self.step), 0) + n
        spans = list(self.probe_spans)
        for (i, st), n in probe_hits.items():
            f, a, b = spans[i]
            for ln in range(a, b + 1):
                key = (f, ln, st)
                hits[key] = max(hits.get(key, 0), n)
        events = {k: [v[0], v[1], v[2], dict(v[3]), v[4]] for k, v in dict(self.events).items()}
        via = {k: [v[0], v[1], v[2], dict(v[3]), v[4]] for k, v in dict(self.via).items()}

        def entry(f, ln):
            return lines.setdefault(f, {}).setdefault(str(ln), {"hits": {}, "events": {}})

        for (f, ln, st), n in hits.items():
            entry(f, ln)["hits"][str(st)] = n
        for table, name in ((events, "events"), (via, "via")):
            for (f, ln, st), ev in table.items():
                entry(f, ln).setdefault(name, {})[str(st)] = {
                    "d2h": ev[0],
                    "uncached": ev[1],
                    "cached": ev[2],
                    "aten": ev[3],
                    "eval_uncached": ev[4],
                }
        for (f, ln), per in dict(self.paths).items():
            entry(f, ln)["paths"] = [
                {"callers": [[os.path.realpath(c[0]), c[1]] for c in callers], "n": n} for callers, n in per.items()
            ]
        end = {}
        try:
            end = self.totals()
            end["wall"] = time.perf_counter() - self.t_last_step
            end["dump_offset"] = self.dump_size()
        except Exception:  # torch_xla never imported or broken: no counters at all
            pass
        files = sorted({f for f in lines if f != "<startup>"})
        return {
            "status": status,
            "steps": list(self.steps),
            "where": self.where,
            "no_barrier": self.no_barrier,
            "stopped_inside": self.stopped_inside,
            "tail": end,
            "start": getattr(self, "start_totals", None),
            "lines": lines,
            "user_files": [os.path.realpath(f) for f in files],
            "file_map": {f: os.path.realpath(f) for f in files},
            **extra,
        }


def _format_where(where: list) -> list:
    return [f'  File "{w["path"]}", line {w["line"]}, in {w["function"]}\n' for w in where]


# ---------------------------------------------------------------------------------------------------------
# Event attribution: which user lines ran (probes compiled into the user's modules) and where each counter
# moved (a TorchFunctionMode that checks the counters after every torch call of the main thread, and the
# step-barrier and train/eval hooks). No tracer: library code runs at full speed.
# ---------------------------------------------------------------------------------------------------------
PROBE = "__xlalint_hit__"
_DOC_PARENTS = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _span(st) -> tuple:
    """The lines of a statement a probe stands for: a simple statement's lines, a compound statement's header."""
    start = min([st.lineno] + [d.lineno for d in getattr(st, "decorator_list", [])])
    body = getattr(st, "body", None)
    if isinstance(body, list) and body:
        end = max(st.lineno, body[0].lineno - 1)
    else:
        end = getattr(st, "end_lineno", None) or st.lineno
    return start, end


def _add_probes(node, rec, path: str) -> None:
    for name in ("body", "orelse", "finalbody", "handlers", "cases"):
        val = getattr(node, name, None)
        if not isinstance(val, list) or not val:
            continue
        if name in ("handlers", "cases"):
            for h in val:
                _add_probes(h, rec, path)
            continue
        if not isinstance(val[0], ast.stmt):
            continue
        new = []
        for i, st in enumerate(val):
            _add_probes(st, rec, path)
            docstring = (
                i == 0 and name == "body" and isinstance(node, _DOC_PARENTS) and isinstance(st, ast.Expr)
                and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)
            )
            future = isinstance(st, ast.ImportFrom) and st.module == "__future__"
            if not (docstring or future):
                a, b = _span(st)
                pid = len(rec.probe_spans)
                rec.probe_spans.append((path, a, b))
                rec.probe_counts.append(0)
                loc = dict(lineno=st.lineno, col_offset=st.col_offset, end_lineno=st.lineno, end_col_offset=st.col_offset)
                call = ast.Call(ast.Name(PROBE, ast.Load(), **loc), [ast.Constant(pid, **loc)], [], **loc)
                new.append(ast.Expr(call, **loc))
            new.append(st)
        setattr(node, name, new)


def instrumented_code(source, path: str, rec):
    """The module's code with a probe before every statement (one list increment when it runs)."""
    tree = ast.parse(source, filename=path)
    _add_probes(tree, rec, path)
    return compile(tree, path, "exec", dont_inherit=True)


def install_probes(rec) -> None:
    """The probe function (a builtin, so every instrumented module finds it) and an import hook that
    instruments the user's modules (files of the project: any module under the project root)."""
    import importlib.machinery

    counts = rec.probe_counts

    def hit(i):
        counts[i] += 1

    setattr(builtins, PROBE, hit)

    class Loader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname):
            path = self.get_filename(fullname)
            return instrumented_code(self.get_data(path), path, rec)

    class Finder:
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
            if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
                return None
            if not spec.origin or not rec.is_user(spec.origin):
                return None
            spec.loader = Loader(fullname, spec.origin)
            return spec

        @staticmethod
        def invalidate_caches():
            pass

    sys.meta_path.insert(0, Finder)
    rec.loader_class = Loader


def make_event_mode(rec):
    """A TorchFunctionMode (thread-local: the main thread's torch calls only) that checks the gate counters
    after every torch function and, when they moved, charges the difference to the innermost user frame."""
    from torch.overrides import TorchFunctionMode

    getframe = sys._getframe
    clock = time.perf_counter
    cv = rec._cv

    class _Attribute(TorchFunctionMode):
        # Runs ~1,000 times per step of a 12-block MLP with AdamW: keep it to the call, one gate of four
        # counters (~0.25 us each) and, only when one moved, the stack walk.
        def __torch_function__(self, func, types, args=(), kwargs=None):
            rec.op = func
            rec.op_t0 = clock()
            result = func(*args, **kwargs) if kwargs else func(*args)
            if (cv("UncachedCompile"), cv("CachedCompile"), cv("xla::_to_cpu"), cv("xla::_to_copy")) != rec.gate:
                rec.flush(getframe(1))
            return result

    rec.mode_code = _Attribute.__torch_function__.__code__
    return _Attribute()


def _user_traceback(exc: BaseException) -> str:
    """The traceback without our frames, runpy's or importlib's (the user wants to see their code)."""
    me = os.path.realpath(__file__)
    noise = (me, os.sep + "runpy.py", "<frozen runpy", "<frozen importlib._bootstrap")
    out = []
    for chunk in traceback.format_exception(type(exc), exc, exc.__traceback__):
        if chunk.startswith('  File "') and any(n in chunk.split('"')[1] for n in noise):
            continue
        out.append(chunk)
    return "".join(out)


def _seed_everything(seed: int) -> None:
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


def main(spec_path: str) -> int:
    with open(spec_path) as fh:
        spec = json.load(fh)
    if spec.get("watchdog_fd") is not None:
        _start_watchdog(int(spec["watchdog_fd"]), os.getpid())
    _set_parent_death_signal()
    if spec.get("parent_pid") and os.getppid() != int(spec["parent_pid"]):
        return 0  # xlalint died before the line above ran
    result_path = spec["result_path"]
    rec = Recorder(spec)
    written = [False]
    lock = threading.Lock()

    def write(status: str, final: bool = True, **extra):
        with lock:
            if written[0]:
                return
            if final:
                written[0] = True
                sys.settrace(None)
            data = rec.result(status, **extra)
            if not final:
                data["partial"] = True
            tmp = result_path + (".tmp" if final else ".partial")
            with open(tmp, "w") as fh:
                json.dump(data, fh)
            os.replace(tmp, result_path)

    # A stop request (the timeout, or xlalint was interrupted) comes as a line on the command pipe. The
    # control thread notes where the program is, writes what was measured so far at once (the main thread
    # may be deep in an XLA compile, which releases the GIL but does not return to Python for minutes),
    # then raises StopVerify in the main thread through SIGUSR1.
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
                    write(reason, final=False, timeout_stack="".join(_format_where(rec.where)))
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
        rec.timeout_stack = "".join(_format_where(rec.where))
        raise StopVerify(reason)

    rec.timeout_stack = ""
    signal.signal(signal.SIGUSR1, on_stop)
    if spec.get("command_fd") is not None:
        threading.Thread(target=control, args=(int(spec["command_fd"]),), name="xlalint-verify-control",
                         daemon=True).start()

    # os._exit in user code skips every finally: write the result first.
    real_exit = os._exit

    def _exit(code):
        try:
            write("os_exit", program_exit_code=int(code))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            real_exit(0)

    target = spec["target_file"]
    func = spec.get("function")
    sys.argv = [target] + list(spec.get("argv", []))
    sys.path[0] = os.path.dirname(os.path.abspath(target))

    try:
        import torch  # noqa: F401
        import torch_xla
        import torch_xla.core.xla_model  # noqa: F401  (what user code usually imports first)

        rec.setup_counters()
        rec.install_step_hook()
        rec.install_mode_hook()
        rec.install_optimizer_hook()
        torch_xla.device()  # bring the device up before timing the user's code
        _seed_everything(0)
        rec.start_totals = rec.totals()
    except StopVerify as exc:
        write(str(exc.args[0]) if exc.args else "timeout", timeout_stack="(still starting torch_xla)")
        return 0
    except BaseException as exc:  # noqa: BLE001
        write("setup_error", traceback="".join(traceback.format_exception(exc)))
        return 0

    os._exit = _exit
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
        tracer = rec.make_global_tracer()
        threading.settrace(tracer)
        sys.settrace(tracer)
    try:
        if mode is not None:
            mode.__enter__()
        if func:
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
                status, extra = "error", {
                    "traceback": f"{target} has no function {func!r}",
                    "error_kind": "no_function",
                }
            else:
                fn()
        elif events:
            import types

            with open(target, "rb") as fh:
                code = instrumented_code(fh.read(), target, rec)
            main_mod = types.ModuleType("__main__")
            main_mod.__dict__.update(__file__=target, __cached__=None, __loader__=None, __package__=None,
                                     __spec__=None, __builtins__=builtins)
            sys.modules["__main__"] = main_mod
            exec(code, main_mod.__dict__)
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
            status, extra = "error", {"traceback": _user_traceback(exc)}
            tb = exc.__traceback__
            frames = []
            while tb is not None:
                code = tb.tb_frame.f_code
                if rec.is_user(code.co_filename):
                    frames.append({"path": os.path.realpath(code.co_filename), "line": tb.tb_lineno,
                                   "function": code.co_name})
                tb = tb.tb_next
            rec.where = frames
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
    write(status, **extra)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    # Whatever the program started (a process in a session of its own included) ends with it: once this
    # process is gone they would be re-parented and nobody could find them any more.
    kill_tree(os.getpid(), spare=os.getpid())
    # Non-daemon threads of the user's program (loaders, loggers) must not keep the child alive.
    os._exit(code)
