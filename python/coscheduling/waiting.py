"""Waiting for a condition on real processes: ``wait_for`` polls a predicate until it holds or a deadline passes.

Used wherever the package or its tests watch processes they started (a job leaving ``squeue``, an agent printing
its counters, a socket appearing). The deadline is checked so that a process kept off the CPU past it (a loaded
machine) still sees a condition that holds by then: the last call of the predicate starts after the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["WaitTimeout", "wait_for"]


class WaitTimeout(RuntimeError):
    """A condition did not hold by its deadline; the message names what was awaited and the last value."""


def wait_for(pred: Callable[[], T], timeout: float, what: str | Callable[[], str], interval: float = 0.05) -> T:
    """Polls ``pred`` every ``interval`` seconds until it returns a true value, and returns that value.

    The deadline is ``timeout`` seconds (``time.monotonic``) from the call, and the last call of ``pred``
    starts after it. Otherwise raises ``WaitTimeout("timed out after TIMEOUT s waiting for WHAT (last value:
    ...)")``; ``what`` may be a function, called only then, to describe the state (e.g. the records read so
    far). A predicate that should stop the wait early (the watched process exited) returns a true value for
    that case too, and the caller tells the two apart."""
    deadline = time.monotonic() + timeout
    while True:
        expired = time.monotonic() >= deadline
        if value := pred():
            return value
        if expired:
            detail = what() if callable(what) else what
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {detail} (last value: {value!r:.2000})")
        time.sleep(interval)
