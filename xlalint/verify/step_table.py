"""The run's step table: the child's result indexed by file, line and step (``Run``), the per-step rows
(``StepRow``), the counters charged to a line (``LineStats``), and the timing summary.

Steady state starts at step ``warmup`` (default 2, i.e. after steps 0 and 1) after the first step that ran
the loop body: SGD with momentum, Adam and AdamW compile a second graph at step 1 because their state
buffers appear after the first step (measured: UncachedCompile per step 1 1 0 0 0 with Adam, 1 0 0 0 0
with plain SGD), so a compile at step 1 is not a recompile problem.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_WARMUP = 2

#: The scalar read is not a fallback; its name differs between torch_xla versions.
SCALAR_READ_COUNTERS = ("aten::_local_scalar_dense", "xla::_local_scalar_dense")


def norm_path(path: str) -> str:
    return os.path.realpath(path)


def most(k: int, n: int) -> bool:
    """True when k of n is "most": more than half, and at least once."""
    return k > 0 and 2 * k > n


@dataclass
class StepRow:
    index: int
    uncached: int  # UncachedCompile: a new graph compiled
    cached: int  # CachedCompile: a graph cut served from the cache
    graphs: int  # graph executions (every cut compiles or hits the cache, then runs)
    transfers: int  # TransferFromDeviceTime samples (device -> host)
    scalar_reads: int
    fallbacks: int  # aten::* CPU fallbacks (scalar reads excluded)
    wall_ms: float
    warmup: bool
    cpu_ms: float = 0.0  # CPU time of the whole process (all threads) during the step


@dataclass
class LineStats:
    """Counters charged to one line (or a finding's line range) of one file, per step."""

    path: str
    line: int
    end_line: int
    runs: dict = field(default_factory=dict)  # step -> times the line ran
    transfers: dict = field(default_factory=dict)  # step -> D2H samples
    uncached: dict = field(default_factory=dict)
    cached: dict = field(default_factory=dict)
    scalar_reads: dict = field(default_factory=dict)
    fallbacks: dict = field(default_factory=dict)  # step -> {aten::op: n}
    eval_uncached: dict = field(default_factory=dict)  # step -> uncached compiles while the model was in eval mode

    def total(self, name: str) -> int:
        d = getattr(self, name)
        if name == "fallbacks":
            return sum(sum(v.values()) for v in d.values())
        return sum(d.values())

    def cuts(self, step: int) -> int:
        return self.uncached.get(step, 0) + self.cached.get(step, 0)

    def fallback_ops(self) -> dict:
        out: dict = {}
        for per in self.fallbacks.values():
            for k, v in per.items():
                out[k] = out.get(k, 0) + v
        return out


class Run:
    """The child's result, indexed for questions like "what moved on lines 12..14 of f.py at step 3"."""

    def __init__(self, result: dict, graphs: list | None = None, warmup: int = DEFAULT_WARMUP):
        self.result = result
        self.warmup = warmup
        self.graphs = graphs or []
        self.raw_steps = result.get("steps") or []
        self.n_steps = len(self.raw_steps)
        self.tail_step = self.n_steps  # lines run after the last barrier are charged to this index
        # file (real path) -> line -> {"hits": {step: n}, "events": {step: {...}}}
        self.lines: dict = {}
        for f, per_line in (result.get("lines") or {}).items():
            real = norm_path(f) if f != "<startup>" else f
            dst = self.lines.setdefault(real, {})
            for ln, d in per_line.items():
                dst[int(ln)] = {
                    "hits": {int(k): v for k, v in d.get("hits", {}).items()},
                    "events": {int(k): v for k, v in d.get("events", {}).items()},
                    # the same events seen from a caller's line up the stack (event attribution only)
                    "via": {int(k): v for k, v in d.get("via", {}).items()},
                    "paths": [
                        {"callers": [(norm_path(p), int(n)) for p, n in e["callers"]], "n": e["n"]}
                        for e in d.get("paths", [])
                    ],
                }
        self.user_files = [f for f in self.lines if f != "<startup>"]
        self.first_body_step = self._first_body_step()
        self.steady_from = self.first_body_step + warmup
        self.step_rows = self._step_rows()

    @property
    def steady(self) -> list:
        return [s for s in range(self.n_steps) if s >= self.steady_from]

    def _first_body_step(self) -> int:
        """The first step that ran the step loop's body.

        An ``MpDeviceLoader`` syncs on its first ``next()``, before the body ran once: its step 0 is only
        the setup. The body is the lines that ran on most of steps 1..n-1; warm-up counts from the first
        step that ran at least half of them.
        """
        if self.n_steps < 3:
            return 0
        later = range(1, self.n_steps)
        body = [
            (f, ln)
            for f, per in self.lines.items()
            for ln, d in per.items()
            if 2 * sum(1 for s in later if d["hits"].get(s)) > len(later)
        ]
        if not body:
            return 0
        for s in range(self.n_steps):
            ran = sum(1 for f, ln in body if self.lines[f][ln]["hits"].get(s))
            if 2 * ran >= len(body):
                return s
        return 0

    def _step_rows(self) -> list:
        rows = []
        prev = self.result.get("start") or {"uncached": 0, "cached": 0, "d2h": 0, "aten": {}, "executions": 0}
        for i, cur in enumerate(self.raw_steps):
            sr = sum(cur["aten"].get(n, 0) - prev.get("aten", {}).get(n, 0) for n in SCALAR_READ_COUNTERS)
            fb = sum(
                v - prev.get("aten", {}).get(n, 0) for n, v in cur["aten"].items() if n not in SCALAR_READ_COUNTERS
            )
            uc = cur["uncached"] - prev.get("uncached", 0)
            cc = cur["cached"] - prev.get("cached", 0)
            rows.append(
                StepRow(
                    index=i,
                    uncached=uc,
                    cached=cc,
                    graphs=uc + cc,
                    transfers=cur["d2h"] - prev.get("d2h", 0),
                    scalar_reads=sr,
                    fallbacks=fb,
                    wall_ms=round(cur.get("wall", 0.0) * 1000.0, 2),
                    cpu_ms=round(cur.get("cpu", 0.0) * 1000.0, 2),
                    warmup=i < self.steady_from,
                )
            )
            prev = cur
        return rows

    def callers(self, path: str, line: int) -> list:
        """The user callers of the events charged to a line, most frequent path first: [[(path, line), ...]]."""
        d = self.lines.get(norm_path(path), {}).get(line)
        if not d:
            return []
        return [e["callers"] for e in sorted(d["paths"], key=lambda e: -e["n"])]

    def stats(self, path: str, line: int, end_line: int | None = None, via: bool = False) -> LineStats:
        """Counters charged to lines line..end_line of path. A line that ran counts once per run even when
        a statement spans several lines (the most runs of any line of the range). ``via``: also the events
        charged further down the stack whose callers include these lines (what a finding at a caller's line
        is answerable for)."""
        end_line = max(line, end_line or line)
        st = LineStats(path=norm_path(path), line=line, end_line=end_line)
        per_line = self.lines.get(st.path, {})
        for ln in range(line, end_line + 1):
            d = per_line.get(ln)
            if not d:
                continue
            for s, n in d["hits"].items():
                st.runs[s] = max(st.runs.get(s, 0), n)
            evs = list(d["events"].items())
            if via:
                evs += list(d.get("via", {}).items())
            for s, ev in evs:
                st.transfers[s] = st.transfers.get(s, 0) + ev["d2h"]
                st.uncached[s] = st.uncached.get(s, 0) + ev["uncached"]
                st.cached[s] = st.cached.get(s, 0) + ev["cached"]
                if ev.get("eval_uncached"):
                    st.eval_uncached[s] = st.eval_uncached.get(s, 0) + ev["eval_uncached"]
                for n, v in ev["aten"].items():
                    if n in SCALAR_READ_COUNTERS:
                        st.scalar_reads[s] = st.scalar_reads.get(s, 0) + v
                    else:
                        st.fallbacks.setdefault(s, {})
                        st.fallbacks[s][n] = st.fallbacks[s].get(n, 0) + v
                # Events on a line that never had a line event (e.g. a def line on call) still ran.
                st.runs.setdefault(s, 1)
        return st


def timing(run: Run) -> dict:
    """The wall time of the warm-up steps, and the median and mean of the steady ones."""
    rows = run.step_rows
    warm = [r.wall_ms for r in rows if r.warmup]
    steady = [r.wall_ms for r in rows if not r.warmup]

    def med(xs):
        if not xs:
            return None
        xs = sorted(xs)
        k = len(xs) // 2
        return round(xs[k] if len(xs) % 2 else (xs[k - 1] + xs[k]) / 2, 2)

    return {
        "warmup_ms": warm,
        "warmup_total_ms": round(sum(warm), 2),
        "steady_median_ms": med(steady),
        "steady_mean_ms": round(sum(steady) / len(steady), 2) if steady else None,
    }
