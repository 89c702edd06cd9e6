"""The same small workload of MPI jobs through real Slurm on the one-machine test cluster, per scheduling setup.

For each configuration the driver brings up the test cluster (``scripts/slurm-testbed up``: slurmctld and two
slurmd, each node one CPU in its own cpuset, a cosched node agent beside each slurmd, a gang coordinator),
submits the workload in a fixed order, samples the jobs' states from ``squeue`` every ``SAMPLE_S`` seconds,
waits for every job to end, reads the jobs' times from Slurm's job completion log, and brings the test cluster
down again (also on failure). Configurations:

``fifo``          sched/builtin (strict FIFO), no over-subscription (a node runs one job)
``backfill``      sched/backfill (``bf_interval=1``), no over-subscription
``slurm-gang``    Slurm's own gang scheduling: ``PreemptMode=GANG``, ``SchedulerTimeSlice=5`` (its minimum),
                  ``OverSubscribe=FORCE:2``
``nls|sb|hybrid|ics``  ``OverSubscribe=FORCE:2`` and ``--cosched=SCHEME``: both jobs of a node share its CPU
                  under the cosched node policy hosted by the node's agent
``cosched-gang``  ``OverSubscribe=FORCE:2`` and ``--cosched-gang``: cosched's gang coordinator alternates the
                  jobs across both nodes every ``QUANTUM_MS`` ms (2 rows)

Workload: programs of the simulator's application presets exported for ``cosched-ir-run`` (seed 003's
synthetic Workpile, Msg and Barrier, 2 ranks, one per node, scaled so a job runs for seconds; ``--quick``: two
``cosched-probe-mpich sleepwait 11`` jobs, which check the mechanisms at little CPU), all submitted at
once (0.3 s apart, to fix the queue order), each with ``--mem=100M`` (so that memory does not keep two jobs off
a node) and a time limit of ``TIME_LIMIT_MIN`` minutes.

Timing source: jobcomp/filetxt (``JobCompType=jobcomp/filetxt``, one line per ended job with SubmitTime,
StartTime and EndTime, to the second: Slurm's own record, at Slurm's one-second resolution). Wait = start -
submit, execution = end - start (under a time-slicing setup this includes the time suspended), response = end -
submit, makespan = last end - first submit. Slowdown = response / the same job's execution under ``fifo``
(where it ran alone on its nodes), when ``fifo`` was run. Mechanism records beside them: the sampled
``squeue`` states (R, S, PD) and, under cosched gang, the agents' slot-switch logs.

Submission: ``sbatch --wrap "srun ..."`` (batch jobs), except ``cosched-gang``, whose jobs are submitted with
``srun`` itself: a ``--cosched-gang`` step started inside a batch job is not reported to the gang coordinator
(seen with Slurm 22.05; the cause is not found), so its jobs would run uncoordinated. Under
``PreemptMode=GANG`` a job submitted with ``srun`` is suspended at allocation and its step cannot be created
until Slurm resumes it; srun's retries back off (tens of seconds were seen), so ``slurm-gang`` uses batch
jobs, whose batch script is itself suspended and starts its step when resumed. That is not always enough: a
batch job suspended as it started was seen to end 80 s after its start for 11 s of work (the known trap of a
step started at the instant of a suspension), so ``slurm-gang``'s times can include such delays; the
``squeue`` samples show them (a job suspended or running far longer than its work).

The simulated counterpart of each configuration needs a platform calibrated to this machine (the real-vs-sim
calibration); when this build has none the report says so and leaves the column out.

Needs root, Debian's Slurm, MPICH, and the project's agent, SPANK plugin, shim and ``cosched-ir-run``
(``cargo build --release -p cosched-real``, ``make real spank``). The machine may be shared: every time here
is a loaded time; the report records the load average before and after.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd

from . import Experiment, Outcome, Settings, csv_writer, register
from .report import md_table
from .runner import Gathered

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_S = 0.5
QUANTUM_MS = 100
TIME_LIMIT_MIN = 10


@dataclass(frozen=True)
class Config:
    id: str
    #: sched/<sched> of the test cluster.
    sched: str = "backfill"
    #: OverSubscribe=FORCE:<mpl> when > 1.
    mpl: int = 1
    #: PreemptMode=GANG (Slurm's time slicing).
    slurm_gang: bool = False
    #: --cosched=SPEC of every job's step.
    cosched: str = ""
    #: --cosched-gang (cosched's gang coordinator).
    cosched_gang: bool = False

    @property
    def submit(self) -> str:
        return "srun" if self.cosched_gang else "sbatch"


CONFIGS = [
    Config("fifo", sched="builtin"),
    Config("backfill"),
    Config("slurm-gang", mpl=2, slurm_gang=True),
    Config("nls", mpl=2, cosched="nls"),
    Config("sb", mpl=2, cosched="sb"),
    Config("hybrid", mpl=2, cosched="hybrid"),
    Config("ics", mpl=2, cosched="ics"),
    Config("cosched-gang", mpl=2, cosched_gang=True),
]
QUICK_CONFIGS = ["fifo", "slurm-gang", "hybrid", "cosched-gang"]


@dataclass(frozen=True)
class Job:
    #: An application preset exported for cosched-ir-run, or "probe" (cosched-probe-mpich with `args`).
    app: str
    scale: float = 1.0
    args: tuple[str, ...] = ()

    def label(self) -> str:
        return f"probe {' '.join(self.args)}" if self.app == "probe" else f"{self.app} x{self.scale:g}"


#: The workload (in submission order). Full: three kinds of synchronisation at a few seconds each, dedicated.
WORKLOAD = [Job("Workpile", 20), Job("Msg", 10), Job("Barrier", 10), Job("Workpile", 20)]
#: Quick: two equal probe jobs that wait 11 s of wall-clock time (one rank sleeps, the other waits for its
#: message), at little CPU. Slurm's gang timer switches at its own 5 s ticks, not at the second job's arrival
#: (a 6 s job was seen to run to its end before the first switch), so a job lasts two slices or more whatever
#: the machine's load, and Slurm's gang alternates them.
QUICK_WORKLOAD = [Job("probe", args=("sleepwait", "11")), Job("probe", args=("sleepwait", "11"))]


def _tools() -> dict[str, Path]:
    from ..real import default_build_dir

    build = default_build_dir()
    agent = Path(os.environ.get("COSCHED_AGENT_BIN", ROOT / "target" / "release" / "cosched-agent"))
    tools = {
        "testbed": ROOT / "scripts" / "slurm-testbed",
        "agent": agent,
        "plugin": build / "cosched_spank.so",
        "shim": build / "libcosched-mpich.so",
        "runner": build / "cosched-ir-run-mpich",
        "probe": build / "cosched-probe-mpich",
    }
    missing = [f"{k} ({p})" for k, p in tools.items() if not p.is_file()]
    if missing:
        raise ValueError(
            "real-slurm needs the test cluster script and the built real parts, missing: "
            + ", ".join(missing)
            + " (build: `cargo build --release -p cosched-real` and "
            "`make real spank`)"
        )
    for b in ("slurmctld", "slurmd", "sbatch", "srun", "squeue", "mpiexec.mpich"):
        if shutil.which(b) is None:
            raise ValueError(f"real-slurm needs {b} (Debian: slurm-wlm, slurm-client, mpich)")
    if os.geteuid() != 0:
        raise ValueError("real-slurm runs a Slurm test cluster, whose daemons run as root: run as root")
    return tools


def _run(cmd: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def parse_jobcomp(text: str) -> pd.DataFrame:
    """The jobcomp/filetxt lines: one row per job, times in seconds since the epoch (local time of the log)."""
    rows = []
    for line in text.splitlines():
        f = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" not in f:
            continue
        t = {k: datetime.fromisoformat(f[k]).timestamp() for k in ("SubmitTime", "StartTime", "EndTime")}
        rows.append(
            {
                "slurm_job": int(f["JobId"]),
                "name": f.get("Name", ""),
                "state": f.get("JobState", ""),
                "exit_code": f.get("ExitCode", ""),
                "submit_s": t["SubmitTime"],
                "start_s": t["StartTime"],
                "end_s": t["EndTime"],
            }
        )
    return pd.DataFrame(rows)


def _programs(jobs: list[Job], d: Path, tools: dict[str, Path]) -> list[list[str]]:
    """Each job's command line (every rank runs the same)."""
    from .. import _core

    out = []
    for k, j in enumerate(jobs):
        if j.app == "probe":
            out.append([str(tools["probe"]), *j.args])
            continue
        p = d / f"job{k}-{j.app}.ir"
        p.write_text(_core.apps_export(j.app, "-", 2, j.scale, "library"))
        out.append([str(tools["runner"]), str(p)])
    return out


def _up_args(c: Config, d: Path, tools: dict[str, Path]) -> list[str]:
    a = [
        str(tools["testbed"]),
        "up",
        "--nodes",
        "2",
        "--dir",
        str(d),
        "--sched",
        c.sched,
        "--oversubscribe",
        str(c.mpl),
        "--agent-bin",
        str(tools["agent"]),
        "--coord",
        "--coord-rows",
        "2",
        "--coord-quantum-ms",
        str(QUANTUM_MS),
        "--plugin",
        str(tools["plugin"]),
        "--shim",
        str(tools["shim"]),
    ]
    if c.sched == "backfill":
        a += ["--sched-params", "bf_interval=1"]
    if c.slurm_gang:
        a += ["--gang", "--timeslice", "5"]
    return a


def run_config(c: Config, jobs: list[Job], tools: dict[str, Path], tmp: Path, timeout_s: float) -> dict:
    """Runs the workload under `c` on a fresh test cluster; returns its job rows, state samples and switches."""
    d = tmp / f"tb-{c.id}"
    progs = _programs(jobs, tmp, tools)
    r = _run(_up_args(c, d, tools), timeout=180)
    if r.returncode != 0:
        raise RuntimeError(f"{c.id}: the test cluster did not come up: {r.stderr.strip()[-2000:]}")
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
    procs: list[subprocess.Popen] = []
    samples: list[dict] = []
    try:
        opts = (["--cosched-gang"] if c.cosched_gang else []) + ([f"--cosched={c.cosched}"] if c.cosched else [])
        t0 = time.time()
        for k, prog in enumerate(progs):
            step = ["srun", "--mpi=pmi2", *opts, *prog]
            common = ["-J", f"rs{k}", "-N2", "-n2", "--mem=100M", f"--time={TIME_LIMIT_MIN}"]
            if c.submit == "srun":
                procs.append(
                    subprocess.Popen(
                        [step[0], *common, *step[1:]],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=open(tmp / f"{c.id}-job{k}.err", "w"),  # noqa: SIM115 - the child's
                    )
                )
            else:
                r = _run(
                    ["sbatch", "--parsable", *common, "-o", str(tmp / f"{c.id}-job{k}.out"), "--wrap", " ".join(step)],
                    env=env,
                )
                if r.returncode != 0:
                    raise RuntimeError(f"{c.id}: sbatch of job {k} failed: {r.stderr.strip()}")
            time.sleep(0.3)
        deadline = time.monotonic() + timeout_s
        while True:
            r = _run(["squeue", "-h", "-o", "%j %t"], env=env, timeout=30)
            now = time.time() - t0
            states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
            for name, st in states.items():
                samples.append({"config": c.id, "t_s": round(now, 3), "job": int(name[2:]), "state": st})
            if r.returncode == 0 and not states:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{c.id}: jobs still queued or running after {timeout_s:.0f} s: {states}")
            time.sleep(SAMPLE_S)
        for p in procs:
            p.wait(timeout=60)
        comp = d / "jobcomp.txt"
        end = time.monotonic() + 30
        while time.monotonic() < end:
            jc = parse_jobcomp(comp.read_text() if comp.exists() else "")
            if len(jc) >= len(jobs):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"{c.id}: {comp} lists {len(jc)} of {len(jobs)} jobs")
        gang = []
        for f in sorted((d / "agents").glob("gang-*.jsonl")):
            gang += [dict(json.loads(x), node=f.stem[5:]) for x in f.read_text().splitlines() if x.strip()]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        down = _run([str(tools["testbed"]), "down", "--dir", str(d)], timeout=180)
        if down.returncode != 0:
            raise RuntimeError(f"{c.id}: the test cluster did not come down: {down.stderr.strip()}")
    jc = jc.assign(job=[int(n[2:]) for n in jc.name], config=c.id).sort_values("job")
    t_first = jc.submit_s.min()
    for col in ("submit_s", "start_s", "end_s"):
        jc[col] = jc[col] - t_first
    jc["program"] = [jobs[j].label() for j in jc.job]
    return {"jobs": jc, "samples": samples, "gang": gang}


def metrics(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: makespan, mean wait, execution, response and slowdown (against fifo's execution)."""
    j = jobs.copy()
    j["wait_s"] = j.start_s - j.submit_s
    j["exec_s"] = j.end_s - j.start_s
    j["response_s"] = j.end_s - j.submit_s
    ded = j[j.config == "fifo"].set_index("job").exec_s
    j["slowdown"] = [
        r / ded[k] if k in ded.index and ded[k] > 0 else float("nan") for k, r in zip(j.job, j.response_s, strict=True)
    ]
    g = j.groupby("config", sort=False)
    return pd.DataFrame(
        {
            "config": list(g.groups),
            "jobs": g.size().values,
            "completed": g.state.apply(lambda s: int((s == "COMPLETED").sum())).values,
            "makespan_s": (g.end_s.max() - g.submit_s.min()).values,
            "mean_wait_s": g.wait_s.mean().values,
            "mean_exec_s": g.exec_s.mean().values,
            "mean_response_s": g.response_s.mean().values,
            "mean_slowdown": g.slowdown.mean().values,
        }
    )


def overlaps(jobs: pd.DataFrame) -> int:
    """Pairs of jobs whose [start, end) intervals overlap by more than Slurm's one-second resolution."""
    iv = sorted(zip(jobs.start_s, jobs.end_s, strict=True))
    return sum(1 for i, a in enumerate(iv) for b in iv[i + 1 :] if min(a[1], b[1]) - max(a[0], b[0]) > 1.0)


def mechanisms(cfg: str, jobs: pd.DataFrame, samples: pd.DataFrame, gang: pd.DataFrame) -> dict:
    """What the records show of each configuration's mechanism (computed, not asserted)."""
    s = samples[samples.config == cfg] if len(samples) else samples
    by_t = s.groupby("t_s").state.apply(list) if len(s) else pd.Series(dtype=object)
    both_running = int(sum(1 for v in by_t if v.count("R") >= 2))
    suspended = int(sum(1 for v in by_t if "S" in v))
    # Suspensions: a job seen running (R) at one sample and suspended (S) at its next (Slurm's time slicing).
    suspensions = 0
    for _, js in s.sort_values("t_s").groupby("job"):
        st = list(js.state)
        suspensions += sum(1 for a, b in zip(st, st[1:], strict=False) if a == "R" and b == "S")
    g = gang[gang.config == cfg] if len(gang) else gang
    switches = (
        int(len(g[~g.get("released", pd.Series(False, index=g.index)).fillna(False).astype(bool)])) if len(g) else 0
    )
    return {
        "config": cfg,
        "overlapping_pairs": overlaps(jobs[jobs.config == cfg]),
        "samples": int(len(by_t)),
        "samples_two_running": both_running,
        "samples_suspended": suspended,
        "suspensions": int(suspensions),
        "cosched_gang_switches": switches,
    }


def simulated_counterpart() -> str | None:
    """The calibrated platform of this machine when this build has one (from the real-vs-sim calibration)."""
    from . import _REGISTRY, _load

    _load()
    return "real-vs-sim" if "real-vs-sim" in _REGISTRY else None


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _analyze(_: Gathered, settings: Settings) -> Outcome:
    tools = _tools()
    configs = [c for c in CONFIGS if not settings.quick or c.id in QUICK_CONFIGS]
    work = QUICK_WORKLOAD if settings.quick else WORKLOAD
    timeout = 240.0 if settings.quick else 900.0
    load_before = _loadavg()
    jobs, samples, gang = [], [], []
    with tempfile.TemporaryDirectory(prefix="cosched-real-slurm-") as tmp:
        for c in configs:
            r = run_config(c, work, tools, Path(tmp), timeout)
            jobs.append(r["jobs"])
            samples += r["samples"]
            gang += [dict(x, config=c.id) for x in r["gang"]]
    load_after = _loadavg()
    jdf = pd.concat(jobs, ignore_index=True)
    sdf = pd.DataFrame(samples, columns=["config", "t_s", "job", "state"])
    gdf = pd.DataFrame(gang)
    if len(gdf):
        gdf = gdf.assign(boundary_s=(gdf.boundary_ns - gdf.boundary_ns.min()) / 1e9)
    m = metrics(jdf)
    mech = pd.DataFrame([mechanisms(c.id, jdf, sdf, gdf) for c in configs])
    sim = simulated_counterpart()
    cfg_rows = pd.DataFrame(
        [
            {
                "config": c.id,
                "sched": f"sched/{c.sched}",
                "oversubscribe": f"FORCE:{c.mpl}" if c.mpl > 1 else "NO",
                "preempt": "GANG" if c.slurm_gang else "OFF",
                "cosched": ("--cosched-gang" if c.cosched_gang else f"--cosched={c.cosched}" if c.cosched else "-"),
                "submit": c.submit,
            }
            for c in configs
        ]
    )
    wl = ", ".join(f"job {k}: {j.label()} (2 ranks, 2 nodes)" for k, j in enumerate(work))
    lines = [
        "## Setup",
        "",
        "Slurm 22.05 test cluster on this machine (`scripts/slurm-testbed`): 2 nodes of 1 CPU each (own cpusets), "
        "a cosched agent per node, a gang coordinator (2 rows, "
        f"{QUANTUM_MS} ms). Workload, submitted at once in this order: {wl}. Times are Slurm's "
        "(jobcomp/filetxt, one-second resolution); slowdown is against the job's execution under `fifo`. "
        f"The machine was shared with other work: load average {load_before} before, {load_after} after; every "
        "time is a loaded time.",
        "",
        md_table(cfg_rows),
        "",
        "## Results",
        "",
        md_table(m, digits=2),
        "",
        "## Mechanism records",
        "",
        f"Sampled `squeue` states every {SAMPLE_S} s (`samples.csv`): samples with two jobs running at once, with a "
        "job suspended, and suspensions (a job seen running, then suspended at the next sample: Slurm's "
        "time slicing); cosched gang slot switches "
        "recorded by the agents (`gang.csv`); job pairs whose executions overlap by more than one second.",
        "",
        md_table(mech),
        "",
        "## Simulated counterpart",
        "",
        (
            f"The calibrated platform comes from `{sim}`; comparing against it is not built yet."
            if sim
            else "Missing: this build has no platform calibrated to this machine (the real-vs-sim calibration), so no "
            "simulated column is given."
        ),
        "",
    ]
    return Outcome(
        report="\n".join(lines),
        files={
            "metrics.csv": csv_writer(m),
            "jobs_slurm.csv": csv_writer(jdf),
            "samples.csv": csv_writer(sdf),
            "gang.csv": csv_writer(gdf),
            "mechanisms.csv": csv_writer(mech),
            "configs.csv": csv_writer(cfg_rows),
        },
    )


register(
    Experiment(
        id="real-slurm",
        title="The same MPI jobs through real Slurm: FIFO, backfill, Slurm gang, cosched NLS/SB/HYBRID/ICS, "
        "cosched gang (one-machine test cluster)",
        source="no seed: cosched under Slurm (docs/real-slurm.md), measured on this machine",
        runs=lambda s: [],
        analyze=_analyze,
    )
)
