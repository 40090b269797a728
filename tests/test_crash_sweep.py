"""A crash sweep over project layouts (issue 34): no layout makes xlalint fail (never an XLA902, never an
exception), and every way of running it gives the same findings.

The layouts (hypothesis): a root with a marker, with none (the directory itself is the root), or with
the marker above; packages as roots (``__init__.py`` and ``__main__.py`` at the root), packages and
subpackages, ``src/``; modules named like the standard library (``logging``, ``copy``); the same stem
as ``.py`` and ``.ipynb``, and as ``x.py`` beside ``x/__init__.py`` or ``src/x.py``; empty files; and
between the modules absolute, relative (climbing above the root too), star and conditional imports,
import cycles, and calls that pass the step counter or a device tensor across modules (the rules that
decide over the project then run). Each layout is linted whole, one file at a time, with two jobs, and
cold then warm through the cache.

``make test`` runs a small fixed budget (derandomized); ``make fuzz`` raises it with
``XLALINT_FUZZ_EXAMPLES``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlalint.config import build_settings
from xlalint.parse.stack import WALK_RECURSION_LIMIT
from xlalint.run.cache import Cache
from xlalint.run.project import lint_files
from xlalint.semantics.project import marked_root

# the run raises the recursion limit on its first file; hypothesis warns when it changes mid-test
sys.setrecursionlimit(max(sys.getrecursionlimit(), WALK_RECURSION_LIMIT))

FUZZ = int(os.environ.get("XLALINT_FUZZ_EXAMPLES", "0"))
SETTINGS = build_settings(None, extend_select=["XLA008"])  # every rule

# (file under the project, the dotted name an absolute import of it uses, or None: not importable so)
MODULES = [
    ("train.py", "train"),
    ("helpers.py", "helpers"),
    ("logging.py", "logging"),  # the standard library's name
    ("copy.py", "copy"),
    ("__init__.py", None),  # the root is a package
    ("__main__.py", None),
    ("pkg/__init__.py", "pkg"),
    ("pkg/core.py", "pkg.core"),
    ("pkg/sub/__init__.py", "pkg.sub"),
    ("pkg/sub/leaf.py", "pkg.sub.leaf"),
    ("pkg.py", "pkg"),  # beside pkg/__init__.py
    ("src/helpers.py", "helpers"),  # beside helpers.py
    ("empty.py", "empty"),
]


def _ident(path: str) -> str:
    return path[:-3].replace("/", "_").replace(".", "_").strip("_") or "root"


def _imports(me: str, target: str, dotted, form: str):
    """(import statement, a call it makes available or None) of one form."""
    t = _ident(target)
    leaf = dotted.rpartition(".")[2] if dotted else None
    if form == "import" and dotted:
        return f"import {dotted}", f"{dotted}.f_{t}(x, step)"
    if form == "from" and dotted:
        return f"from {dotted} import f_{t}, g_{t}", f"g_{t}(f_{t}(x, step))"
    if form == "star" and dotted:
        return f"from {dotted} import *", f"f_{t}(x, step)"
    if form == "relative" and leaf:
        return f"from . import {leaf}", f"{leaf}.f_{t}(x, step)"
    if form == "climb" and leaf:
        return f"from .. import {leaf}", None  # above the package, above the root for a top-level module
    if form == "conditional" and dotted:
        return (f"try:\n    from {dotted} import h_{t}\nexcept ImportError:\n    h_{t} = None", f"h_{t}(model)")
    if form == "typing" and dotted:
        return f"import typing\nif typing.TYPE_CHECKING:\n    import {dotted}", None
    return None, None


FORMS = ["import", "from", "star", "relative", "climb", "conditional", "typing"]


@st.composite
def layouts(draw):
    """{relative path: text} of a project, and where its marker goes."""
    chosen = draw(st.lists(st.sampled_from(MODULES), min_size=1, max_size=6, unique=True))
    marker = draw(st.sampled_from(["none", "root", "above"]))
    files = {}
    for path, _ in chosen:
        if path == "empty.py" or draw(st.integers(0, 9)) == 0:
            files[path] = ""
            continue
        t = _ident(path)
        lines = ["import torch", "import torch_xla"]
        calls = []
        targets = draw(st.lists(st.sampled_from(MODULES), max_size=3, unique=True))  # a module may import itself
        for target, dotted in targets:
            stmt, call = _imports(path, target, dotted, draw(st.sampled_from(FORMS)))
            if stmt:
                lines.append(stmt)
                if call:
                    calls.append(call)
        lines += ["", "", f"def f_{t}(x, n):", "    return x[:n]", "", "", f"def g_{t}(x):", "    print(x.item())",
                  "    return x", "", "", f"def h_{t}(model):", "    model.eval()"]
        if draw(st.booleans()):
            lines += ["", "", f"def train_{t}(model, loader, opt):", "    for step, x in enumerate(loader):",
                      "        out = model(x)"]
            lines += [f"        {c}" for c in calls] or ["        f_{t}(out, step)".format(t=t)]
            lines += ["        out.sum().backward()", "        opt.step()", "        torch_xla.sync()"]
        files[path] = "\n".join(lines) + "\n"
    py = [p for p in files if files[p]]
    if py and draw(st.booleans()):  # the same stem as a notebook
        twin = draw(st.sampled_from(sorted(py)))
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(files[twin])])
        files[twin[:-3] + ".ipynb"] = nbformat.writes(nb)
    return files, marker


def _base() -> str:
    base = tempfile.mkdtemp(prefix="xlalint-sweep-")
    if marked_root(base) is not None:
        shutil.rmtree(base)
        pytest.skip(f"a project marker above {tempfile.gettempdir()}: layouts without one cannot be made here")
    return base


def _write(base: str, files: dict, marker: str) -> tuple:
    top = os.path.join(base, "proj")
    if marker == "above":
        open(os.path.join(base, "pyproject.toml"), "w").close()
    for rel, text in files.items():
        p = os.path.join(top, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)
    if marker == "root":
        open(os.path.join(top, "pyproject.toml"), "w").close()
    paths = sorted(os.path.join(top, rel) for rel in files)
    return top, paths


def _check(files: dict, marker: str) -> None:
    base = _base()
    try:
        top, paths = _write(base, files, marker)
        whole = lint_files(paths, SETTINGS, jobs=1, cache=None)
        internal = [f"{f.path}:{f.line}: {f.message}" for f in whole if f.code == "XLA902"]
        assert not internal, "\n".join(internal)
        for p in paths:
            assert lint_files([p], SETTINGS, jobs=1, cache=None) == [f for f in whole if f.path == p], p
        assert lint_files(paths, SETTINGS, jobs=2, cache=None) == whole
        cache_dir = os.path.join(base, "cache")
        assert lint_files(paths, SETTINGS, jobs=1, cache=Cache.open(cache_dir, SETTINGS, _no_warning)) == whole
        warm = Cache.open(cache_dir, SETTINGS, _no_warning)
        assert lint_files(paths, SETTINGS, jobs=1, cache=warm) == whole
        assert warm.misses == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _no_warning(message: str) -> None:
    raise AssertionError(message)


@settings(max_examples=FUZZ or 12, deadline=None, derandomize=not FUZZ, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(layouts())
def test_no_layout_makes_an_internal_error_and_every_mode_agrees(layout):
    _check(*layout)


@pytest.mark.parametrize("files", [
    # issue 34's reproduction: a package that is its own root, with __main__.py (once an IndexError)
    {"__init__.py": "def g(a):\n    pass\n\n\ndef f(a):\n    g(a)\n", "__main__.py": ""},
    {"__init__.py": "import torch\nfrom . import core\n", "__main__.py": "from . import core\ncore.run()\n",
     "core.py": "import torch\n\n\ndef run():\n    for step, x in enumerate(loader):\n        print(x[:step].item())\n"},
    {"helpers.py": "def f(x, n):\n    return x[:n]\n", "src/helpers.py": "def f(x, n):\n    return x[n:]\n",
     "train.py": "import torch\nfrom helpers import f\nfor step, x in enumerate(loader):\n    f(x, step)\n"},
    {"pkg.py": "def f(a):\n    pass\n", "pkg/__init__.py": "def f(a):\n    pass\n\n\ndef g(a):\n    f(a)\n"},
    {"logging.py": "import torch\n\n\ndef info(x):\n    print(x)\n",
     "train.py": "import torch\nimport logging\nfor x in loader:\n    logging.info(model(x))\n"},
])
@pytest.mark.parametrize("marker", ["none", "root", "above"])
def test_package_as_root_layouts(files, marker):
    _check(files, marker)
