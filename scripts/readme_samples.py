#!/usr/bin/env python3
"""The README's sample outputs, from real runs: one command rewrites them all.

    python scripts/readme_samples.py            # run every README command, rewrite the samples in place
    python scripts/readme_samples.py --check    # exit 1 and show the difference if a sample is stale

Every ``$ `` line of a ``console`` block is a command; the lines after it, up to the next ``$`` line or
the block's end, are its sample output (a command with no lines after it has no sample). The commands
run in order, as a new user would type them, on a fresh copy of the repository (what ``git ls-files``
lists) with a temporary HOME and a fresh virtualenv as "the environment you train in" (pipx is
installed into it first); ``xlalint --verify`` runs with the Python running this script, which has the
verify extra (torch, torch_xla), on the copy's sources. A trailing ``# exit N`` is the expected status.

What depends on the machine is normalised in the README and masked in the comparison
(tests/test_readme.py compares every sample with a fresh run):

* the copy's absolute path is written ``/path/to/xlalint``, temporary directories ``$TMPDIR``;
* lines longer than ``WIDTH`` characters are cut, with ``…``;
* times (``12.3 ms``, the per-step table's wall-time column, the wall-time line; in ``--verify``'s
  "Where the time goes" ranking also the shares, the ranks and the rows' order) are masked as ``#``
  when compared. In the README they are a real run's: a sample whose timed lines are unchanged but for
  their times keeps its times (``--new-times`` writes this run's, on a quiet machine), so that a busy
  machine does not rewrite them; the README's "17 ms a step instead of 1,259 ms" are the two
  ``--verify`` samples' medians.

Run it when a change alters what a command prints (a rule's message, the report's layout), on a quiet
machine (the times are the run's), and commit the README with the change.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
WIDTH = 160
EXIT = re.compile(r"#\s*exit\s+(\d+)")
# times: a number followed by "ms", the last column of a per-step row, every number of the wall-time line
_MS = re.compile(r"\d[\d,]*(?:\.\d+)? ms\b")
_STEP_ROW = re.compile(r"^(\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+)\s+[\d.]+(\s*(?:\(warm-up\))?)$")  # right-aligned
_WALL = re.compile(r"^\s+wall time: ")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
# --verify's ranking by measured cost: its shares and its order are the run's times too
_RANKING = re.compile(r"^Where the time goes \(")
_RANK_ROW = re.compile(r"^  (?:\d+\.|…|no finding:|unexplained:) ")
_RANK = re.compile(r"^  \d+\.")
_PERCENT = re.compile(r"(?:<)?\d+%")
RANK_CUT = WIDTH - 40
_CUT_TIME = re.compile(r"(?:\d[\d,.]*|#)(?: ms?)?…$")  # a time the cut at WIDTH left without its unit
_SPEED = re.compile(r"\*\*[\d,.]+ ms a step instead of [\d,.]+ ms\*\*")


# ------------------------------------------------------------------------------ the README's samples
def blocks(text: str) -> list:
    """[(command, expected exit status, sample lines or None, (first, last) line index of the sample)] for
    each ``$`` line of the console blocks, in order; the sample is None when no line follows it."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            if lines[i].startswith("$ "):
                command = lines[i][2:].strip()
                m = EXIT.search(command)
                j = i + 1
                while j < len(lines) and not lines[j].startswith("```") and not lines[j].startswith("$ "):
                    j += 1
                sample = lines[i + 1:j] or None
                out.append((command, int(m.group(1)) if m else 0, sample, (i + 1, j)))
                i = j
            else:
                i += 1
        i += 1
    return out


def commands(text: str) -> list:
    """(command, expected exit status) for each ``$`` line."""
    return [(c, e) for c, e, _, _ in blocks(text)]


# ------------------------------------------------------------------------------------ normalising
def normalise(output: str, clone: Path, tmp: Path) -> list:
    """The output as the README shows it: paths of this machine replaced, trailing blanks dropped, long
    lines cut."""
    text = output.replace(str(clone), "/path/to/xlalint").replace(str(tmp), "$TMPDIR")
    text = text.replace(tempfile.gettempdir().rstrip("/") + "/", "$TMPDIR/")
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return [line if len(line) <= WIDTH else line[: WIDTH - 1] + "…" for line in lines]


def mask_times(lines: list) -> list:
    out = []
    ranking = []  # the rows of --verify's "Where the time goes" being read: their order is the times'
    for line in lines:
        if _RANK_ROW.match(line) and (ranking or (out and _RANKING.match(out[-1]))):
            row = _CUT_TIME.sub("#…", _PERCENT.sub("#%", _RANK.sub("  #.", _MS.sub("# ms", line))))
            # a row cut at WIDTH is cut where its times' widths put the cut: compared up to where any run's is
            ranking.append(row[:RANK_CUT] + "…" if row.endswith("…") and len(row) > RANK_CUT else row)
            continue
        out += sorted(ranking)
        ranking = []
        if _WALL.match(line):
            line = _NUMBER.sub("#", line)
        else:
            line = _STEP_ROW.sub(lambda m: m.group(1) + " #" + m.group(2), line)
            line = _MS.sub("# ms", line)
        out.append(line)
    return out + sorted(ranking)


def differences(readme_sample: list, fresh: list) -> str:
    """'' when they agree with the times masked, else a unified diff."""
    a, b = mask_times(readme_sample), mask_times(fresh)
    if a == b:
        return ""
    return "\n".join(difflib.unified_diff(a, b, "README", "fresh run", lineterm=""))


def _median_ms(sample: list) -> str:
    for line in sample:
        m = re.search(r"after warm-up median ([\d.]+) ms", line)
        if m:
            return f"{float(m.group(1)):,.0f}"
    raise ValueError("no median in the --verify sample")


def keep_times(old: list, new: list) -> list:
    """``new``, with the times of ``old`` when its timed lines (the per-step rows, the wall-time line, any
    "N ms") are the same lines once the times are masked: the times then stay those of the run that last
    changed them, all of them from that one run, and a busy machine does not rewrite them. Otherwise
    ``new`` as it is."""
    def timed(lines):
        return [i for i, line in enumerate(lines) if mask_times([line])[0] != line]

    old_t, new_t = timed(old), timed(new)
    if len(old_t) != len(new_t) or mask_times([old[i] for i in old_t]) != mask_times([new[i] for i in new_t]):
        return new
    out = list(new)
    for i, j in zip(old_t, new_t):
        out[j] = old[i]
    return out


def rewrite(text: str, fresh: dict, keep: bool = True) -> str:
    """``text`` with each sample replaced by ``fresh[command]`` (normalised lines; the times kept, see
    ``keep_times``, unless ``keep`` is false), and the speed-up sentence taken from the two --verify
    samples."""
    lines = text.splitlines()
    for command, _, sample, (first, last) in reversed(blocks(text)):
        if sample is not None and command in fresh:
            lines[first:last] = keep_times(sample, fresh[command]) if keep else fresh[command]
    new = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
    slow = next((s for c, s in fresh.items() if c.startswith("xlalint --verify examples/slow_train.py")), None)
    fast = next((s for c, s in fresh.items() if c.startswith("xlalint --verify examples/fast_train.py")), None)
    if slow and fast:
        slow, fast = (next(s for c, _, s, _ in blocks(new) if c.startswith(f"xlalint --verify examples/{n}"))
                      for n in ("slow_train.py", "fast_train.py"))  # the times as written
        new = _SPEED.sub(f"**{_median_ms(fast)} ms a step instead of {_median_ms(slow)} ms**", new)
    return new


# ------------------------------------------------------------------------------------------ running
def copy_of_the_repository(dest: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def run_commands(tmp: Path, text: str):
    """Run the README's commands in order in a fresh copy under ``tmp``; yield (command, expected exit
    status, CompletedProcess with stdout and stderr merged as a terminal shows them, seconds, the copy).
    ``make test`` is skipped (it runs the tests that run this)."""
    clone = copy_of_the_repository(tmp / "xlalint")
    home = tmp / "home"
    home.mkdir()
    env_dir = tmp / "train-env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    r = subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "pipx"], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"pip install pipx failed:\n{r.stderr[-2000:]}")
    # A user types these in a fresh shell: nothing of the caller's make (MAKELEVEL makes a nested make
    # print "Entering directory"), virtualenv or colour settings leaks in.
    leaks = ("PYTHONPATH", "VIRTUAL_ENV", "NO_COLOR", "FORCE_COLOR", "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")
    base = {k: v for k, v in os.environ.items() if k not in leaks}
    env = {**base, "HOME": str(home), "VIRTUAL_ENV": str(env_dir),
           "PATH": os.pathsep.join([str(env_dir / "bin"), str(home / ".local" / "bin"), base.get("PATH", "")])}
    verify_env = {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]),
                  "PYTHONPATH": os.pathsep.join([str(clone), str(clone / "plugins")]), "PJRT_DEVICE": "CPU"}
    for command, expected in commands(text):
        if command.startswith("make test"):
            continue
        e = verify_env if command.startswith("xlalint --verify") else env
        t0 = time.monotonic()
        r = subprocess.run(["bash", "-c", command], cwd=clone, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, stdin=subprocess.DEVNULL, timeout=900)
        yield command, expected, r, time.monotonic() - t0, clone


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only compare: exit 1 if a sample differs from a fresh run")
    p.add_argument("--new-times", action="store_true",
                   help="write this run's times even where only the times changed (on a quiet machine)")
    p.add_argument("--first", type=int, metavar="N", help="run only the first N commands (their samples only)")
    args = p.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    samples = {c: s for c, _, s, _ in blocks(text) if s is not None}
    fresh, stale = {}, []
    with tempfile.TemporaryDirectory(prefix="xlalint-readme-") as d:
        tmp = Path(d)
        for n, (command, expected, r, seconds, clone) in enumerate(run_commands(tmp, text), 1):
            print(f"$ {command}  -> exit {r.returncode} in {seconds:.0f} s", file=sys.stderr)
            if r.returncode != expected:
                print(r.stdout[-3000:], file=sys.stderr)
                print(f"error: expected exit {expected}", file=sys.stderr)
                return 2
            if command in samples:
                fresh[command] = normalise(r.stdout, clone, tmp)
                diff = differences(samples[command], fresh[command])
                if diff:
                    stale.append(command)
                    if args.check:
                        print(diff, file=sys.stderr)
            if args.first and n >= args.first:
                break
    if args.check:
        print(f"{len(stale)} of {len(samples)} samples differ from a fresh run" if stale else
              f"all {len(samples)} samples match a fresh run (times masked)", file=sys.stderr)
        return 1 if stale else 0
    new = rewrite(text, fresh, keep=not args.new_times)
    if new != text:
        README.write_text(new, encoding="utf-8")
    print(f"rewrote {len(fresh)} samples ({len(stale)} had changed beyond their times)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
