"""Every shared trace loads and simulates under every batch policy."""

from __future__ import annotations

import json

import pytest

from coscheduling import _core

from conftest import find_traces_dir

POLICIES = ["fcfs", "easy", "conservative"]
TRACES = sorted(p.name for p in find_traces_dir().glob("*.swf.gz")) if find_traces_dir().is_dir() else []


def check(summary: dict) -> None:
    assert summary["jobs_simulated"] + summary["jobs_rejected"] == summary["jobs_total"]
    assert summary["jobs_completed"] + summary["jobs_killed"] == summary["jobs_simulated"]
    if summary["jobs_simulated"]:
        assert 0.0 < summary["utilization"] <= 1.0 + 1e-9
        assert summary["mean_wait_s"] >= 0.0
        assert summary["mean_bounded_slowdown"] >= 1.0


def test_all_traces_are_present(traces_dir):
    assert len(TRACES) == 15, TRACES


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("trace", TRACES)
def test_trace_prefix_simulates(traces_dir, trace, policy):
    r = _core.run_trace(traces_dir / trace, policy, max_jobs=2000)
    s = json.loads(r.summary_json())
    assert s["jobs_total"] == 2000
    check(s)


@pytest.mark.parametrize("trace", TRACES)
def test_trace_info(traces_dir, trace):
    info = json.loads(_core.trace_info(traces_dir / trace))
    assert info["records"] > 0 and info["jobs"] > 0
    assert info["jobs"] + info["dropped_never_ran"] + info["dropped_no_procs"] == info["records"]


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("trace", TRACES)
def test_whole_trace_simulates(traces_dir, trace, policy):
    r = _core.run_trace(traces_dir / trace, policy)
    s = json.loads(r.summary_json())
    info = json.loads(_core.trace_info(traces_dir / trace))
    assert s["jobs_total"] == info["jobs"]
    check(s)
