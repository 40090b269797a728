"""What a ``--verify`` run reports: ``VerifyReport`` and its parts (``FindingVerdict``, ``Miss``,
``Recompile``), and the verdicts' names. Plain values: every view (``report.py``, ``html.py``) reads these.

The per-step rows (``StepRow``) belong to the run's step table, ``step_table.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

CONFIRMED = "CONFIRMED"
NOT_CONFIRMED = "NOT CONFIRMED"
NOT_REACHED = "NOT REACHED"


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
    cut_cell: int | None = None  # a notebook's cell (xlalint/verify/by_cell.py): cut_line is in the cell
    compile_ms: float | None = None  # the compile time measured at its cut line and steps (costs.py)


@dataclass
class Miss:
    path: str
    line: int
    kind: str  # "graph-cut transfer" | "cpu fallback" | "steady-state recompile"
    message: str
    steps: int  # steps on which it happened
    of_steps: int
    counters: dict = field(default_factory=dict)
    cell: int | None = None  # a notebook's cell (xlalint/verify/by_cell.py): line is in the cell


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
    costs: dict = field(default_factory=dict)  # where the time goes: costs.measure's ranking, {} when not measured
    fix_impact: dict | None = None  # --fix-impact: the median ms per step before and after each fix (fix_impact.py)

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
        for part, key in (("misses", "cell"), ("transfers_without_cut", "cell"), ("recompiles", "cut_cell")):
            for item in d[part]:  # a notebook's cell, only where there is one (as Finding.to_dict)
                if item.get(key) is None:
                    item.pop(key, None)
        return d


def _finding_dict(f) -> dict:
    if hasattr(f, "to_dict"):
        return f.to_dict()
    keys = ("code", "name", "message", "path", "line", "column", "end_line", "end_column")
    return {k: getattr(f, k, None) for k in keys}
