"""The whole-output ledger: xlalint's precision over everything it prints on public repositories.

Each repository in ``repos.json`` is checked out at its pinned commit from a local git snapshot
(``/work/.mirror/<owner>+<name>/repo`` by default), linted whole as a user would lint it (``xlalint
--isolated --no-cache --output-format json <path>``, default rules) with the xlalint of the current
directory, and every finding printed is matched to a verdict judged by reading the code
(``verdicts.csv`` for the dev half, ``heldout-verdicts.csv`` for the held-out half). The ledger holds
pointers only (repository, commit, path, line, code, a hash of the line's text), never the code.

Run from the root of an xlalint checkout::

    python bench/ledger/ledger.py                 # every repository: precision per repository and half
    python bench/ledger/ledger.py --half dev      # the dev half only, and its unjudged findings
    python bench/ledger/ledger.py --repo nanochat --write-new /tmp/new.csv   # rows to judge

Where a repository prints more than its ``sample`` size, only a fixed sample is judged and scored: the
``size`` findings whose hash with the seed is smallest (a bottom-k sample). A finding keeps its hash
while the code it points at is unchanged, so a later build is scored on the same findings as far as it
still prints them, and a finding that newly enters the sample is listed as unjudged.

Findings are matched to verdicts by path, notebook cell, code and fingerprint (a hash of the stripped
source line), in line order where one line text repeats, then by path, cell, line and code. Verdicts
that match nothing are "gone": the finding is no longer printed (a false one fixed, a true one lost).
The held-out half's verdicts are never printed, only counted: ``--show-heldout`` lists its unjudged
findings for the judge.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
HALVES = ("dev", "heldout")
VERDICT_FILES = {"dev": "verdicts.csv", "heldout": "heldout-verdicts.csv"}
COLUMNS = ["repo", "commit", "path", "cell", "line", "column", "code", "fingerprint",
           "verdict", "cause", "reason"]
VERDICTS = ("true", "false", "unsure")


@dataclass
class Finding:
    path: str
    cell: str  # "" outside notebooks
    line: int
    column: int
    code: str
    message: str
    text: str  # the stripped source line
    fingerprint: str
    occurrence: int = 0  # among the file's findings with the same code and fingerprint, in line order
    verdict: Optional[dict] = None


@dataclass
class Score:
    printed: int = 0
    scope: int = 0  # the findings scored: all, or the sample
    true: int = 0
    false: int = 0
    unsure: int = 0
    unjudged: list = field(default_factory=list)
    gone: list = field(default_factory=list)  # verdicts that match no finding printed now
    causes: dict = field(default_factory=lambda: defaultdict(int))
    seconds: float = 0.0

    @property
    def judged(self) -> int:
        return self.true + self.false

    def precision(self) -> Optional[float]:
        return self.true / self.judged if self.judged else None


def fingerprint(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8")).hexdigest()[:12]


# --- checking out -----------------------------------------------------------------------------

def mirror_dir(mirror: str, repo: str) -> str:
    return os.path.join(mirror, repo.replace("/", "+"), "repo")


def checkout(mirror: str, repo: str, commit: str, dest: str) -> str:
    """The tree of ``repo`` at ``commit`` written under ``dest`` (once: a stamp file marks it done).

    Snapshots can lack their largest blobs (and Git LFS content): those files are skipped, which a
    linter of Python sources does not miss."""
    stamp = os.path.join(dest, ".ledger-checkout")
    if os.path.exists(stamp):
        return dest
    git_dir = mirror_dir(mirror, repo)
    if not os.path.isdir(git_dir):
        raise SystemExit(
            f"ledger: no snapshot of {repo} at {git_dir}.\n"
            f"  Fetch it with the search tool's fetch (source github:{repo}), or\n"
            f"  git clone --bare https://github.com/{repo} {git_dir}\n"
            f"  (it must hold commit {commit}; pass --mirror DIR to look elsewhere)")
    git = ["git", f"--git-dir={git_dir}"]
    if subprocess.run(git + ["cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode:
        raise SystemExit(f"ledger: the snapshot {git_dir} lacks commit {commit} of {repo}: fetch it again "
                         f"(git --git-dir={git_dir} fetch https://github.com/{repo} {commit})")
    tree = subprocess.run(git + ["ls-tree", "-r", "-z", commit], capture_output=True, check=True).stdout
    blobs = []
    for entry in tree.split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        mode, kind, oid = meta.split()
        if kind == b"blob" and mode in (b"100644", b"100755"):
            blobs.append((oid.decode(), path.decode("utf-8", "surrogateescape")))
    proc = subprocess.Popen(git + ["cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    writer = _feed(proc, [oid for oid, _ in blobs])
    for oid, path in blobs:
        header = proc.stdout.readline().split()
        if len(header) < 3:  # "<oid> missing": a blob the snapshot does not hold
            continue
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)
        target = os.path.join(dest, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
    writer.join()
    proc.wait()
    with open(stamp, "w") as f:
        f.write(commit + "\n")
    return dest


def _feed(proc, oids):
    """Write the object ids to ``git cat-file --batch`` from a thread, so that its output never blocks it."""

    def run():
        for oid in oids:
            proc.stdin.write(oid.encode() + b"\n")
        proc.stdin.close()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# --- linting ----------------------------------------------------------------------------------

def lint(root: str, path: str, python: str, code_dir: str, jobs: Optional[int]) -> list:
    """xlalint's findings on ``path`` (relative to the checkout ``root``), run as a user would."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([code_dir, os.path.join(code_dir, "plugins")])
    env.setdefault("PJRT_DEVICE", "CPU")
    cmd = [python, "-m", "xlalint", "--isolated", "--no-cache", "--output-format", "json", path]
    if jobs:
        cmd[3:3] = ["-j", str(jobs)]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    try:
        rows = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"ledger: xlalint printed no JSON in {root} (exit {proc.returncode}):\n"
                         f"{proc.stderr[-2000:]}")
    return rows


class SourceLines:
    """The text of a finding's line: a file's line, or a notebook cell's line."""

    def __init__(self, root: str):
        self.root = root
        self.files: dict = {}

    def line(self, path: str, cell: str, line: int) -> str:
        key = (path, cell)
        if key not in self.files:
            self.files[key] = self._load(path, cell)
        lines = self.files[key]
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def _load(self, path: str, cell: str) -> list:
        try:
            with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            return []
        if not cell:
            return text.splitlines()
        try:
            source = json.loads(text)["cells"][int(cell) - 1]["source"]
        except (ValueError, KeyError, IndexError, TypeError):
            return []
        return ("".join(source) if isinstance(source, list) else source).splitlines()


def findings_of(rows: list, root: str) -> list:
    lines = SourceLines(root)
    out = []
    for row in rows:
        cell = str(row["cell"]) if row.get("cell") is not None else ""
        text = lines.line(row["filename"], cell, int(row["line"])).strip()
        out.append(Finding(row["filename"], cell, int(row["line"]), int(row["column"]), row["code"],
                           row["message"], text, fingerprint(text)))
    out.sort(key=lambda f: (f.path, _int(f.cell), f.line, f.column, f.code))
    seen: dict = defaultdict(int)
    for f in out:
        key = (f.path, f.cell, f.code, f.fingerprint)
        f.occurrence = seen[key]
        seen[key] += 1
    return out


def slug(path: str) -> str:
    """A linted path as part of a file name: "" for the whole repository, "~examples~dreambooth" else."""
    path = os.path.normpath(path)
    return "" if path == "." else "~" + path.replace(os.sep, "~")


def _int(text: str) -> int:
    return int(text) if text else 0


def sample(findings: list, seed: int, size: int) -> list:
    """The bottom-k sample: the ``size`` findings whose hash with ``seed`` is smallest."""
    def rank(f: Finding) -> str:
        key = f"{seed}|{f.path}|{f.cell}|{f.code}|{f.fingerprint}|{f.occurrence}"
        return hashlib.sha256(key.encode("utf-8")).hexdigest()
    return sorted(sorted(findings, key=rank)[:size], key=lambda f: (f.path, _int(f.cell), f.line, f.column))


# --- verdicts ---------------------------------------------------------------------------------

def read_verdicts(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for n, row in enumerate(rows, 2):
        if row["verdict"] not in VERDICTS:
            raise SystemExit(f"ledger: {path}:{n}: verdict must be one of {', '.join(VERDICTS)}, "
                             f"not {row['verdict']!r}")
        if row["verdict"] == "false" and not row["cause"]:
            raise SystemExit(f"ledger: {path}:{n}: a false verdict needs a cause")
    return rows


def match(findings: list, verdicts: list) -> list:
    """Attach each verdict to one finding; return the verdicts that match none."""
    by_print: dict = defaultdict(list)
    for v in verdicts:
        by_print[(v["path"], v["cell"], v["code"], v["fingerprint"])].append(v)
    left = []
    groups: dict = defaultdict(list)
    for f in findings:
        groups[(f.path, f.cell, f.code, f.fingerprint)].append(f)
    for key, vs in by_print.items():
        fs = groups.get(key, [])
        # Pair the nearest (line, then column) first, so that a finding that is gone from a line holding two of
        # one text leaves its own verdict unmatched, not its neighbour's; with more verdicts than findings, the
        # nearest lines keep theirs.
        pairs = sorted((abs(f.line - int(v["line"])) * 1000 + abs(f.column - int(v["column"] or 0)), i, j)
                       for i, v in enumerate(vs) for j, f in enumerate(fs))
        taken_v, taken_f = set(), set()
        for _d, i, j in pairs:
            if i in taken_v or j in taken_f or fs[j].verdict is not None:
                continue
            fs[j].verdict = vs[i]
            taken_v.add(i)
            taken_f.add(j)
        left.extend(v for i, v in enumerate(vs) if i not in taken_v)
    by_place = {(f.path, f.cell, f.line, f.code): f for f in findings if f.verdict is None}
    gone = []
    for v in left:
        f = by_place.pop((v["path"], v["cell"], int(v["line"]), v["code"]), None)
        if f is None:
            gone.append(v)
        else:
            f.verdict = v
    return gone


def score(findings: list, spec: dict, verdicts: list) -> Score:
    s = Score(printed=len(findings))
    s.gone = match(findings, verdicts)
    scope = sample(findings, spec["sample"]["seed"], spec["sample"]["size"]) if spec.get("sample") else findings
    s.scope = len(scope)
    for f in scope:
        v = f.verdict
        if v is None:
            s.unjudged.append(f)
        elif v["verdict"] == "true":
            s.true += 1
        elif v["verdict"] == "false":
            s.false += 1
            s.causes[v["cause"].split(":")[0].strip()] += 1
        else:
            s.unsure += 1
    return s


def new_rows(spec: dict, findings: list) -> list:
    """Rows for a judge to fill in (verdict, cause, reason), with the message and line to read."""
    return [{"repo": spec["repo"], "commit": spec["commit"], "path": f.path, "cell": f.cell, "line": f.line,
             "column": f.column, "code": f.code, "fingerprint": f.fingerprint, "verdict": "", "cause": "",
             "reason": "", "text": f.text, "message": f.message} for f in findings]


# --- the report -------------------------------------------------------------------------------

def fmt(p: Optional[float]) -> str:
    return f"{p:.2f}" if p is not None else "-"


def table(rows: list) -> list:
    out = ["| repository | half | path linted | printed | scored | judged | true | false | unsure | unjudged "
           "| precision | gone (true/false) | lint s |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for spec, s in rows:
        gone_true = sum(v["verdict"] == "true" for v in s.gone)
        gone_false = sum(v["verdict"] == "false" for v in s.gone)
        scored = f"{s.scope} (sample)" if spec.get("sample") and s.scope < s.printed else str(s.scope)
        out.append(f"| {spec['repo']} | {spec['half']} | `{spec['path']}` | {s.printed} | {scored} | {s.judged} "
                   f"| {s.true} | {s.false} | {s.unsure} | {len(s.unjudged)} | {fmt(s.precision())} "
                   f"| {gone_true}/{gone_false} | {s.seconds:.0f} |")
    return out


def half_summary(half: str, rows: list) -> list:
    rows = [(spec, s) for spec, s in rows if spec["half"] == half]
    if not rows:
        return []
    printed = sum(s.printed for _, s in rows)
    true = sum(s.true for _, s in rows)
    false = sum(s.false for _, s in rows)
    unjudged = sum(len(s.unjudged) for _, s in rows)
    # Each repository's precision stands for everything it printed: weight it by the findings printed.
    weighted = [(s.printed, s.precision()) for _, s in rows if s.precision() is not None]
    weight = sum(n for n, _ in weighted)
    estimate = sum(n * p for n, p in weighted) / weight if weight else None
    macro = [p for _, p in weighted]
    return [f"{half}: {len(rows)} repositories, {printed} findings printed, {true + false} judged "
            f"({true} true, {false} false), {unjudged} unjudged; precision over judged "
            f"{fmt(true / (true + false) if true + false else None)}; over everything printed (each repository's "
            f"precision weighted by its findings printed) {fmt(estimate)}; mean of the repositories "
            f"{fmt(sum(macro) / len(macro) if macro else None)}"]


def append_judged(path: str, specs: list) -> int:
    """Append the judged rows of a ``--write-new`` file to the verdict file of each row's half.

    Rows still without a verdict stay out; the text and message columns are dropped (pointers only)."""
    halves = {(s["repo"], s["commit"]): s["half"] for s in specs}
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r.get("verdict")]
    by_half: dict = defaultdict(list)
    for n, row in enumerate(rows, 2):
        half = halves.get((row["repo"], row["commit"]))
        if half is None:
            raise SystemExit(f"ledger: {path}:{n}: {row['repo']}@{row['commit']} is not in repos.json")
        if row["verdict"] not in VERDICTS or (row["verdict"] == "false" and not row["cause"]):
            raise SystemExit(f"ledger: {path}:{n}: a verdict is true, false (with a cause) or unsure")
        by_half[half].append({k: row[k] for k in COLUMNS})
    for half, judged in by_half.items():
        target = os.path.join(HERE, VERDICT_FILES[half])
        new = not os.path.exists(target)
        with open(target, "a", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            if new:
                w.writeheader()
            w.writerows(judged)
        print(f"appended {len(judged)} verdicts to {target}")
    return 0


def add_run_arguments(ap, workdir_env: str, workdir: str) -> None:
    """The options of a run over public repositories (this ledger's, the audit corpus's scorer)."""
    ap.add_argument("--half", choices=HALVES + ("all",), default="all")
    ap.add_argument("--repo", action="append", default=[], help="only repositories whose name contains this")
    ap.add_argument("--mirror", default=os.environ.get("XLALINT_LEDGER_MIRROR", "/work/.mirror"),
                    help="where the git snapshots are: <mirror>/<owner>+<name>/repo")
    ap.add_argument("--workdir", default=os.environ.get(workdir_env, workdir),
                    help="where checkouts and raw findings go")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs xlalint")
    ap.add_argument("--code", default=os.getcwd(), help="the xlalint checkout to run (default: .)")
    ap.add_argument("-j", "--jobs", type=int, default=None, help="xlalint's --jobs")
    ap.add_argument("--reuse", action="store_true", help="score the findings of the last run, do not lint again")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(ap, "XLALINT_LEDGER_DIR", "/tmp/xlalint-ledger")
    ap.add_argument("--write-new", metavar="CSV", help="write the unjudged findings as rows to judge")
    ap.add_argument("--show-heldout", action="store_true",
                    help="list the held-out half's unjudged findings too (for the judge only)")
    ap.add_argument("--by-cause", action="store_true", help="the dev half's false findings counted by cause")
    ap.add_argument("--append", metavar="CSV", help="append the judged rows of a --write-new file to the "
                    "verdict file of their half, then stop")
    args = ap.parse_args(argv)

    with open(os.path.join(HERE, "repos.json"), encoding="utf-8") as f:
        specs = json.load(f)["repositories"]
    if args.append:
        return append_judged(args.append, specs)
    specs = [s for s in specs if args.half in ("all", s["half"])
             and (not args.repo or any(r in s["repo"] for r in args.repo))]
    verdicts = {h: read_verdicts(os.path.join(HERE, VERDICT_FILES[h])) for h in HALVES}
    results, to_judge = [], []
    for spec in specs:
        name = spec["repo"].replace("/", "+")
        root = os.path.join(args.workdir, "src", f"{name}@{spec['commit'][:12]}")
        raw = os.path.join(args.workdir, "findings", f"{name}@{spec['commit'][:12]}{slug(spec['path'])}.json")
        checkout(args.mirror, spec["repo"], spec["commit"], root)
        start = time.monotonic()
        if args.reuse and os.path.exists(raw):
            with open(raw, encoding="utf-8") as f:
                rows = json.load(f)
        else:
            print(f"linting {spec['repo']} {spec['path']} ...", file=sys.stderr, flush=True)
            rows = lint(root, spec["path"], args.python, os.path.abspath(args.code), args.jobs)
            os.makedirs(os.path.dirname(raw), exist_ok=True)
            with open(raw, "w", encoding="utf-8") as f:
                json.dump(rows, f)
        findings = findings_of(rows, root)
        mine = [v for v in verdicts[spec["half"]] if v["repo"] == spec["repo"] and v["commit"] == spec["commit"]]
        s = score(findings, spec, mine)
        s.seconds = time.monotonic() - start
        results.append((spec, s))
        if spec["half"] == "dev" or args.show_heldout:
            to_judge.extend(new_rows(spec, s.unjudged))

    print("\n".join(table(results)))
    print()
    for half in HALVES:
        for line in half_summary(half, results):
            print(line)
    if args.by_cause:
        causes: dict = defaultdict(int)
        for spec, s in results:
            if spec["half"] == "dev":
                for cause, n in s.causes.items():
                    causes[cause] += n
        print("\ndev half, false findings by cause: " + ", ".join(
            f"{c}: {n}" for c, n in sorted(causes.items(), key=lambda kv: -kv[1])))
    gone_true = [(spec, v) for spec, s in results for v in s.gone if v["verdict"] == "true"]
    for spec, v in gone_true:
        if spec["half"] == "dev":
            print(f"gone, was true: {spec['repo']} {v['path']}:{v['cell'] + ':' if v['cell'] else ''}"
                  f"{v['line']} {v['code']}  ({v['reason']})")
    held_gone = sum(1 for spec, _ in gone_true if spec["half"] == "heldout")
    if held_gone:
        print(f"held-out: {held_gone} findings judged true are no longer printed")
    if to_judge:
        print(f"\n{len(to_judge)} findings to judge (unjudged, in the scored set):")
        for r in to_judge:
            where = f"{r['path']}:{'cell ' + r['cell'] + ':' if r['cell'] else ''}{r['line']}"
            print(f"  {r['repo']} {where} {r['code']} fp={r['fingerprint']}  {r['text'][:100]}")
    held_unjudged = sum(len(s.unjudged) for spec, s in results if spec["half"] == "heldout")
    if held_unjudged and not args.show_heldout:
        print(f"\nheld-out: {held_unjudged} findings unjudged (listed with --show-heldout, for the judge only)")
    if args.write_new:
        with open(args.write_new, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS + ["text", "message"])
            w.writeheader()
            w.writerows(to_judge)
        print(f"wrote {len(to_judge)} rows to judge to {args.write_new} (fill verdict, cause, reason, then "
              f"`ledger.py --append {args.write_new}`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
