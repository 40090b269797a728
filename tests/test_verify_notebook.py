"""``xlalint --verify notebook.ipynb``: findings, misses and recompiles cite `cell N, line L` (as the static
report does), never the temporary script the cells ran as: in the report's values, text, JSON and HTML."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from xlalint.findings import Finding
from xlalint.sources import notebook
from xlalint.verify.by_cell import by_cell
from xlalint.verify.results import FindingVerdict, Miss, Recompile, VerifyReport

# cell 1 is markdown (cells count as the notebook shows them); cell 3's helper reads the loss under a
# `# noqa` (a miss, reached via cell 4's call), cell 4's batch grows every step (a steady-state recompile
# whose root cause is cell 4, line 3) and its `if loss > 1e9` is a finding (cell 4, line 6, column 8).
CELLS = [
    new_markdown_cell("# a notebook under --verify"),
    new_code_cell("import torch\nimport torch_xla\n\ndevice = torch_xla.device()\nmodel = torch.nn.Linear(4, 2).to(device)"),
    new_code_cell("def log_loss(loss):\n    value = loss.item()  # noqa: XLA001\n    return value"),
    new_code_cell("!echo training\nfor step in range(6):\n    x = torch.randn(4 + step, 4).to(device)\n"
                  "    loss = model(x).sum()\n    log_loss(loss)\n    if loss > 1e9:\n        print('diverging')\n"
                  "    torch_xla.sync()"),
]


def write_notebook(tmp_path: Path, cells=CELLS) -> Path:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "x"}
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_verify_reports_a_notebook_by_cell(tmp_path: Path, xla, forked_verify_children):
    from xlalint.verify import collect, render_json, render_text
    from xlalint.verify.html import render_html
    from xlalint.verify.report import shown_path

    path = write_notebook(tmp_path)
    report = collect(str(path), max_steps=6, timeout=300)
    assert report.target == str(path) and report.exit_code == 1, report.error
    nb = str(path)
    assert [(v.finding.path, v.finding.cell, v.finding.line, v.finding.column, v.finding.code, v.status)
            for v in report.findings] == [(nb, 4, 6, 8, "XLA002", "CONFIRMED")]
    assert [(m.path, m.cell, m.line, m.kind) for m in report.misses] == [
        (nb, 3, 2, "graph-cut transfer"), (nb, 4, 3, "steady-state recompile")]
    assert " via nb.ipynb:cell 4:5;" in report.misses[0].message
    real = [rc for rc in report.recompiles if rc.kind == "recompile"]
    assert {(rc.cut_path, rc.cut_cell, rc.cut_line) for rc in real} == {(nb, 3, 2), (nb, 4, 6), (nb, 4, 8)}
    assert {(c["path"], c["cell"], c["line"]) for rc in real for c in rc.root_causes if c.get("user")} == {(nb, 4, 3)}
    assert all("nb.ipynb:cell 4:3)" in c["description"] for rc in real for c in rc.root_causes if c.get("user"))
    assert report.user_files == [nb]

    shown = shown_path(nb)  # relative to the working directory when under it
    text = render_text(report)
    assert f"\n  {shown}:cell 4:6:8: XLA002 tensor-condition: CONFIRMED" in text
    assert f"\n  {shown}:cell 3:2: graph-cut transfer: " in text
    assert f"\n  {shown}:cell 4:3: steady-state recompile: " in text
    # one entry per root cause (issue 36), its cuts by cell
    assert f"graph cuts at {shown}:cell 3:2; {shown}:cell 4:6, 8\n" in text
    assert f"root cause {shown}:cell 4:3: input shape changed" in text
    data = json.loads(render_json(report))
    assert [(f["filename"], f["cell"], f["line"], f["column"]) for f in data["findings"]] == [(nb, 4, 6, 8)]
    assert [(m["cell"], m["line"]) for m in data["misses"]] == [(3, 2), (4, 3)]
    assert {(rc["cut_cell"], rc["cut_line"]) for rc in data["recompiles"] if rc["kind"] == "recompile"} == {
        (3, 2), (4, 6), (4, 8)}
    page = render_html(report)
    assert f"<code>{shown}:cell 4:6</code><span class=\"src\">    6      if loss &gt; 1e9:</span>" in page
    assert f"<code>{shown}:cell 3:2</code><span class=\"src\">    2      value = loss.item()" in page
    assert f"<code>{shown}:cell 4:3</code> input shape changed" in page
    script = Path(notebook.write_script(str(path))[0]).name
    for shown in (text, json.dumps(data), page):
        assert script not in shown and "xlalint-notebooks" not in shown


# ------------------------------------------------------------------------- the mapping, without a run
def _report(script: str, **kw) -> VerifyReport:
    base = dict(target=script, status="ok", exit_code=1, stop_reason="error", steps=[], warmup=2, max_steps=4,
                findings=[], misses=[], recompiles=[], transfers_without_cut=[], user_files=[script], timing={},
                notes=[])
    return VerifyReport(**{**base, **kw})


def test_by_cell_moves_every_place_of_the_script_and_no_other(tmp_path: Path):
    """Stops, tracebacks, program output, cut stacks and a missing barrier's loop are moved too; the
    header line and a module the notebook imports are not."""
    path = write_notebook(tmp_path)
    script, table = notebook.write_script(str(path), str(tmp_path / "out"))
    name = Path(script).name
    helper = str(tmp_path / "helpers.py")
    # the script: line 1 the header, line 2 cell 2's marker, cell 2 lines 3-7, cell 3 at 9-11, cell 4 at 13-20
    assert table == [[2, 3, 5], [3, 9, 3], [4, 13, 8]]
    f = Finding(script, 18, 8, "XLA002", 18, 16, "tensor-condition", f"called from {name}:17", headline="h",
                cost=f"at {name}:18")
    report = _report(
        script,
        findings=[FindingVerdict(f, "CONFIRMED", f"4 host transfers via {name}:17 <- {name}:1")],
        misses=[Miss(script, 10, "graph-cut transfer", f"via {name}:17", 4, 4),
                Miss(helper, 3, "cpu fallback", "x", 4, 4)],
        recompiles=[Recompile([2], 1, script, 20, [
            {"path": script, "line": 15, "user": True, "description": "d"},
            {"path": "/usr/lib/functional.py", "line": 7, "user": False, "description": "e"}],
            "note", cut_stack=[[script, 20], [helper, 5]])],
        where=[{"path": script, "line": 17, "function": "<module>"}, {"path": script, "line": 10, "function": "log_loss"}],
        traceback=(f'Traceback (most recent call last):\n  File "{script}", line 17, in <module>\n'
                   f'  File "{helper}", line 2, in f\n'),
        program_output=f"{script}:6: DeprecationWarning: Use torch_xla.device instead",
        no_barrier={"loop": {"path": script, "line": 14, "end_line": 20}, "step_line": [script, 19],
                    "message": f"the loop at {name}:14 ran", "fix": "sync",
                    "iterations": [{"ir_nodes": 3, "uncached": 1, "cached": 0, "transfers": 0, "compile_s": 0.5, "wall_s": 1}]},
        notes=[f"{name}:1 is the header", f"not {name}x:3, not x{name}:3"],
    )
    out = by_cell(report, str(path), script, table)
    nb = str(path)
    (v,) = out.findings
    assert (v.finding.path, v.finding.cell, v.finding.line, v.finding.end_line, v.finding.column) == (nb, 4, 6, 6, 8)
    assert v.finding.message == "called from nb.ipynb:cell 4:5" and v.finding.cost == "at nb.ipynb:cell 4:6"
    assert v.evidence == f"4 host transfers via nb.ipynb:cell 4:5 <- {name}:1"  # the header line is no cell's
    assert [(m.path, m.cell, m.line, m.message) for m in out.misses] == [
        (nb, 3, 2, "via nb.ipynb:cell 4:5"), (helper, None, 3, "x")]
    (rc,) = out.recompiles
    assert (rc.cut_path, rc.cut_cell, rc.cut_line) == (nb, 4, 8)
    assert [(c["path"], c.get("cell"), c["line"]) for c in rc.root_causes] == [(nb, 4, 3), ("/usr/lib/functional.py", None, 7)]
    assert rc.cut_stack == [[nb, 8, 4], [helper, 5]]
    assert [(w["cell"], w["line"], w["function"]) for w in out.where] == [(4, 5, "<module>"), (3, 2, "log_loss")]
    assert out.traceback == (f'Traceback (most recent call last):\n  File "{nb}", cell 4, line 5, in <module>\n'
                             f'  File "{helper}", line 2, in f\n')
    assert out.program_output == f"{nb}:cell 2:4: DeprecationWarning: Use torch_xla.device instead"
    assert out.no_barrier["loop"] == {"path": nb, "line": 2, "end_line": 8, "cell": 4}
    assert out.no_barrier["step_line"] == [nb, 7, 4] and out.no_barrier["message"] == "the loop at nb.ipynb:cell 4:2 ran"
    assert out.notes == [f"{name}:1 is the header", f"not {name}x:3, not x{name}:3"]
    assert out.user_files == [nb]

    from xlalint.verify.report import render_text, shown_path, where_text

    shown = shown_path(nb)
    assert where_text(out) == f"at {shown}:cell 3:2 in log_loss via nb.ipynb:cell 4:5"
    text = render_text(out)
    assert f"\n  {shown}:cell 4:6:8: XLA002 tensor-condition: CONFIRMED" in text
    assert f"Missing step barrier at {shown}:cell 4:2:" in text
    assert f"\n  {shown}:cell 3:2: graph-cut transfer: via nb.ipynb:cell 4:5" in text
    assert f"\n  {shown_path(helper)}:3: cpu fallback: x" in text
    data = json.loads(json.dumps(out.to_dict(), default=str))
    assert [m.get("cell") for m in data["misses"]] == [3, None] and "cell" not in data["misses"][1]


def test_the_judged_findings_are_the_notebooks_own_on_the_scripts_lines(tmp_path: Path):
    """The findings --verify judges are what `xlalint nb.ipynb` reports (the notebook linted where it
    is, as a notebook), on the script's lines: a CPU tutorial notebook that never places a tensor on a
    device is host code there, while the same cells as a .py script (a module that is no program: no main block,
    no loop at its top level) would get an XLA001."""
    from xlalint.verify import _default_findings_provider
    from xlalint.verify.by_cell import script_findings

    path = write_notebook(tmp_path)
    script, table = notebook.write_script(str(path), str(tmp_path / "out"))
    provide = script_findings(str(path), script, table, _default_findings_provider)
    assert [(f.path, f.cell, f.line, f.column, f.end_line, f.code) for f in provide([script])] == [
        (script, None, 18, 8, 18, "XLA002")]  # cell 4 starts at the script's line 13: its line 6 is 18

    (tmp_path / "cpu").mkdir()
    cpu = write_notebook(tmp_path / "cpu", [
        new_code_cell("import torch\nmodel = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)"),
        new_code_cell("def train(steps):\n    for step in range(steps):\n        loss = model(torch.randn(8, 4)).pow(2).mean()\n"
                      "        loss.backward()\n        opt.step()\n        print(loss.item())\n"),
        new_code_cell("train(100)")])
    script, table = notebook.write_script(str(cpu), str(tmp_path / "out"))
    assert [f.code for f in _default_findings_provider([script])] == ["XLA001"]  # the script alone
    assert script_findings(str(cpu), script, table, _default_findings_provider)([script]) == []
