"""Command line: arguments -> settings -> the run (xlalint/run/) -> reporter. Nothing else lives here.

Exit status: 0 no findings, 1 findings, 2 a usage or config error, a path that does not exist, or an
internal error (XLA902: a bug in xlalint; every other finding is still reported).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional

from xlalint import __version__
from xlalint.config import ConfigError
from xlalint.report import FORMATS, get_reporter, printable
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
        epilog="Exit status: 0 clean, 1 findings, 2 usage/config error or an internal error (XLA902). `xlalint --explain XLA001` documents a rule.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories to lint (default: .); - reads standard input")
    sel = p.add_argument_group("rule selection")
    sel.add_argument("--select", type=_codes, action="append", metavar="CODES", help="comma-separated codes or prefixes to enable (XLA0, ALL); replaces the config's")
    sel.add_argument("--extend-select", type=_codes, action="append", metavar="CODES", help="codes or prefixes to enable on top of the selection")
    sel.add_argument("--ignore", type=_codes, action="append", metavar="CODES", help="codes or prefixes to disable")
    sel.add_argument("--extend-ignore", type=_codes, action="append", metavar="CODES", help="codes or prefixes to disable, on top of --ignore and the config's")
    sel.add_argument("--per-file-ignores", action="append", metavar="GLOB:CODES", help="disable codes for files matching GLOB (repeatable)")
    files = p.add_argument_group("files")
    files.add_argument("--exclude", type=_codes, action="append", metavar="GLOBS", help="globs of paths to skip (replaces the defaults)")
    files.add_argument("--extend-exclude", type=_codes, action="append", metavar="GLOBS", help="globs of paths to skip, on top of the defaults")
    files.add_argument("--force-exclude", action="store_true", help="apply the exclude globs to paths given on the command line too, and to their parent directories (use in pre-commit)")
    files.add_argument("--respect-gitignore", dest="respect_gitignore", action="store_true", default=None, help="skip files that .gitignore ignores when walking a directory (the default)")
    files.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false", help="lint them too")
    files.add_argument("--stdin-filename", metavar="PATH", help="read standard input and report it under this name (with no PATH, or with -)")
    files.add_argument("--config", metavar="FILE", help="a pyproject.toml (or xlalint.toml) to use instead of the nearest one")
    files.add_argument("--isolated", action="store_true", help="ignore every config file")
    files.add_argument("-j", "--jobs", type=int, default=0, metavar="N", help="lint with N processes (default: one per core)")
    files.add_argument("--no-cache", action="store_true", help="do not read or write the findings cache (with --verify: do not keep what was measured for the editor's hover)")
    files.add_argument("--cache-dir", metavar="DIR", help="where to keep the findings cache and --verify's measurements (default: .xlalint_cache at the project root)")
    out = p.add_argument_group("output")
    out.add_argument("--format", "--output-format", dest="format", choices=sorted(FORMATS), default="full", help="output format (default: full: each finding with its source lines; concise: one line each)")
    out.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE instead of standard output")
    out.add_argument("--statistics", action="store_true", help="show the number of findings per code instead of the findings (also with --format json)")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    out.add_argument("-q", "--quiet", action="store_true", help="print findings only: no summary line")
    out.add_argument("--show-internal-errors", action="store_true", help="print the traceback of each internal error (XLA902) on standard error, for a bug report (also XLALINT_DEBUG=1)")
    out.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour the text output (default: auto: on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it)")
    fix = p.add_argument_group("fixes")
    fix.add_argument("--fix", action="store_true", help="apply the safe fixes ([*] in the output) to the files, then report what is left")
    fix.add_argument("--unsafe-fixes", action="store_true", help="apply the unsafe fixes too (with --fix or --diff)")
    fix.add_argument("--diff", action="store_true", help="print the fixes as a unified diff instead of writing them; exit 1 if there is one")
    info = p.add_argument_group("information")
    info.add_argument("-V", "--version", action="version", version=f"xlalint {__version__}")
    info.add_argument("--list-rules", action="store_true", help="list every rule: code, name, summary")
    info.add_argument("--explain", metavar="RULE", help="show the full documentation of one rule, by code (XLA001) or name (host-read)")
    ver = p.add_argument_group("verify (needs the `verify` extra: torch and torch_xla)")
    ver.add_argument("--verify", metavar="TARGET", help="run TARGET (train.py or file.py::function) on an XLA device and confirm each finding with live counters; program arguments go after --")
    ver.add_argument("--max-steps", type=int, default=20, metavar="N", help="with --verify: stop after N steps (default 20)")
    ver.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="with --verify: stop the program after this long (default 300)")
    ver.add_argument("--html", metavar="FILE", help="with --verify: also write the report as one self-contained HTML page")
    ver.add_argument("--fix-impact", action="store_true", help="with --verify: also run the program with each available fix applied (in memory; the files are never written) and report the median ms per step before and after")
    return p


def _flatten(lists) -> Optional[list]:
    if lists is None:
        return None
    return [c for group in lists for c in group]


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["server"]:  # `xlalint server`: the language server (xlalint/server.py); lint a
        from xlalint.server import main as server_main  # directory named server as ./server

        return server_main(argv[1:])
    program_args: list = []
    if "--" in argv:
        i = argv.index("--")
        argv, program_args = argv[:i], argv[i + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args, program_args)
    except ConfigError as e:
        print(f"xlalint: error: {printable(str(e))}", file=sys.stderr)
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
    """The files through the cache and the process pool (xlalint/run/)."""
    if args.jobs < 0:
        raise ConfigError(f"--jobs must be a positive number (or 0 for one per core), got {args.jobs}")
    from xlalint.run.cache import Cache
    from xlalint.run.project import lint_files

    cache = None if args.no_cache or not files else Cache.open(args.cache_dir, settings, warn)
    from xlalint.run.files import anchors_for

    # a plain folder named is one project; files named alone in one belong to the current directory's
    folders = anchors_for(files, [p for p in (args.paths or ["."]) if p != "-" and os.path.isdir(p)])
    return lint_files(files, settings, jobs=args.jobs or None, cache=cache, warn=warn, folders=folders)


VERIFY_MISSING = (
    "the program runs under torch_xla, which is not installed here ({reason}). Install the "
    "`verify` extra: `pip install '.[verify]'` in a clone of xlalint (torch 2.9.0 and torch-xla 2.9.0, "
    "about 7 GB on Linux x86_64 because torch's default wheel brings its CUDA libraries). torch-xla "
    "publishes wheels for Linux x86_64 (CPython 3.10-3.13) only: on macOS or Windows run --verify in a "
    "Linux container or VM; the static checks work everywhere"
)


def _explain(name: str, out) -> int:
    key = name.strip()
    rule = rules_by_code().get(key.upper()) or next((r for r in all_rules() if r.name == key.lower()), None)
    if rule is None:
        known = ", ".join(f"{r.code} ({r.name})" for r in all_rules())
        print(f"xlalint: error: unknown rule {name!r} (known: {known})", file=sys.stderr)
        return EXIT_ERROR
    out.write(rule.explain())
    return EXIT_CLEAN


def _use_color(args, out) -> bool:
    if args.color != "auto":
        return args.color == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return not args.output_file and out.isatty()


def _run(args, program_args: list) -> int:
    out = sys.stdout
    if args.list_rules:
        for r in all_rules():
            out.write(f"{r.code}  {r.name:<28} {r.summary}\n")
        return EXIT_CLEAN
    if args.explain:
        return _explain(args.explain, out)
    if args.fix_impact and not args.verify:
        raise ConfigError("--fix-impact measures fixes in a --verify run: give --verify TARGET too")
    if args.verify:
        if args.max_steps <= 0:
            raise ConfigError(f"--max-steps must be a positive number, got {args.max_steps}")
        if args.timeout <= 0:
            raise ConfigError(f"--timeout must be a positive number of seconds, got {args.timeout}")
        import importlib.util

        for mod in ("torch", "torch_xla"):
            try:
                found = importlib.util.find_spec(mod) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                # the verify report's own first words, so that a hook's log names what it tried to run
                print(f"xlalint --verify {args.verify}: cannot run it: "
                      + VERIFY_MISSING.format(reason=f"no module named {mod!r}"), file=sys.stderr)
                return EXIT_ERROR
        from xlalint import verify

        fmt = args.format if args.format == "json" else "text"
        return verify.run(args.verify, program_args + list(args.paths), max_steps=args.max_steps,
                          timeout=args.timeout, fmt=fmt, out=out, html=args.html, fix_impact=args.fix_impact,
                          remember=not args.no_cache, cache_dir=args.cache_dir)

    from xlalint.analysis.file_findings import INTERNAL_ERROR, SHOW_TRACEBACKS, problem_finding
    from xlalint.analysis.source import lint_source
    from xlalint.config import Resolver
    from xlalint.sources.discover import iter_python_files
    from xlalint.sources.read import too_large

    if args.show_internal_errors:
        SHOW_TRACEBACKS["on"] = True
    # `--stdin-filename NAME` with no path reads standard input, as in ruff
    paths = args.paths or (["-"] if args.stdin_filename else ["."])
    stdin_name = args.stdin_filename or "-"
    if args.config and not args.isolated:
        config_path = Path(args.config)
        if config_path.is_dir():
            raise ConfigError(f"--config: {args.config}: is a directory; give a file (its pyproject.toml or an xlalint.toml)")
        if not config_path.is_file():
            raise ConfigError(f"--config: {args.config}: no such file")
    else:
        config_path = None
    resolver = Resolver(
        dict(
            select=_flatten(args.select),
            ignore=_flatten(args.ignore),
            extend_select=_flatten(args.extend_select),
            extend_ignore=_flatten(args.extend_ignore),
            exclude=_flatten(args.exclude),
            extend_exclude=_flatten(args.extend_exclude),
            per_file_ignores=args.per_file_ignores,
            respect_gitignore=args.respect_gitignore,
        ),
        config=config_path,
        isolated=args.isolated,
    )

    missing = [p for p in paths if p != "-" and not os.path.lexists(p)]
    warnings: list = []
    findings = []
    sources: dict = {}  # path -> text, for the code frames and fixes of standard input
    groups: dict = {}  # settings -> files (each file linted with its nearest config's settings)
    seen: set = set()
    n_files = 0
    for p in paths:
        if p in missing:
            continue
        if p == "-":
            settings = resolver.for_path(stdin_name if args.stdin_filename else ".")
            if args.force_exclude and args.stdin_filename and settings.is_excluded(stdin_name, ancestors=True):
                continue
            data = sys.stdin.buffer.read(settings.max_file_size + 1)
            if len(data) > settings.max_file_size:
                findings.append(problem_finding(too_large(None, settings.max_file_size), stdin_name))
            else:
                sources[stdin_name] = data
                findings.extend(lint_source(data, stdin_name, settings.codes_for(stdin_name), limits=settings.limits))
            n_files += 1
            continue
        if args.force_exclude and resolver.for_path(p).is_excluded(p, ancestors=True):
            continue
        for f in iter_python_files([p], resolver, warn=warnings.append):
            key = os.path.realpath(f)
            if key in seen:  # given twice, or by name and inside a directory
                continue
            seen.add(key)
            n_files += 1
            groups.setdefault(id(s := resolver.for_path(f)), (s, []))[1].append(f)
    for settings, files in groups.values():
        findings.extend(_lint_files(files, settings, args, warnings.append))
    findings.sort()

    if args.fix or args.diff:
        from xlalint import fix as fixer

        before = findings
        findings, status, changed, line_maps = fixer.run(findings, sources, resolver, args, out, warnings.append)
        if args.diff:
            _flush_warnings(warnings, missing)
            return EXIT_ERROR if missing or any(f.code == INTERNAL_ERROR for f in findings) else status
        if changed:  # what is left in the rewritten files, seen as part of their project again
            findings = [f for f in findings if f.path not in changed]
            for settings, files in groups.values():
                redo = [f for f in files if f in changed]
                if redo:
                    findings.extend(_lint_files(redo, settings, args, warnings.append))
            findings.sort()
            args.fixed, args.introduced = fixer.account([f for f in before if f.path in changed],
                                                        [f for f in findings if f.path in changed], line_maps)

    report_out = out
    if args.output_file:
        try:
            report_out = open(args.output_file, "w", encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"-o/--output-file: cannot write {args.output_file}: {e.strerror or e}") from None
    try:
        _report(findings, n_files, missing, args, report_out, sources, resolver)
    finally:
        if report_out is not out:
            report_out.close()
    out.flush()
    _flush_warnings(warnings, missing)
    if missing or any(f.code == INTERNAL_ERROR for f in findings):
        return EXIT_ERROR
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _flush_warnings(warnings: list, missing: list) -> None:
    for w in warnings:
        print(f"xlalint: warning: {printable(w)}", file=sys.stderr)
    for p in missing:
        print(f"xlalint: error: {printable(p)}: no such file or directory", file=sys.stderr)


def _report(findings, n_files, missing, args, out, sources, resolver) -> None:
    from xlalint.report import text

    color = _use_color(args, out)
    fmt = args.format
    unsafe = bool(args.unsafe_fixes)
    if args.statistics:
        if fmt == "json":
            text.render_statistics_json(findings, out, unsafe=unsafe)
        else:
            text.render_statistics(findings, out, color=color, unsafe=unsafe)
    elif fmt in ("full", "concise", "text"):
        text.render(findings, out, color=color, full=fmt == "full", sources=sources, unsafe=unsafe)
    else:
        root = resolver.for_path(".").root
        get_reporter(fmt).render(findings, out, color=color, root=root)
    if fmt in ("full", "concise", "text") and not args.quiet and not args.statistics:
        text.render_summary(findings, n_files, out, color=color, missing=missing, unsafe=unsafe,
                            fixed=len(getattr(args, "fixed", ())), introduced=getattr(args, "introduced", ()))
