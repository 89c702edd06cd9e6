"""Cluster policies written in Python: the FCFS port gives the Rust schedule exactly (differential),
SJF's order and backfilling on hand-checked workloads, and errors that name the policy."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coscheduling as c
from coscheduling.cli import DEMO_TRACE

from conftest import run_cli

PY_FCFS = "python:coscheduling.pypolicies.fcfs:Fcfs"
SJF = "python:coscheduling.pypolicies.sjf:ShortestJobFirst"


def test_python_fcfs_equals_rust_fcfs_on_a_real_trace() -> None:
    a, b = c.run(DEMO_TRACE, policy="fcfs"), c.run(DEMO_TRACE, policy=PY_FCFS)
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    assert b.summary["policy"] == PY_FCFS


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(1, 300), st.integers(1, 8)), min_size=1, max_size=40))
def test_python_fcfs_equals_rust_fcfs_on_random_workloads(jobs: list[tuple[int, int, int]]) -> None:
    df = pd.DataFrame(sorted(jobs), columns=["submit_s", "runtime_s", "procs"])
    a = c.run(jobs=df, platform={"nodes": 8}, policy="fcfs")
    b = c.run(jobs=df, platform={"nodes": 8}, policy=PY_FCFS)
    pd.testing.assert_frame_equal(a.jobs, b.jobs)


def _jobs(rows: list[tuple[float, float, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["submit_s", "runtime_s", "procs"])


def test_sjf_runs_the_shortest_queued_job_first() -> None:
    # A occupies the machine until 100; B (50 s) and C (10 s) queue; SJF starts C at 100, then B at 110.
    df = _jobs([(0, 100, 4), (1, 50, 4), (2, 10, 4)])
    starts = c.run(jobs=df, platform={"nodes": 4}, policy=SJF, estimates="exact").jobs["start_s"].tolist()
    assert starts == [0, 110, 100]
    fcfs = c.run(jobs=df, platform={"nodes": 4}, policy="fcfs").jobs["start_s"].tolist()
    assert fcfs == [0, 100, 150]


def test_sjf_backfills_only_behind_the_reservation() -> None:
    # A (2 of 4 procs) runs to 100; B needs 3 and is reserved at 100, leaving 1 spare processor then.
    # F (1 proc, 500 s) comes after B in SJF order: with backfilling it starts now on the spare
    # processor; D (2 procs, 600 s) would delay B and waits. Without backfilling both wait for B.
    df = _jobs([(0, 100, 2), (1, 400, 3), (3, 500, 1), (4, 600, 2)])
    r = c.run(jobs=df, platform={"nodes": 4}, policy=f"{SJF}[backfill=True]", estimates="exact")
    assert r.jobs["start_s"].tolist()[:3] == [0, 100, 3]
    assert r.jobs["start_s"].tolist()[3] >= 500
    nb = c.run(jobs=df, platform={"nodes": 4}, policy=f"{SJF}[backfill=False]", estimates="exact")
    assert nb.jobs["start_s"].tolist()[:3] == [0, 100, 100]


class Raises:
    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        raise KeyError("boom")


class BadDecision:
    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        return [("launch", 0)]


class StartsTwice:
    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        return [("start", e[1]) for e in events if e[0] == "submitted"] * 2


def test_policy_errors_surface() -> None:
    df = _jobs([(0, 10, 1), (5, 10, 1)])
    plat = {"nodes": 2}
    # A policy's failure is a policy error (RuntimeError, exit code 1) whose cause is its exception.
    with pytest.raises(RuntimeError, match="on_events raised KeyError: 'boom'") as info:
        c.run(jobs=df, platform=plat, policy=f"python:{__name__}:Raises")
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(RuntimeError, match=r"malformed decision \('launch', 0\): unknown decision name"):
        c.run(jobs=df, platform=plat, policy=f"python:{__name__}:BadDecision")
    with pytest.raises(RuntimeError, match="not waiting in the queue"):
        c.run(jobs=df, platform=plat, policy=f"python:{__name__}:StartsTwice")
    with pytest.raises(ValueError, match="cannot import module"):
        c.run(jobs=df, platform=plat, policy="python:no_such_module:X")
    with pytest.raises(ValueError, match="bad parameters"):
        c.run(jobs=df, platform=plat, policy=f"{SJF}[nope=1]")


def test_cli_and_configuration_name_python_policies(tmp_path: Path) -> None:
    r = run_cli(["simulate", "--trace", str(DEMO_TRACE), "--policy", SJF, "--max-jobs", "300"])
    assert r.exit_code == 0, r.stderr
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[workload]\ntrace = "{DEMO_TRACE}"\nmax_jobs = 300\n[scheduler]\npolicy = "{PY_FCFS}"\n')
    r = run_cli(["simulate", str(cfg), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.stderr
    ref = c.run(DEMO_TRACE, policy="fcfs", max_jobs=300)
    got = pd.read_csv(tmp_path / "o" / "jobs.csv")
    assert got["start_s"].tolist() == pytest.approx(ref.jobs["start_s"].tolist())
    cfg.write_text(f'[workload]\ntrace = "{DEMO_TRACE}"\n[scheduler]\npolicy = "python:nope:X"\n')
    r = run_cli(["simulate", str(cfg), "--out", str(tmp_path / "o2")])
    assert r.exit_code == 2 and "cannot import module 'nope'" in r.stderr
