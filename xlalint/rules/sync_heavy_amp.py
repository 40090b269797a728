"""XLA011 sync-heavy-amp: a CUDA-style loss scaler or a non-finite check that reads the host every step."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import kinds as K
from xlalint.semantics import rule_tables as RT
from xlalint.semantics.syntax import keyword_arg, last_name

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
          `torch.cuda.amp.GradScaler` / `torch.GradScaler` made in a file that uses torch_xla (or
          made with `GradScaler("xla")`), wherever `step` is called on it: the same function, an
          attribute (`self.scaler`), or a helper in any module that the loop passes it to;
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
        A scaler is followed as a value of the semantic model (assignments, attributes, arguments of
        project functions); one kept in a container (`scalers["main"]`) is not. Fix safety: `--fix --unsafe-fixes` sets
        `error_if_nonfinite=False` (the default): mechanical but unsafe (a non-finite norm stops raising); replacing a `GradScaler` with bf16
        autocast changes numerics and is left to you.
    """
    verify = """
        `TransferFromDeviceTime` samples (and `aten::_local_scalar_dense`) at the `scaler.step(...)` /
        `clip_grad_norm_(...)` line on most steps, with the extra graph executions of the cut.
    """
    VALID = [
        # made only under an option (moco_v3_tpu's `if cfg.use_pytorch_amp:`, for its GPU runs): enabled by an
        # expression, as `GradScaler(enabled=...)`
        "import torch\nimport torch_xla\ndef train(cfg, model, loader, optimizer):\n    scaler = None\n    if cfg.use_pytorch_amp:\n        scaler = torch.cuda.amp.GradScaler()\n    for x in loader:\n        loss = model(x).sum()\n        loss.backward()\n        if scaler is not None:\n            scaler.step(optimizer)\n        else:\n            optimizer.step()\n        torch_xla.sync()\n",
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
        # a script's main block always runs: the scaler made there is enabled
        "import torch\nimport torch_xla\ndef train(scaler, model, loader, optimizer):\n    for x in loader:\n        scaler.scale(model(x).sum()).backward()\n        scaler.step(optimizer)\n        scaler.update()\n        torch_xla.sync()\nif __name__ == '__main__':\n    scaler = torch.amp.GradScaler()\n    train(scaler, model, loader, optimizer)\n",
        "import torch, torch_xla\nscaler = torch.amp.GradScaler()\nfor x in loader:\n    loss = model(x).sum()\n    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n    torch_xla.sync()\n",
        "import torch\nfrom torch.cuda.amp import GradScaler\nclass Trainer:\n    def __init__(self):\n        self.scaler = GradScaler('xla')\n    def train(self, loader):\n        for x in loader:\n            loss = self.model(x).sum()\n            self.scaler.scale(loss).backward()\n            self.scaler.step(self.optimizer)\n            self.scaler.update()\n",
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)\n    optimizer.step()\n",
    ]

    # ------------------------------------------------------------------ calls
    def on_Call(self, node: cst.Call) -> None:
        func = node.func
        m = self.model
        if type(func) is cst.Attribute and func.attr.value == "step":
            # the model knows the scaler: made here, held in an attribute, or passed in from a caller
            if m.kind(func.value) == K.SCALER:
                self.report(node, f"`{self.text(func.value)}.step(...)` of a `GradScaler` reads `found_inf` on the host "
                                  "{when} (`.item()` inside `GradScaler.step`)",
                            fix=FIX_SCALER, cost="the graph is cut and run early (1 extra execution + 1 transfer each time)")
            return
        if last_name(func) in RT.NONFINITE_CHECK_FUNCTIONS:
            flag = keyword_arg(node, "error_if_nonfinite")
            if type(flag) is cst.Name and flag.value == "True":
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
