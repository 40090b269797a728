"""Data for the rules XLA007-XLA011 (kept apart from ``tables.py``, which the model reads).

Qualified names are written as the user's import resolves them. The CPU-fallback ops themselves are
generated: see ``fallback_ops.py`` (``scripts/gen_fallback_ops.py`` writes it).
"""

# --- XLA011 sync-heavy-amp ---------------------------------------------------------------------
# (The loss scalers are a kind of the model: ``tables.GRAD_SCALER_CLASSES``, ``kinds.SCALER``.)

# Functions that take ``error_if_nonfinite=``: with ``True`` they read the norm's finiteness on the host.
NONFINITE_CHECK_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_norm", "get_total_norm"})

# --- XLA008 python-iteration-over-tensor -------------------------------------------------------
# Builtins that iterate their (single) argument in Python AND read each element's value (a comparison or
# a truth test): one host read per element. ``sum``/``list``/``tuple`` only slice lazily (measured: no
# transfer), so they are not here.
COMPARING_BUILTINS = frozenset({"max", "min", "sorted", "any", "all"})

# --- XLA007 cpu-fallback-op --------------------------------------------------------------------
# nn modules whose forward is one of the fallback functions (XLA007 reports the module's call): the
# module class -> the function it calls, looked up in fallback_ops.FALLBACK_FUNCTIONS (a function that
# is not there, lowered or CONDITIONAL there, makes the module silent too). Only modules whose forward
# passes no constructor argument that decides the fallback (not ``nn.Upsample``: its ``mode``).
FALLBACK_MODULES = {
    "torch.nn.EmbeddingBag": "torch.nn.functional.embedding_bag",
    "torch.nn.AdaptiveMaxPool1d": "torch.nn.functional.adaptive_max_pool1d",
    "torch.nn.AdaptiveMaxPool2d": "torch.nn.functional.adaptive_max_pool2d",
    "torch.nn.AdaptiveMaxPool3d": "torch.nn.functional.adaptive_max_pool3d",
    "torch.nn.FractionalMaxPool2d": "torch.nn.functional.fractional_max_pool2d",
    "torch.nn.FractionalMaxPool3d": "torch.nn.functional.fractional_max_pool3d",
    "torch.nn.CTCLoss": "torch.nn.functional.ctc_loss",
    "torch.nn.HuberLoss": "torch.nn.functional.huber_loss",
    "torch.nn.MultiMarginLoss": "torch.nn.functional.multi_margin_loss",
    "torch.nn.MultiLabelMarginLoss": "torch.nn.functional.multilabel_margin_loss",
    "torch.nn.Unfold": "torch.nn.functional.unfold",
    "torch.nn.ChannelShuffle": "torch.nn.functional.channel_shuffle",
}

# --- XLA009 step-varying-python-int ------------------------------------------------------------
# torch factories whose positional ints are sizes: a new size on the device is a new graph.
SHAPE_FACTORIES = frozenset(
    {
        "torch.arange", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand",
        "torch.randn", "torch.randint", "torch.eye", "torch.linspace", "torch.tril_indices",
        "torch.triu_indices",
    }
)
# Of those, the factories whose later positional argument is a fill value (data: a new value is no new graph).
FILL_FACTORIES = frozenset({"torch.full"})
# Tensor methods whose int arguments are shapes (or, for select/narrow, positions).
SHAPE_METHODS = frozenset(
    {
        "view", "reshape", "expand", "repeat", "narrow", "select", "new_zeros", "new_ones", "new_empty",
        "new_full", "unflatten", "tile",
    }
)
