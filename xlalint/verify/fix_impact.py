"""``--verify --fix-impact``: what each available fix saves, measured.

Every finding with an automatic fix (safe or unsafe, as ``--fix --unsafe-fixes`` would apply it) is applied
on its own to the text of its file, and then all of them together; the program runs again on each fixed
text, for the same steps with the same seed, and the report gives the median ms per step after warm-up
before (the verify run itself) and after each. The fixed text is held in memory and handed to the child
(``runner.run_child``'s ``sources``), which compiles it in place of the file's content: the user's files are
never written, and the program still runs from its own directory (its data, its relative imports). Each
run says what it changed besides the time (transfers, uncached compiles and CPU fallbacks per step after
warm-up), which is what a test can check without a timing threshold.
"""

from __future__ import annotations

import os

from xlalint.fix import apply_edits
from xlalint.report.text import fixable
from xlalint.verify.costs import fmt_ms


def measure_fix_impact(report, run_with) -> dict:
    """``run_with(sources) -> VerifyReport`` runs the program with ``{path: fixed text}``. Returns
    {"before": {...}, "fixes": [{"fixes": [...], "after": {...}}], "all": {...} or None}."""
    fixes = [v.finding for v in report.findings if fixable(v.finding, True)]
    out = {"before": _figures(report), "fixes": [], "all": None}
    for f in fixes:
        out["fixes"].append(_measure([f], run_with))
    if len(fixes) > 1:
        out["all"] = _measure(fixes, run_with)
    return out


def _described(f) -> dict:
    return {"code": f.code, "name": getattr(f, "name", ""), "path": f.path, "line": f.line,
            "title": getattr(f, "fix_title", "") or "", "applicability": getattr(f, "applicability", "")}


def _measure(fs: list, run_with) -> dict:
    entry = {"fixes": [_described(f) for f in fs]}
    try:
        sources = fixed_sources(fs)
    except (OSError, UnicodeDecodeError) as exc:
        return dict(entry, after=None, error=f"could not read the file to fix: {exc}")
    if not any(n for _, n in sources.values()):
        return dict(entry, after=None, error="the fix no longer applies to the file (it changed since it was linted)")
    rep = run_with({p: text for p, (text, _) in sources.items()})
    after = _figures(rep)
    if rep.status != "ok":
        return dict(entry, after=after, error=f"the fixed program did not run to the end: {rep.error or rep.status}")
    return dict(entry, after=after, error=None)


def fixed_sources(fs: list) -> dict:
    """{real path: (its text with the findings' edits applied, number of fixes applied)}."""
    by_file: dict = {}
    for f in fs:
        by_file.setdefault(os.path.realpath(f.path), []).append(f.edits)
    out = {}
    for path, groups in by_file.items():
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        out[path] = apply_edits(text, groups)
    return out


def _figures(rep) -> dict:
    steady = [r for r in rep.steps if not r.warmup]
    n = len(steady) or 1
    return {
        "median_ms": (rep.timing or {}).get("steady_median_ms"),
        "steps": len(rep.steps),
        "steady_steps": len(steady),
        "transfers_per_step": round(sum(r.transfers for r in steady) / n, 3),
        "uncached_after_warmup": sum(r.uncached for r in steady),
        "fallbacks_per_step": round(sum(r.fallbacks for r in steady) / n, 3),
    }


def impact_rows(fi: dict, shown) -> list:
    """One row per fix measured, then all together: what the text and the HTML page show. Each row:
    ``label``, ``applicability``, ``title``, ``after`` (the figures, or None), ``error`` (or None),
    ``after_ms``, ``saved_ms`` (negative: it cost time), ``saved_pct`` (or None), ``same_counters`` (no
    transfer, fallback or compile changed: the difference in time is likely noise)."""
    before = fi["before"]
    b = before["median_ms"]
    rows = []
    entries = [(e, None) for e in fi["fixes"]] + ([(fi["all"], "all")] if fi.get("all") else [])
    for e, together in entries:
        f = e["fixes"][0]
        row = {"label": f"all {len(e['fixes'])} fixes together" if together else f"{shown(f['path'])}:{f['line']} {f['code']}",
               "applicability": "" if together else f["applicability"], "title": "" if together else f.get("title") or "",
               "after": e.get("after"), "error": e.get("error"), "after_ms": None, "saved_ms": None, "saved_pct": None,
               "same_counters": False}
        a = (e.get("after") or {}).get("median_ms")
        if not e.get("error") and a is not None and b is not None:
            row.update(after_ms=a, saved_ms=b - a, saved_pct=round(100 * (b - a) / b) if b > 0 else None,
                       same_counters=all(e["after"][k] == before[k] for k in _COUNTERS))
        rows.append(row)
    return rows


def render_lines(fi: dict | None, shown) -> list:
    """The text report's "What the fixes save" section."""
    if not fi:
        return []
    before = fi["before"]
    b = before["median_ms"]
    out = [f"What the fixes save (--fix-impact: each fix applied in memory, the files untouched; one run each, median "
           f"per step after warm-up over {before['steady_steps']} steps):"]
    if not fi["fixes"]:
        return out + ["  no finding has an automatic fix"]
    out.append(f"  before: {fmt_ms(b) if b is not None else 'not measured'}; {_events(before)}")
    for r in impact_rows(fi, shown):
        label = r["label"] + (f" ({r['applicability']} fix)" if r["applicability"] else "")
        if r["error"]:
            out.append(f"  {label}: {r['error']}")
        elif r["saved_ms"] is None:
            out.append(f"  {label}: not measured")
        else:
            saved = r["saved_ms"]
            pct = f", {r['saved_pct']}%" if r["saved_pct"] is not None else ""
            out.append(f"  {label}: {fmt_ms(r['after_ms'])} ({'saves' if saved >= 0 else 'costs'} {fmt_ms(abs(saved))}{pct}); "
                       f"{_events(r['after'])}" + ("; " + NOISE if r["same_counters"] else ""))
    return out


NOISE = "no counter changed: the difference in time is likely noise"
_COUNTERS = ("transfers_per_step", "fallbacks_per_step", "uncached_after_warmup")


def _events(fig: dict) -> str:
    return (f"per step: transfers {fig['transfers_per_step']:g}, CPU fallbacks {fig['fallbacks_per_step']:g}; "
            f"uncached compiles after warm-up: {fig['uncached_after_warmup']}")
