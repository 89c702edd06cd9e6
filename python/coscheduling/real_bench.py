"""Benchmarks of real execution (`cosched bench real`).

`shim_latency`: the latency the MPI shim adds per message, as the half round trip of an 8-byte
ping-pong between two ranks on this machine (median of ITERS round trips, `cosched-probe pingpong`),
without the shim and with it in each wait mode, per MPI present. The two ranks are bound to distinct
cores (`-bind-to core`), as `cosched run` puts ranks on distinct virtual nodes: unbound, on a loaded
machine the scheduler often wakes one rank on the other's CPU, and they stay there; a spin-then-block
wait then holds the CPU its partner needs for its whole spin, and the half round trip is the spin time
plus a wake-up (measured: spinblock:50 60.8 us unbound, 0.27 us bound; docs/real.md, "The shim's
latency"). Needs `make real` (the shims and probes in build/real, or $COSCHED_REAL_BUILD).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

#: Wait modes measured with the shim (`None`: the shim is not loaded).
MODES: tuple[str | None, ...] = (None, "library", "spin", "spinblock:50", "block")


def build_dir() -> Path:
    """Where `make real` put the shims and programs."""
    env = os.environ.get("COSCHED_REAL_BUILD")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "build" / "real"


def mpis_present() -> list[str]:
    """The MPIs whose launcher and shim are both available."""
    launch = {"mpich": "mpiexec.mpich", "openmpi": "mpirun.openmpi"}
    return [m for m, exe in launch.items() if shutil.which(exe) and (build_dir() / f"libcosched-{m}.so").exists()]


def mpi_command(mpi: str, n: int, argv: list[str], wait: str | None,
                bind: bool = False) -> tuple[list[str], dict[str, str]]:
    """The launch command of an `n`-rank job of `argv` with the shim in wait mode `wait` (None: no shim);
    `bind`: each rank bound to its own core (the launcher's `bind-to core`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COSCHED_")}
    shim = str(build_dir() / f"libcosched-{mpi}.so")
    if wait is not None:
        env["COSCHED_WAIT"] = wait
    if mpi == "mpich":
        cmd = ["mpiexec.mpich", *(["-bind-to", "core"] if bind else []), "-n", str(n)]
        cmd += ["-genv", "LD_PRELOAD", shim] if wait is not None else []
    else:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cmd = ["mpirun.openmpi", "--oversubscribe", *(["--bind-to", "core"] if bind else []), "-n", str(n)]
        if wait is not None:
            cmd += ["-x", f"LD_PRELOAD={shim}", "-x", "COSCHED_WAIT"]
    return cmd + argv, env


def shim_latency(iters: int = 2000, mpis: list[str] | None = None) -> list[dict]:
    """One row per (MPI, mode): median, 10th and 90th percentile half round trip (us), and the median
    added over the run without the shim."""
    mpis = mpis if mpis is not None else mpis_present()
    if not mpis:
        raise RuntimeError(
            f"no MPI with a built shim in {build_dir()}: run `make real` (Debian packages mpich libmpich-dev "
            "and/or openmpi-bin libopenmpi-dev)"
        )
    rows = []
    for mpi in mpis:
        base = None
        for mode in MODES:
            probe = str(build_dir() / f"cosched-probe-{mpi}")
            cmd, env = mpi_command(mpi, 2, [probe, "pingpong", str(iters), "8"], mode, bind=True)
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
            d = json.loads(r.stdout.strip().splitlines()[-1])
            us = d["half_rtt_ns"] / 1e3
            if mode is None:
                base = us
            rows.append({
                "mpi": mpi, "mode": mode or "no shim", "half_rtt_us": us, "p10_us": d["half_rtt_p10_ns"] / 1e3,
                "p90_us": d["half_rtt_p90_ns"] / 1e3, "added_us": None if base is None else us - base,
            })
    return rows


def agent_costs(quanta_ms: tuple[float, ...] = (20.0, 100.0), seconds: float = 1.0) -> list[dict]:
    """The node agent's costs under `cosched run` (MPICH): for each gang quantum, two jobs of two
    ranks (a 200 us compute / ring-exchange program) gang scheduled on two virtual nodes, then the
    same jobs under CC (whose periodic op and message events keep the agent busy). Reports the
    agent's CPU time as a share of the run's wall time, and the slot switch time (freeze every job
    of the active row, acknowledged, then thaw the next row's) against the quantum."""
    import tempfile

    from . import real

    iters = max(1, int(seconds / 0.0004))
    rows = []
    with tempfile.TemporaryDirectory(prefix="cosched-bench-real-") as tmp:
        exe = Path(tmp) / "finegrain"
        src = Path(__file__).resolve().parents[2] / "tests" / "python" / "data" / "real_finegrain.c"
        subprocess.run(["mpicc.mpich", "-O2", "-o", str(exe), str(src)], check=True)
        cases = [(f"gang[quantum_ms={q:g},rows=2]", "nls", q) for q in quanta_ms] + [("fcfs", "cc", None)]
        for policy, node_policy, q in cases:
            cfg = Path(tmp) / "bench.toml"
            cfg.write_text(f"""fidelity = "process"
[node_platform]
preset = "choi2004"
[workload]
jobs = [{{ app = "Msg[pattern=ring]", procs = 2 }}, {{ app = "Msg[pattern=ring]", procs = 2 }}]
[scheduler]
policy = "{policy}"
node_policy = "{node_policy}"
mpl = 2
[real]
mpi = "mpich"
nodes = 2
build_dir = "{build_dir()}"
programs = {{ "Msg[pattern=ring]" = ["{exe}", "{iters}", "200"] }}
""")
            s = real.run(cfg, Path(tmp) / "out")["real"]
            rows.append({
                "scheme": f"{policy}+{node_policy}",
                "wall_s": s["wall_s"],
                "agent_cpu_pct": 100.0 * s["agent_cpu_s"] / s["wall_s"],
                "agent_events": s["agent_events"],
                "quantum_ms": q,
                "switches": s["gang_switches"],
                "switch_ms_median": s["gang_switch_ms_median"],
                "switch_pct_of_quantum": None if q is None or s["gang_switch_ms_median"] is None
                else 100.0 * s["gang_switch_ms_median"] / q,
            })
    return rows
