"""Which Python ints change from step to step: the fact XLA009 needs, inferred from the model's walk.

A value varies per step when it is (in the function that runs the loop, flow-ordered like the model's
own bindings):
- the counter of a loop: ``for step in range(n)``, ``for i, batch in enumerate(loader)``, a name
  incremented by a literal inside the loop (``global_step += 1``);
- derived from one by arithmetic (``n = step * 2 + 1``), ``int()``/``abs()``/``round()`` of one;
- an item of a Python list (not a tensor) indexed by one (``lengths[step]``).
- a length read from the loop's batch: ``len(...)`` of a Python value taken from what the loop iterates
  (``len(batch["tokens"])``, ``len(sample)``), the longest/shortest/total of those (``max(len(s) for s in
  batch)``, ``max(lengths)`` of a Python list the batch holds); ``len()`` of a tensor is its ``size(0)``:
  fixed for a fixed-shape input, not reported;
- read from a device tensor's values (``Varying.data``): ``(lengths - 1).tolist()``, ``t.item()``,
  ``int(t)``, and ``max()``/``min()``/``sum()`` of such a list: it varies on every step where the line runs
  (the host read itself is XLA001's);
- a parameter of a function (``Varying.param``): it varies when a caller passes a varying value, which
  only the whole program knows (XLA009 decides it in ``resolve_project`` from the call sites it exports).
It does not vary (or takes few values: a bounded number of graphs) when it is a literal, a name never
rebound inside the loop, ``v % K`` with a literal ``K <= BUCKET_LIMIT`` (K values), ``min(v, K)``/
``max(v, K)``, or an item of a literal list of at most BUCKET_LIMIT ints. Each varying name remembers the
loop that makes it vary; whether that loop is a step loop is the model's answer, known after the walk
(``model.is_step_loop``).

Fed only by the model's public answers (``kind``, ``step_context``); the model itself is not changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.growth import Scan, grown_dim, grown_in, int_literal, returns_grown
from xlalint.semantics.syntax import (
    assigned_names, child_nodes, measured_lengths, names_in, positional_params, target_names,
)


@dataclass(frozen=True)
class Varying:
    loop: cst.CSTNode  # the For/While node whose iterations change the value
    name: str  # the name the user sees (`step`, `n`)
    origin: str  # how it varies, for the message: "the loop counter", "derived from `step`", ...
    param: Optional[str] = None  # set when it derives from this parameter of the function (loop is None)
    data: bool = False  # read from a device tensor's values (`.tolist()`, `int(t)`): varies wherever it runs per step


# At most this many distinct values (`step % K`, a literal list of K ints) is a bucket set: K graphs
# compiled once each, then cached. More values are reported.
BUCKET_LIMIT = 16

# Calls that keep an int varying: int(step), abs(i - j), round(x)
_PASS_THROUGH = frozenset({"int", "abs", "round"})
# A device tensor's values read into Python: data, so a new value on every step where the line runs
_HOST_READ_METHODS = frozenset({"tolist", "item"})
_HOST_CONVERSIONS = frozenset({"int"})
# Reductions of a per-batch Python list of lengths: max(lengths), max(len(s) for s in batch)
_REDUCTIONS = frozenset({"max", "min", "sum"})
# Kinds whose len() is not a per-batch length: a tensor (its size(0)) or a container of tensors (its fields)
_NOT_A_LENGTH = K.ANY_TENSOR | K.HOLDS_DEVICE_TENSOR | frozenset({K.CPU_TENSORS, K.MODULE, K.LOADER, K.CPU_LOADER})


class StepValues:
    def __init__(self, model) -> None:
        self.model = model
        self._names: dict = {}  # (func key, name) -> Varying
        self._int_lists: dict = {}  # (func key, name) -> number of literal ints
        # (func key, name): a sequence of distinct Python ints, one per position (`times = list(reversed(
        # torch.linspace(-1, T - 1, steps=n + 1).int().tolist()))`, `list(range(T))`): a loop over it binds a new
        # int on every iteration, as a loop over `range` does
        self._int_seqs: dict = {}  # and how many ints each item holds (a `zip` of such: its width)
        self._grids: set = set()  # (func key, name): last bound to a `torch.linspace`/`torch.arange` (``_grid``)
        self._data: dict = {}  # (func key, name) -> the loop whose iterations bind it (a batch, a sample)
        self._params: dict = {}  # func key -> its parameter names (seeded as varying by a caller)
        self._cut_loops: set = set()  # id() of loop nodes whose body reads a device value to the host
        self._cut_funcs: set = set()  # keys of the functions that read a device value to the host
        self._chunk_loops: set = set()  # id() of `for start in range(0, n, chunk)` loop nodes
        self._reseed = False
        # (func key, name) -> (loop node, dim, call): a tensor the loop grows by concatenating to itself
        # (`ids = torch.cat([ids, nxt], dim=-1)`: its size along `dim` changes every iteration; call None),
        # or a KV cache it passes to a model call and takes back from what the call returns (`call`, the
        # model call that extends it; dim None)
        self._growing: dict = {}
        self._measured: set = set()  # of those, the ones a `while` test measures (not seen growing by a `cat`)

    # ------------------------------------------------------------------ events from the walk
    def on_for(self, node: cst.For) -> None:
        """Called before the loop's body is walked (the loop is not on the model's stack yet)."""
        key = self._key()
        it, target = self.model.loop_iterable(node.iter), node.target
        self._forget(target, key)
        self._bind_data(node, target, it, key)
        it = self._unwrapped(it)
        items = self._sequence_items(it, key)
        if items is not None and type(target) in (cst.Name, cst.Tuple, cst.List):
            # `for time, time_next in tqdm(time_pairs)` over `list(zip(times[:-1], times[1:]))` of such ints
            names = [target] if type(target) is cst.Name else [e.value for e in target.elements]
            if type(target) is cst.Name or len(names) == items:
                for n in names:
                    if type(n) is cst.Name:
                        self._names[(key, n.value)] = Varying(node, n.value, "an item of a sequence of ints the loop goes over")
        if type(it) is cst.Call and type(it.func) is cst.Name:
            fn = it.func.value
            if fn == "range" and type(target) is cst.Name and _is_builtin(self.model, fn):
                self._names[(key, target.value)] = Varying(node, target.value, "the loop counter")
                self._carried(node, key, target.value)
                if len(it.args) == 3 and int_literal(it.args[2].value) not in (1, -1):
                    self._chunk_loops.add(id(node))
            elif fn == "enumerate" and _is_builtin(self.model, fn) and type(target) in (cst.Tuple, cst.List):
                first = target.elements[0].value if target.elements else None
                if type(first) is cst.Name:
                    self._names[(key, first.value)] = Varying(node, first.value, "the loop counter")
                # `for batch, i in enumerate(range(0, n, bptt))`: the range's item is a counter too
                inner = self._unwrapped(it.args[0].value) if it.args else None
                second = target.elements[1].value if len(target.elements) == 2 else None
                if (type(inner) is cst.Call and type(inner.func) is cst.Name and inner.func.value == "range"
                        and _is_builtin(self.model, "range") and type(second) is cst.Name):
                    self._names[(key, second.value)] = Varying(node, second.value, "the loop counter")

    def on_loop(self, node) -> None:
        """Before a ``for``/``while`` body is walked: the tensors it grows by concatenating to themselves."""
        key = self._key()
        own = {x.value for x in target_names(node.target)} if type(node) is cst.For else set()
        keywords = T.CACHE_KEYWORDS
        if any(str(q).partition(".")[0] == "transformers" for q in self.model.imports.values()):
            keywords = keywords | T.TRANSFORMERS_CACHE_KEYWORDS
        for name, (dim, call) in grown_in(node.body, own, Scan(keywords, self._helper_growth)):
            self._growing[(key, name)] = (node, dim, call)
        if type(node) is cst.While:
            # `while prefix.shape[1] < T:` that rebinds `prefix`: the loop ends only once that length reaches the
            # bound, so it changes from one iteration to the next (a speculative round keeps a varying prefix)
            rebound = assigned_names(node.body)
            for name, dim in measured_lengths(node.test).items():
                if name in rebound and (key, name) not in self._growing \
                        and self.model.name_kind(name) not in (K.NOT_TENSOR, K.CPU_TENSOR, K.CPU_TENSORS):
                    self._growing[(key, name)] = (node, dim, None)
                    self._measured.add((key, name))
        for name in _advanced_in(node.body) - own:
            # `while cur < total: model(tokens[:, :cur]) ... cur += 1`: the body's earlier lines read the value
            # the last iteration advanced (a Python int: a tensor position is data, `on_aug_assign`)
            if self.model.name_kind(name) not in K.ANY_TENSOR | K.HOLDS_DEVICE_TENSOR:
                self._names[(key, name)] = Varying(node, name, "a counter advanced every iteration")

    def _helper_growth(self, call: cst.Call) -> dict:
        """What a call of a function of this module returns grown (``def append(ids, t): return torch.cat([ids,
        t], dim=1)``): argument position or keyword -> (dim, the position in a returned tuple or None)."""
        # by the syntax only: asked before the loop's body is walked, a question about kinds would be answered
        # before its names are bound, and remembered (a function of the module, a method of this class)
        func, key = call.func, None
        if type(func) is cst.Name:
            key = func.value
        elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            cls = self.model.current_class()
            key = f"{cls}.{func.attr.value}" if cls is not None else None
        f = self.model.funcs.get(key) if key is not None else None
        if f is None or type(f.node) is not cst.FunctionDef:
            return {}
        ps = positional_params(f.node)
        offset = 1 if ps and ps[0] in ("self", "cls") and type(call.func) is cst.Attribute else 0
        grown = returns_grown(f.node)
        out = {}
        for i, a in enumerate(call.args):
            name = a.keyword.value if a.keyword is not None else (ps[i + offset] if i + offset < len(ps) else None)
            if name in grown and not a.star:
                out[a.keyword.value if a.keyword is not None else i] = grown[name]
        return out

    def growing_cat(self, target, value) -> Optional[Varying]:
        """``ids = torch.cat([ids, nxt], dim=-1)`` in a loop that grows ``ids``: the size it grows along."""
        if type(target) is not cst.Name or grown_dim(target.value, value, self.model) is None:
            return None
        found = self._growing.get((self._key(), target.value))
        if found is None or found[2] is not None:
            return None
        return Varying(found[0], target.value, "it grows by a `torch.cat` every iteration")

    def growing_call(self, call: cst.Call) -> Optional[tuple]:
        """(the Varying, whether it is a KV cache) of a call in a loop that grows what it is given back:
        ``model(ids, past_key_values=past)`` where the loop takes ``past`` back from what this call returns
        (``past = out.past_key_values``, ``logits, past = model(...)``): the model extends the cache by the
        input's length on every call (transformers' convention, ``tables.CACHE_KEYWORDS``), unless the function
        chooses a static cache (``tables.STATIC_CACHE_NAMES``); ``ids = append_token(ids, nxt)`` of a function
        that returns ``torch.cat([ids, nxt], 1)``."""
        if not self._growing:
            return None
        for (key, name), (loop, dim, grower) in self._growing.items():
            if grower is not call or key != self._key():
                continue
            if dim is not None:
                return Varying(loop, name, "it grows by a `torch.cat` every iteration"), False
            if names_in(self.model.func.node) & T.STATIC_CACHE_NAMES:
                return None
            return Varying(loop, name, "the KV cache the call returns, given back every iteration"), True
        return None

    def _grown_size(self, e) -> Optional[Varying]:
        """``ids.shape[1]``, ``ids.size(-1)``, ``ids.size()[1]`` of a tensor grown along that dimension."""
        if type(e) is cst.Subscript and len(e.slice) == 1 and type(e.slice[0].slice) is cst.Index:
            base, dim = e.value, int_literal(e.slice[0].slice.value)
            if type(base) is cst.Attribute and base.attr.value == "shape":
                base = base.value
            elif type(base) is cst.Call and type(base.func) is cst.Attribute and base.func.attr.value == "size" \
                    and not base.args:
                base = base.func.value
            else:
                return None
        elif type(e) is cst.Call and type(e.func) is cst.Attribute and e.func.attr.value == "size" \
                and len(e.args) == 1:
            base, dim = e.func.value, int_literal(e.args[0].value)
        else:
            return None
        if dim is None:
            return None
        if type(base) is cst.Subscript:
            return self._cache_length(base, dim)
        if type(base) is not cst.Name:
            return None
        found = self._growing.get((self._key(), base.value))
        if found is None or found[1] is None or not (dim == found[1] or (found[1] == -1 and dim >= 1)):
            return None
        if (self._key(), base.value) in self._measured:
            how = "which the loop changes every iteration until its test ends it"
        else:
            how = "which grows by a `torch.cat` every iteration"
        return Varying(found[0], expr_code(e), f"the length of `{base.value}`, {how}")

    def _cache_length(self, base, dim: int) -> Optional[Varying]:
        """``past[0][0].shape[1]`` of a KV cache the loop gives back to the model every iteration: the length
        of a layer's keys, which grows by the input's length (a sequence dimension: neither the batch nor the
        last one)."""
        root = base
        while type(root) is cst.Subscript:
            root = root.value
        if type(root) is not cst.Name or dim in (0, -1):
            return None
        found = self._growing.get((self._key(), root.value))
        if found is None or found[1] is not None or found[2] is None:
            return None
        return Varying(found[0], expr_code(base) + f".shape[{dim}]",
                       f"the length of the KV cache `{root.value}`, given back to the model every iteration")

    def _unwrapped(self, it):
        """``reversed(range(T))``, ``tqdm(range(n))``: the iterable they go over, in its order or reversed."""
        while (type(it) is cst.Call and len(it.args) >= 1 and it.args[0].keyword is None and not it.args[0].star
               and ((type(it.func) is cst.Name and it.func.value == "reversed" and _is_builtin(self.model, "reversed"))
                    or self.model.qualname(it.func) in T.TRANSPARENT_ITERATION_WRAPPERS)):
            it = it.args[0].value
        return it

    def _sequence_items(self, e, key) -> Optional[int]:
        """How many ints each item of ``e`` holds (1, or the width of a ``zip``) when ``e`` is a sequence of
        distinct Python ints taken position by position (``_int_seqs``): a name bound to one, ``list()``,
        ``reversed()`` or a slice of one, ``zip()`` of such, ``range(...)`` inside them, the ``.tolist()`` of a
        ``torch.linspace``/``torch.arange`` (cast with ``.int()``/``.long()``/``.round()``); else None. Not a
        literal list (a few values: a bucket set), nor any other list."""
        t = type(e)
        if t is cst.Name:
            return self._int_seqs.get((key, e.value))
        if t is cst.Subscript and len(e.slice) == 1 and type(e.slice[0].slice) is cst.Slice:
            return self._sequence_items(e.value, key)  # `times[:-1]`
        if t is not cst.Call:
            return None
        args = [a.value for a in e.args if a.keyword is None and not a.star]
        if type(e.func) is cst.Name and _is_builtin(self.model, e.func.value):
            fn = e.func.value
            if fn == "range":
                return 1
            if fn in ("list", "tuple", "reversed", "sorted") and len(args) == 1:
                return self._sequence_items(args[0], key)
            if fn == "zip" and args:
                widths = [self._sequence_items(a, key) for a in args]
                return len(args) if all(w == 1 for w in widths) else None
            return None
        if type(e.func) is cst.Attribute and e.func.attr.value == "tolist" and not args:
            if self._grid(e.func.value, key):
                return 1
        return None

    def _grid(self, e, key) -> bool:
        """``torch.linspace(...)``/``torch.arange(...)`` (cast or not), or a name last bound to one: a 1-D grid of
        distinct values."""
        while (type(e) is cst.Call and type(e.func) is cst.Attribute and not e.args
               and e.func.attr.value in ("int", "long", "round", "flip", "cpu")):
            e = e.func.value
        if type(e) is cst.Name:
            return (key, e.value) in self._grids
        return type(e) is cst.Call and self.model.qualname(e.func) in ("torch.linspace", "torch.arange")

    def _carried(self, node: cst.For, key: str, counter: str) -> None:
        """``prev = cur`` at the end of the body of ``for cur in range(...)``: ``prev`` holds the previous
        iteration's counter wherever the body reads it (``model(tokens[:, prev:cur], prev)``)."""
        for stmt in node.body.body if type(node.body) is cst.IndentedBlock else ():
            if type(stmt) is not cst.SimpleStatementLine:
                continue
            for small in stmt.body:
                if (type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name
                        and small.targets[0].target.value != counter and _counter_arithmetic(small.value, counter)):
                    name = small.targets[0].target.value
                    self._names[(key, name)] = Varying(
                        node, name, f"the loop counter `{counter}` of the previous iteration, carried over")

    # ------------------------------------------------------------------ graph cuts in a loop
    def note_host_read(self) -> None:
        """A device value is read to the host here (a graph cut): the graph of every enclosing loop of
        this function ends within each of its iterations. Not a read that never runs on XLA (under a test
        false there, or one the source decides is false: ``if not exists(eos): continue`` after an assert)."""
        ctx = self.model.step_context()
        if ctx.non_xla:
            return
        for lp in ctx.loops:
            self._cut_loops.add(id(lp.node))
        self._cut_funcs.add(ctx.func.key)

    def cuts(self, loop) -> bool:
        """A host read inside the loop's body ends a graph on each iteration that reaches it, or inside a
        function of this module that every iteration calls (EAGLE's ``update_inference_inputs`` reads the
        accepted tokens with ``.tolist()``)."""
        if id(loop.node) in self._cut_loops:
            return True
        steps = self.model.steps
        return steps is not None and any(t in self._cut_funcs for c in loop.every_calls for t in steps.targets(c))

    def chunks(self, loop_node) -> bool:
        """``for start in range(0, n, chunk)``: the offsets of a few chunks, the same on every call (a
        bounded set of graphs), not positions that advance one by one."""
        return id(loop_node) in self._chunk_loops

    def repeats_in(self, loop_node, outer_node) -> bool:
        """A chunk loop (``chunks``) whose range reads no name that the enclosing loop ``outer_node`` binds:
        it goes over the same offsets on every pass of that loop (a minibatch loop inside the epoch loop:
        ``for start in range(0, args.batch_size, args.minibatch_size)``), so the graphs its offsets make
        are compiled on the first pass and found in the cache after."""
        if not self.chunks(loop_node) or outer_node is None:
            return False
        return not (names_in(loop_node.iter) & assigned_names(outer_node.body))

    def on_function(self, node: cst.FunctionDef) -> None:
        """A function's parameters: each varies if a caller passes a varying value (decided later)."""
        key = self._key()
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)]
        self._params[key] = params
        self._seed(key)

    def before_rewalk(self) -> None:
        self._reseed = True  # the model walks one function again: its names start from its parameters

    def _seed(self, key: str) -> None:
        for p in self._params.get(key, ()):
            if p not in ("self", "cls"):
                self._names[(key, p)] = Varying(None, p, f"the parameter `{p}`", param=p)

    def on_assign(self, target, value) -> None:
        key = self._key()
        if type(target) is cst.Name:
            name = target.value
            root = self._data_root(value)
            if root is not None:
                self._data[(key, name)] = root
            else:
                self._data.pop((key, name), None)
            n = _literal_int_list(value)
            if n is not None:
                self._int_lists[(key, name)] = n
            else:
                self._int_lists.pop((key, name), None)
            grid = self._grid(value, key)
            items = self._sequence_items(value, key)
            if items is not None:
                self._int_seqs[(key, name)] = items
            else:
                self._int_seqs.pop((key, name), None)
            if grid:
                self._grids.add((key, name))
            else:
                self._grids.discard((key, name))
            v = self.varying(value)
            if v is not None:
                origin = v.origin if v.origin != "the loop counter" else f"derived from the loop counter `{v.name}`"
                if v.param is not None:
                    origin = f"derived from the parameter `{v.param}`" if name != v.param else v.origin
                elif v.name == name:
                    origin = v.origin
                self._names[(key, name)] = Varying(v.loop, name, origin, v.param, v.data)
            else:
                self._names.pop((key, name), None)
        else:
            self._forget(target, key)

    def on_aug_assign(self, node: cst.AugAssign) -> None:
        """``global_step += 1`` inside a loop: a counter of that loop."""
        t = node.target
        if type(t) is not cst.Name:
            return
        key = self._key()
        loops = self.model.step_context().loops
        if self.model.kind(t) in K.ANY_TENSOR:
            # `cache_position += 1` of `torch.tensor([n], device=device)`: a position kept on the device, data
            # that no graph bakes in (the static cache's way), not a Python int
            self._names.pop((key, t.value), None)
        elif type(node.operator) in (cst.AddAssign, cst.SubtractAssign) and type(node.value) is cst.Integer and loops:
            self._names[(key, t.value)] = Varying(loops[-1].node, t.value, "a counter incremented every iteration")
        elif self.varying(node.value) is None:
            self._names.pop((key, t.value), None)

    # ------------------------------------------------------------------ the question
    def varying(self, e) -> Optional[Varying]:
        """The loop that makes ``e`` a different Python int on each of its iterations, or None."""
        if self._growing and type(e) in (cst.Subscript, cst.Call):
            grown = self._grown_size(e)
            if grown is not None:
                return grown
        if type(e) is cst.Name:
            return self._names.get((self._key(), e.value))
        if type(e) is cst.UnaryOperation:
            return self.varying(e.expression)
        if type(e) is cst.BinaryOperation:
            left, right = self.varying(e.left), self.varying(e.right)
            if type(e.operator) is cst.Modulo and type(e.right) is cst.Integer and left is not None:
                k = int_literal(e.right)
                if k is not None and k <= BUCKET_LIMIT:
                    return None  # step % K: K values, K graphs, then the cache
                return Varying(left.loop, left.name, f"`{expr_code(e)}` takes {k} values: {k} graphs")
            v = left or right
            if v is None:
                return None
            for side in (e.left, e.right):
                if self.model.kind(side) in K.ANY_TENSOR:
                    return None  # a tensor expression, not a Python int
            return Varying(v.loop, v.name, v.origin if v.origin != "the loop counter" else f"derived from the loop counter `{v.name}`",
                           v.param, v.data)
        if (type(e) is cst.Call and type(e.func) is cst.Attribute and e.func.attr.value in _HOST_READ_METHODS
                and not e.args and self.model.kind(e.func.value) in K.DEVICE_TENSORS):
            # `(lengths - 1).tolist()`, `t.item()`: different data each step wherever this runs every step
            return Varying(None, expr_code(e), "read from a device tensor's values", data=True)
        if type(e) is cst.Call and type(e.func) is cst.Name and _is_builtin(self.model, e.func.value):
            fn = e.func.value
            args = [a.value for a in e.args]
            if fn in _PASS_THROUGH and args:
                return self.varying(args[0])
            if fn == "len" and len(args) == 1:
                loop = self._length_of_data(args[0])
                if loop is not None:
                    return Varying(loop, expr_code(e), "a length read from the batch, different from batch to batch")
            if fn in _HOST_CONVERSIONS and len(args) == 1 and self.model.kind(args[0]) in K.DEVICE_TENSORS:
                return Varying(None, expr_code(e), "read from a device tensor's values", data=True)
            if fn in _REDUCTIONS and len(args) == 1:
                inner = self.varying(args[0]) if type(args[0]) is cst.Name else None
                if inner is not None and inner.data:
                    return Varying(None, inner.name, inner.origin, data=True)
                loop = self._lengths_of_data(args[0])
                if loop is not None:
                    return Varying(loop, expr_code(e), "a length read from the batch, different from batch to batch")
            return None  # min(step, K), max(...), len(...): bounded or not derived
        if type(e) is cst.Subscript and len(e.slice) == 1 and type(e.slice[0].slice) is cst.Index:
            idx = self.varying(e.slice[0].slice.value)
            if idx is None:
                return None
            base = e.value
            if type(base) is cst.Name and self._int_lists.get((self._key(), base.value), BUCKET_LIMIT + 1) <= BUCKET_LIMIT:
                return None  # a literal bucket list: as many graphs as it has items
            if type(base) in (cst.List, cst.Tuple):
                return None
            if self.model.kind(base) is not K.NOT_TENSOR and self.model.kind(base) is not K.UNKNOWN:
                return None  # an element of a tensor or a batch: a tensor, not a Python int
            label = expr_code(base)
            return Varying(idx.loop, f"{label}[{idx.name}]", f"an item of the Python list `{label}` indexed by `{idx.name}`",
                           idx.param)
        return None

    # ------------------------------------------------------------------ lengths read from the batch
    def _bind_data(self, node, target, it, key) -> None:
        """``for batch in loader``, ``for i, (x, lens) in enumerate(loader)``: the per-iteration values."""
        if type(it) is cst.Call and type(it.func) is cst.Name and _is_builtin(self.model, it.func.value):
            if it.func.value == "range":
                return
            if it.func.value == "enumerate" and type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2:
                target = target.elements[1].value
        for name in (n.value for n in target_names(target)):
            self._data[(key, name)] = node

    def _data_root(self, e):
        """The loop whose per-iteration value ``e`` is read from (``batch["ids"]``, ``sample.tokens``), a
        list of lengths computed from one (``[len(s) for s in batch]``), or None."""
        key = self._key()
        while type(e) in (cst.Subscript, cst.Attribute):
            e = e.value
        if type(e) is cst.Name:
            return self._data.get((key, e.value))
        if type(e) in (cst.ListComp, cst.GeneratorExp) and e.for_in.inner_for_in is None:
            if _is_len_of_target(self.model, e.elt, e.for_in.target):
                return self._data_root(e.for_in.iter)
        return None

    def _length_of_data(self, e):
        """``len(e)`` is a per-batch length: ``e`` is a Python value read from the loop's batch."""
        if type(e) is cst.Name and not any(lp.node is self._data.get((self._key(), e.value))
                                               for lp in self.model.step_context().loops):
            return None  # a bare name: only while its loop runs
        loop = self._data_root(e)
        if loop is None or self.model.kind(e) in _NOT_A_LENGTH:
            return None
        return loop

    def _lengths_of_data(self, e):
        """``max(e)``: ``e`` is a Python list of per-batch lengths or a generator of them."""
        if type(e) in (cst.ListComp, cst.GeneratorExp):
            return self._data_root(e)
        if type(e) is cst.Name and self.model.kind(e) not in _NOT_A_LENGTH:
            return self._data_root(e)
        return None

    # ------------------------------------------------------------------ helpers
    def _key(self) -> str:
        f = self.model.func
        if self._reseed:
            self._reseed = False
            root = f
            while root.parent is not None:
                root = root.parent
            mine = (root.key, root.key + ".<locals>.")
            for d in (self._names, self._data, self._int_lists):
                for k in [k for k in d if k[0] == mine[0] or k[0].startswith(mine[1])]:
                    del d[k]
            self._seed(root.key)
        return f.key

    def _forget(self, target, key) -> None:
        if type(target) is cst.Name:
            self._names.pop((key, target.value), None)
        elif type(target) in (cst.Tuple, cst.List):
            for el in target.elements:
                self._forget(el.value, key)


def _is_builtin(model, name: str) -> bool:
    return name not in model.imports and name not in getattr(model, "toplevel_defs", ())


def _is_len_of_target(model, elt, target) -> bool:
    return (type(elt) is cst.Call and model.is_builtin(elt.func, "len") and len(elt.args) == 1
            and type(target) is cst.Name and type(elt.args[0].value) is cst.Name
            and elt.args[0].value.value == target.value)


def _counter_arithmetic(value, counter: str) -> bool:
    """``value`` is ``counter``, or arithmetic of it with int literals (``cur``, ``cur + 1``)."""
    if type(value) is cst.Name:
        return value.value == counter
    if type(value) is cst.BinaryOperation:
        sides = (value.left, value.right)
        return (any(_counter_arithmetic(x, counter) for x in sides)
                and all(type(x) is cst.Integer or _counter_arithmetic(x, counter) for x in sides))
    return False


def _literal_int_list(value) -> Optional[int]:
    if type(value) in (cst.List, cst.Tuple) and value.elements and all(
        type(el.value) is cst.Integer for el in value.elements
    ):
        return len(value.elements)
    return None


def expr_code(node) -> str:
    try:
        return cst.Module(body=[]).code_for_node(node)
    except Exception:  # noqa: BLE001
        return "..."


def _advanced_in(body) -> set:
    """The names a loop's body advances on its own straight line (``cur += 1``, ``pos += n + 1``: added to by
    ints and names, no call or subscript), not in nested loops or functions."""
    out, stack = set(), [body]
    while stack:
        n = stack.pop()
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.For, cst.While):
            continue
        if (type(n) is cst.AugAssign and type(n.operator) in (cst.AddAssign, cst.SubtractAssign)
                and type(n.target) is cst.Name and _int_arithmetic(n.value)):
            out.add(n.target.value)
        stack.extend(child_nodes(n))
    return out


def _int_arithmetic(e) -> bool:
    if type(e) in (cst.Integer, cst.Name):
        return True
    if type(e) is cst.BinaryOperation and type(e.operator) in (cst.Add, cst.Subtract, cst.Multiply):
        return _int_arithmetic(e.left) and _int_arithmetic(e.right)
    return False
