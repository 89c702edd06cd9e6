"""`cosched reproduce real-slurm --quick` on the one-machine Slurm test cluster, and --cosched-gang under Slurm's
own gang scheduling.

Needs root, Debian's Slurm and MPICH, and the project's C parts and agent (built here); .ci/run installs the
packages. A missing piece fails these tests: they are never skipped. Real times vary with the machine's load, so
the checks are on mechanisms and on relations between runs with tolerances, never on absolute times.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from coscheduling import experiments

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "scripts" / "slurm-testbed"
BUILD = ROOT / "build" / "real"


def run(cmd, env=None, timeout=120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def built():
    r = run(
        ["cargo", "build", "--release", "-q", "-p", "cosched-real", "--bin", "cosched-agent"], cwd=ROOT, timeout=1200
    )
    assert r.returncode == 0, r.stderr
    r = run(["make", "-s", "-C", str(ROOT), "real", "spank"], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def _testbed_processes(marker: str) -> list[str]:
    """Command lines of live processes that name `marker` (a test cluster's folder)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd and d.name != str(os.getpid()):
                out.append(f"{d.name}: {cmd}")
    return out


def test_cosched_gang_is_refused_under_slurm_gang_and_other_schemes_still_run(built, tmp_path):
    d = tmp_path / "testbed"
    r = run(
        [
            str(TESTBED),
            "up",
            "--nodes",
            "2",
            "--dir",
            str(d),
            "--gang",
            "--oversubscribe",
            "2",
            "--coord",
            "--agent-bin",
            str(ROOT / "target" / "release" / "cosched-agent"),
            "--plugin",
            str(BUILD / "cosched_spank.so"),
            "--shim",
            str(BUILD / "libcosched-mpich.so"),
        ]
    )
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
        probe = [str(BUILD / "cosched-probe-mpich"), "sleepwait", "0.5"]
        r = run(["srun", "-N2", "-n2", "--mem=100M", "--mpi=pmi2", "--cosched-gang", *probe], env=env)
        assert r.returncode != 0
        assert "--cosched-gang is refused on this cluster" in r.stderr and "PreemptMode=GANG" in r.stderr, r.stderr
        # Nothing of the refused step reached an agent's coordinator, and no job is left.
        assert "placed" not in (d / "coord.out").read_text()
        assert run(["squeue", "-h"], env=env).stdout.strip() == ""
        # A node-level scheme runs as usual beside Slurm's time slicing.
        r = run(["srun", "-N2", "-n2", "--mem=100M", "--mpi=pmi2", "--cosched=hybrid", *probe], env=env)
        assert r.returncode == 0, r.stderr
    finally:
        r = run([str(TESTBED), "down", "--dir", str(d)])
        assert r.returncode == 0, r.stderr
    assert not d.exists()
    assert _testbed_processes(str(d)) == []


@pytest.fixture(scope="module")
def quick(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("real-slurm") / "out"
    written, _ = experiments.run_experiment("real-slurm", out, settings=experiments.Settings(quick=True))
    # Every test cluster came down: no daemon or agent of ours names its folder any more.
    assert _testbed_processes("cosched-real-slurm-") == []
    return out, written


def test_the_quick_report_has_its_files_a_table_per_configuration_and_provenance(quick):
    out, written = quick
    names = {p.name for p in written}
    assert {
        "report.md",
        "metrics.csv",
        "jobs_slurm.csv",
        "samples.csv",
        "gang.csv",
        "mechanisms.csv",
        "configs.csv",
    } <= names
    m = pd.read_csv(out / "metrics.csv")
    assert list(m.config) == ["fifo", "slurm-gang", "hybrid", "cosched-gang"]
    assert (m.jobs == 2).all() and (m.completed == 2).all()
    for col in ("makespan_s", "mean_wait_s", "mean_exec_s", "mean_response_s", "mean_slowdown"):
        assert m[col].notna().all(), col
    text = (out / "report.md").read_text()
    assert "commit `" in text and "load average" in text and "jobcomp/filetxt" in text
    # The simulated counterpart is either there or said to be missing, never silently absent.
    assert "## Simulated counterpart" in text
    assert not list(out.glob(".*.tmp"))


def test_fifo_runs_the_jobs_one_after_the_other(quick):
    out, _ = quick
    mech = pd.read_csv(out / "mechanisms.csv").set_index("config")
    assert mech.loc["fifo", "overlapping_pairs"] == 0
    assert mech.loc["fifo", "samples_two_running"] == 0
    assert mech.loc["fifo", "suspensions"] == 0
    j = pd.read_csv(out / "jobs_slurm.csv")
    f = j[j.config == "fifo"].sort_values("job")
    # The second job starts when the first ends (Slurm's times are whole seconds).
    assert abs(f.start_s.iloc[1] - f.end_s.iloc[0]) <= 1.0


def test_slurm_gang_suspends_and_alternates_the_jobs(quick):
    out, _ = quick
    mech = pd.read_csv(out / "mechanisms.csv").set_index("config")
    g = mech.loc["slurm-gang"]
    assert g.samples_two_running == 0  # one job at a time on the nodes
    assert g.samples_suspended > 0
    assert g.suspensions >= 1  # a running job was suspended (time slicing), not only the second one at its start
    assert g.overlapping_pairs == 1  # both were allocated (time-sliced) at once


def test_cosched_schemes_share_the_nodes_and_cosched_gang_switches_on_both_nodes(quick):
    out, _ = quick
    mech = pd.read_csv(out / "mechanisms.csv").set_index("config")
    assert mech.loc["hybrid", "samples_two_running"] > 0
    assert mech.loc["cosched-gang", "samples_two_running"] > 0
    gang = pd.read_csv(out / "gang.csv")
    released = gang["released"].fillna(False).astype(bool) if "released" in gang else False
    gang = gang[(gang.config == "cosched-gang") & ~released]
    per_node = gang.groupby("node").size()
    assert set(per_node.index) == {"cn0", "cn1"}
    assert (per_node >= 10).all(), per_node
    # The median interval between a node's switches is the quantum (100 ms), within 10%.
    for _, g in gang.groupby("node"):
        steps = g.boundary_ns.sort_values().diff().dropna()
        assert abs(steps.median() / 1e6 - 100.0) <= 10.0


def test_sharing_the_nodes_shortens_the_makespan_of_waiting_jobs(quick):
    out, _ = quick
    m = pd.read_csv(out / "metrics.csv").set_index("config")
    # The quick jobs wait (sleep) 11 s each: run one after the other they take about twice as long as when
    # they share the nodes (a sleeping job leaves its CPU to the other). Slurm's gang is not bounded here: a
    # job that Slurm suspends as it starts may create its step only after srun's retries (an 11 s job was
    # seen to take 80 s), so only its mechanism is checked (above).
    assert m.loc["hybrid", "makespan_s"] <= 0.75 * m.loc["fifo", "makespan_s"]
    assert m.loc["cosched-gang", "makespan_s"] <= 0.75 * m.loc["fifo", "makespan_s"]
