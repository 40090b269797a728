"""XLA009's inference of step-varying Python ints (xlalint/semantics/step_values.py), case by case."""

from __future__ import annotations

import pytest

from xlalint.analysis.source import lint_source

HEAD = "import torch\nfor step, (x, y) in enumerate(loader):\n    out = model(x)\n"
TAIL = "    loss = out.sum()\n    loss.backward()\n"


def _xla009(body: str, head: str = HEAD) -> list:
    return [f for f in lint_source(head + body + TAIL, "t.py") if f.code == "XLA009"]


@pytest.mark.parametrize("body, origin", [
    ("    r = out[step]\n", "the loop counter"),
    ("    n = step * 2 + 1\n    r = out[:, :n]\n", "derived from the loop counter `step`"),
    ("    n = int(abs(step - 3))\n    r = out.view(n, -1)\n", "derived from the loop counter `step`"),
    ("    n = lengths[step]\n    r = out.narrow(1, 0, n)\n", "an item of the Python list `lengths` indexed by `step`"),
    ("    r = out[step % 100]\n", "takes 100 values: 100 graphs"),
    ("    r = torch.zeros(step, device=x.device)\n", "the loop counter"),
])
def test_varying_uses_are_reported_with_their_origin(body, origin):
    found = _xla009(body)
    assert len(found) == 1 and origin in found[0].message, found


@pytest.mark.parametrize("body", [
    "    r = out[step % 8]\n",  # 8 values: 8 graphs, then the cache
    "    r = out[min(step, 4)]\n",  # constant after 4 steps
    "    sizes = [8, 16, 32]\n    r = out[:, : sizes[step % 3]]\n",  # a literal bucket list
    "    n = step * 2\n    n = 16\n    r = out[:, :n]\n",  # rebound to a constant
    "    r = out[: x.size(0)]\n",  # a fixed-shape input's size
    "    r = out[:, : cfg.max_len]\n",  # a config value
    "    r = torch.zeros(step)\n",  # made on the CPU
    "    names = labels[step]\n    history.append(step)\n",  # the counter on Python lists only
    "    if step == 0:\n        r = out[step]\n",  # once
])
def test_bounded_and_constant_values_are_silent(body):
    assert not _xla009(body), _xla009(body)


def test_a_counter_incremented_in_a_while_loop_varies():
    src = "import torch\nit = 0\nwhile it < 100:\n    x = next(data).to(device)\n    out = model(x)\n    it += 1\n    r = out[:, :it]\n    out.sum().backward()\n    optimizer.step()\n"
    found = [f for f in lint_source(src, "t.py") if f.code == "XLA009"]
    assert [f.line for f in found] == [7], found


def test_an_inner_loop_that_does_not_train_is_not_a_step():
    src = HEAD + "    for i in range(4):\n        out = out + out[:, i]\n" + TAIL
    assert not [f for f in lint_source(src, "t.py") if f.code == "XLA009"]


# ------------------------------------------------------------------ lengths read from the batch
@pytest.mark.parametrize("src, line", [
    # the longest sample of an uncollated batch
    ("import torch\nfor step, samples in enumerate(raw_batches):\n    out = model(x)\n    n = max(len(s) for s in samples)\n"
     "    m = torch.ones(4, n, device=device)\n    out.sum().backward()\n    optimizer.step()\n", 5),
    # a list of lengths computed from the batch, then its max
    ("import torch\nfor batch in raw_batches:\n    out = model(x)\n    lens = [len(s) for s in batch]\n    r = out[:, : max(lens)]\n"
     "    out.sum().backward()\n    optimizer.step()\n", 5),
    # the length of a Python list the batch holds
    ("import torch\nfor tokens, y in pairs:\n    out = model(y)\n    r = out[:, : len(tokens)]\n    out.sum().backward()\n    optimizer.step()\n", 4),
])
def test_a_length_read_from_the_batch_varies(src, line):
    found = [f for f in lint_source(src, "t.py") if f.code == "XLA009"]
    assert [f.line for f in found] == [line] and "a length read from the batch" in found[0].message, found


@pytest.mark.parametrize("body", [
    "    r = out[: len(x)]\n",  # len() of a tensor: its size(0), fixed for a fixed-shape input
    "    r = out[: len(batch)]\n",  # the number of fields of a batch
])
def test_the_length_of_a_tensor_or_a_batch_is_silent(body):
    head = "import torch\nfor step, batch in enumerate(loader):\n    x = batch[0].to(device)\n    out = model(x)\n"
    assert not _xla009(body, head)


# ------------------------------------------------------------------ into the functions it is passed to
HELPERS = (
    "import torch\n"
    "def crop(x, n):\n    return x[:, :n]\n"
    "def pos(x, k):\n    m = k + 1\n    return torch.arange(m, device=x.device)\n"
)


def test_a_counter_passed_to_a_helper_is_followed():
    src = HELPERS + (
        "lengths = [int(v) for v in raw]\n"
        "for step, (x, y) in enumerate(loader):\n    out = model(x)\n"
        "    a = crop(out, lengths[step])\n    b = pos(out, step)\n"
        "    (a.sum() + b.sum()).backward()\n    optimizer.step()\n"
    )
    found = [f for f in lint_source(src, "t.py") if f.code == "XLA009"]
    assert [f.line for f in found] == [3, 6], found
    assert "the parameter `n`, passed `lengths[step]`" in found[0].message
    assert "derived from the parameter `k`, passed `step` (the loop counter)" in found[1].message


def test_a_counter_passed_through_two_helpers_is_followed():
    src = HELPERS + (
        "def body(step, x):\n    x = x.to(device)\n    n = step * 2\n    return crop(x, n).sum()\n"
        "for step, (x, y) in enumerate(loader):\n    loss = body(step, model(x))\n    loss.backward()\n    optimizer.step()\n"
    )
    found = [f for f in lint_source(src, "t.py") if f.code == "XLA009"]
    assert [f.line for f in found] == [3], found


@pytest.mark.parametrize("calls", [
    "    a = crop(out, 16)\n    b = pos(out, cfg.max_len)\n",  # constants and config values
    "    a = crop(out, step % 4)\n    b = pos(out, min(step, 3))\n",  # bucketed
    "    a = crop(out, out.size(1))\n    b = pos(out, x.size(0))\n",  # sizes of fixed-shape inputs
])
def test_a_helper_called_with_constant_or_bucketed_values_is_silent(calls):
    src = HELPERS + "for step, (x, y) in enumerate(loader):\n    out = model(x)\n" + calls + (
        "    (a.sum() + b.sum()).backward()\n    optimizer.step()\n")
    assert not [f for f in lint_source(src, "t.py") if f.code == "XLA009"]


def test_a_helper_called_with_the_counter_outside_the_step_loop_is_silent():
    src = HELPERS + (
        "for i in range(3):\n    warm = crop(torch.zeros(2, 8, device=device), i)\n"
        "for x, y in loader:\n    out = model(x)\n    out.sum().backward()\n    optimizer.step()\n"
    )
    assert not [f for f in lint_source(src, "t.py") if f.code == "XLA009"]


def test_a_tensor_passed_to_a_helper_is_not_a_python_int():
    src = (
        "import torch\ndef pick(x, idx):\n    return x[idx]\n"
        "for step, (x, y) in enumerate(loader):\n    out = model(x)\n    r = pick(out, y)\n    r.sum().backward()\n    optimizer.step()\n"
    )
    assert not [f for f in lint_source(src, "t.py") if f.code == "XLA009"]


def test_the_item_of_a_range_under_enumerate_is_a_counter():
    src = ("import torch\ndata = torch.randn(1000, 4).to(device)\n"
           "for batch, i in enumerate(range(0, data.size(0) - 1, 35)):\n    x = data[i:i + 35]\n"
           "    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n")
    found = [f for f in lint_source(src, "t.py") if f.code == "XLA009"]
    assert [f.line for f in found] == [4], found


def test_a_size_read_from_a_device_tensors_values_varies_where_it_runs_every_step():
    src = ("import torch\nimport torch.nn as nn\nclass Decoder(nn.Module):\n"
           "    def forward(self, enc, caption_lengths):\n        decode_lengths = (caption_lengths - 1).tolist()\n"
           "        preds = torch.zeros(enc.size(0), max(decode_lengths), 10, device=enc.device)\n"
           "        fixed = torch.zeros(enc.size(0), 10, device=enc.device)\n"
           "        return preds, fixed\n")
    found = [f for f in lint_source(src, "t.py") if f.code == "XLA009"]
    assert [f.line for f in found] == [6] and "read from a device tensor's values" in found[0].message, found


def test_a_value_read_once_before_the_loop_is_silent():
    src = ("import torch\nn = int(sizes.sum().to(device))\nfor x, y in loader:\n    out = model(x)\n"
           "    r = out[:, :n]\n    r.sum().backward()\n    optimizer.step()\n")
    assert not [f for f in lint_source(src, "t.py") if f.code == "XLA009"]


def test_the_elements_of_a_python_container_are_unknown_not_python_values():
    """``batches = []`` filled by ``batches.append(batch)`` holds batches: a loop over it binds values of unknown
    kind, never "a Python value" that would tell a `forward` its `batch` parameter is not a tensor (OpenNMT's
    trainer lost its loss's mask writes that way)."""
    from xlalint.semantics import kinds as K

    assert K.element_of(K.NOT_TENSOR) is K.UNKNOWN
    assert K.element_of(K.TENSORS) == K.TENSOR and K.element_of(K.CPU_TENSORS) == K.CPU_TENSOR


def test_slices_of_a_dict_of_python_lists_are_list_operations():
    """open_clip's contrastive accumulation keeps each micro-batch's features in a dict of lists
    (``feats[key] = [val]``, then ``.append``) and rebuilds them with ``kept[:j] + [new] + kept[j + 1:]``:
    list slices, not tensor slices at a changing bound (``feats[key]`` is a list, not a tensor)."""
    src = (
        "import torch\n"
        "def train(model, loader, opt, accum_freq, device):\n"
        "    feats = {}\n"
        "    for i, (images, texts) in enumerate(loader):\n"
        "        images = images.to(device)\n"
        "        with torch.no_grad():\n"
        "            for key, val in model(images).items():\n"
        "                if key in feats:\n"
        "                    feats[key].append(val)\n"
        "                else:\n"
        "                    feats[key] = [val]\n"
        "        for j in range(accum_freq):\n"
        "            out = model(images)\n"
        "            for key, val in feats.items():\n"
        "                kept = feats[key]\n"
        "                loss = torch.cat(kept[:j] + [out[key]] + kept[j + 1:]).sum()\n"
        "            loss.backward()\n"
        "        opt.step()\n"
    )
    assert [f for f in lint_source(src, "t.py") if f.code == "XLA009"] == []
    # its twin: the same slices of a tensor
    twin = src.replace("kept = feats[key]", "kept = out[key]").replace("kept[:j] + [out[key]] + kept[j + 1:]",
                                                                       "[kept[:j], kept[j + 1:]]")
    assert [f.line for f in lint_source(twin, "t.py") if f.code == "XLA009"] == [16, 16]


@pytest.mark.parametrize("outer, flagged", [
    # PPO's minibatch loop inside the update epochs: the same offsets every epoch, compiled once, then cached
    ("    for epoch in range(args.update_epochs):\n        inds = torch.randperm(args.batch_size, device=dev)\n", False),
    # the offsets depend on what the outer loop binds: new values from pass to pass
    ("    for epoch in range(args.update_epochs):\n        n = int(rollout_len[epoch])\n"
     "        inds = torch.randperm(args.batch_size, device=dev)\n", True),
    # no loop around it: every offset is new
    ("    if True:\n        inds = torch.randperm(args.batch_size, device=dev)\n", True),
])
def test_a_chunk_loop_that_repeats_its_offsets_inside_another_loop_is_a_bounded_set(outer, flagged):
    bound = "n" if "n = int" in outer else "args.batch_size"
    src = (
        "import torch\n"
        "def update(agent, obs, opt, args, dev, rollout_len):\n"
        + outer +
        f"        for start in range(0, {bound}, args.minibatch_size):\n"
        "            mb = inds[start:start + args.minibatch_size]\n"
        "            loss = agent(obs[mb]).sum()\n"
        "            opt.zero_grad()\n"
        "            loss.backward()\n"
        "            opt.step()\n"
    )
    lines = [f.line for f in lint_source(src, "t.py") if f.code == "XLA009"]
    assert bool(lines) == flagged, (lines, src)


MICRO_BATCHES = '''import torch
import torch_xla


def record(stats, idx, loss):
    stats["loss"][idx] = loss.detach()


class TrainModule:
    def __init__(self, model, opt, n):
        self.model, self.opt, self.n = model, opt, n

    def train_batch(self, micro_batches, stats):
        for i in range(self.n):
            loss = self.model(micro_batches[i]).mean()
            loss.backward()
            record(stats, i, loss)
            stats["x"][i] = loss.detach()
        self.opt.step()


def main(model, opt, loader):
    stats = {"loss": torch.zeros(4, device=torch_xla.device()), "x": torch.zeros(4, device=torch_xla.device())}
    module = TrainModule(model, opt, 4)
    for batch in loader:
        module.train_batch(batch, stats)
        torch_xla.sync()
'''


def test_a_micro_batch_loop_of_a_per_step_function_repeats_its_counter_every_step():
    """open-instruct's GRPO step: `for i in range(n)` over the micro-batches of a `train_batch` the step loop
    calls; the counter takes the same values on every call, so the graphs it makes are compiled on the first
    step and cached after: not a new graph every step (in the function and in a helper it passes `i` to). The
    same counter in the program's own step loop still varies."""
    assert not [f for f in lint_source(MICRO_BATCHES, "t.py") if f.code == "XLA009"]
    main_loop = MICRO_BATCHES.replace("    for batch in loader:\n        module.train_batch(batch, stats)\n",
                                      "    buf = torch.zeros(1000, device=torch_xla.device())\n"
                                      "    for i, batch in enumerate(loader):\n        buf[i] = model(batch).sum()\n"
                                      "        model(batch).sum().backward()\n        opt.step()\n")
    assert [f.line for f in lint_source(main_loop, "t.py") if f.code == "XLA009"] == [27]


def test_a_loop_in_a_function_named_for_one_batch_repeats_whoever_calls_it():
    """OLMo-core's `TrainModule.train_batch`, called by the framework: a function named for one step or one
    batch runs once per step even where no caller is in the project."""
    src = (
        "import torch\nimport torch_xla\n\n\n"
        "class TrainModule:\n"
        "    def __init__(self, model, opt, n):\n"
        "        self.model, self.opt, self.n = model, opt, n\n"
        "        self.stats = torch.zeros(n, device=torch_xla.device())\n\n"
        "    def train_batch(self, micro_batches):\n"
        "        for i in range(self.n):\n"
        "            loss = self.model(micro_batches[i]).mean()\n"
        "            loss.backward()\n"
        "            self.stats[i] = loss.detach()\n"
        "        self.opt.step()\n")
    assert not [f for f in lint_source(src, "t.py") if f.code == "XLA009"]
    renamed = src.replace("def train_batch(", "def train_epochs(")
    assert [f.line for f in lint_source(renamed, "t.py") if f.code == "XLA009"] == [14]
