"""The same findings whichever way the files are linted: one job, a process pool, a warm cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from xlalint import cli
from xlalint.run.pool import MIN_FILES_FOR_POOL
from xlalint.run.project import lint_files
from xlalint.sources.discover import iter_python_files
from xlalint.run.cache import Cache
from xlalint.config import build_settings

REPO = Path(__file__).resolve().parent.parent
TREES = [str(REPO / "tests" / "fixtures"), str(REPO / "examples")]


@pytest.fixture(scope="module")
def settings():
    return build_settings(None)  # isolated: the repo's config excludes the fixtures


@pytest.fixture(scope="module")
def files(settings):
    found = list(iter_python_files([t for t in TREES if os.path.isdir(t)], settings))
    assert len(found) >= MIN_FILES_FOR_POOL * 2, "too few files for the pool to be used"
    return found


@pytest.fixture(scope="module")
def serial(files, settings):
    out = lint_files(files, settings, jobs=1, cache=None)
    assert out, "the fixtures hold findings: an empty list would make this test vacuous"
    return out


def test_pool_matches_one_job(files, settings, serial):
    assert lint_files(files, settings, jobs=2, cache=None) == serial


def test_warm_cache_matches_one_job(files, settings, serial, tmp_path):
    warnings = []
    cold = Cache.open(tmp_path, settings, warnings.append)
    assert lint_files(files, settings, jobs=2, cache=cold) == serial

    for jobs in (1, 2):
        warm = Cache.open(tmp_path, settings, warnings.append)
        assert lint_files(files, settings, jobs=jobs, cache=warm) == serial
        assert warm.misses == 0 and warm.hits >= len(files)  # nothing parsed; a file may be asked per round
    assert warnings == []


def test_one_job_cache_matches(files, settings, serial, tmp_path):
    cold = Cache.open(tmp_path, settings, print)
    assert lint_files(files, settings, jobs=1, cache=cold) == serial
    warm = Cache.open(tmp_path, settings, print)
    assert lint_files(files, settings, jobs=2, cache=warm) == serial
    assert warm.misses == 0 and warm.hits >= len(files)


def _cli_json(args, capsys) -> list:
    rc = cli.main(["--isolated", "--format", "json", *args, *[t for t in TREES if os.path.isdir(t)]])
    captured = capsys.readouterr()
    assert rc == 1, captured.err
    assert "warning" not in captured.err
    return json.loads(captured.out)


def test_cli_jobs_and_cache(capsys, tmp_path):
    one = _cli_json(["-j", "1", "--no-cache"], capsys)
    two = _cli_json(["-j", "2", "--no-cache"], capsys)
    cold = _cli_json(["--cache-dir", str(tmp_path / "c")], capsys)
    warm = _cli_json(["--cache-dir", str(tmp_path / "c")], capsys)
    assert one == two == cold == warm
    assert one


def test_no_cache_writes_nothing(tmp_path, capsys, monkeypatch):
    src = tmp_path / "train.py"
    src.write_text("import torch\nfor x in loader:\n    loss = model(x)\n    loss.backward()\n    print(loss.item())\n")
    monkeypatch.chdir(tmp_path)
    cli.main(["--isolated", "--no-cache", "train.py"])
    assert not (tmp_path / ".xlalint_cache").exists()
    cli.main(["--isolated", "train.py"])
    assert (tmp_path / ".xlalint_cache" / "CACHEDIR.TAG").is_file()
    capsys.readouterr()


def test_negative_jobs_is_a_usage_error(capsys):
    assert cli.main(["--isolated", "-j", "-1", TREES[0]]) == 2
    assert "--jobs" in capsys.readouterr().err
