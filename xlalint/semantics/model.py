"""The semantic model: one walk over one libcst tree answers the two questions every rule asks.

* Is this value a tensor? ``model.kind(expr)`` / ``model.is_tensor(expr)``: flow-ordered inference per
  function from assignments, unpacking, ``for``/``with`` targets, parameters, attribute chains,
  subscripts of batches, arithmetic, comparisons, ``torch.*`` calls and tensor methods.
* Does this line run every step? ``model.step_context()``: a handle on the enclosing function, loops and
  guards, resolved once the whole file is seen (a loop is a step loop if it calls a helper defined
  further down that calls ``backward()``; a function is per-step if a step loop calls it).

The walk is a plain recursion over the dataclass fields of libcst nodes: libcst's own visitor rebuilds
every node and costs as much as the parse. Rules hook in with ``on_<NodeType>`` methods that the walk
calls in source order, when the model's state (bindings, context) is that of the node.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import libcst as cst

from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T

# --------------------------------------------------------------------------------------------------
# Walking libcst nodes fast
# --------------------------------------------------------------------------------------------------
_SKIP_FIELD_PREFIXES = (
    "whitespace", "lpar", "rpar", "leading_lines", "lines_after", "comma", "semicolon", "equal",
    "colon", "dot", "operator", "header", "footer", "newline", "star", "asynchronous", "lbrace",
    "rbrace", "lbracket", "rbracket", "trailing", "first_line", "empty_lines", "indent", "encoding",
    "default_indent", "default_newline", "has_trailing_newline", "start", "end", "conversion",
    "relative", "type_parameters", "posonly_ind", "arrow",
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(tp: type) -> tuple[str, ...]:
    f = _FIELDS.get(tp)
    if f is None:
        f = _FIELDS[tp] = tuple(
            x.name for x in dataclasses.fields(tp) if not x.name.startswith(_SKIP_FIELD_PREFIXES)
        )
    return f


def dotted_name(node) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def last_name(node) -> Optional[str]:
    """The last identifier of a Name/Attribute/Call chain: ``self.optimizer`` -> ``optimizer``."""
    if isinstance(node, cst.Call):
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def string_value(node) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        try:
            return node.evaluated_value if isinstance(node.evaluated_value, str) else None
        except Exception:  # noqa: BLE001 - odd prefixes
            return None
    return None


def keyword_arg(call: cst.Call, name: str):
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def positional_args(call: cst.Call) -> list:
    return [a.value for a in call.args if a.keyword is None and not a.star]


_WORD_SPLIT = re.compile(r"[_\W]+")


def name_words(name: str) -> list[str]:
    return [w for w in _WORD_SPLIT.split(name.lower()) if w]


# --------------------------------------------------------------------------------------------------
# Context records
# --------------------------------------------------------------------------------------------------
EVERY = 2
PERIODIC = 1
NEVER = 0


@dataclass(eq=False)
class FuncInfo:
    key: str
    name: str
    class_key: Optional[str]
    node: Optional[cst.CSTNode]
    parent: Optional["FuncInfo"]
    env: dict = field(default_factory=dict)
    local_funcs: dict = field(default_factory=dict)
    step_counters: set = field(default_factory=set)  # `i` of `for i, batch in enumerate(loader)`
    root: bool = False  # forward / training_step / compiled: runs every step by itself
    closure: bool = False  # passed to xm.add_step_closure
    step_call_outside_loops: bool = False  # calls backward()/optimizer.step() itself, not in a loop
    barrier_outside_loops: bool = False  # calls torch_xla.sync()/xm.mark_step() itself, not in a loop
    trains_outside_loops: bool = False  # calls backward()/an optimizer step itself, not in a loop
    calls: list = field(default_factory=list)  # (callee FuncInfo key, Ctx) resolved at the end
    return_kind: object = K.UNKNOWN
    top_index: int = 0


@dataclass(eq=False)
class LoopInfo:
    node: cst.CSTNode
    func: FuncInfo
    iterates_loader: bool = False
    direct_step_call: bool = False
    trains: bool = False  # its own body calls backward() or an optimizer step (not just a sync)
    cond_depth: int = 0
    calls: list = field(default_factory=list)  # callee keys called in this loop's own body
    sync_points: list = field(default_factory=list)  # (seq, callee key or None)
    top_index: int = 0


@dataclass(frozen=True, eq=False)
class Ctx:
    """Where a node sits: resolved into a frequency once the file is fully walked."""

    func: FuncInfo
    loops: tuple
    period: Optional[str]
    non_xla: bool  # under a non-XLA guard (`if device.type != "xla":`)
    closure: bool
    seq: int
    error_path: bool = False  # a `raise` or an assert message: runs only when something is wrong
    once: bool = False  # under `if step == 0:` / `if step == last:` / `if step >= max: break`: not every step


@dataclass(frozen=True)
class Frequency:
    level: int  # EVERY, PERIODIC or NEVER
    period: Optional[str] = None
    after_sync: bool = False
    loop: Optional[LoopInfo] = None  # the step loop that makes it per-step, when known

    @property
    def per_step(self) -> bool:
        return self.level > NEVER

    def describe(self) -> str:
        if self.level == PERIODIC and self.period:
            n = self.period
            return f"every {n} steps" if n.isdigit() else f"every `{n}` steps"
        return "every step"


NOT_PER_STEP = Frequency(NEVER)


@dataclass(eq=False)
class Candidate:
    rule: object
    node: cst.CSTNode
    message: str
    fix: str
    ctx: Ctx
    when: str  # "step": report only in per-step code before the sync; "step-any": per-step even after
    #            the sync; "always": wherever it is; "custom": the rule resolved it itself
    stmt: Optional[cst.CSTNode]
    top_index: int
    frequency: Optional[Frequency] = None


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------
class SemanticModel:
    def __init__(self, module: cst.Module, rules: list):
        self.module = module
        self.rules = rules
        self.imports: dict[str, str] = {}
        self.imports_torch = False
        self.imports_xla = False
        self.classes: dict[str, dict] = {}  # class key -> {"module": bool, "attrs": {}, "bases": [..]}
        self.funcs: dict[str, FuncInfo] = {}
        self.loops: list[LoopInfo] = []
        self.candidates: list[Candidate] = []
        self.closure_names: set[str] = set()
        self.compiled_names: set[str] = set()
        self._dispatch: dict[str, list[Callable]] = {}
        for rule in rules:
            rule.model = self
            for attr in dir(rule):
                if attr.startswith("on_"):
                    self._dispatch.setdefault(attr[3:], []).append(getattr(rule, attr))
        self._kind_cache: dict[int, object] = {}
        # callee key -> [(caller key, positional kinds, keyword kinds, called via self.)]
        self.call_sites: dict[str, list] = {}
        self._rewalking_quietly = False
        # walk state
        self.top = FuncInfo(key="<module>", name="<module>", class_key=None, node=None, parent=None)
        self.func = self.top
        self.class_key: Optional[str] = None
        self.loop_stack: list[LoopInfo] = []
        self.guards: list[tuple] = []  # (period or None, non_xla bool, once bool)
        self.closure_depth = 0
        self.error_depth = 0
        self.cond_depth = 0
        self.seq = 0
        self.stmt: Optional[cst.CSTNode] = None
        self.top_index = 0

    # ------------------------------------------------------------------ public API for rules
    def kind(self, expr):
        key = id(expr)
        cache = self._kind_cache
        if key in cache:
            return cache[key]
        k = self._infer(expr)
        cache[key] = k
        return k

    def is_tensor(self, expr) -> bool:
        """True when ``expr`` is known to be a tensor on the device."""
        return self.kind(expr) in K.DEVICE_TENSORS

    def holds_tensor(self, expr) -> bool:
        """True when ``expr`` is a device tensor or a container of them (formatting it reads them)."""
        return self.kind(expr) in K.HOLDS_DEVICE_TENSOR

    def is_bool_tensor(self, expr) -> bool:
        k = self.kind(expr)
        if k == K.BOOL_TENSOR:
            return True
        if k == K.TENSOR and isinstance(expr, (cst.Name, cst.Attribute)):
            return (last_name(expr) or "").lower().endswith("mask")
        return False

    def qualname(self, expr) -> Optional[str]:
        """Resolve a Name/Attribute through the file's imports: ``T.nonzero`` -> ``torch.nonzero``."""
        dn = dotted_name(expr)
        if dn is None:
            return None
        head, _, rest = dn.partition(".")
        base = self.imports.get(head)
        if base is None:
            return None
        return base + ("." + rest if rest else "")

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

    def report(self, rule, node, message: str, fix: str = "", when: str = "step") -> None:
        self.candidates.append(
            Candidate(rule, node, message, fix, self.step_context(), when, self.stmt, self.top_index)
        )

    def is_builtin(self, func, name: str) -> bool:
        """``func`` is the builtin ``name``: not shadowed by an import or a def in this file."""
        return (
            isinstance(func, cst.Name)
            and func.value == name
            and name not in self.imports
            and self._lookup_func(name) is None
        )

    # ------------------------------------------------------------------ the walk
    def run(self) -> None:
        # module-level functions, so that a call to a helper defined further down still resolves
        self.toplevel_defs = {
            s.name.value for s in self.module.body if isinstance(s, cst.FunctionDef)
        }
        for i, stmt in enumerate(self.module.body):
            self.top_index = i
            self.walk(stmt)
        self._resolve()

    def walk(self, node) -> None:
        name = type(node).__name__
        handler = _SPECIAL.get(name)
        if handler is not None:
            handler(self, node)
            return
        self._emit(name, node)
        self.walk_children(node)

    def _emit(self, name, node) -> None:
        for fn in self._dispatch.get(name, ()):
            fn(node)

    def walk_children(self, node) -> None:
        for fname in child_fields(type(node)):
            v = getattr(node, fname)
            if isinstance(v, cst.CSTNode):
                self.walk(v)
            elif type(v) in (tuple, list):
                for c in v:
                    if isinstance(c, cst.CSTNode):
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
        if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            for s in block.body:
                self.walk(s)
        else:
            self.walk(block)
        del self.guards[depth:]

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
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.imports[alias.asname.name.value] = full
                self._bind_name(alias.asname.name.value, K.NOT_TENSOR)
            else:
                head = full.split(".")[0]
                self.imports[head] = head
                self._bind_name(head, K.NOT_TENSOR)
            self._note_import(full)

    def _import_from(self, node: cst.ImportFrom) -> None:
        self._emit("ImportFrom", node)
        if node.relative or node.module is None:
            mod = None
        else:
            mod = dotted_name(node.module)
        if mod:
            self._note_import(mod)
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            nm = dotted_name(alias.name)
            if nm is None:
                continue
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else nm
            if mod:
                self.imports[local] = f"{mod}.{nm}"
            self._bind_name(local, K.NOT_TENSOR)

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
        self.funcs[key] = info
        if self.func is not self.top:
            self.func.local_funcs[name] = key
            self._bind_name(name, K.NOT_TENSOR)
        info.root = self._is_root_function(node, info)
        saved = (self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth)
        self.func = info
        self.loop_stack = []
        self.guards = []
        self.stmt = node
        self.cond_depth = 0
        if info.class_key is None:
            self.class_key = None
        self._bind_params(node, info)
        self._emit("FunctionDef", node)
        self.walk_block(node.body)
        self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth = saved

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
        self.classes[key] = {"module": is_module, "attrs": {}, "autograd": autograd}
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
                        cond_depth=self.cond_depth, top_index=self.top_index)
        self.loops.append(loop)
        self._bind_target(node.target, None, K.UNKNOWN, iter_expr=node.iter)
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
        loop = LoopInfo(node, self.func, cond_depth=self.cond_depth, top_index=self.top_index)
        self.loops.append(loop)
        self.loop_stack.append(loop)
        self._emit("While", node)
        self.walk(node.test)
        self.stmt = prev
        self.walk_block(node.body)
        self.loop_stack.pop()
        if node.orelse is not None:
            self.walk_block(node.orelse.body)

    def _if(self, node: cst.If) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        self._emit("If", node)
        self.walk(node.test)
        self.stmt = prev
        period = _period_of(node.test)
        polarity = self._xla_polarity(node.test)
        once = period is None and _runs_once(node.test, node.body, self.func.step_counters)
        self.cond_depth += 1
        self.guards.append((period, polarity == "non-xla", once))
        self.walk_block(node.body)
        self.guards.pop()
        if node.orelse is not None:
            self.guards.append((None, polarity == "xla", False))
            if isinstance(node.orelse, cst.If):
                self._if(node.orelse)
            else:
                self.walk_block(node.orelse.body)
            self.guards.pop()
        self.cond_depth -= 1
        if polarity == "xla" and node.orelse is None and _ends_block(node.body):
            # `if on_tpu: return pad(..., "max_length")`: the rest of this block runs off XLA only
            self.guards.append((None, True, False))

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
        for item in node.items:
            self.walk(item.item)
            if item.asname is not None:
                self._bind_target(item.asname.name, None, K.UNKNOWN)
        self.stmt = prev
        self.walk_block(node.body)

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
        if isinstance(node, cst.DictComp):
            self.walk(node.key)
            self.walk(node.value)
        else:
            self.walk(node.elt)

    def _call(self, node: cst.Call) -> None:
        self._emit("Call", node)
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
        self._note_call(node, q)

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
                barrier = isinstance(b, cst.Name) and b.value == "True"
                trains = True
        elif isinstance(func, cst.Attribute):
            meth = func.attr.value
            recv = last_name(func.value) or ""
            if meth in T.STEP_METHODS_ANY_RECEIVER:
                step = trains = True
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
        if q in T.COMPILE_WRAPPERS:
            for a in positional_args(node)[:1]:
                n = dotted_name(a)
                if n:
                    self.compiled_names.add(n)
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
            if self.loop_stack:
                self.loop_stack[-1].calls.append(callee)
        if self.loop_stack:
            loop = self.loop_stack[-1]
            if self.cond_depth == loop.cond_depth and self.closure_depth == 0:
                if barrier:
                    loop.sync_points.append((self.seq, None))
                elif callee is not None:
                    loop.sync_points.append((self.seq, callee))

    def _record_call_site(self, callee: str, node: cst.Call, func) -> None:
        pos, kw = [], {}
        for a in node.args:
            if a.star:
                return  # f(*args): positions unknown
            k = self.kind(a.value)
            if a.keyword is None:
                pos.append(k)
            else:
                kw[a.keyword.value] = k
        via_self = isinstance(func, cst.Attribute)
        self.call_sites.setdefault(callee, []).append((self.func.key, pos, kw, via_self))

    # ------------------------------------------------------------------ parameters from call sites
    _SEEDABLE = frozenset({K.TENSOR, K.BOOL_TENSOR, K.TENSORS, K.MODULE, K.LOADER})

    def _param_seeds(self, f: FuncInfo) -> dict:
        """Kinds for ``f``'s unknown parameters from what its callers in this file pass."""
        node = f.node
        if not isinstance(node, cst.FunctionDef):
            return {}
        sites = self.call_sites.get(f.key)
        if not sites:
            return {}
        params = list(node.params.posonly_params) + list(node.params.params)
        names = [p.name.value for p in params]
        is_method = f.class_key is not None and names and names[0] in ("self", "cls")
        seen: dict = {}
        for _caller, pos, kw, via_self in sites:
            offset = 1 if is_method else 0
            for i, k in enumerate(pos):
                if i + offset < len(names):
                    seen.setdefault(names[i + offset], []).append(k)
            for name, k in kw.items():
                seen.setdefault(name, []).append(k)
        seeds = {}
        for name, ks in seen.items():
            if f.env.get(name, K.UNKNOWN) is not K.UNKNOWN and name in f.env:
                continue  # annotated or otherwise known
            if any(k == K.NOT_TENSOR for k in ks):
                continue
            known = [k for k in ks if k in self._SEEDABLE]
            if not known:
                continue
            if all(k == known[0] for k in known):
                seeds[name] = known[0]
            elif all(k in K.DEVICE_TENSORS for k in known):
                seeds[name] = K.TENSOR
        return seeds

    def _refine_params(self) -> None:
        """Re-walk the functions whose parameters turn out to be tensors, with those kinds."""
        plans = []
        for f in list(self.funcs.values()):
            if f.parent is None and f.node is not None:
                seeds = self._param_seeds(f)
                if seeds:
                    plans.append((f, seeds))
        for f, seeds in plans:
            self._rewalk(f, seeds)

    def _rewalk(self, f: FuncInfo, seeds: dict) -> None:
        prefix = f.key + ".<locals>."
        mine = lambda fi: fi is f or fi.key.startswith(prefix)  # noqa: E731
        self.candidates = [c for c in self.candidates if not mine(c.ctx.func)]
        self.loops = [lp for lp in self.loops if not mine(lp.func)]
        for key in [k for k in self.funcs if k.startswith(prefix)]:
            del self.funcs[key]
        f.env.clear()
        f.local_funcs.clear()
        f.step_counters.clear()
        f.calls.clear()
        f.step_call_outside_loops = f.barrier_outside_loops = f.trains_outside_loops = False
        f.return_kind = K.UNKNOWN
        self._kind_cache.clear()
        for rule in self.rules:
            rule.before_rewalk()
        saved = (self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth,
                 self.top_index, self.closure_depth, self.error_depth)
        self.func, self.loop_stack, self.guards = f, [], []
        self.class_key, self.stmt, self.cond_depth = f.class_key, f.node, 0
        self.top_index, self.closure_depth, self.error_depth = f.top_index, 0, 0
        self._rewalking_quietly = True
        try:
            self._bind_params(f.node, f)
            f.env.update(seeds)
            self.walk_block(f.node.body)
        finally:
            self._rewalking_quietly = False
            (self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth,
             self.top_index, self.closure_depth, self.error_depth) = saved

    def _callee_key(self, func) -> Optional[str]:
        if isinstance(func, cst.Name):
            f = self._lookup_func(func.value)
            if f is None and func.value in getattr(self, "toplevel_defs", ()):
                found, _ = self._env_lookup(func.value)
                return func.value if not found else None  # defined further down this file
            return f.key if f else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = self._current_class()
            if cls is not None:
                return f"{cls}.{func.attr.value}"
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
            dec = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
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
        self.func.env[name] = kind

    def _bind_target(self, target, value, kind, iter_expr=None) -> None:
        """Bind an assignment/for target. ``iter_expr``: the target takes the elements of it."""
        if iter_expr is not None:
            self._bind_iteration(target, iter_expr)
            return
        if isinstance(target, cst.Name):
            self._bind_name(target.value, kind)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elts = target.elements
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elts):
                for e, v in zip(elts, value.elements):
                    self._bind_target(e.value, v.value, self.kind(v.value))
                return
            if isinstance(value, cst.Call) and last_name(value.func) == "prepare":
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
                if isinstance(e, cst.StarredElement):
                    self._bind_target(e.value, None, K.TENSORS if ek == K.TENSOR else K.UNKNOWN)
                else:
                    self._bind_target(e.value, None, ek)
        elif isinstance(target, cst.Attribute):
            if isinstance(target.value, cst.Name) and target.value.value == "self":
                cls = self._current_class()
                if cls is not None and cls in self.classes:
                    attrs = self.classes[cls]["attrs"]
                    name = target.attr.value
                    attrs[name] = kind if name not in attrs else K.join(attrs[name], kind) if kind is not K.UNKNOWN else attrs[name]
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None, K.UNKNOWN)

    def _bind_iteration(self, target, iter_expr) -> None:
        """``for target in iter_expr``: bind the target to the kind of one element."""
        if isinstance(iter_expr, cst.Call):
            fname = dotted_name(iter_expr.func)
            args = positional_args(iter_expr)
            if fname in ("enumerate",) and args:
                if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                    self._bind_target(target.elements[0].value, None, K.NOT_TENSOR)
                    counter = target.elements[0].value
                    if isinstance(counter, cst.Name) and self._iterates_loader(args[0]):
                        self.func.step_counters.add(counter.value)
                    self._bind_iteration(target.elements[1].value, args[0])
                    return
            if fname == "zip" and args and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(args):
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
        if k is K.UNKNOWN and isinstance(target, cst.Name) and (
            target.value in ("batch", "mb", "micro_batch", "minibatch") or target.value.endswith("_batch")
        ):
            self._bind_target(target, None, K.TENSORS)
            return
        if k == K.ITEMS:
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
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
                elif p.default is None or (isinstance(p.default, cst.Name) and p.default.value == "None"):
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
                elif words and (words[-1] in T.MODEL_NAME_WORDS or words[-1] == "criterion"):
                    k = K.MODULE
                elif p.default is not None and isinstance(
                    p.default, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)
                ):
                    k = K.NOT_TENSOR
            self._bind_name(pname, k)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self._bind_name(star.name.value, K.UNKNOWN)

    def _annotation_kind(self, ann):
        text = dotted_name(ann)
        if isinstance(ann, cst.SimpleString):
            text = string_value(ann)
        if isinstance(ann, cst.Subscript):
            base = dotted_name(ann.value) or ""
            if base.split(".")[-1] == "Optional" and ann.slice:
                inner = ann.slice[0].slice
                if isinstance(inner, cst.Index):
                    return self._annotation_kind(inner.value)
            return K.UNKNOWN
        if not text:
            return K.UNKNOWN
        last = text.split(".")[-1]
        if last in ("Tensor", "FloatTensor", "LongTensor"):
            return K.TENSOR
        if last == "BoolTensor":
            return K.BOOL_TENSOR
        if last in ("int", "float", "bool", "str", "bytes", "complex", "Size"):
            return K.NOT_TENSOR
        return K.UNKNOWN

    # ------------------------------------------------------------------ tensor inference
    def _infer(self, e):
        if isinstance(e, cst.Name):
            found, k = self._env_lookup(e.value)
            if found:
                return k
            if e.value in ("True", "False", "None"):
                return K.NOT_TENSOR
            if e.value in self.imports:
                return K.NOT_TENSOR
            if self._looks_like_loader(e):
                return K.LOADER
            return K.UNKNOWN
        if isinstance(e, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
                          cst.ConcatenatedString, cst.FormattedString, cst.Lambda, cst.Ellipsis)):
            return K.NOT_TENSOR
        if isinstance(e, cst.Attribute):
            return self._infer_attribute(e)
        if isinstance(e, cst.Call):
            return self._infer_call(e)
        if isinstance(e, cst.Subscript):
            return self._infer_subscript(e)
        if isinstance(e, cst.BinaryOperation):
            left, right = self.kind(e.left), self.kind(e.right)
            if isinstance(e.operator, cst.Modulo) and isinstance(e.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                return K.NOT_TENSOR
            if isinstance(e.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)) and (
                left == K.BOOL_TENSOR or right == K.BOOL_TENSOR
            ):
                return K.BOOL_TENSOR
            if isinstance(e.operator, cst.Add) and (left in (K.TENSORS,) or right in (K.TENSORS,)):
                return K.UNKNOWN
            return K.arithmetic(left, right)
        if isinstance(e, cst.UnaryOperation):
            if isinstance(e.operator, cst.Not):
                return K.NOT_TENSOR
            k = self.kind(e.expression)
            if isinstance(e.operator, cst.BitInvert) and (k == K.BOOL_TENSOR or self.is_bool_tensor(e.expression)):
                return K.BOOL_TENSOR
            return k if k in K.ANY_TENSOR or k == K.NOT_TENSOR else K.UNKNOWN
        if isinstance(e, cst.Comparison):
            ops = [c.operator for c in e.comparisons]
            if any(isinstance(o, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for o in ops):
                return K.NOT_TENSOR
            ks = [self.kind(e.left)] + [self.kind(c.comparator) for c in e.comparisons]
            if any(k in K.DEVICE_TENSORS for k in ks):
                return K.BOOL_TENSOR
            if any(k == K.CPU_TENSOR for k in ks):
                return K.CPU_TENSOR
            if all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if isinstance(e, cst.BooleanOperation):
            a, b = self.kind(e.left), self.kind(e.right)
            return K.join(a, b)
        if isinstance(e, cst.IfExp):
            return K.join(self.kind(e.body), self.kind(e.orelse))
        if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
            ks = [self.kind(el.value) for el in e.elements]
            if any(k in K.HOLDS_DEVICE_TENSOR for k in ks):
                return K.TENSORS
            if ks and all(k in (K.CPU_TENSOR, K.CPU_TENSORS) for k in ks):
                return K.CPU_TENSORS
            if all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if isinstance(e, cst.Dict):
            ks = [self.kind(el.value) for el in e.elements if isinstance(el, cst.DictElement)]
            if any(k in K.HOLDS_DEVICE_TENSOR for k in ks):
                return K.TENSORS
            if all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if isinstance(e, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            k = self.kind(e.elt)
            if k in K.HOLDS_DEVICE_TENSOR:
                return K.TENSORS
            if k == K.NOT_TENSOR:
                return K.NOT_TENSOR
            return K.UNKNOWN
        if isinstance(e, cst.DictComp):
            k = self.kind(e.value)
            return K.TENSORS if k in K.HOLDS_DEVICE_TENSOR else K.UNKNOWN
        if isinstance(e, cst.NamedExpr):
            return self.kind(e.value)
        return K.UNKNOWN

    def _infer_attribute(self, e: cst.Attribute):
        attr = e.attr.value
        base = e.value
        if isinstance(base, cst.Name) and base.value == "self":
            cls = self._current_class()
            if cls is not None and cls in self.classes:
                attrs = self.classes[cls]["attrs"]
                if attr in attrs:
                    return attrs[attr]
            if attr == "training":
                return K.NOT_TENSOR
            return K.UNKNOWN
        q = self.qualname(e)
        if q is not None:
            return K.NOT_TENSOR  # torch.float32, xm.xrt_world_size, math.pi, ...
        bname = last_name(base)
        if bname and bname.lower() in ("args", "config", "cfg", "opt", "opts", "hparams", "flags", "conf", "params", "options", "settings", "hps"):
            return K.NOT_TENSOR
        bk = self.kind(base)
        if attr in T.NON_TENSOR_ATTRIBUTES:
            return K.NOT_TENSOR
        if attr in T.CPU_TENSOR_NAMES:
            return K.CPU_TENSOR
        if bk in K.ANY_TENSOR:
            if attr in T.TENSOR_ATTRIBUTES:
                return K.CPU_TENSOR if bk == K.CPU_TENSOR else K.TENSOR
            return K.CPU_TENSOR if bk == K.CPU_TENSOR else K.TENSOR  # a model output's field
        if bk in (K.TENSORS,):
            return K.TENSOR  # batch.input_ids
        if bk == K.CPU_TENSORS:
            return K.CPU_TENSOR
        if bk == K.MODULE:
            if attr in ("weight", "bias"):
                return K.TENSOR
            return K.UNKNOWN
        if bk == K.NOT_TENSOR:
            return K.NOT_TENSOR
        return K.UNKNOWN

    def _infer_subscript(self, e: cst.Subscript):
        bk = self.kind(e.value)
        if bk in (K.TENSORS, K.TENSOR, K.BOOL_TENSOR):
            return K.TENSOR
        if bk in (K.CPU_TENSORS, K.CPU_TENSOR):
            return K.CPU_TENSOR
        if bk == K.NOT_TENSOR:
            return K.NOT_TENSOR
        if bk == K.MODULE:
            return K.MODULE  # nn.Sequential / ModuleList indexing
        return K.UNKNOWN

    def _infer_call(self, e: cst.Call):
        func = e.func
        q = self.qualname(func)
        if q is not None:
            return self._infer_qualified_call(e, q)
        if isinstance(func, cst.Name):
            name = func.value
            if name not in self.imports:
                r = self._infer_builtin(e, name)
                if r is not NotImplemented:
                    return r
            f = self._lookup_func(name)
            if f is not None:
                return f.return_kind
            if name in self.classes:
                return K.MODULE if self.classes[name]["module"] else K.NOT_TENSOR
            found, fk = self._env_lookup(name)
            if found and fk == K.MODULE:
                return K.TENSOR
            if found and fk is not K.UNKNOWN:
                return K.UNKNOWN
            words = name_words(name)
            if words and words[-1] in T.MODEL_NAME_WORDS | {"criterion"} and e.args:
                return K.TENSOR
            if name in ("loss_fn", "lossfn", "loss_func", "loss_function", "criterion") and e.args:
                return K.TENSOR
            return K.UNKNOWN
        if isinstance(func, cst.Attribute):
            if self.kind(func) == K.MODULE:
                return K.TENSOR  # self.proj(x)
            return self._infer_method_call(e, func)
        if isinstance(func, cst.Call) or isinstance(func, cst.Subscript):
            fk = self.kind(func)
            return K.TENSOR if fk == K.MODULE else K.UNKNOWN
        return K.UNKNOWN

    def _infer_builtin(self, e: cst.Call, name: str):
        args = positional_args(e)
        if self._lookup_func(name) is not None:
            return NotImplemented
        if name in ("len", "int", "float", "bool", "str", "repr", "isinstance", "issubclass", "hasattr",
                    "range", "format", "hash", "id", "type", "round", "callable", "ord", "chr", "hex",
                    "print", "getattr", "input", "open", "divmod", "all", "any", "dict", "set", "frozenset"):
            if name == "getattr" and len(args) >= 2:
                bk = self.kind(args[0])
                if bk == K.MODULE or bk in K.ANY_TENSOR:
                    return K.UNKNOWN
            if name == "dict" and args:
                return K.UNKNOWN
            if name == "round" and args and self.kind(args[0]) in K.ANY_TENSOR:
                return K.UNKNOWN
            return K.NOT_TENSOR
        if name in ("iter", "list", "tuple", "sorted", "reversed") and args:
            k = self.kind(args[0])
            if name == "iter":
                return k if k is not K.UNKNOWN else (K.LOADER if self._looks_like_loader(args[0]) else K.UNKNOWN)
            if k in (K.TENSORS, K.TENSOR, K.BOOL_TENSOR):
                return K.TENSORS
            if k in (K.CPU_TENSORS, K.CPU_TENSOR):
                return K.CPU_TENSORS
            return K.NOT_TENSOR if k == K.NOT_TENSOR else K.UNKNOWN
        if name == "next" and args:
            k = self.kind(args[0])
            if k is K.UNKNOWN and self._looks_like_loader(args[0]):
                k = K.LOADER
            return K.element_of(k)
        if name in ("sum", "max", "min", "abs"):
            ks = [self.kind(a) for a in args]
            if any(k in K.HOLDS_DEVICE_TENSOR for k in ks):
                return K.TENSOR
            if ks and all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if name in ("zip", "enumerate", "map", "filter"):
            return K.UNKNOWN
        return NotImplemented

    def _infer_qualified_call(self, e: cst.Call, q: str):
        ns, _, fn = q.rpartition(".")
        if q in T.NON_TENSOR_TORCH_FUNCTIONS:
            return K.NOT_TENSOR
        if q in T.CPU_LOADER_CONSTRUCTORS or q.endswith(".DataLoader"):
            return K.CPU_LOADER
        if q in T.DEVICE_LOADER_CONSTRUCTORS:
            return K.LOADER
        if q in T.TENSOR_SEQUENCE_TORCH_FUNCTIONS:
            return K.TENSORS if self._any_arg_kind(e, K.DEVICE_TENSORS) else K.UNKNOWN
        if q in T.BOOL_RESULT_FUNCTIONS:
            return K.BOOL_TENSOR if not self._all_args_cpu(e) else K.CPU_TENSOR
        if q in T.CPU_FACTORY_FUNCTIONS:
            dev = keyword_arg(e, "device")
            if dev is None or self._is_cpu_device(dev):
                if fn in ("tensor", "as_tensor") and self._any_arg_kind(e, K.HOLDS_DEVICE_TENSOR):
                    return K.TENSOR
                return K.CPU_TENSOR
            return K.TENSOR
        if ns in T.TENSOR_NAMESPACES and fn[:1].islower():
            if fn.endswith("_like"):
                args = positional_args(e)
                return self.kind(args[0]) if args else K.TENSOR
            if self._all_args_cpu(e):
                return K.CPU_TENSOR
            return K.TENSOR
        if ns.startswith("torch.nn") and fn[:1].isupper() and not ns.startswith("torch.nn.utils"):
            return K.MODULE  # nn.Linear(...), nn.Sequential(...)
        if ns.startswith("torch_xla") and fn in ("all_reduce", "all_gather", "reduce_scatter", "mesh_reduce"):
            return K.TENSOR if fn != "mesh_reduce" else K.UNKNOWN
        if fn == "from_pretrained" and "Model" in ns:
            return K.MODULE
        if ns.startswith("torch.nn.utils") and fn in ("clip_grad_norm_", "clip_grad_norm", "parameters_to_vector"):
            return K.TENSOR
        return K.NOT_TENSOR if q.startswith(("math.", "os.", "time.", "json.", "random.", "sys.", "argparse.", "logging.")) else K.UNKNOWN

    def _infer_method_call(self, e: cst.Call, func: cst.Attribute):
        meth = func.attr.value
        recv = func.value
        rk = self.kind(recv)
        if rk in K.ANY_TENSOR:
            cpu = rk == K.CPU_TENSOR
            if meth in T.NON_TENSOR_METHODS:
                return K.NOT_TENSOR
            if meth == "cpu":
                return K.CPU_TENSOR
            if meth in ("to", "cuda", "type_as"):
                if meth == "to":
                    return self._infer_to(e, rk)
                return K.TENSOR
            if meth in T.BOOL_RESULT_METHODS:
                return K.CPU_TENSOR if cpu else K.BOOL_TENSOR
            if meth in ("split", "chunk", "unbind", "tensor_split"):
                return K.CPU_TENSORS if cpu else K.TENSORS
            if meth in ("any", "all") and rk == K.BOOL_TENSOR:
                return K.BOOL_TENSOR
            if meth in ("any", "all"):
                return K.BOOL_TENSOR if not cpu else K.CPU_TENSOR
            if meth.startswith("_"):
                return K.UNKNOWN  # not a public tensor method: the receiver may not be a tensor
            return rk if rk != K.BOOL_TENSOR else K.TENSOR
        if rk in (K.TENSORS, K.CPU_TENSORS):
            if meth == "items":
                return K.ITEMS if rk == K.TENSORS else K.UNKNOWN
            if meth == "values":
                return rk
            if meth in ("keys", "__len__"):
                return K.NOT_TENSOR
            if meth in ("get", "pop"):
                return K.element_of(rk)
            if meth in ("to", "cuda"):  # a batch moved to the device (BatchEncoding.to(device))
                return K.TENSORS if meth == "cuda" or self._infer_to(e, K.CPU_TENSOR) == K.TENSOR else rk
            return K.UNKNOWN
        if rk == K.MODULE:
            if meth in ("parameters", "buffers"):
                return K.TENSORS
            if meth in ("to", "cuda", "cpu", "train", "eval", "half", "float", "double", "bfloat16", "requires_grad_", "apply"):
                return K.MODULE
            if meth in ("generate", "forward", "encode", "decode", "embed"):
                return K.TENSOR
            if meth in ("named_parameters", "state_dict", "named_buffers", "modules", "children", "named_modules"):
                return K.UNKNOWN
            return K.UNKNOWN
        if rk in (K.LOADER, K.CPU_LOADER):
            if meth in ("per_device_loader",):
                return K.LOADER
            return K.UNKNOWN
        if rk == K.NOT_TENSOR:
            return K.NOT_TENSOR
        # Unknown receiver.
        if meth in ("item", "tolist", "size", "dim", "numel", "ndimension", "nelement", "format", "join", "lower", "upper", "strip", "split", "startswith", "endswith", "replace", "keys"):
            return K.NOT_TENSOR
        if meth == "per_device_loader":
            return K.LOADER
        if meth in ("to", "cuda") and (meth == "cuda" or self._is_device_expr(e)):
            # x.to(device) on something unknown: a module if it is named like one, else a tensor
            rname = (last_name(recv) or "").lower()
            words = name_words(rname)
            if words and (words[-1] in T.MODEL_NAME_WORDS or words[-1] in ("head", "layer", "ddp")):
                return K.MODULE
            if rname in ("batch", "inputs", "data") or rname.endswith("_batch"):
                return K.TENSORS
            if isinstance(recv, (cst.Name, cst.Attribute, cst.Subscript)):
                return K.TENSOR
            return K.UNKNOWN
        if meth == "prepare" and last_name(recv) in ("accelerator", "accel"):
            return K.UNKNOWN
        if meth == "gather" and last_name(recv) in ("accelerator", "accel"):
            return K.TENSOR
        if meth in ("from_pretrained",) and "Model" in (dotted_name(recv) or ""):
            return K.MODULE
        if isinstance(recv, cst.Name) and recv.value == "self":
            cls = self._current_class()
            if cls is not None and f"{cls}.{meth}" in self.funcs:
                return self.funcs[f"{cls}.{meth}"].return_kind
        return K.UNKNOWN

    def _infer_to(self, e: cst.Call, rk):
        args = positional_args(e)
        dev = keyword_arg(e, "device")
        target = dev if dev is not None else (args[0] if args else None)
        if target is None:
            return rk if rk in K.ANY_TENSOR else K.TENSOR
        if self._is_cpu_device(target):
            return K.CPU_TENSOR
        q = self.qualname(target) or ""
        if q.startswith("torch.") and q.split(".")[-1] in _DTYPES:
            return rk if rk in K.ANY_TENSOR else K.TENSOR
        tk = self.kind(target)
        if tk in K.ANY_TENSOR:  # .to(other) follows other
            return tk
        return K.TENSOR

    def _is_device_expr(self, call: cst.Call) -> bool:
        """``.to(device)``, ``.to(xm.xla_device())``, ``.to(accelerator.device)``, ``.to(device=dev)``."""
        args = positional_args(call)
        target = keyword_arg(call, "device") or (args[0] if args else None)
        if target is None or self._is_cpu_device(target):
            return False
        if isinstance(target, cst.Call):
            n = (last_name(target.func) or "").lower()
            return n in ("xla_device", "device") or "device" in n
        n = (last_name(target) or "").lower()
        return n in ("device", "dev", "xla_device", "xla_dev") or n.endswith("device")

    def _is_cpu_device(self, node) -> bool:
        s = string_value(node)
        if s is not None:
            return s.split(":")[0] == "cpu"
        if isinstance(node, cst.Call) and (self.qualname(node.func) == "torch.device"):
            args = positional_args(node)
            return bool(args) and (string_value(args[0]) or "").split(":")[0] == "cpu"
        return False

    def _any_arg_kind(self, e: cst.Call, kinds) -> bool:
        for a in e.args:
            k = self.kind(a.value)
            if k in kinds:
                return True
        return False

    def _all_args_cpu(self, e: cst.Call) -> bool:
        ks = [self.kind(a.value) for a in e.args if a.keyword is None]
        return bool(ks) and all(k in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR) for k in ks) and any(
            k in (K.CPU_TENSOR, K.CPU_TENSORS) for k in ks
        )

    def _looks_like_loader(self, node) -> bool:
        n = last_name(node)
        if not n:
            return False
        low = n.lower()
        if isinstance(node, cst.Call):
            return low in ("train_dataloader", "val_dataloader", "test_dataloader", "per_device_loader")
        return low in T.LOADER_NAMES or low.endswith(T.LOADER_NAME_SUFFIXES)

    def _is_loader_value(self, node) -> bool:
        return self.kind(node) in (K.LOADER, K.CPU_LOADER) or self._looks_like_loader(node)

    def _iterates_loader(self, it) -> bool:
        if isinstance(it, cst.Call):
            args = positional_args(it)
            if args and any(self._is_loader_value(a) for a in args[:2]):
                return True  # enumerate(loader), tqdm(loader), log_every(loader, 10), zip(loader, ...)
        k = self.kind(it)
        if k in (K.LOADER, K.CPU_LOADER):
            return True
        return self._looks_like_loader(it)

    def _xla_polarity(self, test) -> Optional[str]:
        """'non-xla' when the test is true only off XLA (``device.type != "xla"``), 'xla' for the opposite."""
        negate = False
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            negate = not negate
            test = test.expression
        result = None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            c = test.comparisons[0]
            strs = [string_value(test.left), string_value(c.comparator)]
            s = next((x for x in strs if x is not None), None)
            other = test.left if strs[0] is None else c.comparator
            other_text = (dotted_name(other) or "").lower()
            if s is not None and ("device" in other_text or other_text.endswith(".type") or "hw" in other_text or "backend" in other_text or "accelerator" in other_text):
                eq = isinstance(c.operator, cst.Equal)
                ne = isinstance(c.operator, cst.NotEqual)
                s = s.lower()
                if s in ("xla", "tpu"):
                    result = "xla" if eq else "non-xla" if ne else None
                elif s in ("cpu", "cuda", "gpu", "mps"):
                    result = "non-xla" if eq else None
        if result is None and isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            c = test.comparisons[0]
            sides = [dotted_name(test.left) or "", dotted_name(c.comparator) or ""]
            enum = next((x for x in sides if x.split(".")[-1] in ("TPU", "XLA")), None)
            if enum is not None and any(w in "".join(sides).lower() for w in ("distributed_type", "device", "accelerator", "backend")):
                if isinstance(c.operator, cst.Equal):
                    result = "xla"
                elif isinstance(c.operator, cst.NotEqual):
                    result = "non-xla"
        if isinstance(test, cst.Call):
            n = (last_name(test.func) or "").lower()
            if n in ("is_xla_tensor", "is_xla", "is_tpu_available", "is_torch_xla_available", "is_torch_tpu_available", "using_xla"):
                result = "xla"
            elif n == "is_available" and "cuda" in (dotted_name(test.func) or ""):
                result = "non-xla"
        elif isinstance(test, (cst.Name, cst.Attribute)):
            n = (last_name(test) or "").lower()
            if n in ("use_xla", "is_xla", "on_xla", "using_xla", "use_tpu", "on_tpu", "is_tpu"):
                result = "xla"
            elif n in ("use_cuda", "on_cuda", "use_gpu", "on_gpu", "is_cuda"):
                result = "non-xla"
        if result is not None and negate:
            result = "xla" if result == "non-xla" else "non-xla"
        return result

    # ------------------------------------------------------------------ resolution
    def _resolve(self) -> None:
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
        self._refine_params()
        # does the function perform a training step itself (outside any loop of its own)?
        self._does_step: dict[str, bool] = {}
        for key in funcs:
            self.does_step(key)
        self._freq_cache: dict[str, Frequency] = {}
        for c in self.candidates:
            if c.when in ("step", "step-any"):
                c.frequency = self.frequency(c.ctx)

    def does_step(self, key: str, _stack=None) -> bool:
        memo = self._does_step
        if key in memo:
            return memo[key]
        f = self.funcs.get(key)
        if f is None:
            return False
        memo[key] = False  # cycle guard
        # a function that runs a step loop of its own (train_one_epoch) is not one step for its caller
        result = (f.step_call_outside_loops or any(
            not ctx.loops and self.does_step(callee) for callee, ctx in f.calls
        )) and not any(lp.func is f and self.is_step_loop(lp) for lp in self.loops)
        memo[key] = result
        return result

    def is_step_loop(self, loop: LoopInfo) -> bool:
        return loop.iterates_loader or loop.direct_step_call or any(self.does_step(c) for c in loop.calls)

    def frequency(self, ctx: Ctx) -> Frequency:
        if ctx.closure or ctx.non_xla or ctx.error_path or ctx.once or ctx.func.closure:
            return NOT_PER_STEP
        # innermost step loop in this function
        for loop in reversed(ctx.loops):
            if self.is_step_loop(loop):
                after = any(seq < ctx.seq and (callee is None or self._syncs(callee)) for seq, callee in loop.sync_points)
                level = PERIODIC if ctx.period else EVERY
                return Frequency(level, ctx.period, after, loop)
        ff = self.function_frequency(ctx.func)
        if not ff.per_step:
            return NOT_PER_STEP
        if ctx.period:
            return Frequency(PERIODIC, ctx.period, ff.after_sync, ff.loop)
        return ff

    def _syncs(self, key: str) -> bool:
        """The helper ``key`` ends the step itself (calls ``torch_xla.sync()`` outside its own loops)."""
        f = self.funcs.get(key)
        return f is not None and f.barrier_outside_loops

    def function_frequency(self, f: FuncInfo, _stack=None) -> Frequency:
        cache = self._freq_cache
        if f.key in cache:
            return cache[f.key]
        if f.closure:
            return NOT_PER_STEP
        if f.root:
            cache[f.key] = Frequency(EVERY)
            return cache[f.key]
        cache[f.key] = NOT_PER_STEP  # cycle guard
        best = NOT_PER_STEP
        all_after = True
        any_site = False
        for caller in self.funcs.values():
            for callee, ctx in caller.calls:
                if callee != f.key:
                    continue
                fr = self.frequency(ctx)
                if not fr.per_step:
                    continue
                any_site = True
                all_after = all_after and fr.after_sync
                if fr.level > best.level:
                    best = fr
        for callee, ctx in self.top.calls:
            if callee != f.key:
                continue
            fr = self.frequency(ctx)
            if fr.per_step:
                any_site = True
                all_after = all_after and fr.after_sync
                if fr.level > best.level:
                    best = fr
        if any_site:
            best = Frequency(best.level, best.period, all_after, best.loop)
        cache[f.key] = best
        return best


# Names that count steps: ``if step == 0:`` runs once, not every step.
_STEP_COUNTERS = frozenset({"step", "it", "itr", "iter_num", "iteration", "batch_idx", "batch_i",
                            "global_step", "n_iter", "batch_num", "steps", "epoch", "completed_steps",
                            "train_step", "cur_step", "step_idx", "batch_nb"})


def _runs_once(test, body, counters) -> bool:
    """The body runs once, not every step: ``if step == 0:``, ``if step == last_step:``,
    ``if step >= max_steps: ...; break``, ``if is_last_step:`` (a step counter is a name that counts
    steps, or the index of ``for i, batch in enumerate(loader)``)."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (
            _runs_once(test.left, body, counters) or _runs_once(test.right, body, counters)
        )
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        sides = (test.left, test.comparisons[0].comparator)
        counts = any(isinstance(x, cst.Name) and (x.value in _STEP_COUNTERS or x.value in counters) for x in sides)
        if not counts or any(_has_modulo(x) for x in sides):
            return False
        if isinstance(op, cst.Equal):
            return True
        return isinstance(op, (cst.GreaterThanEqual, cst.GreaterThan)) and _leaves(body)
    if isinstance(test, (cst.Name, cst.Attribute)):
        return any(w in ("last", "final", "done", "finished") for w in name_words(last_name(test) or ""))
    return False


def _has_modulo(node) -> bool:
    while isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Modulo) or _has_modulo(node.right):
            return True
        node = node.left
    return False


def _leaves(block) -> bool:
    """The block ends the loop or the function (``break`` / ``return`` among its statements)."""
    for st in getattr(block, "body", ()):
        if isinstance(st, cst.SimpleStatementLine) and any(isinstance(x, (cst.Break, cst.Return)) for x in st.body):
            return True
    return False


def _ends_block(block) -> bool:
    body = getattr(block, "body", ())
    if not body:
        return False
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine) and last.body:
        return isinstance(last.body[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break))
    return False


def _config_like_param(name: str) -> bool:
    low = name.lower()
    return (
        low in T.NON_TENSOR_PARAM_NAMES
        or low.startswith(T.NON_TENSOR_PARAM_PREFIXES)
        or low.endswith(T.NON_TENSOR_PARAM_SUFFIXES)
    )


def _period_of(test) -> Optional[str]:
    """``step % N == 0`` (anywhere in an and/or) -> the source text of N."""
    if isinstance(test, cst.BooleanOperation):
        return _period_of(test.left) or _period_of(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        c = test.comparisons[0]
        if isinstance(c.operator, cst.Equal):
            for side in (test.left, c.comparator):
                while isinstance(side, cst.BinaryOperation) and not isinstance(side.operator, cst.Modulo):
                    side = side.left
                if isinstance(side, cst.BinaryOperation) and isinstance(side.operator, cst.Modulo):
                    return _code(side.right)
    return None


_DTYPES = frozenset(
    {"float32", "float", "float16", "half", "bfloat16", "float64", "double", "int64", "long", "int32",
     "int", "int16", "int8", "uint8", "bool", "complex64", "complex128"}
)


def _code(node) -> str:
    try:
        return cst.Module(body=[]).code_for_node(node).strip()
    except Exception:  # noqa: BLE001
        return "N"


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
