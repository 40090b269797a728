"""Step-varying Python ints in every hot loop (issue #33 items 3 and 10).

A decoding, sampling or evaluation loop that runs the model every iteration and ends a graph on each
iteration (a barrier, or a host read such as the stop test) compiles a new graph for every new value of
an int baked into it: the position of a KV cache write, the timestep of a sampler. The position reaches
the cache through ``forward``: a module call of a known project class (``self(...)``, ``self.attn(...)``,
``for layer in self.layers``, ``model = LM()``) passes it on, and a ``forward`` parameter that every caller
passes a Python int is an int there (no tensor condition, no "device tensor as a slice bound").

The runtime proof of the same shapes is the fixture project tests/fixtures/projects/kv_decode
(tests/test_fixture_projects.py) and the compile counts measured in ``test_compile_counts_*`` below.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import require_torch_xla
from tests.verify_zygote import fast_compile
from xlalint.analysis.source import lint_source
from xlalint.config import build_settings
from xlalint.run.project import lint_files

HEAD = "import torch\nimport torch.nn as nn\nimport torch_xla\ndevice = torch_xla.device()\n"
ROOT = Path(__file__).resolve().parent.parent
KV_DECODE = ROOT / "tests" / "fixtures" / "projects" / "kv_decode"


def lint(body: str) -> list:
    src = HEAD + textwrap.dedent(body)
    return [(f.line - HEAD.count("\n"), f.code, f.message) for f in lint_source(src, "snippet.py")]


def codes(found) -> set:
    return {(ln, c) for ln, c, _ in found}


def project(tmp_path: Path, files: dict) -> list:
    (tmp_path / "pyproject.toml").write_text("[project]\nname='p'\n")
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    paths = sorted(str(p) for p in tmp_path.rglob("*.py"))
    found = lint_files(paths, build_settings(None), jobs=1, cache=None)
    for p in paths:  # one file at a time (its importers seen under the root) gives the same findings
        assert lint_files([p], build_settings(None), jobs=1, cache=None) == [f for f in found if f.path == p], p
    return [(Path(f.path).name, f.line, f.code, f.message) for f in found]


# ---- decoding loops cut by a host read, without a barrier ------------------------------------------

DECODE = """
    @torch.no_grad()
    def generate(model, prompt, total, eos_id):
        bsz, plen = prompt.shape
        tokens = torch.zeros(bsz, total, dtype=torch.long, device=prompt.device)
        tokens[:, :plen] = prompt
        for cur in range(plen, total):
            logits = model(tokens[:, :cur])
            nxt = logits[:, -1].argmax(-1)
            tokens[:, cur] = nxt
    {stop}
        return tokens
"""


def test_a_decode_loop_cut_by_its_stop_test_compiles_a_graph_per_position():
    found = lint(DECODE.format(stop="        if (nxt == eos_id).all():\n                break"))
    assert {(8, "XLA009"), (10, "XLA009"), (11, "XLA002")} == codes(found), found
    msg = next(m for ln, c, m in found if (ln, c) == (10, "XLA009"))
    assert "changes every iteration" in msg and "the loop ends a graph on every iteration" in msg
    assert "index_copy_" in msg and "static" in msg  # the fix names the static cache


def test_a_progress_bar_kept_in_a_name_is_the_range_it_wraps():
    # `cur_iterator = tqdm(range(1, total_len))` then `for cur_pos in cur_iterator:` (to update the bar):
    # the loop still counts token positions, in a method named for what it completes (the generator of the
    # KV-cache project below, linted alone: its model's class unknown, its own slices found)
    found = lint(KV_GENERATOR.format(annotation=""))
    assert {(16, "XLA009"), (18, "XLA009"), (19, "XLA002")} == codes(found), found


def test_a_decode_loop_that_never_ends_a_graph_is_one_graph_and_silent():
    # no barrier, no host read: the iterations grow one lazy graph, compiled once per call (measured)
    assert lint(DECODE.format(stop="")) == []


def test_a_host_read_of_the_token_list_cuts_too():
    found = lint(DECODE.format(stop="        print(nxt.tolist())"))
    assert {(8, "XLA009"), (10, "XLA009")} <= codes(found), found


def test_a_loop_that_does_not_run_the_model_is_not_hot():
    found = lint("""
        def fill(tokens, n):
            for cur in range(n):
                tokens[:, cur] = cur * 2
                if (tokens[:, cur] > 3).any():
                    break
            return tokens
        """)
    assert not [f for f in found if f[1] == "XLA009"], found


def test_an_evaluation_loop_slicing_device_data_per_batch_is_a_bounded_set():
    # the same offsets on every evaluation: one graph per batch offset, compiled once and then cached (a
    # chunked forward in a training step is the same): not a graph per step
    found = lint("""
        @torch.no_grad()
        def evaluate(model, X: torch.Tensor, bs, n):
            losses = []
            for i in range(n):
                out = model(X[i * bs : (i + 1) * bs])
                losses.append(out.mean().item())
            return sum(losses) / n
        """)
    assert not [f for f in found if f[1] == "XLA009"], found


def test_chunks_of_a_batch_in_a_token_function_are_a_bounded_set():
    # trl's per-token log-probs over chunks of the batch: the same few offsets on every call
    found = lint("""
        def get_per_token_logps(model, input_ids: torch.Tensor, chunk):
            out = []
            for start in range(0, input_ids.size(0), chunk):
                logits = model(input_ids[start : start + chunk])
                out.append(logits.log_softmax(-1))
                if logits.isnan().any().item():
                    break
            return torch.cat(out)
        """)
    assert not [f for f in found if f[1] == "XLA009"], found


def test_the_previous_position_carried_over_varies():
    found = lint("""
        @torch.no_grad()
        def generate(model, tokens: torch.Tensor, plen, total):
            prev = 0
            for cur in range(plen, total):
                logits = model(tokens[:, prev:cur])
                tokens[:, cur] = logits[:, -1].argmax(-1)
                prev = cur
                torch_xla.sync()
            return tokens
        """)
    msg = next(m for ln, c, m in found if (ln, c) == (6, "XLA009"))
    assert "`prev`" in msg and "previous iteration" in msg


# ---- samplers ---------------------------------------------------------------------------------------


def test_a_sampler_indexing_its_schedule_with_the_reversed_counter():
    found = lint("""
        @torch.no_grad()
        def sample(model, x, T):
            alphas = 1.0 - torch.linspace(1e-4, 0.02, T, device=device)
            for i in reversed(range(T)):
                t = torch.full((x.size(0),), i, device=device)
                a = alphas[i]
                x = (x - (1 - a) * model(x, t)) / a.sqrt()
                torch_xla.sync()
            return x
        """)
    assert codes(found) == {(7, "XLA009")}, found  # torch.full's fill value is data: no recompile
    assert "index_select(0, t)" in found[0][2] and "changes every iteration" in found[0][2]


def test_a_sampler_with_the_timestep_on_the_device_is_silent():
    assert lint("""
        @torch.no_grad()
        def sample(model, x, T):
            alphas = 1.0 - torch.linspace(1e-4, 0.02, T, device=device)
            i = torch.full((1,), T - 1, dtype=torch.long, device=device)
            for _ in range(T):
                a = alphas.index_select(0, i)
                x = (x - (1 - a) * model(x, i.float().expand(x.size(0)))) / a.sqrt()
                i = i - 1
                torch_xla.sync()
            return x
        """) == []


DDIM = """
    @torch.no_grad()
    def ddim_sample(model, shape, total, steps):
        alphas_cumprod = torch.cumprod(1 - torch.linspace(1e-4, 0.02, total, device=device), 0)
        times = torch.linspace(-1, total - 1, steps=steps + 1)
        times = list(reversed(times.int().tolist()))
        time_pairs = {pairs}
        img = torch.randn(shape, device=device)
        for time, time_next in tqdm(time_pairs, desc="sampling loop time step"):
            t = torch.full((shape[0],), time, device=device, dtype=torch.long)
            pred_noise = model(img, t)
            if time_next < 0:
                continue
            alpha, alpha_next = alphas_cumprod[time], alphas_cumprod[time_next]
            img = (img - (1 - alpha).sqrt() * pred_noise) / alpha.sqrt() * alpha_next.sqrt()
            torch_xla.sync()
        return img
    """


def test_a_sampler_over_a_list_of_timesteps_made_from_a_grid():
    """Audit (dev): a DDIM sampler goes over `list(zip(times[:-1], times[1:]))` of the Python ints a
    `torch.linspace(...).int().tolist()` gave: each pair is a new int on every iteration, as `range`'s counter
    is, and indexing the schedule with it bakes it into each step's graph. Its twin goes over a literal list of
    a few timesteps: a bounded set of graphs, silent."""
    found = lint("from tqdm import tqdm\n" + textwrap.dedent(DDIM.replace("{pairs}", "list(zip(times[:-1], times[1:]))")))
    assert codes(found) == {(15, "XLA009")}, found
    assert sum(1 for f in found if "an item of a sequence of ints the loop goes over" in f[2]) == 2, found
    assert lint("from tqdm import tqdm\n" + textwrap.dedent(DDIM.replace("{pairs}", "[(3, 2), (2, 1), (1, 0), (0, -1)]"))) == []


def test_a_size_from_the_counter_still_counts_in_torch_full():
    found = lint("""
        for step in range(100):
            x = torch.full((step + 1, 4), 0.5, device=device)
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
        """)
    assert (3, "XLA009") in codes(found), found


# ---- the position through forward (item 10) -------------------------------------------------------

CACHE_MODEL = """
    import torch
    import torch.nn as nn


    class Attention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.wk = nn.Linear(dim, dim)
            self.register_buffer("cache_k", torch.zeros(2, 32, dim))

        def forward(self, x, start_pos):
            bsz, seqlen, _ = x.shape
            self.cache_k[:bsz, start_pos : start_pos + seqlen] = self.wk(x)
            return x @ self.cache_k[:bsz, : start_pos + seqlen].transpose(1, 2)


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.attn = Attention(dim)

        def forward(self, x, start_pos):
            return x + self.attn(x, start_pos)


    class LM(nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.emb = nn.Embedding(16, dim)
            self.layers = nn.ModuleList([Block(dim) for _ in range(2)])
            self.register_buffer("rope", torch.randn(1, 32, dim))
            self.use_kv = True

        def forward(self, tokens, start_pos):
            seqlen = tokens.shape[1]
            h = self.emb(tokens) + self.rope[:, start_pos : start_pos + seqlen]
            if self.use_kv and start_pos >= 0:
                h = h * 2
            for layer in self.layers:
                h = layer(h, start_pos)
            return h
"""

GENERATE = """
    import torch
    import torch_xla
    from model import LM


    @torch.no_grad()
    def generate(prompt, total):
        model = LM().to(prompt.device)
        tokens = torch.zeros(prompt.shape[0], total, dtype=torch.long, device=prompt.device)
        prev = 0
        for cur in range(prompt.shape[1], total):
            logits = model(tokens[:, prev:cur], prev)
            tokens[:, cur] = logits[:, -1].argmax(-1)
            prev = cur
            if (tokens[:, cur] == 0).all():
                break
        return tokens
"""


def test_kv_cache_positions_reach_every_forward_through_module_calls(tmp_path):
    found = project(tmp_path, {"model.py": CACHE_MODEL, "generate.py": GENERATE})
    got = {(f, ln, c) for f, ln, c, _ in found}
    # the cache write and read (Attention, two module calls down), the rope slice (LM); no XLA003 "device
    # tensor as a slice bound" and no XLA002 on `start_pos >= 0`: every caller passes a Python int
    assert got == {("model.py", 14, "XLA009"), ("model.py", 15, "XLA009"), ("model.py", 37, "XLA009"),
                   ("generate.py", 13, "XLA009"), ("generate.py", 14, "XLA009"), ("generate.py", 16, "XLA009"),
                   ("generate.py", 16, "XLA002")}, found
    msg = next(m for f, ln, c, m in found if (f, ln) == ("model.py", 14))
    assert "passed `prev`" in msg and "every iteration of a decoding or sampling loop" in msg


def test_a_position_passed_as_a_device_tensor_is_not_an_int(tmp_path):
    gen = GENERATE.replace("logits = model(tokens[:, prev:cur], prev)",
                           "logits = model(tokens[:, prev:cur], torch.tensor(prev, device=prompt.device))")
    found = project(tmp_path, {"model.py": CACHE_MODEL, "generate.py": gen})
    got = {(f, ln, c) for f, ln, c, _ in found}
    assert ("model.py", 38, "XLA002") in got  # a tensor: `start_pos >= 0` reads it
    assert not {x for x in got if x[0] == "model.py" and x[2] == "XLA009"}, found


def test_a_forward_called_only_with_python_ints_has_no_tensor_condition():
    found = lint("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.register_buffer("table", torch.randn(64, 4))

            def forward(self, x, offset):
                if offset > 0:
                    x = x + self.table[offset : offset + x.shape[0]]
                return self.proj(x)

            def run(self, x):
                return self(x, 0) + self(x, 3)


        net = Net().to(device)
        for x, y in loader:
            loss = net(x, 1).sum() + net.run(x).sum()
            loss.backward()
            optimizer.step()
            torch_xla.sync()
        """)
    assert found == [], found


def test_a_forward_some_caller_passes_a_tensor_keeps_the_guess():
    found = lint("""
        class Net(nn.Module):
            def forward(self, x, offset):
                if offset > 0:
                    x = x * 2
                return x


        net = Net().to(device)
        for x, y in loader:
            loss = net(x, 1).sum() + net(x, y.sum()).sum()
            loss.backward()
            optimizer.step()
            torch_xla.sync()
        """)
    assert (4, "XLA002") in codes(found), found


def test_an_attribute_built_from_two_classes_is_not_resolved(tmp_path):
    model = CACHE_MODEL.replace("            self.attn = Attention(dim)",
                                "            self.attn = Attention(dim) if dim > 4 else nn.Identity()\n"
                                "            self.attn = nn.Identity()")
    found = project(tmp_path, {"model.py": model, "generate.py": GENERATE})
    assert not {(f, ln) for f, ln, c, _ in found if f == "model.py" and c == "XLA009" and ln in (14, 15)}, found
    assert ("model.py", 38, "XLA009") in {(f, ln, c) for f, ln, c, _ in found}  # LM's own slice still is (a line down)


def test_a_name_rebound_by_a_walrus_deep_in_an_expression_is_not_resolved(tmp_path):
    # `model` is bound by an assignment to LM and by a `:=` inside a call's argument: not one class, so
    # `model(...)` runs no known forward (module_calls searches the expressions once a class is found)
    gen = GENERATE.replace("        prev = 0\n", "        prev = 0\n        print(len([model := prompt]))\n")
    found = project(tmp_path, {"model.py": CACHE_MODEL, "generate.py": gen})
    assert not {(f, ln) for f, ln, c, _ in found if f == "model.py" and c == "XLA009"}, found
    found = project(tmp_path, {"model.py": CACHE_MODEL, "generate.py": gen.replace("model := prompt", "prompt")})
    assert ("model.py", 14, "XLA009") in {(f, ln, c) for f, ln, c, _ in found}


# ---- measured: the marked constructs recompile, their fixed twins do not ---------------------------

_MEASURE = """
import sys
sys.path.insert(0, {root!r})
import torch, torch_xla
import torch_xla.debug.metrics as met
from lm import Transformer
from sampler import Denoiser, sample, sample_fixed

device = torch_xla.device()
torch.manual_seed(0)
model = Transformer().to(device).eval()
prompt = torch.zeros(2, 2, dtype=torch.long, device=device)
den = Denoiser().to(device)

def compiles(fn):
    out = []
    for _ in range(2):  # the second call: what is left once every graph of the first was cached
        before = met.counter_value("UncachedCompile") or 0
        fn().cpu()
        out.append((met.counter_value("UncachedCompile") or 0) - before)
    return out

print("generate", *compiles(lambda: model.generate(prompt, 6)))
print("generate_fixed", *compiles(lambda: model.generate_fixed(prompt, 6)))
print("sample", *compiles(lambda: sample(den, (2, 8), device)))
print("sample_fixed", *compiles(lambda: sample_fixed(den, (2, 8), device)))
"""


def test_compile_counts_of_the_fixture_and_its_fixed_twins():
    require_torch_xla()
    env = fast_compile(dict(os.environ, PJRT_DEVICE="CPU"))  # the graphs are counted, not timed
    r = subprocess.run([sys.executable, "-c", _MEASURE.format(root=str(KV_DECODE))], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = {line.split()[0]: [int(x) for x in line.split()[1:]] for line in r.stdout.splitlines() if line}
    # a KV-cache decode of 6 tokens compiles a graph per token; the fixed-size buffer one graph in all
    assert counts["generate"][0] >= 6, counts
    assert counts["generate_fixed"][0] <= 2 and counts["generate_fixed"][1] == 0, counts
    # a sampler indexing its schedule with the Python timestep: a graph per step (T = 8)
    assert counts["sample"][0] >= 8, counts
    assert counts["sample_fixed"][0] <= 3 and counts["sample_fixed"][1] == 0, counts


def test_a_unit_test_calling_the_module_with_host_tensors_seeds_nothing(tmp_path):
    (tmp_path / "tests").mkdir()
    found = project(tmp_path, {
        "model.py": """
            import torch
            import torch.nn as nn


            class Gate(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        x = x * 2
                    return x
            """,
        "tests/test_gate.py": """
            import torch
            from model import Gate


            def test_gate():
                g = Gate()
                assert g(torch.ones(3)).sum() == 6
            """,
    })
    assert [(f, ln, c) for f, ln, c, _ in found] == [("model.py", 8, "XLA002")], found


KV_MODEL = """
    import torch
    import torch.nn as nn


    class Attention(nn.Module):
        def __init__(self, dim, max_len):
            super().__init__()
            self.wq = nn.Linear(dim, dim)
            self.register_buffer("cache_k", torch.zeros(1, max_len, dim))

        def forward(self, x: torch.Tensor, start_pos: int):
            seq_len = x.shape[1]
            self.cache_k[:, start_pos : start_pos + seq_len] = self.wq(x)
            return self.cache_k[:, : start_pos + seq_len].sum(1, keepdim=True)


    class Block(nn.Module):
        def __init__(self, dim, max_len):
            super().__init__()
            self.attention = Attention(dim, max_len)

        def forward(self, x, start_pos: int):
            return x + self.attention.forward(x, start_pos)


    class Transformer(nn.Module):
        def __init__(self, dim, n_layers, max_len):
            super().__init__()
            self.layers = nn.ModuleList()
            for _ in range(n_layers):
                self.layers.append(Block(dim, max_len))

        def forward(self, h, start_pos: int):
            for layer in self.layers:
                h = layer(h, start_pos)
            return h
"""

KV_GENERATOR = """
    import torch
    from tqdm import tqdm

    from model import Transformer


    class LLaMA:
        def __init__(self, model{annotation}):
            self.model = model

        def text_completion(self, tokens: torch.Tensor, total_len: int, eos_id: int):
            cur_iterator = tqdm(range(1, total_len))
            for cur_pos in cur_iterator:
                with torch.no_grad():
                    logits = self.model.forward(tokens[:, cur_pos - 1 : cur_pos], cur_pos)
                nxt = torch.argmax(logits[:, -1], dim=-1)
                tokens[:, cur_pos] = nxt
                if (nxt == eos_id).all():
                    break
            return tokens
"""


def test_a_model_passed_in_reaches_its_kv_cache_through_the_annotation_and_appended_layers(tmp_path):
    # hkproj/pytorch-llama's shape: `LLaMA(model: Transformer)` keeps the model, whose layers are appended one
    # by one to a ModuleList; the decode loop's position reaches the cache writes two modules down
    found = project(tmp_path, {"model.py": KV_MODEL, "inference.py": KV_GENERATOR.format(annotation=": Transformer")})
    assert {("model.py", 14, "XLA009"), ("model.py", 15, "XLA009")} <= {f[:3] for f in found}, found
    msg = next(m for name, ln, c, m in found if (name, ln) == ("model.py", 14))
    assert "passed `cur_pos` (the loop counter) on every iteration of a decoding or sampling loop" in msg


def test_a_model_passed_in_without_an_annotation_is_not_followed(tmp_path):
    found = project(tmp_path, {"model.py": KV_MODEL, "inference.py": KV_GENERATOR.format(annotation="")})
    assert not [f for f in found if f[0] == "model.py"], found


def test_a_decode_loop_calling_a_method_of_a_model_class_of_another_module_is_a_decoding_loop(tmp_path):
    """pytorch/examples' translation (round 9, read): `greedy_decode(model, ...)` calls `model.decode(ys, memory,
    mask)` every token, `model` a `Translator` of another module (every caller passes one: its class is known).
    Seen from this module, a method of another module's class with inputs runs the model: the loop decodes, and
    `ys` grown by `torch.cat` on every token compiles a graph per length, beside the per-token `.item()`
    (found before the class was known, lost when it was, found again)."""
    found = project(tmp_path, {
        "model.py": """
            import torch.nn as nn


            class Translator(nn.Module):
                def __init__(self, vocab, dim):
                    super().__init__()
                    self.emb = nn.Embedding(vocab, dim)
                    self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(dim, 2), 2)
                    self.ff = nn.Linear(dim, vocab)

                def decode(self, tgt, memory, tgt_mask):
                    return self.decoder(self.emb(tgt), memory, tgt_mask)
            """,
        "main.py": """
            import torch
            import torch_xla

            from model import Translator

            DEVICE = torch_xla.device()


            def greedy_decode(model, memory, max_len, start_symbol, end_symbol):
                ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long).to(DEVICE)
                for _ in range(max_len - 1):
                    mask = torch.triu(torch.ones(ys.size(0), ys.size(0), device=DEVICE))
                    out = model.decode(ys, memory, mask)
                    _, next_word = torch.max(model.ff(out[-1]), dim=1)
                    next_word = next_word.item()
                    ys = torch.cat([ys, torch.ones(1, 1).type_as(ys).fill_(next_word)], dim=0)
                    if next_word == end_symbol:
                        break
                return ys


            def main():
                model = Translator(100, 16).to(DEVICE)
                memory = torch.zeros(5, 1, 16, device=DEVICE)
                print(greedy_decode(model, memory, 20, 1, 2))
            """,
    })
    assert {(n, ln, c) for n, ln, c, _m in found} == {("main.py", 13, "XLA009"), ("main.py", 16, "XLA001"), ("main.py", 17, "XLA009")}
