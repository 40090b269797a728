"""The sixth floor: a run over files on disk.

Which files make a project (``files``), what the run reads of them (``inputs``), the findings cache on
disk (``cache``) and what it stores (``store``), the process pool (``pool``) and its memory (``memory``),
and a project's rounds of walks until the facts agree (``project``, with ``lint_paths`` and
``lint_files``, the entry points of every front end).
"""
