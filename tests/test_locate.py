"""Positions: the locator's local ways (a node positioned within its function alone) must give exactly
what libcst's PositionProvider gives over the whole module."""

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from xlalint.parse.locate import Locator, render_with_positions
from xlalint.semantics.model import SemanticModel
from xlalint.semantics.syntax import child_nodes

SOURCES = {
    "methods_and_nesting": """
        import torch

        class Trainer:
            @property
            def loss(self):
                return self._loss

            @loss.setter
            def loss(self, v):
                self._loss = v.item()

            @torch.no_grad()
            def step(self, x,
                     y=None):
                total = torch.zeros(2,
                                    device="xla")
                for i in range(3):
                    def inner(t):
                        return t.sum().item()
                    total += inner(x[i])
                doc = '''a string
            spanning lines'''
                return total.cpu(), doc

        def make():
            class Local:
                def go(self, t):
                    return t.tolist()
            async def later(t):
                return t.item()
            return Local, later

        if True:
            def twice(t):
                return t.item()
        else:
            def twice(t):
                return t.cpu()
    """,
    "tabs": "import torch\n\nclass A:\n\tdef f(self, t):\n\t\tif t.sum() > 0:\n\t\t\treturn t.item()\n\t\treturn (t +\n   1).cpu()\n",
    "crlf": "import torch\r\n\r\ndef f(t):\r\n    x = t.item()\r\n    return [x,\r\n            t.cpu()]\r\n",
    "comments_and_blank_lines": """
        def f(t):
            # a comment

            x = t.item()  # trailing

        # between
        class B:

            # leading comment of the method
            def g(self, t):
                return t.cpu()
    """,
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_positions_within_a_function_match_the_whole_module(name):
    src = SOURCES[name]
    text = textwrap.dedent(src).lstrip("\n") if "\t" not in src and "\r" not in src else src
    tree = cst.parse_module(text)
    truth = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    model = SemanticModel(tree, [], module_name="m", is_package=False, facts=None)
    model.run()
    loc = Locator(tree, None, text)
    top_of = {}
    for i, stmt in enumerate(tree.body):
        stack = [stmt]
        while stack:
            n = stack.pop()
            top_of[id(n)] = i
            stack.extend(child_nodes(n))
    checked = anchored = 0
    for key, f in model.funcs.items():
        stack = [f.node]
        while stack:
            n = stack.pop()
            stack.extend(child_nodes(n))
            p = truth.get(n)
            if p is None:
                continue
            got = loc.span(n, top_of[id(n)], (f.node, key))
            assert got == (p.start.line, p.start.column + 1, p.end.line, p.end.column + 1), (key, n)
            checked += 1
        anchored += bool(loc._in_def.get(id(f.node)))
    assert checked > 20
    assert anchored >= 1  # the local way was taken, not only the whole-statement one


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_one_rendering_gives_what_the_metadata_wrapper_gives(name):
    # the locator renders with libcst's position-tracking state itself (one pass, not the wrapper's three)
    src = SOURCES[name]
    text = textwrap.dedent(src).lstrip("\n") if "\t" not in src and "\r" not in src else src
    tree = cst.parse_module(text)
    pos, code = render_with_positions(tree)
    truth = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    assert code == tree.code == text
    assert len(truth) > 20 and dict(pos) == dict(truth)


def test_functions_sharing_a_key_are_told_apart_by_their_rendering():
    # a property and its setter share the model's key: each is positioned from the `def` whose lines are
    # its rendering (torch's classes are full of them; the whole class was rendered instead)
    text = textwrap.dedent(SOURCES["methods_and_nesting"]).lstrip("\n")
    tree = cst.parse_module(text)
    model = SemanticModel(tree, [], module_name="m", is_package=False, facts=None)
    model.run()
    loc = Locator(tree, None, text)
    setter = model.funcs["Trainer.loss"].node
    pos, delta, _, _ = loc._def_anchor(setter, "Trainer.loss")
    assert text.splitlines()[pos[setter.name].start.line + delta - 1].strip() == "def loss(self, v):"
    assert loc._def_anchor(model.funcs["Trainer.step"].node, "Trainer.step") is not None


def test_functions_sharing_a_key_that_render_alike_fall_back_to_the_statement():
    text = textwrap.dedent("""
        import torch

        class Trainer:
            if torch.__version__ > "2":
                def read(self, t):
                    return t.item()
            else:
                def read(self, t):
                    return t.item()
        """).lstrip("\n")
    tree = cst.parse_module(text)
    model = SemanticModel(tree, [], module_name="m", is_package=False, facts=None)
    model.run()
    loc = Locator(tree, None, text)
    f = model.funcs["Trainer.read"].node
    assert loc._def_anchor(f, "Trainer.read") is None  # either `def` fits: neither is trusted
    ret = f.body.body[0].body[0]
    wrapper_pos = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)[ret]
    assert loc.span(ret, 1, (f, "Trainer.read"))[0] == wrapper_pos.start.line


def test_def_keys_finds_functions_in_every_kind_of_block():
    # def_keys and the declarations descend through statement_blocks: a function defined under
    # `match`/`case` (which has no `body`), `try`/`except`/`else`/`finally`, `with`, `while`/`else`,
    # `for`/`else` and `if`/`else` is found where CPython says its `def` is
    import ast

    from xlalint.parse.locate import def_keys

    src = textwrap.dedent("""\
        match cmd:
            case "a":
                def in_case(): pass
        try:
            def in_try(): pass
        except ValueError:
            def in_except(): pass
        else:
            def in_else(): pass
        finally:
            def in_finally(): pass
        with ctx:
            def in_with(): pass
        while cond:
            def in_while(): pass
        else:
            def in_while_else(): pass
        for i in x:
            class K:
                def meth(self): pass
        else:
            def in_for_else(): pass
        if flag:
            async def in_if(): pass
        x = 1
        """)
    got = def_keys(ast.parse(src))
    assert got == {"in_case": [(3, 8)], "in_try": [(5, 4)], "in_except": [(7, 4)], "in_else": [(9, 4)],
                   "in_finally": [(11, 4)], "in_with": [(13, 4)], "in_while": [(15, 4)],
                   "in_while_else": [(17, 4)], "K.meth": [(20, 8)], "in_for_else": [(22, 4)],
                   "in_if": [(24, 4)]}
