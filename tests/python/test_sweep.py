"""`cosched sweep`: grid expansion, local runs, resuming from the cache, errors naming the point,
and the same sweep through a Dask LocalCluster giving the same results."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from coscheduling import sweep

from conftest import REPO, run_cli

SPEC = REPO / "examples" / "sweeps" / "kth.toml"


def test_dry_run_lists_the_grid() -> None:
    r = run_cli(["sweep", str(SPEC), "--dry-run"])
    assert r.exit_code == 0, r.stderr
    assert "12 runs" in r.stdout
    runs = sweep.expand(sweep.load_spec(SPEC))
    assert len(runs) == 12
    assert {tuple(r.labels.values()) for r in runs} == {
        (p, e, s) for p in ("fcfs", "easy", "conservative") for e in ("requested", "exact") for s in (1, 2)
    }
    assert all(r.config["scheduler"]["policy"] == r.labels["scheduler.policy"] for r in runs)


def test_local_sweep_gathers_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "sw"
    r = run_cli(["sweep", str(SPEC), "--out", str(out), "-j", "2"])
    assert r.exit_code == 0, r.stderr
    assert "12 runs (0 reused)" in r.stdout
    t = pd.read_parquet(out / "results.parquet")
    assert list(t.columns[:4]) == ["run", "scheduler.policy", "workload.estimates", "seed"]
    assert len(t) == 12 and (t["jobs_completed"] > 0).all()
    # FCFS never backfills: its mean wait is the largest for each (estimates, seed).
    for _, g in t.groupby(["workload.estimates", "seed"]):
        waits = dict(zip(g["scheduler.policy"], g["mean_wait_s"], strict=True))
        assert waits["fcfs"] >= max(waits["easy"], waits["conservative"])
    # An interrupted sweep: remove two runs' results; only they run again.
    gone = sorted((out / "runs").iterdir())[:2]
    for d in gone:
        (d / "summary.json").unlink()
    again = run_cli(["sweep", str(SPEC), "--out", str(out), "-j", "1"])
    assert again.exit_code == 0, again.stderr
    assert "12 runs (10 reused)" in again.stdout
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), t)


def test_bad_point_is_named(tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(SPEC.read_text().replace('"conservative"]', '"nope"]').replace(
        'trace = "../../python', f'trace = "{REPO}/python'))
    r = run_cli(["sweep", str(spec), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "scheduler.policy='nope'" in r.stderr and "unknown policy" in r.stderr.lower()
    assert not (tmp_path / "o").exists()
    spec.write_text("[grid]\nseed = [1]\n")
    r = run_cli(["sweep", str(spec)])
    assert r.exit_code == 2 and "field base" in r.stderr


def test_dask_local_cluster_gives_the_local_results(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    spec = sweep.load_spec(SPEC)
    local, _ = sweep.run_sweep(spec, tmp_path / "local", workers=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        with distributed.Client(lc) as client:
            remote, g = sweep.run_sweep(spec, tmp_path / "dask", client=client)
        assert len(g.executed) == 12
        r = run_cli(["sweep", str(SPEC), "--out", str(tmp_path / "dask"), "--dask", lc.scheduler_address])
        assert r.exit_code == 0, r.stderr
        assert "12 runs (12 reused)" in r.stdout
    pd.testing.assert_frame_equal(local, remote)
