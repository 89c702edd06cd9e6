"""Seed 003 flexible gang experiments: the quick version of each runs and writes its report with
verdicts, and every finding rule can fail and pass on crafted numbers."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from coscheduling.experiments import flexgang, report

from golden import check_verdicts

IDS = ["lee-fig2", "lee-fig3", "flexgang-mix"]
VERDICTS = {report.REPRODUCED, report.PARTLY, report.NOT_REPRODUCED, report.NOT_APPLICABLE}


def _verdicts(text: str) -> list[str]:
    return re.findall(r"\| \*\*([a-z ]+)\*\* \|", text)


@pytest.mark.parametrize("exp_id", IDS)
def test_quick_version_writes_report_with_verdicts(exp_id: str, quick_reproduction) -> None:
    r, out = quick_reproduction(exp_id)
    assert r.exit_code == 0, r.stdout + r.stderr
    text = (out / "report.md").read_text()
    assert text.startswith(f"# {exp_id}:")
    assert "## Findings" in text
    verdicts = _verdicts(text)
    check_verdicts(exp_id, text)
    assert len(verdicts) == {"lee-fig2": 2, "lee-fig3": 3, "flexgang-mix": 6}[exp_id]
    assert set(verdicts) <= VERDICTS, verdicts
    runs = pd.read_csv(out / "runs.csv")
    assert (runs["jobs_completed"] == runs["jobs_total"]).all()
    for png in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for csv in out.glob("*.csv"):
        assert len(pd.read_csv(csv)) > 0, csv


def test_quick_fig2_measures_slowdown_and_fragmentation(quick_reproduction) -> None:
    r, out = quick_reproduction("lee-fig2")
    assert r.exit_code == 0, r.stdout + r.stderr
    t = pd.read_csv(out / "fig2.csv")
    assert len(t) == 6
    # Sharing the machine never makes the I/O job faster than alone, and fragmentation is a share.
    assert (t["slowdown"] >= 1.0).all()
    assert ((t["fragmentation_pct"] >= 0) & (t["fragmentation_pct"] <= 100)).all()


def _curves(by: str, x: str, y: str, values: dict[float, list[float]]) -> pd.DataFrame:
    rows = [{by: k, x: float(i), y: v} for k, vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_trend_rule_passes_partly_and_fails() -> None:
    def f(values: dict[float, list[float]]) -> str:
        t = _curves("q_io", "q_cpu", "slowdown", values)
        return flexgang.trend_finding(t, "q_io", "q_cpu", "slowdown", +1, "c", "w").verdict

    assert f({1.0: [1, 2, 3], 2.0: [1, 1.5, 4]}) == report.REPRODUCED
    assert f({1.0: [1, 2, 3], 2.0: [3, 2, 1]}) == report.PARTLY
    assert f({1.0: [3, 2, 1], 2.0: [3, 2, 1]}) == report.NOT_REPRODUCED
    # The falling direction.
    t = _curves("q_cpu", "q_io", "slowdown", {1.0: [3, 2, 1]})
    assert flexgang.trend_finding(t, "q_cpu", "q_io", "slowdown", -1, "c", "w").verdict == report.REPRODUCED


def test_tradeoff_rule_passes_partly_and_fails() -> None:
    def f(slow: list[float], frag: list[float]) -> str:
        return flexgang.tradeoff_finding(pd.DataFrame({"slowdown": slow, "fragmentation_pct": frag})).verdict

    assert f([1, 2, 3, 4], [40, 30, 20, 10]) == report.REPRODUCED
    assert f([1, 2, 3, 4, 5], [40, 10, 50, 30, 20]) == report.PARTLY
    assert f([1, 2, 3, 4], [10, 20, 30, 40]) == report.NOT_REPRODUCED


def _mix(**over: dict[str, float]) -> pd.DataFrame:
    base = {
        "FLEX": {"io": 1.0, "sync": 5.0, "emp": 2.0, "all": 2.5, "utilization": 0.8, "prio_inversion_s": 1.0},
        "FLEX-NOINT": {"io": 2.0, "sync": 4.0, "emp": 2.0, "all": 2.8, "utilization": 0.8,
                       "prio_inversion_s": 2.0},
        "GANG": {"io": 3.0, "sync": 4.5, "emp": 3.0, "all": 3.0, "utilization": 0.7, "prio_inversion_s": 5.0},
        "HYBRID": {"io": 1.5, "sync": 4.0, "emp": 2.0, "all": 2.0, "utilization": 0.9, "prio_inversion_s": 0.5},
        "BATCH": {"io": 2.0, "sync": 3.0, "emp": 3.0, "all": 2.7, "utilization": 0.6, "prio_inversion_s": 0.0},
    }
    for k, v in over.items():
        base[k] = {**base[k], **v}
    return pd.DataFrame([{"scheme": k, **v} for k, v in base.items()])


def test_mix_rules_pass_and_fail() -> None:
    ok = [x.verdict for x in flexgang.mix_findings(_mix())]
    assert ok == [report.REPRODUCED] * 5
    bad = [x.verdict for x in flexgang.mix_findings(_mix(
        GANG={"io": 0.5, "emp": 1.0, "all": 2.0, "utilization": 0.9, "prio_inversion_s": 0.5},
        **{"FLEX-NOINT": {"sync": 6.0}},
    ))]
    assert bad == [report.NOT_REPRODUCED] * 5
    partly = [x.verdict for x in flexgang.mix_findings(_mix(
        GANG={"io": 1.2, "utilization": 0.9},
    ))]
    assert partly[1:3] == [report.PARTLY, report.PARTLY]
    assert all(f.why for f in flexgang.mix_findings(_mix(GANG={"io": 0.5})) if f.verdict != report.REPRODUCED)


def test_estimator_rule_passes_partly_and_fails() -> None:
    def f(sync: list[str], emp: list[str]) -> str:
        rows = [{"cls": "sync", "estimated": c} for c in sync] + [{"cls": "emp", "estimated": c} for c in emp]
        return flexgang.estimator_finding(pd.DataFrame(rows)).verdict

    assert f(["high", "high"], ["low", "low"]) == report.REPRODUCED
    assert f(["high", "unknown"], ["low", "low"]) == report.PARTLY
    assert f(["low", "unknown"], ["high", "high"]) == report.NOT_REPRODUCED
    assert flexgang.estimator_finding(pd.DataFrame()).verdict == report.NOT_APPLICABLE


def test_mix_runs_include_the_dedicated_io_job_and_both_flex_variants() -> None:
    from coscheduling.experiments import Settings

    specs = flexgang.mix_runs(Settings(quick=True))
    schemes = [s.labels["scheme"] for s in specs]
    assert {"FLEX", "FLEX-DECLARED", flexgang.DEDICATED} <= set(schemes)
    flex = next(s for s in specs if s.labels["scheme"] == "FLEX")
    assert "low=auto" in flex.config["scheduler"]["policy"]
    declared = next(s for s in specs if s.labels["scheme"] == "FLEX-DECLARED")
    assert "low=Emp/io-bound" in declared.config["scheduler"]["policy"]
    ded = next(s for s in specs if s.labels["scheme"] == flexgang.DEDICATED)
    assert [j["app"] for j in ded.config["workload"]["jobs"]] == [flexgang.mix_jobs(Settings(quick=True))[0][1]["app"]]
