"""`cosched reproduce real-vs-sim`: the preset built from the micro-benchmarks (worked by hand), and the
quick version end to end (structure and mechanism; real times only as medians with tolerances). Needs
what tests/python/test_real_agent.py needs (root, cgroups, MPICH, `make real`)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_real_agent import BUILD, CGROUP_ROOTS

from coscheduling.experiments import osfit, realsim


def test_the_preset_is_built_from_the_measurements_only() -> None:
    bench = {
        "mpi": {"mpich": {"spin_8": {"p10_us": 10.0}, "block_8": {"p10_us": 15.0},
                          "spin_1m": {"p10_us": 10.0 + 1048.576}}},
        "context_switch": {"switch_us": 3.0},
        "compute": {"cpu_speed": 0.9},
        "detour": {"short_fraction": 0.002},
    }
    p = realsim.preset(bench, "mpich", "rr")
    # 1 MiB in 1048.576 us more than 8 bytes: 1000 MB/s; the 8 bytes' own transfer is 0.008 us.
    assert p["bandwidth_mb_s"] == 1000.0
    assert p["latency_us"] == pytest.approx(9.992)
    assert p["interrupt_us"] == 5.0  # blocking - spinning
    assert p["context_switch_us"] == 3.0
    assert p["cpu_speed"] == 0.9
    assert p["os"] == {"model": "rr"}
    assert (p["send_overhead_us"], p["recv_overhead_us"]) == (0.0, 0.0)
    # The real runs' boosts are the agent's: re-checked on its schedule (a mechanism property, not measured).
    assert p["boost_recheck"] == "agent"
    # 0.2% of the running time lost to short detours, over rr's 10 ms timer period: 20 us per tick.
    assert p["os_noise_tick_us"] == 20.0
    assert realsim.preset(bench, "mpich", "cfs")["os_noise_tick_us"] == 8.0  # cfs: 4 ms
    # A calibration recorded before the noise was measured (real-slurm reads old ones): no noise, as then.
    # The real slices' spread goes to cfs only; without its measurement the nodes stay in step, as before.
    bench["slices"] = {"slice_cv": 0.21234}
    assert realsim.preset(bench, "mpich", "cfs")["os"] == {"model": "cfs", "slice_cv": 0.2123}
    assert realsim.preset(bench, "mpich", "rr")["os"] == {"model": "rr"}
    # The time-sharing benchmark's spread replaces `cosched-detour pair`'s; a fitted candidate's parameters
    # come with it (EEVDF's fixed slice of one tick as a cfs model); an unknown label is an error.
    bench["timeshare"] = {"features": {"slice_cv": 0.05}}
    assert realsim.preset(bench, "mpich", "eevdf-tick-4ms")["os"] == {
        "model": "cfs", "latency_ms": 4.0, "min_granularity_ms": 4.0, "slice_cv": 0.05}
    assert realsim.preset(bench, "mpich", "rr-tick-4ms")["os"] == {"model": "rr", "quantum_ms": 4.0}
    # The eevdf model: no slice spread (a cfs parameter); its noise is charged per its own tick, 4 ms here:
    # the same 8 us as cfs's 4 ms tick above.
    assert realsim.preset(bench, "mpich", "eevdf-rtp-1.5ms")["os"] == {
        "model": "eevdf", "slice_ms": 1.5, "tick_ms": 4.0}
    assert realsim.preset(bench, "mpich", "eevdf-rtp-1.5ms")["os_noise_tick_us"] == 8.0
    assert realsim.timer_tick_us({"model": "eevdf", "tick_ms": 1.0}) == 1000.0
    with pytest.raises(ValueError, match="unknown OS model 'bfs'"):
        realsim.preset(bench, "mpich", "bfs")
    del bench["slices"], bench["timeshare"]
    assert realsim.preset(bench, "mpich", "cfs")["os"] == {"model": "cfs"}
    del bench["detour"]
    assert realsim.preset(bench, "mpich", "cfs")["os_noise_tick_us"] == 0.0
    assert set(p) - {"preset"} == set(realsim.PRESET_FIELDS)
    # What the simulator charges a wake-up: the interrupt and one context switch.
    assert realsim.wake_charged_us(p) == 8.0
    # With the one-way probe (a calibration since it exists): blocking one-way delay - spinning half round
    # trip, whatever the blocking ping-pong gave (here one whose fastest rounds did not sleep).
    bench["mpi"]["mpich"].update(block_8={"p10_us": 10.3}, block_oneway={"p10_us": 21.5})
    assert realsim.preset(bench, "mpich", "rr")["interrupt_us"] == 11.5


def test_the_wakeup_tool_measures_every_case() -> None:
    """`cosched-wakeup` on the node CPUs, few rounds: every case sampled, percentiles in order, medians over
    runs per case (no timing is asserted: the machine may be loaded)."""
    runs = [realsim.wakeup(200) for _ in range(2)]
    for r in runs:
        assert (r["cpu_a"], r["cpu_b"], r["rounds"]) == (*realsim.NODE_CPUS, 200)
        for c in realsim.WAKEUP_CASES:
            assert r[c]["samples"] == (200 if c == "busy" else 400)
            assert 0 <= r[c]["p10_us"] <= r[c]["p50_us"] <= r[c]["p90_us"]
    med = realsim.wakeup_medians(runs)
    assert med["cross"]["p50_us"] == statistics.median(r["cross"]["p50_us"] for r in runs)
    assert set(med) == set(realsim.WAKEUP_CASES)


def test_library_yield_baseline_is_simulated_by_the_yield_node_policy(tmp_path: Path) -> None:
    """LIB-YIELD's simulated column runs the `yield` node policy: on the quick fine workload (2 jobs of 2
    ranks on 2 one-CPU nodes) no rank spins while the other job's rank is runnable, and nothing is woken by
    an interrupt; NLS spins."""
    assert {lab: npol for lab, _, _, npol in realsim.BASELINES} == {"LIB": "nls", "LIB-YIELD": "yield"}
    plat = {"preset": "lee4", "nodes": 2, "os": {"model": "cfs"}, "latency_us": 0.3, "bandwidth_mb_s": 10000.0,
            "send_overhead_us": 0.0, "recv_overhead_us": 0.0, "interrupt_us": 6.0, "context_switch_us": 2.0,
            "cpu_speed": 1.0, "os_noise_tick_us": 0.0}
    g = realsim.QUICK_GRAINS[0]
    y = realsim.run_sim(realsim.sim_config(plat, g, "fcfs", "yield"), tmp_path / "y")
    n = realsim.run_sim(realsim.sim_config(plat, g, "fcfs", "nls"), tmp_path / "n")
    assert y["process"]["interrupts"] == 0
    assert y["process"]["spin_s"] < 0.01 * y["process"]["useful_s"]
    assert n["process"]["spin_s"] > 10 * y["process"]["spin_s"]


def test_rank_agreement() -> None:
    assert realsim.kendall([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert realsim.kendall([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    rows = [{"mpi": "m", "granularity": "g", "scheme": s, "real_mean_response_s": r, "sim_with_launch_s": m}
            for s, r, m in (("A", 1.0, 2.0), ("B", 2.0, 1.0), ("C", 3.0, 3.0), ("DEDICATED", 0.5, 0.5))]
    (a,) = realsim._agreement(rows)
    assert a["real_order"] == ["A", "B", "C"] and a["sim_order"] == ["B", "A", "C"]
    assert not a["same_order"]
    assert a["kendall_tau"] == pytest.approx(1 / 3)  # 2 concordant pairs, 1 discordant


def test_compute_time_is_the_dedicated_run_minus_the_launch() -> None:
    # By hand: fine 0.9 - 0.4 = 0.5 s, coarse 1.5 - 0.4 = 1.1 s.
    got = realsim.compute_times({"fine": 0.9, "coarse": 1.5}, 0.4, "mpich")
    assert got == pytest.approx({"fine": 0.5, "coarse": 1.1})
    # A dedicated run no longer than the launch (0.35 <= 0.4) measured nothing but the launch: a clear error
    # naming the MPI, the granularity and both times, not a math domain error from the runtime check's log.
    with pytest.raises(ValueError, match=r"mpich fine: the dedicated run \(0\.350 s.*launch \(0\.400 s"):
        realsim.compute_times({"coarse": 1.5, "fine": 0.35}, 0.4, "mpich")
    with pytest.raises(ValueError, match="coarse"):
        realsim.compute_times({"coarse": 0.4}, 0.4, "openmpi")


def test_sim_trace_sees_lockstep_and_independent_nodes(tmp_path: Path) -> None:
    """Hand-made timelines of 2 jobs of 2 ranks on 2 nodes, 4 ms slices over 16 ms. In lockstep both nodes
    run the same job at the same instants: co-run 1, every dispatch aligned. Out of step (node 1 a half
    slice late): each rank's partner holds its CPU half of the time, and no dispatch is aligned."""
    def write(folder: Path, shift: float) -> None:
        folder.mkdir()
        rows = []
        for node, off in ((0, 0.0), (1, shift)):
            t, k = off, 0
            while t < 0.016 + off:
                job = k % 2
                rows.append((node, 0, job, node, 2 * job + node, t, t + 0.004, "useful"))
                t, k = t + 0.004, k + 1
        pd.DataFrame(rows, columns=["node", "cpu", "job", "rank", "pid", "start_s", "end_s", "kind"]).to_parquet(
            folder / "timeline.parquet")
        (folder / "summary.json").write_text(json.dumps(
            {"makespan_s": 0.016 + shift, "process": {"useful_s": 0.032, "spin_s": 0.0}}))

    write(tmp_path / "a", 0.0)
    write(tmp_path / "b", 0.002)
    a, b = realsim.sim_trace(tmp_path / "a"), realsim.sim_trace(tmp_path / "b")
    assert (a["co_run"], a["aligned"]) == (pytest.approx(1.0), 1.0)
    assert (b["co_run"], b["aligned"]) == (pytest.approx(0.5), 0.0)
    assert a["busy"] == pytest.approx(1.0) and a["spin_share"] == 0.0
    assert a["sleep_us"] != a["sleep_us"]  # no rank blocked: NaN
    # Blocked intervals of 200 and 400 us: 300 us per blocking wait.
    tl = pd.read_parquet(tmp_path / "a" / "timeline.parquet")
    blocked = pd.DataFrame([(0, -2, 0, 0, 0, 0.0, 0.0002, "blocked"), (1, -2, 1, 1, 3, 0.001, 0.0014, "blocked")],
                           columns=tl.columns)
    pd.concat([tl, blocked]).to_parquet(tmp_path / "a" / "timeline.parquet")
    assert realsim.sim_trace(tmp_path / "a")["sleep_us"] == pytest.approx(300.0)
    row = {"error": -0.5, "sim_co_run": 1.0, "sim_aligned": 1.0, "sim_spin_share": 0.0, "sim_busy": 1.0,
           "real_spin_share": 0.45, "real_busy": 0.95, "real_block_share": 0.0}
    assert realsim.why(row).startswith("simulated nodes in lockstep")
    assert realsim.why(dict(row, real_spin_share=0.05, real_busy=0.5)).startswith("real ranks held their CPUs 50%")
    # Gang coschedules by design: its co-run is no accident.
    assert "lockstep" not in realsim.why(dict(row, scheme="GANG"))
    assert realsim.why(dict(row, error=0.05)).startswith("agree")
    # Late wake-ups: a real sleep per blocking wait of 1500 us against 200 us simulated is named; 250 us
    # (under the 300 us floor) or 350 against 200 (under twice) is not.
    late = dict(row, real_spin_share=0.05, real_sleep_us=1500.0, sim_sleep_us=200.0)
    assert realsim.why(late).startswith("a blocked real rank sleeps 1500 us per blocking wait against 200 us")
    assert "sleeps" not in realsim.why(dict(late, real_sleep_us=250.0))
    assert "sleeps" not in realsim.why(dict(late, real_sleep_us=350.0))
    assert "fallback" not in realsim.why(late)  # no shim count given
    assert "(40% of the blocking waits ended only at the shim's 1 ms fallback timeout)" in realsim.why(
        dict(late, real_timeout_share=0.4))


def test_real_trace_counts_the_blocking_waits_that_ended_at_the_fallback(tmp_path: Path) -> None:
    """The shim's per-rank counters by hand: 2 ranks with 10 and 30 blocking waits, 1 and 3 of them ended
    at the fallback timeout: 10%; 4 ms and 8 ms blocked: 300 us per blocking wait; 7 and 5 MESSAGE events
    not posted: 12 skipped; the agent's 30 events from the summary."""
    (tmp_path / "logs").mkdir()
    ranks = [{"rank": 0, "wait_ns": 10_000_000, "blocks": 10, "block_ns": 4_000_000, "timeout_ends": 1,
              "events_skipped": 7},
             {"rank": 1, "wait_ns": 10_000_000, "blocks": 30, "block_ns": 8_000_000, "timeout_ends": 3,
              "events_skipped": 5}]
    (tmp_path / "logs" / "shim.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ranks))
    t = realsim.real_trace(tmp_path, {"real": {"cpu_s": [0.5, 0.5], "wall_s": 1.0, "agent_events": 30}}, 0.8)
    assert t["timeout_share"] == pytest.approx(0.1) and t["sleep_us"] == pytest.approx(300.0)
    assert t["block_share"] == pytest.approx(0.6) and t["spin_share"] == pytest.approx(0.2)
    assert t["busy"] == pytest.approx(0.5)
    assert t["events_skipped"] == 12 and t["agent_events"] == 30
    # A log without the count (an older shim), and a log without a blocking wait: NaN.
    old = {k: v for k, v in ranks[0].items() if k != "timeout_ends"}
    for line in (old, dict(ranks[0], blocks=0)):
        (tmp_path / "logs" / "shim.jsonl").write_text(json.dumps(line) + "\n")
        t = realsim.real_trace(tmp_path, {"real": {"cpu_s": [1.0], "wall_s": 1.0}}, 1.0)
        assert t["timeout_share"] != t["timeout_share"]
    # Nor the events (an older shim, a summary without the agent's count): NaN.
    (tmp_path / "logs" / "shim.jsonl").write_text(json.dumps({k: v for k, v in old.items() if k != "events_skipped"}))
    t = realsim.real_trace(tmp_path, {"real": {"cpu_s": [1.0], "wall_s": 1.0}}, 1.0)
    assert t["events_skipped"] != t["events_skipped"] and t["agent_events"] != t["agent_events"]


def test_quick_real_vs_sim_structure_and_mechanism(tmp_path: Path) -> None:
    out = tmp_path / "rvs"
    env = dict(os.environ, COSCHED_REAL_BUILD=str(BUILD), COSCHED_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen([sys.executable, "-m", "coscheduling", "reproduce", "real-vs-sim", "--quick", "-o",
                             str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text, _ = proc.communicate(timeout=1800)
    assert proc.returncode == 0, text
    files = sorted(p.name for p in out.iterdir() if p.is_file())
    assert {"calibration.json", "report.md", "table.csv"} <= set(files)
    calib = json.loads((out / "calibration.json").read_text())
    assert calib["provenance"]["git_commit"] and calib["provenance"]["version"]
    (mpi,) = calib["presets"]
    plat = calib["presets"][mpi]
    assert set(plat) - {"preset"} == set(realsim.PRESET_FIELDS)
    assert plat["latency_us"] > 0 and plat["bandwidth_mb_s"] > 0 and plat["context_switch_us"] >= 0
    # The compute loop burns thread CPU time: a rank gets at most a whole CPU (other load: less; on this
    # shared machine 0.21 was measured).
    assert 0 < plat["cpu_speed"] < 1.2
    # The OS model is chosen on time sharing, one for the machine; the runtime fit is kept as a check of
    # the default models and the chosen one.
    # The first candidate within the tie tolerance (the leader's error spread over the per-CPU repeats) of
    # the smallest error.
    ts = calib["os_timeshare_fit"]
    assert ts["error"][ts["leader"]] == min(ts["error"].values())
    assert len(ts["measured_repeats"]) == len(realsim.NODE_CPUS) and len(ts["leader_repeat_errors"]) == 2
    assert ts["tolerance"] == pytest.approx(max(ts["leader_repeat_errors"]) - min(ts["leader_repeat_errors"]))
    bound = ts["error"][ts["leader"]] + ts["tolerance"] + 1e-9
    tied = [k for k, _ in osfit.CANDIDATES if ts["error"][k] <= bound]
    assert ts["chosen"] == tied[0]
    assert plat["os"] == ts["os"] == ts["candidates"][ts["chosen"]]
    fit = calib["os_fit"][mpi]
    assert fit["chosen"] == ts["chosen"]
    assert set(fit["mean_abs_log_error"]) == set(realsim.OS_MODELS) | {ts["chosen"]}
    feats = calib["microbenchmarks"]["timeshare"]["features"]
    assert feats["slice2_p50_us"] > 0 and feats["slice3_p50_us"] > 0 and feats["held_mean_us"] >= 0
    assert feats["slice_cv"] > 0 and "Native scheduler fit on time sharing" in (out / "report.md").read_text()
    assert calib["microbenchmarks"]["wakeup"]["median"]["cross"]["p50_us"] > 0
    # The wake-up cost from the one-way probe: a blocked receiver is slower to return than a spinning one.
    m = calib["microbenchmarks"]["mpi"][mpi]
    assert 0 < m["spin_8"]["p10_us"] < m["block_oneway"]["p10_us"]
    assert plat["interrupt_us"] == round(m["block_oneway"]["p10_us"] - m["spin_8"]["p10_us"], 3)

    table = pd.read_csv(out / "table.csv")
    schemes = ["DEDICATED", *realsim.QUICK_SCHEMES]
    for g in realsim.QUICK_GRAINS:
        rows = table[table.granularity == g.name].set_index("scheme")
        assert list(rows.index) == schemes
        for s in schemes:
            runs = [float(x) for x in rows.loc[s, "real_runs_s"].split()]
            assert len(runs) == realsim.REPS == 3
            assert rows.loc[s, "real_mean_response_s"] == pytest.approx(statistics.median(runs), abs=1e-4)
            launch = calib["os_fit"][mpi]["launch_s"]["median"]
            assert rows.loc[s, "launch_s"] == pytest.approx(launch * (1.5 if s == "BATCH" else 1.0))
            assert rows.loc[s, "sim_with_launch_s"] == pytest.approx(
                rows.loc[s, "sim_mean_response_s"] + rows.loc[s, "launch_s"])
            assert rows.loc[s, "error"] == pytest.approx(
                (rows.loc[s, "sim_with_launch_s"] - rows.loc[s, "real_mean_response_s"])
                / rows.loc[s, "real_mean_response_s"], rel=1e-6)
        # Batch runs the 2 identical jobs one after the other: mean response 1.5 x dedicated. Exact in the
        # simulator (deterministic), a median with a tolerance for real.
        assert rows.loc["BATCH", "sim_mean_response_s"] == pytest.approx(
            1.5 * rows.loc["DEDICATED", "sim_mean_response_s"], rel=0.02)
        # (1.1, not 1.5: the dedicated and the batch runs are minutes apart, and the other load of a shared
        # machine changed that much in between once: 1.15.)
        assert rows.loc["BATCH", "real_mean_response_s"] > 1.1 * rows.loc["DEDICATED", "real_mean_response_s"]
        # Sharing never beats running alone.
        for s in realsim.QUICK_SCHEMES:
            assert rows.loc[s, "sim_mean_response_s"] >= 0.99 * rows.loc["DEDICATED", "sim_mean_response_s"]
    report = (out / "report.md").read_text()
    assert report.startswith("# real-vs-sim: ") and "commit `" in report
    for heading in ("## Preset of this machine", "## Mean response time", "## Rank order of the schemes",
                    "## Why they differ"):
        assert heading in report
    # Every compared row carries both runs' traces; the simulated shares are shares.
    shared = table[table.scheme != "DEDICATED"]
    for col in ("sim_co_run", "sim_aligned", "sim_spin_share", "sim_busy", "real_spin_share", "real_busy"):
        assert shared[col].between(0, 1.0001).all(), col
    assert calib["microbenchmarks"]["detour"]["runs"] and plat["os_noise_tick_us"] >= 0
    assert "Wake-up of a process blocked in a futex" in report
    for f in realsim.PRESET_FIELDS:
        assert f"| {f} |" in report
    # Nothing of the real runs is left on the machine.
    run = f"cosched.r{proc.pid}."
    assert not [p for root in CGROUP_ROOTS if root.is_dir() for p in root.iterdir() if p.name.startswith(run)]
    assert not list(Path("/dev/shm").glob(f"{run}*"))
    assert not list((tmp_path / "state").glob(f"{run}*"))


def test_resimulate_keeps_the_recorded_real_side_and_simulates_again(tmp_path: Path) -> None:
    """A recorded run (calibration.json, table.csv) simulated again with a given OS model: the real columns
    are the recorded ones, each simulated response is that of the recorded preset with the model swapped
    (the same configuration run directly gives the same figure: same seed), and the error is
    (simulated + launch - real) / real; an unknown model is refused."""
    bench = {
        "mpi": {"mpich": {"spin_8": {"p10_us": 10.0}, "block_8": {"p10_us": 15.0},
                          "spin_1m": {"p10_us": 10.0 + 1048.576}}},
        "context_switch": {"switch_us": 3.0}, "compute": {"cpu_speed": 1.0},
    }
    grain = realsim.Grain("fine", 0.4, 20, 2)
    folder = tmp_path / "run"
    folder.mkdir()
    calib = {"microbenchmarks": bench, "presets": {"mpich": realsim.preset(bench, "mpich", "cfs")},
             "grains": [vars(grain)], "provenance": {"options": {"quick": True}}}
    (folder / "calibration.json").write_text(json.dumps(calib))
    rows = [{"mpi": "mpich", "granularity": "fine", "app": grain.app, "jobs": 1, "scheme": "DEDICATED",
             "real_mean_response_s": 0.05, "real_runs_s": "0.05 0.05 0.05", "sim_mean_response_s": 9.0,
             "launch_s": 0.01, "sim_with_launch_s": 9.01, "error": 179.2},
            {"mpi": "mpich", "granularity": "fine", "app": grain.app, "jobs": 2, "scheme": "NLS",
             "real_mean_response_s": 0.2, "real_runs_s": "0.2 0.2 0.2", "sim_mean_response_s": 9.0,
             "launch_s": 0.01, "sim_with_launch_s": 9.01, "error": 44.05}]
    pd.DataFrame(rows).to_csv(folder / "table.csv", index=False)
    table, fit, agreement = realsim.resimulate(folder, "rr")
    assert fit["chosen"] == "rr"
    plat = realsim.preset(bench, "mpich", "rr")
    for r, jobs in zip(table.itertuples(), (1, 2), strict=True):
        direct = realsim.run_sim(realsim.sim_config(plat, grain, "fcfs", "nls", jobs=jobs), tmp_path / f"d{jobs}")
        assert r.sim_mean_response_s == direct["mean_response_s"]
        assert r.real_mean_response_s == rows[jobs - 1]["real_mean_response_s"]
        assert r.error == pytest.approx((r.sim_mean_response_s + 0.01 - r.real_mean_response_s)
                                        / r.real_mean_response_s)
    assert 0.0 <= table.set_index("scheme").loc["NLS", "sim_co_run"] <= 1.0
    assert [a["granularity"] for a in agreement] == ["fine"]
    with pytest.raises(ValueError, match="unknown OS model 'bfs'"):
        realsim.resimulate(folder, "bfs")
    rows[1]["scheme"] = "FAST"
    pd.DataFrame(rows).to_csv(folder / "table.csv", index=False)
    with pytest.raises(ValueError, match="table.csv row mpich fine: unknown scheme 'FAST'"):
        realsim.resimulate(folder, "rr")
    rows[1].update(scheme="NLS", granularity="medium")
    pd.DataFrame(rows).to_csv(folder / "table.csv", index=False)
    with pytest.raises(ValueError, match="granularity 'medium' is not among the calibration's grains"):
        realsim.resimulate(folder, "rr")
