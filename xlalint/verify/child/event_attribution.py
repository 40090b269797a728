"""Event attribution, the default: which user lines ran, and where each counter moved. No tracer: library
code runs at full speed.

- Which lines ran: probes compiled into the user's modules (a call before every statement, one list
  increment when it runs), through an import hook that instruments the project's files.
- Where each counter moved: a ``TorchFunctionMode`` that checks the counters after every torch call of the
  main thread; the step-barrier and train/eval hooks (``hooks.py``) do the same around the barrier.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys
import time

PROBE = "__xlalint_hit__"
_DOC_PARENTS = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _span(st) -> tuple:
    """The lines of a statement a probe stands for: a simple statement's lines, a compound statement's header."""
    start = min([st.lineno] + [d.lineno for d in getattr(st, "decorator_list", [])])
    body = getattr(st, "body", None)
    if isinstance(body, list) and body:
        end = max(st.lineno, body[0].lineno - 1)
    else:
        end = getattr(st, "end_lineno", None) or st.lineno
    return start, end


def _add_probes(node, rec, path: str) -> None:
    for name in ("body", "orelse", "finalbody", "handlers", "cases"):
        val = getattr(node, name, None)
        if not isinstance(val, list) or not val:
            continue
        if name in ("handlers", "cases"):
            for h in val:
                _add_probes(h, rec, path)
            continue
        if not isinstance(val[0], ast.stmt):
            continue
        new = []
        for i, st in enumerate(val):
            _add_probes(st, rec, path)
            docstring = (
                i == 0 and name == "body" and isinstance(node, _DOC_PARENTS) and isinstance(st, ast.Expr)
                and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)
            )
            future = isinstance(st, ast.ImportFrom) and st.module == "__future__"
            if not (docstring or future):
                a, b = _span(st)
                pid = len(rec.probe_spans)
                rec.probe_spans.append((path, a, b))
                rec.probe_counts.append(0)
                loc = dict(lineno=st.lineno, col_offset=st.col_offset, end_lineno=st.lineno, end_col_offset=st.col_offset)
                call = ast.Call(ast.Name(PROBE, ast.Load(), **loc), [ast.Constant(pid, **loc)], [], **loc)
                new.append(ast.Expr(call, **loc))
            new.append(st)
        setattr(node, name, new)


def instrumented_code(source, path: str, rec):
    """The module's code with a probe before every statement (one list increment when it runs)."""
    tree = ast.parse(source, filename=path)
    _add_probes(tree, rec, path)
    return compile(tree, path, "exec", dont_inherit=True)


def source_of(rec, path: str, read):
    """The text the child runs for one of the user's files: the spec's replacement for it (``--fix-impact``
    runs a fixed copy held in memory: the file on disk is never written), else ``read(path)``."""
    replaced = (rec.spec.get("sources") or {}).get(os.path.realpath(path))
    return replaced if replaced is not None else read(path)


def install_probes(rec) -> None:
    """The probe function (a builtin, so every instrumented module finds it) and an import hook that
    instruments the user's modules (files of the project: any module under the project root)."""
    import importlib.machinery

    counts = rec.probe_counts

    def hit(i):
        counts[i] += 1

    setattr(builtins, PROBE, hit)

    class Loader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname):
            path = self.get_filename(fullname)
            return instrumented_code(source_of(rec, path, self.get_data), path, rec)

    class Finder:
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
            if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
                return None
            if not spec.origin or not rec.is_user(spec.origin):
                return None
            spec.loader = Loader(fullname, spec.origin)
            return spec

        @staticmethod
        def invalidate_caches():
            pass

    sys.meta_path.insert(0, Finder)
    rec.loader_class = Loader


def make_event_mode(rec):
    """A TorchFunctionMode (thread-local: the main thread's torch calls only) that checks the gate counters
    after every torch function and, when they moved, charges the difference to the innermost user frame."""
    from torch.overrides import TorchFunctionMode

    getframe = sys._getframe
    clock = time.perf_counter
    cv = rec.counter_value

    class _Attribute(TorchFunctionMode):
        # Runs ~1,000 times per step of a 12-block MLP with AdamW: keep it to the call, one gate of four
        # counters (~0.25 us each) and, only when one moved, the stack walk.
        def __torch_function__(self, func, types, args=(), kwargs=None):
            rec.op = func
            rec.op_t0 = t0 = clock()
            result = func(*args, **kwargs) if kwargs else func(*args)
            if (cv("UncachedCompile"), cv("CachedCompile"), cv("xla::_to_cpu"), cv("xla::_to_copy")) != rec.gate:
                rec.flush(getframe(1), clock() - t0)
            return result

    rec.mode_code = _Attribute.__torch_function__.__code__
    return _Attribute()
