"""Round 21 of the ledger, read after scoring: how often a line runs, and what a value is, where the source says it.

- a loop whose body ends with a `break` no `continue` skips runs once (a look at one batch): not a hot loop;
- in a periodic block, an evaluation's own result read in the statement that runs it is read once per evaluation;
- `model.eval()` that only brackets a checkpoint write runs no forward in eval mode: no eval graph;
- the tuples appended to a list attribute keep their kinds by position (`for weights, l1, l2 in self.reg:`);
- an argument that is no literal but never None (`maxlen=x.shape[1]`) decides `if maxlen is None:`.
Round 22, read after scoring:
- a parameter the function moves to the device itself is on the host before the move;
- a predicate that answers False or a periodic test guards its block every period; an early exit on all but a
  few chosen steps leaves the rest to those steps;
- a loop that runs its model under `no_grad` and trains nothing is an inference loop (its message says so);
- a plain tensor attribute of a model stays on the host when the model moves.
Each with its twin that stays a finding.
"""

from __future__ import annotations

from xlalint.analysis.source import lint_source

HEAD = "import torch\nimport torch_xla\ndevice = torch_xla.device()\n"


def _found(source: str) -> list:
    return sorted((f.line, f.code) for f in lint_source(source, "train.py"))


def _only(source: str, line: int, code: str) -> str:
    """The message of the one finding ``source`` must print, at ``line`` with ``code``."""
    found = lint_source(source, "train.py")
    assert [(f.line, f.code) for f in found] == [(line, code)]
    return found[0].message


def test_a_loop_that_breaks_at_the_end_of_its_body_runs_once():
    peek = HEAD + ("def show(model, loader):\n    for x, y in loader:\n        x = x.to(device)\n"
                   "        print(model(x))\n        {end}\n")
    assert _found(peek.format(end="break")) == []
    assert _found(peek.format(end="pass")) == [(7, "XLA006")]
    # a `continue` can skip the `break`: the loop may go on
    skipping = HEAD + ("def show(model, loader):\n    for x, y in loader:\n        x = x.to(device)\n"
                       "        if x.numel() == 0:\n            continue\n        print(model(x))\n        break\n")
    assert _found(skipping) == [(9, "XLA006")]


def test_an_evaluations_result_read_where_it_runs_is_read_once_per_evaluation():
    source = HEAD + (
        "def distortion(model, loader):\n    total = 0.\n    with torch.no_grad():\n        for x, y in loader:\n"
        "            total = total + model(x.to(device)).sum()\n    return total\n\n"
        "def train(model, loader, dev_loader, opt, log, every):\n    for step, (x, y) in enumerate(loader):\n"
        "        loss = model(x.to(device)).sum()\n        loss.backward()\n        opt.step()\n"
        "        if step % every == 0:\n            log.append(distortion(model, dev_loader).item())\n"
        "            log.append(loss.item())\n        torch_xla.sync()\n")
    # the training loss read after it is still a read of the step's own graph... after the evaluation's cut
    found = _found(source)
    assert (17, "XLA001") not in found, found
    twin = source.replace("log.append(distortion(model, dev_loader).item())", "log.append(model(x.to(device)).sum().item())")
    assert (17, "XLA001") in _found(twin)


def test_eval_mode_around_a_checkpoint_write_only_is_no_switch():
    loop = HEAD + ("for step, x in enumerate(loader):\n    model.train()\n    model(x.to(device)).sum().backward()\n"
                   "    optimizer.step()\n    if step % 1000 == 0:\n        model.eval()\n        {between}\n"
                   "        model.train()\n    torch_xla.sync()\n")
    assert _found(loop.format(between="torch.save(model.state_dict(), 'ckpt_{}.pth'.format(step))")) == []
    assert _found(loop.format(between="val = model(val_x.to(device))")) == [(9, "XLA004")]


def test_the_tuples_appended_to_a_list_attribute_keep_their_kinds():
    source = HEAD + (
        "class Base(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.reg = []\n"
        "    def add_reg(self, weights, l1=0.0, l2=0.0):\n        self.reg.append((list(weights), l1, {l2}))\n"
        "    def reg_loss(self):\n        total = torch.zeros((1,), device=device)\n"
        "        for weights, l1, l2 in self.reg:\n            for w in weights:\n                if l1 > 0:\n"
        "                    total += torch.sum(l1 * torch.abs(w))\n                if l2 > 0:\n"
        "                    total += torch.sum(l2 * w * w)\n        return total\n"
        "    def forward(self, x):\n        return x.sum() + self.reg_loss()\n")
    assert _found(source.format(l2="l2")) == []
    assert _found(source.format(l2="torch.tensor(l2, device=device)")) == [(16, "XLA002")]


def test_an_argument_never_none_decides_an_is_none_test():
    source = HEAD + (
        "def mask(lengths, maxlen=None):\n    if maxlen is None:\n        print(lengths.max())\n"
        "    return torch.arange(0, 8, device=lengths.device) < lengths[:, None]\n\n"
        "def train(model, loader, opt):\n    for x, lengths in loader:\n        x, lengths = x.to(device), lengths.to(device)\n"
        "        m = mask(lengths, maxlen={arg})\n        model(x, m).sum().backward()\n        opt.step()\n"
        "        torch_xla.sync()\n")
    assert _found(source.format(arg="x.shape[1]")) == []
    assert _found(source.format(arg="None")) == [(6, "XLA006")]


def test_a_has_flag_of_a_models_output_is_a_bool():
    """uvadlc's VAE notebook: `qz = self.inf_model(x)` is a distribution; `if qz.has_rsample:` tests a bool."""
    source = HEAD + (
        "class VAE(torch.nn.Module):\n    def __init__(self, inf_model):\n        super().__init__()\n"
        "        self.inf_model = inf_model\n\n    def forward(self, x):\n        qz = self.inf_model(x)\n"
        "        if qz.{attr}:\n            return qz.rsample()\n        return qz.sample()\n")
    assert _found(source.format(attr="has_rsample")) == []
    assert _found(source.format(attr="mean.sum() > 0")) == [(11, "XLA002")]


def test_a_nested_function_takes_its_kinds_from_the_calls_of_its_function():
    """Tramac's `SegmentationMetric.update` hands its arguments to a nested `evaluate_worker`, which hands them to
    module helpers: the helper's `target.cpu()` is a device read per evaluation batch. Called with host tensors, it
    is not."""
    source = HEAD + (
        "def histogram(output, target, nclass):\n    target = target.float() + 1\n"
        "    return torch.histc(target.cpu(), bins=nclass, min=1, max=nclass)\n\n"
        "class Metric:\n    def __init__(self, nclass):\n        self.nclass = nclass\n        self.hist = 0\n\n"
        "    def update(self, preds, labels):\n        def worker(pred, label):\n"
        "            self.hist = self.hist + histogram(pred, label, self.nclass)\n"
        "        if isinstance(preds, torch.Tensor):\n            worker(preds, labels)\n\n"
        "def evaluate(model, loader):\n    metric = Metric(3)\n    with torch.no_grad():\n        for x, y in loader:\n"
        "            out = model(x.to(device))\n            metric.update({args})\n            torch_xla.sync()\n")
    assert _found(source.format(args="out, y.to(device)")) == [(6, "XLA001")]
    assert _found(source.format(args="torch.zeros(2, 3), torch.zeros(2)")) == []


def test_a_periodic_call_of_an_evaluation_is_not_after_itself():
    """The same-statement read of an evaluation's result is once per evaluation; the evaluation's own lines are not
    (trl's `_generate_and_score_completions`, called every `generate_every` steps, reads its metrics there)."""
    source = HEAD + (
        "def generate(model, x):\n    n = x.sum().item()\n    outs = []\n    with torch.no_grad():\n"
        "        for i in range(4):\n            outs.append(model(x))\n    return torch.stack(outs), n\n\n"
        "def train(model, loader, opt):\n    for step, x in enumerate(loader):\n        x = x.to(device)\n"
        "        loss = model(x).sum()\n        loss.backward()\n        opt.step()\n"
        "        if step % 10 == 0:\n            samples, n = generate(model, x)\n        torch_xla.sync()\n")
    assert _found(source) == [(5, "XLA001")]


def test_a_parameter_the_function_moves_itself_is_on_the_host_before_the_move():
    """Ledger round 22 (read after scoring): `train_step(batch)` reads the loader's batch, then moves it with a
    project `move_to_device(batch, self.device)`: before the move the batch is on the host."""
    source = HEAD + (
        "def move_to_device(o, device):\n    return {k: v.to(device) for k, v in o.items()}\n\n"
        "class Trainer:\n    def train_step(self, batch):\n        n = batch['mask'].sum().item()\n"
        "        {move}\n        loss = self.model(batch['x']).sum()\n        loss.backward()\n"
        "        return batch['x'].sum().item()\n\n"
        "    def fit(self, loader):\n        for batch in loader:\n            self.train_step(batch)\n"
        "            torch_xla.sync()\n")
    assert _found(source.replace("{move}", "batch = move_to_device(batch, self.device)")) == [(13, "XLA001")]
    assert _found(source.replace("{move}", "batch = {k: v.to(self.device) for k, v in batch.items()}")) == [
        (13, "XLA001")]
    # a move that keeps what is no tensor as it is leaves a batch on the device after it
    assert _found(source.replace("{move}", "batch = {k: v.to(self.device) if torch.is_tensor(v) else v "
                                           "for k, v in batch.items()}")) == [(13, "XLA001")]
    # one tensor moved is as often a defensive no-op: no claim about it before the move
    one = source.replace("def train_step(self, batch):", "def train_step(self, x):").replace(
        "batch['mask']", "x").replace("batch['x']", "x")
    assert _found(one.replace("{move}", "x = x.to(self.device)")) == [(9, "XLA001"), (13, "XLA001")]
    # a move to where another tensor is aligns the batch with it, which may be there already
    assert _found(source.replace("{move}", "batch = {k: v.to(self.model.weight.device) for k, v in batch.items()}")) \
        == [(9, "XLA001"), (13, "XLA001")]
    # a mover that moves the batch in place (torchtune's `batch_to_device(batch, device)`) leaves it on the device
    assert _found(source.replace("{move}", "batch_to_device(batch, self.device)")) == [(9, "XLA001"), (13, "XLA001")]
    # the same in the loop itself: after an in-place mover the loop's batch is on the device
    loop = HEAD + (
        "def train(model, loader, opt):\n    for batch in loader:\n        batch_to_device(batch, device)\n"
        "        loss = model(batch['x']).sum()\n        loss.backward()\n        opt.step()\n"
        "        print(batch['x'].sum().item())\n        torch_xla.sync()\n")
    assert _found(loop) == [(10, "XLA001")]
    # no move in the step: the batch is what the loop hands over, read before and after
    assert _found(source.replace("{move}", "pass")) == [(9, "XLA001"), (13, "XLA001")]
    # a cast is no move, nor a copy to the host, nor a copy of a part moved in passing (a defensive move)
    assert _found(source.replace("{move}", "batch = batch.to(torch.float32)")) == [(9, "XLA001"), (13, "XLA001")]
    assert (9, "XLA001") in _found(source.replace("{move}", "batch = batch.to('cpu')"))
    assert _found(source.replace("{move}", "same = batch['x'][:, 1:].to(self.device) == 0")) == [
        (9, "XLA001"), (13, "XLA001")]


def test_a_predicate_that_answers_false_or_a_period_guards_its_block_every_period():
    source = HEAD + (
        "class Trainer:\n    def should_log(self):\n        if self.sink is None:\n            return {never}\n"
        "        return self.global_step % self.interval == 0\n\n"
        "    def fit(self, loader):\n        for x in loader:\n            loss = self.model(x.to(device)).sum()\n"
        "            loss.backward()\n            log = self.should_log()\n            if log:\n"
        "                print(loss.item())\n            torch_xla.sync()\n")
    assert "every `self.interval` steps" in _only(source.replace("{never}", "False"), 16, "XLA001")
    assert "every step" in _only(source.replace("{never}", "self.always"), 16, "XLA001")


def test_an_early_exit_on_all_but_a_few_chosen_steps_leaves_the_rest_to_those_steps():
    source = HEAD + (
        "class Trainer:\n    def log_samples(self, logits):\n        if self.cfg.steps is None or {test}:\n"
        "            return\n        print(logits.argmax(-1).tolist())\n\n"
        "    def fit(self, loader):\n        for x in loader:\n            logits = self.model(x.to(device))\n"
        "            logits.sum().backward()\n            self.log_samples(logits)\n            torch_xla.sync()\n")
    assert _found(source.replace("{test}", "self.global_step not in self.cfg.steps")) == []
    assert _found(source.replace("{test}", "self.global_step != 0")) == []
    # the other way round, the rest runs on every step but a few; and a range may hold most steps
    assert _found(source.replace("{test}", "self.global_step in self.cfg.steps")) == [(8, "XLA001")]
    assert _found(source.replace("{test}", "self.global_step not in range(10, 10**9)")) == [(8, "XLA001")]
    # a negated flag, or `!=` between two values that both move, chooses no step by the count (kohya, on the ledger)
    assert _found(source.replace("{test}", "not self.done")) == [(8, "XLA001")]
    assert _found(source.replace("{test}", "self.global_step != self.next_sample")) == [(8, "XLA001")]


def test_a_loop_that_runs_its_model_under_no_grad_and_trains_nothing_is_an_inference_loop():
    """Ledger round 22: a prediction loop after training (`with torch.no_grad():` in the loop's body) reads every
    batch of an inference pass, not every training step; a training loop with a no-grad teacher stays a step."""
    source = HEAD + (
        "def run(model, loader, opt):\n    preds = []\n    for batch in loader:\n        batch = batch.to(device)\n"
        "        with torch.no_grad():\n            out = model(batch).argmax(dim=-1).cpu()\n"
        "            preds.append(out)\n{train}")
    assert "every evaluation batch" in _only(source.replace("{train}", ""), 9, "XLA001")
    teacher = "        loss = model(batch).sum()\n        loss.backward()\n        opt.step()\n        torch_xla.sync()\n"
    # a caching pass under no_grad before the training loop of the same function stays work done before training,
    # and the training loop's own reads are still every step (diffusers' latents cache)
    cache_then_train = HEAD + (
        "def train(vae, model, loader, opt):\n    cache = []\n    for batch in loader:\n        with torch.no_grad():\n"
        "            cache.append(vae(batch.to(device)))\n    for step, batch in enumerate(loader):\n"
        "        loss = model(cache[step]).sum()\n        loss.backward()\n        opt.step()\n"
        "        print(loss.detach().item())\n        torch_xla.sync()\n")
    assert "every step" in _only(cache_then_train, 13, "XLA001")
    assert "every step" in _only(source.replace("{train}", teacher), 9, "XLA001")


def test_a_plain_tensor_attribute_of_a_model_stays_on_the_host_when_the_model_moves():
    """`model.to(device)` moves parameters and buffers, not a tensor kept in a plain attribute."""
    source = HEAD + (
        "import torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = nn.Linear(4, 4)\n        self.counts = torch.zeros(4)\n"
        "        self.register_buffer('seen', torch.zeros(4))\n\n    def forward(self, x):\n"
        "        return self.lin(x)\n\n"
        "def train(loader):\n    model = Model().to(device)\n    opt = torch.optim.SGD(model.parameters(), 0.1)\n"
        "    for x in loader:\n        loss = model(x.to(device)).sum()\n        loss.backward()\n        opt.step()\n"
        "        print(model.counts.sum().item())\n        print(model.seen.sum().item())\n        torch_xla.sync()\n")
    assert _found(source) == [(24, "XLA001")]
