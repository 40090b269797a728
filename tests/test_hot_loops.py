"""Hot loops and hooks (issue #13 items 1 and 2): loops that run the model every iteration (decoding,
evaluation, rollouts) and functions the framework calls every step (callback hook methods, registered
hooks, callbacks called through a list) are per-step code, within a file and across modules.

Each case names the line and the code it must find and the words its message must use; each has a
look-alike that must stay silent. The runtime proof of the same shapes is the fixture project
tests/fixtures/projects/decode_eval_hooks (tests/test_fixture_projects.py, ``--verify``).
"""

from __future__ import annotations

import textwrap

import pytest

from xlalint.run.project import lint_files
from xlalint.config import build_settings
from xlalint.analysis.source import lint_source

HEAD = "import torch\nimport torch.nn.functional as F\nimport torch_xla\ndevice = torch_xla.device()\n"


def lint(body: str) -> list:
    src = HEAD + textwrap.dedent(body)
    return [(f.line - HEAD.count("\n"), f.code, f.message) for f in lint_source(src, "snippet.py")]


def at(found, line, code):
    hits = [m for ln, c, m in found if ln == line and c == code]
    assert hits, f"no {code} at line {line}: {found}"
    return hits[0]


# ---- decoding loops ---------------------------------------------------------------------------------
NANOGPT_GENERATE = """
class GPT(torch.nn.Module):
    def forward(self, idx):
        return idx

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, eos_id, top_k=None):
        for _ in range(max_new_tokens):
            logits = self(idx)
            if top_k is not None:
                v, _ = torch.topk(logits, top_k)
                logits[logits < v[:, [-1]]] = -float("Inf")
            idx_next = logits.argmax(-1, keepdim=True)
            if idx_next == eos_id:
                break
            idx = torch.cat((idx, idx_next), dim=1)
        return idx
"""


def test_greedy_decode_loop_in_generate():
    found = lint(NANOGPT_GENERATE)
    assert "every decoding step" in at(found, 12, "XLA003")
    m = at(found, 14, "XLA002")
    assert "every decoding step" in m
    assert "stop test stays on the device" in m and "every K tokens" in m and "fixed-size buffers" in m
    # the ids grown by `torch.cat` every token, tested by the stop test: one graph per length (XLA009)
    assert {(ln, c) for ln, c, _ in found} == {(12, "XLA003"), (14, "XLA002"), (16, "XLA009")}


def test_while_decode_loop_and_periodic_guard():
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        def greedy(idx, max_len, eos):
            while idx.size(1) < max_len:
                logits = model(idx)
                nxt = logits[:, -1].argmax(-1)
                if (nxt == eos).all():
                    break
                if idx.size(1) % 10 == 0:
                    print(f"len {idx.size(1)}: {logits.max()}")
                idx = torch.cat([idx, nxt[:, None]], 1)
        """)
    assert "every decoding step" in at(found, 8, "XLA002")
    assert "every 10 decoding steps" in at(found, 11, "XLA006")


def test_beam_search_reads_every_decoding_step():
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        def beam_search(x, beams, steps):
            scores = torch.zeros(beams, device=device)
            for step in range(steps):
                out = model(x)
                top = out.topk(beams)
                keep = top.indices.tolist()
                scores = scores[top.values > 0]
            return scores
        """)
    assert "every decoding step" in at(found, 9, "XLA001")
    assert "every decoding step" in at(found, 10, "XLA003")


def test_decode_loop_on_the_cpu_is_silent():
    # a model fed host tensors runs on the host: nothing in its loop reaches the device
    found = lint("""
        cpu_model = torch.nn.Linear(8, 8)
        idx = torch.zeros(1, 8)
        for _ in range(16):
            logits = cpu_model(idx)
            if logits.argmax() == 0:
                break
            print(logits.max().item())
        """)
    assert found == []


def test_a_loop_over_a_model_output_computed_once_is_silent():
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)
        out = model(torch.zeros(4, device=device))
        for i in range(3):
            print(out[i].item())
        """)
    assert found == []


def test_a_loop_that_builds_layers_is_silent():
    found = lint("""
        class Net(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                self.layers = torch.nn.ModuleList()
                for i in range(n):
                    self.layers.append(torch.nn.Linear(4, 4))
                    print(self.layers[i].weight.sum().item())
        """)
    assert found == []


# ---- evaluation loops -------------------------------------------------------------------------------
def test_evaluation_over_range_with_get_batch():
    found = lint("""
        model = GPT().to(device)
        eval_iters = 20

        def get_batch(split):
            return torch.randn(2, 8, device=device), torch.randn(2, 8, device=device)

        @torch.no_grad()
        def estimate_loss():
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch("val")
                logits = model(X)
                loss = F.mse_loss(logits, Y)
                losses[k] = loss.item()
            return losses.mean()
        """)
    m = at(found, 15, "XLA001")
    assert "every evaluation batch" in m and "accumulate on the device" in m


def test_evaluation_over_a_loader_says_evaluation_batch_and_training_says_step():
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        def evaluate(val_loader):
            total = 0.0
            with torch.no_grad():
                for x, y in val_loader:
                    total += F.mse_loss(model(x), y).item()
            return total

        def train(train_loader, optimizer):
            for x, y in train_loader:
                loss = F.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                print(loss.item())
        """)
    assert "every evaluation batch" in at(found, 8, "XLA001")
    m = at(found, 16, "XLA001")
    assert "every step" in m and "evaluation" not in m


def test_epoch_loop_calling_an_evaluation_is_not_hot():
    # the epoch loop calls a whole evaluation (a loop of its own): what it reads it reads once per epoch
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        def evaluate(val_loader):
            total = torch.zeros((), device=device)
            for x, y in val_loader:
                total += F.mse_loss(model(x), y)
            return total

        for epoch in range(10):
            val_loss = evaluate(loader)
            print(f"epoch {epoch}: {val_loss.item():.4f}")
        """)
    assert found == []


def test_evaluation_reads_after_its_loop_are_silent():
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        def evaluate(val_loader):
            total = torch.zeros((), device=device)
            for x, y in val_loader:
                total += F.mse_loss(model(x), y)
                torch_xla.sync()
            return total.item()
        """)
    assert found == []


def test_rollout_loop():
    found = lint("""
        policy = torch.nn.Linear(4, 2).to(device)

        def collect(env, steps):
            obs = env.reset()
            for t in range(steps):
                logits = policy(torch.as_tensor(obs, device=device))
                action = logits.argmax().item()
                obs, reward, done, info = env.step(action)
                if done:
                    break
        """)
    m = at(found, 8, "XLA001")
    assert "every rollout step" in m and "once per rollout" in m


def test_what_a_gym_environment_returns_is_host_data():
    """Issue 32 cause 5 (round 15, read after scoring: lerobot's evaluation rollout): a Gym environment's step
    returns NumPy observations, rewards and an info dict (`info["is_success"].tolist()`), and `.numpy()` of
    anything is a host array (`reduce(...).numpy().mean().item()`): no device read. Its twin, the policy's
    device action read to step the environment, stays a finding."""
    found = lint("""
        import einops
        policy = torch.nn.Linear(4, 2).to(device)

        def rollout(env, steps):
            successes = []
            for t in range(steps):
                action = policy(torch.as_tensor(env.last_obs, device=device))
                obs, reward, terminated, truncated, info = env.step(action.cpu().numpy())
                ok = info["is_success"]
                successes.append(torch.tensor(ok.tolist()))
                rate = einops.reduce(torch.stack(successes, dim=1), "b n -> b", "any").numpy().mean()
                print(f"{rate.item() * 100:.1f}%")
        """)
    assert [(ln, c) for ln, c, _m in found] == [(9, "XLA001")]


def test_a_flag_named_entry_of_a_dict_of_tensors_is_a_setting():
    """Issue 32 cause 3 (optimum-neuron's generation loop, read): `model_kwargs["use_cache"]` (`"return_dict"`,
    `"output_attentions"`) in a dict that holds the generation's tensors is a setting's flag, not a device tensor;
    its twin, the mask beside it, is one."""
    found = lint("""
        def generate(model, input_ids, max_new_tokens, model_kwargs):
            input_ids = input_ids.to(device)
            model_kwargs = {k: v.to(device) for k, v in model_kwargs.items()}
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    out = model(input_ids, **model_kwargs)
                    if model_kwargs["use_cache"]:
                        model_kwargs["past"] = out.past
                    if model_kwargs["attention_mask"].sum() > 3:
                        break
                    input_ids = torch.cat([input_ids, out.logits.argmax(-1)[:, None]], dim=-1)
            return input_ids
        """)
    assert [(ln, c) for ln, c, _m in found if c == "XLA002"] == [(10, "XLA002")]


def test_what_takes_a_string_index_is_not_a_tensor():
    """Issue 32 cause 3 (round 16, read after scoring: sd-scripts' trainers): `for attrs in batch["custom_attributes"]`
    then `attrs["diff_output_preservation"]`: no tensor takes a string index, so the element is a dict (the
    batch's list of per-item settings), not a row of a device tensor. The twin, a row of the labels, is one."""
    found = lint("""
        def train(model, loader, opt, accelerator):
            model, opt, loader = accelerator.prepare(model, opt, loader)
            for batch in loader:
                loss = model(batch["images"])
                if "custom_attributes" in batch:
                    for i, attrs in enumerate(batch["custom_attributes"]):
                        if "preserve" in attrs and attrs["preserve"]:
                            loss = loss * 2
                for i, row in enumerate(batch["labels"]):
                    if row[0] > 0:
                        loss = loss + 1
                accelerator.backward(loss)
                opt.step()
                torch_xla.sync()
        """)
    assert [(ln, c) for ln, c, _m in found] == [(10, "XLA008"), (11, "XLA002")]


def test_a_method_no_tensor_has_says_its_receiver_is_not_a_tensor():
    """Issue 32 cause 3 (round 16, read after scoring: detectron2's mmdet wrapper): `gt[0].has("gt_masks")` of
    `Instances` moved with `.to(device)`: `torch.Tensor` has no `has` (the table is generated from the installed
    torch), so the call's result is not a device tensor. The twin, a tensor method's result, is one."""
    body = """
        def train(model, loader, opt):
            for batched_inputs in loader:
                gt = [x["instances"].to(device) for x in batched_inputs]
                if gt[0].{method}:
                    print("masks")
                loss = model(batched_inputs, gt)
                loss.backward()
                opt.step()
                torch_xla.sync()
        """
    assert lint(body.replace("{method}", 'has("gt_masks")')) == []
    assert {(ln, c) for ln, c, _ in lint(body.replace("{method}", "any()"))} == {(5, "XLA002")}


def test_the_tensor_attribute_table_is_the_installed_torchs():
    """The generated table is what `scripts/gen_tensor_methods.py` writes for the torch installed here."""
    import torch

    from xlalint.semantics.tensor_methods import TENSOR_ATTRIBUTES
    assert TENSOR_ATTRIBUTES == {n for n in dir(torch.Tensor) if not n.startswith("_")}


def test_astype_is_numpy_or_pandas_never_a_tensor():
    """Issue 32 cause 5 (open-instruct's table printer, read): `row.astype(str).tolist()` of a pandas row from
    `df.iterrows()` reads no device value: a torch tensor has no `.astype`. The model's output read beside it
    stays a finding."""
    found = lint("""
        def print_table(df, model, loader):
            for x in loader:
                out = model(x.to(device))
                for _, row in df.iterrows():
                    print(row.astype(str).tolist())
                print(out.sum().item())
                torch_xla.sync()
        """)
    assert [(ln, c) for ln, c, _m in found] == [(7, "XLA001")]


def test_asnumpy_is_mxnets_conversion_to_numpy():
    """Round 16, read after scoring (a course's MXNet data helper): `y = Y.asnumpy()` then `y[0, 0][0].tolist()`
    reads a NumPy array: torch has no `.asnumpy()`. Its twin reads the batch's device tensor."""
    body = """
        def dump(model, train_iter, ctx):
            for batch in train_iter:
                Y = batch.label[0].as_in_context(ctx)
                y = Y{conv}
                print(y[0, 0][0].tolist())
                torch_xla.sync()
        """
    assert lint(body.replace("{conv}", ".asnumpy()")) == []
    assert [(ln, c) for ln, c, _m in lint(body.replace("{conv}", ".to(device)"))] == [(6, "XLA001")]


def test_a_parameter_annotated_as_a_numpy_array_holds_host_data():
    """Issue 32 cause 5 (round 15, read after scoring: lerobot's image writer): `image_array: np.ndarray` (or
    `NDArray[np.float32]`) is a NumPy array, whatever a step passes it: its `.max().item()` reads no device
    value. Its twin annotated `torch.Tensor` and handed a device tensor stays a finding."""
    src = """
        import numpy.typing as npt
        policy = torch.nn.Linear(4, 2).to(device)

        def to_pil(image_array: {ann}, range_check: bool = True):
            if image_array.shape[0] == 3:
                image_array = image_array.transpose(1, 2, 0)
            if range_check:
                return image_array.max().item()

        def train(loader, opt):
            for x in loader:
                out = policy(x.to(device))
                out.sum().backward()
                opt.step()
                to_pil(out)
                torch_xla.sync()
        """
    for ann in ("np.ndarray", "npt.NDArray[np.float32]"):
        assert lint(src.format(ann=ann)) == [], ann
    assert [(ln, c) for ln, c, _m in lint(src.format(ann="torch.Tensor"))] == [(9, "XLA001")]


# ---- hooks ------------------------------------------------------------------------------------------
HOOKS = """
import lightning.pytorch as L
from transformers import TrainerCallback


class Monitor(L.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if outputs["loss"].item() > 10:
            print("spike")

    def on_train_epoch_end(self, trainer, pl_module):
        print(trainer.callback_metrics["loss"].item())


class Base(TrainerCallback):
    pass


class GradStop(Base):
    def on_step_end(self, args, state, control, model=None, **kwargs):
        norm = sum(p.grad.norm() for p in model.parameters())
        if norm > 100:
            control.should_training_stop = True

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        norm = sum(p.grad.norm() for p in model.parameters())
        if norm > 100:
            control.should_training_stop = True


class Probe:
    def __init__(self, model):
        self.stats = []
        model.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        self.stats.append(output.mean().item())

    def unused(self, output):
        self.stats.append(output.mean().item())


def on_batch(engine):
    print(engine.state.output.item())


def on_epoch(engine):
    print(engine.state.output.item())


def setup(trainer, Events):
    trainer.add_event_handler(Events.ITERATION_COMPLETED, on_batch)
    trainer.add_event_handler(Events.EPOCH_COMPLETED, on_epoch)
"""


def test_per_step_hooks_and_their_epoch_level_lookalikes():
    found = lint(HOOKS)
    got = {(ln, c) for ln, c, _ in found}
    assert got == {(8, "XLA001"), (22, "XLA002"), (37, "XLA001"), (44, "XLA001")}, found


def test_callbacks_called_through_a_list():
    found = lint("""
        class Callback:
            def on_step_end(self, trainer):
                pass

        class LossLogger(Callback):
            def on_step_end(self, trainer):
                print(trainer.loss.item())

            def on_fit_end(self, trainer):
                print(trainer.loss.item())

        class Report:  # not a callback: a method of the same name is not what the loop runs
            def on_step_end(self, trainer):
                print(trainer.loss.item())

        def fit(model, loader, optimizer, callbacks):
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                for cb in callbacks:
                    cb.on_step_end(loss)
        """)
    assert {(ln, c) for ln, c, _ in found} == {(8, "XLA001")}, found


def test_hooks_across_modules(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='p'\n")
    (tmp_path / "base.py").write_text("from transformers import TrainerCallback\n\n\nclass Base(TrainerCallback):\n    pass\n")
    (tmp_path / "cbs.py").write_text(textwrap.dedent("""
        from base import Base


        class Stop(Base):
            def on_step_end(self, args, state, control, model=None, **kwargs):
                norm = sum(p.grad.norm() for p in model.parameters())
                if norm > 100:
                    control.should_training_stop = True


        def record(module, inputs, output):
            print(output.mean().item())


        def at_epoch_end(state):
            print(state.loss.item())
        """))
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import torch
        import torch_xla
        import cbs

        model = torch.nn.Linear(4, 4).to(torch_xla.device())
        model.register_forward_hook(cbs.record)
        events.add_callback("on_epoch_end", cbs.at_epoch_end)
        """))
    files = sorted(str(p) for p in tmp_path.glob("*.py"))
    found = lint_files(files, build_settings(None), jobs=1, cache=None)
    got = {(f.path.rsplit("/", 1)[-1], f.line, f.code) for f in found}
    assert got == {("cbs.py", 8, "XLA002"), ("cbs.py", 13, "XLA001")}, found


def test_decode_loop_calling_a_helper_in_another_module(tmp_path):
    # the loop runs the model through a function of model.py: a hot loop across modules
    (tmp_path / "pyproject.toml").write_text("[project]\nname='p'\n")
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch


        def next_token(model, idx):
            return model(idx)[:, -1].argmax(-1)


        def count_params(model):
            return sum(p.numel() for p in model.parameters())
        """))
    (tmp_path / "sample.py").write_text(textwrap.dedent("""
        import torch
        import torch_xla
        from model import count_params, next_token

        lm = torch.nn.Linear(4, 4).to(torch_xla.device())
        idx = torch.zeros(1, 4, device=torch_xla.device())
        for t in range(32):
            tok = next_token(lm, idx)
            if tok == 0:
                break
        for layer in range(4):
            n = count_params(lm)
            if idx.sum() > n:
                break
        """))
    files = sorted(str(p) for p in tmp_path.glob("*.py"))
    found = lint_files(files, build_settings(None), jobs=1, cache=None)
    got = [(f.path.rsplit("/", 1)[-1], f.line, f.code) for f in found]
    assert got == [("sample.py", 10, "XLA002")], found
    assert "every iteration of a loop that runs the model" in found[0].message


@pytest.mark.parametrize("event,flagged", [("on_batch_end", True), ("on_epoch_end", False)])
def test_add_callback_event_decides(event, flagged):
    found = lint(f"""
        def log(loss: torch.Tensor):
            print(loss.item())

        trainer.add_callback("{event}", log)
        """)
    assert bool(found) is flagged, found


def test_trigger_check_on_an_accelerator_every_step():
    found = lint("""
        from accelerate import Accelerator

        accelerator = Accelerator()
        for step, batch in enumerate(loader):
            loss = model(batch)
            accelerator.backward(loss)
            optimizer.step()
            if accelerator.check_trigger():
                break
            torch_xla.sync()
        if accelerator.check_trigger():
            print("stopped early")
        """)
    assert [(ln, c) for ln, c, _ in found] == [(9, "XLA001")], found
    assert "all-reduces a device flag" in found[0][2]


def test_trainer_validation_method_switches_modes_across_modules(tmp_path):
    # item 4's XLA004 bullet: eval() in the trainer's validation method, train() in its training
    # method, both driven from one loop in another module
    (tmp_path / "pyproject.toml").write_text("[project]\nname='p'\n")
    (tmp_path / "trainer.py").write_text(textwrap.dedent("""
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = optimizer

            def train_step(self, x, y):
                self.model.train()
                loss = F.cross_entropy(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                return loss.detach()

            def validate(self, x, y):
                self.model.eval()
                with torch.no_grad():
                    return F.cross_entropy(self.model(x), y)

            def final_report(self, x, y):
                self.model.eval()
                return self.model(x)
        """))
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import torch
        import torch_xla
        from trainer import Trainer

        model = torch.nn.Linear(4, 2).to(torch_xla.device())
        trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
        for step, (x, y) in enumerate(loader):
            trainer.train_step(x, y)
            if step % 10 == 0:
                val = trainer.validate(vx, vy)
            torch_xla.sync()
        trainer.final_report(vx, vy)
        """))
    files = sorted(str(p) for p in tmp_path.glob("*.py"))
    found = lint_files(files, build_settings(None), jobs=1, cache=None)
    got = [(f.path.rsplit("/", 1)[-1], f.line, f.code) for f in found]
    assert got == [("trainer.py", 19, "XLA004")], found
    assert "every 10 steps" in found[0].message


def test_callback_registered_on_batch_end_switching_modes_and_reading_the_loss():
    # minGPT's shape: callbacks kept in a dict of lists, triggered by name from the step loop
    found = lint("""
        from collections import defaultdict

        class Trainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = optimizer
                self.callbacks = defaultdict(list)
                self.iter_num = 0

            def register_callback(self, onevent, callback):
                self.callbacks[onevent].append(callback)

            def run(self, loader):
                self.model.train()
                for x, y in loader:
                    logits, self.loss = self.model(x, y)
                    self.loss.backward()
                    self.optimizer.step()
                    for callback in self.callbacks.get("on_batch_end", []):
                        callback(self)
                    self.iter_num += 1

        def main(model, optimizer, loader):
            trainer = Trainer(model, optimizer)

            def batch_end_callback(trainer):
                if trainer.iter_num % 10 == 0:
                    print(f"loss {trainer.loss.item():.5f}")
                if trainer.iter_num % 500 == 0:
                    model.eval()
                    sample = model.generate(prompt, 20)
                    model.train()

            def epoch_end_callback(trainer):
                model.eval()
                model.train()

            trainer.register_callback("on_batch_end", batch_end_callback)
            trainer.register_callback("on_epoch_end", epoch_end_callback)
            trainer.run(loader)
        """)
    got = {(ln, c): m for ln, c, m in found}
    assert set(got) == {(29, "XLA001"), (31, "XLA004")}, found
    assert "every 10 steps" in got[(29, "XLA001")]
    assert "`batch_end_callback()` (a per-step hook) every 500 steps" in got[(31, "XLA004")]


def test_a_loop_over_prompts_calling_generate_does_not_make_its_preamble_per_token():
    # generate() is a whole decode: its own loop says what runs per token; its set-up runs once per call
    found = lint("""
        class LM(torch.nn.Module):
            def forward(self, idx):
                return idx

            @torch.no_grad()
            def generate(self, idx, max_new_tokens, eos_id):
                if (idx < 0).any():
                    idx = idx.clamp(min=0)
                for _ in range(max_new_tokens):
                    nxt = self(idx)[:, -1].argmax(-1, keepdim=True)
                    if nxt == eos_id:
                        break
                    idx = torch.cat((idx, nxt), dim=1)
                return idx

        lm = LM().to(device)
        for prompt in prompts:
            out = lm.generate(prompt, 16, 0)
        """)
    # the stop test, and the ids it grows by `torch.cat` every token (XLA009: one graph per length)
    assert [(ln, c) for ln, c, _ in found] == [(12, "XLA002"), (14, "XLA009")], found
    assert "every decoding step" in found[0][2]


def test_decoding_words_name_counting_loops_only():
    # `for sample in batch` is a loop over data, not over token positions: no "decoding step" wording
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        def sample_all(samples):
            for sample in samples:
                out = model(sample)
                print(out.max().item())
        """)
    assert [(ln, c) for ln, c, _ in found] == [(7, "XLA001")], found
    assert "every iteration of a loop that runs the model" in found[0][2]


def test_a_torch_generator_named_generator_does_not_run_the_model():
    # from transformers' feature extractors: `generator` is a torch.Generator here, not a GAN generator
    found = lint("""
        def apply_dither(waveform, audio_lengths):
            generator = torch.Generator(device=waveform.device)
            for i in range(waveform.shape[0]):
                valid = min(int(audio_lengths[i].item()), waveform.shape[1])
                generator.manual_seed(valid)
                waveform[i, :valid] += torch.randn(valid, device=waveform.device, generator=generator)
            return waveform
        """)
    assert found == []


def test_forward_hooks_registered_on_every_submodule():
    # transformers' DebugUnderflowOverflow shape: a bound method registered on every module
    found = lint("""
        class Detector:
            def __init__(self, model):
                for name, module in model.named_modules():
                    module.register_forward_hook(self.forward_hook)

            def forward_hook(self, module, inputs, outputs):
                if torch.isinf(outputs).any().item():
                    print("inf in", module)
        """)
    assert [(ln, c) for ln, c, _ in found] == [(8, "XLA001")], found


def test_torch_source_lookalikes_stay_silent():
    # from torch's own sources: a wrap-policy predicate, ScriptModule.define in a loop, a private
    # attribute a library sets on a parameter, read in a per-step forward pre-hook
    found = lint("""
        def recursive_wrap(module, auto_wrap_policy):
            for name, child in module.named_children():
                if auto_wrap_policy(module=child, recurse=True):
                    print(name)

        def bundle(model, definitions):
            for d in definitions:
                model.define(d)
                if torch.ones(2, device="xla").sum().item() > 1:
                    pass

        class Wrapper:
            def __init__(self, module):
                module.register_forward_pre_hook(self._wait_hook)

            def _wait_hook(self, module, *args):
                for p in module.parameters(recurse=False):
                    if not p.requires_grad or (hasattr(p, "_ddp_ignored") and p._ddp_ignored):
                        continue
        """)
    assert found == []


FRAMEWORK_HOOKS = """
import speechbrain as sb
from composer import Callback
from fastai.callback.core import Callback as FastCallback
from trl import SFTTrainer


class LossPrinter(Callback):
    def after_loss(self, state, logger):
        print(state.loss.item())

    def fit_end(self, state, logger):
        print(state.loss.item())

    def eval_batch_end(self, state, logger):
        print(state.loss.item())


class FastPrinter(FastCallback):
    def after_batch(self):
        print(self.learn.loss.item())

    def after_fit(self):
        print(self.learn.loss.item())


class ASR(sb.Brain):
    def compute_objectives(self, predictions, batch, stage):
        loss = self.modules.head(predictions).mean()
        if loss.isnan().any():
            print("nan")
        return loss

    def on_stage_end(self, stage, stage_loss, epoch):
        loss = self.modules.head(stage_loss).mean()
        if loss.isnan().any():
            print("nan")


class MyTrainer(SFTTrainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = model(**inputs).loss
        print(loss.item())
        return loss

    def save_model(self, output_dir=None, _internal_call=False):
        print(self.model(**self.last_inputs).loss.item())
"""


def test_framework_trainers_and_callbacks_per_step_methods_and_their_lookalikes():
    """Issue 33 item 6: composer's and fastai's batch events, speechbrain's Brain methods run by fit_batch(),
    a trl trainer's compute_loss are per step; fit/epoch/stage-level methods and evaluation events are not
    (their "every step" would be wrong)."""
    found = lint(FRAMEWORK_HOOKS)
    got = {(ln, c) for ln, c, _ in found}
    assert got == {(10, "XLA001"), (21, "XLA001"), (30, "XLA002"), (43, "XLA001")}, found
    assert all("every step" in m for _, _, m in found), found


# ---- whole generations per iteration ------------------------------------------------------------------
def test_a_loop_of_whole_generations_is_not_hot_but_its_evaluation_and_training_twins_are():
    """`out = model.generate(ids)` once per prompt: each iteration is a whole decode and its result is what
    the next line needs (silent). Over a loader's batches however wrapped (`tqdm(enumerate(loader))`), inside
    another loop (per sequence of a batch), or beside an inner loop that trains, the loop stays hot."""
    found = lint("""
        from tqdm import tqdm

        def chat(model, tok, prompts):
            for p in prompts:
                out = model.generate(tok(p, return_tensors="pt").input_ids.to(device), max_new_tokens=8)
                print(tok.decode(out[0].tolist()))

        def evaluate(model, loader):
            for step, batch in tqdm(enumerate(loader), total=10):
                out = model.generate(batch["ids"].to(device))
                print(out.cpu())

        def per_sequence(model, loader):
            for batch in loader:
                for seq in batch:
                    out = model.generate(seq.to(device)[None])
                    print(out.cpu())

        def train(model, loader, opt, steps):
            for i in range(steps):
                for _ in range(4):
                    loss = model(next(loader)).mean()
                    loss.backward()
                    opt.step()
                if i % 10 == 0:
                    print(loss.item())
                    sample = model.generate(torch.zeros(1, 1, device=device))
    """)
    lines = {ln for ln, c, _m in found}
    assert 7 not in lines, found
    at(found, 12, "XLA001")
    at(found, 18, "XLA001")
    at(found, 27, "XLA001")


def test_a_decode_word_at_the_end_of_one_word_names_a_decoding_loop():
    """EAGLE's `eagenerate`, `naivegenerate`: a no-grad method whose one-word name ends in a decode word
    runs a decoding loop ("every decoding step", not "every evaluation batch")."""
    found = lint("""
        class EaModel(torch.nn.Module):
            def forward(self, ids):
                return ids.float()

            @torch.no_grad()
            def eagenerate(self, input_ids, max_length=8, eos=2):
                for idx in range(max_length):
                    nxt = self(input_ids)[:, -1:].long()
                    input_ids = torch.cat([input_ids[:, 1:], nxt], dim=-1)
                    if nxt.item() == eos:
                        break
                return input_ids
    """)
    assert "every decoding step" in at(found, 11, "XLA001")


def test_a_barrier_under_an_xla_test_ends_the_step_for_what_follows():
    """Hugging Face's Trainer and its forks: `if is_torch_tpu_available(): xm.mark_step()` before the logging
    reads: on XLA the barrier always runs, so the reads after it find their values computed (a transfer,
    no extra graph). A barrier under another test (`if step % 10 == 0:`) still leaves the step's other
    reads before it."""
    step = """
        import torch_xla.core.xla_model as xm
        from transformers.utils import is_torch_tpu_available

        def train(model, loader, opt):
            for step, batch in enumerate(loader):
                loss = model(**batch).loss
                loss.backward()
                opt.step()
                if {test}:
                    xm.mark_step()
                print(loss.item())
    """
    found = lint(step.replace("{test}", "is_torch_tpu_available()"))
    assert not [f for f in found if f[1] == "XLA001"], found
    at(lint(step.replace("{test}", "step % 10 == 0")), 12, "XLA001")
    # lit-llama's decode: the per-token stop test after the guarded barrier is still a read every token
    found = lint("""
        import torch_xla.core.xla_model as xm

        @torch.no_grad()
        def generate(model, idx, max_new_tokens, eos_id):
            for _ in range(max_new_tokens):
                idx_next = model(idx)[0, -1].argmax()
                if idx.device.type == "xla":
                    xm.mark_step()
                if idx_next == eos_id:
                    return idx
            return idx
    """)
    at(found, 10, "XLA002")


def test_a_test_for_the_last_position_of_a_counted_decode_runs_once():
    """CoCa's generate (open_clip, CLIPA): `if cur_len + 1 == seq_len:` with `cur_len += 1` in the loop picks
    one iteration, the last, not every decoding step; the other branch still runs every step."""
    found = lint("""
        class CoCa(torch.nn.Module):
            def forward(self, x):
                return x.float()

            @torch.no_grad()
            def generate(self, seq_len, eos):
                out = torch.ones((2, 1), dtype=torch.long, device=device)
                cur_len = out.shape[1]
                while True:
                    logits = self(out)[:, -1]
                    mask = out[:, -1] == eos
                    sample = torch.zeros((out.shape[0], 1), dtype=torch.long, device=device)
                    if cur_len + 1 == seq_len:
                        sample[~mask, :] = eos
                    else:
                        sample[~mask, :] = logits[~mask].argmax(-1, keepdim=True)
                    out = torch.cat((out[:, 1:], sample), dim=-1)
                    cur_len += 1
                    if mask.all():
                        break
                return out
    """)
    lines = {ln for ln, c, _m in found if c == "XLA003"}
    assert 15 not in lines and 17 in lines, found


def test_names_an_evaluation_loop_bound_are_its_results_only_until_bound_again():
    # the baseline evaluation binds x, out and loss; the training loop binds them again: its reads are per step
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        def run(val_loader, train_loader, opt):
            with torch.no_grad():
                for x, y in val_loader:
                    out = model(x)
                    loss = F.mse_loss(out, y)
            print(loss.item())
            for x, y in train_loader:
                out = model(x)
                loss = F.mse_loss(out, y)
                loss.backward()
                opt.step()
                print(loss.item())
                torch_xla.sync()
        """)
    assert {(ln, c) for ln, c, _ in found} == {(15, "XLA001")}


def test_a_no_grad_loop_over_a_prompts_parts_is_no_evaluation_and_binds_no_result():
    # nanochat's CORE eval: a no-grad helper crops each prompt's parts in a loop (no model, no loader), then
    # runs the model and reads its prediction: a read per example, not an evaluation's result after its loop
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        @torch.no_grad()
        def evaluate_example(tokens, starts):
            new_starts = []
            for t, s in zip(tokens, starts):
                new_starts.append(s - 1)
            starts = new_starts
            preds = model(torch.stack(tokens).to(device)).argmax(-1)
            return preds[0, starts[0]].item()

        def evaluate_task(data):
            for tokens, starts in data:
                evaluate_example(tokens, starts)
        """)
    assert {(ln, c) for ln, c, _ in found} == {(11, "XLA001")}


def test_a_trainers_counter_handed_to_a_loss_forward_is_a_python_int():
    # stable-diffusion's LPIPSWithDiscriminator.forward(inputs, reconstructions, optimizer_idx, global_step, ...):
    # Lightning's step counter and optimizer index are Python ints; a forward's other parameters are tensors
    found = lint("""
        class LPIPSWithDiscriminator(torch.nn.Module):
            def forward(self, inputs, reconstructions, optimizer_idx, global_step, weight):
                if global_step < 1000 and optimizer_idx == 0:
                    inputs = inputs * 0.5
                if weight.mean() < 0.5:
                    inputs = inputs * 2
                return (inputs - reconstructions).abs().mean()
        """)
    assert {(ln, c) for ln, c, _ in found} == {(6, "XLA002")}


def test_a_counter_kept_in_a_dict_of_tensors_is_not_a_tensor():
    # torchtune's recipes restore `self.global_step = ckpt_dict[training.STEPS_KEY]` from a checkpoint that also
    # holds the model's tensors: the step count is a Python int, so `if self.global_step % n == 0:` reads nothing
    found = lint("""
        STEPS_KEY = "steps_run"

        class Recipe:
            def __init__(self, model):
                self.model = model.to(device)
                self.global_step = 0

            def restore(self, ckpt_dict: dict[str, torch.Tensor]):
                self.global_step = ckpt_dict[STEPS_KEY]
                self.scale = ckpt_dict["loss_scale"]

            def train(self, loader, opt):
                for x in loader:
                    loss = self.model(x.to(device)).sum() * self.scale
                    loss.backward()
                    opt.step()
                    self.global_step += 1
                    if self.global_step % 10 == 0:
                        print("step", self.global_step)
                    if self.scale > 1:
                        torch_xla.sync()
        """)
    assert {(ln, c) for ln, c, _ in found} == {(21, "XLA002")}


def test_a_setting_read_from_kwargs_that_also_carry_tensors_is_not_a_tensor():
    # lm-evaluation-harness: `generation_kwargs` carries the attention mask and the task's temperature; the
    # temperature, defaulted to 0.0, is a Python float (six findings read it as a device tensor)
    found = lint("""
        model = torch.nn.Linear(4, 4).to(device)

        def model_generate(context, **generation_kwargs):
            generation_kwargs["temperature"] = generation_kwargs.get("temperature", 0.0)
            if (temp := generation_kwargs.get("temperature")) == 0.0:
                generation_kwargs["do_sample"] = False
            if generation_kwargs.get("attention_mask").sum() > 0:
                context = context * 2
            return model(context)

        def generate_until(requests):
            for ctx, mask in requests:
                model_generate(ctx.to(device), attention_mask=mask.to(device), temperature=0.7)
        """)
    assert {(ln, c) for ln, c, _ in found} == {(8, "XLA002")}


def test_a_flash_attention_flag_guards_code_that_never_runs_on_xla():
    # Medusa's Mistral checks right padding only when `self.config._flash_attn_2_enabled` (flash-attn's kernels)
    found = lint("""
        class Model(torch.nn.Module):
            def forward(self, x, padding_mask):
                if padding_mask is not None and self.config._flash_attn_2_enabled:
                    right = padding_mask[:, -1].sum().item() != x.shape[0]
                if padding_mask is not None and self.config.use_sdpa:
                    right = padding_mask[:, -1].sum().item() != x.shape[0]
                return x
        """)
    assert {(ln, c) for ln, c, _ in found} == {(7, "XLA001")}


def test_a_branch_taken_only_while_torch_traces_never_runs_in_an_xla_step():
    """Issue 32 cause 7 (round 16, read after scoring: detectron2's ImageList): `if torch.compiler.is_compiling():
    torch._check(u0.item() >= 0)` runs while dynamo traces (likewise `torch.jit.is_scripting()`/`is_tracing()`),
    never in the eager, lazy XLA step; the same read under a plain flag stays."""
    body = """
        class Model(torch.nn.Module):
            def forward(self, x, sizes):
                u0 = sizes.max() - x.shape[-1]
                if not torch.jit.is_scripting():
                    if version_ok and {test}:
                        torch._check(u0.item() >= 0)
                return x
        """
    for test in ("torch.compiler.is_compiling()", "torch._dynamo.is_compiling()", "torch.jit.is_tracing()"):
        assert lint(body.replace("{test}", test)) == [], test
    assert {(ln, c) for ln, c, _ in lint(body.replace("{test}", "self.strict"))} == {(7, "XLA001")}


def test_a_loop_that_stops_after_its_first_few_passes_is_no_step():
    # llm-foundry's dataloader `__main__`: `for i, batch in enumerate(dataloader): if i >= 5: break` peeks at
    # five batches; the same loop without the early break reads every batch
    body = """
        model = torch.nn.Linear(4, 4).to(device)

        def peek(loader):
            for i, batch in enumerate(loader):
                {stop}
                out = model(batch.to(device))
                print(out.max().item())
        """
    assert lint(body.replace("{stop}", "if i >= 5:\n                    break")) == []
    assert {(ln, c) for ln, c, _ in lint(body.replace("{stop}", "pass"))} == {(8, "XLA001")}


def test_attention_implementations_named_for_cuda_kernels_guard_code_that_never_runs_on_xla():
    # MPT's `if attn_impl == 'flash':` (flash-attn), beside its `'torch'` implementation
    found = lint("""
        class Block(torch.nn.Module):
            def forward(self, x, attention_mask, attn_impl):
                if attn_impl == 'flash' and attention_mask[:, 0].sum() != x.shape[0]:
                    raise NotImplementedError("left padding")
                if attn_impl == 'torch' and attention_mask[:, 0].sum() != x.shape[0]:
                    x = x * 2
                return x
        """)
    assert {(ln, c) for ln, c, _ in found} == {(6, "XLA002")}


def test_a_loop_nested_in_one_before_training_runs_once():
    """Issue 32 cause 4 (round 16, read after scoring: sd-scripts' sample-prompt cache): `for prompt_dict in
    prompts: for p in [prompt, negative]: cache[p] = encode(p)` before the training loop runs once per run, the
    inner loop too. The twin caches inside the training loop."""
    body = """
        def train(model, encoder, loader, opt, prompts):
            cache = {}
            {cache_before}
            for x in loader:
                {cache_inside}
                loss = model(x.to(device)).sum()
                loss.backward()
                opt.step()
                torch_xla.sync()
        """
    caching = ("for prompt in prompts:\n{i}    for p in [prompt['prompt'], prompt['negative']]:\n"
               "{i}        emb = encoder(p.to(device))\n{i}        cache[p] = emb[emb > 0]")
    before = body.replace("{cache_before}", caching.format(i=" " * 12)).replace("{cache_inside}", "pass")
    assert lint(before) == []
    inside = body.replace("{cache_before}", "pass").replace("{cache_inside}", caching.format(i=" " * 16))
    assert {(ln, c) for ln, c, _ in lint(inside)} == {(9, "XLA003")}


def test_a_tokenizer_call_before_the_loop_that_uses_it_pads_once():
    """Issue 32 cause 2 (BLIP's VQA evaluation, bigcode's TokenizedDataset, read): the answer list tokenized with
    `padding="longest"` once, before the loop whose every pass uses it, has one shape for the whole loop. Its
    twin, the batch's texts tokenized inside the training loop, pads each batch to its own longest; so does a
    server's prefill (optimum-tpu's), whose loop after the call goes over the padded batch's own rows: the function
    runs per request batch."""
    found = lint("""
        def prefill(model, tokenizer, slots):
            inputs = tokenizer([s.text for s in slots], padding=True, return_tensors="pt")
            for i, slot in enumerate(slots):
                slot.reset(inputs.input_ids[i : i + 1].to(device))
            return model(inputs.input_ids.to(device))

        def evaluation(model, data_loader, tokenizer, answer_list):
            answer_input = tokenizer(answer_list, padding="longest", return_tensors="pt").to(device)
            results = []
            for image, question in data_loader:
                results.append(model(image.to(device), question, answer_input.input_ids))
            return results

        def train(model, data_loader, tokenizer, opt):
            for texts, labels in data_loader:
                enc = tokenizer(texts, padding=True, return_tensors="pt").to(device)
                loss = model(**enc, labels=labels.to(device)).loss
                loss.backward()
                opt.step()
                torch_xla.sync()
        """)
    assert [(ln, c) for ln, c, _m in found] == [(3, "XLA005"), (17, "XLA005")]


def test_a_tokenizer_call_on_a_batch_of_one_text_pads_nothing():
    """Issue 32 cause 2 (lerobot's task-text encoder and its annotation processor, read): `tokenizer([text],
    padding=True)` tokenizes a batch of one written out: padding to the longest pads nothing, so a message saying
    each batch is padded to its own longest names no cause there. Its twin, the batch's texts, stays a finding."""
    body = """
        def train(model, data_loader, tokenizer, processor, opt):
            for task, texts, images in data_loader:
                enc = tokenizer({texts}, padding=True, return_tensors="pt").to(device)
                inputs = processor(text={texts}, images=images, padding=True, return_tensors="pt").to(device)
                loss = model(**enc, **inputs).loss
                loss.backward()
                opt.step()
                torch_xla.sync()
        """
    assert lint(body.replace("{texts}", "[task]")) == []
    assert [(ln, c) for ln, c, _m in lint(body.replace("{texts}", "texts"))] == [(4, "XLA005"), (5, "XLA005")]


SAMPLER = """
def sample_heun(denoiser, x, sigmas):
    for i in range(len(sigmas) - 1):
        x = x + (denoiser(x, sigmas[i]) - x) * (sigmas[i + 1] - sigmas[i])
    return x

def sample_euler(denoiser, x, sigmas):
    for i in range(len(sigmas) - 1):
        x = x + denoiser(x, sigmas[i]) * 0.1
    return x

class Denoiser:
    def denoise(self, model, x_t, sigma):
        return model(x_t, sigma)

def karras_sample(diffusion, model, shape, sigmas, sampler="heun"):
    sample_fn = {"heun": sample_heun, "euler": sample_euler}[sampler]

    def denoiser(x_t, sigma):
        return diffusion.denoise(model, x_t, sigma).clamp(-1, 1)

    return sample_fn(denoiser, torch.randn(*shape, device=device), sigmas)

def main(args, model, feature_model, loader):
    diffusion = Denoiser()
    model.to(device).eval()
    all_labels, all_feats = [], []
    {loop}
        classes = torch.randint(0, 1000, (args.batch_size,), device=device)
        sample = karras_sample(diffusion, model, (args.batch_size, 3, 64, 64), args.sigmas)
        feats = feature_model(sample)
        all_feats.append(feats.cpu().numpy())
        all_labels.append(classes.cpu().numpy())
    return all_feats, all_labels
"""


def test_a_loop_whose_every_iteration_runs_a_whole_sampling_is_not_a_hot_loop():
    """Issue 32 cause 4 (consistency_models' sampling scripts, read): each iteration of a loop over generated batches
    runs a whole multistep sampling (`karras_sample` picks its sampler from a table of functions by name: any of
    them runs, each a loop of model calls) and then the Inception features of the batch; gathering the batch's
    features and labels to the host is once per sampling run, not a per-step cost, as for `model.generate()` per
    prompt. Its twins go over a loader's batches (an evaluation loop), or sample only under an `if`: their
    per-iteration copies stay findings."""
    assert lint(SAMPLER.replace("{loop}", "while len(all_labels) * args.batch_size < args.num_samples:")) == []
    found = lint(SAMPLER.replace("{loop}", "for batch in loader:"))
    assert [(ln, c) for ln, c, _m in found] == [(32, "XLA001"), (33, "XLA001")]
    # a sampling under an `if` (yolov7's classifier pass, off by default) is not every iteration's: a loop over
    # images that runs the model on each stays hot
    maybe = SAMPLER.replace("{loop}", "for sample in args.images:").replace(
        "        sample = karras_sample(", "        if args.resample:\n            sample = karras_sample(")
    assert [(ln, c) for ln, c, _m in lint(maybe)] == [(33, "XLA001"), (34, "XLA001")]


def test_not_a_remainder_is_a_period():
    """Round 18, read after scoring (rasbt's deeplearning-models notebooks, 30 of its 50 sampled findings): `if not
    batch_idx % 50: print(... cost)` prints every 50 batches, as `batch_idx % 50 == 0` does; the message says so.
    Its twin without the `not` prints on the other 49 batches of 50: every step."""
    body = """
    def train(model, loader, optimizer, num_epochs):
        for epoch in range(num_epochs):
            for batch_idx, (features, targets) in enumerate(loader):
                cost = F.cross_entropy(model(features.to(device)), targets.to(device))
                optimizer.zero_grad()
                cost.backward()
                optimizer.step()
                if {test}:
                    print('Epoch: %03d | Batch %03d | Cost: %.4f' % (epoch + 1, batch_idx, cost))
    """
    assert "every 50 steps" in at(lint(body.format(test="not batch_idx % 50")), 10, "XLA006")
    assert "every 50 steps" in at(lint(body.format(test="not (batch_idx + 1) % 50")), 10, "XLA006")
    assert "every step" in at(lint(body.format(test="batch_idx % 50")), 10, "XLA006")


def test_a_copy_the_loop_writes_to_a_file_is_a_dump():
    """Round 18, read after scoring (hifi-gan's inference scripts; stable-diffusion's and consistency_models'
    samplers): each input file's waveform is copied to the host and written as a WAV, each sampled image saved as
    a PNG. The data has to reach the host to be written: the copy is the loop's purpose, as a checkpoint's is. Its
    twins keep what they copy in a list (the fix: keep it on the device), or train in the loop."""
    body = """
    def inference(generator, filelist, get_mel, sr):
        outs = []
        with torch.no_grad():
            for i, filname in enumerate(filelist):
                x = get_mel(torch.FloatTensor(load_wav(filname)).to(device))
                y_g_hat = generator(x)
                audio = y_g_hat.squeeze() * 32768.0
                audio = audio.cpu().numpy().astype("int16")
                {use}
        return outs
    """
    assert lint(body.format(use='write(os.path.join("out", filname), sr, audio)')) == []
    assert lint(body.format(use='Image.fromarray(audio.astype("uint8")).save(filname + ".png")')) == []
    assert lint(body.format(use='fig.add_subplot(3, 3, i + 1).imshow(audio.reshape(64, -1))')) == []  # GaLore's figure
    # a loop over three samples by index (`for index in range(3):`) is a few inputs too, not a counter's steps
    assert lint(body.format(use='write(filname, sr, audio)').replace(
        "for i, filname in enumerate(filelist):", "for i in range(3):\n                filname = filelist[i]")) == []
    assert [(ln, c) for ln, c, _m in lint(body.format(use="outs.append(audio)"))] == [(9, "XLA001")]
    # written only under an option (yolov5's `if save_txt:`), while the copy runs on every pass: not a dump
    optional = body.format(use='print(audio.max())\n                if save_txt:\n                    write(filname, sr, audio)')
    assert (9, "XLA001") in [(ln, c) for ln, c, _m in lint(optional)]
    training = body.replace("y_g_hat = generator(x)", "y_g_hat = generator(x)\n                y_g_hat.sum().backward()")
    assert (10, "XLA001") in [(ln, c) for ln, c, _m in lint(training.format(use='write(filname, sr, audio)'))]


def test_a_tokenizer_mapped_over_a_whole_split_pads_it_to_one_length():
    """Round 18, read after scoring (rasbt's DistilBERT notebooks): `dataset.map(tokenize_text, batched=True,
    batch_size=None)` hands the tokenizer each split as one batch: `padding=True` pads the whole split to one
    length, and every batch drawn from it has that length. Its twin maps in batches of 1,000 (the default): each
    padded to its own longest."""
    body = """
    def tokenize_text(batch):
        return tokenizer(batch["text"], truncation=True, padding=True)

    def train(model, imdb_dataset, opt):
        imdb_tokenized = imdb_dataset.map(tokenize_text, batched=True{size})
        imdb_tokenized.set_format("torch", columns=["input_ids", "attention_mask", "label"])
        loader = torch.utils.data.DataLoader(imdb_tokenized["train"], batch_size=16, drop_last=True)
        for batch in loader:
            loss = model(**{{k: v.to(device) for k, v in batch.items()}}).loss
            loss.backward()
            opt.step()
            torch_xla.sync()
    """
    assert lint(body.format(size=", batch_size=None")) == []
    assert [(ln, c) for ln, c, _m in lint(body.format(size=""))] == [(3, "XLA005")]


def test_a_copy_saved_at_every_step_of_a_sampling_loop_or_an_evaluation_batch_is_a_cost():
    """The audit corpus's labels (explainingai's DDPM samplers, Tramac's segmentation evaluation): an image saved at
    every denoising step of `for i in reversed(range(T))` cuts every step of the sampling, and an evaluation that
    saves each batch's prediction copies per batch: both stay findings, unlike a loop over input files that
    writes one output each."""
    sampler = """
    def sample(model, scheduler, xt, T):
        for i in tqdm(reversed(range(T))):
            noise_pred = model(xt, torch.full((xt.shape[0],), i, device=device))
            xt, x0_pred = scheduler.sample_prev_timestep(xt, noise_pred, i)
            ims = torch.clamp(x0_pred, -1., 1.).detach().cpu()
            torchvision.transforms.ToPILImage()(make_grid(ims)).save("x0_{}.png".format(i))
    """
    assert (6, "XLA001") in [(ln, c) for ln, c, _m in lint(sampler)]
    evaluation = """
    def validate(model, val_loader, save_pred):
        model.eval()
        for i, (image, target, filename) in enumerate(val_loader):
            with torch.no_grad():
                outputs = model(image.to(device))
            if save_pred:
                pred = torch.argmax(outputs[0], 1).cpu().numpy()
                get_color_pallete(pred.squeeze(0)).save(filename[0] + ".png")
    """
    assert (8, "XLA001") in [(ln, c) for ln, c, _m in lint(evaluation)]



def test_a_branch_on_the_device_string_naming_another_backend_never_runs_on_xla():
    """Issue 32 cause 7 (round 19, read after scoring: ChatTTS's vocoder): `if "mps" in str(self.device) or "npu"
    in str(self.device): spec.cpu()` is a branch for Apple and Ascend devices; on XLA the `else` runs. A branch on a
    plain flag stays a finding."""
    body = """
        class Vocoder(torch.nn.Module):
            def forward(self, spec):
                if {test}:
                    return self.decode(spec.cpu()).cpu()
                return self.decode(spec)
        """
    for test in ('"mps" in str(self.device) or "npu" in str(self.device)', '"xpu" in str(spec.device)',
                 'str(self.device) == "cpu"'):
        assert lint(body.replace("{test}", test)) == [], test
    assert {(ln, c) for ln, c, _ in lint(body.replace("{test}", "self.offload"))} == {(5, "XLA001")}


def test_an_and_whose_first_operand_lets_only_the_first_pass_through_tests_the_rest_once():
    """Issue 32 cause 9 (round 19, read after scoring: ChatTTS's decode loop): in `if i == 0 and finish.any():`
    Python evaluates `finish.any()` only when `i == 0`, on the first decoding step, not every step; the same test
    with the operands the other way round, or after a plain flag, is read every step."""
    body = """
        @torch.no_grad()
        def generate(model, idx, steps, eos):
            finish = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
            for i in range(steps):
                logits = model(idx)
                nxt = logits[:, -1].argmax(-1)
                finish |= nxt == eos
                idx = torch.cat([idx, nxt[:, None]], 1)
                if {test}:
                    print("unexpected end")
            return idx
        """
    found = lint(body.replace("{test}", "i == 0 and finish.any()"))
    assert not [m for ln, c, m in found if ln == 10 and c == "XLA002" and "every decoding step" in m], found
    for test in ("finish.any() and i == 0", "verbose and finish.any()"):
        assert "every decoding step" in at(lint(body.replace("{test}", test)), 10, "XLA002"), test


def test_an_and_after_a_lazy_initialisation_test_walks_without_error():
    """The `and` gate asks the once-tests with no block of their own: `if self.cache is None and x.any():` (an
    attribute tested against None, which the block-reading test looks into) must not break the walk (ChatTTS's
    ONNX llama, an XLA902 on the first build of the gate)."""
    found = lint("""
        class Attn(torch.nn.Module):
            def forward(self, x, mask):
                if self.cache is None and mask.any():
                    self.cache = x
                return x
        """)
    assert not [c for _, c, _ in found if c.startswith("XLA90")], found


def test_a_branch_taken_only_when_the_numbers_went_bad_is_an_error_path():
    """Issue 32 cause 7 (round 20, read after scoring: torchcfm's OT plan): `if not np.all(np.isfinite(p)):
    print(...)` (likewise `if torch.isnan(loss).any():`, `if math.isinf(v):`) runs only when a value went
    non-finite, not every step: what it prints is no per-step cost (its test, evaluated every step, is another
    matter). The same print under `if np.all(np.isfinite(p)):` runs every step."""
    body = """
        model = torch.nn.Linear(4, 4).to(device)
        for x in loader:
            out = model(x.to(device))
            loss = out.sum()
            p = ot_plan(out.detach().cpu().numpy())
            if {test}:
                print("Cost mean, max", out.mean(), out.max())
            loss.backward()
        """
    for test in ("not np.all(np.isfinite(p))", "math.isinf(p.sum())", "np.isnan(p).any()"):
        assert not [f for f in lint(body.replace("{test}", test)) if f[0] == 8], test
    assert (8, "XLA006") in {(ln, c) for ln, c, _ in lint(body.replace("{test}", "np.all(np.isfinite(p))"))}


def test_frames_collected_in_a_loop_and_written_after_it_are_a_dump():
    """Round 20, read after scoring (dataflowr's NeRF notebook, torchcfm's comparison figure): a 360-degree render
    loop copies each frame to the host, appends it to `frames` and writes the video after the loop; a figure loop
    draws each model's vector field with `ax.quiver`. The copies are what the loops are for. A list that is only
    kept (never written) is the twin: the fix is to keep it on the device."""
    body = """
    def render(model, poses, H, W):
        frames = []
        for th in tqdm(np.linspace(0.0, 360.0, 120, endpoint=False)):
            rays = get_rays(H, W, pose_spherical(th, -30.0, 4.0)).to(device)
            rgb = model(rays).reshape([H, W, 3])
            rgb = rgb.cpu().detach().numpy()
            frames.append((255 * np.clip(rgb, 0, 1)).astype(np.uint8))
        {after}
        return frames
    """
    assert lint(body.format(after='imageio.mimwrite("video.mp4", frames, fps=30)')) == []
    assert [(ln, c) for ln, c, _m in lint(body.format(after="pass"))] == [(7, "XLA001")]
    quiver = """
    def figure(models, grid, axes):
        for ax, name in zip(axes, models):
            out = models[name](grid.to(device))
            out = out.reshape([20, 20, 2]).cpu().detach().numpy()
            ax.quiver(X, Y, out[:, :, 0], out[:, :, 1])
    """
    assert lint(quiver) == []


def test_a_while_loop_over_generated_batches_calling_a_whole_sampler_is_no_decoding_loop():
    """consistency_models' `while len(all_images) * batch_size < num_samples:` calls a whole multistep sampler
    per batch of samples: its reads after the sampler are once per generated batch, not per decoding step. A
    `while` that tests the length of a tensor it rebinds (`while prefix.shape[1] < T:`) is a loop over
    positions even when each round calls a whole small decode (speculative decoding)."""
    body = """
        def sampler(model, x, steps):
            for i in range(steps):
                x = model(x, i)
            return x

        def sample_generator(model, n, batch_size):
            all_images = []
            while len(all_images) * batch_size < n:
                x = torch.randn(batch_size, 4, device=device)
                sample = sampler(model, x, 40)
                all_images.extend([sample.cpu().numpy()])
            return all_images

        def speculative_sample(model, prefix, T):
            while prefix.shape[1] < T:
                draft = sampler(model, prefix, 3)
                keep = int(draft.sum().item()) % 2
                prefix = torch.cat([prefix, draft[:, -1:]], dim=1)
            return prefix
        """
    found = lint(body)
    assert not [f for f in found if f[0] == 12], found
    assert at(found, 18, "XLA001"), found


SPECULATIVE = """
@torch.no_grad()
def generate(model, draft, prompt, max_new, callback=lambda x: x):
    input_pos = prompt.shape[-1]
    token = prompt[:, -1]
    while input_pos < max_new:
        tokens = speculative_decode(model, draft, token, input_pos)
        for t in tokens[:4]:
            callback(t)
        input_pos += 4
        token = tokens[-1]
    return token


def speculative_decode(model, draft, token, pos):
    return model(draft(token))


def main(model, draft, prompts):
    for p in prompts:
        def show(x):
            print(x.tolist())
        generate(model, draft, p.to(device), 64, callback=show)
"""


BEAMS = """
@torch.no_grad()
def generate(model, prompt, max_new, beams):
    pos = prompt.shape[-1]
    tokens = prompt.to(device)
    while pos < max_new:
        for row in tokens[:beams]:
            out = model(row)
            print(out.sum().item())
        pos += 1
    return tokens
"""


def test_a_loop_inside_a_decoding_loop_runs_every_decoding_step():
    """Round 18's gpt-fast, read after scoring: its speculative decoding hands each accepted token to the
    streaming callback in `for i in next_tokens[:num_added]:` inside the decoding `while`: under `no_grad` the
    inner loop alone reads as an evaluation, but it runs on every decoding step, and the reads in it say so (a
    loop over the rows inside the decoding `while`: the earlier build said "every evaluation batch"; the
    callback's shape is the real one's, whose message needed the whole project to go wrong)."""
    assert "every decoding step" in at(lint(BEAMS), 9, "XLA001")
    assert "every decoding step" in at(lint(SPECULATIVE), 22, "XLA001")
