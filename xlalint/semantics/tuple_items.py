"""What the items of a tuple are, position by position. A part of the semantic model (``model.SemanticModel``
composes it beside ``bindings.Bindings``, which asks it when a tuple is unpacked): the ``return`` statements or
the return annotation of a function of this module (``k, pad = _pad_to_block_size(...)`` returning
``Tuple[torch.Tensor, int]``), the summary of a function of another module (``windows, pad_hw =
window_partition(x, 14)``), the items a project generator yields (``x, y, state = next(it)``), and the tuples
appended to a local list (``for has_data, idx, out in results:``)."""

from __future__ import annotations

import libcst as cst

from xlalint.semantics import kinds as K
from xlalint.semantics.syntax import argument_for, dotted_name, positional_params

_ITEMS = "<items>"  # env key suffix: the kinds of a local list's appended tuples, position by position


class TupleItems:
    """The kinds of a tuple's items where the source shows them."""

    def annotated_parts(self, value, n: int):
        """The kinds of the ``n`` items of the tuple a call of a function of this module returns, from its
        return annotation (``-> Tuple[torch.Tensor, int]``), else from its ``return`` statements where they
        all agree (``return hidden, n_img``), else None."""
        if type(value) is not cst.Call:
            return None
        f = self._callee_of(value.func)
        returned = f.return_parts if f is not None else None
        if returned and len(returned) == n and not f.passes:
            from_returns = [K.UNKNOWN if p is None else p for p in returned]
        else:
            from_returns = None
        if f is None or (type(value.func) is not cst.Name and not f.key.endswith(".forward")):
            return from_returns
        node = f.node
        ann = node.returns.annotation if type(node) is cst.FunctionDef and node.returns is not None else None
        if type(ann) is not cst.Subscript or (dotted_name(ann.value) or "").rpartition(".")[2] not in ("Tuple", "tuple"):
            return from_returns
        items = [el.slice.value for el in ann.slice if type(el.slice) is cst.Index]
        if len(items) != n or len(ann.slice) != n or any(type(a) is cst.Ellipsis for a in items):
            return from_returns
        return [self._annotation_kind(a) for a in items]

    def handed_back_kinds(self, call, n: int) -> dict:
        """position -> the kind of the argument that a call of a function of this module hands back at that
        position of its ``n``-tuple (``passthrough.handed_back``): the caller's own list of flags stays a list."""
        if type(call) is not cst.Call:
            return {}
        f = self._callee_of(call.func)
        handed = f.return_handed if f is not None else None
        if not handed or len(handed) != n or any(a.star for a in call.args) or type(f.node) is not cst.FunctionDef:
            return {}
        names = positional_params(f.node)
        offset = 1 if f.class_key is not None and names[:1] in (["self"], ["cls"]) else 0
        out = {}
        for i, pi in enumerate(handed):
            if pi is None or pi < offset:
                continue
            arg = argument_for(call, pi - offset, names[pi])
            if arg is not None:
                out[i] = self.kind(arg)
        return out

    def project_parts(self, func, n: int):
        """The kinds of the ``n`` items of the tuple a function of another project module returns (its
        summary's ``return_parts``: ``windows, pad_hw = window_partition(x, 14)``), else None."""
        q = self.qualname(func) if self.facts is not None else None
        if q is None or not self.facts.knows(q):
            return None
        r = self.facts.resolve(q)
        parts = self.facts.return_parts(r[1]) if r is not None and r[0] == "func" else None
        return [K.UNKNOWN if p is None else p for p in parts] if parts and len(parts) == n else None

    def next_parts(self, value, n: int):
        """``x, y, state = next(loader)`` of a project generator that yields ``n``-tuples: each item as
        yielded (``kinds.generator_parts``), else None."""
        if type(value) is not cst.Call or not value.args or not self.is_builtin(value.func, "next"):
            return None
        parts = K.generator_parts(self.kind(value.args[0].value))
        return list(parts) if parts is not None and len(parts) == n else None

    def note_appended_items(self, container, value) -> None:
        """``results.append((False, idx, out))``: a local list of tuples keeps the kinds of each position, joined
        over its appends, so that ``for has_data, idx, out in results:`` binds a flag, not a tensor; likewise a
        list attribute of the method's object (``self.regularization_weight.append((weights, l1, l2))``, read as
        ``for weights, l1, l2 in self.regularization_weight:`` in another method)."""
        store, key = self._items_store(container)
        if store is None:
            return
        if type(value) is not cst.Tuple or any(type(e) is cst.StarredElement for e in value.elements):
            store[key] = False
            return
        parts = tuple(self.kind(e.value) for e in value.elements)
        before = store.get(key)
        if before is None:
            store[key] = parts
        elif before is not False:
            store[key] = (tuple(K.join(a, b) for a, b in zip(before, parts)) if len(before) == len(parts)
                          else False)

    def appended_items(self, iterable, n: int):
        """The kinds of the ``n`` positions of the tuples appended to a local list or to a list attribute of
        ``self`` (``note_appended_items``)."""
        store, key = self._items_store(iterable, reading=True)
        parts = store.get(key) if store is not None else None
        return parts if parts and len(parts) == n else None

    def _items_store(self, container, reading: bool = False):
        """Where the appended tuples' kinds of ``container`` are kept: the function's names (``results``), or
        its class's record (``self.weights``), with the key; (None, None) for anything else."""
        if type(container) is cst.Name:
            return (None, None) if self.func is self.top and not reading else (self.func.env, container.value + _ITEMS)
        if type(container) is cst.Attribute and type(container.value) is cst.Name and container.value.value == "self":
            cls = self.current_class()
            if cls is not None and cls in self.classes:
                return self.classes[cls].setdefault("items", {}), container.attr.value
        return None, None
