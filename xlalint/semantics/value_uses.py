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

from xlalint.semantics.syntax import dotted_name, last_name, names_in, own_nodes

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


# calls whose positional arguments are sizes (a tensor's methods, torch's factories, the builtin `range`), and
# `F.pad`'s widths
_SIZE_METHODS = frozenset({"view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "new_full",
                           "unflatten", "tile"})
_SIZE_FUNCTIONS = frozenset({"zeros", "ones", "empty", "rand", "randn", "arange", "range", "full"})
_PAD_FUNCTIONS = frozenset({"pad"})


def size_names(node) -> set:
    """The names a function uses as sizes: an argument of ``x.view(B, H, W, C)``, ``torch.zeros(n, d)``,
    ``range(n)``, a width of ``F.pad(x, (0, W % 2))``, alone or in arithmetic (``H * W``, ``H // 2``). A
    parameter used so is a Python int where the code is written for tensors (issue 32 cause 3: a Swin block's
    ``forward(self, x, H, W)``); reading one there would be the bug itself, so its other uses are not guessed."""
    out: set = set()
    for n in own_nodes(node.body) if type(node) is cst.FunctionDef else ():
        if type(n) is not cst.Call:
            continue
        func = n.func
        name = last_name(func)
        positional = [a.value for a in n.args if a.keyword is None and not a.star]
        if type(func) is cst.Attribute and name in _SIZE_METHODS:
            sizes = positional
        elif name in _SIZE_FUNCTIONS and (type(func) is cst.Name or dotted_name(func.value) == "torch"):
            sizes = positional[:1] if name == "full" else positional
        elif name in _PAD_FUNCTIONS and len(positional) > 1:
            sizes = [positional[1]]
        else:
            continue
        for s in sizes:
            for part in s.elements if type(s) in (cst.Tuple, cst.List) else [s]:
                out.update(_arithmetic_names(part.value if type(part) in (cst.Element, cst.StarredElement) else part))
    return out


def _arithmetic_names(e) -> set:
    if type(e) is cst.Name:
        return {e.value}
    if type(e) is cst.BinaryOperation:
        return _arithmetic_names(e.left) | _arithmetic_names(e.right)
    if type(e) is cst.UnaryOperation:
        return _arithmetic_names(e.expression)
    return set()
