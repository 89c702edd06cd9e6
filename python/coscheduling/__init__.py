"""coscheduling: a coscheduling simulator for clusters of parallel jobs.

The simulation core is written in Rust (``coscheduling._core``); this package
adds the Python API, result files with provenance, and the ``cosched`` command.

>>> import coscheduling
>>> df = coscheduling.simulate("trace.swf.gz", policy="easy")   # doctest: +SKIP
>>> df.attrs["summary"]["mean_bounded_slowdown"]                 # doctest: +SKIP

The public names are imported on first use (PEP 562), so that importing the package
is cheap and the ``cosched`` command can handle Ctrl-C from its first instant.
"""

from __future__ import annotations

# Not `from typing import TYPE_CHECKING`: importing typing takes tens of milliseconds, a
# window in which Ctrl-C at the start of the `cosched` command printed a traceback (the
# command's own handler, in coscheduling.entry, is reached only after this module ran).
TYPE_CHECKING = False

__all__ = ["Result", "__version__", "policies", "run", "simulate", "slice_trace", "trace_info"]

if TYPE_CHECKING:
    from typing import Any

    from ._core import __version__
    from .api import Result, policies, run, simulate, slice_trace, trace_info


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from ._core import __version__

        return __version__
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'coscheduling' has no attribute {name!r}")
