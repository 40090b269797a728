"""Where does a value go? Within one function: into something that may consume it, or only to inspections.

A rule that finds a costly value (a batch padded to its own longest example) asks whether the value can
reach what makes it costly: a model, a device, the function's caller. This follows the names a function
binds, over the walk: a name's value *may be consumed* when it (or a name built from it) is passed to a call
that is not a known inspection, moved to a device (``.to(...)``, ``.cuda()``), returned or yielded, or
stored into a container or an attribute. A value used only by inspections (``len``, ``.shape``,
``torch.equal``, ``tokenizer.batch_decode``, logging) never reaches a model: diffusers' truncation check
(``untruncated_ids = tokenizer(prompt, padding="longest").input_ids`` compared with the ids the model gets).
Unknown calls count as consumers: the answer errs towards "may be consumed".
"""

from __future__ import annotations

import libcst as cst

from xlalint.semantics.syntax import last_name, names_in

# calls that only look at their arguments
_INSPECTING_BUILTINS = frozenset({"len", "print", "isinstance", "repr", "str", "type", "id", "hash", "bool", "format"})
_INSPECTING_FUNCTIONS = frozenset({"torch.equal", "torch.allclose", "torch.is_tensor", "torch.numel"})
_INSPECTING_METHODS = frozenset({"decode", "batch_decode", "convert_ids_to_tokens", "warning", "warn", "info",
                                 "debug", "error", "log", "write", "set_description", "set_postfix"})
# methods that move their receiver to a device
_MOVES = frozenset({"to", "cuda", "pin_memory"})


class ValueUses:
    """Per function (by ``id`` of its record): the names values were built from, and the names whose value
    may be consumed."""

    def __init__(self) -> None:
        self._sources: dict = {}  # (function id, name) -> the names its value was built from
        self._consumed: set = set()  # (function id, name)

    def assigned(self, fid: int, name: str, value) -> None:
        """``name = value``: what reaches ``name``'s consumers reaches those of the names in ``value``."""
        self._sources.setdefault((fid, name), set()).update(names_in(value))

    def leaves(self, fid: int, value) -> None:
        """``value`` leaves the function or is kept beyond it: returned, yielded, stored into a container or
        an attribute."""
        self._consumed.update((fid, n) for n in names_in(value))

    def called(self, model, fid: int, node: cst.Call) -> None:
        """A call: its arguments may be consumed unless it only inspects them; ``x.to(device)`` consumes ``x``."""
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in _MOVES:
            self._consumed.update((fid, n) for n in names_in(func.value))
        if self._inspects(model, func):
            return
        for a in node.args:
            self._consumed.update((fid, n) for n in names_in(a.value))

    @staticmethod
    def _inspects(model, func) -> bool:
        if type(func) is cst.Name:
            return func.value in _INSPECTING_BUILTINS and model.is_builtin(func, func.value)
        q = model.qualname(func)
        if q is not None:
            return q in _INSPECTING_FUNCTIONS or q.startswith("logging.")
        return type(func) is cst.Attribute and last_name(func) in _INSPECTING_METHODS

    def may_be_consumed(self, fid: int, name: str) -> bool:
        """The value bound to ``name`` in the function, or a value built from it, may be consumed."""
        seen, todo = set(), [name]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if (fid, n) in self._consumed:
                return True
            todo.extend(t for (f, t), srcs in self._sources.items() if f == fid and n in srcs)
        return False
