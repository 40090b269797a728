"""XLA900 syntax-error and XLA901 unreadable-file: the file itself could not be linted."""

from xlalint.rules import Rule


class SyntaxErrorRule(Rule):
    code = "XLA900"
    name = "syntax-error"
    summary = "The file does not parse as Python (or is not valid UTF-8), so nothing in it was checked."
    severity = "error"
    walks = False
    what_it_does = """
        Reports files that do not parse or that CPython would not compile (its own `compile` runs
        on every file, nothing is executed): syntax errors, `return`/`yield`/`await` outside a
        function, `break` outside a loop, duplicate arguments, bytes that are not valid in the file's
        encoding, NUL bytes. The message and the location are CPython's.
    """
    why_slow = """
        It is not slow: it is unchecked. Every other rule needs a parse tree, so a file that does not
        parse may hide any of the other findings.
    """
    example = """
        for x, y in loader
            loss = model(x)
    """
    use_instead = """
        for x, y in loader:
            loss = model(x)
    """


class UnreadableFileRule(Rule):
    code = "XLA901"
    name = "unreadable-file"
    summary = "The file could not be read (permissions, a broken link, or over the size limit)."
    severity = "error"
    walks = False
    what_it_does = """
        Reports a path that was given or found but could not be read: permission denied, a dangling
        symlink, a file larger than `max-file-size` (default 1 MB) or with more than `max-tokens`
        tokens (default 64,000; a string or a comment is one token). Such files are almost always
        generated tables, and libcst's syntax tree costs about 3.5 KB of memory per token. Also
        "too complex to analyse": a statement nested deeper than `max-expression-depth` (500) or
        deep statements over `max-nesting-cost`, whose parse would take minutes or gigabytes.
    """
    why_slow = """
        It is not slow: it is unchecked.
    """
