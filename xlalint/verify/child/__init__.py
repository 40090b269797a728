"""The child process of ``xlalint --verify``: run the user's program under torch_xla and record counters per line.

The parent (``xlalint/verify/runner.py``) starts ``python .../xlalint/verify/child/__main__.py spec.json``
as a plain script: it may run under another interpreter than xlalint's, so it imports only the standard
library (then torch and torch_xla, for the program) and nothing else of xlalint - not even this package's
parents, whose ``__init__`` modules are the parent side's (``__main__.py`` says how it is imported). Nothing
here may outlive a crash of the user's code. It writes one JSON result file, which ``step_table.Run``
reads on the parent side.

The rooms, in the order a run goes through them:

- ``__main__.py``: the entry script: imports the package by its path, runs ``main``, ends the process tree.
- ``main.py``: the run's phases: read the spec, guard the processes, start torch_xla and the hooks, run
  the program, write the result.
- ``process_tree.py``: the watchdog process and ``kill_tree`` (the parent's runner uses it too: the one
  name the parent side imports from this package).
- ``stop_control.py``: how a run is stopped from outside (the command pipe's control thread, SIGUSR1) and
  ``os._exit`` in the program, which writes the result first.
- ``recorder.py``: ``Recorder``, what was measured and where: user files, counters, charging what moved
  to a line (with how long the call waited and the compile and transfer time in it), the step barrier's
  bookkeeping; ``StopVerify``.
- ``hooks.py``: the wrappers the child puts around torch_xla and torch: the step barrier,
  ``nn.Module.train``/``eval``, ``optimizer.step()`` (a missing step barrier).
- ``event_attribution.py``: the default attribution: probes compiled into the user's modules (which lines
  ran) and a ``TorchFunctionMode`` (where each counter moved).
- ``line_tracer.py``: the other attribution, ``sys.settrace`` (the run with IR graph dumps).
- ``program.py``: runs the user's program (as ``__main__`` or one function) and says how it ended.
- ``result_file.py``: the JSON result the parent reads, written once (or partially, when stopped).

Imports inside the package: ``main`` uses the others; ``program`` uses ``event_attribution``,
``line_tracer`` and ``recorder``; ``hooks``, ``line_tracer`` and ``stop_control`` take ``StopVerify`` from
``recorder``; ``process_tree``, ``recorder``, ``event_attribution`` and ``result_file`` import none of ours.
The parent side imports only ``process_tree.kill_tree``; the child imports nothing of the parent side (the
two share the result file's shape, written here and read by ``step_table.Run``).
"""
