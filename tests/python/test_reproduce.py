"""`cosched reproduce`: the experiment list, errors, the quick version of every experiment
(its report and files), resuming from the run cache, and the finding rules on crafted numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from coscheduling import experiments
from coscheduling.experiments import choi, report

from conftest import run_cli

IDS = ["choi-fig3a", "choi-fig3b", "choi-table3", "choi-fig4", "choi-fig5", "choi-fig8", "choi-fig6", "choi-fig7",
       "choi-table4"]
# Experiments of seeds 002 and 003, whose quick versions run in their own test modules.
OTHER_IDS = ["ghanesh-fig1", "ghanesh-fig2", "ghanesh-fig3", "ghanesh-fig4", "ghanesh-fig5", "lee-fig5",
             "lee-fig6-9", "lee-table3", "lee-fig2", "lee-fig3", "flexgang-mix"]
VERDICTS = {report.REPRODUCED, report.PARTLY, report.NOT_REPRODUCED, report.NOT_APPLICABLE}


def test_list_names_every_experiment() -> None:
    r = run_cli(["reproduce", "--list"])
    assert r.exit_code == 0, r.stderr
    listed = [e.id for e in experiments.experiments()]
    for i in IDS + OTHER_IDS:
        assert i in r.stdout
    assert sorted(listed) == sorted(IDS + OTHER_IDS)


def test_unknown_experiment_is_a_usage_error(tmp_path: Path) -> None:
    r = run_cli(["reproduce", "choi-fig99", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "unknown experiment 'choi-fig99'" in r.stderr and "choi-fig3a" in r.stderr
    assert not (tmp_path / "o").exists()


def _verdicts(text: str) -> list[str]:
    return re.findall(r"\| \*\*([a-z ]+)\*\* \|", text)


@pytest.mark.parametrize("exp_id", IDS)
def test_quick_version_writes_report_tables_and_plots(exp_id: str, tmp_path: Path) -> None:
    out = tmp_path / exp_id
    r = run_cli(["reproduce", exp_id, "--quick", "--out", str(out), "-j", "2"])
    assert r.exit_code == 0, r.stdout + r.stderr
    text = (out / "report.md").read_text()
    assert text.startswith(f"# {exp_id}:")
    assert "## Findings" in text
    verdicts = _verdicts(text)
    assert verdicts and set(verdicts) <= VERDICTS, verdicts
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == len(list((out / "runs").iterdir()))
    assert (runs["jobs_completed"] == runs["jobs_total"]).all()
    for png in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for csv in out.glob("*.csv"):
        assert len(pd.read_csv(csv)) > 0, csv


def test_rerun_reuses_every_run_and_gives_the_same_report(tmp_path: Path) -> None:
    out = tmp_path / "fig6"
    first = run_cli(["reproduce", "choi-fig6", "--quick", "--out", str(out), "-j", "1"])
    assert first.exit_code == 0, first.stderr
    text = (out / "report.md").read_text()
    csvs = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    again = run_cli(["reproduce", "choi-fig6", "--quick", "--out", str(out), "-j", "1"])
    assert again.exit_code == 0, again.stderr
    n = len(list((out / "runs").iterdir()))
    assert f"{n} runs ({n} reused)" in again.stdout
    assert (out / "report.md").read_text() == text
    assert {p.name: p.read_bytes() for p in out.glob("*.csv")} == csvs


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

    def verdict_of(prefix: str) -> str:
        found = [x.verdict for x in choi._fig3_findings(pd.DataFrame(rows), True, pd.DataFrame())
                 if x.claim.startswith(prefix)]
        assert len(found) == 1, prefix
        return found[0]

    assert verdict_of("HYBRID has the lowest response time") == report.REPRODUCED
    assert verdict_of("batch (PBS) has the lowest execution time") == report.REPRODUCED
    assert verdict_of("PACKING improves response") == report.REPRODUCED
    assert verdict_of("blocking-based coscheduling") == report.REPRODUCED
    hybrid = [k for k, r in enumerate(rows) if r["scheme"] == "HYBRID"]
    for k in hybrid:
        rows[k]["response_s"] = 10_000.0
    assert verdict_of("HYBRID has the lowest response time") == report.NOT_REPRODUCED
    assert verdict_of("blocking-based coscheduling") == report.NOT_REPRODUCED
    for r in rows:
        if r["placement"] == "random":
            r["response_s"] = 1.0
    assert verdict_of("PACKING improves response") == report.NOT_REPRODUCED
