"""XLA005's words: the cost of a batch-dependent shape and the fixes, shared by its per-module and project steps."""

COST = (
    "the input shape varies from batch to batch, and each new shape compiles a new XLA graph "
    "(measured: random lengths 8-64 recompile on ~9 steps in 10)"
)
FIX_PAD = (
    "pad to a few fixed lengths (buckets, e.g. the next multiple of 64, or `padding=\"max_length\"` with "
    "`max_length=`) and warm each bucket up once"
)
FIX_COLLATOR = "pass `pad_to_multiple_of=64` (or pad to a fixed `max_length`) and warm the few lengths up once"
FIX_DROP_LAST = "pass `drop_last=True` (or pad the last batch to the full batch size)"
