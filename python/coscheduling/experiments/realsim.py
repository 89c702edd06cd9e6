"""``cosched reproduce real-vs-sim``: the simulator checked against real execution on this machine.

Steps (docs/real.md, "Real against simulated"):

1. **Micro-benchmarks** on this machine, each alone (dedicated): the half round trip of an 8-byte and a
   1 MiB ping-pong between two ranks through the shim (``cosched-probe pingpong``) spinning and blocking,
   per MPI; the cost of a context switch on one CPU (``cosched-ctxswitch``, lmbench's lat_ctx method); the
   compute loop's speed (a compute-only ``Emp`` job run by ``cosched-ir-run``: CPU time asked / wall time);
   the OS noise a compute loop sees on each virtual node's CPU (``cosched-detour``, selfish detour);
   what waking a rank blocked in a futex costs, across CPUs, on one CPU and onto a busy CPU
   (``cosched-wakeup``; compared with what the preset charges a wake-up, not a preset field).
2. **The native scheduler model**, one for the machine (every MPI's preset): fitted on how this machine
   time-shares one CPU (:mod:`.osfit`: run slices of 2 and 3 spinners and wake-up preemption of a
   sleeper, measured by ``cosched-timeshare`` and simulated through each candidate OS model with the
   preset's costs; the smallest error wins). As a check, every OS model of the simulator (``cfs``,
   ``linux24``, ``mlfq``, ``rr``, default parameters) and the chosen one also simulate the dedicated
   cases (one job of each granularity alone), with their mean absolute log error against the real
   dedicated runs (median of ``reps``): one rank per CPU, so these barely tell the models apart.
3. **The preset** of this machine: ``lee4`` (no memory limit, no power model) with 2 nodes
   and every cost replaced by a measurement (``PRESET_FIELDS`` says which measurement gives which field).
4. **The comparison**: 2 virtual nodes of one CPU, at each granularity a workload of identical jobs of 2
   ranks (seed 003's ``Barrier``: a barrier after every ``every`` quanta of 0.5 ms of compute), every
   scheme run for real ``reps`` times (median) and simulated once with the preset, per MPI present; per
   scheme the mean response time real and simulated and the relative error, and per (MPI, granularity)
   the rank order agreement of the schemes (Kendall's tau and whether the orders are equal). The MPI
   library's own waits run as baselines (``BASELINES``), simulated as NLS (polling) or with the
   ``yield`` node policy (Open MPI's yield mode).
5. **Why they differ**: per compared row, the simulated timeline's co-run and lockstep shares and
   busy-waiting against the real runs' CPU time beyond the compute asked and CPU busy share
   (:func:`sim_trace`, :func:`real_trace`), and a reading naming the mechanism that departs (:func:`why`).

Outputs in ``OUT`` (written all or nothing with the experiment's ``report.md``): ``table.csv`` and
``calibration.json`` (measurements, the time-sharing fit ``os_timeshare_fit``, the runtime check, presets,
each real run's time, provenance), and ``runs.csv``: one row per real run (:func:`real_runs`), the runs the
command's closing line counts. The experiment has no
cached simulation runs: real timings are never reused. Real timings depend on what else runs on the
machine: the report states the load average.
"""

from __future__ import annotations

import functools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _core
from ..output import command_line, provenance
from ..real_bench import build_dir, mpi_command, mpis_present
from . import Experiment, Outcome, Settings, csv_writer, osfit, register
from .runner import Gathered

ID = "real-vs-sim"
TITLE = "real execution on this machine against the simulator with a preset measured here"

#: (label, process-level policy, node policy); gang's rows are the workload's job count.
SCHEMES: tuple[tuple[str, str, str], ...] = (
    ("NLS", "fcfs", "nls"),
    ("BLOCK", "fcfs", "block"),
    ("SB", "fcfs", "sb"),
    ("DCS", "fcfs", "dcs"),
    ("PB", "fcfs", "pb"),
    ("CC", "fcfs", "cc"),
    ("HYBRID", "fcfs", "hybrid"),
    ("ICS", "fcfs", "ics"),
    ("YIELD", "fcfs", "yield"),
    ("GANG", "gang", "nls"),
    ("BATCH", "batch", "nls"),
)
#: Baselines of the MPI library's own waits (the shim replaces no wait, ``real.library_waits``): label,
#: the ranks' extra environment, the MPIs they apply to, the node policy that simulates them. ``LIB``:
#: the library's default (Debian MPICH 4 and Open MPI 4.1 both poll while waiting), simulated as NLS;
#: ``LIB-YIELD``: Open MPI's ``mpi_yield_when_idle`` (the polling loop calls ``sched_yield``),
#: simulated by the ``yield`` node policy. Both run FCFS.
BASELINES: tuple[tuple[str, dict[str, str], tuple[str, ...], str], ...] = (
    ("LIB", {}, ("mpich", "openmpi"), "nls"),
    ("LIB-YIELD", {"OMPI_MCA_mpi_yield_when_idle": "1"}, ("openmpi",), "yield"),
)
QUICK_SCHEMES = ("NLS", "BLOCK", "GANG", "BATCH", "LIB")
#: The simulator's OS models, in the order that breaks ties of the fit.
OS_MODELS = ("cfs", "linux24", "mlfq", "rr")
GANG_QUANTUM_MS = 100
#: Real repetitions of every run (the median is compared).
REPS = 3


@dataclass(frozen=True)
class Grain:
    """One granularity: ``jobs`` identical ``Barrier`` jobs of 2 ranks, a barrier every ``every`` quanta
    (0.5 ms each) of compute, ``quanta`` quanta per rank."""

    name: str
    every: float
    quanta: float
    jobs: int

    @property
    def app(self) -> str:
        return f"Barrier[every={self.every:g},quanta={self.quanta:g}]"


FULL_GRAINS = (Grain("fine", 0.4, 1000, 2), Grain("coarse", 4.0, 1000, 3))
#: A job that does almost nothing (one barrier after 0.5 ms): its response time is the launch time
#: (mpiexec, MPI_Init, registration with the agent, MPI_Finalize, the controller's polling).
LAUNCH_GRAIN = Grain("launch", 1.0, 1, 1)
#: The quick run's grains (its MPI is MPICH where present). Rule: a rank's compute (``quanta`` x 0.5 ms) at
#: least 3 times MPICH's launch time measured idle, so that the dedicated run minus the launch (what the
#: runtime check compares) is mostly compute: the launch's medians in three full runs started idle (load
#: average 0.06-0.13) were 0.057, 0.076 and 0.077 s, 3 x 0.077 = 0.231 s, so 500 quanta (0.25 s). (100
#: quanta, 0.05 s, left the dedicated run within the launch's spread: loaded, launch 0.187 s and dedicated
#: 0.250-0.260 s, medians; a run at load average 4.4 found a dedicated run no longer than the launch.)
QUICK_GRAINS = (Grain("fine", 0.4, 500, 2), Grain("coarse", 4.0, 500, 2))

#: Each preset field and the measurement that gives it.
PRESET_FIELDS = {
    "latency_us": "half round trip (10th percentile, as every ping-pong figure here) of an 8-byte ping-pong "
                  "through the shim, spinning (MPI's own cost included)",
    "bandwidth_mb_s": "1 MiB over (half round trip of 1 MiB - half round trip of 8 bytes), spinning",
    "send_overhead_us": "0: a ping-pong cannot split the sender's CPU time from the latency (all in latency_us)",
    "recv_overhead_us": "0: likewise (all in latency_us)",
    "interrupt_us": "one-way delay of 8 bytes to a receiver blocked in a futex (`cosched-probe oneway`: the sender "
                    "computes 50 us first, so the receiver is asleep) - the spinning half round trip, 10th "
                    "percentiles: the cost of waking a rank blocked in a futex",
    "context_switch_us": "cosched-ctxswitch: pipe hand-over between two processes on CPU 0 minus the pipe alone",
    "cpu_speed": "compute CPU time asked / wall time of a compute-only Emp job of 2 ranks (cosched-ir-run)",
    "os": "the candidate OS model whose simulated time sharing of one CPU is closest to the measured one "
          "(`cosched-timeshare`: median run slice of 2 and of 3 spinners, median and mean time a spinner still "
          "holds the CPU after a sleeper's wake-up; step 2); a cfs model's slice_cv is the coefficient of "
          "variation of the real slices of 2 spinners, mean of the CPUs",
    "nodes": "2: the virtual nodes of the real runs (one CPU each)",
    "boost_recheck": "agent: the real runs' boosts are the node agent's, which repeats its reschedule check of a "
                     "boost until run on the schedule of cosched-rules boost.rs (every 250 us, then backing off; "
                     "dropped after 48 checks) and boosts a recommended rank until it runs: a property of the "
                     "mechanism, not a measurement",
    "os_noise_tick_us": "cosched-detour (selfish detour, Beckman et al., Cluster 2006) on each virtual node's CPU: "
                        "the share of a compute loop's running time lost to detours under 100 us (interrupts, "
                        "kernel work), mean of the CPUs, times the OS model's timer period (cfs 4 ms, else 10 ms)",
}
#: The period of each OS model's timer interrupt, us (the simulator's ``os::timer_tick``), over which
#: ``os_noise_tick_us`` is the mean CPU time lost.
TIMER_TICK_US = {"cfs": 4000.0, "linux24": 10000.0, "mlfq": 10000.0, "rr": 10000.0}
#: The eevdf model's default ``tick_ms`` (HZ = 250), us; its timer period is its own ``tick_ms``.
EEVDF_TICK_US = 4000.0


def timer_tick_us(os_table: dict[str, Any]) -> float:
    """The period of the timer interrupt of OS model ``os_table``, us."""
    if os_table["model"] == "eevdf":
        return 1000.0 * float(os_table.get("tick_ms", EEVDF_TICK_US / 1000.0))
    return TIMER_TICK_US[os_table["model"]]
#: The CPUs of the virtual nodes (one each).
NODE_CPUS = (0, 1)


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> str:
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return r.stdout


def pingpong(mpi: str, wait: str, nbytes: int, iters: int) -> dict[str, float]:
    """The probe's ping-pong between two ranks with the shim in wait mode ``wait`` (no agent)."""
    probe = str(build_dir() / f"cosched-probe-{mpi}")
    cmd, env = mpi_command(mpi, 2, [probe, "pingpong", str(iters), str(nbytes)], wait)
    d = json.loads(_run(cmd, env).strip().splitlines()[-1])
    return {"half_rtt_us": d["half_rtt_ns"] / 1e3, "p10_us": d["half_rtt_p10_ns"] / 1e3,
            "p90_us": d["half_rtt_p90_ns"] / 1e3, "iters": iters, "bytes": nbytes}


#: `cosched-probe oneway`: the sender's compute before each message, us (far longer than a receiver takes
#: to fall asleep, so a blocking receive always sleeps).
ONEWAY_GAP_US = 50


def oneway(mpi: str, wait: str, iters: int) -> dict[str, float]:
    """The probe's one-way delay of 8 bytes to a receiver in wait mode ``wait`` (no agent): each message is
    sent ``ONEWAY_GAP_US`` after the previous one arrived, stamped with the sender's clock."""
    probe = str(build_dir() / f"cosched-probe-{mpi}")
    cmd, env = mpi_command(mpi, 2, [probe, "oneway", str(iters), str(ONEWAY_GAP_US)], wait)
    d = json.loads(_run(cmd, env).strip().splitlines()[-1])
    return {"oneway_us": d["oneway_ns"] / 1e3, "p10_us": d["oneway_p10_ns"] / 1e3,
            "p90_us": d["oneway_p90_ns"] / 1e3, "iters": iters, "gap_us": ONEWAY_GAP_US}


def context_switch(rounds: int) -> dict[str, float]:
    exe = build_dir() / "cosched-ctxswitch"
    if not exe.is_file():
        raise RuntimeError(f"{exe} is missing: build it with `make real`")
    return dict(json.loads(_run([str(exe), "0", str(rounds)])))


def detour(cpu: int, seconds: float) -> dict[str, float]:
    """The interruptions a compute loop sees on ``cpu`` (``cosched-detour``, selfish detour)."""
    exe = build_dir() / "cosched-detour"
    if not exe.is_file():
        raise RuntimeError(f"{exe} is missing: build it with `make real`")
    return dict(json.loads(_run([str(exe), str(cpu), f"{seconds:g}"])))


def wakeup(rounds: int) -> dict[str, Any]:
    """What waking a rank blocked in a futex costs on the node CPUs (``cosched-wakeup``): per case
    (``spin``, ``cross``, ``same``, ``busy``) the percentiles of the delay from the waker's
    FUTEX_WAKE to the woken process running."""
    exe = build_dir() / "cosched-wakeup"
    if not exe.is_file():
        raise RuntimeError(f"{exe} is missing: build it with `make real`")
    return dict(json.loads(_run([str(exe), str(NODE_CPUS[0]), str(NODE_CPUS[1]), str(rounds)])))


#: The cases of ``cosched-wakeup`` and the percentiles kept of each.
WAKEUP_CASES = ("spin", "cross", "same", "busy")
WAKEUP_STATS = ("p10_us", "p50_us", "p90_us")


def wakeup_medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per case and percentile, the median over the runs of ``cosched-wakeup``."""
    return {c: {k: statistics.median(r[c][k] for r in runs) for k in WAKEUP_STATS} for c in WAKEUP_CASES}


def wake_charged_us(plat: dict[str, Any]) -> float:
    """What the simulator charges a wake-up of a blocked rank with this preset: the interrupt's CPU time
    and one context switch (both paid on the woken rank's CPU)."""
    return float(plat["interrupt_us"]) + float(plat["context_switch_us"])


def _ir_program(app: str, procs: int, work: Path) -> Path:
    text = _core.apps_export(app, "-", procs, 1.0, "library")
    p = work / f"{app.replace('[', '_').replace(']', '').replace(',', '_').replace('=', '')}.ir"
    p.write_text(text)
    return p


def compute_speed(mpi: str, quanta: float, work: Path) -> dict[str, float]:
    """A compute-only job of 2 ranks without the shim: compute asked / (ranks x wall)."""
    prog = _ir_program(f"Emp[quanta={quanta:g}]", 2, work)
    cmd, env = mpi_command(mpi, 2, [str(build_dir() / f"cosched-ir-run-{mpi}"), str(prog)], None)
    d = json.loads(_run(cmd, env).strip().splitlines()[-1])
    return {"compute_asked_s": d["compute_asked_ns"] / 1e9, "wall_s": d["wall_ns"] / 1e9,
            "cpu_speed": d["compute_asked_ns"] / (2 * d["wall_ns"])}


#: The largest bandwidth a ping-pong of 1 MiB on this machine can show, MB/s (100 GB/s: ten times the
#: 8.8-9.4 GB/s measured through the shim on an idle machine, beyond any memory copy here). A larger one
#: means the 8-byte ping-pong's 10th percentile was not a round in which both ranks held their CPUs.
MAX_BANDWIDTH_MB_S = 1e5
#: Retries of the spinning ping-pongs whose bandwidth is implausible, each with 4 times the rounds.
PINGPONG_RETRIES = 2


def bandwidth_mb_s(small_us: float, big_us: float) -> float:
    """1 MiB over the half round trip of 1 MiB less that of 8 bytes (us): MB/s; infinite when the
    difference is not positive."""
    return (1 << 20) / (big_us - small_us) if big_us > small_us else math.inf


def spinning_pingpongs(mpi: str, iters_small: int, iters_big: int, say: Callable[[str], None],
                       measure: Callable[[str, str, int, int], dict[str, float]] | None = None,
                       blocked_oneway_us: float = math.inf) -> dict[str, Any]:
    """The spinning ping-pongs of 8 bytes and 1 MiB (``spin_8``, ``spin_1m``). Under heavy other load the
    two spinning ranks rarely hold their CPUs together and the 8-byte 10th percentile can reach the 1 MiB
    one: the bandwidth is then implausible (over ``MAX_BANDWIDTH_MB_S``); or it can reach
    ``blocked_oneway_us``, the 10th percentile of the one-way delay to a receiver asleep in a futex (a
    spinning receiver, which needs no wake-up, cannot be slower but for lost CPUs; the preset's wake-up
    cost would be negative). Either way both are measured again with 4 times the rounds, at most
    ``PINGPONG_RETRIES`` times; then a clear error. Every try is kept (``tries``)."""
    measure = measure or pingpong
    tries: list[dict[str, Any]] = []
    for k in range(PINGPONG_RETRIES + 1):
        scale = 4**k
        small = measure(mpi, "spin", 8, iters_small * scale)
        big = measure(mpi, "spin", 1 << 20, iters_big * scale)
        bw = bandwidth_mb_s(small["p10_us"], big["p10_us"])
        tries.append({"spin_8_p10_us": small["p10_us"], "spin_1m_p10_us": big["p10_us"], "bandwidth_mb_s": bw})
        if bw <= MAX_BANDWIDTH_MB_S and small["p10_us"] < blocked_oneway_us:
            return {"spin_8": small, "spin_1m": big, "tries": tries}
        say(f"{mpi}: spinning ping-pong swamped by other load (8 B p10 {small['p10_us']:.1f} us, 1 MiB p10 "
            f"{big['p10_us']:.1f} us, blocked one-way p10 {blocked_oneway_us:.1f} us); again with "
            f"{4 * scale} times the rounds")
    la = os.getloadavg()
    raise RuntimeError(
        f"{mpi}: the spinning ping-pong cannot measure the bandwidth under this load (load average "
        f"{la[0]:.1f}): in {len(tries)} tries, up to {iters_small * 4**PINGPONG_RETRIES} rounds of 8 bytes and "
        f"{iters_big * 4**PINGPONG_RETRIES} of 1 MiB, the 8-byte half round trip's 10th percentile was never "
        f"far enough below the 1 MiB one and below the blocked one-way delay's (last: "
        f"{tries[-1]['spin_8_p10_us']:.1f} us against {tries[-1]['spin_1m_p10_us']:.1f} us and "
        f"{blocked_oneway_us:.1f} us; a bandwidth over {MAX_BANDWIDTH_MB_S:g} MB/s, or a spinning receiver "
        "slower than a sleeping one, is not plausible): the two ranks rarely held their CPUs together. Run it "
        "on a less loaded machine.")


def microbenchmarks(mpis: list[str], quick: bool, work: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Step 1: every measurement (the preset's sources), medians of 3 where repeated."""
    iters_small, iters_big = (300, 30) if quick else (3000, 200)
    out: dict[str, Any] = {"mpi": {}}
    for mpi in mpis:
        say(f"ping-pong through the shim ({mpi})")
        blocked = oneway(mpi, "block", iters_small)
        out["mpi"][mpi] = {"block_8": pingpong(mpi, "block", 8, iters_small), "block_oneway": blocked,
                           **spinning_pingpongs(mpi, iters_small, iters_big, say,
                                                blocked_oneway_us=blocked["p10_us"])}
    say("context switch")
    out["context_switch"] = context_switch(2000 if quick else 20000)
    say("OS noise (selfish detour)")
    runs = [detour(cpu, 0.5 if quick else 3.0) for cpu in NODE_CPUS]
    out["detour"] = {"runs": runs, "short_fraction": statistics.mean(r["short_fraction"] for r in runs)}
    say("time sharing of one CPU (run slices, wake-up preemption)")
    out["timeshare"] = osfit.measure(build_dir(), NODE_CPUS, *timeshare_size(quick))
    say("wake-up of a blocked process (futex)")
    runs = [wakeup(1000 if quick else 5000) for _ in range(1 if quick else 3)]
    out["wakeup"] = {"runs": runs, "median": wakeup_medians(runs)}
    say("compute loop speed")
    runs = [compute_speed(mpis[0], 200 if quick else 2000, work) for _ in range(3)]
    out["compute"] = {"runs": runs, "cpu_speed": statistics.median(r["cpu_speed"] for r in runs), "mpi": mpis[0]}
    return out


def timeshare_size(quick: bool) -> tuple[float, int]:
    """The time-sharing micro-benchmark's size, measured and simulated: seconds of each slices run,
    wake-ups of the sleeper (25 ms each on average)."""
    return (0.5, 20) if quick else (2.0, 100)


def slice_cv(bench: dict[str, Any]) -> float:
    """The measured spread of the real slices: from the time-sharing benchmark, or in a calibration
    recorded before it from `cosched-detour pair`; none in one recorded before either (every node in step,
    as then)."""
    if "timeshare" in bench:
        return float(bench["timeshare"]["features"]["slice_cv"])
    return float(bench.get("slices", {}).get("slice_cv", 0.0))


def _os(bench: dict[str, Any], os_model: str) -> dict[str, Any]:
    """The ``os`` table of candidate ``os_model`` (a label of ``osfit.CANDIDATES``; the plain model names
    are the models at their default parameters): a cfs model gets the measured spread of the real slices
    (each node draws its own)."""
    if os_model not in dict(osfit.CANDIDATES):
        raise ValueError(f"unknown OS model {os_model!r}; valid: {', '.join(lab for lab, _ in osfit.CANDIDATES)}")
    return osfit.candidate_os(os_model, slice_cv(bench))


def _interrupt_us(m: dict[str, Any]) -> float:
    """The wake-up of a blocked receiver: the one-way delay to a blocking receiver less the spinning half
    round trip (10th percentiles; a spinning one-way delay is not used: under other load a spinning receiver
    is often off its CPU when the message lands, while the ping-pong's fastest rounds are those in which
    both ranks held their CPUs). A calibration recorded before the one-way probe has the ping-pong's: half round
    trip blocking less spinning, which can be a round trip in which no rank slept (a wake-up that lands
    between a rank's last test and its futex call returns it at once), so its 10th percentile can be a
    spinning round trip (0.35 us for Open MPI on an idle machine)."""
    if "block_oneway" in m:
        return float(m["block_oneway"]["p10_us"] - m["spin_8"]["p10_us"])
    return float(m["block_8"]["p10_us"] - m["spin_8"]["p10_us"])


def preset(bench: dict[str, Any], mpi: str, os_model: str) -> dict[str, Any]:
    """Step 3: the ``[node_platform]`` table of this machine for ``mpi``, from the measurements only, with
    the OS model ``os_model`` (a label of ``osfit.CANDIDATES``)."""
    return platform(bench, mpi, _os(bench, os_model))


def platform(bench: dict[str, Any], mpi: str, os_table: dict[str, Any]) -> dict[str, Any]:
    """The preset of :func:`preset` with the ``os`` table ``os_table``."""
    m = bench["mpi"][mpi]
    # The 10th percentiles: the machine's own cost, without the preemptions by other load (a spinning
    # rank that loses its CPU makes that round trip a time slice long).
    small, big = m["spin_8"]["p10_us"], m["spin_1m"]["p10_us"]
    bw = bandwidth_mb_s(small, big)  # bytes per us = MB/s
    if bw > MAX_BANDWIDTH_MB_S:
        raise ValueError(f"{mpi}: the spinning ping-pongs give no bandwidth: 8-byte half round trip 10th "
                         f"percentile {small:.3f} us against {big:.3f} us for 1 MiB (a bandwidth over "
                         f"{MAX_BANDWIDTH_MB_S:g} MB/s is not plausible; measured under heavy other load?)")
    lat = max(small - 8 / bw, 0.0)
    return {
        "preset": "lee4",
        "nodes": 2,
        "os": os_table,
        # A calibration recorded before the noise was measured has none: 0, as then.
        "os_noise_tick_us": round(bench.get("detour", {}).get("short_fraction", 0.0)
                                  * timer_tick_us(os_table), 3),
        "cpu_speed": round(bench["compute"]["cpu_speed"], 4),
        "latency_us": round(lat, 3),
        "bandwidth_mb_s": round(bw, 1),
        "send_overhead_us": 0.0,
        "recv_overhead_us": 0.0,
        "interrupt_us": round(max(_interrupt_us(m), 0.0), 3),
        "context_switch_us": round(max(bench["context_switch"]["switch_us"], 0.0), 3),
        "boost_recheck": "agent",
    }


def _workload(grain: Grain, jobs: int | None = None) -> list[dict[str, Any]]:
    n = grain.jobs if jobs is None else jobs
    return [{"app": grain.app, "procs": 2, "submit_s": 0} for _ in range(n)]


def _policy(policy: str, jobs: int) -> str:
    return f"gang[quantum_ms={GANG_QUANTUM_MS},rows={max(jobs, 2)}]" if policy == "gang" else policy


def real_config(mpi: str, grain: Grain, policy: str, node_policy: str, jobs: int | None = None,
                baseline_env: dict[str, str] | None = None) -> dict[str, Any]:
    """The real run's configuration; with ``baseline_env`` (a library baseline) every wait is the MPI
    library's own and the ranks get that environment."""
    n = grain.jobs if jobs is None else jobs
    extra: dict[str, Any] = {} if baseline_env is None else {"library_waits": True, "env": dict(baseline_env)}
    return {
        "fidelity": "process", "seed": 1,
        "node_platform": {"preset": "lee4", "nodes": 2},
        "workload": {"jobs": _workload(grain, n)},
        "scheduler": {"policy": _policy(policy, n), "node_policy": node_policy, "mpl": max(n, 1)},
        "real": {"mpi": mpi, "nodes": 2, "cpus_per_node": 1, "time_limit_s": 600, "build_dir": str(build_dir()),
                 **extra},
    }


def sim_config(platform: dict[str, Any], grain: Grain, policy: str, node_policy: str,
               jobs: int | None = None) -> dict[str, Any]:
    n = grain.jobs if jobs is None else jobs
    return {
        "fidelity": "process", "seed": 1,
        "node_platform": platform,
        "workload": {"jobs": _workload(grain, n)},
        "scheduler": {"policy": _policy(policy, n), "node_policy": node_policy, "mpl": max(n, 1)},
    }


def _write_config(folder: Path, cfg: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "config.json"
    p.write_text(json.dumps(cfg, indent=1, sort_keys=True) + "\n")
    return p


def run_real(cfg: dict[str, Any], folder: Path) -> dict[str, Any]:
    from .. import real

    summary = real.run(_write_config(folder, cfg), folder)
    if summary["real"]["jobs_failed"]:
        raise RuntimeError(f"{folder}: real run failed: {summary['real']['errors']}")
    return summary


def run_sim(cfg: dict[str, Any], folder: Path) -> dict[str, Any]:
    from ..api import run

    result = run(config=_write_config(folder, cfg), timeline=True)
    result.write(folder)
    return dict(json.loads((folder / "summary.json").read_text()))


#: Dispatches on the two nodes closer than this count as the same instant (lockstep), seconds.
ALIGN_S = 20e-6
#: CPU rows of a timeline: the process holds the CPU.
ON_CPU = ("useful", "spin", "switch")


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted lists of disjoint intervals."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(hi - lo, 0.0)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def sim_trace(folder: Path) -> dict[str, float]:
    """What a simulated run did, from its timeline and summary: ``co_run``, the share of its ranks' CPU
    time during which the partner rank held its CPU too (mean over the jobs; 1: the ranks always run
    together, as under gang; 1 / jobs: each node picks independently); ``aligned``, the share
    of node 0's dispatches (a CPU passing to another process) with a dispatch on node 1 within
    ``ALIGN_S`` (1: the nodes switch in lockstep); ``spin_share``, busy-waiting over CPU time used;
    ``busy``, CPU time used over the 2 CPUs' time to the makespan; ``sleep_us``, the mean blocked
    interval of a rank (from blocking to its wake-up; NaN when no rank blocked)."""
    import numpy as np
    import pandas as pd

    tl = pd.read_parquet(folder / "timeline.parquet")
    summ = json.loads((folder / "summary.json").read_text())
    on = tl[(tl.cpu >= 0) & tl.kind.isin(ON_CPU)].sort_values("start_s", kind="stable")
    shares = []
    for _, g in on.groupby("job"):
        ranks = [list(zip(r.start_s, r.end_s, strict=True)) for _, r in g.groupby("rank")]
        held = statistics.mean(sum(b - a for a, b in iv) for iv in ranks)
        if len(ranks) == 2 and held > 0:
            shares.append(_overlap(ranks[0], ranks[1]) / held)
    disp = {}
    for node, g in on.groupby("node"):
        pids = g.pid.to_numpy()
        disp[int(node)] = np.sort(g.start_s.to_numpy()[np.r_[True, pids[1:] != pids[:-1]]])
    aligned = float("nan")
    if len(disp.get(0, [])) and len(disp.get(1, [])):
        a, b = disp[0], disp[1]
        k = np.clip(np.searchsorted(b, a), 1, len(b) - 1) if len(b) > 1 else np.zeros(len(a), dtype=int)
        near = np.minimum(np.abs(b[k] - a), np.abs(b[np.maximum(k - 1, 0)] - a))
        aligned = float(np.mean(near <= ALIGN_S))
    proc = summ["process"]
    used = proc["useful_s"] + proc["spin_s"]
    slept = tl[tl.kind == "blocked"]
    sleep_us = float((slept.end_s - slept.start_s).mean() * 1e6) if len(slept) else float("nan")
    return {"co_run": statistics.mean(shares) if shares else float("nan"), "aligned": aligned,
            "sleep_us": sleep_us,
            "spin_share": proc["spin_s"] / used if used else 0.0,
            "busy": used / (2 * summ["makespan_s"]) if summ["makespan_s"] else 0.0}


def real_trace(folder: Path, summary: dict[str, Any], compute_s: float) -> dict[str, float]:
    """What a real run did, from its summary (CPU time of the jobs from cpuacct, wall time) and the
    shim's per-rank counters (``logs/shim.jsonl``): ``spin_share``, the CPU time beyond the compute the
    program asks for (``compute_s``, all ranks) over the CPU time used (under a spinning wait: busy-waiting;
    MPI's own start and end are in it too); ``busy``, CPU time used over the 2 CPUs' wall time;
    ``block_share``, time the ranks slept in a wait over their waiting time; ``sleep_us``, the mean time
    from a rank's blocking to its wait's end (NaN when no rank blocked); ``timeout_share``, the blocking
    waits that ended only after the shim's 1 ms fallback timeout (nothing woke the rank) over all blocking
    waits (NaN when no rank blocked or the shim's log has no such count); ``agent_events``, the events the
    shims posted to the agent (each wakes it), and ``events_skipped``, the MESSAGE events they did not post
    because the node policy does nothing with them (docs/real.md, "The boosting schemes' slowdown"; NaN
    when the summary or the shim's log has no such count)."""
    cpu = float(sum(summary["real"]["cpu_s"]))
    wall = float(summary["real"]["wall_s"])
    ranks = [json.loads(x) for x in (folder / "logs" / "shim.jsonl").read_text().splitlines() if x.strip()] \
        if (folder / "logs" / "shim.jsonl").is_file() else []
    wait = sum(r["wait_ns"] for r in ranks)
    blocks = sum(r.get("blocks", 0) for r in ranks)
    return {"sleep_us": sum(r["block_ns"] for r in ranks) / blocks / 1e3 if blocks else float("nan"),
            "timeout_share": sum(r["timeout_ends"] for r in ranks) / blocks
            if blocks and all("timeout_ends" in r for r in ranks) else float("nan"),
            "spin_share": max(cpu - compute_s, 0.0) / cpu if cpu else 0.0,
            "busy": cpu / (2 * wall) if wall else 0.0,
            "block_share": sum(r["block_ns"] for r in ranks) / wait if wait else 0.0,
            "agent_events": float(summary["real"].get("agent_events", math.nan)),
            "events_skipped": float(sum(r["events_skipped"] for r in ranks))
            if ranks and all("events_skipped" in r for r in ranks) else math.nan}


def kendall(a: list[float], b: list[float]) -> float:
    """Kendall's tau-b of two paired lists (scipy), 1.0 for fewer than two pairs."""
    if len(a) < 2:
        return 1.0
    from scipy.stats import kendalltau

    tau = float(kendalltau(a, b).statistic)
    return 1.0 if math.isnan(tau) else tau


def compute_times(dedicated: dict[str, float], launch: float, mpi: str) -> dict[str, float]:
    """Each granularity's dedicated compute time: its dedicated real median minus the launch time (what
    the runtime check compares with the simulator, which has no launch). Raises ValueError naming the
    granularity and both times when the launch is as long as the dedicated run or longer: then the run
    measured nothing but its launch and no log error can be taken."""
    out = {}
    for name, ded in dedicated.items():
        if ded <= launch:
            raise ValueError(f"{mpi} {name}: the dedicated run ({ded:.3f} s, median) is no longer than the launch "
                             f"({launch:.3f} s, median of the `launch` job): its compute cannot be told from the "
                             "launch; make the granularity's `quanta` larger (the machine may have been loaded "
                             "differently during the two measurements)")
        out[name] = ded - launch
    return out


def fit_os(dedicated: dict[str, float], bench: dict[str, Any], mpi: str, models: list[str],
           grains: tuple[Grain, ...], root: Path, say: Callable[[str], None]) -> dict[str, float]:
    """The runtime check of step 2: each OS model of ``models`` (labels of ``osfit.CANDIDATES``) simulates
    the dedicated cases with ``mpi``'s preset; per model the mean |log(sim / real)|."""
    errors: dict[str, float] = {}
    for model in models:
        say(f"runtime check: OS model {model}")
        plat = preset(bench, mpi, model)
        errs = []
        for g in grains:
            s = run_sim(sim_config(plat, g, "fcfs", "nls", jobs=1), root / "fit" / f"{model}-{g.name}")
            errs.append(abs(math.log(s["mean_response_s"] / dedicated[g.name])))
        errors[model] = sum(errs) / len(errs)
    return errors


#: CPU time one quantum of a ``Barrier`` rank computes, s (seed 003's quantum).
QUANTUM_S = 0.5e-3


def _median_real(mpi: str, grain: Grain, policy: str, node_policy: str, reps: int, root: Path, key: str,
                 jobs: int | None = None, traces: list[dict[str, float]] | None = None,
                 baseline_env: dict[str, str] | None = None) -> tuple[float, list[float]]:
    """The median mean response of ``reps`` real runs and every run's; each run's trace
    (:func:`real_trace`) is appended to ``traces`` when given."""
    vals = []
    n = grain.jobs if jobs is None else jobs
    for r in range(reps):
        folder = root / "real" / f"{key}-r{r}"
        s = run_real(real_config(mpi, grain, policy, node_policy, jobs, baseline_env), folder)
        vals.append(float(s["mean_response_s"]))
        if traces is not None:
            traces.append(real_trace(folder, s, grain.quanta * QUANTUM_S * 2 * n))
    return statistics.median(vals), vals


def measure(quick: bool, reps: int = REPS, mpis: list[str] | None = None,
            say: Callable[[str], None] = lambda s: None) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """Steps 1 to 4 (see the module notes): the comparison table, the calibration record and the rank
    agreement. Each run's own outputs go to a temporary folder."""
    import pandas as pd

    mpis = mpis if mpis is not None else mpis_present()
    if not mpis:
        raise ValueError(f"no MPI with a built shim in {build_dir()}: run `make real` (Debian packages "
                         "mpich libmpich-dev and/or openmpi-bin libopenmpi-dev)")
    if quick:
        mpis = mpis[:1]
    grains = QUICK_GRAINS if quick else FULL_GRAINS
    schemes: list[tuple[str, str, str, dict[str, str] | None, tuple[str, ...]]] = [
        (lab, pol, npol, None, ("mpich", "openmpi")) for lab, pol, npol in SCHEMES]
    schemes += [(lab, "fcfs", "nls", env, only) for lab, env, only, _ in BASELINES]
    sim_node = {lab: npol for lab, _, _, npol in BASELINES}
    schemes = [s for s in schemes if not quick or s[0] in QUICK_SCHEMES]
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    presets: dict[str, Any] = {}
    fits: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cosched-realsim-") as tmp:
        root = Path(tmp)
        bench = microbenchmarks(mpis, quick, root, say)
        # One OS model for the machine, fitted with the first MPI's preset (the costs it adds to the
        # micro-benchmark: a context switch, a wake-up's interrupt, the OS noise, the CPU speed).
        ts_fit = osfit.fit(bench["timeshare"], lambda t: platform(bench, mpis[0], t), *timeshare_size(quick),
                           root / "osfit", say)
        best = ts_fit["chosen"]
        for mpi in mpis:
            say(f"dedicated runs ({mpi})")
            dedicated = {g.name: _median_real(mpi, g, "fcfs", "nls", reps, root, f"{mpi}-{g.name}-dedicated", 1)
                         for g in grains}
            say(f"launch time ({mpi})")
            launch, launch_runs = _median_real(mpi, LAUNCH_GRAIN, "fcfs", "nls", reps, root, f"{mpi}-launch", 1)
            checked = list(OS_MODELS) + ([best] if best not in OS_MODELS else [])
            say(f"launch {launch:.3f} s; dedicated " + ", ".join(f"{k} {v[0]:.3f} s" for k, v in dedicated.items()))
            computed = compute_times({k: v[0] for k, v in dedicated.items()}, launch, mpi)
            errors = fit_os(computed, bench, mpi, checked, grains, root / mpi, say)
            plat = preset(bench, mpi, best)
            presets[mpi] = plat
            fits[mpi] = {"chosen": best, "chosen_by": "time sharing (os_timeshare_fit)",
                         "mean_abs_log_error": errors,
                         "launch_s": {"median": launch, "runs": launch_runs},
                         "dedicated_real_s": {k: {"median": v[0], "runs": v[1]} for k, v in dedicated.items()}}
            for g in grains:
                sim_ded = run_sim(sim_config(plat, g, "fcfs", "nls", jobs=1), root / "sim" / f"{mpi}-{g.name}-ded")
                rows.append(_row(mpi, g, "DEDICATED", dedicated[g.name], float(sim_ded["mean_response_s"]), 1,
                                 launch))
                for label, policy, node_policy, env, only in schemes:
                    if mpi not in only:
                        continue
                    say(f"{mpi} {g.name} {label}")
                    key = f"{mpi}-{g.name}-{label.lower()}"
                    traces: list[dict[str, float]] = []
                    med, vals = _median_real(mpi, g, policy, node_policy, reps, root, key, traces=traces,
                                             baseline_env=env)
                    sim = run_sim(sim_config(plat, g, policy, sim_node.get(label, node_policy)),
                                  root / "sim" / key)
                    row = _row(mpi, g, label, (med, vals), float(sim["mean_response_s"]), g.jobs,
                               launch * launches(policy, g.jobs))
                    row.update({f"sim_{k}": v for k, v in sim_trace(root / "sim" / key).items()})
                    row.update({f"real_{k}": statistics.median(t[k] for t in traces) for k in traces[0]})
                    rows.append(row)
    prov = provenance(version=_core.__version__, seed=1, policy="experiment",
                      options={"experiment": ID, "quick": quick, "reps": reps, "mpis": mpis},
                      trace=None, platform={}, command=command_line())
    calib = {"provenance": prov, "microbenchmarks": bench, "os_timeshare_fit": ts_fit, "os_fit": fits,
             "presets": presets,
             "preset_fields": PRESET_FIELDS, "reps": reps, "grains": [vars(g) for g in grains],
             "schemes": [[lab, pol, npol] for lab, pol, npol, _, _ in schemes],
             "baselines": {lab: {"env": env, "mpis": list(only), "simulated_as": npol}
                           for lab, env, only, npol in BASELINES},
             "load_average": {"before": load_before, "after": os.getloadavg()}}
    return pd.DataFrame(rows), calib, _agreement(rows)


def _say(msg: str) -> None:
    sys.stderr.write(f"{ID}: {msg}\n")
    sys.stderr.flush()


#: Columns of ``runs.csv`` (:func:`real_runs`).
RUN_COLUMNS = ["run", "mpi", "granularity", "scheme", "rep", "real_mean_response_s"]


def real_runs(table: Any, calib: dict[str, Any]) -> Any:
    """One row per real run of :func:`measure`: each MPI's launch-time runs (granularity ``launch``, scheme
    ``DEDICATED``), then the runs behind each row of ``table`` (its ``real_runs_s``), in order; ``run`` names
    the run (``mpi/granularity/scheme/rep``)."""
    import pandas as pd

    rows = [(mpi, LAUNCH_GRAIN.name, "DEDICATED", r, float(v))
            for mpi, fit in calib["os_fit"].items() for r, v in enumerate(fit["launch_s"]["runs"])]
    rows += [(t.mpi, t.granularity, t.scheme, r, float(v))
             for t in table.itertuples() for r, v in enumerate(str(t.real_runs_s).split())]
    return pd.DataFrame([(f"{m}/{g}/{s}/{r}", m, g, s, r, v) for m, g, s, r, v in rows], columns=RUN_COLUMNS)


def _analyze(gathered: Gathered, settings: Settings) -> Outcome:
    table, calib, agreement = measure(settings.quick, say=_say)
    # The experiment's runs are the real runs made now (none is reused): `runs.csv` and the run count of
    # `cosched reproduce` come from `gathered`.
    gathered.runs = real_runs(table, calib)
    gathered.executed = list(gathered.runs["run"])
    text = _report(table, agreement, calib)
    doc = json.dumps(calib, indent=2, sort_keys=True) + "\n"
    return Outcome(report=text, files={
        "table.csv": csv_writer(table),
        "calibration.json": lambda p: p.write_text(doc, encoding="utf-8"),
    })


def launches(policy: str, jobs: int) -> float:
    """Launches in sequence up to a job's end, averaged over the jobs: under batch the i-th job (from 1)
    ends after i launches, one after the other; otherwise all jobs launch at once."""
    return (jobs + 1) / 2 if policy == "batch" else 1.0


def _row(mpi: str, g: Grain, scheme: str, real: tuple[float, list[float]], sim: float, jobs: int,
         launch_s: float) -> dict[str, Any]:
    med, vals = real
    adjusted = sim + launch_s
    return {"mpi": mpi, "granularity": g.name, "app": g.app, "jobs": jobs, "scheme": scheme,
            "real_mean_response_s": med, "real_runs_s": " ".join(f"{v:.4f}" for v in vals),
            "sim_mean_response_s": sim, "launch_s": launch_s, "sim_with_launch_s": adjusted,
            "error": (adjusted - med) / med}


def _agreement(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for key in sorted({(r["mpi"], r["granularity"]) for r in rows}):
        rs = [r for r in rows if (r["mpi"], r["granularity"]) == key and r["scheme"] != "DEDICATED"]
        real = [r["real_mean_response_s"] for r in rs]
        sim = [r["sim_with_launch_s"] for r in rs]
        order_real = [r["scheme"] for r in sorted(rs, key=lambda r: r["real_mean_response_s"])]
        order_sim = [r["scheme"] for r in sorted(rs, key=lambda r: r["sim_with_launch_s"])]
        out.append({"mpi": key[0], "granularity": key[1], "kendall_tau": kendall(real, sim),
                    "same_order": order_real == order_sim, "real_order": order_real, "sim_order": order_sim})
    return out


#: Thresholds of :func:`why` (shares of CPU time, or of a job's lifetime; a sleep per blocking wait
#: ``LATE_FACTOR`` times the simulated one and at least ``LATE_US`` is a late wake-up).
AGREE = 0.10
LOCKSTEP_ALIGNED, LOCKSTEP_CO_RUN, SHARE_GAP = 0.9, 0.8, 0.2
LATE_FACTOR, LATE_US = 2.0, 300.0
#: Schemes whose ranks run together by design (gang slots; batch runs one job at a time).
COSCHEDULED = frozenset({"GANG", "BATCH"})


def why(r: dict[str, Any]) -> str:
    """The reading of one compared row from the two runs' traces (:func:`sim_trace`, :func:`real_trace`):
    which mechanism of the simulated run departs from the real one."""
    if abs(r["error"]) <= AGREE:
        return f"agree within {AGREE:.0%}"
    get = lambda k: float(r.get(k, float("nan")))  # noqa: E731
    if math.isnan(get("sim_busy")) or math.isnan(get("real_busy")):
        return "no trace"
    out = []
    spin_gap = get("real_spin_share") - get("sim_spin_share")
    by_design = r.get("scheme") in COSCHEDULED  # its ranks run together by design, not by accident
    if (not by_design and get("sim_aligned") >= LOCKSTEP_ALIGNED and get("sim_co_run") >= LOCKSTEP_CO_RUN
            and spin_gap >= SHARE_GAP):
        out.append(f"simulated nodes in lockstep ({get('sim_aligned'):.0%} of dispatches at the same instant on "
                   f"both nodes, each job's ranks on their CPUs together {get('sim_co_run'):.0%} of the time), "
                   f"real ranks spin {get('real_spin_share'):.0%} of their CPU time against "
                   f"{get('sim_spin_share'):.0%} simulated")
    elif spin_gap >= SHARE_GAP:
        out.append(f"real ranks spin {get('real_spin_share'):.0%} of their CPU time against "
                   f"{get('sim_spin_share'):.0%} simulated")
    real_sleep, sim_sleep = get("real_sleep_us"), get("sim_sleep_us")
    if real_sleep >= LATE_US and not real_sleep < LATE_FACTOR * sim_sleep:  # NaN simulated: no rank blocked there
        timeouts = get("real_timeout_share")
        out.append(f"a blocked real rank sleeps {real_sleep:.0f} us per blocking wait against "
                   f"{sim_sleep:.0f} us simulated: it is woken later than its message"
                   + (f" ({timeouts:.0%} of the blocking waits ended only at the shim's 1 ms fallback timeout)"
                      if timeouts == timeouts else ""))
    if get("sim_busy") - get("real_busy") >= SHARE_GAP:
        out.append(f"real ranks held their CPUs {get('real_busy'):.0%} of the time against {get('sim_busy'):.0%} "
                   f"simulated (asleep in waits {get('real_block_share'):.0%} of their waiting time): other tasks "
                   "had the CPUs, or a woken rank got its CPU later than the simulator gives it")
    return "; ".join(out) or "not explained by these traces (CPU use and spinning agree)"


def _why_section(table: Any) -> list[str]:
    lines = ["", "## Why they differ", "",
             "Computed from both runs of each row (real: the median over the runs; simulated: its timeline). "
             "*co-run*: share of a rank's CPU time during which its partner rank held its CPU too (simulated; 1 "
             "when the ranks always run together, about 1 / jobs when each node picks on its own). *aligned*: "
             f"share of node 0's dispatches with a dispatch on node 1 within {ALIGN_S * 1e6:g} us (simulated; "
             "1 = the nodes switch in lockstep). *spin*: CPU time beyond the program's compute over CPU time "
             "used (real: cpuacct minus the compute asked; simulated: busy-waiting). *busy*: CPU time used "
             "over the 2 CPUs' time. *sleep per block*: mean time a rank slept per blocking wait (real: the "
             "shim's blocked time over its blocks, to the wait's end; simulated: blocked intervals, to the "
             "wake-up). The reading names the mechanism that departs "
             f"(lockstep: aligned >= {LOCKSTEP_ALIGNED:g} and co-run >= {LOCKSTEP_CO_RUN:g} with real spin "
             f"{SHARE_GAP:.0%} above simulated, for a scheme that does not coschedule by design, i.e. not "
             f"{' or '.join(sorted(COSCHEDULED))}; CPUs: simulated busy {SHARE_GAP:.0%} above real; late "
             f"wake-ups: a real sleep per block of {LATE_US:g} us or more, {LATE_FACTOR:g} times the simulated "
             "one or more).", "",
             "| MPI | granularity | scheme | error | sim co-run | sim aligned | spin real / sim | busy real / sim "
             "| sleep per block real / sim (us) | reading |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    def pct(r: dict[str, Any], k: str) -> str:
        return "—" if k not in r or r[k] != r[k] else f"{r[k]:.0%}"

    for r in table.to_dict("records"):
        if r["scheme"] == "DEDICATED":
            continue
        f = functools.partial(pct, r)

        def us(k: str, r: dict[str, Any] = r) -> str:
            return "—" if k not in r or r[k] != r[k] else f"{r[k]:.0f}"

        lines.append(f"| {r['mpi']} | {r['granularity']} | {r['scheme']} | {r['error']:+.1%} | {f('sim_co_run')} | "
                     f"{f('sim_aligned')} | {f('real_spin_share')} / {f('sim_spin_share')} | "
                     f"{f('real_busy')} / {f('sim_busy')} | {us('real_sleep_us')} / {us('sim_sleep_us')} | "
                     f"{why(r)} |")
    return lines


def _wakeup_lines(calib: dict[str, Any]) -> list[str]:
    """The measured cost of a futex wake-up against what each preset charges one."""
    w = calib["microbenchmarks"].get("wakeup")
    if not w:
        return []
    m = w["median"]
    cell = lambda c: f"p50 {m[c]['p50_us']:.1f} us, p90 {m[c]['p90_us']:.1f} us"  # noqa: E731
    charged = ", ".join(f"{mpi} {wake_charged_us(p):.2f} us" for mpi, p in calib["presets"].items())
    return ["", f"Wake-up of a process blocked in a futex (`cosched-wakeup`, median of {len(w['runs'])} run(s); "
            "delay from FUTEX_WAKE to the woken process running): across CPUs onto an idle CPU "
            f"{cell('cross')}; on one CPU {cell('same')}; onto a CPU running a compute loop {cell('busy')}; "
            f"spinning instead of sleeping {cell('spin')}. The simulator charges a wake-up the preset's "
            f"interrupt_us + context_switch_us of the woken rank's CPU ({charged}) and wakes it at once."]


def _report(table: Any, agreement: list[dict[str, Any]], calib: dict[str, Any]) -> str:
    la = calib["load_average"]
    lines = [
        f"Real runs: median of {calib['reps']} (`calibration.json` has every run). Load average (1, 5, 15 min) "
        f"before {', '.join(f'{x:.1f}' for x in la['before'])}, after {', '.join(f'{x:.1f}' for x in la['after'])}: "
        "real times include whatever else ran on the machine (a load above the 2 CPUs inflates them and "
        "their spread).",
        "",
        "Workloads (2 virtual nodes of one CPU, jobs of 2 ranks submitted at 0): "
        + "; ".join(f"{g['name']}: {g['jobs']} x `{Grain(**g).app}`" for g in calib["grains"]) + ". Schemes: "
        + ", ".join(f"{lab} (`{pol}` + `{npol}`)" for lab, pol, npol in calib["schemes"]) + ". "
        + "Library baselines (every wait is the MPI library's own, the shim replaces none): "
        + "; ".join(f"{lab} ({', '.join(b['mpis'])}; environment "
                    f"{', '.join(f'{k}={v}' for k, v in b['env'].items()) or 'none'}; simulated with node "
                    f"policy `{b.get('simulated_as', 'nls')}`)"
                    for lab, b in calib["baselines"].items()) + ".",
        "",
        "## Preset of this machine",
        "",
        "| field | " + " | ".join(calib["presets"]) + " | measurement |",
        "|---|" + "---|" * len(calib["presets"]) + "---|",
    ]
    for f, how in PRESET_FIELDS.items():
        vals = [json.dumps(p.get(f)) for p in calib["presets"].values()]
        lines.append(f"| {f} | " + " | ".join(vals) + f" | {how} |")
    if "os_timeshare_fit" in calib:
        lines += ["", *osfit.report_lines(calib["os_timeshare_fit"])]
    lines += ["", "Runtime check of the OS models on the dedicated cases (mean absolute log error of the simulated "
              "against the real response; not the chooser):", ""]
    for mpi, fit in calib["os_fit"].items():
        errs = ", ".join(f"{m} {e:.4f}" for m, e in fit["mean_abs_log_error"].items())
        lines.append(f"- {mpi}: chosen **{fit['chosen']}** ({errs})")
    spread = max(fit["mean_abs_log_error"].values()) - min(fit["mean_abs_log_error"].values())
    if spread < 0.01:
        lines.append("- The models differ by less than 1% on the dedicated cases (one rank per CPU: the "
                     "scheduler has nothing to choose), so these runs do not discriminate.")
    for mpi, fit in calib["os_fit"].items():
        runs = ", ".join(f"{x:.3f}" for x in fit["launch_s"]["runs"])
        lines.append(f"- {mpi}: launch time (median response of a job of one barrier after 0.5 ms) "
                     f"{fit['launch_s']['median']:.3f} s (runs {runs})")
    lines += _wakeup_lines(calib)
    lines += ["", "## Mean response time, real (median) against simulated", "",
              "The simulator has no job launch: the measured launch time is added to each simulated response "
              "once per launch in sequence (under BATCH the i-th job waits for i launches; otherwise the jobs "
              "launch together), and the error is taken on that sum. The fit above compares the dedicated "
              "runs minus the launch time.", "",
              "| MPI | granularity | scheme | real (s) | real runs (s) | simulated (s) | + launch (s) | error |",
              "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.mpi} | {r.granularity} | {r.scheme} | {r.real_mean_response_s:.3f} | "
                     f"{r.real_runs_s} | {r.sim_mean_response_s:.3f} | {r.sim_with_launch_s:.3f} | {r.error:+.1%} |")
    lines += ["", "## Rank order of the schemes", "",
              "| MPI | granularity | Kendall tau | same order | real order (fastest first) | simulated order |",
              "|---|---|---|---|---|---|"]
    for a in agreement:
        lines.append(f"| {a['mpi']} | {a['granularity']} | {a['kendall_tau']:+.2f} | "
                     f"{'yes' if a['same_order'] else 'no'} | {' < '.join(a['real_order'])} | "
                     f"{' < '.join(a['sim_order'])} |")
    lines += _why_section(table)
    return "\n".join(lines) + "\n"



def _sim_row(calib: dict[str, Any], real: dict[str, Any], plat: dict[str, Any], root: Path) -> dict[str, Any]:
    """One recorded row ``real`` (a row of ``table.csv``) simulated again with the preset ``plat``: the real
    columns kept, the simulated ones and the error recomputed."""
    g = next((Grain(**x) for x in calib["grains"] if x["name"] == real["granularity"]), None)
    if g is None:
        raise ValueError(f"table.csv row {real['mpi']} {real['scheme']}: granularity {real['granularity']!r} is "
                         f"not among the calibration's grains {[x['name'] for x in calib['grains']]}")
    scheme = real["scheme"]
    if scheme != "DEDICATED" and scheme not in {lab for lab, *_ in SCHEMES} | {lab for lab, *_ in BASELINES}:
        raise ValueError(f"table.csv row {real['mpi']} {real['granularity']}: unknown scheme {scheme!r}")
    if scheme == "DEDICATED":
        policy, node_policy, jobs = "fcfs", "nls", 1
    else:
        sim_node = {lab: npol for lab, _, _, npol in BASELINES}
        policy, node_policy = next(((pol, npol) for lab, pol, npol in SCHEMES if lab == scheme),
                                   ("fcfs", sim_node.get(scheme, "nls")))
        jobs = g.jobs
    key = root / f"{real['mpi']}-{g.name}-{scheme.lower()}"
    sim = float(run_sim(sim_config(plat, g, policy, node_policy, jobs=jobs), key)["mean_response_s"])
    row = {k: v for k, v in real.items() if not k.startswith("sim_") and k != "error"}
    row["sim_mean_response_s"] = sim
    row["sim_with_launch_s"] = sim + float(real["launch_s"])
    row["error"] = (row["sim_with_launch_s"] - row["real_mean_response_s"]) / row["real_mean_response_s"]
    if scheme != "DEDICATED":
        row.update({f"sim_{k}": v for k, v in sim_trace(key).items()})
    return row


def resimulate(folder: Path, os_model: str | None = None,
               say: Callable[[str], None] = lambda s: None) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """The simulated side of a recorded run (``folder``: its ``calibration.json`` and ``table.csv``)
    computed again with this build, against the real medians recorded there (no real run): the OS model is
    fitted again on the recorded time-sharing measurement (:func:`osfit.fit`, as step 2), or is
    ``os_model`` (a label of ``osfit.CANDIDATES``); every other preset field is the recorded
    measurement's. Returns the table, the fit record and the rank agreement, as :func:`measure`."""
    import pandas as pd

    calib = json.loads((folder / "calibration.json").read_text())
    recorded = pd.read_csv(folder / "table.csv")
    bench = calib["microbenchmarks"]
    mpis = list(calib["presets"])
    quick = bool(calib["provenance"].get("options", {}).get("quick", False))
    with tempfile.TemporaryDirectory(prefix="cosched-resim-") as tmp:
        root = Path(tmp)
        if os_model is None:
            fit = osfit.fit(bench["timeshare"], lambda t: platform(bench, mpis[0], t), *timeshare_size(quick),
                            root / "osfit", say)
        else:
            fit = {"chosen": os_model, "chosen_by": "given"}
        rows = []
        for real in recorded.to_dict("records"):
            say(f"{real['mpi']} {real['granularity']} {real['scheme']}")
            plat = preset(bench, real["mpi"], fit["chosen"])
            rows.append(_sim_row(calib, real, plat, root / "sim"))
    return pd.DataFrame(rows), fit, _agreement(rows)


def summary_lines(table: Any, agreement: list[dict[str, Any]]) -> list[str]:
    """Per (MPI, granularity): the mean |error| over the schemes (the dedicated case left out), Kendall's
    tau, and each scheme's error and simulated co-run share."""
    out = []
    for a in agreement:
        rs = table[(table.mpi == a["mpi"]) & (table.granularity == a["granularity"]) & (table.scheme != "DEDICATED")]
        parts = " ".join(f"{r.scheme} {r.error:+.1%} (co-run {r.sim_co_run:.2f})" for r in rs.itertuples())
        out.append(f"{a['mpi']} {a['granularity']}: mean |error| {rs.error.abs().mean():.1%}, "
                   f"Kendall tau {a['kendall_tau']:+.2f}; {parts}")
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m coscheduling.experiments.realsim resimulate FOLDER -o OUT [--os LABEL]``: see
    :func:`resimulate`; writes ``OUT/table.csv`` and ``OUT/resimulation.json`` (the fit and the agreement)
    and prints the per-case summary."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m coscheduling.experiments.realsim")
    ap.add_argument("command", choices=["resimulate"])
    ap.add_argument("folder", type=Path, help="a `cosched reproduce real-vs-sim` output folder")
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--os", dest="os_model", default=None, help="an OS candidate label (default: fitted again)")
    args = ap.parse_args(argv)
    table, fit, agreement = resimulate(args.folder, args.os_model, say=_say)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "table.csv", index=False)
    doc = {"source": str(args.folder), "os_timeshare_fit": fit, "agreement": agreement}
    (args.out / "resimulation.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"OS model: {fit['chosen']}")
    print("\n".join(summary_lines(table, agreement)))


register(
    Experiment(
        id=ID,
        title=TITLE,
        source="no seed: the simulator against real execution on this machine (docs/real.md)",
        runs=lambda s: [],
        analyze=_analyze,
    )
)


if __name__ == "__main__":
    main()
