"""A run stopped at its time or event limit: an explicit outcome where its spec says so (``stopped.json``,
a ``stopped`` row), an error everywhere else; and how choi-fig7 reports a scheme that did not finish."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from coscheduling.experiments import choi, report
from coscheduling.experiments.runner import Gathered, RunSpec, limit_stop, response_lower_bound, run_specs


def _config(limit_s: float) -> dict:
    return {"fidelity": "process", "seed": 1, "node_platform": {"preset": "choi2004"},
            "scheduler": {"policy": "fcfs", "node_policy": "pb", "mpl": 3, "placement": "packing"},
            "workload": {"jobs": [{"app": "CG", "class": "A", "procs": 4, "submit_s": 0.0},
                                  {"app": "CG", "class": "A", "procs": 4, "submit_s": 1.0}]},
            "limits": {"max_sim_time_s": limit_s}}


def test_response_lower_bound_by_hand() -> None:
    # Stopped at 1000 s with 2 of 3 jobs (submitted at 0, 100, 300) unfinished: the latest two are taken as
    # the unfinished ones, (1000 − 100) + (1000 − 300) = 1600 over 3 jobs.
    assert response_lower_bound([300.0, 0.0, 100.0], 1000.0, 2) == pytest.approx(1600.0 / 3)
    # A job submitted after the stop counts 0, and nothing unfinished bounds nothing.
    assert response_lower_bound([0.0, 2000.0], 1000.0, 2) == pytest.approx(500.0)
    assert response_lower_bound([0.0], 1000.0, 0) == 0.0


def test_limit_messages_are_read_and_others_are_not() -> None:
    t = limit_stop("run.toml: time limit 261510.000000000s reached with 16 job(s) unfinished; first unfinished "
                   "process: pid 3\n(raise `limits.max_sim_time_s` ...)")
    assert t == {"stopped_by": "time limit", "limit": 261510.0, "sim_time_s": 261510.0, "jobs_unfinished": 16}
    e = limit_stop("x: event limit 2000000000 reached at t=1213308.123456789s with 16 job(s) unfinished (raise")
    assert e == {"stopped_by": "event limit", "limit": 2_000_000_000, "sim_time_s": 1213308.123456789,
                 "jobs_unfinished": 16}
    assert limit_stop("x: job 3: deadlock at t=5.000000000s") is None


def test_a_run_stopped_at_its_limit_is_an_outcome_only_where_its_spec_says_so(tmp_path: Path) -> None:
    # Two CG A jobs of several seconds each, stopped at 0.5 s: the first runs, the second is not yet submitted.
    spec = RunSpec("pb-s1", {"scheme": "PB", "seed": 1}, _config(0.5), stop_is_outcome=True)
    g = run_specs([spec], tmp_path, workers=1, command="test")
    folder = tmp_path / "runs" / "pb-s1"
    assert not (folder / "summary.json").exists() and not (folder / "jobs.csv").exists()
    rec = json.loads((folder / "stopped.json").read_text())
    got = (rec["stopped_by"], rec["sim_time_s"], rec["jobs_unfinished"], rec["jobs_total"])
    assert got == ("time limit", 0.5, 2, 2)
    # (0.5 − 0) + max(0.5 − 1, 0) over 2 jobs.
    assert rec["response_lower_bound_s"] == pytest.approx(0.25)
    row = g.runs.iloc[0]
    assert bool(row["stopped"]) and row["stopped_by"] == "time limit" and row["scheme"] == "PB"
    assert g.jobs.empty
    # Reused as it stands: the record is this build's outcome of this configuration.
    assert run_specs([spec], tmp_path, workers=1, command="test").executed == []
    # The same stop without the spec's leave is the error it always was, and no record is left.
    other = RunSpec("pb-s1", {"scheme": "PB", "seed": 1}, _config(0.5))
    with pytest.raises(RuntimeError, match="time limit"):
        run_specs([other], tmp_path / "plain", workers=1, command="test")
    assert not (tmp_path / "plain" / "runs" / "pb-s1" / "stopped.json").exists()
    # A finishing run of a stop-is-outcome spec is a finished row.
    done = RunSpec("pb-long", {"scheme": "PB", "seed": 1}, _config(1e6), stop_is_outcome=True)
    g = run_specs([done], tmp_path, workers=1, command="test")
    assert not bool(g.runs.iloc[0]["stopped"]) and len(g.jobs) == 2


def _fig7_runs() -> pd.DataFrame:
    base = {"mean_wait_s": 0.0, "makespan_s": 1.0, "utilization": 1.0, "energy_j": 1.0, "stopped": False}
    rows = []
    for seed in (1, 2):
        for aware, scheme, resp in [(False, "NLS", 900.0), (False, "SB", 800.0), (False, "CC", 800.0),
                                    (False, "HYBRID", 800.0), (True, "NLS", 500.0), (True, "SB", 400.0),
                                    (True, "CC", 400.0), (True, "HYBRID", 380.0), (True, "PB", 600.0),
                                    (True, "BATCH", 700.0)]:
            rows.append({**base, "scheme": scheme, "seed": seed, "memory_aware": aware, "mean_response_s": resp,
                         "mean_execution_s": resp})
    # PB without memory-aware allocation: seed 1 stopped at its time limit, seed 2 finished.
    rows.append({"scheme": "PB", "seed": 1, "memory_aware": False, "stopped": True, "stopped_by": "time limit",
                 "limit": 261510.0, "sim_time_s": 261510.0, "jobs_unfinished": 16, "jobs_total": 20,
                 "response_lower_bound_s": 200000.0})
    rows.append({**base, "scheme": "PB", "seed": 2, "memory_aware": False, "mean_response_s": 950.0,
                 "mean_execution_s": 950.0})
    return pd.DataFrame(rows)


def test_fig7_states_a_scheme_that_did_not_finish_and_leaves_it_out() -> None:
    g, stopped = choi.split_stopped(Gathered(runs=_fig7_runs(), jobs=pd.DataFrame()))
    # The whole group (both seeds of PB without memory-aware allocation) is out of the means.
    assert not ((g.runs["scheme"] == "PB") & ~g.runs["memory_aware"]).any()
    assert "stopped" not in g.runs and len(g.runs) == 20
    r = stopped.iloc[0]
    assert (r["scheme"], bool(r["memory_aware"]), r["seeds_stopped"], r["seeds_finished"]) == ("PB", False, 1, 1)
    agg = choi.per_scheme(g.runs, ["memory_aware", "scheme"])
    table = choi._fig7_table(agg, stopped)
    out = table[table["outcome"] != "finished"]
    assert len(out) == 1 and out.iloc[0]["scheme"] == "PB" and not out.iloc[0]["memory_aware"]
    assert out.iloc[0]["outcome"] == "did not finish within 261,510 s (time limit; 16 of 20 jobs unfinished)"
    assert pd.isna(out.iloc[0]["response_s"])
    fs = choi.fig7_findings(agg, choi.speedup_table(agg), g.runs, stopped)
    assert all("did not finish within the limit, left out: PB (no memory-aware)" in f.ours for f in fs)
    gain = fs[0]
    # PB's gain: (200,000 − 600) / 200,000 = 99.7% at least.
    assert "PB's gain is at least 99.7% (mean response ≥ 200,000 s without, 600 s with" in gain.ours
    pbs = next(f for f in fs if f.claim.startswith("PBS outperforms"))
    assert "PB (no memory-aware) mean response ≥ 200,000 s, above BATCH's 700 s" in pbs.ours
    # PB is not in the speed-up table: its no memory-aware execution is not known.
    assert "PB" not in set(choi.speedup_table(agg)["scheme"])
    assert choi.stopped_text(stopped).startswith(
        "PB (no memory-aware) did not finish: stopped by its time limit at 261,510 simulated s with 16 of 20 jobs")
    # Nothing stopped: the findings are those of the finished runs alone.
    plain = choi.fig7_findings(agg, choi.speedup_table(agg), g.runs)
    assert [f.verdict for f in plain] == [f.verdict for f in fs]
    assert report.REPRODUCED in {f.verdict for f in fs}


def test_fig7_counts_a_stopped_run_at_its_lower_bound_where_the_bound_decides() -> None:
    runs = _fig7_runs()
    bounded = choi.bounded_runs(runs)
    pb = bounded[(bounded["scheme"] == "PB") & ~bounded["memory_aware"].astype(bool)].sort_values("seed")
    # Seed 1 stopped: its bound; seed 2 finished: its mean response.
    assert list(pb["mean_response_s"]) == [200000.0, 950.0] and "stopped" not in bounded
    g, stopped = choi.split_stopped(Gathered(runs=runs, jobs=pd.DataFrame()))
    agg = choi.per_scheme(g.runs, ["memory_aware", "scheme"])
    fs = choi.fig7_findings(agg, choi.speedup_table(agg), g.runs, stopped, bounded)
    gain = fs[0]
    # PB's gain from the mean of its seeds' responses: (100,475 − 600) / 100,475 = 99.4%.
    assert gain.claim.startswith("memory-aware allocation gains") and "PB 99%" in gain.ours
    assert gain.rule.endswith("so its gain and its lead over PBS are lower bounds")
    pbs = next(f for f in fs if f.claim.startswith("PBS outperforms"))
    assert pbs.rule.endswith("are lower bounds")
    # Findings a bound cannot decide (the speed-up ranking) leave PB out.
    speed = next(f for f in fs if f.claim.startswith("the execution-time speed-up"))
    assert "PB" not in speed.ours.split(";")[0]
    assert [f.claim for f in fs] == [f.claim for f in choi.fig7_findings(agg, choi.speedup_table(agg), g.runs)]
    # A memory-aware group that did not finish is left out whole, never bounded.
    aw_stop = pd.concat([runs, pd.DataFrame([{"scheme": "GANG", "seed": 1, "memory_aware": True, "stopped": True,
                                              "response_lower_bound_s": 5.0}])], ignore_index=True)
    assert "GANG" not in set(choi.bounded_runs(aw_stop)["scheme"])


def test_fig7_with_every_run_without_memory_aware_allocation_stopped_keeps_every_finding() -> None:
    runs = _fig7_runs()
    un = ~runs["memory_aware"].astype(bool)
    stop = {"stopped": True, "stopped_by": "time limit", "limit": 261510.0, "sim_time_s": 261510.0,
            "jobs_unfinished": 16, "jobs_total": 20, "response_lower_bound_s": 200000.0}
    runs = pd.concat([runs[~un], runs[un][["scheme", "seed", "memory_aware"]].drop_duplicates().assign(**stop)],
                     ignore_index=True)
    g, stopped = choi.split_stopped(Gathered(runs=runs, jobs=pd.DataFrame()))
    assert not (~g.runs["memory_aware"].astype(bool)).any() and len(stopped) == 5
    agg = choi.per_scheme(g.runs, ["memory_aware", "scheme"])
    fs = choi.fig7_findings(agg, choi.speedup_table(agg), g.runs, stopped, choi.bounded_runs(runs))
    # The same findings, in the same order, as when every run finishes.
    whole = _fig7_runs().assign(stopped=False)
    agg_w = choi.per_scheme(whole, ["memory_aware", "scheme"])
    assert [f.claim for f in fs] == [f.claim for f in choi.fig7_findings(agg_w, choi.speedup_table(agg_w), whole)]
    by = {f.claim.split(" (")[0]: f for f in fs}
    # Gains from the bounds: (200,000 − 380..500) / 200,000 > 99.7% on each seed: reproduced, a lower bound.
    assert by["memory-aware allocation gains over 35% on average"].verdict == report.REPRODUCED
    # BATCH (700 s) against the best bound 200,000 s: reproduced.
    assert by["PBS outperforms every scheme without memory-aware allocation"].verdict == report.REPRODUCED
    speed = by["the execution-time speed-up ratios of CC/SB and HYBRID are the highest"]
    assert speed.verdict == report.NOT_APPLICABLE and speed.ours.startswith("no execution speed-up")


def test_table4_counts_a_stopped_run_at_its_idle_energy_so_far() -> None:
    plat = {"platform_idle_watts": 100.0, "platform_busy_watts": 200.0, "machine_nodes": 16}
    runs = pd.DataFrame([
        {"scheme": "NLS", "seed": 1, "memory_aware": True, "stopped": False, "energy_j": 1.0e6, "makespan_s": 500.0,
         "utilization": 0.5, **plat},
        {"scheme": "NLS", "seed": 1, "memory_aware": False, "stopped": True, "sim_time_s": 261510.0,
         "response_lower_bound_s": 200000.0},
    ])
    eb = choi.energy_bounded_runs(runs)
    un = eb[~eb["memory_aware"].astype(bool)].iloc[0]
    # B x N x T reached = 100 W x 16 x 261,510 s = 418.416 MJ, busy part 0.
    assert un["energy_j"] == pytest.approx(418_416_000.0) and un["utilization"] == 0.0 and "stopped" not in eb
    t = choi.energy_table(eb, ["memory_aware", "scheme"])
    (f,) = choi.table4_findings(t, eb)
    assert f.verdict == report.REPRODUCED and "lower with memory-aware for 1 of 1: NLS" in f.ours


def test_bounds_change_nothing_when_every_run_finished() -> None:
    runs = _fig7_runs()
    runs = runs[~runs["stopped"].astype(bool)].drop(columns=[c for c in choi.STOP_COLUMNS if c != "stopped"
                                                                and c in runs])
    assert choi.bounded_runs(runs).equals(runs.drop(columns=["stopped"]))
    assert choi.energy_bounded_runs(runs) is runs


def test_unfinished_jobs_over_several_stopped_seeds_are_a_range() -> None:
    runs = _fig7_runs()
    extra = runs[(runs["scheme"] == "PB") & (runs["seed"] == 1) & ~runs["memory_aware"].astype(bool)]
    runs = pd.concat([runs, extra.assign(seed=3, jobs_unfinished=3)], ignore_index=True)
    _, stopped = choi.split_stopped(Gathered(runs=runs, jobs=pd.DataFrame()))
    assert "with 3–16 of 20 jobs unfinished (2 of 3 seeds)" in choi.stopped_text(stopped)
