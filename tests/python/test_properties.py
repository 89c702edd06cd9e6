"""Property tests: random small workloads through `simulate` under every batch policy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import coscheduling

# Every batch (space-sharing) policy of the registry: a newly registered one is covered
# without a change here.
POLICIES = [p["name"] for p in coscheduling.policies() if p["level"] == "cluster"]
assert {"fcfs", "easy", "conservative"} <= set(POLICIES), POLICIES


@st.composite
def workloads(draw):
    nodes = draw(st.integers(1, 6))
    ppn = draw(st.integers(1, 2))
    total = nodes * ppn
    n = draw(st.integers(1, 25))
    # Integer seconds keep every derived time exact.
    submit = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    runtime = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    # Mostly fitting jobs, sometimes one wider than the machine (rejected).
    procs = draw(st.lists(st.integers(1, total + 1), min_size=n, max_size=n))
    requested = draw(
        st.lists(st.one_of(st.just(math.nan), st.just(-1.0), st.integers(1, 60).map(float)), min_size=n, max_size=n)
    )
    jobs = pd.DataFrame({
        "submit_s": np.asarray(submit, dtype=float),
        "runtime_s": np.asarray(runtime, dtype=float),
        "procs": procs,
        "requested_s": requested,
        "job_id": list(range(n)),
    })
    return jobs, {"nodes": nodes, "procs_per_node": ppn}


def check_schedule(jobs: pd.DataFrame, platform: dict, df: pd.DataFrame, policy: str, overrun: str) -> None:
    total = platform["nodes"] * platform["procs_per_node"]
    assert len(df) == len(jobs)
    # Jobs come back sorted stably by submit time.
    order = sorted(range(len(jobs)), key=lambda i: (jobs["submit_s"].iloc[i], i))
    assert df["job_id"].tolist() == order
    src = jobs.set_index("job_id").loc[df["job_id"]]

    wide = df["procs"] > total
    assert (df.loc[wide, "status"] == "rejected").all()
    ran = df[df["status"] != "rejected"]
    assert len(ran) == (~wide).sum()

    # Never before submission.
    assert (ran["start_s"] >= ran["submit_s"]).all()
    # Execution: the runtime (extend), or the runtime cut at the requested time (kill).
    req = src.loc[ran["job_id"], "requested_s"].to_numpy()
    rt = ran["runtime_s"].to_numpy()
    if overrun == "kill":
        known = np.isfinite(req) & (req > 0)
        expected = np.where(known, np.minimum(rt, np.where(known, req, 0)), rt)
    else:
        expected = rt
    np.testing.assert_array_equal(ran["execution_s"].to_numpy(), expected)
    killed = ran["status"] == "killed"
    assert (ran.loc[killed, "execution_s"] < ran.loc[killed, "runtime_s"]).all()

    # Processors are never over-committed: sweep over starts and ends (ends first at equal
    # times; zero-length jobs hold nothing).
    held = ran[ran["execution_s"] > 0]
    events = sorted(
        [(e, 0, -p) for e, p in zip(held["end_s"], held["procs"], strict=True)]
        + [(s, 1, p) for s, p in zip(held["start_s"], held["procs"], strict=True)]
    )
    busy = 0
    for _, _, delta in events:
        busy += delta
        assert 0 <= busy <= total

    if policy == "fcfs":
        starts = ran["start_s"].to_numpy()
        assert (np.diff(starts) >= 0).all(), "fcfs starts jobs in submit order"


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("overrun", ["extend", "kill"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=workloads())
def test_random_workloads(policy, overrun, case):
    jobs, platform = case
    df = coscheduling.simulate(jobs=jobs, policy=policy, platform=platform, overrun=overrun)
    check_schedule(jobs, platform, df, policy, overrun)
    s = df.attrs["summary"]
    assert s["jobs_simulated"] + s["jobs_rejected"] == len(jobs)


@settings(max_examples=30, deadline=None)
@given(case=workloads(), seed=st.integers(0, 2**64 - 1))
def test_random_placement_is_seeded(case, seed):
    jobs, platform = case
    a = coscheduling.simulate(jobs=jobs, policy="easy", platform=platform, placement="random", seed=seed)
    b = coscheduling.simulate(jobs=jobs, policy="easy", platform=platform, placement="random", seed=seed)
    pd.testing.assert_frame_equal(a, b)
    check_schedule(jobs, platform, a, "easy", "extend")
