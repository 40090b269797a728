"""The semantic model: one walk over one libcst tree answers the two questions every rule asks.

``SemanticModel`` is a thin coordinator: it owns the walk's state (declared in ``__init__``) and the few
calls rules make of it, and composes one part per job, each in its own module:

* ``walk.StatementWalk``: the walk itself, statement by statement, and the rules' dispatch;
* ``bindings.Bindings``: names, imports, targets, parameters, attributes (the environments);
* ``tensors.TensorInference`` and ``tensor_calls.CallKinds``: is this value a tensor? (``kind(expr)``,
  ``is_tensor(expr)``) from the bindings and the project's facts about other modules (``self.facts``);
* ``calls.CallSites``: what each call runs, its call sites and the parameter seeds they give;
* ``callables.Callables``: function values (callbacks, lambdas passed on) and what generators yield;
* ``step_marks.StepMarks``: roots of per-step code, hot loops and hooks, and after the walk the module's own
  call graph (``steps.Steps``): does this line run every step?;
* ``rewalk.Rewalk``: functions walked again when their parameters, callees or attributes became better known;
* ``export.Export``: what this module gives the project (``summary``) and its candidates, as plain data.

The parts share the model's state through ``self`` (the attributes set in ``__init__``): they are one
object, split by job so that each can be read alone.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import libcst as cst

from xlalint.semantics import device_pins, dumps, import_time
from xlalint.semantics import hot_loops as H
from xlalint.semantics.bindings import Bindings
from xlalint.semantics.branches import Branches
from xlalint.semantics.callables import Callables
from xlalint.semantics.calls import CallSites
from xlalint.semantics.tuple_items import TupleItems
from xlalint.semantics.export import Export
from xlalint.semantics.module_calls import ModuleCalls
from xlalint.semantics.narrowing import Narrowing
from xlalint.semantics.rewalk import Rewalk
from xlalint.semantics.step_marks import StepMarks
from xlalint.semantics.steps import Candidate, Ctx, FuncInfo, LoopInfo, Steps, is_test_module
from xlalint.semantics.syntax import dotted_name, last_name, name_words
from xlalint.semantics.host_values import HostValues
from xlalint.semantics.tensor_calls import CallKinds
from xlalint.semantics.tensors import TensorInference
from xlalint.semantics.walk import StatementWalk, install_dispatch, walk_places


@functools.lru_cache(maxsize=None)
def _handlers(rule_class) -> tuple:
    """The ``on_<Node>`` methods of a rule class, in ``dir`` order (``dir`` per rule and walk was a
    millisecond of every walk)."""
    return tuple(a for a in dir(rule_class) if a.startswith("on_"))


# the iterables a loop counts with, or wraps one in (a progress bar, an enumeration): kept when bound to a name
_COUNTING_ITERABLES = frozenset({"range", "enumerate", "reversed", "tqdm", "trange", "count", "iter"})


class SemanticModel(StatementWalk, Branches, Bindings, TupleItems, CallSites, ModuleCalls, Callables, StepMarks,
                    Rewalk, Export, CallKinds, HostValues, TensorInference, Narrowing):
    def __init__(self, module: cst.Module, rules: list, *, module_name: str = "__main__",
                 is_package: bool = False, facts=None, is_notebook: bool = False, names_xla: bool = True,
                 ipython_magics: bool = False,
                 cuda_needs: bool = True, declares_scopes: bool = True):
        self.module = module
        self.rules = rules
        self.module_name = module_name  # dotted, for relative imports and project-wide keys
        self.is_package = is_package
        self.is_notebook = is_notebook  # the program of a .ipynb's code cells
        # its cells hold IPython lines (`files = !ls`, `%run utils.py`, `%store -r x`), which may bind names
        self.ipython_magics = ipython_magics
        self.facts = facts  # a project.FactsView, or None when the file is analysed alone
        self.steps: Optional[Steps] = None
        self.imports: dict[str, str] = {}
        # what other modules can import from this one: its module-level imports (not those of its
        # functions), and the modules it star-imports (project.Facts resolves names through both)
        self.module_imports: dict[str, str] = {}
        self.star_modules: list[str] = []
        # what its functions and classes import when they run (`from ..models import vision_transformer`
        # in a hub entry point): importers too, for where the imported module runs (project.program)
        self.nested_imports: set = set()
        self.imports_torch = False
        self.imports_xla = False
        self.uses_rpc = False  # imports torch.distributed.rpc (bindings._note_import)
        self.torch_compute = False  # imports torch for more than its tools (TensorBoard, DataLoader)
        self.other_framework = False  # imports JAX, TensorFlow, ... (bindings._note_import)
        # anything in the module puts tensors or a model on a device, names one, or imports a module that may:
        # without it (a CPU notebook), its tensors are host tensors (step_marks._resolve)
        self.places_on_device = False  # its own code places a tensor, or imports a framework that does
        self.project_imports: set = set()  # the project modules it imports (whether they place: the facts')
        self.other_imports = False  # it imports a library that is neither the standard library nor a host library
        # CUDA by name (device_pins): a module that pins CUDA, never places on a device chosen at run time and
        # never names XLA or a TPU (``names_xla``, from its text) does not run on XLA (step_marks._resolve)
        self.names_xla = names_xla
        # its text names bitsandbytes, torchao, triton, CUDA or DeepSpeed (device_pins.mentions_cuda_needs)
        self.cuda_needs = cuda_needs
        self.pins_cuda = False
        self.chooses_device = False
        # the plain names placements put tensors on (`x.to(device)`): a choice made at run time unless the
        # name is only ever given CUDA device indices (`device = torch.device("cuda", rank)`)
        self.device_names_used: set = set()
        package = module_name if is_package else module_name.rpartition(".")[0]
        self.requires_cuda = import_time.requires_cuda(module, package) is not None  # whatever it says of XLA
        # what importing this module imports (a module of the project that needs a CUDA-only library makes
        # this one need it too: project.program)
        self.hard_imports = import_time.hard_imports(module, package)
        self.main_imports = import_time.main_imports(module, package)  # what running it as a script imports
        # an `if __name__ == "__main__":` block at its top: an entry point, whoever else imports it
        self.is_script = import_time.has_main_block(module)
        self.registers = import_time.registers(module)  # loaded through a registry: importers are not all
        # names given a CUDA device index (`rw_device = torch.device("cuda:{}".format(1))`) and names given
        # anything else: a name only ever in the first is a hard-wired CUDA device (``cuda_ordinal_names``)
        self.cuda_only = False  # pins CUDA or needs a CUDA-only library, never names XLA (step_marks._resolve)
        self.host_module = False  # a host program, or a helper only host programs import (step_marks._resolve)
        self._cuda_index_names: set = set()
        self._other_names: set = set()
        self._dtype_names: set = set()
        # (id of the function record, name): last bound to the CPU device (`cpu_device = torch.device("cpu")`)
        self._cpu_device_names: set = set()
        # (id of the function record, name) -> the iterable bound to it: `pbar = tqdm(range(1, total_len))`
        # before `for cur_pos in pbar:` (loop_iterable)
        self._iterables: dict = {}
        # (id of the function record, name) -> the call whose result it holds, for unpacking it later
        # (`results = self.pre_attention_ops(x)` then `rc_length, ... = results`: bindings)
        self._bound_calls: dict = {}
        # key of a nested function -> the seeds its last walk had, kept when its parent's walk again makes it anew
        self.carried_seeds: dict = {}
        self._host_top: set = set()  # the module statements that run before any placement (walk_top)
        self._whole: Optional[bool] = None  # the module binds every name it uses (walk_top asks, once)
        self._staged_nodes: dict = {}  # id of the function record -> ids of its nodes before its last upload
        self._uploaded: set = set()  # (id of the function record, name): holds a host tensor uploaded as it is
        # id of the value of a statement that moves a function's host batch to the run's device (host_params_if_moved)
        self._batch_moves: set = set()
        self.classes: dict[str, dict] = {}  # class key -> {"module": bool, "attrs": {}, "bases": [..]}
        self.funcs: dict[str, FuncInfo] = {}
        self.loops: list[LoopInfo] = []
        self.candidates: list[Candidate] = []
        self.closure_names: set[str] = set()
        self.compiled_names: set[str] = set()
        self.hook_keys: set[str] = set()  # callee keys of functions registered as per-step hooks
        self.periodic: dict[str, str] = {}  # function key -> period, for periodic predicates (step_marks)
        # tests the source decides (branches.decided): id of a function node (None: the module) -> its constant
        # names, and -> what its asserts proved; the module's constants, once
        self._constants: dict = {}
        self._asserted: dict = {}
        self._module_constants: Optional[dict] = None
        self._class_nodes: dict = {}  # class key -> its ClassDef
        self._never_none_memo: dict = {}
        self._assigned: dict = {}  # id(function node) -> the names its body binds (asserts' facts)
        self._locals_memo: dict = {}  # id(function node) -> its parameters and bindings (constants._locals)
        self._declared_names: frozenset = frozenset()  # declared global/nonlocal in some function
        self.declares_scopes = declares_scopes  # its text says `global` or `nonlocal` (constants.module_constants)
        self.no_grad_depth = 0  # inside `with torch.no_grad():`
        self._dispatch: dict[str, list[Callable]] = {}
        for rule in rules:
            rule.model = self
            for attr in _handlers(type(rule)):
                self._dispatch.setdefault(attr[3:], []).append(getattr(rule, attr))
        self._kind_cache: dict[int, object] = {}
        self._probed_attrs: dict = {}  # id of a function record -> {(name, attr)} its `hasattr(name, "attr")` tests
        # while the rules hear of a call: [its func node, what it runs (callee_key) or calls.UNRESOLVED], asked by
        # the model and by several rules of the same node, in the same state of the walk
        self._callee_memo: Optional[list] = None
        # callee key -> [(caller key, positional kinds, keyword kinds, called via self.)]
        self.call_sites: dict[str, list] = {}
        self._rewalking_quietly = False
        self._defs_walked = False  # the module's statements walked again: its definitions keep their walks
        self._lambda_keys: dict = {}  # id(lambda node) -> its function key, for a lambda passed to a project function
        self._function_lambdas: set = set()  # id(lambda node) of those lambdas (walked as functions, not inline)
        self.callable_sites_added = False  # a call of a callback was recorded (its parameters may learn from it)
        self._recorded_again = False  # the last re-walks recorded call sites again (rewalk._rewalk_seeded)
        # method of a plain class -> the kinds of the attributes it read (None: all) when it was walked
        self._format_seen: dict = {}
        self._attr_reads: Optional[set] = None  # the `self.<attr>` names the method being walked reads
        self._element_prefixes: set = set()  # "images[" when some `images[0] = ...` was bound
        self._guessed_params: dict = {}  # function key -> parameters whose kind is a guess from the name
        self._func_order: dict = {}  # function key -> the order it was first walked in (attribute kinds)
        # (module_calls) (id(function node), name, element) -> its module class; ("bindings", id(node),
        # expressions) -> its bindings; ("params", id(node)) -> its parameters' names
        self._module_class_memo: dict = {}
        # calls into other modules: id(ctx) -> (the callee as written, its occurrence among calls written
        # so); their lines, shown in messages ("called from train.py:88"), come from CPython's parse
        self._site_refs: dict = {}
        self._site_ordinals: dict = {}  # id(call node) -> occurrence (stable when a function is walked again)
        self._site_counts: dict = {}
        # walk state
        self.top = FuncInfo(key="<module>", name="<module>", class_key=None, node=None, parent=None,
                            excluded=is_test_module(module_name))
        self._replaced: list = []  # functions whose key another definition took (release() breaks their cycles)
        self.func = self.top
        self.class_key: Optional[str] = None
        self.loop_stack: list[LoopInfo] = []
        # (period or None, non_xla bool, once bool[, the tests of the function's parameters it makes])
        self.guards: list[tuple] = []
        self._type_tested: list[str] = []  # names under `if isinstance(v, torch.Tensor):` (maybe a tensor, maybe not)
        self.closure_depth = 0
        self.error_depth = 0
        self.cond_depth = 0
        self.eval_depth = 0  # inside branches taken only while evaluating (guards.mode_test)
        self.seq = 0
        self._block_syncs: list[list] = [[]]  # sync points recorded in each open block (their reach ends with it)
        self.stmt: Optional[cst.CSTNode] = None
        self.top_index = 0

    def step_context(self, args: Optional[tuple] = None) -> Ctx:
        """A handle on where the walk is now; resolved with ``frequency(ctx)`` after the walk. ``args``: at a
        call site, what the call passes (``argument_tests.call_arguments``)."""
        period = None
        non_xla = False
        once = False
        at = 0
        tests: tuple = ()
        for i, g in enumerate(self.guards):
            p, nx, o = g[:3]
            if p is not None:
                period, at = p, i
            non_xla = non_xla or nx
            once = once or o
            tests += g[3] if len(g) > 3 else ()
        return Ctx(self.func, tuple(self.loop_stack), period, non_xla, self.closure_depth > 0, self.seq,
                   self.error_depth > 0, once, eval_only=self.eval_depth > 0,
                   period_outside=period is not None and bool(self.loop_stack) and at < self.loop_stack[-1].guard_depth,
                   tests=tests, args=args)

    def chosen_device_names(self) -> set:
        """The names placements used (``device_names_used``) that hold a device chosen at run time: not only
        ever given CUDA device indices, nor only ever given dtypes (``x.to(self.data_type)``)."""
        return self.device_names_used - self.cuda_ordinal_names - (self._dtype_names - self._other_names)

    @property
    def cuda_ordinal_names(self) -> set:
        """Names only ever given a CUDA device index so far (``device_pins.cuda_ordinal``)."""
        return self._cuda_index_names - self._other_names

    def copy_written_out(self, call):
        """The loop (``LoopInfo``) whose body writes the host copy ``call`` to a file later on
        (``dumps.written_out``), when it is a loop over inputs that makes one output each (files, prompts, the
        images of a batch), else None: a dump of what the loop produces, whose purpose is the copy, unless the
        loop trains (``loop_trains``, asked once the module is walked). Not a decoding or sampling loop or one
        that counts (`for i in reversed(range(T))`: an image saved at every denoising step cuts every step; a
        `while`), nor one over a loader's batches (an evaluation's per-batch copy, saved or not, is its cost)."""
        if not self.loop_stack or self.stmt is None:
            return None
        loop = self.loop_stack[-1]
        if (type(loop.node) is not cst.For or loop.hint == H.DECODE or loop.iterates_loader
                or self.iterates_batches(loop.node.iter) or dumps.counts(self.loop_iterable(loop.node.iter))):
            return None
        scope = self.func.node.body if self.func is not self.top and self.func.node is not None else self.module
        return loop if dumps.written_out(loop.node, self.stmt, call, scope) else None

    def attribute_name(self, attr: str) -> str:
        """The name of ``self.<attr>`` in the class being walked (``Token2Wav.self.device``): two classes' ``self.device``
        are two names (one set to ``f"cuda:{device_id}"``, another to whatever its caller passes)."""
        cls = self.current_class()
        return f"{cls}.self.{attr}" if cls is not None else f"self.{attr}"

    def note_cuda_indices(self, names: set) -> None:
        """``names`` hold a CUDA device index (``device_pins.params_given_cuda``); not one also bound otherwise."""
        self._cuda_index_names |= names

    def note_name_value(self, name: str, value) -> None:
        """``name = value`` was bound: keep whether the value is a CUDA device index, and the iterable it
        is when it is one a loop counts with (``loop_iterable``)."""
        if device_pins.is_dtype(value):
            self._dtype_names.add(name)  # `self.data_type = torch.float16 if fp16 else torch.float32`
        else:
            ordinal = device_pins.cuda_ordinal(value) or (
                # `device = torch.device(DEVICE)` with `DEVICE = "cuda:1"`: the same hard-wired GPU
                type(value) is cst.Call and dotted_name(value.func) in ("torch.device", "device") and len(value.args) == 1
                and type(value.args[0].value) is cst.Name and value.args[0].value.value in self.cuda_ordinal_names)
            (self._cuda_index_names if ordinal else self._other_names).add(name)
        key = (id(self.func), name)
        if device_pins.is_cpu_device(value):
            self._cpu_device_names.add(key)
        else:
            self._cpu_device_names.discard(key)
        if type(value) is cst.Call and last_name(value.func) in _COUNTING_ITERABLES:
            self._iterables[key] = value
        else:
            self._iterables.pop(key, None)

    def names_cpu_device(self, name: str) -> bool:
        """``name`` says it is the CPU (``cpu_device``, ``CPU``) and was last bound to the CPU device, in this
        function (``cpu_device = torch.device("cpu")`` before ``v.to(cpu_device)``) or at module level when the
        function has no binding of its own. Not the run's device variable (``device = "cpu"`` in a notebook: the
        setting a user points at XLA on a TPU, as ``device = "cuda"`` is)."""
        if "cpu" not in name_words(name):
            return False
        if (id(self.func), name) in self._cpu_device_names:
            return True
        return (self.func is not self.top and name not in self.func.env
                and (id(self.top), name) in self._cpu_device_names)

    def note_placement(self, node: cst.Call) -> None:
        """Whether the call pins CUDA by name or places on a device chosen at run time
        (``device_pins.pin_of``); a plain name it places on is decided once every binding is seen
        (``step_marks._resolve``: ``device = torch.device("cuda", rank)`` in ``main()`` below)."""
        pin = device_pins.pin_of(node, self.cuda_ordinal_names)
        if pin is None and node.args and any(device_pins.names_cuda(a.value, self.cuda_ordinal_names) for a in node.args):
            pin = self._helper_pin(node)  # a CUDA device handed to a project helper that places with it
        if pin == device_pins.PIN:
            self.pins_cuda = True
            if self.cond_depth == 0:
                self.func.pins_cuda = True
        elif pin == device_pins.CHOSEN:
            self.func.chooses_device = True
            names = device_pins.device_names(node)
            f = self.func
            if names is None:
                self.chooses_device = True
                f.places_elsewhere = True
            else:
                names = {self.attribute_name(n[5:]) if n.startswith("self.") else n for n in names}
                self.device_names_used.update(names)
                if f is not self.top and type(f.node) is cst.FunctionDef:
                    p = f.node.params
                    own = names & {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
                    f.device_params |= own
                    f.places_elsewhere = f.places_elsewhere or own != names

    def _helper_pin(self, node: cst.Call) -> Optional[str]:
        """A call of a project function that places on one of its parameters (``v.to(device)`` in
        ``move_batch(batch, device)``) places where its argument says (``device_pins.helper_pin``): passing
        ``self.rank`` pins CUDA through the helper, as ``batch.to(self.rank)`` would. Asked only of calls that
        pass a CUDA device somewhere (resolving every call's callee again cost 3% of a walk)."""
        callee = self.callee_key(node.func)
        if callee is None or callee.startswith((H.DISPATCH_PREFIX, H.CALLABLE_PREFIX)):
            return None
        if callee[0] == "@":
            params = self.facts.device_params(callee[1:]) if self.facts is not None else None
        else:
            f = self.funcs.get(callee)
            params = (device_pins.device_params(f.node, f.device_params, f.class_key is not None)
                      if f is not None and f.device_params and type(f.node) is cst.FunctionDef else None)
        return device_pins.helper_pin(node, params, self.cuda_ordinal_names) if params else None

    def loop_iterable(self, it):
        """What a ``for`` goes over: ``tqdm(range(1, total_len))`` for ``for cur_pos in cur_iterator:`` when
        the function bound ``cur_iterator = tqdm(range(1, total_len))`` last (a progress bar kept in a
        name to update it), else ``it`` itself."""
        if type(it) is cst.Name:
            return self._iterables.get((id(self.func), it.value), it)
        return it

    def type_tested(self, expr) -> bool:
        """``expr`` is a name the code tests with ``isinstance(v, torch.Tensor)`` around this point: the code
        expects both tensors and other values there, so an unknown kind stays unknown."""
        return type(expr) is cst.Name and expr.value in self._type_tested

    def report(self, rule, node, message: str, fix: str = "", when: str = "step") -> None:
        self.candidates.append(
            Candidate(rule, node, message, fix, self.step_context(), when, self.stmt, self.top_index)
        )

    def run(self) -> None:
        # module-level functions, so that a call to a helper defined further down still resolves
        self.toplevel_defs = {
            s.name.value for s in self.module.body if type(s) is cst.FunctionDef
        }
        # classes deriving from `autograd.Function`, by the base's name: `Cls.apply(x)` runs `Cls.forward`
        # wherever the call is in the file
        self.function_classes = {
            s.name.value for s in self.module.body
            if type(s) is cst.ClassDef and any((dotted_name(b.value) or "").rpartition(".")[2] == "Function"
                                               for b in s.bases)
        }
        self.find_periodic_predicates()
        for i, stmt in enumerate(self.module.body):
            self.walk_top(i, stmt, first=True)
        self._resolve()

    def walk_top(self, i: int, stmt, first: bool = False) -> None:
        """Walk the module's ``i``-th statement. One that runs before anything in the program has placed a tensor
        anywhere (a notebook's first cells train on the CPU; the device-agnostic code comes later), and places
        nothing itself, holds host tensors: its lines are not XLA code (``_host_top``, decided on the first walk)."""
        self.top_index = i
        if first and self._runs_before_placement(stmt):
            self._host_top.add(i)
        host = i in self._host_top
        if host:
            self.guards.append((None, True, False))
        self.walk(stmt)
        if host:
            self.guards.pop()

    def _runs_before_placement(self, stmt) -> bool:
        if type(stmt) in (cst.FunctionDef, cst.ClassDef) or self.places_on_device:
            return False
        if self.other_imports and not self.is_notebook:
            return False  # a script's library may place for it; a notebook's cells show where it places
        if type(stmt) is cst.SimpleStatementLine and any(type(s) in (cst.Import, cst.ImportFrom) for s in stmt.body):
            return False
        # not a fragment: a fragment's `model` and `loader` come from elsewhere, maybe placed
        return not self.imports_placing_code() and not walk_places(stmt) and self.binds_what_it_uses()


install_dispatch(SemanticModel)
