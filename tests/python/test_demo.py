"""`cosched demo` on the built-in trace excerpt, and the excerpt itself."""

from __future__ import annotations

import json

import pandas as pd

from coscheduling import trace_info
from coscheduling.cli import DEMO_POLICIES, DEMO_TRACE
from coscheduling.output import OUTPUT_FILES

from conftest import run_cli


def test_demo_writes_comparison_and_each_policy(tmp_path):
    out = tmp_path / "demo"
    r = run_cli(["demo", "--out", out])
    assert r.exit_code == 0, r.stderr
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


def test_demo_excerpt_is_the_first_3000_kth_records(traces_dir):
    info = trace_info(DEMO_TRACE)
    assert info["records"] == 3000 and info["machine_procs"] == 100
    full = trace_info(traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz")
    # The original header (acknowledgements) is kept, plus one line saying what the excerpt is.
    assert info["header_lines"] == full["header_lines"] + 1
    assert info["first_submit_s"] == full["first_submit_s"]
