"""``xlalint server``: a language server (LSP over stdio, pygls) for editors.

- Diagnostics when a file is opened or saved, and after an edit once typing pauses for ``DEBOUNCE``
  seconds; a result that a newer edit has overtaken is dropped, never shown.
- Code actions: ``# noqa: CODE`` on the finding's line (added to an existing ``# noqa:`` list).
- Hover: a finding's rule documentation (the ``xlalint --explain`` text), also over a code in a
  ``# noqa:`` comment; then what the last ``xlalint --verify`` run measured there (its verdict and cost
  per step; a miss's on a line no rule flags), when one is stored (xlalint/run/measured.py).
- Notebooks (``notebookDocument/didOpen``, ``didChange``, ``didSave``, ``didClose``): the cells are linted
  as one program, as ``xlalint notebook.ipynb`` lints the file, and each code cell's findings are
  published on that cell's URI at its own lines (hover and ``# noqa`` actions work in a cell too).
- Settings: ``[tool.xlalint]`` of the pyproject.toml nearest to each file, re-read when it changes;
  ``exclude`` globs apply (an excluded file gets no diagnostics). A bad config is one diagnostic.

Every lint goes through ``lint_document``: the one place to swap for a project-wide analysis. A request
that fails is answered with an error (or, for a notification, logged) and the session goes on; an
internal error while linting (a bug of xlalint's) is one XLA902 diagnostic, with the other findings.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import time
import traceback
from dataclasses import replace
from typing import Optional
from urllib.parse import unquote, urlparse

from xlalint import __version__
from xlalint.analysis.file_findings import internal_error
from xlalint.analysis.source import lint_source
from xlalint.config import ConfigError, Settings, build_settings, find_config
from xlalint.findings import Finding
from xlalint.sources.comments import NOQA

try:
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer
except ImportError:  # pragma: no cover - reported by main()
    types = None
    LanguageServer = object

# Seconds without an edit before a changed document is linted: below the gap between keystrokes of
# fast typing, so one burst of typing costs one lint, and a pause shows the result at once.
DEBOUNCE = 0.08
SOURCE = "xlalint"
_CODE_AT = re.compile(r"XLA\d{3}")
log = logging.getLogger("xlalint.server")


# ---------------------------------------------------------------------------------------- the lint
# The incremental parsers of the documents linted last (one tree each in memory).
_PARSERS: dict = {}
MAX_PARSERS = 16


# The workspace's folders on disk (XlaLintServer._anchors, refreshed before each lint): where a file with no
# root marker finds its project
_ANCHORS: list = []


def lint_document(path: str, text: str, settings: Settings, anchors=None) -> list:
    """Lint one open document, as part of its project (the modules connected to it by imports, read from
    disk and the cache). Every lint the server does goes through here; ``path`` is the file's path on
    disk, ``text`` the editor's buffer.
    The parse is incremental (xlalint/parse/incremental.py): after an edit only the edited top-level
    statement is parsed again."""
    from xlalint.parse.incremental import IncrementalParser

    parser = _PARSERS.pop(path, None) or IncrementalParser()
    _PARSERS[path] = parser  # the most recently linted last
    while len(_PARSERS) > MAX_PARSERS:
        del _PARSERS[next(iter(_PARSERS))]
    if not os.path.isfile(path):  # an unsaved buffer: the text alone
        return lint_source(text, path, settings.codes_for(path), limits=settings.limits, parse=parser)
    # as part of its project (a helper's findings depend on its callers), the rest from the cache
    from xlalint.run.cache import Cache
    from xlalint.run.files import root_for
    from xlalint.run.project import lint_project

    cache = Cache.open(None, settings, lambda _msg: None)
    # a plain folder (no marker) opened as the workspace is one project (``anchors``: its folders)
    root = root_for(path, _ANCHORS if anchors is None else anchors)
    return lint_project(root, [path], settings, cache=cache, sources={path: text},
                                 parse={path: parser})


class SettingsCache:
    """The settings for a file: its nearest pyproject.toml with [tool.xlalint], re-read when it changes."""

    def __init__(self) -> None:
        self._by_config: dict = {}

    def for_path(self, path: str) -> Settings:
        config = find_config(path)
        if config is None:
            key, stamp = None, None
        else:
            key = str(config)
            try:
                stamp = os.stat(config).st_mtime_ns
            except OSError:
                stamp = None
        hit = self._by_config.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        settings = build_settings(config)  # raises ConfigError with one line
        self._by_config[key] = (stamp, settings)
        return settings


def uri_to_path(uri: str) -> str:
    p = urlparse(uri)
    if p.scheme not in ("file", ""):
        return unquote(p.path) or uri
    path = unquote(p.path)
    if os.name == "nt" and re.match(r"^/[A-Za-z]:", path):  # pragma: no cover
        path = path[1:]
    return path


# The position encoding agreed at initialisation: LSP's default counts UTF-16 code units.
_ENCODING = {"value": "utf-16"}


def _units(ch: str) -> int:
    enc = _ENCODING["value"]
    if enc == "utf-32":
        return 1
    if enc == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    return 2 if ord(ch) > 0xFFFF else 1


def _utf16(line: str, column0: int) -> int:
    """A code-point column of ``line`` -> the column in the negotiated encoding (UTF-16 by default)."""
    prefix = line[:column0]
    if prefix.isascii():
        return column0
    return sum(_units(ch) for ch in prefix)


def _from_utf16(line: str, character: int) -> int:
    if line.isascii():
        return character
    units = 0
    for i, ch in enumerate(line):
        if units >= character:
            return i
        units += _units(ch)
    return len(line)


def to_diagnostic(f: Finding, lines: list):
    def pos(line: int, col: int):
        row = max(line - 1, 0)
        text = lines[row] if row < len(lines) else ""
        return types.Position(line=row, character=_utf16(text, max(col - 1, 0)))

    start = pos(f.line, f.column)
    end = pos(f.end_line, f.end_column)
    if (end.line, end.character) <= (start.line, start.character):
        end = types.Position(line=start.line, character=start.character + 1)
    from xlalint.report.sarif import help_uri
    from xlalint.rules import rules_by_code

    rule = rules_by_code().get(f.code)
    return types.Diagnostic(
        range=types.Range(start=start, end=end),
        message=f.message,
        severity=types.DiagnosticSeverity.Error if f.severity == "error" else types.DiagnosticSeverity.Warning,
        code=f.code,
        code_description=types.CodeDescription(href=help_uri(rule)) if rule is not None else None,
        source=SOURCE,
        data={"name": f.name, "fix": f.fix},
    )


def _config_diagnostic(message: str):
    return types.Diagnostic(
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=1)),
        message=message, severity=types.DiagnosticSeverity.Error, source=SOURCE)


def notebook_json(notebook, docs: list) -> str:
    """An open notebook document as the .ipynb text its cells make (what ``lint_document`` reads): its
    cells in order, code cells whose language is not Python as raw cells (never linted), and the
    notebook's metadata (its kernel's language decides whether it is linted at all)."""
    cells = []
    for cell, doc in zip(notebook.cells, docs):
        python = cell.kind == types.NotebookCellKind.Code and (doc.language_id or "python") == "python"
        kind = "code" if python else ("markdown" if cell.kind == types.NotebookCellKind.Markup else "raw")
        cells.append({"cell_type": kind, "source": doc.source, "metadata": {}})
    metadata = notebook.metadata if isinstance(notebook.metadata, dict) else {}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": cells})


# ---------------------------------------------------------------------------------------- the server
# Notebooks (Jupyter's, VS Code's) are synced cell by cell: their Python cells, linted as one program.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(
        notebook="*", cells=[types.NotebookCellLanguage(language="python")])],
    save=True,
) if types is not None else None


class XlaLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("xlalint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC)
        self.settings = SettingsCache()
        self.pending: dict = {}  # uri -> the debounce task
        self.findings: dict = {}  # uri -> (version, [Finding])
        self.timings: list = []  # (uri, seconds) of the last lints: for the bench and the log
        self.lint_lock: Optional[asyncio.Lock] = None
        self.notebook_edits: dict = {}  # notebook uri -> changes received (a cell edit may keep its version)
        self.notebook_cells: dict = {}  # notebook uri -> the cell uris last published

    # ------------------------------------------------------------------ linting a document
    async def lint_now(self, uri: str) -> None:
        if self.lint_lock is None:
            self.lint_lock = asyncio.Lock()
        async with self.lint_lock:  # one lint at a time: they share the CPU, and the newest text wins
            await self._lint_now(uri)

    async def _lint_now(self, uri: str) -> None:
        notebook = self.workspace.get_notebook_document(notebook_uri=uri)
        if notebook is not None:
            await self._lint_notebook(uri, notebook)
            return
        doc = self.workspace.get_text_document(uri)
        version, text = doc.version, doc.source
        path = uri_to_path(uri)
        t0 = time.perf_counter()
        findings = await self._findings(uri, path, text)
        if isinstance(findings, str):  # a config error: one diagnostic
            self._publish(uri, [_config_diagnostic(findings)], version)
            return
        current = self.workspace.get_text_document(uri)
        if current.version != version:  # an edit came in while linting: its own lint will publish
            return
        self.timings.append((uri, time.perf_counter() - t0))
        del self.timings[:-50]
        self.findings[uri] = (version, findings)
        lines = text.splitlines()
        self._publish(uri, [to_diagnostic(f, lines) for f in findings if f.cell is None], version)

    def _anchors(self) -> list:
        """The workspace's folders on disk: where a file without a root marker finds its project."""
        try:
            from pygls.uris import to_fs_path

            folders = [to_fs_path(f.uri) for f in self.workspace.folders.values()]
            return [f for f in folders + [self.workspace.root_path] if f]
        except Exception:  # noqa: BLE001 - no workspace yet (a test's server): the file's own directory
            return []

    async def _findings(self, uri: str, path: str, text: str):
        """The findings of one document's text, or the config error's message (a str)."""
        try:
            settings = self.settings.for_path(path)
        except ConfigError as e:
            return f"xlalint: config error: {e}"
        if settings.is_excluded(path) or _excluded_dir(path, settings):
            return []
        loop = asyncio.get_running_loop()
        try:
            _ANCHORS[:] = self._anchors()
            return await loop.run_in_executor(None, lint_document, path, text, settings)
        except Exception as e:  # noqa: BLE001 - a bug of xlalint's: one XLA902 diagnostic, the server stays up
            _log_crash(self, f"linting {uri}")
            return [internal_error(path, "the language server's lint", e)]

    def _publish(self, uri: str, diagnostics: list, version=None) -> None:
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics,
                                                                              version=version))

    # ------------------------------------------------------------------ a notebook document
    async def _lint_notebook(self, uri: str, notebook) -> None:
        """A notebook (``notebookDocument/didOpen``): its cells, in order, linted as the .ipynb file they
        make (xlalint/sources/notebook.py), and each code cell's findings published on that cell's URI,
        at its lines. A finding of the whole file (it cannot be read, an internal error) goes on the
        first code cell."""
        edits = self.notebook_edits.get(uri, 0)
        cells = [(c, self.workspace.get_text_document(c.document)) for c in notebook.cells]
        path = uri_to_path(uri)
        if not path.lower().endswith(".ipynb"):  # an untitled notebook: read as one all the same
            path += ".ipynb"
        t0 = time.perf_counter()
        findings = await self._findings(uri, path, notebook_json(notebook, [doc for _, doc in cells]))
        if self.notebook_edits.get(uri, 0) != edits or self.workspace.get_notebook_document(notebook_uri=uri) is None:
            return  # edited (its own lint will publish) or closed while linting
        self.timings.append((uri, time.perf_counter() - t0))
        del self.timings[:-50]
        code = [(number, cell, doc) for number, (cell, doc) in enumerate(cells, 1)
                if cell.kind == types.NotebookCellKind.Code]
        by_cell: dict = {}
        if isinstance(findings, str):
            by_cell[code[0][0] if code else None] = [_config_diagnostic(findings)]
            findings = []
        published = set()
        for number, cell, doc in code:
            mine = [replace(f, cell=None, edits=()) for f in findings
                    if f.cell == number or (f.cell is None and number == code[0][0])]
            self.findings[cell.document] = (doc.version, mine)
            lines = doc.source.splitlines()
            diags = by_cell.get(number, []) + [to_diagnostic(f, lines) for f in mine]
            self._publish(cell.document, diags, doc.version)
            published.add(cell.document)
        for gone in self.notebook_cells.get(uri, set()) - published:  # cells deleted or turned to markdown
            self.findings.pop(gone, None)
            self._publish(gone, [])
        self.notebook_cells[uri] = published

    def close_notebook(self, uri: str, cell_uris) -> None:
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        self.notebook_edits.pop(uri, None)
        for cell_uri in set(cell_uris) | self.notebook_cells.pop(uri, set()):
            self.findings.pop(cell_uri, None)
            self._publish(cell_uri, [])

    def schedule(self, uri: str, delay: float) -> None:
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()
        self.pending[uri] = asyncio.ensure_future(self._later(uri, delay))

    async def _later(self, uri: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            await self.lint_now(uri)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - one document's failure never ends the session
            _log_crash(self, f"linting {uri}")
        finally:
            if self.pending.get(uri) is asyncio.current_task():
                del self.pending[uri]

    def current_findings(self, uri: str) -> list:
        hit = self.findings.get(uri)
        return hit[1] if hit else []


def _excluded_dir(path: str, settings: Settings) -> bool:
    """An exclude glob that names a directory above the file (``build``, ``tests/fixtures``), below the root."""
    try:
        rel = os.path.relpath(os.path.abspath(path), settings.root)
    except ValueError:
        return False
    if rel.startswith(".."):
        return False
    parts = rel.split(os.sep)[:-1]
    return any(settings.is_excluded(os.path.join(str(settings.root), *parts[: i + 1])) for i in range(len(parts)))


def _log_crash(ls, what: str) -> None:
    tb = traceback.format_exc()
    log.error("xlalint server: error while %s\n%s", what, tb)
    try:
        ls.window_log_message(types.LogMessageParams(type=types.MessageType.Error, message=f"xlalint: error while {what}:\n{tb}"))
    except Exception:  # noqa: BLE001
        pass


def build_server() -> "XlaLintServer":
    server = XlaLintServer()

    @server.feature(types.INITIALIZED)
    def initialized(ls: XlaLintServer, params):
        enc = getattr(ls.server_capabilities, "position_encoding", None)
        _ENCODING["value"] = str(getattr(enc, "value", enc) or "utf-16")

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: XlaLintServer, params: types.DidOpenTextDocumentParams):
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: XlaLintServer, params: types.DidChangeTextDocumentParams):
        ls.schedule(params.text_document.uri, DEBOUNCE)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: XlaLintServer, params: types.DidSaveTextDocumentParams):
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: XlaLintServer, params: types.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        task = ls.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        ls.findings.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def notebook_did_open(ls: XlaLintServer, params: types.DidOpenNotebookDocumentParams):
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    async def notebook_did_change(ls: XlaLintServer, params: types.DidChangeNotebookDocumentParams):
        uri = params.notebook_document.uri
        ls.notebook_edits[uri] = ls.notebook_edits.get(uri, 0) + 1
        ls.schedule(uri, DEBOUNCE)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def notebook_did_save(ls: XlaLintServer, params: types.DidSaveNotebookDocumentParams):
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: XlaLintServer, params: types.DidCloseNotebookDocumentParams):
        ls.close_notebook(params.notebook_document.uri, [c.uri for c in params.cell_text_documents])

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_action(ls: XlaLintServer, params: types.CodeActionParams):
        uri = params.text_document.uri
        doc = ls.workspace.get_text_document(uri)
        lines = doc.source.splitlines()
        actions = []
        for d in params.context.diagnostics:
            if d.source != SOURCE or not isinstance(d.code, str) or not d.code.startswith("XLA"):
                continue
            fix = fix_action(ls.current_findings(uri), d, lines, uri)
            if fix is not None:
                actions.append(fix)
            edit = noqa_edit(lines, d.range.start.line, d.code)
            if edit is None:
                continue
            actions.append(types.CodeAction(
                title=f"Suppress {d.code} on this line (# noqa: {d.code})",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[d],
                edit=types.WorkspaceEdit(changes={params.text_document.uri: [edit]}),
            ))
        return actions

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: XlaLintServer, params: types.HoverParams):
        uri = params.text_document.uri
        doc = ls.workspace.get_text_document(uri)
        lines = doc.source.splitlines()
        row = params.position.line
        if row >= len(lines):
            return None
        text = lines[row]
        col = _from_utf16(text, params.position.character) + 1
        here = [f for f in ls.current_findings(uri)
                if f.cell is None and (f.line, f.column) <= (row + 1, col) <= (f.end_line, f.end_column)]
        codes = [f.code for f in here]
        hash_at = text.find("#")
        if not codes and hash_at >= 0 and "noqa" in text[hash_at:].lower():
            for m in _CODE_AT.finditer(text, hash_at):
                if m.start() < col <= m.end() + 1:
                    codes.append(m.group())
        return hover_for(codes, measured_at(uri, doc.source, row + 1, col, [(f.code, f.line) for f in here]))

    return server


def measured_at(uri: str, text: str, line: int, column: int, findings: list) -> Optional[str]:
    """What the last ``xlalint --verify`` run measured here, when one is stored (xlalint/run/measured.py)."""
    if urlparse(uri).scheme not in ("file", ""):  # a notebook's cell, an unsaved buffer: nothing is stored
        return None
    from xlalint.run.measured import measured_hover

    try:
        return measured_hover(uri_to_path(uri), text, line, column, findings)
    except Exception:  # noqa: BLE001 - a bug of xlalint's: the rule's documentation is still shown
        log.exception("xlalint server: reading the stored --verify run of %s", uri)
        return None


def hover_for(codes: list, measured: Optional[str] = None):
    """The rules' documentation for ``codes``, then what the last ``--verify`` run measured there."""
    from xlalint.report.sarif import rule_markdown
    from xlalint.rules import rules_by_code

    rules = rules_by_code()
    parts = [rule_markdown(rules[c]) for c in dict.fromkeys(codes) if c in rules]
    if measured:
        parts.append(measured)
    if not parts:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n---\n".join(parts)))


def fix_action(findings: list, d, lines: list, uri: str):
    """The finding's automatic fix (``--fix``: ``Finding.edits``, 1-based, end exclusive) as a code
    action, when the finding under diagnostic ``d`` has one; unsafe fixes are offered, not preferred."""
    for f in findings:
        if f.cell is not None or f.code != d.code:
            continue
        start = to_diagnostic(f, lines).range.start
        if (start.line, start.character) != (d.range.start.line, d.range.start.character):
            continue
        edits = getattr(f, "edits", None) or ()
        if not edits:
            return None
        text_edits = []
        for (line, col, end_line, end_col, content) in edits:
            a = _position(lines, line, col)
            b = _position(lines, end_line, end_col)
            text_edits.append(types.TextEdit(range=types.Range(start=a, end=b), new_text=content))
        safe = getattr(f, "applicability", "safe") == "safe"
        title = getattr(f, "fix_title", "") or f"Fix {f.code}"
        return types.CodeAction(
            title=title if safe else f"{title} (unsafe: read it)",
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[d],
            is_preferred=safe,
            edit=types.WorkspaceEdit(changes={uri: text_edits}),
        )
    return None


def _position(lines: list, line: int, col: int):
    row = max(line - 1, 0)
    text = lines[row] if row < len(lines) else ""
    return types.Position(line=row, character=_utf16(text, max(col - 1, 0)))


def noqa_edit(lines: list, row: int, code: str):
    """The edit that adds ``code`` to the line's ``# noqa:`` comment, or appends ``  # noqa: CODE``."""
    if row >= len(lines):
        return None
    text = lines[row]
    m = NOQA.search(text)
    if m is not None:
        codes = m.group("codes")
        if not codes:
            return None  # a bare noqa already suppresses everything
        if code in re.split(r"[,\s]+", codes.upper()):
            return None
        at = m.end("codes")
        pos = types.Position(line=row, character=_utf16(text, at))
        return types.TextEdit(range=types.Range(start=pos, end=pos), new_text=f", {code}")
    end = len(text.rstrip())
    start = types.Position(line=row, character=_utf16(text, end))
    stop = types.Position(line=row, character=_utf16(text, len(text)))
    return types.TextEdit(range=types.Range(start=start, end=stop), new_text=f"  # noqa: {code}")


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print("usage: xlalint server\n\nA language server (LSP) on standard input and output, for editors.\n"
              "Settings come from the pyproject.toml nearest to each file.")
        return 0
    if argv and argv[0] != "--stdio":
        print(f"xlalint server: error: unexpected argument {argv[0]!r} (the server speaks LSP over stdio)", file=sys.stderr)
        return 2
    if types is None:
        print("xlalint server: error: the language server needs pygls: pip install 'xlalint[lsp]'", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    build_server().start_io()
    return 0


if __name__ == "__main__":
    sys.exit(main())
