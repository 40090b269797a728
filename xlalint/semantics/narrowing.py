"""What a branch's test says about a name's value: ``isinstance(v, torch.Tensor)`` / ``torch.is_tensor(v)``,
``isinstance(v, (str, Path))``, ``isinstance(images, list)``. The walk binds the narrowed kind in the branch
(``walk.StatementWalk._if``) and restores the name's kind after it."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.syntax import code_of, dotted_name, last_name, positional_args


def narrowed(test, kind_of, qualname=None):
    """The name the test narrows and its kind in the branch the test enters, else (None, None):
    ``isinstance(im, (str, Path))`` a Python value, ``not torch.is_tensor(n)`` not a tensor, and
    ``isinstance(images, list)`` of a value taken for one tensor (``kind_of(name)``): a container (of
    tensors, as far as is known), whose truth is its length, not a read of the device;
    ``isinstance(self.spk_model, onnxruntime.InferenceSession)`` (``qualname`` resolves the class) an ONNX Runtime
    session, whose outputs are NumPy arrays."""
    if qualname is not None:
        found = runtime_type_test(test, qualname)
        if found is not None:
            return found, K.instance(T.HOST_RUNTIME)
    name = python_type_test(test)
    if name is not None:
        return name, K.NOT_TENSOR
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        name = tensor_type_test(test.expression)
        if name is not None:
            return name, K.NOT_TENSOR
    name = container_type_test(test)
    if name is not None:
        kind = kind_of(name)
        if kind in K.DEVICE_TENSORS:
            return name, K.TENSORS
        if kind == K.CPU_TENSOR:
            return name, K.CPU_TENSORS
    return None, None


def tensor_type_test(test) -> Optional[str]:
    """``isinstance(v, torch.Tensor)`` / ``torch.is_tensor(v)``: the name ``v``."""
    if type(test) is cst.Call:
        fname = dotted_name(test.func) or ""
        args = positional_args(test)
        if fname == "isinstance" and len(args) == 2 and type(args[0]) is cst.Name:
            if "Tensor" in code_of(args[1]):
                return args[0].value
        elif fname in ("torch.is_tensor", "is_tensor") and len(args) == 1 and type(args[0]) is cst.Name:
            return args[0].value
    return None


# Types whose instances are never tensors nor hold them: `isinstance(v, (str, Path))` narrows `v` to a
# Python value (not containers: `isinstance(x, dict)` then `x.get("patch_valid")` may be a tensor).
PYTHON_TYPES = frozenset({"str", "bytes", "int", "float", "bool", "complex",
                           "Path", "PurePath", "PathLike", "Number", "Integral", "Real", "ndarray", "Image",
                           # NumPy's scalar types (`isinstance(v, np.number)`): host values
                           "number", "generic", "integer", "floating", "signedinteger", "unsignedinteger",
                           "bool_", "float32", "float64", "int32", "int64"})


def python_type_test(test) -> Optional[str]:
    """``isinstance(v, str)`` / ``isinstance(v, (str, Path))``: the name ``v`` when every type named is a
    Python type whose instances are never tensors (``PYTHON_TYPES``, by its last name). In a chain of
    ``and`` (``np is not None and isinstance(v, np.number)``) the body runs only when every operand holds,
    so one narrowing operand narrows."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return python_type_test(test.left) or python_type_test(test.right)
    if type(test) is not cst.Call or dotted_name(test.func) != "isinstance":
        return None
    args = positional_args(test)
    if len(args) != 2 or type(args[0]) is not cst.Name:
        return None
    types = [e.value for e in args[1].elements] if type(args[1]) is cst.Tuple else [args[1]]
    names = [last_name(t) for t in types]
    return args[0].value if names and all(n in PYTHON_TYPES for n in names) else None


def runtime_type_test(test, qualname) -> Optional[str]:
    """``isinstance(v, onnxruntime.InferenceSession)`` / ``isinstance(self.session, ort.InferenceSession)``: the name
    (``v``, ``self.session``) tested to be a host runtime's session (``tables.HOST_RUNTIME_CONSTRUCTORS``)."""
    if type(test) is not cst.Call or dotted_name(test.func) != "isinstance":
        return None
    args = positional_args(test)
    if len(args) != 2 or qualname(args[1]) not in T.HOST_RUNTIME_CONSTRUCTORS:
        return None
    v = args[0]
    if type(v) is cst.Name:
        return v.value
    if type(v) is cst.Attribute and type(v.value) is cst.Name and v.value.value == "self":
        return f"self.{v.attr.value}"
    return None


CONTAINER_TYPES = frozenset({"list", "tuple", "List", "Tuple", "Sequence"})


def container_type_test(test) -> Optional[str]:
    """``isinstance(images, list)`` / ``isinstance(x, (list, tuple))``: the name, else None (in a chain of
    ``and``, as ``python_type_test``)."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return container_type_test(test.left) or container_type_test(test.right)
    if type(test) is not cst.Call or dotted_name(test.func) != "isinstance":
        return None
    args = positional_args(test)
    if len(args) != 2 or type(args[0]) is not cst.Name:
        return None
    types = [e.value for e in args[1].elements] if type(args[1]) is cst.Tuple else [args[1]]
    names = [last_name(t) for t in types]
    return args[0].value if names and all(n in CONTAINER_TYPES for n in names) else None


class Narrowing:
    """The model's side (``model.SemanticModel`` composes it): a branch binds the narrowed kind of a name
    (``narrow``), and after the branch the name has its kind from before again (``restore``), unless the
    branch bound it to something else."""

    def narrow(self, name: Optional[str], kind):
        """Bind ``name`` to ``kind`` for a branch (nothing when ``name`` is None); what ``restore`` needs."""
        if name is None:
            return None
        outside = self._env_lookup(name)
        self._bind_name(name, kind)
        return name, kind, outside

    def restore(self, narrowing) -> None:
        if narrowing is None:
            return
        name, kind, (found, before) = narrowing
        if self.func.env.get(name) != kind:
            return  # bound again in the branch: that binding stands
        if found:
            self._bind_name(name, before)
        else:
            self.func.env.pop(name, None)
