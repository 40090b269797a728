"""Values that are not device tensors (issue 32, causes 3 and 5): sizes handed to a module's `forward`, the int
items of a tuple a helper of another module returns, a host copy a method just stored. Each with its twin that
stays a finding."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.conftest import run_xlalint
from xlalint.analysis.source import lint_source

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport torch_xla\n"


def lint(body: str) -> set:
    src = HEAD + textwrap.dedent(body)
    return {(f.line - HEAD.count("\n"), f.code) for f in lint_source(src, "model.py")}


MERGING = """
class PatchMerging(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.reduction = nn.Linear(4 * dim, 2 * dim)

    def forward(self, x, H, W):
        B, L, C = x.shape
        assert L == H * W, "input feature has wrong size"
        {use}
        pad_input = (H % 2 == 1) or (W % 2 == 1)
        if pad_input:
            {pad}
        return self.reduction(x)
"""


def test_a_forward_parameter_used_as_a_size_is_a_python_int():
    """Round 16, read after scoring (detectron2's Swin backbone): `forward(self, x, H, W)` with `x.view(B, H, W, C)`
    is handed the spatial size as ints; `L == H * W`, `H % 2 == 1` and the flag built from them are Python
    values. Its twin, a parameter never used as a size (a mask), is still a tensor when tested."""
    pad = "x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))"
    assert lint(MERGING.replace("{use}", "x = x.view(B, H, W, C)").replace("{pad}", pad)) == set()
    assert lint(MERGING.replace("{use}", "x = x.reshape(B, H * W // 4, 4 * C)").replace("{pad}", pad)) == set()
    assert lint(MERGING.replace("{use}", "x = x.new_zeros(B, H, W, C) + x").replace("{pad}", "x = x + 1")) == set()
    # never used as a size: `forward`'s inputs are tensors, and testing them is a host read
    assert lint(MERGING.replace("{use}", "x = x * H").replace("{pad}", "x = x + W")) == {
        (9, "XLA002"), (11, "XLA002"), (12, "XLA002")}


UTILS = '''import torch
import torch.nn.functional as F


def window_partition(x, window_size):
    B, H, W, C = x.shape
    pad_h = (window_size - H % window_size) % window_size
    pad_w = (window_size - W % window_size) % window_size
    if pad_h > 0 or pad_w > 0:
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
    Hp, Wp = H + pad_h, W + pad_w
    windows = x.view(-1, window_size, window_size, C)
    return windows, {second}


def window_unpartition(windows, window_size, pad_hw, hw):
    Hp, Wp = pad_hw
    H, W = hw
    x = windows.view(-1, Hp, Wp, windows.shape[-1])
    if Hp > H or Wp > W:
        x = x[:, :H, :W, :].contiguous()
    return x
'''

ATTENTION = '''import torch
import torch.nn as nn
import torch_xla

from utils import window_partition, window_unpartition


class Attention(nn.Module):
    def __init__(self, dim, window):
        super().__init__()
        self.qkv = nn.Linear(dim, dim)
        self.window = window

    def forward(self, x):
        hw = x.shape[1:3]
        q, pad_hw = window_partition(self.qkv(x), self.window)
        return window_unpartition(q, self.window, pad_hw, hw)


def train(model, loader, opt):
    device = torch_xla.device()
    for x in loader:
        loss = model(x.to(device)).sum()
        loss.backward()
        opt.step()
        torch_xla.sync()
'''


def test_the_int_items_of_a_tuple_another_module_returns_are_not_tensors(tmp_path):
    """Round 16, read after scoring (detectron2's ViT windows): `q, pad_hw = window_partition(x, w)` of another
    module returning `windows, (Hp, Wp)`: `pad_hw` is what its returns say, not a device tensor, so `Hp > H`
    in the helper it is handed to is a Python test; linted whole, one file at a time and from the cache. The
    twin returns the mask it computed in place of the sizes: testing it is a host read."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "attention.py").write_text(ATTENTION)

    def utils_findings(*args):
        r = run_xlalint("--output-format", "json", "--isolated", *args, cwd=tmp_path)
        assert r.returncode in (0, 1), r.stderr
        return {(f["line"], f["code"]) for f in json.loads(r.stdout) if Path(f["filename"]).name == "utils.py"}

    (tmp_path / "utils.py").write_text(UTILS.replace("{second}", "(Hp, Wp)"))
    for args in (("--no-cache", "."), ("--no-cache", "utils.py"), ("utils.py",), ("utils.py",)):
        assert utils_findings(*args) == set(), args
    (tmp_path / "utils.py").write_text(UTILS.replace("{second}", "(x.sum(-1) > 0, x.sum(-1) > 0)"))
    for args in (("--no-cache", "."), ("--no-cache", "utils.py"), ("utils.py",)):
        assert (20, "XLA002") in utils_findings(*args), args


SCHEDULER = """
class Scheduler:
    def __init__(self, n, device):
        sigmas = torch.linspace(1, 0, n, device=device)
        self.sigmas = sigmas{place}
        self.sigma_min = self.sigmas[-1].item()

    def set_timesteps(self, sigmas):
        self.sigmas = torch.cat([sigmas, torch.zeros(1, device=sigmas.device)])
        return self.sigmas[0].item()


def train(model, loader, opt):
    device = torch_xla.device()
    for x in loader:
        sched = Scheduler(10, device)
        print(sched.set_timesteps(model(x.to(device))))
        model(x.to(device)).sum().backward()
        opt.step()
        torch_xla.sync()
"""


def test_what_a_method_just_stored_on_self_is_what_it_reads_back():
    """Issue 32 cause 5 (round 16, read after scoring: sd-scripts' flow-matching scheduler): `self.sigmas =
    sigmas.to("cpu")` then `self.sigmas[-1].item()` in the same method reads the host copy it just stored,
    whatever another method stores there (a device tensor, read on line 10). The twin stores the device tensor."""
    assert lint(SCHEDULER.replace("{place}", '.to("cpu")')) == {(5, "XLA001"), (10, "XLA001")}
    assert lint(SCHEDULER.replace("{place}", "")) == {(6, "XLA001"), (10, "XLA001")}


ENCODE = """
def encode(ids, text_encoder, unwrapped: Optional[{ann}] = None):
    out = text_encoder(ids)
    unwrapped = unwrapped or text_encoder
    return out.last_hidden_state


def train(model, text_encoder, loader, opt, wrapper):
    device = torch_xla.device()
    for ids, x in loader:
        cond = encode(ids.to(device), text_encoder, wrapper.to(device))
        model(x.to(device), cond).sum().backward()
        opt.step()
        torch_xla.sync()
"""


def test_a_parameter_annotated_with_a_model_class_is_a_model():
    """Issue 32 cause 3 (round 16, read after scoring: sd-scripts' SDXL text encoding): `unwrapped_text_encoder2:
    Optional[CLIPTextModelWithProjection]` tested by `or` is a model (or None), not a tensor: a class named as a
    model (`...Model...`, `...ForCausalLM`, `nn.Module`) in an annotation, whatever a caller's `wrapper.to(device)`
    was guessed to be. Annotated `torch.Tensor`, the test is a host read."""
    head = "from typing import Optional\n"
    for ann in ("CLIPTextModelWithProjection", "LlamaForCausalLM", "T5EncoderModel", "nn.Module"):
        assert lint(head + ENCODE.replace("{ann}", ann)) == set(), ann
    assert lint(head + ENCODE.replace("{ann}", "torch.Tensor")) == {(5, "XLA002")}


def test_class_names_that_say_model():
    from xlalint.semantics.tensors import _names_a_model_class as says_model
    for name in ("CLIPTextModelWithProjection", "UNet2DConditionModel", "LlamaForCausalLM", "T5EncoderModel",
                 "Qwen2VLForConditionalGeneration", "Module", "PreTrainedModel"):
        assert says_model(name), name
    # a CTC decoder (deepspeech's `decoder: Decoder`, whose metric reads stayed findings), a label encoder
    for name in ("Tensor", "Generator", "BatchEncoding", "TensorDict", "DataLoader", "Optimizer", "Accelerator",
                 "Decoder", "GreedyDecoder", "LabelEncoder", "JSONEncoder"):
        assert not says_model(name), name


def test_an_arithmetic_helper_returns_where_its_arguments_live():
    """Round 15, read after scoring (flux's `time_shift(mu, sigma, t)` on a schedule built by `torch.linspace`
    without a device): a function whose return is arithmetic of its parameters and numbers gives a host tensor
    for host arguments, a device tensor for a device one, and what its own walk saw for arguments not known."""
    import libcst as cst

    from xlalint.semantics import kinds as K
    from xlalint.semantics import passthrough as P

    func = cst.parse_module("def time_shift(mu, sigma, t):\n"
                            "    return math.exp(mu) / (math.exp(mu) + (1 / t - 1) ** sigma)\n").body[0]
    ret = func.body.body[0].body[0].value
    spec = P.spec_of_return(ret, func)
    assert spec and {how for _, _, how in spec} == {P.ARITH}
    kind = K.passthrough(spec, K.TENSOR)
    call = cst.parse_expression("time_shift(mu, 1.0, timesteps)")
    for t, expected in ((K.CPU_TENSOR, K.CPU_TENSOR), (K.TENSOR, K.TENSOR), (K.UNKNOWN, K.TENSOR),
                        (K.NOT_TENSOR, K.NOT_TENSOR)):
        kinds = {"mu": K.NOT_TENSOR, "1.0": K.NOT_TENSOR, "timesteps": t}
        assert P.at_call(kind, call, lambda e: kinds[cst.Module([]).code_for_node(e)]) == expected, t
    # `math.exp(mu)` is a Python float whatever `mu` is: an unknown `mu` leaves the schedule on the host
    kinds = {"mu": K.UNKNOWN, "1.0": K.NOT_TENSOR, "timesteps": K.CPU_TENSOR}
    assert P.at_call(kind, call, lambda e: kinds[cst.Module([]).code_for_node(e)]) == K.CPU_TENSOR
    # a parameter used otherwise (a method call on it, a global beside it) is no arithmetic passthrough
    for body in ("return t.exp() * mu", "return t * SCALE"):
        other = cst.parse_module(f"def f(mu, t):\n    {body}\n").body[0]
        assert P.spec_of_return(other.body.body[0].body[0].value, other) is None, body


AGENTS = """
import numpy as np


def forward_agents(policies, batch, device):
    results = []
    for agent_id, policy in policies.items():
        idx = np.nonzero(batch.agent_id == agent_id)[0]
        if len(idx) == 0:
            results.append(({flag}, np.array([-1]), None))
            continue
        out = policy(batch.obs[idx].to(device))
        results.append(({flag2}, idx, out))
    acts = []
    for has_data, idx, out in results:
        if has_data:
            acts.append(out)
        if out.sum() > 0:
            acts.append(out)
    return acts


def train(policies, loader, opt):
    device = torch_xla.device()
    for batch in loader:
        acts = forward_agents(policies, batch, device)
        torch.stack(acts).sum().backward()
        opt.step()
        torch_xla.sync()
"""


def test_the_items_of_tuples_appended_to_a_list_keep_their_kinds():
    """Issue 32 cause 3 (round 16, read after scoring: tianshou's multi-agent policy): `results.append((False,
    idx, Batch()))` / `results.append((True, idx, out))` then `for has_data, idx, out in results: if has_data:`
    tests a Python bool; `out` stays what the policy returned (its test is a host read). The twin appends the
    policy's mask in the first position."""
    assert lint(AGENTS.replace("{flag}", "False").replace("{flag2}", "True")) == {(18, "XLA002")}
    twin = AGENTS.replace("{flag}", "torch.zeros(1, device=device) > 0").replace("{flag2}", "out.sum() > 0")
    assert lint(twin) == {(16, "XLA002"), (18, "XLA002")}


SEQ2SEQ = """
class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder, self.decoder, self.device = encoder, decoder, device

    def forward(self, src, trg, teacher_forcing_ratio):
        outputs = torch.zeros(trg.shape[0], trg.shape[1], 10).to(self.device)
        hidden, cell = self.encoder(src)
        input = trg[0, :]
        for t in range(1, trg.shape[0]):
            output, hidden, cell = self.decoder(input, hidden, cell)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            input = trg[t] if teacher_force else output.argmax(1)
        return outputs


def train_fn(model, data_loader, optimizer, teacher_forcing_ratio, device):
    model.train()
    for batch in data_loader:
        src, trg = batch["de_ids"].to(device), batch["en_ids"].to(device)
        optimizer.zero_grad()
        output = model(src, trg, teacher_forcing_ratio)
        output.sum().backward()
        optimizer.step()


def evaluate_fn(model, data_loader, device):
    model.eval()
    with torch.no_grad():
        for batch in data_loader:
            output = model(batch["de_ids"].to(device), batch["en_ids"].to(device), {eval_ratio})


import random
device = torch_xla.device()
model = {built}.to(device)
optimizer = torch.optim.Adam(model.parameters())
teacher_forcing_ratio = 0.5
for epoch in range(10):
    train_fn(model, train_loader, optimizer, teacher_forcing_ratio, device)
    evaluate_fn(model, valid_loader, device)
"""


def test_a_forward_parameter_a_caller_passes_a_number_through_a_helper_is_no_tensor():
    """Round 17, read after scoring (pytorch-seq2seq's notebooks): the model is built at the notebook's top level
    and handed to `train_fn(model, ...)` and `evaluate_fn(model, ...)`: every caller passes a module of one class,
    so `model(src, trg, ratio)` there runs `Seq2Seq.forward`, and what they pass seeds its parameters. The
    evaluation passes 0, the training a ratio every caller gives as a float: the guess that `teacher_forcing_ratio`
    is a tensor is belied and backed by no caller, and `random.random() < teacher_forcing_ratio` is a Python bool.
    Its twins: a caller passing a device tensor there, and a model whose class is not known (both stay found)."""
    seq2seq = SEQ2SEQ.replace("{built}", "Seq2Seq(nn.LSTM(3, 3), nn.LSTM(3, 3), device)")
    assert lint(seq2seq.replace("{eval_ratio}", "0")) == set()
    tensor = seq2seq.replace("{eval_ratio}", "torch.rand((), device=device)")
    assert lint(tensor) == {(15, "XLA002")}
    unknown = SEQ2SEQ.replace("{built}", "build_model(cfg)").replace("{eval_ratio}", "0")
    assert lint(unknown) == {(15, "XLA002")}


def test_an_item_of_a_models_output_named_a_dict_is_a_dict():
    """Round 15, read (lerobot's training step): `loss, output_dict = policy(batch)` then `if output_dict:` tests
    the dict's length, not a tensor. Its twin, an item named for a tensor, is tested on the device's value."""
    body = """
    def update_policy(policy, batch, optimizer, metrics):
        loss, {name} = policy(batch)
        loss.backward()
        optimizer.step()
        if {name}:
            metrics.update({name})
        torch_xla.sync()

    def train(policy, loader, optimizer, metrics):
        device = torch_xla.device()
        for batch in loader:
            update_policy(policy, {{k: v.to(device) for k, v in batch.items()}}, optimizer, metrics)
    """
    assert lint(body.format(name="output_dict")) == set()
    assert lint(body.format(name="aux_loss")) == {(6, "XLA002")}


CHECKPOINTED = """
import torch.utils.checkpoint as ckpt


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.gradient_checkpointing = False

    def _forward(self, x, lens):
        longest = torch.max(lens).item()
        return self.proj(x[:, :longest])

    def forward(self, x, lens):
        if {test}:
            return ckpt.checkpoint(self._forward, x, lens, use_reentrant=False)
        else:
            return self._forward(x, lens)
"""


def test_the_else_of_training_and_checkpointing_runs_in_training_too():
    """Round 16, read (sd-scripts' Chroma blocks): `if self.training and self.gradient_checkpointing: ... else:
    return self._forward(...)`: training without checkpointing takes the `else` too, so its read is every step,
    not only while evaluating. Its twin, `if self.training: ... else:`, is the evaluation's path."""
    def message(test):
        found = [f for f in lint_source(HEAD + CHECKPOINTED.replace("{test}", test), "model.py") if f.code == "XLA001"]
        assert len(found) == 1, found
        return found[0].message

    assert "every step" in message("self.training and self.gradient_checkpointing")
    assert "every step" in message("self.gradient_checkpointing and self.training")
    assert "every evaluation batch" in message("self.training")
    assert "every evaluation batch" in message("self.training or self.gradient_checkpointing")


YOLO = """
class Model(nn.Module):
    def __init__(self, cfg, ch=3):
        super().__init__()
        self.model, self.save = parse_model(cfg, [ch])

    def forward(self, x):
        y = []
        for m in self.model:
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in self.save else None)
        return x


def parse_model(d, ch):
    layers, save = [], []
    for i, (f, n, m, args) in enumerate(d):
        m_ = m(*args)
        m_.i, m_.f = i, f
        save.extend(x % i for x in ([f] if isinstance(f, int) else f) if x != -1)
        layers.append(m_)
    return nn.Sequential(*layers), sorted(save)
"""


def test_a_function_defined_further_down_named_for_a_model_is_not_a_model_call():
    """Round 8, read (yolov7's `Model.__init__`): `self.model, self.save = parse_model(cfg, [ch])` calls a function
    of the module defined below the class; walked before it, the call was taken for a model run by its name
    ("...model"), so `self.model` held tensors and `m.f` of its layers was a device tensor. A function of this
    module is not a model, wherever it is defined: the layers are modules, `m.f` unknown. Its twin calls a
    function the module does not define (a model named so, as far as is known), whose items stay tensors."""
    assert lint(YOLO) == set()
    twin = YOLO.replace("self.model, self.save = parse_model(cfg, [ch])", "self.model, self.save = load_model(cfg, [ch])")
    assert (10, "XLA002") in lint(twin)


FFT_VIT = """
from torch.fft import fft2


class SimpleViT(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.to_freq_embedding = nn.Linear(2, dim)

    def forward(self, img):
        freqs = torch.view_as_real(fft2(img))
        return self.to_freq_embedding(freqs)


if __name__ == "__main__":
    v = SimpleViT(dim=8)
    img = torch.randn(1, 3, 256, 256)
    preds = v(img)
"""


def test_a_demo_run_of_a_model_at_the_top_level_says_nothing_of_its_callers():
    """A library module's smoke test under `if __name__ == "__main__":` runs its model on `torch.randn(...)`: a
    host tensor, as a unit test's, which says nothing of the real callers; the `forward` parameter stays a
    device tensor and its CPU fallback a finding (vit-pytorch's FFT ViT, found before the top-level model's class
    was resolved, lost when it was, found again)."""
    assert (11, "XLA007") in lint(FFT_VIT)


def test_a_copy_moved_to_the_cpu_is_a_host_tensor_whatever_it_was():
    """Issue 32 cause 5 (round 19, read after scoring: Udacity's skip-gram notebooks): `valid_examples, closest_idxs
    = valid_examples.to('cpu'), closest_idxs.to('cpu')` makes host copies, whatever the helper that made them
    returned; reading their elements afterwards costs nothing more. Without the move, the reads are findings."""
    body = """
        model = nn.Embedding(100, 8).to(device)
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            if step % 500 == 0:
                examples, closest = similar_words(model, device=device)
                {move}
                for ii, ex in enumerate(examples):
                    words = [vocab[idx.item()] for idx in closest[ii]]
                    print(vocab[ex.item()], words)
        """
    for move in ("examples, closest = examples.to('cpu'), closest.to('cpu')",
                 "examples, closest = examples.to(device='cpu'), closest.to(torch.device('cpu'))"):
        assert {f for f in lint(body.replace("{move}", move)) if f[1] == "XLA001"} == set(), move
    assert {(10, "XLA001"), (11, "XLA001")} <= lint(body.replace("{move}", "pass"))


def test_reading_back_a_batch_as_uploaded_runs_no_graph():
    """Round 20, read after scoring (dataflowr's `test_model`, and Time-Series-Library's read-back of its input):
    `classes = classes.to(device)` uploads the loader's labels as they are; `classes.to('cpu').numpy()` copies that
    device data back and runs no graph (nothing was computed on it): no graph cut to report. The predictions
    computed from the model are read every batch, and so are the labels once something was computed from them."""
    body = """
        model = nn.Linear(8, 2).to(device)
        loader = torch.utils.data.DataLoader(dataset, batch_size=32)
        for inputs, classes in loader:
            inputs = inputs.to(device)
            classes = classes.to(device)
            outputs = model(inputs)
            _, preds = torch.max(outputs.data, 1)
            {classes}
            all_preds.append(preds.to('cpu').numpy())
            all_classes.append(classes.{read})
        """
    for read in ("to('cpu').numpy()", "data.cpu().numpy()", "detach().cpu()"):
        found = {f for f in lint(body.replace("{classes}", "").replace("{read}", read)) if f[1] == "XLA001"}
        assert found == {(10, "XLA001")}, (read, found)
    for change in ("classes = classes * 2", "dist.all_reduce(classes)", "classes.clamp_(min=0)", "classes[classes < 0] = 0"):
        moved = {f for f in lint(body.replace("{classes}", change).replace("{read}", "cpu()")) if f[1] == "XLA001"}
        assert moved == {(10, "XLA001"), (11, "XLA001")}, (change, moved)


def test_a_nested_helper_keeps_what_its_calls_pass_when_its_parent_is_walked_again():
    """fairseq's `compute_block_mask_2d` (ledger, dev): a nested `get_nbs(b, m, w)` given host masks
    only returns a host tensor, and `int(cands.sum().item())` of it reads nothing from the device. The
    parent's walk again (its callee's return changed) makes the nested function anew: it keeps the seeds its
    calls gave it, instead of falling back to its unseeded walk's device result every other walk."""
    found = lint("""
        def block_mask(B, d, device):
            def get_nbs(b, m, w):
                all_nbs = F.conv2d(m.unsqueeze(1), w, padding="same")
                return all_nbs.clamp_max_(1).view(b, -1)

            mask = torch.zeros((B, d, d))
            w = torch.zeros((1, 1, 3, 3))
            nbs = get_nbs(B, mask, w)
            for i in range(B):
                cands = (1 - mask[i].flatten() + nbs[i]) > 1
                if int(cands.sum().item()) == 0:
                    break
            return mask.to(device)


        def train(model, loader, opt):
            device = torch_xla.device()
            for x in loader:
                m = block_mask(4, 8, device)
                loss = model(x.to(device) * m.sum()).sum()
                loss.backward()
                opt.step()
                torch_xla.sync()
        """)
    assert not found, found


def test_a_batch_unpacked_and_turned_into_tensors_from_numpy_holds_host_values():
    """FastSpeech2 (audit, opened round 2): `to_device(data, device)` unpacks the collated batch and turns
    some items into tensors with `torch.from_numpy(...)`: the batch holds NumPy arrays and ids, so the ids
    it hands back are no device tensors (`"{}.png".format(basename)` reads nothing), while the moved items
    are (their `.item()` is a read)."""
    found = lint("""
        def to_device(data, device):
            ids, texts, lens = data
            texts = torch.from_numpy(texts).long().to(device)
            lens = torch.from_numpy(lens).to(device)
            return ids, texts, lens


        def train(model, loader, opt):
            device = torch_xla.device()
            for step, batch in enumerate(loader):
                ids, texts, lens = to_device(batch, device)
                loss = model(texts).sum()
                loss.backward()
                opt.step()
                print("{}.png".format(ids[0]))
                print(lens.max().item())
                torch_xla.sync()
        """)
    assert found == {(17, "XLA001")}, found


def test_the_runs_device_variable_set_to_cpu_is_still_the_runs_device():
    """`device = torch.device("cpu")` is the setting a user points at XLA on a TPU (as `device = "cuda"` is):
    what moves there is on the run's device. Only a name that says it is the CPU (`cpu_device`) is a host
    device (LLMs-from-scratch lost 20 true findings to the first form, which took any name bound to "cpu")."""
    found = lint("""
        device = torch.device("cpu")
        cpu_device = torch.device("cpu")


        def train(model, loader, opt):
            model.to(device)
            for x, y in loader:
                out = model(x.to(device))
                loss = F.cross_entropy(out, y.to(device))
                loss.backward()
                opt.step()
                print(loss.item())
                kept = out.to(cpu_device)
                print(kept.tolist())
                torch_xla.sync()
        """)
    assert found == {(13, "XLA001"), (14, "XLA001")}, found


STAGING = """
import numpy as np


def predict_for_user(user_id, dataset, model, config):
    model.eval()
    with torch.no_grad():
        index = np.isin(dataset["user_id"].numpy(), [user_id])
        rows = dataset[index]
        last = rows["item_length"][-1].item()
        test = {"item_id_list": rows["item_id_list"][-1:], "item_length": torch.tensor([last + 1])}
        batch = {k: v.to(config["device"]) for k, v in test.items()}
        scores = model(batch)
        {after}
    return torch.topk(scores, 10)


for user_id in range(100):
    _, top = predict_for_user(user_id, dataset, model, config)
    print(top.cpu())
"""

UPLOAD_AFTER = """
for batch in loader:
    n = batch["len"].max().item()
    x = batch["x"].to(device)
    out = model(x)
    kept = batch["y"].item()
    {after}
    torch_xla.sync()
"""


def test_a_value_read_before_the_function_uploads_is_a_host_value():
    """Round 24, read after scoring (RecBole's notebooks): `predict_for_user` reads `rows[...][-1].item()` from
    the dataset and only then moves what it built to `config["device"]`: a function that stages its inputs and
    uploads them after reads host values. A read after the upload, of what the model returned, stays a
    finding. In a loop, the parts of a batch whose other parts are uploaded (`batch["x"].to(device)`) are host
    values before and after; the batch rebound to its upload is a device value after."""
    assert lint(STAGING.replace("{after}", "pass")) == {(20, "XLA001")}
    assert lint(STAGING.replace("{after}", "best = scores.max().item()")) == {(14, "XLA001"), (20, "XLA001")}
    # an upload not built from what was read (a callback that logs the loss, then samples from a prompt it
    # uploads): the read stays a finding
    callback = ("def batch_end_callback(trainer, model, stoi):\n"
                "    if trainer.iter_num % 10 == 0:\n        print(trainer.loss.item())\n"
                "    if trainer.iter_num % 500 == 0:\n"
                "        x = torch.tensor([stoi[s] for s in 'O God'], dtype=torch.long)[None, ...].to(trainer.device)\n"
                "        print(model(x).argmax(-1))\n\n\n"
                "def fit(trainer, model, stoi, loader):\n    for batch in loader:\n        trainer.step(batch)\n"
                "        batch_end_callback(trainer, model, stoi)\n")
    assert (3, "XLA001") in lint(callback)
    device = "device = torch_xla.device()\nmodel = nn.Linear(4, 2).to(device)\n"
    assert lint(device + UPLOAD_AFTER.replace("{after}", "print(out.sum().item())")) == {(9, "XLA001")}
    rebound = (device + UPLOAD_AFTER.replace('x = batch["x"].to(device)', "batch = {k: v.to(device) for k, v in "
                                             "batch.items()}").replace('model(x)', 'model(batch["x"])')
               .replace("{after}", "pass"))
    assert lint(rebound) == {(8, "XLA001")}
    # the whole batch reshaped and moved, rebinding its own name (pytorch-tutorial's tensorboard example): no part
    # of a container, and the name is the device copy after
    whole = ("for step in range(1000):\n    images, labels = next(data_iter)\n"
             "    images, labels = images.view(images.size(0), -1).to(device), labels.to(device)\n"
             "    loss = model(images).sum()\n    loss.backward()\n"
             "    print(images.view(-1, 28, 28)[:10].cpu().numpy())\n    torch_xla.sync()\n")
    assert lint(device + whole) == {(8, "XLA001")}


PLAIN_CLASS = """
import numpy as np


class LLM{base}:
    def __init__(self, weights):
        self.W = weights

    def run_one(self, token, state):
        x = self.W["emb"][int(token)]
        return x, state

    def forward(self, tokens, state=None):
        logits = None
        for token in tokens:
            logits, state = self.run_one(token, state)
        return logits, state
"""


def test_the_forward_of_a_class_with_no_base_is_no_module_pass():
    """Round 24, read after scoring (RWKV's NumPy reference `class LLM:`): a class with no base is no
    `nn.Module`, so its `forward` is a method called where it is called, not a pass whose inputs are device
    tensors: `int(token)` of its tokens is silent. The same class deriving from a base this module cannot see
    (`nn.Module` perhaps) keeps `forward`'s inputs tensors."""
    assert lint(PLAIN_CLASS.replace("{base}", "")) == set()
    assert lint(PLAIN_CLASS.replace("{base}", "(object)")) == set()
    assert lint(PLAIN_CLASS.replace("{base}", "(nn.Module)")) == {(10, "XLA001")}


CONCATENATED = """
class PreferenceTrainer:
    def concatenated_forward(self, model, batch, flags):
        all_logits = model(batch["input_ids"]).logits
        chosen_logps = all_logits[:2].log_softmax(-1).mean()
        rejected_logps = all_logits[2:].log_softmax(-1).mean()
        aux = self.aux_loss_fn(all_logits)
        return chosen_logps, rejected_logps, aux, flags

    def training_step(self, model, batch):
        chosen, rejected, aux, flags = self.concatenated_forward(model, batch, [False, False])
        loss = -(chosen - rejected) + aux
        loss.backward()
        print(f"chosen {chosen:.3f} aux {aux:.3f}")
        if all(flags):
            print("done")
        return loss
"""


def test_an_unknown_item_of_a_helpers_tuple_is_what_the_call_returns_unless_handed_back():
    """ledger round 12 (EAGLE) and the held-out audit (a preference trainer's `concatenated_forward`): the items a
    helper of the module computes from a model's output (`.logits`) are what the call returns, tensors, and
    reading them every step is reported; the list of flags it was handed and hands back is the caller's list,
    a Python value (`all(flags)` is silent)."""
    assert lint(CONCATENATED) == {(14, "XLA006")}
    # the unknown item alone (`aux_loss_fn` is not known here): an item of what the call returns
    assert lint(CONCATENATED.replace("chosen {chosen:.3f} aux ", "aux ")) == {(14, "XLA006")}


RUNTIMES = """
import onnxruntime


class Frontend:
    def __init__(self, path, device):
        self.device = device
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.other = make_session(path)

    def embed(self, feat):
        emb = self.{session}.run(None, {{"x": feat.cpu().numpy()}})[0].flatten().tolist()
        offset = request.get_input("offset").as_numpy().item()
        return torch.tensor([emb]).to(self.device), offset


def main(model, loader, device):
    fe = Frontend("a.onnx", device)
    for x in loader:
        e, offset = fe.embed(x.to(device))
        out = model(e)
        out.sum().backward()
"""


def test_what_an_onnx_runtime_session_returns_is_numpy():
    """Round 25, read after scoring (a speech generator's front end): `session.run(None, feeds)` of an ONNX
    Runtime `InferenceSession` returns NumPy arrays, and a Triton backend's `.as_numpy()` is NumPy by its name:
    their `.tolist()` and `.item()` read nothing from the device. Its twin, a session of unknown origin, is still
    read as the tensor `.tolist()` says it is."""
    assert {f for f in lint(RUNTIMES.format(session="session")) if f[1] == "XLA001"} == set()
    assert {f for f in lint(RUNTIMES.format(session="other")) if f[1] == "XLA001"} == {(12, "XLA001")}


def test_an_image_size_attribute_is_a_python_value():
    """Round 23, read after scoring (a detector's detectron2 wrapper): `h, w = targets_per_image.image_size` of
    an `Instances` is a tuple of Python ints; `torch.as_tensor([w, h, w, h], device=...)` of them reads nothing.
    Its twin takes the sizes from another attribute of the moved structure (taken for a tensor), and building a
    tensor from its elements reads them."""
    body = """
    class Detr(nn.Module):
        def __init__(self, backbone, device):
            super().__init__()
            self.backbone = backbone
            self.device = device

        def forward(self, batched_inputs):
            targets = [x["instances"].to(self.device) for x in batched_inputs]
            return self.backbone(self.prepare_targets(targets))

        def prepare_targets(self, targets):
            new_targets = []
            for targets_per_image in targets:
                h, w = targets_per_image.{attr}
                new_targets.append(torch.as_tensor([w, h, w, h], dtype=torch.float, device=self.device))
            return new_targets
    """
    assert lint(body.replace("{attr}", "image_size")) == set()
    assert lint(body.replace("{attr}", "gt_size")) == {(16, "XLA001")}


NARROWED_SESSION = """
import onnxruntime


class SpeakerEmbedding:
    def __init__(self, path, device, use_trt):
        self.device = device
        if use_trt:
            self.spk_model = load_engine(path)
        else:
            self.spk_model = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])

    def embed(self, feat):
        if {test}:
            emb = self.spk_model.run(None, {{"x": feat.cpu().numpy()}})[0].flatten().tolist()
            return torch.tensor([emb]).to(self.device)
        return self.spk_model(feat.to(self.device))


def main(model, loader, device):
    spk = SpeakerEmbedding("campplus.onnx", device, False)
    for x in loader:
        out = model(spk.embed(x.to(device)))
        out.sum().backward()
"""


def test_a_session_an_isinstance_test_shows_is_onnx_runtimes():
    """Round 25, read after scoring (a speech generator's Triton model): `self.spk_model` is a TensorRT engine or
    an ONNX Runtime session, and the branch under `isinstance(self.spk_model, onnxruntime.InferenceSession)` runs
    the session, whose outputs are NumPy arrays. Under another test the attribute stays of unknown kind, and
    `.tolist()` is still read as the tensor method it looks like."""
    assert {f for f in lint(NARROWED_SESSION.format(test="isinstance(self.spk_model, onnxruntime.InferenceSession)"))
            if f[1] == "XLA001"} == set()
    assert {f for f in lint(NARROWED_SESSION.format(test="feat.dim() == 2")) if f[1] == "XLA001"} == {(15, "XLA001")}


SOLVER_ORDERS = """
class Solver:
    def __init__(self, model):
        self.model = model

    def time_steps(self, steps, device):
        K = steps // 3 + 1
        if steps % 3 == 0:
            orders = {orders}
        else:
            orders = [3] * (K - 1) + [1]
        return orders, torch.linspace(1.0, 0.0, K + 1).to(device)

    def update(self, x, t, order):
        if order == 1:
            return self.model(x, t)
        return self.model(x, t) * 2

    @torch.no_grad()
    def sample(self, x, steps, device):
        orders, timesteps = self.time_steps(steps, device)
        i = 0
        for order in orders:
            x = self.update(x, timesteps[i], order)
            i += order
        return x


def main(model, device):
    s = Solver(model.to(device))
    for batch in range(10):
        x = torch.randn(4, 3, device=device)
        print(s.sample(x, 10, device).sum())
"""


def test_a_list_repeated_by_a_count_is_a_list_of_python_values():
    """Round 26, read after scoring (U-ViT's DPM-Solver): `orders = [3,] * (K - 2) + [2, 1]` is a list of Python
    ints whatever `K` is, so the solver order a loop over it binds is an int and `if order == 1:` a Python test.
    Twin: the same helper returning the timesteps tensor in that place: its items are device tensors."""
    assert lint(SOLVER_ORDERS.replace("{orders}", "[3] * (K - 2) + [2, 1]")) == set()
    assert lint(SOLVER_ORDERS.replace("{orders}", "[3] * (K - 2) + [2, 1]").replace(
        "return orders, torch", "return torch.linspace(1.0, 0.0, K + 1).to(device), torch")) == {(15, "XLA002")}


OPTIONAL_STEP = """
class Generator:
    def __init__(self, model):
        self.model = model

    def step(self, codes: torch.Tensor) -> torch.Tensor | None:
        out = self._step(codes)
        {none_first}
        return out[0]

    def _step(self, codes):
        logits = self.model(codes)
        return logits.argmax(-1), logits


def run(model, chunks, device):
    gen = Generator(model.to(device))
    while chunks:
        tokens = gen.step(chunks.pop().to(device))
        if tokens is None:
            continue
        for one in tokens[:, 0].cpu():
            if one.item() == 3:
                break
        print(tokens.sum().item())
"""


def test_a_method_that_returns_none_first_returns_what_its_other_returns_give():
    """Round 26, read after scoring (moshi's `LMGen.step`, `if out is None: return None` before `return out[0]`):
    an optional tensor is a tensor when it is not None, so the streaming loop's `tokens.sum().item()` is a read
    every iteration, and the items of its host copy `tokens[:, 0].cpu()` are host values (their `.item()` is
    silent). The same with no `return None` first."""
    assert lint(OPTIONAL_STEP.replace("{none_first}", "if out is None:\n            return None")) == {(26, "XLA001")}
    assert lint(OPTIONAL_STEP.replace("{none_first}", "")) == {(25, "XLA001")}


PROPAGATOR = """
class Propagator(nn.Module):
    def __init__(self, dim, n_edge_types):
        super().__init__()
        self.n_edge_types = n_edge_types
        self.gate = nn.Linear(dim * 2, dim)

    def forward(self, state, edges, nodes):
        edges_in = edges[:, :, : {bound}]
        return self.gate(torch.cat((torch.bmm(edges_in, state), state), 2))
"""


def test_a_forward_parameter_times_a_config_value_as_a_slice_bound_is_an_int():
    """Round 20's OpenNMT-py, read after scoring (its GGNN propagator slices `edges[:, :, : nodes *
    self.n_edge_types]` with `nodes` the encoder's `self.n_node`): a `forward` parameter is a tensor only by
    assumption, and times a value not known to be a tensor it is a size, as alone. Twin: a bound computed from a
    device tensor (`edges.sum()`) is the finding."""
    assert lint(PROPAGATOR.replace("{bound}", "nodes * self.n_edge_types")) == set()
    assert lint(PROPAGATOR.replace("{bound}", "nodes")) == set()
    assert lint(PROPAGATOR.replace("{bound}", "edges.sum() * self.n_edge_types")) == {(9, "XLA003")}
