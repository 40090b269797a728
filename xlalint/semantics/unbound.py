"""Whether a module is a whole program or a fragment: does it use a name it never binds?

A notebook or script that puts nothing on a device holds host tensors (``step_marks``), but only when it makes
its model and data itself. A fragment (``for x in loader: loss = model(x)`` with ``model`` and ``loader`` bound
nowhere: a snippet, a cell pasted from a larger program) uses objects made elsewhere, which may live on a
device. Pure syntax, one pass over the module; any doubt (``from m import *``, ``exec``, ``globals()``) answers
that it may be a fragment.
"""

from __future__ import annotations

import builtins
import sys

import libcst as cst

from xlalint.semantics import tables as T
from xlalint.semantics.syntax import NODE_TYPES, child_nodes, dotted_name, target_names

_STDLIB = frozenset(sys.stdlib_module_names)


def is_host_library(module: str) -> bool:
    """``module`` belongs to the standard library or to a library that places nothing (``T.HOST_LIBRARIES``)."""
    top = module.partition(".")[0]
    return top in T.HOST_LIBRARIES or top in _STDLIB


# names a notebook's kernel or a script's interpreter binds without the source binding them
_PREBOUND = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__builtins__",
                                        "display", "get_ipython", "In", "Out", "_", "__", "___"}


def uses_unbound_names(module: cst.Module) -> bool:
    """The module reads a name that no statement of it binds (an assignment, an import, a ``def``/``class``, a
    parameter, a loop, ``with ... as``, ``except ... as``, a comprehension, ``:=``, ``global``), nor the
    interpreter: it is a fragment of a larger program. A star import of project code may bind anything (a
    fragment, as far as is known); one of a host library binds its own names, which cannot all be listed: the
    module is taken as whole."""
    bound: set = set()
    used: set = set()
    star = False
    stack = [module]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.ImportFrom:
            if type(n.names) is cst.ImportStar:
                if n.relative or n.module is None or not is_host_library(dotted_name(n.module) or ""):
                    return True  # anything may come from it: a model, a loader
                star = True  # `from matplotlib.pylab import *`: what it binds is the library's, never the program's
                continue
            for a in n.names:
                bound.add(_alias_name(a))
            continue
        if t is cst.Import:
            for a in n.names:
                bound.add(_alias_name(a))
            continue
        if t in (cst.FunctionDef, cst.ClassDef):
            bound.add(n.name.value)
        elif t is cst.Param:
            bound.add(n.name.value)
        elif t is cst.Parameters:  # `*args`, `**kwargs`: fields the tree's walk leaves out
            bound.update(p.name.value for p in (n.star_arg, n.star_kwarg) if type(p) is cst.Param)
        elif t in (cst.Assign,):
            for tgt in n.targets:
                bound.update(x.value for x in target_names(tgt.target))
        elif t in (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor):
            bound.update(x.value for x in target_names(n.target))
        elif t is cst.NamedExpr:
            bound.update(x.value for x in target_names(n.target))
        elif t is cst.WithItem and n.asname is not None:
            bound.update(x.value for x in target_names(n.asname.name))
        elif t is cst.ExceptHandler and n.name is not None:
            bound.update(x.value for x in target_names(n.name.name))
        elif t in (cst.Global, cst.Nonlocal):
            bound.update(x.name.value for x in n.names)
        elif t is cst.Call and type(n.func) is cst.Name and n.func.value in ("exec", "globals", "vars"):
            return True  # names bound at run time (`globals()[name] = ...`); `locals()` binds none (a config dump)
        elif t is cst.Attribute:
            stack.append(n.value)  # `a.b`: only `a` is a name read
            continue
        elif t is cst.Arg:
            stack.append(n.value)  # `f(x=1)`: `x` is a keyword, no name read
            continue
        elif t is cst.Name:
            used.add(n.value)
            continue
        if t in NODE_TYPES or t is cst.Module:
            stack.extend(child_nodes(n))
    return not star and bool(used - bound - _PREBOUND)


def _alias_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and type(alias.asname.name) is cst.Name:
        return alias.asname.name.value
    name = alias.name
    while type(name) is cst.Attribute:
        name = name.value
    return name.value if type(name) is cst.Name else ""
