"""Gang slot switches across thousands of nodes: the coordinator's message load and the switch skew.

cosched's cross-node gang scheduling keeps the Ousterhout matrix at one coordinator and has each node's agent
freeze and thaw its jobs at the slot boundaries. Two ways to tell the agents when to switch are compared:

``per-switch``
    The coordinator sends a SWITCH message at every slot boundary, and each agent switches when the message
    reaches it (the scheme of a central gang scheduler that triggers each switch). The coordinator sends
    N messages per quantum (``flat``) or k messages that the agents forward down a k-ary tree (``tree``).
``agreed-times``
    The coordinator sends each node its rows once, with the clock time of slot 0 and the quantum, and again
    only when the matrix changes (a job starts or ends). Each agent switches by its own clock at
    t0 + i * quantum (an absolute CLOCK_REALTIME timer), so no message is sent per switch.

For each, a Monte Carlo model draws, per switch, the instant at which every node's switch takes effect, from:

- ``send_us``: the coordinator's CPU time to send one message (a serial cost: message i leaves after i sends);
- ``latency_us``: the one-way network latency to a node (plus its receive path);
- the agent's wake-up lateness after a packet or a timer, lognormal with medians and 99th percentiles
  ``wake_p50_us`` / ``wake_p99_us``;
- ``clock_sd_us``: the standard deviation of the nodes' clock offsets (agreed-times only);
- ``freeze_us``: the time a freezer write takes to stop or start a job (the same on every node; it delays
  the switch but adds no skew, and is reported for scale).

The skew of a switch is the spread (max - min) of its instants over the nodes; the part of a quantum lost to
it is skew / quantum (during the skew, part of a gang runs while the rest of it is still frozen). The
coordinator's load is messages per second and the share of one CPU they take (messages/s x send_us).
Under agreed-times the messages come only from matrix changes: the rate of job starts and ends per node,
taken from a real trace (CEA-Curie 2011 by default), times the nodes each job spans (the trace's share of
the machine per job, at least one node).

Every parameter's default and its source is in :data:`DEFAULTS` and docs/real-slurm.md. The numbers are a
model, not a measurement at scale: the report says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from . import Experiment, Outcome, Settings, csv_writer, register
from .report import md_table
from .runner import Gathered


@dataclass(frozen=True)
class Params:
    send_us: float
    latency_us: float
    wake_p50_us: float
    wake_p99_us: float
    clock_sd_us: float
    freeze_us: float
    #: Job starts plus ends per second per node, and the share of the machine a job spans (from a trace).
    changes_per_node_s: float
    job_share: float


#: Defaults, each with its source (docs/real-slurm.md repeats them).
DEFAULTS = Params(
    # Measured with build/real/cosched-sendwake (real/tools/sendwake.c) on the idle 2-core test machine, median
    # of 3 runs: CPU time of one UDP sendto of 64 bytes on loopback (3.87, 3.89, 3.89 us).
    send_us=3.9,
    # Myrinet one-way latency of seed 000's platform (9.7 us), the fastest network of the seeds.
    latency_us=9.7,
    # Same program and machine: lateness of an absolute clock_nanosleep 1 ms ahead at normal priority
    # (medians of 3 runs: p50 64.5 us, p99 96.0 us; most of it is the kernel's default 50 us timer slack).
    wake_p50_us=64.5,
    wake_p99_us=96.0,
    # chrony's README: "on a LAN, accuracy is typically in tens of microseconds".
    clock_sd_us=30.0,
    # Median gang slot switch of `cosched bench real` on the idle test machine (freeze one job, thaw the
    # other, 2 ranks each, cgroup v1 freezer): 0.37 ms.
    freeze_us=370.0,
    # CEA-Curie 2011 (Parallel Workloads Archive, cleaned): 312,807 jobs over 21,923,322 s on 93,312
    # processors, 720.4 processors per job on average: 2 events per job, a job spans 720.4 / 93,312 of it.
    changes_per_node_s=2 * 312_807 / 21_923_322 / 93_312,
    job_share=720.4 / 93_312,
)

NODES = (16, 64, 256, 1024, 4096, 10_000)
QUANTA_MS = (50, 100, 200)
SCHEMES = (("per-switch", 0), ("per-switch", 16), ("agreed-times", 0))


def _wake(rng: np.random.Generator, p: Params, shape: tuple[int, ...]) -> np.ndarray:
    """Lognormal wake-up lateness with the given median and 99th percentile (us)."""
    mu = math.log(p.wake_p50_us)
    sigma = max(1e-9, (math.log(p.wake_p99_us) - mu) / 2.3263478740408408)
    return rng.lognormal(mu, sigma, size=shape)


def _tree_arrivals(rng: np.random.Generator, p: Params, n: int, k: int, switches: int) -> np.ndarray:
    """Instants (us) at which each of n nodes has the message, k-ary forwarding from the coordinator.

    Node j (0-based, breadth-first) is child number j % k of its parent (j // k - 1, or the coordinator for
    j < k); a sender sends to its children one after another, each send costing send_us."""
    t = np.empty((switches, n))
    for j in range(n):
        parent = j // k - 1
        start = 0.0 if parent < 0 else t[:, parent] + _wake(rng, p, (switches,))
        t[:, j] = start + (j % k + 1) * p.send_us + p.latency_us
    return t


def model(nodes: int, quantum_ms: float, scheme: str, fanout: int, p: Params, switches: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, nodes, int(quantum_ms * 1000), fanout, scheme == "per-switch"])
    q_us = quantum_ms * 1000.0
    if scheme == "per-switch":
        if fanout == 0:
            arrive = (np.arange(1, nodes + 1) * p.send_us + p.latency_us)[None, :].repeat(switches, axis=0)
            coord_msgs = nodes
        else:
            arrive = _tree_arrivals(rng, p, nodes, fanout, switches)
            coord_msgs = min(fanout, nodes)
        at = arrive + _wake(rng, p, (switches, nodes))
        msgs_s = coord_msgs / (q_us * 1e-6)
        dissemination = arrive.max(axis=1)
    else:
        at = rng.normal(0.0, p.clock_sd_us, (switches, nodes)) + _wake(rng, p, (switches, nodes))
        # A start or an end of a job updates the rows of the job's nodes (one message each); the workload
        # keeps its density per node and its jobs their share of the machine.
        span = max(1.0, p.job_share * nodes)
        msgs_s = p.changes_per_node_s * nodes * span
        dissemination = np.full(switches, span * p.send_us + p.latency_us)
    skew = at.max(axis=1) - at.min(axis=1)
    return {
        "nodes": nodes,
        "quantum_ms": quantum_ms,
        "scheme": scheme,
        "fanout": ("flat" if fanout == 0 else f"tree-{fanout}") if scheme == "per-switch" else "-",
        "coordinator_msgs_per_s": msgs_s,
        "coordinator_cpu_share": msgs_s * p.send_us * 1e-6,
        "dissemination_p99_ms": float(np.percentile(dissemination, 99)) / 1000.0,
        "skew_p50_ms": float(np.percentile(skew, 50)) / 1000.0,
        "skew_p99_ms": float(np.percentile(skew, 99)) / 1000.0,
        "quantum_lost_p99": float(np.percentile(skew, 99)) / q_us,
        "freeze_ms": p.freeze_us / 1000.0,
    }


def table(p: Params = DEFAULTS, nodes=NODES, quanta=QUANTA_MS, switches: int = 200, seed: int = 1) -> pd.DataFrame:
    rows = [
        model(n, q, scheme, k, p, switches, seed) for n in nodes for q in quanta for scheme, k in SCHEMES
    ]
    return pd.DataFrame(rows)


def _report(df: pd.DataFrame, sens: pd.DataFrame, p: Params) -> str:
    big = df[(df.nodes == max(df.nodes)) & (df.quantum_ms == min(df.quantum_ms))].set_index(["scheme", "fanout"])
    flat = big.loc[("per-switch", "flat")]
    agreed = big.loc[("agreed-times", "-")]
    lines = [
        "## What it models",
        "",
        "The coordinator of cosched's cross-node gang scheduling and its agents, from 16 to 10,000 nodes, at "
        "quanta of 50, 100 and 200 ms; per-switch messages (flat, or forwarded down a 16-ary tree) against "
        "agreed switch times. This is a Monte Carlo model with the parameters below, not a measurement at "
        "scale.",
        "",
        "| parameter | value |",
        "|---|---|",
        *[f"| {k} | {v:.6g} |" for k, v in asdict(p).items()],
        "",
        "## Results",
        "",
        md_table(df, digits=4),
        "",
        "## Computed findings",
        "",
        f"- Per-switch, flat, at {max(df.nodes):,} nodes and {min(df.quantum_ms)} ms: the coordinator sends "
        f"{flat.coordinator_msgs_per_s:,.0f} messages/s ({flat.coordinator_cpu_share:.0%} of a CPU) and the "
        f"99th-percentile skew is {flat.skew_p99_ms:.2f} ms ({flat.quantum_lost_p99:.1%} of the quantum).",
        f"- Agreed times at the same size: {agreed.coordinator_msgs_per_s:,.1f} messages/s "
        f"({agreed.coordinator_cpu_share:.2%} of a CPU); the skew is set by the clocks and wake-up lateness "
        f"alone: p99 {agreed.skew_p99_ms:.2f} ms.",
        "",
        "## Sensitivity of agreed times to clock synchronisation (10,000 nodes, 50 ms)",
        "",
        md_table(sens, digits=4),
        "",
    ]
    return "\n".join(lines)


def _analyze(_: Gathered, settings: Settings) -> Outcome:
    switches = 50 if settings.quick else 200
    nodes = NODES[:4] + (NODES[-1],) if settings.quick else NODES
    df = table(switches=switches, nodes=nodes)
    sens = pd.DataFrame(
        [
            {"clock_sd_us": sd, **model(10_000, 50, "agreed-times", 0, replace(DEFAULTS, clock_sd_us=sd),
                                        switches, 1)}
            for sd in (0.0, DEFAULTS.clock_sd_us, 5 * DEFAULTS.clock_sd_us, 1000.0)
        ]
    )[["clock_sd_us", "skew_p50_ms", "skew_p99_ms", "quantum_lost_p99"]]
    return Outcome(
        report=_report(df, sens, DEFAULTS),
        files={"scale.csv": csv_writer(df), "clock_sensitivity.csv": csv_writer(sens)},
    )


register(
    Experiment(
        id="gang-scale",
        title="Gang slot switches at 16 to 10,000 nodes: coordinator load and switch skew (model)",
        source="no seed: the scale question of cosched's cross-node gang scheduling (docs/real-slurm.md, Scale)",
        runs=lambda s: [],
        analyze=_analyze,
    )
)
