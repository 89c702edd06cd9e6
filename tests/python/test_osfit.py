"""The OS-model fit of the real-vs-sim preset on time sharing (python/coscheduling/experiments/osfit.py):
the chooser on tables worked by hand, the simulated micro-benchmark's readings on hand-made timelines and
through the OS models (each model's rule gives the expected figure), the real micro-benchmark
(`cosched-timeshare`: medians with tolerances, no absolute time), the swamped ping-pong's retries and
error, and the simulated spin share of a yielding run."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_real_agent import BUILD

from coscheduling.experiments import osfit, realsim

COLS = ["node", "cpu", "job", "rank", "pid", "start_s", "end_s", "kind"]


def test_the_chooser_takes_the_candidate_closest_to_the_measurement() -> None:
    """Measured: 4 ms slices with 2 and 3 spinners, the woken sleeper preempts at once (0 us held, median
    and mean). Errors by hand, floor 100 us: `match` 0; `cfs-like` (3 ms, 2 ms, 0, 0)
    (ln(4100/3100) + ln(4100/2100)) / 4 = 0.2372; `no-preempt` (4 ms, 4 ms, 2,000 us held at the median
    and on average) 2 ln(2100/100) / 4 = 1.5223."""
    def feats(s2: float, s3: float, p50: float, mean: float) -> dict[str, float]:
        return {"slice2_p50_us": s2, "slice3_p50_us": s3, "held_p50_us": p50, "held_mean_us": mean}

    real = feats(4000.0, 4000.0, 0.0, 0.0)
    sims = {"cfs-like": feats(3000.0, 2000.0, 0.0, 0.0), "no-preempt": feats(4000.0, 4000.0, 2000.0, 2000.0),
            "match": feats(4000.0, 4000.0, 0.0, 0.0)}
    best, errors = osfit.choose(real, sims)
    assert best == "match"
    assert errors["match"] == 0.0
    assert errors["cfs-like"] == pytest.approx((math.log(4100 / 3100) + math.log(4100 / 2100)) / 4)
    assert errors["cfs-like"] == pytest.approx(0.2372, abs=1e-4)
    assert errors["no-preempt"] == pytest.approx(math.log(21) / 2)
    # Without the match, the slices' small error beats a wrong preemption rule.
    assert osfit.choose(real, {k: v for k, v in sims.items() if k != "match"})[0] == "cfs-like"
    # A tie goes to the first candidate in order; the floor keeps 20 us against 0 from deciding much.
    tie = {"b": sims["match"], "a": dict(sims["match"])}
    assert osfit.choose(real, tie)[0] == "b"
    near = dict(sims["match"], held_mean_us=20.0)
    assert osfit.error(real, near) == pytest.approx(math.log(120 / 100) / 4)
    with pytest.raises(ValueError, match="lacks held_p50_us, held_mean_us"):
        osfit.choose({"slice2_p50_us": 1.0, "slice3_p50_us": 1.0}, sims)
    with pytest.raises(ValueError, match="no candidate"):
        osfit.choose(real, {})


def test_candidates_within_the_measurements_own_spread_are_tied_and_the_earlier_one_wins() -> None:
    """Two repeats (one per node CPU), 4 ms slices and held median 0 in both; held mean 60 us in one and
    220 us in the other, so the measurement (their mean) has 140 us. Floor 100 us; only the held mean
    differs, so each error is |ln((sim + 100) / (real + 100))| / 4:
    - `simple` (held mean 0): ln(240/100) / 4 = 0.2189;
    - `new` (held mean 20): ln(240/120) / 4 = ln 2 / 4 = 0.1733, the smallest: the leader;
    - `far` (held mean 2,000): ln(2100/240) / 4 = 0.5423.
    The leader against each repeat alone: ln(160/120) / 4 = 0.0719 and ln(320/120) / 4 = 0.2452; the
    tolerance is their spread, (ln(8/3) - ln(4/3)) / 4 = ln 2 / 4 = 0.1733. `simple` is 0.2189 - 0.1733 =
    ln(1.2) / 4 = 0.0456 above the leader: tied, and earlier in order, so chosen; `far` is 0.3690 above:
    not tied, although it comes first."""
    def feats(p50: float, mean: float) -> dict[str, float]:
        return {"slice2_p50_us": 4000.0, "slice3_p50_us": 4000.0, "held_p50_us": p50, "held_mean_us": mean}

    def run(held_mean: float) -> dict[str, list[dict[str, Any]]]:
        return {"slices2": [{"slice_p50_us": 4000.0, "slice_cv": 0.01}],
                "slices3": [{"slice_p50_us": 4000.0, "slice_cv": 0.01}],
                "wake": [{"held_p50_us": 0.0, "held_mean_us": held_mean}]}

    one, two = run(60.0), run(220.0)
    runs = {k: one[k] + two[k] for k in one}
    repeats = osfit.repeat_features(runs)
    assert [r["held_mean_us"] for r in repeats] == [60.0, 220.0]
    real = osfit.real_features(runs)
    assert real["held_mean_us"] == 140.0
    sims = {"far": feats(0.0, 2000.0), "simple": feats(0.0, 0.0), "new": feats(0.0, 20.0)}
    best, errors, how = osfit.choose_with_tolerance(real, sims, repeats)
    assert errors["simple"] == pytest.approx(math.log(2.4) / 4)
    assert errors["new"] == pytest.approx(math.log(2) / 4)
    assert errors["far"] == pytest.approx(math.log(2100 / 240) / 4)
    assert how["leader"] == "new"
    assert how["leader_repeat_errors"] == pytest.approx([math.log(4 / 3) / 4, math.log(8 / 3) / 4])
    assert how["tolerance"] == pytest.approx(math.log(2) / 4)
    assert best == "simple"
    assert osfit.choose(real, sims, repeats)[0] == "simple"
    # Without repeats, or with two identical ones, nothing is tied: the smallest error wins.
    assert osfit.choose(real, sims)[0] == "new"
    assert osfit.choose(real, sims, [repeats[0], repeats[0]])[0] == "new"
    # Repeats of 60 and 70 us: the tolerance is (ln(170/120) - ln(160/120)) / 4 = ln(17/16) / 4 = 0.0152,
    # under the 0.0456 gap: not tied.
    near = osfit.repeat_features({k: one[k] + run(70.0)[k] for k in one})
    assert osfit.choose_with_tolerance(real, sims, near)[2]["tolerance"] == pytest.approx(math.log(17 / 16) / 4)
    assert osfit.choose(real, sims, near)[0] == "new"
    with pytest.raises(ValueError, match="differ in number per kind"):
        osfit.repeat_features(dict(runs, wake=one["wake"]))
    with pytest.raises(ValueError, match="repeat 1 lacks held_mean_us"):
        osfit.choose(real, sims, [repeats[0], {f: 0.0 for f in osfit.FEATURES if f != "held_mean_us"}])


def test_slices_and_held_time_read_from_a_hand_made_timeline() -> None:
    """Two spinners (jobs 1 and 2) alternate 4 ms runs, each entered by a 2 us context switch (not the
    spinner's own code); spinner 1's third run is split by a 10 us gap (joined: under 50 us). Each
    spinner's first and last runs are left out: the slices are 4,000 us each. The sleeper (job 0) wakes
    at 20 ms while the spinner (job 1) runs until 21 ms (held 1,000 us), then at 30 ms and runs at once
    (held 0)."""
    rows, t, k = [], 0.0, 0
    while t < 0.040 - 1e-9:
        job = 1 + k % 2
        rows.append((0, 0, job, 0, job, t, t + 0.000002, "switch"))
        if job == 1 and k == 4:
            rows += [(0, 0, 1, 0, 1, t + 0.000002, t + 0.002, "useful"),
                     (0, 0, 1, 0, 1, t + 0.00201, t + 0.004002, "useful")]
        else:
            rows.append((0, 0, job, 0, job, t + 0.000002, t + 0.004002, "useful"))
        t, k = t + 0.004002, k + 1
    slices = osfit.sim_slices(pd.DataFrame(rows, columns=COLS))
    assert len(slices) == 2 * (5 - 2)
    assert slices == pytest.approx([4000.0] * 6, abs=0.01)
    # A second sleeper (job 2) wakes at 12 ms; it runs at 12.5 ms after the spinner's run to 12.3 ms
    # (its own run of 12.3-12.5 ms is not the spinner's): held 300 us.
    wake = [(0, -2, 0, 0, 0, 0.010, 0.020, "blocked"), (0, -2, 0, 0, 0, 0.020, 0.021, "ready"),
            (0, 0, 0, 0, 0, 0.021, 0.025, "useful"), (0, -2, 0, 0, 0, 0.025, 0.030, "blocked"),
            (0, 0, 0, 0, 0, 0.030, 0.031, "useful"),
            (0, 0, 1, 0, 1, 0.0, 0.0123, "useful"), (0, 0, 1, 0, 1, 0.0125, 0.021, "useful"),
            (0, 0, 1, 0, 1, 0.025, 0.030, "useful"),
            (0, -2, 2, 0, 2, 0.005, 0.012, "blocked"), (0, 0, 0, 0, 0, 0.0123, 0.0125, "useful"),
            (0, 0, 2, 0, 2, 0.0125, 0.013, "useful")]
    assert osfit.sim_held(pd.DataFrame(wake, columns=COLS), [0, 2], 1) == pytest.approx([1000.0, 0.0, 300.0])


def _platform(os_table: dict[str, Any]) -> dict[str, Any]:
    return {"preset": "lee4", "nodes": 1, "os": os_table, "latency_us": 0.3, "bandwidth_mb_s": 10000.0,
            "send_overhead_us": 0.0, "recv_overhead_us": 0.0, "interrupt_us": 6.0, "context_switch_us": 2.0,
            "cpu_speed": 1.0, "os_noise_tick_us": 0.0}


def test_the_simulated_microbenchmark_follows_each_models_rule(tmp_path: Path) -> None:
    """Through the engine, one CPU: CFS's default slice is latency / runnable (6 ms / 2 = 3 ms, 6 ms / 3 =
    2 ms); EEVDF as a fixed slice of one tick gives 4 ms whatever the count; Linux 2.4 twice 60 ms;
    the sleeper woken from its 20 ms sleep preempts the spinner under CFS (its virtual runtime is behind by
    more than the wake-up granularity: held 0), never under round robin (it waits for the rest of the
    spinner's 4 ms quantum, 0 to 4 ms: a mean well above 1 ms)."""
    def sim(label: str) -> dict[str, float]:
        return osfit.simulate(_platform(osfit.candidate_os(label, 0.0)), 0.5, 20, tmp_path / label)

    cfs, eevdf, l24, rr = sim("cfs"), sim("eevdf-tick-4ms"), sim("linux24"), sim("rr-tick-4ms")
    # Solaris TS: a CPU-bound process sinks to the lowest levels, whose quantum is 200 ms; the simulated
    # runs are long enough for such slices whatever the measurement's length.
    assert sim("mlfq")["slice2_p50_us"] >= 100000.0
    assert cfs["slice2_p50_us"] == pytest.approx(3000.0, rel=0.01)
    assert cfs["slice3_p50_us"] == pytest.approx(2000.0, rel=0.01)
    assert eevdf["slice2_p50_us"] == pytest.approx(4000.0, rel=0.01)
    assert eevdf["slice3_p50_us"] == pytest.approx(4000.0, rel=0.01)
    # Linux 2.4: 60 ms (6 ticks) each, but the process that ends an epoch also starts the next (goodness +1
    # for the address space already loaded), so its two slices run as one 120 ms run.
    assert l24["slice2_p50_us"] == pytest.approx(120000.0, rel=0.01)
    assert cfs["held_mean_us"] == 0.0 and eevdf["held_mean_us"] == 0.0
    assert 1000.0 < rr["held_mean_us"] <= 4000.0 and rr["held_p50_us"] > 0
    # So a machine of 4 ms slices whose sleepers preempt at once is EEVDF's tick slice, not round robin.
    real = {"slice2_p50_us": 3990.0, "slice3_p50_us": 3985.0, "held_p50_us": 0.0, "held_mean_us": 5.0}
    assert osfit.choose(real, {"cfs": cfs, "rr-tick-4ms": rr, "eevdf-tick-4ms": eevdf,
                               "linux24": l24})[0] == "eevdf-tick-4ms"


def test_the_eevdf_candidates_end_slices_at_the_tick_and_protect_fresh_slices(tmp_path: Path) -> None:
    """The ``eevdf`` model through the engine, one CPU, 4 ms tick, 2 us context switch. Slices: a spinner
    picked at a tick t has its deadline at most one slice ahead (0.75, 1.4, 1.5 or 4 ms of virtual time, which
    is CPU time at nice 0, counted from the pick), so the tick at t + 4 ms finds it reached and ends the
    slice; the switch's 2 us are in it: 4 ms less 2 us = 3,998 us, for 2 and for 3 spinners alike.
    Held: most sleepers wake with a positive lag or after the spinner's deadline passed, and preempt at
    once (held 0, the median); one that wakes with no lag before the spinner's deadline waits for the next
    tick (< 4 ms)."""
    def sim(label: str) -> dict[str, float]:
        return osfit.simulate(_platform(osfit.candidate_os(label, 0.0)), 0.5, 20, tmp_path / label)

    for label, slice_us in (("eevdf-rtp-0.75ms", 3998.0), ("eevdf-rtp-1.5ms", 3998.0), ("eevdf-rtp-4ms", 3998.0),
                            ("eevdf-rtp-1.4ms", 3998.0)):
        s = sim(label)
        assert s["slice2_p50_us"] == pytest.approx(slice_us, abs=1.0), label
        assert s["slice3_p50_us"] == pytest.approx(slice_us, abs=1.0), label
        assert s["held_p50_us"] == 0.0, label
        assert 0.0 < s["held_mean_us"] < 4000.0, label
        # The wake-ups of every seed of WAKE_SEEDS pooled: 2 sleepers x 100 rounds (the least simulated) each.
        assert s["held_samples"] == 2 * 100 * len(osfit.WAKE_SEEDS), label
    assert osfit.candidate_os("eevdf-rtp-1.5ms", 0.3) == {"model": "eevdf", "slice_ms": 1.5, "tick_ms": 4.0}


def test_real_timeshare_tool_measures_slices_and_wakeups() -> None:
    """`cosched-timeshare` on node CPU 0, 3 short runs: the median slice of 2 and of 3 spinners within a
    factor 4 of one tick of the kernel (what EEVDF enforces a slice at without HRTICK; 4 ms at HZ = 250)
    or, when the kernel's HZ is not readable, between 0.5 and 50 ms; the spinners share the CPU about
    equally (other load takes from both alike); the time a spinner held the CPU after a wake-up is part of
    the wake-up's delay. Medians of 3, no absolute time."""
    runs = [osfit.measure(BUILD, (realsim.NODE_CPUS[0],), 0.3, 10) for _ in range(3)]
    k = runs[0]["kernel"]
    assert k["kernel"] and k["slice_source"]
    tick_us = 1e6 / k["config_hz"] if k.get("config_hz") else None
    lo, hi = (tick_us / 4, tick_us * 4) if tick_us else (500.0, 50000.0)
    for n in (2, 3):
        med = statistics.median(r["features"][f"slice{n}_p50_us"] for r in runs)
        assert lo <= med <= hi, (n, med, runs)
        for r in runs:
            s = r["runs"][f"slices{n}"][0]
            assert s["spinners"] == n and len(s["cpu_share"]) == n and s["slice_count"] > 0
            assert s["slice_p10_us"] <= s["slice_p50_us"] <= s["slice_p90_us"]
    fair = statistics.median(min(s["cpu_share"]) / max(s["cpu_share"]) for r in runs for s in r["runs"]["slices2"])
    assert fair > 0.5, runs
    for r in runs:
        w = r["runs"]["wake"][0]
        assert (w["rounds"], w["samples"], w["spinners"], w["sleepers"]) == (10, 20, 1, 2)
        assert len(w["spinner_cpu_s"]) == 1
        assert 0 <= w["held_p50_us"] <= w["held_p90_us"]
        assert w["held_mean_us"] <= w["wake_mean_us"] and w["held_p90_us"] <= w["wake_p90_us"]
    bad = subprocess.run([str(osfit.tool(BUILD)), "slices", "0", "1", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_a_swamped_pingpong_is_measured_again_then_refused() -> None:
    """Under heavy load the 8-byte ping-pong's 10th percentile reached the 1 MiB one's (3,905 against
    3,969 us once: 16,384 MB/s would be accepted, but 3,968 us gives 1 TB/s), or the blocked one-way
    delay's: measured again with 4 times the rounds; never plausible: a clear error; a preset from such
    figures: a clear error too."""
    calls: list[tuple[int, int]] = []

    def fake(results: list[tuple[float, float]]) -> Any:
        def measure(mpi: str, wait: str, nbytes: int, iters: int) -> dict[str, float]:
            calls.append((nbytes, iters))
            small, big = results[min(len([c for c in calls if c[0] == 8]) - 1, len(results) - 1)]
            return {"p10_us": small if nbytes == 8 else big, "iters": iters}
        return measure

    out = realsim.spinning_pingpongs("mpich", 300, 30, lambda m: None, fake([(3968.0, 3969.0), (1.0, 110.0)]))
    assert calls == [(8, 300), (1 << 20, 30), (8, 1200), (1 << 20, 120)]
    assert out["spin_8"]["p10_us"] == 1.0 and len(out["tries"]) == 2
    assert out["tries"][1]["bandwidth_mb_s"] == pytest.approx((1 << 20) / 109.0)
    calls.clear()
    with pytest.raises(RuntimeError, match="cannot measure the bandwidth under this load"):
        realsim.spinning_pingpongs("mpich", 300, 30, lambda m: None, fake([(3968.0, 3968.5)]))
    assert [i for b, i in calls if b == 8] == [300, 1200, 4800]
    assert realsim.bandwidth_mb_s(5.0, 5.0) == math.inf
    # A plausible bandwidth, but the spinning 8-byte p10 (30 us) not below the blocked one-way p10 (27 us):
    # swamped too (a spinning receiver needs no wake-up); 1 us on the retry is.
    calls.clear()
    out = realsim.spinning_pingpongs("mpich", 300, 30, lambda m: None, fake([(30.0, 150.0), (1.0, 110.0)]),
                                     blocked_oneway_us=27.0)
    assert [i for b, i in calls if b == 8] == [300, 1200] and out["spin_8"]["p10_us"] == 1.0
    calls.clear()
    with pytest.raises(RuntimeError, match="slower than a sleeping one"):
        realsim.spinning_pingpongs("mpich", 300, 30, lambda m: None, fake([(27.0, 150.0)]), blocked_oneway_us=27.0)
    bench = {"mpi": {"mpich": {"spin_8": {"p10_us": 3968.0}, "block_8": {"p10_us": 15.0},
                               "spin_1m": {"p10_us": 3968.5}}},
             "context_switch": {"switch_us": 3.0}, "compute": {"cpu_speed": 0.9}}
    with pytest.raises(ValueError, match="the spinning ping-pongs give no bandwidth"):
        realsim.preset(bench, "mpich", "cfs")


def test_the_simulated_spin_share_of_a_yielding_run_is_a_share(tmp_path: Path) -> None:
    """The `sim_spin_share` of 3.99 read in a loaded run was 3.99e-05 (table.csv's exponent): busy-waiting
    over the CPU time used, both from the engine's counters, cannot exceed 1. Checked on YIELD's fine run
    at the loaded machine's CPU speed 0.22: within [0, 1] and equal to the timeline's spin rows over its
    CPU rows."""
    plat = dict(_platform({"model": "cfs"}), nodes=2, cpu_speed=0.22)
    g = realsim.QUICK_GRAINS[0]
    realsim.run_sim(realsim.sim_config(plat, g, "fcfs", "yield"), tmp_path / "y")
    share = realsim.sim_trace(tmp_path / "y")["spin_share"]
    tl = pd.read_parquet(tmp_path / "y" / "timeline.parquet")
    run = tl[(tl.cpu >= 0) & tl.kind.isin(["useful", "spin"])]
    d = run.end_s - run.start_s
    assert 0.0 <= share <= 1.0
    assert share == pytest.approx(d[run.kind == "spin"].sum() / d.sum(), rel=1e-6, abs=1e-9)


def test_slurm_preset_takes_the_fitted_model_from_a_calibration(tmp_path: Path) -> None:
    """real-slurm's preset from a real-vs-sim calibration.json: the chosen candidate's label gives its
    parameters (EEVDF's tick slice as a cfs model) and the measured slice spread."""
    from coscheduling.experiments import realslurm

    bench = {"mpi": {"mpich": {"spin_8": {"p10_us": 10.0}, "block_8": {"p10_us": 15.0},
                               "spin_1m": {"p10_us": 10.0 + 1048.576}}},
             "context_switch": {"switch_us": 3.0}, "compute": {"cpu_speed": 0.9},
             "timeshare": {"features": {"slice_cv": 0.04}}}
    cal = tmp_path / "calibration.json"
    cal.write_text(json.dumps({"microbenchmarks": bench, "os_fit": {"mpich": {"chosen": "eevdf-tick-4ms"}}}))
    plat, how = realslurm.machine_preset(cal, False, tmp_path)
    assert plat["os"] == {"model": "cfs", "latency_ms": 4.0, "min_granularity_ms": 4.0, "slice_cv": 0.04}
    assert "OS model eevdf-tick-4ms as fitted there" in how
    assert plat["bandwidth_mb_s"] == 1000.0
