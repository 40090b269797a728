"""XLA902 internal-error: xlalint itself failed on the file (a bug in xlalint, not in the file)."""

from xlalint.rules import Rule


class InternalErrorRule(Rule):
    code = "XLA902"
    name = "internal-error"
    summary = "xlalint failed on the file (a bug in xlalint): one rule or phase was skipped, the rest was checked."
    severity = "error"
    walks = False
    what_it_does = """
        Reports an exception inside xlalint while it linted the file: in a rule (its walk of the
        module, or its decision over the whole project), in the project pass for the module, in
        mapping a notebook's cells, or in a fix. The message names the rule or the phase and the
        exception. Every other finding of the run is still reported, the findings cache keeps
        nothing of the file, and the exit status is 2. `--show-internal-errors` (or the environment
        variable `XLALINT_DEBUG=1`) prints the traceback on standard error.
    """
    why_slow = """
        It is not slow: it is unchecked. The rule or phase named in the message did not run on this
        file, so its findings there may be missing.
    """
    known_problems = """
        It is always a bug in xlalint: please report it with the file (or the smallest part of it
        that still shows the error) and the traceback of `--show-internal-errors`.
    """
