"""Host values: where a tensor a call makes lives, by what the call says (a CPU device, a host copy).

A part of the semantic model (``model.SemanticModel`` composes it): ``"cpu"``, ``torch.device("cpu")`` and a
name last bound to one; ``"cuda:1"`` and names only ever given CUDA device indices; ``x.cpu()``,
``x.to("cpu")``, ``torch.from_numpy(a)`` as host copies; the arguments of a call that are all host values.
"""

from __future__ import annotations

import libcst as cst

from xlalint.semantics import device_pins
from xlalint.semantics import kinds as K
from xlalint.semantics.syntax import keyword_arg, positional_args


class HostValues:
    """Devices named by the source and the host tensors calls make."""

    def host_arguments(self, e: cst.Call) -> bool:
        """Every argument of the call is a host value (a host tensor, a NumPy value, a Python value) and one
        at least a host tensor."""
        if not e.args or any(a.star for a in e.args):
            return False
        kinds = [self.kind(a.value) for a in e.args]
        return all(k in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR) for k in kinds) and (
            K.CPU_TENSOR in kinds or K.CPU_TENSORS in kinds)

    def copied_to_host_arguments(self, e: cst.Call) -> bool:
        """An argument of the call is a host copy made here (``bboxes_iou(truth_box.cpu(), anchors)``, or a
        name this function bound to one): a helper whose own walk returns a device tensor (its other callers
        pass device tensors) computes this call's result on the host, with the host copy (``host_arguments``
        asks that the others be host values too). Not a host kind that only came from a parameter's context
        (litgpt's sampler walked once with a host ``probs``: its result stays what its own walk found)."""
        for a in e.args:
            v = a.value
            if type(v) is cst.Name:
                v = self._bound_calls.get((id(self.func), v.value))
            if v is not None and self.host_copy(v):
                return True
        return False

    def host_copy(self, v) -> bool:
        """``x.cpu()``, ``x.to("cpu")``, ``x.detach().cpu()``, ``torch.from_numpy(a)``: a host tensor by the
        call that makes it."""
        if type(v) is not cst.Call:
            return False
        if type(v.func) is cst.Attribute and (v.func.attr.value == "cpu" or (v.func.attr.value == "to" and self.to_cpu(v))):
            return True
        return self.qualname(v.func) in ("torch.from_numpy", "torch.as_tensor") and keyword_arg(v, "device") is None \
            and self.kind(v.args[0].value if v.args else v) == K.NOT_TENSOR

    def to_cpu(self, call: cst.Call) -> bool:
        """``.to("cpu")``, ``.to(device="cpu")``, ``.to(torch.device("cpu"))``."""
        target = device_pins.to_target(call)
        return target is not None and self.is_cpu_device(target)

    def is_cuda_device(self, node) -> bool:
        """``"cuda:1"``, ``torch.cuda.current_device()``, a name only ever given CUDA device indices: a tensor
        put there is on a CUDA device, never the XLA device (``kinds.CPU_TENSOR``: reading it is no XLA sync).
        Not a device variable (``device``, even set to "cuda": the run's setting, pointed at XLA on a TPU)."""
        if type(node) is cst.Name:
            return node.value in self.cuda_ordinal_names
        return device_pins.names_cuda(node)

    def is_cpu_device(self, node) -> bool:
        """``"cpu"``, ``torch.device("cpu")``, or a name last bound to one (``names_cpu_device``)."""
        if type(node) is cst.Name:
            return self.names_cpu_device(node.value)
        if type(node) is cst.Call and self.qualname(node.func) == "torch.device":  # `import torch as T; T.device(...)`
            args = positional_args(node)
            return bool(args) and device_pins.is_cpu_device(args[0])
        return device_pins.is_cpu_device(node)

    def all_args_cpu(self, e: cst.Call, keywords: bool = False) -> bool:
        """Some positional argument (any argument, with ``keywords``: `Categorical(probs=p.cpu())`) is a host
        tensor and none a device tensor: an op or a module given a host tensor runs on the host (its other
        tensors must be there too, or it fails)."""
        ks = [self.kind(a.value) for a in e.args if keywords or a.keyword is None]
        return any(k in (K.CPU_TENSOR, K.CPU_TENSORS) for k in ks) and not any(k in K.HOLDS_DEVICE_TENSOR for k in ks)
