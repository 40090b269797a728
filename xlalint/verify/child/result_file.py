"""The child's one output: a JSON file with what the recorder measured, in the shape the parent reads
(``xlalint/verify/step_table.py``'s ``Run``).

Written once at the end; or, when the run is stopped from outside, first as a partial result by the
control thread (the main thread may be deep in an XLA compile that never returns to Python in time), then
replaced by the final one if the program gets that far.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def result_dict(rec, status: str, **extra) -> dict:
    """The result: the run's status, the totals per step, and per user line what ran and what moved."""
    lines = _line_table(rec)
    end = {}
    try:
        end = rec.totals()
        end["wall"] = time.perf_counter() - rec.t_last_step
        end["dump_offset"] = rec.dump_size()
    except Exception:  # torch_xla never imported or broken: no counters at all
        pass
    files = sorted({f for f in lines if f != "<startup>"})
    return {
        "status": status,
        "steps": list(rec.steps),
        "where": rec.where,
        "no_barrier": rec.no_barrier,
        "stopped_inside": rec.stopped_inside,
        "tail": end,
        "start": rec.start_totals,
        "lines": lines,
        "user_files": [os.path.realpath(f) for f in files],
        "file_map": {f: os.path.realpath(f) for f in files},
        **extra,
    }


def _line_table(rec) -> dict:
    """file -> line -> {"hits": {step: n}, "events": {step: counters}, "via": ..., "paths": [...]}."""
    lines: dict = {}
    hits = dict(rec.hits)  # copies: the control thread may write a partial result while the program runs
    # Probes: runs since the last barrier belong to the step after it (the tail), like the tracer's lines.
    probe_hits = dict(rec.probe_hits)
    for i, n in enumerate(list(rec.probe_counts)):
        if n:
            probe_hits[(i, rec.step)] = probe_hits.get((i, rec.step), 0) + n
    spans = list(rec.probe_spans)
    for (i, st), n in probe_hits.items():
        f, a, b = spans[i]
        for ln in range(a, b + 1):
            key = (f, ln, st)
            hits[key] = max(hits.get(key, 0), n)
    events = {k: [v[0], v[1], v[2], dict(v[3]), v[4], *v[5:]] for k, v in dict(rec.events).items()}
    via = {k: [v[0], v[1], v[2], dict(v[3]), v[4]] for k, v in dict(rec.via).items()}

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
            if name == "events" and len(ev) > 5:
                # what it cost: the main thread's wait in the calls that moved the counters, and the
                # compile and transfer time torch_xla measured (ms)
                entry(f, ln)[name][str(st)].update(
                    wall_ms=round(ev[5] * 1e3, 3), compile_ms=round(ev[6] * 1e3, 3), transfer_ms=round(ev[7] * 1e3, 3)
                )
    for (f, ln), per in dict(rec.paths).items():
        entry(f, ln)["paths"] = [
            {"callers": [[os.path.realpath(c[0]), c[1]] for c in callers], "n": n} for callers, n in per.items()
        ]
    return lines


class ResultWriter:
    """Writes the result file atomically: once for good (``final``), any number of times partially before."""

    def __init__(self, rec, path: str):
        self.rec = rec
        self.path = path
        self.written = False
        self.lock = threading.Lock()

    def write(self, status: str, final: bool = True, **extra) -> None:
        with self.lock:
            if self.written:
                return
            if final:
                self.written = True
                sys.settrace(None)
            data = result_dict(self.rec, status, **extra)
            if not final:
                data["partial"] = True
            tmp = self.path + (".tmp" if final else ".partial")
            with open(tmp, "w") as fh:
                json.dump(data, fh)
            os.replace(tmp, self.path)
