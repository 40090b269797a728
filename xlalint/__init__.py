"""xlalint: find PyTorch/XLA performance anti-patterns in the source, before anything runs."""

__version__ = "0.1.0"
