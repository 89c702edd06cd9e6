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
from coscheduling.experiments import realslurm

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "real"


def run(cmd, env=None, timeout=120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def built(node_agent):
    """The C parts and the SPANK plugin; the agent is conftest's `node_agent` (the experiment is told its path)."""
    r = run(["make", "-s", "-C", str(ROOT), "real", "spank"], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    with pytest.MonkeyPatch.context() as m:
        m.setenv("COSCHED_AGENT_BIN", str(node_agent))
        yield


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


def _on_slurm_gang_cluster(c, d: Path, env: dict) -> dict:
    """Run on the quick experiment's `slurm-gang` test cluster (PreemptMode=GANG, OverSubscribe=FORCE:2, agents
    and coordinator) once its workload has ended: a --cosched-gang step, then a node-level scheme's step."""
    probe = [str(BUILD / "cosched-probe-mpich"), "sleepwait", "0.5"]
    got = {"dir": d}
    r = run(["srun", "-N2", "-n2", "--mem=100M", "--mpi=pmi2", "--cosched-gang", *probe], env=env)
    got["gang"] = (r.returncode, r.stderr)
    got["coord_out"] = (d / "coord.out").read_text()
    got["squeue"] = run(["squeue", "-h"], env=env).stdout.strip()
    r = run(["srun", "-N2", "-n2", "--mem=100M", "--mpi=pmi2", "--cosched=hybrid", *probe], env=env)
    got["hybrid"] = (r.returncode, r.stderr)
    return got


def test_cosched_gang_is_refused_under_slurm_gang_and_other_schemes_still_run(quick):
    _, _, on_gang = quick
    rc, err = on_gang["gang"]
    assert rc != 0
    assert "--cosched-gang is refused on this cluster" in err and "PreemptMode=GANG" in err, err
    # Nothing of the refused step reached an agent's coordinator, and no job is left.
    assert "placed" not in on_gang["coord_out"]
    assert on_gang["squeue"] == ""
    # A node-level scheme runs as usual beside Slurm's time slicing.
    rc, err = on_gang["hybrid"]
    assert rc == 0, err
    # The cluster came down with the experiment's others (checked by the fixture) and left no folder.
    assert not on_gang["dir"].exists()


@pytest.fixture(scope="module")
def quick(built, tmp_path_factory):
    import shutil
    import tempfile

    out = tmp_path_factory.mktemp("real-slurm") / "out"
    # The experiment's test clusters go under a folder of this test's own (another run of the experiment on the
    # machine has folders of the same prefix elsewhere), short: slurmd's step sockets live under it and a Unix
    # socket path has at most 107 bytes.
    own = tempfile.mkdtemp(prefix="cosched-rs-")
    # The refused --cosched-gang check runs on the experiment's slurm-gang cluster (one test cluster less).
    on_gang: dict = {}

    def after(c, d, env):
        if c.id == "slurm-gang":
            on_gang.update(_on_slurm_gang_cluster(c, d, env))

    saved, tempfile.tempdir = tempfile.tempdir, own
    realslurm.after_workload = after
    try:
        written, _ = experiments.run_experiment("real-slurm", out, settings=experiments.Settings(quick=True))
    finally:
        tempfile.tempdir = saved
        realslurm.after_workload = None
    # Every test cluster came down: no daemon or agent of ours names its folder any more.
    assert _testbed_processes(own) == []
    shutil.rmtree(own)
    assert on_gang, "the slurm-gang configuration did not run"
    return out, written, on_gang


def test_the_quick_report_has_its_files_a_table_per_configuration_and_provenance(quick):
    out, written, _ = quick
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
    out, _, _ = quick
    mech = pd.read_csv(out / "mechanisms.csv").set_index("config")
    assert mech.loc["fifo", "overlapping_pairs"] == 0
    assert mech.loc["fifo", "samples_two_running"] == 0
    assert mech.loc["fifo", "suspensions"] == 0
    j = pd.read_csv(out / "jobs_slurm.csv")
    f = j[j.config == "fifo"].sort_values("job")
    # The second job starts when the first ends: never before (Slurm's times are whole seconds), then after
    # Slurm's end-to-start chain (completion, epilog, the next scheduling pass), seconds on a loaded machine.
    # That they never overlap is checked above.
    gap = f.start_s.iloc[1] - f.end_s.iloc[0]
    assert -1.0 <= gap <= 5.0, (gap, f)


def test_slurm_gang_suspends_and_alternates_the_jobs(quick):
    out, _, _ = quick
    mech = pd.read_csv(out / "mechanisms.csv").set_index("config")
    g = mech.loc["slurm-gang"]
    assert g.samples_two_running == 0  # one job at a time on the nodes
    assert g.samples_suspended > 0
    assert g.suspensions >= 1  # a running job was suspended (time slicing), not only the second one at its start
    assert g.overlapping_pairs == 1  # both were allocated (time-sliced) at once


def test_cosched_schemes_share_the_nodes_and_cosched_gang_switches_on_both_nodes(quick):
    out, _, _ = quick
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
    out, _, _ = quick
    m = pd.read_csv(out / "metrics.csv").set_index("config")
    # The quick jobs wait (sleep) 11 s each: run one after the other they take about twice as long as when
    # they share the nodes (a sleeping job leaves its CPU to the other). Slurm's gang is not bounded here: a
    # job that Slurm suspends as it starts may create its step only after srun's retries (an 11 s job was
    # seen to take 80 s), so only its mechanism is checked (above).
    assert m.loc["hybrid", "makespan_s"] <= 0.75 * m.loc["fifo", "makespan_s"]
    assert m.loc["cosched-gang", "makespan_s"] <= 0.75 * m.loc["fifo", "makespan_s"]


# --- The simulated column and the repetitions (no test cluster needed) ---


def test_every_configuration_has_its_simulated_scheme():
    got = {c.id: realslurm.sim_scheme(c) for c in realslurm.CONFIGS}
    assert got == {
        "fifo": ("batch", "nls", 1),
        "backfill": ("batch[backfill=easy,estimates=perfect]", "nls", 1),
        "slurm-gang": ("gang[quantum_ms=5000,rows=2]", "nls", 2),
        "nls": ("fcfs", "nls", 2),
        "sb": ("fcfs", "sb", 2),
        "hybrid": ("fcfs", "hybrid", 2),
        "ics": ("fcfs", "ics", 2),
        "cosched-gang": ("gang[quantum_ms=100,rows=2]", "nls", 2),
    }
    cfg = realslurm.sim_config(realslurm.CONFIGS[0], realslurm.WORKLOAD, {"preset": "lee4", "nodes": 2})
    assert [j["submit_s"] for j in cfg["workload"]["jobs"]] == [0, 0.3, 0.6, 0.9]
    assert [j["app"] for j in cfg["workload"]["jobs"]] == [j.app for j in realslurm.WORKLOAD]


def test_repetitions_give_each_metric_s_median_and_spread():
    m = pd.DataFrame({
        "config": ["fifo"] * 3 + ["sb"] * 3, "rep": [0, 1, 2] * 2, "jobs": 4, "completed": 4,
        "makespan_s": [10, 14, 11, 7, 7, 7], "mean_wait_s": [3, 5, 4, 1, 1, 1], "mean_exec_s": [2, 2, 3, 4, 4, 4],
        "mean_response_s": [5, 7, 7, 5, 5, 5], "mean_slowdown": [1.0, 1.5, 2.0, 2, 2, 2],
    })
    s = realslurm.summarize(m).set_index("config")
    assert s.loc["fifo", "repetitions"] == 3 and s.loc["fifo", "completed"] == 12
    f = s.loc["fifo"]
    assert (f.makespan_s, f.makespan_min_s, f.makespan_max_s) == (11, 10, 14)
    assert (f.mean_slowdown, f.mean_slowdown_min, f.mean_slowdown_max) == (1.5, 1.0, 2.0)
    t = realslurm.spread_table(s.reset_index()).set_index("config")
    assert t.loc["fifo", "makespan_s"] == "11.00 (10.00-14.00)"
    assert t.loc["sb", "makespan_s"] == "7.00"  # no spread: the median alone
    # Slowdown is against each job's median execution under fifo over the repetitions.
    jobs = pd.DataFrame({"config": ["fifo"] * 3 + ["sb"], "rep": [0, 1, 2, 0], "job": 0, "state": "COMPLETED",
                         "submit_s": 0.0, "start_s": 0.0, "end_s": [2.0, 4.0, 9.0, 8.0]})
    mm = realslurm.metrics(jobs).set_index("config")
    assert mm.loc["sb", "mean_slowdown"] == 2.0  # 8 / median(2, 4, 9)


def test_real_against_simulated_per_configuration_with_kendall_tau():
    summary = pd.DataFrame({"config": ["a", "b", "c"], "mean_response_s": [10.0, 20.0, 30.0],
                            "mean_response_min_s": [9.0, 19, 29], "mean_response_max_s": [11.0, 21, 31]})
    sim = pd.DataFrame({"config": ["a", "b", "c"], "sim_scheme": "x", "sim_makespan_s": 0.0, "sim_mean_wait_s": 0.0,
                        "sim_mean_response_s": [5.0, 40.0, 30.0]})
    t, agree = realslurm.compare(summary, sim)
    assert list(t.error) == [-0.5, 1.0, 0.0]
    # Pairs (a,b) and (a,c) agree, (b,c) disagrees: tau = (2 - 1) / 3.
    assert agree["kendall_tau"] == pytest.approx(1 / 3)
    assert not agree["same_order"] and agree["real_order"] == ["a", "b", "c"] and agree["sim_order"] == ["a", "c", "b"]
    # The simulation without the launch calibration beside it: its own errors and tau.
    t, agree = realslurm.compare(summary, sim.assign(sim_nolaunch_mean_response_s=[5.0, 10.0, 20.0]))
    assert list(t.error_nolaunch) == [-0.5, -0.5, -1 / 3]
    assert agree["kendall_tau_nolaunch"] == pytest.approx(1.0) and agree["kendall_tau"] == pytest.approx(1 / 3)


def test_the_simulated_column_runs_every_configuration_on_a_given_preset(tmp_path):
    # A hand-made preset (the measured one comes from real-vs-sim): 2 nodes of lee4, cfs.
    plat = {"preset": "lee4", "nodes": 2, "os": {"model": "cfs"}, "os_noise_tick_us": 0.0, "cpu_speed": 1.0,
            "latency_us": 1.0, "bandwidth_mb_s": 1000.0, "send_overhead_us": 0.0, "recv_overhead_us": 0.0,
            "interrupt_us": 5.0, "context_switch_us": 3.0}
    sim = realslurm.simulate(realslurm.CONFIGS, realslurm.WORKLOAD, plat, tmp_path).set_index("config")
    assert list(sim.index) == [c.id for c in realslurm.CONFIGS]
    # Every job spans both nodes: backfilling has no hole, so backfill is FIFO exactly.
    assert sim.loc["backfill", "sim_mean_response_s"] == sim.loc["fifo", "sim_mean_response_s"]
    # FIFO runs one job at a time, the others queue; at MPL 2 the first two jobs start at their submission.
    assert sim.loc["fifo", "sim_mean_wait_s"] > sim.loc["nls", "sim_mean_wait_s"]
    assert sim.loc["fifo", "sim_mean_wait_s"] > sim.loc["cosched-gang", "sim_mean_wait_s"]
    # Deterministic: the same configuration gives the same figures.
    again = realslurm.simulate(realslurm.CONFIGS[-1:], realslurm.WORKLOAD, plat, tmp_path / "again")
    assert again.sim_mean_response_s.iloc[0] == sim.loc["cosched-gang", "sim_mean_response_s"]


def test_the_launch_calibration_gives_each_configuration_its_median_start_and_end_delay(tmp_path):
    rows = pd.DataFrame({
        "config": ["fifo"] * 3 + ["ics"] * 3, "job": [0, 1, 2] * 2,
        "submit_to_script_s": [0.4, 0.5, 3.0, 0.2, 0.2, 0.2], "step_s": [0.3, 0.25, 0.2, 0.5, 0.6, 0.7],
        "script_end_to_gone_s": [0.1, 0.9, 0.2, 0.3, 0.3, 0.3],
    })
    d = realslurm.launch_delays(rows).set_index("config")
    # Submit latency = median submit-to-script, start = median step, end = median script-end-to-gone (medians:
    # one slow job does not move them).
    f, i = d.loc["fifo"], d.loc["ics"]
    assert (f.submit_latency_s, f.start_delay_s, f.end_delay_s) == (0.5, 0.25, 0.2)
    assert (i.submit_latency_s, i.start_delay_s, i.end_delay_s) == (0.2, 0.6, 0.3)
    assert f.jobs == 3
    # The simulated jobs get them: submitted the latency later, the delays on each (none without a calibration).
    plat = {"preset": "lee4", "nodes": 2}
    cfg = realslurm.sim_config(realslurm.CONFIGS[0], realslurm.WORKLOAD, plat, (0.5, 0.25, 0.2))
    assert [j["submit_s"] for j in cfg["workload"]["jobs"]] == [0.5, 0.8, 1.1, 1.4]
    assert all((j["start_delay_s"], j["end_delay_s"]) == (0.25, 0.2) for j in cfg["workload"]["jobs"])
    cfg = realslurm.sim_config(realslurm.CONFIGS[0], realslurm.WORKLOAD, plat)
    assert not any("start_delay_s" in j or "end_delay_s" in j for j in cfg["workload"]["jobs"])
    # Waits and responses count from the real submission: the latency comes back on top of the simulated ones
    # (the same schedule, shifted; the platform's OS noise ticks may fall differently: a tolerance of 10 ms).
    one = realslurm.CONFIGS[:1]
    base = realslurm.simulate(one, realslurm.WORKLOAD, plat, tmp_path / "a").iloc[0]
    late = realslurm.simulate(one, realslurm.WORKLOAD, plat, tmp_path / "b", {"fifo": (0.5, 0.0, 0.0)}).iloc[0]
    assert late.sim_mean_response_s == pytest.approx(base.sim_mean_response_s + 0.5, abs=0.01)
    assert late.sim_mean_wait_s == pytest.approx(base.sim_mean_wait_s + 0.5, abs=0.01)
    # Only the ICS configuration forwards message events across nodes (its policy acts on arrivals).
    assert [c.id for c in realslurm.CONFIGS if "--cosched-forward" in c.srun_options()] == ["ics"]


_FAKE_AGENT = """
import json, signal, sys, time
log, n = sys.argv[1], int(sys.argv[2])
def stats(*_):
    with open(log, "a") as f:
        f.write("cosched-agent: stats " + json.dumps({"forwarded_out": n, "spin_changes": 2 * n, "other": 1}) + "\\n")
signal.signal(signal.SIGUSR1, stats)
with open(log, "a") as f:
    f.write("cosched-agent: stats {\\"forwarded_out\\": 999}\\nready\\n")  # printed before the request: not read
time.sleep(60)
"""


def test_agent_counters_ask_every_agent_and_sum_only_what_they_print_after_the_request(tmp_path):
    """``realslurm.agent_stats`` / ``agent_counters`` on a folder laid out as a test cluster's, with two stand-in
    agents (Python processes that print a stats line on SIGUSR1); no Slurm needed."""
    import json
    import signal
    import sys

    from conftest import wait_for

    procs, daemons = [], []
    try:
        for k, node in enumerate(("cn0", "cn1")):
            log = tmp_path / f"agent.{node}.out"
            p = subprocess.Popen([sys.executable, "-c", _FAKE_AGENT, str(log), str(k + 1)])
            procs.append(p)
            daemons.append({"name": f"agent {node}", "pid": p.pid})
            wait_for(lambda log=log: log.exists() and "ready" in log.read_text(), 60, f"{log} to be ready")
        daemons.append({"name": "slurmctld", "pid": 1})  # not an agent: never signalled
        (tmp_path / "testbed.json").write_text(json.dumps({"daemons": daemons}))
        per_node = realslurm.agent_stats(tmp_path, timeout_s=60)
        assert per_node == {"cn0": {"forwarded_out": 1, "spin_changes": 2, "other": 1},
                            "cn1": {"forwarded_out": 2, "spin_changes": 4, "other": 1}}
        summed = realslurm.agent_counters(tmp_path, timeout_s=60)
        assert summed == {k: 0 for k in realslurm.AGENT_COUNTERS} | {"forwarded_out": 3, "spin_changes": 6}
        # An agent that does not answer: the wait fails naming it.
        procs[1].send_signal(signal.SIGSTOP)  # alive, but it cannot print (SIGUSR1 stays pending)
        with pytest.raises(RuntimeError, match=r"agents \['cn1'\] to print their counters"):
            realslurm.agent_stats(tmp_path, timeout_s=0.5)
    finally:
        for p in procs:
            p.kill()
            p.wait()

