"""XLA009's inference of step-varying Python ints (xlalint/semantics/step_values.py), case by case."""

from __future__ import annotations

import pytest

from xlalint.engine import lint_source

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
