"""The walker: one walk over one libcst tree feeds the answers to the two questions every rule asks.

The analysis has one room per question, and this walk feeds them all:

* Is this value a tensor? ``tensors.TensorInference`` (mixed into the model): ``model.kind(expr)`` /
  ``model.is_tensor(expr)`` from the bindings this walk keeps (assignments, unpacking, ``for``/``with``
  targets, parameters, attributes) and the project's facts about other modules.
* Does this line run every step? ``steps``: the walk records each function's calls with their context
  (``model.step_context()``), its loops and guards; ``steps.Steps`` resolves frequencies over the call
  graph of this module (for the rules that decide in the file) or of the whole project.
* The project: ``project`` resolves imports to other modules and gives the facts they export
  (``self.facts``); ``summary()`` is what this module exports to the others.

The walk is a plain recursion over the dataclass fields of libcst nodes: libcst's own visitor rebuilds
every node and costs as much as the parse. Rules hook in with ``on_<NodeType>`` methods that the walk
calls in source order, when the model's state (bindings, context) is that of the node.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import libcst as cst

from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import seeds as S
from xlalint.semantics import tables as T
from xlalint.semantics.steps import (  # noqa: F401 - re-exported for rules
    EVERY, NEVER, NOT_PER_STEP, PERIODIC, Candidate, Ctx, Frequency, FuncInfo, LoopInfo, Steps,
    _ends_block, _period_of, _runs_once, xla_polarity,
)
from xlalint.semantics.syntax import (  # noqa: F401 - re-exported for rules
    NODE_TYPES, _FIELDS, _code, child_fields, child_nodes, dotted_name, names_in, target_names, keyword_arg, last_name, name_words, positional_args, string_value,
)
from xlalint.semantics.tensors import TensorInference, element_key
from xlalint.semantics.project import _seed_kind


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _handlers(rule_class) -> tuple:
    """The ``on_<Node>`` methods of a rule class, in ``dir`` order (``dir`` per rule and walk was a
    millisecond of every walk)."""
    return tuple(a for a in dir(rule_class) if a.startswith("on_"))


class SemanticModel(TensorInference):
    def __init__(self, module: cst.Module, rules: list, *, module_name: str = "__main__",
                 is_package: bool = False, facts=None):
        self.module = module
        self.rules = rules
        self.module_name = module_name  # dotted, for relative imports and project-wide keys
        self.is_package = is_package
        self.facts = facts  # a project.FactsView, or None when the file is analysed alone
        self.steps: Optional[Steps] = None
        self.imports: dict[str, str] = {}
        # what other modules can import from this one: its module-level imports (not those of its
        # functions), and the modules it star-imports (project.Facts._member resolves through both)
        self.module_imports: dict[str, str] = {}
        self.star_modules: list[str] = []
        self.imports_torch = False
        self.imports_xla = False
        self.classes: dict[str, dict] = {}  # class key -> {"module": bool, "attrs": {}, "bases": [..]}
        self.funcs: dict[str, FuncInfo] = {}
        self.loops: list[LoopInfo] = []
        self.candidates: list[Candidate] = []
        self.closure_names: set[str] = set()
        self.compiled_names: set[str] = set()
        self.hook_keys: set[str] = set()  # callee keys of functions registered as per-step hooks
        self.no_grad_depth = 0  # inside `with torch.no_grad():`
        self._dispatch: dict[str, list[Callable]] = {}
        for rule in rules:
            rule.model = self
            for attr in _handlers(type(rule)):
                self._dispatch.setdefault(attr[3:], []).append(getattr(rule, attr))
        self._kind_cache: dict[int, object] = {}
        # while the rules hear of a call: [its func node, what it runs (_callee_key) or _UNSET], asked by
        # the model and by several rules of the same node, in the same state of the walk
        self._callee_memo: Optional[list] = None
        # callee key -> [(caller key, positional kinds, keyword kinds, called via self.)]
        self.call_sites: dict[str, list] = {}
        self._rewalking_quietly = False
        # method of a plain class -> the kinds of the attributes it read (None: all) when it was walked
        self._format_seen: dict = {}
        self._attr_reads: Optional[set] = None  # the `self.<attr>` names the method being walked reads
        self._element_prefixes: set = set()  # "images[" when some `images[0] = ...` was bound
        self._guessed_params: dict = {}  # function key -> parameters whose kind is a guess from the name
        self._func_order: dict = {}  # function key -> the order it was first walked in (attribute kinds)
        # calls into other modules: id(ctx) -> (the callee as written, its occurrence among calls written
        # so); their lines, shown in messages ("called from train.py:88"), come from CPython's parse
        self._site_refs: dict = {}
        self._site_ordinals: dict = {}  # id(call node) -> occurrence (stable when a function is walked again)
        self._site_counts: dict = {}
        # walk state
        self.top = FuncInfo(key="<module>", name="<module>", class_key=None, node=None, parent=None)
        self._replaced: list = []  # functions whose key another definition took (release() breaks their cycles)
        self.func = self.top
        self.class_key: Optional[str] = None
        self.loop_stack: list[LoopInfo] = []
        self.guards: list[tuple] = []  # (period or None, non_xla bool, once bool)
        self._type_tested: list[str] = []  # names under `if isinstance(v, torch.Tensor):` (maybe a tensor, maybe not)
        self.closure_depth = 0
        self.error_depth = 0
        self.cond_depth = 0
        self.seq = 0
        self._block_syncs: list[list] = [[]]  # sync points recorded in each open block (their reach ends with it)
        self.stmt: Optional[cst.CSTNode] = None
        self.top_index = 0

    # ------------------------------------------------------------------ public API for rules
    def step_context(self) -> Ctx:
        """A handle on where the walk is now; resolved with ``frequency(ctx)`` after the walk."""
        period = None
        non_xla = False
        once = False
        for p, nx, o in self.guards:
            if p is not None:
                period = p
            non_xla = non_xla or nx
            once = once or o
        return Ctx(self.func, tuple(self.loop_stack), period, non_xla, self.closure_depth > 0, self.seq,
                   self.error_depth > 0, once)

    def type_tested(self, expr) -> bool:
        """``expr`` is a name the code tests with ``isinstance(v, torch.Tensor)`` around this point: the code
        expects both tensors and other values there, so an unknown kind stays unknown."""
        return type(expr) is cst.Name and expr.value in self._type_tested

    def report(self, rule, node, message: str, fix: str = "", when: str = "step") -> None:
        self.candidates.append(
            Candidate(rule, node, message, fix, self.step_context(), when, self.stmt, self.top_index)
        )

    def note_formatting(self, expr, dunders=T.FORMAT_DUNDERS[1:]) -> None:
        """``expr`` is formatted here (``f"{meter}"``, ``print(meter)``, ``str(meter)``): when it is an
        object of a project class, its first method of ``dunders`` that exists runs here, as often as
        this line (a call-graph edge; its findings say "called from train.py:51")."""
        cls_key = K.instance_class(self.kind(expr))
        if cls_key is None:
            return
        for d in dunders:
            target = self._method_of(cls_key, d)
            if target is not None:
                break
        else:
            return
        mod, _, local = target.partition(":")
        callee = local if mod == self.module_name and local in self.funcs else "@" + target
        ctx = self.step_context()
        self.func.calls.append((callee, ctx))
        if callee[0] == "@":
            self._site_refs[id(ctx)] = (None, expr, self.top_index)
        if self.loop_stack:
            self.loop_stack[-1].calls.append(callee)

    def is_builtin(self, func, name: str) -> bool:
        """``func`` is the builtin ``name``: not shadowed by an import or a def in this file."""
        return (
            type(func) is cst.Name
            and func.value == name
            and name not in self.imports
            and self._lookup_func(name) is None
        )

    # ------------------------------------------------------------------ the walk
    def run(self) -> None:
        # module-level functions, so that a call to a helper defined further down still resolves
        self.toplevel_defs = {
            s.name.value for s in self.module.body if type(s) is cst.FunctionDef
        }
        for i, stmt in enumerate(self.module.body):
            self.top_index = i
            self.walk(stmt)
        self._resolve()

    def _resolve(self) -> None:
        """After the walk: closures and compiled functions, parameters from call sites, and the
        module's own call graph (``self.steps``) for the rules that decide within the file."""
        funcs = self.funcs
        for name in self.closure_names:
            f = funcs.get(name) or funcs.get(name.split(".")[-1])
            if f is not None:
                f.closure = True
            else:
                for key, fi in funcs.items():
                    if key.endswith(f".<locals>.{name}"):
                        fi.closure = True
        for name in self.compiled_names:
            f = funcs.get(name)
            if f is not None:
                f.root = True
        for key in self.hook_keys:  # registered on a per-step event (register_forward_hook, ...)
            f = funcs.get(key)
            if f is not None:
                f.root = True
        self._refine_params()
        self.steps = Steps(self.funcs, self.loops, [self.top], self._local_targets)
        for c in self.candidates:
            if c.when in ("step", "step-any"):
                c.frequency = self.steps.frequency(c.ctx)

    def _local_targets(self, callee: str) -> list:
        """What a call may run in this module alone: itself, or for a dispatched hook (``@*on_step_end``)
        the methods of that name in this module's callback-like classes."""
        if callee.startswith(H.DISPATCH_PREFIX):
            meth = callee[len(H.DISPATCH_PREFIX):]
            return [k for k, f in self.funcs.items()
                    if f.name == meth and f.class_key is not None and self._callback_like(f.class_key)]
        return [callee] if callee in self.funcs else []

    def _callback_like(self, cls: str, _depth: int = 0) -> bool:
        """A class of this module whose name or a base's name says callback/hook, or that derives from a
        known callback base (hot_loops)."""
        if _depth > 8:
            return False
        if H.callback_like_name(cls.rpartition(".")[2]):
            return True
        for b in self.classes.get(cls, {}).get("bases", ()):
            if H.callback_like_name(b.rpartition(".")[2]) or b in H.PER_STEP_HOOK_METHODS:
                return True
            local = b[len(self.module_name) + 1:] if b.startswith(self.module_name + ".") else None
            if local in self.classes and self._callback_like(local, _depth + 1):
                return True
        return False

    def _external_bases(self, cls: Optional[str], _depth: int = 0) -> list:
        """The qualified bases of a class of this module outside it, through its bases in this module."""
        out = []
        for b in self.classes.get(cls, {}).get("bases", ()) if cls else ():
            local = b[len(self.module_name) + 1:] if b.startswith(self.module_name + ".") else None
            if local in self.classes and _depth < 8:
                out.extend(self._external_bases(local, _depth + 1))
            else:
                out.append(b)
        return out

    # the module's own call graph, for rules that decide in their finalize()
    def frequency(self, ctx: Ctx) -> Frequency:
        return self.steps.frequency(ctx)

    def is_step_loop(self, loop: LoopInfo) -> bool:
        return self.steps.is_step_loop(loop)

    def does_step(self, key: str) -> bool:
        return self.steps.does_step(key)

    def loop_trains(self, loop: LoopInfo) -> bool:
        """The loop's body runs backward() or an optimizer step, itself or through what it calls."""
        return self.steps.loop_trains(loop)


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
        for fname in _FIELDS.get(tp) or child_fields(tp):
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

    def walk_block(self, block) -> None:
        """An indented block (or a one-line suite). Guards that a statement adds for the rest of the
        block (an early ``return`` on XLA) end with the block."""
        if block is None:
            return
        depth = len(self.guards)
        self._block_syncs.append([])
        if type(block) in (cst.IndentedBlock, cst.SimpleStatementSuite):
            for s in block.body:
                self.walk(s)
        else:
            self.walk(block)
        del self.guards[depth:]
        for point in self._block_syncs.pop():
            point[2] = self.seq  # a barrier ends the step for what follows it in its own block only

    # statements ----------------------------------------------------------
    def _stmt(self, node) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        self._emit(type(node).__name__, node)
        self.walk_children(node)
        self.stmt = prev

    def _import(self, node: cst.Import) -> None:
        self._emit("Import", node)
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local, target = alias.asname.name.value, full
            else:
                local = target = full.split(".")[0]
            self.imports[local] = target
            if self._at_module_level():
                self.module_imports[local] = target
            self._bind_name(local, K.NOT_TENSOR)
            self._note_import(full)

    def _at_module_level(self) -> bool:
        return self.func is self.top and self.class_key is None

    def _import_from(self, node: cst.ImportFrom) -> None:
        self._emit("ImportFrom", node)
        mod = dotted_name(node.module) if node.module is not None else None
        if node.relative:
            mod = self._absolute(len(node.relative), mod)
        if mod:
            self._note_import(mod)
        if type(node.names) is cst.ImportStar:
            if mod and self._at_module_level() and mod not in self.star_modules:
                self.star_modules.append(mod)
            if mod and self.facts is not None and self.facts.knows(mod):
                for nm in self.facts.star_names(mod):  # `from utils import *` of a project module
                    self.imports.setdefault(nm, f"{mod}.{nm}")
                    self._bind_name(nm, K.NOT_TENSOR)
            return
        for alias in node.names:
            nm = dotted_name(alias.name)
            if nm is None:
                continue
            local = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else nm
            if mod:
                self.imports[local] = f"{mod}.{nm}"
                if self._at_module_level():
                    self.module_imports[local] = f"{mod}.{nm}"
            self._bind_name(local, K.NOT_TENSOR)

    def _absolute(self, dots: int, mod: Optional[str]) -> Optional[str]:
        """``from ..x import y`` in this module -> the absolute package name, or None above the root."""
        parts = self.module_name.split(".") if self.module_name != "__main__" else []
        if not self.is_package:
            parts = parts[:-1]
        up = dots - 1
        if up > len(parts):
            return None
        base = parts[: len(parts) - up] if up else parts
        name = ".".join(base + ([mod] if mod else []))
        return name or None

    def _note_import(self, full: str) -> None:
        if full == "torch" or full.startswith("torch."):
            self.imports_torch = True
        if full.startswith(("torch_xla", "accelerate", "lightning", "pytorch_lightning")):
            self.imports_xla = full.startswith("torch_xla") or self.imports_xla
            self.imports_torch = True

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
        value_kind = self.kind(node.value)
        for t in node.targets:
            self._bind_target(t.target, node.value, value_kind)
            self.walk(t.target)

    def _ann_assign(self, node: cst.AnnAssign) -> None:
        self._emit("AnnAssign", node)
        if node.value is not None:
            self.walk(node.value)
        k = self._annotation_kind(node.annotation.annotation)
        if k is K.UNKNOWN and node.value is not None:
            k = self.kind(node.value)
        self._bind_target(node.target, node.value, k)
        self.walk(node.target)

    def _aug_assign(self, node: cst.AugAssign) -> None:
        self._emit("AugAssign", node)
        self.walk(node.value)
        k = K.arithmetic(self.kind(node.target), self.kind(node.value))
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
        self.guards = []
        self.stmt = node
        self.cond_depth = 0
        if info.class_key is None:
            self.class_key = None
        self._bind_params(node, info)
        if info.parent is None and self.facts is not None:
            # what callers in other modules pass is known before the walk: seed it now, and walk the
            # function again after the file only if this file's own callers change the answer
            info.seeds = self._param_seeds(info, full=False)
            info.env.update(info.seeds)
        plain_method = (info.class_key is not None and info.class_key in self.classes
                        and not self.classes[info.class_key]["module"])
        saved_reads = self._attr_reads
        if plain_method:
            self._attr_reads = set()
        self._emit("FunctionDef", node)
        self.walk_block(node.body)
        if plain_method:
            self._format_seen[key] = self._read_attributes(info.class_key, self._attr_reads)
        self._attr_reads = saved_reads
        self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth, self.no_grad_depth = saved

    def _lambda(self, node: cst.Lambda) -> None:
        self._emit("Lambda", node)
        self.walk(node.body)

    def _class_def(self, node: cst.ClassDef) -> None:
        self.seq += 1
        for d in node.decorators:
            self.walk(d.decorator)
        bases = [a.value for a in node.bases]
        key = node.name.value if self.class_key is None else f"{self.class_key}.{node.name.value}"
        is_module = False
        autograd = False
        for b in bases:
            bq = self.qualname(b) or dotted_name(b) or ""
            if bq in ("torch.autograd.Function", "torch.autograd.function.Function") or bq.endswith("autograd.Function"):
                autograd = True
            q = self.qualname(b) or dotted_name(b) or ""
            if q in T.MODULE_BASES or q.endswith(("nn.Module", "LightningModule", "PreTrainedModel")):
                is_module = True
            elif dotted_name(b) in self.classes and self.classes[dotted_name(b)]["module"]:
                is_module = True
            elif (dotted_name(b) or "").endswith(("Module", "Model", "Layer", "Block", "Net")):
                is_module = True
            elif self.facts is not None and self.qualname(b) and self.facts.knows(self.qualname(b)):
                r = self.facts.resolve(self.qualname(b))  # a base class in another project module
                is_module = is_module or bool(r is not None and r[0] == "class" and self.facts.class_is_module(r[1]))
        names = [self.qualname(b) or (f"{self.module_name}.{dotted_name(b)}" if dotted_name(b) in self.classes
                                      else dotted_name(b)) for b in bases]
        self.classes[key] = {"module": is_module, "attrs": {}, "autograd": autograd,
                             "bases": [n for n in names if n]}
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
        loop = LoopInfo(node, self.func, iterates_loader=self._iterates_loader(node.iter),
                        cond_depth=self.cond_depth, top_index=self.top_index, hint=self._loop_hint(node.iter),
                        outer=self.loop_stack[-1] if self.loop_stack else None)
        self.loops.append(loop)
        self._bind_target(node.target, None, K.UNKNOWN, iter_expr=node.iter)
        if type(node.target) is cst.Name and self.kind(node.iter) in (K.TENSORS, K.CPU_TENSORS) \
                and _indexes_by(node.body, dotted_name(node.iter), node.target.value):
            self._bind_name(node.target.value, K.NOT_TENSOR)  # for k in batch: batch[k] = ...: keys of a dict
        self._host_batch_if_moved(node)
        self.walk(node.target)
        self.stmt = prev
        self.loop_stack.append(loop)
        self.walk_block(node.body)
        self.loop_stack.pop()
        if node.orelse is not None:
            self.walk_block(node.orelse.body)

    def _while(self, node: cst.While) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        loop = LoopInfo(node, self.func, cond_depth=self.cond_depth, top_index=self.top_index,
                        hint=self._loop_hint(node.test, counts=True),
                        outer=self.loop_stack[-1] if self.loop_stack else None)
        self.loops.append(loop)
        self.loop_stack.append(loop)
        self._emit("While", node)
        self.walk(node.test)
        self.stmt = prev
        self.walk_block(node.body)
        self.loop_stack.pop()
        if node.orelse is not None:
            self.walk_block(node.orelse.body)

    def _loop_hint(self, head, counts: bool = False) -> Optional[str]:
        """What a loop is, from the words of its header and its functions' names, and whether it runs
        under ``torch.no_grad()`` (hot_loops)."""
        names = []
        stack = [head]
        while stack and len(names) < 32:
            n = stack.pop()
            if type(n) is cst.Name:
                names.append(n.value)
            elif type(n) is cst.Attribute:
                names.append(n.attr.value)
                stack.append(n.value)
            elif type(n) in NODE_TYPES:
                stack.extend(child_nodes(n))
        f = self.func
        no_grad = self.no_grad_depth > 0
        while f is not None:
            names.append(f.name)
            no_grad = no_grad or f.no_grad
            f = f.parent
        kind = H.loop_kind(H.words_of(*names))
        if kind in (H.DECODE, H.ROLLOUT) and not counts and not _counts_positions(head):
            kind = None  # `for sample in batch`: a loop over data, not over token positions or env steps
        return kind if kind is not None else (H.EVAL if no_grad else None)

    def _if(self, node: cst.If) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        self._emit("If", node)
        self.walk(node.test)
        self.stmt = prev
        period = _period_of(node.test)
        polarity = xla_polarity(node.test)
        once = period is None and _runs_once(node.test, node.body, self.func.step_counters)
        self.cond_depth += 1
        self.guards.append((period, polarity == "non-xla", once))
        exits = self._exits(node.body)  # `if not math.isfinite(loss): print(...); sys.exit(1)`: once at most
        self.error_depth += exits
        tested = _tensor_type_test(node.test)
        if tested:
            self._type_tested.append(tested)
        self.walk_block(node.body)
        if tested:
            self._type_tested.pop()
        self.error_depth -= exits
        self.guards.pop()
        if node.orelse is not None:
            self.guards.append((None, polarity == "xla", False))
            if type(node.orelse) is cst.If:
                self._if(node.orelse)
            else:
                self.walk_block(node.orelse.body)
            self.guards.pop()
        self.cond_depth -= 1
        if polarity == "xla" and node.orelse is None and _ends_block(node.body):
            # `if on_tpu: return pad(..., "max_length")`: the rest of this block runs off XLA only
            self.guards.append((None, True, False))

    def _exits(self, block) -> bool:
        """The block ends the program or raises: it runs at most once, like an error path."""
        body = getattr(block, "body", ())
        last = body[-1] if body else None
        if type(last) is not cst.SimpleStatementLine or not last.body:
            return False
        small = last.body[-1]
        if type(small) is cst.Raise:
            return True
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            func = small.value.func
            q = self.qualname(func) or (func.value if type(func) is cst.Name and func.value not in self.imports else None)
            return q in T.EXIT_FUNCTIONS
        return False

    def _try(self, node) -> None:
        self.seq += 1
        self._emit(type(node).__name__, node)
        self.walk_block(node.body)
        self.cond_depth += 1
        for h in node.handlers:
            if h.type is not None:
                self.walk(h.type)
            self.walk_block(h.body)
        if node.orelse is not None:
            self.walk_block(node.orelse.body)
        self.cond_depth -= 1
        if node.finalbody is not None:
            self.walk_block(node.finalbody.body)

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
        self.no_grad_depth += no_grad
        self.walk_block(node.body)
        self.no_grad_depth -= no_grad

    def _raise(self, node: cst.Raise) -> None:
        self._emit("Raise", node)
        self.error_depth += 1
        self.walk_children(node)
        self.error_depth -= 1

    def _assert(self, node: cst.Assert) -> None:
        self._emit("Assert", node)
        self.walk(node.test)
        if node.msg is not None:
            self.error_depth += 1
            self.walk(node.msg)
            self.error_depth -= 1

    def _return(self, node: cst.Return) -> None:
        self._emit("Return", node)
        if node.value is not None:
            self.walk(node.value)
            k = self.kind(node.value)
            f = self.func
            if f.return_kind is K.UNKNOWN or f.return_kind == k:
                f.return_kind = k if f.return_kind is K.UNKNOWN else f.return_kind

    def _comp(self, node) -> None:
        """List/set/dict comprehensions and generators: bind the ``for`` targets before the element."""
        self._emit(type(node).__name__, node)
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
        self._callee_memo = [node.func, _UNSET]
        try:
            self._emit("Call", node)
        finally:
            self._callee_memo = None
        q = self.qualname(node.func)
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
        self._register_buffer(node)
        self._note_call(node, q)

    def _register_buffer(self, node: cst.Call) -> None:
        """``self.register_buffer("queue_ptr", torch.zeros(1))``: the module's attribute is a tensor, on
        the module's device."""
        func = node.func
        if not (type(func) is cst.Attribute and func.attr.value in ("register_buffer", "register_parameter")
                and type(func.value) is cst.Name and func.value.value == "self"):
            return
        args = positional_args(node)
        name = string_value(args[0]) if args else None
        cls = self._current_class()
        if name is None or len(args) < 2 or cls is None or cls not in self.classes:
            return
        if self.kind(args[1]) in K.ANY_TENSOR or type(args[1]) is cst.Call and (
                self.qualname(args[1].func) or "").startswith(("torch.", "nn.")):
            attrs = self.classes[cls]["attrs"]
            attrs[name] = K.TENSOR if attrs.get(name, K.TENSOR) == K.TENSOR else K.UNKNOWN

    # ------------------------------------------------------------------ what this module exports
    def export(self, locator, noqa=None, call_lines: Optional[dict] = None) -> dict:
        """(summary, candidates) as plain data: what other modules may ask about this one, and what
        the rules found here with the context that decides how often it runs.

        ``noqa``: line -> suppressed codes (None: all); a candidate a ``# noqa`` comment suppresses is
        kept, marked (its row's last item), so that one walk serves a host that applies its own noqa
        (flake8) as well as the CLI (``engine.decide``). The positions of candidates and of calls into
        other modules are the only ones computed."""
        mod = self.module_name
        ctx_ids: dict = {}
        ctxs: list = []
        site_lines = call_lines or {}
        loop_ids = {id(lp): i for i, lp in enumerate(self.loops)}

        def callee_ref(callee: str) -> str:
            if callee[0] != "@" and callee not in self.funcs and "." in callee:
                cls = callee.rpartition(".")[0]
                if cls in self.classes:  # self.meth() inherited from a base class elsewhere
                    return f"@{mod}:{callee}"
            return callee

        def ctx_id(ctx) -> int:
            i = ctx_ids.get(id(ctx))
            if i is None:
                line = 0
                site = self._site_refs.get(id(ctx))
                if site is not None and site[0] is None:  # an implicit call (formatting): its node
                    line = locator.span(site[1], site[2], self._func_within(ctx.func))[0]
                elif site is not None:
                    lines = site_lines.get(site[0], ())
                    line = lines[site[1]] if site[1] < len(lines) else 0
                f = ctx.func
                i = ctx_ids[id(ctx)] = len(ctxs)
                ctxs.append([f.key if f is not self.top else "", [loop_ids[id(lp)] for lp in ctx.loops if id(lp) in loop_ids],
                             ctx.period, ctx.non_xla, ctx.closure or f.closure, ctx.seq, ctx.error_path, ctx.once, line])
            return i

        funcs = {}
        for key, f in self.funcs.items():
            funcs[key] = [f.name, f.class_key, f.root, f.closure, f.step_call_outside_loops, f.barrier_outside_loops,
                          f.trains_outside_loops, f.return_kind, [(callee_ref(c), ctx_id(x)) for c, x in f.calls],
                          [(s, callee_ref(c) if c is not None else None, u) for s, c, u in f.sync_points], f.sets_up,
                          f.runs_model]
        top_calls = [(callee_ref(c), ctx_id(x)) for c, x in self.top.calls]
        loops = [[lp.func.key if lp.func is not self.top else "", lp.iterates_loader, lp.direct_step_call, lp.trains,
                  [callee_ref(c) for c in lp.calls], [(s, callee_ref(c) if c is not None else None, u) for s, c, u in lp.sync_points],
                  loop_ids.get(id(lp.outer)), lp.runs_model, lp.hint]
                 for lp in self.loops]
        classes = {k: [c["module"], {a: v for a, v in c["attrs"].items() if v is not None}, c.get("bases", [])]
                   for k, c in self.classes.items()}
        sites: dict = {}
        for callee, recs in self.call_sites.items():
            ref = callee_ref(callee)
            if ref[0] == "@":
                _put_sites(sites, ref, recs)
            elif ref in self.funcs and self.funcs[ref].class_key is not None:
                # `self.debug(batch)` in a base class: overrides in other modules receive what it passes
                _put_sites(sites, f"@{mod}:{ref}", [r for r in recs if r[3]])
        cands = []
        cand_ids: dict = {}
        for c in self.candidates:
            if c.when == "always" and (c.ctx.non_xla or c.ctx.error_path):
                continue
            if c.when == "custom" and c.frequency is None and not getattr(c.rule, "decides_in_project", False):
                continue
            line, col, end_line, end_col = locator.span(c.node, c.top_index, self._within(c))
            quiet = bool(noqa) and _suppressed(noqa, self._noqa_lines(locator, c, line, end_line), c.rule.code)
            fr = c.frequency
            cand_ids[id(c)] = len(cands)
            cands.append([c.rule.code, line, col, end_line, end_col, c.message, c.fix, c.when, ctx_id(c.ctx),
                          [fr.level, fr.period, fr.after_sync] if fr is not None and c.when == "custom" else None,
                          *self._fix_parts(locator, c), quiet])
        rules = {}
        for r in self.rules:
            data = r.export(ctx_id, lambda c: cand_ids.get(id(c)))
            if data:
                rules[r.code] = data
        summary = {"module": mod, "imports": dict(self.module_imports), "stars": list(self.star_modules),
                   "funcs": funcs, "top_calls": top_calls, "loops": loops, "ctxs": ctxs, "classes": classes, "sites": sites,
                   "hooks": sorted(k for k in self.hook_keys if k[0] == "@")}  # hooks defined elsewhere
        return {"summary": summary, "cands": cands, "rules": rules}

    def release(self) -> None:
        """Break the model's reference cycles once its walk is exported (functions and the contexts of
        their calls, loops and their outer loops, rules and the model): the syntax tree they hold is then
        freed by reference counting at once. Left to the cyclic collector, the whole tree (millions of
        nodes on a large module) is traversed again to find it, after every walk: about a tenth of a
        walk's cost. The model is unusable afterwards."""
        for f in [*self.funcs.values(), *self._replaced, self.top]:
            f.__dict__.clear()
        for x in [*self.loops, *self.candidates, *self.rules]:
            x.__dict__.clear()
        self.__dict__.clear()

    def _fix_parts(self, locator, c) -> list:
        """The message's parts a rule attached (``rules.set_parts``): the cost, and an automatic fix as
        text edits of this tree (node, replacement node -> its span and the replacement's code; a fifth
        item of the edit holds more (node, replacement) pairs in the same function, applied together)."""
        edit = getattr(c, "edit", None)
        edits, applicability, title = (), "", ""
        if edit is not None:
            node, replacement, applicability, title, *more = edit
            within = self._within(c)
            edits = tuple((*locator.span(n, c.top_index, within), self.module.code_for_node(r))
                          for n, r in ((node, replacement), *(more[0] if more else ())))
        return [getattr(c, "cost", ""), edits, applicability, title]

    def _within(self, c):
        """The function that holds candidate ``c`` (its def node, its key), for the locator."""
        return self._func_within(c.ctx.func)

    def _func_within(self, f):
        return (f.node, f.key) if f is not self.top and f.node is not None else None

    def _noqa_lines(self, locator, c, line: int, end_line: int) -> set:
        """``# noqa`` counts on the reported line, and on the first or last line of its statement."""
        lines = {line}
        if c.stmt is not None:
            sl, _, el, _ = locator.span(c.stmt, c.top_index, self._within(c))
            if type(c.stmt) in (cst.If, cst.For, cst.While, cst.With, cst.FunctionDef, cst.ClassDef):
                el = end_line  # a compound statement: its header, not its whole body
            lines |= {sl, el}
        return lines


    # ------------------------------------------------------------------ call graph and step marks
    def _note_call(self, node: cst.Call, q: Optional[str]) -> None:
        func = node.func
        step = False  # marks a training step (a loop doing it is a step loop)
        barrier = False  # ends the step's graph (sync, mark_step)
        trains = False  # backward() or an optimizer step, as opposed to a bare barrier
        if q in T.STEP_FUNCTIONS:
            step = True
            barrier = T.STEP_FUNCTIONS[q]
            if q.endswith("optimizer_step"):
                b = keyword_arg(node, "barrier")
                barrier = type(b) is cst.Name and b.value == "True"
                trains = True
        elif type(func) is cst.Attribute:
            meth = func.attr.value
            recv = last_name(func.value) or ""
            if meth in T.STEP_METHODS_ANY_RECEIVER:
                step = trains = True
                if type(func.value) is cst.Name and self.kind(func.value) is K.UNKNOWN and not node.args:
                    # `loss = model.get_loss(x); loss.backward()`: what is backpropagated is a device tensor
                    self._bind_name(func.value.value, K.TENSOR)
            elif meth == "step" and any(h in recv.lower() for h in T.STEP_RECEIVER_HINTS) and (
                not node.args or "scaler" in recv.lower()
            ):
                step = trains = True  # optimizer.step(), scaler.step(optimizer)
            elif meth in ("mark_step", "optimizer_step") and recv in ("xm", "xla_model"):
                step = True
                barrier = meth == "mark_step"
                trains = meth == "optimizer_step"
            elif meth == "sync" and recv == "torch_xla":
                step = barrier = True
        if not self.loop_stack and self.func is not self.top and _sets_up(q, func):
            self.func.sets_up = True
        if q in T.COMPILE_WRAPPERS:
            for a in positional_args(node)[:1]:
                n = dotted_name(a)
                if n:
                    self.compiled_names.add(n)
        self._note_hot(node, func)
        callee = self._callee_key(func)
        ctx = self.step_context()
        if callee is not None and not self._rewalking_quietly:
            self._record_call_site(callee, node, func)
        if step:
            if self.loop_stack:
                loop = self.loop_stack[-1]
                loop.direct_step_call = True
                loop.trains = loop.trains or trains
            else:
                self.func.step_call_outside_loops = True
                self.func.barrier_outside_loops = self.func.barrier_outside_loops or barrier
                self.func.trains_outside_loops = self.func.trains_outside_loops or trains
        if callee is not None:
            self.func.calls.append((callee, ctx))
            if callee[0] == "@" or ("." in callee and callee not in self.funcs):
                text = dotted_name(node.func) or "?"
                ordinal = self._site_ordinals.get(id(node))
                if ordinal is None:
                    ordinal = self._site_ordinals[id(node)] = self._site_counts.get(text, 0)
                    self._site_counts[text] = ordinal + 1
                self._site_refs[id(ctx)] = (text, ordinal)
            if self.loop_stack:
                self.loop_stack[-1].calls.append(callee)
        if self.closure_depth == 0 and (barrier or callee is not None):
            point = [self.seq, None if barrier else callee, None]
            (self.loop_stack[-1] if self.loop_stack else self.func).sync_points.append(point)
            self._block_syncs[-1].append(point)

    # ------------------------------------------------------------------ hot loops and hooks (hot_loops)
    def _note_hot(self, node: cst.Call, func) -> None:
        """A call that runs the model makes its function and its innermost loop hot; ``env.step(a)``
        makes the loop a rollout; ``register_forward_hook(fn)`` / ``add_callback("on_batch_end", fn)``
        make ``fn`` a per-step hook."""
        if self._runs_model_call(node, func):
            if self.loop_stack:
                self.loop_stack[-1].runs_model = True
            else:  # one model pass per call: a loop calling it is hot (not one calling a whole evaluation)
                self.func.runs_model = True
        if type(func) is not cst.Attribute:
            return
        meth = func.attr.value
        if meth in H.WHOLE_DECODE_FUNCTIONS and self.loop_stack and self.loop_stack[-1].hint == H.DECODE:
            self.loop_stack[-1].hint = None  # one generate() per iteration: not a loop over token positions
        if meth == "step" and self.loop_stack and H.words_of(last_name(func.value)) and \
                H.words_of(last_name(func.value))[-1] in H.ENV_RECEIVER_WORDS:
            self.loop_stack[-1].hint = H.ROLLOUT
        fn = None
        if meth in H.PER_STEP_REGISTRATIONS:
            args = positional_args(node)
            fn = args[0] if args else keyword_arg(node, "hook")
        elif meth in H.EVENT_REGISTRATIONS:
            args = positional_args(node)
            event = keyword_arg(node, "event") or (args[0] if len(args) >= 2 else None)
            if event is not None and H.is_per_step_event(string_value(event) or dotted_name(event)):
                fn = args[-1] if args and args[-1] is not event else keyword_arg(node, "callback")
        if fn is not None:
            if type(fn) is cst.Call and last_name(fn.func) == "partial" and fn.args:
                fn = fn.args[0].value  # functools.partial(log_hook, name=...)
            key = self._callee_key(fn) if type(fn) in (cst.Name, cst.Attribute) else None
            if key is not None:
                self.hook_keys.add(key)

    def _runs_model_call(self, node: cst.Call, func) -> bool:
        """``model(x)``, ``self.layers[i](x)``, ``model.generate(idx)``, ``self(x)`` in a module: a call
        that runs the model (not a loss or metric, not a constructor, not a model fed CPU tensors)."""
        if any(self.kind(a.value) in (K.CPU_TENSOR, K.CPU_TENSORS) for a in node.args):
            return False  # a model fed host tensors runs on the host
        if type(func) is cst.Name:
            name = func.value
            if name == "self":
                cls = self._current_class()
                return bool(cls and self.classes.get(cls, {}).get("module"))
            if not name[:1].islower():
                return False  # a class: building a layer, not running one
            words = name_words(name)
            if set(words) & H.NOT_MODEL_WORDS:
                return False
            if self._lookup_func(name) is not None or name in self.imports:
                return False
            found, k = self._env_lookup(name)
            if found and k is not K.UNKNOWN:
                return k == K.MODULE
            return bool(words) and words[-1] in T.MODEL_NAME_WORDS and bool(node.args)
        if type(func) is cst.Attribute:
            last = func.attr.value
            if set(name_words(last)) & H.NOT_MODEL_WORDS or not last[:1].islower():
                return False
            if self.qualname(func) is not None:
                return False
            if self.kind(func) == K.MODULE:
                return True  # self.proj(x)
            rk = self.kind(func.value)
            words = name_words(last_name(func.value) or "")
            model_named = rk is K.UNKNOWN and bool(words) and words[-1] in T.MODEL_NAME_WORDS
            if last in H.MODEL_RUN_METHODS:
                return rk == K.MODULE or (model_named and last != "sample")
            # a submodule of a model: decoder.embedding(x), self.model.encoder(src)
            return (rk == K.MODULE or model_named) and bool(node.args) and \
                last not in H.MODULE_UTILITY_METHODS and not last.startswith(H.MODULE_UTILITY_PREFIXES)
        if type(func) is cst.Subscript:
            return self.kind(func) == K.MODULE
        return False

    def _record_call_site(self, callee: str, node: cst.Call, func) -> None:
        pos, kw = [], {}
        for a in node.args:
            if a.star == "*":
                return  # f(*args): positions unknown
            k = self.kind(a.value)
            if a.star == "**":  # f(**losses): only the callee's **kwargs learns from it (_param_seeds)
                if "**" not in kw or k in K.HOLDS_DEVICE_TENSOR:
                    kw["**"] = k
            elif a.keyword is None:
                pos.append(k)
            else:
                kw[a.keyword.value] = k
        via_self = type(func) is cst.Attribute
        self.call_sites.setdefault(callee, []).append((self.func.key, pos, kw, via_self))

    # ------------------------------------------------------------------ parameters from call sites
    def _param_seeds(self, f: FuncInfo, full: bool = True) -> dict:
        """Kinds for ``f``'s unknown parameters from what its callers pass: in this file and in other
        modules (``full``), or only in other modules (the first walk of ``f``). In a project, the
        question and its answer go with the walk's reads (``seeds.same_seeds``)."""
        node = f.node
        if type(node) is not cst.FunctionDef:
            return {}
        shape = self._seed_shape(f, node, full)
        facts = self.facts
        if facts is None:
            return S.seeds(shape, [], list, self._known_param(f))
        gkey = f"{self.module_name}:{f.key}"
        out = S.seeds(shape, facts.sites(gkey), lambda: facts.vetoes(gkey), self._known_param(f))
        facts.note_seeds(gkey, shape, out)
        return out

    def _known_param(self, f: FuncInfo) -> Callable[[str], bool]:
        """Whether the walk knows a name's kind otherwise (annotated, defaulted): not from a seed."""
        env, seeds = f.env, f.seeds
        return lambda name: env.get(name, K.UNKNOWN) is not K.UNKNOWN and name not in seeds

    def _seed_shape(self, f: FuncInfo, node: cst.FunctionDef, full: bool) -> S.Shape:
        """``f``'s side of its seeds (``seeds.Shape``): its parameters, and with ``full`` what this
        module's callers pass it."""
        p = node.params
        names = tuple(x.name.value for x in list(p.posonly_params) + list(p.params))
        offset = 1 if f.class_key is not None and names and names[0] in ("self", "cls") else 0
        named = names + tuple(x.name.value for x in p.kwonly_params)
        known = self._known_param(f)
        none = ({}, (), False)
        shape = S.Shape(
            names, offset, named,
            p.star_kwarg.name.value if type(p.star_kwarg) is cst.Param else None,
            tuple(sorted(self._guessed_params.get(f.key, ()))),
            tuple(n for n in named if known(n)),
            f.class_key is not None and not self.classes.get(f.class_key, {"module": True})["module"],
            none, none, full)
        if full:
            own = [(pos, kw) for _c, pos, kw, _v in self.call_sites.get(f.key, ())]
            base = [(pos, kw) for _c, pos, kw, _v in self._base_sites(f)]
            shape = shape._replace(own=S.compact(S.gather(own, shape)), base=S.compact(S.gather(base, shape)))
        return shape

    def _base_sites(self, f: FuncInfo) -> list:
        """An override receives what its base classes (in this module) pass to ``self.<name>(...)``."""
        out, seen, stack = [], set(), [f.class_key] if f.class_key else []
        prefix = self.module_name + "."
        while stack:
            for b in self.classes.get(stack.pop(), {}).get("bases", ()):
                local = b[len(prefix):] if b.startswith(prefix) else None
                if local in self.classes and local not in seen:
                    seen.add(local)
                    stack.append(local)
                    out.extend(site for site in self.call_sites.get(f"{local}.{f.name}", ()) if site[3])
        return out

    def _refine_params(self) -> None:
        """Re-walk the functions whose parameters turn out to be tensors, with those kinds."""
        plans = []
        for f in list(self.funcs.values()):
            if f.parent is None and f.node is not None:
                seeds = self._param_seeds(f)
                if seeds != f.seeds:  # the first walk had only what other modules pass
                    plans.append((f, seeds))
        before = {f.key: f.return_kind for f, _ in plans}
        for f, seeds in plans:
            self._rewalk(f, seeds)
            f.seeds = seeds
        for _ in range(self._RETURN_ROUNDS):
            if not self._rewalk_callers(before):
                break
            plans = []  # what the callers now pass: their callees' parameters may be known better
            for f in list(self.funcs.values()):
                if f.parent is None and f.node is not None:
                    seeds = self._param_seeds(f)
                    if seeds != f.seeds:
                        plans.append((f, seeds))
            before = {f.key: f.return_kind for f, _ in plans}
            for f, seeds in plans:
                self._rewalk(f, seeds)
                f.seeds = seeds
        self._rewalk_format_methods()

    def _rewalk_format_methods(self) -> None:
        # methods of plain classes read attributes that other methods set (a meter's `__str__` what its
        # `update()` stored): walked before those were known, walk them again with the final attributes
        for key, (reads, seen) in self._format_seen.items():
            f = self.funcs.get(key)
            if f is not None and f.node is not None and self._read_attributes(f.class_key, reads)[1] != seen:
                self._rewalk(f, f.seeds)

    def _read_attributes(self, class_key: str, reads) -> tuple:
        """(``reads``, the kinds of those attributes of ``class_key`` now; all of them when ``reads`` is
        None): what a method of a plain class saw of its object."""
        attrs = self.classes[class_key]["attrs"]
        if reads is None:
            return None, dict(attrs)
        return reads, {a: attrs.get(a) for a in reads}

    def note_reads_all_attributes(self) -> None:
        """The method being walked reads every attribute of its object (``**self.__dict__``)."""
        self._attr_reads = None

    # rounds of walking callers again when what a function returns became known on its second walk
    _RETURN_ROUNDS = 2

    def _rewalk_callers(self, before: dict) -> bool:
        """``mask = make_mask(x)`` read ``make_mask``'s return before its parameters were known: walk the
        functions of this file that call a function whose return kind changed again, recording what they
        pass anew. True when any was walked."""
        changed = {k for k, rk in before.items() if k in self.funcs and self.funcs[k].return_kind != rk}
        if not changed:
            return False
        callers = {}
        for g in self.funcs.values():
            if g.node is None or not any(c in changed for c, _ in g.calls):
                continue
            while g.parent is not None:
                g = g.parent
            if g.node is not None and g.key not in changed:
                callers[g.key] = g
        for g in callers.values():
            prefix = g.key + ".<locals>."
            for callee, recs in self.call_sites.items():
                recs[:] = [r for r in recs if r[0] != g.key and not r[0].startswith(prefix)]
            self._rewalk(g, g.seeds, record=True)
        return bool(callers)

    def _rewalk(self, f: FuncInfo, seeds: dict, record: bool = False) -> None:
        """Walk ``f`` again with parameter kinds ``seeds``; ``record``: its call sites are recorded
        again (its callees' parameters may learn from them), else the first walk's are kept."""
        prefix = f.key + ".<locals>."
        mine = lambda fi: fi is f or fi.key.startswith(prefix)  # noqa: E731
        mine_key = lambda key: key == f.key or key.startswith(prefix)  # noqa: E731
        if record:
            for recs in self.call_sites.values():
                recs[:] = [r for r in recs if not mine_key(r[0])]
        self.candidates = [c for c in self.candidates if not mine(c.ctx.func)]
        self.loops = [lp for lp in self.loops if not mine(lp.func)]
        for key in [k for k in self.funcs if k.startswith(prefix)]:
            del self.funcs[key]
        f.env.clear()
        f.local_funcs.clear()
        f.step_counters.clear()
        f.calls.clear()
        f.sync_points.clear()
        f.sets_up = False
        f.step_call_outside_loops = f.barrier_outside_loops = f.trains_outside_loops = False
        f.runs_model = False
        f.return_kind = K.UNKNOWN
        self._kind_cache.clear()
        for c in self.classes.values():  # its attribute assignments are made again by the walk
            for name, entries in c.get("entries", {}).items():
                kept = [e for e in entries if not mine_key(e[2])]
                if len(kept) != len(entries):
                    entries[:] = kept
                    if kept:
                        c["attrs"][name] = _attribute_kind(kept)
                    else:
                        c["attrs"].pop(name, None)
        for rule in self.rules:
            rule.before_rewalk()
        saved = (self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth,
                 self.top_index, self.closure_depth, self.error_depth)
        self.func, self.loop_stack, self.guards = f, [], []
        self.class_key, self.stmt, self.cond_depth = f.class_key, f.node, 0
        self.top_index, self.closure_depth, self.error_depth = f.top_index, 0, 0
        self._rewalking_quietly = not record
        try:
            self._bind_params(f.node, f)
            f.env.update(seeds)
            self.walk_block(f.node.body)
        finally:
            self._rewalking_quietly = False
            (self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth,
             self.top_index, self.closure_depth, self.error_depth) = saved

    def _callee_key(self, func) -> Optional[str]:
        """The function a call runs: a key of this module (``helper``, ``Cls.meth``), or ``@`` and the
        name of a function of another project module (``@pkg.losses.masked_ce``,
        ``@pkg.core:Trainer.step`` for a method of an object of a known class), or None."""
        memo = self._callee_memo
        if memo is not None and memo[0] is func:
            if memo[1] is _UNSET:
                memo[1] = self._resolve_callee(func)
            return memo[1]
        return self._resolve_callee(func)

    def _resolve_callee(self, func) -> Optional[str]:
        if type(func) is cst.Name:
            f = self._lookup_func(func.value)
            if f is None and func.value in getattr(self, "toplevel_defs", ()):
                found, _ = self._env_lookup(func.value)
                return func.value if not found else None  # defined further down this file
            if f is not None:
                return f.key
            c = self.classes.get(func.value)
            if c is not None and not c["module"] and f"{func.value}.__init__" in self.funcs:
                return f"{func.value}.__init__"  # ProgressMeter(n, [top1, top5]): its __init__ runs here
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            cls = self._current_class()
            if cls is not None:
                held = self.classes.get(cls, {}).get("func_attrs", {}).get(func.attr.value)
                if held is not None and f"{cls}.{func.attr.value}" not in self.funcs:
                    return held  # `self.neg_loss = _neg_loss` in __init__, called as `self.neg_loss(out, t)`
                return f"{cls}.{func.attr.value}"
        if type(func) is cst.Attribute:  # meter.update(loss) on an object of a class of this file
            mod, _, cls = (K.instance_class(self.kind(func.value)) or "").partition(":")
            if mod == self.module_name and f"{cls}.{func.attr.value}" in self.funcs:
                return f"{cls}.{func.attr.value}"
        if self.facts is None:
            return self._dispatched_hook(func)
        q = self.qualname(func)
        if q is not None:
            if not self.facts.knows(q):
                return None
            r = self.facts.resolve(q)
            if r is not None and r[0] == "class":  # a constructor of a plain class runs its __init__
                cls_key = K.instance_class(self._project_call_kind(q))
                if cls_key is not None:
                    return f"@{cls_key}.__init__"
            return "@" + q
        if type(func) is cst.Attribute:
            cls_key = K.instance_class(self.kind(func.value))
            if cls_key is not None:
                return f"@{cls_key}.{func.attr.value}"
        return self._dispatched_hook(func)

    def _dispatched_hook(self, func) -> Optional[str]:
        """``cb.on_step_end(self)`` on an object of unknown class: the project's callback methods of that
        name (hot_loops.DISPATCHED_HOOKS)."""
        if type(func) is cst.Attribute and func.attr.value in H.DISPATCHED_HOOKS and self.kind(func.value) is K.UNKNOWN:
            return H.DISPATCH_PREFIX + func.attr.value
        return None

    def _current_class(self) -> Optional[str]:
        f = self.func
        while f is not None:
            if f.class_key is not None:
                return f.class_key
            f = f.parent
        return self.class_key

    def _lookup_func(self, name: str) -> Optional[FuncInfo]:
        f = self.func
        while f is not None:
            key = f.local_funcs.get(name)
            if key is not None:
                return self.funcs.get(key)
            f = f.parent
        return self.funcs.get(name)

    def _is_root_function(self, node: cst.FunctionDef, info: FuncInfo) -> bool:
        for d in node.decorators:
            dec = d.decorator.func if type(d.decorator) is cst.Call else d.decorator
            q = self.qualname(dec) or dotted_name(dec)
            if q in T.COMPILE_WRAPPERS:
                return True
        name = node.name.value
        if info.class_key is not None:
            cls = self.classes.get(info.class_key, {})
            if name == "forward" and (cls.get("module") or self.imports_torch):
                return True
            if name in ("training_step", "validation_step", "test_step", "predict_step"):
                return True
            if name in H.hook_methods_of(self._external_bases(info.class_key)):
                return True  # a per-step hook of a Lightning / Hugging Face base class
        for d in node.decorators:  # @trainer.on(Events.ITERATION_COMPLETED)
            dec = d.decorator
            if type(dec) is cst.Call and last_name(dec.func) in H.EVENT_REGISTRATIONS and dec.args:
                ev = dec.args[0].value
                ev = ev.func if type(ev) is cst.Call else ev  # Events.ITERATION_COMPLETED(every=10)
                if H.is_per_step_event(string_value(ev) or dotted_name(ev)):
                    return True
        return False

    # ------------------------------------------------------------------ bindings
    def _env_lookup(self, name: str):
        f = self.func
        while f is not None:
            if name in f.env:
                return True, f.env[name]
            f = f.parent
        if name in self.top.env:
            return True, self.top.env[name]
        return False, K.UNKNOWN

    def _bind_name(self, name: str, kind) -> None:
        if kind in K.DEVICE_TENSORS and name in T.CPU_TENSOR_NAMES:
            kind = K.CPU_TENSOR
        env = self.func.env
        env[name] = kind
        if name + "[" in self._element_prefixes:  # `images = ...` again: its elements' own kinds are gone
            for key in [k for k in env if k.startswith(name + "[")]:
                del env[key]

    def _bind_target(self, target, value, kind, iter_expr=None) -> None:
        """Bind an assignment/for target. ``iter_expr``: the target takes the elements of it."""
        if iter_expr is not None:
            self._bind_iteration(target, iter_expr)
            return
        if type(target) is cst.Name:
            self._bind_name(target.value, kind)
        elif type(target) in (cst.Tuple, cst.List):
            elts = target.elements
            if type(value) in (cst.Tuple, cst.List) and len(value.elements) == len(elts):
                for e, v in zip(elts, value.elements):
                    self._bind_target(e.value, v.value, self.kind(v.value))
                return
            if type(value) is cst.Call and last_name(value.func) == "prepare":
                args = positional_args(value)
                if len(args) == len(elts):
                    for e, a in zip(elts, args):
                        k = self.kind(a)
                        if k in (K.CPU_LOADER, K.LOADER) or self._looks_like_loader(a):
                            k = K.LOADER
                        self._bind_target(e.value, None, k)
                    return
            ek = K.element_of(kind) if kind is not K.UNKNOWN else K.UNKNOWN
            if kind == K.ITEMS:
                ek = K.TENSOR
            for e in elts:
                if type(e) is cst.StarredElement:
                    self._bind_target(e.value, None, K.TENSORS if ek == K.TENSOR else K.UNKNOWN)
                else:
                    self._bind_target(e.value, None, ek)
        elif type(target) is cst.Attribute:
            if type(target.value) is cst.Name and target.value.value == "self":
                cls = self._current_class()
                if cls is not None and cls in self.classes:
                    attrs = self.classes[cls]["attrs"]
                    name = target.attr.value
                    if type(value) is cst.Name and value.value == "None":
                        return  # `self.loss = None` until the first step sets it: no kind of its own
                    if type(value) is cst.Name:
                        f = self._lookup_func(value.value)
                        if f is not None or value.value in getattr(self, "toplevel_defs", ()):
                            self.classes[cls].setdefault("func_attrs", {})[name] = f.key if f else value.value
                    # every assignment is kept with the function that made it: walking a function again
                    # (better-known parameters) replaces its own assignments, not the others'
                    entries = self.classes[cls].setdefault("entries", {}).setdefault(name, [])
                    order = self._func_order.setdefault(self.func.key, len(self._func_order))
                    entries.append((order, len(entries), self.func.key, kind, _is_number_literal(value)))
                    attrs[name] = _attribute_kind(entries)
        elif type(target) is cst.StarredElement:
            self._bind_target(target.value, None, K.UNKNOWN)
        elif type(target) is cst.Subscript:
            key = element_key(target)
            if key is not None:  # `images[0] = images[0].cuda()`: this element's own kind
                self._element_prefixes.add(key[: key.index("[") + 1])
                self.func.env[key] = kind
            self._holds(target.value, kind)  # logs["loss"] = loss

    def _holds(self, container, kind) -> None:
        """A device tensor was put into ``container`` (``d[k] = t``, ``d.update(k=t)``, ``xs.append(t)``):
        a Python dict or list of this function becomes a container of tensors (printing it reads them)."""
        if kind not in K.HOLDS_DEVICE_TENSOR:
            return
        if type(container) is cst.Attribute and type(container.value) is cst.Name and container.value.value == "self":
            self._bind_target(container, None, K.TENSORS)  # self.history.append(loss)
            return
        if type(container) is not cst.Name:
            return
        found, k = self._env_lookup(container.value)
        if found and k == K.NOT_TENSOR and container.value not in self.imports:
            self._bind_name(container.value, K.TENSORS)

    def _host_batch_if_moved(self, node: cst.For) -> None:
        """``for batch in data_loader: batch[k] = batch[k].to(device)``: a loop that moves its batch to the
        device itself iterates host batches (unless the loader is known to be a device loader): only what
        it moves is on the device; what it leaves behind (``batch["meta"]``) stays on the host."""
        kinds = {n.value: self._env_lookup(n.value)[1] for n in target_names(node.target)}
        names = {name for name, k in kinds.items() if k in (K.TENSORS, K.TENSOR)}
        if not names or not _moves_to_device(node.body, names):
            return
        it = node.iter
        while type(it) is cst.Call and positional_args(it) and (
                dotted_name(it.func) in ("enumerate", "iter") or dotted_name(it.func) in T.TRANSPARENT_ITERATION_WRAPPERS):
            it = positional_args(it)[0]
        if self.kind(it) == K.LOADER:
            return  # MpDeviceLoader, an accelerator-prepared loader: `.to(device)` of a device tensor is a no-op
        for name in names:
            self._bind_name(name, K.CPU_TENSORS if kinds[name] == K.TENSORS else K.CPU_TENSOR)

    def _bind_iteration(self, target, iter_expr) -> None:
        """``for target in iter_expr``: bind the target to the kind of one element."""
        if type(iter_expr) is cst.Call:
            fname = dotted_name(iter_expr.func)
            args = positional_args(iter_expr)
            if fname in ("enumerate",) and args:
                if type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2:
                    self._bind_target(target.elements[0].value, None, K.NOT_TENSOR)
                    counter = target.elements[0].value
                    if type(counter) is cst.Name and self._iterates_loader(args[0]):
                        self.func.step_counters.add(counter.value)
                    self._bind_iteration(target.elements[1].value, args[0])
                    return
            if fname == "zip" and args and type(target) in (cst.Tuple, cst.List) and len(target.elements) == len(args):
                for e, a in zip(target.elements, args):
                    self._bind_iteration(e.value, a)
                return
            if args and (
                fname in T.TRANSPARENT_ITERATION_WRAPPERS
                or (self.qualname(iter_expr.func) or "") in T.TRANSPARENT_ITERATION_WRAPPERS
                or (fname not in ("range", "zip", "enumerate") and self._is_loader_value(args[0]))
            ):
                # tqdm(loader), islice(loader, n), metric_logger.log_every(loader, 10): yields the loader's batches
                self._bind_iteration(target, args[0])
                return
            if fname in ("range", "reversed", "sorted") and fname not in self.imports:
                if fname == "range":
                    self._bind_target(target, None, K.NOT_TENSOR)
                    return
        k = self.kind(iter_expr)
        if k is K.UNKNOWN and type(target) is cst.Name and (
            target.value in ("batch", "mb", "micro_batch", "minibatch") or target.value.endswith("_batch")
        ):
            self._bind_target(target, None, K.TENSORS)
            return
        if k == K.ITEMS:
            if type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2:
                self._bind_target(target.elements[0].value, None, K.NOT_TENSOR)
                self._bind_target(target.elements[1].value, None, K.TENSOR)
                return
        if k is K.UNKNOWN and self._looks_like_loader(iter_expr):
            k = K.LOADER
        self._bind_target(target, None, K.element_of(k))

    def _bind_params(self, node: cst.FunctionDef, info: FuncInfo) -> None:
        params = node.params
        all_params = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
        is_forward = info.root and node.name.value == "forward"
        is_step_method = node.name.value in ("training_step", "validation_step", "test_step", "predict_step")
        autograd_function = (bool(all_params) and all_params[0].name.value == "ctx") or bool(
            info.class_key and self.classes.get(info.class_key, {}).get("autograd")
        )
        for i, p in enumerate(all_params):
            pname = p.name.value
            if i == 0 and pname in ("self", "cls") and info.class_key is not None:
                continue
            k = K.UNKNOWN
            if pname in T.CPU_TENSOR_NAMES:
                self._bind_name(pname, K.CPU_TENSOR)
                continue
            if p.annotation is not None:
                k = self._annotation_kind(p.annotation.annotation)
            elif is_forward:
                if pname == "ctx" or autograd_function:
                    # autograd.Function.forward(ctx, ...): its inputs are anything the caller passes
                    k = K.NOT_TENSOR if pname == "ctx" else K.UNKNOWN
                elif _config_like_param(pname):
                    k = K.UNKNOWN
                elif p.default is None or (type(p.default) is cst.Name and p.default.value == "None"):
                    k = K.TENSOR
                else:
                    k = K.NOT_TENSOR
            elif is_step_method:
                if pname in ("batch", "inputs", "data"):
                    k = K.TENSORS
                elif pname in ("batch_idx", "batch_nb", "dataloader_idx", "idx", "step"):
                    k = K.NOT_TENSOR
            else:
                words = name_words(pname)
                if pname == "batch" or pname.endswith("_batch"):
                    k = K.TENSORS
                    self._guessed_params.setdefault(info.key, set()).add(pname)
                elif words and (words[-1] in T.MODEL_NAME_WORDS or words[-1] == "criterion"):
                    k = K.MODULE
                elif p.default is not None and type(p.default) in (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString):
                    k = K.NOT_TENSOR
            self._bind_name(pname, k)
        for star in (params.star_arg, params.star_kwarg):
            if type(star) is cst.Param:
                self._bind_name(star.name.value, K.UNKNOWN)


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
_UNSET = object()  # SemanticModel._callee_memo: not resolved yet


def _attribute_kind(entries):
    """The kind of ``self.<name>`` from its assignments ``(order, n, function, kind, number literal)``,
    in walk order: the first decides, a later unknown changes nothing, different known kinds make it
    unknown, and a number literal is a start value (``self.sum = 0`` in ``reset()``): a device tensor
    assigned or added later (``self.sum += val * n``) makes it a tensor (a meter)."""
    result, start_value, first = K.UNKNOWN, False, True
    for _order, _n, _func, kind, literal in sorted(entries, key=lambda e: (e[0], e[1])):
        if first:
            result, start_value, first = kind, literal and kind == K.NOT_TENSOR, False
        elif literal or kind is K.UNKNOWN:
            continue
        elif start_value and result == K.NOT_TENSOR and kind in K.HOLDS_DEVICE_TENSOR:
            result, start_value = (K.TENSOR if kind in K.DEVICE_TENSORS else K.TENSORS), False
        else:
            start_value = False
            result = K.join(result, kind)
    return result


def _is_number_literal(value) -> bool:
    """A start value: a number, or an empty list / dict / tuple (filled later)."""
    if type(value) is cst.UnaryOperation and type(value.operator) is cst.Minus:
        value = value.expression
    if type(value) in (cst.List, cst.Dict, cst.Tuple):
        return not value.elements
    return type(value) in (cst.Integer, cst.Float)


def _sets_up(q: Optional[str], func) -> bool:
    """The call sets a training run up (an optimizer, a loader, an accelerator): see T.SETUP_FUNCTIONS."""
    if q is not None:
        if q in T.SETUP_FUNCTIONS:
            return True
        if q.startswith(T.SETUP_FUNCTION_PREFIXES):
            last = q.rsplit(".", 1)[-1]
            return last[:1].isupper() and "." not in q[len("torch.optim."):]
    if type(func) is cst.Attribute:
        hints = T.SETUP_METHODS.get(func.attr.value)
        recv = (last_name(func.value) or "").lower()
        return bool(hints) and any(h in recv for h in hints)
    return False


def _counts_positions(head) -> bool:
    """A ``for`` header that counts (``range(max_new_tokens)``, ``itertools.count()``): the shape of a
    decoding or rollout loop, unlike ``for item in data``."""
    if type(head) is not cst.Call:
        return False
    fname = last_name(head.func)
    if fname in ("enumerate", "tqdm", "trange") and head.args:
        return fname == "trange" or _counts_positions(head.args[0].value)
    return fname in ("range", "count", "trange", "repeat")


def _tensor_type_test(test) -> Optional[str]:
    """``isinstance(v, torch.Tensor)`` / ``torch.is_tensor(v)``: the name ``v``."""
    if type(test) is cst.Call:
        fname = dotted_name(test.func) or ""
        args = positional_args(test)
        if fname == "isinstance" and len(args) == 2 and type(args[0]) is cst.Name:
            if "Tensor" in _code(args[1]):
                return args[0].value
        elif fname in ("torch.is_tensor", "is_tensor") and len(args) == 1 and type(args[0]) is cst.Name:
            return args[0].value
    return None


def _moves_to_device(body, names: set) -> bool:
    """The block calls ``.to(...)``/``.cuda()`` on one of ``names`` or an item of it (not in nested defs)."""
    stack = [body]
    while stack:
        n = stack.pop()
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in ("to", "cuda"):
            root = n.func.value
            while type(root) in (cst.Subscript, cst.Attribute):
                root = root.value
            if type(root) is cst.Name and root.value in names:
                return True
        stack.extend(child_nodes(n))
    return False


def _put_sites(sites: dict, ref: str, recs) -> None:
    """Only the kinds that can seed a parameter (project.FactsView), each distinct site once."""
    out = sites.setdefault(ref, [])
    for _c, pos, kw, v in recs:
        site = [[_seed_kind(k) for k in pos], {n: _seed_kind(k) for n, k in kw.items() if _seed_kind(k) is not None}, v]
        if (any(k is not None for k in site[0]) or site[1]) and site not in out:
            out.append(site)
    if not out:
        del sites[ref]


def _config_like_param(name: str) -> bool:
    low = name.lower()
    return (
        low in T.NON_TENSOR_PARAM_NAMES
        or low.startswith(T.NON_TENSOR_PARAM_PREFIXES)
        or low.endswith(T.NON_TENSOR_PARAM_SUFFIXES)
    )



def _walk_funcs():
    m = SemanticModel
    return {
        "SimpleStatementLine": m._simple_stmt_line,
        "Import": m._import,
        "ImportFrom": m._import_from,
        "Assign": m._assign,
        "AnnAssign": m._ann_assign,
        "AugAssign": m._aug_assign,
        "NamedExpr": m._named_expr,
        "FunctionDef": m._function_def,
        "ClassDef": m._class_def,
        "Lambda": m._lambda,
        "For": m._for,
        "While": m._while,
        "If": m._if,
        "Try": m._try,
        "TryStar": m._try,
        "With": m._with,
        "Return": m._return,
        "Raise": m._raise,
        "Assert": m._assert,
        "ListComp": m._comp,
        "SetComp": m._comp,
        "GeneratorExp": m._comp,
        "DictComp": m._comp,
        "Call": m._call,
    }


_SPECIAL = _walk_funcs()


def _suppressed(noqa: dict, lines: set, code: str) -> bool:
    for ln in lines:
        if ln in noqa:
            codes = noqa[ln]
            if codes is None or any(code.startswith(c) for c in codes):
                return True
    return False

