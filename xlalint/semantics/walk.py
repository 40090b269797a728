"""The statement walk: one recursion over one libcst tree, in source order, with the rules listening.

A part of the semantic model (``model.SemanticModel`` composes it): it owns the walk's position (the
function, class, loops, guards and statement being walked) and, for each kind of statement, the order in
which the rules hear of a node, its children are walked and its targets are bound (``bindings``), its
calls recorded (``calls``) and its loops and guards noted for the step questions (``step_marks``,
``steps``). The walk is a plain recursion over the dataclass fields of libcst nodes: libcst's own visitor
rebuilds every node and costs as much as the parse. Rules hook in with ``on_<NodeType>`` methods that
the walk calls when the model's state (bindings, context) is that of the node.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import device_pins, passthrough
from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.calls import UNRESOLVED
from xlalint.semantics.guards import ends_with, period_of, xla_polarity
from xlalint.semantics.steps import FuncInfo, LoopInfo
from xlalint.semantics.syntax import (
    FIELDS, NODE_TYPES, assigned_names, child_fields, child_nodes, dotted_name, keyword_arg, last_name, name_words,
    mode_before, own_nodes, positional_args, runs_once_at_most, string_value, target_names,
)


class StatementWalk:
    """The walk of statements and expressions, and what each kind of node does to the model's state."""

    def walk(self, node) -> None:
        name = type(node).__name__
        handler = _SPECIAL.get(name)
        if handler is not None:
            handler(self, node)
            return
        for fn in self._dispatch.get(name, ()):  # _emit, inline: this runs once per node of the tree
            fn(node)
        self.walk_children(node)

    def _emit(self, name, node) -> None:
        for fn in self._dispatch.get(name, ()):
            fn(node)

    def walk_children(self, node) -> None:
        tp = type(node)
        for fname in FIELDS.get(tp) or child_fields(tp):
            v = getattr(node, fname)
            if type(v) in NODE_TYPES:
                self.walk(v)
            elif type(v) in (tuple, list):
                for c in v:
                    if type(c) in NODE_TYPES:
                        self.walk(c)

    def walk_seq(self, nodes) -> None:
        for n in nodes:
            self.walk(n)

    def walk_block(self, block) -> list:
        """An indented block (or a one-line suite). Guards that a statement adds for the rest of the
        block (an early ``return`` on XLA) end with the block. Returns the barriers the block holds."""
        if block is None:
            return []
        depth = len(self.guards)
        self._block_syncs.append([])
        if type(block) in (cst.IndentedBlock, cst.SimpleStatementSuite):
            for s in block.body:
                self.walk(s)
        else:
            self.walk(block)
        del self.guards[depth:]
        closed = self._block_syncs.pop()
        for point in closed:
            point[2] = self.seq  # a barrier ends the step for what follows it in its own block only
        return closed

    # statements ----------------------------------------------------------
    def _stmt(self, node) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        self._emit(type(node).__name__, node)
        self.walk_children(node)
        self.stmt = prev

    def _simple_stmt_line(self, node) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        self._emit("SimpleStatementLine", node)
        for s in node.body:
            self.walk(s)
        self.stmt = prev

    def _assign(self, node: cst.Assign) -> None:
        self._emit("Assign", node)
        self.walk(node.value)
        value_kind = self.batch_moved_kind(node.value, self.kind(node.value))
        if value_kind is K.UNKNOWN or value_kind == K.NOT_TENSOR:
            value_kind = self.callable_kind(node.value) or value_kind  # `hooks = [log, partial(check, k=1)]`
        period = polarity = None
        if type(node.value) in (cst.Comparison, cst.BooleanOperation, cst.Call, cst.UnaryOperation):
            period = period_of(node.value) or self.predicate_period(node.value)
            polarity = xla_polarity(node.value, self.func.polarities)
        for t in node.targets:
            self._bind_target(t.target, node.value, value_kind)
            if _is_self_attribute(t.target):  # `self.device = "cuda:{}".format(rank)`
                self.note_name_value(self.attribute_name(t.target.attr.value), node.value)
            if type(t.target) is cst.Name:  # `should_log = step % log_freq == 0`, `mps = "mps" in device.type`
                name = t.target.value
                self.note_name_value(name, node.value)
                if period is not None:
                    self.func.periods[name] = period
                else:
                    self.func.periods.pop(name, None)
                if polarity is not None:
                    self.func.polarities[name] = polarity
                else:
                    self.func.polarities.pop(name, None)
            self.walk(t.target)

    def _ann_assign(self, node: cst.AnnAssign) -> None:
        self._emit("AnnAssign", node)
        if node.value is not None:
            self.walk(node.value)
        k = self._annotation_kind(node.annotation.annotation)
        if node.value is not None:
            vk = self.kind(node.value)
            if k is K.UNKNOWN or (k in K.ANY_TENSOR and vk in (K.CPU_TENSOR, K.BOOL_TENSOR)):
                k = vk  # `t: torch.Tensor = cpu_tokens.ge(x)`: the value says where it lives and what it holds
        self._bind_target(node.target, node.value, k)
        self.walk(node.target)

    def _aug_assign(self, node: cst.AugAssign) -> None:
        self._emit("AugAssign", node)
        self.walk(node.value)
        tk, vk = self.kind(node.target), self.kind(node.value)
        # `t /= world_size` on a host (or CUDA) tensor updates it in place, where it lives
        k = tk if tk == K.CPU_TENSOR and vk not in K.DEVICE_TENSORS else K.arithmetic(tk, vk)
        self._kind_cache.pop(id(node.target), None)
        self._bind_target(node.target, None, k)
        self.walk(node.target)

    def _named_expr(self, node: cst.NamedExpr) -> None:
        self._emit("NamedExpr", node)
        self.walk(node.value)
        self._bind_target(node.target, node.value, self.kind(node.value))

    def _function_def(self, node: cst.FunctionDef) -> None:
        self.seq += 1
        for d in node.decorators:
            self.walk(d.decorator)
        if self._defs_walked:
            return  # the module's statements walked again (rewalk): the function keeps its walk
        name = node.name.value
        if self.func is self.top and self.class_key is None:
            key = name
        elif self.class_key is not None and self.func is self.top:
            key = f"{self.class_key}.{name}"
        else:
            key = f"{self.func.key}.<locals>.{name}"
        info = FuncInfo(key=key, name=name, class_key=self.class_key if self.func is self.top else None,
                        node=node, parent=self.func if self.func is not self.top else None,
                        top_index=self.top_index)
        # a unit test: anything in a test module, and a unittest case's test methods anywhere (a `test_epoch()`
        # elsewhere is an evaluation on the test split)
        info.excluded = self.func.excluded or (self.class_key is not None and (
            self.classes.get(self.class_key, {}).get("test_case", False)
            or (name.startswith("test") and self.class_key.rpartition(".")[2].startswith("Test"))))
        replaced = self.funcs.get(key)
        if replaced is not None:  # defined again (in both arms of an `if`, walked again): release() needs it
            self._replaced.append(replaced)
        self.funcs[key] = info
        if self.func is not self.top:
            self.func.local_funcs[name] = key
            self._bind_name(name, K.NOT_TENSOR)
        info.root = self._is_root_function(node, info)
        info.no_grad = any(self.qualname(d.decorator.func if type(d.decorator) is cst.Call else d.decorator)
                           in H.NO_GRAD_CALLS for d in node.decorators)
        saved = (self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth, self.no_grad_depth)
        self.func = info
        self.no_grad_depth = 0
        self.loop_stack = []
        # a method of a flash-attn class or of a host runtime runs off XLA, as under `if device.type != "xla":`
        self.guards = self.entry_guards(info.class_key)
        self.stmt = node
        self.cond_depth = 0
        saved_eval, self.eval_depth = self.eval_depth, 0
        if info.class_key is None:
            self.class_key = None
        self._bind_params(node, info)
        if info.parent is None and self.facts is not None:
            # what callers in other modules pass is known before the walk: seed it now, and walk the
            # function again after the file only if this file's own callers change the answer
            info.seeds = self._param_seeds(info, full=False)
            info.env.update(info.seeds)
        elif info.parent is not None and key in self.carried_seeds:
            # a nested function made again by its parent's walk again keeps what its calls were seen to pass
            # (else its return falls back to its unseeded walk's, and the parent's next walk to that)
            info.seeds = dict(self.carried_seeds[key])
            info.env.update(info.seeds)
        self.host_params_if_moved(node, info)
        plain_method = (info.class_key is not None and info.class_key in self.classes
                        and not self.classes[info.class_key]["module"])
        saved_reads = self._attr_reads
        if plain_method:
            self._attr_reads = set()
        self._emit("FunctionDef", node)
        self.walk_block(node.body)
        self.end_generator(info)
        if info.saves and _SAVE_WORDS & set(name_words(name)):
            # `save_lora_checkpoint()` copies each parameter to the host to write it: the copy is its purpose,
            # every `save_interval` steps, not a cost to fix (issue 32)
            info.excluded = True
        if plain_method:
            self._format_seen[key] = self._read_attributes(info.class_key, self._attr_reads)
        self._attr_reads = saved_reads
        self.eval_depth = saved_eval
        self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth, self.no_grad_depth = saved

    def _lambda(self, node: cst.Lambda) -> None:
        self._emit("Lambda", node)
        if id(node) in self._function_lambdas:
            self.walk_lambda_function(node)  # callables: its body runs where it is called
        else:
            self.walk(node.body)

    def _class_def(self, node: cst.ClassDef) -> None:
        self.seq += 1
        for d in node.decorators:
            self.walk(d.decorator)
        if self._defs_walked:  # the module's statements walked again (rewalk): the class's own statements only
            key = node.name.value if self.class_key is None else f"{self.class_key}.{node.name.value}"
            saved = (self.class_key, self.stmt)
            self.class_key, self.stmt = key, node
            self.walk_block(node.body)
            self.class_key, self.stmt = saved
            return
        key = node.name.value if self.class_key is None else f"{self.class_key}.{node.name.value}"
        self.classes[key] = _class_record(self, node)
        self._class_nodes[key] = node  # for what its tests decide (branches._never_none), asked lazily
        saved = (self.class_key, self.stmt)
        self.class_key = key
        self.stmt = node
        self._emit("ClassDef", node)
        self.walk_block(node.body)
        self.class_key, self.stmt = saved

    def _for(self, node: cst.For) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        self._emit("For", node)
        self.walk(node.iter)
        # a body that ends with a `break` no `continue` skips runs once (a look at one batch): straight-line code
        # of what holds it, not a loop
        hint = self._loop_hint(self.loop_iterable(node.iter), target=node.target)
        loop = None if runs_once_at_most(node.body) else LoopInfo(
            node, self.func, iterates_loader=self._iterates_loader(node.iter),
            cond_depth=self.cond_depth, top_index=self.top_index, hint=hint,
            outer=self.loop_stack[-1] if self.loop_stack else None, seq=self.seq,
            guard_depth=len(self.guards), off_xla=any(g[1] for g in self.guards),
            few=type(node.iter) in (cst.List, cst.Tuple, cst.Set))
        if loop is not None:
            self.loops.append(loop)
            # `model.eval()` before it, or under `torch.no_grad()`: an inference pass when it trains nothing
            loop.infers = self.no_grad_depth > 0 or self.func.no_grad or self._eval_mode_before(node)
        self._bind_target(node.target, None, K.UNKNOWN, iter_expr=node.iter)
        if type(node.target) is cst.Name and self.kind(node.iter) in (K.TENSORS, K.CPU_TENSORS) \
                and _indexes_by(node.body, dotted_name(node.iter), node.target.value):
            self._bind_name(node.target.value, K.NOT_TENSOR)  # for k in batch: batch[k] = ...: keys of a dict
        for name in target_names(node.target):
            if self.kind(name) in (K.TENSOR, K.CPU_TENSOR) and _string_keyed(node.body, name.value):
                # `for attrs in batch["custom_attributes"]: ... attrs["diff_output_preservation"]`: no row of a
                # tensor takes a string index, so the items are dicts (a batch's per-item settings), not tensors;
                # those of a host container hold host tensors (`for prediction in predictions.values():` of
                # outputs moved to the CPU, then `prediction["boxes"]`)
                self._bind_name(name.value, K.CPU_TENSORS if self.kind(name) == K.CPU_TENSOR else K.UNKNOWN)
        self._host_batch_if_moved(node)
        self.walk(node.target)
        self.stmt = prev
        self._loop_body(loop, node.body)
        if node.orelse is not None:
            self.walk_block(node.orelse.body)

    def _eval_mode_before(self, stmt) -> bool:
        """The last ``x.eval()`` / ``x.train()`` on the way to ``stmt`` in its function (or the module) set
        evaluation mode (``syntax.mode_before``)."""
        f = self.func
        node = f.node if f is not self.top else None
        body = node.body.body if type(node) is cst.FunctionDef and type(node.body) is cst.IndentedBlock else (
            self.module.body if node is None else None)
        return body is not None and mode_before(body, stmt) == "eval"

    def _while(self, node: cst.While) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        loop = None if runs_once_at_most(node.body) else LoopInfo(
            node, self.func, cond_depth=self.cond_depth, top_index=self.top_index,
            hint=self._loop_hint(node.test, counts=True),
            outer=self.loop_stack[-1] if self.loop_stack else None, seq=self.seq,
            guard_depth=len(self.guards), off_xla=any(g[1] for g in self.guards),
            over_positions=H.tests_what_it_grows(node))
        if loop is not None:
            self.loops.append(loop)
            self.loop_stack.append(loop)
        self._emit("While", node)
        self.walk(node.test)
        self.stmt = prev
        if loop is not None:
            self.loop_stack.pop()
        self._loop_body(loop, node.body)
        if node.orelse is not None:
            self.walk_block(node.orelse.body)

    def _loop_body(self, loop, body) -> None:
        """Walk a loop's body inside it (``loop`` None: a body that runs once, walked where the loop is)."""
        if loop is None:
            self.walk_block(body)
            return
        self.loop_stack.append(loop)
        self.walk_block(body)
        self.loop_stack.pop()
        loop.end_seq = self.seq
        self._note_evaluation(loop, body)

    def _note_evaluation(self, loop: LoopInfo, body) -> None:
        """What an evaluation loop computed is read once per evaluation after it (``loop_results``). An evaluation:
        a loop over a loader or running the model, named for evaluation (not a no-grad loop over a prompt's
        parts), or running the model under a periodic guard (a benchmark's loop every 250 steps, a sample's decode
        loop in the log block), as long as it does not train (``_results_of``)."""
        if (loop.hint == H.EVAL and (loop.runs_model or loop.iterates_loader)) or (
                loop.runs_model and any(g[0] is not None for g in self.guards)):
            self.func.loop_results |= _results_of(body)

    def _try(self, node) -> None:
        self.seq += 1
        self._emit(type(node).__name__, node)
        self.walk_block(node.body)
        self.cond_depth += 1
        for h in node.handlers:
            if h.type is not None:
                self.walk(h.type)
            rare = _failure_handler(h)
            self.error_depth += rare
            self.walk_block(h.body)
            self.error_depth -= rare
        if node.orelse is not None:
            self.walk_block(node.orelse.body)
        self.cond_depth -= 1
        if node.finalbody is not None:
            self.walk_block(node.finalbody.body)
        if self.func is not self.top and _requires_cuda_library(node):
            self.guards.append((None, True, False))  # the rest of the block runs only where the import worked


    def _with(self, node: cst.With) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        self._emit("With", node)
        no_grad = False
        for item in node.items:
            self.walk(item.item)
            if item.asname is not None:
                self._bind_target(item.asname.name, None, K.UNKNOWN)
            if type(item.item) is cst.Call and self.qualname(item.item.func) in H.NO_GRAD_CALLS:
                no_grad = True
        self.stmt = prev
        if no_grad and self.loop_stack:
            self.loop_stack[-1].infers = True  # the loop runs this block without gradients (an inference pass?)
        self.no_grad_depth += no_grad
        self.walk_block(node.body)
        self.no_grad_depth -= no_grad

    def _raise(self, node: cst.Raise) -> None:
        self._emit("Raise", node)
        self.error_depth += 1
        self.walk_children(node)
        self.error_depth -= 1

    def _return(self, node: cst.Return) -> None:
        self._emit("Return", node)
        if node.value is not None:
            self.walk(node.value)
            k = self.kind(node.value)
            f = self.func
            if f.class_key is None and f.parent is None:  # a plain function: what it returns may be an argument
                f.passes = passthrough.combine(f.passes, passthrough.spec_of_return(node.value, f.node))
            none = type(node.value) is cst.Name and node.value.value == "None"
            if f.return_kind is K.UNKNOWN or (f.returns_none_only and not none):
                # `if out is None: return None` then `return out[0]`: an optional value is what it is when it is
                # not None (the first other return decides, as when no None came first)
                f.return_kind = k
                f.returns_none_only = none
            f.return_parts = passthrough.combine_parts(f.return_parts, node.value, self.kind)
            f.return_handed = passthrough.handed_back(f.return_handed, node.value, f.node)
        else:
            self.func.return_parts = False
            self.func.return_handed = False

    def _comp(self, node) -> None:
        """List/set/dict comprehensions and generators: bind the ``for`` targets before the element (kinds a
        rule asked of it before, at its statement, answered from the wrong scope: forgotten)."""
        self._emit(type(node).__name__, node)
        self.forget_kinds(node)
        comp = node.for_in
        while comp is not None:
            self.walk(comp.iter)
            self._bind_target(comp.target, None, K.UNKNOWN, iter_expr=comp.iter)
            for cond in comp.ifs:
                self._emit("CompIf", cond)
                self.walk(cond.test)
            comp = comp.inner_for_in
        if type(node) is cst.DictComp:
            self.walk(node.key)
            self.walk(node.value)
        else:
            self.walk(node.elt)

    def _call(self, node: cst.Call) -> None:
        self._callee_memo = [node.func, UNRESOLVED]
        try:
            self._emit("Call", node)
            for a in node.args:  # a loop, not any(): this runs for every call
                if type(a.value) is cst.Lambda:
                    callee = self.callee_key(node.func)
                    if callee is not None and not callee.startswith(H.DISPATCH_PREFIX):
                        self._function_lambdas.update(id(a.value) for a in node.args if type(a.value) is cst.Lambda)
                    break
            if not self.names_xla and not self.chooses_device:
                self.note_placement(node)  # with the callee resolved once (a helper that places on a parameter)
        finally:
            self._callee_memo = None
        if self._uploaded:
            self.note_mutation(node)
        q = self.qualname(node.func)
        if not self.places_on_device and _places_on_device(node):
            self.places_on_device = True
        if not self.func.saves and _writes_out(q, node, self.func.name):
            self.func.saves = True
        self.walk(node.func)
        closure = q in T.STEP_CLOSURE_FUNCTIONS or (
            q is None and last_name(node.func) == "add_step_closure"
        )
        if closure:
            for a in node.args:
                n = dotted_name(a.value)
                if n and a.keyword is None:
                    self.closure_names.add(n)
            self.closure_depth += 1
        for a in node.args:
            self.walk(a.value)
        if closure:
            self.closure_depth -= 1
        if q is None and type(node.func) is cst.Attribute and node.func.attr.value in _CONTAINER_PUTS:
            for a in node.args:
                if a.star != "*":
                    self._holds(node.func.value, self.kind(a.value))
            if node.func.attr.value == "append" and len(node.args) == 1:
                self.note_appended_items(node.func.value, node.args[0].value)
        self._register_buffer(node)
        self._note_call(node, q)

    def _register_buffer(self, node: cst.Call) -> None:
        """``self.register_buffer("queue_ptr", torch.zeros(1))``, a torchmetrics state ``self.add_state("cer",
        default=torch.tensor(0))``: the module's attribute is a tensor, on the module's device."""
        func = node.func
        if not (type(func) is cst.Attribute and func.attr.value in ("register_buffer", "register_parameter", "add_state")
                and type(func.value) is cst.Name and func.value.value == "self"):
            return
        args = positional_args(node)
        name = string_value(args[0]) if args else None
        value = args[1] if len(args) > 1 else keyword_arg(node, "default")
        cls = self.current_class()
        if name is None or value is None or cls is None or cls not in self.classes:
            return
        if self.kind(value) in K.ANY_TENSOR or type(value) is cst.Call and (
                self.qualname(value.func) or "").startswith(("torch.", "nn.")):
            attrs = self.classes[cls]["attrs"]
            attrs[name] = K.TENSOR if attrs.get(name, K.TENSOR) == K.TENSOR else K.UNKNOWN


def _requires_cuda_library(node) -> bool:
    """``try: from megablocks.layers.moe import get_load_balancing_loss`` / ``except: raise RuntimeError(...)``: a
    CUDA-only library imported in the ``try`` body, every handler raising (a requirement, not an option)."""
    return bool(node.handlers) and all(ends_with(h.body, cst.Raise) for h in node.handlers) and any(
        device_pins.imports_cuda_only(n) for n in own_nodes(node.body))


def _results_of(body) -> set:
    """The names an evaluation loop's body binds or fills (``dev_loss = ...``, ``n_correct += ...``,
    ``metrics.append(...)``): after the loop they hold what the whole loop computed. None for a loop that calls
    ``backward``: it trains."""
    calls = [n for n in own_nodes(body) if type(n) is cst.Call]
    if any(last_name(n.func) == "backward" for n in calls):
        return set()  # a loop that trains (micro-steps under a stray `no_grad`): not an evaluation
    filled = {n.func.value.value for n in calls if type(n.func) is cst.Attribute
              and n.func.attr.value in _CONTAINER_PUTS and type(n.func.value) is cst.Name}
    return assigned_names(body) | filled


def _is_self_attribute(node) -> bool:
    return type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self"


def _string_keyed(body, name: str) -> bool:
    """``body`` subscripts the bare name ``name`` with a string (``attrs["key"]``)."""
    for n in own_nodes(body):
        if (type(n) is cst.Subscript and type(n.value) is cst.Name and n.value.value == name and len(n.slice) == 1
                and type(n.slice[0].slice) is cst.Index and string_value(n.slice[0].slice.value) is not None):
            return True
    return False


def _indexes_by(body, container: Optional[str], name: str) -> bool:
    """``body`` subscripts ``container`` with the bare name ``name`` (``batch[k]``)."""
    if not container:
        return False
    stack = [body]
    while stack:
        n = stack.pop()
        if type(n) is cst.Subscript and len(n.slice) == 1 and type(n.slice[0].slice) is cst.Index:
            idx = n.slice[0].slice.value
            if type(idx) is cst.Name and idx.value == name and dotted_name(n.value) == container:
                return True
        if type(n) in NODE_TYPES:
            stack.extend(child_nodes(n))
    return False


# list/dict methods that put their arguments into the container
_CONTAINER_PUTS = frozenset({"append", "extend", "insert", "update", "setdefault"})



# what code catches to take another path on a normal run (EAFP: `try: x = d[k] except KeyError: x = d[alt]`), so
# its handler may run as often as the `try`
_NORMAL_PATH_ERRORS = frozenset({"KeyError", "AttributeError", "TypeError", "IndexError", "LookupError",
                                 "ImportError", "ModuleNotFoundError", "NotImplementedError", "ValueError",
                                 "OverflowError", "ZeroDivisionError", "FileNotFoundError", "OSError"})


def _failure_handler(handler: cst.ExceptHandler) -> bool:
    """A handler of a failure (``except AssertionError:`` around a NaN check, ``except RuntimeError:``, a bare
    ``except:``, ``except Exception:``): it runs when something went wrong, not on every pass of a normal run.
    A handler of what code catches to take another path (``_NORMAL_PATH_ERRORS``) may run every time."""
    caught = handler.type
    names = [e.value for e in caught.elements] if type(caught) is cst.Tuple else [caught]
    return not any(n is not None and last_name(n) in _NORMAL_PATH_ERRORS for n in names)


def _class_record(walk: StatementWalk, node: cst.ClassDef) -> dict:
    """What the model keeps of a class from its bases: an ``nn.Module`` (by base, a project base that is one,
    or a name like one), an ``autograd.Function``, a unittest case, and the bases' names; and a ``device``
    it answers with the CPU (``device_pins.declares_host_device``)."""
    bases = [a.value for a in node.bases]
    is_module = autograd = False
    for b in bases:
        q = walk.qualname(b) or dotted_name(b) or ""
        if q in ("torch.autograd.Function", "torch.autograd.function.Function") or q.endswith("autograd.Function"):
            autograd = True
        if q in T.MODULE_BASES or q.endswith(("nn.Module", "LightningModule", "PreTrainedModel")):
            is_module = True
        elif dotted_name(b) in walk.classes and walk.classes[dotted_name(b)]["module"]:
            is_module = True
        elif (dotted_name(b) or "").endswith(("Module", "Model", "Layer", "Block", "Net")):
            is_module = True
        elif walk.facts is not None and walk.qualname(b) and walk.facts.knows(walk.qualname(b)):
            r = walk.facts.resolve(walk.qualname(b))  # a base class in another project module
            is_module = is_module or bool(r is not None and r[0] == "class" and walk.facts.class_is_module(r[1]))
    names = [walk.qualname(b) or (f"{walk.module_name}.{dotted_name(b)}" if dotted_name(b) in walk.classes
                                  else dotted_name(b)) for b in bases]
    # a unittest case (`class TestGradients(TestCase)`, `absltest.TestCase`, a project base deriving from
    # one): every method is test code, its helpers too, whose loops compare runs and assert
    test_case = any(n.rpartition(".")[2].endswith("TestCase")
                    or walk.classes.get(n.rpartition(".")[2], {}).get("test_case", False) for n in names if n)
    attrs = {"device": K.HOST_DEVICE} if device_pins.declares_host_device(node) else {}
    return {"module": is_module, "attrs": attrs, "autograd": autograd, "bases": [n for n in names if n],
            "test_case": test_case, "gpu_actor": device_pins.gpu_actor(node)}


# A function named for saving (`save_checkpoint`, `export_model`) that writes with one of these calls is a
# checkpoint writer: its host copies (`param.cpu()`) are what it is for.
_SAVE_CALLS = frozenset({"torch.save", "safetensors.torch.save_file", "safetensors.torch.save_model", "numpy.save",
                         "numpy.savez", "torch_xla.core.xla_model.save", "torch.distributed.checkpoint.save"})
# an exporter or serializer (`serialize_fp32(file, tensor)`, `export_weights`) writing bytes to a file
_FILE_WRITES = frozenset({"write", "tofile"})
_EXPORT_WORDS = frozenset({"export", "serialize"})
_SAVE_WORDS = frozenset({"save", "saving", "checkpoint", "ckpt", "export", "dump", "serialize",
                         # `cache_batch_latents()` encodes a batch once and keeps (or writes) its latents on the host
                         "cache", "caching"})


def _writes_out(q, node: cst.Call, function_name: str) -> bool:
    """The call saves (``torch.save``, ``.save_pretrained``, ...), writes to a file in an exporter or
    serializer (``file.write(b)`` in ``serialize_fp32``), or copies to the host in a function that caches
    (``latents = vae.encode(x).latent_dist.sample().to("cpu")`` in ``cache_batch_latents``: kept for later
    epochs, on the host on purpose)."""
    func = node.func
    last = last_name(func)
    if q in _SAVE_CALLS or last in T.SAVE_METHODS:
        return True
    words = set(name_words(function_name))
    if last in _FILE_WRITES and _EXPORT_WORDS & words:
        return True
    return bool(words & {"cache", "caching"}) and type(func) is cst.Attribute and (
        last == "cpu" or last == "to" and bool(node.args) and string_value(node.args[0].value) == "cpu")


# calls that put a model or tensors on a device (`.to(device)`, `.cuda()`, `accelerator.prepare(...)`)
_DEVICE_METHODS = frozenset({"to", "cuda", "xla", "prepare", "xla_device", "device", "MpDeviceLoader",
                             "set_default_device", "set_default_tensor_type", "DataParallel", "DistributedDataParallel"})


def _places_on_device(node: cst.Call) -> bool:
    """The call places something on a device, or names one (``device=``): evidence that the module's tensors
    may live on an accelerator."""
    func = node.func
    name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
    if name in _DEVICE_METHODS:
        return not (name == "to" and device_pins.casts_only(node))
    return any(a.keyword is not None and a.keyword.value in ("device", "map_location") for a in node.args)


def walk_places(node) -> bool:
    """Some call ``node`` runs places something on a device or names one (``_places_on_device``)."""
    return any(type(n) is cst.Call and _places_on_device(n) for n in (node, *own_nodes(node)))


# node type -> the method of the model that walks it (install_dispatch fills _SPECIAL)
_SPECIAL_METHODS = {
    "SimpleStatementLine": "_simple_stmt_line",
    "Import": "_import",
    "ImportFrom": "_import_from",
    "Assign": "_assign",
    "AnnAssign": "_ann_assign",
    "AugAssign": "_aug_assign",
    "NamedExpr": "_named_expr",
    "FunctionDef": "_function_def",
    "ClassDef": "_class_def",
    "Lambda": "_lambda",
    "For": "_for",
    "While": "_while",
    "If": "_if",
    "IfExp": "_if_exp",
    "BooleanOperation": "_boolean_operation",
    "Try": "_try",
    "TryStar": "_try",
    "With": "_with",
    "Return": "_return",
    "Yield": "_yield",
    "Raise": "_raise",
    "Assert": "_assert",
    "ListComp": "_comp",
    "SetComp": "_comp",
    "GeneratorExp": "_comp",
    "DictComp": "_comp",
    "Call": "_call",
    }
_SPECIAL: dict = {}  # node type name -> unbound method of the composed model; global for the walk's speed


def install_dispatch(model_class) -> None:
    """Point the walk's dispatch at ``model_class``'s methods (the composed model, once it is defined)."""
    _SPECIAL.clear()
    _SPECIAL.update({name: getattr(model_class, meth) for name, meth in _SPECIAL_METHODS.items()})
