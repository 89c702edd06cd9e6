"""The gang-scale model's rules on cases small enough to work out by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coscheduling.experiments import scale

# No wake-up lateness to speak of, no clock offsets: every instant is a sum of send costs and latencies.
EXACT = replace(scale.DEFAULTS, send_us=2.0, latency_us=10.0, wake_p50_us=1e-6, wake_p99_us=1e-6, clock_sd_us=0.0)


def test_flat_per_switch_skew_is_the_serial_send_cost():
    r = scale.model(5, 50, "per-switch", 0, EXACT, switches=4, seed=1)
    # Node i gets the message at (i + 1) * 2 + 10 us: the first at 12 us, the last at 20 us.
    assert r["skew_p99_ms"] == pytest.approx(4 * 2.0 / 1000, abs=1e-6)
    assert r["dissemination_p99_ms"] == pytest.approx(20.0 / 1000, abs=1e-9)
    assert r["coordinator_msgs_per_s"] == pytest.approx(5 / 0.050)
    assert r["coordinator_cpu_share"] == pytest.approx(100 * 2e-6)


def test_tree_forwarding_adds_a_hop_per_level():
    # k = 2, 4 nodes: nodes 0 and 1 from the coordinator at 12 and 14 us; node 2 is node 0's first child
    # (12 + 2 + 10 = 24 us), node 3 its second (26 us).
    r = scale.model(4, 100, "per-switch", 2, EXACT, switches=3, seed=1)
    assert r["dissemination_p99_ms"] == pytest.approx(26.0 / 1000, abs=1e-6)
    assert r["skew_p99_ms"] == pytest.approx((26.0 - 12.0) / 1000, abs=1e-6)
    assert r["coordinator_msgs_per_s"] == pytest.approx(2 / 0.100)


def test_agreed_times_skew_comes_from_clocks_only():
    exact = scale.model(100, 50, "agreed-times", 0, EXACT, switches=5, seed=1)
    assert exact["skew_p99_ms"] == pytest.approx(0, abs=1e-6)
    noisy = replace(EXACT, clock_sd_us=100.0)
    r = scale.model(1000, 50, "agreed-times", 0, noisy, switches=20, seed=1)
    # The range of 1000 normal draws is about 6.5 standard deviations.
    assert 0.5 < r["skew_p50_ms"] < 0.8


def test_agreed_times_messages_follow_the_matrix_changes():
    p = replace(EXACT, changes_per_node_s=0.01, job_share=0.1)
    # 200 nodes: 2 changes/s, each to the 20 nodes of the job.
    assert scale.model(200, 50, "agreed-times", 0, p, switches=2, seed=1)["coordinator_msgs_per_s"] == pytest.approx(40)
    # A job spans at least one node.
    assert scale.model(5, 50, "agreed-times", 0, p, switches=2, seed=1)["coordinator_msgs_per_s"] == pytest.approx(0.05)


def test_the_table_is_deterministic():
    a = scale.table(nodes=(16, 64), quanta=(50,), switches=10)
    b = scale.table(nodes=(16, 64), quanta=(50,), switches=10)
    assert a.equals(b)
    assert set(a.scheme) == {"per-switch", "agreed-times"}


def test_the_experiment_writes_its_tables_and_report(tmp_path):
    from coscheduling import experiments

    files, _ = experiments.run_experiment("gang-scale", tmp_path / "gs", settings=experiments.Settings(quick=True))
    names = {f.name for f in files}
    assert {"scale.csv", "clock_sensitivity.csv", "report.md"} <= names
    text = (tmp_path / "gs" / "report.md").read_text()
    assert "## Computed findings" in text and "10,000 nodes" in text
