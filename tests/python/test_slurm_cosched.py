"""cosched under Slurm, end to end on the one-machine test cluster: real node agents beside the slurmd's,
the SPANK plugin, the MPI shim (MPICH), jobs launched with srun.

Needs root, Debian's Slurm and MPICH, and the project's C parts and agent (built here); .ci/run installs the
packages. A missing piece fails these tests: they are never skipped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "scripts" / "slurm-testbed"
BUILD = ROOT / "build" / "real"
PROBE = BUILD / "cosched-probe-mpich"


def run(cmd, env=None, timeout=120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    r = run(["cargo", "build", "--release", "-q", "-p", "cosched-real", "--bin", "cosched-agent"], cwd=ROOT,
            timeout=1200)
    assert r.returncode == 0, r.stderr
    r = run(["make", "-s", "-C", str(ROOT), "real", "spank"], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    d = tmp_path_factory.mktemp("slurm-cosched") / "testbed"
    r = run([str(TESTBED), "up", "--nodes", "2", "--dir", str(d),
             "--agent-bin", str(ROOT / "target" / "release" / "cosched-agent"),
             "--plugin", str(BUILD / "cosched_spank.so"), "--shim", str(BUILD / "libcosched-mpich.so")])
    assert r.returncode == 0, r.stdout + r.stderr
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
    testbed = json.loads((d / "testbed.json").read_text())
    # This test cluster's own names: its cpusets, its agents' runs (cgroups cosched.<run>.*) and the runs of
    # the steps it ran (segments /dev/shm/cosched.<run>.*).
    agent_runs = [x["cmd"].split("--run ")[1].split()[0] for x in testbed["daemons"] if x["name"].startswith("agent")]
    step_runs: list[str] = []
    try:
        yield env, d, step_runs
    finally:
        r = run([str(TESTBED), "down", "--dir", str(d)])
        assert r.returncode == 0, r.stderr
        assert not d.exists()
        roots = [Path("/sys/fs/cgroup") / r for r in ("cpu", "cpuset", "freezer", "cpuacct")]
        left = [p for root in roots for run_id in agent_runs for p in root.glob(f"cosched.{run_id}.*")]
        left += [Path(c["path"]) for c in testbed["cgroups"] if Path(c["path"]).exists()]
        assert not left, left
        segs = [p for run_id in step_runs for p in Path("/dev/shm").glob(f"cosched.{run_id}.*")]
        assert not segs, segs


def shim_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_two_node_job_runs_with_the_shim_registered_on_both_agents(cluster, tmp_path):
    env, _, step_runs = cluster
    log = tmp_path / "shim.jsonl"
    r = run(["srun", "-N2", "-n2", "--mpi=pmi2", "--cosched=sb", str(PROBE), "pingpong", "2000", "8"],
            env=dict(env, COSCHED_LOG=str(log)))
    assert r.returncode == 0, r.stderr
    lines = sorted(shim_lines(log), key=lambda x: x["rank"])
    assert [x["rank"] for x in lines] == [0, 1]
    assert all(x["agent"] for x in lines), lines  # both ranks were registered and served to the end
    assert lines[0]["run"] == lines[1]["run"] and lines[0]["run"].startswith("s")
    step_runs.append(lines[0]["run"])
    assert all(x["msgs_sent"] >= 2000 for x in lines)


def test_a_job_without_the_option_gets_no_shim(cluster, tmp_path):
    env, _, _ = cluster
    log = tmp_path / "shim.jsonl"
    r = run(["srun", "-N2", "-n2", "--mpi=pmi2", str(PROBE), "pingpong", "200", "8"],
            env=dict(env, COSCHED_LOG=str(log)))
    assert r.returncode == 0, r.stderr
    assert shim_lines(log) == []


def test_slurm_suspend_and_resume_still_work_on_a_coscheduled_job(cluster, tmp_path):
    env, _, _ = cluster
    out = tmp_path / "out.txt"
    r = run(["sbatch", "-N2", "-n2", "-o", str(out), "--wrap",
             f"srun --mpi=pmi2 --cosched=hybrid {PROBE} sleepwait 3"], env=env)
    assert r.returncode == 0, r.stderr
    job = r.stdout.split()[-1]

    def state() -> str:
        return run(["scontrol", "show", "job", job], env=env).stdout.split("JobState=")[1].split()[0]

    deadline = time.monotonic() + 60
    while state() != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # let the step start (a job suspended as it starts is a known Slurm trap)
    assert run(["scontrol", "suspend", job], env=env).returncode == 0
    assert state() == "SUSPENDED"
    time.sleep(1.0)
    assert run(["scontrol", "resume", job], env=env).returncode == 0
    while state() in ("RUNNING", "COMPLETING") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert state() == "COMPLETED", out.read_text() if out.exists() else ""


def test_an_agent_killed_mid_run_leaves_the_job_running_and_its_next_start_restores_the_ranks(cluster, tmp_path):
    env, d, step_runs = cluster
    testbed = json.loads((d / "testbed.json").read_text())
    agent = next(x for x in testbed["daemons"] if x["name"] == "agent cn1")
    run_id = agent["cmd"].split("--run ")[1].split()[0]
    cpu = Path("/sys/fs/cgroup/cpu")
    log = tmp_path / "shim.jsonl"
    # Rank 1 (on cn1) sleeps 6 s, then sends; rank 0 waits for it.
    job = subprocess.Popen(
        ["srun", "-N2", "-n2", "--mpi=pmi2", "--cosched=dcs", str(PROBE), "sleepwait", "6"],
        env=dict(env, COSCHED_LOG=str(log)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        leaves: list[Path] = []
        while not leaves and time.monotonic() < deadline:
            time.sleep(0.1)
            leaves = list(cpu.glob(f"cosched.{run_id}.*/j*r*"))
        assert leaves, "the agent of cn1 never placed its rank in a cgroup of its own"
        os.kill(agent["pid"], signal.SIGKILL)
        # The next start of an agent with that state (here its cleanup command) restores what the killed one
        # left, while the job still runs: the rank leaves the agent's cgroups (weights back to the default).
        r = run([agent["bin"], "cleanup", "--state-dir", agent["state_dir"]])
        assert r.returncode == 0, r.stderr
        assert job.poll() is None, "the job ended before the agent's leftovers could be checked"
        assert not list(cpu.glob(f"cosched.{run_id}.*")), list(cpu.glob(f"cosched.{run_id}.*"))
        _, err = job.communicate(timeout=180)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, err
    step_runs.extend({x["run"] for x in shim_lines(log)})
