"""`cosched bench traces`: the simulate time of each policy relative to EASY's on the same trace."""

from __future__ import annotations

import pytest

from coscheduling.bench_traces import replay_rows, with_easy_ratio


def test_ratio_to_easy_by_hand():
    # Trace A: EASY 0.2 s, conservative 0.5 s -> 0.5 / 0.2 = 2.5; EASY itself 1.0.
    # Trace B has no EASY row -> no ratio; trace C's EASY took 0 s -> no ratio.
    rows = [
        {"trace": "A", "policy": "easy", "simulate_s": 0.2},
        {"trace": "A", "policy": "conservative", "simulate_s": 0.5},
        {"trace": "B", "policy": "conservative", "simulate_s": 0.7},
        {"trace": "C", "policy": "easy", "simulate_s": 0.0},
        {"trace": "C", "policy": "fcfs", "simulate_s": 0.1},
    ]
    got = [r["simulate_vs_easy"] for r in with_easy_ratio(rows)]
    assert got[:2] == [pytest.approx(1.0), pytest.approx(2.5)]
    assert got[2:] == [None, None, None]


def test_replay_rows_carry_the_ratio(slices):
    trace = slices["CTC-SP2-1996-3.1-cln"]
    lines: list[str] = []
    rows = replay_rows([trace], ["easy", "conservative"], 200, lines.append)
    assert [(r["policy"], r["jobs"]) for r in rows] == [("easy", 200), ("conservative", 200)]
    assert rows[0]["simulate_vs_easy"] == pytest.approx(1.0)
    assert rows[1]["simulate_vs_easy"] == pytest.approx(rows[1]["simulate_s"] / rows[0]["simulate_s"])
    assert len(lines) == 2 and lines[1].startswith(f"{trace.name} / conservative: ")
