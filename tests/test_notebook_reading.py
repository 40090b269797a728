"""Notebooks are read with the standard library's json: the base install (libcst alone) lints them, and
nbformat (with jsonschema, fastjsonschema, jupyter-core, traitlets and rpds-py) is only a test extra.
Format 4 as Jupyter and Colab write it, format 3 (worksheets, ``input``) as old notebooks have it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from xlalint.analysis.source import lint_source

LOOP = "for x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n    v = loss.item()\n"


def _v4(cells) -> bytes:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": t, "id": str(i), "metadata": {}, "source": s, **({"outputs": [], "execution_count": None} if t == "code" else {})}
        for i, (t, s) in enumerate(cells)]}).encode()


def _v3(cells) -> bytes:
    return json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": ""}, "worksheets": [{"metadata": {}, "cells": [
        {"cell_type": "code", "input": s, "language": "python", "metadata": {}, "outputs": []} if t == "code"
        else {"cell_type": t, "source": s, "metadata": {}, **({"level": 1} if t == "heading" else {})}
        for t, s in cells]}]}).encode()


CELLS = [("markdown", "# Train"), ("code", "import torch"), ("heading", "Loop"), ("code", LOOP)]


@pytest.mark.parametrize("make", [_v4, _v3], ids=["format 4", "format 3"])
def test_both_formats_give_the_finding_in_its_cell(make):
    data = make([c if c[0] != "heading" or make is _v3 else ("markdown", "## Loop") for c in CELLS])
    (f,) = lint_source(data, "nb.ipynb")
    assert (f.code, f.cell, f.line, f.column) == ("XLA001", 4, 4, 9)


@pytest.mark.parametrize("data, reason", [
    (b'{"cells": []}', "no nbformat version"),
    (b'{"nbformat": 2, "worksheets": []}', "format 2"),
    (b'{"nbformat": 4, "cells": 3}', "no list of cells"),
    (b'"a string"', "not a JSON object"),
    # 100,000 levels: json's C decoder recurses per level, as deep as the recursion limit, which the engine
    # raises for libcst: on the main thread's stack this crashed the interpreter (segmentation fault)
    (b"[" * 100_000 + b"]" * 100_000, "not a JSON object"),
    (b"[" * 300_000, "nested too deeply"),
])
def test_what_is_not_a_notebook_is_one_finding_that_says_why(data, reason):
    lint_source("x = ((((1))))\n", "x.py")  # the engine has raised the recursion limit
    (f,) = lint_source(data, "bad.ipynb")
    assert f.code == "XLA900" and reason in f.message, f.message


def test_notebooks_are_linted_without_nbformat_installed():
    """nbformat is made unimportable in a fresh interpreter: the bundled Colab notebook is linted as usual."""
    code = (
        "import sys; sys.modules['nbformat'] = None\n"  # `import nbformat` now raises ImportError
        "from xlalint.analysis.source import lint_source\n"
        "path = sys.argv[1]\n"
        "print(sorted((f.code, f.cell, f.line) for f in lint_source(open(path, 'rb').read(), path)))\n"
    )
    path = ROOT / "tests" / "fixtures" / "notebooks" / "colab_tpu_training.ipynb"
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}", "PATH": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[('XLA001', 4, 2), ('XLA001', 8, 12), ('XLA002', 8, 14), ('XLA003', 8, 16), ('XLA006', 4, 6)]"


def test_the_base_install_does_not_ask_for_nbformat():
    text = (ROOT / "pyproject.toml").read_text()
    base = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert "nbformat" not in base and "jsonschema" not in base
