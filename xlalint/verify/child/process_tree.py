"""The child's guards: nothing the user's program starts outlives it, or xlalint.

``kill_tree`` ends a process's session and every descendant (also used by the parent's runner, which
imports it from here: a plain helper of the standard library only). The watchdog, a tiny process forked
before anything else, does it when xlalint dies, even by SIGKILL; ``PR_SET_PDEATHSIG`` is the kernel's
own guard on Linux.
"""

from __future__ import annotations

import os
import signal


def proc_table() -> dict:
    """pid -> (ppid, sid) for every process we can see (Linux /proc); {} elsewhere."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open(f"/proc/{n}/stat", "rb") as fh:
                data = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        rest = data[data.rfind(")") + 2:].split()  # after "pid (comm) "
        try:
            out[int(n)] = (int(rest[1]), int(rest[3]))  # state ppid pgrp session
        except (IndexError, ValueError):
            continue
    return out


def kill_tree(root: int, sig: int = signal.SIGKILL, spare: int | None = None) -> list:
    """Send ``sig`` to ``root``'s whole session and to every descendant of ``root`` (a process the program
    started in a session of its own too). Descendants are found BEFORE anything is killed: once their parent
    is gone they are re-parented and could not be found any more. Returns the pids signalled."""
    table = proc_table()
    victims = {p for p, (_pp, sid) in table.items() if sid == root}
    victims.add(root)
    grew = True
    while grew:
        grew = False
        for p, (pp, _sid) in table.items():
            if pp in victims and p not in victims:
                victims.add(p)
                grew = True
    victims.discard(spare)
    for p in sorted(victims, key=lambda p: p != root):  # the program itself first: it stops spawning
        try:
            os.kill(p, sig)
        except OSError:
            pass
    if spare != root:
        try:
            os.killpg(root, sig)
        except OSError:
            pass
    return sorted(victims)


def start_watchdog(fd: int, child_pid: int) -> None:
    """Fork a tiny process that waits for EOF on the watchdog pipe (xlalint holds the other end). EOF means
    xlalint is gone, even by SIGKILL: the watchdog kills the program's whole session, itself last.
    Forked before torch or any thread exists, it runs no Python code of the program's."""
    pid = os.fork()
    if pid:
        os.close(fd)
        return
    try:
        try:
            os.setpgid(0, 0)  # its own group: a killpg of the program's group does not take it early
        except OSError:
            pass
        while True:
            try:
                if not os.read(fd, 64):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        kill_tree(child_pid, spare=os.getpid())
    finally:
        os._exit(0)


def set_parent_death_signal() -> None:
    """PR_SET_PDEATHSIG: the kernel kills this process when xlalint dies (Linux; a no-op elsewhere)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass
