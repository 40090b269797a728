"""Turn what the child recorded into a verdict per static finding, the misses, the per-step table and the
root causes of steady-state recompiles.

Steady state starts at step ``warmup`` (default 2, i.e. after steps 0 and 1): SGD with momentum, Adam and
AdamW compile a second graph at step 1 because their state buffers appear after the first step (measured:
UncachedCompile per step 1 1 0 0 0 with Adam, 1 0 0 0 0 with plain SGD), so a compile at step 1 is not a
recompile problem.
"""

from __future__ import annotations

import ast
import os
from dataclasses import asdict, dataclass, field

from xlalint.verify import graphs as graphs_mod

DEFAULT_WARMUP = 2

CONFIRMED = "CONFIRMED"
NOT_CONFIRMED = "NOT CONFIRMED"
NOT_REACHED = "NOT REACHED"

#: The scalar read is not a fallback; its name differs between torch_xla versions.
SCALAR_READ_COUNTERS = ("aten::_local_scalar_dense", "xla::_local_scalar_dense")

TRANSFER_RULES = {"XLA001", "XLA002", "XLA006", "XLA008", "XLA011"}
FALLBACK_RULES = {"XLA003", "XLA007"}


# ---------------------------------------------------------------------------------------------------------
# Report values
# ---------------------------------------------------------------------------------------------------------
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


@dataclass
class Recompile:
    """Uncached compiles after warm-up that share a cut line and a root cause."""

    steps: list
    count: int
    cut_path: str | None
    cut_line: int | None
    root_causes: list  # [{"path", "line", "description"}]; empty when not found
    note: str  # how the root cause was found, or why it could not be
    kind: str = "recompile"  # "recompile" | "new code path" (a first compile, not a miss)
    explained_by: list = field(default_factory=list)  # finding codes at the cut/root-cause lines
    cut_stack: list = field(default_factory=list)  # the user frames of the cut, innermost first


@dataclass
class Miss:
    path: str
    line: int
    kind: str  # "graph-cut transfer" | "cpu fallback" | "steady-state recompile"
    message: str
    steps: int  # steps on which it happened
    of_steps: int
    counters: dict = field(default_factory=dict)


@dataclass
class FindingVerdict:
    finding: object  # xlalint.findings.Finding (or anything with the same fields)
    status: str
    evidence: str
    numbers: dict = field(default_factory=dict)


@dataclass
class VerifyReport:
    target: str
    status: str  # "ok" | "error" | "timeout" | "no-steps"
    exit_code: int
    stop_reason: str  # max_steps | finished | exit | os_exit | timeout | error | ...
    steps: list  # StepRow
    warmup: int
    max_steps: int
    findings: list  # FindingVerdict
    misses: list  # Miss
    recompiles: list  # Recompile
    transfers_without_cut: list  # Miss-shaped, informative only
    user_files: list
    timing: dict
    notes: list
    error: str | None = None
    traceback: str | None = None
    program_output: str = ""
    elapsed: float = 0.0
    where: list = field(default_factory=list)  # the user's frames where the program was stopped or raised
    stopped_inside: dict | None = None  # {"what", "seconds", "compiling"} when stopped inside torch_xla
    interrupted: str | None = None  # SIGINT | SIGTERM | SIGHUP
    timeout: float | None = None
    no_barrier: dict | None = None  # the loop that never reaches a step barrier, and the growth measured

    def to_dict(self) -> dict:
        d = asdict(self)
        d["findings"] = [
            {
                **_finding_dict(v.finding),
                "verdict": v.status,
                "evidence": v.evidence,
                "numbers": v.numbers,
            }
            for v in self.findings
        ]
        return d


def _finding_dict(f) -> dict:
    if hasattr(f, "to_dict"):
        return f.to_dict()
    keys = ("code", "name", "message", "path", "line", "column", "end_line", "end_column")
    return {k: getattr(f, k, None) for k in keys}


# ---------------------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------------------
def _norm(path: str) -> str:
    return os.path.realpath(path)


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
            real = _norm(f) if f != "<startup>" else f
            dst = self.lines.setdefault(real, {})
            for ln, d in per_line.items():
                dst[int(ln)] = {
                    "hits": {int(k): v for k, v in d.get("hits", {}).items()},
                    "events": {int(k): v for k, v in d.get("events", {}).items()},
                    # the same events seen from a caller's line up the stack (event attribution only)
                    "via": {int(k): v for k, v in d.get("via", {}).items()},
                    "paths": [
                        {"callers": [(_norm(p), int(n)) for p, n in e["callers"]], "n": e["n"]}
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
        d = self.lines.get(_norm(path), {}).get(line)
        if not d:
            return []
        return [e["callers"] for e in sorted(d["paths"], key=lambda e: -e["n"])]

    def stats(self, path: str, line: int, end_line: int | None = None, via: bool = False) -> LineStats:
        """Counters charged to lines line..end_line of path. A line that ran counts once per run even when
        a statement spans several lines (the most runs of any line of the range). ``via``: also the events
        charged further down the stack whose callers include these lines (what a finding at a caller's line
        is answerable for)."""
        end_line = max(line, end_line or line)
        st = LineStats(path=_norm(path), line=line, end_line=end_line)
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


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _most(k: int, n: int) -> bool:
    """True when k of n is "most": more than half, and at least once."""
    return k > 0 and 2 * k > n


def period(steps: list) -> str:
    """" (every 4 steps)" when the steps are evenly spaced more than one apart, else ""."""
    steps = sorted(steps)
    if len(steps) < 2:
        return ""
    gaps = {b - a for a, b in zip(steps, steps[1:])}
    if len(gaps) == 1:
        k = gaps.pop()
        if k > 1:
            return f" (every {k} steps)"
    return ""


def via_text(run, path: str, line: int) -> str:
    """" via train.py:35" (the user callers of the events at this line; the most frequent path)."""
    paths = run.callers(path, line)
    if not paths or not paths[0]:
        return ""
    text = " via " + " <- ".join(f"{os.path.basename(p)}:{ln}" for p, ln in paths[0])
    if len(paths) > 1:
        text += f" (and {len(paths) - 1} other call path{'s' if len(paths) > 2 else ''})"
    return text


# ---------------------------------------------------------------------------------------------------------
# Recompiles and their root cause
# ---------------------------------------------------------------------------------------------------------
def find_recompiles(run: Run) -> list:
    """Group the uncached compiles of steady-state steps by (cut line, root cause).

    A new graph in steady state is either a *recompile* (a graph cut at the same place compiled before, and
    the ops that differ come from lines that ran before: a shape or a branch changed) or a *new code path*
    (the first graph cut at that place, or ops from lines that run for the first time: an evaluation that
    starts at step 50). Only recompiles are misses.
    """
    is_user = _user_predicate(run)
    by_step = _graphs_by_step(run)
    warm = range(min(run.steady_from, run.n_steps))
    seen_hashes = {g.hash for s in warm for g in by_step.get(s, [])}
    history = [g for s in warm for g in by_step.get(s, [])]
    groups: dict = {}

    def group(key, note, kind):
        return groups.setdefault(key, {"steps": [], "count": 0, "causes": {}, "note": note, "kind": kind, "stack": []})

    for s in run.steady:
        row = run.step_rows[s]
        new_graphs = [g for g in by_step.get(s, []) if g.hash and g.hash not in seen_hashes]
        if row.uncached > 0:
            cut_lines = _cut_lines(run, s)
            if not new_graphs:
                grp = group(
                    (tuple(cut_lines[:1]), ()),
                    "root cause not found: "
                    + ("graph dumps were off" if not run.graphs else "the graph dumps of this step show no new graph"),
                    "recompile",
                )
                grp["steps"].append(s)
                grp["count"] += row.uncached
            for g in new_graphs[: max(row.uncached, 1)]:
                site = graphs_mod.cut_site(g, is_user)
                ref = _reference_graph(g, history, is_user)
                kind = "recompile"
                if ref is None:
                    causes = []
                    note = "the first graph cut at this place: a code path that ran for the first time"
                    kind = "new code path"
                else:
                    causes = [_locate(c, run) for c in graphs_mod.diff(ref, g)]
                    note = (
                        f"root cause from the IR diff against the graph of step {ref.step}"
                        if causes
                        else "root cause not found: the IR text of the two graphs is the same "
                        "(a difference the text dump does not show)"
                    )
                    fresh = [
                        c for c in causes
                        if c["user"] and c["kind"] == "structure" and _first_run(run, c["path"], c["line"]) == s
                    ]
                    if fresh:
                        kind = "new code path"
                        note = "ops from lines that ran for the first time in this step: a new code path"
                cut = [site] if site else cut_lines[:1]
                key = (tuple(cut), tuple((c["path"], c["line"], c["kind"]) for c in causes), kind)
                grp = group(key, note, kind)
                if not grp["stack"]:
                    grp["stack"] = list(graphs_mod.user_frames(g, is_user))
                if s not in grp["steps"]:
                    grp["steps"].append(s)
                grp["count"] += 1
                for c in causes:
                    k = (c["path"], c["line"], c["kind"], c["op"])
                    if k not in grp["causes"]:
                        grp["causes"][k] = dict(c, examples=[])
                    ex = grp["causes"][k]["examples"]
                    if len(ex) < 3:
                        ex.append((c["before"], c["after"]))
        seen_hashes.update(g.hash for g in by_step.get(s, []))
        history.extend(by_step.get(s, []))
    out = []
    for key, grp in groups.items():
        cut = key[0]
        causes = [
            {
                "path": c["path"],
                "line": c["line"],
                "kind": c["kind"],
                "op": c["op"],
                "user": c["user"],
                "description": _describe_cause(c),
            }
            for c in grp["causes"].values()
        ]
        # User lines first: they are what the user can change.
        causes.sort(key=lambda c: (not c["user"], c["path"], c["line"]))
        cp, cl = cut[0] if cut else (None, None)
        out.append(
            Recompile(
                steps=grp["steps"],
                count=grp["count"],
                cut_path=cp,
                cut_line=cl,
                root_causes=causes,
                note=grp["note"],
                kind=grp["kind"],
                cut_stack=grp["stack"],
            )
        )
    return out


def _first_run(run: Run, path: str, line: int):
    hits = run.lines.get(path, {}).get(line, {}).get("hits", {})
    steps = [s for s, n in hits.items() if n]
    return min(steps) if steps else None


def _describe_cause(c: dict) -> str:
    ex = c["examples"][:2]
    shapes = "; ".join(
        f"{graphs_mod.pretty_shape(a)} -> {graphs_mod.pretty_shape(b)}" for a, b in ex
    )
    where = f"{os.path.basename(c['path'])}:{c['line']}" if c["path"] else "an unknown location"
    if c["kind"] == "input-shape":
        return f"input shape changed: {shapes} (an input first used at {where})"
    if c["kind"] == "node-shape":
        return f"{c['op']} created at {where} changed shape: {shapes}"
    if c["kind"] == "structure":
        before, after = ex[0] if ex else ("", "")
        what = after if before == "absent" else before
        return f"the graph changed structure between steps: {what} (ops created at {where})"
    return f"{c['op']} created at {where} changed its attributes or constants"


def _user_predicate(run: Run):
    users = set(run.user_files)
    return lambda p: _norm(p) in users


def _graphs_by_step(run: Run) -> dict:
    """Assign every dumped graph to the step whose barrier came after it."""
    bounds = [st.get("dump_offset", 0) for st in run.raw_steps]
    out: dict = {}
    for g in run.graphs:
        s = 0
        while s < len(bounds) and g.offset >= bounds[s]:
            s += 1
        g.step = s
        out.setdefault(s, []).append(g)
    return out


def _reference_graph(g, history: list, is_user):
    """The most recent earlier graph cut at the same place (same user frames), preferring the same size."""
    frames = graphs_mod.user_frames(g, is_user)
    same_site = [h for h in history if graphs_mod.user_frames(h, is_user) == frames]
    if not same_site:
        return None
    same_size = [h for h in same_site if len(h.nodes) == len(g.nodes)]
    return (same_size or same_site)[-1]


def _locate(change, run: Run) -> dict:
    """Map an IR location (a base name) to a user file that ran."""
    path = ""
    if change.file:
        matches = [f for f in run.user_files if os.path.basename(f) == change.file]
        if len(matches) > 1:
            # Prefer a file where that line actually ran.
            ran = [f for f in matches if change.line in run.lines.get(f, {})]
            matches = ran or matches
        path = matches[0] if matches else change.file
    return {
        "path": path,
        "line": change.line,
        "kind": change.kind,
        "op": change.op,
        "before": change.before,
        "after": change.after,
        "user": path in run.user_files,
    }


def _cut_lines(run: Run, step: int) -> list:
    """User lines where an uncached compile was charged at this step (the sync or the host read)."""
    out = []
    for f, per_line in run.lines.items():
        for ln, d in per_line.items():
            ev = d["events"].get(step)
            if ev and ev["uncached"]:
                out.append((f, ln))
    return sorted(out)


# ---------------------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------------------
FIX_NO_BARRIER = (
    "call torch_xla.sync() (xm.mark_step()) once per iteration, after optimizer.step(), or iterate the "
    "loader through MpDeviceLoader; the fixes of other findings that defer work to a step "
    "(xm.add_step_closure) only work once the loop has a barrier"
)


def enclosing_loop(path: str, line: int):
    """(first, last) line of the innermost for/while loop whose body holds ``line``, or None."""
    tree = _AST_CACHE.get(path)
    if tree is None:
        enclosing_condition_lines(path, line)  # parses and caches
        tree = _AST_CACHE.get(path)
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            end = getattr(node, "end_lineno", node.lineno) or node.lineno
            if node.lineno < line <= end and (best is None or node.lineno > best[0]):
                best = (node.lineno, end)
    return best


def no_barrier_info(run: Run) -> dict | None:
    """What the child measured when a training loop never reached a step barrier: the loop's line (around
    the optimizer.step() call, or around one of its callers), the growth per iteration, and the fix."""
    nb = run.result.get("no_barrier")
    if not nb:
        return None
    if "loop" in nb:
        return nb
    frames = [tuple(nb["step_line"])] + [tuple(c) for c in nb.get("callers", [])]
    loop = None
    for p, ln in frames:
        span = enclosing_loop(p, ln)
        if span:
            loop = {"path": p, "line": span[0], "end_line": span[1]}
            break
    its = nb["iterations"]
    nodes = " -> ".join(f"{r['ir_nodes']:,}" for r in its)
    compiles = ", ".join(str(r["uncached"]) for r in its)
    secs = ", ".join(f"{r['compile_s']:g}" for r in its)
    walls = ", ".join(f"{r['wall_s']:g}" for r in its)
    step_at = f"{os.path.basename(nb['step_line'][0])}:{nb['step_line'][1]}"
    where = f"the loop at {os.path.basename(loop['path'])}:{loop['line']}" if loop else "the training loop"
    nb["loop"] = loop
    nb["message"] = (
        f"{where} ran {len(its)} training iterations (optimizer.step() at {step_at}) without reaching a step "
        f"barrier, and the pending graph grew every iteration: {nodes} IR nodes (first parameter's graph); "
        f"uncached compiles per iteration {compiles}, compile time {secs} s, wall time {walls} s; "
        f"stopped after {len(its)} iterations"
    )
    nb["fix"] = FIX_NO_BARRIER
    return nb


def judge(finding, run: Run, recompiles: list) -> FindingVerdict:
    if finding.code == "XLA010":
        return _judge_missing_barrier(finding, run)
    # A finding answers for the events at its lines and for those further down the stack it is the caller of.
    st = run.stats(finding.path, finding.line, getattr(finding, "end_line", finding.line), via=True)
    code = finding.code
    ran_steps = sorted(s for s, n in st.runs.items() if n > 0 and s < run.n_steps)
    total_runs = sum(st.runs.values())
    if total_runs == 0:
        return FindingVerdict(finding, NOT_REACHED, "this line never ran in this run", {"runs": 0})
    n = run.n_steps
    numbers = {
        "runs": total_runs,
        "steps_ran": len(ran_steps),
        "steps": n,
        "transfers": st.total("transfers"),
        "graph_cuts": st.total("uncached") + st.total("cached"),
        "uncached_compiles": st.total("uncached"),
        "scalar_reads": st.total("scalar_reads"),
        "fallbacks": st.fallback_ops(),
    }
    where_ran = f"ran {_plural(total_runs, 'time')}" + (
        f" on {len(ran_steps)} of {n} steps" if n else " (no step barrier was reached)"
    )
    if code == "XLA005":
        return _judge_steady_recompiles(finding, run, recompiles, numbers, where_ran)
    if code == "XLA004":
        return _judge_eval_switch(finding, run, st, ran_steps, numbers, where_ran)
    if code in FALLBACK_RULES:
        v = _judge_fallback(finding, run, st, ran_steps, recompiles, numbers)
        if v is not None:
            return v
    v = _judge_transfer(finding, run, st, ran_steps, numbers)
    if v is not None:
        return v
    if code not in TRANSFER_RULES:
        # Any other rule (e.g. a step-varying Python int used as a slice bound): a steady-state recompile
        # whose root cause is this line.
        steady_uc = _steady_uc_at(finding, run, st, recompiles)
        if steady_uc:
            causes = [
                c["description"]
                for rc in recompiles
                for c in rc.root_causes
                if c["path"] == st.path and st.line <= c["line"] <= st.end_line
            ]
            numbers["steady_recompile_steps"] = steady_uc
            ev = f"UncachedCompile rose on {len(steady_uc)} of {len(run.steady)} steps after warm-up"
            if causes:
                ev += "; root cause at this line: " + causes[0]
            return FindingVerdict(finding, CONFIRMED, ev, numbers)
    return FindingVerdict(finding, NOT_CONFIRMED, _not_confirmed(st, run, where_ran), numbers)


def _judge_missing_barrier(finding, run: Run) -> FindingVerdict:
    nb = no_barrier_info(run)
    st = run.stats(finding.path, finding.line, getattr(finding, "end_line", finding.line))
    numbers = {"runs": sum(st.runs.values()), "steps": run.n_steps}
    loop = nb.get("loop") if nb else None
    if loop and _norm(finding.path) == _norm(loop["path"]) and loop["line"] <= finding.line <= loop["end_line"]:
        numbers["iterations"] = nb["iterations"]
        return FindingVerdict(finding, CONFIRMED, nb["message"], numbers)
    if run.n_steps:
        return FindingVerdict(
            finding, NOT_CONFIRMED, f"the program reached a step barrier on {_plural(run.n_steps, 'step')}", numbers
        )
    if not numbers["runs"]:
        return FindingVerdict(finding, NOT_REACHED, "this line never ran in this run", numbers)
    return FindingVerdict(
        finding, NOT_CONFIRMED,
        "no step barrier was reached, but no growing graph was measured here (xlalint measures it at "
        "optimizer.step())", numbers,
    )


def _not_confirmed(st: LineStats, run: Run, where_ran: str) -> str:
    moved = []
    t = [s for s, v in st.transfers.items() if v]
    if t:
        moved.append(f"host transfers on {len(t)} of the {len(_buckets(st, run))} steps it ran")
    f = [s for s, v in st.fallbacks.items() if v]
    if f:
        moved.append(f"CPU fallbacks on {len(f)} steps")
    if moved:
        return f"the line {where_ran}; only " + ", ".join(moved) + " (not on most of them)"
    return f"the line {where_ran} and no counter moved at it"


def _buckets(st: LineStats, run: Run) -> list:
    """Steps where the line ran, plus the tail after the last barrier when it ran there."""
    return sorted(s for s, k in st.runs.items() if k > 0)


def _judge_transfer(finding, run, st, ran_steps, numbers):
    buckets = _buckets(st, run)
    with_transfer = [s for s in buckets if st.transfers.get(s, 0) > 0]
    if not with_transfer or not _most(len(with_transfer), len(buckets)):
        return None
    t = sum(st.transfers.get(s, 0) for s in buckets)
    cuts = sum(st.cuts(s) for s in buckets)
    over = _over_steps(with_transfer, run)
    uc = sum(st.uncached.get(s, 0) for s in buckets)
    if run.n_steps == 0 and uc:
        ev = (
            f"{_plural(t, 'host transfer')} at this line with no step barrier reached: "
            f"{uc} of its {_plural(cuts, 'graph cut')} compiled a new graph (the pending graph keeps growing)"
        )
    elif cuts:
        ev = (
            f"{_plural(t, 'host transfer')} and {_plural(cuts, 'extra graph execution')} "
            f"{over} at this line"
        )
    else:
        ev = (
            f"{_plural(t, 'host transfer')} {over} at this line, without a graph cut "
            "(the value was already computed when it was read)"
        )
    sr = st.total("scalar_reads")
    if sr:
        ev += f"; {_plural(sr, 'scalar read')} (_local_scalar_dense)"
    fb = st.fallback_ops()
    if fb:
        ev += "; CPU fallbacks: " + ", ".join(f"{k} x{v}" for k, v in sorted(fb.items()))
    numbers["steps_with_transfer"] = len(with_transfer)
    return FindingVerdict(finding, CONFIRMED, ev, numbers)


def _over_steps(steps: list, run: Run) -> str:
    if run.n_steps == 0:
        return "before any step barrier (none was reached)"
    in_loop = [s for s in steps if s < run.n_steps]
    if len(in_loop) == len(steps):
        if len(steps) < run.n_steps:
            return f"on {len(steps)} of {run.n_steps} steps{period(steps)}"
        return f"over {_plural(len(steps), 'step')}"
    if not in_loop:
        return "after the last step"
    return f"over {_plural(len(in_loop), 'step')} and after the last step"


def _judge_fallback(finding, run, st, ran_steps, recompiles, numbers):
    buckets = _buckets(st, run)
    with_fb = [s for s in buckets if st.fallbacks.get(s)]
    steady_uc = _steady_uc_at(finding, run, st, recompiles)
    parts = []
    ok = False
    if with_fb and _most(len(with_fb), len(buckets)):
        ok = True
        ops = st.fallback_ops()
        parts.append(
            ", ".join(f"{k} fell back to the CPU {_plural(v, 'time')}" for k, v in sorted(ops.items()))
            + f" {_over_steps(with_fb, run)} at this line"
        )
    if steady_uc:
        ok = True
        parts.append(
            f"UncachedCompile rose on {len(steady_uc)} of {len(run.steady)} steps after warm-up at this line"
        )
    if not ok:
        return None
    t = st.total("transfers")
    if t:
        parts.append(_plural(t, "host transfer"))
    numbers["steady_recompile_steps"] = steady_uc
    return FindingVerdict(finding, CONFIRMED, "; ".join(parts), numbers)


def _steady_uc_at(finding, run, st, recompiles) -> list:
    steps = {s for s in run.steady if st.uncached.get(s, 0) > 0}
    path = _norm(finding.path)
    end = max(finding.line, getattr(finding, "end_line", finding.line))
    for rc in recompiles:
        if any(c["path"] == path and finding.line <= c["line"] <= end for c in rc.root_causes):
            steps.update(rc.steps)
    return sorted(steps)


def _judge_steady_recompiles(finding, run, recompiles, numbers, where_ran):
    steady = run.steady
    if not steady:
        return FindingVerdict(
            finding,
            NOT_CONFIRMED,
            f"the line {where_ran}, but the run stopped within the warm-up (steps 0-{run.steady_from - 1}): "
            "no steady state to measure (raise --max-steps)",
            numbers,
        )
    rising = [s for s in steady if run.step_rows[s].uncached > 0]
    numbers["steady_recompile_steps"] = rising
    causes = [c for rc in recompiles if rc.kind == "recompile" for c in rc.root_causes]
    shapes = [c["description"] for c in causes if c["kind"] == "input-shape"]
    others = [c["description"] for c in causes if c["kind"] != "input-shape"]
    ev = f"UncachedCompile rose on {len(rising)} of {len(steady)} steps after warm-up"
    # Confirmed when a steady-state recompile came from an input whose shape changed (what XLA005 is about;
    # a partial last batch recompiles once per epoch: rare in a short run, but real). Compiles that keep
    # rising for another reason, or for a reason that was not found, do not confirm it.
    if shapes:
        return FindingVerdict(finding, CONFIRMED, ev + "; " + shapes[0], numbers)
    if not _most(len(rising), len(steady)):
        return FindingVerdict(finding, NOT_CONFIRMED, f"the line {where_ran}; {ev} (compilation settled)", numbers)
    if others:
        why = "their root cause is elsewhere: " + others[0]
    else:
        notes = sorted({rc.note for rc in recompiles if rc.kind == "recompile"}) or ["no graph dumps were taken"]
        why = "no input whose shape changed was found (tried: " + "; ".join(notes) + ")"
    return FindingVerdict(finding, NOT_CONFIRMED, f"the line {where_ran}; {ev}, but {why}", numbers)


def _judge_eval_switch(finding, run, st, ran_steps, numbers, where_ran):
    if run.n_steps == 0:
        n_eval = sum(
            ev.get("eval_uncached", 0) for per in run.lines.values() for d in per.values() for ev in d["events"].values()
        )
        numbers["eval_compiles"] = n_eval
        if n_eval:
            return FindingVerdict(
                finding, CONFIRMED,
                f"{_plural(n_eval, 'graph')} compiled while the model was in eval mode; no step barrier was "
                "reached, so the cost per switch could not be measured", numbers,
            )
        return FindingVerdict(finding, NOT_CONFIRMED, f"the line {where_ran}; no graph compiled in eval mode", numbers)
    if not ran_steps:
        return FindingVerdict(finding, NOT_CONFIRMED, f"the line {where_ran}, never inside a step", numbers)
    # Uncached compiles charged while the model was in eval mode (the child follows model.train/eval).
    eval_uc: dict = {}
    for per in run.lines.values():
        for d in per.values():
            for s, ev in d["events"].items():
                if ev.get("eval_uncached") and s < run.n_steps:
                    eval_uc[s] = eval_uc.get(s, 0) + ev["eval_uncached"]
    in_loop = {s: n for s, n in eval_uc.items() if s in set(ran_steps)}
    first = ran_steps[0]
    later = [s for s in ran_steps if s > first]
    extra = sum(in_loop.values())
    numbers["eval_compiles"] = extra
    numbers["eval_compile_steps"] = sorted(in_loop)
    if not extra:
        # No eval-mode compile seen: fall back on uncached compiles in the steps that switched after warm-up.
        eligible = [s for s in ran_steps if s >= 1 and (s >= run.steady_from or s == first)]
        compiled = [s for s in eligible if run.step_rows[s].uncached > 0]
        extra = sum(run.step_rows[s].uncached for s in compiled)
        in_loop = {s: run.step_rows[s].uncached for s in compiled}
        numbers["extra_compiles"] = extra
    if not extra:
        return FindingVerdict(
            finding, NOT_CONFIRMED, f"the line {where_ran} and no graph compiled in eval mode in those steps", numbers
        )
    quiet = [s for s in later if s not in in_loop]
    ev = (
        f"{_plural(extra, 'extra compile')} for the eval graph in steps where this line ran (step "
        f"{', '.join(map(str, sorted(in_loop)))}); one compile per distinct eval graph, not one per switch: "
        f"{len(quiet)} of the {len(later)} later switches compiled nothing"
    )
    return FindingVerdict(finding, CONFIRMED, ev, numbers)


# ---------------------------------------------------------------------------------------------------------
# Misses
# ---------------------------------------------------------------------------------------------------------
def _covered(findings: list, path: str, line: int) -> list:
    path = _norm(path)
    return [
        f
        for f in findings
        if _norm(f.path) == path and f.line <= line <= max(f.line, getattr(f, "end_line", f.line))
    ]


def find_misses(run: Run, findings: list, recompiles: list) -> tuple:
    """(misses, transfers_without_cut): lines where costly events happened on most steps with no finding."""
    misses, quiet = [], []
    n = run.n_steps
    # Fallback ops seen on lines that have a finding: the same op on another line (typically the
    # `loss.backward()` that runs the backward of a flagged `x[mask]`) is that finding's cost, not a miss.
    flagged_ops: set = set()
    for f in findings:
        flagged_ops.update(run.stats(f.path, f.line, getattr(f, "end_line", f.line)).fallback_ops())
    # The backward of an op that fell back (a boolean-mask index in a helper) falls back again inside
    # `loss.backward()`: one cause, charged once, at the forward line; the backward line is named there.
    forward_ops: dict = {}  # op -> lines (not backward calls) where it fell back
    backward_lines = set()
    for path, per_line in run.lines.items():
        for ln, d in per_line.items():
            if not any(k not in SCALAR_READ_COUNTERS for ev in d["events"].values() for k in ev["aten"]):
                continue
            if _is_backward_call(path, ln):
                backward_lines.add((path, ln))
                continue
            for ev in d["events"].values():
                for k in ev["aten"]:
                    forward_ops.setdefault(k, set()).add((path, ln))
    steady_from = run.steady_from
    for path, per_line in run.lines.items():
        if path == "<startup>":
            continue
        for ln in sorted(per_line):
            if not per_line[ln]["events"]:
                continue
            st = run.stats(path, ln)
            steps = range(n)
            # A line is judged on the steps where it ran: a helper that runs every 4 steps and reads the
            # loss each time costs on every step where it runs. Warm-up steps do not count; what happened on
            # a single step after warm-up is listed, not counted.
            ran = [s for s in steps if st.runs.get(s) and s >= steady_from]
            cut_t = [s for s in ran if st.transfers.get(s, 0) and st.cuts(s)]
            fb = [s for s in ran if st.fallbacks.get(s)]
            plain_t = [s for s in ran if st.transfers.get(s, 0) and not st.cuts(s)]
            covered = _covered(findings, path, ln)
            if not covered:
                # A finding at a caller's line on the events' stack explains them (the helper's read is the
                # cost of the flagged call in train.py).
                for callers in run.callers(path, ln):
                    covered = [f for p, c in callers for f in _covered(findings, p, c)]
                    if covered:
                        break
            counters = {
                "transfers": sum(st.transfers.get(s, 0) for s in steps),
                "graph_cuts": sum(st.cuts(s) for s in steps),
                "scalar_reads": sum(st.scalar_reads.get(s, 0) for s in steps),
                "fallbacks": {k: v for k, v in st.fallback_ops().items()},
                "steps": sorted(set(cut_t) | set(fb) | set(plain_t)),
            }
            if covered:
                continue
            if fb and set(counters["fallbacks"]) <= flagged_ops:
                continue
            if (path, ln) in backward_lines and counters["fallbacks"] and all(
                k in forward_ops for k in counters["fallbacks"]
            ):
                continue  # named at the forward line's miss
            if (path, ln) in backward_lines and counters["fallbacks"] and all(
                k in flagged_ops or k.replace("_backward", "") in flagged_ops for k in counters["fallbacks"]
            ):
                continue  # the backward of a flagged op (`aten::_embedding_bag_backward`): that finding's cost
            via = via_text(run, path, ln)

            def on(k_steps):
                return f"on {len(k_steps)} of {n} steps{period(k_steps)}"

            if len(fb) >= 2 and _most(len(fb), len(ran)):
                ops = ", ".join(f"{k} x{v}" for k, v in sorted(counters["fallbacks"].items()))
                again = sorted(
                    f"{os.path.basename(p)}:{b}" for p, b in backward_lines
                    if any((path, ln) in forward_ops.get(k, ()) for k in counters["fallbacks"])
                )
                if again:
                    ops += "; its backward falls back again in " + ", ".join(again)
                misses.append(
                    Miss(
                        path, ln, "cpu fallback",
                        f"CPU fallback {on(fb)} ({ops}); "
                        f"{_plural(counters['transfers'], 'host transfer')} and "
                        f"{_plural(counters['graph_cuts'], 'graph cut')} at this line{via}; no rule flags it",
                        len(fb), n, counters,
                    )
                )
            elif len(cut_t) >= 2 and _most(len(cut_t), len(ran)):
                misses.append(
                    Miss(
                        path, ln, "graph-cut transfer",
                        f"{_plural(counters['transfers'], 'host transfer')} that cut the graph "
                        f"({_plural(counters['graph_cuts'], 'extra graph execution')}) {on(cut_t)}{via}; "
                        "no rule flags it",
                        len(cut_t), n, counters,
                    )
                )
            elif len(plain_t) >= 2 and _most(len(plain_t), len(ran)):
                quiet.append(
                    Miss(
                        path, ln, "transfer without graph cut",
                        f"{_plural(counters['transfers'], 'host transfer')} {on(plain_t)} with no "
                        f"graph cut (a read after the step's sync: costs a copy, not a split){via}",
                        len(plain_t), n, counters,
                    )
                )
            elif len(cut_t) == 1 or len(fb) == 1:
                s1 = (cut_t or fb)[0]
                quiet.append(
                    Miss(
                        path, ln, "once after warm-up",
                        f"{_plural(counters['transfers'], 'host transfer')}, "
                        f"{_plural(counters['graph_cuts'], 'graph cut')}"
                        + (f", CPU fallbacks {counters['fallbacks']}" if counters["fallbacks"] else "")
                        + f" on one step after warm-up (step {s1}){via}: listed, not counted",
                        1, n, counters,
                    )
                )
    by_root: dict = {}  # one miss per root-cause line, whatever the cut sites
    for rc in recompiles:
        if rc.kind != "recompile":
            continue
        lines = [(c["path"], c["line"]) for c in rc.root_causes if c["path"]]
        if rc.cut_path:
            lines.append((rc.cut_path, rc.cut_line))
        # Ops that come and go between graphs sit under a data-dependent condition: its finding explains them.
        lines += [
            (c["path"], ln)
            for c in rc.root_causes
            if c["kind"] == "structure" and c["path"] in run.user_files
            for ln in enclosing_condition_lines(c["path"], c["line"])
        ]
        lines += list(rc.cut_stack)  # a finding anywhere on the cut's stack (the caller of a helper's read)
        codes = sorted({f.code for p, ln in lines for f in _covered(findings, p, ln)})
        if any(c["kind"] == "input-shape" for c in rc.root_causes):
            # Inputs of varying shape are what XLA005 (bucketing) is about, wherever its finding sits. Only
            # then: a recompile whose root cause was not found is explained by nothing.
            codes += sorted({f.code for f in findings if f.code == "XLA005"} - set(codes))
        rc.explained_by = codes
        if codes:
            continue
        user_causes = [c for c in rc.root_causes if c["path"] in run.user_files]
        at = user_causes[0] if user_causes else None
        path, line = (at["path"], at["line"]) if at else (rc.cut_path or "", rc.cut_line or 0)
        shown = user_causes or rc.root_causes
        why = "; ".join(c["description"] for c in shown[:2]) or rc.note
        if not rc.root_causes:
            why = rc.note if rc.note.startswith("root cause not found") else "root cause not found: " + rc.note
        g = by_root.setdefault((path, line), {"steps": set(), "count": 0, "cuts": [], "why": why})
        g["steps"].update(rc.steps)
        g["count"] += rc.count
        if rc.cut_path:
            cut = f"{os.path.basename(rc.cut_path)}:{rc.cut_line}"
            if cut not in g["cuts"]:
                g["cuts"].append(cut)
    for (path, line), g in by_root.items():
        steps = sorted(g["steps"])
        if len(steps) < 2:
            # Once, never again (e.g. the first log step after the optimizer state settled): one compile is
            # not a pattern worth a miss. It stays in the report's recompiles.
            continue
        cut = f" (graph cut at {', '.join(g['cuts'])})" if g["cuts"] else ""
        misses.append(
            Miss(
                path, line, "steady-state recompile",
                f"UncachedCompile rose {_plural(g['count'], 'time')} on {len(steps)} of {len(run.steady)} steps "
                f"after warm-up{cut}: {g['why']}",
                len(steps), len(run.steady),
                {"uncached_compiles": g["count"], "steps": steps},
            )
        )
    # One line, one miss: a boolean-mask index both falls back and recompiles.
    merged: dict = {}
    for m in misses:
        key = (_norm(m.path) if m.path else "", m.line)
        if key in merged:
            first = merged[key]
            first.kind += " + " + m.kind
            first.message += "; and " + m.message
            first.counters = {**m.counters, **first.counters, "also": m.counters}
            first.steps = max(first.steps, m.steps)
        else:
            merged[key] = m
    misses = list(merged.values())
    return misses, quiet


_AST_CACHE: dict = {}


def _is_backward_call(path: str, line: int) -> bool:
    import linecache

    return ".backward(" in linecache.getline(path, line)


def enclosing_condition_lines(path: str, line: int) -> list:
    """Lines of the tests of the ``if``/``while``/ternaries whose body holds ``line`` (innermost last)."""
    tree = _AST_CACHE.get(path)
    if tree is None:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                tree = ast.parse(fh.read(), filename=path)
        except (OSError, SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        _AST_CACHE[path] = tree
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            test = node.test
            end = getattr(node, "end_lineno", node.lineno) or node.lineno
            if node.lineno <= line <= end and not (test.lineno <= line <= (test.end_lineno or test.lineno)):
                out.extend(range(test.lineno, (test.end_lineno or test.lineno) + 1))
    return out


# ---------------------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------------------
def timing(run: Run) -> dict:
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
