"""How often does it run? Step loops, guards, and the frequency of a node over a call graph.

The walker records, per function, its calls with their contexts, its loops and what they call; this
module decides, over the call graph of one module or of the whole project (``Steps``), which loops are
step loops and how often each context runs: every step, every N steps, or not per step.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

import libcst as cst

from xlalint.semantics import argument_tests
from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics.syntax import name_words

EVERY = 2
PERIODIC = 1
NEVER = 0


# slots (Python 3.10 on): a project's program holds one per function (82,000 on torch + torch_xla); past 30
# attributes an instance's __dict__ no longer shares its keys with the others' (CPython 3.11): 1,584 bytes
# each, not 288
_SLOTS = {"slots": True} if sys.version_info >= (3, 10) else {}


@dataclass(eq=False, **_SLOTS)
class FuncInfo:
    key: str  # in one module: "f", "Cls.m", "f.<locals>.g"; in the project: "pkg.mod:Cls.m"
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
    calls: list = field(default_factory=list)  # (callee key, Ctx)
    sync_points: list = field(default_factory=list)  # (seq, callee key or None, end of its block) outside loops
    sets_up: bool = False  # makes an optimizer, a loader or an accelerator itself: a whole run, not a step
    return_kind: object = K.UNKNOWN
    returns_none_only: bool = False  # every `return` walked so far returns None (`return_kind` NOT_TENSOR)
    top_index: int = 0
    seeds: dict = field(default_factory=dict)  # parameter kinds from its callers, as walked
    module: str = ""  # the module it is defined in (project view)
    path: str = ""  # that module's file, as the user named it
    runs_model: bool = False  # calls a module / model.generate itself, outside its own loops (hot_loops)
    no_grad: bool = False  # decorated with @torch.no_grad() / @torch.inference_mode() (hot_loops)
    periods: dict = field(default_factory=dict)  # names bound to a periodic test: `should_log = step % n == 0`
    polarities: dict = field(default_factory=dict)  # names bound to a device test: `mps = "mps" in device.type`
    # names an evaluation loop of the function bound or filled, and what was computed from them after it
    # (`dev_loss`, `eval_metrics`): read after the loop, the evaluation's result, once per evaluation
    loop_results: set = field(default_factory=set)
    # its own placements: CUDA by a literal on its straight line (`inputs["input_ids"].to("cuda")`), and any on a
    # device chosen at run time (`device_pins.pin_of`): one that only pins CUDA is not XLA code (step_marks._resolve)
    pins_cuda: bool = False
    chooses_device: bool = False
    device_params: set = field(default_factory=set)  # its parameters it places on (`v.to(device)`): a helper's
    places_elsewhere: bool = False  # places on a device chosen otherwise too (`args.device`, a module's `device`)
    excluded: bool = False  # never an XLA training step: a unit test (`Test*` case, tests module), JAX or TF code,
    #                         a checkpoint writer (its host copies are its purpose)
    saves: bool = False  # calls torch.save / save_file / .save_pretrained / ... (a checkpoint writer, walk.py)
    guessed: set = field(default_factory=set)  # `forward` parameters taken for tensors by the rule, still unbound
    yields: Optional[list] = None  # a generator's (item kind, tuple part kinds) per `yield`, as walked
    passes: object = None  # a function returning its arguments: their parts (passthrough), False if not one
    # every `return` gives a tuple of this many items: the kind of each item where all returns agree, else
    # None there (`return hidden, n_img`); False once a return is not a tuple literal of that length
    return_parts: object = None
    # per item of every returned tuple, the index of the parameter it hands back as given, else None
    # (passthrough.handed_back); False once a return is not a tuple
    return_handed: object = None

    def release(self) -> None:
        """Drop what it holds (its syntax, its parent, the contexts of its calls): ``SemanticModel.release``
        breaks the walk's cycles with it."""
        for name in self.__dataclass_fields__:
            setattr(self, name, None)

    @property
    def call_return_kind(self):
        """What a call of it returns: its return kind, or for a function that returns one of its arguments
        a passthrough kind that each call resolves with its own arguments (passthrough.at_call)."""
        if not self.passes:
            return self.return_kind
        return K.passthrough(self.passes, self.return_kind if any(how == 2 for _, _, how in self.passes) else None)


@dataclass(eq=False)
class LoopInfo:
    node: Optional[cst.CSTNode]
    func: FuncInfo
    iterates_loader: bool = False
    direct_step_call: bool = False
    trains: bool = False  # its own body calls backward() or an optimizer step (not just a sync)
    cond_depth: int = 0
    calls: list = field(default_factory=list)  # callee keys called in this loop's own body
    sync_points: list = field(default_factory=list)  # (seq, callee key or None, last seq of its block)
    top_index: int = 0
    runs_model: bool = False  # its own body calls a module / model.generate (a hot loop: hot_loops)
    hint: Optional[str] = None  # what its words say it is: hot_loops.DECODE / EVAL / ROLLOUT, or None
    outer: Optional["LoopInfo"] = None  # the loop of the same function it is nested in
    seq: int = 0  # the walk's statement counter at its header (order within its function)
    end_seq: int = 0  # and after its body: a context of the function with seq > end_seq runs after it
    guard_depth: int = 0  # the guards open at its header (a period guard among them is outside the loop)
    off_xla: bool = False  # one of those guards says it never runs on XLA (a GPU actor's method, `if use_cuda:`)
    few: bool = False  # it goes over a list, tuple or set written out (`for p in [prompt, negative]:`)
    # its own body opens `with torch.no_grad():` (the walk sets it): a step loop that also trains nothing
    # (`loop_trains`) is an inference pass, "every evaluation batch" (`hot_kind`)
    infers: bool = False
    every_calls: list = field(default_factory=list)  # the callees of `calls` its body calls outside any `if`
    # a `while` whose test measures a tensor its body rebinds (`while prefix.shape[1] < T:`): over positions
    over_positions: bool = False


@dataclass(frozen=True, eq=False)
class Ctx:
    """Where a node sits: resolved into a frequency once the calls of every module are known."""

    func: FuncInfo
    loops: tuple
    period: Optional[str]
    non_xla: bool  # under a non-XLA guard (`if device.type != "xla":`)
    closure: bool
    seq: int
    error_path: bool = False  # a `raise` or an assert message: runs only when something is wrong
    once: bool = False  # under `if step == 0:` / `if step == last:` / `if step >= max: break`: not every step
    line: int = 0  # for a call site into another module: its line (the path shown in messages)
    eval_only: bool = False  # under `if not self.training:` / `if stage != Stage.TRAIN:`: evaluation steps only
    # the period guard is outside the innermost loop: `if step % eval_every == 0: for batch in val_loader:`
    # runs the loop every N steps, and each of its batches (not every N batches)
    period_outside: bool = False
    # the tests of its function's parameters it runs under (`if loss_type == "diou":`), and at a call site what
    # the call passes (None: not a call site): argument_tests
    tests: tuple = ()
    args: Optional[tuple] = None


@dataclass(frozen=True)
class Frequency:
    level: int  # EVERY, PERIODIC or NEVER
    period: Optional[str] = None
    after_sync: bool = False
    loop: Optional[LoopInfo] = None  # the step loop that makes it per-step, when known
    via: tuple = ()  # the call sites (Ctx) through which it runs, innermost first
    hot: Optional[str] = None  # the kind of hot loop that makes it per-step (hot_loops), None: a step
    within: Optional[str] = None  # a hot loop's function runs every N steps: N (an evaluation every N steps)

    @property
    def per_step(self) -> bool:
        return self.level > NEVER

    def describe(self, module: Optional[str] = None) -> str:
        text = H.when_text(self.hot, self.period if self.level == PERIODIC and not self.within else None)
        if text is not None and self.within:
            text = "{} (the loop runs every {} {})".format(text, *H.period_parts(self.within))
        if text is None and self.level == PERIODIC and self.period:
            n, unit = H.period_parts(self.period)
            text = f"every {n} steps" if unit == "steps" else f"every step of every {n}th epoch"
        elif text is None:
            text = "every step"
        path = self.path_from(module)
        return f"{text} ({path})" if path else text

    def path_from(self, module: Optional[str]) -> str:
        """``called from train.py:88 (step loop)`` when a call from another module makes it per-step."""
        if module is None or not any(c.func.module != module for c in self.via):
            return ""
        hops = []
        for c in self.via:
            if c.func.module != module and c.line:
                hops.append(f"{c.func.path}:{c.line}")
            module = c.func.module
        if not hops:
            return ""
        last = self.via[-1]
        if any(lp is self.loop for lp in last.loops):
            where = "in the step loop" if self.hot is None else "in the loop"
        elif last.func.root:
            hot = H.root_hot(last.func.name, last.func.no_grad, last.func.class_key)
            where = f"in `{last.func.name}()`, which runs {H.when_text(hot, None) if hot else 'every step'}"
        else:
            where = f"in `{last.func.name}()`"
        return "called from " + " <- ".join(hops) + " " + where


NOT_PER_STEP = Frequency(NEVER)


def is_test_module(module: str) -> bool:
    """A module of unit tests, by pytest's names: ``test_*``, ``*_test`` or ``conftest``. Its loops compare
    runs and its modules are toys: neither is a training step. (A folder named ``tests`` is not enough: it
    also holds small training programs run as integration tests.)"""
    last = module.rpartition(".")[2]
    return last.startswith("test_") or last.endswith("_test") or last == "conftest"


# the names of the folders that hold a project's tests
_TEST_FOLDERS = frozenset({"test", "tests", "testing"})


def test_helpers(modules, test_modules) -> set:
    """Modules in a test folder (a package named ``test``/``tests``/``testing`` on their path) that sit
    beside test modules (``is_test_module``) of the same package: ``tests/moe/environment_setup.py`` and
    ``tests/moe/device_correctness_test_runner.py`` beside ``tests/moe/test_routing.py``, a reference model
    ``tests/unit/mixtral_model.py`` beside ``tests/unit/test_mixtral.py``. A training program alone in a test
    folder (an integration test's script, a linter's fixtures) is not one: no test module beside it."""
    beside = {t.rpartition(".")[0] for t in test_modules}
    return {m for m in modules if m not in test_modules and m.rpartition(".")[0] in beside
            and _TEST_FOLDERS & set(m.split(".")[:-1])}


class Steps:
    """Which loops are step loops, and how often each context runs, over a call graph: one module's
    (the walker's, for the rules that decide in the file) or the whole project's.

    ``targets(callee)`` names the functions a call may run: itself, and for a method also the
    overrides in subclasses (a base class's ``fit()`` calling ``self.training_step()``).
    """

    def __init__(self, funcs: dict, loops: list, tops: list, targets: Optional[Callable] = None):
        self.funcs = funcs
        self.loops = loops
        self.tops = tops
        self._targets = targets
        self._does_step: dict = {}
        self._runs_model: dict = {}
        self._whole_memo: dict = {}
        self._trains: dict = {}
        self._whole_loops: dict = {}  # function key -> it runs a whole non-training loop of the model (runs_whole_loop)
        self._freq: dict = {}
        self._callers: Optional[dict] = None
        self._via_callback: set = set()  # (id(ctx), target key): the call runs one of the callbacks passed
        self._loops_of: dict = {}
        self._inner: dict = {}  # id(loop) -> the loops nested directly in it
        self._step_loop: dict = {}
        for lp in loops:
            self._loops_of.setdefault(id(lp.func), []).append(lp)
            if lp.outer is not None:
                self._inner.setdefault(id(lp.outer), []).append(lp)

    def targets(self, callee: str) -> list:
        if self._targets is None:
            return [callee] if callee in self.funcs else []
        return self._targets(callee)

    def does_step(self, key: str) -> bool:
        """The function performs a training step itself (outside any loop of its own)."""
        memo = self._does_step
        if key in memo:
            return memo[key]
        f = self.funcs.get(key)
        if f is None or f.sets_up:
            return False
        memo[key] = False  # cycle guard
        # a function that runs a step loop of its own (train_one_epoch) is not one step for its caller
        result = (f.step_call_outside_loops or any(
            not ctx.loops and any(self.does_step(t) for t in self.targets(callee)) for callee, ctx in f.calls
        )) and not any(self.is_step_loop(lp) for lp in self._loops_of.get(id(f), ()))
        memo[key] = result
        return result

    def is_step_loop(self, loop: LoopInfo) -> bool:
        memo = self._step_loop
        if loop.func.excluded:
            return False  # a unit test's loop over cases or runs: not training
        if id(loop) not in memo:
            memo[id(loop)] = False  # cycle guard
            memo[id(loop)] = (loop.iterates_loader or loop.direct_step_call or any(
                self.does_step(t) for c in loop.calls for t in self.targets(c))) and not (
                # an epoch loop: its steps are an inner loop's; a checkpoint or an evaluation it calls
                # once per epoch may sync, but its own body does not train
                not loop.trains and any(self.is_step_loop(lp) for lp in self._inner.get(id(loop), ())))
        return memo[id(loop)]

    def repeats_every_step(self, loop: LoopInfo) -> bool:
        """A step loop in a function that itself runs every step (a micro-batch loop in a framework's
        ``train_batch``, a gradient-accumulation loop in a ``training_step``; a function named for one step or
        batch is one, whoever calls it): its counter goes over the same
        values on every call, so the graphs those values make are compiled on the first step and found in
        the cache after; they do not change from step to step."""
        f = loop.func
        if f.name == "<module>":
            return False
        words = name_words(f.name)
        # `train_batch`, `training_step`, `fit_batch`: named for one step, whoever calls it
        return (bool(words) and words[-1] in ("step", "batch")) or self.function_frequency(f).per_step

    def runs_model(self, key: str) -> bool:
        """One call of the function runs the model once: it calls a module outside its own loops, or a
        function that does (a function that loops over batches is a whole evaluation, not one pass)."""
        memo = self._runs_model
        if key in memo:
            return memo[key]
        f = self.funcs.get(key)
        if f is None or f.sets_up:  # builds a model and its optimizer: a whole run (a sweep), not one pass
            return False
        memo[key] = False  # cycle guard
        result = not self._whole(key) and (f.runs_model or any(
            not ctx.loops and any(self.runs_model(t) for t in self.targets(callee)) for callee, ctx in f.calls))
        memo[key] = result
        return result

    def _whole(self, key: str) -> bool:
        """One call of the function is a whole decode, evaluation or run: it has a hot loop or a step loop
        of its own, or sets a run up or loads a model (itself or in what it calls outside its loops). A loop calling it (over prompts, over
        epochs) is not hot: what the call costs once is not a per-step cost."""
        return self._through_calls(self._whole_memo, key, lambda f: f.sets_up or any(
            self.is_step_loop(lp) or self.is_hot_loop(lp) for lp in self._loops_of.get(id(f), ())))

    def is_hot_loop(self, loop: LoopInfo) -> bool:
        """The loop runs the model on every iteration (a decoding, evaluation or rollout loop). Not one whose
        every iteration also runs a whole decode or sampling (a function with a hot loop of its own), unless it
        goes over a loader's batches (a call under an `if` is not every iteration's): an iteration is a whole run, and what it reads once per run (the
        generated batch's features, gathered to the host beside the images) is not a per-step cost, as for a
        loop calling `model.generate()` per prompt. A decoding loop itself (``while prefix.shape[1] < T:`` in
        a sampler) that drafts a few tokens per round through such a function is hot: a round is a step."""
        if loop.func.excluded:
            return False
        whole = any(self._whole(t) for c in loop.every_calls for t in self.targets(c))
        if whole and loop.hint == H.DECODE and loop.over_positions:
            return True  # a loop over positions whose every round drafts a few tokens (speculative decoding)
        if not (loop.runs_model or any(self.runs_model(t) for c in loop.calls for t in self.targets(c))):
            return False
        return loop.iterates_loader or not whole

    def _trains_key(self, key: str) -> bool:
        return self._through_calls(self._trains, key, lambda f: f.trains_outside_loops)

    def _through_calls(self, memo: dict, key: str, own) -> bool:
        """``own(f)`` holds for the function or for one it calls outside its own loops (memoized in
        ``memo``, False on a cycle)."""
        if key in memo:
            return memo[key]
        f = self.funcs.get(key)
        if f is None:
            return False
        memo[key] = False  # cycle guard
        result = own(f) or any(not ctx.loops and any(self._through_calls(memo, t, own) for t in self.targets(callee))
                               for callee, ctx in f.calls)
        memo[key] = result
        return result

    def loop_trains(self, loop: LoopInfo) -> bool:
        """The loop's body runs backward() or an optimizer step, itself or through what it calls."""
        return loop.trains or any(self._trains_key(t) for c in loop.calls for t in self.targets(c))

    def hot_kind(self, loop: LoopInfo, step_loop: bool) -> Optional[str]:
        """The kind of hot loop to name in messages: None for a training step loop ("every step")."""
        if step_loop:
            hint = loop.hint or (H.EVAL if loop.infers else None)  # an inference pass over a loader
            return hint if hint is not None and not self.loop_trains(loop) else None
        return loop.hint or H.MODEL_LOOP

    def syncs(self, callee: str) -> bool:
        """The helper ends the step itself (calls ``torch_xla.sync()`` outside its own loops)."""
        ts = self.targets(callee)
        return bool(ts) and all(self.funcs[t].barrier_outside_loops for t in ts)

    def frequency(self, ctx: Ctx, passer: Optional[str] = None) -> Frequency:
        """How often ``ctx`` runs. ``passer``: reached through a callback that only this function can pass
        (``function_frequency``)."""
        if ctx.closure or ctx.non_xla or ctx.error_path or ctx.once or ctx.func.closure or ctx.func.excluded:
            return NOT_PER_STEP
        loops = [lp for lp in ctx.loops if not self.before_training(lp)]
        ff = None
        for loop in reversed(loops):  # the innermost step loop in this function
            if self.is_step_loop(loop):
                if not self.loop_trains(loop):
                    ff = self.function_frequency(ctx.func, passer, ctx.tests)
                    if ff.level == PERIODIC and ff.hot is None:
                        # `for x, y in loader: total += loss_of(x, y).item()` in a function run every N
                        # steps (an evaluation): its loop does not train, so it is an evaluation loop
                        # inside the training, not the training's own step loop
                        break
                return self._in_loop(ctx, loop, self.hot_kind(loop, True))
        ff = ff or self.function_frequency(ctx.func, passer, ctx.tests)
        if not ff.per_step:
            for loop in reversed(loops):  # else the innermost hot loop (decoding, evaluation, ...)
                if self.is_hot_loop(loop):
                    return self._in_loop(ctx, loop, self.hot_kind(loop, False))
            return NOT_PER_STEP
        if len(loops) < len(ctx.loops):
            return NOT_PER_STEP  # in a loop before training, in a function that runs per step (rare)
        if ff.hot is None and ff.level == PERIODIC and not ctx.period:
            for loop in reversed(loops):  # `losses[k] = loss.item()` in estimate_loss()'s loop, every N steps
                if self.is_hot_loop(loop):
                    after = self._after_sync(ctx, loop.sync_points)
                    # a loop that runs the model without training, in a function run every N steps: an evaluation
                    hot = loop.hint or (H.EVAL if not self.loop_trains(loop) else H.MODEL_LOOP)
                    return Frequency(PERIODIC, ff.period, after, loop, ff.via, hot, ff.period)
        after = ff.after_sync or self._after_sync(ctx, ctx.func.sync_points)  # the step's body ends it
        if ff.level == PERIODIC and ff.hot is None and self._after_whole_loop(ctx):
            # `return total.item()` after an evaluation's loop, `fid.item()` after `compute_features(...)` ran
            # one: once per evaluation, at its end (not in a loop of its own after it: `for name in metrics:
            # gather(...).item()` after a rollout reads once per metric, as the training's rollouts go)
            after = True
        if ctx.eval_only and ff.hot is None:  # a branch taken only when evaluating: every evaluation batch
            return Frequency(PERIODIC if ctx.period else ff.level, ctx.period or ff.period, after, ff.loop, ff.via,
                             H.EVAL)
        if ctx.period or after != ff.after_sync:
            return Frequency(PERIODIC if ctx.period else ff.level, ctx.period or ff.period, after, ff.loop, ff.via,
                             ff.hot, None if ctx.period else ff.within)
        return ff

    def before_training(self, loop: LoopInfo) -> bool:
        """A loop of a function's own body (not nested in another of its loops) that does not train, followed
        in the same function by the loop that trains: work done once before training (generating class
        images, caching embeddings, a baseline evaluation), not per step; and a loop nested in one
        (`for prompt in prompts: for p in (prompt, negative): cache[p] = encode(p)`) over a few items written out
        (not a loader's batches: a preprocessing pass over a dataset, per split, costs what it reads per batch)."""
        if loop.outer is not None and not loop.few:
            return False
        while loop.outer is not None:
            loop = loop.outer
        if not loop.end_seq or self.loop_trains(loop):
            return False
        return any(lp.seq > loop.end_seq and self.is_step_loop(lp) and self.loop_trains(lp)
                   for lp in self._loops_of.get(id(loop.func), ()))

    def _after_whole_loop(self, ctx: Ctx) -> bool:
        """``ctx`` comes after a whole loop of its function, in a function run every N steps (an evaluation, a
        report): what the function computed over the loop is read once, at its end. The loop is one of the
        function's own (not nested in another) or a call that runs one (``compute_features(...)``); inside a
        loop, only a loop nested in that same loop counts (an evaluation per sweep value: what follows it in
        the same pass), and a loop of its own after it does not (``for name in metrics: ....item()``)."""
        own = self._loops_of.get(id(ctx.func), ())
        if ctx.loops:
            inner = ctx.loops[-1]
            return any(lp.outer is inner and lp.end_seq and ctx.seq > lp.end_seq for lp in own)
        return any(lp.outer is None and lp.end_seq and ctx.seq > lp.end_seq for lp in own) or any(
            callee is not None and seq < ctx.seq and (until is None or ctx.seq <= until) and self.runs_whole_loop(callee)
            for seq, callee, until in ctx.func.sync_points)

    def _in_loop(self, ctx: Ctx, loop: LoopInfo, hot: Optional[str]) -> Frequency:
        after = self._after_sync(ctx, loop.sync_points)
        if ctx.eval_only and hot is None:
            hot = H.EVAL
        within = ctx.period if ctx.period_outside and hot is not None and loop is ctx.loops[-1] else None
        return Frequency(PERIODIC if ctx.period else EVERY, ctx.period, after, loop, hot=hot, within=within)

    def computed_by_a_barrier(self, ctx: Ctx, no_new_ops: bool) -> bool:
        """A value assigned at ``ctx`` (outside loops) is computed by the time its function returns: a barrier of
        the function's own body follows the assignment, or one precedes it and the value adds no operation
        (``xm.mark_step()`` then ``self.loss = loss.detach()``)."""
        if ctx.loops:
            return False
        if any(seq > ctx.seq and callee is None for seq, callee, _until in ctx.func.sync_points):
            return True
        return no_new_ops and self.frequency(ctx).after_sync

    def _after_sync(self, ctx: Ctx, points) -> bool:
        """A barrier (or a helper that ends the step) runs before ``ctx`` in a block that holds it; in a
        periodic block, a call that runs a whole loop of the model (an evaluation) ends it too, and in the same
        statement its own result is read once, at its end (``log.append(distortion(model, dev).item())``)."""
        # (not at a call site: a call in the statement is not after itself, nor are the callee's lines)
        same = ctx.period is not None and ctx.args is None
        return any((seq < ctx.seq or (seq == ctx.seq and callee is not None and same))
                   and (until is None or ctx.seq <= until)
                   and (callee is None or self.syncs(callee) or (ctx.period is not None and self.runs_whole_loop(callee)))
                   for seq, callee, until in points)

    def runs_whole_loop(self, callee: str) -> bool:
        """The helper runs a whole loop of the model that does not train (an evaluation over a loader, a
        decode): in a periodic block of the step loop (`if step % eval_every == 0:`), what follows the call
        reads the evaluation's result once, at its end, as the fix for a read inside such a loop says to
        (`val_loss = validate(...)`; `print(val_loss.item())`). Not in a hot loop of its own: after a
        window's decode, new model runs and their reads follow (whisper's word timestamps)."""
        ts = self.targets(callee)
        return bool(ts) and all(self._through_calls(self._whole_loops, t, self._owns_whole_loop) for t in ts)

    def _owns_whole_loop(self, f: FuncInfo) -> bool:
        # a loop of the model, or a loop of whole loops (`compute_features`: a sampling run per batch; of a
        # callback's targets, the one this caller passes is not known here: one of them is enough)
        return any(lp.outer is None and not self.loop_trains(lp)
                   and (self.is_hot_loop(lp) or any(self._through_calls(self._whole_loops, t, self._owns_whole_loop)
                                                    for c in lp.calls for t in self.targets(c)))
                   for lp in self._loops_of.get(id(f), ()))

    def callers(self) -> dict:
        """callee key -> [ctx of each call site] over every function and module body."""
        if self._callers is None:
            out: dict = {}
            for caller in list(self.funcs.values()) + list(self.tops):
                for callee, ctx in caller.calls:
                    for t in self.targets(callee):
                        out.setdefault(t, []).append(ctx)
                        if H.CALLABLE_PREFIX in callee:
                            self._via_callback.add((id(ctx), t))
            self._callers = out
        return self._callers

    def function_frequency(self, f: FuncInfo, passer: Optional[str] = None, tests: tuple = ()) -> Frequency:
        """How often a call of ``f`` runs: the most often of its call sites. ``passer``: ``f`` runs here as
        a callback, and only that function (the one it is local to) can have passed it, so only its own call
        sites of ``f`` count (`compute_features(sample_fn, ...)` called by a training script and by a
        sampling script, each with its own `sample_fn`), where it calls ``f`` itself. ``tests``: asked for a
        line under tests of ``f``'s parameters, so only the call sites whose arguments may pass them count
        (``argument_tests``: `_loss(..., box_reg_loss_type="giou")` never runs its `"diou"` branch)."""
        callers = self.callers().get(f.key, ())
        if passer is not None:
            own = [c for c in callers if c.func.key == passer or c.func.key.startswith(passer + ".<locals>.")]
            callers, passer = (own, passer) if own else (callers, None)
        if tests:
            callers = [c for c in callers if argument_tests.compatible(tests, c.args)]
        cache = self._freq
        key = (f.key, passer, tests) if tests else f.key if passer is None else (f.key, passer)
        if key in cache:
            return cache[key]
        if f.closure or f.excluded:
            return NOT_PER_STEP
        if f.root:
            # a module's `forward` under `@torch.no_grad()` never trains: it runs per evaluation or
            # inference batch (a post-processor, a frozen teacher), not necessarily every training step;
            # `validation_step` runs every evaluation batch
            cache[key] = Frequency(EVERY, hot=H.root_hot(f.name, f.no_grad, f.class_key))
            return cache[key]
        cache[key] = NOT_PER_STEP  # cycle guard
        best, best_ctx = NOT_PER_STEP, None
        all_after = True
        any_site = False
        for ctx in callers:
            local = (id(ctx), f.key) in self._via_callback and ".<locals>." in f.key
            fr = self.frequency(ctx, f.key.rsplit(".<locals>.", 1)[0] if local else None)
            if not fr.per_step:
                continue
            if fr.hot is not None and ((f.name in H.WHOLE_DECODE_FUNCTIONS and self._loops_of.get(id(f)))
                                       or self._whole(f.key)):
                # generate() called per prompt: its own loops say how often its parts run (not a loopless
                # `sample(probs)` that draws one token)
                continue
            any_site = True
            all_after = all_after and fr.after_sync
            if fr.level > best.level or (fr.level == best.level and best.hot is not None and fr.hot is None):
                best, best_ctx = fr, ctx  # the most often; of as often, a training step's path before a hot loop's
        if any_site:
            best = Frequency(best.level, best.period, all_after, best.loop, (best_ctx,) + best.via, best.hot, best.within)
        cache[key] = best
        return best


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
