"""Bad input never produces a traceback and never stops the other files.

Each case runs the real CLI over a directory holding the bad file and a good one (``good.py``, one
XLA001 at 4:9) and checks the bad file's one-line finding or warning, the good file's finding, and
the exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import HOST_READ, assert_no_traceback, finding_lines, run_xlalint, write
from xlalint.analysis.source import lint_source

GOOD = "good.py:4:9: XLA001"


def lint_dir(tmp_path, *args):
    r = run_xlalint("-q", "--output-format", "concise", *args, ".", cwd=tmp_path, timeout=120)
    assert_no_traceback(r)
    return r


def only(r, path):
    """The finding lines (full text) for ``path``."""
    return [line for line in r.stdout.splitlines() if line.startswith(path + ":")]


def test_syntax_error_is_xla900_with_its_location(tmp_path):
    write(tmp_path, {"good.py": HOST_READ, "bad.py": "import torch\nfor x in loader\n    pass\n"})
    r = lint_dir(tmp_path)
    assert r.returncode == 1
    (bad,) = only(r, "bad.py")
    # where CPython puts it: right after `loader`, not on the next line where libcst's parser stopped
    assert bad == "bad.py:2:16: XLA900 syntax error: expected ':'"
    assert GOOD in finding_lines(r.stdout)


def test_syntax_error_in_a_file_without_torch_is_still_reported():
    (f,) = lint_source("def f(:\n    pass\n", "x.py")
    assert (f.code, f.name, f.line, f.column) == ("XLA900", "syntax-error", 1, 7)
    (f,) = lint_source("x = (1,\ny = 2\n", "x.py")
    assert (f.line, f.column, f.message) == (1, 5, "syntax error: '(' was never closed")


def test_undecodable_bytes(tmp_path):
    write(tmp_path, {"good.py": HOST_READ, "latin.py": b"import torch\nname = 'caf\xe9'\n"})
    r = lint_dir(tmp_path)
    (bad,) = only(r, "latin.py")
    assert bad.startswith("latin.py:2:") and "XLA900" in bad and "utf-8" in bad
    assert GOOD in finding_lines(r.stdout) and r.returncode == 1


def test_encoding_cookie_is_honoured():
    src = b"# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\n"
    assert lint_source(src, "x.py") == []


def test_bom_is_accepted():
    assert [f.code for f in lint_source(b"\xef\xbb\xbf" + HOST_READ.encode(), "x.py")] == ["XLA001"]


def test_nul_byte(tmp_path):
    write(tmp_path, {"good.py": HOST_READ, "nul.py": b"import torch\nx = 1\x00\n"})
    r = lint_dir(tmp_path)
    (bad,) = only(r, "nul.py")
    assert bad.startswith("nul.py:2:6: XLA900") and "null bytes" in bad
    assert GOOD in finding_lines(r.stdout)


def test_empty_file_lints_clean(tmp_path):
    write(tmp_path, {"good.py": HOST_READ, "empty.py": "", "blank.py": "\n\n   \n"})
    r = lint_dir(tmp_path)
    assert finding_lines(r.stdout) == [GOOD]
    r = run_xlalint("empty.py", cwd=tmp_path)
    assert r.returncode == 0 and "All checks passed (1 file checked)." in r.stdout


def test_large_generated_file_is_one_xla901_finding_and_fast(tmp_path):
    # 5 MB of generated code: libcst would need minutes and gigabytes; over max-file-size it is skipped
    row = "    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],\n"
    write(tmp_path, {"good.py": HOST_READ, "table.py": "import torch\nTABLE = [\n" + row * (5_000_000 // len(row)) + "]\n"})
    t0 = time.monotonic()
    r = lint_dir(tmp_path)
    assert time.monotonic() - t0 < 30
    (bad,) = only(r, "table.py")
    assert bad.startswith("table.py:1:1: XLA901 ") and "max-file-size" in bad
    assert GOOD in finding_lines(r.stdout)


def test_max_file_size_can_be_raised(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "[tool.xlalint]\nmax-file-size = 50\n",
        "good.py": HOST_READ,  # over 50 bytes: skipped
    })
    r = lint_dir(tmp_path)
    assert [line.split(" ")[1] for line in r.stdout.splitlines()] == ["XLA901"]
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\nmax-file-size = 100000\n")
    r = lint_dir(tmp_path)
    assert finding_lines(r.stdout) == [GOOD]


def test_generated_table_over_max_tokens_is_one_xla901_and_uses_little_memory(tmp_path):
    # 300 KB, 80,000 tokens: under max-file-size, but libcst's tree would take ~280 MB
    rows = "".join(f"    ({i}, {i + 1}, {i + 2}, {i + 3}),\n" for i in range(8000))
    write(tmp_path, {"good.py": HOST_READ, "table.py": "import torch\nTABLE = [\n" + rows + "]\n"})
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run([sys.executable, '-m', 'xlalint', '-q', '--no-cache', '--output-format', 'concise', '.'], capture_output=True, text=True)\n"
            "print(r.stdout)\n"
            "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    (bad,) = [line for line in r.stdout.splitlines() if line.startswith("table.py:")]
    assert bad.startswith("table.py:1:1: XLA901 skipped: more than 64,000 tokens") and "max-tokens" in bad
    assert GOOD in r.stdout
    maxrss_kb = int(r.stdout.rsplit("MAXRSS", 1)[1])
    assert maxrss_kb < 300 * 1024, f"peak memory {maxrss_kb / 1024:.0f} MB"


def test_max_tokens_can_be_raised(tmp_path):
    rows = "".join(f"    ({i}, {i + 1}),\n" for i in range(200))
    write(tmp_path, {"pyproject.toml": "[tool.xlalint]\nmax-tokens = 500\n", "good.py": HOST_READ,
                     "table.py": "import torch\nTABLE = [\n" + rows + "]\n"})
    r = lint_dir(tmp_path)
    assert "XLA901" in only(r, "table.py")[0] and GOOD in finding_lines(r.stdout)
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\nmax-tokens = 100000\n")
    r = lint_dir(tmp_path)
    assert finding_lines(r.stdout) == [GOOD]


@pytest.mark.parametrize("kind", ["parens", "lists", "dicts"])
def test_deeply_nested_expression_does_not_crash(tmp_path, kind):
    n = 1000
    expr = {"parens": "(" * n + "1" + ")" * n,
            "lists": "[" * n + "]" * n,
            "dicts": "{1: " * n + "1" + "}" * n}[kind]
    write(tmp_path, {"good.py": HOST_READ, "deep.py": f"import torch\nx = {expr}\n"})
    r = lint_dir(tmp_path)
    (bad,) = only(r, "deep.py")
    assert bad.startswith("deep.py:2:") and "XLA900" in bad and "nested" in bad
    assert GOOD in finding_lines(r.stdout)


def test_nesting_limit_is_cpythons():
    # CPython accepts 200 nested brackets and refuses 201: so does xlalint
    ok = "import torch\nx = " + "(" * 200 + "1" + ")" * 200 + "\n"
    assert lint_source(ok, "x.py") == []
    (f,) = lint_source(ok.replace("(", "((", 1).replace(")", "))", 1), "x.py")
    assert (f.code, f.line, f.column) == ("XLA900", 2, 5 + 200)
    # brackets inside strings and comments do not count
    assert lint_source("import torch\ns = '" + "(" * 500 + "'  # " + "[" * 500 + "\n", "x.py") == []


def test_very_long_chain_does_not_crash_the_interpreter():
    # `a and a and ...` is valid Python (CPython compiles it) but recurses once per operand in libcst's
    # native parser: in-process, a crash here would kill pytest itself, so run it in a child
    code = ("from xlalint.analysis.source import lint_source\n"
            "src = 'import torch\\nx = ' + ' and '.join(['a'] * 10000) + '\\n'\n"
            "print([f.code for f in lint_source(src, 'x.py')])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-500:]}"
    assert r.stdout.strip() == "[]"  # valid code: linted (on a big stack), not called a syntax error


def test_directory_symlink_loop_terminates_and_warns_once(tmp_path):
    write(tmp_path, {"good.py": HOST_READ, "pkg/sub/mod.py": "import torch\n"})
    os.symlink("..", tmp_path / "pkg" / "sub" / "up")
    os.symlink(".", tmp_path / "pkg" / "self")
    r = lint_dir(tmp_path)
    assert r.returncode == 1
    assert finding_lines(r.stdout) == [GOOD]
    warnings = [line for line in r.stderr.splitlines() if "loop" in line]
    assert len(warnings) == 2, r.stderr  # one per looping link, each once
    assert all(line.startswith("xlalint: warning: ") for line in warnings)


def test_dangling_symlink(tmp_path):
    write(tmp_path, {"good.py": HOST_READ})
    os.symlink("does_not_exist.py", tmp_path / "broken.py")
    r = lint_dir(tmp_path)
    (bad,) = only(r, "broken.py")
    assert bad.startswith("broken.py:1:1: XLA901 cannot read the file")
    assert GOOD in finding_lines(r.stdout) and r.returncode == 1
    # named on the command line: the same finding, not "no such file"
    r = run_xlalint("-q", "broken.py", "good.py", cwd=tmp_path)
    assert r.returncode == 1 and "XLA901" in r.stdout and GOOD in finding_lines(r.stdout)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_named_py_does_not_hang(tmp_path):
    write(tmp_path, {"good.py": HOST_READ})
    os.mkfifo(tmp_path / "pipe.py")
    r = lint_dir(tmp_path)  # reading a FIFO would block forever: the timeout catches a hang
    (bad,) = only(r, "pipe.py")
    assert bad.startswith("pipe.py:1:1: XLA901 not a regular file")
    assert GOOD in finding_lines(r.stdout)


def test_directory_named_like_a_python_file_is_walked(tmp_path):
    write(tmp_path, {"good.py": HOST_READ, "odd.py/inner.py": HOST_READ})
    r = lint_dir(tmp_path)
    assert finding_lines(r.stdout) == [GOOD, "odd.py/inner.py:4:9: XLA001"]


def test_unreadable_file(tmp_path):
    # chmod 000 blocks reading only for non-root users; root reads anything. A directory entry that
    # cannot be opened as a file is the same failure for everyone: opening it raises IsADirectoryError.
    from xlalint.sources.read import read_file

    data, err = read_file(str(tmp_path), 10_000)
    assert data is None and err.code == "XLA901"
    p = tmp_path / "secret.py"
    p.write_text(HOST_READ)
    p.chmod(0)
    try:
        if os.geteuid() != 0:
            r = run_xlalint("-q", "secret.py", cwd=tmp_path)
            assert_no_traceback(r)
            assert r.stdout.startswith("secret.py:1:1: XLA901 cannot read the file: Permission denied")
    finally:
        p.chmod(0o644)


# ------------------------------------------------------------------ pathological but small files (#18)
# The cases of issue #18, at its sizes: libcst took minutes or gigabytes on each; CPython refuses them.
PATHOLOGICAL = {
    "plus": "x = " + "+".join(["a"] * 20_000),  # 40 KB; libcst was still parsing after 120 s
    "lambda": "x = " + "lambda: " * 5_000 + "1",  # 26 s and 4.7 GB
    "power": "x = " + "**".join(["2"] * 5_000),  # 3.0 GB
    "calls": "x = f" + "()" * 5_000,  # 81 s
    "attributes": "x = a" + ".b" * 5_000,  # 55 s
    "subscripts": "x = a" + "[0]" * 5_000,
    "elif": "if a:\n    pass\n" + "elif a:\n    pass\n" * 5_000,
}


@pytest.mark.parametrize("kind", sorted(PATHOLOGICAL))
def test_pathological_file_is_answered_at_once_in_little_memory(tmp_path, kind):
    write(tmp_path, {"good.py": HOST_READ, "patho.py": "import torch\n" + PATHOLOGICAL[kind] + "\n"})
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run([sys.executable, '-m', 'xlalint', '-q', '--no-cache', '--output-format', 'concise', '.'], capture_output=True, text=True)\n"
            "print(r.stdout)\nprint(r.stderr, file=sys.stderr)\n"
            "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    # the timeout is a hang detector (each took 26 s to hours before the guard), not a speed measurement
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert_no_traceback(r)
    (bad,) = [line for line in r.stdout.splitlines() if line.startswith("patho.py:")]
    assert " XLA901 too complex to analyse (" in bad and "[tool.xlalint]" in bad, bad
    assert GOOD in r.stdout
    maxrss_kb = int(r.stdout.rsplit("MAXRSS", 1)[1])
    assert maxrss_kb < 300 * 1024, f"peak memory {maxrss_kb / 1024:.0f} MB"


def test_many_moderately_deep_statements_are_bounded_too():
    # each statement is under max-expression-depth, but libcst's cost grows with depth squared per
    # statement: twenty 300-deep `lambda:` chains would take over a GB
    src = "import torch\n" + ("x = " + "lambda: " * 300 + "1\n") * 20
    (f,) = lint_source(src, "x.py")
    assert f.code == "XLA901" and "max-nesting-cost" in f.message


def test_complexity_limits_can_be_raised(tmp_path):
    deep = "import torch\nx = " + "+".join(["a"] * 700) + "\n"
    write(tmp_path, {"good.py": HOST_READ, "deep.py": deep})
    r = lint_dir(tmp_path)
    assert "XLA901" in only(r, "deep.py")[0] and "max-expression-depth" in only(r, "deep.py")[0]
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\nmax-expression-depth = 1000\n")
    r = lint_dir(tmp_path)
    assert finding_lines(r.stdout) == [GOOD]
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\nmax-expression-depth = 1000\nmax-nesting-cost = 1000\n")
    r = lint_dir(tmp_path)
    assert "max-nesting-cost" in only(r, "deep.py")[0]


@pytest.mark.parametrize("key", ["max-expression-depth", "max-nesting-cost"])
def test_complexity_limits_are_validated(tmp_path, key):
    write(tmp_path, {"good.py": HOST_READ, "pyproject.toml": f"[tool.xlalint]\n{key} = 0\n"})
    r = run_xlalint(".", cwd=tmp_path)
    assert r.returncode == 2 and key in r.stderr and r.stderr.count("\n") == 1
    (tmp_path / "pyproject.toml").write_text(f'[tool.xlalint]\n{key} = "big"\n')
    r = run_xlalint(".", cwd=tmp_path)
    assert r.returncode == 2 and key in r.stderr


def _ast_depth(node) -> int:
    import ast

    depth, todo = 0, [(node, 1)]
    while todo:
        n, d = todo.pop()
        depth = max(depth, d)
        todo.extend((c, d + 1) for c in ast.iter_child_nodes(n) if not isinstance(c, (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)))
    return depth


@pytest.mark.parametrize("expr", [
    "a" + ".b(c)[0]" * 40, "-" * 60 + "a", "not " * 60 + "a", "lambda: " * 40 + "x", "2" + "**2" * 60,
    "a if b else " * 30 + "c", "f(" * 30 + ")" * 30, "[a for a in " * 20 + "b" + "]" * 20,
    "a + (b * (c - (d / (e % (f @ g)))))" + " + a.b.c.d" * 20, '"a" "b" "c" ' * 20,
    "{k: lambda x, y=1: x + (lambda: y) for k in z}" + ".get(1)(2)" * 20,
])
def test_the_guard_bounds_the_depth_of_cpythons_tree(expr):
    # the guard's depth is an upper bound: what it lets through is no deeper for CPython's compiler
    import ast

    from xlalint.parse.guard import measure

    src = f"x = {expr}\n"
    tree_depth = _ast_depth(ast.parse(src)) - 2  # minus Module and Assign
    assert measure(src)["depth"] >= tree_depth - 1, (measure(src), tree_depth)


def test_real_code_is_far_under_the_limits():
    # the deepest statements of this repository's own sources and fixtures
    from xlalint.sources.read import decode_source
    from xlalint.parse.guard import DEFAULT_MAX_EXPRESSION_DEPTH, DEFAULT_MAX_NESTING_COST, measure

    from conftest import ROOT

    worst = {"depth": 0, "cost": 0}
    for p in list(ROOT.glob("xlalint/**/*.py")) + list(ROOT.glob("tests/**/*.py")):
        m = measure(decode_source(p.read_bytes()))
        worst = {k: max(worst[k], m[k]) for k in worst}
    assert 5 < worst["depth"] < DEFAULT_MAX_EXPRESSION_DEPTH / 4
    assert worst["cost"] < DEFAULT_MAX_NESTING_COST / 20


# ------------------------------------------------------------------ what CPython would not compile (#18)
@pytest.mark.parametrize("src, line, col, message", [
    ("import torch\nreturn 1\n", 2, 1, "'return' outside function"),
    ("import torch\nfor x in y:\n    pass\nbreak\n", 4, 1, "'break' outside loop"),
    ("import torch\nyield 1\n", 2, 1, "'yield' outside function"),
    ("import torch\nawait x\n", 2, 1, "'await' outside function"),
    ("import torch\nnonlocal x\n", 2, 1, "nonlocal declaration not allowed at module level"),
    ("import torch\ndef f(a, a):\n    pass\n", 2, 10, "duplicate argument 'a' in function definition"),
    ("import torch\nx = 1\nfrom __future__ import annotations\n", 3, 1, "from __future__ imports must occur at the beginning of the file"),
    ("import torch\nf(a=1, a=2)\n", 2, 8, "keyword argument repeated: a"),
    ("import torch\n" + "".join("    " * i + "for a in b:\n" for i in range(21)) + "    " * 21 + "pass\n", 22, None,
     "too many statically nested blocks"),
    ("import torch\n" + "".join(" " * i + "if a:\n" for i in range(101)) + " " * 101 + "pass\n", 102, 1,
     "too many levels of indentation"),
])
def test_what_cpython_refuses_to_compile_is_xla900_with_its_message(src, line, col, message):
    (f,) = lint_source(src, "x.py")
    assert (f.code, f.message) == ("XLA900", f"syntax error: {message}")
    assert f.line == line and (col is None or f.column == col)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the interpreter itself reads Python 3.12's grammar")
def test_python_312_type_statements_are_valid_code_under_an_older_interpreter():
    # a project requiring Python >= 3.12 (lerobot's `type FeatureDict = dict[str, ...]`) linted by 3.11: CPython
    # refuses the line, libcst reads the newer grammar: no syntax error, and the file is linted
    src = ("import torch\n\ntype Batch = dict[str, torch.Tensor]\n\nclass Cache[K, V]:\n    pass\n\n"
           "def first[T](xs: list[T]) -> T:\n    return xs[0]\n\n"
           "def train(model, loader, opt, device):\n    for x in loader:\n        loss = model(x.to(device))\n"
           "        loss.backward()\n        opt.step()\n        print(loss.item())\n")
    assert [(f.code, f.line) for f in lint_source(src, "x.py")] == [("XLA001", 16)]
    # a real error in such a file is still one, where the newer grammar's parser stops
    (f,) = lint_source("import torch\ntype Batch = dict\ndef f(:\n    pass\n", "x.py")
    assert f.code == "XLA900" and f.line >= 3


def test_compile_errors_do_not_stop_other_files(tmp_path):
    write(tmp_path, {"good.py": HOST_READ, "ret.py": "import torch\n\ndef f():\n    pass\n\nreturn f\n"})
    r = lint_dir(tmp_path)
    assert only(r, "ret.py") == ["ret.py:6:1: XLA900 syntax error: 'return' outside function"]
    assert GOOD in finding_lines(r.stdout) and r.returncode == 1


def test_compile_warnings_are_not_errors(capfd):
    # invalid escapes and `is` with a literal are warnings in CPython: linted as usual, nothing printed
    src = HOST_READ + "    s = '\\d'\n    t = x is 1\n"
    assert [f.code for f in lint_source(src, "x.py")] == ["XLA001"]
    assert capfd.readouterr().err == ""


def test_config_given_a_directory_says_so(tmp_path):
    write(tmp_path, {"good.py": HOST_READ, "proj/pyproject.toml": "[tool.xlalint]\n"})
    r = run_xlalint("--config", "proj", "good.py", cwd=tmp_path)
    assert_no_traceback(r)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "xlalint: error: --config: proj: is a directory; give a file (its pyproject.toml or an xlalint.toml)\n"


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_the_guard_ends_statements_at_every_kind_of_line_end(newline):
    # 600 short statements are 600 shallow statements, not one 600-deep chain, whatever the line ends
    src = ("import torch\n" + "f()[0].g\n" * 600).replace("\n", newline)
    assert lint_source(src, "x.py") == []
    assert lint_source(src + "x = " + "+".join(["a"] * 600) + newline, "x.py")[0].code == "XLA901"


# The scan's tokens before blanks and plain names were matched (and skipped) too: only the tokens that
# count. The scan must measure exactly what it measured with them.
_TOKENS_THAT_COUNT = r"""
      [rRbBuUfF]{0,2}(?:\"\"\"(?:[^\\]|\\.)*?\"\"\"|'''(?:[^\\]|\\.)*?'''
                      |"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | \#[^\r\n]*
    | \r\n?|\n
    | \\(?:\r\n?|\n)
    | \b(?:not|and|or|if|elif|else|lambda|await|for)\b
    | \b[^\W\d]\w*(?=[ \t]*[(\[])
    | \b\d[\w.]*(?:[eE][+-]\d+\w*)?
    | \.\.\.
    | \.\d[\w.]*(?:[eE][+-]\d+\w*)?
    | \*\*=?|//=?|<<=?|>>=?|->|:=|[-+*/%@&|^<>=!]=
    | [-+*/%@&|^~.()\[\]{},;:=]
    """


def test_skipping_blanks_and_names_measures_what_the_counting_tokens_alone_measure(monkeypatch):
    import re

    from xlalint.parse import guard
    from xlalint.sources.read import decode_source

    from conftest import ROOT

    texts = [decode_source(p.read_bytes()) for p in sorted(ROOT.glob("xlalint/**/*.py")) + sorted(ROOT.glob("tests/**/*.py"))]
    texts += [
        "x = f (a) [b] .c ( d )\n", "y = abc'q' rb'x' u\"y\" f'{z}'  'w'\n", "if a:\n\tb = c . d(e)\nelif\tf: g\n",
        "z = lambda  a , b=1 : a+b if  not c else (yield)\n", "w = x1if y else 2\n", "v = 1e5 .real + .5j\n",
        "t = a[0] " * 3 + "\n", "s = (lambda: (lambda: f(g(h(i)))))\n" * 3, "r = " + "a." * 300 + "b\n",
    ]
    new = [guard.measure(t) for t in texts]
    monkeypatch.setattr(guard, "_TOKEN", re.compile(_TOKENS_THAT_COUNT, re.VERBOSE | re.DOTALL))
    old = [guard.measure(t) for t in texts]
    assert new == old
    assert any(m["depth"] > 20 for m in old)  # some statement deep enough to cost something
