"""Guards: what a branch's test says about how often its body runs (``if step == 0:`` once, ``if step % N
== 0:`` every N steps, ``if not self.training:`` evaluation only, ``if device.type == "xla":`` on XLA only), and
where a block leaves its loop or function. Pure functions of the syntax; the walk asks them
(``branches.Branches._if``) and ``steps`` turns what they say into frequencies."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics.hot_loops import EPOCHS
from xlalint.semantics.syntax import (
    bindings, code_of, dotted_name, last_name, name_words, own_nodes, string_value, target_names,
)


# Names that count steps: ``if step == 0:`` runs once, not every step.
_STEP_COUNTERS = frozenset({"step", "it", "itr", "iter_num", "iteration", "batch_idx", "batch_i",
                            "global_step", "n_iter", "batch_num", "steps", "epoch", "completed_steps",
                            "train_step", "cur_step", "step_idx", "batch_nb"})


def runs_once(test, body, counters, loop=None, outer=None) -> bool:
    """The body runs once, not every step: ``if step == 0:``, ``if step == last_step:``,
    ``if step >= max_steps: ...; break``, ``if is_last_step:``, ``if i in vis_ids:`` (a step counter is a name that counts
    steps, or the index of ``for i, batch in enumerate(loader)``)."""
    if type(test) is cst.BooleanOperation:
        return type(test.operator) is cst.And and (
            runs_once(test.left, body, counters, loop, outer) or runs_once(test.right, body, counters, loop, outer)
        )
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        sides = (test.left, test.comparisons[0].comparator)
        if any(_has_modulo(x) for x in sides):
            return False
        if type(op) is cst.Is and _lazy_init(sides, body):
            return True  # `if self.inv_freq is None: self.inv_freq = ...`: the object's first call only
        if type(op) is cst.Is and _first_pass_fill(sides, body, outer if outer is not None else loop):
            return True  # `total = x.item() if total is None else total + x.item()`: the loop's first pass
        if type(op) is cst.Equal and any(_is_last_index(x) for x in sides) and any(type(x) is cst.Name for x in sides):
            return True  # `if i == len(loader) - 1:`: the last batch of the epoch, once per epoch
        if type(op) in (cst.LessThan, cst.LessThanEqual) and type(sides[0]) is cst.Name and _small_int(sides[1]):
            return True  # `if batch_i < 3:`: the first few batches (plots, samples), not every step
        if type(op) in (cst.LessThan, cst.LessThanEqual) and _fills_to_a_bound(sides[0], body):
            return True  # `if len(wandb_images) < log_imgs: wandb_images.append(...)`: until it holds a few
        counts = any((type(x) is cst.Name and (x.value in _STEP_COUNTERS or x.value in counters))
                     or (type(x) is cst.Attribute and x.attr.value in _STEP_COUNTERS)  # `self.global_step`
                     for x in sides)
        if not counts and type(op) is cst.Equal and loop is not None:
            # `if cur_len + 1 == seq_len:` with `cur_len += 1` in the loop (``loop``): one iteration, the last
            shifted = [x.left.value for x in sides if type(x) is cst.BinaryOperation and type(x.left) is cst.Name
                       and type(x.operator) in (cst.Add, cst.Subtract) and type(x.right) is cst.Integer]
            counts = bool(shifted) and bool(set(shifted) & incremented_names(loop))
        if not counts:
            return False
        if type(op) is cst.In:
            # `if i in vis_sample_ids:` / `if step in milestones:`: the few chosen steps of a collection (not a
            # `range(...)`, which may hold most of them)
            right = sides[1]
            return not (type(right) is cst.Call and type(right.func) is cst.Name and right.func.value == "range")
        if type(op) is cst.Equal:
            return True
        return type(op) in (cst.GreaterThanEqual, cst.GreaterThan) and _leaves(body)
    if type(test) in (cst.Name, cst.Attribute):
        return any(w in ("last", "final", "done", "finished") for w in name_words(last_name(test) or ""))
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _sets_what_it_lacks(test.expression, body)
    return False


def _sets_what_it_lacks(test, body) -> bool:
    """``if not hasattr(self._metadata, "json_file"): ... self._metadata.json_file = path``: the block gives the
    object what it tested for, so it runs on the first call only (a dataset converted once, a cache built)."""
    if not (type(test) is cst.Call and type(test.func) is cst.Name and test.func.value == "hasattr"
            and len(test.args) == 2):
        return False
    obj, attr = dotted_name(test.args[0].value), string_value(test.args[1].value)
    if obj is None or attr is None:
        return False
    return _binds(body, f"{obj}.{attr}")


def _fills_to_a_bound(side, body) -> bool:
    """``len(xs)`` tested by a block that appends to ``xs`` (``if len(table["texts"]) < max_samples:
    table["texts"].append(...)``): the block runs until the list holds the bound's count of items (a sample
    table, the first images of a log), then never again: a few times in a run, not every step."""
    if not (type(side) is cst.Call and type(side.func) is cst.Name and side.func.value == "len" and len(side.args) == 1):
        return False
    target = code_of(side.args[0].value)
    return any(type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in ("append", "extend")
               and code_of(n.func.value) == target for n in own_nodes(body))


def incremented_names(loop) -> frozenset:
    """The names a loop's body counts up by one (``cur_len += 1``), not in nested functions."""
    return frozenset(n.target.value for n in (own_nodes(loop.body) if loop is not None else ())
                     if type(n) is cst.AugAssign and type(n.operator) is cst.AddAssign and type(n.target) is cst.Name
                     and type(n.value) is cst.Integer and n.value.value == "1")


def _lazy_init(sides, body) -> bool:
    """``self.X is None`` (either side) tested by a block that sets ``self.X``: the object's state, built on
    its first call and kept, so the block runs once per object, not on every call."""
    none = [x for x in sides if type(x) is cst.Name and x.value == "None"]
    attr = [x for x in sides if type(x) is cst.Attribute]
    if len(none) != 1 or len(attr) != 1:
        return False
    name = dotted_name(attr[0]) or ""
    return name.startswith("self.") and _binds(body, name)


def _first_pass_fill(sides, body, loop) -> bool:
    """``name is None`` (either side) tested in a loop by a block, or the statement of a conditional expression,
    that sets ``name``, which the loop (``loop``: the outermost around the test) never sets otherwise: the
    name outlives the passes (bound before the loops), so the block runs on the first pass only (RecBole's
    ``total_loss = loss.item() if total_loss is None else total_loss + loss.item()``). An accumulator reset in
    the step loop and filled in a micro-batch loop inside it is filled on every step."""
    if loop is None:
        return False
    none = [x for x in sides if type(x) is cst.Name and x.value == "None"]
    named = [x for x in sides if type(x) is cst.Name and x.value != "None"]
    if len(none) != 1 or len(named) != 1:
        return False
    name = named[0].value
    if not _binds(body, name):
        return False
    inside = {id(n) for n in own_nodes(body)}
    # set by the block, and otherwise in the loops only by other fills (`total = a if total is None else ...` in
    # each arm of an `isinstance` test) or accumulations (`total += x`): not `extra = batch.get("extra")` before
    # the test, which may be None on any pass, nor `total = None` at the top of an outer step loop
    for n in own_nodes(loop.body):
        if type(n) in (cst.Assign, cst.AnnAssign) and id(n) not in inside and n.value is not None:
            targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
            if name in {x.value for t in targets for x in target_names(t)} and not _fills(n.value, name):
                return False
        elif type(n) in (cst.For, cst.NamedExpr) and name in {x.value for x in target_names(n.target)}:
            return False
    return True


def _fills(value, name: str) -> bool:
    """``a if name is None else b`` (or ``is not None`` with the arms the other way)."""
    if type(value) is not cst.IfExp or type(value.test) is not cst.Comparison or len(value.test.comparisons) != 1:
        return False
    sides = (value.test.left, value.test.comparisons[0].comparator)
    return type(value.test.comparisons[0].operator) in (cst.Is, cst.IsNot) and \
        {x.value for x in sides if type(x) is cst.Name} == {name, "None"}


def _binds(body, name: str) -> bool:
    """``body`` assigns the dotted name ``name`` (``self.inv_freq = ...``, ``meta.json_file, x = ...``)."""
    return any(dotted_name(x) == name for target, _ in bindings(body)
               for x in ([e.value for e in target.elements] if type(target) in (cst.Tuple, cst.List) else [target]))


# `if batch_i < FIRST_FEW:` runs on the first few steps only (a literal of at most this many)
_FIRST_FEW = 16


def _small_int(node) -> bool:
    return type(node) is cst.Integer and node.evaluated_value <= _FIRST_FEW


def _is_last_index(node) -> bool:
    """``len(x) - 1`` or ``len(x)``: the index (or count) of the last element of a sized iterable."""
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Subtract and type(node.right) is cst.Integer:
        node = node.left
    return type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "len" and len(node.args) == 1


def _has_modulo(node) -> bool:
    while type(node) is cst.BinaryOperation:
        if type(node.operator) is cst.Modulo or _has_modulo(node.right):
            return True
        node = node.left
    return False


def _leaves(block) -> bool:
    """The block ends the loop or the function (``break`` / ``return`` among its statements)."""
    for st in getattr(block, "body", ()):
        if type(st) is cst.SimpleStatementLine and any(type(x) in (cst.Break, cst.Return) for x in st.body):
            return True
    return False


def stops_after_few(test, body, loop_stack) -> bool:
    """``for i, batch in enumerate(loader): if i >= 5: break``: the innermost loop leaves after its first few
    passes (its counter from 0 against a small literal), so what follows in its body runs a few times in all
    (a debug peek at the first batches), never every step."""
    if not loop_stack or not ends_with(body, cst.Break):
        return False
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    op = type(test.comparisons[0].operator)
    left, right = test.left, test.comparisons[0].comparator
    if op not in (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal) or type(left) is not cst.Name:
        return False
    return _small_int(right) and _counter_from_zero(loop_stack[-1].node) == left.value


def ends_with(block, *kinds) -> bool:
    """``block``'s last statement is one of ``kinds`` (``cst.Return``, ``cst.Raise``, ``cst.Break``, ...)."""
    body = getattr(block, "body", ())
    last = body[-1] if body else None
    return type(last) is cst.SimpleStatementLine and bool(last.body) and type(last.body[-1]) in kinds


def ends_block(block) -> bool:
    """``block`` ends by leaving its block: ``return``, ``raise``, ``continue`` or ``break``."""
    return ends_with(block, cst.Return, cst.Raise, cst.Continue, cst.Break)


def period_of(test) -> Optional[str]:
    """``step % N == 0`` or ``not step % N`` (anywhere in an and/or) -> the source text of N."""
    if type(test) is cst.BooleanOperation:
        return period_of(test.left) or period_of(test.right)
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        c = test.comparisons[0]
        if type(c.operator) is cst.Equal:
            return _modulo_divisor(test.left) or _modulo_divisor(c.comparator)
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = test.expression
        if type(inner) is cst.BinaryOperation and type(inner.operator) is cst.Modulo:
            return _modulo_divisor(inner)  # `if not batch_idx % 50:`: the remainder is 0 every 50 steps
    return None


def _modulo_divisor(side) -> Optional[str]:
    """``(step + 1) % N`` -> the source text of N; ``(epoch + 1) % N`` -> that text and ``hot_loops.EPOCHS``
    (the guard counts epochs: its body runs in one epoch of N)."""
    while type(side) is cst.BinaryOperation and type(side.operator) is not cst.Modulo:
        side = side.left
    if type(side) is cst.BinaryOperation and type(side.operator) is cst.Modulo:
        if set(name_words(code_of(side.right))) & _SHARD_WORDS:
            return None  # `if i % ddp_world_size != ddp_rank: continue`: this process's share of the items, no period
        words = set(name_words(code_of(side.left)))
        if words & _SIZE_WORDS:
            return None  # `if height % 8 != 0 or width % 8 != 0: raise`: a size's divisibility, no period
        # `(epoch + 1) % N` counts epochs; `(step + steps_per_epoch * epoch) % N` is a global step count
        counts_epochs = bool(words & _EPOCH_WORDS) and not words & _STEP_WORDS
        return code_of(side.right) + (EPOCHS if counts_epochs else "")
    return None


# the words of a count of processes or shards (`world_size`, `num_processes`, `num_replicas`): a modulo by one
# deals the items out to the processes
_SHARD_WORDS = frozenset({"world", "processes", "procs", "nprocs", "replicas", "shards", "ranks"})
# the words of an image's size (`height % 8`, `width % 64`): its divisibility is no period (not `len(...)` or
# `.size(1)`: a decoded sequence's length counts its steps)
_SIZE_WORDS = frozenset({"height", "width", "resolution", "channels"})
# the words of a counter of epochs: `epoch`, `cur_epoch`, `self.current_epoch`, `(epoch_idx + 1)`
_EPOCH_WORDS = frozenset({"epoch", "epochs"})
# ... and of steps, which make a sum with the epoch a step count (`step + num_update_steps_per_epoch * epoch`)
_STEP_WORDS = frozenset({"step", "steps", "it", "iter", "iteration", "batch"})


def negated_period(test, predicate=None) -> Optional[str]:
    """The period of a test that is true on the steps that are *not* periodic, for an early exit
    (``if step % N != 0: continue``, ``if step % N: return``, ``if not step % N == 0: return``,
    ``if not self.should_log(step): return`` with ``predicate`` naming such calls' period): the code after
    it runs every N steps."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = test.expression
        return period_of(inner) or (predicate(inner) if predicate is not None else None)
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        c = test.comparisons[0]
        if type(c.operator) is cst.NotEqual:
            return _modulo_divisor(test.left) or _modulo_divisor(c.comparator)
        return None
    if type(test) is cst.BinaryOperation and type(test.operator) is cst.Modulo:
        return _modulo_divisor(test)
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.Or:
        # `if steps % N != 0 or epoch is not None: return`: what goes on passed both, the period among them
        return negated_period(test.left, predicate) or negated_period(test.right, predicate)
    return None


_NEGATED = {cst.NotIn: cst.In, cst.NotEqual: cst.Equal}


def negated_once(test, once) -> bool:
    """A test true on every step but a few chosen ones, for an early exit (``if step not in save_steps: return``,
    ``if cfg.steps is None or self.global_step not in cfg.steps: return []``, ``if step != 0: return``): the code
    after it runs on those few steps only. Not a negated flag (``if not is_last: return``: what sets the flag is
    not the step's count). ``once(test, body)``: as ``runs_once``'s."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.Or:
        return negated_once(test.left, once) or negated_once(test.right, once)
    if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.comparisons[0].operator) in _NEGATED:
        c = test.comparisons[0]
        if type(c.operator) is cst.NotEqual and not (type(test.left) is cst.Integer or type(c.comparator) is cst.Integer):
            return False  # `if step != last_step:` compares two values that both move: not one chosen step
        positive = test.with_changes(comparisons=[c.with_changes(operator=_NEGATED[type(c.operator)]())])
        return once(positive, ())
    return False


# How the statements after a compound `if` are reached (``rest_after``): on no path, freely, only on the run's
# first pass, or only every N steps
NEVER, FREE, ONCE = "never", "free", "once"


def rest_after(node: cst.If, predicate, once) -> object:
    """How the code after an ``if``/``elif``/``else`` runs, from the exits in its arms: NEVER (every arm leaves),
    ONCE, the period N (a string: every path that goes on passed ``if steps % N != 0: return`` or a test
    that runs once), or FREE. ``sample_images``'s ``if steps == 0: if not first: return`` then ``else: ... if
    steps % every != 0: return``: the rest runs every N steps (and once at the start). ``once(test, body)``:
    the test runs its body once (``runs_once``); ``predicate``: as ``negated_period``'s."""
    states = []
    arm: object = node
    while type(arm) is cst.If:
        body = _block_state(arm.body.body if type(arm.body) is cst.IndentedBlock else (), predicate, once)
        if body == FREE and once(arm.test, arm.body):
            body = ONCE
        elif body == NEVER and arm.orelse is None:
            body = negated_period(arm.test, predicate) or (ONCE if negated_once(arm.test, once) else FREE)
            states.append(body)
            return _join(states)
        states.append(body)
        arm = arm.orelse
    if arm is None:
        states.append(FREE)
    else:
        states.append(_block_state(arm.body.body if type(arm.body) is cst.IndentedBlock else (), predicate, once))
    return _join(states)


def _block_state(stmts, predicate, once) -> object:
    """How the end of a block is reached (see ``rest_after``)."""
    for stmt in stmts:
        if type(stmt) is cst.SimpleStatementLine and any(type(s) in (cst.Return, cst.Raise) for s in stmt.body):
            return NEVER
        if type(stmt) is cst.If:
            state = rest_after(stmt, predicate, once)
            if state != FREE:
                return state  # NEVER, or the rest of the block is guarded
    return FREE


def _join(states) -> object:
    """The arms' states joined: the code after runs as often as its most frequent way in."""
    going = [s for s in states if s != NEVER]
    if not going:
        return NEVER
    if FREE in going:
        return FREE
    periods = [s for s in going if s != ONCE]
    if not periods:
        return ONCE
    # every N steps on one arm, every M epochs on the other (a setting picks one): periodic, named by the steps'
    return next((p for p in periods if "epoch" not in p.lower()), periods[0])



# how deep an and/or is searched for a device test (each operand of a walked chain asks again)
_POLARITY_DEPTH = 8

# flags that select another inference backend or device (`elif self.dnn:` in a multi-backend model's forward)
_OTHER_BACKEND_FLAGS = frozenset({"onnx", "dnn", "tflite", "edgetpu", "openvino", "coreml", "tensorrt", "ncnn",
                                  "mps", "use_mps", "on_mps", "is_mps", "use_onnx", "use_tensorrt",
                                  # flash-attn's CUDA kernels: transformers' `self._use_flash_attention_2` (4.3x)
                                  "use_flash_attention_2", "use_flash_attention_3", "use_flash_attn", "use_flash_attn_2"})


def mode_test(test) -> Optional[str]:
    """'eval' when the test is true only while evaluating (``not self.training``, ``stage != Stage.TRAIN``,
    ``mode == "val"``), 'train' when only while training (``self.training``, ``stage == Stage.TRAIN``)."""
    negate = False
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        negate = not negate
        test = test.expression
    if negate and type(test) is cst.BooleanOperation:
        return else_mode(test)  # `not (self.training and ckpt)`: De Morgan's, not the conjunction's opposite
    result = None
    if type(test) is cst.Attribute and test.attr.value == "training":
        result = "train"
    elif type(test) in (cst.Name, cst.Attribute) and (last := (dotted_name(test) or "").rpartition(".")[2]) and (
            last in _TRAIN_FLAGS or last in _EVAL_FLAGS):
        result = "train" if last in _TRAIN_FLAGS else "eval"  # `if train:` (a forward's flag), `if self.is_eval:`
    elif type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        result = mode_test(test.left) or mode_test(test.right)
    elif type(test) is cst.Comparison and len(test.comparisons) == 1:
        c = test.comparisons[0]
        for side in (test.left, c.comparator):
            word = (string_value(side) or (dotted_name(side) or "").rpartition(".")[2]).lower()
            if word in _TRAIN_WORDS or word in _EVAL_WORDS:
                mode = "train" if word in _TRAIN_WORDS else "eval"
                if type(c.operator) is cst.Equal:
                    result = mode
                elif type(c.operator) is cst.NotEqual and mode == "train":
                    result = "eval"
                break
    if result is not None and negate:
        result = "eval" if result == "train" else "train"
    return result


def else_mode(test) -> Optional[str]:
    """The mode in which the test is false (its ``else:`` runs): the opposite of ``mode_test`` for one condition;
    for ``self.training and self.gradient_checkpointing`` none (training without checkpointing takes the ``else``
    too); for an ``or``, a mode either side's falsity implies."""
    if type(test) is cst.BooleanOperation:
        left, right = else_mode(test.left), else_mode(test.right)
        if type(test.operator) is cst.And:
            return left if left == right else None
        return left or right
    mode = mode_test(test)
    return None if mode is None else "eval" if mode == "train" else "train"


_TRAIN_WORDS = frozenset({"train", "training"})
# flags that say the mode by their name: `def forward(self, image, question, train=True)`, `if is_training:`
# (OpenMMLab's models: `forward(img, img_metas, return_loss=True)`, its test-time path under `else:`)
_TRAIN_FLAGS = frozenset({"train", "training", "is_train", "is_training", "return_loss"})
_EVAL_FLAGS = frozenset({"is_eval", "eval_mode", "evaluating", "is_test", "test_mode", "is_inference"})
# a mode compared with one of these is not training: `mode == "val"`, and the inference paths of a forward that
# dispatches on its mode (`elif mode == "predict": return self.predict(...)`)
_EVAL_WORDS = frozenset({"valid", "val", "validation", "test", "eval", "evaluation", "dev",
                         "predict", "prediction", "inference", "infer", "generate", "generation"})


# torch's "am I being traced?" tests: their branches run while dynamo, TorchScript or export trace the code, never in
# the eager (lazy XLA) step
_TRACING_TESTS = frozenset({"is_compiling", "is_dynamo_compiling", "is_scripting", "is_tracing", "is_exporting"})


def xla_polarity(test, names=None, _depth: int = 0) -> Optional[str]:
    """'non-xla' when the test is true only off XLA (``device.type != "xla"``), 'xla' for the opposite.
    ``names``: a name's polarity when it was bound to such a test (``mps = "mps" in device.type``)."""
    negate = False
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        negate = not negate
        test = test.expression
    result = None
    if type(test) is cst.BooleanOperation:
        if _depth > _POLARITY_DEPTH:
            return None  # a generated chain of thousands of `and`s: not a device test
        sides = (xla_polarity(test.left, names, _depth + 1), xla_polarity(test.right, names, _depth + 1))
        if type(test.operator) is cst.And:  # true only off XLA when one operand is
            result = "non-xla" if "non-xla" in sides else "xla" if "xla" in sides else None
        else:
            result = sides[0] if sides[0] == sides[1] else None
    elif type(test) is cst.Name and names is not None and test.value in names:
        result = names[test.value]
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        c = test.comparisons[0]
        strs = [string_value(test.left), string_value(c.comparator)]
        s = next((x for x in strs if x is not None), None)
        other = test.left if strs[0] is None else c.comparator
        if type(other) is cst.Call and type(other.func) is cst.Name and other.func.value == "str" and len(other.args) == 1:
            other = other.args[0].value  # `"mps" in str(self.device)`
        other_text = (dotted_name(other) or "").lower()
        if s is not None and ("device" in other_text or other_text.endswith(".type") or "hw" in other_text or "backend" in other_text or "accelerator" in other_text):
            eq = type(c.operator) in (cst.Equal, cst.In)  # `"mps" in device.type`
            ne = type(c.operator) in (cst.NotEqual, cst.NotIn)
            s = s.lower()
            if s in ("xla", "tpu"):
                result = "xla" if eq else "non-xla" if ne else None
            elif s in ("cpu", "cuda", "gpu", "mps", "npu", "xpu", "hpu"):
                result = "non-xla" if eq else None
    if result is None and type(test) is cst.Comparison and len(test.comparisons) == 1:
        c = test.comparisons[0]
        sides = [dotted_name(test.left) or "", dotted_name(c.comparator) or ""]
        enum = next((x for x in sides if x.split(".")[-1] in ("TPU", "XLA")), None)
        if enum is not None and any(w in "".join(sides).lower() for w in ("distributed_type", "device", "accelerator", "backend")):
            if type(c.operator) is cst.Equal:
                result = "xla"
            elif type(c.operator) is cst.NotEqual:
                result = "non-xla"
    if result is None and type(test) is cst.Comparison and len(test.comparisons) == 1:
        c = test.comparisons[0]  # `self.config._attn_implementation == "flash_attention_2"`: CUDA kernels
        text = next((x for x in (string_value(test.left), string_value(c.comparator)) if x is not None), "")
        other_words = set(name_words(dotted_name(test.left) or dotted_name(c.comparator) or ""))
        if type(c.operator) in (cst.Equal, cst.In) and (text.lower() in FLASH_ATTENTION_IMPLEMENTATIONS or (
                text.lower() in _CUDA_ATTENTION_KERNELS and other_words & {"attn", "attention"})):
            result = "non-xla"  # `attn_impl == 'flash'` (MPT), `attention == "triton"`: CUDA kernels
    if type(test) is cst.Call:
        n = (last_name(test.func) or "").lower()
        if n in ("is_xla_tensor", "is_xla", "is_tpu_available", "is_torch_xla_available", "is_torch_tpu_available", "using_xla"):
            result = "xla"
        elif (n == "is_available" and "cuda" in (dotted_name(test.func) or "")) or n.startswith("is_flash_attn"):
            result = "non-xla"
        elif n in _TRACING_TESTS and (dotted_name(test.func) or "").startswith("torch."):
            result = "non-xla"  # `torch.compiler.is_compiling()`: true only while dynamo traces, not in a lazy XLA step
    elif type(test) in (cst.Name, cst.Attribute):
        n = (last_name(test) or "").lower().lstrip("_")
        if n in ("use_xla", "is_xla", "on_xla", "using_xla", "use_tpu", "on_tpu", "is_tpu", "xla", "tpu"):
            result = "xla"
        elif n in ("use_cuda", "on_cuda", "use_gpu", "on_gpu", "is_cuda") or n in _OTHER_BACKEND_FLAGS or (
                "flash" in (words := set(name_words(n))) and words & {"attn", "attention"}):
            result = "non-xla"  # `self.config._flash_attn_2_enabled`: flash-attn's CUDA kernels
    if result is not None and negate:
        result = "xla" if result == "non-xla" else "non-xla"
    return result


# transformers' attention implementations that run flash-attn's CUDA kernels (`attn_implementation=`), and
# the classes that implement them (`LlamaFlashAttention2`): never XLA code
FLASH_ATTENTION_IMPLEMENTATIONS = frozenset({"flash_attention_2", "flash_attention_3"})
# what an attention setting names when it picks CUDA kernels by a shorter name (MPT's `attn_impl`)
_CUDA_ATTENTION_KERNELS = frozenset({"flash", "flash_attn", "flash_attention", "triton"})


def flash_attention_class(class_key) -> bool:
    """A class named for flash-attn (``MistralFlashAttention2``, ``FlashSelfAttention``): its methods call
    flash-attn's CUDA kernels."""
    return "flashattention" in (class_key or "").rpartition(".")[2].replace("_", "").lower()


def onnx_export_class(class_key) -> bool:
    """A class named for ONNX (``SamOnnxModel``, ``OnnxWrapper``): a wrapper traced once by ``torch.onnx.export``
    and then run by ONNX Runtime, never a pass of the model on XLA."""
    return "onnx" in (class_key or "").rpartition(".")[2].lower()


def first_pass_of(test, loop_stack) -> Optional[int]:
    """The position in ``loop_stack`` of the loop whose first pass only ``test`` lets through (``i == 0``, alone
    or in an ``and``, ``i`` the counter of ``for i in range(...)`` or ``for i, x in enumerate(...)`` counting
    from 0), else None."""
    if type(test) is cst.BooleanOperation:
        if type(test.operator) is not cst.And:
            return None
        left = first_pass_of(test.left, loop_stack)
        return left if left is not None else first_pass_of(test.right, loop_stack)
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 or type(test.comparisons[0].operator) is not cst.Equal:
        return None
    sides = (test.left, test.comparisons[0].comparator)
    if not any(type(x) is cst.Integer and x.value == "0" for x in sides):
        return None
    names = [x.value for x in sides if type(x) is cst.Name]
    if len(names) != 1:
        return None
    for pos in range(len(loop_stack) - 1, -1, -1):
        if _counter_from_zero(loop_stack[pos].node) == names[0]:
            return pos
    return None



def _counter_from_zero(node) -> Optional[str]:
    """The name that counts the passes of ``for`` loop ``node`` from 0: ``for i in range(n)``, ``range(0, n)``,
    ``for i, x in enumerate(xs)``; else None."""
    if type(node) is not cst.For or type(node.iter) is not cst.Call or type(node.iter.func) is not cst.Name:
        return None
    args = node.iter.args
    fn = node.iter.func.value
    if fn == "range" and args and all(a.keyword is None and a.star == "" for a in args) and len(args) <= 2 and (
            len(args) == 1 or (type(args[0].value) is cst.Integer and args[0].value.value == "0")):
        return node.target.value if type(node.target) is cst.Name else None
    if fn == "enumerate" and len(args) == 1 and type(node.target) in (cst.Tuple, cst.List) and node.target.elements:
        first = node.target.elements[0].value
        return first.value if type(first) is cst.Name else None
    return None
