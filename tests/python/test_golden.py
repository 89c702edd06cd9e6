"""Golden scenarios: small runs at both fidelities whose job table and summary (less the keys that
describe the run's circumstances) are compared byte for byte with tests/golden/scenarios/; `make
bless` rewrites them. The process-level scenario runs under every registered node policy; the batch
scenario under the process-level batch schemes (strict FCFS, EASY, conservative)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coscheduling import api

from conftest import SLICE_RECORDS, run_cli
from golden import GOLDEN, check

SCENARIO = GOLDEN / "scenarios" / "nas-mix.toml"
BATCH_SCENARIO = GOLDEN / "scenarios" / "nas-batch.toml"
NODE_POLICIES = [p["name"] for p in api.policies() if p["level"] == "node"]
PROVENANCE_VOLATILE = {"build_sha256", "command_line", "git_commit", "version", "trace", "config_hash"}


def stable_summary(path: Path) -> str:
    """summary.json as sorted JSON without its timings and run-specific provenance."""
    s = json.loads(path.read_text())
    s.pop("timings", None)
    prov = s.get("provenance") or {}
    for k in PROVENANCE_VOLATILE:
        prov.pop(k, None)
    return json.dumps(s, indent=1, sort_keys=True) + "\n"


def _check_run(name: str, out: Path) -> None:
    check(f"scenarios/{name}/jobs.csv", (out / "jobs.csv").read_text())
    check(f"scenarios/{name}/summary.json", stable_summary(out / "summary.json"))


def _check_config(name: str, text: str, tmp_path: Path) -> None:
    """Runs the configuration `text` through the CLI and checks its outputs against scenarios/NAME."""
    config = tmp_path / f"{name}.toml"
    config.write_text(text)
    out = tmp_path / "out"
    r = run_cli(["simulate", str(config), "--out", str(out)])
    assert r.exit_code == 0, r.stdout + r.stderr
    _check_run(name, out)


@pytest.mark.parametrize("node_policy", NODE_POLICIES)
def test_process_level_scenario_under_each_node_policy(node_policy: str, tmp_path: Path) -> None:
    text = SCENARIO.read_text().replace('node_policy = "nls"', f'node_policy = "{node_policy}"')
    _check_config(f"nas-mix-{node_policy}", text, tmp_path)


def test_process_level_scenario_under_gang(tmp_path: Path) -> None:
    text = SCENARIO.read_text().replace("mpl = 2", 'policy = "gang[quantum_ms=50,rows=2,switch_us=500]"')
    _check_config("nas-mix-gang", text, tmp_path)


@pytest.mark.parametrize("policy", ["batch", "easy[estimates=perfect]", "conservative[estimates=perfect]"])
def test_process_level_batch_scenario(policy: str, tmp_path: Path) -> None:
    text = BATCH_SCENARIO.read_text().replace('policy = "batch"', f'policy = "{policy}"')
    _check_config(f"nas-batch-{policy.split('[')[0]}", text, tmp_path)


@pytest.mark.parametrize("policy", [p["name"] for p in api.policies() if p["level"] == "cluster"])
def test_job_level_trace_slice(policy: str, slices: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = run_cli(["simulate", "--trace", str(slices["SDSC-SP2-1998-4.2-cln"]), "--policy", policy,
                 "--out", str(out)])
    assert r.exit_code == 0, r.stdout + r.stderr
    _check_run(f"sdsc-sp2-first{SLICE_RECORDS}-{policy}", out)
