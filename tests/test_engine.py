"""The engine: exact positions, sorted output, bytes == str, and files without torch."""

from __future__ import annotations

import threading

import pytest

from conftest import HOST_READ, write
from xlalint.parse.stack import on_big_stack
from xlalint.analysis.source import lint_source
from xlalint.run.project import lint_paths
from xlalint.findings import Finding

LOOP = "import torch\nfor x in loader:\n    loss = model(x).sum()\n"


def spans(src: str) -> list:
    return [(f.code, f.line, f.column, f.end_line, f.end_column) for f in lint_source(src, "t.py")]


# hand-checked: 1-based line and column, the end exclusive (the column after the last character)
@pytest.mark.parametrize("body, expected", [
    # `loss.item()` starts after 4 spaces + "v = " (8 characters) and is 11 characters long
    ("    v = loss.item()\n", [("XLA001", 4, 9, 4, 20)]),
    # two on one line: the second starts after "    v = loss.item(); w = " (25 characters)
    ("    v = loss.item(); w = loss.item()\n", [("XLA001", 4, 9, 4, 20), ("XLA001", 4, 26, 4, 37)]),
    # the f-string `f"loss {loss}"` (14 characters) after "    print("
    ('    print(f"loss {loss}")\n', [("XLA006", 4, 11, 4, 25)]),
    # the condition `loss > 10.0` after "    if "
    ("    if loss > 10.0:\n        break\n", [("XLA002", 4, 8, 4, 19)]),
    # a call over two lines ends after `loss)` on line 5 (8 spaces + 5 characters)
    ("    total = total + float(\n        loss)\n", [("XLA001", 4, 21, 5, 14)]),
    # columns count characters, not UTF-8 bytes: `é` is one column
    ('    s = "é"; v = loss.item()\n', [("XLA001", 4, 18, 4, 29)]),
])
def test_exact_positions(body, expected):
    assert spans(LOOP + body) == expected


def test_crlf_line_endings_give_the_same_positions():
    src = LOOP + "    v = loss.item()\n"
    assert spans(src.replace("\n", "\r\n")) == spans(src)


def test_positions_in_a_later_top_level_statement():
    src = "import torch\n\n\ndef helper():\n    return 1\n\n\n" + LOOP.replace("import torch\n", "") + "    v = loss.item()\n"
    assert spans(src) == [("XLA001", 10, 9, 10, 20)]


def test_bytes_and_str_give_identical_findings():
    src = LOOP + '    s = "é"\n    v = loss.item()\n    print(f"loss {loss}")\n    if loss > 1:\n        pass\n'
    from_str = lint_source(src, "t.py")
    assert len(from_str) == 3
    assert lint_source(src.encode("utf-8"), "t.py") == from_str


def test_a_file_without_torch_produces_nothing():
    src = "for x in loader:\n    loss = model(x).sum()\n    v = loss.item()\n    print(f'{loss}')\n"
    assert lint_source(src, "t.py") == []
    assert lint_source(src.encode(), "t.py") == []


def test_findings_are_plain_sorted_values():
    src = LOOP + '    print(f"{loss}")\n    v = loss.item()\n    w = loss.item(); u = loss.item()\n'
    found = lint_source(src, "t.py")
    assert all(isinstance(f, Finding) for f in found)
    assert found == sorted(found, key=lambda f: (f.path, f.line, f.column))
    assert [(f.line, f.column) for f in found] == [(4, 11), (5, 9), (6, 9), (6, 26)]


def test_lint_paths_sorted_by_path_line_column(tmp_path):
    write(tmp_path, {
        "b.py": HOST_READ + "    w = loss.item()\n",
        "a/z.py": HOST_READ,
        "a.py": HOST_READ,
        "c.py": "def f(:\n",
    })
    found = lint_paths([str(tmp_path)])
    keys = [(f.path, f.line, f.column) for f in found]
    assert keys == sorted(keys)
    rel = [(f.path[len(str(tmp_path)) + 1:], f.line, f.code) for f in found]
    assert rel == [("a.py", 4, "XLA001"), ("a/z.py", 4, "XLA001"), ("b.py", 4, "XLA001"), ("b.py", 5, "XLA001"),
                   ("c.py", 1, "XLA900")]


def test_enabled_codes_filter_and_file_level_findings_always_kept():
    assert lint_source(LOOP + "    v = loss.item()\n", "t.py", {"XLA006"}) == []
    (f,) = lint_source("def f(:\n", "t.py", {"XLA001"})
    assert f.code == "XLA900"


@pytest.mark.parametrize("literal", [
    "''", '""', "'a'", '"a b"', "'''x'''", '"""y\nz"""', "''''''", "'''a''b'''", '"it\'s"', "'\"'",
    "'\\n'", "'\\x41'", "r'\\d'", "u'x'", "'''\"'''", "'\u00e9'", "'a\\\nb'", "b'x'", "rb'x'",
])
def test_string_value_is_what_python_makes_of_the_literal(literal):
    # the rules read string literals (`device="xla"`, `padding="longest"`) through string_value, which
    # takes the text between the quotes when nothing needs Python's parser
    import ast

    import libcst as cst

    from xlalint.semantics.syntax import string_value

    want = ast.literal_eval(literal)
    assert string_value(cst.parse_expression(literal)) == (want if isinstance(want, str) else None)


def test_the_big_stack_thread_is_kept_and_serves_nested_calls_errors_and_forked_children():
    import os
    import select
    import signal

    first = on_big_stack(threading.current_thread)
    assert first is on_big_stack(threading.current_thread)  # one thread, kept
    assert first is not threading.current_thread()
    assert on_big_stack(lambda: on_big_stack(lambda: 42)) == 42  # nested: runs in place
    with pytest.raises(ZeroDivisionError):
        on_big_stack(lambda: 1 / 0)
    assert on_big_stack(sum, [1, 2]) == 3  # an error does not stop the thread
    if not hasattr(os, "fork"):
        return
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child has no copy of the thread: it starts its own instead of waiting forever
        try:
            os.write(w, str(on_big_stack(lambda: 6 * 7)).encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        # a child waiting on its parent's thread would wait forever: give it 60 s, then fail
        ready, _, _ = select.select([r], [], [], 60)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        assert ready and os.read(r, 16) == b"42"
    finally:
        os.close(r)
        os.waitpid(pid, 0)


@pytest.mark.parametrize("name, words", [
    ("trainLoss_2", ("trainloss", "2")), ("__init__", ("init",)), ("", ()), ("model", ("model",)),
    ("x" * 65 + "_Model", ("x" * 65, "model")),  # over 64 characters: split without the cache
])
def test_name_words_cached_or_not_are_the_lower_case_words(name, words):
    from xlalint.semantics.syntax import name_words

    assert name_words(name) == words
    assert name_words(name) == words  # the cached answer is the same
