#!/usr/bin/env python3
"""Record xlalint's output on fixed trees, and compare a later build's output with the record.

A change that must not change behaviour (a refactoring) is checked with it:

    python scripts/compare_output.py record /tmp/before     # on the old code
    ... change the code ...
    python scripts/compare_output.py compare /tmp/before    # on the new code: exit 1 on any difference

What it runs, each with ``--isolated --no-cache --select ALL`` (every rule, off-by-default ones too):

* ``torch``: the installed ``torch`` and ``torch_xla`` packages, linted whole as one project (JSON);
* ``fixtures``: ``tests/fixtures`` (single-file fixtures, notebooks and fixture projects) linted whole
  (JSON), and each fixture project's files linted one at a time (JSON, per file);
* ``programs``: ``tests/verify_programs``, ``bench/programs`` and ``examples`` (JSON);
* ``fixes``: the unified diff of every fix, safe and unsafe (``--diff --unsafe-fixes``), on the fixtures
  and the examples.

``--only NAME[,NAME]`` runs some of these (``torch`` takes two to three minutes on two cores). Every
output is written as it is, so ``diff -r`` of two records shows any difference in full.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = ["--isolated", "--no-cache", "--select", "ALL", "-q"]


def _xlalint(args: list, cwd: Path = ROOT) -> str:
    cmd = [sys.executable, "-m", "xlalint", *BASE, *args]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "plugins")]), NO_COLOR="1")
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"xlalint failed ({r.returncode}): {' '.join(args)}\n{r.stderr}")
    return r.stdout


def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{name} is not installed (make test installs it)")
    return list(spec.submodule_search_locations)[0]


def _canonical_json(text: str) -> str:
    return json.dumps(json.loads(text or "[]"), indent=1, sort_keys=True) + "\n"


def _runs(only: set) -> dict:
    out = {}
    if not only or "fixtures" in only:
        out["fixtures.json"] = lambda: _canonical_json(_xlalint(["--output-format", "json", "tests/fixtures"]))
        projects = sorted((ROOT / "tests/fixtures/projects").iterdir())
        for proj in projects:
            for f in sorted(proj.rglob("*.py")):
                rel = f.relative_to(ROOT)
                out[f"one-file/{rel.as_posix().replace('/', '__')}.json"] = (
                    lambda rel=rel: _canonical_json(_xlalint(["--output-format", "json", str(rel)])))
    if not only or "programs" in only:
        out["programs.json"] = lambda: _canonical_json(_xlalint(
            ["--output-format", "json", "tests/verify_programs", "bench/programs", "examples"]))
    if not only or "fixes" in only:
        out["fixes.diff"] = lambda: _xlalint(["--diff", "--unsafe-fixes", "tests/fixtures", "examples"])
    if not only or "torch" in only:
        out["torch.json"] = lambda: _canonical_json(_xlalint(
            ["--output-format", "json", "-j", "2", _package_dir("torch"), _package_dir("torch_xla")]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["record", "compare"])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--only", default="", help="comma-separated: torch, fixtures, programs, fixes")
    a = ap.parse_args()
    only = {s for s in a.only.split(",") if s}
    runs = _runs(only)
    if a.action == "record":
        a.directory.mkdir(parents=True, exist_ok=True)
    differ = []
    for name, run in runs.items():
        text = run()
        path = a.directory / name
        if a.action == "record":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"recorded {name}: {len(text.splitlines())} lines")
        else:
            old = path.read_text() if path.exists() else None
            same = old == text
            print(f"{'same' if same else 'DIFFERENT'} {name}")
            if not same:
                differ.append(name)
                path.with_name(path.name + ".new").write_text(text)
    if differ:
        print(f"{len(differ)} of {len(runs)} outputs differ (the new ones are written beside them as *.new)")
        return 1
    if a.action == "compare":
        print(f"all {len(runs)} outputs are identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
