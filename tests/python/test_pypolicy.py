"""Cluster policies written in Python: the FCFS port gives the Rust schedule exactly (differential),
SJF's order and backfilling on hand-checked workloads, and errors that name the policy."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coscheduling as c
from coscheduling import _core, pypolicy
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


class RaisesWhileIterated:
    """Returns a generator whose second decision raises: the error names the generator's line."""

    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        for e in events:
            if e[0] == "submitted":
                yield ("start", e[1])
                yield ("start", {}["nope"])


class StallsAndDumpRaises:
    """Starts nothing (the engine reports a stall with the policy's dump), and its dump raises."""

    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        return []

    def dump(self) -> str:
        return str(1 / 0)


def _line_of(fn: object, needle: str) -> str:
    """``FILE:LINE`` of the first line of ``fn``'s source holding ``needle``."""
    import inspect

    lines, first = inspect.getsourcelines(fn)  # type: ignore[arg-type]
    k = next(i for i, text in enumerate(lines) if needle in text)
    return f"{inspect.getsourcefile(fn)}:{first + k}"  # type: ignore[arg-type]


@pytest.mark.parametrize("level", ["job", "process"])
@pytest.mark.parametrize("cls", ["Raises", "RaisesWhileIterated"])
def test_a_policy_that_raises_during_the_run_names_its_line(tmp_path: Path, level: str, cls: str) -> None:
    # Every call the host makes into the policy during the run (on_events, then iterating what it returned),
    # at job level (a trace) and at process level (hosted as the admission): exit 2, the policy, the exception
    # and the file:line that raised it, no traceback, no output.
    policy = f"python:{__name__}:{cls}"
    where = _line_of(Raises.on_events, "raise") if cls == "Raises" else _line_of(RaisesWhileIterated, '{}["nope"]')
    what = ("on_events raised KeyError: 'boom'" if cls == "Raises"
            else "iterating the decisions raised KeyError: 'nope'")
    out = tmp_path / "out"
    if level == "job":
        args = ["simulate", "--trace", str(DEMO_TRACE), "--policy", policy, "--max-jobs", "20", "--out", str(out)]
    else:
        args = ["simulate", str(_process_config(tmp_path, policy)), "--out", str(out)]
    r = run_cli(args)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert f"policy {policy} failed at t=" in r.stderr and f"{what} ({where})" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def test_a_dump_that_raises_is_described_in_the_stall_report() -> None:
    # The engine calls dump() only for its stall report (jobs wait, nothing runs, nothing is left to happen);
    # the report then says what dump() raised and where, instead of an empty state.
    with pytest.raises(RuntimeError) as info:
        c.run(jobs=_jobs([(0, 10, 1)]), platform={"nodes": 1}, policy=f"python:{__name__}:StallsAndDumpRaises")
    msg = str(info.value)
    assert f"dump() raised ZeroDivisionError: division by zero ({_line_of(StallsAndDumpRaises.dump, '1 / 0')})" \
        in msg, msg


class BadDecision:
    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        return [("launch", 0)]


class StartsTwice:
    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        return [("start", e[1]) for e in events if e[0] == "submitted"] * 2


def test_policy_errors_surface() -> None:
    df = _jobs([(0, 10, 1), (5, 10, 1)])
    plat = {"nodes": 2}
    # A policy's failure is a PolicyError (a RuntimeError; exit code 2) whose cause is its exception, naming the
    # line that raised it.
    with pytest.raises(pypolicy.PolicyError, match="on_events raised KeyError: 'boom'") as info:
        c.run(jobs=df, platform=plat, policy=f"python:{__name__}:Raises")
    assert isinstance(info.value.__cause__, KeyError) and isinstance(info.value, RuntimeError)
    assert str(info.value).endswith(f"on_events raised KeyError: 'boom' ({_line_of(Raises.on_events, 'raise')})")
    with pytest.raises(pypolicy.PolicyError, match=r"malformed decision \('launch', 0\): unknown decision name"):
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


PROCESS_CONFIG = """fidelity = "process"
seed = 1

[node_platform]
preset = "lee4"

[workload]
jobs = [
  { app = "Emp[quanta=20]", procs = 2, submit_s = 0 },
  { app = "Emp[quanta=10]", procs = 4, submit_s = 0 },
  { app = "Emp[quanta=4]", procs = 2, submit_s = 0.001 },
]

[scheduler]
policy = "POLICY"
node_policy = "nls"
"""


def _process_config(tmp_path: Path, policy: str) -> Path:
    cfg = tmp_path / f"process-{len(list(tmp_path.iterdir()))}.toml"
    cfg.write_text(PROCESS_CONFIG.replace("POLICY", policy))
    return cfg


def test_a_python_policy_admits_jobs_at_process_level(tmp_path: Path) -> None:
    # lee4: 4 single-CPU nodes, 1 ns per instruction, no OS noise, no switch cost; an Emp rank computes
    # `quanta` quanta of 500,000 ns and nothing else, so the jobs run 10, 5 and 2 ms on 2, 4 and 2
    # nodes. Hosted at MPL 1, the Python FCFS starts job 0 at 0 (2 of 4 nodes); job 1 needs 4 and
    # waits for job 0's end, 10 ms, and runs to 15 ms; job 2 (at 1 ms) would fit on the 2 free nodes
    # but FCFS keeps it behind job 1: 15 to 17 ms. The Rust `batch` (strict FCFS at MPL 1) gives the
    # same; EASY with perfect estimates backfills job 2 at 1 ms (it ends at 3 ms, before job 1's
    # reservation at 10 ms).
    ms = [0.0, 10.0, 15.0]
    py = c.run(config=_process_config(tmp_path, PY_FCFS))
    assert (py.jobs["start_s"] * 1e3).tolist() == pytest.approx(ms)
    assert (py.jobs["end_s"] * 1e3).tolist() == pytest.approx([10.0, 15.0, 17.0])
    assert py.summary["policy"] == f"{PY_FCFS}+nls"
    batch = c.run(config=_process_config(tmp_path, "batch"))
    pd.testing.assert_frame_equal(py.jobs, batch.jobs)
    easy = c.run(config=_process_config(tmp_path, "easy[estimates=perfect]"))
    assert (easy.jobs["start_s"] * 1e3).tolist() == pytest.approx([0.0, 10.0, 1.0])


def test_a_process_level_run_builds_a_fresh_python_policy(tmp_path: Path) -> None:
    cfg = _process_config(tmp_path, PY_FCFS)
    built = []

    def factory() -> object:
        built.append(pypolicy.load(PY_FCFS))
        return built[-1]

    a = _core.run_config(cfg, policy_factory=factory)
    b = _core.run_config(cfg, policy_factory=factory)
    assert len(built) == 2 and built[0] is not built[1]
    assert a.summary_json() == b.summary_json()
    with pytest.raises(ValueError, match="give policy_factory"):
        _core.run_config(cfg, policy_object=built[0])
    with pytest.raises(ValueError, match="needs its object"):
        _core.run_config(cfg)


def test_a_python_policy_s_exception_stops_a_process_level_run(tmp_path: Path) -> None:
    # The first call (at 0, job 0's and job 1's arrivals) raises: the run stops there, and the error
    # names the policy, the instant, the events (procs are nodes; the estimate is the class's
    # requested walltime, 600 s) and the exception, which is its cause.
    cfg = _process_config(tmp_path, f"python:{__name__}:Raises")
    with pytest.raises(RuntimeError) as info:
        c.run(config=cfg)
    assert str(info.value) == (
        f"policy python:{__name__}:Raises failed at t=0.000000000s on the events "
        "[('submitted', 0, 2, 600.0, 0.0), ('submitted', 1, 4, 600.0, 0.0)]: on_events raised KeyError: 'boom' "
        f"({_line_of(Raises.on_events, 'raise')})"
    )
    assert isinstance(info.value.__cause__, KeyError)
    out = tmp_path / "out"
    r = run_cli(["simulate", str(cfg), "--out", str(out)])
    assert r.exit_code == 2 and "on_events raised KeyError: 'boom'" in r.stderr, r.stderr
    assert not out.exists()
    with pytest.raises(RuntimeError, match="a process-level job cannot be rejected"):
        c.run(config=_process_config(tmp_path, f"python:{__name__}:RejectsAll"))


class SeesEstimates:
    """FCFS that records the estimate of every job it is told of (class-wide: a run builds its own object)."""

    seen: list[float] = []

    def __init__(self) -> None:
        self.queue: list[tuple[int, int]] = []

    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        for e in events:
            if e[0] == "submitted":
                SeesEstimates.seen.append(e[3])
                self.queue.append((e[1], e[2]))
        out = []
        while self.queue and self.queue[0][1] <= free_procs:
            job, procs = self.queue.pop(0)
            free_procs -= procs
            out.append(("start", job))
        return out


def test_a_process_level_python_policy_gets_the_configuration_s_estimates(tmp_path: Path) -> None:
    # As at job fidelity, `workload.estimates` chooses what the policy is told. "requested" (the
    # default): each class's requested walltime, its longest dedicated runtime rounded up to 600 s,
    # so 600 s for each of the three Emp jobs. "exact": each job's dedicated runtime on lee4
    # (1 ns per instruction, no noise or switch cost): Emp[quanta=q] computes q quanta of 500,000 ns,
    # so 20 -> 0.010 s, 10 -> 0.005 s, 4 -> 0.002 s.
    policy = f"python:{__name__}:SeesEstimates"
    SeesEstimates.seen = []
    c.run(config=_process_config(tmp_path, policy))
    assert SeesEstimates.seen == [600.0, 600.0, 600.0]
    cfg = _process_config(tmp_path, policy)
    cfg.write_text(cfg.read_text().replace("[workload]\n", '[workload]\nestimates = "exact"\n'))
    SeesEstimates.seen = []
    c.run(config=cfg)
    assert SeesEstimates.seen == pytest.approx([0.010, 0.005, 0.002], abs=1e-12)


class RejectsAll:
    def on_events(self, now_s, events, free_procs, total_procs):  # noqa: ANN001, ANN201
        return [("reject", e[1]) for e in events if e[0] == "submitted"]
