"""Job-level time sharing on traces: gang (fluid Ousterhout matrix) and timeshare (fitted interference).
The calibration command is tested in test_calibrate.py."""

from __future__ import annotations

import pytest

import coscheduling as c
from coscheduling.cli import DEMO_TRACE

from conftest import run_cli


def test_one_row_gang_without_switch_cost_is_fcfs() -> None:
    a = c.run(DEMO_TRACE, policy="fcfs", max_jobs=800).jobs
    b = c.run(DEMO_TRACE, policy="gang[rows=1,switch_us=0]", max_jobs=800).jobs
    assert a["start_s"].to_numpy() == pytest.approx(b["start_s"].to_numpy(), abs=1e-6)
    assert a["end_s"].to_numpy() == pytest.approx(b["end_s"].to_numpy(), abs=1e-6)


def test_gang_rows_share_time_and_cost_switches() -> None:
    r1 = c.run(DEMO_TRACE, policy="gang[rows=1,switch_us=0]", max_jobs=800)
    r3 = c.run(DEMO_TRACE, policy="gang[rows=3,quantum_ms=100,switch_us=1000]", max_jobs=800)
    s1, s3 = r1.summary, r3.summary
    assert s3["jobs_completed"] == s1["jobs_completed"] == 800
    # More rows: jobs start sooner (less waiting) but run stretched.
    assert s3["mean_wait_s"] < s1["mean_wait_s"]
    assert s3["mean_execution_s"] >= s1["mean_execution_s"]
    assert (r3.jobs["execution_s"] >= r3.jobs["runtime_s"] - 1e-6).all()
    assert 0 < s3["utilization"] <= 1


def test_bad_model_parameters_are_named() -> None:
    with pytest.raises(ValueError, match=r'parameter quantum_ms="0": must be a number > 0'):
        c.run(DEMO_TRACE, policy="gang[quantum_ms=0]", max_jobs=10)
    with pytest.raises(ValueError, match="unknown parameter"):
        c.run(DEMO_TRACE, policy="gang[slots=2]", max_jobs=10)
    with pytest.raises(ValueError, match="intensity must be one of"):
        c.run(DEMO_TRACE, policy="timeshare[intensity=extreme]", max_jobs=10)
    with pytest.raises(ValueError, match='no interference table for scheme "nope"'):
        c.run(DEMO_TRACE, policy="timeshare[scheme=nope]", max_jobs=10)


def test_policies_lists_the_time_sharing_models() -> None:
    names = {p["name"]: p for p in c.policies()}
    assert "gang" in names and "timeshare" in names
    assert {q["name"] for q in names["timeshare"]["params"]} == {"scheme", "mpl", "intensity", "table"}
    # One level label for both models, as docs/formats/policies.md lists them; the catalog has four levels.
    assert {p["level"] for p in c.policies() if p["name"] in ("timeshare",)} == {"cluster (job-level time sharing)"}
    assert {p["level"] for p in c.policies()} == {"cluster", "node", "process", "cluster (job-level time sharing)"}


def test_gang_rows_are_in_the_job_table() -> None:
    g = c.run(DEMO_TRACE, policy="gang[rows=3]", max_jobs=800).jobs
    assert g["gang_row"].dtype.kind == "i"
    assert g["gang_row"].between(0, 2).all() and (g["gang_row"] > 0).any()
    # Jobs of one row never hold a processor at the same time.
    for _, rows in g.groupby("gang_row"):
        seen: dict[int, float] = {}
        for s, e, nl in sorted(zip(rows["start_s"], rows["end_s"], rows["node_list"], strict=True)):
            for part in str(nl).split(","):
                a, _, b = part.partition("-")
                for n in range(int(a), int(b or a) + 1):
                    assert seen.get(n, -1.0) <= s + 1e-9
                    seen[n] = e
    assert (c.run(DEMO_TRACE, policy="easy", max_jobs=100).jobs["gang_row"] == -1).all()


def test_bench_gang_measures_each_model_in_its_own_process() -> None:
    import json

    r = run_cli(["bench", "gang", "--trace", str(DEMO_TRACE), "--max-jobs", "300", "--json"])
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["policy"] for x in rows] == ["fcfs", "gang[rows=3]", "timeshare[scheme=hybrid,mpl=3]"]
    for x in rows:
        assert x["jobs"] == 300 and x["simulate_s"] > 0 and x["peak_rss_mb"] >= x["import_rss_mb"] > 0
