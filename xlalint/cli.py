"""Command line: arguments -> settings -> engine -> reporter. Nothing else lives here.

Exit status: 0 no findings, 1 findings, 2 a usage or config error or a path that does not exist.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional

from xlalint import __version__
from xlalint.config import ConfigError, build_settings, find_config
from xlalint.report import FORMATS, get_reporter
from xlalint.rules import all_rules, rules_by_code

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(value: str) -> list[str]:
    return [c.strip() for c in value.split(",") if c.strip()]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 2 with one line, like every CLI
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"xlalint: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="xlalint",
        description="Find PyTorch/XLA performance anti-patterns (host reads, recompiles) in the source.",
        epilog="Exit status: 0 clean, 1 findings, 2 usage/config error. `xlalint --explain XLA001` documents a rule.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories to lint (default: .); - reads standard input")
    sel = p.add_argument_group("rule selection")
    sel.add_argument("--select", type=_codes, action="append", metavar="CODES", help="comma-separated codes or prefixes to enable (XLA0, ALL); replaces the config's")
    sel.add_argument("--extend-select", type=_codes, action="append", metavar="CODES", help="codes or prefixes to enable on top of the selection")
    sel.add_argument("--ignore", type=_codes, action="append", metavar="CODES", help="codes or prefixes to disable")
    sel.add_argument("--per-file-ignores", action="append", metavar="GLOB:CODES", help="disable codes for files matching GLOB (repeatable)")
    files = p.add_argument_group("files")
    files.add_argument("--exclude", type=_codes, action="append", metavar="GLOBS", help="globs of paths to skip (replaces the defaults)")
    files.add_argument("--extend-exclude", type=_codes, action="append", metavar="GLOBS", help="globs of paths to skip, on top of the defaults")
    files.add_argument("--force-exclude", action="store_true", help="apply the exclude globs to paths given on the command line too (use in pre-commit)")
    files.add_argument("--stdin-filename", metavar="PATH", help="the name of the file read from standard input")
    files.add_argument("--config", metavar="FILE", help="a pyproject.toml (or xlalint.toml) to use instead of the nearest one")
    files.add_argument("--isolated", action="store_true", help="ignore every config file")
    files.add_argument("-j", "--jobs", type=int, default=0, metavar="N", help="lint with N processes (default: one per core)")
    files.add_argument("--no-cache", action="store_true", help="do not read or write the findings cache")
    files.add_argument("--cache-dir", metavar="DIR", help="where to keep the findings cache (default: .xlalint_cache at the project root)")
    out = p.add_argument_group("output")
    out.add_argument("--format", "--output-format", dest="format", choices=sorted(FORMATS), default="text", help="output format (default: text)")
    out.add_argument("--statistics", action="store_true", help="show the number of findings per code instead of the findings")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    out.add_argument("-q", "--quiet", action="store_true", help="print findings only: no summary line")
    out.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour the text output (default: auto, only on a terminal)")
    info = p.add_argument_group("information")
    info.add_argument("--version", action="version", version=f"xlalint {__version__}")
    info.add_argument("--list-rules", action="store_true", help="list every rule: code, name, summary")
    info.add_argument("--explain", metavar="CODE", help="show the full documentation of one rule")
    ver = p.add_argument_group("verify (needs the `verify` extra: torch and torch_xla)")
    ver.add_argument("--verify", metavar="TARGET", help="run TARGET (train.py or file.py::function) on an XLA device and confirm each finding with live counters; program arguments go after --")
    ver.add_argument("--max-steps", type=int, default=20, metavar="N", help="with --verify: stop after N steps (default 20)")
    ver.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="with --verify: stop the program after this long (default 300)")
    return p


def _flatten(lists) -> Optional[list]:
    if lists is None:
        return None
    return [c for group in lists for c in group]


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    program_args: list = []
    if "--" in argv:
        i = argv.index("--")
        argv, program_args = argv[:i], argv[i + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args, program_args)
    except ConfigError as e:
        print(f"xlalint: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("xlalint: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_ERROR


def _lint_files(files: list, settings, args, warn) -> list:
    """The files through the cache and the process pool (xlalint/parallel.py)."""
    if args.jobs < 0:
        raise ConfigError(f"--jobs must be a positive number (or 0 for one per core), got {args.jobs}")
    from xlalint import parallel
    from xlalint.cache import Cache

    cache = None if args.no_cache or not files else Cache.open(args.cache_dir, settings, warn)
    return parallel.lint_files(files, settings, jobs=args.jobs or None, cache=cache, warn=warn)


def _run(args, program_args: list) -> int:
    out = sys.stdout
    if args.list_rules:
        for r in all_rules():
            out.write(f"{r.code}  {r.name:<28} {r.summary}\n")
        return EXIT_CLEAN
    if args.explain:
        rule = rules_by_code().get(args.explain.strip().upper())
        if rule is None:
            known = ", ".join(r.code for r in all_rules())
            print(f"xlalint: error: unknown rule code {args.explain!r} (known: {known})", file=sys.stderr)
            return EXIT_ERROR
        out.write(rule.explain())
        return EXIT_CLEAN
    if args.verify:
        if args.max_steps <= 0:
            raise ConfigError(f"--max-steps must be a positive number, got {args.max_steps}")
        if args.timeout <= 0:
            raise ConfigError(f"--timeout must be a positive number of seconds, got {args.timeout}")
        try:
            from xlalint import verify
        except ImportError as e:  # pragma: no cover - the package ships verify
            raise ConfigError(f"--verify is unavailable: {e}") from None
        fmt = args.format if args.format in ("text", "json") else "text"
        return verify.run(args.verify, program_args + list(args.paths), max_steps=args.max_steps,
                          timeout=args.timeout, fmt=fmt, out=out)

    paths = args.paths or ["."]
    stdin_name = args.stdin_filename or "-"
    first = stdin_name if paths[0] == "-" and args.stdin_filename else paths[0]
    if args.isolated:
        config_path = None
    elif args.config:
        config_path = Path(args.config)
        if config_path.is_dir():
            raise ConfigError(f"--config: {args.config}: is a directory; give a file (its pyproject.toml or an xlalint.toml)")
        if not config_path.is_file():
            raise ConfigError(f"--config: {args.config}: no such file")
    else:
        config_path = find_config(first if first != "-" else ".")
    settings = build_settings(
        config_path,
        select=_flatten(args.select),
        ignore=_flatten(args.ignore),
        extend_select=_flatten(args.extend_select),
        exclude=_flatten(args.exclude),
        extend_exclude=_flatten(args.extend_exclude),
        per_file_ignores=args.per_file_ignores,
    )

    from xlalint import engine

    missing = [p for p in paths if p != "-" and not os.path.lexists(p)]
    warnings: list = []
    findings = []
    to_lint: list = []
    seen: set = set()
    n_files = 0
    for p in paths:
        if p in missing:
            continue
        if p == "-":
            if args.force_exclude and args.stdin_filename and settings.is_excluded(stdin_name):
                continue
            data = sys.stdin.buffer.read(settings.max_file_size + 1)
            if len(data) > settings.max_file_size:
                findings.append(engine.too_large(stdin_name, None, settings.max_file_size))
            else:
                findings.extend(engine.lint_source(data, stdin_name, settings.codes_for(stdin_name), limits=settings.limits))
            n_files += 1
            continue
        if args.force_exclude and settings.is_excluded(p):
            continue
        for f in engine.iter_python_files([p], settings, warn=warnings.append):
            key = os.path.realpath(f)
            if key in seen:  # given twice, or by name and inside a directory
                continue
            seen.add(key)
            n_files += 1
            to_lint.append(f)
    findings.extend(_lint_files(to_lint, settings, args, warnings.append))
    findings.sort()

    color = args.color == "always" or (args.color == "auto" and out.isatty() and not os.environ.get("NO_COLOR"))
    if args.statistics and args.format == "text":
        from xlalint.report.text import render_statistics

        render_statistics(findings, out, color=color)
    else:
        get_reporter(args.format).render(findings, out, color=color, root=settings.root)
    if args.format == "text" and not args.quiet and not args.statistics:
        from xlalint.report.text import render_summary

        render_summary(findings, n_files, out, color=color)
    out.flush()
    for w in warnings:
        print(f"xlalint: warning: {w}", file=sys.stderr)
    for p in missing:
        print(f"xlalint: error: {p}: no such file or directory", file=sys.stderr)
    if missing:
        return EXIT_ERROR
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN
