"""Seed 002 experiments (`ghanesh-*`): the quick version of each runs and writes its report with
verdicts; the run configurations place the loads and application threads as the paper does; each
finding rule passes and fails on crafted numbers."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from coscheduling import experiments
from coscheduling.experiments import Settings, ghanesh, report

from golden import check_verdicts

IDS = ["ghanesh-fig1", "ghanesh-fig2", "ghanesh-fig3", "ghanesh-fig4", "ghanesh-fig5"]
VERDICTS = {report.REPRODUCED, report.PARTLY, report.NOT_REPRODUCED, report.NOT_APPLICABLE}


def test_every_experiment_is_registered() -> None:
    ids = [e.id for e in experiments.experiments()]
    for i in IDS:
        assert i in ids


@pytest.mark.parametrize("exp_id", IDS)
def test_quick_version_writes_report_tables_and_plots(exp_id: str, quick_reproduction) -> None:
    r, out = quick_reproduction(exp_id)
    assert r.exit_code == 0, r.stdout + r.stderr
    text = (out / "report.md").read_text()
    assert text.startswith(f"# {exp_id}:")
    assert "## Findings" in text and "Model notes" in text
    verdicts = re.findall(r"\| \*\*([a-z ]+)\*\* \|", text)
    check_verdicts(exp_id, text)
    assert verdicts and set(verdicts) <= VERDICTS, verdicts
    if exp_id == "ghanesh-fig4":
        # No cache term: the header says so and the one finding is not applicable.
        assert "**Not applicable: the model has no cache term" in text
        assert verdicts == [report.NOT_APPLICABLE]
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == len(list((out / "runs").iterdir()))
    assert (runs["jobs_completed"] == runs["jobs_total"]).all()
    for png in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for csv in out.glob("*.csv"):
        assert len(pd.read_csv(csv)) > 0, csv


def test_runs_place_threads_and_loads_as_the_paper() -> None:
    specs = ghanesh._fig1_runs(Settings(quick=False))
    by = {s.key: s for s in specs}
    one = next(s for s in specs if s.labels["bench"] == "SP" and s.labels["lay"] == 1
               and s.labels["mode"] == "independent")
    jobs = one.config["workload"]["jobs"]
    # SP: 9 threads on 9 nodes, 2 loads per node.
    assert jobs[0]["procs"] == 9 and one.config["node_platform"]["nodes"] == 9
    assert sum(1 for j in jobs if j.get("background")) == 18
    two = next(s for s in specs if s.labels["bench"] == "CG" and s.labels["lay"] == 3
               and s.labels["mode"] == "independent")
    jobs = two.config["workload"]["jobs"]
    assert jobs[0]["procs"] == 16 and jobs[0]["ranks_per_node"] == 2
    assert two.config["node_platform"]["nodes"] == 8
    assert sum(1 for j in jobs if j.get("background")) == 8
    # Gang runs on every layout: the matrix has a column per CPU, so 2 ranks per node fit.
    gang_lays = {s.labels["lay"] for s in by.values() if s.labels["mode"] == "gang"}
    assert gang_lays == {0, 1, 2, 3}
    two_gang = next(s for s in specs if s.labels["bench"] == "CG" and s.labels["lay"] == 3
                    and s.labels["mode"] == "gang")
    assert two_gang.config["workload"]["jobs"][0]["ranks_per_node"] == 2
    assert two_gang.config["scheduler"]["policy"].startswith("gang[")
    # 3 processes per dual-CPU node need 2 rows: the benchmark's row runs half the slots.
    assert ghanesh.gang_share(1, 2) == 0.5 and ghanesh.gang_share(2, 1) == 0.5
    assert ghanesh.gang_share(1, 1) == 1.0
    slices = {s.config["node_platform"]["os"]["base_ticks"] for s in ghanesh._fig2_runs(Settings(quick=True))}
    assert slices == {3, 5, 10, 20}


def _tab(layout_pct: dict[str, dict[str, float]], util: dict[str, float] | None = None) -> pd.DataFrame:
    rows = []
    for lay, per in layout_pct.items():
        for b, v in per.items():
            rows.append({"layout": lay, "bench": b, "independent_pct": v,
                         "cpu_util_pct": (util or {}).get(b, 50.0), "dedicated_s": 1.0})
    return ghanesh.with_average(pd.DataFrame(rows), ["layout"])


L = [x.label for x in ghanesh.FIG1_LAYOUTS]


def test_gang_estimate_rule_can_fail_and_pass() -> None:
    good = _tab({L[0]: {"CG": 40, "EP": 50, "IS": 20, "LU": 55}})
    assert ghanesh.finding_below_gang_estimate(good, "t").verdict == report.REPRODUCED
    bad = _tab({L[0]: {"CG": 140, "EP": 150, "IS": 120, "LU": 155}})
    f = ghanesh.finding_below_gang_estimate(bad, "t")
    assert f.verdict == report.NOT_REPRODUCED and f.why


def test_one_vs_two_threads_and_node_rules() -> None:
    t = _tab({L[0]: {"CG": 60, "EP": 50}, L[1]: {"CG": 70, "EP": 55}, L[2]: {"CG": 10, "EP": 40},
              L[3]: {"CG": 20, "EP": 45}})
    assert ghanesh.finding_one_vs_two(t).verdict == report.REPRODUCED
    assert ghanesh.finding_more_nodes(t, L[0], L[1], "c").verdict == report.REPRODUCED
    t2 = _tab({L[0]: {"CG": 10, "EP": 20}, L[1]: {"CG": 5, "EP": 10}, L[2]: {"CG": 60, "EP": 70},
               L[3]: {"CG": 50, "EP": 60}})
    assert ghanesh.finding_one_vs_two(t2).verdict == report.NOT_REPRODUCED
    assert ghanesh.finding_more_nodes(t2, L[0], L[1], "c").verdict == report.NOT_REPRODUCED


def test_cpu_utilization_rule_uses_rank_correlation() -> None:
    util = {"CG": 60, "EP": 99, "IS": 42, "LU": 92}
    t = _tab({L[2]: {"CG": 10, "EP": 50, "IS": 5, "LU": 40}}, util)
    assert ghanesh.finding_cpu_util(t).verdict == report.REPRODUCED
    t = _tab({L[2]: {"CG": 40, "EP": 5, "IS": 50, "LU": 10}}, util)
    assert ghanesh.finding_cpu_util(t).verdict == report.NOT_REPRODUCED
    assert ghanesh.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert ghanesh.spearman([1, 2], [1, 2]) != ghanesh.spearman([1, 2], [1, 2])  # NaN below 3 points


def test_ep_and_gang_rules() -> None:
    t = _tab({L[0]: {"EP": 48, "CG": 30}})
    assert ghanesh._ep_finding(t).verdict == report.REPRODUCED
    t = _tab({L[0]: {"EP": 90, "CG": 30}})
    assert ghanesh._ep_finding(t).verdict == report.NOT_REPRODUCED
    g = _tab({L[0]: {"EP": 48, "CG": 30}})
    g["gang_pct"] = [200.0, 190.0, 195.0]
    f = ghanesh._gang_finding(g)
    assert [x.verdict for x in f] == [report.REPRODUCED, report.REPRODUCED]
    assert "by construction" in f[1].ours
    g["gang_pct"] = [10.0, 5.0, 7.5]
    assert [x.verdict for x in ghanesh._gang_finding(g)] == [report.NOT_REPRODUCED] * 2
    g["gang_pct"] = [40.0, 60.0, 7.5]  # EP 48 > 40, CG 30 <= 60
    assert [x.verdict for x in ghanesh._gang_finding(g)] == [report.PARTLY, report.PARTLY]


def _slice_tab(vals: dict[int, dict[str, float]]) -> pd.DataFrame:
    rows = [{"slice_ms": ms, "bench": b, "independent_pct": v, "dedicated_s": 100.0}
            for ms, per in vals.items() for b, v in per.items()]
    return ghanesh.with_average(pd.DataFrame(rows), ["slice_ms"])


def test_slice_rules() -> None:
    good = _slice_tab({30: {"CG": 80, "IS": 70}, 50: {"CG": 50, "IS": 45}, 100: {"CG": 48, "IS": 46},
                       200: {"CG": 45, "IS": 44}})
    assert [f.verdict for f in ghanesh.finding_slice(good)] == [report.REPRODUCED, report.REPRODUCED]
    bad = _slice_tab({30: {"CG": 10, "IS": 10}, 50: {"CG": 50, "IS": 45}, 100: {"CG": 80, "IS": 46},
                      200: {"CG": 95, "IS": 90}})
    assert [f.verdict for f in ghanesh.finding_slice(bad)] == [report.NOT_REPRODUCED, report.NOT_REPRODUCED]
    assert ghanesh.finding_dedicated_slices(good).verdict == report.REPRODUCED
    bad.loc[bad["bench"] == "CG", "dedicated_s"] = [100.0, 120.0, 100.0, 100.0]
    assert ghanesh.finding_dedicated_slices(bad).verdict == report.NOT_REPRODUCED


def _mem_tab(pct: dict[float, dict[str, float]], paged_from: float) -> pd.DataFrame:
    return pd.DataFrame([{"load_mb": mb, "bench": b, "independent_pct": v, "paged": mb >= paged_from}
                         for mb, per in pct.items() for b, v in per.items()])


def test_memory_rules() -> None:
    good = _mem_tab({1: {"CG": 50, "IS": 30}, 400: {"CG": 52, "IS": 33}, 640: {"CG": 10, "IS": 5}}, 640)
    assert [f.verdict for f in ghanesh.finding_memory(good)] == [report.REPRODUCED, report.REPRODUCED]
    bad = _mem_tab({1: {"CG": 50, "IS": 30}, 400: {"CG": 65, "IS": 33}, 640: {"CG": 200, "IS": 80}}, 640)
    assert [f.verdict for f in ghanesh.finding_memory(bad)] == [report.PARTLY, report.NOT_REPRODUCED]


def test_cache_and_scaling_rules() -> None:
    # The model has no cache term: the cache finding is not applicable, with the reason, never a
    # contrary result.
    f = ghanesh.finding_cache()
    assert f.verdict == report.NOT_APPLICABLE
    assert "no cache term" in f.why and f.ours == "not applicable"
    rows = [{"nodes_n": n, "bench": b, "independent_pct": v}
            for b, vs in {"CG": (30, 40, 60), "IS": (20, 25, 30)}.items() for n, v in zip((4, 8, 16), vs,
                                                                                          strict=True)]
    grow = ghanesh.with_average(pd.DataFrame(rows), ["nodes_n"])
    assert ghanesh.finding_scaling(grow).verdict == report.REPRODUCED
    shrink = grow.assign(independent_pct=-grow["independent_pct"])
    assert ghanesh.finding_scaling(shrink).verdict == report.NOT_REPRODUCED


def test_named_benchmark_rules() -> None:
    t = _tab({L[0]: {"CG": 80, "LU": 90, "MG": 70, "EP": 50, "IS": 20},
              L[1]: {"CG": 95, "LU": 92, "MG": 85, "EP": 50, "IS": 22},
              L[2]: {"CG": 7, "IS": 6, "EP": 50}})
    assert ghanesh.finding_highest_one_thread(t).verdict == report.REPRODUCED
    assert ghanesh.finding_cg_mg_increase(t).verdict == report.REPRODUCED
    assert ghanesh.finding_cg_is_little(t).verdict == report.REPRODUCED
    t = _tab({L[0]: {"CG": 10, "LU": 20, "MG": 15, "EP": 50, "IS": 60},
              L[1]: {"CG": 5, "LU": 30, "MG": 10, "EP": 70, "IS": 90},
              L[2]: {"CG": 40, "IS": 60, "EP": 50}})
    assert ghanesh.finding_highest_one_thread(t).verdict == report.NOT_REPRODUCED
    assert ghanesh.finding_cg_mg_increase(t).verdict == report.NOT_REPRODUCED
    assert ghanesh.finding_cg_is_little(t).verdict == report.NOT_REPRODUCED
