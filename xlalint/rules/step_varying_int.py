"""XLA009 step-varying-python-int: a Python int that changes every step shapes or indexes a device tensor."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import rule_tables as RT
from xlalint.semantics.syntax import keyword_arg, positional_args, positional_params
from xlalint.semantics.growth import feeds_a_graph
from xlalint.semantics.step_values import StepValues

# A device value read to the host by a call (the loop's graph ends there)
_HOST_READ_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
_HOST_READ_BUILTINS = frozenset({"int", "float", "bool", "print"})

FIX_INDEX = (
    "make the index data, not a constant: `x.index_select(0, idx)` / `x[idx]` with "
    "`idx = torch.tensor([i]).to(device)` (uploaded each step, the graph stays the same)"
)
FIX_SLICE = (
    "slice to a fixed size and mask the rest (`x[:, :MAX] * (torch.arange(MAX, device=d) < n_t)` with the "
    "length as a device tensor), or round it up to a few buckets (`n = -(-n // 64) * 64`: one graph per bucket)"
)
FIX_DECODE = (
    "keep every shape fixed and the position as data: a fixed-size buffer or static KV cache of the "
    "maximum length, written at a position tensor (`cache.index_copy_(1, pos_t, k)`, `pos_t` on the device, "
    "advanced with `pos_t += 1`), the unused tail masked with `torch.where(torch.arange(MAX, device=d) <= "
    "pos_t, scores, -inf)` (the static cache that TPU generation uses); a sampler indexes its schedule with "
    "a timestep tensor (`alphas.index_select(0, t)`)"
)
FIX_CACHE = (
    "a cache of one fixed length: transformers' static cache (`cache_implementation=\"static\"`, or a "
    "`StaticCache(config=..., max_batch_size=b, max_cache_len=MAX)` passed as `past_key_values` with "
    "`cache_position` as a device tensor), or your own preallocated cache written with `index_copy_` at a "
    "position tensor and masked with `torch.where` (the static cache that TPU generation uses)"
)
FIX_SHAPE = (
    "use a fixed size (pad to a bucket: one graph per bucket instead of one per value) and keep what varies "
    "as data (a mask or an index tensor)"
)


class StepVaryingPythonInt(Rule):
    code = "XLA009"
    name = "step-varying-python-int"
    summary = "A Python int that changes every step is used as an index, slice bound or shape: a new graph to compile every step."
    what_it_does = """
        Flags, in a step loop, a Python int that changes from step to step used on a device tensor:
        as an index (`out[step]`, `x[:, i]`), a slice bound (`x[:, :n]`, `x[start:start + k]`), a
        `view`/`reshape`/`expand`/`repeat`/`narrow`/`select`/`new_zeros` argument, or the size of a
        `torch.arange`/`zeros`/`ones`/`empty`/`full`/`rand*` made on the device. The int varies when it is
        the loop counter (`for step in range(n)`, `for i, b in enumerate(loader)`, `global_step += 1`),
        derived from one (`n = step * 2 + 8`, `step % 100`), an item of a Python list indexed by one
        (`lengths[step]`), a length read from the batch (`max(len(s) for s in batch)`), or a parameter
        of a helper that the step loop passes one of these (`take_prefix(x, lengths[step])`).
        Not flagged: literals and config values never rebound in the loop, sizes from `x.size(0)` /
        `x.shape`, and values from a small bucket set, which compile once per value and then hit the
        cache: `step % K` with a literal K <= 16 (K graphs), `min(step, K)` (K + 1 graphs, then one),
        an item of a literal list of at most 16 ints (`sizes[step % 3]` with `sizes = [64, 128, 256]`:
        3 graphs). `step % K` with a larger K is reported with its number of graphs. Inner loops that do
        not train (`for i in range(4):` inside the step) repeat the same indices every step: not flagged.
        An index read from a device tensor's values (`e = int(hit.item()); w[e]`, a Mixture-of-Experts
        dispatch) is not flagged either: it takes values within the indexed dimension, one graph each,
        then cached (the host read itself is XLA001's, the loop over the tensor XLA008's); a size or a
        slice bound read from the data (`n = lengths.max().item(); x[:, :n]`) is.
        Decoding and sampling loops count too when they end a graph on every iteration (a barrier, or a
        host read such as the stop test `if all(eos_reached): break`): `tokens[:, prev:cur]`,
        `tokens[:, cur] = nxt` (`prev = cur` carries the previous position), `alphas[i]` in
        `for i in reversed(range(T))`, and the KV-cache slices of the `forward` the loop passes its
        position to (`self.cache_k[:bsz, start_pos : start_pos + seqlen] = k`), through module calls whose
        class the source shows (`self(...)`, `self.attn(...)` built in `__init__`, `for layer in
        self.layers`, `model = LM(...)`). Not flagged: `torch.full((b,), i)` (the fill value is data).
        A tensor such a loop grows every iteration (`ids = torch.cat([ids, nxt], dim=-1)`) is flagged at
        the `cat`: its length is a step-varying int of its own, baked into every graph that uses it, and
        `ids.shape[1]` read from it varies too (`prefix_len = x.shape[1]; x[:, prefix_len + i]`). Not a
        sliding window (`torch.cat([ids[:, 1:], nxt], 1)` keeps its length) nor a `cat` after the loop,
        nor a tensor that a loop cut only by host reads (no barrier) grows and reads nowhere else: a decode
        with a KV cache that feeds the model the next token only leaves its grown ids pending, in no graph.
        So is a KV cache such a loop gives back to the model call that returned it (`out = model(ids,
        past_key_values=past)` then `past = out.past_key_values`, `logits, past = model(ids, past=past)`;
        transformers 5's `cache=` in a module that imports transformers): the model extends it by the
        input's length on every call (transformers' convention; measured on its GPT-2, 12 tokens, 12 graphs).
        Not a cache passed and never taken back (written in place), one rebuilt in the iteration, or a
        function that chooses a static cache (`StaticCache`, `cache_implementation=`).
        A function of the module that returns its argument grown grows what the loop gives it back (`ids =
        append_token(ids, nxt)` with `return torch.cat([ids, nxt], dim=1)`, or a grown name in a returned
        tuple): flagged at the call.
    """
    why_slow = """
        torch_xla traces Python ints into the graph as constants: `x[:, :n]` with `n = 37` is a
        different graph from `n = 38`, and every new graph is compiled (~250-330 ms on the CPU device,
        longer on a TPU) before it runs. Measured on torch_xla 2.9: `out[i]`, `x[:, :n]` and
        `torch.arange(n)` with an int that changes per step recompile on every step.
    """
    example = """
        lengths = [sample_len(i) for i in range(num_steps)]
        for step, (x, y) in enumerate(loader):
            n = lengths[step]
            out = model(x[:, :n])          # XLA009: a new graph for every new n
            pos = torch.arange(n, device=device)   # XLA009
            loss = loss_fn(out, y) + out[step % 8].sum()   # ok: 8 values, 8 graphs then cached
    """
    use_instead = """
        MAX = 64
        for step, (x, y) in enumerate(loader):
            n_t = torch.tensor(lengths[step]).to(device)        # data, not a constant
            mask = torch.arange(MAX, device=device) < n_t        # fixed shape
            out = model(x[:, :MAX] * mask)
            loss = loss_fn(out, y)
    """
    known_problems = """
        A counter passed to a helper (in this module or another) is followed: the helper's uses of that
        parameter are reported when a call that runs every step passes it a varying int. A length read
        from the batch is followed when it is a Python value (`max(len(s) for s in batch)`,
        `len(sample["tokens"])` of an uncollated sample); `len()` of a tensor is its `size(0)`, taken as
        fixed. An int that changes per step but takes only a few values for reasons the source does not
        show (a schedule that is constant after warm-up) is reported.
        A decoding loop reaches a `forward` only through a module whose class the source shows: a model
        passed in as a parameter or stored from one (`self.model = model`) is not followed, and its KV
        cache slices are not reported. An evaluation loop or a chunked forward over a fixed range is not
        reported (the same few values on every call: a bounded set of graphs, compiled once).
        Fix safety: the fixes change shapes or introduce masks; none is applied automatically.
    """
    verify = """
        `UncachedCompile` keeps rising after warm-up (a new graph on most steps), with the root cause
        (the node whose shape or constant changed, from the IR dumps) at this line.
    """
    VALID = [
        # a sliding window keeps its length; predictions concatenated once, after the loop
        "import torch\n@torch.no_grad()\ndef generate(model, ids: torch.Tensor, n, eos):\n    outs = []\n    for _ in range(n):\n        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)\n        ids = torch.cat([ids[:, 1:], nxt], dim=-1)\n        outs.append(nxt)\n        if nxt.item() == eos:\n            break\n    return torch.cat(outs, dim=1)\n",
        # a decoding loop that never ends a graph inside: one growing graph per call; a fill value is data
        "import torch\n@torch.no_grad()\ndef generate(model, tokens: torch.Tensor, plen, total):\n    for cur in range(plen, total):\n        tokens[:, cur] = model(tokens[:, :cur])[:, -1].argmax(-1)\n        t = torch.full((2,), cur, device=tokens.device)\n    return tokens\n",
        # constants, config values, sizes of a fixed-shape input, bucketed values
        "import torch\nsizes = [64, 128, 256]\nfor step, (x, y) in enumerate(loader):\n    out = model(x)\n    a = out[:, :cfg.max_len]\n    b = out[: x.size(0)]\n    c = out[step % 4]\n    d = out[:, : sizes[step % 3]]\n    e = out[min(step, 3)]\n    loss = a.sum() + b.sum() + c.sum() + d.sum() + e.sum()\n    loss.backward()\n",
        # an inner loop over a fixed range repeats the same indices every step
        "import torch\nfor x, y in loader:\n    out = model(x)\n    total = 0\n    for i in range(4):\n        total = total + out[:, i].sum()\n    total.backward()\n",
        # the counter used on a Python list / for logging, and once
        "import torch\nhistory = []\nfor step, (x, y) in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n    history.append(step)\n    names = labels[step]\n    if step == 0:\n        first = loss[step]\n",
        # a CPU factory: no graph
        "import torch\nfor step, x in enumerate(loader):\n    idx = torch.arange(step)\n    loss = model(x).sum()\n    loss.backward()\n",
        # an index read from the data (MoE dispatch, from transformers): one of num_experts values, each
        # one graph, then cached
        "import torch\nfor x, y in loader:\n    logits = model(x)\n    expert_mask = torch.nn.functional.one_hot(logits.argmax(-1), num_classes=8)\n    for hit in expert_mask.sum(0).nonzero():\n        e = int(hit.item())\n        w = expert_mask[e]\n        logits = logits + w.sum()\n    logits.sum().backward()\n",
    ]
    INVALID = [
        # a greedy decode that grows its ids every token and tests the stop token: one graph per length
        "import torch\n@torch.no_grad()\ndef generate(model, ids: torch.Tensor, n, eos):\n    for _ in range(n):\n        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)\n        ids = torch.cat([ids, nxt], dim=-1)\n        if nxt.item() == eos:\n            break\n    return ids\n",
        # a decoding loop ended by its stop test every token: a new graph per position
        "import torch\n@torch.no_grad()\ndef generate(model, tokens: torch.Tensor, plen, total, eos):\n    for cur in range(plen, total):\n        nxt = model(tokens[:, :cur])[:, -1].argmax(-1)\n        tokens[:, cur] = nxt\n        if (nxt == eos).all():\n            break\n    return tokens\n",
        "import torch\nfor step in range(100):\n    x = torch.randn(8, 64, device=device)\n    n = step % 50 + 10\n    out = model(x[:, :n])\n    loss = out.sum()\n    loss.backward()\n    optimizer.step()\n",
        "import torch\nlengths = [int(l) for l in raw_lengths]\nfor step, (x, y) in enumerate(loader):\n    n = lengths[step]\n    pos = torch.arange(n, device=x.device)\n    loss = model(x).sum() + pos.sum()\n    loss.backward()\n",
        "import torch\nglobal_step = 0\nfor x, y in loader:\n    out = model(x)\n    global_step += 1\n    loss = out[global_step].sum() + out.view(global_step, -1).sum()\n    loss.backward()\n",
        # a slice bound read from the data (transformers' omdet-turbo): a new length, a new graph
        "import torch\nfor x, mask in loader:\n    out = model(x)\n    max_len = (mask != 0).sum(1).max().item()\n    loss = out[:, :max_len].sum()\n    loss.backward()\n",
    ]

    decides_in_project = True  # a counter passed to a helper (in this module or another) varies there too

    def __init__(self) -> None:
        super().__init__()
        self.sv = None
        self._found: list = []  # (candidate, Varying, role, code)
        self._calls: list = []  # (ctx, callee, position or keyword, Varying, argument's code)
        # (candidate, index of its loop in the context, Varying, role, code): a use in a decoding loop cut every
        # iteration that this module cannot tell runs the model (through another module's class): the project decides
        self._deferred: list = []

    def before_rewalk(self) -> None:
        alive = {id(c) for c in self.model.candidates}
        self._found = [r for r in self._found if id(r[0]) in alive]
        self._values().before_rewalk()

    def _values(self) -> StepValues:
        if self.sv is None:
            self.sv = StepValues(self.model)
        return self.sv

    # ------------------------------------------------------------------ bindings
    def on_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._values().on_function(node)

    def on_For(self, node: cst.For) -> None:
        self._values().on_for(node)
        self._values().on_loop(node)

    def on_Assign(self, node: cst.Assign) -> None:
        sv = self._values()
        for t in node.targets:
            sv.on_assign(t.target, node.value)
        if len(node.targets) == 1 and type(node.value) is cst.Call:
            # the syntax first: the model's kind is asked only of a `cat` that grows its target
            v = sv.growing_cat(node.targets[0].target, node.value)
            if v is not None and self.model.kind(node.value) in K.DEVICE_TENSORS:
                self._flag(node.value, v, GROWS, FIX_DECODE)

    def on_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._values().on_assign(node.target, node.value)

    def on_AugAssign(self, node: cst.AugAssign) -> None:
        self._values().on_aug_assign(node)

    def on_If(self, node: cst.If) -> None:
        self._note_test(node.test)

    def on_While(self, node: cst.While) -> None:
        self._note_test(node.test)
        self._values().on_loop(node)

    def _note_test(self, test) -> None:
        """``if (nxt == eos).all(): break``, ``if all(done):``: a truth test of a device value reads it."""
        m = self.model
        if type(test) is cst.UnaryOperation:
            test = test.expression
        if type(test) is cst.BooleanOperation:
            self._note_test(test.left)
            self._note_test(test.right)
            return
        if m.kind(test) in K.DEVICE_TENSORS or (
                type(test) is cst.Call and any(m.is_builtin(test.func, b) for b in ("all", "any"))
                and len(test.args) == 1 and type(test.args[0].value) in (cst.Name, cst.Attribute)
                and m.kind(test.args[0].value) in K.DEVICE_TENSORS):
            self._values().note_host_read()

    # ------------------------------------------------------------------ uses
    def on_Subscript(self, node: cst.Subscript) -> None:
        if self.model.kind(node.value) not in K.DEVICE_TENSORS:
            return
        sv = self._values()
        for el in node.slice:
            s = el.slice
            if type(s) is cst.Index:
                v = sv.varying(s.value)
                if v is not None and not v.data:
                    return self._flag(node, v, "an index", FIX_INDEX)
            elif type(s) is cst.Slice:
                for part in (s.lower, s.upper, s.step):
                    v = sv.varying(part) if part is not None else None
                    if v is not None:
                        return self._flag(node, v, "a slice bound", FIX_SLICE)

    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        func = node.func
        self._note_call(node)
        self._note_host_read(node)
        if node.args:
            grown = self._values().growing_call(node)
            if grown is not None:
                v, cache = grown
                self._flag(node, v, GROWS_CACHE if cache else GROWS, FIX_CACHE if cache else FIX_DECODE)
        q = m.qualname(func)
        if q is not None:
            if q in RT.SHAPE_FACTORIES:
                if keyword_arg(node, "device") is None and m.kind(node) not in K.DEVICE_TENSORS:
                    return  # made on the CPU: no graph
                args = positional_args(node)
                if q in RT.FILL_FACTORIES:
                    args = args[:1]  # torch.full((b,), i): the size, not the fill value (data: measured no recompile)
                v = self._varying_arg(node, args)
                if v is not None:
                    self._flag(node, v, "a size", FIX_SHAPE)
            return
        if type(func) is cst.Attribute and func.attr.value in RT.SHAPE_METHODS:
            if m.kind(func.value) not in K.DEVICE_TENSORS:
                return
            v = self._varying_arg(node, positional_args(node))
            role = "an index" if func.attr.value == "select" else "a shape"
            if v is not None and not (v.data and role == "an index"):
                self._flag(node, v, role, FIX_INDEX if role == "an index" else FIX_SHAPE)

    def _note_host_read(self, node: cst.Call) -> None:
        """``nxt.item()``, ``tokens.tolist()``, ``int(t)``: a device value read to the host (a graph cut)."""
        m = self.model
        func = node.func
        if type(func) is cst.Attribute:
            if func.attr.value in _HOST_READ_METHODS and m.kind(func.value) in K.DEVICE_TENSORS:
                self._values().note_host_read()
        elif (type(func) is cst.Name and len(node.args) == 1 and func.value in _HOST_READ_BUILTINS
              and m.is_builtin(func, func.value) and m.kind(node.args[0].value) in K.DEVICE_TENSORS):
            self._values().note_host_read()

    def _note_call(self, node: cst.Call) -> None:
        """A call to a project function passing a varying int: its parameter varies there. A call of a
        module of a known project class runs its ``forward`` (``self.attn(h, start_pos)``)."""
        if not node.args or any(a.star for a in node.args):
            return
        callee = self.model.module_forward_key(node.func) or self.model.callee_key(node.func)
        if callee is None:
            return
        sv = self._values()
        ctx = None
        for i, a in enumerate(node.args):
            v = sv.varying(a.value)
            if v is None or self.model.kind(a.value) in K.ANY_TENSOR:
                continue
            if v.param is None and not any(lp.node is v.loop for lp in self.model.step_context().loops):
                continue
            ctx = ctx or self.model.step_context()
            where = a.keyword.value if a.keyword is not None else i
            self._calls.append((ctx, callee, where, v, self.text(a.value, 60)))

    def _varying_arg(self, node, args):
        sv = self._values()
        for a in args:
            items = [e.value for e in a.elements] if type(a) in (cst.Tuple, cst.List) else [a]
            for it in items:
                v = sv.varying(it)
                if v is not None:
                    return v
        return None

    def _flag(self, node, v, role: str, fix: str) -> None:
        if v.param is not None and self.model.name_kind(v.param) in K.ANY_TENSOR | K.HOLDS_DEVICE_TENSOR:
            return  # a parameter the callers pass a tensor: not a Python int
        self.report(node, "", fix=fix, when="custom")
        self._found.append((self.model.candidates[-1], v, role, self.text(node, 60)))

    def finalize(self) -> None:
        m = self.model
        for cand, v, role, code in self._found:
            if v.param is not None:
                continue  # decided over the whole program (resolve_project): who calls with what
            hot = False
            if not v.data:
                loop = next((lp for lp in cand.ctx.loops if lp.node is v.loop), None)
                if loop is None:
                    continue
                if not m.is_step_loop(loop):
                    if not self._hot_and_cut(loop):
                        if self._maybe_hot_elsewhere(loop) and (role != GROWS or feeds_a_graph(loop.node, v.name)):
                            self._deferred.append((cand, cand.ctx.loops.index(loop), v, role, code))
                        continue  # the value does not change from graph to graph where it is used
                    if role == GROWS and not feeds_a_graph(loop.node, v.name):
                        continue  # cut by host reads of other values only: the growing `cat` stays pending
                    hot = True
                elif (self._values().repeats_in(loop.node, loop.outer.node if loop.outer is not None else None)
                      or m.repeats_every_step(loop)):
                    continue  # the same offsets on every pass of the loop around it: compiled once, then cached
                else:
                    hot = not m.loop_trains(loop)  # a decoding or sampling loop ended by a barrier
            fr = m.frequency(cand.ctx)
            if not fr.per_step:
                continue
            cand.frequency = fr
            if hot and role != GROWS_CACHE:
                cand.fix = FIX_DECODE
            cand.message = _message(code, v.name, v.origin, role, cand.fix, hot)

    def _hot_and_cut(self, loop) -> bool:
        """A decoding or sampling loop (it runs the model on every iteration, and its words say it
        generates) that reads a device value to the host in its body: each iteration ends a graph of its
        own, and an int that changes per iteration makes each of them new: one graph per position, up to
        the maximum length (measured: a decode of 8 tokens cut by its stop test compiled 9 graphs). An
        evaluation or a chunked forward over a fixed range repeats the same few values every step: a bounded
        set of graphs, compiled once, not reported."""
        sv = self._values()
        return _decoding(self.model.steps, loop) and sv.cuts(loop) and not sv.chunks(loop.node)

    def _maybe_hot_elsewhere(self, loop) -> bool:
        """A decoding loop (by its words) cut every iteration that this module does not see run the model:
        it may, through a class of another module (``approx_model_cache.generate(prefix, gamma)``)."""
        sv = self._values()
        return loop.hint == H.DECODE and sv.cuts(loop) and not sv.chunks(loop.node) \
            and not _decoding(self.model.steps, loop)

    # ------------------------------------------------------------------ across functions and modules
    def export(self, ctx_id, cand_id):
        m = self.model
        uses = []
        for cand, v, role, code in self._found:
            ci = cand_id(cand)
            if v.param is not None and ci is not None:
                uses.append([ci, cand.ctx.func.key, v.param, v.name, v.origin, role, code])
        local = [[cand_id(cand), pos, v.name, v.origin, role, code] for cand, pos, v, role, code in self._deferred
                 if cand_id(cand) is not None]
        if not uses and not self._calls and not local:
            return None
        mod = m.module_name

        def ref(callee: str) -> str:  # as the model's export names callees (SemanticModel.export)
            if callee[0] != "@" and callee not in m.funcs and "." in callee and callee.rpartition(".")[0] in m.classes:
                return f"@{mod}:{callee}"
            return callee

        calls, seen = [], set()
        alive = {id(lp) for lp in m.loops}
        for ctx, callee, where, v, arg in self._calls:
            if any(id(lp) not in alive for lp in ctx.loops):
                continue  # seen in a walk of its function that a later walk replaced
            pos = next((i for i, lp in enumerate(ctx.loops) if lp.node is v.loop), None) if v.param is None else None
            if v.param is None and pos is None:
                continue
            cut = pos is not None and self._values().cuts(ctx.loops[pos]) and not self._values().chunks(
                ctx.loops[pos].node)
            row = (ctx.func.key, ref(callee), where, pos, v.param, v.origin, arg, cut)
            if row in seen:
                continue  # the same call seen again when its function was walked again
            seen.add(row)
            calls.append([ctx_id(ctx), *row[1:]])
        params = {}
        for f in m.funcs.values():
            if type(f.node) is cst.FunctionDef:
                params[f.key] = [positional_params(f.node), f.class_key is not None]
        return {"uses": uses, "calls": calls, "params": params, "local": local}

    @staticmethod
    def _resolve_local(steps, data: dict, cands: dict) -> None:
        """The uses in decoding loops cut every iteration that run the model only through another module
        (``finalize`` deferred them): reported where the whole program shows the loop runs the model."""
        for mod, d in data.items():
            for ci, pos, name, origin, role, code in d.get("local", ()):
                cand = cands[mod][ci]
                loop = cand.ctx.loops[pos] if pos < len(cand.ctx.loops) else None
                if loop is None or not _decoding(steps, loop):
                    continue
                fr = steps.frequency(cand.ctx)
                if not fr.per_step:
                    continue
                cand.frequency = fr
                if role != GROWS_CACHE:
                    cand.fix = FIX_DECODE
                cand.message = _message(code, name, origin, role, cand.fix, True)

    @classmethod
    def resolve_project(cls, program, data: dict, cands: dict) -> None:
        """A parameter varies per step when a call that runs every step passes it a varying int: a loop's
        counter (or a value derived from it) where that loop is a step loop, or a varying parameter of the
        caller. Uses of such a parameter (in any module) are reported."""
        steps = program.steps
        cls._resolve_local(steps, data, cands)
        params = {}
        for mod, d in data.items():
            for key, rec in d["params"].items():
                params[f"{mod}:{key}"] = rec
        varying: dict = {}  # (global func key, param) -> (how, from a hot loop's iterations rather than steps)
        forward = []  # (caller's global key, its param, targets, where, call text)
        for mod, d in data.items():
            ctxs = program.ctxs[mod]
            for ci, callee, where, pos, cparam, origin, arg, cut in d["calls"]:
                ctx = ctxs[ci]
                if not steps.frequency(ctx).per_step:
                    continue
                targets = program.targets(f"{mod}\0{callee}")
                if cparam is None:
                    loop = ctx.loops[pos] if pos < len(ctx.loops) else None
                    if loop is None:
                        continue
                    step_loop = steps.is_step_loop(loop)
                    if not step_loop and not (cut and _decoding(steps, loop)):
                        continue
                    if step_loop and steps.repeats_every_step(loop):
                        continue  # a micro-batch loop of a per-step function: the same values every step
                    hot = not step_loop or not steps.loop_trains(loop)
                    for t in targets:
                        p = _param_at(params.get(t), where, callee)
                        if p is not None:
                            varying.setdefault((t, p), (f"`{arg}` ({origin})", hot))
                else:
                    forward.append((ctx.func.key, cparam, targets, where, arg, callee))
        changed = True
        while changed:
            changed = False
            for caller, cparam, targets, where, arg, callee in forward:
                rec = varying.get((caller, cparam))
                if rec is None:
                    continue
                how, hot = rec
                for t in targets:
                    p = _param_at(params.get(t), where, callee)
                    if p is not None and (t, p) not in varying:
                        varying[(t, p)] = (how if arg == cparam else f"`{arg}`, derived from {how}", hot)
                        changed = True
        if not varying:
            return
        for mod, d in data.items():
            for ci, fkey, param, name, origin, role, code in d["uses"]:
                rec = varying.get((f"{mod}:{fkey}", param))
                if rec is None:
                    continue
                how, hot = rec
                cand = cands[mod][ci]
                fr = steps.frequency(cand.ctx)
                if not fr.per_step:
                    continue
                cand.frequency = fr
                every = "on every iteration of a decoding or sampling loop" if hot else "on every step"
                if origin == f"the parameter `{param}`":
                    shown = f"the parameter `{param}`, passed {how} {every}"
                else:
                    shown = f"derived from the parameter `{param}`, passed {how} {every}"
                if hot:
                    cand.fix = FIX_DECODE
                cand.message = _message(code, name, shown, role, cand.fix, hot)


def _decoding(steps, loop) -> bool:
    """The loop runs the model every iteration and is a decoding or sampling loop (``hot_loops.DECODE``)."""
    return loop.hint == H.DECODE and steps.is_hot_loop(loop)


def _param_at(rec, where, callee: str):
    """The parameter a call's argument ``where`` (a position or a keyword) binds in a function."""
    if rec is None:
        return None
    names, is_method = rec
    if isinstance(where, str):
        return where if where in names else None
    offset = 1 if is_method and names and names[0] in ("self", "cls") and "." in callee else 0
    i = where + offset
    return names[i] if i < len(names) else None


GROWS = "the size of its result"  # the role of a `torch.cat` that grows a tensor every iteration
GROWS_CACHE = "the KV cache it extends"  # the role of a model call given back the cache it returned


def is_growth_message(code: str, message: str) -> bool:
    """An XLA009 finding on a `torch.cat` that grows a tensor every iteration (its message is `_message`'s
    GROWS form): --verify judges it by the input shapes that change, not at its line."""
    return code == "XLA009" and "` grows `" in message


def _message(code: str, name: str, origin: str, role: str, fix: str, hot: bool = False) -> str:
    shown = code if len(code) <= 60 else code[:57] + "..."
    if role == GROWS_CACHE:
        when = "iteration" if hot else "step"
        return (
            f"`{shown}` grows `{name}`, the KV cache it is given back every {when}, by the input's length: the "
            "cache's length is baked into every graph that reads it, so each call compiles new graphs, one per "
            "length (measured: a decode of 16 tokens that carries its cache this way compiled 16 graphs, the same decode with a static cache 2; transformers GPT-2 with its DynamicCache given back, 12 tokens: 12 graphs). Fix: "
            + fix
        )
    if role == GROWS:
        when = "iteration" if hot else "step"
        ends = ", and the loop ends a graph on every iteration (a barrier or a host read)" if hot else ""
        return (
            f"`{shown}` grows `{name}` every {when}: its length is baked into every graph that uses it{ends}, "
            "so each iteration compiles new graphs: one per length (measured: a greedy decode of 16 tokens "
            "that grows its ids with `torch.cat` compiled 16 graphs, the same decode into a fixed buffer 1). "
            "Fix: " + fix
        )
    if hot:
        return (
            f"`{shown}` uses `{name}` ({origin}), a Python int that changes every iteration, as {role}: "
            "it is baked into the graph as a constant, and the loop ends a graph on every iteration (a "
            "barrier or a host read), so each new value is a new graph to compile: one per position "
            "(measured: a decode of 6 tokens compiled 6 graphs, a sampler of 8 steps 8; a new prompt "
            "length compiles them again). Fix: " + fix
        )
    return (
        f"`{shown}` uses `{name}` ({origin}), a Python int that changes from one run to the next, as {role}: "
        "it is baked into the graph as a constant, so each new value is a new graph to compile, {when} "
        "(measured: a recompile whenever it changes). Fix: " + fix
    )
