"""`cosched demo`: the coscheduling comparison (process level) and the trace replay on the built-in
excerpt, and the excerpt itself."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from coscheduling import demo, trace_info
from coscheduling.cli import DEMO_POLICIES, DEMO_TRACE
from coscheduling.output import OUTPUT_FILES

from conftest import CliResult, run_cli


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[CliResult, Path]:
    out = tmp_path_factory.mktemp("demo") / "demo"
    return run_cli(["demo", "--out", out]), out


def test_demo_compares_the_coscheduling_schemes(ran: tuple[CliResult, Path]) -> None:
    r, out = ran
    assert r.exit_code == 0, r.stderr
    comp = pd.read_csv(out / "coscheduling" / "comparison.csv")
    assert list(comp.columns) == list(demo.SCHEME_COLUMNS)
    assert comp["scheme"].tolist() == list(demo.DEMO_SCHEMES) == ["BATCH", "GANG", "NLS", "SB", "CC", "HYBRID"]
    assert (comp["jobs"] == demo.DEMO_JOBS).all()
    # Each row is its run's summary (process level, on choi2004, with the scheme's node policy).
    for key in (out / "coscheduling" / "runs").iterdir():
        s = json.loads((key / "summary.json").read_text())
        cfg = json.loads((key / "config.json").read_text())
        assert cfg["fidelity"] == "process" and cfg["node_platform"]["preset"] == "choi2004"
        row = comp[comp["mean_response_s"] == s["mean_response_s"]]
        assert len(row) == 1 and row["makespan_s"].iloc[0] == s["makespan_s"]
    assert (out / "coscheduling" / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "report.html").read_text()
    assert "cosched demo: " in html and "<img" in html
    for name in demo.DEMO_SCHEMES:
        assert name in r.stdout
    assert f"Look at {out / 'report.html'}" in " ".join(r.stdout.split())


def test_demo_replays_the_trace_excerpt(ran: tuple[CliResult, Path]) -> None:
    r, top = ran
    out = top / "trace-replay"
    comp = pd.read_csv(out / "comparison.csv")
    assert comp["policy"].tolist() == list(DEMO_POLICIES) == ["fcfs", "easy", "conservative"]
    assert list(comp.columns) == [
        "policy", "jobs", "mean_wait_s", "p90_wait_s", "mean_response_s", "mean_bounded_slowdown",
        "utilization", "makespan_s", "energy_mj",
    ]
    assert (comp["jobs"] == 3000).all()
    for policy in DEMO_POLICIES:
        assert sorted(p.name for p in (out / policy).iterdir()) == sorted(OUTPUT_FILES)
        s = json.loads((out / policy / "summary.json").read_text())
        row = comp[comp["policy"] == policy].iloc[0]
        assert row["mean_wait_s"] == s["mean_wait_s"]
        assert row["energy_mj"] == s["energy_j"] / 1e6
    # Backfilling helps on this trace.
    waits = dict(zip(comp["policy"], comp["mean_wait_s"], strict=True))
    assert waits["easy"] < waits["fcfs"] and waits["conservative"] < waits["fcfs"]
    for name in ("fcfs", "easy", "conservative", "mean wait"):
        assert name in r.stdout


def test_demo_without_replay_skips_part_two(tmp_path: Path, ran: tuple[CliResult, Path]) -> None:
    # The process-level runs are reused from the first demo's folder (same configurations, same build).
    import shutil

    out = tmp_path / "d"
    shutil.copytree(ran[1] / "coscheduling", out / "coscheduling")
    r = run_cli(["demo", "--out", out, "--no-replay"])
    assert r.exit_code == 0, r.stderr
    assert not (out / "trace-replay").exists() and (out / "report.html").is_file()
    assert (out / "coscheduling" / "comparison.csv").read_bytes() == (
        ran[1] / "coscheduling" / "comparison.csv").read_bytes()


def test_demo_excerpt_is_the_first_3000_kth_records(traces_dir):
    info = trace_info(DEMO_TRACE)
    assert info["records"] == 3000 and info["machine_procs"] == 100
    full = trace_info(traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz")
    # The original header (acknowledgements) is kept, plus one line saying what the excerpt is.
    assert info["header_lines"] == full["header_lines"] + 1
    assert info["first_submit_s"] == full["first_submit_s"]
