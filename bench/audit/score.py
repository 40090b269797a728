"""The audit corpus's scorer: xlalint's recall (and precision in the files read) on labelled public code.

The corpus is pointers only: ``repos.json`` pins each public repository to a commit, assigns it to the
``dev`` or ``heldout`` half and names the files its labeller read whole; ``labels.csv`` holds one row per
labelled line (repository, commit, path, line, rule, ``must`` or ``debatable``, a fingerprint of the
line's text, an optional group, a one-line note). Each repository is checked out from its local git
snapshot and linted whole with the xlalint of the current directory, as a user would lint it, through
``bench/ledger/ledger.py``'s machinery (default rules; XLA008, off by default, in a second run with
``--extend-select XLA008`` for repositories that have XLA008 labels).

Scoring, per repository, half and rule:
- A label is found when a finding of its rule in its file has its fingerprint (paired in line order
  where a text repeats), else when one sits on its line.
- ``must`` labels that share a group are one anti-pattern reported on any of several lines (a statement
  spanning lines, a collate function and the loader it is given to): found when any of them is found.
  Each group, and each ungrouped ``must`` label, counts once: TP when found, FN when not.
- ``debatable`` labels count neither way, and neither does a finding on them.
- FP: a finding in a file read whole (``files`` in repos.json) that matches no label of its rule.
  Findings in other files are not scored (they are counted as "unscored").

Run from the root of an xlalint checkout::

    python bench/audit/score.py                  # lint every repository, print the figures
    python bench/audit/score.py --reuse          # rescore the findings of the last run
    python bench/audit/score.py --list           # also list the dev half's misses and FPs

The held-out half's misses and FPs are never printed, only counted, unless ``--show-heldout-misses``
is given (for the labeller only: whoever improves xlalint must not read them).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "ledger"))
import ledger  # noqa: E402  (bench/ledger/ledger.py: checkout, lint, findings, fingerprints)

HALVES = ledger.HALVES
COLUMNS = ["repo", "commit", "path", "cell", "line", "rule", "label", "fingerprint", "group", "note"]
LABELS = ("must", "debatable")
OFF_BY_DEFAULT = ("XLA008",)


@dataclass
class Tally:
    tp: int = 0
    fn: int = 0
    fp: int = 0

    def add(self, other: "Tally") -> None:
        self.tp += other.tp
        self.fn += other.fn
        self.fp += other.fp

    def recall(self) -> Optional[float]:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    def precision(self) -> Optional[float]:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None


@dataclass
class RepoScore:
    by_rule: dict = field(default_factory=lambda: defaultdict(Tally))
    misses: list = field(default_factory=list)  # (rule, [labels of the unit])
    false: list = field(default_factory=list)  # findings in files read that match no label
    unscored: int = 0  # findings outside the files read and off the labelled lines
    printed: int = 0

    def total(self, rules=None) -> Tally:
        t = Tally()
        for rule, tally in self.by_rule.items():
            if rules is None or rule in rules:
                t.add(tally)
        return t


# --- labels -----------------------------------------------------------------------------------

def read_labels(path: str) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for n, row in enumerate(rows, 2):
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            raise SystemExit(f"audit: {path}:{n}: missing column(s) {', '.join(missing)}")
        if row["label"] not in LABELS:
            raise SystemExit(f"audit: {path}:{n}: label must be one of {', '.join(LABELS)}, not {row['label']!r}")
        if not row["line"].isdigit():
            raise SystemExit(f"audit: {path}:{n}: line must be a positive integer, not {row['line']!r}")
        row["line"] = int(row["line"])
    return rows


def check_fingerprints(labels: list, root: str) -> None:
    """Labels are pinned to a commit: each fingerprint must be that of its line in the checkout."""
    lines = ledger.SourceLines(root)
    for row in labels:
        text = lines.line(row["path"], row["cell"], row["line"])
        if ledger.fingerprint(text) != row["fingerprint"]:
            raise SystemExit(f"audit: label {row['repo']} {row['path']}:{row['line']} {row['rule']}: its fingerprint "
                             f"{row['fingerprint']} is not that of the line at {row['commit'][:12]} "
                             f"({ledger.fingerprint(text)}: {text.strip()[:60]!r})")


# --- matching ---------------------------------------------------------------------------------

def match(findings: list, labels: list) -> dict:
    """For each label (by index), the finding it is matched to, or None.

    By path, cell, rule and fingerprint first, pairing in line order where a text repeats (nearest
    lines first), then by path, cell, rule and line."""
    found: dict = {i: None for i in range(len(labels))}
    taken: set = set()
    by_print: dict = defaultdict(list)
    for i, lab in enumerate(labels):
        by_print[(lab["path"], lab["cell"], lab["rule"], lab["fingerprint"])].append(i)
    groups: dict = defaultdict(list)
    for j, f in enumerate(findings):
        groups[(f.path, f.cell, f.code, f.fingerprint)].append(j)
    for key, idx in by_print.items():
        # The nearest (label, finding) pairs first, so that one finding is not taken by a farther label.
        pairs = sorted((abs(findings[j].line - labels[i]["line"]), labels[i]["line"], i, j)
                       for i in idx for j in groups.get(key, []))
        for _, _, i, j in pairs:
            if found[i] is None and j not in taken:
                found[i] = j
                taken.add(j)
    by_place = {}
    for j, f in enumerate(findings):
        if j not in taken:
            by_place.setdefault((f.path, f.cell, f.line, f.code), j)
    for i, lab in enumerate(labels):
        if found[i] is None:
            j = by_place.pop((lab["path"], lab["cell"], lab["line"], lab["rule"]), None)
            if j is not None:
                found[i] = j
                taken.add(j)
    return found


def score_repo(findings: list, labels: list, files_read: list, rules: Optional[set] = None) -> RepoScore:
    """Score one repository's findings (optionally only the given rules) against its labels."""
    if rules is not None:
        findings = [f for f in findings if f.code in rules]
        labels = [lab for lab in labels if lab["rule"] in rules]
    s = RepoScore(printed=len(findings))
    found = match(findings, labels)
    units: dict = defaultdict(list)
    for i, lab in enumerate(labels):
        if lab["label"] == "must":
            key = ("group", lab["rule"], lab["group"]) if lab["group"] else ("label", i)
            units[key].append(i)
    for idx in units.values():
        rule = labels[idx[0]]["rule"]
        if any(found[i] is not None for i in idx):
            s.by_rule[rule].tp += 1
        else:
            s.by_rule[rule].fn += 1
            s.misses.append((rule, [labels[i] for i in idx]))
    matched = {j for j in found.values() if j is not None}
    # a second finding of the same rule on a labelled line, its text unchanged (two subscripts of one
    # statement), is that line's anti-pattern again: neither a new true positive nor a false one
    labelled = {(lab["path"], lab["cell"], lab["line"], lab["rule"], lab["fingerprint"]) for lab in labels}
    read = set(files_read)
    for j, f in enumerate(findings):
        if j in matched or (f.path, f.cell, f.line, f.code, f.fingerprint) in labelled:
            continue
        if f.path in read:
            s.by_rule[f.code].fp += 1
            s.false.append(f)
        else:
            s.unscored += 1
    return s


# --- running ----------------------------------------------------------------------------------

def lint_extended(root: str, path: str, python: str, code_dir: str, jobs: Optional[int], rules: list) -> list:
    """xlalint's findings with rules that are off by default switched on (``--extend-select``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([code_dir, os.path.join(code_dir, "plugins")])
    env.setdefault("PJRT_DEVICE", "CPU")
    cmd = [python, "-m", "xlalint", "--isolated", "--no-cache", "--output-format", "json",
           "--extend-select", ",".join(rules), path]
    if jobs:
        cmd[3:3] = ["-j", str(jobs)]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"audit: xlalint printed no JSON in {root} (exit {proc.returncode}):\n{proc.stderr[-2000:]}")


def findings_for(spec: dict, args, root: str, extend: Optional[list]) -> list:
    name = spec["repo"].replace("/", "+")
    suffix = "~" + "+".join(extend) if extend else ""
    stem = f"{name}@{spec['commit'][:12]}{ledger.slug(spec['path'])}{suffix}"
    raw = os.path.join(args.workdir, "findings", stem + ".json")
    if args.reuse and os.path.exists(raw):
        with open(raw, encoding="utf-8") as f:
            rows = json.load(f)
    else:
        if args.reuse:
            print(f"audit: no earlier run of {spec['repo']}{suffix} in {args.workdir}: linting it", file=sys.stderr)
        print(f"linting {spec['repo']}{' with ' + ','.join(extend) if extend else ''} ...", file=sys.stderr, flush=True)
        code = os.path.abspath(args.code)
        if extend:
            rows = lint_extended(root, spec["path"], args.python, code, args.jobs, extend)
        else:
            rows = ledger.lint(root, spec["path"], args.python, code, args.jobs)
        os.makedirs(os.path.dirname(raw), exist_ok=True)
        with open(raw, "w", encoding="utf-8") as f:
            json.dump(rows, f)
    return ledger.findings_of(rows, root)


def run(specs: list, labels: list, args) -> list:
    """Check out, lint and score each repository: [(spec, default-rule score, off-by-default score)]."""
    results = []
    for spec in specs:
        mine = [lab for lab in labels if lab["repo"] == spec["repo"] and lab["commit"] == spec["commit"]]
        name = spec["repo"].replace("/", "+")
        root = os.path.join(args.workdir, "src", f"{name}@{spec['commit'][:12]}")
        ledger.checkout(args.mirror, spec["repo"], spec["commit"], root)
        check_fingerprints(mine, root)
        files = spec.get("files", [])
        default_rules = {lab["rule"] for lab in mine} | {f"XLA{n:03d}" for n in range(1, 12)}
        default_rules -= set(OFF_BY_DEFAULT)
        base = score_repo(findings_for(spec, args, root, None), mine, files, default_rules)
        extra_rules = sorted({lab["rule"] for lab in mine} & set(OFF_BY_DEFAULT))
        extra = None
        if extra_rules:
            extra = score_repo(findings_for(spec, args, root, extra_rules), mine, files, set(extra_rules))
        results.append((spec, base, extra))
    return results


# --- the report -------------------------------------------------------------------------------

def fmt(p: Optional[float]) -> str:
    return f"{p:.2f}" if p is not None else "-"


def report(results: list, show_lists: bool, show_heldout: bool) -> list:
    out = ["| repository | half | printed | unscored | TP | FN | FP | recall | precision |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for spec, base, _ in results:
        t = base.total()
        out.append(f"| {spec['repo']} | {spec['half']} | {base.printed} | {base.unscored} | {t.tp} | {t.fn} | {t.fp} "
                   f"| {fmt(t.recall())} | {fmt(t.precision())} |")
    for half in HALVES:
        rows = [(spec, base, extra) for spec, base, extra in results if spec["half"] == half]
        if not rows:
            continue
        out += ["", f"{half} half ({len(rows)} repositories), default rules:", "",
                "| rule | TP | FN | FP | recall | precision |", "|---|---:|---:|---:|---:|---:|"]
        rules: dict = defaultdict(Tally)
        for _, base, _ in rows:
            for rule, tally in base.by_rule.items():
                rules[rule].add(tally)
        total = Tally()
        for rule in sorted(rules):
            t = rules[rule]
            total.add(t)
            out.append(f"| {rule} | {t.tp} | {t.fn} | {t.fp} | {fmt(t.recall())} | {fmt(t.precision())} |")
        out.append(f"| **all** | **{total.tp}** | **{total.fn}** | **{total.fp}** | **{fmt(total.recall())}** "
                   f"| **{fmt(total.precision())}** |")
        extra: dict = defaultdict(Tally)
        for _, _, e in rows:
            if e is not None:
                for rule, tally in e.by_rule.items():
                    extra[rule].add(tally)
        for rule in sorted(extra):
            t = extra[rule]
            out.append(f"| {rule} (off by default, --extend-select) | {t.tp} | {t.fn} | {t.fp} | {fmt(t.recall())} "
                       f"| {fmt(t.precision())} |")
        misses = sum(len(b.misses) + (len(e.misses) if e else 0) for _, b, e in rows)
        false = sum(len(b.false) + (len(e.false) if e else 0) for _, b, e in rows)
        if not show_lists or (half == "heldout" and not show_heldout):
            hint = " (listed with --list)" if half == "dev" else " (never listed: held out)"
            out.append(f"\n{half}: {misses} misses, {false} findings in files read that match no label{hint}")
            continue
        out.append(f"\n{half}: {misses} misses:")
        for spec, base, e in rows:
            for score in (base, e):
                for rule, unit in (score.misses if score else []):
                    lines = ",".join(str(lab["line"]) for lab in unit)
                    out.append(f"  {spec['repo']} {unit[0]['path']}:{lines} {rule}  {unit[0]['note']}")
        out.append(f"{half}: {false} findings in files read that match no label:")
        for spec, base, e in rows:
            for score in (base, e):
                for f in (score.false if score else []):
                    out.append(f"  {spec['repo']} {f.path}:{f.line} {f.code}  {f.text[:90]}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ledger.add_run_arguments(ap, "XLALINT_AUDIT_DIR", "/tmp/xlalint-audit")
    ap.add_argument("--list", action="store_true", help="list the dev half's misses and unlabelled findings")
    ap.add_argument("--show-heldout-misses", action="store_true",
                    help="list the held-out half's too (for the labeller only)")
    ap.add_argument("--repos", default=os.path.join(HERE, "repos.json"), help=argparse.SUPPRESS)
    ap.add_argument("--labels", default=os.path.join(HERE, "labels.csv"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    try:
        with open(args.repos, encoding="utf-8") as f:
            specs = json.load(f)["repositories"]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"audit: cannot read {args.repos}: {e}")
    known = {(s["repo"], s["commit"]) for s in specs}
    labels = read_labels(args.labels)
    for lab in labels:
        if (lab["repo"], lab["commit"]) not in known:
            raise SystemExit(f"audit: label {lab['repo']}@{lab['commit'][:12]} {lab['path']}:{lab['line']} names a "
                             f"repository or commit that is not in {os.path.basename(args.repos)}")
    specs = [s for s in specs if args.half in ("all", s["half"])
             and (not args.repo or any(r in s["repo"] for r in args.repo))]
    results = run(specs, labels, args)
    print("\n".join(report(results, args.list or args.show_heldout_misses, args.show_heldout_misses)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
