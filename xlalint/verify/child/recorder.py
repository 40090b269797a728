"""What the child measured, and where: the recorder every hook, probe and tracer of the run reports to.

- User files: the program and any file under the user's roots; never xlalint's ``verify`` package, the
  standard library, the interpreter's prefixes or site-packages.
- Counters: a cheap gate (4 counters, ~0.3 us each) is compared with the last snapshot; only when it moved
  are the exact figures (TransferFromDeviceTime sample count, which costs up to ~50 us with 1024 samples
  kept, and the ``aten::*`` counters, ~3 us) read and the difference charged (``flush``) to a line: the
  innermost user frame on the stack (event attribution, ``event_attribution.py``) or the line that was
  executing since the last event (the line tracer, ``line_tracer.py``).
- Steps: at every step barrier (``hooks.py`` wraps it) the per-step totals are recorded and the run is
  stopped once ``max_steps`` steps have run.
- Where the program is when the run is stopped from outside (``note_stop``, from the control thread).

``result_file.py`` turns the recorder's tables into the JSON result.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time


class StopVerify(BaseException):
    """Raised into the user's program to end it after max_steps steps or at the timeout.

    A BaseException so that ``except Exception:`` in user code does not swallow it.
    """


GATE_COUNTERS = ("UncachedCompile", "CachedCompile", "xla::_to_cpu", "xla::_to_copy")


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
        verify_package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        # xlalint itself, the standard library and the interpreter prefixes are never user code.
        excluded = {os.path.join(verify_package, "")}
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
        # (file, line, step) -> [d2h, uncached, cached, {aten: n}, eval_uncached, wall s, compile s, transfer s]
        self.events: dict = {}
        self.via: dict = {}  # the same, charged to each user caller on the event's stack
        self.paths: dict = {}  # (file, line) -> {(caller (file, line), ...): n}
        self.user_code: dict = {}  # code object -> is it the user's
        self.attribution = spec.get("attribution", "events") if spec.get("trace", True) else "off"
        self.probe_counts: list = []  # probe id -> runs since the last step barrier
        self.probe_spans: list = []  # probe id -> (file, first line, last line)
        self.probe_hits: dict = {}  # (probe id, step) -> runs
        self.loader_class = None  # the import hook's loader of the user's modules (event attribution)
        self.op = None  # the torch function the main thread is in (event attribution), and since when
        self.op_t0 = 0.0
        self.mode_code = None
        self.steps: list = []
        self.start_totals = None  # the counters when the program started
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
        self.timeout_stack = ""  # the same, as traceback lines
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
            uc = self.counter_value("UncachedCompile") or 0
            ct = self.metric_data("CompileTime")
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
        self.counter_value = X._xla_counter_value
        self.metric_data = X._xla_metric_data
        self.counter_names = X._xla_counter_names
        self.gate = self.read_gate()
        self.d2h, transfer_ns = self.read_transfers()
        self.aten = self.read_aten()
        self.times = (self.read_compile_ns(), transfer_ns)

    def read_gate(self):
        cv = self.counter_value
        return (cv("UncachedCompile"), cv("CachedCompile"), cv("xla::_to_cpu"), cv("xla::_to_copy"))

    def read_d2h(self) -> int:
        m = self.metric_data("TransferFromDeviceTime")
        return m[0] if m else 0

    def read_transfers(self) -> tuple:
        """(device->host transfers so far, their time in ns): ``TransferFromDeviceTime``'s sample count and
        accumulator, in one read (up to ~50 us once it holds its 1024 samples)."""
        m = self.metric_data("TransferFromDeviceTime")
        return (m[0], m[1]) if m else (0, 0.0)

    def read_compile_ns(self) -> float:
        """Compile time so far, in ns (``CompileTime``'s accumulator; measured in the thread that compiles,
        the one that waits. ``ExecuteTime`` is not read: executions run on a worker thread and would land
        on the next event's line)."""
        m = self.metric_data("CompileTime")
        return m[1] if m else 0.0

    def read_aten(self) -> dict:
        cv = self.counter_value
        return {n: cv(n) for n in self.counter_names() if n.startswith("aten::") or n == "xla::_local_scalar_dense"}

    def totals(self) -> dict:
        cv = self.counter_value
        return {
            "uncached": cv("UncachedCompile") or 0,
            "cached": cv("CachedCompile") or 0,
            "executions": cv("ExecuteComputation") or 0,
            "d2h": self.read_d2h(),
            "aten": self.read_aten(),
        }

    # -- charging what moved to a line ----------------------------------------------------------------
    def flush(self, frame=None, seconds: float = 0.0):
        """Charge whatever moved since the last check: to the innermost user frame at or above ``frame``
        (event attribution), or to the line that was running (self.cur, the line tracer). ``seconds``: how
        long the main thread waited in the call that moved the counters (0 when not known), charged with
        the compile and transfer time torch_xla measured since the last check."""
        gate = self.read_gate()
        old = self.gate
        if gate == old:
            return
        self.gate = gate
        d2h, transfer_ns = self.read_transfers()
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
        times = (self.read_compile_ns(), transfer_ns)
        dt = (seconds, (times[0] - self.times[0]) / 1e9, (times[1] - self.times[1]) / 1e9)
        self.times = times
        if not (dd or duc or dcc or fb):
            return
        if frame is not None:
            cur, callers = self.locate(frame)
        else:
            cur, callers = (self.cur or ("<startup>", 0)), ()
        step = self.step
        eval_uc = duc if self.eval_mode else 0
        self._add(self.events, (cur[0], cur[1], step), dd, duc, dcc, fb, eval_uc, dt)
        if callers:
            # The same event, seen from each caller up the stack: a finding at a caller's line ("log(loss)"
            # in train.py) is on this event's stack and explains it; the event itself is charged once, above.
            for c in set(callers):
                self._add(self.via, (c[0], c[1], step), dd, duc, dcc, fb, eval_uc)
            per = self.paths.setdefault(cur, {})
            if len(per) < 8 or callers in per:
                per[callers] = per.get(callers, 0) + 1

    @staticmethod
    def _add(table, key, dd, duc, dcc, fb, eval_uc, dt=None):
        ev = table.get(key)
        if ev is None:
            ev = table[key] = [0, 0, 0, {}, 0, 0.0, 0.0, 0.0]
        if dt is not None:
            ev[5] += dt[0]
            ev[6] += dt[1]
            ev[7] += dt[2]
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

    # -- steps --------------------------------------------------------------------------------------
    def reset_iterations(self):
        """A step barrier (or the start): iterations are counted from here."""
        self.since_barrier = {}
        ct = self.metric_data("CompileTime")
        self.iter_base = {
            "uncached": self.counter_value("UncachedCompile") or 0,
            "cached": self.counter_value("CachedCompile") or 0,
            "d2h": self.read_d2h(),
            "compile_ns": ct[1] if ct else 0,
            "t": time.perf_counter(),
        }

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
