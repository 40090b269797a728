"""Rules: one module each, discovered (never a hand-kept list).

A rule is a class with its code, name, one-line summary, message, docs (ruff's sections) and its
VALID/INVALID examples, which are also its tests. It hooks into the one walk of the semantic model with
``on_<NodeType>(node)`` methods, asks the model the two questions (``self.model.kind(expr)``,
``self.model.is_tensor(expr)``; the step context is attached to every report) and reports with
``self.report(node, message, fix=...)``. ``{when}`` in a message becomes "every step" or
"every N steps" once the file is resolved.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import ClassVar

import libcst as cst


class Rule:
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    severity: ClassVar[str] = "warning"
    # ruff-style documentation sections
    what_it_does: ClassVar[str] = ""
    why_slow: ClassVar[str] = ""
    example: ClassVar[str] = ""
    use_instead: ClassVar[str] = ""
    known_problems: ClassVar[str] = ""
    verify: ClassVar[str] = ""
    # examples that are also tests: VALID must produce no finding of this rule; each INVALID at least one
    VALID: ClassVar[list] = []
    INVALID: ClassVar[list] = []
    # findings that are about a file as a whole (syntax errors) do not walk the tree
    walks: ClassVar[bool] = True
    # off unless selected (`--extend-select`), for rules whose precision on real code is below the others'
    on_by_default: ClassVar[bool] = True

    def __init__(self) -> None:
        self.model = None

    def report(self, node, message: str, fix: str = "", when: str = "step", *, cost: str = "", edit=None) -> None:
        """``message`` is the headline: what this expression does, and ``{when}``; ``cost`` what it costs
        on XLA (said per occurrence: "each time", since ``{when}`` says how often); ``fix`` how to fix
        it, in words. ``edit`` is an automatic fix: ``(node, replacement node, "safe" or "unsafe",
        title)``, a libcst transformation of this tree, optionally with a fifth item: more ``(node,
        replacement)`` pairs in the same function, applied with the first or not at all."""
        self.model.report(self, node, message, fix, when)
        if cost or edit is not None:
            set_parts(self.model.candidates[-1], cost=cost, edit=edit)

    def lazy_text(self, node, limit: int = 40) -> "_LazyText":
        """``text(node)``, rendered only if formatted (into a message): a rule that looks at every call
        pays for the rendering only for the ones it reports."""
        return _LazyText(self, node, limit)

    def text(self, node, limit: int = 40) -> str:
        """The source of ``node`` on one line, shortened to about ``limit`` characters, for a headline
        that names the expression: `` `loss.item()` ``, `` `….sum().item()` ``, `` `DataLoader(...)` ``."""
        code = " ".join(self.model.module.code_for_node(node).split())
        if len(code) <= limit:
            return code
        if type(node) is cst.Call:
            args = "()" if not node.args else "(...)"
            func = " ".join(self.model.module.code_for_node(node.func).split())
            if len(func) + len(args) <= limit:
                return func + args
            if type(node.func) is cst.Attribute:
                tail = f".{node.func.attr.value}{args}"
                return self.text(node.func.value, max(limit - len(tail), 8)) + tail
        if type(node) is cst.Attribute:
            tail = f".{node.attr.value}"
            return self.text(node.value, max(limit - len(tail), 8)) + tail
        return code[: limit - 1].rstrip() + "…"

    def before_rewalk(self) -> None:
        """The model is about to walk a function again with better-known parameters: drop any
        per-node memory that would stop the rule from reporting in it again."""

    def finalize(self) -> None:
        """Called once the whole file is walked and the step contexts are resolved."""

    # A rule whose findings depend on more than one module (XLA004: a step loop in one, the eval() it
    # reaches in another) reports ``when="custom"`` candidates, exports what it needs as plain data,
    # and decides over the whole project's call graph.
    decides_in_project: ClassVar[bool] = False

    def export(self, ctx_id, cand_id):
        """Plain data for ``resolve_project``: ``ctx_id(ctx)`` and ``cand_id(candidate)`` give the
        indices the project view knows them by."""
        return None

    @classmethod
    def resolve_project(cls, program, data: dict, cands: dict) -> None:
        """``data``: module -> what ``export`` gave; ``cands``: module -> its candidates (``Found``),
        whose ``frequency`` and ``message`` this may set. Unset custom candidates are not reported."""

    @classmethod
    def explain(cls) -> str:
        parts = [f"{cls.code} ({cls.name})", "", cls.summary.strip(), ""]
        for title, text in (
            ("What it does", cls.what_it_does),
            ("Why is this slow on XLA?", cls.why_slow),
            ("Known problems", cls.known_problems),
            ("Example", cls.example),
            ("Use instead", cls.use_instead),
            ("How --verify confirms it", cls.verify),
        ):
            if text.strip():
                parts += [f"## {title}", _dedent(text), ""]
        return "\n".join(parts).rstrip() + "\n"


def set_parts(candidate, *, message=None, cost=None, fix=None, edit=None) -> None:
    """Fill in a reported candidate later (rules that decide in ``finalize``)."""
    if message is not None:
        candidate.message = message
    if fix is not None:
        candidate.fix = fix
    if cost is not None:
        candidate.cost = cost
    if edit is not None:
        candidate.edit = edit


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text).strip("\n")


@lru_cache(maxsize=None)
def all_rules() -> tuple:
    """Every rule class in this package, sorted by code."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.code:
                if obj.code in found and found[obj.code] is not obj:
                    raise RuntimeError(f"two rules claim {obj.code}: {found[obj.code]} and {obj}")
                found[obj.code] = obj
    return tuple(found[c] for c in sorted(found))


def rules_by_code() -> dict:
    return {r.code: r for r in all_rules()}


class _LazyText:
    __slots__ = ("rule", "node", "limit")

    def __init__(self, rule, node, limit: int):
        self.rule, self.node, self.limit = rule, node, limit

    def __str__(self) -> str:
        return self.rule.text(self.node, self.limit)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)
