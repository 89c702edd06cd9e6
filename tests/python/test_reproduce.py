"""`cosched reproduce`: the experiment list, errors, the quick version of every experiment
(its report and files), resuming from the run cache, and the finding rules on crafted numbers."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from coscheduling import experiments
from coscheduling.experiments import choi, report

from conftest import run_cli
from golden import check_verdicts

IDS = ["choi-fig3a", "choi-fig3b", "choi-table3", "choi-fig4", "choi-fig5", "choi-fig8", "choi-fig6", "choi-fig7",
       "choi-table4"]
# Experiments of seeds 002 and 003, whose quick versions run in their own test modules.
OTHER_IDS = ["ghanesh-fig1", "ghanesh-fig2", "ghanesh-fig3", "ghanesh-fig4", "ghanesh-fig5", "lee-fig5",
             "lee-fig6-9", "lee-table3", "lee-fig2", "lee-fig3", "flexgang-mix", "gang-scale", "real-slurm",
             "real-vs-sim"]
VERDICTS = {report.REPRODUCED, report.PARTLY, report.NOT_REPRODUCED, report.NOT_APPLICABLE, report.TIE}


def test_list_names_every_experiment() -> None:
    r = run_cli(["reproduce", "--list"])
    assert r.exit_code == 0, r.stderr
    listed = [e.id for e in experiments.experiments()]
    for i in IDS + OTHER_IDS:
        assert i in r.stdout
    assert sorted(listed) == sorted(IDS + OTHER_IDS)


def test_titles_name_the_workload_that_runs() -> None:
    # A title that counts jobs ("30 mixed NAS jobs", "8 class B jobs", "quick: 30 jobs") counts what each run has.
    counted = 0
    for exp in experiments.experiments():
        for st in (experiments.Settings(quick=True), experiments.Settings()):
            m = re.search(r"(\d+) (?:mixed NAS |long-running |class [A-C] )?jobs", exp.title_for(st))
            if m is None:
                continue
            sizes = {len(s.config["workload"]["jobs"]) for s in exp.runs(st)}
            assert sizes == {int(m.group(1))}, (exp.id, st, sizes)
            counted += 1
    assert counted == 13


def test_unknown_experiment_is_a_usage_error(tmp_path: Path) -> None:
    r = run_cli(["reproduce", "choi-fig99", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "unknown experiment 'choi-fig99'" in r.stderr and "choi-fig3a" in r.stderr
    assert not (tmp_path / "o").exists()


def _verdicts(text: str) -> list[str]:
    return re.findall(r"\| \*\*([a-z ]+)\*\* \|", text)


@pytest.mark.parametrize("exp_id", IDS)
def test_quick_version_writes_report_tables_and_plots(exp_id: str, quick_reproduction) -> None:
    r, out = quick_reproduction(exp_id)
    assert r.exit_code == 0, r.stdout + r.stderr
    text = (out / "report.md").read_text()
    assert text.startswith(f"# {exp_id}:")
    assert "## Findings" in text
    verdicts = _verdicts(text)
    assert verdicts and set(verdicts) <= VERDICTS, verdicts
    check_verdicts(exp_id, text)
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == len(list((out / "runs").iterdir()))
    assert (runs["jobs_completed"] == runs["jobs_total"]).all()
    for png in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for csv in out.glob("*.csv"):
        assert len(pd.read_csv(csv)) > 0, csv


def test_rerun_reuses_every_run_and_gives_the_same_report(tmp_path: Path, quick_reproduction) -> None:
    first, shared = quick_reproduction("choi-fig6")
    assert first.exit_code == 0, first.stderr
    out = tmp_path / "fig6"
    shutil.copytree(shared, out)
    text = (out / "report.md").read_text()
    csvs = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    again = run_cli(["reproduce", "choi-fig6", "--quick", "--out", str(out), "-j", "1"])
    assert again.exit_code == 0, again.stderr
    n = len(list((out / "runs").iterdir()))
    assert f"{n} runs ({n} reused)" in again.stdout
    assert (out / "report.md").read_text() == text
    assert {p.name: p.read_bytes() for p in out.glob("*.csv")} == csvs
    # A sibling output folder takes the same runs from it instead of running them.
    sibling = tmp_path / "fig6-again"
    third = run_cli(["reproduce", "choi-fig6", "--quick", "--out", str(sibling), "-j", "1"])
    assert third.exit_code == 0, third.stderr
    assert f"{n} runs ({n} reused)" in third.stdout
    assert (sibling / "report.md").read_text() == text
    # A run made by another build is not reused: it runs again, here and in siblings.
    some = sorted((out / "runs").iterdir())[0] / "summary.json"
    summary = json.loads(some.read_text())
    summary["provenance"]["git_commit"] = "0" * 40
    some.write_text(json.dumps(summary))
    shutil.rmtree(sibling / "runs" / some.parent.name)
    fourth = run_cli(["reproduce", "choi-fig6", "--quick", "--out", str(out), "-j", "1"])
    assert fourth.exit_code == 0, fourth.stderr
    assert f"{n} runs ({n - 1} reused)" in fourth.stdout
    assert (out / "report.md").read_text() == text
    # Nor one made by another compiled core of the same commit (a rebuild from uncommitted changes).
    summary = json.loads(some.read_text())
    summary["provenance"]["build_sha256"] = "0" * 64
    some.write_text(json.dumps(summary))
    fifth = run_cli(["reproduce", "choi-fig6", "--quick", "--out", str(out), "-j", "1"])
    assert fifth.exit_code == 0, fifth.stderr
    assert f"{n} runs ({n - 1} reused)" in fifth.stdout
    assert (out / "report.md").read_text() == text


def _frame(resp: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"scheme": list(resp), "response_s": list(resp.values())})


def test_blocking_vs_spin_rule_can_fail_and_pass() -> None:
    good = _frame({"NLS": 300, "PB": 290, "DCS": 280, "SB": 200, "CC": 210, "HYBRID": 190})
    assert choi.blocking_vs_spin(good, "response_s", "t").verdict == report.REPRODUCED
    mixed = _frame({"NLS": 300, "PB": 290, "DCS": 180, "SB": 200, "CC": 210, "HYBRID": 190})
    assert choi.blocking_vs_spin(mixed, "response_s", "t").verdict == report.PARTLY
    bad = _frame({"NLS": 100, "PB": 110, "DCS": 120, "SB": 200, "CC": 210, "HYBRID": 190})
    f = choi.blocking_vs_spin(bad, "response_s", "t")
    assert f.verdict == report.NOT_REPRODUCED and f.why


def test_fig3_findings_follow_the_numbers() -> None:
    rows = []
    for placement, scale in (("packing", 1.0), ("random", 1.3)):
        for s, (w, e) in {"NLS": (50, 400), "HYBRID": (20, 200), "SB": (30, 260), "CC": (30, 250),
                          "PB": (50, 390), "DCS": (50, 380)}.items():
            rows.append({"placement": placement, "scheme": s, "wait_s": w * scale, "execution_s": e * scale,
                         "response_s": (w + e) * scale})
    rows.append({"placement": "packing", "scheme": "BATCH", "wait_s": 900, "execution_s": 150, "response_s": 1050})
    rows.append({"placement": "packing", "scheme": "GANG", "wait_s": 40, "execution_s": 240, "response_s": 280})
    for placement in ("packing", "random"):
        rows.append({"placement": placement, "scheme": "GM-BLOCK", "wait_s": 30, "execution_s": 255,
                     "response_s": 285})
    rows.append({"placement": "packing", "scheme": "BATCH-EASY", "wait_s": 890, "execution_s": 150,
                 "response_s": 1040})

    def verdict_of(prefix: str) -> str:
        found = [x.verdict for x in choi.fig3_findings(pd.DataFrame(rows), True, pd.DataFrame())
                 if x.claim.startswith(prefix)]
        assert len(found) == 1, prefix
        return found[0]

    assert verdict_of("HYBRID has the lowest response time") == report.REPRODUCED
    assert verdict_of("batch (PBS) has the lowest execution time") == report.REPRODUCED
    assert verdict_of("PACKING improves response") == report.REPRODUCED
    assert verdict_of("blocking-based coscheduling") == report.REPRODUCED
    assert verdict_of("CC, SB and the blocking scheme available with GM") == report.PARTLY  # random: 30% apart
    assert verdict_of("PBS with and without backfilling") == report.REPRODUCED  # 1% apart
    # The extra schemes take no part in the paper's rankings: BATCH-EASY has as short an execution as BATCH.
    for r in rows:
        if r["scheme"] == "BATCH-EASY":
            r["execution_s"], r["wait_s"] = 100, 2000
    assert verdict_of("batch (PBS) has the lowest execution time") == report.REPRODUCED
    hybrid = [k for k, r in enumerate(rows) if r["scheme"] == "HYBRID"]
    for k in hybrid:
        rows[k]["response_s"] = 10_000.0
    assert verdict_of("HYBRID has the lowest response time") == report.NOT_REPRODUCED
    assert verdict_of("blocking-based coscheduling") == report.NOT_REPRODUCED
    for r in rows:
        if r["placement"] == "random":
            r["response_s"] = 1.0
    assert verdict_of("PACKING improves response") == report.NOT_REPRODUCED


# ----- finding rules on made-up numbers: each passes on one set and fails on another ---------------

COUNTERS = ["process_spin_s", "process_context_switches", "process_interrupts", "process_policy_interrupts",
            "process_boosts", "process_boost_preemptions", "process_gang_switches", "process_page_ins"]


def _runs(schemes: list[str], **labels: object) -> pd.DataFrame:
    """Made-up per-run counters: scheme k gets k+1 of everything (all nonzero, so every counter shows)."""
    rows = []
    for k, s in enumerate(schemes):
        row: dict[str, object] = {"scheme": s, "seed": 1, "mean_wait_s": 10.0 * (k + 1),
                                  "mean_execution_s": 100.0 * (k + 1), **labels}
        row.update({c: float(k + 1) for c in COUNTERS})
        rows.append(row)
    return pd.DataFrame(rows)


def _agg(resp: dict[str, tuple[float, float]], **labels: object) -> pd.DataFrame:
    """Per-scheme means from {scheme: (wait, execution)}."""
    return pd.DataFrame([{**labels, "scheme": s, "wait_s": w, "execution_s": e, "response_s": w + e}
                         for s, (w, e) in resp.items()])


def _computed_why(f: report.Finding, *names: str) -> None:
    """A finding that does not reproduce carries a reason built from the numbers (names and counters)."""
    assert f.verdict != report.REPRODUCED
    assert f.why, f
    for n in names:
        assert n in f.why, (n, f.why)


def test_cost_balance_names_the_scheme_counters() -> None:
    text = choi.cost_balance(_runs(["DCS", "HYBRID"]), ["DCS", "HYBRID"])
    for words in ("spinning", "context switches", "wake-up interrupts", "policy interrupts", "boosts",
                  "boost preemptions", "gang switches", "page-ins", "wait 10 s + execution 100 s"):
        assert words in text, words
    # Counters that are 0 for both schemes are left out.
    runs = _runs(["DCS", "HYBRID"]).assign(process_gang_switches=0.0)
    assert "gang switches" not in choi.cost_balance(runs, ["DCS", "HYBRID"])
    assert choi.cost_balance(pd.DataFrame()) == "the run counters are not available"


def test_gm_block_finding_passes_when_close_and_explains_when_not() -> None:
    close = pd.concat([_agg({"CC": (0, 100), "SB": (0, 104), "GM-BLOCK": (0, 108)}, placement=p)
                       for p in ("packing", "random")])
    assert choi.gm_block_finding(close, "response_s", "placement").verdict == report.REPRODUCED
    far = pd.concat([_agg({"CC": (0, 100), "SB": (0, 104), "GM-BLOCK": (0, 108)}, placement="packing"),
                     _agg({"CC": (0, 100), "SB": (0, 104), "GM-BLOCK": (0, 150)}, placement="random")])
    runs = _runs(["CC", "SB", "GM-BLOCK"], placement="random")
    f = choi.gm_block_finding(far, "response_s", "placement", runs)
    assert f.verdict == report.PARTLY
    _computed_why(f, "NO PACKING: CC 100 s", "GM-BLOCK 150 s", "policy interrupts")
    all_far = far.assign(response_s=[100, 104, 150, 100, 104, 150])
    assert choi.gm_block_finding(all_far, "response_s", "placement").verdict == report.NOT_REPRODUCED


def test_backfill_finding_within_two_percent() -> None:
    same = _agg({"BATCH": (500, 200), "BATCH-EASY": (495, 200)})
    assert choi.backfill_finding(same).verdict == report.REPRODUCED
    occ = pd.DataFrame({"scheme": ["BATCH", "BATCH-EASY"], "backfilled": [0.0, 7.0],
                        "empty_waiting_pct": [40.0, 20.0]})
    far = _agg({"BATCH": (500, 200), "BATCH-EASY": (200, 200)})
    f = choi.backfill_finding(far, occ)
    assert f.verdict == report.NOT_REPRODUCED
    _computed_why(f, "wait -300 s", "7.0 jobs started ahead")
    assert choi.backfill_finding(_agg({"BATCH": (500, 200)})).verdict == report.NOT_APPLICABLE


def _energy(rows: dict[str, tuple[float, float, float]], **labels: object) -> pd.DataFrame:
    """An energy table from {scheme: (total MJ, utilization %, running time s)}."""
    return pd.DataFrame([{**labels, "scheme": s, "total_MJ": e, "busy_MJ": e / 10, "idle_MJ": e * 0.9,
                          "utilization_pct": u, "running_time_s": t, "estimate_diff_pct": 0.0}
                         for s, (e, u, t) in rows.items()])


def _table3_verdict(fs: list[report.Finding], prefix: str) -> report.Finding:
    found = [x for x in fs if x.claim.startswith(prefix)]
    assert len(found) == 1, prefix
    return found[0]


def test_table3_findings_follow_the_numbers() -> None:
    good = _energy({"HYBRID": (60, 92, 16000), "CC": (62, 91, 16500), "SB": (63, 91, 16600),
                    "GANG": (64, 95, 17000), "BATCH": (99, 63, 27000)}, placement="packing")
    fs = choi.table3_findings(good)
    assert _table3_verdict(fs, "batch scheduling (PBS) has the highest").verdict == report.REPRODUCED
    assert _table3_verdict(fs, "blocking-based coscheduling").verdict == report.REPRODUCED
    assert _table3_verdict(fs, "all schemes but PBS").verdict == report.REPRODUCED
    assert _table3_verdict(fs, "E = (B + X U) N T").verdict == report.NOT_APPLICABLE
    bad = _energy({"HYBRID": (90, 80, 26000), "CC": (62, 91, 16500), "SB": (63, 91, 16600),
                   "GANG": (64, 95, 17000), "BATCH": (70, 63, 18000)}, placement="packing")
    bad.loc[0, "estimate_diff_pct"] = 5.0
    runs = _runs(["HYBRID", "BATCH"], placement="packing").assign(utilization=[0.8, 0.63], machine_procs=16,
                                                                   makespan_s=[26000, 18000])
    fs = choi.table3_findings(bad, runs)
    f = _table3_verdict(fs, "batch scheduling (PBS) has the highest")
    _computed_why(f, "HYBRID 26,000 s", "BATCH 18,000 s", "policy interrupts")
    f = _table3_verdict(fs, "blocking-based coscheduling")
    _computed_why(f, "HYBRID ran 26,000 s")
    f = _table3_verdict(fs, "all schemes but PBS")
    _computed_why(f, "HYBRID: busy 80%", "spinning")
    f = _table3_verdict(fs, "E = (B + X U) N T")
    assert f.verdict == report.NOT_REPRODUCED and "5.0%" in f.why
    bad.loc[0, "estimate_diff_pct"] = 2.0
    assert _table3_verdict(choi.table3_findings(bad), "E = (B + X U) N T").verdict == report.REPRODUCED


def test_energy_table_uses_the_runs_platform_and_adds_spread_with_seeds() -> None:
    runs = pd.DataFrame({"scheme": ["A", "A"], "seed": [1, 2], "platform_idle_watts": [100.0, 100.0],
                         "platform_busy_watts": [110.0, 110.0], "machine_nodes": [2, 2],
                         "makespan_s": [1000.0, 2000.0], "utilization": [0.5, 0.25]})
    # Exact: B N T + X x busy node-seconds (busy node-seconds = U N T here).
    runs["energy_j"] = 100.0 * 2 * runs["makespan_s"] + 10.0 * runs["utilization"] * 2 * runs["makespan_s"]
    t = choi.energy_table(runs, ["scheme"], seeds=2)
    row = t.iloc[0]
    assert row["idle_MJ"] == pytest.approx((0.2 + 0.4) / 2)  # B N T / 1e6, mean over seeds
    assert row["busy_MJ"] == pytest.approx((0.01 + 0.01) / 2)
    assert row["est_busy_MJ"] == pytest.approx(row["busy_MJ"])
    assert row["running_time_s_sd"] == pytest.approx(pd.Series([1000.0, 2000.0]).std())
    assert "busy_MJ_sd" in t and "utilization_pct_sd" in t
    assert "busy_MJ_sd" not in choi.energy_table(runs, ["scheme"], seeds=1)
    with pytest.raises(ValueError, match="platform_idle_watts"):
        choi.energy_table(runs.drop(columns=["platform_idle_watts"]), ["scheme"])


def test_occupancy_of_a_job_table() -> None:
    # Two nodes; job 0 on both nodes 0-10 s, job 1 (submitted at 0) on node 0 from 10 to 20 s,
    # job 2 (submitted at 5) on node 1 from 5 to 25 s: it started before job 1 (backfilled).
    jobs = pd.DataFrame({"job_id": [0, 1, 2], "submit_s": [0.0, 0.0, 5.0], "start_s": [0.0, 10.0, 5.0],
                         "end_s": [10.0, 20.0, 25.0], "node_list": ["0-1", "0", "1"]})
    o = choi.occupancy(jobs, 2)
    assert o["backfilled"] == 1
    # Node 0: busy 0-20 (empty 20-25); node 1: busy 0-25, two jobs 5-10. Node-time 2 x 25 = 50.
    assert o["empty_pct"] == pytest.approx(100 * 5 / 50)
    assert o["jobs_per_node"] == pytest.approx((20 + 25 + 5) / 45)
    # Job 1 waited 0-10 while no node was empty: no empty node-time while a job waited.
    assert o["empty_waiting_pct"] == 0.0


def test_fig4_findings_follow_the_numbers() -> None:
    good = _agg({"HYBRID": (10, 100), "CC": (12, 110), "SB": (15, 112), "GANG": (20, 120), "BATCH": (500, 90)})
    assert [f.verdict for f in choi.fig4_findings(good)] == [report.REPRODUCED, report.REPRODUCED]
    bad = _agg({"HYBRID": (10, 300), "CC": (12, 110), "SB": (15, 112), "GANG": (600, 120), "BATCH": (5, 90)})
    runs = _runs(["HYBRID", "CC", "SB", "GANG", "BATCH"])
    order, wait = choi.fig4_findings(bad, runs)
    _computed_why(order, "HYBRID", "BATCH", "context switches")
    _computed_why(wait, "GANG 600 s vs BATCH 5.00 s")


def test_fig5_findings_follow_the_numbers() -> None:
    def table(c: dict, b: dict, a: dict) -> pd.DataFrame:
        return pd.concat([_agg(c, **{"class": "C"}), _agg(b, **{"class": "B"}), _agg(a, **{"class": "A"})])

    # Class C at the paper's sizes: HYBRID 110 s; GANG 123.2 (+12%), CC 121 (+10%), BATCH 181.5 (+65%).
    good = table({"HYBRID": (10, 100), "CC": (11, 110), "SB": (15, 112), "GANG": (23.2, 100), "BATCH": (91.5, 90)},
                 {"HYBRID": (10, 100), "CC": (12, 110), "SB": (15, 112), "GANG": (20, 120), "BATCH": (300, 90)},
                 {"HYBRID": (1, 10), "CC": (1, 10), "SB": (1, 11), "GANG": (1, 10), "BATCH": (2, 10)})
    assert [f.verdict for f in choi.fig5_findings(good)] == [report.REPRODUCED] * 3
    # The order right but the sizes not (GANG +27%, PBS +255%, outside 6-18% and 32.5-97.5%): partly.
    sized = table({"HYBRID": (10, 100), "CC": (12, 110), "SB": (15, 112), "GANG": (20, 120), "BATCH": (300, 90)},
                  {"HYBRID": (10, 100), "CC": (12, 110), "SB": (15, 112), "GANG": (20, 120), "BATCH": (300, 90)},
                  {"HYBRID": (1, 10), "CC": (1, 10), "SB": (1, 11), "GANG": (1, 10), "BATCH": (2, 10)})
    assert choi.fig5_findings(sized)[0].verdict == report.PARTLY
    bad = table({"HYBRID": (50, 100), "CC": (12, 110), "SB": (15, 112), "GANG": (20, 120), "BATCH": (300, 90)},
                {"HYBRID": (10, 100), "CC": (12, 110), "SB": (15, 112), "GANG": (100, 120), "BATCH": (30, 150)},
                {"HYBRID": (1, 10), "CC": (1, 10), "SB": (1, 11), "GANG": (1, 10), "BATCH": (20, 10)})
    runs = pd.concat([_runs(["HYBRID", "CC", "BATCH", "GANG"], **{"class": c}) for c in "ABC"])
    c, b, a = choi.fig5_findings(bad, runs)
    _computed_why(c, "HYBRID 150 s vs CC 122 s", "class = C")
    _computed_why(b, "worst response GANG", "shortest execution HYBRID")
    _computed_why(a, "BATCH 30 s vs", "class = A")


def test_fig6_findings_follow_the_numbers() -> None:
    def app(a: str, spin: float, block: float, hybrid: float, gm: float) -> pd.DataFrame:
        return _agg({"NLS": (0, spin), "PB": (0, spin), "DCS": (0, spin), "SB": (0, block), "CC": (0, block),
                     "GM-BLOCK": (0, gm), "HYBRID": (0, hybrid), "GANG": (0, block + 5)}, app=a)

    good = pd.concat([app("CG", 300, 150, 140, 150), app("MG", 200, 150, 140, 152), app("LU", 160, 150, 140, 149)])
    assert [f.verdict for f in choi.fig6_findings(good)] == [report.REPRODUCED] * 3
    bad = pd.concat([app("CG", 160, 150, 170, 150), app("MG", 300, 150, 140, 200), app("LU", 140, 150, 140, 149)])
    runs = pd.concat([_runs(["NLS", "PB", "DCS", "SB", "CC", "GM-BLOCK", "HYBRID", "GANG"], app=a)
                      for a in ("CG", "MG", "LU")])
    hy, gap, gm = choi.fig6_findings(bad, runs)
    assert hy.verdict == report.PARTLY
    _computed_why(hy, "CG: HYBRID 170 s vs SB 150 s", "app = CG")
    assert gap.verdict == report.PARTLY
    _computed_why(gap, "LU (", "MG (", "app = LU")
    assert gm.verdict == report.PARTLY
    _computed_why(gm, "MG: CC 150 s", "GM-BLOCK 200 s")


def _fig7_agg(un: dict, aw: dict) -> pd.DataFrame:
    return pd.concat([_agg(un, memory_aware=False), _agg(aw, memory_aware=True)], ignore_index=True)


def test_fig7_findings_follow_the_numbers() -> None:
    un = {"NLS": (100, 900), "SB": (100, 1000), "CC": (100, 1000), "GM-BLOCK": (100, 1010), "HYBRID": (100, 1000),
          "GANG": (100, 800)}
    aw = {"NLS": (200, 500), "SB": (150, 400), "CC": (150, 410), "GM-BLOCK": (150, 420), "HYBRID": (150, 380),
          "GANG": (200, 500), "BATCH": (400, 300)}
    agg = _fig7_agg(un, aw)
    fs = choi.fig7_findings(agg, choi.speedup_table(agg))
    assert [f.verdict for f in fs] == [report.REPRODUCED] * 5
    un_bad = {"NLS": (100, 300), "SB": (100, 300), "CC": (100, 300), "GM-BLOCK": (100, 600), "HYBRID": (100, 500),
              "GANG": (100, 300)}
    agg = _fig7_agg(un_bad, aw)
    runs = pd.concat([_runs(list(un_bad), memory_aware=False), _runs(list(aw), memory_aware=True)])
    runs["process_paged_in_mb"] = 0.0
    gain, best, pbs, speed, gm = choi.fig7_findings(agg, choi.speedup_table(agg), runs)
    _computed_why(gain, "4 page-ins (0 MB) per run", "wait 100 → ", "memory-aware admission removes")
    assert best.verdict == report.REPRODUCED
    _computed_why(pbs, "BATCH (memory-aware) wait 400 s", "without memory-aware allocation")
    _computed_why(speed, "execution speed-up", "page-ins")
    _computed_why(gm, "no memory-aware: CC 400 s")
    # Nothing paged: the reason says so instead of crediting paging.
    gain = choi.fig7_findings(agg, choi.speedup_table(agg), runs.assign(process_page_ins=0.0))[0]
    _computed_why(gain, "0 page-ins", "no process paged without memory-aware allocation")


def test_fig8_findings_follow_the_numbers() -> None:
    good = _energy({"HYBRID": (60, 90, 100), "CC": (62, 90, 110), "BATCH": (90, 60, 200)}, **{"class": "C"})
    assert choi.fig8_findings(good)[0].verdict == report.REPRODUCED
    second = _energy({"HYBRID": (63, 90, 100), "CC": (62, 90, 110), "BATCH": (90, 60, 200)}, **{"class": "C"})
    assert choi.fig8_findings(second)[0].verdict == report.PARTLY
    bad = _energy({"HYBRID": (95, 90, 300), "CC": (62, 90, 110), "BATCH": (90, 60, 200)}, **{"class": "C"})
    f = choi.fig8_findings(bad, _runs(["HYBRID", "CC"], **{"class": "C"}))[0]
    assert f.verdict == report.NOT_REPRODUCED
    _computed_why(f, "HYBRID 95.00 MJ in 300 s", "CC 62.00 MJ", "class = C")


def test_table4_findings_follow_the_numbers() -> None:
    un = _energy({"NLS": (100, 97, 26000), "HYBRID": (64, 90, 17000)}, memory_aware=False)
    aw = _energy({"NLS": (82, 97, 21000), "HYBRID": (48, 78, 12500), "BATCH": (57, 99, 14700)}, memory_aware=True)
    assert choi.table4_findings(pd.concat([un, aw]))[0].verdict == report.REPRODUCED
    aw_bad = _energy({"NLS": (120, 97, 30000), "HYBRID": (48, 78, 12500)}, memory_aware=True)
    runs = pd.concat([_runs(["NLS", "HYBRID"], memory_aware=False), _runs(["NLS", "HYBRID"], memory_aware=True)])
    f = choi.table4_findings(pd.concat([un, aw_bad]), runs)[0]
    assert f.verdict == report.PARTLY
    _computed_why(f, "NLS: no memory-aware 100.00 MJ in 26,000 s", "page-ins per run")
    aw_worse = _energy({"NLS": (120, 97, 30000), "HYBRID": (70, 78, 18000)}, memory_aware=True)
    assert choi.table4_findings(pd.concat([un, aw_worse]))[0].verdict == report.NOT_REPRODUCED


def test_fig6_quick_with_two_seeds_reports_the_spread(quick_reproduction) -> None:
    _, one_seed = quick_reproduction("choi-fig6")
    # A sibling of the one-seed folder: its seed 1 runs are copied from there, seed 2 runs.
    out = one_seed.parent / "choi-fig6-two-seeds"
    r = run_cli(["reproduce", "choi-fig6", "--quick", "--seeds", "2", "--out", str(out), "-j", "2"])
    assert r.exit_code == 0, r.stdout + r.stderr
    n = len(list((one_seed / "runs").iterdir()))
    assert f"{2 * n} runs ({n} reused)" in r.stdout
    fig6 = pd.read_csv(out / "fig6.csv")
    assert (fig6["seeds"] == 2).all()
    assert fig6["execution_sd"].notna().all()
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["seed"].unique()) == [1, 2]
    assert "2 seed(s)" in (out / "report.md").read_text()
