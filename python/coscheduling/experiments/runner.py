"""Running the runs of an experiment: cached, in parallel processes, with a progress bar.

Every run is a process-level run configuration (docs/formats/config.md) written to
``OUT/runs/<key>/config.json`` and executed by :func:`coscheduling.run`; its result
files (``jobs.csv``, ``jobs.parquet``, ``summary.json``, with provenance) go beside
it. A run whose folder already holds the same configuration and results made by this
cosched build (version and git commit, from the summary's provenance) is not run again,
so an interrupted experiment resumes where it stopped; results of another build run
again. Such a run found in another output folder given as ``reuse`` (e.g. a sibling
experiment's, whose runs it shares) is copied instead of run.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..output import canonical_json, same_build, write_atomic
from ..workers import die_with_parent


@dataclass(frozen=True)
class RunSpec:
    """One simulation of an experiment."""

    #: Unique, path-safe name within the experiment, e.g. ``"packing-hybrid-s0"``.
    key: str
    #: Columns identifying the run in the gathered tables (scheme, placement, seed, ...).
    labels: Mapping[str, Any]
    #: The run configuration (process fidelity).
    config: Mapping[str, Any]


@dataclass
class Gathered:
    """The results of all runs: one row per run and one row per job."""

    runs: pd.DataFrame
    jobs: pd.DataFrame
    #: Runs executed now (the others came from the cache).
    executed: list[str] = field(default_factory=list)


def _execute(config_path: str, out_dir: str, command: str) -> str:
    from ..api import run

    result = run(config=config_path, command_line=command)
    result.write(out_dir)
    return out_dir


def _config_text(cfg: Mapping[str, Any]) -> str:
    return json.dumps(json.loads(canonical_json(cfg)), indent=1, sort_keys=True) + "\n"


def _is_cached(folder: Path, text: str) -> bool:
    """Whether ``folder`` holds this configuration's results, made by this very compiled core."""
    cfg = folder / "config.json"
    summary = folder / "summary.json"
    if not (cfg.is_file() and cfg.read_text(encoding="utf-8") == text and summary.is_file()
            and (folder / "jobs.csv").is_file()):
        return False
    prov = json.loads(summary.read_text(encoding="utf-8")).get("provenance") or {}
    return same_build(prov)


RESULT_FILES = ("summary.json", "jobs.csv", "jobs.parquet")


def run_specs(
    specs: Sequence[RunSpec],
    root: Path,
    *,
    workers: int,
    command: str,
    progress: Callable[[str, int], Any] | None = None,
    advance: Callable[[], Any] | None = None,
    execute: Callable[[list[tuple[str, str, str]], Callable[[], Any]], list[str]] | None = None,
    reuse: Sequence[Path] = (),
) -> Gathered:
    """Runs (or reuses) every spec under ``root/runs`` and gathers the results.

    ``execute``, if given, runs a batch of ``(config path, output folder, command)`` jobs
    elsewhere (e.g. on a Dask cluster), calling its second argument once per finished job.
    A spec cached under ``r/runs/<key>`` for an ``r`` in ``reuse`` is copied, not run.
    """
    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError("experiment has duplicate run keys")
    todo: list[tuple[RunSpec, Path]] = []
    for s in specs:
        folder = root / "runs" / s.key
        text = _config_text(s.config)
        if _is_cached(folder, text):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for stale in RESULT_FILES:
            (folder / stale).unlink(missing_ok=True)
        source = next((r / "runs" / s.key for r in reuse if _is_cached(r / "runs" / s.key, text)), None)
        if source is not None:
            # Results first, the configuration last: a copy cut short is not a cached run.
            for name in RESULT_FILES:
                if (source / name).is_file():
                    shutil.copyfile(source / name, folder / name)
            write_atomic(folder, {"config.json": lambda p, t=text: p.write_text(t, encoding="utf-8")})
            continue
        write_atomic(folder, {"config.json": lambda p, t=text: p.write_text(t, encoding="utf-8")})
        todo.append((s, folder))
    if progress is not None:
        progress("runs", len(specs))
        for _ in range(len(specs) - len(todo)):
            if advance is not None:
                advance()
    executed: list[str] = []
    tick = advance if advance is not None else (lambda: None)
    if todo and execute is not None:
        execute([(str(folder / "config.json"), str(folder), command) for _, folder in todo], tick)
        executed = [s.key for s, _ in todo]
    elif todo:
        if workers <= 1:
            for s, folder in todo:
                _execute(str(folder / "config.json"), str(folder), command)
                executed.append(s.key)
                if advance is not None:
                    advance()
        else:
            ctx = multiprocessing.get_context("spawn")
            with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=die_with_parent,
                                        initargs=(os.getpid(),)) as pool:
                futures = {
                    pool.submit(_execute, str(folder / "config.json"), str(folder), command): s.key
                    for s, folder in todo
                }
                try:
                    for fut in cf.as_completed(futures):
                        fut.result()
                        executed.append(futures[fut])
                        if advance is not None:
                            advance()
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
    return gather(specs, root, executed=sorted(executed))


def gather(specs: Sequence[RunSpec], root: Path, executed: list[str] | None = None) -> Gathered:
    """Reads every run's ``summary.json`` and ``jobs.csv`` into two tables with the run labels."""
    run_rows: list[dict[str, Any]] = []
    job_frames: list[pd.DataFrame] = []
    for s in specs:
        folder = root / "runs" / s.key
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        row: dict[str, Any] = {"run": s.key, **s.labels}
        for k, v in summary.items():
            if k != "provenance" and not isinstance(v, dict | list):
                row[k] = v
        for k, v in (summary.get("process") or {}).items():
            # Lists (a gang run's per-job gangedness estimates) stay one JSON cell.
            row[f"process_{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, list) else v
        # The run's power model (idle B and busy W per node), for energy tables.
        plat = (summary.get("provenance") or {}).get("platform") or {}
        for k in ("idle_watts", "busy_watts"):
            if k in plat:
                row[f"platform_{k}"] = plat[k]
        run_rows.append(row)
        jobs = pd.read_csv(folder / "jobs.csv")
        for k, v in reversed(list({"run": s.key, **s.labels}.items())):
            jobs.insert(0, k, v)
        job_frames.append(jobs)
    runs = pd.DataFrame(run_rows)
    jobs = pd.concat(job_frames, ignore_index=True) if job_frames else pd.DataFrame()
    return Gathered(runs=runs, jobs=jobs, executed=executed or [])


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
