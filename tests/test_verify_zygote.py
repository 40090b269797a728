"""tests/verify_zygote.py, the one torch_xla start-up per worker that the report tests fork their
``--verify`` children from: a forked child reports what a child started as xlalint starts it does, and only
the runner's own children, in the environments the servers were started with, are forked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from tests import verify_zygote
from tests.conftest import ROOT, require_torch_xla

from xlalint.verify import runner

#: a steady-state recompile (the plain run, then the run with IR graph dumps: both servers), findings
#: confirmed at its root-cause lines; and a crash, whose traceback leaves out every frame not the user's
PROGRAMS = [ROOT / "tests" / "fixtures" / "step_varying_slice.py", ROOT / "tests" / "verify_programs" / "raises.py"]


def what_a_test_reads(r) -> dict:
    """Everything of a report but its times (and what is made of them: the cost ranking)."""
    return {
        "status": (r.status, r.exit_code, r.stop_reason, r.error, r.traceback, r.where, r.notes, r.user_files),
        "steps": [(s.index, s.warmup, s.uncached, s.cached, s.graphs, s.transfers, s.scalar_reads, s.fallbacks)
                  for s in r.steps],
        "findings": [(v.finding.path, v.finding.line, v.finding.code, v.status, v.evidence) for v in r.findings],
        "misses": [(m.path, m.line, m.kind, m.message, m.steps, m.of_steps) for m in r.misses],
        "recompiles": [(c.kind, c.steps, c.count, c.cut_path, c.cut_line, c.root_causes, c.note, c.explained_by)
                       for c in r.recompiles],
        "quiet": [(m.path, m.line, m.kind, m.steps) for m in r.transfers_without_cut],
    }


def test_a_forked_child_reports_what_a_started_child_does():
    require_torch_xla()
    from xlalint.verify import collect

    def one(path):
        return what_a_test_reads(collect(str(path), [], max_steps=8, timeout=600))

    with ThreadPoolExecutor(max_workers=2) as pool:
        started = list(pool.map(one, PROGRAMS))
    with verify_zygote.forked_children() as servers:
        before = servers.forked
        forked = [one(p) for p in PROGRAMS]
        assert servers.forked - before == 3  # the recompile's two runs and the crash: none was started
        assert set(servers.servers) == {"plain", "dump"}
    assert started[0]["recompiles"] and any(c[5] for c in started[0]["recompiles"])  # root causes: the dump run
    assert started[1]["status"][4] and "boom" in started[1]["status"][4]
    for path, a, b in zip(PROGRAMS, started, forked):
        for part in a:
            assert a[part] == b[part], (path.name, part, a[part], b[part])


def _call(env=None, executable=None, **change):
    """The runner's Popen call of its child, as run_child makes it (``change``: what differs)."""
    kwargs = dict(stdin=subprocess.DEVNULL, stdout=None, stderr=None, env=env or runner.child_env(None),
                  cwd=os.getcwd(), start_new_session=True, pass_fds=(5, 6))
    kwargs.update(change)
    return [executable or sys.executable, runner.CHILD, "/nowhere/spec.json"], kwargs


def test_only_the_runners_children_are_forked():
    kind = verify_zygote.Zygotes.kind
    assert kind(*_call()) == "plain"
    assert kind(*_call(env=runner.child_env("/tmp/graphs.txt"))) == "dump"
    assert kind(*_call(executable="/usr/bin/python3")) is None  # another interpreter
    assert kind(*_call(start_new_session=False)) is None
    assert kind(*_call(stdin=None)) is None
    args, kwargs = _call()
    assert kind([sys.executable, "-c", "pass", "x"], kwargs) is None  # not the child
    assert kind(args, {**kwargs, "close_fds": False}) is None  # not as run_child starts it


def test_each_environment_has_its_own_server(monkeypatch):
    """A server imported torch_xla in the environment it was started with: a child whose environment
    differs (but for its dump file) gets a server of its own."""

    class Server:
        def __init__(self, env):
            self.given = env
            self.proc = subprocess.Popen([sys.executable, "-c", "pass"])  # only polled
            self.proc.wait()
            self.proc.poll = lambda: None

        def close(self):
            self.closed = True

    monkeypatch.setattr(verify_zygote, "Zygote", Server)
    zs = verify_zygote.Zygotes()
    plain = zs.server("plain", runner.child_env(None))
    assert plain.given == {k: v for k, v in runner.child_env(None).items() if k != "PYTEST_CURRENT_TEST"}
    assert zs.server("plain", runner.child_env(None)) is plain
    dump = zs.server("dump", runner.child_env("/tmp/a/graphs.txt"))
    assert dump is not plain and "XLA_SAVE_TENSORS_FILE" not in dump.given and dump.given["XLA_IR_DEBUG"] == "1"
    assert zs.server("dump", runner.child_env("/tmp/b/graphs.txt")) is dump  # another run's dump file
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/x.py::another (call)")  # set by pytest for each test
    assert zs.server("plain", runner.child_env(None)) is plain
    monkeypatch.setenv("XLALINT_TEST_ONLY", "1")
    other = zs.server("plain", runner.child_env(None))
    assert other is not plain and other.given["XLALINT_TEST_ONLY"] == "1"
    assert zs.restarted == [["XLALINT_TEST_ONLY"]] and zs.retired == [plain]
    zs.close()
    assert plain.closed and other.closed and dump.closed


def test_fast_compile_keeps_the_callers_flags_last():
    env = verify_zygote.fast_compile({"XLA_FLAGS": "--xla_backend_optimization_level=2", "A": "b"})
    assert env["A"] == "b"
    assert env["XLA_FLAGS"].split() == [*verify_zygote.FAST_COMPILE.split(), "--xla_backend_optimization_level=2"]
    assert verify_zygote.fast_compile({})["XLA_FLAGS"] == verify_zygote.FAST_COMPILE


def test_a_started_program_is_not_forked(tmp_path):
    """``forked_children(started=...)``: that program's child is started by subprocess, as xlalint does."""
    target = ROOT / "tests" / "verify_programs" / "compile_forever.py"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"target_file": str(target)}))
    args, kwargs = _call()
    args[2] = str(spec)
    zs = verify_zygote.Zygotes()  # no server is started to decide
    assert zs.route(args, kwargs) == "plain"
    assert zs.route(args, kwargs, frozenset([str(target)])) is None
    assert zs.route(args, kwargs, frozenset([str(target.with_name("hangs.py"))])) == "plain"
