"""The Python API on small hand-made workloads whose schedules are worked out by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import coscheduling
from coscheduling import _core
from coscheduling.api import JOB_COLUMNS

PLATFORM = {"nodes": 4}

# Four jobs on a 4-processor machine (no requested times: estimates are exact).
#   j0: submit 0, 2 procs, 10 s  -> starts at 0
#   j1: submit 1, 4 procs,  5 s  -> needs the whole machine: waits for j0, 10..15
#   j2: submit 2, 1 proc,   3 s  -> FCFS: behind j1, 15..18;
#                                   backfilling: fits now and ends (5) before j1's start (10): 2..5
#   j3: submit 20, 4 procs, 1 s  -> machine idle again: 20..21
HAND = pd.DataFrame(
    {"submit_s": [0.0, 1.0, 2.0, 20.0], "runtime_s": [10.0, 5.0, 3.0, 1.0], "procs": [2, 4, 1, 4]}
)


@pytest.mark.parametrize(
    ("policy", "starts"),
    [("fcfs", [0, 10, 15, 20]), ("easy", [0, 10, 2, 20]), ("conservative", [0, 10, 2, 20])],
)
def test_hand_made_schedule(policy, starts):
    df = coscheduling.simulate(jobs=HAND, policy=policy, platform=PLATFORM)
    assert tuple(df.columns) == JOB_COLUMNS
    assert df["start_s"].tolist() == starts
    assert df["end_s"].tolist() == [s + r for s, r in zip(starts, HAND["runtime_s"], strict=True)]
    assert df["job_id"].tolist() == [0, 1, 2, 3]
    assert (df["status"] == "completed").all()
    s = df.attrs["summary"]
    waits = [st - sub for st, sub in zip(starts, HAND["submit_s"], strict=True)]
    assert s["mean_wait_s"] == pytest.approx(sum(waits) / 4)
    assert s["jobs_simulated"] == 4 and s["machine_procs"] == 4
    assert s["policy"].startswith(policy)


def test_fcfs_node_lists_and_energy():
    df = coscheduling.simulate(jobs=HAND, policy="fcfs", platform={"nodes": 2, "procs_per_node": 2})
    # j0 takes processors 0-1 = node 0; j1 all of them.
    assert df["node_list"].tolist() == ["0", "0-1", "0", "0-1"]
    assert df["nodes"].tolist() == [1, 2, 1, 2]
    busy_w = 219.10 + 18.968
    assert df["energy_j"].iloc[0] == pytest.approx(busy_w * 2 * 10 / 2)


def test_unsorted_input_is_sorted_stably_and_keeps_ids():
    jobs = pd.DataFrame({
        "submit_s": [5.0, 0.0, 5.0, 1.0],
        "runtime_s": [1.0, 1.0, 1.0, 1.0],
        "procs": [1, 1, 1, 1],
        "job_id": [10, 11, 12, 13],
    })
    r = coscheduling.run(jobs=jobs, policy="fcfs", platform=PLATFORM)
    assert r.jobs["job_id"].tolist() == [11, 13, 10, 12]
    assert r.jobs["submit_s"].tolist() == [0.0, 1.0, 5.0, 5.0]
    assert any("not sorted" in w for w in r.warnings)


def test_estimates_and_overrun_kill():
    jobs = pd.DataFrame({
        "submit_s": [0.0, 0.0, 0.0],
        "runtime_s": [100.0, 50.0, 30.0],
        "procs": [1, 1, 1],
        "requested_s": [60.0, float("nan"), 0.0],
    })
    kill = coscheduling.simulate(jobs=jobs, policy="fcfs", platform=PLATFORM, overrun="kill")
    assert kill["status"].tolist() == ["killed", "completed", "completed"]
    assert kill["execution_s"].tolist() == [60.0, 50.0, 30.0]
    assert kill["estimate_s"].tolist() == [60.0, 50.0, 30.0]
    assert math.isnan(kill["requested_s"].iloc[1]) and math.isnan(kill["requested_s"].iloc[2])
    assert kill.attrs["summary"]["jobs_killed"] == 1
    ext = coscheduling.simulate(jobs=jobs, policy="fcfs", platform=PLATFORM)
    assert ext["execution_s"].tolist() == [100.0, 50.0, 30.0]
    assert ext["estimate_s"].tolist() == [100.0, 50.0, 30.0]
    exact = coscheduling.simulate(jobs=jobs.assign(requested_s=[500.0, 1.0, 1.0]), policy="fcfs",
                                  platform=PLATFORM, estimates="exact")
    assert exact["estimate_s"].tolist() == [100.0, 50.0, 30.0]


def test_too_wide_job_is_rejected():
    jobs = pd.DataFrame({"submit_s": [0.0, 1.0], "runtime_s": [5.0, 5.0], "procs": [8, 1]})
    df = coscheduling.simulate(jobs=jobs, policy="easy", platform=PLATFORM)
    assert df["status"].tolist() == ["rejected", "completed"]
    assert math.isnan(df["start_s"].iloc[0]) and df["node_list"].iloc[0] == ""
    assert df.attrs["summary"]["jobs_rejected"] == 1
    # Not silently: the same warning a trace gives (docs/formats/swf.md, rule 6), on a 4 x 1 machine: one job of
    # the two (8 procs > 4) is wider.
    assert df.attrs["warnings"] == [
        "jobs: 1 jobs need more processors than the machine's 4 (platform: 4 nodes x 1 procs); they are rejected"]
    r = coscheduling.run(jobs=jobs.assign(procs=[8, 5]), platform={"nodes": 2, "procs_per_node": 2},
                         policy="fcfs")
    assert r.summary["jobs_rejected"] == 2 and r.warnings == [
        "jobs: 2 jobs need more processors than the machine's 4 (platform: 2 nodes x 2 procs); they are rejected"]
    fits = coscheduling.run(jobs=jobs.assign(procs=[4, 1]), platform=PLATFORM, policy="fcfs")
    assert fits.warnings == [] and fits.summary["jobs_rejected"] == 0


def test_empty_workload():
    jobs = pd.DataFrame({"submit_s": [], "runtime_s": [], "procs": []})
    r = coscheduling.run(jobs=jobs, policy="easy", platform=PLATFORM)
    assert len(r.jobs) == 0 and r.summary["jobs_total"] == 0
    assert r.summary["mean_wait_s"] is None


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"submit_s": [0.0, -1.0, 2.0, 20.0]}, "jobs row 1: column submit_s"),
        ({"runtime_s": [1.0, 1.0, float("inf"), 1.0]}, "jobs row 2: column runtime_s"),
        ({"procs": [1, 0, 1, 1]}, "jobs row 1: column procs"),
        ({"procs": [1.0, 2.5, 1.0, 1.0]}, "jobs row 1: column procs: must be an integer"),
        ({"procs": [1, 2, None, 1]}, "jobs row 2: column procs"),
        ({"submit_s": [0, "x", 1, 2]}, "jobs row 1: column submit_s: not a number"),
        ({"runtime": [1, 2, 3, 4]}, "unknown column(s) runtime"),
    ],
)
def test_bad_jobs_name_row_and_column(change, needle):
    jobs = HAND.assign(**change)
    with pytest.raises(ValueError) as e:
        coscheduling.simulate(jobs=jobs, policy="fcfs", platform=PLATFORM)
    assert needle in str(e.value)


def test_missing_required_column():
    with pytest.raises(ValueError, match="missing column"):
        coscheduling.simulate(jobs=HAND.drop(columns="procs"), platform=PLATFORM)


@pytest.mark.parametrize(
    ("platform", "needle"),
    [
        ({"nodes": 4, "cores": 2}, "unknown field `cores`"),
        ({"procs_per_node": 2}, "missing field `nodes`"),
        ({"nodes": 0}, "platform.nodes: must be at least 1"),
        ({"nodes": 2, "idle_watts": 300.0, "busy_watts": 200.0}, "platform.busy_watts"),
        ({"nodes": "4"}, "platform.nodes: expected a number"),
        ({"nodes": True}, "platform.nodes"),
    ],
)
def test_bad_platform(platform, needle):
    with pytest.raises(ValueError) as e:
        coscheduling.simulate(jobs=HAND, platform=platform)
    assert needle in str(e.value)


def test_jobs_need_a_platform_and_one_source(slices):
    with pytest.raises(ValueError, match="platform"):
        coscheduling.simulate(jobs=HAND)
    with pytest.raises(ValueError, match="exactly one"):
        coscheduling.run(slices["CTC-SP2-1996-3.1-cln"], jobs=HAND, platform=PLATFORM)
    with pytest.raises(ValueError, match="exactly one"):
        coscheduling.run()
    with pytest.raises(ValueError, match="max_jobs"):
        coscheduling.run(jobs=HAND, platform=PLATFORM, max_jobs=2)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"estimates": "perfect"}, "estimates: unknown variant `perfect`"),
        ({"overrun": "stop"}, "overrun: unknown variant"),
        ({"placement": "scatter"}, "placement: unknown variant"),
        ({"seed": -1}, "seed"),
        ({"bsld_threshold_s": 0.0}, "threshold"),
        ({"policy": "nope"}, "valid policies: fcfs, easy, conservative"),
    ],
)
def test_bad_options(kwargs, needle):
    with pytest.raises(ValueError) as e:
        coscheduling.simulate(jobs=HAND, platform=PLATFORM, **kwargs)
    assert needle in str(e.value)


def test_trace_run_options(slices):
    trace = slices["SDSC-SP2-1998-4.2-cln"]
    df = coscheduling.simulate(trace, policy="easy", max_jobs=100)
    assert len(df) == 100
    assert df.attrs["summary"]["machine_procs"] == 128
    df = coscheduling.simulate(trace, max_jobs=50, machine_size=64)
    assert df.attrs["summary"]["machine_procs"] == 64
    df = coscheduling.simulate(trace, max_jobs=50, platform={"nodes": 32, "procs_per_node": 4, "idle_watts": 100})
    s = df.attrs["summary"]
    assert (s["machine_nodes"], s["procs_per_node"]) == (32, 4)
    with pytest.raises(ValueError, match="machine_size"):
        coscheduling.simulate(trace, machine_size=0)
    with pytest.raises(ValueError, match="unknown field `gpus`"):
        coscheduling.simulate(trace, platform={"nodes": 4, "gpus": 1})


def test_result_write_and_provenance(slices, tmp_path):
    r = coscheduling.run(slices["CTC-SP2-1996-3.1-cln"], policy="conservative", command_line="x y")
    files = r.write(tmp_path / "o")
    assert sorted(p.name for p in files) == ["jobs.csv", "jobs.parquet", "summary.json"]
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["provenance"]["command_line"] == "x y"
    assert s["provenance"] == r.provenance
    assert set(r.timings) == {"parse_s", "simulate_s", "metrics_s"}
    assert r.platform["nodes"] == 338


def test_in_memory_provenance_hashes_the_jobs(tmp_path):
    a = coscheduling.run(jobs=HAND, platform=PLATFORM)
    b = coscheduling.run(jobs=HAND.assign(runtime_s=[10.0, 5.0, 3.0, 2.0]), platform=PLATFORM)
    assert a.provenance["trace"] is None
    assert a.provenance["config_hash"] != b.provenance["config_hash"]
    assert a.provenance["config_hash"] == coscheduling.run(jobs=HAND, platform=PLATFORM).provenance["config_hash"]


def test_core_run_result_object(slices):
    r = _core.run_trace(slices["CTC-SP2-1996-3.1-cln"], "easy", max_jobs=10)
    cols = r.columns()
    assert list(cols) == list(JOB_COLUMNS)
    assert len(r) == 10 and all(len(v) == 10 for v in cols.values())
    assert json.loads(r.summary_json())["jobs_total"] == 10
    assert isinstance(r.warnings, list)
    assert np.isfinite(list(r.timings().values())).all()


def test_trace_info_and_slice(traces_dir, tmp_path):
    src = traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz"
    dst = tmp_path / "kth.swf.gz"
    coscheduling.slice_trace(src, dst, 42)
    info = coscheduling.trace_info(dst)
    full = coscheduling.trace_info(src)
    assert info["records"] == 42
    assert info["header_lines"] == full["header_lines"]
    assert info["machine_procs"] == full["machine_procs"] == 100
    with pytest.raises(ValueError, match="first"):
        coscheduling.slice_trace(src, dst, -1)


def test_policies_catalog():
    names = [p["name"] for p in coscheduling.policies()]
    assert {"fcfs", "easy", "conservative"} <= set(names)
    for p in coscheduling.policies():
        assert {"name", "level", "summary", "params"} <= set(p)
