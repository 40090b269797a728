"""The second floor: text -> a libcst tree, safely.

The guard that keeps pathological text away from libcst (``guard``), the thread with a big stack that
the parse and the walk run on (``stack``), the parse itself (``tree``; ``incremental`` for the language
server) and the positions of the nodes that are reported (``locate``).
"""
