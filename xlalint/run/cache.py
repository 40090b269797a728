"""The findings cache: a second run over an unchanged tree reads files, hashes them, and parses nothing.

Layout, like ruff's ``.ruff_cache``: ``<root>/.xlalint_cache/<version>-<salt>/<ab>/<rest of the key>``,
one small file per linted file. The salt hashes everything that can change a file's findings other than
its contents: the xlalint version, a hash of the code that makes findings (sources, parse, semantics, rules, analysis: so
an editable checkout never serves findings of yesterday's rules), the libcst and Python versions, and
``Settings.fingerprint()``. The key hashes the file's bytes and the codes enabled for it (per-file-ignores
make those depend on the path). Findings are stored without their path, so a renamed or copied file hits.
This holds because a file's findings depend on its bytes and its enabled codes alone: a rule that ever
reads the path or another file must add that to the key.

One file per entry because parallel writers (two xlalint runs, pre-commit beside an editor) then never
contend: each entry is written to a temporary file and renamed into place, and two writers of the same key
write the same bytes. An entry is ``MAGIC + crc32 + marshal(findings)``; one that fails the check is
treated as a miss, reported once, and rewritten. A read-only cache directory (permissions, an immutable
or read-only mount: a cache shared by CI) is used read-only: its entries are read, nothing is written,
nothing is printed. A cache directory that cannot be created, or fails to write for another reason (a
full disk, a shard taken by a file), degrades to no cache or to read-only with one warning on stderr: a
cache never makes a run fail.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import marshal
import os
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Callable, Optional

import xlalint

CACHE_DIR_NAME = ".xlalint_cache"
MAGIC = b"XLC1"  # finding rows
MAGIC2 = b"XLC2"  # a module's analyses: summary, candidates and the facts they read (plain data)
_TAG = b"Signature: 8a477f597d28d172789f06886806bc55\n# This directory is a cache made by xlalint.\n"

# A stored finding: the Finding fields after ``path``, in order.
FindingRow = tuple  # (line, column, code, end_line, end_column, name, message, severity, fix, cell)


# The modules whose code decides a file's findings (the CLI, reporters and --verify do not).
_FINDING_CODE = ("findings.py", "sources", "parse", "semantics", "rules", "analysis")


@functools.lru_cache(maxsize=None)
def _code_fingerprint() -> str:
    """A hash of the code that makes findings: a rule edited in place (an editable install) invalidates.
    Once per process: the code that runs is the code imported, whatever the files say later (a host
    that opens the cache once per file, flake8, then reads them once)."""
    h = hashlib.blake2b(digest_size=16)
    pkg = Path(xlalint.__file__).parent
    for top in _FINDING_CODE:
        base = pkg / top
        if base.is_file():
            found = [str(base)]
        else:
            found = []
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames.sort()
                found.extend(os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".py"))
        for p in found:
            try:
                with open(p, "rb") as fh:
                    h.update(os.path.relpath(p, pkg).encode() + b"\0" + fh.read() + b"\0")
            except OSError:
                continue
    return h.hexdigest()


def _libcst_version() -> str:
    try:
        from importlib.metadata import version

        return version("libcst")
    except Exception:  # noqa: BLE001 - a vendored or odd install: the code fingerprint still applies
        return "?"


def salt_for(settings) -> str:
    parts = (
        xlalint.__version__,
        _code_fingerprint(),
        _libcst_version(),
        sys.version,
        settings.fingerprint() if settings is not None else "",
    )
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def make_cache_dir(directory: Path, root: Path) -> None:
    """Create ``directory`` under the cache ``root``; a root made here is tagged as a cache (backup tools
    skip it) and ignored by git. Raises OSError."""
    fresh = not root.exists()
    directory.mkdir(parents=True, exist_ok=True)
    if fresh:
        (root / "CACHEDIR.TAG").write_bytes(_TAG)
        (root / ".gitignore").write_text("# Automatically created by xlalint.\n*\n")


def default_cache_dir(settings) -> Path:
    root = getattr(settings, "root", None) or Path.cwd()
    return Path(root) / CACHE_DIR_NAME


class Cache:
    """Get and put the findings of one file's contents under one settings fingerprint."""

    def __init__(self, directory: Path, salt: str, warn: Callable[[str], None]):
        self.root = Path(directory)
        self.dir = self.root / f"{xlalint.__version__}-{salt}"
        self._warn = warn
        self.writable = True
        self._warned_corrupt = False
        self._made: set = set()
        self.hits = 0
        self.misses = 0

    @classmethod
    def open(cls, directory: Optional[os.PathLike], settings, warn: Callable[[str], None]) -> Optional["Cache"]:
        """The cache under ``directory`` (default ``<root>/.xlalint_cache``), or None with a warning."""
        directory = Path(directory) if directory is not None else default_cache_dir(settings)
        cache = cls(directory, salt_for(settings), warn)
        try:
            make_cache_dir(cache.dir, cache.root)
        except OSError as e:
            if cache.dir.is_dir() and os.access(cache.dir, os.R_OK | os.X_OK):
                cache.writable = False  # read what is there, write nothing
                if not _read_only(e):
                    warn(f"cache directory {cache.root} is not writable ({e.strerror or e}): using it read-only")
                return cache
            warn(f"cannot use the cache directory {cache.root} ({e.strerror or e}): running without a cache")
            return None
        return cache

    @staticmethod
    def key(data: bytes, codes) -> str:
        h = hashlib.blake2b(data, digest_size=20)
        h.update(b"\0" + ",".join(sorted(codes)).encode())
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / key[2:]

    def get(self, key: str) -> Optional[list]:
        """The stored finding rows for ``key``, or None on a miss (or a corrupt entry)."""
        try:
            with open(self._path(key), "rb") as fh:
                blob = fh.read()
        except (FileNotFoundError, NotADirectoryError):  # a miss; put() reports a damaged shard
            self.misses += 1
            return None
        except OSError as e:
            self._corrupt(f"cannot read cache entry {self._path(key)}: {e.strerror or e}")
            self.misses += 1
            return None
        rows = _decode(blob)
        if rows is None:
            self._corrupt(f"cache entry {self._path(key)} is corrupt")
            self.misses += 1
            return None
        self.hits += 1
        return rows

    def put(self, key: str, rows: list) -> None:
        if self.writable:
            self._write(key, _encode(rows))

    def load(self, key: str, count: bool = True) -> Optional[list]:
        """The stored analyses of a file's contents (one per set of facts it read), or None.
        ``count=False``: a look before a write, not a lookup (no hit or miss counted)."""
        value = None
        try:
            with open(self._path(key), "rb") as fh:
                value = _decode_value(fh.read())
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                value = None
                if count:
                    self._corrupt(f"cache entry {self._path(key)} is corrupt")
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as e:
            if count:
                self._corrupt(f"cannot read cache entry {self._path(key)}: {e.strerror or e}")
        if count:
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
        return value

    @contextlib.contextmanager
    def exclusive(self, name: str):
        """Hold an advisory lock ``name`` against other processes using this cache while doing work they
        would otherwise repeat (flake8's jobs each starting on the same project). A no-op where there are
        no such locks (no ``fcntl``) or the cache is read-only; released when the process dies."""
        fh = None
        if self.writable:
            try:
                import fcntl

                fh = open(self.dir / f".{name}.lock", "ab")  # not an entry: entries live in subdirectories
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            except (ImportError, OSError):
                if fh is not None:
                    fh.close()
                fh = None
        try:
            yield
        finally:
            if fh is not None:
                fh.close()

    def store(self, key: str, value: list) -> None:
        if not self.writable:
            return
        payload = marshal.dumps(value)
        self._write(key, MAGIC2 + zlib.crc32(payload).to_bytes(4, "little") + payload)

    def _write(self, key: str, blob: bytes) -> None:
        target = self._path(key)
        try:
            sub = target.parent
            if sub not in self._made:
                sub.mkdir(parents=True, exist_ok=True)
                self._made.add(sub)
            fd, tmp = tempfile.mkstemp(dir=sub, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(blob)
                os.replace(tmp, target)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as e:
            self.writable = False  # the entries already there are still read
            if not _read_only(e):
                self._warn(f"cannot write to the cache directory {self.root} ({e.strerror or e}): "
                           "using it read-only for this run")

    def _corrupt(self, message: str) -> None:
        if not self._warned_corrupt:
            self._warned_corrupt = True
            self._warn(f"{message}: ignoring it (and any other corrupt entry) and linting again")


def _read_only(e: OSError) -> bool:
    """The cache is read-only by intent (permissions, an immutable or read-only mount), not broken."""
    return e.errno in (errno.EACCES, errno.EPERM, errno.EROFS)


def _encode(rows: list) -> bytes:
    payload = marshal.dumps(tuple(tuple(r) for r in rows))
    return MAGIC + zlib.crc32(payload).to_bytes(4, "little") + payload


# the Finding fields after the path (findings.ROW_FIELDS): ..., fix, headline, cost, edits, applicability,
# fix_title, and a notebook's cell (or None)
_ROW_TYPES = (int, int, str, int, int, str, str, str, str, str, str, tuple, str, str, (int, type(None)))


def _unframe(blob: bytes, magic: bytes):
    """What ``blob`` holds when it starts with ``magic`` and its checksum agrees, else None (a torn write, a
    file of another version)."""
    if len(blob) < 8 or blob[:4] != magic:
        return None
    payload = blob[8:]
    if zlib.crc32(payload).to_bytes(4, "little") != blob[4:8]:
        return None
    try:
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None


def _decode(blob: bytes) -> Optional[list]:
    rows = _unframe(blob, MAGIC)
    if not isinstance(rows, tuple):
        return None
    for r in rows:
        if not isinstance(r, tuple) or len(r) not in (len(_ROW_TYPES) - 1, len(_ROW_TYPES)):
            return None
        if not all(type(v) in t if isinstance(t, tuple) else type(v) is t for v, t in zip(r, _ROW_TYPES)):
            return None
    return list(rows)


def _decode_value(blob: bytes):
    return _unframe(blob, MAGIC2)
