"""XLA005 across modules: what one module's padding becomes once the whole project is known.

A collate function of one module passed as ``collate_fn=`` in another runs for every batch; a ``padding=``
parameter is given ``True`` or ``"longest"`` by a caller or a ``functools.partial`` in another module.
"""

from __future__ import annotations

from xlalint.rules import set_parts
from xlalint.rules.variable_length_text import COST, FIX_PAD
from xlalint.semantics.project import Program
from xlalint.semantics.steps import EVERY, Frequency


def resolve_padding_across_modules(program, data: dict, cands: dict) -> None:
    """A collate function of one module passed as ``collate_fn=`` in another, and a ``padding=``
    parameter given ``True``/``"longest"`` by a caller or a ``functools.partial`` in another module."""
    collate, pads = set(), {}
    for mod, d in data.items():
        for ref in d.get("collate", ()):
            collate.update(program.targets(Program.site_key(mod, ref)))
        for ref, how in d.get("sites", ()):
            for t in program.targets(Program.site_key(mod, ref)):
                pads.setdefault(t, how)
    for mod, d in data.items():
        for ci, key, what in d.get("collate_cands", ()):
            if key in collate:
                c = cands[mod][ci]
                c.frequency = Frequency(EVERY)
                set_parts(c, message=what + " (a collate function: it runs for every batch)", cost=COST, fix=FIX_PAD)
    reached = set()
    for mod, d in data.items():
        for ci, key, name, msg in d.get("params", ()):
            how = pads.get(key)
            if how is not None:
                c = cands[mod][ci]
                c.frequency = Frequency(EVERY)
                reached.add(key)
                if how == "longest":
                    msg = msg.replace("`padding=True`", '`padding="longest"`')
                set_parts(c, message=msg, cost=COST, fix=FIX_PAD)
    for mod, d in data.items():  # the partial/call that passes it: reported at the tokenizer call instead
        for ci, ref in d.get("site_cands", ()):
            if any(t in reached for t in program.targets(Program.site_key(mod, ref))):
                cands[mod][ci].frequency = None
