"""Worker processes that die with their parent.

A local pool (``cosched reproduce -j N``, ``cosched sweep -j N``) must not leave workers
behind when its parent is killed (SIGTERM, SIGKILL): orphans would keep running, write runs
nobody gathers and hold the terminal's pipes. Every worker calls :func:`die_with_parent` as
its pool initializer: on Linux the kernel sends it SIGKILL when the parent dies
(``prctl(PR_SET_PDEATHSIG)``); elsewhere, and as a second line, a daemon thread checks every
half second that the parent is still the one that started it. The multiprocessing resource
tracker exits by itself once the parent and every worker have closed its pipe.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1
#: Seconds between two checks of the watchdog thread.
WATCHDOG_PERIOD_S = 0.5


def _watch(parent: int) -> None:
    ev = threading.Event()
    while not ev.wait(WATCHDOG_PERIOD_S):
        if os.getppid() != parent:
            os._exit(1)


def die_with_parent(parent: int) -> None:
    """Pool initializer: end this process when ``parent`` (the pool's owner) dies."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="cosched-parent-watchdog", daemon=True).start()
