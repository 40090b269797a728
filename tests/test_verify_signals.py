"""Terminating ``xlalint --verify`` ends the program it runs (issue #18 item 1).

Each test starts a real run of tests/verify_programs/long_run.py (it trains forever and starts a helper
process in a session of its own), sends one signal to xlalint, and checks the exit status, the report of
what was measured so far, and that neither the program nor its helper is left. Under CI=true a missing
torch_xla fails these tests instead of skipping them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAM = os.path.join(HERE, "verify_programs", "long_run.py")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][0] != "Z"  # a zombie has ended
    except OSError:
        return False


def _session_members(sid: int) -> list:
    out = []
    for n in os.listdir("/proc"):
        if n.isdigit():
            try:
                with open(f"/proc/{n}/stat") as fh:
                    fields = fh.read().rsplit(") ", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                out.append(int(n))
    return out


def _start(tmp_path, cli: bool):
    pidfile = str(tmp_path / "pids")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "plugins")]), PJRT_DEVICE="CPU")
    if cli:
        cmd = [sys.executable, "-m", "xlalint", "--verify", PROGRAM]
    else:
        cmd = [sys.executable, "-m", "xlalint.verify", PROGRAM]
    cmd += ["--max-steps", "100000", "--timeout", "300", "--", pidfile]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(pidfile):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the program never reached step 3: {out}\n{err}")
        time.sleep(0.1)
    child, helper = (int(x) for x in open(pidfile).read().split())
    return proc, child, helper


def _gone(*pids, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids) and not any(_session_members(p) for p in pids[:1]):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize(
    "signame, code, cli",
    [("SIGTERM", 143, True), ("SIGINT", 130, False), ("SIGHUP", 129, False)],
)
def test_signal_ends_the_program_and_reports_what_was_measured(xla, tmp_path, signame, code, cli):
    proc, child, helper = _start(tmp_path, cli)
    try:
        assert _alive(child) and _alive(helper)
        time.sleep(0.5)
        proc.send_signal(getattr(signal, signame))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, out + err
    assert _gone(child, helper), f"left running after {signame}: {[p for p in (child, helper) if _alive(p)]}"
    head = out.splitlines()[0]
    assert f"(interrupted by {signame} at " in head and "long_run.py:" in head, head
    assert "raised" not in head
    steps = int(head.split(": ", 1)[1].split()[0])
    assert steps >= 4  # the pid file is written at step 3
    assert f"interrupted by {signame} after {steps} steps" in out
    table = out.split("Per step:", 1)[1].splitlines()[1:steps + 1]
    assert [int(row.split()[0]) for row in table] == list(range(steps))  # every measured step is shown


def test_program_dies_when_xlalint_is_killed(xla, tmp_path):
    """SIGKILL cannot be caught: the child's watchdog sees its pipe from xlalint close and ends the session."""
    proc, child, helper = _start(tmp_path, cli=False)
    try:
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _gone(child, helper), f"orphaned after SIGKILL: {[p for p in (child, helper) if _alive(p)]}"
