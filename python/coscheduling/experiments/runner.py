"""Running the runs of an experiment: cached, in parallel processes, with a progress bar.

Every run is a process-level run configuration (docs/formats/config.md) written to
``OUT/runs/<key>/config.json`` and executed by :func:`coscheduling.run`; its result
files (``jobs.csv``, ``jobs.parquet``, ``summary.json``, with provenance) go beside
it. A run whose folder already holds the same configuration and results made by this
cosched build (version and git commit, from the summary's provenance) is not run again,
so an interrupted experiment resumes where it stopped; results of another build run
again. Such a run found in another output folder given as ``reuse`` (e.g. a sibling
experiment's, whose runs it shares) is copied instead of run.

A run whose spec says ``stop_is_outcome`` and that the engine stops at its time or
event limit (``limits.max_sim_time_s``, ``limits.max_events``) is a result, not a
failure: ``OUT/runs/<key>/stopped.json`` records which limit stopped it, when and with
how many jobs unfinished (its error message included), and the gathered run table
has a row for it with ``stopped`` true and no metrics. Any other failure, and a limit
stop of any other spec, stops the experiment as before.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
import re
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
    #: A stop at the run's time or event limit is recorded as the run's outcome
    #: (``stopped.json``) instead of failing the experiment.
    stop_is_outcome: bool = False


@dataclass
class Gathered:
    """The results of all runs: one row per run and one row per job."""

    runs: pd.DataFrame
    jobs: pd.DataFrame
    #: Runs executed now (the others came from the cache).
    executed: list[str] = field(default_factory=list)


_EVENT_LIMIT = re.compile(r"event limit (\d+) reached at t=([0-9.]+)s with (\d+) job\(s\) unfinished")
_TIME_LIMIT = re.compile(r"time limit ([0-9.]+)s reached with (\d+) job\(s\) unfinished")


def limit_stop(message: str) -> dict[str, Any] | None:
    """What a run error says about a stop at the run's limit: ``stopped_by`` (``"time limit"`` or
    ``"event limit"``), the ``limit`` (seconds or events), the simulated time reached ``sim_time_s``
    and ``jobs_unfinished``; ``None`` for any other error."""
    if m := _EVENT_LIMIT.search(message):
        return {"stopped_by": "event limit", "limit": int(m.group(1)), "sim_time_s": float(m.group(2)),
                "jobs_unfinished": int(m.group(3))}
    if m := _TIME_LIMIT.search(message):
        return {"stopped_by": "time limit", "limit": float(m.group(1)), "sim_time_s": float(m.group(1)),
                "jobs_unfinished": int(m.group(2))}
    return None


def response_lower_bound(submits: Sequence[float], reached_s: float, unfinished: int) -> float:
    """A lower bound of the mean response time (s) of a run stopped at ``reached_s`` with ``unfinished`` of
    its jobs (submitted at ``submits``) unfinished: each unfinished job's response is at least ``reached_s``
    less its submission, and the bound takes the latest submissions as the unfinished ones (a finished job
    counts 0)."""
    if not submits or unfinished <= 0:
        return 0.0
    late = sorted(submits)[-unfinished:]
    return sum(max(reached_s - t, 0.0) for t in late) / len(submits)


def _build() -> dict[str, Any]:
    from .. import _core
    from ..output import build_sha256, git_commit

    return {"build_sha256": build_sha256(), "git_commit": git_commit(), "version": _core.__version__}


def _execute(config_path: str, out_dir: str, command: str, stop_is_outcome: bool = False) -> str:
    from ..api import run

    try:
        result = run(config=config_path, command_line=command)
    except RuntimeError as e:
        stop = limit_stop(str(e)) if stop_is_outcome else None
        if stop is None:
            raise
        cfg = json.loads(Path(config_path).read_text(encoding="utf-8"))
        submits = sorted(float(j.get("submit_s", 0.0)) for j in (cfg.get("workload") or {}).get("jobs") or [])
        record = {"format_version": 1, **stop, "jobs_total": len(submits),
                  "response_lower_bound_s": response_lower_bound(submits, stop["sim_time_s"],
                                                                 stop["jobs_unfinished"]),
                  "error": str(e).splitlines()[0], "provenance": _build()}
        text = json.dumps(record, indent=1, sort_keys=True) + "\n"
        write_atomic(out_dir, {STOPPED_FILE: lambda p: p.write_text(text, encoding="utf-8")},
                     replaces=RESULT_FILES)
        return out_dir
    result.write(out_dir)
    return out_dir


def _config_text(cfg: Mapping[str, Any]) -> str:
    return json.dumps(json.loads(canonical_json(cfg)), indent=1, sort_keys=True) + "\n"


def _is_cached(folder: Path, text: str, stop_is_outcome: bool = False) -> bool:
    """Whether ``folder`` holds this configuration's results (or, if ``stop_is_outcome``, its record
    of a stop at its limit), made by this very compiled core."""
    cfg = folder / "config.json"
    if not (cfg.is_file() and cfg.read_text(encoding="utf-8") == text):
        return False
    summary, stopped = folder / "summary.json", folder / STOPPED_FILE
    if summary.is_file() and (folder / "jobs.csv").is_file():
        prov = json.loads(summary.read_text(encoding="utf-8")).get("provenance") or {}
    elif stop_is_outcome and stopped.is_file():
        prov = json.loads(stopped.read_text(encoding="utf-8")).get("provenance") or {}
    else:
        return False
    return same_build(prov)


RESULT_FILES = ("summary.json", "jobs.csv", "jobs.parquet")
STOPPED_FILE = "stopped.json"


def run_specs(
    specs: Sequence[RunSpec],
    root: Path,
    *,
    workers: int,
    command: str,
    progress: Callable[[str, int], Any] | None = None,
    advance: Callable[[], Any] | None = None,
    execute: Callable[[list[tuple[str, str, str, bool]], Callable[[], Any]], list[str]] | None = None,
    reuse: Sequence[Path] = (),
) -> Gathered:
    """Runs (or reuses) every spec under ``root/runs`` and gathers the results.

    ``execute``, if given, runs a batch of ``(config path, output folder, command,
    stop_is_outcome)`` jobs (the arguments of :func:`_execute`)
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
        if _is_cached(folder, text, s.stop_is_outcome):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for stale in (*RESULT_FILES, STOPPED_FILE):
            (folder / stale).unlink(missing_ok=True)
        source = next((r / "runs" / s.key for r in reuse
                       if _is_cached(r / "runs" / s.key, text, s.stop_is_outcome)), None)
        if source is not None:
            # Results first, the configuration last: a copy cut short is not a cached run.
            for name in (*RESULT_FILES, STOPPED_FILE):
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
        execute([(str(folder / "config.json"), str(folder), command, s.stop_is_outcome) for s, folder in todo],
                tick)
        executed = [s.key for s, _ in todo]
    elif todo:
        if workers <= 1:
            for s, folder in todo:
                _execute(str(folder / "config.json"), str(folder), command, s.stop_is_outcome)
                executed.append(s.key)
                if advance is not None:
                    advance()
        else:
            ctx = multiprocessing.get_context("spawn")
            with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=die_with_parent,
                                        initargs=(os.getpid(),)) as pool:
                futures = {
                    pool.submit(_execute, str(folder / "config.json"), str(folder), command,
                                s.stop_is_outcome): s.key
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
        if s.stop_is_outcome and not (folder / "summary.json").is_file() and (folder / STOPPED_FILE).is_file():
            stop = json.loads((folder / STOPPED_FILE).read_text(encoding="utf-8"))
            run_rows.append({"run": s.key, **s.labels, "stopped": True,
                             **{k: stop[k] for k in ("stopped_by", "limit", "sim_time_s", "jobs_unfinished",
                                                     "jobs_total", "response_lower_bound_s")}})
            continue
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        row: dict[str, Any] = {"run": s.key, **s.labels, **({"stopped": False} if s.stop_is_outcome else {})}
        for k, v in summary.items():
            if k != "provenance" and not isinstance(v, dict | list):
                row[k] = v
        process = dict(summary.get("process") or {})
        for name, entry in (process.pop("measures", None) or {}).items():
            for k, v in entry.items():
                # Lists (a gang run's per-job gangedness estimates) stay one JSON cell.
                row[f"measure_{name}_{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, list) else v
        for k, v in process.items():
            row[f"process_{k}"] = v
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
