"""XLA005 unbucketed-variable-length: input shapes that change from batch to batch."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.rules import Rule, set_parts
from xlalint.rules.padding_syntax import (
    absent, bindings_of, dataset_length, field_defaults, field_padding, is_batch_max, is_len_call, is_longest_item,
    is_none, literal_texts, pads_to_longest, padded_before_its_loop, self_field, tokenizes_one_text,
)
from xlalint.semantics import rule_tables as RT
from xlalint.semantics import tables as T
from xlalint.semantics.steps import EVERY, Frequency
from xlalint.semantics.syntax import contains, dotted_name, names_in, keyword_arg, last_name, name_words, positional_args, string_value
from xlalint.semantics.value_uses import ValueUses

from xlalint.rules.variable_length_project import resolve_padding_across_modules
from xlalint.rules.variable_length_text import COST, EXAMPLES_INVALID, EXAMPLES_VALID, FIX_COLLATOR, FIX_DROP_LAST, FIX_PAD


class UnbucketedVariableLength(Rule):
    code = "XLA005"
    name = "unbucketed-variable-length"
    summary = "Batches are padded to their own longest example (or the last one is short): a new graph for each new shape."
    what_it_does = """
        Flags where a batch's shape is decided by its data: `pad_sequence` in a collate function (a
        function named `*collate*` / `*batch*` or passed as `collate_fn=`) or in per-step code;
        collate functions that pad to `max(len(x) for x in batch)` without rounding it to a bucket
        (bound to a name, or written in the size: `torch.zeros(len(batch), max(lengths))`);
        tokenizer calls with `padding=True` / `"longest"` (also a collator dataclass's `padding=self.padding` whose
        field defaults to it, when its construction leaves it) without `pad_to_multiple_of`, even with
        `max_length=` (both ignore it: it only truncates), also when the value comes through the
        function's `padding` parameter (its default, a caller, or `functools.partial(collate,
        padding=True)`, in this module or another: reported once, at the tokenizer call); `pad_sequence`
        or batch-max padding in a function another module passes as `collate_fn=`; `DataCollatorWithPadding` / `DataCollatorForSeq2Seq` /
        `DataCollatorForLanguageModeling` / `DataCollatorForTokenClassification` without
        `pad_to_multiple_of`; and, in files that use torch_xla, a `DataLoader` without
        `drop_last=True` that feeds a training step loop when the dataset length is not known to be a
        multiple of the batch size. Only files that import torch are checked.
        Not flagged: `padding="max_length"` with `max_length`, `pad_to_multiple_of=N`, explicit
        bucketing (rounding the batch max up to one of a few fixed lengths), fixed-size chunks.
    """
    why_slow = """
        XLA compiles one graph per input shape. When every batch is padded to its own longest
        example, the sequence length (and so the graph) changes from step to step: measured on
        torch_xla 2.9, random lengths 8-64 recompiled on 9 steps out of 10, while the same data
        bucketed to 16/32/64 compiled at most 3 graphs in total. A partial last batch is one more
        shape (one more compile per distinct size).
    """
    example = """
        def collate(batch):
            ids = pad_sequence([b["input_ids"] for b in batch], batch_first=True)   # XLA005
            return ids
        enc = tokenizer(texts, padding=True, return_tensors="pt")                    # XLA005
        collator = DataCollatorWithPadding(tokenizer)                                # XLA005
    """
    use_instead = """
        def collate(batch, bucket=64):
            longest = max(len(b["input_ids"]) for b in batch)
            length = -(-longest // bucket) * bucket          # round up to a multiple of 64
            ids = torch.zeros(len(batch), length, dtype=torch.long)
            ...
        enc = tokenizer(texts, padding="max_length", max_length=128, truncation=True, return_tensors="pt")
        collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=64)
    """
    known_problems = """
        A dataset whose examples all have the same length (fixed-size chunks built elsewhere) makes
        batch-max padding harmless; the linter cannot always see that. A `DataLoader` is only checked
        when the step loop that iterates it is in the same file.
    """
    verify = """
        `UncachedCompile` keeps rising step after step past warm-up; `--verify` lists the input shapes
        that changed between the recompiling steps.
    """
    VALID = EXAMPLES_VALID
    INVALID = EXAMPLES_INVALID

    def __init__(self) -> None:
        super().__init__()
        self._found: list = []  # (candidate, kind, extra) decided in finalize
        self._collate_names: set = set()  # names passed as collate_fn=
        self._max_lens: list = []  # (candidate, func, name)
        self._bucketed: set = set()  # (id(func), name) of batch maxima that are rounded to a bucket
        self._loaders: list = []  # (candidate, func, name or None, call, dataset length, batch size)
        self._aliases: dict = {}  # (id(func), name) -> names its value was built from
        self._assigned_calls: dict = {}  # id(call) -> target name
        self._int_names: dict = {}  # (id(func), name) -> int literal value
        self._dataset_len: dict = {}  # (id(func), name) -> known dataset length
        self._arg_passes: list = []  # (caller func, callee key, index/keyword, the argument): _names_feed
        self._length_lists: set = set()  # (id(func), name) of lists of lengths
        self._bucket_funcs: set = set()  # id(func) of functions that mention buckets
        self._group_texts = False  # the file chunks a token stream into fixed-size blocks
        self._tokenized = set()  # how the file's tokenizer calls pad: "max_length" (fixed) and/or "dynamic"
        self._rebound: set = set()  # (id(func), name) assigned in the function
        self._param_pads: list = []  # (candidate, function key or None, parameter): `padding=padding`
        self._padding_sites: set = set()  # (callee key, "True"/"longest"): calls and partials that pad to the longest
        self._pending: list = []  # (candidate, function key, parameter) left to the project
        self._pending_msgs: list = []  # the same with their headline
        self._site_of: dict = {}  # id(call) -> callee key of a call/partial passing padding=True/"longest"
        self._site_cands: list = []  # (candidate, callee key): such a site's own finding
        self._collate_keys: set = set()  # callee keys passed as collate_fn= (through functools.partial too)
        self._collate_pending: list = []  # (candidate, function key, headline): padding in a function maybe passed as collate_fn= elsewhere
        self._uses = ValueUses()  # where a tokenizer's padded output goes: a model, or only a length check
        self._result_of: dict = {}  # id(call) -> (function id, the name its result is bound to)
        self._comps: list = []  # (id(func), comprehension): the recent ones, for `tokenizes_one_text`
        self._whole_split_maps: set = set()  # functions mapped over a whole split at once (`batch_size=None`)
        self._fields: dict = {}  # class key -> {field: default node} (collator dataclasses: `padding: bool = True`)
        self._field_pads: list = []  # (candidate, class key, tokenizer call): `padding=self.padding`
        self._built: list = []  # calls of this module's classes: what they override is decided in finalize
        self._method_of: dict = {}  # id(method node) -> class key

    # ------------------------------------------------------------------ walk
    def on_ListComp(self, node) -> None:
        self._comps = [*self._comps[-7:], (id(self.model.func), node)]

    on_GeneratorExp = on_ListComp

    def on_ClassDef(self, node: cst.ClassDef) -> None:
        key = self.model.class_key
        self._fields[key] = field_defaults(node)
        for st in node.body.body if type(node.body) is cst.IndentedBlock else ():
            if type(st) is cst.FunctionDef:
                self._method_of[id(st)] = key  # a class inside a function: its methods are the function's locals

    def on_FunctionDef(self, node: cst.FunctionDef) -> None:
        words = name_words(node.name.value)
        if "group" in words and "texts" in words or "chunk" in words or "chunks" in words:
            self._group_texts = True

    def on_Assign(self, node: cst.Assign) -> None:
        m = self.model
        for t in node.targets:
            if type(t.target) is cst.Name:
                self._rebound.add((id(m.func), t.target.value))
                self._uses.assigned(id(m.func), t.target.value, node.value)
            else:
                self._uses.leaves(id(m.func), node.value)  # batch["ids"] = ids, self.ids = ids
        inner = node.value
        while type(inner) in (cst.Attribute, cst.Subscript):
            inner = inner.value  # `ids = tokenizer(...).input_ids`
        if type(inner) is cst.Call and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            self._result_of[id(inner)] = (id(m.func), node.targets[0].target.value)
        if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name:
            return
        name = node.targets[0].target.value
        key = (id(m.func), name)
        v = node.value
        if type(v) is cst.Integer:
            self._int_names[key] = int(v.value, 0) if v.value.isdigit() else None
        if type(v) is cst.Subscript and type(v.value) is cst.Call and is_longest_item(m, v.value):
            v = v.value  # `longest_sample = max(batch, key=lambda s: s[0].size(1))[0]`
        if type(v) is cst.Call:
            self._assigned_calls[id(v)] = name
            self._aliases[key] = names_in(v)
            n = dataset_length(m, v)
            if n is not None:
                self._dataset_len[key] = n
            if is_batch_max(m, v) or self._max_of_lengths(v) or is_longest_item(m, v):
                self.report(v, "", when="custom")
                self._max_lens.append((m.candidates[-1], m.func, name))
        elif type(v) in (cst.ListComp, cst.GeneratorExp) and is_len_call(v.elt):
            self._length_lists.add(key)  # lengths = [len(x) for x in batch]

    def _inline_batch_max(self, node: cst.Call, fills: bool) -> None:
        """``torch.zeros(len(caps), max(lengths))``, ``torch.full((b, max(len(s) for s in batch)), pad)``: a
        size written as the batch maximum itself (the assigned ``longest = max(...)`` is ``on_Assign``'s)."""
        m = self.model
        sizes = positional_args(node)[:1] if fills else positional_args(node)
        if sizes and type(sizes[0]) in (cst.Tuple, cst.List):
            sizes = [e.value for e in sizes[0].elements]
        for v in sizes:
            if type(v) is cst.Call and (is_batch_max(m, v) or self._max_of_lengths(v)):
                self.report(v, "", when="custom")
                self._max_lens.append((m.candidates[-1], m.func, None))

    def _max_of_lengths(self, call: cst.Call) -> bool:
        """``max(lengths)`` of a list of ``len(...)`` built in this function."""
        m = self.model
        args = positional_args(call)
        return (
            m.is_builtin(call.func, "max") and len(args) == 1 and type(args[0]) is cst.Name
            and (id(m.func), args[0].value) in self._length_lists
        )

    def on_Comparison(self, node: cst.Comparison) -> None:
        # `next(b for b in BUCKETS if b >= longest)`: the batch max picks a bucket (not `len(s) < longest`)
        if len(node.comparisons) != 1:
            return
        left, right = node.left, node.comparisons[0].comparator
        for a, b in ((left, right), (right, left)):
            if type(a) is cst.Name and type(b) is cst.Name:
                self._bucketed.add((id(self.model.func), a.value))

    def on_Name(self, node: cst.Name) -> None:
        if "bucket" in node.value.lower():
            self._bucket_funcs.add(id(self.model.func))

    def on_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator) in (cst.FloorDivide, cst.Modulo):
            for n in names_in(node):
                self._bucketed.add((id(self.model.func), n))

    def on_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self._uses.leaves(id(self.model.func), node.value)

    on_Yield = on_Return

    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        self._uses.called(m, id(m.func), node)
        func = node.func
        name = last_name(func) or ""
        low = name.lower()
        q = m.qualname(func) or dotted_name(func) or ""
        # bucketing helpers: math.ceil(longest / 64), bisect(BUCKETS, longest), round_up(longest, 8)
        if low in ("ceil", "bisect", "bisect_left", "bisect_right") or any(w in ("bucket", "round", "ceil", "multiple") for w in name_words(name)):
            for a in node.args:
                for n in names_in(a.value):
                    self._bucketed.add((id(m.func), n))
        mapped = positional_args(node)
        if name == "map" and mapped and type(mapped[0]) is cst.Name and is_none(keyword_arg(node, "batch_size")):
            # `dataset.map(tokenize_text, batched=True, batch_size=None)`: the whole split is one batch
            self._whole_split_maps.add(mapped[0].value)
        cf = keyword_arg(node, "collate_fn")
        if type(cf) is cst.Call and (last_name(cf.func) == "partial") and positional_args(cf):
            cf = positional_args(cf)[0]  # collate_fn=functools.partial(collate, tokenizer=tok)
        if cf is not None and last_name(cf):
            self._collate_names.add(last_name(cf))
            key = m.callee_key(cf)
            if key is not None:
                self._collate_keys.add(key)
        callee = m.callee_key(func)
        if callee is not None:
            for i, a in enumerate(node.args):
                if a.star:
                    break
                where = a.keyword.value if a.keyword is not None else i
                self._arg_passes.append((m.func, callee, where, a.value))  # its names only if asked
        if q in T.PAD_TO_BATCH_MAX_FUNCTIONS:
            self.report(node, "", when="custom")
            self._found.append((m.candidates[-1], "pad_sequence", (m.func, m.step_context())))
            return
        if q in RT.SHAPE_FACTORIES or (type(func) is cst.Attribute and name in _NEW_FACTORIES):
            self._inline_batch_max(node, q in RT.FILL_FACTORIES)
        if name in T.PADDING_COLLATORS:
            if not _fixed_padding(node) and absent(keyword_arg(node, "pad_to_multiple_of")):
                self.report(node, "", when="custom")
                self._found.append((m.candidates[-1], "collator", name))
            return
        self._note_padding_site(node, q)
        padding = keyword_arg(node, "padding")
        tokenizes = _is_tokenizer(func) or (  # tokenizer(...) or tokenizer.pad(...)
            type(func) is cst.Attribute and func.attr.value == "pad" and _is_tokenizer(func.value))
        if tokenizes and padding is not None:
            self._tokenized.add("max_length" if _fixed_padding(node) else "dynamic")
        cls = (m.current_class() or self._method_of.get(id(m.func.node))) if self_field(padding) is not None else None
        if tokenizes and cls is not None:
            self.report(node, "", when="custom")  # `padding=self.padding` of a collator dataclass: its default
            self._field_pads.append((m.candidates[-1], cls, node))
            return
        if type(func) is cst.Name and func.value[:1].isupper():
            self._built.append(node)  # `OurDataCollatorWithPadding(tokenizer)`: the fields it leaves to their defaults
        if type(padding) is cst.Name and padding.value not in ("True", "False", "None") and tokenizes \
                and absent(keyword_arg(node, "pad_to_multiple_of")):
            self._padding_from_param(node, padding.value)
            return
        if padding is not None and pads_to_longest(padding) and absent(keyword_arg(node, "pad_to_multiple_of")):
            if tokenizes and tokenizes_one_text(node, [c for f, c in self._comps if f == id(m.func)]):
                return  # a list of encodings, one per text: each padded to its own length, nothing padded
            if string_value(padding) == "longest" or tokenizes:
                self.report(node, "", when="custom")
                self._found.append((m.candidates[-1], "tokenizer", string_value(padding) or "True"))
                site = self._site_of.get(id(node))
                if site is not None:  # reported at the tokenizer call it reaches, when that is found
                    self._site_cands.append((m.candidates[-1], site))
            return
        if type(func) is cst.Attribute and func.attr.value == "pad" and _is_tokenizer(func.value) and padding is None \
                and not any(a.star == "**" for a in node.args):  # tokenizer.pad(*args, **kwargs): the caller decides
            if absent(keyword_arg(node, "pad_to_multiple_of")) and keyword_arg(node, "max_length") is None:
                self.report(node, "", when="custom")
                self._found.append((m.candidates[-1], "tokenizer.pad", None))
            return
        if q in T.CPU_LOADER_CONSTRUCTORS or (q.startswith("torch.") and q.endswith(".DataLoader")):
            self._note_loader(node)

    def _padding_from_param(self, node: cst.Call, name: str) -> None:
        """``tokenizer(texts, padding=padding)`` in ``def collate(batch, tokenizer, padding=True)``: the
        parameter's default, or what the function's callers and ``functools.partial`` pass (this module's
        in ``finalize``, the others' in ``resolve_project``)."""
        m = self.model
        f = m.func
        if f is None or type(f.node) is not cst.FunctionDef or (id(f), name) in self._rebound:
            return
        params = list(f.node.params.posonly_params) + list(f.node.params.params) + list(f.node.params.kwonly_params)
        for p in params:
            if p.name.value != name:
                continue
            self.report(node, "", when="custom")
            cand = m.candidates[-1]
            if p.default is not None and pads_to_longest(p.default):
                self._found.append((cand, "tokenizer", (string_value(p.default) or "True", True)))
            else:
                top = f
                while top.parent is not None:
                    top = top.parent
                self._param_pads.append((cand, f.key if top is f else None, name))
            return

    def _note_padding_site(self, node: cst.Call, q: str) -> None:
        """``functools.partial(collate, tokenizer=tok, padding=True)`` and ``collate(batch, padding="longest")``:
        the function will pad to the longest text."""
        m = self.model
        target = node.func
        if q == "functools.partial" or (type(node.func) is cst.Name and node.func.value == "partial" and q in ("", "partial")):
            args = positional_args(node)
            if not args:
                return
            target = args[0]
        padding = keyword_arg(node, "padding")
        if padding is None or not pads_to_longest(padding):
            return
        callee = m.callee_key(target)
        if callee is not None:
            self._padding_sites.add((callee, string_value(padding) or "True"))
            self._site_of[id(node)] = callee

    def _note_loader(self, node: cst.Call) -> None:
        m = self.model
        drop = keyword_arg(node, "drop_last")
        if drop is not None and not (type(drop) is cst.Name and drop.value == "False"):
            return  # True, or decided by a variable
        if keyword_arg(node, "batch_sampler") is not None:
            return
        args = positional_args(node)
        bs = keyword_arg(node, "batch_size")
        if bs is None and len(args) > 1:
            bs = args[1]
        if is_none(bs):
            return
        batch = 1 if bs is None else self._int_of(bs)
        ds = keyword_arg(node, "dataset") or (args[0] if args else None)
        n = None
        if type(ds) is cst.Name:
            n = self._dataset_len.get((id(m.func), ds.value), self._dataset_len.get((id(m.top), ds.value)))
        elif type(ds) is cst.Call:
            n = dataset_length(m, ds)
        if n is not None and batch is not None and n % batch == 0:
            return
        self.report(node, "", when="custom")
        self._loaders.append((m.candidates[-1], m.func, node, n, batch))

    def _int_of(self, node) -> Optional[int]:
        if type(node) is cst.Integer and node.value.isdigit():
            return int(node.value)
        if type(node) is cst.Name:
            m = self.model
            return self._int_names.get((id(m.func), node.value), self._int_names.get((id(m.top), node.value)))
        return None

    # ------------------------------------------------------------------ decisions
    def finalize(self) -> None:
        m = self.model
        if not m.imports_torch:
            return
        resolved = set()
        for cand, key, name in self._param_pads:
            how = next((v for k, v in sorted(self._padding_sites) if k == key), None) if key else None
            if how is not None:
                self._found.append((cand, "tokenizer", how))
                resolved.add(key)
            elif key is not None:
                self._pending.append((cand, key, name))
        # a partial/call whose padding reaches a tokenizer call of this file: one finding, at the tokenizer call
        quiet = {id(c) for c, key in self._site_cands if key in resolved}
        self._found = [f for f in self._found if id(f[0]) not in quiet]
        self._site_cands = [(c, k) for c, k in self._site_cands if id(c) not in quiet]
        for cand, kind, extra in self._found:
            if kind == "pad_sequence":
                func, ctx = extra
                what = f"`{self.text(cand.node)}` pads each batch to its own longest sequence"
                if not (self._is_collate(func) or m.frequency(ctx).per_step):
                    self._maybe_collate(cand, func, what)
                    continue
                self._emit(cand, what, FIX_PAD)
            elif kind == "collator":
                if (extra == "DataCollatorForLanguageModeling" and self._group_texts) or self._tokenized == {"max_length"}:
                    continue  # fixed-size blocks, or every text tokenized to `max_length`: nothing left to pad
                given = keyword_arg(cand.node, "pad_to_multiple_of") is not None
                how = "with `pad_to_multiple_of` that can be None (it is, on a TPU, when it depends on fp16)" if given else "without `pad_to_multiple_of`"
                edit = None if given else _add_keyword(
                    cand.node, "pad_to_multiple_of", cst.Integer("64"), "safe",
                    "add `pad_to_multiple_of=64`; the extra padding is masked out (attention mask), so results are unchanged",
                )
                self._emit(cand, f"`{extra}(...)` {how} pads each batch to its own longest example", FIX_COLLATOR, edit)
            elif kind == "tokenizer":
                result = self._result_of.get(id(cand.node))
                if result is not None and not self._uses.may_be_consumed(*result):
                    continue  # `untruncated_ids = tokenizer(prompt, padding="longest").input_ids`, only compared
                if _one_off_literal(cand):
                    continue  # `tokenizer(["a prompt"], padding=True)` outside any loop: one shape, once
                if _one_text(cand.node):
                    continue  # `processor(text=[prompt], padding=True)`: a batch of one, padding pads nothing
                if cand.ctx.func.name in self._whole_split_maps:
                    continue  # mapped with `batch_size=None`: each split padded at once to one length
                if not cand.ctx.loops and padded_before_its_loop(
                        cand.node, cand.ctx.func.node,
                        lambda loop, f=cand.ctx.func: bool(f.yields) or (type(loop) is cst.For
                                                                         and m.iterates_batches(loop.iter))):
                    continue  # `answers = tokenizer(answer_list, padding=True)` before the loop that uses them
                how, by_default = extra if isinstance(extra, tuple) else (extra, False)
                self._emit(cand, _tokenizer_headline(self.text(cand.node.func), cand.node, how, by_default), FIX_PAD,
                           _max_length_padding(cand.node))
            elif kind == "tokenizer.pad":
                self._emit(cand, f"`{self.text(cand.node.func)}(...)` pads each batch to its own longest example by default", FIX_PAD)
        for cand, cls, call in self._field_pads:
            what = field_padding(call, cls, self._fields.get(cls, {}), self._built)
            if what is not None:
                self._emit(cand, f"`{self.text(call.func)}(...)` {what}: each batch is padded to its own longest text",
                           FIX_PAD)
        for cand, func, name in self._max_lens:
            if (id(func), name) in self._bucketed or id(func) in self._bucket_funcs:
                continue
            what = (f"`{name} = {self.text(cand.node, 32)}` pads to the batch maximum without rounding it to a bucket"
                    if name is not None else
                    f"`{self.text(cand.node, 32)}` sizes the batch to its maximum without rounding it to a bucket")
            if not self._is_collate(func):
                self._maybe_collate(cand, func, what)
                continue
            self._emit(cand, what, FIX_PAD)
        for cand, key, name in self._pending:
            self._pending_msgs.append((cand, key, name, _tokenizer_headline(self.text(cand.node.func), cand.node, "True")))
        if m.imports_xla:
            for cand, func, node, n, batch in self._loaders:
                if not _feeds_training_loop(self, func, node):
                    continue
                if n is not None and batch is not None:
                    why = f"{n} examples in batches of {batch} leave a last batch of {n % batch}"
                else:
                    why = "unless the dataset length is a multiple of the batch size, the last batch is smaller"
                cand.frequency = Frequency(EVERY)
                set_parts(
                    cand,
                    message=f"`{self.text(node.func)}(...)` feeds the XLA training loop without `drop_last=True`",
                    cost=(
                        f"{why}: a different input shape that compiles another graph (once per distinct size, at "
                        "the end of the epoch, stalling training)"
                    ),
                    fix=FIX_DROP_LAST,
                    edit=_add_keyword(node, "drop_last", cst.Name("True"), "unsafe",
                                      "add `drop_last=True`; the last partial batch of each epoch is no longer trained on"),
                )

    def _emit(self, cand, what: str, fix: str, edit=None) -> None:
        if cand.ctx.non_xla or cand.ctx.error_path or cand.ctx.func.excluded:
            return  # `if on_tpu: return pad(..., "max_length")` then the dynamic fallback: never on XLA; a unit test
        cand.frequency = Frequency(EVERY)
        set_parts(cand, message=what, cost=COST, fix=fix, edit=edit)

    def _maybe_collate(self, cand, func, what: str) -> None:
        """Padding to the batch maximum in a function that another module may pass as ``collate_fn=``."""
        if func is None or func.parent is not None or func.key == "<module>" or cand.ctx.non_xla or func.excluded:
            return
        self._collate_pending.append((cand, func.key, what))

    # ------------------------------------------------------------------ across modules
    decides_in_project = True

    def export(self, ctx_id, cand_id):
        mod = self.model.module_name
        out = {
            "params": [[cand_id(c), f"{mod}:{key}", name, msg] for c, key, name, msg in self._pending_msgs
                       if cand_id(c) is not None],
            "sites": sorted([ref, how] for ref, how in {(self._ref(k), h) for k, h in self._padding_sites}),
            "collate": sorted({self._ref(k) for k in self._collate_keys}),
            "collate_cands": [[cand_id(c), f"{mod}:{key}", what] for c, key, what in self._collate_pending
                              if cand_id(c) is not None],
            "site_cands": [[cand_id(c), self._ref(k)] for c, k in self._site_cands if cand_id(c) is not None],
        }
        return out if any(out.values()) else None

    def _ref(self, callee: str) -> str:
        """A callee key as the project's call graph names it (``export``'s ``callee_ref``)."""
        if callee[0] != "@" and callee not in self.model.funcs and "." in callee:
            cls = callee.rpartition(".")[0]
            if cls in self.model.classes:
                return f"@{self.model.module_name}:{callee}"
        return callee

    resolve_project = staticmethod(resolve_padding_across_modules)

    def _is_collate(self, func) -> bool:
        f = func
        while f is not None:
            words = name_words(f.name)
            if f.name in self._collate_names or "collate" in words or "collator" in words or any(
                w in ("batch", "batchify", "batches", "collate_fn") for w in words
            ):
                return True
            if f.name == "__call__" and f.class_key and "collat" in f.class_key.lower():
                return True
            f = f.parent
        return False


def _feeds_training_loop(rule, func, node) -> bool:
    """The loader made by ``node`` in ``func`` is iterated by a training step loop (``rule``'s model)."""
    names = set()
    target = rule._assigned_calls.get(id(node))
    if target is not None:
        names.add(target)
    return _names_feed(rule, func, names, node, 0)


def _names_feed(rule, func, names: set, node, depth: int) -> bool:
    m = rule.model
    # close over aliases: device_loader = MpDeviceLoader(train_loader, device)
    changed = True
    while changed:
        changed = False
        for (fid, alias), srcs in rule._aliases.items():
            if fid == id(func) and alias not in names and srcs & names:
                names.add(alias)
                changed = True
    for loop in m.loops:
        if loop.func is not func or type(loop.node) is not cst.For:
            continue
        it = loop.node.iter
        if (names & names_in(it) or (node is not None and contains(it, node))) and m.is_step_loop(loop) \
                and m.loop_trains(loop):
            return True
    if depth >= 2:
        return False
    # passed to a function of this file whose loop iterates the parameter
    for caller, callee, where, arg in rule._arg_passes:
        if caller is not func or not (names_in(arg) & names):
            continue
        cf = m.funcs.get(callee)
        if cf is None or cf.node is None:
            continue
        pname = _param_name(cf, where)
        if pname and _names_feed(rule, cf, {pname}, None, depth + 1):
            return True
    return False


def _param_name(f, where) -> Optional[str]:
    params = list(f.node.params.posonly_params) + list(f.node.params.params)
    if isinstance(where, str):
        return where
    if f.class_key is not None and params and params[0].name.value in ("self", "cls"):
        params = params[1:]
    return params[where].name.value if where < len(params) else None


def _tokenizer_headline(func: str, call: cst.Call, how: str, by_default: bool = False) -> str:
    """What a tokenizer call padding to the longest text does; ``how``: "longest" or "True";
    ``by_default``: the value is the default of the function's ``padding`` parameter."""
    given = keyword_arg(call, "padding")
    via = ""
    if type(given) is cst.Name and given.value != "True":
        via = (f" (the default of the `{given.value}` parameter)" if by_default
               else f" (the `{given.value}` parameter, as a caller or `functools.partial` passes it)")
    value = '"longest"' if how == "longest" else "True"
    if keyword_arg(call, "max_length") is not None:
        return (f"`{func}(...)` pads with `padding={value}`{via}, which ignores `max_length=` (it only truncates): "
                "each batch is padded to its own longest text")
    return f"`{func}(...)` pads with `padding={value}`{via}: each batch is padded to its own longest text"




def _fixed_padding(call: cst.Call) -> bool:
    p = keyword_arg(call, "padding")
    return p is not None and (string_value(p) == "max_length" or (dotted_name(p) or "").endswith("MAX_LENGTH"))


def _is_tokenizer(node) -> bool:
    name = (last_name(node) or "").lower()
    return name.endswith(("tokenizer", "processor", "feature_extractor")) or name in ("tok", "tokenize")


def _add_keyword(call: cst.Call, name: str, value, applicability: str, title: str) -> tuple:
    """A fix that adds ``name=value`` as the call's last argument, keeping its layout (one line, or one
    argument per line with or without a trailing comma)."""
    args = list(call.args)
    new = cst.Arg(value=value, keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    if args and type(args[-1].comma) is cst.Comma:
        # a trailing comma: the new argument takes it over; the old last one gets its neighbour's comma
        last = args[-1]
        between = args[-2].comma if len(args) > 1 and type(args[-2].comma) is cst.Comma else cst.Comma(
            whitespace_after=call.whitespace_before_args if type(call.whitespace_before_args) is cst.ParenthesizedWhitespace
            else cst.SimpleWhitespace(" "))
        args[-1] = last.with_changes(comma=between)
        new = new.with_changes(comma=last.comma)
    elif args and type(call.whitespace_before_args) is cst.ParenthesizedWhitespace:
        # one argument per line, no trailing comma: the same line break before the new one, and the
        # closing parenthesis stays where it was
        last = args[-1]
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=call.whitespace_before_args),
                                     whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    elif args:
        last = args[-1]
        args[-1] = last.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    args.append(new)
    return (call, call.with_changes(args=args), applicability, title)


def _max_length_padding(call: cst.Call):
    """``padding="longest"`` / ``padding=True`` -> ``padding="max_length"`` when ``max_length=`` is given
    (safe: the same tokens, more padding that the attention mask hides). None when there is no max_length."""
    value = keyword_arg(call, "padding")
    if keyword_arg(call, "max_length") is None or type(value) not in (cst.SimpleString, cst.Name) or (
            type(value) is cst.Name and value.value != "True"):
        return None  # `padding=padding`: the caller decides, not this line
    quote = '"'
    if type(value) is cst.SimpleString and value.value[-1:] == "'":
        quote = "'"
    replacement = cst.SimpleString(f"{quote}max_length{quote}")
    return (value, replacement, "safe",
            'use `padding="max_length"`: every batch is padded to `max_length`, one shape (the extra padding is masked out)')


_NEW_FACTORIES = frozenset({"new_zeros", "new_ones", "new_full", "new_empty"})


def _one_text(call: cst.Call) -> bool:
    """The call tokenizes a batch of one written out (``tokenizer([text], padding=True)``, ``processor(text=[t],
    ...)``): padding to the longest pads nothing; its length is the text's own, which no padding option names."""
    args = positional_args(call)
    texts = args[0] if args else keyword_arg(call, "text")
    return type(texts) in (cst.List, cst.Tuple) and len(texts.elements) == 1 and type(texts.elements[0]) is cst.Element


def _one_off_literal(cand) -> bool:
    """A tokenizer call outside any loop on a literal (a string, a list of strings, or a name its function
    binds only to such literals: ``prompts = ["...", "..."]``), or any tokenizer call of a script's top level
    outside loops (it runs once; padding a whole dataset at once gives every batch one length): one shape."""
    args = positional_args(cand.node)
    if not args or cand.ctx.loops:
        return False
    if cand.ctx.func.key == "<module>":
        return True
    a = args[0]
    if type(a) is cst.Name:
        values = bindings_of(cand.ctx.func.node, a.value)
        return bool(values) and all(literal_texts(v) for v in values)
    return literal_texts(a)

