"""A file's bytes and text: regular files only, under the size limit, decoded as Python decodes them.

What cannot be read is a ``Problem`` (XLA901), never an exception: the analysis floor reports it.
"""

from __future__ import annotations

import io
import os
import stat
import tokenize
from typing import Optional

from xlalint.findings import Problem
from xlalint.sources.notebook import MAX_NOTEBOOK_BYTES


def decode_source(data: bytes) -> str:
    """Decode like Python does (PEP 263 cookie or BOM, else UTF-8); raise ValueError with a reason and
    the offset of the bad byte."""
    if b"\x00" in data:
        raise ValueError("source code cannot contain null bytes", data.index(b"\x00"))
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        raise ValueError(str(e), 0) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise ValueError(f"not valid {encoding}: {e.reason} at byte {e.start}", e.start) from None
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r}", 0) from None


def position_of_offset(data: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column of byte ``offset`` of ``data``."""
    before = data[:offset]
    line = before.count(b"\n") + 1
    col = offset - (before.rfind(b"\n") + 1) + 1
    return line, col


def too_large(size: Optional[int], max_size: int) -> Problem:
    """A file (or standard input, ``size`` None) over ``max_size`` bytes: skipped, with how to lint it."""
    what = f"{size / 1e6:.1f} MB is" if size is not None else "the input is"
    return Problem(
        "XLA901",
        f"skipped: {what} over the max-file-size limit of {max_size / 1e6:.1f} MB"
        " (raise `max-file-size` in [tool.xlalint] to lint it)",
    )


def read_file(path: str, max_size: int) -> tuple[Optional[bytes], Optional[Problem]]:
    """(the file's bytes, None), or (None, why it cannot be linted). A notebook's cap is on its code,
    not its outputs (images): it may be up to ``MAX_NOTEBOOK_BYTES``."""
    try:
        st = os.stat(path)
    except OSError as e:
        return None, Problem("XLA901", f"cannot read the file: {e.strerror or e}")
    if not stat.S_ISREG(st.st_mode):
        return None, Problem("XLA901", "not a regular file")
    if path.lower().endswith(".ipynb"):
        max_size = max(max_size, MAX_NOTEBOOK_BYTES)
    if st.st_size > max_size:
        return None, too_large(st.st_size, max_size)
    try:
        with open(path, "rb") as fh:
            return fh.read(), None
    except OSError as e:
        return None, Problem("XLA901", f"cannot read the file: {e.strerror or e}")
