"""Jupyter notebooks (``.ipynb``): the code cells, in order, linted as one program.

A notebook runs its cells in one namespace: a training loop in cell 7 calls a helper defined in cell 3.
So the code cells are joined into one Python program, each after a marker line (``# %% [cell 4]``,
the "percent" cell format that editors and jupytext understand), and that program is analysed like any
file (``analysis.module.analyse_module``). Every line of a cell is on a line of its own in the program, with
the same text, so a finding's column is the cell's column and its line maps back by one table lookup.

IPython syntax that is not Python is replaced line for line, so that the program parses and no line
moves: a line magic (``%pip install ...``, ``x = %time f()``), a shell line (``!nvidia-smi``,
``files = !ls``) or a help line (``obj?``) becomes ``pass`` at the same indentation (so ``for x in y:``
followed by ``!ls`` still has a body), with a ``# xlalint-magic`` comment. A cell magic whose body is
Python (``%%time``, ``%%timeit``, ``%%capture``) keeps its body; any other cell magic (``%%bash``,
``%%writefile``, ``%%html``) is skipped whole. Markdown and raw cells are not code.

Cells are numbered as a notebook shows them: 1-based, counting every cell (markdown too), so that
``notebook.ipynb:cell 4:12:5`` is the fourth cell in the file, its line 12, column 5.

``--fix`` edits the program and ``NotebookProgram.cell_sources(fixed)`` maps it back: the text between
two markers is the cell's new source, with each ``pass  # xlalint-magic`` placeholder replaced by the
magic line it stood for (at the placeholder's indentation, should a fix have moved it). ``write_cells``
writes the new sources into the ``.ipynb`` file, keeping its JSON layout and every other field.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional

SUFFIX = ".ipynb"
# A notebook's outputs (images, logs) can be megabytes; only its code counts against max-file-size.
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
MAGIC_COMMENT = "# xlalint-magic"
MARKER = re.compile(r"^(?:if True:  )?# %% \[cell (\d+)\]\s*$")
# a cell whose code starts indented (pasted from a block): IPython removes the first line's indentation; its
# marker opens a block instead, so that its lines keep their columns
INDENTED_CELL = "if True:  "
# Cell magics whose body is Python run by IPython as it is (timed, captured): their body is linted.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
_ASSIGN_MAGIC = re.compile(r"^[\w.\[\]\s,()*]+=\s*[%!]")


def is_notebook(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


@dataclass
class Cell:
    number: int  # 1-based among all the notebook's cells
    source: str  # as in the notebook
    first_line: int  # the program's line of the cell's first line (the marker is the line before)
    n_lines: int
    magics: list = field(default_factory=list)  # the original lines replaced by placeholders, in order
    skipped: str = ""  # a cell magic whose body is not Python: "%%bash"


@dataclass
class NotebookProgram:
    text: str
    cells: list  # every code cell, in order (skipped ones too)
    language: str = "python"

    def table(self) -> list:
        """The cells as plain data (it travels in cached analyses): [number, first line, lines] each."""
        return [[c.number, c.first_line, c.n_lines] for c in self.cells if not c.skipped]

    def locate(self, line: int) -> tuple:
        return locate(self.table(), line)

    def map_finding(self, f):
        return map_findings([f], self.table())[0]

    def cell_sources(self, fixed_text: str) -> dict:
        """Map an edited program (``--fix``) back to its cells: ``{cell number: new source}`` for the
        cells whose source changed. Raises ValueError when the markers or placeholders were disturbed."""
        by_number = {c.number: c for c in self.cells if not c.skipped}
        bodies: dict = {}
        current = None
        for ln in fixed_text.split("\n"):
            m = MARKER.match(ln)
            if m and int(m.group(1)) in by_number:
                current = int(m.group(1))
                bodies[current] = []
            elif current is not None:
                bodies[current].append(ln)
            elif ln.strip():
                raise ValueError("code before the first cell marker")
        if set(bodies) != set(by_number):
            raise ValueError("a cell marker was removed or added")
        out = {}
        for number, lines in bodies.items():
            cell = by_number[number]
            # the joiner after the cell's last line: the marker of the next cell, or the end
            while lines and lines[-1] == "" and len(lines) > cell.n_lines:
                lines.pop()
            magics = iter(cell.magics)
            restored = []
            for ln in lines:
                if ln.rstrip().endswith(MAGIC_COMMENT) and ln.strip().startswith("pass"):
                    try:
                        original = next(magics)
                    except StopIteration:
                        raise ValueError(f"cell {number}: a magic placeholder was duplicated") from None
                    indent = ln[: len(ln) - len(ln.lstrip())]
                    restored.append(indent + original.lstrip())
                else:
                    restored.append(ln)
            if next(magics, None) is not None:
                raise ValueError(f"cell {number}: a magic placeholder was removed")
            new = "\n".join(restored)
            if cell.source.endswith("\n"):
                new += "\n"
            if new != cell.source:
                out[number] = new
        return out


def locate(table: list, line: int) -> tuple:
    """A line of the program -> (cell number, line in the cell), or (None, line) before any cell.
    A marker line (a syntax error running on from the cell above) maps to that cell's last line."""
    found = None
    for i, (_, first, _) in enumerate(table):
        if first - 1 > line:
            break
        found = i
    if found is None:
        return None, line
    number, first, n = table[found]
    if line < first:  # on the marker
        if found == 0:
            return number, 1
        number, _, n = table[found - 1]
        return number, max(n, 1)
    return number, min(line - first + 1, max(n, 1))


def program_line(table: list, cell: int, line: int) -> Optional[int]:
    """``locate``'s inverse: a cell's line -> the program's line (None for a cell not in the table)."""
    for number, first, n in table:
        if number == cell:
            return first + min(max(line, 1), max(n, 1)) - 1
    return None


def map_findings(findings: list, table: list) -> list:
    """Findings on the program -> the same findings on their cells (``cell`` set, lines in the cell)."""
    out = []
    for f in findings:
        cell, line = locate(table, f.line)
        if cell is None:
            out.append(f)
            continue
        end_cell, end_line = locate(table, f.end_line)
        end_col = f.end_column
        if end_cell != cell:  # cannot happen for a node; keep the end on the start line
            end_line, end_col = line, f.column + 1
        out.append(replace(f, line=line, end_line=end_line, end_column=end_col, cell=cell))
    return out


# ---------------------------------------------------------------------------------------- reading
class NotebookError(ValueError):
    """Not a notebook we can read: one line, reported as XLA900."""


def read_notebook(data) -> dict:
    """The notebook's JSON, format 4 (or 3, its worksheets' cells with ``input`` as ``source``). Raises
    NotebookError with a reason. Only the cells, their types and sources and the kernel's language are
    read, so the standard library's json is enough: nbformat's conversions and schema validation (and
    the packages they need) are not."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise NotebookError(f"not valid UTF-8: {e.reason} at byte {e.start}") from None
    try:
        nb = _json_on_a_big_stack(data)
    except json.JSONDecodeError as e:
        raise NotebookError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise NotebookError("not a Jupyter notebook: JSON nested too deeply") from None
    if not isinstance(nb, dict):
        raise NotebookError("not a Jupyter notebook: not a JSON object")
    version = nb.get("nbformat")
    if type(version) is not int:
        raise NotebookError("not a Jupyter notebook: no nbformat version")
    if version == 3 and isinstance(nb.get("worksheets"), list):
        cells = [c for ws in nb["worksheets"] if isinstance(ws, dict) and isinstance(ws.get("cells"), list)
                 for c in ws["cells"]]
        nb = {**nb, "cells": [{**c, "source": c.get("input", "")} if isinstance(c, dict) and c.get("cell_type") == "code"
                              else c for c in cells]}
    elif version < 4:
        raise NotebookError(f"not a Jupyter notebook of format 3 or 4 (format {version}): save it again with Jupyter")
    if not isinstance(nb.get("cells"), list):
        raise NotebookError("not a Jupyter notebook: no list of cells")
    return nb


JSON_STACK_SIZE = 512 * 1024 * 1024  # virtual; the pages a parse touches are all it costs


def _json_on_a_big_stack(text: str):
    """``json.loads(text)`` on a thread of its own with a big stack. json's C decoder recurses once per
    level of nesting, as deep as the recursion limit allows, and the engine raises that limit for
    libcst (200,000): a file of 100,000 nested brackets overflowed the main thread's stack, a crash
    instead of an error (RecursionError here, "nested too deeply")."""
    out: list = []

    def parse():
        try:
            out.append((True, json.loads(text)))
        except BaseException as e:  # noqa: BLE001 - handed to the caller as it is
            out.append((False, e))

    try:
        old = threading.stack_size(JSON_STACK_SIZE)
    except (ValueError, RuntimeError):  # pragma: no cover - a platform without settable stacks
        return json.loads(text)
    try:
        worker = threading.Thread(target=parse, name="xlalint-notebook-json", daemon=True)
        worker.start()
    finally:
        threading.stack_size(old)
    worker.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value


def _cell_language(cell) -> str:
    """The language an editor records for one cell when it is not Python (VS Code's ``"vscode": {"languageId":
    "shellscript"}``: a cell of shell commands in a Python notebook), else ""."""
    meta = cell.get("metadata")
    vscode = meta.get("vscode") if isinstance(meta, dict) else None
    lang = vscode.get("languageId") if isinstance(vscode, dict) else None
    return lang if isinstance(lang, str) and lang.lower() not in ("python", "python3", "") else ""


def _language(nb) -> str:
    """The kernel's language, lower case: "python" unless the notebook says otherwise; "python2" for a Python 2
    kernel (a ``python2`` kernel, else ``language_info.version`` 2.x), whose cells may not be Python 3 (``print x``): linted
    as Python, its syntax errors say so."""
    meta = nb.get("metadata") or {}
    info = meta.get("language_info") or {}
    for where in (meta.get("kernelspec") or {}, info):
        lang = where.get("language") or (where.get("name") if where is info else None)
        if isinstance(lang, str) and lang:
            lang = lang.lower()
            break
    else:
        lang = "python"
    version = info.get("version") if isinstance(info, dict) else None
    spec = meta.get("kernelspec") if isinstance(meta.get("kernelspec"), dict) else {}
    kernel = spec.get("name")
    if lang == "python" and (kernel == "python2" or (
            kernel != "python3" and isinstance(version, str) and version.startswith("2."))):
        # a `python2`/`python3` kernel's name decides (Colab saves `language_info.version` "2.7.6" beside a `python3`
        # kernel); another name (`Python [Root]`, a conda environment's) leaves it to the version
        return "python2"
    return lang


def _source(cell) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def is_magic(stripped: str) -> bool:
    """A line of IPython syntax that is not Python (``stripped`` has no leading whitespace)."""
    if not stripped or stripped.startswith("#"):
        return False
    if stripped[0] in "%!" and not stripped.startswith("!="):
        return True
    if stripped[0] == "?" or (stripped.endswith("?") and "#" not in stripped):
        return True
    if stripped[0] in "/,;" and len(stripped) > 1 and (stripped[1].isalpha() or stripped[1] == "_"):
        return True  # IPython's autocall escapes: `/f 1 2` is `f(1, 2)`, `,f a b` is `f("a", "b")`: no Python line starts so
    return bool(_ASSIGN_MAGIC.match(stripped))


def _future_import(line: str) -> bool:
    """A whole ``from __future__ import ...`` statement on one line, at a cell's top level."""
    text = line.split("#", 1)[0].rstrip()
    return text.startswith("from __future__ import ") and not text.endswith(("(", "\\"))


def _cell_lines(src: str) -> tuple:
    """(program lines, replaced originals, skipped-magic name or "")."""
    return _program_lines(src.splitlines())


def _program_lines(lines: list) -> tuple:
    """``_cell_lines`` of a cell's lines."""
    if not lines:
        return [], [], ""
    first = lines[0].lstrip()
    magics = []
    out = []
    start = 0
    if first.startswith("%%"):
        name = first[2:].split(None, 1)[0] if len(first) > 2 else ""
        if name not in PYTHON_CELL_MAGICS:
            return [], [], "%%" + name
        magics.append(lines[0])
        out.append(f"pass  {MAGIC_COMMENT}")
        start = 1
    continued = False
    open_code: tuple = ()
    indent = ""
    for ln in lines[start:]:
        stripped = ln.lstrip()
        if _future_import(ln):
            # `from __future__ import print_function` opening a later cell: IPython compiles each cell alone,
            # where it is valid; in the joined program it would not be the file's first statement. Kept aside
            # as a magic is (restored on write-back): it changes nothing the rules read
            magics.append(ln)
            out.append(f"pass  {MAGIC_COMMENT}")
            continue
        if open_code:  # `print('...'` then `      % (epoch, loss))`: a line inside brackets or a string is Python
            out.append(ln)
            open_code = _still_open(ln, open_code)
            continue
        if continued or is_magic(stripped):
            if not continued:  # a continuation line (`!torchrun train.py \` then ` --lr 5e-5`) keeps the
                indent = ln[: len(ln) - len(stripped)]  # indent of the line it continues, whatever its own
            magics.append(ln)
            out.append(f"{indent}pass  {MAGIC_COMMENT}")
            continued = ln.rstrip().endswith("\\")
        else:
            out.append(ln)
            open_code = _still_open(ln, open_code)
    return out, magics, ""


DATABRICKS_HEADER = "# Databricks notebook source"
DATABRICKS_CELL = "# COMMAND ----------"


def databricks_program(text: str) -> Optional[str]:
    """A Databricks notebook exported as Python source (its first line ``# Databricks notebook source``, its cells
    between ``# COMMAND ----------`` lines) runs its cells under IPython, as a Jupyter notebook does: a shell
    escape (``!deepspeed train.py \\`` and its continuation lines) or a line magic is valid there. The text with
    each such line made a ``pass`` at its indent, line for line, so that every position is the file's (``--fix``
    edits the file itself); None when the text is not such a notebook."""
    if not text.startswith(DATABRICKS_HEADER):
        return None
    rows = text.split("\n")
    out: list = []
    cell: list = []

    def flush() -> None:
        ends = ["\r" if r.endswith("\r") else "" for r in cell]
        bare = [r[:-1] if e else r for r, e in zip(cell, ends)]
        lines, _magics, skipped = _program_lines(bare)
        if skipped or len(lines) != len(bare):  # a cell magic (`%%sh`): the cell is not Python
            lines = ["#" if r.strip() else r for r in bare]
        out.extend(line + e for line, e in zip(lines, ends))
        cell.clear()

    for row in rows:
        if row.rstrip() == DATABRICKS_CELL:
            flush()
            out.append(row)
        else:
            cell.append(row)
    flush()
    return "\n".join(out)


def _still_open(line: str, state: tuple) -> tuple:
    """What a Python line leaves open for the next: (bracket depth, the quotes of an unfinished triple-quoted
    string or "", a trailing backslash); empty when the next line starts a statement. IPython recognises its
    syntax only where a logical line starts, and so does this."""
    depth, quote = state[:2] if state else (0, "")
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if quote:  # inside a triple-quoted string
            if c == "\\":
                i += 2
            elif line.startswith(quote, i):
                i, quote = i + 3, ""
            else:
                i += 1
            continue
        if c == "#":
            break
        if c in "'\"":
            if line.startswith(c * 3, i):
                i, quote = i + 3, c * 3
                continue
            i += 1  # a one-line string: to its closing quote
            while i < n and line[i] != c:
                i += 2 if line[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
        i += 1
    backslash = not quote and line.rstrip().endswith("\\")
    return (depth, quote, backslash) if depth or quote or backslash else ()


def build_program(nb) -> NotebookProgram:
    """The code cells of ``nb`` joined into one program (see the module's docstring)."""
    parts: list = []
    cells: list = []
    line = 1
    for number, cell in enumerate(nb.get("cells", []), 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = _source(cell)
        other = _cell_language(cell)
        lines, magics, skipped = ([], [], other) if other else _cell_lines(src)
        if skipped:
            parts.append(f"# %% [cell {number}: {skipped}, not Python: skipped]")
            cells.append(Cell(number, src, line + 1, 0, [], skipped))
            line += 1
            continue
        first = next((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
        parts.append(f"{INDENTED_CELL if first[:1] in (' ', chr(9)) else ''}# %% [cell {number}]")
        cells.append(Cell(number, src, line + 1, len(lines), magics))
        parts.extend(lines)
        line += 1 + len(lines)
    text = "\n".join(parts) + "\n" if parts else ""
    return NotebookProgram(text, cells, _language(nb))


def program_for(data) -> NotebookProgram:
    return build_program(read_notebook(data))


def program_text(data) -> Optional[str]:
    """The program of a notebook's bytes, or None when they are not a notebook."""
    try:
        return program_for(data).text
    except NotebookError:
        return None


# ---------------------------------------------------------------------------------------- programs
def is_program(data) -> bool:
    """``data`` is a program made by ``build_program`` (``--fix`` lints it again under the notebook's
    path), not a notebook's JSON."""
    head = data[:32] if isinstance(data, (str, bytes)) else ""
    if isinstance(head, bytes):
        return head.startswith((b"# %% [cell ", INDENTED_CELL.encode() + b"# %% [cell "))
    return head.startswith(("# %% [cell ", INDENTED_CELL + "# %% [cell "))


# ---------------------------------------------------------------------------------------- writing
def _indent_of(raw: str) -> Optional[int]:
    """The JSON indent of a notebook file (Jupyter writes 1, Colab 2), or None for one line."""
    m = re.search(r"\n( *)\"", raw)
    return len(m.group(1)) if m else None


def write_cells(path: str, new_sources: dict) -> None:
    """Replace the sources of cells ``{number: source}`` in the notebook file at ``path``, keeping the
    rest of the file (key order, indentation, outputs, metadata) as it was."""
    with open(path, "rb") as fh:
        raw = fh.read().decode("utf-8-sig")
    nb = json.loads(raw)
    for number, src in new_sources.items():
        cell = nb["cells"][number - 1]
        if isinstance(cell.get("source"), list) or "source" not in cell:
            cell["source"] = src.splitlines(keepends=True)
        else:
            cell["source"] = src
    text = json.dumps(nb, indent=_indent_of(raw), ensure_ascii=False)
    if raw.endswith("\n"):
        text += "\n"
    tmp = f"{path}.xlalint-tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    os.replace(tmp, path)


def fix_notebook(path: str, fix_program) -> list:
    """Apply ``fix_program(program_text) -> fixed_text`` (the ``--fix`` of a .py file) to a notebook's
    cells, in place. Returns the numbers of the cells that changed."""
    with open(path, "rb") as fh:
        program = program_for(fh.read())
    fixed = fix_program(program.text)
    if fixed == program.text:
        return []
    changed = program.cell_sources(fixed)
    if changed:
        write_cells(path, changed)
    return sorted(changed)


# ---------------------------------------------------------------------------------------- --verify
# The script --verify runs is the program after one header line: its line L is the program's line L - 1.
SCRIPT_HEADER_LINES = 1


def script_text(path: str) -> tuple:
    """(the program of the notebook at ``path`` as a script that runs like the notebook, its cell table).
    The script runs from the notebook's directory (on ``sys.path`` and as the working directory); its
    first line is a header, so cell lines keep the numbers ``build_program`` gives them plus one. The
    table is ``NotebookProgram.table`` in the script's line numbers: ``locate(table, line)`` and
    ``map_findings(findings, table)`` take the script's lines back to the cells, as the static report's."""
    with open(path, "rb") as fh:
        program = program_for(fh.read())
    d = os.path.dirname(os.path.abspath(path))
    header = (f"import os as _xlalint_os, sys as _xlalint_sys; _xlalint_sys.path.insert(0, {d!r}); "
              f"_xlalint_os.chdir({d!r})  # {os.path.basename(path)} as one script, made by xlalint")
    table = [[number, first + SCRIPT_HEADER_LINES, n] for number, first, n in program.table()]
    return header + "\n" + program.text, table


def write_script(path: str, directory: Optional[str] = None) -> tuple:
    """Write ``script_text(path)`` as ``<notebook name>-<hash of its path>.py`` into ``directory``
    (default: ``xlalint-notebooks`` in the temporary directory, one file per notebook, rewritten on each
    run, so that the lines --verify reports can be opened); return its path and the cell table."""
    import hashlib
    import tempfile

    directory = directory or os.path.join(tempfile.gettempdir(), "xlalint-notebooks")
    os.makedirs(directory, exist_ok=True)
    tag = hashlib.sha1(os.path.abspath(path).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    name = f"{os.path.splitext(os.path.basename(path))[0]}-{tag}.py"
    out = os.path.join(directory, name)
    text, table = script_text(path)
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    return out, table


def cell_line(path: str, cell: int, line: int) -> str:
    """Line ``line`` of cell ``cell`` of the notebook at ``path``, as the notebook shows it ("" when the
    notebook cannot be read or has no such line)."""
    try:
        with open(path, "rb") as fh:
            nb = read_notebook(fh.read())
    except (OSError, NotebookError):
        return ""
    cells = nb.get("cells", [])
    if not 1 <= cell <= len(cells) or not isinstance(cells[cell - 1], dict):
        return ""
    lines = _source(cells[cell - 1]).splitlines()
    return lines[line - 1] if 1 <= line <= len(lines) else ""


# ---------------------------------------------------------------------------------------- reporters
def json_lines(raw: str) -> dict:
    """``{cell number: [line in the .ipynb file of each source line]}`` for a notebook's text, so that
    SARIF and GitHub annotations point at real lines of the file. Cells whose source is not laid out one
    line per JSON string map every line to the line where their source starts."""
    try:
        nb = json.loads(raw)
    except ValueError:
        return {}
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return {}
    decoder = json.JSONDecoder()
    starts = [m.end() - 1 for m in re.finditer(r'"source"\s*:\s*[\["]', raw)]
    out = {}
    pos_i = 0
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        want = cell.get("source", "")
        while pos_i < len(starts):
            start = starts[pos_i]
            pos_i += 1
            try:
                value, _ = decoder.raw_decode(raw, start)
            except ValueError:
                continue
            if value == want:
                break
        else:
            return out
        first = raw.count("\n", 0, start) + 1
        n = len(_source(cell).splitlines()) or 1
        if isinstance(want, list) and raw[start] == "[":
            # one string per line (how Jupyter and Colab write): element j on the line after the bracket + j
            rows = raw.split("\n", first + len(want) + 1)
            ok = all(_json_line_is(rows[first + j] if first + j < len(rows) else "", s) for j, s in enumerate(want))
            out[number] = [first + 1 + j for j in range(n)] if ok else [first] * n
        else:
            out[number] = [first] * n
    return out


def _json_line_is(row: str, s: str) -> bool:
    row = row.strip().rstrip(",")
    try:
        return json.loads(row) == s
    except ValueError:
        return False


class FileLines:
    """Per notebook path, the .ipynb line of a (cell, line) finding: read once per file."""

    def __init__(self) -> None:
        self._files: dict = {}

    def line(self, path: str, cell: int, line: int) -> Optional[int]:
        if path not in self._files:
            try:
                with open(path, "rb") as fh:
                    self._files[path] = json_lines(fh.read().decode("utf-8-sig", "replace"))
            except OSError:
                self._files[path] = {}
        rows = self._files[path].get(cell)
        if not rows:
            return None
        return rows[min(max(line, 1), len(rows)) - 1]


def iter_code_cells(nb) -> Iterable:
    for number, cell in enumerate(nb.get("cells", []), 1):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            yield number, _source(cell)
