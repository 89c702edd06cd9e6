"""Process-level runs through the CLI: configurations with fidelity = "process" and
the process-level benchmark (its figures are printed, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO, run_cli

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
