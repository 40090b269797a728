"""The xlalint benchmark: big real trees that are installed anyway, every tool on the same files, one run.

    python bench/run.py            # everything, results in bench/RESULTS.md (about 10 minutes on 2 cores)
    python bench/run.py --quick    # every 12th file asked (xlalint still analyses all of torch), bench/RESULTS-quick.md

The trees are the sources of the installed ``torch`` (about 2,000 files, 1M lines) and ``torch_xla``
packages, found with ``importlib.util.find_spec``. Every tool gets the same explicit list of files. Each
measurement is a separate process: wall time, CPU time (user + system, the process and its workers, from
``wait4``), peak memory (the largest single process, from ``wait4``, and the sum over the process tree,
sampled every 20 ms from /proc). Rows:

* ``libcst.parse_module`` alone over the same files: the floor for any libcst-based linter;
* xlalint with one job, with all cores, and with a cold then a warm cache (all cores);
* the flake8 plugin (``flake8 --select XLA``), if it is installed;
* TorchFix, in a virtualenv of its own (it pins an older libcst), created on first use in
  bench/.venv-torchfix. TorchFix lints about 3 files/s, so by default it runs on every 8th file
  (``--torchfix-every 1`` for all) and xlalint is timed again on exactly that sample.

xlalint's outputs from one job, all cores and the warm cache are compared: the benchmark fails if the
findings differ.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TORCHFIX_VENV = Path(os.environ.get("XLALINT_TORCHFIX_VENV", BENCH / ".venv-torchfix"))
PARSE_ONLY = r"""
import sys, libcst
from xlalint.sources.read import decode_source
sys.setrecursionlimit(10000)
bad = 0
for path in open(sys.argv[1]).read().splitlines():
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        libcst.parse_module(decode_source(data).lstrip("\ufeff"))
    except Exception:
        bad += 1
print(f"{bad} files failed to parse")
"""
# xlalint's checks before libcst (xlalint/guard.py): the token scan, then CPython's compile, per file
GUARD_ONLY = r"""
import sys
from xlalint.parse import guard
from xlalint.sources.read import decode_source
refused = 0
for path in open(sys.argv[1]).read().splitlines():
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        text = decode_source(data).lstrip("\ufeff")
    except ValueError:
        continue
    if (guard.check(text) or guard.cpython_refuses(text, path)) is not None:
        refused += 1
print(f"{refused} files stopped before the parse")
"""


# ------------------------------------------------------------------------------------------ files
def package_files(module: str) -> list[str]:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return []
    root = os.path.dirname(spec.origin)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return out


def count_lines(files: list[str]) -> int:
    n = 0
    for p in files:
        with open(p, "rb") as fh:
            n += fh.read().count(b"\n")
    return n


# ------------------------------------------------------------------------------------------ measuring
@dataclass
class Result:
    name: str
    files: int
    lines: int
    wall: float = 0.0
    cpu: float = 0.0
    peak_process_mb: float = 0.0
    peak_tree_mb: float = 0.0
    returncode: int = 0
    output: str = ""
    note: str = ""
    skipped: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def files_per_s(self) -> float:
        return self.files / self.wall if self.wall else 0.0

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.wall if self.wall else 0.0

    @property
    def files_per_cpu_s(self) -> float:
        return self.files / self.cpu if self.cpu else 0.0


def _tree_rss_kb(pid: int) -> int:
    """The resident memory of ``pid`` and all its descendants, from /proc."""
    total = 0
    stack = [pid]
    seen = set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    stack.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def measure(name: str, cmd: list[str], files: list[str], lines: int, *, cwd=None, env=None) -> Result:
    res = Result(name, len(files), lines)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd, env=env)
        peak_tree = 0
        sampling = os.path.isdir("/proc")
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if sampling:
                peak_tree = max(peak_tree, _tree_rss_kb(proc.pid))
            time.sleep(0.02)
        res.wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        res.returncode = proc.returncode
        res.cpu = ru.ru_utime + ru.ru_stime
        res.peak_process_mb = ru.ru_maxrss / 1024  # KB on Linux
        res.peak_tree_mb = max(peak_tree / 1024, res.peak_process_mb)
        out.seek(0)
        err.seek(0)
        res.output = out.read().decode("utf-8", "replace")
        res.extra["stderr"] = err.read().decode("utf-8", "replace")
    print(f"  {name:<34} {res.wall:7.2f} s wall {res.cpu:7.2f} s CPU {res.files_per_s:8.1f} files/s "
          f"{res.peak_tree_mb:6.0f} MB  rc={res.returncode}", flush=True)
    return res


def skipped(name: str, files: list[str], lines: int, why: str) -> Result:
    print(f"  {name:<34} skipped: {why}", flush=True)
    return Result(name, len(files), lines, skipped=why)


# ------------------------------------------------------------------------------------------ tools
def ensure_torchfix() -> Optional[Path]:
    exe = TORCHFIX_VENV / "bin" / "torchfix"
    if exe.exists():
        return exe
    print(f"creating {TORCHFIX_VENV} and installing torchfix (once)...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(TORCHFIX_VENV)], check=True)
        subprocess.run([str(TORCHFIX_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "torchfix"],
                       check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"  cannot install torchfix: {e}", flush=True)
        return None
    return exe if exe.exists() else None


def flake8_plugin_ready(python: str) -> tuple[bool, str]:
    try:
        out = subprocess.run([python, "-m", "flake8", "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"flake8 not runnable: {e}"
    text = out.stdout + out.stderr
    if out.returncode != 0:
        return False, f"flake8 --version failed: {text.strip().splitlines()[-1:] or text}"
    if "xlalint" in text.lower() or "XLA" in text:
        return True, text.strip().splitlines()[0]
    return False, "the xlalint flake8 plugin is not registered (flake8 --version does not list it)"


def tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return (out.stdout.strip() or out.stderr.strip()).splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "?"


def _findings_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.strip()]


# ------------------------------------------------------------------------------------------ machine
def machine() -> dict:
    info = {"cores": os.cpu_count() or 0, "cpu": platform.processor() or platform.machine(), "memory": "?"}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal"):
                    info["memory"] = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                    break
    except OSError:
        pass
    try:
        info["affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        info["affinity"] = info["cores"]
    return info


def versions(python: str) -> dict:
    code = (
        "import sys, importlib.metadata as m\n"
        "def v(n):\n"
        "    try: return m.version(n)\n"
        "    except Exception: return 'not installed'\n"
        "print(sys.version.split()[0]); [print(v(n)) for n in ('libcst','xlalint','torch','torch_xla','flake8')]\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.split()
    keys = ("python", "libcst", "xlalint", "torch", "torch_xla", "flake8")
    return dict(zip(keys, out + ["?"] * len(keys)))


# ------------------------------------------------------------------------------------------ main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="every 12th file only, for fast iteration")
    ap.add_argument("--jobs", type=int, default=0, help="jobs for the all-cores rows (default: every core)")
    ap.add_argument("--torchfix-every", type=int, default=0, metavar="K",
                    help="run TorchFix on every K-th file (default 8, or 4 with --quick; 1 = every file)")
    ap.add_argument("--skip-torchfix", action="store_true")
    ap.add_argument("--skip-flake8", action="store_true")
    ap.add_argument("--ratio-runs", type=int, default=3, metavar="N",
                    help="measure the parse and the -j 1 rows N times each, alternately, and keep each one's "
                         "fastest run (default 3; the same code varies by 5%% from run to run here)")
    ap.add_argument("--output", help="where to write the results (default bench/RESULTS.md, or RESULTS-quick.md)")
    args = ap.parse_args(argv)

    python = sys.executable
    xlalint = [python, "-m", "xlalint"]
    jobs = args.jobs or machine()["affinity"]
    output = Path(args.output) if args.output else BENCH / ("RESULTS-quick.md" if args.quick else "RESULTS.md")

    trees = {m: package_files(m) for m in ("torch", "torch_xla")}
    files = [f for fs in trees.values() for f in fs]
    if not files:
        print("neither torch nor torch_xla is installed: nothing to benchmark", file=sys.stderr)
        return 2
    if args.quick:
        files = files[::12]
    lines = count_lines(files)
    every = args.torchfix_every or (4 if args.quick else 8)
    sample = files[::every]
    sample_lines = count_lines(sample)

    check = subprocess.run(xlalint + ["--version"], capture_output=True, text=True)
    if check.returncode != 0:
        print(f"xlalint does not run: {check.stderr.strip()[-500:]}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    started = datetime.datetime.now().astimezone()
    print(f"{len(files)} files, {lines} lines; load average {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f} on {os.cpu_count()} cores", flush=True)

    work = Path(tempfile.mkdtemp(prefix="xlalint-bench-"))
    file_list = work / "files.txt"
    file_list.write_text("\n".join(files))
    parse_script = work / "parse_only.py"
    parse_script.write_text(PARSE_ONLY)
    guard_script = work / "guard_only.py"
    guard_script.write_text(GUARD_ONLY)
    cache_dir = work / "cache"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    # concise: the one-line format these rows have always measured (full re-reads each file for its frames)
    common = ["--isolated", "-q", "--exit-zero", "--output-format", "concise"]

    rows: dict[str, Result] = {}
    # the ratio's two rows, alternately (parse, -j 1, parse, -j 1, ...): each keeps its fastest run, the
    # figure least disturbed by whatever else shares the machine; every run is listed in the notes
    pairs = []
    for _ in range(max(1, args.ratio_runs)):
        parse = measure("libcst.parse_module only", [python, str(parse_script), str(file_list)],
                        files, lines, cwd=work, env=env)
        j1 = measure("xlalint -j 1 --no-cache", xlalint + common + ["-j", "1", "--no-cache"] + files,
                     files, lines, cwd=work, env=env)
        pairs.append((parse, j1))
    rows["parse"] = min((p for p, _ in pairs), key=lambda x: x.cpu)
    rows["j1"] = min((j for _, j in pairs), key=lambda x: x.cpu)
    rows["parse"].extra["pairs"] = [(p.cpu, j.cpu) for p, j in pairs]
    rows["guard"] = measure("guard scan + CPython compile only", [python, str(guard_script), str(file_list)],
                            files, lines, cwd=work, env=env)
    rows["jN"] = measure(f"xlalint -j {jobs} --no-cache", xlalint + common + ["-j", str(jobs), "--no-cache"] + files,
                         files, lines, cwd=work, env=env)
    rows["cold"] = measure(f"xlalint -j {jobs}, cold cache",
                           xlalint + common + ["-j", str(jobs), "--cache-dir", str(cache_dir)] + files,
                           files, lines, cwd=work, env=env)
    rows["warm"] = measure(f"xlalint -j {jobs}, warm cache",
                           xlalint + common + ["-j", str(jobs), "--cache-dir", str(cache_dir)] + files,
                           files, lines, cwd=work, env=env)
    # pre-commit in a large project: one file asked, the project it belongs to linted before with the same
    # cache. An installed file's project is its own top-level package (torch), not the two packages of
    # the rows above, so that project is linted first (not measured), as `xlalint .` would have been
    one = next((f for f in files if f.replace(os.sep, "/").endswith("torch/nn/modules/linear.py")), files[0])
    torch_files = set(trees["torch"])
    own = [f for f in files if f in torch_files] if one in torch_files else files
    subprocess.run(xlalint + common + ["-j", str(jobs), "--cache-dir", str(cache_dir)] + own,
                   cwd=work, env=env, capture_output=True)
    rows["one_warm"] = measure(f"xlalint {os.path.relpath(one, os.path.dirname(os.path.dirname(one)))}, warm cache",
                               xlalint + common + ["-j", str(jobs), "--cache-dir", str(cache_dir), one],
                               [one], count_lines([one]), cwd=work, env=env)

    if args.skip_flake8:
        rows["flake8"] = skipped("flake8 --select XLA", files, lines, "--skip-flake8")
    else:
        ready, why = flake8_plugin_ready(python)
        if ready:
            rows["flake8"] = measure("flake8 --select XLA (default jobs)",
                                     [python, "-m", "flake8", "--isolated", "--select", "XLA", "--exit-zero"] + files,
                                     files, lines, cwd=work, env=env)
        else:
            rows["flake8"] = skipped("flake8 --select XLA", files, lines, why)

    torchfix_version = "not run"
    if args.skip_torchfix:
        rows["torchfix"] = skipped("TorchFix -j 1", sample, sample_lines, "--skip-torchfix")
    else:
        exe = ensure_torchfix()
        if exe is None:
            rows["torchfix"] = skipped("TorchFix -j 1", sample, sample_lines, "could not install torchfix")
        else:
            torchfix_version = tool_version([str(exe), "--version"])
            tf_libcst = subprocess.run(
                [str(TORCHFIX_VENV / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('libcst'))"],
                capture_output=True, text=True).stdout.strip()
            torchfix_version += f" (libcst {tf_libcst})"
            rows["torchfix"] = measure(f"TorchFix -j 1 (every {every}th file)", [str(exe), "-j", "1"] + sample,
                                       sample, sample_lines, cwd=work, env=env)
    if not rows["torchfix"].skipped:  # its only use: the comparison with TorchFix
        rows["j1_sample"] = measure(f"xlalint -j 1 --no-cache (same {len(sample)})",
                                    xlalint + common + ["-j", "1", "--no-cache"] + sample,
                                    sample, sample_lines, cwd=work, env=env)
    load_after = os.getloadavg()

    crashed = [x.name for x in rows.values() if "Traceback (most recent call last)" in x.extra.get("stderr", "")]
    if crashed:
        print(f"ERROR: a run crashed: {', '.join(crashed)}", file=sys.stderr)
    # the same findings whichever way
    consistent = (_findings_lines(rows["j1"].output) == _findings_lines(rows["jN"].output)
                  == _findings_lines(rows["cold"].output) == _findings_lines(rows["warm"].output))

    write_results(output, args, rows, files, lines, trees, jobs, every, sample, started, load_before,
                  load_after, python, torchfix_version, consistent)
    print(f"results written to {output}")
    if crashed:
        return 1
    if not consistent:
        print("ERROR: xlalint's findings differ between -j 1, -j N and the cache", file=sys.stderr)
        return 1
    return 0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def write_results(output, args, rows, files, lines, trees, jobs, every, sample, started, load_before,
                  load_after, python, torchfix_version, consistent) -> None:
    m = machine()
    v = versions(python)
    r = rows
    n_findings = len(_findings_lines(r["j1"].output))
    L = []
    L.append("# xlalint benchmark results\n")
    L.append(f"Generated by `{'make bench' if not args.quick else 'python bench/run.py --quick'}` "
             f"(bench/run.py) on {started:%Y-%m-%d %H:%M %Z}.\n")
    L.append("## Machine\n")
    L.append(f"- CPU: {m['cpu']}, {m['cores']} cores ({m['affinity']} usable)")
    L.append(f"- Memory: {m['memory']}")
    L.append(f"- Load average (1/5/15 min) before: {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f}; "
             f"after: {load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f}. "
             "A load above the core count means other work shared the CPUs: wall times are inflated, "
             "CPU times much less so.")
    L.append(f"- Python {v['python']}, libcst {v['libcst']}, xlalint {v['xlalint']}, torch {v['torch']}, "
             f"torch_xla {v['torch_xla']}, flake8 {v['flake8']}; TorchFix {torchfix_version}\n")
    L.append("## Files\n")
    kinds = ", ".join(f"`{k}` ({len(fs)} files)" for k, fs in trees.items())
    L.append(f"The installed sources of {kinds}" + (", every 12th file (`--quick`)" if args.quick else "")
             + f": **{len(files)} files, {lines:,} lines**. Every tool gets the same explicit file list. "
             f"xlalint reports {n_findings} findings on them.\n")
    L.append("## Results\n")
    L.append("| Run | Files | Wall s | CPU s | Files/s | Lines/s | Peak MB (largest process / all processes) |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    order = ["parse", "guard", "j1", "jN", "cold", "warm", "one_warm", "flake8", "torchfix", "j1_sample"]
    for k in order:
        if k not in r:
            continue
        x = r[k]
        if x.skipped:
            L.append(f"| {x.name} | {x.files} | — | — | — | — | skipped: {x.skipped} |")
            continue
        L.append(f"| {x.name} | {x.files} | {x.wall:.2f} | {x.cpu:.2f} | {x.files_per_s:.1f} | "
                 f"{x.lines_per_s:,.0f} | {x.peak_process_mb:.0f} / {x.peak_tree_mb:.0f} |")
    L.append("")
    L.append("## Ratios (same run)\n")
    L.append("| Measure | Value | Target |")
    L.append("|---|---:|---|")
    L.append(f"| xlalint -j 1 CPU time / libcst parse CPU time | {_ratio(r['j1'].cpu, r['parse'].cpu)} | at most 2.5x |")
    L.append(f"| guard scan + CPython compile CPU time / xlalint -j 1 CPU time (the cost of #18's checks, "
             f"interpreter start included) | {100 * r['guard'].cpu / r['j1'].cpu:.1f}% | |")
    if not r["torchfix"].skipped:
        tf, xs = r["torchfix"], r["j1_sample"]
        L.append(f"| xlalint -j 1 / TorchFix -j 1 throughput, wall (same {len(sample)} files) | "
                 f"{_ratio(xs.files_per_s, tf.files_per_s)} | at least 8x |")
        L.append(f"| xlalint -j 1 / TorchFix -j 1 throughput, CPU (same {len(sample)} files) | "
                 f"{_ratio(xs.files_per_cpu_s, tf.files_per_cpu_s)} | at least 8x |")
        L.append(f"| TorchFix files/s, xlalint files/s on that sample | {tf.files_per_s:.1f}, {xs.files_per_s:.1f} | |")
    else:
        L.append(f"| xlalint vs TorchFix | not measured: {r['torchfix'].skipped} | at least 8x |")
    L.append(f"| -j {jobs} speed-up over -j 1, wall | {_ratio(r['j1'].wall, r['jN'].wall)} | scales with cores |")
    L.append(f"| warm cache / cold cache, wall | {100 * r['warm'].wall / r['cold'].wall:.1f}% | at most 5% |")
    L.append(f"| warm cache / cold cache, CPU | {100 * r['warm'].cpu / r['cold'].cpu:.1f}% | |")
    L.append(f"| cold cache / no cache (-j {jobs}), wall: the cost of writing the cache | "
             f"{_ratio(r['cold'].wall, r['jN'].wall)} | |")
    peak = max(r[k].peak_process_mb for k in ("j1", "jN", "cold", "warm"))
    peak_tree = max(r[k].peak_tree_mb for k in ("j1", "jN", "cold", "warm"))
    L.append(f"| xlalint peak memory, largest process / all processes | {peak:.0f} MB / {peak_tree:.0f} MB | below 500 MB |")
    L.append(f"| one file of the project, warm cache, wall | {r['one_warm'].wall:.2f} s | well under a second |")
    if not r["flake8"].skipped:
        L.append(f"| flake8 --select XLA / xlalint -j {jobs} wall | {_ratio(r['flake8'].wall, r['jN'].wall)} | |")
    L.append(f"| findings identical for -j 1, -j {jobs}, cold and warm cache | {'yes' if consistent else '**NO**'} | yes |")
    L.append("")
    L.append("## Notes\n")
    L.append("- CPU time is user + system time of the process and every worker it started (from `wait4`); "
             "on a shared machine it is the steadier figure. Files/s and lines/s are per wall-clock second.")
    L.append("- Every xlalint row includes the project pass: each file is summarised, the facts are solved over "
             "the summaries, and the modules whose facts about their neighbours changed are walked again "
             "(see the README, \"One picture of the project\").")
    L.append("- The parse row reads, decodes and `libcst.parse_module`s each file in one process: the floor "
             "for any libcst-based linter. Process start-up and imports are in every row.")
    pairs = r["parse"].extra.get("pairs") or []
    if len(pairs) > 1:
        runs = "; ".join(f"{p:.1f} / {j:.1f} s = {j / p:.2f}x" for p, j in pairs)
        L.append(f"- The parse and -j 1 rows were each run {len(pairs)} times, alternately; the tables show each "
                 f"one's fastest run. Every pair (parse CPU / -j 1 CPU, in order): {runs}.")
    L.append(f"- TorchFix lints about 3 files/s, so it runs on every {every}th file and xlalint is timed on "
             "exactly the same files in the same run (`--torchfix-every 1` for all). Both with one job.")
    biggest = max(files, key=os.path.getsize)
    L.append(f"- Memory: the parse row's peak is libcst's tree of the largest file, `{os.path.relpath(biggest, os.path.dirname(os.path.dirname(biggest)))}` "
             f"({os.path.getsize(biggest) / 1e6:.1f} MB of source), a floor no libcst-based tool gets under while "
             "parsing whole modules; with -j N, N workers can each hold such a tree.")
    if r["flake8"].skipped:
        L.append(f"- flake8 plugin: {r['flake8'].skipped}.")
    else:
        L.append("- flake8 runs its default checkers too (they run whatever `--select` says; only the report is "
                 "filtered), with its default job count.")
    for k in order:
        if k not in r:
            continue
        x = r[k]
        if not x.skipped and (x.returncode not in (0, 1) or "Traceback (most" in x.extra.get("stderr", "")):
            tail = x.extra.get("stderr", "").strip().splitlines()[-3:]
            L.append(f"- `{x.name}` exited {x.returncode}: {' / '.join(tail)}")
    output.write_text("\n".join(L) + "\n")


if __name__ == "__main__":
    sys.exit(main())
