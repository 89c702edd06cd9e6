"""Seed 003 reproductions (`lee-fig5`, `lee-fig6-9`, `lee-table3`): the quick version of each
writes its report with verdicts, and each finding rule passes and fails on crafted numbers."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from coscheduling import experiments
from coscheduling.experiments import lee, report

from golden import check_verdicts

IDS = ["lee-fig5", "lee-fig6-9", "lee-table3"]
VERDICTS = {report.REPRODUCED, report.PARTLY, report.NOT_REPRODUCED, report.NOT_APPLICABLE}


def test_registered() -> None:
    ids = [e.id for e in experiments.experiments()]
    for i in IDS:
        assert i in ids


@pytest.mark.parametrize("exp_id", IDS)
def test_quick_version_writes_report_tables_and_plots(exp_id: str, quick_reproduction) -> None:
    r, out = quick_reproduction(exp_id)
    assert r.exit_code == 0, r.stdout + r.stderr
    text = (out / "report.md").read_text()
    assert text.startswith(f"# {exp_id}:")
    assert "## Findings" in text
    verdicts = re.findall(r"\| \*\*([a-z ]+)\*\* \|", text)
    check_verdicts(exp_id, text)
    assert verdicts and set(verdicts) <= VERDICTS, verdicts
    runs = pd.read_csv(out / "runs.csv")
    assert (runs["jobs_completed"] == runs["jobs_total"]).all()
    assert runs["measure_perturb_own_s"].gt(0).all()
    for png in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for csv in out.glob("*.csv"):
        assert len(pd.read_csv(csv)) > 0, csv


def test_quick_fig5_measures_the_defining_slopes(quick_reproduction) -> None:
    r, out = quick_reproduction("lee-fig5")
    assert r.exit_code == 0, r.stdout + r.stderr
    t = pd.read_csv(out / "fig5_slopes.csv").set_index("app")
    # Emp: round-robin takeaway costs 1/P; Barrier: a giveaway gains nothing.
    assert abs(t.loc["Emp", "SubRR"] - 0.25) < 0.05
    assert abs(t.loc["Barrier", "AddRR"]) < 0.05 and abs(t.loc["Barrier", "AddFX"]) < 0.05


def test_classify_rule() -> None:
    assert lee.classify(1.0, 1.0, 0.0) == "synchronization intensive"
    assert lee.classify(1.0, 0.25, -0.25) == "embarrassingly parallel"
    assert lee.classify(0.25, 0.25, -0.25) == "self load-balancing"
    # A round-robin giveaway gain means it is not synchronization intensive.
    assert lee.classify(1.0, 0.7, -0.25) == "embarrassingly parallel"
    assert lee.classify(float("nan"), 1.0, 0.0) == "unknown"


def _slopes(rows: dict[str, dict[str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"app": a, "env": e, "slope": v} for a, d in rows.items() for e, v in d.items()])


def _verdict(findings: list[report.Finding], needle: str) -> str:
    return next(f.verdict for f in findings if needle in f.claim)


def test_fig5_rules_pass_and_fail() -> None:
    good = {"Emp": {"SubFX": 1.0, "SubRR": 0.25, "AddFX": 0.0, "AddRR": -0.25},
            "Barrier": {"SubFX": 1.0, "SubRR": 1.0, "AddFX": 0.0, "AddRR": 0.0},
            "Workpile[unit=0.14]": {"SubFX": 0.25, "SubRR": 0.25, "AddFX": -0.25, "AddRR": -0.25}}
    f, t = lee.fig5_findings(_slopes(good), list(good))
    assert {x.verdict for x in f} == {report.REPRODUCED}, f
    bad = {**good, "Barrier": {"SubFX": 1.0, "SubRR": 1.0, "AddFX": -0.25, "AddRR": -0.25},
           "Emp": {"SubFX": 1.0, "SubRR": 0.5, "AddFX": 0.0, "AddRR": -0.1}}
    f, _ = lee.fig5_findings(_slopes(bad), list(bad))
    assert _verdict(f, "no benefit") == report.NOT_REPRODUCED
    assert _verdict(f, "lose 1/P") == report.NOT_REPRODUCED
    assert _verdict(f, "Barrier: synchronization") == report.NOT_REPRODUCED


def _real(vals: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    envs = [e[0] for e in lee.REAL_ENVS]
    return _slopes({a: dict(zip(envs, v, strict=True)) for a, v in vals.items()})


def test_fig69_rules_pass_and_fail() -> None:
    # SubFX-p0, SubFX-p1, SubFX-p3, SubRR, AddFX-p1, AddRR
    paper_like = {"lee-Enum": (0.85, 0.9, 1.0, 0.3, 0.0, -0.2), "lee-Water": (0.5, 0.5, 1.0, 0.5, 0.0, -0.2),
                  "lee-LU": (0.6, 0.5, 0.95, 0.55, 0.0, -0.2), "lee-Barnes": (0.9, 0.5, 0.5, 0.6, 0.0, 0.0)}
    f = lee.fig69_findings(_real(paper_like))
    assert {x.verdict for x in f} == {report.REPRODUCED}, [(x.claim, x.verdict) for x in f]
    flat = {a: (1.0, 1.0, 1.0, 1.0, 0.0, 0.0) for a in lee.REAL}
    f = lee.fig69_findings(_real(flat))
    assert _verdict(f, "Barnes: takeaway from the bottleneck") == report.NOT_REPRODUCED
    assert _verdict(f, "about 50%") == report.PARTLY
    assert _verdict(f, "resembles an embarrassingly") == report.NOT_REPRODUCED


def _table(msgs: dict[str, tuple[float, float]], prog: dict[str, tuple[float, float]]) -> pd.DataFrame:
    rows = []
    for a in lee.REAL:
        g, n = msgs[a]
        pg, pn = prog[a]
        rows.append({"app": a, "class": "gang-all", "msg_avg": g, "prog_avg": pg})
        rows.append({"app": a, "class": "non-gang-non-running", "msg_avg": n, "prog_avg": pn})
    return pd.DataFrame(rows)


def test_table3_rules_pass_and_fail() -> None:
    prog = {a: (1.4e6, 1.3e6) for a in lee.REAL}
    paper = {a: (v["gang"][0], v["ngn"][0]) for a, v in lee.PAPER_TABLE3.items()}
    t = _table(paper, prog)
    f = lee.table3_findings(t, lee.ratios(t))
    assert {x.verdict for x in f} == {report.REPRODUCED}, [(x.claim, x.verdict, x.ours) for x in f]
    inverted = {**paper, "lee-Enum": (250.0, 10.0), "lee-Water": (12.0, 11.0)}
    t = _table(inverted, {**prog, "lee-Enum": (1.4e6, 0.2e6)})
    f = lee.table3_findings(t, lee.ratios(t))
    assert _verdict(f, "sustains") == report.NOT_REPRODUCED
    assert _verdict(f, "sender progress") == report.NOT_REPRODUCED
    assert _verdict(f, "receive few messages") == report.NOT_REPRODUCED
    assert _verdict(f, "ordering") == report.NOT_REPRODUCED
    assert _verdict(f, "five times") == report.NOT_REPRODUCED


def test_pooled_statistics_combine_runs() -> None:
    runs = pd.DataFrame([
        {"app": "lee-LU", **{f"measure_perturb_{c}_{k}": v for c in ("gang", "ngr", "ngn")
                             for k, v in (("n", 2), ("msg_mean", 1.0), ("msg_sd", 0.0), ("prog_mean_s", 1e-3),
                                          ("prog_sd_s", 0.0))}},
        {"app": "lee-LU", **{f"measure_perturb_{c}_{k}": v for c in ("gang", "ngr", "ngn")
                             for k, v in (("n", 2), ("msg_mean", 3.0), ("msg_sd", 0.0), ("prog_mean_s", 3e-3),
                                          ("prog_sd_s", 0.0))}},
    ])
    t = lee.pooled(runs)
    row = t[t["class"] == "gang-all"].iloc[0]
    assert row["n"] == 4 and row["msg_avg"] == pytest.approx(2.0) and row["msg_sd"] == pytest.approx(1.0)
    assert row["prog_avg"] == pytest.approx(2e6)
