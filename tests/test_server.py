"""``xlalint server`` end to end, driven by a real LSP client (pytest-lsp) over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

HOST_READ = (
    "import torch\n"
    "for x in loader:\n"
    "    loss = model(x).sum()\n"
    "    v = loss.item()\n"
)

# The same server, except that its one lint function raises for files named crash.py.
CRASHING = (
    "import sys, xlalint.server as s\n"
    "real = s.lint_document\n"
    "def lint(path, text, settings):\n"
    "    if path.endswith('crash.py'):\n"
    "        raise RuntimeError('boom')\n"
    "    return real(path, text, settings)\n"
    "s.lint_document = lint\n"
    "sys.exit(s.main([]))\n"
)


# The same server, with one rule raising on every call it sees (a bug in xlalint): XLA902, not a crash.
BROKEN_RULE = (
    "import sys, xlalint.server as s\n"
    "from xlalint.rules import rules_by_code\n"
    "def boom(self, node):\n"
    "    raise ZeroDivisionError('injected for a test')\n"
    "rules_by_code()['XLA006'].on_Call = boom\n"
    "sys.exit(s.main([]))\n"
)


async def _start(lsp_client: LanguageClient, root: Path):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri()))


# The same server, with findings that carry an automatic fix the way `--fix` findings do (``edits``,
# 1-based, end exclusive): `.item()` -> `.detach()`, whatever the rule's own fix is.
FIXING = (
    "import sys, dataclasses, xlalint.server as s\n"
    "real = s.lint_document\n"
    "def lint(path, text, settings):\n"
    "    out = []\n"
    "    for f in real(path, text, settings):\n"
    "        if f.code == 'XLA001':\n"
    "            e = ((f.line, f.end_column - 7, f.line, f.end_column, '.detach()'),)\n"
    "            f = dataclasses.replace(f, edits=e, applicability='safe', fix_title='Keep it on the device')\n"
    "        out.append(f)\n"
    "    return out\n"
    "s.lint_document = lint\n"
    "sys.exit(s.main([]))\n"
)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-c", FIXING], server_env=ENV))
async def fixing(lsp_client: LanguageClient, tmp_path_factory):
    await _start(lsp_client, tmp_path_factory.getbasetemp())
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "xlalint", "server"], server_env=ENV))
async def client(lsp_client: LanguageClient, tmp_path_factory):
    await _start(lsp_client, tmp_path_factory.getbasetemp())
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-c", CRASHING], server_env=ENV))
async def crashing(lsp_client: LanguageClient, tmp_path_factory):
    await _start(lsp_client, tmp_path_factory.getbasetemp())
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-c", BROKEN_RULE], server_env=ENV))
async def broken_rule(lsp_client: LanguageClient, tmp_path_factory):
    await _start(lsp_client, tmp_path_factory.getbasetemp())
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))
    return uri


async def _diagnostics(client: LanguageClient, uri: str, timeout: float = 20) -> list:
    while True:
        params = await asyncio.wait_for(client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), timeout)
        if params.uri == uri:
            return list(params.diagnostics)


def _change(client, uri, version, line, start, end, text):
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=line, character=start), end=types.Position(line=line, character=end)),
            text=text)]))


def _summary(diags) -> list:
    return [(d.code, d.range.start.line, d.range.start.character, d.source) for d in diags]


@pytest.mark.asyncio
async def test_open_edit_and_apply_a_code_action(client: LanguageClient, tmp_path: Path):
    uri = _open(client, tmp_path / "train.py", HOST_READ)
    diags = await _diagnostics(client, uri)
    assert _summary(diags) == [("XLA001", 3, 8, "xlalint")]
    assert "reads one value to the host" in diags[0].message

    # edit: `.item()` -> `.detach()`: the finding goes away
    _change(client, uri, 2, 3, 13, 19, "detach()")
    assert await _diagnostics(client, uri) == []

    # edit: a new line that prints the loss: a new finding
    _change(client, uri, 3, 3, 21, 21, "\n    print(loss)")
    diags = await _diagnostics(client, uri)
    assert _summary(diags) == [("XLA006", 4, 4, "xlalint")]

    # the quick fix adds `# noqa: XLA006`; applied as the editor would, the finding goes away
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diags[0].range,
        context=types.CodeActionContext(diagnostics=diags)))
    assert [a.title for a in actions] == ["Suppress XLA006 on this line (# noqa: XLA006)"]
    (edit,) = actions[0].edit.changes[uri]
    assert edit.new_text == "  # noqa: XLA006"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=4),
        content_changes=[types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)]))
    assert await _diagnostics(client, uri) == []


@pytest.mark.asyncio
async def test_hover_shows_the_rule_docs(client: LanguageClient, tmp_path: Path):
    uri = _open(client, tmp_path / "train.py", HOST_READ.replace("v = loss.item()", "v = loss.item()  # noqa: XLA006"))
    await _diagnostics(client, uri)
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=3, character=12)))
    assert hover.contents.value.startswith("**XLA001 (host-read)**")
    assert "## Use instead" in hover.contents.value
    on_noqa = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=3, character=31)))
    assert on_noqa.contents.value.startswith("**XLA006 (per-step-format)**")
    nothing = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=2)))
    assert nothing is None
    assert "Measured by" not in hover.contents.value  # no --verify run is stored for this file


async def _hover(client: LanguageClient, uri: str, line: int, character: int):
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character)))


@pytest.mark.asyncio
async def test_hover_shows_what_the_last_verify_run_measured(client: LanguageClient, tmp_path: Path):
    """A run stored as ``xlalint --verify`` stores it (a report made by hand: its figures are data): the
    hover adds its verdict and cost to the rule's docs, a miss's on a line no rule flags; after an edit
    above, the same line says it was measured on an earlier version; the edited line says nothing."""
    import time

    from xlalint.findings import Finding
    from xlalint.verify.remember import remember
    from xlalint.verify.results import CONFIRMED, FindingVerdict, Miss, VerifyReport

    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir()
    (path.parent / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    path.write_text(HOST_READ)
    cost = "costs 1,210 ms per step (87% of the step time): 0.9 compiles x 1,344 ms"
    f = Finding(path=str(path), line=4, column=9, code="XLA001", end_line=4, end_column=20, name="host-read", message="m")
    report = VerifyReport(
        target=str(path), status="ok", exit_code=1, stop_reason="max_steps", steps=[1], warmup=2, max_steps=5,
        findings=[FindingVerdict(f, CONFIRMED, "10 host transfers", {"cost": {"text": cost}})],
        misses=[Miss(str(path), 3, "cpu fallback", "aten::nonzero fell back on 8 of 8 steps", 8, 8,
                     {"cost": {"text": "costs 3.0 ms per step (<1% of the step time)"}})],
        recompiles=[], transfers_without_cut=[], user_files=[str(path)], timing={}, notes=[])
    started = time.time()
    assert remember(report, started) == []

    uri = _open(client, path, HOST_READ)
    assert _summary(await _diagnostics(client, uri)) == [("XLA001", 3, 8, "xlalint")]
    hover = (await _hover(client, uri, 3, 12)).contents.value
    assert hover.startswith("**XLA001 (host-read)**")  # the rule's docs first
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(started))
    assert hover.endswith(f"\n---\n**Measured by `xlalint --verify`** ({when}): XLA001 CONFIRMED; {cost}")  # then the run's
    miss = (await _hover(client, uri, 2, 8)).contents.value
    assert miss.startswith("**Measured by `xlalint --verify`**") and "a miss (cpu fallback)" in miss
    assert await _hover(client, uri, 1, 2) is None  # a line where nothing was measured

    _change(client, uri, 2, 0, 0, 0, "# a comment\n")  # everything moves down one line
    assert _summary(await _diagnostics(client, uri)) == [("XLA001", 4, 8, "xlalint")]
    moved = (await _hover(client, uri, 4, 12)).contents.value
    assert "on an earlier version of this file; this line reads the same): XLA001 CONFIRMED" in moved

    _change(client, uri, 3, 4, 4, 5, "w")  # the measured line itself: `w = loss.item()`
    assert _summary(await _diagnostics(client, uri)) == [("XLA001", 4, 8, "xlalint")]
    edited = (await _hover(client, uri, 4, 12)).contents.value
    assert edited.startswith("**XLA001 (host-read)**") and "Measured by" not in edited


@pytest.mark.asyncio
async def test_half_typed_file_gives_one_syntax_diagnostic_and_the_server_goes_on(client: LanguageClient, tmp_path: Path):
    uri = _open(client, tmp_path / "train.py", HOST_READ)
    await _diagnostics(client, uri)
    _change(client, uri, 2, 3, 19, 19, "\n    if loss.")
    diags = await _diagnostics(client, uri)
    assert [(d.code, d.severity) for d in diags] == [("XLA900", types.DiagnosticSeverity.Error)]
    assert diags[0].message.startswith("syntax error")
    _change(client, uri, 3, 4, 4, 12, "")  # finish the edit: back to valid code
    assert _summary(await _diagnostics(client, uri)) == [("XLA001", 3, 8, "xlalint")]


@pytest.mark.asyncio
async def test_settings_from_the_nearest_pyproject(client: LanguageClient, tmp_path: Path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text('[tool.xlalint]\nignore = ["XLA001"]\nextend-exclude = ["gen"]\n')
    uri = _open(client, tmp_path / "proj" / "pkg" / "train.py", HOST_READ + "    print(loss)\n")
    assert _summary(await _diagnostics(client, uri)) == [("XLA006", 4, 4, "xlalint")]
    excluded = _open(client, tmp_path / "proj" / "gen" / "train.py", HOST_READ)
    assert await _diagnostics(client, excluded) == []

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "pyproject.toml").write_text('[tool.xlalint]\nselekt = ["XLA001"]\n')
    bad = _open(client, tmp_path / "bad" / "train.py", HOST_READ)
    (diag,) = await _diagnostics(client, bad)
    assert "unknown key 'selekt'" in diag.message and diag.severity == types.DiagnosticSeverity.Error


@pytest.mark.asyncio
async def test_a_crash_in_one_request_never_ends_the_session(crashing: LanguageClient, tmp_path: Path):
    client = crashing
    bad = _open(client, tmp_path / "crash.py", HOST_READ)
    logged = await asyncio.wait_for(client.wait_for_notification(types.WINDOW_LOG_MESSAGE), 20)
    assert "boom" in logged.message and logged.type == types.MessageType.Error
    # the session goes on: other files are linted, requests are answered
    uri = _open(client, tmp_path / "train.py", HOST_READ)
    assert _summary(await _diagnostics(client, uri)) == [("XLA001", 3, 8, "xlalint")]
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=bad), position=types.Position(line=99, character=0)))
    assert hover is None
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=bad),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=1)),
        context=types.CodeActionContext(diagnostics=[])))
    assert actions is not None and len(actions) == 0


@pytest.mark.asyncio
async def test_a_finding_with_a_fix_gets_a_fix_action(fixing: LanguageClient, tmp_path: Path):
    client = fixing
    uri = _open(client, tmp_path / "train.py", HOST_READ)
    diags = await _diagnostics(client, uri)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diags[0].range,
        context=types.CodeActionContext(diagnostics=diags)))
    assert [(a.title, a.is_preferred) for a in actions] == [
        ("Keep it on the device", True), ("Suppress XLA001 on this line (# noqa: XLA001)", None)]
    (edit,) = actions[0].edit.changes[uri]
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.character, edit.new_text) == (3, 12, 19, ".detach()")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)]))
    assert await _diagnostics(client, uri) == []


@pytest.mark.asyncio
async def test_a_helpers_findings_come_from_its_callers_module(client: LanguageClient, tmp_path: Path):
    """The project-wide picture in the editor: open the helper; its caller in train.py (on disk, not
    open) makes it run every step, so its host read is a finding with the path that makes it so."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (proj / "train.py").write_text(
        "import torch\nimport torch_xla\nfrom metrics import log_loss\n"
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n    log_loss(loss)\n"
        "    torch_xla.sync()\n")
    uri = _open(client, proj / "metrics.py", "def log_loss(loss):\n    print(loss.item())\n")
    diags = await _diagnostics(client, uri)
    assert _summary(diags) == [("XLA001", 1, 10, "xlalint")]
    assert "called from train.py:8" in diags[0].message


@pytest.mark.asyncio
async def test_a_rule_that_raises_is_one_xla902_diagnostic_and_the_server_stays_up(broken_rule: LanguageClient,
                                                                                   tmp_path: Path):
    client = broken_rule
    text = HOST_READ + "    print(f'{loss}')\n"
    uri = _open(client, tmp_path / "proj" / "train.py", text)
    diags = await _diagnostics(client, uri)
    assert _summary(diags) == [("XLA902", 0, 0, "xlalint"), ("XLA001", 3, 8, "xlalint")]
    assert "internal error in rule XLA006 (per-step-format): ZeroDivisionError: injected for a test" in diags[0].message
    assert diags[0].severity == types.DiagnosticSeverity.Error
    # the session goes on: an edit is linted again, another file too, hover answers
    _change(client, uri, 2, 3, 8, 19, "loss.item() ")
    assert [d.code for d in await _diagnostics(client, uri)] == ["XLA902", "XLA001"]
    other = _open(client, tmp_path / "proj" / "other.py", "import torch\nx = 1\n")  # no call: the rule never ran
    assert _summary(await _diagnostics(client, other)) == []
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=3, character=10)))
    assert hover is not None and "XLA001" in hover.contents.value


# ------------------------------------------------------------------------------------- notebooks
def _open_notebook(client: LanguageClient, path: Path, cells: list) -> tuple:
    """Open a notebook document as VS Code does (notebookDocument/didOpen, one text document per cell);
    the .ipynb on disk holds other code, so a diagnostic can only come from the cells sent."""
    path.write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}')
    uri = path.as_uri()
    cell_uris = [f"vscode-notebook-cell:{path}#C{i}" for i in range(len(cells))]
    kinds = [types.NotebookCellKind.Markup if lang == "markdown" else types.NotebookCellKind.Code for lang, _ in cells]
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=uri, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=k, document=u) for k, u in zip(kinds, cell_uris)]),
        cell_text_documents=[types.TextDocumentItem(uri=u, language_id=lang, version=1, text=text)
                             for u, (lang, text) in zip(cell_uris, cells)]))
    return uri, cell_uris


async def _cell_diagnostics(client: LanguageClient, uris: list, timeout: float = 20) -> dict:
    """The next diagnostics published for each of ``uris`` (the server publishes the cells one after the
    other: pytest-lsp's ``client.diagnostics`` keeps each, where ``wait_for_notification`` sees one)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not all(u in client.diagnostics for u in uris):
        assert loop.time() < end, f"no diagnostics for {[u for u in uris if u not in client.diagnostics]}"
        await asyncio.sleep(0.02)
    return {u: _summary(client.diagnostics.pop(u)) for u in uris}


def _edit_cell(client, uri, cell_uri, version, line, start, end, text):
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=uri, version=version),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=cell_uri, version=version),
                changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(line=line, character=start),
                                      end=types.Position(line=line, character=end)), text=text)])]))))


def _delete_cell(client, uri, version, index, cell_uri):
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=uri, version=version),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(start=index, delete_count=1, cells=[]),
                did_close=[types.TextDocumentIdentifier(uri=cell_uri)])))))


@pytest.mark.asyncio
async def test_a_notebook_gets_diagnostics_per_cell_and_after_a_cell_edit(client: LanguageClient, tmp_path: Path):
    """notebookDocument/didOpen: the cells are one program (a helper in cell 2 read per step by cell 4's
    loop); each finding is published on its cell's URI at the cell's line; a cell edit updates them; a
    deleted cell's are cleared and the cells after it keep theirs; closing the notebook clears them."""
    helper = "import torch\n\ndef read(t):\n    return t.item()\n"
    loop = "for x in loader:\n    loss = model(x.to(device)).sum()\n    v = read(loss)\n"
    uri, cells = _open_notebook(client, tmp_path / "nb.ipynb", [
        ("markdown", "# a `.item()` here is text"), ("python", helper), ("python", "print('setup')"), ("python", loop)])
    code = cells[1:]
    first = await _cell_diagnostics(client, code)
    assert first == {cells[1]: [("XLA001", 3, 11, "xlalint")], cells[2]: [], cells[3]: []}
    assert cells[0] not in client.diagnostics  # a markdown cell gets none

    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=cells[1]), position=types.Position(line=3, character=14)))
    assert hover is not None and hover.contents.value.startswith("**XLA001 (host-read)**")

    # edit cell 4: the loop reads the loss itself on a new line; the helper's read (still called) stays
    _edit_cell(client, uri, cells[3], 2, 2, 18, 18, "\n    print(loss)")
    assert await _cell_diagnostics(client, code) == {
        cells[1]: [("XLA001", 3, 11, "xlalint")], cells[2]: [], cells[3]: [("XLA006", 3, 4, "xlalint")]}
    # edit cell 2: the helper no longer reads to the host
    _edit_cell(client, uri, cells[1], 3, 3, 13, 19, "detach()")
    assert await _cell_diagnostics(client, code) == {
        cells[1]: [], cells[2]: [], cells[3]: [("XLA006", 3, 4, "xlalint")]}

    # delete cell 3 (the setup): the loop is cell 3 now, its finding stays on its URI; the deleted cell's go
    _delete_cell(client, uri, 4, 2, cells[2])
    assert await _cell_diagnostics(client, code) == {
        cells[1]: [], cells[2]: [], cells[3]: [("XLA006", 3, 4, "xlalint")]}
    # delete the loop: its diagnostic is cleared
    _delete_cell(client, uri, 5, 2, cells[3])
    assert await _cell_diagnostics(client, [cells[1], cells[3]]) == {cells[1]: [], cells[3]: []}

    # closing the notebook clears what is left (a cell with a finding again, to see it go)
    _edit_cell(client, uri, cells[1], 6, 3, 21, 21, "\nfor x in loader:\n    v = model(x.to(device)).sum().item()")
    assert await _cell_diagnostics(client, [cells[1]]) == {cells[1]: [("XLA001", 5, 8, "xlalint")]}
    client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
        notebook_document=types.NotebookDocumentIdentifier(uri=uri),
        cell_text_documents=[types.TextDocumentIdentifier(uri=cells[1])]))
    assert await _cell_diagnostics(client, [cells[1]]) == {cells[1]: []}
