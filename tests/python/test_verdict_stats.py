"""The interval and tie logic of the reproduction verdicts, on hand-computed numbers: the 95% interval
of a per-seed difference (Student t), the ordered/banded verdict, the combination of several
differences, and the FIFO baseline a "beats PBS" verdict rests on."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from coscheduling.experiments import choi, report
from coscheduling.experiments.report import NOT_REPRODUCED, PARTLY, REPRODUCED, TIE


def test_interval_of_three_seeds_by_hand() -> None:
    # 1, 2, 3: mean 2, SD 1, t(0.975, 2) = 4.302653 -> half-width 4.302653 / sqrt(3) = 2.484138.
    d = report.diff_ci([1.0, 2.0, 3.0])
    assert d.n == 3 and d.mean == pytest.approx(2.0)
    assert d.lo == pytest.approx(2.0 - 2.484138, abs=1e-6)
    assert d.hi == pytest.approx(2.0 + 2.484138, abs=1e-6)
    assert d.sign == 0 and report.ordered(d) == TIE  # the interval straddles zero: a tie, not a winner
    assert "95% CI -0.5, +4.5; 3 seeds" in d.text()


def test_interval_of_five_seeds_by_hand() -> None:
    # 10..18 step 2: mean 14, SD sqrt(10), t(0.975, 4) = 2.776445 -> half-width 2.776445 x sqrt(10) / sqrt(5)
    # = 2.776445 x sqrt(2) = 3.926486.
    d = report.diff_ci([10, 12, 14, 16, 18])
    assert (d.lo, d.hi) == (pytest.approx(14 - 3.926486, abs=1e-5), pytest.approx(14 + 3.926486, abs=1e-5))
    assert d.sign == 1


def test_ordered_verdict_checks_sign_then_band() -> None:
    up = report.diff_ci([4.0, 5.0, 6.0])  # mean 5, interval [2.52, 7.48]: above zero
    assert report.ordered(up) == REPRODUCED
    assert report.ordered(up, report.band(10.0)) == REPRODUCED  # 5 in 5-15
    assert report.ordered(up, report.band(20.0)) == PARTLY  # 5 outside 10-30: order right, size wrong
    assert report.ordered(report.diff_ci([-4.0, -5.0, -6.0])) == NOT_REPRODUCED
    # One seed: no interval, the sign of the single difference decides.
    one = report.diff_ci([3.0])
    assert math.isnan(one.lo) and one.sign == 1 and report.ordered(one) == REPRODUCED
    assert "1 seed, no interval" in one.text()
    assert report.ordered(report.diff_ci([])) == report.NOT_APPLICABLE
    # Identical seeds: zero width.
    assert report.ordered(report.diff_ci([2.0, 2.0, 2.0])) == REPRODUCED
    assert report.band(65.0) == (32.5, 97.5)


def test_combine() -> None:
    assert report.combine([REPRODUCED, REPRODUCED]) == REPRODUCED
    assert report.combine([REPRODUCED, PARTLY]) == PARTLY
    assert report.combine([REPRODUCED, TIE]) == PARTLY
    assert report.combine([TIE, TIE]) == TIE
    assert report.combine([TIE, NOT_REPRODUCED]) == NOT_REPRODUCED
    assert report.combine([NOT_REPRODUCED, NOT_REPRODUCED]) == NOT_REPRODUCED


def _runs(rows: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"scheme": s, "seed": k + 1, "placement": "packing", "mean_response_s": v}
                         for s, vs in rows.items() for k, v in enumerate(vs)])


def test_paired_relative_difference_and_the_pbs_baseline() -> None:
    # HYBRID 100 s on each seed; BATCH 200, 300, 400 -> (BATCH - HYBRID) / HYBRID = 100, 200, 300%:
    # mean 200, SD 100, half-width 4.302653 x 100 / sqrt(3) = 248.41 -> [-48.4, 448.4]: a tie although
    # BATCH's mean is three times HYBRID's.
    runs = _runs({"HYBRID": [100, 100, 100], "BATCH": [200, 300, 400], "BATCH-NS": [150, 160, 170]})
    d = choi.rel_diff(runs, "HYBRID", "BATCH")
    assert d.mean == pytest.approx(200.0) and d.lo == pytest.approx(200 - 248.4138, abs=1e-3)
    assert report.ordered(d) == TIE
    # BATCH-NS (mean 160) is the better FIFO baseline: the verdict rests on it. 50, 60, 70%: mean 60,
    # SD 10, half-width 24.84 -> [35.2, 84.8]: HYBRID is lower.
    assert choi.pbs_baseline(runs) == "BATCH-NS"
    d = choi.rel_diff(runs, "HYBRID", "BATCH-NS")
    assert (d.lo, d.hi) == (pytest.approx(60 - 24.84138, abs=1e-4), pytest.approx(60 + 24.84138, abs=1e-4))
    # Relative to the other side (PACKING's gain over NO PACKING is a share of NO PACKING's response).
    assert choi.rel_diff(runs, "HYBRID", "BATCH", base="other").mean == pytest.approx(
        100 * (100 / 200 + 200 / 300 + 300 / 400) / 3)


def test_beats_pbs_finding_names_its_baseline_and_says_tie() -> None:
    runs = _runs({"HYBRID": [100, 100, 100], "CC": [150, 90, 210], "SB": [120, 120, 120], "GANG": [110, 110, 110],
                  "BATCH": [200, 300, 400], "BATCH-NS": [150, 160, 170]})
    runs = runs.assign(mean_wait_s=0.0, mean_execution_s=0.0, makespan_s=1.0, utilization=1.0, energy_j=1.0)
    agg = choi.per_scheme(runs, ["placement", "scheme"])
    f = {x.claim: x for x in choi.fig3_findings(agg, heavy=False, runs=runs)}
    cc = f["CC outperforms PBS (S000 §5.2)"]
    # BATCH-NS - CC = 0, 70, -40 (% of CC: 0, 77.8, -19.0): the interval contains 0.
    assert cc.verdict == TIE and "PBS = BATCH-NS" in cc.rule
    assert f["SB outperforms PBS (S000 §5.2)"].verdict == REPRODUCED  # 25, 33, 42% of 120: all above 0
    assert "BATCH − SB" in f["SB outperforms PBS (S000 §5.2)"].ours  # the other baseline is reported too


def test_fig4_order_of_indistinguishable_neighbours_is_a_tie() -> None:
    # Per seed (3 seeds) BATCH-NS, CC, HYBRID, GANG cross over: our mean order is BATCH-NS < CC < HYBRID < GANG
    # (not the paper's), yet each neighbour's interval contains 0, so the finding is a tie, not a reversal.
    rows = {"BATCH-NS": [90, 100, 125], "CC": [100, 110, 107], "SB": [130, 130, 130], "HYBRID": [95, 120, 110],
            "GANG": [120, 100, 120], "BATCH": [300, 300, 300]}
    runs = _runs(rows).assign(mean_wait_s=0.0, mean_execution_s=0.0, makespan_s=1.0, utilization=1.0,
                              energy_j=1.0)
    runs.loc[runs["scheme"] == "BATCH-NS", "mean_wait_s"] = 50.0
    agg = choi.per_scheme(runs, ["scheme"])
    order = choi.fig4_findings(agg, runs)[0]
    assert order.verdict == TIE, order.ours
    # With one seed no interval is known: the order decides (not reproduced).
    one = runs[runs["seed"] == 1]
    assert choi.fig4_findings(choi.per_scheme(one, ["scheme"]), one)[0].verdict == NOT_REPRODUCED
