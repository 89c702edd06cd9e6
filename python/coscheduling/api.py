"""The Python API: run a simulation and get the job table and summary.

>>> import coscheduling
>>> df = coscheduling.simulate("trace.swf.gz", policy="easy")    # doctest: +SKIP
>>> df.attrs["summary"]["mean_wait_s"]                            # doctest: +SKIP

A run takes its jobs from exactly one of: an SWF trace (``trace``), a pandas
DataFrame (``jobs``, with a ``platform``), or a run configuration file
(``config``, TOML or JSON, whose options then come from the file).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _core, pypolicy
from .output import canonical_json, provenance, sha256_text, write_outputs

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["Result", "run", "simulate", "policies", "trace_info", "slice_trace", "JOB_COLUMNS"]

#: Columns of the job table, in order (see docs/formats/jobs.md).
JOB_COLUMNS = (
    "job_id",
    "submit_s",
    "start_s",
    "end_s",
    "wait_s",
    "execution_s",
    "response_s",
    "slowdown",
    "bounded_slowdown",
    "procs",
    "nodes",
    "runtime_s",
    "estimate_s",
    "requested_s",
    "status",
    "energy_j",
    "node_list",
    "gang_row",
)

#: Columns of a process-level timeline, in order (see docs/formats/timeline.md).
TIMELINE_COLUMNS = ("node", "cpu", "job", "rank", "pid", "start_s", "end_s", "kind")

#: Columns a ``jobs`` DataFrame may have; the first three are required.
INPUT_COLUMNS = ("submit_s", "runtime_s", "procs", "requested_s", "job_id")

_DEFAULTS: dict[str, Any] = {
    "policy": "easy",
    "platform": None,
    "estimates": "requested",
    "overrun": "extend",
    "placement": "packing",
    "event_order": "per-instant",
    "seed": 0,
    "bsld_threshold_s": 10.0,
    "machine_size": None,
    "machine_size_from_nodes": False,
    "max_jobs": None,
}

PathLike = str | os.PathLike[str]


@dataclass
class Result:
    """One finished run."""

    #: The job table as a pyarrow Table, one row per job in submit order (columns: ``JOB_COLUMNS``;
    #: NaN values are null). This is what :meth:`write` writes.
    table: pa.Table
    #: The summary (the summary.json keys without ``provenance``).
    summary: dict[str, Any]
    #: Warnings produced while building the workload.
    warnings: list[str] = field(default_factory=list)
    #: Wall-clock seconds per phase (parse_s, simulate_s, metrics_s); never written to files.
    timings: dict[str, float] = field(default_factory=dict)
    #: The platform the run used.
    platform: dict[str, Any] = field(default_factory=dict)
    #: The ``provenance`` object of summary.json.
    provenance: dict[str, Any] = field(default_factory=dict)
    #: The per-node timeline of a process-level run asked for with ``timeline=True``
    #: (columns: ``TIMELINE_COLUMNS``; docs/formats/timeline.md), else None.
    timeline: pd.DataFrame | None = None
    #: The core's result, which writes jobs.csv from its own table.
    core: Any = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def jobs(self) -> pd.DataFrame:
        """The job table as a pandas DataFrame (int64, float64 with NaN, object strings), made on first use."""
        return jobs_frame(self.table)

    def write(self, out_dir: PathLike) -> list[Path]:
        """Writes ``jobs.csv``, ``jobs.parquet``, ``summary.json`` (and ``timeline.parquet`` if
        recorded) into ``out_dir`` as one all-or-nothing set, replacing earlier result files there.
        The job table written is :attr:`table` (edits of the :attr:`jobs` DataFrame are not written)."""
        csv = self.core.write_jobs_csv if self.core is not None else None
        return write_outputs(out_dir, self.table, self.summary, self.provenance, self.timeline, csv)


def arrow_table(columns: Sequence[tuple[str, str, bytes, bytes | None, bytes | None]]) -> pa.Table:
    """A pyarrow Table from the core's column buffers (``RunResult.jobs_arrow``), without copying them."""
    import pyarrow as pa

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    arrays, names = [], []
    for name, kind, data, validity, offsets in columns:
        valid = pa.py_buffer(validity) if validity is not None else None
        if offsets is not None:
            n = len(offsets) // 4 - 1
            bufs = [valid, pa.py_buffer(offsets), pa.py_buffer(data)]
        else:
            n = len(data) // 8
            bufs = [valid, pa.py_buffer(data)]
        arrays.append(pa.Array.from_buffers(types[kind], n, bufs))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def jobs_frame(table: pa.Table) -> pd.DataFrame:
    """The job table as a DataFrame with fixed dtypes (int64, float64 with NaN for null, object strings)."""
    from .output import frame_of

    return frame_of(table)


def _float_column(df: pd.DataFrame, name: str) -> list[float]:
    import numpy as np

    col = df[name]
    try:
        return np.asarray(col, dtype=np.float64).tolist()
    except (TypeError, ValueError):
        for i, v in enumerate(col):
            try:
                float(v)
            except (TypeError, ValueError):
                raise ValueError(f"jobs row {i}: column {name}: not a number: {v!r}") from None
        raise


def _int_column(df: pd.DataFrame, name: str) -> list[int]:
    import numpy as np

    col = df[name]
    if col.dtype.kind in "iu" and not col.isna().any():
        return [int(v) for v in col.tolist()]
    values = _float_column(df, name)
    for i, v in enumerate(values):
        if not (np.isfinite(v) and float(v).is_integer()):
            raise ValueError(f"jobs row {i}: column {name}: must be an integer, got {v!r}")
    return [int(v) for v in values]


def _jobs_args(jobs: pd.DataFrame) -> dict[str, Any]:
    import pandas as pd

    if not isinstance(jobs, pd.DataFrame):
        raise ValueError(f"jobs: expected a pandas DataFrame, got {type(jobs).__name__}")
    cols = [str(c) for c in jobs.columns]
    missing = [c for c in INPUT_COLUMNS[:3] if c not in cols]
    unknown = [c for c in cols if c not in INPUT_COLUMNS]
    if missing or unknown:
        what = []
        if missing:
            what.append(f"missing column(s) {', '.join(missing)}")
        if unknown:
            what.append(f"unknown column(s) {', '.join(unknown)}")
        raise ValueError(
            f"jobs: {'; '.join(what)}; columns are submit_s, runtime_s, procs (required), "
            "requested_s, job_id (optional)"
        )
    n = len(jobs)
    return {
        "submit_s": _float_column(jobs, "submit_s"),
        "runtime_s": _float_column(jobs, "runtime_s"),
        "procs": _int_column(jobs, "procs"),
        "requested_s": _float_column(jobs, "requested_s") if "requested_s" in cols else [float("nan")] * n,
        "job_id": _int_column(jobs, "job_id") if "job_id" in cols else None,
    }


def _trace_options(trace: PathLike, o: Mapping[str, Any]) -> dict[str, Any]:
    """The effective options of a trace run, shaped like a run configuration."""
    return {
        "seed": o["seed"],
        "fidelity": "job",
        "workload": {
            "trace": str(trace),
            "jobs": [],
            "max_jobs": o["max_jobs"],
            "estimates": o["estimates"],
            "overrun": o["overrun"],
            "machine_size_from_nodes": o["machine_size_from_nodes"],
            "machine_size": o["machine_size"],
        },
        "platform": dict(o["platform"]) if o["platform"] is not None else None,
        "node_platform": None,
        "scheduler": {
            "policy": o["policy"],
            "placement": o["placement"],
            # Written only when not the default, as in a configuration's own dump.
            **({"event_order": o["event_order"]} if o["event_order"] != "per-instant" else {}),
            "node_policy": "nls",
            "mpl": 1,
            "memory_aware": False,
        },
        "metrics": {"bounded_slowdown_threshold_s": o["bsld_threshold_s"]},
    }


def run(
    trace: PathLike | None = None,
    *,
    jobs: pd.DataFrame | None = None,
    config: PathLike | None = None,
    policy: str = "easy",
    platform: Mapping[str, Any] | None = None,
    estimates: str = "requested",
    overrun: str = "extend",
    placement: str = "packing",
    seed: int = 0,
    bsld_threshold_s: float = 10.0,
    machine_size: int | None = None,
    machine_size_from_nodes: bool = False,
    max_jobs: int | None = None,
    command_line: str | None = None,
    timeline: bool = False,
    event_order: str = "per-instant",
) -> Result:
    """Runs one simulation and returns its :class:`Result`.

    Exactly one of ``trace`` (an SWF file, plain or gzip), ``jobs`` (a DataFrame
    with columns submit_s, runtime_s, procs and optionally requested_s, job_id;
    needs ``platform``) or ``config`` (a run configuration file) gives the jobs.

    - ``policy``: a registered policy, e.g. ``"fcfs"``, ``"easy"``, ``"conservative"``
      (see :func:`policies`), optionally with parameters ``"name[key=value]"``, or a policy
      written in Python, ``"python:module:Class[key=value]"`` (see :mod:`coscheduling.pypolicy`);
    - ``platform``: ``{"nodes": N, "procs_per_node": C, "idle_watts": B, "busy_watts": W}``
      (only ``nodes`` is required); for traces it overrides the header's machine size;
    - ``estimates``: ``"requested"`` (the user's requested time) or ``"exact"``;
    - ``overrun``: ``"extend"`` (a job outliving its request runs on) or ``"kill"``;
    - ``placement``: ``"packing"`` or ``"random"``;
    - ``event_order`` (traces): ``"per-instant"`` (one policy call per instant) or
      ``"per-event"`` (one call per event, submissions before completions);
    - ``machine_size`` / ``machine_size_from_nodes`` / ``max_jobs``: trace options;
    - ``command_line``: recorded in the provenance (default: ``sys.argv``);
    - ``timeline``: record the per-node timeline of a process-level configuration
      (``Result.timeline``); only with ``config=`` at process fidelity.

    A job needing more processors than the machine has is rejected at submission (status
    ``rejected``, counted in ``summary["jobs_rejected"]``) and the run warns of it in
    :attr:`Result.warnings`, as ``cosched simulate`` does for a trace (docs/formats/swf.md, rule 6).

    Bad input raises ``ValueError`` whose message names the file, line and field;
    an engine failure raises ``RuntimeError`` (:class:`coscheduling.pypolicy.PolicyError` when a
    policy written in Python failed).
    """
    if not isinstance(policy, str):
        raise ValueError(f"policy: expected a policy name such as 'easy' (see policies()), got {policy!r}")
    if timeline and config is None:
        raise ValueError("timeline: only process-level configurations (config=) have one")
    sources = [name for name, v in (("trace", trace), ("jobs", jobs), ("config", config)) if v is not None]
    if len(sources) != 1:
        raise ValueError(
            "give exactly one of trace=, jobs= or config=" + (f" (got {', '.join(sources)})" if sources else "")
        )
    opts: dict[str, Any] = {
        "policy": policy,
        "platform": dict(platform) if platform is not None else None,
        "estimates": estimates,
        "overrun": overrun,
        "placement": placement,
        "event_order": event_order,
        "seed": seed,
        "bsld_threshold_s": bsld_threshold_s,
        "machine_size": machine_size,
        "machine_size_from_nodes": machine_size_from_nodes,
        "max_jobs": max_jobs,
    }
    trace_path: PathLike | None = None
    if config is not None:
        changed = [k for k, v in opts.items() if v != _DEFAULTS[k]]
        if changed:
            raise ValueError(
                f"{', '.join(changed)}: these options come from the configuration file {config}; "
                "set them there"
            )
        options = json.loads(_core.load_config(config))
        if timeline and options.get("fidelity") != "process":
            raise ValueError(f"timeline: only process-level configurations have one ({config} is job-level)")
        cfg_policy = options["scheduler"]["policy"]
        if not pypolicy.is_python_policy(cfg_policy):
            res = _core.run_config(config, timeline=timeline)
        elif options.get("fidelity") == "process":
            pypolicy.load(cfg_policy)  # a bad name or parameter is a ValueError before the run
            res = _core.run_config(config, timeline=timeline, policy_factory=lambda: pypolicy.load(cfg_policy))
        else:
            res = _core.run_config(config, timeline=timeline, policy_object=pypolicy.load(cfg_policy))
        trace_path = options["workload"]["trace"]
        sched = options["scheduler"]
        process = options.get("fidelity") == "process"
        policy_name = f"{sched['policy']}+{sched['node_policy']}" if process else sched["policy"]
        seed_used = options["seed"]
    elif trace is not None:
        options = _trace_options(trace, opts)
        trace_path = trace
        policy_name, seed_used = policy, seed
        res = _core.run_trace(
            trace,
            policy,
            estimates=estimates,
            overrun=overrun,
            machine_size=machine_size,
            machine_size_from_nodes=machine_size_from_nodes,
            max_jobs=max_jobs,
            platform=opts["platform"],
            placement=placement,
            seed=seed,
            bsld_threshold_s=bsld_threshold_s,
            policy_object=pypolicy.load(policy) if pypolicy.is_python_policy(policy) else None,
            event_order=event_order,
        )
    else:
        if platform is None:
            raise ValueError("platform: required with jobs= (e.g. platform={'nodes': 16})")
        for k in ("machine_size", "machine_size_from_nodes", "max_jobs", "event_order"):
            if opts[k] != _DEFAULTS[k]:
                raise ValueError(f"{k}: applies to traces only, not to jobs=")
        assert jobs is not None
        args = _jobs_args(jobs)
        options = _trace_options("", opts)
        options["workload"] = {
            "jobs_sha256": sha256_text(canonical_json(args)),
            "estimates": estimates,
            "overrun": overrun,
        }
        policy_name, seed_used = policy, seed
        res = _core.run_jobs(
            args["submit_s"],
            args["runtime_s"],
            args["procs"],
            args["requested_s"],
            args["job_id"],
            platform=opts["platform"],
            policy=policy,
            estimates=estimates,
            overrun=overrun,
            placement=placement,
            seed=seed,
            bsld_threshold_s=bsld_threshold_s,
            policy_object=pypolicy.load(policy) if pypolicy.is_python_policy(policy) else None,
        )
    summary = json.loads(res.summary_json())
    plat = json.loads(res.platform_json())
    prov = provenance(
        version=_core.__version__,
        seed=seed_used,
        policy=policy_name,
        options=options,
        trace=trace_path,
        platform=plat,
        command=command_line,
    )
    return Result(
        table=arrow_table(res.jobs_arrow()),
        summary=summary,
        warnings=list(res.warnings),
        timings=dict(res.timings()),
        platform=plat,
        provenance=prov,
        timeline=timeline_frame(res.timeline_columns()) if timeline else None,
        core=res,
    )


def timeline_frame(columns: Mapping[str, list[Any]]) -> pd.DataFrame:
    """The timeline as a DataFrame with fixed dtypes (int64, float64, str)."""
    import numpy as np
    import pandas as pd

    data: dict[str, Any] = {}
    for name in TIMELINE_COLUMNS:
        if name == "kind":
            data[name] = pd.Series(columns[name], dtype=object)
        elif name.endswith("_s"):
            data[name] = np.asarray(columns[name], dtype=np.float64)
        else:
            data[name] = np.asarray(columns[name], dtype=np.int64)
    return pd.DataFrame(data)


def simulate(
    trace: PathLike | None = None,
    *,
    jobs: pd.DataFrame | None = None,
    policy: str = "easy",
    platform: Mapping[str, Any] | None = None,
    estimates: str = "requested",
    overrun: str = "extend",
    placement: str = "packing",
    seed: int = 0,
    bsld_threshold_s: float = 10.0,
    machine_size: int | None = None,
    machine_size_from_nodes: bool = False,
    max_jobs: int | None = None,
) -> pd.DataFrame:
    """Runs one simulation (see :func:`run`) and returns its job table.

    The summary is in ``df.attrs["summary"]`` and the warnings in ``df.attrs["warnings"]``.
    """
    r = run(
        trace,
        jobs=jobs,
        policy=policy,
        platform=platform,
        estimates=estimates,
        overrun=overrun,
        placement=placement,
        seed=seed,
        bsld_threshold_s=bsld_threshold_s,
        machine_size=machine_size,
        machine_size_from_nodes=machine_size_from_nodes,
        max_jobs=max_jobs,
    )
    df = r.jobs
    df.attrs["summary"] = r.summary
    df.attrs["warnings"] = r.warnings
    return df


def policies() -> list[dict[str, Any]]:
    """Every registered policy: name, level, summary and params (name, kind, default, doc)."""
    return json.loads(_core.policies())


def trace_info(
    path: PathLike, *, machine_size_from_nodes: bool = False, machine_size: int | None = None
) -> dict[str, Any]:
    """Statistics of a trace (jobs, dropped records, machine size, span, offered load, ...): SWF (plain or
    gzip), or Parquet/JSON as written by ``cosched trace convert``."""
    from . import traces

    return traces.info(path, machine_size_from_nodes=machine_size_from_nodes, machine_size=machine_size)


def slice_trace(src: PathLike, dst: PathLike, first: int) -> None:
    """Writes the first ``first`` records of trace ``src`` to ``dst`` (gzip if ``.gz``), header kept; any of
    SWF, Parquet, JSON on either side."""
    from . import traces

    traces.first_records(src, dst, first)
