"""Cluster policies written in Python.

A run names one as ``python:module:Class`` or ``python:module:Class[key=value,...]`` (in
``coscheduling.run(policy=...)``, ``cosched simulate --policy`` or a configuration's
``scheduler.policy``). The class is imported, instantiated with the parameters as keyword
arguments (values parsed as Python literals, else kept as strings), and called by the
engine once per batch of events of a simulated instant, exactly like a Rust policy
(docs/architecture.md, "Policies decide, the engine acts").

The protocol (:class:`ClusterPolicy`)::

    on_events(now_s, events, free_procs, total_procs) -> iterable of decisions

``events`` is a list of tuples, in delivery order:

- ``("submitted", job, procs, estimate_s, submit_s)``: a job arrived and waits in your queue;
- ``("completed", job)`` / ``("killed", job)``: a running job released its processors;
- ``("timer",)``: a wake-up you asked for fired.

``free_procs`` counts the processors free before this call's decisions. Decisions:

- ``("start", job)``: start a queued job now (placed by the run's placement rule);
- ``("start_on", job, [proc, ...])``: start it on exactly these processors;
- ``("reject", job)``: refuse it;
- ``("wake_at", t_s)``: deliver a ``("timer",)`` event at ``t_s`` (not before now).

In a process-level configuration (``fidelity = "process"``) a fresh object is built for each run
and hosted as the admission at MPL 1: ``procs``, ``free_procs`` and ``total_procs`` count nodes,
and the estimates follow the configuration's ``workload.estimates`` (``"requested"``: the class's requested
walltimes, ``easy``'s ``estimates=request``; ``"exact"``: each job's dedicated runtime; docs/formats/policies.md).

The engine validates every decision; an invalid one, or an exception raised by the policy
(in ``on_events`` or while the returned decisions are iterated), stops the run with a
:class:`PolicyError` naming the policy, the instant, the events and the exception with the
file and line that raised it (``cosched simulate``: exit code 2). An optional ``dump() -> str``
describes the state for the engine's stall report (an exception it raises is described there
instead, with its file and line). Examples: :mod:`coscheduling.pypolicies`.
"""

from __future__ import annotations

import ast
import importlib
import re
import traceback
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

__all__ = ["ClusterPolicy", "Event", "Decision", "PolicyError", "load", "is_python_policy"]

Event = tuple[Any, ...]
Decision = tuple[Any, ...]

_NAME = re.compile(r"^python:(?P<module>[A-Za-z_][\w.]*):(?P<cls>[A-Za-z_]\w*)$")


class PolicyError(RuntimeError):
    """A policy written in Python failed during a run: it raised (the exception is the ``__cause__``; the
    message names its file and line) or returned a malformed decision. The user's code is at fault, not the
    engine: the command line reports it as bad input (exit code 2)."""


@runtime_checkable
class ClusterPolicy(Protocol):
    def on_events(self, now_s: float, events: list[Event], free_procs: int, total_procs: int
                  ) -> Iterable[Decision]: ...


def is_python_policy(name: str) -> bool:
    return name.strip().startswith("python:")


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _raised(e: BaseException) -> str:
    """``Type: message (FILE:LINE)``: an exception raised by the user's code, with the line that raised it."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def load(name: str) -> ClusterPolicy:
    """Builds the policy object a ``python:module:Class[key=value,...]`` name refers to."""
    from . import _core

    spec, items = _core.parse_spec(name)  # ValueError naming the string, position and reason
    m = _NAME.match(spec)
    if not m:
        raise ValueError(f"policy {name!r}: expected python:module:Class or python:module:Class[key=value,...]")
    params: dict[str, Any] = {k: _value(v) for k, v in items}
    try:
        module = importlib.import_module(m["module"])
    except ImportError as e:
        raise ValueError(f"policy {name!r}: cannot import module {m['module']!r}: {e}") from None
    except Exception as e:  # the module's own code raised while it was imported
        raise ValueError(f"policy {name!r}: importing module {m['module']!r} raised {_raised(e)}") from None
    cls = getattr(module, m["cls"], None)
    if cls is None:
        raise ValueError(f"policy {name!r}: module {m['module']!r} has no {m['cls']!r}")
    try:
        obj = cls(**params)
    except TypeError as e:
        raise ValueError(f"policy {name!r}: bad parameters: {e}") from None
    except Exception as e:  # the constructor raised
        raise ValueError(f"policy {name!r}: {m['cls']}({', '.join(f'{k}={v!r}' for k, v in params.items())}) "
                         f"raised {_raised(e)}") from None
    if not isinstance(obj, ClusterPolicy):
        raise ValueError(f"policy {name!r}: {m['cls']} has no on_events(now_s, events, free_procs, total_procs)")
    return obj
