"""A host copy that a loop writes out (or draws): the purpose of the copy, not a cost of the loop.

``audio = y_g_hat.squeeze().cpu().numpy()`` then ``write(output_file, sr, audio)`` in a loop over input files, or
``x = 255. * rearrange(x_sample.cpu().numpy(), ...)`` then ``Image.fromarray(x.astype(np.uint8)).save(path)``:
the data has to reach the host to be written to a file (a generated image, a waveform, a prediction file), as a
checkpoint has. Syntax only: the statement holding the copy binds names, and a later statement of the same loop
body (after more assignments from them) hands one of them to a call that writes a file.
"""

from __future__ import annotations

import libcst as cst

from xlalint.semantics.syntax import NODE_TYPES, child_nodes, contains, last_name, names_in, target_names

# calls that write their argument (or their receiver's data) to a file, or draw it (`ax.imshow(x)`: a figure of
# the inputs and predictions, whose data has to be on the host to be drawn)
_WRITES = frozenset({"write", "save", "imwrite", "imsave", "savez", "savez_compressed", "save_image", "tofile",
                     "writeframes", "savetxt", "dump", "save_file", "imshow", "matshow", "pcolormesh", "contourf",
                     "quiver", "streamplot", "scatter", "mimwrite", "mimsave", "write_video", "write_gif"})
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def counts(it) -> bool:
    """The loop goes over a counter (``range(...)``, also inside ``tqdm``/``reversed``/``enumerate``), not over
    inputs: its passes are steps of one computation."""
    while type(it) is cst.Call and last_name(it.func) in ("tqdm", "reversed", "enumerate", "trange") and it.args:
        if last_name(it.func) == "trange":
            return True
        it = it.args[0].value
    if type(it) is not cst.Call or last_name(it.func) != "range":
        return False
    # `for index in range(3):` (a figure of three test samples): a few inputs, not the steps of a computation
    args = [a.value for a in it.args]
    return not (len(args) == 1 and type(args[0]) is cst.Integer and int(args[0].value) <= _FEW)


_FEW = 16


def written_out(loop: cst.CSTNode, stmt: cst.CSTNode, call: cst.Call, scope=None) -> bool:
    """The copy ``call``, in statement ``stmt`` of ``loop``'s body, is written to a file later in that body (or
    in ``stmt`` itself: ``np.save(path, x.cpu().numpy())``), or collected in a list there that the statements
    after the loop in ``scope`` (the block of statements holding it) write (``frames.append(rgb)`` per camera
    pose, then ``imageio.mimwrite("video.mp4", frames)``). Whether the loop trains is the model's to say
    (``rules.host_read`` asks ``loop_trains`` once the module is walked)."""
    statements = list(_statements(loop.body, ()))
    guards = next((g for s, g in statements if s is stmt), None)
    if guards is None:
        return False
    if _writes_any(stmt, None, call):
        return True
    names = _bound_by(stmt, call)
    if not names:
        return False
    collected: set = set()  # the lists the loop appends the copy to
    after = False
    for s, g in statements:
        if s is stmt:
            after = True
            continue
        if not after:
            continue
        # a write under an `if` the copy is not under (`if save_txt:`) is an option; the copy runs without it
        if _writes_any(s, names, None) and set(g) <= set(guards):
            return True
        for small in getattr(s, "body", ()) if type(s) is cst.SimpleStatementLine else ():
            if type(small) is cst.Assign and bool(names_in(small.value) & names):
                for t in small.targets:
                    names |= {n.value for n in target_names(t.target)}
            elif (type(small) is cst.Expr and type(small.value) is cst.Call and last_name(small.value.func) == "append"
                  and type(small.value.func) is cst.Attribute and type(small.value.func.value) is cst.Name
                  and set(g) <= set(guards) and bool(names_in(small.value) & names)):
                collected.add(small.value.func.value.value)
    if not collected or scope is None:
        return False
    following = False
    for s, _g in _statements(scope, ()):
        if s is loop:
            following = True
        elif following and _writes_any(s, collected, None):
            return True
    return False


def _statements(block, guards: tuple):
    """The statements of a block in source order with the ids of the conditional statements (if/for/while/try)
    around them in the loop's body; nested blocks included (a `with` adds no condition), not nested scopes."""
    body = getattr(block, "body", ())
    if not isinstance(body, (list, tuple)):
        return
    for s in body:
        yield s, guards
        if type(s) in _SCOPES or type(s) is cst.SimpleStatementLine:
            continue
        inner_guards = guards if type(s) is cst.With else (*guards, id(s))
        for part in ("body", "orelse", "finalbody"):
            inner = getattr(s, part, None)
            if inner is None:
                continue
            if type(inner) in (cst.Else, cst.Finally):
                inner = inner.body
            if type(inner) is cst.If:
                yield from _statements(cst.IndentedBlock(body=[inner]), inner_guards)
            else:
                yield from _statements(inner, inner_guards)
        for h in getattr(s, "handlers", ()):
            yield from _statements(h.body, inner_guards)


def _bound_by(stmt, call) -> set:
    """The names an assignment of ``stmt`` binds from a value holding ``call``."""
    out: set = set()
    for small in getattr(stmt, "body", ()) if type(stmt) is cst.SimpleStatementLine else ():
        if type(small) is cst.Assign and contains(small.value, call):
            for t in small.targets:
                out |= {n.value for n in target_names(t.target)}
    return out


def _writes_any(stmt, names, call) -> bool:
    """A call in ``stmt`` (its simple statements, or a `with` item's) writes a file from one of ``names`` or from
    an expression holding ``call``."""
    stack = [stmt] if type(stmt) is cst.SimpleStatementLine else list(getattr(stmt, "items", ()))
    while stack:
        n = stack.pop()
        if type(n) in _SCOPES:
            continue
        if type(n) is cst.Call and last_name(n.func) in _WRITES:
            if (call is not None and contains(n, call)) or (names and bool(names_in(n) & names)):
                return True
        if type(n) in NODE_TYPES:
            stack.extend(child_nodes(n))
    return False
