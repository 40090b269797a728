"""Batch maxima in the syntax of a collate function: ``max(len(s) for s in batch)``, the batch's longest item
(``max(batch, key=...)``), a length call, and the length of a ``TensorDataset`` built from a literal size
(the rule ``variable_length`` asks them), a tokenizer call on one text of a collection, what a ``padding=``
value pads to, and a collator class's field defaults (``padding: Union[bool, str] = True`` of a dataclass)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics.syntax import (
    bindings, contains, dotted_name, keyword_arg, last_name, name_words, names_in, positional_args, string_value,
    target_names,
)


def is_batch_max(m, call: cst.Call) -> bool:
    """``max(len(x) for x in batch)``, ``max([len(x) ...])``, ``max(map(len, batch))``."""
    if not m.is_builtin(call.func, "max"):
        return False
    args = positional_args(call)
    if len(args) != 1:
        return False
    a = args[0]
    if type(a) in (cst.GeneratorExp, cst.ListComp):
        return is_len_call(a.elt)
    if type(a) is cst.Call and type(a.func) is cst.Name and a.func.value == "map":
        margs = positional_args(a)
        return bool(margs) and type(margs[0]) is cst.Name and margs[0].value == "len"
    return False


def is_longest_item(m, call: cst.Call) -> bool:
    """``max(batch, key=lambda s: s[0].size(1))`` / ``max(batch, key=len)`` / ``max(batch, key=func)`` with a
    local ``def func(p): return p[0].size(1)``: the longest item of the batch, whose size is the batch max."""
    if not m.is_builtin(call.func, "max") or len(positional_args(call)) != 1:
        return False
    key = keyword_arg(call, "key")
    if type(key) is cst.Name and key.value == "len":
        return True
    if type(key) is cst.Lambda:
        return is_len_call(key.body) or is_len_call(_first_subscript_base(key.body))
    if type(key) is cst.Name:
        local = m.func.local_funcs.get(key.value) if m.func is not None else None
        node = getattr(m.funcs.get(local) if local is not None else None, "node", None)
        body = node.body.body if node is not None and type(node.body) is cst.IndentedBlock else ()
        return any(type(st) is cst.SimpleStatementLine and type(st.body[0]) is cst.Return
                   and st.body[0].value is not None and is_len_call(st.body[0].value) for st in body)
    return False


def _first_subscript_base(e):
    return e.value if type(e) is cst.Subscript else e


def is_len_call(e) -> bool:
    """``len(x)``, ``x.size(0)``, ``x.shape[0]``."""
    return type(e) is cst.Call and (
        (type(e.func) is cst.Name and e.func.value == "len")
        or (type(e.func) is cst.Attribute and e.func.attr.value == "size")
    ) or (type(e) is cst.Subscript and type(e.value) is cst.Attribute and e.value.attr.value == "shape")


def dataset_length(m, call: cst.Call) -> Optional[int]:
    """``TensorDataset(torch.randn(100, 16), ...)`` -> 100."""
    if last_name(call.func) != "TensorDataset":
        return None
    args = positional_args(call)
    if not args or type(args[0]) is not cst.Call:
        return None
    q = m.qualname(args[0].func) or ""
    if not q.startswith("torch."):
        return None
    inner = positional_args(args[0])
    if q.endswith("randint"):
        inner = [a for a in inner if type(a) in (cst.Tuple, cst.List)]
    if not inner:
        return None
    first = inner[0]
    if type(first) in (cst.Tuple, cst.List) and first.elements:
        first = first.elements[0].value
    if type(first) is cst.Integer and first.value.isdigit():
        return int(first.value)
    return None


# the last word of a name that holds several texts, not one (`batch`, `chunk`; plurals by their final "s")
_SEVERAL = frozenset({"batch", "chunk", "group", "data", "corpus", "pair", "list"})


def names_one_text(name: str) -> bool:
    """``text``, ``prompt``, ``sentence``, ``src_line``: a name for one item, not ``texts``/``batch``."""
    words = name_words(name)
    if not words:
        return False
    w = words[-1]
    return w not in _SEVERAL and not (w.endswith("s") and not w.endswith("ss"))


def tokenizes_one_text(call: cst.Call, comps) -> bool:
    """The tokenizer call encodes one text of a collection into a list of encodings: ``[tokenizer(text,
    padding="longest") for text in strings]``. One text pads to its own length: nothing is padded (the
    batch's shape is decided where the encodings are batched). Not a loop that feeds each encoding to a
    model: there the text's own length is the input's shape, and padding to a fixed length is the fix.
    ``comps``: the comprehensions seen in this function."""
    args = positional_args(call)
    text = args[0] if args else keyword_arg(call, "text")
    if type(text) is not cst.Name or not names_one_text(text.value):
        return False
    for comp in comps:
        targets = set()
        f = comp.for_in
        while f is not None:
            if type(f.target) is cst.Name:
                targets.add(f.target.value)
            f = f.inner_for_in
        if text.value in targets and contains(comp.elt, call):
            return True
    return False




def literal_texts(a) -> bool:
    """A string, an f-string, or a non-empty list or tuple of strings: text written in the source."""
    if type(a) in (cst.List, cst.Tuple):
        return bool(a.elements) and all(string_value(e.value) is not None for e in a.elements)
    return string_value(a) is not None or type(a) is cst.FormattedString


def bindings_of(scope, name: str) -> list:
    """The values every plain assignment in ``scope`` (a function, not its nested ones) binds to ``name``;
    None among them when something else binds it (a parameter, a loop target, an augmented assignment)."""
    if type(scope) is not cst.FunctionDef:
        return []
    ps = scope.params
    if any(p.name.value == name for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)):
        return [None]
    return [value for target, value in bindings(scope.body) if any(x.value == name for x in target_names(target))]


def padded_before_its_loop(call: cst.Call, func_node, over_data) -> bool:
    """The call is a statement of the function's own body (not in a loop) that binds its result, and a loop of
    the same body after it uses that result while going over data (``over_data(loop)``: a loader's batches, or
    the rows a dataset's ``__iter__`` yields, as the semantic model says): everything is padded at once, to one
    length, and every batch or row has that one shape (BLIP's answer list tokenized before the evaluation loop;
    bigcode's prompts tokenized, then yielded row by row). Not a loop over the padded batch's own items (a
    server's prefill, called per request batch: each call pads to its own longest)."""
    body = getattr(getattr(func_node, "body", None), "body", ())
    for i, stmt in enumerate(body):
        if not contains(stmt, call):
            continue
        if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1 or type(stmt.body[0]) is not cst.Assign:
            return False
        names = {n.value for t in stmt.body[0].targets for n in target_names(t.target)}
        return bool(names) and any(type(later) in (cst.For, cst.While) and names & names_in(later) and over_data(later)
                                   for later in body[i + 1:])
    return False


def absent(node) -> bool:
    """No rounding: missing, ``None``, or ``8 if use_fp16 else None`` (None on TPUs, which have no fp16:
    the Hugging Face examples' idiom)."""
    if type(node) is cst.IfExp:
        return absent(node.body) or absent(node.orelse)
    return node is None or is_none(node)


def pads_to_longest(node) -> bool:
    if type(node) is cst.Name:
        return node.value == "True"
    if string_value(node) == "longest":
        return True
    return (dotted_name(node) or "").endswith("PaddingStrategy.LONGEST")


def self_field(node) -> Optional[str]:
    """``self.padding`` -> "padding"."""
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
        return node.attr.value
    return None


def field_defaults(cls: cst.ClassDef) -> dict:
    """A class's fields with their defaults, in order: ``padding: Union[bool, str] = True`` (a dataclass),
    ``padding = True`` at the class's top; a field without one maps to None."""
    out = {}
    body = cls.body.body if type(cls.body) is cst.IndentedBlock else ()
    for st in body:
        if type(st) is not cst.SimpleStatementLine:
            continue
        for small in st.body:
            if type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                out[small.target.value] = small.value
            elif type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                out[small.targets[0].target.value] = small.value
    return out


def field_padding(call: cst.Call, cls: str, fields: dict, built: list) -> Optional[str]:
    """How ``tokenizer.pad(..., padding=self.padding, pad_to_multiple_of=self.pad_to_multiple_of)`` in a method of
    ``cls`` pads, when the fields' defaults pad to the longest without a multiple and no construction of the class
    in this module gives them (``OurDataCollatorWithPadding(tokenizer)``), else None."""
    name = self_field(keyword_arg(call, "padding"))
    default = fields.get(name)
    if default is None or not pads_to_longest(default):
        return None
    multiple = keyword_arg(call, "pad_to_multiple_of")
    multiple_field = self_field(multiple)
    if not absent(multiple) and not (multiple_field is not None and absent(fields.get(multiple_field))):
        return None
    order = list(fields)
    short = cls.rpartition(".")[2]
    for c in built:
        if c.func.value != short:
            continue
        given = {order[i] for i, a in enumerate(positional_args(c)) if i < len(order)}
        given |= {a.keyword.value for a in c.args if a.keyword is not None}
        if any(a.star for a in c.args) or name in given or multiple_field in given:
            return None
    value = '"longest"' if string_value(default) == "longest" else "True"
    return f"pads with `padding={value}` (the default of `{short}.{name}`)"


def is_none(value) -> bool:
    return type(value) is cst.Name and value.value == "None"
