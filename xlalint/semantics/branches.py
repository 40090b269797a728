"""The walk of branches: what a test says about its body (``if``, a conditional expression, ``and``/``or``,
``assert``). A part of the semantic model (``model.SemanticModel`` composes it beside ``walk.StatementWalk``):
for each branch it asks ``guards`` how often the body runs (once, every N steps, in evaluation only, never on
XLA), pushes that on the walk's guard stack while the body is walked, and narrows what the test proves (a
tensor type test, ``isinstance``)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import argument_tests, constants, device_pins, narrowing
from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.guards import (
    FREE, NEVER, ONCE, ends_block, ends_with, first_pass_of, else_mode, mode_test, negated_once, negated_period,
    period_of, rest_after, runs_once, stops_after_few, xla_polarity,
)
from xlalint.semantics.syntax import assigned_names, ends_with_break, last_name, name_words, names_in, own_nodes


_NO_BLOCK = cst.IndentedBlock(body=())  # what an `and`'s operand "guards": no statements of its own


class Branches:
    """The walk of ``if``, ``x if t else y``, ``a and b`` and ``assert``."""

    def _if(self, node: cst.If, elif_: bool = False) -> None:
        self.seq += 1
        prev = self.stmt
        self.stmt = node
        self._emit("If", node)
        self.walk(node.test)
        self.stmt = prev
        period = period_of(node.test) or self.predicate_period(node.test)
        polarity = xla_polarity(node.test, self.func.polarities)
        loop = self.loop_stack[-1].node if self.loop_stack else None
        outer = self.loop_stack[0].node if self.loop_stack else None
        once = period is None and (runs_once(node.test, node.body, self.func.step_counters, loop, outer)
                                   or _breaks_the_loop(node.body, self.loop_stack))
        # `merge = False` ... `if merge and n > 1:`: a test the source decides; its dead arm never runs
        decided = self.decided(node.test)
        conditional = not device_pins.is_main_guard(node.test)  # a script's `if __name__ == "__main__":` always runs
        self.cond_depth += conditional
        params = self.fixed_parameters(node)
        self.guards.append((period, polarity == "non-xla" or decided is False, once,
                            argument_tests.tests_of(node.test, params) if params else ()))
        mode = mode_test(node.test)
        self.eval_depth += mode == "eval"
        other_mode = else_mode(node.test) if node.orelse is not None else None
        # `if not math.isfinite(loss): print(...); sys.exit(1)`: once at most; `if attn_debug:` an opt-in debug
        # dump whose purpose is the host copy: neither is a per-step cost of a normal run
        exits = _exits(self, node.body) or _debug_flag(node.test) or _failure_test(node.test)
        self.error_depth += exits
        tested = narrowing.tensor_type_test(node.test)
        if tested:
            self._type_tested.append(tested)
        # `if isinstance(im, (str, Path)):`: not a tensor in this branch
        narrowed = self.narrow(*narrowing.narrowed(node.test, lambda name: self._env_lookup(name)[1], self.qualname))
        loops = self.loop_stack
        first = None if once else first_pass_of(node.test, loops)
        if first is not None:
            # `for i in range(n): if i == 0: ...`: the block runs once each time the loop runs, as if it
            # stood before the loop (whisper's no-speech probability, read at the first decoding step only)
            self.loop_stack = loops[:first]
        elif not once and loops and ends_with(node.body, cst.Return):
            # `if idx_next == eos_id: return idx[:input_pos]`: the block leaves the function, so it runs at
            # most once per call, as the function's own statements outside its loops do
            self.loop_stack = []
        closed = self.walk_block(node.body)
        if polarity == "xla" and node.orelse is None and not (loops and loops[-1].hint == H.DECODE):
            # `if is_torch_tpu_available(): xm.mark_step()` in a step: on XLA (a decode's per-token reads stay)
            for point in closed:  # the barrier always runs, and ends the step for the rest of the outer block
                point[2] = None
            self._block_syncs[-1].extend(closed)
        self.loop_stack = loops
        self.restore(narrowed)
        if tested:
            self._type_tested.pop()
        self.error_depth -= exits
        self.eval_depth -= mode == "eval"
        self.guards.pop()
        if node.orelse is not None:
            # `if step % hess_interval != hess_interval - 1: ... else: (the Hessian update)`: every N steps
            self.guards.append((negated_period(node.test, self.predicate_period), polarity == "xla" or decided is True, False,
                                argument_tests.tests_of(node.test, params, negate=True) if params else ()))
            self.eval_depth += other_mode == "eval"
            # `if torch.is_tensor(seq_len): ... else: int(seq_len)`: not a tensor on the other branch
            other = self.narrow(tested, K.NOT_TENSOR)
            if type(node.orelse) is cst.If:
                self._if(node.orelse, elif_=True)
            else:
                self.walk_block(node.orelse.body)
            self.restore(other)
            self.eval_depth -= other_mode == "eval"
            self.guards.pop()
        self.cond_depth -= conditional
        if not elif_ and not (node.orelse is None and ends_block(node.body)):
            # `if steps == 0: (if not first: return) else: (if steps % every != 0: return)`: the rest runs every N
            # steps, as after a plain `if steps % every != 0: return`
            state = rest_after(node, self.predicate_period,
                               lambda t, b: runs_once(t, b, self.func.step_counters, loop))
            if state == ONCE:
                self.guards.append((None, False, True))
            elif state not in (FREE, NEVER):
                self.guards.append((state, False, False))
        rest = () if elif_ or not params else _tests_after(node, params)
        if rest:  # `if kind == "giou": return ...` then `elif kind == "diou": return ...`: the rest, neither
            self.guards.append((None, False, False, rest))
        if node.orelse is None and ends_block(node.body):
            if polarity == "xla" or decided is True:
                # `if on_tpu: return pad(..., "max_length")`: the rest of this block runs off XLA only
                self.guards.append((None, True, False))
            elif stops_after_few(node.test, node.body, self.loop_stack):
                self.guards.append((None, False, True))  # `if i >= 5: break`: the rest runs the first few passes
            else:
                skipped = negated_period(node.test, self.predicate_period)
                if skipped is not None:
                    # `if not self.should_log(step): return`, `if step % N: continue`: the rest of this block
                    # runs every N steps
                    self.guards.append((skipped, False, False))
                elif negated_once(node.test, lambda t, b: runs_once(t, b, self.func.step_counters, loop)):
                    # `if self.global_step not in cfg.save_steps: return []`: the rest runs on those steps only
                    self.guards.append((None, False, True))

    def _if_exp(self, node: cst.IfExp) -> None:
        """``loss.item() if not self.xla else loss.detach()``: each arm under its test's device guard."""
        self._emit("IfExp", node)
        self.walk(node.test)
        polarity = xla_polarity(node.test, self.func.polarities)
        params = self.fixed_parameters(node)
        loop = self.loop_stack[-1].node if self.loop_stack else None
        once = loop is not None and self.stmt is not None and runs_once(
            node.test, self.stmt, self.func.step_counters, loop, self.loop_stack[0].node)
        # `int(cache_position[0]) if cache_position is not None else ...`: an arm the callers' literals decide
        self.guards.append((None, polarity == "non-xla", once,
                            argument_tests.tests_of(node.test, params) if params else ()))
        self.walk(node.body)
        self.guards[-1] = (None, polarity == "xla", False,
                           argument_tests.tests_of(node.test, params, negate=True) if params else ())
        self.walk(node.orelse)
        self.guards.pop()

    def _boolean_operation(self, node: cst.BooleanOperation) -> None:
        """``is_xla_tensor(x) or mask.any()``: on XLA the right operand never runs after a left one that is
        true there (``or``), nor after one that is false there (``and``)."""
        self._emit("BooleanOperation", node)
        self.walk(node.left)
        polarity = xla_polarity(node.left, self.func.polarities)
        skipped = polarity == ("xla" if type(node.operator) is cst.Or else "non-xla")
        if skipped:
            self.guards.append((None, True, False))
        gate = self.operand_gate(node.left) if type(node.operator) is cst.And else None
        loops = self.loop_stack
        if gate is not None:
            # `if i == 0 and finish.any():`: the right operand runs on the loop's first pass only
            if gate == "once":
                self.guards.append((None, False, True))
            else:
                self.loop_stack = loops[:gate]
            self._emit("GatedOperand", node.right)
        self.walk(node.right)
        if gate is not None:
            self.loop_stack = loops
            if gate == "once":
                self.guards.pop()
        if skipped:
            self.guards.pop()

    def operand_gate(self, test):
        """How often what follows ``test`` in an ``and`` runs, when less often than the test: the position in
        the loop stack of the loop whose first pass only ``test`` lets through (``i == 0``), "once" for a test
        that lets one step through (``step == last_step``), else None."""
        first = first_pass_of(test, self.loop_stack)
        if first is not None:
            return first
        loop = self.loop_stack[-1].node if self.loop_stack else None
        return "once" if runs_once(test, _NO_BLOCK, self.func.step_counters, loop) else None

    def _assert(self, node: cst.Assert) -> None:
        self._emit("Assert", node)
        if self.cond_depth == 0 and device_pins.asserts_cuda(node.test):  # not in an optional feature's branch
            self.pins_cuda = True
        self.walk(node.test)
        if node.msg is not None:
            self.error_depth += 1
            self.walk(node.msg)
            self.error_depth -= 1
        if self.cond_depth == 0 and not self.loop_stack:
            self._note_asserted(node)
            if self.func is not self.top and mode_test(node.test) == "eval":
                # `assert not self.training` (an export or inference-only `forward`): the rest of the function runs
                # only while evaluating (the function's walk resets the depth when it ends)
                self.eval_depth += 1

    def fixed_parameters(self, test=None) -> dict:
        """The walked function's parameters that hold their arguments at ``test`` (an ``if`` or a conditional
        expression): those its body never binds again, and those it binds only in statements after the one that
        holds ``test`` (``argument_tests.parameters_until_bound``), each found once per function."""
        node = self.func.node
        if type(node) is not cst.FunctionDef:
            return {}
        key = ("fixed params", id(node))
        found = self._module_class_memo.get(key)
        if found is None:
            params = argument_tests.parameters_until_bound(node)
            fixed = {k: v[:2] for k, v in params.items() if v[2] is None}
            late = {k: v for k, v in params.items() if v[2]}
            where: dict = {}  # id of an `if` or a conditional expression -> the body statement that holds it
            if late:
                for i, stmt in enumerate(node.body.body if type(node.body) is cst.IndentedBlock else ()):
                    where.update((id(n), i) for n in _branches_in(stmt))
            found = self._module_class_memo[key] = (fixed, late, where)
        fixed, late, where = found
        at = where.get(id(test)) if late and test is not None else None
        if at is None:
            return fixed
        return {**fixed, **{k: v[:2] for k, v in late.items() if at < v[2]}}

    # tests the source decides (constants) ---------------------------------
    def decided(self, test) -> Optional[bool]:
        """What ``test`` always is in the function being walked (``constants.truth``), else None."""
        f = self.func
        key = id(f.node) if f.node is not None else None
        facts = self._asserted.get(key, {})
        names: set = set()
        self_none = constants.decidable(test, names)
        if names and type(f.node) is cst.FunctionDef:
            names -= constants.parameters(f.node)  # `if x is None:` of a parameter: never decided
        if not facts and not names and not self_none:
            return None
        consts = self._constants.get(key)
        if consts is None:
            if self._module_constants is None:
                self._declared_names = constants.declared_names(self.module) if self.declares_scopes else frozenset()
                self._module_constants = constants.module_constants(self.module, self._declared_names)
            enclosing = []
            g = f.parent
            while g is not None:  # a nested function sees its enclosing functions' names, not the module's
                if type(g.node) is cst.FunctionDef:
                    enclosing.append(g.node)
                g = g.parent
            consts = (constants.function_constants(f.node, self._module_constants, enclosing, self._declared_names,
                                                   self._locals_memo)
                      if type(f.node) is cst.FunctionDef else self._module_constants)
            self._constants[key] = consts
        return constants.truth(test, consts, facts, self._never_none(f.class_key) if self_none else frozenset())

    def _never_none(self, class_key) -> frozenset:
        """The class's ``self.`` attributes never set to None (``constants.never_none_attributes``), once."""
        node = self._class_nodes.get(class_key) if class_key is not None else None
        if node is None:
            return frozenset()
        found = self._never_none_memo.get(class_key)
        if found is None:
            found = self._never_none_memo[class_key] = constants.never_none_attributes(node)
        return found

    def _note_asserted(self, node: cst.Assert) -> None:
        """``assert not exists(eos_token), "not supported"`` on a function's straight line: what it proves
        holds for the rest of the function, as long as none of the names it reads is bound again there (a
        parameter, a global) and it reads no attribute or item (state that other code may change)."""
        f = self.func
        if type(f.node) is not cst.FunctionDef:
            return
        if any(type(n) in (cst.Attribute, cst.Subscript) for n in (node.test, *own_nodes(node.test))):
            return
        bound = self._assigned.get(id(f.node))
        if bound is None:
            bound = self._assigned[id(f.node)] = assigned_names(f.node.body)
        if names_in(node.test) & bound:
            return
        text, truth = constants.asserted(node)
        self._asserted.setdefault(id(f.node), {})[text] = truth


def _exits(walk, block) -> bool:
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
        q = walk.qualname(func) or (func.value if type(func) is cst.Name and func.value not in walk.imports else None)
        return q in T.EXIT_FUNCTIONS
    return False

def _breaks_the_loop(block, loop_stack) -> bool:
    """``if train_iterator.epoch >= epochs: generate_example(...); break``: the block ends with a ``break`` of
    the function's outermost loop (or of a loop over a loader): it runs once, as the loop ends, never every
    step (a ``break`` of an inner loop nested in the step loop may run every step: not this)."""
    return ends_with_break(block) and bool(loop_stack) and (len(loop_stack) == 1 or loop_stack[-1].iterates_loader)


def _debug_flag(test) -> bool:
    """``if attn_debug:`` / ``if self.debug:`` / ``if args.debug_dump and ...`` / ``if opts.save_val_results:`` /
    ``if self.check:``: a branch taken only when a debug, dump or self-check flag is on (its host copies are what
    it is for)."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return _debug_flag(test.left) or _debug_flag(test.right)
    if type(test) in (cst.Name, cst.Attribute):
        words = set(name_words(last_name(test) or ""))
        return bool(words & _DUMP_FLAG_WORDS or "save" in words and words & _DUMPED_THINGS
                    or words in _CHECK_FLAGS)
    return False


def _failure_test(test) -> bool:
    """``if not np.all(np.isfinite(p)):`` / ``if torch.isnan(loss).any():`` / ``if math.isinf(v):``: a branch taken
    only when the numbers went bad (a non-finite value), an error path that prints what went wrong, not a step's
    work (torchcfm's OT plan check)."""
    negated = False
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        negated = not negated
        test = test.expression
    if type(test) is cst.BooleanOperation:
        return False
    names = {last_name(n.func) for n in (test, *own_nodes(test)) if type(n) is cst.Call}
    return bool(names & {"isnan", "isinf"}) if not negated else "isfinite" in names


# words of a flag that turns on an opt-in dump: `debug`, `dump_attn`, `visualize`; `save` only with what is
# written out (`save_val_results`, `save_images`), not `save_best` (a checkpoint choice, decided per evaluation)
_DUMP_FLAG_WORDS = frozenset({"debug", "dump", "visualize", "vis"})
# a flag that turns on self-checks (moshi's `LMGen(check=False)`: `if self.check: assert ...`), not `check_val` or
# `should_check` (what is checked, or when)
_CHECK_FLAGS = (frozenset({"check"}), frozenset({"checks"}), frozenset({"sanity", "check"}),
                frozenset({"sanity", "checks"}))
_DUMPED_THINGS = frozenset({"results", "images", "outputs", "preds", "predictions", "samples", "masks", "plots",
                            "figures", "visualizations", "vis"})


def _tests_after(node: cst.If, params: dict) -> tuple:
    """The tests of the function's parameters the statements after an ``if``/``elif`` chain run under, when
    every arm leaves the block and no ``else`` does (``argument_tests``)."""
    out: tuple = ()
    while True:
        if not ends_block(node.body):
            return ()
        out += argument_tests.tests_of(node.test, params, negate=True)
        if node.orelse is None:
            return out
        if type(node.orelse) is not cst.If:
            return ()
        node = node.orelse


def _branches_in(stmt):
    """The ``if`` statements and conditional expressions in ``stmt`` (nested functions and classes left out)."""
    return (n for n in (stmt, *own_nodes(stmt)) if type(n) in (cst.If, cst.IfExp))
