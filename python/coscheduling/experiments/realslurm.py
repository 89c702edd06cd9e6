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
                  under the cosched node policy hosted by the node's agent; ``ics`` (whose policy acts on message
                  arrivals, all of which come from the other node here) also with ``--cosched-forward``
``cosched-gang``  ``OverSubscribe=FORCE:2`` and ``--cosched-gang``: cosched's gang coordinator alternates the
                  jobs across both nodes every ``QUANTUM_MS`` ms (2 rows)

Workload: programs of the simulator's application presets exported for ``cosched-ir-run`` (seed 003's
synthetic Workpile, Msg and Barrier, 2 ranks, one per node, with parameters that make a job run for seconds;
the simulated column runs the very same presets; ``--quick``: two
``cosched-probe-mpich sleepwait 11`` jobs, which check the mechanisms at little CPU), all submitted at
once (0.3 s apart, to fix the queue order), each with ``--mem=100M`` (so that memory does not keep two jobs off
a node) and a time limit of ``TIME_LIMIT_MIN`` minutes.

Timing source: jobcomp/filetxt (``JobCompType=jobcomp/filetxt``, one line per ended job with SubmitTime,
StartTime and EndTime, to the second: Slurm's own record, at Slurm's one-second resolution). Wait = start -
submit, execution = end - start (under a time-slicing setup this includes the time suspended), response = end -
submit, makespan = last end - first submit. Slowdown = response / the same job's execution under ``fifo``
(where it ran alone on its nodes), when ``fifo`` was run. Mechanism records beside them: the sampled
``squeue`` states (R, S, PD) and, under cosched gang, the agents' slot-switch logs.

Submission: ``sbatch --wrap "srun ..."`` (batch jobs) for every configuration. Under ``PreemptMode=GANG`` a job
submitted with ``srun`` is suspended at allocation and its step cannot be created until Slurm resumes it;
srun's retries back off (tens of seconds were seen), whereas a batch job's script is itself suspended and
starts its step when resumed. That is not always enough: a
batch job suspended as it started was seen to end 80 s after its start for 11 s of work (the known trap of a
step started at the instant of a suspension), so ``slurm-gang``'s times can include such delays; the
``squeue`` samples show them (a job suspended or running far longer than its work).

Repetitions: every configuration runs ``--repeat`` times (default ``FULL_REPEAT``, 1 with ``--quick``), each on
a fresh test cluster, the configurations interleaved (round r runs every configuration once) so that a change
of the machine's load does not fall on one configuration only; the report gives each metric's median over the
repetitions and its spread (min to max).

Simulated counterpart (full workload; the quick probes sleep, which no simulator preset models): each
configuration is simulated once (deterministic) on the preset of this machine that ``real-vs-sim`` measures,
built by ``realsim.preset`` from that experiment's micro-benchmarks: from its ``calibration.json`` when
``--calibration FILE`` is given (micro-benchmarks and the fitted OS model), otherwise from the same
micro-benchmarks measured afresh (``realsim.microbenchmarks``, MPICH) with the OS model fitted on them as
real-vs-sim fits it (``osfit.fit``: the time sharing of one CPU). The mapping (``sim_scheme``): ``fifo`` ->
``batch`` (MPL 1, strict FCFS), ``backfill`` -> ``batch[backfill=easy,estimates=perfect]`` (every job here
spans both nodes, so there is no hole to backfill either way), ``slurm-gang`` -> ``gang`` of 2 rows at Slurm's
5 s slice, the cosched schemes -> ``fcfs`` at MPL 2 with the node policy, ``cosched-gang`` -> ``gang`` of 2
rows at ``QUANTUM_MS``; jobs submitted ``SUBMIT_GAP_S`` apart as in the real runs. The simulator has no job
launch and no Slurm (its scheduling passes, prologue and step creation), so its responses lack that cost. Per
configuration the report gives the real median and simulated mean response and the relative error, and
across configurations Kendall's tau of the two (``realsim.kendall``) and whether the orders are equal.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd

from ..waiting import wait_for
from . import Experiment, Outcome, Settings, csv_writer, register
from .report import md_table
from .runner import Gathered

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_S = 0.5
QUANTUM_MS = 100
TIME_LIMIT_MIN = 10
#: Slurm's gang time slice here (SchedulerTimeSlice, its minimum), seconds.
SLURM_SLICE_S = 5
#: Seconds between two submissions (fixes the queue order).
SUBMIT_GAP_S = 0.3
#: Repetitions of every configuration in a full run.
FULL_REPEAT = 3
#: The MPI of the workload's programs (the preset's network figures are this MPI's).
MPI = "mpich"
#: Called with (configuration, test cluster folder, client environment) after each configuration's workload has
#: ended and its records are read, while its test cluster is still up (None: nothing): the tests run further
#: checks on the experiment's clusters instead of bringing up their own.
after_workload: Callable[[Config, Path, dict], None] | None = None
#: Launch calibration: trivial jobs per configuration (one at a time on its idle test cluster; the medians are
#: the simulated jobs' start and end delays), and the period of the ``squeue`` polls that see a job gone.
LAUNCH_JOBS = 5
LAUNCH_POLL_S = 0.1


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
    #: --cosched-forward: the node policy acts on message arrivals (of the node policies, ICS, DCS, CC and FCS
    #: do), and every rank's partner is on the other node, so without it the policy would never see one (the
    #: sender's agent counts them in ``remote_dropped``).
    forward: bool = False

    #: Every job is a batch job (``sbatch --wrap "srun ..."``).
    submit = "sbatch"

    def srun_options(self) -> list[str]:
        """The cosched options of every job's step."""
        return (
            (["--cosched-gang"] if self.cosched_gang else [])
            + ([f"--cosched={self.cosched}"] if self.cosched else [])
            + (["--cosched-forward"] if self.forward else [])
        )


CONFIGS = [
    Config("fifo", sched="builtin"),
    Config("backfill"),
    Config("slurm-gang", mpl=2, slurm_gang=True),
    Config("nls", mpl=2, cosched="nls"),
    Config("sb", mpl=2, cosched="sb"),
    Config("hybrid", mpl=2, cosched="hybrid"),
    Config("ics", mpl=2, cosched="ics", forward=True),
    Config("cosched-gang", mpl=2, cosched_gang=True),
]
QUICK_CONFIGS = ["fifo", "slurm-gang", "hybrid", "cosched-gang"]


def sim_scheme(c: Config) -> tuple[str, str, int]:
    """The simulator's (process-level policy, node policy, MPL) for configuration `c`."""
    if c.slurm_gang:
        return f"gang[quantum_ms={SLURM_SLICE_S * 1000},rows=2]", "nls", 2
    if c.cosched_gang:
        return f"gang[quantum_ms={QUANTUM_MS},rows=2]", "nls", 2
    if c.cosched:
        return "fcfs", c.cosched, c.mpl
    if c.sched == "backfill":
        return "batch[backfill=easy,estimates=perfect]", "nls", 1
    return "batch", "nls", 1


@dataclass(frozen=True)
class Job:
    #: An application preset (with parameters) exported for cosched-ir-run, or "probe" (cosched-probe-mpich
    #: with `args`).
    app: str
    args: tuple[str, ...] = ()

    def label(self) -> str:
        return f"probe {' '.join(self.args)}" if self.app == "probe" else self.app


#: The workload (in submission order). Full: three kinds of synchronisation at one to two seconds of compute per
#: rank each, dedicated (Workpile: units of 2.8 quanta of 0.5 ms; Msg: 2000 rounds of 0.5 ms, 10 requests and a
#: barrier; Barrier: a barrier after every 0.5 ms).
WORKLOAD = [
    Job("Workpile[unit=2.8,quanta=4000]"),
    Job("Msg[quanta=2000]"),
    Job("Barrier[every=1,quanta=2000]"),
    Job("Workpile[unit=2.8,quanta=4000]"),
]
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
        p = d / f"job{k}.ir"
        p.write_text(_core.apps_export(j.app, "-", 2, 1.0, "library"))
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


@contextmanager
def test_cluster(c: Config, d: Path, tools: dict[str, Path]) -> Iterator[dict]:
    """A fresh test cluster set up for `c` in folder `d`, brought down on leaving (also on failure); yields the
    environment of its clients."""
    r = _run(_up_args(c, d, tools), timeout=180)
    if r.returncode != 0:
        raise RuntimeError(f"{c.id}: the test cluster did not come up: {r.stderr.strip()[-2000:]}")
    try:
        yield dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
    finally:
        down = _run([str(tools["testbed"]), "down", "--dir", str(d)], timeout=180)
        if down.returncode != 0:
            raise RuntimeError(f"{c.id}: the test cluster did not come down: {down.stderr.strip()}")


def _stamp(path: Path) -> float:
    """The CLOCK_REALTIME seconds a batch script wrote (``date +%s.%N``) into `path`."""
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError) as e:
        raise RuntimeError(f"launch calibration: no time stamp in {path} ({e})") from e


def measure_launch(c: Config, tools: dict[str, Path], tmp: Path, n: int = LAUNCH_JOBS) -> list[dict]:
    """Slurm's cost of starting and ending a job under `c`, measured on a fresh test cluster with `n` trivial jobs
    submitted one at a time (each on the idle cluster), as the workload's jobs are (``sbatch --wrap "srun
    --mpi=pmi2 <cosched options> cosched-probe-mpich sleepwait 0"``, 2 nodes, one rank each), with the batch script
    stamping the time before and after its ``srun``: per job, submit to script start (Slurm's scheduling pass,
    allocation, batch launch), the step (step creation, the ranks' launch, registration with the agents, MPI
    start and end of a program that does nothing else), and script end to the job gone from ``squeue`` (polled
    every ``LAUNCH_POLL_S`` s: completion, epilogue, release of the nodes)."""
    d = tmp / f"tb-launch-{c.id}"
    rows = []
    with test_cluster(c, d, tools) as env:
        for k in range(n):
            s0, s1 = tmp / f"launch-{c.id}-{k}.start", tmp / f"launch-{c.id}-{k}.end"
            step = " ".join(["srun", "--mpi=pmi2", *c.srun_options(), str(tools["probe"]), "sleepwait", "0"])
            script = f"date +%s.%N > {s0}; {step}; rc=$?; date +%s.%N > {s1}; exit $rc"
            out = str(tmp / f"launch-{c.id}-{k}.out")
            t_submit = time.time()
            r = _run(["sbatch", "--parsable", "-J", f"launch{k}", "-N2", "-n2", "--mem=100M",
                      f"--time={TIME_LIMIT_MIN}", "-o", out, "--wrap", script], env=env)
            if r.returncode != 0:
                raise RuntimeError(f"{c.id}: sbatch of launch job {k} failed: {r.stderr.strip()}")
            job = r.stdout.strip().split(";")[0]

            def gone(job: str = job) -> float | None:
                """The time of a ``squeue`` poll that no longer lists the job."""
                t = time.time()
                q = _run(["squeue", "-h", "-o", "%i"], env=env, timeout=30)
                return t if q.returncode == 0 and job not in q.stdout.split() else None

            t_poll = wait_for(gone, 120, f"{c.id}: launch job {k} to leave the queue", interval=LAUNCH_POLL_S)
            t0, t1 = _stamp(s0), _stamp(s1)
            rows.append({"config": c.id, "job": k, "submit_to_script_s": t0 - t_submit, "step_s": t1 - t0,
                         "script_end_to_gone_s": t_poll - t1})
    return rows


def launch_delays(rows: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, the simulated jobs' submit latency (median submit to script start: Slurm sees and
    starts a job submitted to free nodes this much later; a job that queues behind others is seen long before
    its turn, and starts in the second its predecessor ends, so the latency is paid at submission, not at every
    start), start delay (median step of the trivial job: step creation, rank launch, MPI start and end, which
    the simulator's programs do not have) and end delay (median script end to the job gone: the nodes are not
    free for the next job before)."""
    g = rows.groupby("config", sort=False)
    med = g[["submit_to_script_s", "step_s", "script_end_to_gone_s"]].median()
    return pd.DataFrame({
        "config": list(med.index), "jobs": g.size().values,
        "submit_to_script_s": med.submit_to_script_s.values, "step_s": med.step_s.values,
        "script_end_to_gone_s": med.script_end_to_gone_s.values,
        "submit_latency_s": med.submit_to_script_s.round(3).values,
        "start_delay_s": med.step_s.round(3).values,
        "end_delay_s": med.script_end_to_gone_s.round(3).values,
    })


def run_config(c: Config, jobs: list[Job], tools: dict[str, Path], tmp: Path, timeout_s: float, rep: int = 0) -> dict:
    """Runs the workload under `c` on a fresh test cluster (repetition `rep`); returns its job rows, state samples
    and switches."""
    d = tmp / f"tb-{c.id}-r{rep}"
    progs = _programs(jobs, tmp, tools)
    samples: list[dict] = []
    with test_cluster(c, d, tools) as env:
        opts = c.srun_options()
        t0 = time.time()
        for k, prog in enumerate(progs):
            step = ["srun", "--mpi=pmi2", *opts, *prog]
            common = ["-J", f"rs{k}", "-N2", "-n2", "--mem=100M", f"--time={TIME_LIMIT_MIN}"]
            out = str(tmp / f"{c.id}-r{rep}-job{k}.out")
            r = _run(["sbatch", "--parsable", *common, "-o", out, "--wrap", " ".join(step)], env=env)
            if r.returncode != 0:
                raise RuntimeError(f"{c.id}: sbatch of job {k} failed: {r.stderr.strip()}")
            time.sleep(SUBMIT_GAP_S)
        states: dict[str, str] = {}

        def sample_until_empty() -> bool:
            """One ``squeue`` sample of the jobs' states (kept); true once no job is left."""
            r = _run(["squeue", "-h", "-o", "%j %t"], env=env, timeout=30)
            now = time.time() - t0
            states.clear()
            states.update(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
            for name, st in states.items():
                samples.append({"config": c.id, "rep": rep, "t_s": round(now, 3), "job": int(name[2:]), "state": st})
            return r.returncode == 0 and not states

        wait_for(sample_until_empty, timeout_s, lambda: f"{c.id}: the jobs to end (still listed: {states})",
                 interval=SAMPLE_S)
        comp = d / "jobcomp.txt"

        def completions() -> tuple[pd.DataFrame] | None:
            jc = parse_jobcomp(comp.read_text() if comp.exists() else "")
            return (jc,) if len(jc) >= len(jobs) else None  # a tuple: a frame has no truth value

        (jc,) = wait_for(completions, 30, f"{c.id}: {comp} to list all {len(jobs)} jobs", interval=0.5)
        gang = []
        for f in sorted((d / "agents").glob("gang-*.jsonl")):
            gang += [dict(json.loads(x), node=f.stem[5:], rep=rep) for x in f.read_text().splitlines() if x.strip()]
        counters = agent_counters(d)
        if after_workload is not None:
            after_workload(c, d, env)
    jc = jc.assign(job=[int(n[2:]) for n in jc.name], config=c.id, rep=rep).sort_values("job")
    t_first = jc.submit_s.min()
    for col in ("submit_s", "start_s", "end_s"):
        jc[col] = jc[col] - t_first
    jc["program"] = [jobs[j].label() for j in jc.job]
    return {"jobs": jc, "samples": samples, "gang": gang, "agents": counters}


#: The agents' counters the mechanism table sums over the nodes (`AgentStats`).
AGENT_COUNTERS = ["spin_changes", "spins_refused", "forwarded_out", "forwarded_in", "forwarded_stale",
                  "remote_dropped"]


def agent_stats(d: Path, timeout_s: float = 10.0) -> dict[str, dict]:
    """Each of the test cluster's agents' counters, by node: SIGUSR1 makes each agent (started by the test cluster,
    its PID in ``testbed.json``) print them as a ``cosched-agent: stats {...}`` line in its log."""
    import signal

    testbed = json.loads((d / "testbed.json").read_text())
    agents = {x["name"].split()[1]: x["pid"] for x in testbed["daemons"] if x["name"].startswith("agent ")}
    logs = {node: d / f"agent.{node}.out" for node in agents}
    before = {node: len(f.read_text().splitlines()) for node, f in logs.items()}
    for pid in agents.values():
        os.kill(pid, signal.SIGUSR1)
    got: dict[str, dict] = {}

    def all_printed() -> bool:
        for node, f in logs.items():
            whole = f.read_text().split("\n")[:-1]  # whole lines only: the agent may be writing the last one
            new = [x for x in whole[before[node]:] if x.startswith("cosched-agent: stats ")]
            if new:
                got[node] = json.loads(new[-1].split("stats ", 1)[1])
        return len(got) == len(agents)

    wait_for(all_printed, timeout_s, lambda: f"{d}: agents {sorted(set(agents) - set(got))} to print their counters")
    return got


def agent_counters(d: Path, timeout_s: float = 10.0) -> dict[str, int]:
    """The test cluster's agents' counters ``AGENT_COUNTERS`` summed over its nodes (``agent_stats``)."""
    got = agent_stats(d, timeout_s)
    return {k: int(sum(v.get(k, 0) for v in got.values())) for k in AGENT_COUNTERS}


METRICS = ["makespan_s", "mean_wait_s", "mean_exec_s", "mean_response_s", "mean_slowdown"]


def metrics(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and repetition: makespan, mean wait, execution, response and slowdown (against the
    job's median execution under fifo over the repetitions)."""
    j = jobs.copy()
    if "rep" not in j:
        j["rep"] = 0
    j["wait_s"] = j.start_s - j.submit_s
    j["exec_s"] = j.end_s - j.start_s
    j["response_s"] = j.end_s - j.submit_s
    ded = j[j.config == "fifo"].groupby("job").exec_s.median()
    j["slowdown"] = [
        r / ded[k] if k in ded.index and ded[k] > 0 else float("nan") for k, r in zip(j.job, j.response_s, strict=True)
    ]
    g = j.groupby(["config", "rep"], sort=False)
    keys = list(g.groups)
    return pd.DataFrame(
        {
            "config": [k[0] for k in keys],
            "rep": [k[1] for k in keys],
            "jobs": g.size().values,
            "completed": g.state.apply(lambda s: int((s == "COMPLETED").sum())).values,
            "makespan_s": (g.end_s.max() - g.submit_s.min()).values,
            "mean_wait_s": g.wait_s.mean().values,
            "mean_exec_s": g.exec_s.mean().values,
            "mean_response_s": g.response_s.mean().values,
            "mean_slowdown": g.slowdown.mean().values,
        }
    )


def summarize(m: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (in order of first appearance): the repetitions, and each metric's median, min and max
    over them."""
    g = m.groupby("config", sort=False)
    out = pd.DataFrame({"config": list(g.groups), "repetitions": g.size().values,
                        "completed": g.completed.sum().values, "jobs": g.jobs.sum().values})
    for c in METRICS:
        out[c] = g[c].median().values
        out[c.removesuffix("_s") + "_min" + ("_s" if c.endswith("_s") else "")] = g[c].min().values
        out[c.removesuffix("_s") + "_max" + ("_s" if c.endswith("_s") else "")] = g[c].max().values
    return out


def spread_table(s: pd.DataFrame) -> pd.DataFrame:
    """The summary as text cells: 'median (min-max)' per metric."""

    def cell(row: pd.Series, c: str) -> str:
        base, unit = (c.removesuffix("_s"), "_s") if c.endswith("_s") else (c, "")
        lo, hi = row[f"{base}_min{unit}"], row[f"{base}_max{unit}"]
        return f"{row[c]:.2f}" if lo == hi else f"{row[c]:.2f} ({lo:.2f}-{hi:.2f})"

    t = pd.DataFrame({"config": s.config, "runs": s.repetitions, "completed": [f"{a}/{b}" for a, b in
                                                                              zip(s.completed, s.jobs, strict=True)]})
    for c in METRICS:
        t[c] = [cell(r, c) for _, r in s.iterrows()]
    return t


def overlaps(jobs: pd.DataFrame) -> int:
    """Pairs of jobs of one repetition whose [start, end) intervals overlap by more than Slurm's one-second
    resolution, summed over the repetitions."""
    n = 0
    for _, r in jobs.groupby("rep") if "rep" in jobs else [(0, jobs)]:
        iv = sorted(zip(r.start_s, r.end_s, strict=True))
        n += sum(1 for i, a in enumerate(iv) for b in iv[i + 1 :] if min(a[1], b[1]) - max(a[0], b[0]) > 1.0)
    return n


def mechanisms(cfg: str, jobs: pd.DataFrame, samples: pd.DataFrame, gang: pd.DataFrame) -> dict:
    """What the records show of each configuration's mechanism (computed, not asserted)."""
    s = samples[samples.config == cfg] if len(samples) else samples
    if "rep" not in s:
        s = s.assign(rep=0)
    by_t = s.groupby(["rep", "t_s"]).state.apply(list) if len(s) else pd.Series(dtype=object)
    both_running = int(sum(1 for v in by_t if v.count("R") >= 2))
    suspended = int(sum(1 for v in by_t if "S" in v))
    # Suspensions: a job seen running (R) at one sample and suspended (S) at its next (Slurm's time slicing).
    suspensions = 0
    for _, js in s.sort_values("t_s").groupby(["rep", "job"]):
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


def machine_preset(calibration: Path | None, quick: bool, work: Path) -> tuple[dict, str]:
    """The `[node_platform]` of this machine by real-vs-sim's own preset code, and where it came from."""
    from . import osfit, realsim

    if calibration is not None:
        try:
            cal = json.loads(Path(calibration).read_text())
            bench, fit = cal["microbenchmarks"], cal["os_fit"][MPI]
            os_model = fit["chosen"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{calibration}: not a real-vs-sim calibration.json with {MPI} measurements "
                             f"(missing or unreadable: {e})") from e
        prov = cal.get("provenance", {})
        la = cal.get("load_average", {}).get("before", [])
        load = f"{la[0]:.1f}" if la else "?"
        how = (f"from `{calibration}` (real-vs-sim, commit `{str(prov.get('git_commit', '?'))[:12]}`, 1-minute load "
               f"average {load} before it; OS model {os_model} as fitted there)")
        return realsim.preset(bench, MPI, os_model), how
    bench = realsim.microbenchmarks([MPI], quick, work, lambda m: None)
    fit = osfit.fit(bench["timeshare"], lambda t: realsim.platform(bench, MPI, t), *realsim.timeshare_size(quick),
                    work / "osfit")
    return realsim.preset(bench, MPI, fit["chosen"]), (
        "measured afresh by real-vs-sim's micro-benchmarks before the real runs (no `--calibration` given); OS "
        f"model {fit['chosen']} fitted as real-vs-sim fits it, on the time sharing of one CPU (error "
        f"{fit['error'][fit['chosen']]:.3f})")


def sim_config(c: Config, jobs: list[Job], platform: dict,
               delays: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> dict:
    """The simulator's configuration of `c` with the workload `jobs` on `platform`, every job given Slurm's
    (submit latency, start delay, end delay) `delays` (seconds, from the launch calibration): it reaches the
    scheduler the latency after its submission, and holds its processors without computing for the start delay
    when it starts and for the end delay after its work."""
    policy, node_policy, mpl = sim_scheme(c)
    latency = delays[0]
    extra = {k: v for k, v in zip(("start_delay_s", "end_delay_s"), delays[1:], strict=True) if v > 0}
    return {
        "fidelity": "process",
        "seed": 1,
        "node_platform": platform,
        "workload": {"jobs": [{"app": j.app, "procs": 2, "submit_s": round(k * SUBMIT_GAP_S + latency, 3), **extra}
                              for k, j in enumerate(jobs)]},
        "scheduler": {"policy": policy, "node_policy": node_policy, "mpl": mpl},
    }


def simulate(configs: list[Config], jobs: list[Job], platform: dict, work: Path,
             delays: dict[str, tuple[float, float, float]] | None = None) -> pd.DataFrame:
    """Each configuration simulated once (deterministic): its scheme and mean response, wait and execution; with
    `delays`, each configuration's jobs get its (submit latency, start delay, end delay), and the wait and
    response count from the real submission (the latency before the simulated one added back)."""
    from . import realsim

    rows = []
    for c in configs:
        d = (delays or {}).get(c.id, (0.0, 0.0, 0.0))
        cfg = sim_config(c, jobs, platform, d)
        s = realsim.run_sim(cfg, work / "sim" / c.id)
        sch = cfg["scheduler"]
        rows.append({"config": c.id, "sim_scheme": f"{sch['policy']} + {sch['node_policy']}, MPL {sch['mpl']}",
                     "sim_makespan_s": float(s["makespan_s"]), "sim_mean_wait_s": float(s["mean_wait_s"]) + d[0],
                     "sim_mean_response_s": float(s["mean_response_s"]) + d[0]})
    return pd.DataFrame(rows)


def compare(summary: pd.DataFrame, sim: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Real (median) against simulated mean response per configuration, and the rank agreement across them."""
    from . import realsim

    t = summary[["config", "mean_response_s", "mean_response_min_s", "mean_response_max_s"]].merge(sim, on="config")
    t = t.rename(columns={"mean_response_s": "real_mean_response_s", "mean_response_min_s": "real_min_s",
                          "mean_response_max_s": "real_max_s"})
    t["error"] = (t.sim_mean_response_s - t.real_mean_response_s) / t.real_mean_response_s
    real, simv = list(t.real_mean_response_s), list(t.sim_mean_response_s)
    order_real = [c for _, c in sorted(zip(real, t.config, strict=True))]
    order_sim = [c for _, c in sorted(zip(simv, t.config, strict=True))]
    agree = {"kendall_tau": realsim.kendall(real, simv), "same_order": order_real == order_sim,
             "real_order": order_real, "sim_order": order_sim}
    if "sim_nolaunch_mean_response_s" in t:
        # The same simulation without Slurm's launch and end (the jobs start their work at once).
        t["error_nolaunch"] = (t.sim_nolaunch_mean_response_s - t.real_mean_response_s) / t.real_mean_response_s
        agree["kendall_tau_nolaunch"] = realsim.kendall(real, list(t.sim_nolaunch_mean_response_s))
    return t, agree


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _launch_section(launch: pd.DataFrame | None) -> list[str]:
    if launch is None:
        return ["Not measured for the quick workload (it has no simulated column).", ""]
    t = launch.assign(**{c: [f"{v:.3f}" for v in launch[c]] for c in launch.columns if c.endswith("_s")})
    return [
        f"Before the real runs, each configuration's test cluster ran {LAUNCH_JOBS} trivial jobs one at a time "
        "(`sbatch --wrap \"date; srun --mpi=pmi2 <options> cosched-probe-mpich sleepwait 0; date\"`, 2 nodes): "
        "submit to the batch script's start, the step (step creation, rank launch, registration with the agents, "
        "MPI start and end of a program that does nothing else), and the script's end to the job gone from "
        f"`squeue` (polled every {LAUNCH_POLL_S} s). Medians (`launch.csv`, every job in `launch_jobs.csv`). The "
        "simulated jobs of the configuration get them as calibration parameters: submit latency = submit to "
        "start (the job reaches the simulated scheduler that much after its submission, so a job that queues "
        "behind others does not pay it again at its start, as in Slurm; waits and responses count from the real "
        "submission), start delay = the step, end delay = end to gone (`workload.jobs[i].start_delay_s`, "
        "`end_delay_s`: the job holds its processors without computing); they are measured, never fitted to the "
        "results below.",
        "",
        md_table(t),
        "",
    ]


def _sim_section(cmp: pd.DataFrame | None, agree: dict | None, how: str) -> list[str]:
    if cmp is None or agree is None:
        return ["Not given for the quick workload: its probe jobs sleep, which no simulator preset models (the "
                "full workload has the column).", ""]
    t = pd.DataFrame({
        "config": cmp.config, "simulated scheme": cmp.sim_scheme,
        "real mean response s (median, min-max)": [f"{r:.2f} ({a:.2f}-{b:.2f})" for r, a, b in
                                                   zip(cmp.real_mean_response_s, cmp.real_min_s, cmp.real_max_s,
                                                       strict=True)],
        "simulated s": [f"{v:.2f}" for v in cmp.sim_mean_response_s],
        "error": [f"{e:+.1%}" for e in cmp.error],
    })
    nolaunch = []
    if "error_nolaunch" in cmp:
        t["simulated without launch s"] = [f"{v:.2f}" for v in cmp.sim_nolaunch_mean_response_s]
        t["error without launch"] = [f"{e:+.1%}" for e in cmp.error_nolaunch]
        nolaunch = [f"Without the launch calibration (jobs start their work at once): Kendall tau "
                    f"{agree['kendall_tau_nolaunch']:+.2f}.", ""]
    return [
        f"Preset of this machine (`realsim.preset`, {MPI}) {how}. Each configuration simulated once (deterministic; "
        "`simulated.csv`), its jobs with the start and end delays of the launch calibration (above). The real "
        "times are Slurm's (one-second resolution).",
        "",
        md_table(t),
        "",
        f"Rank order of the configurations by mean response: Kendall tau {agree['kendall_tau']:+.2f}, "
        f"same order: {'yes' if agree['same_order'] else 'no'}.",
        "",
        *nolaunch,
        f"- real (fastest first): {' < '.join(agree['real_order'])}",
        f"- simulated: {' < '.join(agree['sim_order'])}",
        "",
    ]


def _analyze(_: Gathered, settings: Settings) -> Outcome:
    tools = _tools()
    configs = [c for c in CONFIGS if not settings.quick or c.id in QUICK_CONFIGS]
    work = QUICK_WORKLOAD if settings.quick else WORKLOAD
    reps = settings.repeat if settings.repeat is not None else (1 if settings.quick else FULL_REPEAT)
    timeout = 240.0 if settings.quick else 900.0
    load_before = _loadavg()
    jobs, samples, gang, counters = [], [], [], []
    sim = cmp = agree = launch = None
    how = ""
    with tempfile.TemporaryDirectory(prefix="cosched-real-slurm-") as tmp:
        if not settings.quick:
            # Measured (or read) before the real runs, so that the micro-benchmarks run on a machine the test
            # clusters do not load; then Slurm's launch and end costs, each configuration on its own test cluster.
            platform, how = machine_preset(settings.calibration, settings.quick, Path(tmp))
            launch_jobs = pd.DataFrame([x for c in configs for x in measure_launch(c, tools, Path(tmp))])
            launch = launch_delays(launch_jobs)
        for r in range(reps):
            for c in configs:
                res = run_config(c, work, tools, Path(tmp), timeout, rep=r)
                jobs.append(res["jobs"])
                samples += res["samples"]
                gang += [dict(x, config=c.id) for x in res["gang"]]
                counters.append(dict(res["agents"], config=c.id))
        if launch is not None:
            delays = {r.config: (r.submit_latency_s, r.start_delay_s, r.end_delay_s) for r in launch.itertuples()}
            sim = simulate(configs, work, platform, Path(tmp) / "launch", delays).merge(
                simulate(configs, work, platform, Path(tmp) / "nolaunch")[["config", "sim_mean_response_s"]]
                .rename(columns={"sim_mean_response_s": "sim_nolaunch_mean_response_s"}), on="config")
    load_after = _loadavg()
    jdf = pd.concat(jobs, ignore_index=True)
    sdf = pd.DataFrame(samples, columns=["config", "rep", "t_s", "job", "state"])
    gdf = pd.DataFrame(gang)
    if len(gdf):
        gdf = gdf.assign(boundary_s=(gdf.boundary_ns - gdf.boundary_ns.min()) / 1e9)
    m = metrics(jdf)
    summ = summarize(m)
    if sim is not None:
        cmp, agree = compare(summ, sim)
    mech = pd.DataFrame([mechanisms(c.id, jdf, sdf, gdf) for c in configs]).merge(
        pd.DataFrame(counters).groupby("config", sort=False).sum().reset_index(), on="config", how="left")
    cfg_rows = pd.DataFrame(
        [
            {
                "config": c.id,
                "sched": f"sched/{c.sched}",
                "oversubscribe": f"FORCE:{c.mpl}" if c.mpl > 1 else "NO",
                "preempt": "GANG" if c.slurm_gang else "OFF",
                "cosched": " ".join(c.srun_options()) or "-",
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
        "(jobcomp/filetxt, one-second resolution); slowdown is against the job's median execution under `fifo`. "
        f"Every configuration ran {reps} time(s) on a fresh test cluster, the configurations interleaved. "
        f"The machine was shared with other work: load average {load_before} before, {load_after} after; every "
        "time is a loaded time.",
        "",
        md_table(cfg_rows),
        "",
        "## Results",
        "",
        f"Median over the {reps} repetition(s), with the spread (min-max) when they differ; every repetition's "
        "figures are in `metrics.csv`, the medians and spreads in `summary.csv`.",
        "",
        md_table(spread_table(summ)),
        "",
        "## Mechanism records",
        "",
        f"Sampled `squeue` states every {SAMPLE_S} s (`samples.csv`): samples with two jobs running at once, with a "
        "job suspended, and suspensions (a job seen running, then suspended at the next sample: Slurm's "
        "time slicing); cosched gang slot switches "
        "recorded by the agents (`gang.csv`); job pairs whose executions overlap by more than one second. "
        "Summed over the repetitions.",
        "",
        md_table(mech),
        "",
        "## Slurm's launch and end (calibration)",
        "",
        *_launch_section(launch),
        "## Simulated counterpart",
        "",
        *_sim_section(cmp, agree, how),
    ]
    files = {
        "metrics.csv": csv_writer(m),
        "summary.csv": csv_writer(summ),
        "jobs_slurm.csv": csv_writer(jdf),
        "samples.csv": csv_writer(sdf),
        "gang.csv": csv_writer(gdf),
        "mechanisms.csv": csv_writer(mech),
        "configs.csv": csv_writer(cfg_rows),
    }
    if cmp is not None:
        files["simulated.csv"] = csv_writer(cmp.assign(kendall_tau=agree["kendall_tau"]))
    if launch is not None:
        files["launch.csv"] = csv_writer(launch)
        files["launch_jobs.csv"] = csv_writer(launch_jobs)
    return Outcome(report="\n".join(lines), files=files)


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
