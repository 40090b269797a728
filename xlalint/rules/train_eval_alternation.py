"""XLA004 train-eval-alternation: ``model.eval()`` reached inside a training step loop."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.rules import Rule, set_parts
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.mode_use import NO_FORWARD_CALLS, eval_mode_unused
from xlalint.semantics.steps import EVERY, PERIODIC, Frequency
from xlalint.semantics.syntax import child_nodes, last_name, name_words, own_nodes, positional_args

FIX = (
    "evaluate between epochs or after the step loop; if it must run every N steps, keep it one graph "
    "(one fixed eval batch shape, `drop_last=True`, under `torch.no_grad()`) and expect its compile at "
    "the first evaluation"
)


class TrainEvalAlternation(Rule):
    code = "XLA004"
    name = "train-eval-alternation"
    summary = "`model.eval()` runs inside the training step loop: the eval graphs compile in the middle of training."
    what_it_does = """
        Flags `model.eval()` (or `model.train(False)`) when one step loop reaches both it and
        `model.train()`, directly or through the functions it calls: an `evaluate()` every N steps,
        nanoGPT's `estimate_loss()` every `eval_interval`. The finding is at the `eval()` call (in the
        helper when that is where it is) and says how often it runs ("every N steps" under
        `if step % N == 0:`). Not flagged: evaluation after the training loop, or between epochs
        outside the step loop (an epoch loop that calls `train_one_epoch()` and then `evaluate()` is
        not a step loop), an evaluation loop that never switches back to `train()`, a one-off
        evaluation under `if step == last_step:`, and an `eval()` that nothing runs the model after
        before the next step's `train()` (U-ViT ends each step with `nnet.eval()` and samples with
        its EMA copy: no eval graph of `nnet` is ever built; a model handed in by a caller counts).
    """
    why_slow = """
        In eval mode dropout and batch norm lower to different ops and there is no backward pass, so
        the evaluation is a different XLA graph from the training step. Measured on torch_xla 2.9
        with BatchNorm + Dropout switching every step: one extra compile per distinct eval graph, then
        cached (switching back and forth does not recompile each time). The cost is the compile of
        every distinct eval graph (each eval batch shape is another one) in the middle of training,
        plus the host reads the evaluation usually does.
    """
    example = """
        for step, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y)
            loss.backward()
            xm.optimizer_step(optimizer)
            if step % 500 == 0:
                model.eval()            # XLA004: every 500 steps
                val = evaluate(model, val_loader)
                model.train()
    """
    use_instead = """
        for epoch in range(epochs):
            model.train()
            for step, (x, y) in enumerate(loader):
                ...
            model.eval()                # once per epoch, outside the step loop
            val = evaluate(model, val_loader)
    """
    known_problems = """
        Calls are followed across the project's modules (`self.evaluate()`, imported functions,
        methods of objects of project classes), not through `getattr` or dynamic imports. A
        conditional evaluation whose condition is not `step % N == 0` is reported as running inside
        the step loop without a period.
    """
    verify = """
        `UncachedCompile` rises again after warm-up at the first evaluation (one per distinct eval
        graph), then stays flat: `--verify` reports the extra compiles and the step they happen at.
    """
    VALID = [
        # evaluation between epochs, outside the step loop
        "import torch\nfor epoch in range(3):\n    model.train()\n    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n    model.eval()\n    evaluate(model)\n",
        # an epoch loop calling train_one_epoch (which holds the step loop) and evaluate
        "import torch\ndef train_one_epoch(model, loader):\n    model.train()\n    for x in loader:\n        model(x).sum().backward()\n        optimizer.step()\ndef evaluate(model):\n    model.eval()\n    return 0\nfor epoch in range(3):\n    train_one_epoch(model, loader)\n    evaluate(model)\n",
        # an evaluation loop that never trains
        "import torch\nfor x in val_loader:\n    model.eval()\n    out = model(x)\n",
        # a teacher always in eval mode next to a student in train mode: no switch
        "import torch\nfor x in loader:\n    student.train()\n    teacher.eval()\n    loss = (student(x) - teacher(x)).pow(2).mean()\n    loss.backward()\n    optimizer.step()\n",
        # eval mode only around a checkpoint write: no forward runs in it (baby-llama2's pretraining loop)
        "import torch\nfor step, x in enumerate(loader):\n    model.train()\n    model(x).sum().backward()\n    optimizer.step()\n    if step % 1000 == 0:\n        model.eval()\n        torch.save(model.state_dict(), 'ckpt_{}.pth'.format(step))\n        model.train()\n",
        # an evaluation loop (called once per epoch) that switches back to train() after each batch: it trains nothing
        "import torch\ndef evaluate_accuracy(data_iter, net, device):\n    acc = 0.0\n    with torch.no_grad():\n        for X, y in data_iter:\n            net.eval()\n            acc += (net(X.to(device)).argmax(dim=1) == y.to(device)).float().sum()\n            net.train()\n    return acc\n",
        # the step ends in eval mode and the next starts with train(): in between only the EMA copy samples (U-ViT)
        "import torch\ndef train(loader):\n    nnet, ema = Net(), Net()\n    score = Wrapper(nnet)\n    opt = torch.optim.Adam(nnet.parameters())\n    for step, x in enumerate(loader):\n        nnet.train()\n        score(x).sum().backward()\n        opt.step()\n        nnet.eval()\n        if step % 100 == 0:\n            sample(Wrapper(ema), x)\n",
        # one evaluation at the last step
        "import torch\nfor step, x in enumerate(loader):\n    model.train()\n    model(x).sum().backward()\n    optimizer.step()\n    if step == total_steps - 1:\n        model.eval()\n",
    ]
    INVALID = [
        # the same, sampling with a wrapper of the trained model itself; and the model handed in by the caller
        "import torch\ndef train(loader):\n    nnet, ema = Net(), Net()\n    score = Wrapper(nnet)\n    opt = torch.optim.Adam(nnet.parameters())\n    for step, x in enumerate(loader):\n        nnet.train()\n        score(x).sum().backward()\n        opt.step()\n        nnet.eval()\n        if step % 100 == 0:\n            sample(score, x)\n",
        "import torch\ndef train(nnet, ema, loader, opt):\n    for step, x in enumerate(loader):\n        nnet.train()\n        nnet(x).sum().backward()\n        opt.step()\n        nnet.eval()\n        if step % 100 == 0:\n            sample(ema, x)\n",
        "import torch\nfor step, (x, y) in enumerate(loader):\n    model.train()\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n    if step % 100 == 0:\n        model.eval()\n        val = model(y)\n",
        "import torch\ndef validate(model):\n    model.train(False)\n    out = model(val_x)\n    model.train()\n    return out\nfor step, x in enumerate(loader):\n    model(x).sum().backward()\n    optimizer.step()\n    if step % 50 == 0:\n        validate(model)\n",
    ]

    decides_in_project = True

    def __init__(self) -> None:
        super().__init__()
        self._modes: list = []  # (is_eval, ctx, candidate or None, call text, receiver text)

    def before_rewalk(self) -> None:
        self._modes = [r for r in self._modes if r[2] is None or r[2] in self.model.candidates]

    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value not in ("eval", "train"):
            return
        is_eval = _mode(node)
        if is_eval is None or not _is_model(m, func.value):
            return
        cand = None
        if is_eval:
            if m.loop_stack and eval_mode_unused(
                    m.func.node if m.func is not m.top else m.module, m.loop_stack[-1].node, node,
                    lambda name: _may_be_module(m, name)):
                return  # `nnet.eval()` ends the step and `nnet.train()` starts the next: it never runs in eval mode
            self.report(node, "", when="custom")
            cand = m.candidates[-1]
        self._modes.append((is_eval, m.step_context(), cand, _code(node), _code_name(func.value)))

    def export(self, ctx_id, cand_id):
        if not self._modes or not self.model.imports_torch:
            return None
        out = []
        # only the functions (or the module) where an eval() is: their blocks
        roots = {id(r[1].func): r[1].func.node or self.model.module for r in self._modes if r[0]}
        brackets = _brackets_only(roots.values())
        for is_eval, ctx, cand, call, recv in self._modes:
            ci = cand_id(cand) if cand is not None else None
            if is_eval and ci is None:
                continue  # suppressed by a noqa
            if is_eval and id(cand.node) in brackets:
                continue  # `model.eval(); torch.save(model.state_dict(), path); model.train()`: no eval forward
            out.append([is_eval, ctx_id(ctx), ci, call, recv])
        return out

    @classmethod
    def resolve_project(cls, program, data: dict, cands: dict) -> None:
        """A step loop (in any module) that reaches both `m.train()` and `m.eval()` of one model,
        directly or through the functions it calls (in any module)."""
        steps = program.steps
        by_func: dict = {}
        for mod, modes in data.items():
            ctxs = program.ctxs[mod]
            for is_eval, ci, cand_i, call, recv in modes:
                ctx = ctxs[ci]
                cand = cands[mod][cand_i] if cand_i is not None else None
                by_func.setdefault(id(ctx.func), []).append((is_eval, ctx, cand, call, recv))
        if not by_func:
            return
        memo: dict = {}

        def reach(f, stack) -> list:
            """Mode calls reachable by calling ``f``: (record, period, via)."""
            if id(f) in memo:
                return memo[id(f)]
            if id(f) in stack:
                return []
            stack = stack | {id(f)}
            out = [(r, r[1].period, None) for r in by_func.get(id(f), ()) if not _skipped(r[1])]
            for callee, ctx in f.calls:
                if _skipped(ctx):
                    continue
                for t in program.targets(callee):
                    out += [(r, ctx.period or p, via) for r, p, via in reach(program.funcs[t], stack)]
            memo[id(f)] = out
            return out

        found: dict = {}  # id(candidate) -> (candidate, period, via, call, recv, hook or None)
        for loop in program.loops:
            if not steps.is_step_loop(loop) or not steps.loop_trains(loop):
                # an evaluation loop that puts the model back in train mode after each batch (`net.eval()`, the
                # forward, `net.train()`) runs no forward in train mode: one eval graph, compiled once
                continue
            f = loop.func
            items = []
            for r in by_func.get(id(f), ()):
                if any(lp is loop for lp in r[1].loops) and not _skipped(r[1]):
                    items.append((r, r[1].period, None))
            for callee, ctx in f.calls:
                if not any(lp is loop for lp in ctx.loops) or _skipped(ctx):
                    continue
                for t in program.targets(callee):
                    name = program.funcs[t].name
                    items += [(r, ctx.period or p, name) for r, p, _ in reach(program.funcs[t], frozenset())]
            _switches(items, found, None)
        for f in program.funcs.values():  # a per-step hook (a callback) that switches modes itself
            if not f.root or f.closure or not reach(f, frozenset()):
                continue
            items = [(r, r[1].period, None) for r in by_func.get(id(f), ()) if not _skipped(r[1])]
            for callee, ctx in f.calls:
                if not _skipped(ctx):
                    for t in program.targets(callee):
                        items += [(r, ctx.period or p, program.funcs[t].name) for r, p, _ in reach(program.funcs[t], frozenset())]
            direct = {_model_key(r[4]) for r, _, via in items if r[0] and via is None}
            # the hook's own eval() is the finding; the same model's eval() in what it calls is the same switch
            _switches([x for x in items if x[2] is None or not x[0][0] or _model_key(x[0][4]) not in direct], found, f.name)
        for cand, period, via, call, recv, hook in found.values():
            freq = Frequency(PERIODIC, period) if period else Frequency(EVERY)
            how = " {when}" if period else ""
            through = f" (through `{via}()`)" if via else ""
            cand.frequency = freq
            where = "inside the training step loop" if hook is None else f"in `{hook}()` (a per-step hook)"
            set_parts(
                cand,
                message=f"`{call}` runs {where}{how}{through}, which also runs `{recv}.train()`",
                cost=(
                    "the eval forward is a different graph: each distinct eval graph compiles once more in the "
                    "middle of training (measured: one extra compile per distinct eval graph, then cached; no "
                    "recompile per switch)"
                ),
                fix=FIX,
            )


def _switches(items: list, found: dict, hook) -> None:
    """Record the eval() calls among ``items`` (reached every step) whose model is also trained there."""
    trained = {_model_key(r[4]) for r, _, _ in items if not r[0]}
    for r, period, via in items:
        if not r[0] or r[2] is None or _model_key(r[4]) not in trained:
            continue  # a teacher kept in eval mode next to a student in train mode never switches
        prev = found.get(id(r[2]))
        if prev is None or (prev[1] is None and period is not None):
            if prev is None or prev[5] is not None or hook is None:
                found[id(r[2])] = (r[2], period, via, r[3], r[4], hook)


def _brackets_only(roots) -> set:
    """ids of the ``X.eval()`` calls under ``roots`` that only bracket a checkpoint write: the statements after it
    in its block up to ``X.train()`` call nothing but saving, formatting and logging (baby-llama2's `model.eval();
    torch.save(...); model.train()`): no forward runs in eval mode, so no eval graph compiles."""
    out = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        body = getattr(n, "body", None)
        if isinstance(body, (list, tuple)) and body and isinstance(body[0], cst.BaseStatement):
            _bracketing_evals(body, out)
        stack.extend(child_nodes(n))
    return out


def _bracketing_evals(stmts, out: set) -> None:
    for i, st in enumerate(stmts):
        call = _mode_call(st)
        if call is None or _mode(call) is not True:
            continue
        recv = _code_name(call.func.value)
        for later in stmts[i + 1:]:
            c = _mode_call(later)
            if c is not None and _mode(c) is False and _code_name(c.func.value) == recv:
                out.add(id(call))
                break
            if any(type(x) is cst.Call and last_name(x.func) not in NO_FORWARD_CALLS for x in (later, *own_nodes(later))):
                break


def _mode_call(st) -> Optional[cst.Call]:
    """The ``X.eval()`` / ``X.train(...)`` call a statement is, alone."""
    if type(st) is not cst.SimpleStatementLine or len(st.body) != 1 or type(st.body[0]) is not cst.Expr:
        return None
    call = st.body[0].value
    if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value in ("eval", "train"):
        return call
    return None


def _skipped(ctx) -> bool:
    """Not reached every step on XLA: a step closure, a non-XLA path, code that runs once (the model's context),
    a function that is never an XLA step (a unit test, a module hard-wired to CUDA: ``FuncInfo.excluded``)."""
    return ctx.closure or ctx.non_xla or ctx.once or ctx.error_path or ctx.func.excluded


def _mode(node: cst.Call) -> Optional[bool]:
    """True for eval(), False for train(), None when the mode is not a literal."""
    meth = node.func.attr.value
    args = positional_args(node)
    kw = [a for a in node.args if a.keyword is not None]
    if meth == "eval":
        return True if not node.args else None
    if not node.args:
        return False
    val = args[0] if args else (kw[0].value if kw and kw[0].keyword.value == "mode" else None)
    if type(val) is cst.Name and val.value in ("True", "False"):
        return val.value == "False"
    return None


def _is_model(m, recv) -> bool:
    k = m.kind(recv)
    if k == K.MODULE:
        return True
    if k in K.ANY_TENSOR or m.qualname(recv) is not None:
        return False
    name = last_name(recv)
    if not name or type(recv) is cst.Call:
        return False
    if name == "self":
        cls = m.current_class()
        return bool(cls and m.classes.get(cls, {}).get("module"))
    words = name_words(name)
    return bool(words) and (words[-1] in T.MODEL_NAME_WORDS or name.lower().endswith(("model", "net")))


def _may_be_module(m, name: str) -> bool:
    """What ``name`` holds at the walk's point may be a module (not a tensor, a Python value or a loader)."""
    k = m.kind(cst.Name(name))
    return not (k in K.ANY_TENSOR or k in (K.NOT_TENSOR, K.TENSORS, K.CPU_TENSORS, K.LOADER, K.CPU_LOADER))


def _model_key(name: str) -> str:
    """``self.model.module`` and ``model`` name the same model."""
    parts = [p for p in name.split(".") if p not in ("self", "module", "_orig_mod")]
    return parts[-1] if parts else name


def _code(node) -> str:
    try:
        return cst.Module(body=[]).code_for_node(node)
    except Exception:  # noqa: BLE001
        return "model.eval()"


def _code_name(recv) -> str:
    from xlalint.semantics.syntax import dotted_name

    return dotted_name(recv) or "model"


