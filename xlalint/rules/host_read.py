"""XLA001 host-read: a per-step read of a device value on the host."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.steps import NOT_PER_STEP
from xlalint.semantics.syntax import (
    dotted_name, last_name, name_words, names_in, positional_args, string_value,
)

FIX = "accumulate on the device (`total += loss.detach()`) and read once after the loop, or read it in `xm.add_step_closure`"
SINK_FIX = "log a value read in `xm.add_step_closure(fn, args=(loss,))`, or accumulate on the device (`total += loss.detach()`) and log it every N steps after the step's sync"
COST = "1 extra graph execution + 1 device-to-host transfer each time (the graph is cut and run early)"


class HostRead(Rule):
    code = "XLA001"
    name = "host-read"
    summary = "A device value is read on the host every step: the lazy graph is cut and run early."
    what_it_does = """
        Flags, in code that runs every step (a step loop, `forward`, `training_step`, a function they
        call), the calls that copy a device tensor to the host: `.item()`, `.tolist()`, `.cpu()`,
        `.to("cpu")`, `.numpy(force=True)`, `float(t)`, `int(t)`, `bool(t)`, `math.*(t)`,
        `torch.tensor([t1, t2])` of device tensors, `torch.allclose` / `torch.equal`, and logging sinks
        handed a device tensor or a dict/list holding one: TensorBoard's `add_scalar` / `add_scalars` /
        `add_histogram` / `add_image(s)`, `wandb.log`, `mlflow.log_metric(s)`, a logger's
        `log_metrics`, `fabric.log` / `fabric.log_dict`, `accelerator.log` (the library converts the
        tensor with `.cpu().numpy()` or `.item()`; the table is `tables.SINK_*`). Lightning's
        `self.log(...)` is not a sink: it keeps the tensor on the device and reads it after the step.
        Code under `if step % N == 0:` is reported with "every N steps". Not flagged: the same outside
        per-step code (after the loop), after the step's `torch_xla.sync()` / `xm.mark_step()`,
        inside `xm.add_step_closure` callbacks, on tensors known to be on the CPU, a plain `t.numpy()` (it
        raises on an XLA tensor: in code that runs, `t` is on the CPU), under an explicit
        non-XLA guard (`if device.type != "xla":`).
    """
    why_slow = """
        torch_xla records operations lazily and runs them as one graph at the step's barrier. Reading
        a value on the host needs it now: XLA compiles and runs the graph so far, copies the value
        back, and the rest of the step becomes a second graph. On the CPU device a step with
        `loss.item()` runs 2 executions and 1 device-to-host transfer instead of 1 execution; on a TPU
        the transfer also stalls the host until the device catches up, every step.
    """
    example = """
        for step, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()   # XLA001: graph cut + transfer every step
            xm.mark_step()
    """
    use_instead = """
        running_loss = torch.zeros((), device=device)
        for step, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss.detach()  # stays on the device
            xm.mark_step()
        print(running_loss.item() / len(loader))  # one read, after the loop
    """
    known_problems = """
        A sink is recognised by its method name (`add_scalar`, `log_metrics`) on any object that is not
        an object of a project class; `accelerator.log` costs nothing when no tracker is configured.
        A value read after a barrier that the linter cannot see (a sync inside a helper defined in
        another file) is still reported. Whether a tensor lives on the device is inferred: tensors made
        by `torch.tensor(...)` without `device=` are taken to be on the CPU.
    """
    verify = """
        `TransferFromDeviceTime` samples (and `aten::_local_scalar_dense` for scalar reads) counted at
        the line on most steps, with the extra graph compile/execution the cut causes.
    """
    VALID = [
        # a module served over torch.distributed.rpc hands back host tensors: RPC carries nothing else
        "import torch\nimport torch.distributed.rpc as rpc\nclass Shard(torch.nn.Module):\n    def __init__(self, device):\n        super().__init__()\n        self.device = device\n        self.seq = torch.nn.Linear(4, 4).to(device)\n    def forward(self, x_rref):\n        x = x_rref.to_here().to(self.device)\n        return self.seq(x).cpu()\n",
        # a plain `.numpy()` raises on an XLA tensor: where the code runs, its receiver is a CPU tensor
        "import torch\nimport torch_xla\ndevice = torch_xla.device()\nfor x, y in loader:\n    out = model(x.to(device))\n    loss = out.sum()\n    loss.backward()\n    optimizer.step()\n    labels = y.numpy()\n    stats = obsfilt(x.numpy())\n    torch_xla.sync()\n",
        # a list indexed by what a comprehension binds from a batch entry (diffusers' cached embeddings, with
        # `batch["indices"]` a list of ints from the collate): not judged here
        "import torch\nfor step, batch in enumerate(train_dataloader):\n    cache = [None] * 10\n    sample_indices = batch['indices']\n    emb = torch.cat([cache[idx] for idx in sample_indices], dim=0)\n    loss = model(emb).sum()\n    loss.backward()\n",
        # a dict keyed by a tensor hashes its identity: nothing read; a list indexed by a Python int
        "import torch\nimport torch_xla\ndevice = torch_xla.device()\nfor step, (x, y) in enumerate(loader):\n    seen = {}\n    hist = [0] * 10\n    y = y.to(device)\n    seen[y] = step\n    hist[step % 10] += 1\n    loss = model(x.to(device)).sum()\n    loss.backward()\n",
        # the same metric logger fed Python numbers only (torchvision's): its `v.item()` never runs
        "import torch\nclass MetricLogger:\n    def __init__(self):\n        self.values = {}\n    def update(self, **kwargs):\n        for k, v in kwargs.items():\n            if isinstance(v, torch.Tensor):\n                v = v.item()\n            self.values[k] = v\nlogger = MetricLogger()\nfor x, y in loader:\n    out = model(x)\n    loss_dict = criterion(out, y)\n    losses = sum(loss_dict.values())\n    losses.backward()\n    optimizer.step()\n    logger.update(lr=0.1, step=3)\n",
        # logging sinks handed Python numbers or CPU tensors, from a step closure, after training, or
        # Lightning's `self.log` (kept on the device, read after the step)
        "import torch\nimport torch_xla.core.xla_model as xm\nfrom torch.utils.tensorboard import SummaryWriter\nwriter = SummaryWriter()\ndef log(step, loss):\n    writer.add_scalar('loss', loss, step)\nfor step, (x, y) in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n    writer.add_scalar('lr', optimizer.param_groups[0]['lr'], step)\n    writer.add_histogram('noise', torch.randn(3), step)\n    xm.add_step_closure(log, args=(step, loss))\nwriter.add_scalar('final', loss, 0)\n",
        "import torch\nimport lightning as L\nclass M(L.LightningModule):\n    def training_step(self, batch, batch_idx):\n        loss = self.net(batch).sum()\n        self.log('train/loss', loss, prog_bar=True)\n        self.log_dict({'loss': loss})\n        return loss\n",
        # a project class's own add_scalar method is followed, not taken for TensorBoard's
        "import torch\nclass Board:\n    def add_scalar(self, tag, value, step):\n        self.last = (tag, step)\nboard = Board()\nfor step, (x, y) in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n    board.add_scalar('loss', loss, step)\n",
        # after the loop: one read
        "import torch\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\nprint(loss.item())\n",
        # inside a step closure
        "import torch\nimport torch_xla.core.xla_model as xm\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    xm.add_step_closure(lambda: print(loss.item()))\n",
        # a helper named item
        "import torch\nimport utils\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    v = utils.item(loss)\n",
        # after the step's sync
        "import torch, torch_xla\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n    torch_xla.sync()\n    v = loss.item()\n",
        # runs once, not every step
        "import torch\nfor step, x in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n    if step == 0:\n        print(loss.item())\n    if step >= max_steps:\n        print(loss.item())\n        break\n",
        # from torch's own sources: PackedSequence.batch_sizes lives on the host by design
        "import torch\nclass RNN(torch.nn.Module):\n    def forward(self, input, hx=None):\n        input, batch_sizes, sorted_indices, unsorted_indices = input\n        return int(batch_sizes[0])\n",
        # an error message runs only when something is wrong
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, target):\n        if target.numel() == 0:\n            raise ValueError(f'bad range [{target.min().item()}, {target.max().item()}]')\n        return target\n",
    ]
    INVALID = [
        # the same shard in a module without RPC: its copy to the host is a cost of every step
        "import torch\nclass Shard(torch.nn.Module):\n    def __init__(self, device):\n        super().__init__()\n        self.device = device\n        self.seq = torch.nn.Linear(4, 4).to(device)\n    def forward(self, x_rref):\n        x = x_rref.to_here().to(self.device)\n        return self.seq(x).cpu()\n",
        "import torch\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n    total += loss.item()\n",
        # numpy(force=True) copies a device tensor to the host
        "import torch\nimport torch_xla\ndevice = torch_xla.device()\nfor x, y in loader:\n    out = model(x.to(device))\n    loss = out.sum()\n    loss.backward()\n    optimizer.step()\n    preds = out.argmax(-1).numpy(force=True)\n    torch_xla.sync()\n",
        # a policy's method (not forward) samples a torch.distributions object over device logits: the action
        # copied to the host for a CPU environment every rollout step (PPO's select_action)
        "import torch\nimport torch.nn as nn\nfrom torch.distributions import Categorical\nimport torch_xla\ndevice = torch_xla.device()\nclass ActorCritic(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.actor = nn.Linear(4, 2)\n    def act(self, state):\n        dist = Categorical(logits=self.actor(state))\n        action = dist.sample()\n        return action.detach(), dist.log_prob(action).detach()\nclass PPO:\n    def __init__(self):\n        self.policy_old = ActorCritic().to(device)\n    def select_action(self, state):\n        with torch.no_grad():\n            action, logp = self.policy_old.act(torch.FloatTensor(state).to(device))\n        return action.detach().cpu().numpy()\ndef train(env):\n    agent = PPO()\n    state = env.reset()\n    for t in range(1000):\n        state, reward, done, _ = env.step(agent.select_action(state))\n",
        # per-class accuracy counted in Python lists indexed by device labels
        "import torch\nimport torch_xla\ndevice = torch_xla.device()\nwith torch.no_grad():\n    n_class_correct = [0 for i in range(10)]\n    for images, labels in test_loader:\n        labels = labels.to(device)\n        predicted = model(images.to(device)).argmax(1)\n        for i in range(labels.size(0)):\n            label = labels[i]\n            n_class_correct[label] += int(0)\n",
        # a metric logger fed a dict of device losses reads each one (DETR's MetricLogger)
        "import torch\nclass MetricLogger:\n    def __init__(self):\n        self.values = {}\n    def update(self, **kwargs):\n        for k, v in kwargs.items():\n            if isinstance(v, torch.Tensor):\n                v = v.item()\n            self.values[k] = v\nlogger = MetricLogger()\nfor x, y in loader:\n    out = model(x)\n    loss_dict = criterion(out, y)\n    losses = sum(loss_dict.values())\n    losses.backward()\n    optimizer.step()\n    logger.update(**{k: v * 2 for k, v in loss_dict.items()})\n",
        # logging sinks read what they are handed
        "import torch\nfrom torch.utils.tensorboard import SummaryWriter\nwriter = SummaryWriter()\nfor step, (x, y) in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n    writer.add_scalar('loss', loss, step)\n",
        "import torch\nfrom torch.utils.tensorboard import SummaryWriter\nwriter = SummaryWriter()\nfor it, x in enumerate(loader):\n    loss = model.get_loss(x)\n    loss.backward()\n    writer.add_scalar('train/loss', loss, it)\n",
        "import torch, wandb\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    logs = {}\n    logs['loss'] = loss\n    wandb.log(logs)\n",
        "import torch\ndef train(fabric, model, loader):\n    for x, y in loader:\n        loss = model(x).sum()\n        fabric.backward(loss)\n        fabric.log_dict({'loss': loss})\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x * float(x.max())\n",
        "import torch\nfor x in loader:\n    out = model(x)\n    preds = out.argmax(-1).cpu()\n    optimizer.step()\n",
    ]

    def __init__(self) -> None:
        super().__init__()
        self._accumulated: dict = {}  # id(call) -> the `total += call` statement
        self._lists: set = set()  # (id of the function record, name) bound to a Python list display
        self._iterated: set = set()  # (id of the function record, name) bound by a for / comprehension
        self._self_reads: list = []  # (candidate, class key, attribute): a read of `self.loss` or of a chain on it
        self._dumps: list = []  # (candidate, loop): a copy its loop writes to a file (SemanticModel.copy_written_out)

    def on_AugAssign(self, node: cst.AugAssign) -> None:
        if type(node.operator) is cst.AddAssign and type(node.value) is cst.Call:
            self._accumulated[id(node.value)] = node

    def on_Assign(self, node: cst.Assign) -> None:
        fid = id(self.model.func)
        for t in node.targets:
            if type(t.target) is cst.Name:
                key = (fid, t.target.value)
                self._iterated.discard(key)
                if _list_display(node.value):
                    self._lists.add(key)
                else:
                    self._lists.discard(key)

    def on_For(self, node: cst.For) -> None:
        self._note_iterated(node.target)

    def on_ListComp(self, node) -> None:
        comp = node.for_in
        while comp is not None:
            self._note_iterated(comp.target)
            comp = comp.inner_for_in

    on_GeneratorExp = on_SetComp = on_DictComp = on_ListComp

    def _note_iterated(self, target) -> None:
        fid = id(self.model.func)
        for n in names_in(target):
            self._iterated.add((fid, n))

    def on_Subscript(self, node: cst.Subscript) -> None:
        """``n_class_correct[label] += 1`` with ``label = labels[i]`` on the device: a Python list indexed by a
        device tensor reads the index to the host (``__index__``). A dict keyed by a tensor hashes its
        identity and reads nothing: only lists built in the function count. An index a loop or a
        comprehension binds iterates a value taken for a tensor (often a batch's list of ints): not here."""
        m = self.model
        if (type(node.value) is not cst.Name or (id(m.func), node.value.value) not in self._lists
                or len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index):
            return
        index = node.slice[0].slice.value
        if type(index) is cst.Name and (id(m.func), index.value) in self._iterated:
            return  # `[cache[idx] for idx in batch["indices"]]`: what a loop binds is XLA008's to judge
        if m.kind(index) in K.DEVICE_TENSORS:
            self._flag(node, f"`{self.text(node)}` indexes a Python list with a device tensor, whose value Python "
                             f"reads to the host (`__index__`) {{when}}")

    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        func = node.func
        t = self.lazy_text(node)  # rendered only for a call that is reported
        sink = _sink(m, node)
        if sink is not None:
            value, who = sink
            what = f"the device tensor `{self.text(value, 24)}`" if m.kind(value) in K.DEVICE_TENSORS else f"`{self.text(value, 24)}` (it holds device tensors)"
            self._flag(node, f"`{t}` hands {what} to {who}, which reads it to the host {{when}}",
                       fix=SINK_FIX)
            return
        if type(func) is cst.Attribute:
            meth = func.attr.value
            trigger = T.HOST_READ_TRIGGER_METHODS.get(meth)
            if trigger is not None and not node.args and (name_words(last_name(func.value) or "") or [""])[-1] in trigger[0]:
                self._flag(node, f"`{t}` {trigger[1]} {{when}}",
                           fix="set and test the trigger every N steps (`if step % N == 0 and accelerator.check_trigger():`)")
                return
            if meth in T.HOST_READ_METHODS or meth == "to":
                if m.reads_loop_result(func.value):
                    return  # `dev_loss.item()` after the evaluation loop: its result, once per evaluation
                if m.uploaded(func.value):
                    return  # `classes.to('cpu')` of the batch's labels as uploaded: a copy back, no graph runs
                if meth in ("cpu", "to") and m.uses_rpc:
                    return  # `return out.cpu()` in a module served over torch.distributed.rpc: RPC carries host tensors
            if meth in T.HOST_READ_METHODS:
                if meth in ("item", "tolist") and node.args:
                    return  # not Tensor.item / Tensor.tolist
                if meth == "numpy" and not any(a.keyword is not None and a.keyword.value == "force" for a in node.args):
                    # `t.numpy()` raises on an XLA (or CUDA) tensor ("can't convert xla:0 device type tensor to
                    # numpy", measured): in code that runs, its receiver is on the CPU; `numpy(force=True)` copies
                    return
                k = m.read_kind(func.value)
                if (k in K.DEVICE_TENSORS or k is K.UNKNOWN) and m.read_before_upload(node, func.value, k):
                    return  # `n = batch["len"].max().item()` before `batch["x"].to(device)`: read on the host
                if k in K.DEVICE_TENSORS or (k is K.UNKNOWN and meth in ("item", "tolist") and not _is_module_ref(m, func.value)
                                             and not m.type_tested(func.value)):
                    what = T.HOST_READ_METHODS[meth]
                    edit = None
                    if meth == "item" and id(node) in self._accumulated:
                        edit = self._accumulate_edit(node, self._accumulated[id(node)].target)
                    self._flag(node, f"`{t}` {what} {{when}}", edit=edit)
                    self._note_self_read(func.value)
                    if meth != "item":
                        self._note_dump(node)
                return
            if meth == "to" and m.kind(func.value) in K.DEVICE_TENSORS and m.to_cpu(node):
                self._flag(node, f"`{t}` copies the tensor to the host {{when}}")
                self._note_dump(node)
                return
            if meth in ("equal", "allclose") and m.kind(func.value) in K.DEVICE_TENSORS:
                self._flag(node, f"`{t}` reads a device comparison to the host {{when}}")
                return
        q = m.qualname(func)
        if q is None:
            for b in T.HOST_READ_BUILTINS:
                if m.is_builtin(func, b):
                    args = positional_args(node)
                    if len(args) == 1 and m.kind(args[0]) in K.DEVICE_TENSORS:
                        self._flag(node, f"`{t}` reads a device value to the host {{when}}")
                    return
            return
        mod, _, fn = q.rpartition(".")
        if mod == "math":
            if any(m.kind(a) in K.DEVICE_TENSORS for a in positional_args(node)):
                self._flag(node, f"`{t}` reads a device value to the host {{when}}")
            return
        if q in T.HOST_READ_TORCH_FUNCTIONS:
            if any(m.kind(a) in K.DEVICE_TENSORS for a in positional_args(node)):
                self._flag(node, f"`{t}` reads a device comparison to the host {{when}}")
            return
        if q in ("torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor"):
            args = positional_args(node)
            if args and type(args[0]) in (cst.List, cst.Tuple):
                if any(m.kind(el.value) in K.DEVICE_TENSORS for el in args[0].elements):
                    self._flag(
                        node,
                        f"`{t}` of device tensors reads each element to the host {{when}}",
                        fix="build it on the device: `torch.stack([...])`",
                    )

    def _note_self_read(self, receiver) -> None:
        """The read just flagged is of ``self.X`` (``self.loss.detach().cpu().item()``): kept for ``finalize``."""
        while type(receiver) in (cst.Call, cst.Attribute, cst.Subscript):
            if (type(receiver) is cst.Attribute and type(receiver.value) is cst.Name and receiver.value.value == "self"):
                cls = self.model.current_class()
                if cls is not None:
                    self._self_reads.append((self.model.candidates[-1], cls, receiver.attr.value))
                return
            receiver = receiver.func if type(receiver) is cst.Call else receiver.value

    def _note_dump(self, node: cst.Call) -> None:
        """The copy just flagged is one its loop writes to a file (`audio = y.cpu().numpy()` then `write(path, sr,
        audio)`: ``SemanticModel.copy_written_out``): kept for ``finalize``, which asks whether the loop trains."""
        loop = self.model.copy_written_out(node)
        if loop is not None:
            self._dumps.append((self.model.candidates[-1], loop))

    def finalize(self) -> None:
        """A read of ``self.X`` in another method of its class, where the step's graph has computed every value
        any per-step method assigns to ``self.X``: the method assigns it before a barrier of its own body, or
        after one with a value that adds no operation (``xm.mark_step()`` then ``self.loss = loss.detach()`` in
        ``training_step``, read by ``on_train_batch_end``). Reading it copies data and cuts nothing, like a read
        after the sync in the step itself (not reported)."""
        m = self.model
        for cand, loop in self._dumps:
            if not m.loop_trains(loop):  # a dump of what a loop over inputs makes, not a cost of a training loop
                cand.when, cand.frequency = "custom", NOT_PER_STEP
        for cand, cls, attr in self._self_reads:
            writes = [(w, alias) for w, alias in m.classes.get(cls, {}).get("writes", {}).get(attr, ())
                      if m.frequency(w).per_step]
            if writes and all(w.func is not cand.ctx.func and m.computed_by_a_barrier(w, alias) for w, alias in writes):
                cand.when, cand.frequency = "custom", NOT_PER_STEP

    def _flag(self, node, message: str, fix: str = FIX, edit=None) -> None:
        self.report(node, message, fix=fix, cost=COST, edit=edit)

    def _accumulate_edit(self, node: cst.Call, target) -> tuple:
        """``total += x.item()`` -> ``total += x.detach()``, unsafe: ``total`` becomes a device tensor. In a
        function that returns it (``return correct / n``), the ``return`` reads it once
        (``return float(correct) / n``): the function still returns a number, so no caller starts
        formatting or testing a tensor it returns (a finding of the fix's own, in every caller)."""
        detached = node.with_changes(func=node.func.with_changes(attr=cst.Name("detach")))
        name = self.text(target)
        func = self.model.func.node
        reads = _returned_uses(func, name) if type(target) is cst.Name and func is not None else None
        if reads:
            more = tuple((use, cst.Call(func=cst.Name("float"), args=[cst.Arg(value=use)])) for use in reads)
            return (node, detached, "unsafe",
                    f"replace with `{self.text(detached)}` and read `{name}` once at the `return` "
                    f"(`float({name})`); `{name}` becomes a device tensor until then", more)
        return (node, detached, "unsafe",
                f"replace with `{self.text(detached)}`; `{name}` becomes a device tensor, read it once after the loop")


def _sink(m, node: cst.Call):
    """(the device value handed over, who reads it) when ``node`` is a logging sink (tables.SINK_*)
    given a device tensor or a container holding one, else None."""
    func = node.func
    entry = None
    q = m.qualname(func)
    if q is not None:
        entry = T.SINK_FUNCTIONS.get(q)
    elif type(func) is cst.Attribute:
        meth = func.attr.value
        entry = T.SINK_METHODS.get(meth) or T.SINK_METHODS_BY_RECEIVER.get((meth, (last_name(func.value) or "").lower()))
        if entry is not None:
            rk = m.kind(func.value)
            if K.instance_class(rk) is not None or rk in K.ANY_TENSOR or rk in (K.MODULE, K.TENSORS, K.CPU_TENSORS):
                return None  # a project object's own method (followed through the call graph), a tensor, ...
    if entry is None:
        return None
    positions, keywords, who = entry
    pos = positional_args(node)
    values = [pos[i] for i in positions if i < len(pos)]
    values += [a.value for a in node.args if a.keyword is not None and a.keyword.value in keywords]
    for v in values:
        if m.holds_tensor(v):
            return v, who
    return None




def _list_display(value) -> bool:
    """``[0 for _ in range(10)]``, ``[0] * 10``, ``[]``: a Python list built on the spot."""
    if type(value) in (cst.List, cst.ListComp):
        return True
    return (type(value) is cst.BinaryOperation and type(value.operator) is cst.Multiply
            and (type(value.left) is cst.List or type(value.right) is cst.List))


def _is_module_ref(m, node) -> bool:
    """``utils.item(x)`` style: the receiver is an imported module, not a value."""
    dn = dotted_name(node)
    if dn is None:
        return False
    head = dn.split(".")[0]
    return head in m.imports and m.kind(node) == K.NOT_TENSOR and string_value(node) is None


_READS = frozenset(("float", "int", "bool", "round"))


def _returned_uses(func, name: str):
    """The ``Name`` nodes of ``name`` in the ``return`` values of ``func`` (not of functions, classes or
    lambdas inside it) that are not already read by ``float(...)``/``int(...)``/``bool(...)``/``round(...)``,
    or None when one of them is used otherwise than as a value (``name.item()``, ``name[0]``, ``name(...)``):
    wrapping those in ``float()`` would break them."""
    uses: list = []
    ok = [True]
    _statement_uses(func.body, name, uses, ok)
    return uses if ok[0] else None


# functions of the module, not recursive closures of ``_returned_uses``: a recursive closure is a reference
# cycle, which would keep the nodes it collects past the walk (``run.memory`` freezes what survives a walk)
def _statement_uses(node, name: str, uses: list, ok: list) -> None:
    for child in node.children:
        if type(child) in (cst.FunctionDef, cst.ClassDef):
            continue
        if type(child) is cst.Return:
            if child.value is not None:
                _value_uses(child.value, None, name, uses, ok)
        elif isinstance(child, cst.CSTNode) and not isinstance(child, cst.BaseExpression):
            _statement_uses(child, name, uses, ok)


def _value_uses(expr, parent, name: str, uses: list, ok: list) -> None:
    if type(expr) is cst.Name:
        if expr.value == name:
            if type(parent) in (cst.Attribute, cst.Subscript) or (type(parent) is cst.Call and parent.func is expr):
                ok[0] = False
            elif not (type(parent) is cst.Call and type(parent.func) is cst.Name and parent.func.value in _READS):
                uses.append(expr)
        return
    if type(expr) in (cst.Lambda, cst.GeneratorExp, cst.ListComp, cst.SetComp, cst.DictComp, cst.Slice, cst.NamedExpr):
        if name in {n.value for n in _names(expr)}:
            ok[0] = False  # a new scope, a slice bound (an int), an assignment: leave it alone
        return
    if type(expr) is cst.Attribute:
        _value_uses(expr.value, expr, name, uses, ok)  # never the attribute's own name
        return
    for child in expr.children:
        if type(child) is cst.Arg:
            _value_uses(child.value, expr, name, uses, ok)  # never a keyword's name
        elif isinstance(child, cst.BaseExpression):
            _value_uses(child, expr, name, uses, ok)
        elif type(child) is cst.SubscriptElement:
            _value_uses(child.slice, child, name, uses, ok)
        elif type(child) is cst.Index:
            _value_uses(child.value, child, name, uses, ok)
        else:
            for grand in getattr(child, "children", ()):
                if isinstance(grand, cst.BaseExpression):
                    _value_uses(grand, child, name, uses, ok)


def _names(node):
    if type(node) is cst.Name:
        yield node
    for child in node.children:
        yield from _names(child)
