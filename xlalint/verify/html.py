"""``--verify --html report.html``: one self-contained page (no network, no external file).

The per-step plot is drawn in the browser from the report's JSON embedded in the page (an inline
``<script type="application/json">``) by a small inline script; everything else (findings with their
verdicts beside their source lines, misses, recompiles and their root causes) is plain HTML, readable even
with scripts off.
"""

from __future__ import annotations

import html
import json
import linecache
import os

from xlalint.sources.notebook import cell_line
from xlalint.verify.costs import fmt_ms, none_label, percent, row_label
from xlalint.verify.fix_impact import NOISE, impact_rows
from xlalint.verify.report import place, shown_path, stop_text

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2329;max-width:1200px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:26px 0 8px;border-bottom:1px solid #ddd}
.sub{color:#555} code,pre,.src{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
table{border-collapse:collapse;width:100%} td,th{padding:4px 8px;border-bottom:1px solid #eee;vertical-align:top;text-align:left}
th{background:#f6f8fa} .num{text-align:right;font-variant-numeric:tabular-nums}
.v{font-weight:600;white-space:nowrap;padding:1px 6px;border-radius:4px}
.CONFIRMED{background:#fde2e1;color:#9a1c14} .NOT_CONFIRMED{background:#e6f4ea;color:#1e6b34} .NOT_REACHED{background:#eee;color:#555}
.src{background:#f6f8fa;padding:2px 6px;border-radius:3px;white-space:pre;display:block;overflow-x:auto}
.charts{display:grid;grid-template-columns:repeat(2,1fr);gap:14px} .chart{border:1px solid #eee;padding:6px}
.chart h3{font-size:13px;margin:0 0 4px;font-weight:600} .warm{fill:#c9d1d9} .steady{fill:#4a78b5}
.miss{background:#fff8e1} .err{background:#fde2e1;padding:8px;border-radius:4px}
#costs .num,#costs th{white-space:nowrap} .bar{background:#f0f3f6;height:14px;min-width:120px} .bar span{display:block;height:14px;background:#c0392b}
.bar span.none{background:#8a99a8} .bar span.rest{background:#c9d1d9}
"""

_SCRIPT = r"""
(function () {
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var steps = data.steps || [];
  var series = [
    ['uncached', 'Uncached compiles per step'], ['transfers', 'Host transfers per step'],
    ['fallbacks', 'CPU fallbacks per step'], ['wall_ms', 'Wall time per step (ms)']
  ];
  var host = document.getElementById('charts');
  var NS = 'http://www.w3.org/2000/svg';
  series.forEach(function (s) {
    var key = s[0], box = document.createElement('div');
    box.className = 'chart'; box.setAttribute('data-series', key);
    var h = document.createElement('h3'); h.textContent = s[1]; box.appendChild(h);
    var W = 540, H = 130, pad = 28, n = Math.max(steps.length, 1);
    var top = Math.max.apply(null, steps.map(function (r) { return r[key]; }).concat([1]));
    var svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('width', W); svg.setAttribute('height', H); svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    var bw = (W - pad - 4) / n;
    steps.forEach(function (r, i) {
      var v = r[key], bh = (H - 2 * pad) * v / top;
      var rect = document.createElementNS(NS, 'rect');
      rect.setAttribute('x', pad + i * bw + 1); rect.setAttribute('width', Math.max(bw - 2, 1));
      rect.setAttribute('y', H - pad - bh); rect.setAttribute('height', Math.max(bh, v ? 1 : 0));
      rect.setAttribute('class', r.warmup ? 'warm' : 'steady');
      rect.setAttribute('data-step', r.index); rect.setAttribute('data-value', v);
      var t = document.createElementNS(NS, 'title'); t.textContent = 'step ' + r.index + ': ' + v; rect.appendChild(t);
      svg.appendChild(rect);
      if (n <= 40) {
        var lab = document.createElementNS(NS, 'text');
        lab.setAttribute('x', pad + i * bw + bw / 2); lab.setAttribute('y', H - pad + 12);
        lab.setAttribute('font-size', '9'); lab.setAttribute('text-anchor', 'middle'); lab.textContent = r.index;
        svg.appendChild(lab);
      }
    });
    var ax = document.createElementNS(NS, 'text');
    ax.setAttribute('x', 2); ax.setAttribute('y', pad - 6); ax.setAttribute('font-size', '10');
    ax.textContent = 'max ' + (Math.round(top * 10) / 10); svg.appendChild(ax);
    box.appendChild(svg);
    var total = steps.reduce(function (a, r) { return a + r[key]; }, 0);
    var p = document.createElement('div'); p.className = 'sub';
    p.textContent = 'total ' + (Math.round(total * 10) / 10) + ' over ' + steps.length + ' steps (grey: warm-up)';
    box.appendChild(p);
    host.appendChild(box);
  });
  if (!steps.length) { host.textContent = 'No step barrier was reached: nothing per step to plot.'; }
  document.body.setAttribute('data-rendered', 'ok');
})();
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _source(path: str, line: int, cell=None) -> str:
    """The source line beside a place: a file's line, or a notebook cell's."""
    if cell is not None:
        text = cell_line(path, cell, line) if path and line else ""
    else:
        text = linecache.getline(path, line).rstrip("\n") if path and line else ""
    return f'<span class="src">{line:>5}  {_e(text)}</span>' if text else ""


def render_html(report) -> str:
    data = report.to_dict()
    out = []
    w = out.append
    n = len(report.steps)
    w("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>")
    w(f"<title>xlalint --verify {_e(report.target)}</title><style>{_CSS}</style></head><body>")
    w(f"<h1>xlalint --verify <code>{_e(report.target)}</code></h1>")
    w(f'<div class=sub id=summary>{n} step{"s" if n != 1 else ""} ({_e(stop_text(report))}); '
      f"exit {report.exit_code}; ran {report.elapsed:g} s</div>")
    if report.error:
        w(f"<p class=err>error: {_e(report.error)}</p>")
        if report.traceback:
            w(f"<pre>{_e(report.traceback)}</pre>")
    nb = getattr(report, "no_barrier", None)
    if nb:
        w("<h2>Missing step barrier</h2>")
        w(f"<p>{_e(nb['message'])}</p><table id=iterations><tr><th>iteration<th class=num>IR nodes"
          "<th class=num>uncached<th class=num>transfers<th class=num>compile s<th class=num>wall s</tr>")
        for i, r in enumerate(nb["iterations"], 1):
            w(f"<tr><td>{i}<td class=num>{r['ir_nodes']}<td class=num>{r['uncached']}<td class=num>"
              f"{r['transfers']}<td class=num>{r['compile_s']:g}<td class=num>{r['wall_s']:g}</tr>")
        w(f"</table><p>Fix: {_e(nb['fix'])}</p>")
    _costs(report, w)
    _fix_impact(report, w)
    w("<h2>Per step</h2><div class=charts id=charts></div>")
    if report.steps:
        w("<details><summary>table</summary><table id=steps><tr><th>step<th class=num>uncached<th class=num>cached"
          "<th class=num>transfers<th class=num>fallbacks<th class=num>wall ms<th></tr>")
        for r in report.steps:
            w(f"<tr><td>{r.index}<td class=num>{r.uncached}<td class=num>{r.cached}<td class=num>{r.transfers}"
              f"<td class=num>{r.fallbacks}<td class=num>{r.wall_ms:.1f}<td>{'warm-up' if r.warmup else ''}</tr>")
        w("</table></details>")
    w(f"<h2>Findings ({len(report.findings)})</h2>")
    if report.findings:
        w("<table id=findings><tr><th>where<th>rule<th>verdict<th>evidence</tr>")
        for v in report.findings:
            f = v.finding
            cls = v.status.replace(" ", "_")
            cell = getattr(f, "cell", None)
            w(f"<tr><td><code>{_e(place(f.path, f.line, cell))}</code>{_source(f.path, f.line, cell)}"
              f"<td><code>{_e(f.code)}</code> {_e(getattr(f, 'name', ''))}"
              f"<td><span class='v {cls}'>{_e(v.status)}</span><td>{_e(v.evidence)}</tr>")
        w("</table>")
    else:
        w("<p class=sub>none</p>")
    w(f"<h2>Misses ({len(report.misses)})</h2>")
    if report.misses:
        w("<table id=misses><tr><th>where<th>kind<th>what was measured</tr>")
        for m in report.misses:
            w(f"<tr class=miss><td><code>{_e(place(m.path, m.line, m.cell))}</code>{_source(m.path, m.line, m.cell)}"
              f"<td>{_e(m.kind)}<td>{_e(m.message)}</tr>")
        w("</table>")
    else:
        w("<p class=sub>none</p>")
    if report.recompiles:
        w(f"<h2>Compiles after warm-up ({len(report.recompiles)})</h2><table id=recompiles>"
          "<tr><th>kind<th>steps<th>graph cut at<th>root cause<th>explained by<th class=num>compile time</tr>")
        for rc in report.recompiles:
            cut = place(rc.cut_path, rc.cut_line, rc.cut_cell) if rc.cut_path else "unknown"
            causes = "".join(
                f"<div><code>{_e(place(c['path'], c['line'], c.get('cell')))}</code> {_e(c['description'])}</div>"
                for c in rc.root_causes if c.get("user")
            ) or _e(rc.note)
            w(f"<tr><td>{_e(rc.kind)}<td>{_e(', '.join(map(str, rc.steps)))}<td><code>{_e(cut)}</code>"
              f"<td>{causes}<td>{_e(', '.join(rc.explained_by) or '-')}"
              f"<td class=num>{_e(fmt_ms(rc.compile_ms)) if rc.compile_ms is not None else '-'}</tr>")
        w("</table>")
    if report.transfers_without_cut:
        w("<h2>Listed, not counted</h2><ul>")
        for m in report.transfers_without_cut:
            w(f"<li><code>{_e(place(m.path, m.line, m.cell))}</code> {_e(m.message)}</li>")
        w("</ul>")
    if report.notes:
        w("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in report.notes) + "</ul>")
    payload = json.dumps(data, default=str).replace("</", "<\\/")
    w(f'<script type="application/json" id="report-data">{payload}</script>')
    w(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(out) + "\n"


def _costs(report, w) -> None:
    """"Where the time goes": the ranked findings and misses, the lines no rule flags and the unexplained
    rest, each with its ms per step and a bar of its share of the step time (plain HTML and CSS)."""
    costs = getattr(report, "costs", None) or {}
    if not costs:
        return
    step_ms = costs["step_ms"]
    w(f"<h2>Where the time goes</h2><p class=sub>after warm-up: {costs['steady_steps']} steps, "
      f"{_e(fmt_ms(step_ms))} per step on average; ranked by measured cost</p>")
    w("<table id=costs><tr><th>#<th>what<th class=num>per step<th class=num>share<th>bar<th>how</tr>")

    def row(rank, label, ms, how, cls=""):
        share = ms / step_ms if step_ms > 0 else 0.0
        width = max(0.0, min(100.0, 100 * share))
        w(f"<tr data-ms='{ms:.3f}'><td>{rank}<td>{label}<td class=num>{_e(fmt_ms(ms))}<td class=num>{_e(percent(share))}"
          f"<td><div class=bar><span class='{cls}' style='width:{width:.1f}%'></span></div><td>{_e(how)}</tr>")

    for k, r in enumerate(costs["rows"], 1):
        row(k, f"<code>{_e(row_label(r, shown_path))}</code>", r["ms_per_step"], r["text"])
    if costs["no_finding_lines"]:
        row("", _e("no finding: " + none_label(costs, shown_path)), costs["no_finding_ms"],
            "the step's own compiles, executions and copies", "none")
    row("", "unexplained", max(costs["unexplained_ms"], 0.0),
        "the rest of the step (Python, tracing the graph, the input pipeline, executions nobody waited for)", "rest")
    w("</table>")


def _fix_impact(report, w) -> None:
    """``--fix-impact``: "What the fixes save", as the text report says it: the median ms per step after
    warm-up before and after each fix and all together, with the transfers, CPU fallbacks and compiles."""
    fi = getattr(report, "fix_impact", None)
    if not fi:
        return
    before = fi["before"]
    w(f"<h2>What the fixes save</h2><p class=sub>--fix-impact: each fix applied in memory, the files untouched; "
      f"one run each, median per step after warm-up over {before['steady_steps']} steps</p>")
    if not fi["fixes"]:
        w("<p class=sub>no finding has an automatic fix</p>")
        return
    w("<table id=fix-impact><tr><th>fix<th class=num>ms per step<th class=num>saves<th class=num>transfers per step"
      "<th class=num>CPU fallbacks per step<th class=num>uncached compiles after warm-up<th>note</tr>")

    def counters(fig) -> str:
        return (f"<td class=num>{fig['transfers_per_step']:g}<td class=num>{fig['fallbacks_per_step']:g}"
                f"<td class=num>{fig['uncached_after_warmup']}")

    b = before["median_ms"]
    w(f"<tr data-fix=before><td>before (the verify run)<td class=num>{_e(fmt_ms(b)) if b is not None else 'not measured'}"
      f"<td class=num>{counters(before)}<td></tr>")
    for r in impact_rows(fi, shown_path):
        what = f"<code>{_e(r['label'])}</code>" + (f" ({_e(r['applicability'])} fix)" if r["applicability"] else "")
        if r["title"]:
            what += f"<div class=sub>{_e(r['title'])}</div>"
        if r["error"] or r["saved_ms"] is None:
            w(f"<tr data-fix=error><td>{what}<td class=num>-<td class=num>-<td class=num>-<td class=num>-<td class=num>-"
              f"<td>{_e(r['error'] or 'not measured')}</tr>")
            continue
        saved = r["saved_ms"]
        pct = f" ({r['saved_pct']}%)" if r["saved_pct"] is not None else ""
        w(f"<tr data-fix=measured data-after-ms='{r['after_ms']:.3f}'><td>{what}<td class=num>{_e(fmt_ms(r['after_ms']))}"
          f"<td class=num>{'' if saved >= 0 else '-'}{_e(fmt_ms(abs(saved)))}{pct}{counters(r['after'])}"
          f"<td>{_e(NOISE) if r['same_counters'] else ''}</tr>")
    w("</table>")


def write_html(report, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(render_html(report))
    os.replace(tmp, path)
