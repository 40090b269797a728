"""The line tracer: the attribution of the run with IR graph dumps (``attribution == "lines"``).

IR debug locations name the innermost Python frame that created a node, which under the event
attribution's ``TorchFunctionMode`` is xlalint's own: that run attributes with ``sys.settrace`` instead
(the previous design; see the package's README for what it costs).

- A global tracer that returns a local tracer ONLY for frames of user files, so library frames cost one
  cheap call event and no line events.
- At every line/return event of a user frame the recorder's gate is checked (``Recorder.flush``) and
  what moved is charged to the line that was executing since the last event.
- Once ``max_steps`` steps have run, the program is stopped at its next user line.
"""

from __future__ import annotations

import threading

from .recorder import StopVerify


def make_global_tracer(rec):
    """The tracer for 'call' events: it runs for EVERY Python call (~38,000 per step of a 12-block MLP
    with AdamW), so the library case is one dict lookup on the code object and a return."""
    user_code: dict = {}  # code object -> bool
    is_user = rec.is_user
    get_ident = threading.get_ident
    main = rec.main_thread

    def local_tracer(frame, event, arg):
        if event == "line":
            if rec.stop_requested:
                raise StopVerify(rec.stop_reason)
            rec.flush()
            cur = rec.cur = (frame.f_code.co_filename, frame.f_lineno)
            key = (cur[0], cur[1], rec.step)
            rec.hits[key] = rec.hits.get(key, 0) + 1
        elif event == "return":
            rec.flush()
            # Back in the caller: charge what follows to the nearest user frame up the stack.
            f = frame.f_back
            while f is not None and not rec.is_user(f.f_code.co_filename):
                f = f.f_back
            rec.cur = (f.f_code.co_filename, f.f_lineno) if f is not None else None
        return local_tracer

    def thread_tracer(frame, event, arg):
        if event == "line":
            key = (frame.f_code.co_filename, frame.f_lineno, rec.step)
            rec.hits[key] = rec.hits.get(key, 0) + 1
        return thread_tracer

    def global_tracer(frame, event, arg):
        code = frame.f_code
        u = user_code.get(code)
        if u is None:
            u = user_code[code] = is_user(code.co_filename)
        if not u:
            return None
        if get_ident() != main:
            # Another thread (an MpDeviceLoader worker running the user's collate_fn): count that its
            # lines ran, but charge no counter to them; the counters are process-wide.
            return thread_tracer
        rec.flush()
        rec.cur = (code.co_filename, frame.f_lineno)
        return local_tracer

    return global_tracer
