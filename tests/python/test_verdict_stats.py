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


def _seeded_runs(rows: dict[str, list[float]], col: str = "mean_execution_s", **labels: object) -> pd.DataFrame:
    """Runs of 3 seeds: {scheme: [value per seed]} in ``col`` (every other response column 0)."""
    base = {"mean_wait_s": 0.0, "mean_execution_s": 0.0, "mean_response_s": 0.0, "makespan_s": 1.0,
            "utilization": 1.0, "energy_j": 1.0, **labels}
    return pd.DataFrame([{**base, "scheme": s, "seed": k + 1, col: v}
                         for s, vs in rows.items() for k, v in enumerate(vs)])


def test_first_of_a_set_by_the_lead_over_the_runner_up() -> None:
    def first(rows: dict[str, list[float]], target: str, highest: bool = False) -> choi.First:
        runs = _seeded_runs(rows)
        agg = choi.per_scheme(runs, ["scheme"])
        return choi.first_of(runs, agg, target, "execution_s", "mean_execution_s", highest=highest)

    # HYBRID first; CC − HYBRID = 10, 20, 30% of HYBRID: mean 20, SD 10, half-width 24.84 -> [-4.8, 44.8]: a tie.
    f = first({"HYBRID": [100, 100, 100], "CC": [110, 120, 130], "SB": [200, 200, 200]}, "HYBRID")
    assert (f.verdict, f.first, f.second) == (TIE, "HYBRID", "CC")
    assert f.lead.lo == pytest.approx(20 - 24.84138, abs=1e-4)
    # 10, 11, 12%: mean 11, SD 1, half-width 2.48 -> [8.5, 13.5]: HYBRID is told apart.
    assert first({"HYBRID": [100, 100, 100], "CC": [110, 111, 112]}, "HYBRID").verdict == REPRODUCED
    # CC first by 20% on every seed (zero width): HYBRID is not first.
    f = first({"HYBRID": [120, 120, 120], "CC": [100, 100, 100]}, "HYBRID")
    assert (f.verdict, f.first, f.second) == (NOT_REPRODUCED, "CC", "HYBRID")
    # Highest: BATCH − NLS = 50, 55, 60% of NLS: mean 55, SD 5, half-width 12.42 -> above 0.
    f = first({"BATCH": [300, 310, 320], "NLS": [200, 200, 200]}, "BATCH", highest=True)
    assert f.verdict == REPRODUCED and f.lead.mean == pytest.approx(55.0)
    # One seed: the means decide, as before intervals.
    one = _seeded_runs({"HYBRID": [100], "CC": [101]})
    assert choi.first_of(one, choi.per_scheme(one, ["scheme"]), "HYBRID", "execution_s",
                         "mean_execution_s").verdict == REPRODUCED


def test_blocking_vs_spin_strict_then_group_means_with_intervals() -> None:
    runs = _seeded_runs({"SB": [100, 100, 100], "CC": [100, 100, 100], "HYBRID": [90, 90, 90],
                         "NLS": [150, 150, 150], "PB": [130, 90, 150], "DCS": [140, 140, 140]},
                        "mean_response_s", placement="packing")
    agg = choi.per_scheme(runs, ["scheme"])
    f = choi.blocking_vs_spin(agg, "response_s", "test", runs)
    # Best spin PB (mean 123.3) − worst blocking SB (100): 30, −10, 50%: mean 23.3, SD 30.6, half-width 75.9:
    # a tie. Group means per seed: blocking 96.67, spin 140, 126.67, 146.67 -> 44.8, 31.0, 51.7%: mean 42.5,
    # SD 10.54, half-width 26.2 -> [16.4, 68.7]: above 0: the weaker form holds, so partly.
    assert f.verdict == PARTLY, f.ours
    assert "spin − blocking group means +42.5% [95% CI +16.4, +68.7; 3 seeds]" in f.ours
    # PB's bad seed removed: the strict order is told apart on every seed.
    strict = runs.assign(mean_response_s=runs["mean_response_s"].where(runs["scheme"] != "PB", 130.0))
    assert choi.blocking_vs_spin(choi.per_scheme(strict, ["scheme"]), "response_s", "test", strict).verdict \
        == REPRODUCED


def test_utilization_threshold_with_an_interval() -> None:
    # 92, 93, 94% − 90 = 2, 3, 4 pp: mean 3, SD 1, half-width 2.48 -> [0.5, 5.5]: at or above 90%.
    runs = _seeded_runs({"CC": [0, 0, 0]}).assign(utilization=[0.92, 0.93, 0.94])
    assert report.ordered(choi._above(runs, "CC", "utilization", 0.90, {}, 0.93)) == REPRODUCED
    # 88, 92, 96%: −2, 2, 6 pp: mean 2, SD 4, half-width 9.9: a tie.
    runs = runs.assign(utilization=[0.88, 0.92, 0.96])
    assert report.ordered(choi._above(runs, "CC", "utilization", 0.90, {}, 0.92)) == TIE


def test_table4_energy_saving_per_scheme_with_intervals() -> None:
    rows = []
    for aware, vals in ((False, {"HYBRID": [100, 110, 120], "CC": [100, 100, 100]}),
                        (True, {"HYBRID": [90, 90, 90], "CC": [80, 80, 80]})):
        rows.append(_seeded_runs(vals, "energy_j", memory_aware=aware))
    runs = pd.concat(rows, ignore_index=True)
    t = runs.groupby(["memory_aware", "scheme"], sort=False).agg(total_MJ=("energy_j", "mean"),
                                                                  running_time_s=("makespan_s", "mean"))
    t = t.reset_index()
    f = choi.table4_findings(t, runs)[0]
    # HYBRID: (no aware − aware) / aware = 11.1, 22.2, 33.3%: mean 22.2, SD 11.1, half-width 27.6: a tie.
    # CC: 25% on every seed: lower memory-aware. One of two: partly.
    assert f.verdict == PARTLY, f.ours
    assert "lower with memory-aware for 1 of 2: CC" in f.ours


def test_fig7_pbs_finding_rests_on_the_better_fifo_baseline() -> None:
    un = {"NLS": [300, 280, 290], "SB": [400, 400, 400], "CC": [410, 410, 410], "GM-BLOCK": [420, 420, 420],
          "HYBRID": [405, 405, 405]}
    aw = {"NLS": [200, 200, 200], "SB": [150, 150, 150], "CC": [150, 150, 150], "GM-BLOCK": [150, 150, 150],
          "HYBRID": [140, 140, 140], "BATCH": [300, 300, 300], "BATCH-NS": [250, 260, 270]}
    runs = pd.concat([_seeded_runs(un, "mean_response_s", memory_aware=False),
                      _seeded_runs(aw, "mean_response_s", memory_aware=True)], ignore_index=True)
    runs["mean_execution_s"] = runs["mean_response_s"]
    agg = choi.per_scheme(runs, ["memory_aware", "scheme"])
    fs = {f.claim.split(" (")[0]: f for f in choi.fig7_findings(agg, choi.speedup_table(agg), runs)}
    pbs = fs["PBS outperforms every scheme without memory-aware allocation"]
    # BATCH-NS (mean 260) is the better FIFO baseline. NLS (no memory-aware) − BATCH-NS = 50/250, 20/260,
    # 20/270 = 20.0, 7.69, 7.41%: mean 11.7, SD 7.2, half-width 17.9: a tie.
    assert "PBS = BATCH-NS" in pbs.rule and pbs.verdict == TIE, pbs.ours
    # HYBRID lowest memory-aware by 140 against 150 on every seed: reproduced.
    assert fs["with memory-aware allocation HYBRID shows the best response"].verdict == REPRODUCED


def test_equivalence_verdict_by_hand() -> None:
    # 1, 2, 3: interval [-0.48, 4.48] inside ±10: identical. 8, 9, 10: [6.52, 11.48] crosses +10: undecided.
    # 20, 21, 22: [17.5, 24.5] wholly above +10: not identical. -12, -11, -10: [-13.5, -8.5]: undecided.
    assert report.equivalent(report.diff_ci([1, 2, 3]), 10.0) == REPRODUCED
    assert report.equivalent(report.diff_ci([8, 9, 10]), 10.0) == report.UNDECIDED
    assert report.equivalent(report.diff_ci([20, 21, 22]), 10.0) == NOT_REPRODUCED
    assert report.equivalent(report.diff_ci([-12, -11, -10]), 10.0) == report.UNDECIDED
    assert report.equivalent(report.diff_ci([-22, -21, -20]), 10.0) == NOT_REPRODUCED
    # One seed: inside the band or not.
    assert report.equivalent(report.diff_ci([9.9]), 10.0) == REPRODUCED
    assert report.equivalent(report.diff_ci([-10.1]), 10.0) == NOT_REPRODUCED
    assert report.equivalent(report.diff_ci([]), 10.0) == report.NOT_APPLICABLE
    assert report.all_equivalent([REPRODUCED, REPRODUCED]) == REPRODUCED
    assert report.all_equivalent([REPRODUCED, report.UNDECIDED]) == report.UNDECIDED
    assert report.all_equivalent([report.UNDECIDED, NOT_REPRODUCED]) == NOT_REPRODUCED


def test_almost_identical_with_intervals_on_hand_made_tables() -> None:
    def finding(rows_by_placement: dict[str, dict[str, list[float]]]) -> report.Finding:
        runs = pd.concat([_seeded_runs(rows, "mean_response_s", placement=p)
                          for p, rows in rows_by_placement.items()], ignore_index=True)
        agg = choi.per_scheme(runs, ["placement", "scheme"])
        return choi.gm_block_finding(agg, "response_s", "placement", runs)

    # CC 100; SB 102, 103, 104 (2, 3, 4% of CC); GM-BLOCK 101, 101, 101. Pairs: SB − CC [0.5, 5.5];
    # GM-BLOCK − CC 1% each seed; GM-BLOCK − SB = (101 − 102) / 101 ... (101 − 104) / 101 = −0.99, −1.98, −2.97%:
    # mean −1.98, SD 0.99, half-width 2.46 -> [−4.4, +0.5]. All inside ±10: identical.
    tight = {"CC": [100, 100, 100], "SB": [102, 103, 104], "GM-BLOCK": [101, 101, 101]}
    f = finding({"packing": tight, "random": tight})
    assert f.verdict == REPRODUCED, f.ours
    assert "SB − CC +3.0% [95% CI +0.5, +5.5; 3 seeds]" in f.ours
    assert "±10%" in f.rule
    # GM-BLOCK 100, 110, 120 against CC 100: 0, 10, 20%: mean 10, SD 10, half-width 24.8 -> [−14.8, 34.8]:
    # crosses the band: undecided (the old 10% rule on the means, 10.0%, called it identical).
    wide = {"CC": [100, 100, 100], "SB": [100, 100, 100], "GM-BLOCK": [100, 110, 120]}
    assert finding({"packing": wide}).verdict == report.UNDECIDED
    # GM-BLOCK 130 on every seed: 30% wholly outside: not identical; identical on the other placement: partly.
    far = {"CC": [100, 100, 100], "SB": [100, 100, 100], "GM-BLOCK": [130, 130, 130]}
    f = finding({"packing": tight, "random": far})
    assert f.verdict == PARTLY, f.ours
    assert "NO PACKING: CC 100 s" in f.why
    assert finding({"packing": far, "random": wide}).verdict == NOT_REPRODUCED
    # One seed: the spreads of the means decide (9.9% identical, 10.5% not).
    assert finding({"packing": {"CC": [100], "SB": [109.9], "GM-BLOCK": [105]}}).verdict == REPRODUCED
    assert finding({"packing": {"CC": [100], "SB": [110.5], "GM-BLOCK": [105]}}).verdict == NOT_REPRODUCED
