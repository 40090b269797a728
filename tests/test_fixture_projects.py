"""Fixture projects (tests/fixtures/projects/*/): multi-module training code, marks in every module.

Live (torch_xla, CPU device): every ``# expect:`` mark, in whichever module, is a real per-step cost.
The program runs under ``xlalint.verify.collect`` with the marks themselves as the findings, so this
measures the fixture, not the analysis: each mark must be CONFIRMED by the counters, no unmarked line
may cut the graph or fall back on most steps, and ``lookalikes`` must be clean at runtime. What the
static analysis finds in these projects (whole, one file at a time, jobs, cache) is tests/test_project.py.

Under ``CI=true`` a missing torch_xla is a failure, never a skip.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import require_torch_xla

from xlalint.findings import Finding

ROOT = Path(__file__).resolve().parent.parent
PROJECTS_DIR = ROOT / "tests" / "fixtures" / "projects"
PROJECTS = sorted(p for p in PROJECTS_DIR.iterdir() if (p / "pyproject.toml").is_file())
MARK = re.compile(r"#\s*expect:\s*(?P<codes>XLA\d+(?:\s*,\s*XLA\d+)*)")
# Projects whose marks sit outside train.py: single-file analysis cannot find them (issue #12).
NEEDS_PROJECT_ANALYSIS = {"classifier_pkg", "trainer_callbacks", "seq2seq_returns", "padded_batches", "speech_helpers",
                          "decode_eval_hooks", "logging_sinks", "kv_decode",
                          "script_callbacks", "helper_defaults", "cuda_side_scripts", "speculative_rounds"}


# Projects whose marks --verify measures but cannot attribute to their lines yet, with the reason. The
# test fails if one is CONFIRMED (then remove it here), and checks that the cost is there: the marked
# lines ran after warm-up and UncachedCompile rose on every step after warm-up.
UNATTRIBUTED = {
    "chat_cache": "a tensor the decode loop grows (the cache it gives back to the model, the history a helper "
                  "returns grown) is a new input shape on every token, whose root cause is the model's first use of "
                  "that input: --verify ties it to a line by the XLA009 growth message, which the marks this test "
                  "runs with do not carry (with xlalint's own findings, `xlalint --verify train.py` confirms both: "
                  "2 confirmed, 0 missed; tests/test_verify_fixtures.py does so for kv_cache_given_back.py)",
    "kv_decode": "a Python int baked into a slice offset or an index changes no shape and no op of the IR text "
                 "dump (torch_xla does not print the offsets), so the diff of two graphs names no line; the "
                 "compiles per position are counted against the fixed twins by tests/test_decode_positions.py",
}


# Projects whose marks of some codes --verify measures but cannot attribute to their lines, with the reason:
# those marks must run and stay NOT CONFIRMED while every step after warm-up compiles (the others are CONFIRMED).
UNATTRIBUTED_CODES = {
    "speculative_rounds": ({"XLA009"}, "the round's varying prefix length is baked into slice offsets and indices, "
                                       "which the IR text dump does not print, so the diff of two graphs names "
                                       "no line; the compiles are there, one set per round"),
}


# (project, file, line) -> why a real runtime cost there is deliberately not a finding
KNOWN_MISSES = {
    ("chat_cache", "chat/model.py", 29): "the new input shape of every token (the cache given back, grown by "
                                         "`torch.cat` in forward): --verify explains it by xlalint's XLA009 growth "
                                         "findings, which the marks this test runs it with do not carry",
    ("speculative_rounds", "train.py", 51): "the round's barrier compiles the graph of a prefix one round longer (an "
                                            "input first used in torch's embedding): --verify explains it by "
                                            "xlalint's XLA009 growth finding at the `torch.cat`, which the marks this "
                                            "test runs with do not carry (`xlalint --verify train.py`: explained by "
                                            "XLA009, 0 missed)",
    ("logging_sinks", "train.py", 60): "the evaluation's result read once, right after evaluate() in the periodic "
                                       "block: a cut every `log_every` steps that xlalint leaves silent by design "
                                       "(issue 32: the read the fix asks for, once per evaluation)",
    ("cuda_side_scripts", "train.py", 29): "the evaluation's score read once, after compute_features(...) ran its "
                                           "loop of sampling runs, every `eval_every` steps: silent by design, as "
                                           "above",
}


def _files(project: Path) -> list:
    return sorted(p for p in project.rglob("*.py") if "__pycache__" not in p.parts)


def _marks(project: Path) -> set:
    """{(path relative to the project, line, code)}"""
    out = set()
    for path in _files(project):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = MARK.search(line)
            if m:
                rel = path.relative_to(project).as_posix()
                out |= {(rel, i, c.strip()) for c in m.group("codes").split(",")}
    return out


def _rel(project: Path, path: str) -> str:
    return Path(os.path.realpath(path)).relative_to(project.resolve()).as_posix()


def test_projects_exist_and_have_marks_outside_train_py():
    names = {p.name for p in PROJECTS}
    assert {"classifier_pkg", "trainer_callbacks", "seq2seq_returns", "lookalikes"} <= names
    for p in PROJECTS:
        assert (p / "train.py").is_file(), p
        if p.name in NEEDS_PROJECT_ANALYSIS:
            assert any(rel != "train.py" for rel, _, _ in _marks(p)), p.name
    assert not _marks(PROJECTS_DIR / "lookalikes")


# ---- live ---------------------------------------------------------------------------------------


def _marks_as_findings(paths: list) -> list:
    out = []
    for path in paths:
        for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            m = MARK.search(line)
            if m:
                for code in m.group("codes").split(","):
                    out.append(Finding(path, i, 1, code.strip(), i, len(line) + 1, "mark", "marked in the fixture"))
    return out


@pytest.fixture(scope="module")
def live_reports(forked_verify_children):
    require_torch_xla()
    from xlalint.verify import collect

    def one(project: Path):
        return project, collect(str(project / "train.py"), [], max_steps=8, timeout=600,
                                findings_provider=_marks_as_findings)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, PROJECTS))


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_live_every_mark_is_a_per_step_cost(live_reports, project):
    report = live_reports[project]
    assert report.status == "ok", f"{project.name} did not run: {report.error}\n{report.traceback or ''}"
    ran = {_rel(project, p) for p in report.user_files}
    assert {rel for rel, _, _ in _marks(project)} <= ran
    verdicts = {(_rel(project, v.finding.path), v.finding.line, v.finding.code): v for v in report.findings}
    assert set(verdicts) == _marks(project)
    if project.name in UNATTRIBUTED:
        steady = [s.uncached for s in report.steps if not s.warmup]
        assert steady and all(n >= 1 for n in steady), steady
        assert all(v.numbers["runs"] > 0 and v.status == "NOT CONFIRMED" for v in verdicts.values()), \
            [(k, v.status) for k, v in verdicts.items()]
        verdicts = {}
    if project.name in UNATTRIBUTED_CODES:
        codes, _why = UNATTRIBUTED_CODES[project.name]
        steady = [s.uncached for s in report.steps if not s.warmup]
        assert steady and all(n >= 1 for n in steady), steady
        unattributed = {k: v for k, v in verdicts.items() if k[2] in codes}
        assert unattributed and all(v.numbers["runs"] > 0 and v.status == "NOT CONFIRMED" for v in unattributed.values()), \
            [(k, v.status) for k, v in unattributed.items()]
        verdicts = {k: v for k, v in verdicts.items() if k[2] not in codes}
    problems = [f"{k}: {v.status}: {v.evidence}" for k, v in sorted(verdicts.items()) if v.status != "CONFIRMED"]
    problems += [f"{_rel(project, m.path)}:{m.line}: MISSED {m.kind}: {m.message}" for m in report.misses
                 if (project.name, _rel(project, m.path), m.line) not in KNOWN_MISSES]
    missed = {(project.name, _rel(project, m.path), m.line) for m in report.misses}
    problems += [f"{rel}:{line}: the known miss ({why}) no longer happens: remove it from KNOWN_MISSES"
                 for (name, rel, line), why in KNOWN_MISSES.items() if name == project.name and (name, rel, line) not in missed]
    assert not problems, "\n".join(problems)


def test_live_lookalikes_clean(live_reports):
    report = live_reports[PROJECTS_DIR / "lookalikes"]
    assert report.status == "ok", report.error
    steady = [s for s in report.steps if not s.warmup]
    assert len(steady) >= 4
    assert all(s.fallbacks == 0 for s in steady)
    assert all(s.uncached == 0 for s in steady), [s.uncached for s in steady]
    assert not report.misses
