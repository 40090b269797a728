"""Step marks: which functions are roots of a step, which loops are hot, and the module's own call graph.

A part of the semantic model (``model.SemanticModel`` composes it): the roots of per-step code
(``forward`` of a module, ``training_step``, functions wrapped by ``torch.compile``, per-step hooks of
Lightning or Hugging Face bases, functions registered on per-step events), what a loop is from its words
(``hot_loops``: decoding, rollout, evaluation), the calls that run the model, and after the walk the
module's own call graph (``steps.Steps``) for the rules that decide within the file.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import device_pins
from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.guards import period_of
from xlalint.semantics.steps import Ctx, FuncInfo, Frequency, LoopInfo, Steps
from xlalint.semantics.syntax import (
    NODE_TYPES, child_nodes, code_of, dotted_name, keyword_arg, last_name, name_words, own_nodes, positional_args,
    string_value,
)
from xlalint.semantics.unbound import uses_unbound_names


class StepMarks:
    """Roots of per-step code, hot loops and hooks, periodic predicates, and the module's call graph."""

    def find_periodic_predicates(self) -> None:
        """Before the walk: the short functions and methods of this module whose every return is a periodic
        test or False (``def should_log(self, step): return step == 1 or step % self.log_freq == 0``), by function
        key, with the period's text. A call of one in a condition guards its block as ``step % N == 0``
        does, wherever it is defined (``predicate_period``); other modules read them in the summary."""
        found = self.periodic = {}
        for stmt in self.module.body:
            if type(stmt) is cst.FunctionDef:
                _note_predicate(found, stmt.name.value, stmt)
            elif type(stmt) is cst.ClassDef and type(stmt.body) is cst.IndentedBlock:
                for member in stmt.body.body:
                    if type(member) is cst.FunctionDef:
                        _note_predicate(found, f"{stmt.name.value}.{member.name.value}", member)

    def predicate_period(self, test) -> Optional[str]:
        """``self.should_log(step)``, ``should_eval(i)``: the period of a call of a periodic predicate of this
        module or of another project module, or of a name bound to a periodic test, or None."""
        if type(test) is cst.BooleanOperation:
            return self.predicate_period(test.left) or self.predicate_period(test.right)
        if type(test) is cst.Name:
            f = self.func
            while f is not None:
                if test.value in f.env:
                    return f.periods.get(test.value)
                f = f.parent
            return None
        if type(test) is not cst.Call:
            return None
        callee = self.callee_key(test.func)
        if callee is not None and callee[0] != "@":
            return self._period_at_call(self.periodic.get(callee), callee, test)
        if self.facts is None:
            return None
        if callee is not None and not callee.startswith(H.DISPATCH_PREFIX):
            gkey = callee[1:]
            if ":" not in gkey:
                r = self.facts.resolve(gkey)
                gkey = r[1] if r is not None and r[0] == "func" else None
            period = self.facts.periodic(gkey) if gkey is not None else None
            if period is not None:
                return period
        if type(test.func) is cst.Attribute:
            # `self.metrics_processor.should_log(step)` on an object of no known class: the project's
            # periodic predicates of that method name, when they agree
            return self.facts.periodic_method(test.func.attr.value)
        return None

    def _period_at_call(self, period: Optional[str], callee: str, call: cst.Call) -> Optional[str]:
        """``def divisible_by(num, den): return num % den == 0`` called as ``divisible_by(i, validate_every)``:
        the period is what the call passes for the parameter the predicate divides by (``validate_every``),
        not the parameter's own name."""
        f = self.funcs.get(callee)
        if period is None or f is None or f.node is None:
            return period
        if period.endswith(H.EPOCHS):
            return self._period_at_call(period[: -len(H.EPOCHS)], callee, call) + H.EPOCHS
        params = [p.name.value for p in f.node.params.params]
        if f.class_key is not None and params[:1] == ["self"]:
            params = params[1:]
        if period not in params and period not in [p.name.value for p in f.node.params.kwonly_params]:
            return period
        for a in call.args:
            if a.keyword is not None and a.keyword.value == period:
                return code_of(a.value)
        pos = [a for a in call.args if a.keyword is None and not a.star]
        i = params.index(period) if period in params else len(pos)
        return code_of(pos[i].value) if i < len(pos) else period

    def _exclude_cuda_bound(self) -> None:
        """A function that makes a call needing CUDA on its straight line (a model loaded with
        ``load_in_8bit=True``, a bitsandbytes optimizer), or calls such a function of the module there
        (``main()`` calling ``load_model()``), does not run on XLA past it: it is not XLA code, nor are the
        functions nested in it. When the module's own statements do (a notebook's cells, a script's
        ``if __name__ == "__main__": main()``), the program cannot run on XLA: no function of it is XLA code,
        as for a module hard-wired to CUDA. Whatever the module says of XLA."""
        funcs = self.funcs
        bodies = {key: f.node.body.body for key, f in funcs.items()
                  if not f.excluded and type(getattr(f.node, "body", None)) is cst.IndentedBlock}
        bound: set = set(device_pins.triton_kernels(self.module, self.qualname))  # the module's functions that need CUDA
        changed = True
        while changed:  # a caller of a function that needs CUDA needs it too, up the module's own calls
            changed = False
            names = frozenset(k for k in bound if "." not in k)
            for key, body in bodies.items():
                if key not in bound and device_pins.cuda_requirement(body, qualname=self.qualname, bound=names,
                                                                     placements=not self.names_xla) is not None:
                    bound.add(key)
                    changed = True
        names = frozenset(k for k in bound if "." not in k)
        if device_pins.cuda_requirement(self.module.body, main_block=True, qualname=self.qualname, bound=names,
                                        placements=not self.names_xla) is not None:
            self.cuda_only = True
            self.top.excluded = True
            for f in funcs.values():
                f.excluded = True
            return
        for key in bound:
            if key in funcs:
                self._exclude_with_locals(key)

    def _exclude_with_locals(self, key: str) -> None:
        """Function ``key`` is not XLA code, nor are the functions nested in it."""
        self.funcs[key].excluded = True
        inner = key + ".<locals>."
        for k, g in self.funcs.items():
            if k.startswith(inner):
                g.excluded = True

    def imports_placing_code(self) -> bool:
        """Some project module it imports places tensors, or may (``facts.places``; unknown alone)."""
        return bool(self.project_imports) and (
            self.facts is None or any(self.facts.places(m) for m in sorted(self.project_imports)))

    def binds_what_it_uses(self) -> bool:
        """The module binds every name it uses (not a fragment whose `model` and `loader` come from elsewhere);
        a notebook's magics may bind names its Python does not show (`files = !ls`, `%run utils.py`). Once."""
        if self._whole is None:
            self._whole = (self.is_notebook and self.ipython_magics) or not uses_unbound_names(self.module)
        return self._whole

    def _host_program(self) -> bool:
        """The module is a whole program that runs on the host: a notebook, or a script (``if __name__ ==
        "__main__":``, a loop at its top level) that no module of its project imports, which places nothing on a
        device itself nor through the project modules it imports (``facts.places``), and binds every name it
        uses (not a fragment whose ``model`` and ``loader`` come from elsewhere: ``unbound``; a notebook with
        IPython lines is taken as whole, as its magics may bind names)."""
        if self.places_on_device:
            return False
        if not self.is_notebook:
            if not any(type(st) in (cst.For, cst.While) or (type(st) is cst.If and device_pins.is_main_guard(st.test))
                       for st in self.module.body):
                return False
            if self.facts is not None and self.facts.imported(self.module_name) and not (
                    self._trains() and not self.facts.places_anywhere()):
                # its functions may be handed tensors placed elsewhere; not when it trains itself and
                # nothing in its project places anything (spinningup's `ppo()`, imported by its package and its
                # runner: it builds its networks and its batches itself, from NumPy buffers)
                return False
        if not self.is_notebook and self.other_imports:
            return False  # a script that imports a library which may place for it
        if self.imports_placing_code():
            return False
        return self.binds_what_it_uses()

    def _exclude_host_helpers(self) -> None:
        """In a whole program (a notebook, a script no module imports), a function that places only on its own
        device parameters, which every call gives the CPU (``pred_and_store(..., device="cpu")`` to time predictions
        on the host), computes on the host: not XLA code."""
        placing = {k: f for k, f in self.funcs.items() if f.device_params and not f.pins_cuda}
        if not placing or not (self.is_notebook or self.facts is None or not self.facts.imported(self.module_name)):
            return
        names = set().union(*(f.device_params for f in placing.values()))
        on_cpu = device_pins.params_given_cpu(self.module, names)
        for key, f in placing.items():
            if f.device_params <= on_cpu and not f.places_elsewhere:
                self._exclude_with_locals(key)

    def _host_library(self) -> bool:
        """The module is a helper that only host programs import (``_host_program``: a course's ``fc_model.py``,
        imported by notebooks that place nothing), and that places nothing itself nor through what it imports: its
        functions are handed host tensors and make only host tensors."""
        if self.is_notebook or self.places_on_device or self.other_imports or self.facts is None:
            return False
        return not self.imports_placing_code() and self.facts.importers_on_host(self.module_name)

    def _trains(self) -> bool:
        """Some function of the module calls backward() or an optimizer step itself."""
        return any(lp.trains for lp in self.loops) or any(f.trains_outside_loops for f in self.funcs.values())

    def _resolve(self) -> None:
        """After the walk: closures and compiled functions, parameters from call sites, and the
        module's own call graph (``self.steps``) for the rules that decide within the file."""
        funcs = self.funcs
        # a module importing a CUDA-only library at its top cannot even be imported on a TPU host, whatever it
        # says of XLA (lit-gpt's model.py tests `device.type == "xla"` and imports flash_attn)
        if self.pins_cuda and self.chosen_device_names() and (self.is_notebook or self.facts is None
                                                              or not self.facts.imported(self.module_name)):
            # a whole program that pins CUDA somewhere (else no answer changes `cuda_only`): a helper's `device`
            # parameter that every call gives `DEVICE = "cuda:2"` holds it
            self.note_cuda_indices(device_pins.params_given_cuda(
                self.module, self.chosen_device_names(), self.cuda_ordinal_names))
        if self.chosen_device_names():
            self.chooses_device = True
        self.cuda_only = (self.pins_cuda and not self.chooses_device and not self.names_xla) or bool(self.requires_cuda)
        if self.cuda_only:
            # hard-wired to CUDA (`model.cuda()`, `Fabric(accelerator="cuda")`, `device = "cuda"`), never a
            # device chosen at run time, XLA and TPUs never named, or importing a CUDA-only library
            # (`from flash_attn import ...`): it does not run on torch_xla
            self.top.excluded = True
            for f in funcs.values():
                f.excluded = True
        if not self.cuda_only and not self.names_xla:
            # a function that places on CUDA by a literal on its straight line and on no device chosen at run
            # time (lm-eval's audio LM moves its generation inputs `.to("cuda")`): not XLA code, as a module is not
            for f in funcs.values():
                if f.pins_cuda and not f.chooses_device and f is not self.top:
                    f.excluded = True
        if self.cuda_needs and not self.cuda_only:  # a second look at the statements, only where it can matter
            self._exclude_cuda_bound()
        self._exclude_host_helpers()
        self.host_module = self._host_program() or self._host_library()
        if self.host_module:
            # a notebook or a script that puts no tensor on a device, names none, imports no project code that may
            # and makes what it uses itself (a tutorial on the CPU, pytorch/examples' REINFORCE): its tensors live
            # on the host, and nothing in it runs on XLA; nor does a helper module only such programs import
            self.top.excluded = True
            for f in funcs.values():
                f.excluded = True
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
        if callee.startswith(H.CALLABLE_PREFIX):  # the callbacks passed that are this module's
            prefix = self.module_name + ":"
            return [g[len(prefix):] for g in callee[len(H.CALLABLE_PREFIX):].split("|")
                    if g.startswith(prefix) and g[len(prefix):] in self.funcs]
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

    def computed_by_a_barrier(self, ctx: Ctx, no_new_ops: bool) -> bool:
        return self.steps.computed_by_a_barrier(ctx, no_new_ops)

    def is_step_loop(self, loop: LoopInfo) -> bool:
        return self.steps.is_step_loop(loop)

    def repeats_every_step(self, loop: LoopInfo) -> bool:
        return self.steps.repeats_every_step(loop)

    def does_step(self, key: str) -> bool:
        return self.steps.does_step(key)

    def loop_trains(self, loop: LoopInfo) -> bool:
        """The loop's body runs backward() or an optimizer step, itself or through what it calls."""
        return self.steps.loop_trains(loop)

    def _loop_hint(self, head, counts: bool = False, target=None) -> Optional[str]:
        """What a loop is, from the words of its header and its functions' names, and whether it runs
        under ``torch.no_grad()`` (hot_loops). A ``for`` whose ``target`` names a batch (``for batch_idx in
        range(len(test_data_gen)):``) goes over data, never over token positions or environment steps."""
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
        if kind in (H.DECODE, H.ROLLOUT) and ((not counts and not _counts_positions(head)) or (
                target is not None and {"batch", "batches"} & set(name_words(code_of(target))))):
            kind = None  # `for sample in batch`: a loop over data, not over token positions or env steps
        outer = self.loop_stack[-1].hint if self.loop_stack else None
        if kind is None and outer in (H.DECODE, H.ROLLOUT):
            # `for t in next_tokens[:n]: callback(t)` inside the decoding loop: it runs on every decoding step
            return outer
        return kind if kind is not None else (H.EVAL if no_grad else None)

    def _note_hot(self, node: cst.Call, func) -> None:
        """A call that runs the model makes its function and its innermost loop hot; ``env.step(a)``
        makes the loop a rollout; ``register_forward_hook(fn)`` / ``add_callback("on_batch_end", fn)``
        make ``fn`` a per-step hook."""
        if self._runs_model_call(node, func):
            whole = type(func) is cst.Attribute and func.attr.value in H.WHOLE_DECODE_FUNCTIONS
            lp = self.loop_stack[-1] if self.loop_stack else None
            if lp is not None and whole and len(self.loop_stack) == 1 and not _has_inner_loop(lp.node) and not (
                    lp.iterates_loader or (type(lp.node) is cst.For and self.iterates_batches(lp.node.iter))):
                pass  # `out = model.generate(ids)` per prompt or sample: each iteration is a whole decode, whose
                #       result the next line needs (a loop over a loader's batches, a loop within another or
                #       one that trains in an inner loop stays hot)
            elif self.loop_stack:
                self.loop_stack[-1].runs_model = True
            else:  # one model pass per call: a loop calling it is hot (not one calling a whole evaluation)
                self.func.runs_model = True
        if type(func) is not cst.Attribute:
            return
        meth = func.attr.value
        if meth in H.WHOLE_DECODE_FUNCTIONS and self.loop_stack and self.loop_stack[-1].hint == H.DECODE \
                and not self.loop_stack[-1].over_positions:
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
            key = self.callee_key(fn) if type(fn) in (cst.Name, cst.Attribute) else None
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
                cls = self.current_class()
                return bool(cls and self.classes.get(cls, {}).get("module"))
            if not name.lstrip("_")[:1].islower():
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
            if set(name_words(last)) & H.NOT_MODEL_WORDS or not last.lstrip("_")[:1].islower():  # `self._model(x)`
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
            # a submodule of a model: decoder.embedding(x), self.model.encoder(src); not a method the
            # source shows its class of this module defines (`q_module.pack_weight(w)`: its body decides; one of
            # another module's class, `model.decode(ys, memory, mask)`, runs the model as far as this module sees)
            if not ((rk == K.MODULE or model_named) and bool(node.args) and last not in H.MODULE_UTILITY_METHODS
                    and not last.startswith(H.MODULE_UTILITY_PREFIXES)):
                return False
            key = self.module_method_key(func)
            return key is None or key[0] == "@"
        if type(func) is cst.Subscript:
            return self.kind(func) == K.MODULE
        return False

    def _is_root_function(self, node: cst.FunctionDef, info: FuncInfo) -> bool:
        for d in node.decorators:
            dec = d.decorator.func if type(d.decorator) is cst.Call else d.decorator
            q = self.qualname(dec) or dotted_name(dec)
            if q in T.COMPILE_WRAPPERS:
                return True
        name = node.name.value
        if info.class_key is not None:
            cls = self.classes.get(info.class_key, {})
            if name == "forward" and cls.get("autograd"):
                return False  # an autograd.Function's forward runs where `Cls.apply(...)` is called
            if name == "forward" and (cls.get("module") or (self.imports_torch and _has_bases(cls))):
                return True  # a class with no base (`class LLM:`) is no nn.Module: its forward runs where called
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


def _has_bases(cls: dict) -> bool:
    """The class derives from something other than ``object``: from what this module cannot see, an
    ``nn.Module`` among them perhaps."""
    return any(b not in ("object", "builtins.object") for b in cls.get("bases", ()))


def _has_inner_loop(loop) -> bool:
    """The loop's body holds another loop (not in a nested function)."""
    return any(type(n) in (cst.For, cst.While) for n in own_nodes(loop.body))


def _counts_positions(head) -> bool:
    """A ``for`` header that counts (``range(max_new_tokens)``, ``itertools.count()``): the shape of a
    decoding or rollout loop, unlike ``for item in data``."""
    if type(head) is not cst.Call:
        return False
    fname = last_name(head.func)
    if fname in ("enumerate", "tqdm", "trange") and head.args:
        return fname == "trange" or _counts_positions(head.args[0].value)
    return fname in ("range", "count", "trange", "repeat")


# a periodic predicate is a short function: its body (after a docstring) has at most this many statements
_PREDICATE_STATEMENTS = 3


def _note_predicate(found: dict, key: str, node: cst.FunctionDef) -> None:
    body = node.body.body if type(node.body) is cst.IndentedBlock else ()
    if not body or len(body) > _PREDICATE_STATEMENTS + 1:
        return
    periods = set()
    stack = list(body)
    while stack:
        n = stack.pop()
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if type(n) is cst.Return:
            if type(n.value) is cst.Name and n.value.value == "False":
                continue  # `if self.cfg.wandb is None: return False`: never, which is within every N steps
            p = period_of(n.value) if n.value is not None else None
            if p is None:
                return  # one return that is not a periodic test: not a predicate
            periods.add(p)
        elif type(n) in NODE_TYPES:
            stack.extend(child_nodes(n))
    if len(periods) == 1:
        found[key] = periods.pop()
