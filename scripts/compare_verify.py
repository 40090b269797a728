#!/usr/bin/env python3
"""Record ``xlalint --verify``'s JSON report on a few fixed programs, and compare a later build with the record.

``scripts/compare_output.py`` checks the static linter; this one checks ``--verify`` (the child process,
the attribution, the judges, the misses, the recompiles' root causes), for changes that must not change
what it reports:

    python scripts/compare_verify.py record /tmp/verify-before    # on the old code
    ... change the code ...
    python scripts/compare_verify.py compare /tmp/verify-before   # on the new code: exit 1 on any difference

Each program runs with ``xlalint --verify TARGET --max-steps N --output-format json`` on the CPU device.
What depends on the clock is masked before the comparison (step wall/CPU times, the timing summary, the
elapsed time, how long the program was inside torch_xla, the missing barrier's compile and wall time per
iteration, in its numbers and in the sentences that quote them); everything else - the counters per step,
the verdicts and their evidence, the misses, the recompiles and their root causes, the traceback, where
the run stopped - must be the same. Paths are shown under ``<root>``, so the record of the old code can
be taken in a copy of it (``git archive HEAD | tar -x -C /tmp/old``, then run the copy's script there).
``record`` twice on the same code to see that the masked report is stable on your machine. ``--only
NAME[,NAME]`` runs some of the programs (the names below).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VP = "tests/verify_programs"

#: name -> (target, --max-steps, program arguments). Together they take the child through every way a
#: run goes: event attribution and the line tracer (the second run with graph dumps that recompile_slice
#: triggers), a helper module charged via its caller, a CPU-fallback miss, a zero-argument function, a
#: crash with the user's traceback, and a loop that never reaches a step barrier.
PROGRAMS = {
    "slow_train": ("examples/slow_train.py", 8, ["--steps", "10"]),
    "recompile_slice": (f"{VP}/recompile_slice.py", 8, []),
    "uses_helper": (f"{VP}/uses_helper.py", 8, []),
    "miss_histc": (f"{VP}/miss_histc.py", 8, []),
    "functions": (f"{VP}/functions.py::train_step_reads", 8, []),
    "raises": (f"{VP}/raises.py", 8, []),
    "char_gpt": (f"{VP}/char_gpt.py", 8, ["--device=xla"]),
}

#: Keys whose values are clock readings (where the time goes - ``costs``, each finding's and miss's
#: ``cost``, a recompile's ``compile_ms`` - is ranked and worded by the clock: masked whole).
TIMED_KEYS = {"wall_ms", "cpu_ms", "elapsed", "warmup_ms", "warmup_total_ms", "steady_median_ms",
              "steady_mean_ms", "seconds", "compile_s", "wall_s", "costs", "cost", "compile_ms"}
#: Clock readings inside sentences: "compile time 0.2, 0.3 s, wall time 1.1, 1.9 s", "for 41.2 s".
TIMED_TEXT = [
    (re.compile(r"compile time [0-9., ]+ s"), "compile time <t> s"),
    (re.compile(r"wall time [0-9., ]+ s"), "wall time <t> s"),
    (re.compile(r"for [0-9.]+ s\b"), "for <t> s"),
]


def mask(value):
    """The report with every clock reading replaced by ``<t>``, and the checkout's directory by ``<root>``
    (a record of the old code can be taken in a copy of it elsewhere)."""
    if isinstance(value, dict):
        return {k: ("<t>" if k in TIMED_KEYS and value[k] is not None else mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, str):
        for pattern, repl in TIMED_TEXT:
            value = pattern.sub(repl, value)
        for root in sorted({str(ROOT), os.path.realpath(ROOT)}, key=len, reverse=True):
            value = value.replace(root, "<root>")
        return value
    return value


def verify_json(name: str) -> str:
    target, steps, args = PROGRAMS[name]
    cmd = [sys.executable, "-m", "xlalint", "--verify", target, "--max-steps", str(steps),
           "--output-format", "json", *(["--", *args] if args else [])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "plugins")]), NO_COLOR="1")
    env.setdefault("PJRT_DEVICE", "CPU")
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    try:
        data = json.loads(r.stdout)
    except ValueError:
        raise SystemExit(f"{name}: no JSON report (exit status {r.returncode})\n{r.stdout}\n{r.stderr}") from None
    return json.dumps({"exit_status": r.returncode, "report": mask(data)}, indent=1, sort_keys=True) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("record", "compare"))
    ap.add_argument("directory")
    ap.add_argument("--only", default="", help="comma-separated program names: " + ", ".join(PROGRAMS))
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(PROGRAMS)
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown program {', '.join(unknown)}; known: {', '.join(PROGRAMS)}")
    out = Path(args.directory)
    if args.action == "record":
        out.mkdir(parents=True, exist_ok=True)
    differ = []
    for name in names:
        text = verify_json(name)
        path = out / f"{name}.json"
        if args.action == "record":
            path.write_text(text)
            print(f"recorded {name}")
            continue
        if not path.exists():
            print(f"{name}: not in the record {out}")
            differ.append(name)
            continue
        old = path.read_text()
        if old == text:
            print(f"{name}: identical")
            continue
        differ.append(name)
        print(f"{name}: DIFFERENT")
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), "before", "after", n=2))
    if args.action == "compare":
        print("identical" if not differ else f"{len(differ)} of {len(names)} differ: {', '.join(differ)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
