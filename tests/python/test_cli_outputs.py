"""`cosched simulate`: the output contract, determinism, and the summary against the job table."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from coscheduling import _core
from coscheduling.api import JOB_COLUMNS
from coscheduling.output import OUTPUT_FILES, canonical_json, sha256_text

from conftest import REPO, SLICED, outputs_twice, run_cli

SUMMARY_KEYS = (
    "jobs_simulated",
    "jobs_dropped",
    "mean_wait_s",
    "mean_response_s",
    "p90_wait_s",
    "mean_bounded_slowdown",
    "utilization",
    "makespan_s",
    "energy_j",
    "provenance",
)
PROVENANCE_KEYS = ("build_sha256", "command_line", "config_hash", "git_commit", "platform", "policy", "seed", "trace",
                   "version")


@pytest.mark.parametrize("name", SLICED)
@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_simulate_writes_the_output_contract(slices, tmp_path, name, policy):
    trace = slices[name]
    out = tmp_path / "out"
    r = run_cli(["simulate", "--trace", trace, "--policy", policy, "--out", out])
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)

    summary = json.loads((out / "summary.json").read_text())
    for key in SUMMARY_KEYS:
        assert key in summary, key
    assert list(summary)[-1] == "provenance"
    prov = summary["provenance"]
    assert list(prov) == sorted(prov) and set(PROVENANCE_KEYS) <= set(prov)
    assert prov["policy"] == policy and prov["seed"] == 0
    assert prov["trace"] == {"path": str(trace), "sha256": hashlib.sha256(trace.read_bytes()).hexdigest()}
    assert prov["version"] == _core.version()

    csv = pd.read_csv(out / "jobs.csv", keep_default_na=False, na_values=[""])
    assert tuple(csv.columns) == JOB_COLUMNS
    assert len(csv) == summary["jobs_total"]
    assert summary["jobs_simulated"] + summary["jobs_rejected"] == summary["jobs_total"]
    assert summary["jobs_total"] + summary["jobs_dropped"] <= 500

    table = pq.read_table(out / "jobs.parquet")
    assert table.schema.names == list(JOB_COLUMNS)
    assert table.schema.pandas_metadata is not None
    pqdf = table.to_pandas()
    for col in JOB_COLUMNS:
        a, b = csv[col].to_numpy(), pqdf[col].to_numpy()
        if col in ("status", "node_list"):
            assert [("" if pd.isna(x) else x) for x in a] == list(b), col
        else:
            np.testing.assert_array_equal(a.astype(float), b.astype(float), err_msg=col)
    assert "summary" in r.stdout or "mean wait" in r.stdout


def test_same_command_gives_identical_bytes(slices, tmp_path):
    """Two processes running the same command write byte-identical files."""
    trace = slices["SDSC-SP2-1998-4.2-cln"]
    args = ["simulate", "--trace", trace, "--policy", "conservative", "--placement", "random",
            "--seed", "7", "--out", "res"]
    before, after = outputs_twice(args, tmp_path, "res", OUTPUT_FILES)
    for f in OUTPUT_FILES:
        assert before[f] == after[f], f
    prov = json.loads(after["summary.json"])["provenance"]
    assert prov["command_line"].startswith("cosched simulate --trace ")
    assert prov["seed"] == 7


def test_seed_changes_random_placement_only(slices, tmp_path):
    trace = slices["CTC-SP2-1996-3.1-cln"]
    for seed in (1, 2):
        r = run_cli(["simulate", "--trace", trace, "--placement", "random", "--seed", seed,
                     "--out", tmp_path / f"s{seed}"])
        assert r.exit_code == 0, r.stderr
    a = pd.read_csv(tmp_path / "s1" / "jobs.csv", keep_default_na=False)
    b = pd.read_csv(tmp_path / "s2" / "jobs.csv", keep_default_na=False)
    # The schedule does not depend on where processors are; the node lists do.
    np.testing.assert_array_equal(a["start_s"], b["start_s"])
    assert (a["node_list"] != b["node_list"]).any()


@pytest.mark.parametrize("name", SLICED)
@pytest.mark.parametrize("policy", ["fcfs", "easy"])
def test_summary_matches_the_job_table(slices, tmp_path, name, policy):
    out = tmp_path / "out"
    r = run_cli(["simulate", "--trace", slices[name], "--policy", policy, "--out", out])
    assert r.exit_code == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    plat = s["provenance"]["platform"]
    jobs = pd.read_csv(out / "jobs.csv", keep_default_na=False, na_values=[""])
    sim = jobs[jobs["status"] != "rejected"]
    assert len(sim) == s["jobs_simulated"]
    close = dict(rel=1e-9, abs=1e-6)

    wait, resp, ex = sim["wait_s"].to_numpy(), sim["response_s"].to_numpy(), sim["execution_s"].to_numpy()
    np.testing.assert_allclose(wait, sim["start_s"] - sim["submit_s"], atol=1e-6)
    np.testing.assert_allclose(resp, wait + ex, atol=1e-6)
    assert s["mean_wait_s"] == pytest.approx(wait.mean(), **close)
    assert s["median_wait_s"] == pytest.approx(np.percentile(wait, 50), **close)
    assert s["p90_wait_s"] == pytest.approx(np.percentile(wait, 90), **close)
    assert s["mean_response_s"] == pytest.approx(resp.mean(), **close)
    assert s["median_response_s"] == pytest.approx(np.percentile(resp, 50), **close)
    assert s["p90_response_s"] == pytest.approx(np.percentile(resp, 90), **close)

    assert s["bounded_slowdown_threshold_s"] == 10.0
    bsld = np.maximum(1.0, resp / np.maximum(ex, 10.0))
    np.testing.assert_allclose(sim["bounded_slowdown"], bsld, rtol=1e-12)
    assert s["mean_bounded_slowdown"] == pytest.approx(bsld.mean(), **close)
    assert s["p90_bounded_slowdown"] == pytest.approx(np.percentile(bsld, 90), **close)

    procs = sim["procs"].to_numpy(dtype=float)
    makespan = sim["end_s"].max() - sim["submit_s"].min()
    assert s["makespan_s"] == pytest.approx(makespan, **close)
    work = float((procs * ex).sum())
    assert s["utilization"] == pytest.approx(work / (s["machine_procs"] * makespan), **close)

    ppn, nodes = plat["procs_per_node"], plat["nodes"]
    assert (s["machine_nodes"], s["procs_per_node"]) == (nodes, ppn)
    busy_node_s = work / ppn
    e_busy = plat["busy_watts"] * busy_node_s
    e_idle = plat["idle_watts"] * (nodes * makespan - busy_node_s)
    assert s["energy_busy_j"] == pytest.approx(e_busy, **close)
    assert s["energy_idle_j"] == pytest.approx(e_idle, **close)
    assert s["energy_j"] == pytest.approx(e_busy + e_idle, **close)
    assert jobs["energy_j"].sum() == pytest.approx(e_busy, **close)


def test_config_run_and_equivalent_flags_share_the_config_hash(slices, tmp_path, monkeypatch):
    src = slices["SDSC-SP2-1998-4.2-cln"]
    shutil.copy(src, tmp_path / "t.swf")
    (tmp_path / "exp.toml").write_text(
        'seed = 3\n[workload]\ntrace = "t.swf"\nestimates = "exact"\nmax_jobs = 300\n'
        '[scheduler]\npolicy = "conservative"\nplacement = "random"\n'
    )
    r = run_cli(["simulate", "exp.toml"], cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    out = tmp_path / "results" / "exp"
    s = json.loads((out / "summary.json").read_text())
    assert s["jobs_total"] == 300 and s["policy"].startswith("conservative")
    prov = s["provenance"]
    assert prov["seed"] == 3 and prov["policy"] == "conservative"
    monkeypatch.chdir(tmp_path)
    cfg = json.loads(_core.load_config("exp.toml"))
    assert cfg["workload"]["trace"] == "t.swf"
    assert prov["config_hash"] == sha256_text(canonical_json(cfg))

    r2 = run_cli(["simulate", "--trace", "t.swf", "--policy", "conservative", "--estimates", "exact",
                  "--max-jobs", "300", "--placement", "random", "--seed", "3", "--out", "flags"], cwd=tmp_path)
    assert r2.exit_code == 0, r2.stderr
    s2 = json.loads((tmp_path / "flags" / "summary.json").read_text())
    assert s2["provenance"]["config_hash"] == prov["config_hash"]
    assert (tmp_path / "flags" / "jobs.parquet").read_bytes() == (out / "jobs.parquet").read_bytes()
    assert (tmp_path / "flags" / "jobs.csv").read_bytes() == (out / "jobs.csv").read_bytes()


def test_config_out_overrides_default(slices, tmp_path):
    shutil.copy(slices["CTC-SP2-1996-3.1-cln"], tmp_path / "t.swf")
    (tmp_path / "c.json").write_text('{"workload": {"trace": "t.swf"}, "scheduler": {"policy": "easy"}}')
    r = run_cli(["simulate", tmp_path / "c.json", "--out", tmp_path / "elsewhere"], cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "elsewhere" / "summary.json").is_file()
    assert not (tmp_path / "results").exists()


def test_simulate_without_out_writes_nothing(slices, tmp_path):
    r = run_cli(["simulate", "--trace", slices["CTC-SP2-1996-3.1-cln"]], cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    assert list(tmp_path.iterdir()) == []
    assert "mean wait" in r.stdout


def test_warnings_go_to_stderr(slices, tmp_path):
    # The Thunder slice has records without processors: a warning, not an error.
    r = run_cli(["simulate", "--trace", slices["LLNL-Thunder-2007-1.1-cln"], "--machine-size", "64"])
    assert r.exit_code == 0, r.stderr
    assert "warning:" in r.stderr and "warning:" not in r.stdout


def test_trace_info_policies_version(slices):
    r = run_cli(["trace", "info", slices["SDSC-SP2-1998-4.2-cln"], "--json"])
    assert r.exit_code == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["records"] == 500 and info["machine_procs"] == 128
    r = run_cli(["trace", "info", slices["SDSC-SP2-1998-4.2-cln"]])
    assert r.exit_code == 0 and "offered_load" in r.stdout
    r = run_cli(["policies", "--json"])
    assert [p["name"] for p in json.loads(r.stdout)][:3] == ["fcfs", "easy", "conservative"]
    r = run_cli(["policies"])
    assert r.exit_code == 0 and "conservative" in r.stdout
    r = run_cli(["version"])
    assert r.exit_code == 0 and _core.version() in r.stdout


def test_help_lists_commands():
    r = run_cli(["--help"])
    assert r.exit_code == 0
    for cmd in ("simulate", "trace", "policies", "demo", "bench", "version"):
        assert cmd in r.stdout


def test_outputs_written_into_existing_folder_keep_other_files(slices, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    r = run_cli(["simulate", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--out", out])
    assert r.exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUT_FILES, "notes.txt"])


def test_bench_on_given_traces(slices):
    r = run_cli(["bench", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--trace", slices["SDSC-SP2-1998-4.2-cln"],
                 "--policy", "fcfs", "--policy", "easy", "--json"])
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(row["trace"].split("-")[0], row["policy"]) for row in rows] == [
        ("CTC", "fcfs"), ("CTC", "easy"), ("SDSC", "fcfs"), ("SDSC", "easy")]
    for row in rows:
        assert row["jobs"] > 0 and row["total_s"] >= row["simulate_s"] >= 0
    r = run_cli(["bench", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--max-jobs", "100"])
    assert r.exit_code == 0 and "jobs/s" in r.stdout


EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*") if p.suffix in (".toml", ".json"))
#: Examples for real execution (`cosched run`): the simulator's configuration plus a [real] table.
REAL_EXAMPLES = [e for e in EXAMPLES if e.startswith("real-")]


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e not in REAL_EXAMPLES])
def test_example_configs_run(example, tmp_path):
    r = run_cli(["simulate", REPO / "examples" / example, "--out", tmp_path / "o"])
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == sorted(OUTPUT_FILES)


@pytest.mark.parametrize("example", REAL_EXAMPLES)
def test_real_examples_run_for_real_and_their_counterpart_simulates(example, tmp_path):
    """`cosched run` executes the example on this machine (root, cgroups, MPICH and `make real`, which
    `make test` builds); the same file without its [real] table is the simulated counterpart."""
    import subprocess
    import sys
    import tomllib

    path = REPO / "examples" / example
    r = subprocess.run([sys.executable, "-m", "coscheduling", "run", str(path), "-o", str(tmp_path / "real")],
                       capture_output=True, text=True, timeout=600, cwd=REPO / "examples")
    assert r.returncode == 0, r.stdout + r.stderr
    assert {"jobs.csv", "summary.json"} <= {p.name for p in (tmp_path / "real").iterdir()}
    cfg = tomllib.loads(path.read_text())
    assert cfg.pop("real")
    sim = tmp_path / "sim.json"
    sim.write_text(json.dumps(cfg))
    r = run_cli(["simulate", sim, "--out", tmp_path / "o"])
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == sorted(OUTPUT_FILES)


def test_event_order_per_event_changes_the_hand_worked_schedule(tmp_path):
    """Machine of 10. A: t=0, 6 procs, runs 10 s, requests 50 s; H: t=1, 10 procs, 10 s;
    B: t=10, 4 procs, 30 s. Per instant, A's end and B's arrival are seen together at 10:
    H starts at 10 and B at 20. Per event, B's arrival comes first (A still holds 6
    processors, H's shadow time is A's estimated end 50): B is backfilled at 10 and H
    waits for it until 40. The option enters the configuration hash only when not the default."""
    swf = tmp_path / "t.swf"
    rows = [(1, 0, 10, 6, 50), (2, 1, 10, 10, 10), (3, 10, 30, 4, 30)]
    lines = ["; MaxProcs: 10"]
    for job, submit, run, procs, req in rows:
        f = [job, submit, -1, run, procs, -1, -1, procs, req] + [-1] * 9
        lines.append(" ".join(str(v) for v in f))
    swf.write_text("\n".join(lines) + "\n")
    starts, hashes = {}, {}
    for order in ("default", "per-instant", "per-event"):
        out = tmp_path / order
        flag = [] if order == "default" else ["--event-order", order]
        r = run_cli(["simulate", "--trace", swf, "--policy", "easy", *flag, "--out", out])
        assert r.exit_code == 0, r.stderr
        starts[order] = pd.read_csv(out / "jobs.csv")["start_s"].tolist()
        hashes[order] = json.loads((out / "summary.json").read_text())["provenance"]["config_hash"]
    assert starts == {"default": [0.0, 10.0, 20.0], "per-instant": [0.0, 10.0, 20.0],
                      "per-event": [0.0, 40.0, 10.0]}
    assert hashes["default"] == hashes["per-instant"] != hashes["per-event"]


def test_the_cli_imports_no_heavy_module_until_a_command_needs_it():
    # `cosched --help` and argument parsing must not pay for pandas, matplotlib, scipy or dask
    # (the time goal itself is in `cosched bench simulate`).
    import subprocess
    import sys

    code = ("import sys, coscheduling.cli; "
            "print(sorted(m for m in ('pandas', 'matplotlib', 'scipy', 'dask') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
