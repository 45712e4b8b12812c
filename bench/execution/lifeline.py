"""Processes that end with bench: the local pool's fork server and warm workers.

A worker that outlived `bench` (SIGKILL, the out-of-memory killer, a closed terminal) would go on running
the runs already queued to it and then idle, holding ~880 MB, for as long as the machine is up. Two
independent guards end it instead: the kernel's parent-death signal (Linux; `die_with_parent`), and a
watchdog thread that polls bench's pid (`watch`), which also covers other systems and a parent that
died before the signal was armed.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_S = 0.5  # how often a worker checks that bench is still there


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when the thread that started it ends (Linux only: elsewhere
    `watch` does it, seconds later)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl (another libc, a sandbox): the watchdog remains
        pass


def identity(pid: int) -> str | None:
    """A token that changes when `pid` ends (its start time, so that a reused pid is not mistaken for
    it), or None once it has ended; a zombie, which nobody has reaped yet, has ended."""
    if not os.path.exists("/proc/self/stat"):  # not Linux: whether the pid exists at all
        return _exists(pid)
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _exists(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # someone else's process: it exists
        pass
    return "alive"


def watch(parent: int) -> None:
    """End this process (at once, as a kill would) when `parent` ends; checks every WATCH_S seconds
    from a daemon thread."""
    born = identity(parent)

    def loop() -> None:
        while born is not None and identity(parent) == born:
            time.sleep(WATCH_S)
        os._exit(1)

    threading.Thread(target=loop, name="bench-lifeline", daemon=True).start()
