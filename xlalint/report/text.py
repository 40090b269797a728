"""``path:line:col: CODE message``, like flake8 and ruff's concise output; colour only on a terminal."""

from __future__ import annotations

from collections import Counter

BOLD, RED, CYAN, RESET, DIM = "\033[1m", "\033[31m", "\033[36m", "\033[0m", "\033[2m"


def render(findings, out, *, color: bool = False, root=None) -> None:
    for f in findings:
        if f.cell is not None:  # a notebook: notebook.ipynb:cell 4:12:5
            path = f"{f.path}{CYAN}:{RESET}cell {f.cell}" if color else f"{f.path}:cell {f.cell}"
        else:
            path = f.path
        if color:
            out.write(f"{BOLD}{path}{RESET}{CYAN}:{RESET}{f.line}{CYAN}:{RESET}{f.column}{CYAN}:{RESET} "
                      f"{BOLD}{RED}{f.code}{RESET} {f.message}\n")
        else:
            out.write(f"{path}:{f.line}:{f.column}: {f.code} {f.message}\n")


def render_statistics(findings, out, *, color: bool = False) -> None:
    counts = Counter((f.code, f.name) for f in findings)
    for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        out.write(f"{n:>5}\t{code}\t{name}\n")


def render_summary(findings, n_files: int, out, *, color: bool = False) -> None:
    if findings:
        s = "s" if len(findings) != 1 else ""
        out.write(f"Found {len(findings)} finding{s} in {n_files} file{'s' if n_files != 1 else ''} checked.\n")
    else:
        out.write(f"All checks passed ({n_files} file{'s' if n_files != 1 else ''} checked).\n")
