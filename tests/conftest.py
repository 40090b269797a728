"""Shared helpers: run the real console script in a subprocess, write small projects to tmp_path."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The fixtures are programs to lint, some of them unit tests of their own projects: never collected here
collect_ignore_glob = ["fixtures/*"]
_SCRIPT = Path(sys.executable).parent / "xlalint"

# One host read per step: the smallest file with exactly one XLA001 finding (line 4, column 9).
HOST_READ = (
    "import torch\n"
    "for x in loader:\n"
    "    loss = model(x).sum()\n"
    "    v = loss.item()\n"
)
CLEAN = "import torch\nx = torch.zeros(3)\n"


def run_xlalint(*args, cwd=None, input=None, env=None, timeout=60) -> subprocess.CompletedProcess:
    """Run ``xlalint ARGS`` as users do; ``input`` (str or bytes) is its standard input.

    stdout and stderr are always returned as str.
    """
    cmd = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "xlalint"]
    e = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    e.update(env or {})
    r = subprocess.run(
        cmd + [str(a) for a in args], cwd=cwd, input=input.encode() if isinstance(input, str) else input,
        capture_output=True, env=e, timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL,
    )
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


def assert_no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    assert r.returncode >= 0, f"killed by signal {-r.returncode}: {r.stderr}"


def write(root: Path, files: dict) -> Path:
    """Create ``{relative path: text or bytes}`` under ``root``; return ``root``."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return root


_FULL_HEAD = re.compile(r"^(?P<code>[A-Z]+[0-9]+) ")
_FULL_PLACE = re.compile(r"^ +--> (?P<place>.+:[0-9]+:[0-9]+)$")


def finding_lines(stdout: str) -> list[str]:
    """``path:line:col: CODE`` of each finding, from the concise format (one line each) or the full
    one (``CODE headline`` then `` --> path:line:col``)."""
    out = []
    code = None
    for line in stdout.splitlines():
        head = _FULL_HEAD.match(line)
        if head:
            code = head.group("code")
            continue
        place = _FULL_PLACE.match(line)
        if place and code:
            out.append(f"{place.group('place')}: {code}")
            code = None
            continue
        parts = line.split(": ", 1)
        if len(parts) == 2 and parts[0].count(":") == 2 and not line.startswith(" "):
            out.append(f"{parts[0]}: {parts[1].split(' ', 1)[0]}")
    return out


# The files that take longest, longest first: test_readme.py (one test of pip installs and README commands
# in order: ~80 CPU seconds, on one core, and waiting for pip), the verify fixtures (~180 CPU seconds, two
# children at a time), then 10-90 CPU seconds each. Collected first, they start first: under `make test`
# (pytest-xdist, --dist loadfile --no-loadscope-reorder) the two workers begin with the two longest, and the
# short files fill in around the rest instead of leaving one worker alone at the end.
LONGEST_FIRST = ("test_readme.py", "test_verify_fixtures.py", "test_fixture_projects.py", "test_verify.py",
                 "test_fix.py", "test_verify_zygote.py", "test_fallback_table.py", "test_verify_signals.py",
                 "test_decode_positions.py", "test_precommit.py", "test_speed_consistency.py", "test_incremental.py",
                 "test_bad_input.py", "test_cli.py", "test_conventions.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the others keep their order


@pytest.fixture
def xlalint_cli():
    return run_xlalint


# ---------------------------------------------------------------------------------------- torch_xla
HAVE_XLA = __import__("importlib.util").util.find_spec("torch_xla") is not None


def require_torch_xla() -> None:
    """For a test that runs torch_xla: skip locally without it, fail under CI=true (make test installs
    the verify extra, and --verify must be tested in CI)."""
    if not HAVE_XLA:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("torch_xla is not installed, and CI=true: --verify must be tested in CI")
        pytest.skip("torch_xla is not installed (run `make test`)")


@pytest.fixture
def xla():
    """Marks a test that runs torch_xla (``require_torch_xla``)."""
    require_torch_xla()


@pytest.fixture(scope="module")
def forked_verify_children():
    """For a module whose tests are about ``--verify``'s report, not its child process: the runner's
    children are forked from one torch_xla start-up per worker (tests/verify_zygote.py) instead of each
    importing torch and torch_xla (about 5 of a small program's 7 CPU seconds). Without torch_xla, nothing
    changes: the tests' own ``require_torch_xla`` decides."""
    if not HAVE_XLA:
        yield None
        return
    from tests import verify_zygote

    with verify_zygote.forked_children() as servers:
        yield servers


def pytest_sessionfinish(session, exitstatus):
    zygote = sys.modules.get("tests.verify_zygote")
    if zygote is not None:
        zygote.stop()
