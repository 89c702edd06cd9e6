"""Sweeps: a grid of run configurations, run in local processes or on a Dask cluster.

A sweep spec (TOML or JSON; docs/formats/sweep.md) holds a ``base`` run configuration
(docs/formats/config.md), a ``grid`` of dotted configuration paths to lists of values
(the cartesian product is swept), and optionally a ``mix`` table that generates the
``workload.jobs`` of process-level runs from the seed 000 job mix (its keys can be swept
as ``mix.<key>``). Every run is a configuration written to
``OUT/runs/<config hash>/config.json``, with its results beside it; a run whose folder
already holds results is not run again, so an interrupted sweep resumes. The results
gather into ``OUT/results.parquet`` (one row per run: the swept values, then the summary).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from . import _core
from .experiments.runner import Gathered, RunSpec, run_specs
from .output import built_here, canonical_json, git_commit, sha256_file, sha256_text, write_atomic

__all__ = ["load_spec", "expand", "run_sweep"]

_SPEC_KEYS = {"name", "base", "grid", "mix"}
_MIX_KEYS = {"n": int, "apps": list, "classes": str, "mean_interarrival_s": float, "job_memory_mb": float}


def load_spec(path: str | Path) -> dict[str, Any]:
    """Reads a sweep spec; errors name the file and the field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{p}: cannot read sweep spec: {e.strerror or e}") from None
    try:
        spec = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'TOML'}: {e}") from None
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise ValueError(f"{p}: unknown field(s) {sorted(unknown)}; valid: {sorted(_SPEC_KEYS)}")
    if not isinstance(spec.get("base"), dict):
        raise ValueError(f"{p}: field base: a run configuration table is required")
    grid = spec.get("grid", {})
    if not isinstance(grid, dict):
        raise ValueError(f"{p}: field grid: must be a table of dotted paths to lists")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"{p}: field grid.{k}: must be a non-empty list of values")
    mix = spec.get("mix")
    if mix is not None:
        if not isinstance(mix, dict):
            raise ValueError(f"{p}: field mix: must be a table")
        for k in mix:
            if k not in _MIX_KEYS:
                raise ValueError(f"{p}: field mix.{k}: unknown; valid: {sorted(_MIX_KEYS)}")
    # Trace paths are relative to the spec file, like a configuration's.
    trace = spec["base"].get("workload", {}).get("trace")
    if trace is not None and not Path(trace).is_absolute():
        spec["base"]["workload"]["trace"] = str((p.parent / trace).resolve())
    spec.setdefault("name", p.stem)
    spec["_origin"] = str(p)
    return spec


def _set(cfg: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    d = cfg
    for k in keys[:-1]:
        nxt = d.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise ValueError(f"grid.{dotted}: {k} is not a table in the configuration")
        d = nxt
    d[keys[-1]] = value


def run_key(cfg: Mapping[str, Any], trace_sha256: Callable[[str], str] | None = None) -> str:
    """A run's cache key: the first 16 hex digits of the SHA-256 of the canonical JSON of its configuration,
    the SHA-256 of its trace file (if any), and the version and git commit of cosched. Editing the trace or
    changing the simulator therefore gives new keys, and the old results are not reused."""
    trace = (cfg.get("workload") or {}).get("trace")
    sha = None
    if trace is not None:
        sha = (trace_sha256 or _trace_sha256)(str(trace))
    doc = {"config": cfg, "trace_sha256": sha, "version": _core.__version__, "git_commit": git_commit()}
    return sha256_text(canonical_json(doc))[:16]


def _trace_sha256(path: str) -> str:
    try:
        return sha256_file(path)
    except OSError as e:
        raise ValueError(f"workload.trace: cannot read {path}: {e.strerror or e}") from None


def expand(spec: Mapping[str, Any]) -> list[RunSpec]:
    """The runs of a sweep: one per point of the grid, keyed by :func:`run_key`."""
    grid = spec.get("grid", {})
    shas: dict[str, str] = {}

    def sha(path: str) -> str:
        if path not in shas:
            shas[path] = _trace_sha256(path)
        return shas[path]

    names = list(grid)
    out: list[RunSpec] = []
    seen: set[str] = set()
    for values in itertools.product(*(grid[n] for n in names)):
        point = dict(zip(names, values, strict=True))
        cfg = copy.deepcopy(dict(spec["base"]))
        mix = dict(spec.get("mix") or {})
        for k, v in point.items():
            if k.startswith("mix."):
                if spec.get("mix") is None:
                    raise ValueError(f"grid.{k}: the spec has no mix table")
                mix[k[4:]] = v
            else:
                _set(cfg, k, v)
        if spec.get("mix") is not None:
            missing = {"n", "apps", "classes", "mean_interarrival_s"} - set(mix)
            if missing:
                raise ValueError(f"mix: missing {sorted(missing)}")
            seed = int(cfg.get("seed", 0))
            cfg.setdefault("workload", {})["jobs"] = json.loads(_core.nas_mix(
                int(mix["n"]), list(mix["apps"]), str(mix["classes"]), float(mix["mean_interarrival_s"]),
                float(mix.get("job_memory_mb", 900.0)), seed))
        key = run_key(cfg, sha)
        if key in seen:
            continue
        seen.add(key)
        out.append(RunSpec(key, point, cfg))
    return out


def _dask_execute(client: Any) -> Callable[[list[tuple[str, str, str]], Callable[[], Any]], list[str]]:
    """A batch executor that runs the runs as tasks of a Dask distributed ``client``."""

    def execute(jobs: list[tuple[str, str, str]], advance: Callable[[], Any]) -> list[str]:
        from distributed import as_completed

        from .experiments.runner import _execute

        futures = [client.submit(_execute, *job, pure=False, key=f"cosched-run-{Path(job[1]).name}")
                   for job in jobs]
        done = []
        for fut in as_completed(futures):
            done.append(fut.result())
            advance()
        return done

    return execute


def run_sweep(
    spec: Mapping[str, Any],
    out: str | Path,
    *,
    workers: int = 1,
    client: Any = None,
    command: str = "",
    progress: Callable[[str, int], Any] | None = None,
    advance: Callable[[], Any] | None = None,
) -> tuple[pd.DataFrame, Gathered]:
    """Runs a sweep into ``out`` (locally with ``workers`` processes, or on the Dask ``client``)
    and writes ``results.parquet``; returns the results table and the gathered runs."""
    root = Path(out)
    specs = expand(spec)
    check(specs)  # every configuration, before running anything
    gathered = run_specs(specs, root, workers=workers, command=command, progress=progress, advance=advance,
                         execute=_dask_execute(client) if client is not None else None)
    _check_provenance(root, gathered.executed)
    table = gathered.runs.copy()
    cols = ["run", *[c for c in spec.get("grid", {})]]
    table = table[cols + [c for c in table.columns if c not in cols]]
    write_atomic(root, {"results.parquet": lambda p: table.to_parquet(p, index=False)})
    return table, gathered


def _check_provenance(root: Path, executed: list[str]) -> None:
    """Every run executed now (locally or on Dask workers) must come from this cosched (version and commit):
    the cache key assumes it."""
    for key in executed:
        prov = json.loads((root / "runs" / key / "summary.json").read_text(encoding="utf-8")).get("provenance") or {}
        if not built_here(prov, _core.__version__):
            raise RuntimeError(f"run {key} was executed by cosched {prov.get('version')} (commit "
                               f"{prov.get('git_commit')}), not by this one ({_core.__version__}, commit "
                               f"{git_commit()}): Dask workers need the same coscheduling installed")


def check(specs: list[RunSpec]) -> None:
    """Loads every point's configuration as a run would (the core's checks): the first bad one is a
    ValueError naming the point and the field."""
    for s in specs:
        _core_check(s)


def _core_check(s: RunSpec) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        path.write_text(canonical_json(s.config), encoding="utf-8")
        try:
            _core.load_config(path)
        except ValueError as e:
            point = ", ".join(f"{k}={v!r}" for k, v in s.labels.items())
            # The point's configuration is one line of JSON written here: its line and column mean nothing
            # to the spec's author; the message names the field.
            msg = re.sub(r"^: line \d+, column \d+:", ":", str(e).replace(str(path), ""))
            raise ValueError(f"sweep point ({point}): configuration{msg}") from None
