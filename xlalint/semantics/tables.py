"""What xlalint knows about PyTorch, torch_xla and friends, kept as data.

One table, many readers: the semantic model and the rules read these; nothing here is code.
Qualified names are written as the user's import would resolve them (``torch.nonzero``,
``torch_xla.core.xla_model.mark_step``).
"""

# --- Which torch namespaces return tensors -------------------------------------------------
# A call ``torch.<fn>(...)`` in one of these namespaces returns a tensor unless ``fn`` is listed
# in NON_TENSOR_TORCH_FUNCTIONS. Classes (CamelCase names) never count as tensor functions.
TENSOR_NAMESPACES = frozenset(
    {
        "torch",
        "torch.nn.functional",
        "torch.linalg",
        "torch.fft",
        "torch.special",
        "torch.sparse",
        "torch.masked",
    }
)

# Functions in those namespaces that return something other than a tensor.
NON_TENSOR_TORCH_FUNCTIONS = frozenset(
    {
        "torch.is_tensor", "torch.is_storage", "torch.is_floating_point", "torch.is_complex",
        "torch.is_nonzero", "torch.is_grad_enabled", "torch.is_inference_mode_enabled",
        "torch.is_autocast_enabled", "torch.is_deterministic_algorithms_warn_only_enabled",
        "torch.are_deterministic_algorithms_enabled", "torch.is_anomaly_enabled",
        "torch.numel", "torch.typename", "torch.result_type", "torch.can_cast", "torch.promote_types",
        "torch.get_default_dtype", "torch.get_default_device", "torch.set_default_dtype",
        "torch.get_autocast_dtype", "torch.get_autocast_gpu_dtype", "torch.get_autocast_cpu_dtype",
        "torch.get_autocast_xla_dtype", "torch.get_autocast_ipu_dtype", "torch.is_autocast_cpu_enabled",
        "torch.is_autocast_xla_enabled", "torch.is_autocast_cache_enabled", "torch.get_device_module",
        "torch.set_default_device", "torch.set_default_tensor_type", "torch.device", "torch.dtype",
        "torch.finfo", "torch.iinfo", "torch.Size", "torch.broadcast_shapes",
        "torch.manual_seed", "torch.seed", "torch.initial_seed", "torch.set_rng_state",
        "torch.no_grad", "torch.enable_grad", "torch.set_grad_enabled", "torch.inference_mode",
        "torch.autocast", "torch.compile", "torch.save", "torch.set_printoptions",
        "torch.use_deterministic_algorithms", "torch.set_float32_matmul_precision",
        "torch.get_float32_matmul_precision", "torch.set_num_threads", "torch.get_num_threads",
        "torch.set_num_interop_threads", "torch.get_num_interop_threads", "torch.set_anomaly_enabled",
        "torch.set_warn_always", "torch.is_warn_always_enabled", "torch.vmap", "torch.cond",
        "torch.equal", "torch.allclose",  # these return a Python bool (a host read: see XLA001)
        "torch.nn.functional.has_torch_function", "torch.nn.functional.handle_torch_function",
        "torch.nn.functional._verify_batch_size", "torch.nn.functional._get_softmax_dim",
        "torch.from_dlpack", "torch.get_device", "torch.chunk_size",
    }
)

# torch functions whose result may be anything (a whole pickled model, a state dict, a tensor): unknown.
ANY_RESULT_TORCH_FUNCTIONS = frozenset({"torch.load", "torch.hub.load", "torch.jit.load"})

# torch functions whose result is a tuple/list of tensors (iterating or indexing them gives tensors).
TENSOR_SEQUENCE_TORCH_FUNCTIONS = frozenset(
    {
        "torch.split", "torch.chunk", "torch.unbind", "torch.meshgrid", "torch.tensor_split",
        "torch.hsplit", "torch.vsplit", "torch.dsplit", "torch.broadcast_tensors",
        "torch.atleast_1d", "torch.atleast_2d", "torch.atleast_3d",
    }
)

# Library readers that decode files into host tensors: one tensor, or a tuple holding them
# (`waveform, sample_rate = torchaudio.load(path)`): their results live on the host until moved.
HOST_TENSOR_READERS = {
    "torchaudio.load": "tuple", "torchaudio.load_with_torchcodec": "tuple", "torchvision.io.read_video": "tuple",
    "torchvision.io.read_image": "tensor", "torchvision.io.decode_image": "tensor", "torchvision.io.read_file": "tensor",
}

# Factories that create a tensor on the CPU unless a device is given.
CPU_FACTORY_FUNCTIONS = frozenset(
    {
        "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.zeros", "torch.ones",
        "torch.empty", "torch.full", "torch.arange", "torch.range", "torch.linspace",
        "torch.logspace", "torch.eye", "torch.rand", "torch.randn", "torch.randint",
        "torch.randperm", "torch.Tensor", "torch.LongTensor", "torch.FloatTensor",
        "torch.BoolTensor", "torch.IntTensor", "torch.get_rng_state", "torch.frombuffer",
        "torch.scalar_tensor", "torch.empty_strided", "torch.normal", "torch.bernoulli",
        "torch.fft.fftfreq", "torch.fft.rfftfreq", "torch.hann_window", "torch.hamming_window",
        "torch.blackman_window", "torch.bartlett_window", "torch.kaiser_window",
    }
)

# --- Tensor methods and attributes ----------------------------------------------------------
# Methods of a tensor that return a Python value (not a tensor). Calling them is no transfer by
# itself unless also listed in HOST_READ_METHODS.
NON_TENSOR_METHODS = frozenset(
    {
        "item", "tolist", "size", "dim", "ndimension", "numel", "nelement", "element_size",
        "is_contiguous", "is_floating_point", "is_complex", "is_signed", "data_ptr", "get_device",
        "stride", "storage_offset", "numpy", "is_pinned", "is_shared", "is_set_to", "type",
        "untyped_storage", "storage", "__len__", "dim_order", "is_nonzero", "equal", "allclose",
        "register_hook", "backward", "retain_grad", "requires_grad_", "zero_", "share_memory_",
        "is_inference", "has_names", "nbytes", "itemsize", "__repr__", "__str__", "__format__",
        "keys", "values", "items", "get",  # dict-like model outputs: handled as containers
        "dense_dim", "sparse_dim", "is_coalesced", "q_scale", "q_zero_point", "qscheme", "nnz",
    }
)

# Methods that move a device value to the host.
HOST_READ_METHODS = {
    "item": "reads one value to the host",
    "tolist": "copies the whole tensor to the host",
    "cpu": "copies the tensor to the host",
    "numpy": "copies the tensor to the host",
}


# Tensor attributes that are not tensors.
NON_TENSOR_ATTRIBUTES = frozenset(
    {
        "shape", "dtype", "device", "ndim", "is_cuda", "is_xla", "is_cpu", "is_sparse",
        "is_quantized", "is_meta", "is_leaf", "requires_grad", "layout", "names", "grad_fn",
        "training", "itemsize", "nbytes", "is_mkldnn", "is_nested", "output_nr", "_version",
        "__class__", "__dict__", "config",
        # a DTensor's layout: Python objects (Shard(dim), Replicate()), not tensors
        "placements", "device_mesh",
        # a batch object's counts (torchtext's `batch.batch_size`, PyG's `batch.num_graphs`): Python ints
        "batch_size", "num_graphs", "num_nodes", "num_edges",
        # an image's size as a structure holds it (detectron2's `Instances.image_size`, a config's): Python ints
        "image_size",
    }
)

# Tensor attributes that are tensors.
TENSOR_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "grad", "data", "real", "imag"})


# --- Calls that mark a training step ---------------------------------------------------------
# Method names that mark a step when called on any receiver.
STEP_METHODS_ANY_RECEIVER = frozenset({"backward"})
# ``<receiver>.step()`` marks a step when the receiver's last name contains one of these.
STEP_RECEIVER_HINTS = ("optim", "opt", "scaler")
# (``scheduler.step()`` is not a mark: it often runs once per epoch, outside the step loop.)
# Qualified functions that mark a step (and whether they are a graph barrier).
STEP_FUNCTIONS = {
    "torch_xla.core.xla_model.optimizer_step": False,  # a barrier only with barrier=True
    "torch_xla.core.xla_model.mark_step": True,
    "torch_xla.sync": True,
    "torch_xla.step": True,
}

# Calls that set a training run up: a function that makes them (outside its own loops) is a whole run,
# not one step, so a loop calling it (a sweep over configs, a test harness) is not a step loop.
SETUP_FUNCTIONS = frozenset(
    {
        "accelerate.Accelerator", "torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader",
        "torch_xla.distributed.parallel_loader.MpDeviceLoader", "torch_xla.distributed.xla_multiprocessing.spawn",
    }
)
SETUP_FUNCTION_PREFIXES = ("torch.optim.",)  # an optimizer class: torch.optim.AdamW(...)
SETUP_METHODS = {"prepare": ("accelerator",)}  # accelerator.prepare(model, optimizer, loader)
# Loading a model or a checkpoint from disk: a function that does it is a whole run (an export, a benchmark of
# one configuration), not one pass of the model, even when it then runs the model once
MODEL_LOAD_FUNCTIONS = frozenset({"torch.load", "torch.jit.load", "torch.hub.load", "safetensors.torch.load_file"})
MODEL_LOAD_METHODS = frozenset({"from_pretrained", "load_from_checkpoint"})

# Methods of an accelerate ``Accelerator`` (receivers named like one) and what they return: "arg" is
# the kind of their first argument (a tensor or a tuple/dict of tensors, gathered or padded on the device).
ACCELERATOR_RECEIVERS = frozenset({"accelerator", "accel"})
ACCELERATOR_METHODS = {"gather": "arg", "gather_for_metrics": "arg", "pad_across_processes": "arg",
                       "reduce": "arg", "unwrap_model": "module"}

# Loss scalers (kind SCALER): their ``step(optimizer)`` reads ``found_inf`` on the host (``.item()``).
GRAD_SCALER_CLASSES = frozenset(
    {
        "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.cpu.amp.GradScaler", "torch.cpu.amp.grad_scaler.GradScaler",
        "torch.GradScaler",
    }
)

# --- Loaders ---------------------------------------------------------------------------------
# Constructors whose result yields batches on the XLA device.
DEVICE_LOADER_CONSTRUCTORS = frozenset(
    {
        "torch_xla.distributed.parallel_loader.MpDeviceLoader",
        "torch_xla.distributed.parallel_loader.ParallelLoader",
    }
)
# Constructors whose result yields CPU batches.
CPU_LOADER_CONSTRUCTORS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# Variable names that look like a data loader.
LOADER_NAME_SUFFIXES = ("loader", "dataloader", "_dl", "epoch_iterator", "train_iterator", "batch_iterator", "train_iter", "data_iter")
LOADER_NAMES = frozenset({"dl", "loader", "dataloader", "train_dl", "val_dl", "eval_dl", "test_dl"})
# Wrappers that yield what they iterate: ``for batch in tqdm(loader)``.
# A torch.distributions object built from device tensors (`Categorical(logits=out)`), as an instance kind, and
# its methods that give device tensors (`dist.sample()`, `dist.log_prob(a)`)
DEVICE_DISTRIBUTION = "torch.distributions:Distribution"
# one built from host tensors (`Categorical(probs.cpu())`): those methods give host tensors
HOST_DISTRIBUTION = "torch.distributions:HostDistribution"
# A runtime that runs a model compiled for the host (ONNX Runtime's `InferenceSession`), as an instance kind:
# `session.run(output_names, feeds)` returns a list of NumPy arrays, whatever device the program chose
HOST_RUNTIME = "onnxruntime:InferenceSession"
HOST_RUNTIME_CONSTRUCTORS = frozenset({"onnxruntime.InferenceSession", "onnxruntime.capi.onnxruntime_inference_collection.InferenceSession"})
HOST_RUNTIME_RESULTS = frozenset({"run", "run_with_ort_values", "run_with_iobinding"})
DISTRIBUTION_TENSOR_METHODS = frozenset({"sample", "rsample", "sample_n", "log_prob", "entropy", "cdf", "icdf",
                                         "perplexity", "enumerate_support", "mode", "kl", "nll"})
# the last word of a model output's field that holds a distribution, not a tensor (diffusers' VAE encode output's
# `latent_dist`, a `posterior`): its `.mode()` is the distribution's, not torch's `mode` (issue 32, cause 8)
DISTRIBUTION_FIELD_WORDS = frozenset({"dist", "distribution", "posterior"})
# fields of a model output that hold a tuple of tensors (transformers' convention): a container, whose truth
# value is Python's (`assert out.past_key_values`), not a tensor
TUPLE_OUTPUT_FIELDS = frozenset({"past_key_values", "hidden_states", "attentions", "cross_attentions"})

TRANSPARENT_ITERATION_WRAPPERS = frozenset({"tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "iter"})

# transformers' KV-cache convention: a model call given back the cache its last call returned
# (`out = model(ids, past_key_values=past); past = out.past_key_values`) extends it by the input's length
# (a DynamicCache, or the legacy tuples of tensors), so the cache is one position longer on every call;
# the old GPT-2 API named it `past`. A static cache keeps one length: its names (or choosing it with
# `cache_implementation=`) in the function mean the cache is not grown.
CACHE_KEYWORDS = frozenset({"past_key_values", "past"})
# transformers 5 renamed it `cache` (in and out: `out = model(ids, cache=cache); cache = out.cache`): a name
# too common to take as a cache outside a module that imports transformers
TRANSFORMERS_CACHE_KEYWORDS = frozenset({"cache"})
STATIC_CACHE_NAMES = frozenset({"StaticCache", "HybridCache", "SlidingWindowCache", "HybridChunkedCache",
                                "OffloadedStaticCache", "cache_implementation"})

# --- Modules ---------------------------------------------------------------------------------
# Lightning's module base class, as the user's import resolves it.
LIGHTNING_MODULES = (
    "lightning.LightningModule", "lightning.pytorch.LightningModule",
    "lightning.pytorch.core.LightningModule", "lightning.pytorch.core.module.LightningModule",
    "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
    "pytorch_lightning.core.lightning.LightningModule", "pytorch_lightning.core.module.LightningModule",
)
# Base classes that make a class an nn.Module (its ``forward`` runs every step).
MODULE_BASES = frozenset(
    {
        "torch.nn.Module", "torch.nn.modules.module.Module", "torch.autograd.Function",
        *LIGHTNING_MODULES, "transformers.PreTrainedModel",
    }
)
# Decorators / wrappers whose function runs every step.
COMPILE_WRAPPERS = frozenset({"torch.compile", "torch_xla.compile", "torch_xla.experimental.compile"})

# --- Where per-step code stops being per-step ------------------------------------------------
STEP_CLOSURE_FUNCTIONS = frozenset({"torch_xla.core.xla_model.add_step_closure"})
# A block that ends with one of these (or a `raise`) runs at most once: an error path.
EXIT_FUNCTIONS = frozenset({"sys.exit", "exit", "quit", "os._exit", "os.abort"})

# --- XLA001: host reads ----------------------------------------------------------------------
# Builtins that read a tensor's value to the host when given a tensor.
HOST_READ_BUILTINS = frozenset({"float", "int", "bool", "complex"})
# torch functions that return a Python bool by reading device values.
HOST_READ_TORCH_FUNCTIONS = frozenset({"torch.allclose", "torch.equal", "torch.is_nonzero"})

# --- XLA006: logging -------------------------------------------------------------------------
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
PRINT_FUNCTIONS = frozenset({"print", "tqdm.write", "torch_xla.core.xla_model.master_print"})

# --- XLA003: dynamic shapes ------------------------------------------------------------------
DYNAMIC_SHAPE_FUNCTIONS = {
    "torch.nonzero": "nonzero",
    "torch.argwhere": "argwhere",
    "torch.masked_select": "masked_select",
    "torch.unique": "unique",
    "torch.unique_consecutive": "unique_consecutive",
}
DYNAMIC_SHAPE_METHODS = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere"})
# Methods/functions whose result is a boolean tensor.
BOOL_RESULT_METHODS = frozenset(
    {"bool", "eq", "ne", "gt", "ge", "lt", "le", "isnan", "isinf", "isfinite", "logical_and",
     "logical_or", "logical_not", "logical_xor", "isneginf", "isposinf", "isclose", "isin",
     "greater", "less", "greater_equal", "less_equal", "not_equal", "signbit"}
)
BOOL_RESULT_FUNCTIONS = frozenset("torch." + m for m in BOOL_RESULT_METHODS if m != "bool") | {
    "torch.ones_like_bool"
}

# Device tensors whose name says they hold booleans, when nothing else does (``x[dones] = 0`` with ``dones``
# unpacked from a batch): indexing with them selects.
MASK_NAME_SUFFIXES = ("mask",)
MASK_NAMES = frozenset({"dones", "done", "terminals", "terminal", "is_terminal", "is_done"})

# Tensor methods that keep a boolean mask boolean (same values, another view or layout).
BOOL_PRESERVING_METHODS = frozenset(
    {"unsqueeze", "squeeze", "view", "reshape", "flatten", "expand", "expand_as", "contiguous", "clone",
     "detach", "t", "transpose", "permute", "repeat", "flip", "roll", "view_as", "reshape_as", "cuda",
     "logical_not", "logical_and", "logical_or", "logical_xor", "movedim", "narrow", "tril", "triu",
     "unflatten", "squeeze_", "unsqueeze_", "index_select", "gather", "bool", "scatter", "masked_fill"}
)

# torch factories whose positional arguments are sizes (or arange's bounds): a device tensor there is read
# to the host and decides the result's shape (``torch.arange(lengths.max())``). Value: which positional
# arguments are sizes (None: all of them).
SIZE_ARG_TORCH_FUNCTIONS = {
    "torch.arange": None, "torch.zeros": None, "torch.ones": None, "torch.empty": None, "torch.rand": None,
    "torch.randn": None, "torch.full": (0,), "torch.eye": None,
}

# Reductions after which a masked selection could have kept the full shape (`x[m].sum()`).
MASK_REDUCTION_METHODS = frozenset(
    {"sum", "mean", "nansum", "nanmean", "prod", "max", "min", "amax", "amin", "norm", "std", "var",
     "logsumexp", "count_nonzero"}
)
# Function names that end like a loss (`F.cross_entropy(logits[m], y[m])`: use ignore_index / weights).
LOSS_NAME_SUFFIXES = (
    "loss", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "smooth_l1_loss", "kl_div", "criterion", "huber_loss",
)
# Dynamic-shape methods that numpy arrays / pandas objects do not have: flagged on unknown receivers.
TORCH_ONLY_DYNAMIC_SHAPE_METHODS = frozenset({"masked_select", "unique_consecutive", "argwhere"})

# --- XLA004: train/eval ------------------------------------------------------------------------
# Last words of names that hold a model whose `.eval()` / `.train()` switches the mode.
MODEL_NAME_WORDS = frozenset(
    {"model", "net", "module", "encoder", "decoder", "generator", "discriminator", "classifier",
     "backbone", "student", "teacher", "policy", "critic", "actor", "network", "gpt", "transformer",
     "unet", "vae", "bert", "llm", "lm", "pipeline", "pipe"}
)

# --- XLA005: variable-length inputs -------------------------------------------------------------
# Pads a list of sequences to the longest one of the call (pack_padded_sequence packs instead: not here).
PAD_TO_BATCH_MAX_FUNCTIONS = frozenset({"torch.nn.utils.rnn.pad_sequence"})
PADDING_COLLATORS = frozenset(
    {"DataCollatorWithPadding", "DataCollatorForSeq2Seq", "DataCollatorForLanguageModeling",
     "DataCollatorForTokenClassification", "DataCollatorForWholeWordMask"}
)

# --- Parameters of ``forward`` that are configuration, not tensors -----------------------------
# ``forward(self, x, mask=None)``: x and mask are tensors; these names are flags and sizes.
NON_TENSOR_PARAM_PREFIXES = ("use_", "is_", "return_", "output_", "num_", "n_", "do_", "with_", "enable_", "apply_", "need_", "skip_")
NON_TENSOR_PARAM_SUFFIXES = ("_size", "_dim", "_dims", "_len", "_length", "_idx", "_index", "_spec", "_mode", "_type", "_name", "_flag", "_config", "_kwargs", "_args", "_fn", "_func", "_state")
NON_TENSOR_PARAM_NAMES = frozenset(
    {"dim", "dims", "training", "causal", "deterministic", "mode", "reduction", "inplace", "mesh",
     "layer_idx", "config", "cfg", "kwargs", "args", "name", "key", "scale", "eps", "p", "dropout",
     "train", "is_training", "verbose", "debug", "strict", "flag", "shape", "size", "axis",
     "chunk_size", "stride", "padding", "dilation", "groups", "align_corners", "mesh_shape",
     "partition_spec", "sharding", "device", "dtype", "generator", "seed", "step", "epoch",
     "iteration", "steps", "tokenizer", "preserve_rng_state", "run_function", "function", "fn",
     # a trainer's counters and switches handed to a loss module's forward (Lightning's `global_step`,
     # `optimizer_idx`, `split="train"`), sampling settings handed to a generation forward
     "global_step", "optimizer_idx", "split", "normalize", "top_k", "top_p", "beam_size"}
)

# Annotations of containers: ``tuple[Tensor, Tensor]``, ``list[Tensor]``, ``dict[str, Tensor]`` hold tensors.
TENSOR_CONTAINER_ANNOTATIONS = frozenset(
    {"tuple", "Tuple", "list", "List", "Sequence", "dict", "Dict", "Mapping"}
)

# Tensors that PyTorch keeps on the host by design (``PackedSequence.batch_sizes``).
CPU_TENSOR_NAMES = frozenset({"batch_sizes"})

# Helpers that move a tensor or a container of tensors to the device they are given, by the names projects and
# libraries use for them (accelerate's ``send_to_device``, Lightning's ``move_data_to_device``, a project's
# ``move_to_device(batch, device)``): the first argument moved, as ``.to(device)`` moves it.
DEVICE_MOVERS = frozenset({
    "to_device", "move_to_device", "send_to_device", "batch_to_device", "move_data_to_device",
    "recursive_to_device", "data_to_device", "tensors_to_device", "dict_to_device", "put_on_device"})

# --- XLA001: trigger checks (issue #13, hot loops engineer) -------------------------------------
# Methods of an accelerator-like object that read a device flag to the host by themselves:
# method -> (last words of the receiver's name, what the call does). `accelerator.check_trigger()`
# all-reduces a device flag and reads it with `.item()`.
HOST_READ_TRIGGER_METHODS = {
    "check_trigger": (("accelerator", "accel", "acc"), "all-reduces a device flag and reads it to the host"),
}

# --- Logging sinks (XLA001): calls that read the tensors handed to them back to the host ------------
# A device tensor (or a dict/list holding one) handed to one of these is converted by the library with
# `.cpu().numpy()` / `.item()` before it is written: 1 graph cut + 1 device-to-host transfer per call
# (measured on the CPU device: `SummaryWriter.add_scalar(tag, loss)` = 2 executions + 1 transfer per
# step, like `.cpu()`). Python numbers and CPU tensors cost nothing. Lightning's `self.log(...)` /
# `self.log_dict(...)` is not a sink: it keeps the tensor on the device and reads it after the step.
# Each entry: (argument positions, keywords) that receive values, and who reads them (for the message).
SINK_FUNCTIONS = {
    "wandb.log": ((0,), ("data",), "Weights & Biases"),
    "wandb.run.log": ((0,), ("data",), "Weights & Biases"),
    "mlflow.log_metric": ((1,), ("value",), "MLflow"),
    "mlflow.log_metrics": ((0,), ("metrics",), "MLflow"),
}
# Methods whose name is a logger's whatever the receiver (TensorBoard's SummaryWriter, tensorboardX,
# Lightning loggers' `log_metrics`), unless the receiver is an object of a project class (its own method
# is followed through the call graph instead).
SINK_METHODS = {
    "add_scalar": ((1,), ("scalar_value",), "TensorBoard"),
    "add_scalars": ((1,), ("tag_scalar_dict",), "TensorBoard"),
    "add_histogram": ((1,), ("values",), "TensorBoard"),
    "add_image": ((1,), ("img_tensor",), "TensorBoard"),
    "add_images": ((1,), ("img_tensor",), "TensorBoard"),
    "log_metrics": ((0,), ("metrics",), "the logger"),
}
# Methods with a generic name: sinks only on a receiver whose last name is one of these
# (`fabric.log_dict(m)`, `self.fabric.log(...)`, `accelerator.log(values)` to its trackers).
SINK_METHODS_BY_RECEIVER = {
    ("log_dict", "fabric"): ((0,), ("metrics",), "Fabric"),
    ("log", "fabric"): ((1,), ("value",), "Fabric"),
    ("log", "accelerator"): ((0,), ("values",), "Accelerate's trackers"),
    ("log", "wandb_run"): ((0,), ("data",), "Weights & Biases"),
}

# --- XLA006: formatting an object runs its class's formatting method -------------------------------
# `f"{meter}"`, `str(meter)`, `print(meter)`: Python calls these methods of the object's class; a project
# class's method then runs as often as the formatting site (a call-graph edge from the site to it).
FORMAT_DUNDERS = ("__format__", "__str__", "__repr__")


# libraries that place nothing on a device (a script importing only these and the standard library holds host
# tensors unless it places them itself: unbound.is_host_library)
HOST_LIBRARIES = frozenset({"torch", "torchvision", "torchaudio", "torchtext", "numpy", "scipy", "pandas",
                            "matplotlib", "PIL", "sklearn", "gym", "gymnasium", "tqdm", "einops", "seaborn", "cv2",
                            "h5py", "yaml", "wandb", "tensorboardX", "networkx", "dgl", "IPython", "ipywidgets"})

# methods that write a checkpoint or a model out (`torch.save`'s `.save`, `.save_pretrained`): a function named for
# saving that calls one is a checkpoint writer (walk), and between `model.eval()` and `model.train()` they run no
# forward (train_eval_alternation)
SAVE_METHODS = frozenset({"save", "save_file", "save_pretrained", "save_checkpoint", "save_state", "save_model",
                          "save_state_dict"})
