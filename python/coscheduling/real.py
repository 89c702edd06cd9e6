"""Real execution: ``cosched run CONFIG`` runs a process-level configuration on this machine.

The jobs are real MPI programs (the application presets as programs of the simulator's IR,
run by ``cosched-ir-run``, or a user's binary), launched with ``mpiexec`` under the shim
``libcosched``; the node policies are hosted by the node agent (Rust, ``cosched-real``), the
admission and gang rows by the controller (docs/real.md). The outputs have the simulator's
shape: ``jobs.csv`` / ``jobs.parquet`` / ``summary.json`` / ``timeline.parquet``.

The configuration is the simulator's (docs/formats/config.md) plus a ``[real]`` table:

``mpi``             ``"mpich"`` (``mpiexec.mpich``) or ``"openmpi"`` (``mpirun.openmpi``); required
``nodes``           virtual nodes (default: the machine's CPUs / ``cpus_per_node``)
``cpus_per_node``   CPUs of each virtual node, a cpuset of consecutive CPUs (default 1)
``node_memory_mb``  memory of a virtual node for memory-aware admission (default: MemTotal / nodes)
``scale``           problem scale of the application presets' programs (default 1.0)
``programs``        table: application name -> command line (a list; relative paths are resolved
                    against the configuration's folder) replacing the preset's IR program
``time_limit_s``    jobs still running then are killed and reported (default 600)
``estimate_s``      the walltime every job requests, EASY's runtime estimate (default: ``time_limit_s``)
``requests_s``      table: application name (or ``"APP.CLASS"``, which wins) -> the walltime its jobs request,
                    seconds, EASY's runtime estimate for them instead of ``estimate_s`` (the request model of
                    real mode: ``easy[estimates=request]`` and ``batch[backfill=easy,estimates=request]``; with
                    ``round_s`` each request is rounded up to a multiple of it). A job is not killed at its
                    request (``time_limit_s`` applies). ``estimates=perfect`` is refused: it needs each job's
                    dedicated runtime before the run.
``library_waits``   true: every wait is the MPI library's own (the shim keeps its events and counters but
                    never replaces a wait, whatever the node policy asks): a baseline of the library's wait
                    mode (default false)
``env``             table: more environment variables for every rank, e.g. ``OMPI_MCA_mpi_yield_when_idle =
                    "1"`` (Open MPI's yield while waiting); not ``COSCHED_*`` nor ``LD_PRELOAD``
``sample_ms``       timeline sampling period (default 50)
``boost_factor``    a policy's boost multiplies the rank's CPU weight by this (default 64)
``idle_watts``, ``busy_watts``   power model of a virtual node (defaults: the platform defaults)
``build_dir``       where ``make real`` put the shim and ``cosched-ir-run`` (default: build/real of the
                    source tree, or ``$COSCHED_REAL_BUILD``)

A run works in ``cosched-run-<PID>-<random>`` of the temporary folder (``$TMPDIR``, else /tmp), PID being
the controller's, and removes it when it ends. A controller killed with SIGKILL cannot: the next run's start
removes every such folder whose PID is no live process (:func:`remove_dead_work_dirs`), as the agent does
with a dead run's cgroups. Folders of a live PID, and names without a PID, are left alone.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import statistics
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from . import _core
from .api import JOB_COLUMNS, TIMELINE_COLUMNS, jobs_frame
from .output import provenance, write_outputs

if TYPE_CHECKING:  # imported where used: `cosched --help` registers this module's command
    import pandas as pd
    import pyarrow as pa

REAL_KEYS = {
    "mpi", "nodes", "cpus_per_node", "node_memory_mb", "scale", "programs", "time_limit_s", "estimate_s",
    "requests_s", "library_waits", "env", "sample_ms", "boost_factor", "idle_watts", "busy_watts", "build_dir",
}
#: Process-level policies and the parameters real mode carries out (gang: the slot policy object checks
#: its own options, `_core.real_gang_check`).
REAL_POLICY_PARAMS = {"fcfs": set(), "batch": {"backfill", "strict", "estimates", "round_s"},
                      "easy": {"estimates", "round_s"}, "gang": set()}
#: Job keys of the simulator that real mode cannot honour, with the reason.
SIM_ONLY_JOB_KEYS = {
    "noise_cv": "the noise model draws compute bursts; real bursts vary by themselves",
    "nice": "nice values are not carried out (a boost is a cgroup weight)",
    "ranks_per_node": "one rank per virtual node only",
    "background": "background loads are not launched",
    "start_delay_s": "a real job's launch takes the time it takes",
    "end_delay_s": "a real job's end takes the time it takes",
}


def _err(path: Path, msg: str) -> ValueError:
    return ValueError(f"{path}: {msg}")


def _read(path: Path) -> dict[str, Any]:
    """The configuration's tables; a syntax error names the file, line and column."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json" or (path.suffix != ".toml" and text.lstrip().startswith("{")):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise _err(path, f"line {e.lineno}, column {e.colno}: {e.msg}") from None
        if not isinstance(doc, dict):
            raise _err(path, f"expected a JSON object of tables, got {type(doc).__name__}")
        return doc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _err(path, str(e)) from None


def _number(path: Path, real: Mapping[str, Any], key: str, default: float, *, integer: bool = False,
            least: float = 0.0, strict: bool = True) -> Any:
    """``real.KEY`` (else ``default``) checked: a finite number (an integer if ``integer``), above ``least``
    (or equal to it unless ``strict``)."""
    v = real.get(key, default)
    number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not number or (integer and not float(v).is_integer()):
        raise _err(path, f"field `real.{key}`: {'an integer' if integer else 'a finite number'}, got {v!r}")
    if v < least or (strict and v == least):
        raise _err(path, f"field `real.{key}`: must be {'>' if strict else '>='} {least:g}, got {v!r}")
    return int(v) if integer else float(v)


def default_build_dir() -> Path:
    env = os.environ.get("COSCHED_REAL_BUILD")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "build" / "real"


def _policy(path: Path, spec: str) -> dict[str, Any]:
    try:
        name, items = _core.parse_spec(spec)
    except ValueError as e:
        raise _err(path, f"field `scheduler.policy`: {e}") from None
    if name not in REAL_POLICY_PARAMS:
        raise _err(path, f"field `scheduler.policy`: {name!r} is simulator-only; real mode runs "
                   f"{', '.join(REAL_POLICY_PARAMS)}")
    kv = dict(items)
    if name == "gang":
        # The simulator's gang slot policy object runs in the controller; options that need measurements
        # real mode does not take are refused with what is missing.
        try:
            _core.real_gang_check(spec)
        except ValueError as e:
            raise _err(path, f"field `scheduler.policy`: {e}") from None
        return {"gang": {"policy": spec}}
    for k in kv:
        if k not in REAL_POLICY_PARAMS[name]:
            raise _err(path, f"field `scheduler.policy`: parameter {k!r} of {name} is simulator-only "
                       f"(real mode takes {sorted(REAL_POLICY_PARAMS[name]) or 'none'})")
    strict = str(kv.get("strict", "true")).lower()
    if strict not in ("true", "false"):
        raise _err(path, f"field `scheduler.policy`: parameter 'strict' of {name} must be true or false, "
                   f"got {strict!r}")
    easy = name == "easy" or (name == "batch" and kv.get("backfill", "none") == "easy")
    if easy and strict == "false":
        raise _err(path, "field `scheduler.policy`: EASY backfills around a queue head held in strict order; "
                   "use strict=true with backfill=easy")
    if easy:
        return {"batch": {"easy": True}}
    if name == "batch":
        # strict=false: the job-level fcfs[strict=false] of cosched-policies (OpenPBS strict_ordering: false).
        return {"batch": {"easy": False, "strict": strict == "true"}}
    return "fcfs"  # type: ignore[return-value]


def _request_rounding(path: Path, spec: str) -> float | None:
    """The walltime granularity EASY's requests are rounded up to (``round_s``), None for none; refuses
    ``estimates=perfect`` (real mode has no dedicated runtimes before the run)."""
    _, items = _core.parse_spec(spec)
    kv = dict(items)
    kind = str(kv.get("estimates", "request"))
    if kind == "perfect":
        raise _err(path, "field `scheduler.policy`: estimates=perfect needs each job's dedicated runtime before "
                   "the run, which real mode does not have; use estimates=request (the walltimes in "
                   "`real.requests_s`, else `real.estimate_s`)")
    if kind != "request":
        raise _err(path, f"field `scheduler.policy`: estimates must be \"request\" or \"perfect\", got {kind!r}")
    if "round_s" not in kv:
        return None
    try:
        r = float(kv["round_s"])
    except ValueError:
        r = float("nan")
    if not (math.isfinite(r) and r > 0):
        raise _err(path, "field `scheduler.policy`: round_s must be a positive number of seconds, "
                   f"got {kv['round_s']!r}")
    return r


def _requests(path: Path, real: Mapping[str, Any], jobs: list[dict[str, Any]], default: float,
              round_s: float | None) -> list[float]:
    """Each job's requested walltime, seconds: ``real.requests_s`` by ``"APP.CLASS"`` then by ``APP``, else
    ``default``; rounded up to a multiple of ``round_s`` when given. Errors name the key."""
    table = real.get("requests_s") or {}
    if not isinstance(table, Mapping):
        raise _err(path, "field `real.requests_s`: a table application name -> walltime in seconds")
    known = {k for job in jobs for k in (f"{job['app']}.{job.get('class', '-')}", job["app"])}
    out = []
    for job in jobs:
        keys = [f"{job['app']}.{job.get('class', '-')}", job["app"]]
        key = next((k for k in keys if k in table), None)
        req = default
        if key is not None:
            v = table[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise _err(path, f"field `real.requests_s.{key}`: a positive number of seconds, got {v!r}")
            req = float(v)
        if round_s is not None:
            req = math.ceil(req / round_s - 1e-9) * round_s
        out.append(req)
    for k in table:
        if k not in known:
            raise _err(path, f"field `real.requests_s.{k}`: no job of the workload runs {k!r}")
    return out


def _flag(path: Path, real: Mapping[str, Any], key: str) -> bool:
    v = real.get(key, False)
    if not isinstance(v, bool):
        raise _err(path, f"field `real.{key}`: true or false, got {v!r}")
    return v


def _rank_env(path: Path, real: Mapping[str, Any]) -> dict[str, str]:
    """``real.env`` checked: names of environment variables to string values, none of the shim's own."""
    env = real.get("env") or {}
    if not isinstance(env, Mapping):
        raise _err(path, "field `real.env`: a table of environment variable name -> value")
    for k, v in env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise _err(path, f"field `real.env.{k}`: not an environment variable name")
        if k.startswith("COSCHED_") or k == "LD_PRELOAD":
            raise _err(path, f"field `real.env.{k}`: set by real mode itself")
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise _err(path, f"field `real.env.{k}`: a string or number, got {v!r}")
    return {k: str(v) for k, v in env.items()}


def _mem_total_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024
    return 1024.0


def plan(config: str | os.PathLike[str], work_dir: Path) -> tuple[dict[str, Any], dict[str, Any], str, dict[str, Any]]:
    """Checks ``config`` for real mode and writes the jobs' programs into ``work_dir``.

    Returns the controller's run specification, the platform of the power model, the summary's
    policy name and the effective options (hashed into the provenance). Errors name the file and
    the field, or what is missing on this machine.
    """
    path = Path(config)
    raw = _read(path)
    real = dict(raw.pop("real", None) or {})
    if not real:
        raise _err(path, "no [real] table: real mode needs at least `real.mpi` (\"mpich\" or \"openmpi\")")
    for k in real:
        if k not in REAL_KEYS:
            raise _err(path, f"unknown key `real.{k}` (valid: {', '.join(sorted(REAL_KEYS))})")
    if raw.get("fidelity") != "process":
        raise _err(path, "real mode runs process-level configurations: set fidelity = \"process\"")
    nplat = raw.get("node_platform") or {}
    for k, why in (("os", "the OS model: Linux's own scheduler runs here"),
                   ("cpu_speed", "the CPU speed: the programs run at this machine's speed")):
        if k in nplat:
            raise _err(path, f"field `node_platform.{k}` is simulator-only ({why})")
    for i, job in enumerate((raw.get("workload") or {}).get("jobs") or []):
        for k, why in SIM_ONLY_JOB_KEYS.items():
            if k in job and job[k] not in (0, 0.0, False, 1 if k == "ranks_per_node" else None):
                raise _err(path, f"field `workload.jobs[{i}].{k}` is simulator-only in real mode ({why})")
    # The simulator's own loader checks the rest (and fills defaults).
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(raw, f)
    try:
        cfg = json.loads(_core.load_config(f.name))
    except ValueError as e:
        # A position would be that of the one-line copy, not of the user's file: the field names the place.
        msg = re.sub(r"^line \d+, column \d+: ", "", str(e).replace(f"{f.name}: ", "", 1))
        raise _err(path, msg) from None
    finally:
        os.unlink(f.name)
    mpi = real.get("mpi")
    if mpi not in ("mpich", "openmpi"):
        raise _err(path, f"field `real.mpi`: unknown MPI {mpi!r}; valid: \"mpich\", \"openmpi\"")
    cpn = _number(path, real, "cpus_per_node", 1, integer=True, least=1, strict=False)
    ncpu = os.cpu_count() or 1
    nodes = _number(path, real, "nodes", max(1, ncpu // cpn), integer=True, least=1, strict=False)
    if cpn < 1 or nodes < 1 or nodes * cpn > ncpu:
        raise _err(path, f"fields `real.nodes` x `real.cpus_per_node` = {nodes} x {cpn}: this machine has {ncpu} CPUs")
    build = Path(real.get("build_dir", default_build_dir()))
    shim = build / f"libcosched-{mpi}.so"
    if not shim.is_file():
        raise ValueError(f"the MPI shim {shim} is missing: build it with `make real` (needs the {mpi} compiler)")
    scale = _number(path, real, "scale", 1.0)
    programs = real.get("programs") or {}
    time_limit = _number(path, real, "time_limit_s", 600.0)
    estimate = _number(path, real, "estimate_s", time_limit)
    sched = cfg["scheduler"]
    scheme = _policy(path, sched["policy"])
    round_s = _request_rounding(path, sched["policy"]) if isinstance(scheme, dict) and "batch" in scheme else None
    requests = _requests(path, real, cfg["workload"]["jobs"], estimate, round_s)
    jobs = []
    for i, job in enumerate(cfg["workload"]["jobs"]):
        app, procs = job["app"], int(job["procs"])
        if procs > nodes:
            raise _err(path, f"field `workload.jobs[{i}].procs`: {procs} ranks need {procs} virtual nodes; "
                       f"real mode has {nodes} (`real.nodes`)")
        mem = 0.0
        if app in programs:
            argv = [str(x) for x in programs[app]]
            if not argv:
                raise _err(path, f"field `real.programs.{app}`: empty command")
            first = Path(argv[0])
            if not first.is_absolute() and (path.parent / first).exists():
                argv[0] = str((path.parent / first).resolve())
            elif not (first.exists() if "/" in argv[0] else shutil.which(argv[0])):
                where = (f"no such file here or in {path.parent.resolve()}" if "/" in argv[0]
                         else "not found on PATH")
                raise _err(path, f"field `real.programs.{app}`: {argv[0]}: {where}")
        else:
            runner = build / f"cosched-ir-run-{mpi}"
            export = getattr(_core, "apps_export", None)
            if export is None or not runner.is_file():
                raise ValueError(f"workload.jobs[{i}] ({app}): running an application preset needs "
                                 f"{runner} (`make real`) and `cosched apps export`; or give its command "
                                 f"in `real.programs`")
            text = export(app, job.get("class", "-"), procs, scale, "library")
            prog = work_dir / f"job{i}.ir"
            prog.write_text(text)
            mems = [float(x) for x in re.findall(r"^\s*memory_mb\s+([0-9.eE+-]+)", text, re.M)]
            mem = max(mems, default=0.0)
            argv = [str(runner), str(prog)]
        jobs.append({"id": i, "procs": procs, "submit_ns": int(job.get("submit_s", 0) * 1e9), "argv": argv,
                     "memory_mb": mem, "estimate_ns": int(requests[i] * 1e9),
                     "app": app.split("[")[0]})
    run_id = f"r{os.getpid()}"
    spec = {
        "run": run_id,
        "work_dir": str(work_dir),
        "mpi": mpi,
        "shim": str(shim),
        "nodes": [f"{n * cpn}" if cpn == 1 else f"{n * cpn}-{n * cpn + cpn - 1}" for n in range(nodes)],
        "node_memory_mb": _number(path, real, "node_memory_mb", _mem_total_mb() / nodes),
        "scheme": scheme,
        "node_policy": sched["node_policy"],
        "mpl": int(sched["mpl"]),
        "packing": sched["placement"] == "packing",
        "memory_aware": bool(sched["memory_aware"]),
        "seed": int(cfg["seed"]),
        "jobs": jobs,
        "time_limit_ns": int(time_limit * 1e9),
        "sample_ns": int(_number(path, real, "sample_ms", 50.0) * 1e6),
        "boost_factor": _number(path, real, "boost_factor", 64.0),
        "state_dir": os.environ.get("COSCHED_STATE_DIR", "/run/cosched"),
        "library_waits": _flag(path, real, "library_waits"),
        "env": _rank_env(path, real),
    }
    platform = {"nodes": nodes, "procs_per_node": cpn}
    for k in ("idle_watts", "busy_watts"):
        if k in real:
            platform[k] = _number(path, real, k, 0.0, strict=False)
    options = {"config": cfg, "real": {k: v for k, v in real.items() if k != "build_dir"}}
    return spec, platform, f"{sched['policy']}+{sched['node_policy']}", options


def _jobs_table(columns: Mapping[str, list[Any]]) -> pa.Table:
    """The job table's columns (JSON: NaN as null) as an Arrow table of the job table's types."""
    import pyarrow as pa

    types = {"status": pa.string(), "node_list": pa.string(), "job_id": pa.int64(), "procs": pa.int64(),
             "nodes": pa.int64(), "gang_row": pa.int64()}
    return pa.table({c: pa.array(columns[c], type=types.get(c, pa.float64())) for c in JOB_COLUMNS})


def timeline_frame(samples: list[Mapping[str, Any]], cpus_per_node: int = 1) -> pd.DataFrame:
    """The sampled timeline in the simulator's columns (docs/formats/timeline.md).

    Each sampling interval of each rank becomes its CPU time there (``useful`` or ``spin``) laid
    out on its node's CPU lanes one rank after the other (so a lane never overlaps itself), and
    the rest of the interval off the CPU (``ready`` or ``blocked``, ``cpu = -2``). Contiguous rows
    of one process and kind on one lane are merged. ``pid`` is the OS pid. The order inside an
    interval is not measured: the rows show how much each rank ran, not exactly when.
    """
    import pandas as pd

    rows: list[tuple[int, int, int, int, int, float, float, str]] = []
    groups: dict[tuple[int, int, int], list[Mapping[str, Any]]] = {}
    for smp in samples:
        groups.setdefault((int(smp["node"]), int(smp["start_ns"]), int(smp["end_ns"])), []).append(smp)
    for (node, t0, t1), group in sorted(groups.items()):
        lane_t = [t0] * cpus_per_node
        for smp in sorted(group, key=lambda x: (x["job"], x["rank"])):
            used = int(smp["cpu_ns"])
            lane = min(range(cpus_per_node), key=lambda i: lane_t[i])
            start = lane_t[lane]
            used = min(used, t1 - start)
            ident = (node, 0, int(smp["job"]), int(smp["rank"]), int(smp["pid"]))
            if used > 0:
                rows.append((*ident[:1], lane, *ident[2:], start / 1e9, (start + used) / 1e9, smp["on"]))
                lane_t[lane] = start + used
            if t1 - t0 - used > 0:
                rows.append((node, -2, *ident[2:], (t0 + used) / 1e9, t1 / 1e9, smp["off"]))
    rows.sort(key=lambda r: (r[0], r[1], r[4], r[5]))
    merged: list[list[Any]] = []
    last: dict[tuple[int, int], int] = {}
    for r in rows:
        key = (r[4], r[1])
        i = last.get(key)
        if i is not None and merged[i][7] == r[7] and abs(merged[i][6] - r[5]) < 1e-9:
            merged[i][6] = r[6]
            continue
        last[key] = len(merged)
        merged.append(list(r))
    df = pd.DataFrame(merged, columns=list(TIMELINE_COLUMNS))
    df = df.astype({c: "int64" for c in ("node", "cpu", "job", "rank", "pid")})
    df = df.astype({"start_s": "float64", "end_s": "float64"})
    return df.sort_values(["node", "cpu", "start_s", "pid"], kind="stable").reset_index(drop=True)


#: Signals that end ``cosched run`` like Ctrl-C: its jobs are ended and everything is restored, then
#: the command exits 130 (``cosched: interrupted``).
RESTORING_SIGNALS = ("SIGTERM", "SIGHUP")


def _as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run_restoring_on_signals(spec: dict[str, Any], platform: dict[str, Any], policy: str,
                              progress: Callable[[int, int, int, int, float], None] | None) -> str:
    """``_core.real_run`` with SIGTERM and SIGHUP (the terminal closed) turned into an interruption, like
    Ctrl-C: the controller sees it at its next progress call (within 0.5 s), ends its jobs and the agent
    restores everything before the exception propagates. Only the main thread can install the handlers;
    elsewhere the signals are left as they are."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _core.real_run(json.dumps(spec), json.dumps(platform), policy, progress)
    old = {s: signal.signal(getattr(signal, s), _as_interrupt) for s in RESTORING_SIGNALS}
    try:
        return _core.real_run(json.dumps(spec), json.dumps(platform), policy, progress)
    finally:
        for s, h in old.items():
            signal.signal(getattr(signal, s), h)


#: A run's work folder in the temporary folder: this prefix, the controller's PID, ``-``, a random part.
WORK_PREFIX = "cosched-run-"
_WORK_NAME = re.compile(rf"{re.escape(WORK_PREFIX)}([0-9]+)-[^/]+")


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a process (of any user; a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_work_dirs(root: str | os.PathLike[str] | None = None) -> list[Path]:
    """Removes the work folders ``cosched-run-<PID>-*`` in ``root`` (default: the temporary folder) that
    belong to this user and whose PID is no live process: those of controllers killed before they could
    remove them. Returns the folders removed; anything else (a live PID, another user's folder, a link, a
    name without a PID) is left alone."""
    base = Path(root) if root is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    for d in sorted(base.glob(f"{WORK_PREFIX}*")):
        m = _WORK_NAME.fullmatch(d.name)
        if m is None or d.is_symlink() or not d.is_dir():
            continue
        pid = int(m[1])
        try:
            mine = d.lstat().st_uid == os.getuid()
        except OSError:
            continue
        if not mine or pid == 0 or pid == os.getpid() or _pid_alive(pid):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def run(
    config: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    progress: Callable[[int, int, int, int, float], None] | None = None,
) -> dict[str, Any]:
    """Runs ``config`` for real and writes the outputs into ``out_dir``; returns the summary.

    Job logs (the MPI launcher's output, the shim's per-rank counters ``shim.jsonl``) are copied
    into ``out_dir/logs``.
    """
    remove_dead_work_dirs()
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))
    try:
        spec, platform, policy, options = plan(config, work)
        doc = json.loads(_run_restoring_on_signals(spec, platform, policy, progress))
        real = doc["real"]
        summary = doc["summary"]
        jobs = jobs_frame(_jobs_table(doc["jobs"]))
        switches = real["gang_switch_ns"]
        summary["real"] = {
            "mpi": spec["mpi"],
            "mpi_version": real["mpi_version"],
            "cgroups": real["agent"]["cgroups"],
            "agent_realtime": real["agent"]["realtime"],
            "virtual_nodes": len(spec["nodes"]),
            "cpus": spec["nodes"],
            "jobs_failed": sum(1 for j in real["jobs"] if not j["ok"]),
            "errors": {str(i): j["error"] for i, j in enumerate(real["jobs"]) if j["error"]},
            "cpu_s": [j["cpu_ns"] / 1e9 for j in real["jobs"]],
            "context_switches_voluntary": sum(j["ctx_voluntary"] for j in real["jobs"]),
            "context_switches_involuntary": sum(j["ctx_involuntary"] for j in real["jobs"]),
            "agent_events": real["agent"]["events"],
            "agent_cpu_s": real["agent"]["cpu_ns"] / 1e9,
            "agent_boosts": real["agent"]["boosts"],
            "agent_nudges": real["agent"]["nudges"],
            "agent_interrupts": real["agent"]["interrupts"],
            "gang_switches": len(switches),
            "gang_switch_ms_median": statistics.median(switches) / 1e6 if switches else None,
            "gang_slots": [{"at_s": g["at_ns"] / 1e9, "row": g["row"], "nodes": g["nodes"]}
                           for g in real["gang_slots"]],
            "wall_s": real["makespan_ns"] / 1e9,
        }
        prov = provenance(version=_core.__version__, seed=int(spec["seed"]), policy=policy, options=options,
                          trace=None, platform=platform)
        prov["real"] = {"cgroups": real["agent"]["cgroups"], "mpi": spec["mpi"], "mpi_version": real["mpi_version"]}
        write_outputs(out_dir, jobs, summary, prov,
                      timeline_frame(real["timeline"], int(platform["procs_per_node"])))
        logs = Path(out_dir) / "logs"
        logs.mkdir(exist_ok=True)
        for f in work.iterdir():
            if f.suffix in (".log", ".jsonl"):
                shutil.copy(f, logs / f.name)
        return summary
    finally:
        shutil.rmtree(work, ignore_errors=True)


def register_cli(app: Any, console: Callable[..., Any], user_errors: Callable[[], Any]) -> None:
    """Adds ``cosched run`` to the command-line application."""
    from rich.progress import Progress, TextColumn, TimeElapsedColumn

    @app.command("run")
    def run_cmd(
        config: Annotated[Path, typer.Argument(help="A process-level configuration with a \\[real] table.",
                                               show_default=False)],
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Output folder. (default: "
                                                 "results/<config stem>-real)", show_default=False)] = None,
    ) -> None:
        """Run a process-level configuration for real on this machine: MPI jobs under the shim,
        node policies in the node agent, admission and gang rows in the controller (docs/real.md).
        Needs root, cgroups, an MPI and `make real`; restores every cgroup, weight and freeze on exit."""
        dest = out if out is not None else Path("results") / f"{config.stem}-real"
        with user_errors():
            with Progress(TextColumn("{task.description}"), TimeElapsedColumn(), console=console(True),
                          transient=True) as bar:
                task = bar.add_task("starting")

                def show(queued: int, running: int, done: int, failed: int, elapsed: float) -> None:
                    bar.update(task, description=f"jobs: [cyan]{queued} queued[/] [yellow]{running} running[/] "
                               f"[green]{done} done[/] [red]{failed} failed[/]")

                summary = run(config, dest, show)
        info = summary["real"]
        c = console()
        c.print(f"wrote {dest} ({summary['jobs_completed']} jobs completed, {info['jobs_failed']} failed; "
                f"makespan {summary['makespan_s']:.2f} s; cgroups {info['cgroups']}; {info['mpi_version']})")
        for job, err in info["errors"].items():
            c.print(f"[red]job {job}:[/] {err}")
        if info["jobs_failed"]:
            raise typer.Exit(1)
