"""The findings cache: hits, keys, and a corrupt or unwritable cache degrading to no cache with a warning."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from xlalint import cli
from xlalint.run import project as run_project
from xlalint.run import store
from xlalint.run.project import lint_files
from xlalint.run.cache import MAGIC, Cache, salt_for
from xlalint.config import build_settings

SLOW = (
    "import torch\n"
    "import torch_xla.core.xla_model as xm\n"
    "def train(model, loader, opt):\n"
    "    for x, y in loader:\n"
    "        loss = model(x)\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        print(loss.item())\n"
    "        xm.mark_step()\n"
)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "a.py").write_text(SLOW)
    (tmp_path / "b.py").write_text(SLOW.replace("loss.item()", "float(loss)"))
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def _files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.glob("*.py"))


def _entries(cache: Cache) -> list[Path]:
    return [p for p in cache.dir.rglob("*") if p.is_file() and not p.name.startswith(".")]  # .tmp-*, .*.lock


def test_roundtrip_and_key():
    assert Cache.key(b"x", {"XLA001"}) == Cache.key(b"x", frozenset({"XLA001"}))
    assert Cache.key(b"x", {"XLA001"}) != Cache.key(b"y", {"XLA001"})
    assert Cache.key(b"x", {"XLA001"}) != Cache.key(b"x", {"XLA001", "XLA002"})


def test_put_get(tmp_path):
    c = Cache.open(tmp_path / "c", None, pytest.fail)
    row = (3, 5, "XLA001", 3, 9, "host-read", "msg", "warning", "fix", "head", "cost", ((3, 5, 3, 9, "x"),), "unsafe", "title")
    c.put("ab" + "0" * 38, [row])
    assert c.get("ab" + "0" * 38) == [row]
    assert c.get("cd" + "0" * 38) is None
    assert (tmp_path / "c" / "CACHEDIR.TAG").is_file()
    assert (tmp_path / "c" / ".gitignore").read_text().strip().endswith("*")


def test_settings_change_the_salt(tmp_path):
    a = build_settings(None)
    b = build_settings(None, ignore=["XLA001"])
    assert salt_for(a) != salt_for(b)
    assert salt_for(a) == salt_for(build_settings(None))


def test_hits_and_renames(project, tmp_path):
    settings = build_settings(None)
    files = _files(project)
    first = lint_files(files, settings, jobs=1, cache=Cache.open(tmp_path / "c", settings, pytest.fail))
    assert first
    warm = Cache.open(tmp_path / "c", settings, pytest.fail)
    assert lint_files(files, settings, jobs=1, cache=warm) == first
    assert warm.hits == len(files) and warm.misses == 0
    # a renamed file is another module (its name is in its summary, and relative imports depend on
    # it): it alone is analysed again, and reports its new path
    (project / "a.py").rename(project / "renamed.py")
    again = Cache.open(tmp_path / "c", settings, pytest.fail)
    out = lint_files(_files(project), settings, jobs=1, cache=again)
    assert again.misses == 1 and again.hits == len(files) - 1
    assert {f.path for f in out} == {str(project / "b.py"), str(project / "renamed.py")}


def test_changed_file_misses(project, tmp_path):
    settings = build_settings(None)
    lint_files(_files(project), settings, jobs=1, cache=Cache.open(tmp_path / "c", settings, pytest.fail))
    (project / "a.py").write_text(SLOW.replace("print(loss.item())", "pass"))
    c = Cache.open(tmp_path / "c", settings, pytest.fail)
    out = lint_files(_files(project), settings, jobs=1, cache=c)
    assert c.misses == 1
    assert not [f for f in out if f.path.endswith("a.py")]


def test_a_file_rewritten_with_its_old_timestamp_is_read_again(project, tmp_path, monkeypatch):
    # the project's state is remembered per file by its stat, in one process (flake8 asks for every file
    # in turn): a rewrite of the same size that puts the old modification time back (`cp -p`, a tool
    # restoring timestamps) still changes the inode's change time, so the file is read again
    monkeypatch.setattr(store, "RACY_NS", 0)  # every stat trusted at once (by default: after 3 s)
    settings = build_settings(None)
    a = project / "a.py"
    old = (1_600_000_000, 1_600_000_000)
    os.utime(a, old)
    first = lint_files(_files(project), settings, jobs=1, cache=Cache.open(tmp_path / "c", settings, pytest.fail))
    assert [f.code for f in first if f.path.endswith("a.py")] == ["XLA001"]
    assert any(k[0] == str(a) for k in store._STATE_PARTS)  # remembered
    time.sleep(0.05)  # past the kernel's timestamp tick
    quiet = SLOW.replace("print(loss.item())", "pass".ljust(len("print(loss.item())")))
    assert len(quiet) == len(SLOW)
    a.write_text(quiet)
    os.utime(a, old)
    again = lint_files(_files(project), settings, jobs=1, cache=Cache.open(tmp_path / "c", settings, pytest.fail))
    assert not [f for f in again if f.path.endswith("a.py")]


@pytest.mark.parametrize("damage", [
    lambda b: b"garbage",
    lambda b: b[:-3],  # truncated
    lambda b: b[:8] + bytes([b[8] ^ 0xFF]) + b[9:],  # a flipped bit: crc mismatch
    lambda b: MAGIC + b"\0\0\0\0",
    lambda b: b"",
])
@pytest.mark.parametrize("jobs", [1, 2])
def test_corrupt_entries_are_relinted_with_a_warning(project, tmp_path, damage, jobs):
    settings = build_settings(None)
    files = _files(project)
    expected = lint_files(files, settings, jobs=1, cache=None)
    cold = Cache.open(tmp_path / "c", settings, pytest.fail)
    lint_files(files, settings, jobs=1, cache=cold)
    entries = _entries(cold)
    # each file's analysis and its declarations; the whole project's analyses and its decided findings
    assert len(entries) == 2 * len(files) + 2
    for e in entries:
        e.write_bytes(damage(e.read_bytes()))
    warnings = []
    c = Cache.open(tmp_path / "c", settings, warnings.append)
    assert lint_files(files, settings, jobs=jobs, cache=c) == expected
    assert len(warnings) == 1 and "corrupt" in warnings[0]
    # the entries were rewritten: the next run hits
    healed = Cache.open(tmp_path / "c", settings, pytest.fail)
    assert lint_files(files, settings, jobs=1, cache=healed) == expected
    assert healed.hits == len(files)


def test_cli_corrupt_cache_warns_on_stderr(project, tmp_path, capsys):
    args = ["--isolated", "--cache-dir", str(tmp_path / "c"), "-q", str(project)]
    rc = cli.main(args)
    clean_out = capsys.readouterr()
    assert rc == 1 and "warning" not in clean_out.err
    for e in (tmp_path / "c").rglob("*"):
        if e.is_file() and (len(e.name) == 38 or e.name.endswith(("p", "pf"))):  # a file's entry, the project's
            e.write_bytes(b"\x00not a cache entry")
    assert cli.main(args) == 1
    out = capsys.readouterr()
    assert out.out == clean_out.out
    assert "xlalint: warning:" in out.err and "corrupt" in out.err


def test_cache_dir_that_is_a_file_degrades_to_no_cache(project, tmp_path, capsys):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    expected_rc = cli.main(["--isolated", "--no-cache", "-q", str(project)])
    expected = capsys.readouterr()
    assert cli.main(["--isolated", "--cache-dir", str(blocker), "-q", str(project)]) == expected_rc
    out = capsys.readouterr()
    assert out.out == expected.out
    assert "xlalint: warning: cannot use the cache directory" in out.err
    assert out.err.count("warning") == 1
    assert blocker.read_text() == ""


@pytest.mark.parametrize("jobs", [1, 2])
def test_unwritable_entries_degrade_with_one_warning(project, tmp_path, jobs):
    settings = build_settings(None)
    files = _files(project) * 3  # enough files for the pool
    expected = lint_files(files, settings, jobs=1, cache=None)
    warnings = []
    c = Cache.open(tmp_path / "c", settings, warnings.append)
    # every shard directory the entries need is taken by a file: each write fails
    for shard in range(256):
        (c.dir / f"{shard:02x}").write_text("")
    assert lint_files(files, settings, jobs=jobs, cache=c) == expected
    assert len(warnings) == 1 and "cannot write" in warnings[0]
    assert not c.writable


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_cache_dir(project, tmp_path):
    settings = build_settings(None)
    files = _files(project)
    lint_files(files, settings, jobs=1, cache=Cache.open(tmp_path / "c", settings, pytest.fail))
    os.chmod(tmp_path / "c", 0o555)
    for d in (tmp_path / "c").iterdir():
        if d.is_dir():
            os.chmod(d, 0o555)
    try:
        (project / "new.py").write_text(SLOW)
        warnings = []
        c = Cache.open(tmp_path / "c", settings, warnings.append)
        out = lint_files(_files(project), settings, jobs=1, cache=c)
        assert out == lint_files(_files(project), settings, jobs=1, cache=None)
        assert warnings == [] and c.hits == len(files) and not c.writable  # used read-only, silently
    finally:
        for d in (tmp_path / "c").rglob("*"):
            if d.is_dir():
                os.chmod(d, 0o755)
        os.chmod(tmp_path / "c", 0o755)


# A read-only cache (a cache directory shared by CI, a read-only mount) is used read-only: its entries
# are read, nothing is written, nothing is printed (#18). The tests run as root, which ignores permission
# bits, so the cache is made read-only in two ways that hold for root too: the immutable attribute
# (chattr +i, what the kernel refuses with EPERM), and a read-only file system (EROFS) at the one call
# that creates an entry.
def _snapshot(root: Path) -> dict:
    return {p: p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))}


def _chattr(flag: str, root: Path) -> bool:
    import subprocess

    try:
        r = subprocess.run(["chattr", "-R", flag, str(root)], capture_output=True, text=True)
    except FileNotFoundError:
        return False
    return r.returncode == 0


@pytest.mark.skipif(os.name != "posix", reason="chattr is Linux")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_immutable_cache_is_used_read_only_by_the_cli(project, tmp_path, capfd, jobs):
    cache = tmp_path / "c"
    args = ["--isolated", "--cache-dir", str(cache), "-q", "-j", jobs, str(project)]
    assert cli.main(args) == 1
    cold = capfd.readouterr()
    assert cold.err == ""
    for i in range(6):  # new files: misses that would be written, enough for the pool
        (project / f"new{i}.py").write_text(SLOW.replace("loss.item()", f"loss.item() + {i}"))
    expected_rc = cli.main(["--isolated", "--no-cache", "-q", str(project)])
    expected = capfd.readouterr()
    if not _chattr("+i", cache):
        pytest.skip("this file system has no immutable attribute")
    try:
        before = _snapshot(cache)
        for _ in range(2):
            assert cli.main(args) == expected_rc
            out = capfd.readouterr()
            assert out.out == expected.out
            assert out.err == ""  # no warning, on no run
        assert _snapshot(cache) == before  # nothing written
    finally:
        _chattr("-i", cache)


@pytest.mark.parametrize("jobs", [1, 2])
def test_read_only_file_system_cache_reads_hits_and_writes_nothing(project, tmp_path, monkeypatch, jobs):
    import errno
    import tempfile

    from xlalint.run import cache as cache_mod

    settings = build_settings(None)
    warm = Cache.open(tmp_path / "c", settings, pytest.fail)
    lint_files(_files(project), settings, jobs=1, cache=warm)
    for i in range(6):
        (project / f"new{i}.py").write_text(SLOW.replace("loss.item()", f"loss.item() + {i}"))
    files = _files(project)
    expected = lint_files(files, settings, jobs=1, cache=None)
    before = _snapshot(tmp_path / "c")
    attempts = []

    def read_only_fs(*args, **kwargs):
        attempts.append(args)
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if str(self).startswith(str(tmp_path / "c")) and not self.is_dir():
            read_only_fs(self)
        return real_mkdir(self, *args, **kwargs)

    # the calls that create a shard directory and an entry
    monkeypatch.setattr(tempfile, "mkstemp", read_only_fs)
    monkeypatch.setattr(Path, "mkdir", mkdir)
    assert cache_mod.tempfile.mkstemp is read_only_fs
    warnings = []
    c = Cache.open(tmp_path / "c", settings, warnings.append)
    assert lint_files(files, settings, jobs=jobs, cache=c) == expected
    assert c.hits == 3 and c.misses == 6  # the old entries were read
    assert len(attempts) == 1 and not c.writable  # one write tried, then none
    assert warnings == []
    assert _snapshot(tmp_path / "c") == before


def test_a_full_disk_still_warns_once(project, tmp_path, monkeypatch):
    # not read-only by intent: a write that fails for another reason is worth one line
    import errno
    import tempfile

    settings = build_settings(None)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "mkstemp", full)
    warnings = []
    c = Cache.open(tmp_path / "c", settings, warnings.append)
    files = _files(project) * 2
    assert lint_files(files, settings, jobs=1, cache=c) == lint_files(files, settings, jobs=1, cache=None)
    assert len(warnings) == 1 and "No space left" in warnings[0] and "read-only" in warnings[0]


def test_a_project_is_analysed_by_one_process_at_a_time(project, tmp_path, monkeypatch):
    # flake8's jobs each start on a file of the same project: the second waits for the first's analysis
    # and reads it back instead of analysing the project again (with N jobs, N times the memory)
    import subprocess
    import sys

    cache_dir, signal = tmp_path / "c", tmp_path / "deciding"
    child = subprocess.Popen([sys.executable, "-c", f"""
import pathlib, time, sys
from xlalint.analysis import decision
from xlalint.run.project import lint_files
from xlalint.run.cache import Cache
from xlalint.config import build_settings
real = decision.decide
def slow(*a, **k):  # inside the analysis, before its results are stored
    pathlib.Path({str(signal)!r}).write_text("1")
    time.sleep(2)
    return real(*a, **k)
decision.decide = slow
s = build_settings(None)
lint_files({_files(project)!r}, s, jobs=1, cache=Cache.open({str(cache_dir)!r}, s, print))
"""])
    try:
        deadline = time.time() + 60
        while not signal.exists() and child.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert signal.exists(), "the other process never got to its analysis"
        analysed = []
        real = run_project.analyse_project
        monkeypatch.setattr(run_project, "analyse_project", lambda *a, **k: analysed.append(1) or real(*a, **k))
        settings = build_settings(None)
        out = lint_files(_files(project), settings, jobs=1, cache=Cache.open(cache_dir, settings, pytest.fail))
    finally:
        assert child.wait(timeout=60) == 0
    assert analysed == [] and out == lint_files(_files(project), settings, jobs=1, cache=None)
