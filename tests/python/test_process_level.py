"""Process-level runs through the CLI: configurations with fidelity = "process" and
the process-level benchmark (its figures are printed, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from coscheduling.api import TIMELINE_COLUMNS

from conftest import REPO, outputs_twice, run_cli

EXAMPLE = REPO / "examples" / "choi-nas-small.toml"


def test_process_config_writes_the_output_contract(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = run_cli(["simulate", str(EXAMPLE), "--out", str(out)])
    assert r.exit_code == 0, r.stdout + r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "fcfs+nls"
    assert summary["jobs_simulated"] == 5
    assert 0 < summary["utilization"] <= 1
    assert summary["provenance"]["policy"] == "fcfs+nls"
    assert (out / "jobs.csv").read_text().count("\n") == 6


def test_process_config_errors_name_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(EXAMPLE.read_text().replace('app = "EP"', 'app = "XX"'))
    r = run_cli(["simulate", str(cfg), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "workload.jobs[2]" in (r.stdout + r.stderr) and "unknown application" in (r.stdout + r.stderr)
    assert not (tmp_path / "o").exists()


def test_process_level_benchmark_reports_events_per_second() -> None:
    r = run_cli(["bench", "process-level"])
    assert r.exit_code == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("events_per_second: ")
    assert int(last.split(": ")[1]) > 0
    bad = run_cli(["bench", "nothing"])
    assert bad.exit_code == 2


def check_process_states(tl: pd.DataFrame, jobs: pd.DataFrame) -> None:
    """Each process is in one state at a time (a CPU row, ready or blocked), from its
    job's start to its end without a gap."""
    life = tl[(tl["cpu"] >= 0) | (tl["cpu"] == -2)]
    for pid, segs in life.groupby("pid"):
        segs = segs.sort_values("start_s")
        starts, ends = segs["start_s"].to_numpy(), segs["end_s"].to_numpy()
        assert (starts[1:] >= ends[:-1] - 1e-12).all(), pid
        assert abs(starts[0] - jobs["start_s"].iloc[int(segs["job"].iloc[0])]) < 1e-9, pid
        assert abs((ends - starts).sum() - (ends[-1] - starts[0])) < 1e-6, pid


def test_timeline_is_written_consistent_and_plotted(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = run_cli(["simulate", str(EXAMPLE), "--out", str(out), "--timeline"])
    assert r.exit_code == 0, r.stdout + r.stderr
    tl = pd.read_parquet(out / "timeline.parquet")
    assert list(tl.columns) == list(TIMELINE_COLUMNS)
    assert set(tl["kind"]) <= {"useful", "spin", "switch", "page_in", "swap_out", "io", "ready", "blocked"}
    # NLS spins: processes wait for a CPU but never block.
    assert set(tl.loc[tl["cpu"] == -2, "kind"]) == {"ready"}
    assert (tl["end_s"] > tl["start_s"]).all()
    check_process_states(tl, pd.read_csv(out / "jobs.csv"))
    # Immediate blocking: blocked intervals too.
    cfg = tmp_path / "block.toml"
    cfg.write_text(EXAMPLE.read_text().replace('node_policy = "nls"', 'node_policy = "block"'))
    blk = tmp_path / "block"
    r = run_cli(["simulate", str(cfg), "--out", str(blk), "--timeline"])
    assert r.exit_code == 0, r.stdout + r.stderr
    tlb = pd.read_parquet(blk / "timeline.parquet")
    assert set(tlb.loc[tlb["cpu"] == -2, "kind"]) == {"ready", "blocked"}
    check_process_states(tlb, pd.read_csv(blk / "jobs.csv"))
    # One process at a time per CPU: segments of a lane never overlap.
    for _, lane in tl[tl["cpu"] >= 0].groupby(["node", "cpu"]):
        lane = lane.sort_values("start_s")
        assert (lane["start_s"].to_numpy()[1:] >= lane["end_s"].to_numpy()[:-1] - 1e-12).all()
    # A process is on one CPU at a time: its own segments never overlap either.
    for _, segs in tl[tl["cpu"] >= 0].groupby("pid"):
        segs = segs.sort_values("start_s")
        assert (segs["start_s"].to_numpy()[1:] >= segs["end_s"].to_numpy()[:-1] - 1e-12).all()
    summary = json.loads((out / "summary.json").read_text())
    spin = tl[tl["kind"] == "spin"]
    assert abs((spin["end_s"] - spin["start_s"]).sum() - summary["process"]["spin_s"]) < 1e-6
    useful = tl[tl["kind"] == "useful"]
    assert abs((useful["end_s"] - useful["start_s"]).sum() - summary["process"]["useful_s"]) < 1e-6
    g = run_cli(["gantt", str(out), "--start", "0", "--end", "0.2", "--node", "0", "--node", "1"])
    assert g.exit_code == 0, g.stderr
    assert (out / "gantt.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_needs_a_process_level_run(tmp_path: Path) -> None:
    r = run_cli(["gantt", str(tmp_path)])
    assert r.exit_code == 2 and "no timeline" in r.stderr
    cfg = REPO / "examples" / "kth-easy.toml"
    r = run_cli(["simulate", str(cfg), "--out", str(tmp_path / "o"), "--timeline"])
    assert r.exit_code == 2 and "timeline" in r.stderr


def test_process_outputs_are_byte_identical(tmp_path: Path) -> None:
    """The same process-level command run twice (separate processes, same folder
    name) writes byte-identical jobs.csv, summary.json and timeline.parquet."""
    files = ("jobs.csv", "summary.json", "timeline.parquet")
    before, after = outputs_twice(["simulate", str(EXAMPLE), "--timeline", "--out", "A"], tmp_path, "A", files)
    for f in files:
        assert after[f] == before[f], f
    assert len(before["timeline.parquet"]) > 1000
