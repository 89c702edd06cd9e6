"""`cosched bench real`'s ping-pong binds its two ranks to distinct cores, so a spin-then-block wait whose spin
outlasts the round trip is measured as a spin, not as the spin time plus a wake-up of two ranks the scheduler
put on one CPU (docs/real.md, "The shim's latency"). Needs MPICH and `make real` (CI provides them; without
them the test fails, it does not skip)."""

from __future__ import annotations

import json
import statistics
import subprocess

from coscheduling import real_bench


def test_bound_command_binds_each_rank_to_a_core() -> None:
    cmd, _ = real_bench.mpi_command("mpich", 2, ["prog"], "block", bind=True)
    assert cmd[:3] == ["mpiexec.mpich", "-bind-to", "core"]
    cmd, _ = real_bench.mpi_command("openmpi", 2, ["prog"], "block", bind=True)
    assert "--bind-to" in cmd and cmd[cmd.index("--bind-to") + 1] == "core"
    assert "-bind-to" not in real_bench.mpi_command("mpich", 2, ["prog"], "block")[0]


def _half_rtt_us(wait: str) -> float:
    probe = str(real_bench.build_dir() / "cosched-probe-mpich")
    cmd, env = real_bench.mpi_command("mpich", 2, [probe, "pingpong", "2000", "8"], wait, bind=True)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["half_rtt_ns"] / 1e3


def test_real_bench_spin_then_block_is_not_slower_than_block() -> None:
    # Alternated, medians of 3. A 50 us spin outlasts the round trip of two ranks on their own cores (about
    # 0.3 us measured here), so its waits end spinning; block pays a futex wake-up on another CPU per message.
    runs: dict[str, list[float]] = {"spinblock:50": [], "block": []}
    for _ in range(3):
        for wait, vals in runs.items():
            vals.append(_half_rtt_us(wait))
    med = {k: statistics.median(v) for k, v in runs.items()}
    assert med["spinblock:50"] < med["block"], runs
