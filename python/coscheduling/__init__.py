"""coscheduling: a coscheduling simulator for clusters of parallel jobs.

The simulation core is written in Rust (``coscheduling._core``); this package
adds the Python API, result files with provenance, and the ``cosched`` command.

>>> import coscheduling
>>> df = coscheduling.simulate("trace.swf.gz", policy="easy")   # doctest: +SKIP
>>> df.attrs["summary"]["mean_bounded_slowdown"]                 # doctest: +SKIP
"""

from ._core import __version__
from .api import Result, policies, run, simulate, slice_trace, trace_info

__all__ = ["Result", "__version__", "policies", "run", "simulate", "slice_trace", "trace_info"]
