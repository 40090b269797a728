"""XLA011 sync-heavy-amp: a CUDA-style loss scaler or a non-finite check that reads the host every step."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import rule_tables as RT
from xlalint.semantics.model import dotted_name, keyword_arg, last_name, positional_args, string_value

FIX_SCALER = (
    "on XLA use bf16 autocast without loss scaling (`with torch.autocast(\"xla\", dtype=torch.bfloat16):`, "
    "then `loss.backward()` and `optimizer.step()` directly, no `GradScaler`); fp16 needs a "
    "`torch_xla.amp.syncfree` optimizer, which takes `found_inf` as a device tensor"
)
FIX_NONFINITE = (
    "drop `error_if_nonfinite=True` (the default `False` keeps the check off the host; the autofix sets "
    "`False`, unsafe: a non-finite norm no longer raises); to skip bad steps, keep the test on the device "
    "(`torch.where(torch.isfinite(norm), ...)`) or check it every N steps"
)


class SyncHeavyAmp(Rule):
    code = "XLA011"
    name = "sync-heavy-amp"
    summary = "A GradScaler step or clip_grad_norm_(error_if_nonfinite=True) reads a device value on the host every step."
    what_it_does = """
        Flags, in code that runs every step:
        - `scaler.step(optimizer)` where `scaler` is a `torch.amp.GradScaler` /
          `torch.cuda.amp.GradScaler` / `torch.GradScaler` made in this file, in a file that uses
          torch_xla (or a scaler made with `GradScaler("xla")`);
        - `clip_grad_norm_(..., error_if_nonfinite=True)` (also `clip_grad_norm`,
          `get_total_norm`, and `accelerator.clip_grad_norm_` passing it through).
        Not flagged: a scaler made with `enabled=False` or with `enabled=<expression>` (nanoGPT's
        `GradScaler(enabled=(dtype == "float16"))`: off for bf16, unknown here), `scaler.scale(loss)`,
        `scaler.unscale_()`, `scaler.update()` (they stay on the device), `clip_grad_norm_` without
        `error_if_nonfinite` or with `False` (the default), `clip_grad_value_` (it has no such check),
        a scaler in a file that never imports torch_xla (CUDA code, where it is the right tool).
    """
    why_slow = """
        `GradScaler.step()` decides whether to skip the optimizer step with
        `sum(v.item() for v in found_inf_per_device)`: a host read of a value the lazy graph has not
        computed yet, so torch_xla compiles and runs the graph so far and copies `found_inf` back
        (measured on torch_xla 2.9, CPU device: 1 transfer + 1 extra execution per step, with the
        default "cuda" device and with `GradScaler("xla")`). TPUs train in bf16, which needs no loss
        scaling. `error_if_nonfinite=True` makes `clip_grad_norm_` test the total norm with a Python
        `if` (measured: 2 transfers + 2 extra executions per step); the default `False` is clean.
    """
    example = """
        scaler = torch.amp.GradScaler()
        for x, y in loader:
            with torch.autocast("xla", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)  # XLA011
            scaler.step(optimizer)  # XLA011
            scaler.update()
            torch_xla.sync()
    """
    use_instead = """
        for x, y in loader:
            with torch.autocast("xla", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            torch_xla.sync()
    """
    known_problems = """
        A scaler is recognised by the name it is assigned to in this file (`scaler`, `self.scaler`);
        one passed in from another file is not seen. Fix safety: `--fix --unsafe-fixes` sets
        `error_if_nonfinite=False` (the default): mechanical but unsafe (a non-finite norm stops raising); replacing a `GradScaler` with bf16
        autocast changes numerics and is left to you.
    """
    verify = """
        `TransferFromDeviceTime` samples (and `aten::_local_scalar_dense`) at the `scaler.step(...)` /
        `clip_grad_norm_(...)` line on most steps, with the extra graph executions of the cut.
    """
    VALID = [
        # bf16 autocast without a scaler; clip without the host check
        "import torch, torch_xla\nfor x, y in loader:\n    with torch.autocast('xla', dtype=torch.bfloat16):\n        loss = model(x).sum()\n    loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=False)\n    torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)\n    optimizer.step()\n    torch_xla.sync()\n",
        # a disabled scaler, and one enabled by an expression (nanoGPT: off for bf16)
        "import torch, torch_xla\nscaler = torch.cuda.amp.GradScaler(enabled=False)\nscaler2 = torch.amp.GradScaler(enabled=(dtype == 'float16'))\nfor x in loader:\n    loss = model(x).sum()\n    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler2.step(optimizer)\n    scaler.update()\n",
        # CUDA code: no torch_xla in the file
        "import torch\nscaler = torch.amp.GradScaler()\nfor x in loader:\n    loss = model(x).sum()\n    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n",
        # an lr scheduler's step and a step on something that is not a scaler
        "import torch, torch_xla\nscaler = torch.amp.GradScaler()\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n    scheduler.step()\n",
        # once, after training
        "import torch, torch_xla\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)\n",
    ]
    INVALID = [
        "import torch, torch_xla\nscaler = torch.amp.GradScaler()\nfor x in loader:\n    loss = model(x).sum()\n    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n    torch_xla.sync()\n",
        "import torch\nfrom torch.cuda.amp import GradScaler\nclass Trainer:\n    def __init__(self):\n        self.scaler = GradScaler('xla')\n    def train(self, loader):\n        for x in loader:\n            loss = self.model(x).sum()\n            self.scaler.scale(loss).backward()\n            self.scaler.step(self.optimizer)\n            self.scaler.update()\n",
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)\n    optimizer.step()\n",
    ]

    def __init__(self) -> None:
        super().__init__()
        self._scalers: set = set()  # names (`scaler`, `self.scaler`) bound to an enabled GradScaler
        self._xla_scalers: set = set()  # ... made with GradScaler("xla")
        self._steps: list = []  # (candidate, receiver name) of `<name>.step(...)`, decided in finalize
        self._passed: list = []  # (ctx, callee, position or keyword): a scaler handed to a project function

    decides_in_project = True  # `scaler.step(opt)` in a helper that the loop passes its scaler

    def before_rewalk(self) -> None:
        alive = {id(c) for c in self.model.candidates}
        self._steps = [r for r in self._steps if id(r[0]) in alive]

    # ------------------------------------------------------------------ scalers
    def on_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._note_scaler(t.target, node.value)

    def on_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._note_scaler(node.target, node.value)

    def _note_scaler(self, target, value) -> None:
        if not isinstance(value, cst.Call) or self.model.qualname(value.func) not in RT.GRAD_SCALER_CLASSES:
            return
        name = dotted_name(target)
        if name is None:
            return
        enabled = keyword_arg(value, "enabled")
        if enabled is not None and not (isinstance(enabled, cst.Name) and enabled.value == "True"):
            return  # disabled, or enabled by an expression we cannot evaluate: unknown stays unknown
        self._scalers.add(name)
        args = positional_args(value)
        device = args[0] if args else keyword_arg(value, "device")
        if device is not None and string_value(device) == "xla":
            self._xla_scalers.add(name)

    # ------------------------------------------------------------------ calls
    def on_Call(self, node: cst.Call) -> None:
        func = node.func
        if self._scalers and node.args and not any(a.star for a in node.args):
            callee = None
            for i, a in enumerate(node.args):
                if dotted_name(a.value) in self._scalers:
                    callee = callee or self.model._callee_key(func)
                    if callee is None:
                        break
                    self._passed.append((self.model.step_context(), callee,
                                         a.keyword.value if a.keyword is not None else i))
        if isinstance(func, cst.Attribute) and func.attr.value == "step":
            name = dotted_name(func.value)
            if name is not None:
                self.report(node, "", fix=FIX_SCALER, when="custom")
                self._steps.append((self.model.candidates[-1], name))
            return
        if last_name(func) in RT.NONFINITE_CHECK_FUNCTIONS:
            flag = keyword_arg(node, "error_if_nonfinite")
            if isinstance(flag, cst.Name) and flag.value == "True":
                fn = last_name(func)
                self.report(
                    node,
                    f"`{fn}(..., error_if_nonfinite=True)` tests the total norm with a Python `if` {{when}}",
                    fix=FIX_NONFINITE,
                    cost="the graph is cut and the result copied to the host (measured: 2 extra executions + "
                         "2 transfers each time)",
                    # `False` is the default: the same as dropping the argument, and the layout is kept
                    edit=(flag, cst.Name("False"), "unsafe",
                          "Set `error_if_nonfinite=False`, the default (a non-finite norm no longer raises)"),
                )

    def finalize(self) -> None:
        m = self.model
        for cand, name in self._steps:
            if name not in self._scalers or not (m.imports_xla or name in self._xla_scalers):
                continue
            fr = m.frequency(cand.ctx)
            if not fr.per_step or fr.after_sync:
                continue
            cand.frequency = fr
            cand.message = _scaler_message(name)

    # ------------------------------------------------------------------ a scaler passed to a helper
    def export(self, ctx_id, cand_id):
        m = self.model
        pending = []
        for cand, name in self._steps:
            f = cand.ctx.func
            ci = cand_id(cand)
            if ci is None or name in self._scalers or not isinstance(f.node, cst.FunctionDef):
                continue
            ps = f.node.params
            names = [p.name.value for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)]
            if name in names:
                pending.append([ci, f.key, name])
        passed = []
        mod = m.module_name
        for ctx, callee, where in self._passed:
            if callee[0] != "@" and callee not in m.funcs and "." in callee and callee.rpartition(".")[0] in m.classes:
                callee = f"@{mod}:{callee}"  # as SemanticModel.export names it
            row = [ctx_id(ctx), callee, where]
            if row not in passed:
                passed.append(row)
        if not pending and not (passed and m.imports_xla):
            return None
        params = {}
        for f in m.funcs.values():
            if isinstance(f.node, cst.FunctionDef):
                ps = f.node.params
                params[f.key] = [[p.name.value for p in (*ps.posonly_params, *ps.params)], f.class_key is not None]
        return {"pending": pending, "passed": passed if m.imports_xla else [], "params": params}

    @classmethod
    def resolve_project(cls, program, data: dict, cands: dict) -> None:
        """``scaler.step(opt)`` where ``scaler`` is a parameter that a caller on an XLA step path passes
        its GradScaler."""
        from xlalint.rules.step_varying_int import _param_at

        params = {f"{mod}:{k}": rec for mod, d in data.items() for k, rec in d["params"].items()}
        scalers = set()
        for mod, d in data.items():
            for ci, callee, where in d["passed"]:
                for t in program.targets(f"{mod}\0{callee}"):
                    p = _param_at(params.get(t), where, callee)
                    if p is not None:
                        scalers.add((t, p))
        if not scalers:
            return
        steps = program.steps
        for mod, d in data.items():
            for ci, fkey, name in d["pending"]:
                if (f"{mod}:{fkey}", name) not in scalers:
                    continue
                cand = cands[mod][ci]
                fr = steps.frequency(cand.ctx)
                if not fr.per_step or fr.after_sync:
                    continue
                cand.frequency = fr
                cand.message = _scaler_message(name, passed=True)


def _scaler_message(name: str, passed: bool = False) -> str:
    what = "a `GradScaler` (its callers pass one)" if passed else "a `GradScaler`"
    return (
        f"`{name}.step(...)` of {what} reads `found_inf` on the host {{when}} "
        "(`.item()` inside `GradScaler.step`): the graph is cut and run early (1 extra execution + "
        f"1 transfer per step). Fix: {FIX_SCALER}"
    )

