"""What a module does when it is imported, or run as a script: the modules it imports unconditionally, the
registries it loads itself into, and what makes it unable to run without CUDA (issue 32, cause 8).

A statement runs at import when it sits on the module's straight line, or in every branch of an ``if``/``else``
there (``if os.environ["MODE"] == "bf16": load(... bf16.cu) else: load(... .cu)`` builds a CUDA extension
either way). An import under ``try:`` or in one branch only is optional: the code runs without it. A script's
``if __name__ == "__main__":`` block runs when it is run, never when it is imported (``main_imports``).
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional

import libcst as cst

from xlalint.semantics.device_pins import CUDA_ONLY_LIBRARIES, is_main_guard, sets_cuda_default
from xlalint.semantics.syntax import dotted_name, last_name, own_nodes, string_value


def _first(lines, find: Callable) -> Optional[str]:
    """The first answer of ``find`` over the small statements that run whenever ``lines`` run: the simple
    statements, and an ``if`` whose every branch (an ``else`` included) gives one."""
    for line in lines:
        if type(line) is cst.SimpleStatementLine:
            for small in line.body:
                found = find(small)
                if found is not None:
                    return found
        elif type(line) is cst.If and not is_main_guard(line.test):
            found = _every_branch(line, find)
            if found is not None:
                return found
    return None


def _every_branch(node: cst.If, find: Callable) -> Optional[str]:
    first = _first(node.body.body, find)
    if first is None:
        return None
    rest = node.orelse
    if rest is None:
        return None
    if type(rest) is cst.If:
        return first if _every_branch(rest, find) is not None else None
    return first if _first(rest.body.body, find) is not None else None


def has_main_block(module: cst.Module) -> bool:
    """The module has an ``if __name__ == "__main__":`` block at its top: run as a script, it is an entry point."""
    return bool(_main_block(module))


def _main_block(module: cst.Module) -> list:
    return [line for stmt in module.body if type(stmt) is cst.If and is_main_guard(stmt.test)
            for line in stmt.body.body]


def requires_cuda(module: cst.Module, package: str = "") -> Optional[str]:
    """What makes the module unable to run without CUDA, else None: a CUDA-only library
    (``CUDA_ONLY_LIBRARIES``) imported at its top level, unconditionally, or CUDA made the default for every
    tensor built without a device (``torch.set_default_tensor_type("torch.cuda.FloatTensor")``,
    ``torch.set_default_device("cuda")``) or a CUDA extension built (``_builds_cuda_extension``) at its top level
    or in its ``if __name__ == "__main__":`` block: that call raises where there is no CUDA, and the program's
    device-less tensors rely on it. ``package``: the module's package (dotted); a module of a CUDA-only library
    itself (a vendored copy: ``third_party/AutoGPTQ/auto_gptq/quantization/gptq.py``) is that library's code,
    whose own modules import each other relatively."""
    for part in package.split(".") if package else ():
        if part in CUDA_ONLY_LIBRARIES:
            return part
    for n in hard_imports(module, ""):
        if n.partition(".")[0] in CUDA_ONLY_LIBRARIES:
            return n
    return _first([*module.body, *_main_block(module)], _needs_cuda_statement)


def _needs_cuda_statement(small) -> Optional[str]:
    call = small.value if type(small) is cst.Expr else None
    if type(call) is cst.Call and sets_cuda_default(call):
        return dotted_name(call.func)
    return _builds_cuda_extension(small)


def _builds_cuda_extension(small) -> Optional[str]:
    """``fused = load("fused", sources=[..., "fused_bias_act_kernel.cu"])`` (``torch.utils.cpp_extension``; the
    source named by a string or an f-string) or ``load_inline(..., cuda_sources=...)``: it compiles CUDA sources
    with nvcc when it runs, which fails where there is no CUDA toolkit (a TPU host); the name of the call, else
    None."""
    for n in (small, *own_nodes(small)):
        if type(n) is not cst.Call:
            continue
        name = last_name(n.func)
        if name == "load_inline" and any(a.keyword is not None and a.keyword.value == "cuda_sources" for a in n.args):
            return dotted_name(n.func)
        if name == "load" and any(_names_cuda_source(x) for x in own_nodes(n)):
            return dotted_name(n.func)
    return None


def _names_cuda_source(node) -> bool:
    """``"kernel.cu"`` or ``f"cuda/wkv_{n}.cu"``."""
    if type(node) is cst.SimpleString:
        return (string_value(node) or "").endswith(".cu")
    if type(node) is cst.FormattedString and node.parts:
        tail = node.parts[-1]
        return type(tail) is cst.FormattedStringText and tail.value.endswith(".cu")
    return False


def hard_imports(module: cst.Module, package: str) -> list:
    """The modules the module imports at its top level, unconditionally (not under ``try:`` or ``if``):
    importing it imports them. Relative imports are resolved against ``package`` (the importing module's
    package; "" leaves them out); ``from a import b`` gives ``a.b`` (a submodule or a name: the project
    resolves which)."""
    return list(_imports(module.body, package))


def main_imports(module: cst.Module, package: str) -> list:
    """The modules a script imports on the straight line of its ``if __name__ == "__main__":`` block (RWKV's
    ``train.py`` imports its model there): running it imports them, importing it does not."""
    return list(_imports(_main_block(module), package))


def _imports(lines, package: str) -> Iterator[str]:
    for stmt in lines:
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if type(small) is cst.Import:
                yield from (dotted_name(a.name) or "" for a in small.names)
            elif type(small) is cst.ImportFrom:
                base = _from_base(small, package)
                if not base:
                    continue
                yield base
                if type(small.names) is not cst.ImportStar:
                    yield from (f"{base}.{a.name.value}" for a in small.names if type(a.name) is cst.Name)


def _from_base(small: cst.ImportFrom, package: str) -> str:
    base = dotted_name(small.module) if small.module is not None else ""
    if not small.relative:
        return base
    if not package:
        return ""
    parts = package.split(".")
    up = len(small.relative) - 1
    if up > len(parts):
        return ""
    head = ".".join(parts[: len(parts) - up])
    return f"{head}.{base}" if base and head else (base or head)


def registers(module: cst.Module) -> bool:
    """The module registers a class or function by name at its top level (``@register_criterion("...")``,
    ``@MODELS.register_module()``, ``registry.register(...)``): a framework loads it through that registry
    (often by importing every module of a folder), so its static importers do not say where it runs."""
    for stmt in module.body:
        if type(stmt) in (cst.ClassDef, cst.FunctionDef):
            for d in stmt.decorators:
                dec = d.decorator.func if type(d.decorator) is cst.Call else d.decorator
                if "register" in (dotted_name(dec) or "").rpartition(".")[2].lower():
                    return True
        elif type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                call = small.value if type(small) is cst.Expr else None
                if type(call) is cst.Call and "register" in (dotted_name(call.func) or "").rpartition(".")[2].lower():
                    return True
    return False
