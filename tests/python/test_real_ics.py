"""Real execution: implicit coscheduling's conditional spin carried out for a real MPI rank.

The node agent hosts ICS (the simulator's policy code); a message that lands for a rank spinning in a
wait makes ICS extend the spin (SpinFor), the agent stores the new end in the rank's segment, and the
shim's spin loop uses it. The program: rank 1 waits for a message (tag 2) that rank 0 sends after a
stream of other messages (tag 1) to it, one every 100 us of rank 0's CPU time; the stream lasts 40 ms
of rank 0's CPU time, far longer than the waits' baseline spin (10 ms), so without a spin change every
such wait blocks after its baseline spin. Needs MPICH (Debian mpich libmpich-dev) and root for the
agent's cgroups; nothing here skips. The machine is shared: assertions are on mechanisms (what the
shim's counters say about its waits), never on absolute times.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "real"

BASELINE_US = 10_000  # the waits' first-phase spin (ICS: rtt + 2 x switch; SB: spin_us)
COND_US = 20_000  # ICS's conditional spin: a message landing while spinning keeps it spinning this long
GAP_NS = 100_000  # rank 0's CPU time between two messages of the stream
STREAM = 400  # messages per round before the awaited one (40 ms of rank 0's CPU time)
ROUNDS = 10
ICS = f"ics[rtt_us={BASELINE_US},switch_us=0,cond_us={COND_US}]"
SB = f"sb[spin_us={BASELINE_US}]"

PROGRAM = f"""cosched-program 1
program ics-stream
ranks 2
memory_mb 0
noise_cv 0
scale 1
collectives library
rank 0 6
loop {ROUNDS} 5
recv 1 3
loop {STREAM} 2
compute {GAP_NS}
send 1 8 1
send 1 8 2
end
rank 1 5
loop {ROUNDS} 4
send 0 8 3
recv 0 2
loop {STREAM} 1
recv 0 1
end
"""


@pytest.fixture(scope="module")
def built(node_agent: Path) -> Path:
    r = subprocess.run(["make", "-s", "real"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"make real failed:\n{r.stdout}\n{r.stderr}"
    for f in (BUILD / "libcosched-mpich.so", BUILD / "cosched-ir-run-mpich"):
        assert f.exists(), f"{f} not built: install the Debian packages mpich libmpich-dev"
    return node_agent


def run_once(exe: Path, tmp: Path, policy: str, i: int) -> list[dict]:
    """One run of the program under an agent that hosts `policy`; the shim's log lines by rank."""
    run = "t" + uuid.uuid4().hex[:12]
    sock = tmp / f"agent-{i}.sock"
    log = tmp / f"shim-{i}.jsonl"
    prog = tmp / "stream.txt"
    prog.write_text(PROGRAM)
    agent = subprocess.Popen([str(exe), "serve", "--run", run, "--default-policy", policy, "--node", f"0::{sock}",
                              "--state-dir", str(tmp / "state")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # True also once the agent has exited (then the socket is missing: checked below).
        wait_for(lambda: sock.exists() or agent.poll() is not None, 60, f"the agent to create {sock}")
        assert sock.exists(), f"the agent did not start: {agent.stdout.read() if agent.poll() is not None else ''}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("COSCHED_")}
        env.update(COSCHED_AGENT=str(sock), COSCHED_REQUIRED="1", COSCHED_RUN=run, COSCHED_JOB="1",
                   COSCHED_LOG=str(log))
        r = subprocess.run(["mpiexec.mpich", "-n", "2", "-genv", "LD_PRELOAD", str(BUILD / "libcosched-mpich.so"),
                            str(BUILD / "cosched-ir-run-mpich"), str(prog)],
                           env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        agent.terminate()
        out, _ = agent.communicate(timeout=120)
    assert agent.returncode == 0, f"the agent exited with {agent.returncode}:\n{out}"
    return sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda d: d["rank"])


def test_ics_spin_change_keeps_a_real_rank_spinning_while_messages_land(built: Path, tmp_path: Path) -> None:
    ics, sb = [], []
    for i in range(3):  # alternated, so that both see the same load
        ics.append(run_once(built, tmp_path, ICS, 2 * i))
        sb.append(run_once(built, tmp_path, SB, 2 * i + 1))
    for ranks in ics + sb:
        assert all(d["agent"] is True for d in ranks), ranks
        # Rank 1 waits for tag 2 (the stream cannot complete that wait).
        assert ranks[1]["waits"] >= 1, ranks[1]
    # SB never changes a spin: its waits use their wait mode's spin.
    assert all(d["spin_changes"] == 0 and d["changed_spin_ns"] == 0 for ranks in sb for d in ranks), sb
    # ICS: messages landing while rank 1 spins reached its spin loop as a new end...
    changed = [ranks[1]["spin_changes"] for ranks in ics]
    assert sum(changed) >= 1, f"no spin change reached rank 1 in 3 runs: {ics}"
    # ...and the new end was used: a changed wait spins until at least COND after the change (or until the
    # awaited message, 40 ms of rank 0's CPU time away), longer than the wait mode's baseline, which is
    # where every unchanged wait of rank 1 stops spinning.
    for ranks in ics:
        r1 = ranks[1]
        if r1["spin_changes"]:
            assert r1["changed_spin_ns"] / r1["spin_changes"] > BASELINE_US * 1000, r1
    per_wait = {name: sorted(rs[1]["spin_ns"] / rs[1]["waits"] / 1e6 for rs in runs)
                for name, runs in (("ics", ics), ("sb", sb))}
    print(f"rank 1 spin per wait (ms), ics {per_wait['ics']}, sb {per_wait['sb']}; ics changes {changed}")
