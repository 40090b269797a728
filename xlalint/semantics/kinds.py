"""The values the tensor inference gives an expression.

Three answers matter to rules (tensor / not a tensor / unknown); the finer kinds let the inference
follow values through loaders, modules and containers.
"""

TENSOR = "tensor"  # a tensor on the XLA device (or of unknown device: in XLA code that is the device)
BOOL_TENSOR = "bool-tensor"  # a device tensor known to hold booleans (a mask)
CPU_TENSOR = "cpu-tensor"  # a tensor known to live on the host: reading it costs nothing
TENSORS = "tensors"  # a container of device tensors: a batch, a tuple from split(), a dict of tensors
CPU_TENSORS = "cpu-tensors"  # a container of host tensors: a batch from a plain DataLoader
ITEMS = "items"  # ``d.items()`` of a tensor dict: iterating gives (key, tensor)
MODULE = "module"  # an nn.Module: calling it returns tensors
LOADER = "loader"  # iterating it gives device batches (MpDeviceLoader, an accelerator-prepared loader)
CPU_LOADER = "cpu-loader"  # a plain DataLoader: iterating it gives host batches
SCALER = "grad-scaler"  # an enabled GradScaler on an XLA step: its step() reads found_inf on the host
NOT_TENSOR = "not-tensor"  # a Python value: number, string, bool, shape, None, ...
HOST_DEVICE = "host-device"  # `torch.device("cpu")` as an object's device: what it holds and makes is on the host
UNKNOWN = None

DEVICE_TENSORS = frozenset({TENSOR, BOOL_TENSOR})
ANY_TENSOR = frozenset({TENSOR, BOOL_TENSOR, CPU_TENSOR})
HOLDS_DEVICE_TENSOR = frozenset({TENSOR, BOOL_TENSOR, TENSORS, ITEMS})


def element_of(kind):
    """The kind of one element when iterating or indexing a value of ``kind``."""
    cls = instances_class(kind)
    if cls is not None:
        return instance(cls)
    item = generator_item(kind)
    if item is not None:
        return item
    if callable_keys(kind) is not None:
        return kind  # a list of callbacks: each item is one of them
    if kind in (TENSORS, TENSOR, BOOL_TENSOR):
        return TENSOR
    if kind in (CPU_TENSORS, CPU_TENSOR):
        return CPU_TENSOR
    if kind == LOADER:
        return TENSORS
    if kind == CPU_LOADER:
        return CPU_TENSORS
    # a Python container's elements are not known from the container: `batches = []` filled with
    # `batches.append(batch)` holds batches (what a loop over it binds is unknown, not a Python value)
    return UNKNOWN


def join(a, b):
    """The kind of a value that is ``a`` on one path and ``b`` on another."""
    if a == b:
        return a
    return UNKNOWN


def arithmetic(a, b):
    """The kind of ``a <op> b``."""
    if a in DEVICE_TENSORS or b in DEVICE_TENSORS:
        return TENSOR
    if a == CPU_TENSOR or b == CPU_TENSOR:
        if a in (CPU_TENSOR, NOT_TENSOR) and b in (CPU_TENSOR, NOT_TENSOR):
            return CPU_TENSOR
        return UNKNOWN
    if a == NOT_TENSOR and b == NOT_TENSOR:
        return NOT_TENSOR
    return UNKNOWN


# An object of a project class: not a tensor itself, but its methods return and its attributes hold
# what the class's summary says. The kind names the class by its project-wide key ("pkg.core:Trainer").
_INSTANCE = "obj:"


def instance(class_key: str) -> str:
    return _INSTANCE + class_key


def instance_class(kind):
    """The class key of an instance kind, else None."""
    if isinstance(kind, str) and kind.startswith(_INSTANCE):
        return kind[len(_INSTANCE):]
    return None


# A module of a known project class, as a call site passes it (``train_fn(model, ...)`` with ``model =
# Seq2Seq(...).to(device)``): only in call sites and their seeds, never a name's kind (a name holding a module
# is ``MODULE``; the class goes to the parameter's class seed, ``class_seed``).
_MODULE_OF = "mod:"


def module_of(class_key: str) -> str:
    return _MODULE_OF + class_key


def module_class(kind):
    """The class key of a call site's module-of-a-class kind, else None."""
    if isinstance(kind, str) and kind.startswith(_MODULE_OF):
        return kind[len(_MODULE_OF):]
    return None


def class_seed(param: str) -> str:
    """The seed under which a parameter's module class goes (``#cls:model``: no name can clash with it)."""
    return "#cls:" + param


# A list or tuple of objects of one project class (``[batch_time, losses, top1]`` handed to a
# ProgressMeter): iterating or indexing it gives such an object.
_INSTANCES = "objs:"


def instances(class_key: str) -> str:
    return _INSTANCES + class_key


def instances_class(kind):
    """The class key of a list-of-instances kind, else None."""
    if isinstance(kind, str) and kind.startswith(_INSTANCES):
        return kind[len(_INSTANCES):]
    return None


# What a project generator yields (``def batches(device, n): ... yield x.to(device), y.to(device)``):
# iterating its call gives that. Kept for items that hold tensors only, and for a yielded tuple its
# parts, one kind each (``yield x, y, names``: the names stay what they are).
_GENERATOR = "gen:"
_GENERATOR_ITEMS = frozenset({TENSOR, BOOL_TENSOR, TENSORS, CPU_TENSOR, CPU_TENSORS})
_GENERATOR_PARTS = _GENERATOR_ITEMS | {NOT_TENSOR, MODULE}


def generator(item, parts=None):
    """The kind of a generator whose every item is of kind ``item`` (for a tuple: ``parts``, the kinds of
    its elements, UNKNOWN where not known), or UNKNOWN when its items hold no tensor."""
    if item not in _GENERATOR_ITEMS:
        return UNKNOWN
    text = _GENERATOR + item
    if parts and all(p in _GENERATOR_PARTS or p is UNKNOWN for p in parts):
        text += "|" + ",".join(p or "?" for p in parts)
    return text


def generator_item(kind):
    """The kind of one item of a generator kind, else None."""
    if isinstance(kind, str) and kind.startswith(_GENERATOR):
        return kind[len(_GENERATOR):].partition("|")[0]
    return None


def generator_parts(kind):
    """The kinds of the elements of a generator kind's tuple items (UNKNOWN where not known), else None."""
    if isinstance(kind, str) and kind.startswith(_GENERATOR) and "|" in kind:
        return tuple(None if p == "?" else p for p in kind.partition("|")[2].split(","))
    return None


# A project function passed as a value (``on_token=print_token``, ``callbacks=[log, partial(save, k=1)]``,
# ``lambda t: print(t.tolist())``): calling it runs one of these functions (project-wide keys
# "pkg.mod:func"), where the call is.
_CALLABLE = "fn:"


def callables(keys) -> str:
    return _CALLABLE + "|".join(sorted(set(keys)))


def callable_keys(kind):
    """The project-wide keys of the functions a callable kind may run, else None."""
    if isinstance(kind, str) and kind.startswith(_CALLABLE):
        return tuple(kind[len(_CALLABLE):].split("|"))
    return None


# What a function that returns one of its arguments returns (``def default(val, d): return val if val is not
# None else d``): at each call, what that call passed (``passthrough.at_call``). Parts: position, name and
# whether the parameter is called (``d()``).
_PASSTHROUGH = "arg:"


def passthrough(parts, fallback=None) -> str:
    """``fallback``: what the function returns as its own walk saw it, for a call whose arguments of an
    arithmetic (``passthrough.ARITH``) are not known."""
    text = _PASSTHROUGH + ",".join(f"{i}/{name}/{int(how)}" for i, name, how in parts)
    return text + "|" + fallback if isinstance(fallback, str) and "|" not in fallback else text


def passthrough_fallback(kind):
    """The ``fallback`` of a passthrough kind, else UNKNOWN."""
    if isinstance(kind, str) and kind.startswith(_PASSTHROUGH) and "|" in kind:
        return kind.partition("|")[2]
    return UNKNOWN


def passthrough_spec(kind):
    """The parts of a passthrough kind, else None."""
    if isinstance(kind, str) and kind.startswith(_PASSTHROUGH):
        out = []
        for part in kind[len(_PASSTHROUGH):].partition("|")[0].split(","):
            i, name, how = part.split("/")
            out.append((int(i), name, int(how)))
        return tuple(out)
    return None
