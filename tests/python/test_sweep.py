"""`cosched sweep`: grid expansion, local runs, resuming from the cache, errors naming the point,
and the same sweep through a Dask LocalCluster giving the same results."""

from __future__ import annotations

from pathlib import Path

import distributed  # a test dependency (pyproject.toml [test]): a missing one fails the tests, never skips them
import pandas as pd

import coscheduling as c
from coscheduling import sweep, traces
from coscheduling.cli import DEMO_TRACE

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
    spec = sweep.load_spec(SPEC)
    local, _ = sweep.run_sweep(spec, tmp_path / "local", workers=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        # The CLI path: every run is dispatched to the cluster (a fresh output folder, nothing cached).
        r = run_cli(["sweep", str(SPEC), "--out", str(tmp_path / "cli"), "--dask", lc.scheduler_address])
        assert r.exit_code == 0, r.stderr
        assert "12 runs (0 reused)" in r.stdout
        with distributed.Client(lc) as client:
            remote, g = sweep.run_sweep(spec, tmp_path / "dask", client=client)
            assert len(g.executed) == 12
            # The runs went through the cluster's workers, not this process.
            assert len(client.run(lambda: 1)) == 2
        again = run_cli(["sweep", str(SPEC), "--out", str(tmp_path / "cli"), "--dask", lc.scheduler_address])
        assert again.exit_code == 0, again.stderr
        assert "12 runs (12 reused)" in again.stdout
    pd.testing.assert_frame_equal(local, remote)
    pd.testing.assert_frame_equal(local, pd.read_parquet(tmp_path / "cli" / "results.parquet"))


def test_editing_the_trace_invalidates_the_cache(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    traces.first_records(DEMO_TRACE, trace, 500)
    spec_path = tmp_path / "s.toml"
    spec_path.write_text(f'[base]\n[base.workload]\ntrace = "{trace}"\n[base.scheduler]\npolicy = "fcfs"\n'
                         '[grid]\nseed = [1, 2]\n')
    out = tmp_path / "o"
    assert "2 runs (0 reused)" in run_cli(["sweep", str(spec_path), "--out", str(out), "-j", "1"]).stdout
    assert "2 runs (2 reused)" in run_cli(["sweep", str(spec_path), "--out", str(out), "-j", "1"]).stdout
    before = pd.read_parquet(out / "results.parquet")
    header, df = traces.read_swf(trace)
    traces.write_swf(trace, header, df.head(499))  # same path, same configuration, another trace
    r = run_cli(["sweep", str(spec_path), "--out", str(out), "-j", "1"])
    assert r.exit_code == 0, r.stderr
    assert "2 runs (0 reused)" in r.stdout
    after = pd.read_parquet(out / "results.parquet")
    assert (before["jobs_total"] == 500).all() and (after["jobs_total"] == 499).all()
    assert set(before["run"]).isdisjoint(after["run"])
    # The key covers the simulator too: another version or commit gives other keys.
    cfg = sweep.expand(sweep.load_spec(spec_path))[0].config
    key = sweep.run_key(cfg)
    assert key == sweep.expand(sweep.load_spec(spec_path))[0].key
    import coscheduling.sweep as sw

    orig = sw.git_commit
    try:
        sw.git_commit = lambda: "0" * 40  # type: ignore[assignment]
        assert sweep.run_key(cfg) != key
    finally:
        sw.git_commit = orig


def test_trace_load_axis_example(tmp_path: Path) -> None:
    spec = sweep.load_spec(REPO / "examples" / "sweeps" / "trace-load.toml")
    runs = sweep.expand(spec)
    assert len(runs) == 18
    spec["grid"] = {"scheduler.policy": ["easy", "gang[rows=3,quantum_ms=100,switch_us=1000]"],
                    "workload.load_scale": [0.5, 2.0], "seed": [1]}
    spec["base"]["workload"]["max_jobs"] = 600
    table, _ = sweep.run_sweep(spec, tmp_path / "o", workers=1)
    assert len(table) == 4
    for _, g in table.groupby("scheduler.policy"):
        lo, hi = (g.set_index("workload.load_scale").loc[x] for x in (0.5, 2.0))
        assert hi["mean_wait_s"] > lo["mean_wait_s"]  # four times the offered load: more waiting
    # The configuration's load_scale is the rule of `cosched trace scale-load`: the same jobs.
    for by in ("interarrival", "runtime"):
        scaled = tmp_path / f"scaled-{by}.swf"
        assert run_cli(["trace", "scale-load", str(DEMO_TRACE), str(scaled), "--factor", "2", "--by", by]
                       ).exit_code == 0
        cfg = tmp_path / f"{by}.toml"
        cfg.write_text(f'[workload]\ntrace = "{DEMO_TRACE}"\nload_scale = 2.0\nload_scale_by = "{by}"\n'
                       '[scheduler]\npolicy = "easy"\n')
        a = c.run(config=cfg).jobs
        b = c.run(scaled, policy="easy").jobs
        pd.testing.assert_frame_equal(a, b)


def test_a_mistyped_grid_key_is_named_without_a_position_in_generated_json(tmp_path: Path) -> None:
    # The point's configuration is generated (one line of JSON): "line 1, column 21" would point nowhere the
    # spec's author can look; the message names the point and the unknown key.
    spec = tmp_path / "typo.toml"
    spec.write_text(f'name = "t"\n[base.workload]\ntrace = "{DEMO_TRACE}"\n[base.scheduler]\npolicy = "easy"\n'
                    '[grid]\n"scheduler.polcy" = ["fcfs"]\n')
    r = run_cli(["sweep", str(spec), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "sweep point (scheduler.polcy='fcfs'): configuration: unknown field `polcy`" in r.stderr, r.stderr
    assert "column" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_dry_run_checks_every_point(tmp_path: Path) -> None:
    # A dry run is how one checks a spec: a point whose configuration the core refuses is the same error as in
    # a real run (exit 2, the point and the field named), not a listing with exit 0.
    spec = tmp_path / "bad.toml"
    spec.write_text(f'name = "t"\n[base.workload]\ntrace = "{DEMO_TRACE}"\n[base.scheduler]\npolicy = "easy"\n'
                    '[grid]\n"workload.max_jobs" = [10, "x"]\n')
    r = run_cli(["sweep", str(spec), "--dry-run"])
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "sweep point (workload.max_jobs='x'): configuration: " in r.stderr, r.stderr
