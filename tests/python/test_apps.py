"""Application presets: the catalog, the dedicated runs against seed 000 Table 1, the
communication-intensity order, and the committed calibration against a fresh fit."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from coscheduling import _core, cli

from conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
NAS = ("CG", "IS", "SP", "MG", "BT", "LU", "EP", "FT")
TABLE1_NAS = ("CG", "IS", "SP", "MG", "BT", "LU", "EP")
LABEL_RANK = {"Very low": 0, "Low": 1, "Medium": 2, "High": 3}
#: Pairs (lower label, higher label) whose order the model does not reproduce; the
#: reasons are in crates/cosched/src/calibrate.rs (KNOWN_INTENSITY_DEVIATIONS).
KNOWN_DEVIATIONS = {("MG", "IS"), ("SP", "IS"), ("SP", "CG"), ("MG", "CG")}


@pytest.fixture(scope="module")
def validation() -> list[dict]:
    r = run_cli(["apps", "validate", "--target", "seed000", "--json"])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def test_apps_lists_every_nas_app():
    r = run_cli(["apps"])
    assert r.exit_code == 0, r.stderr
    for name in (*NAS, "sPPM", "BlockSolve95"):
        assert name in r.stdout
    catalog = json.loads(run_cli(["apps", "--json"]).stdout)
    by_name = {a["name"]: a for a in catalog}
    assert set(NAS) <= set(by_name)
    for name in NAS:
        assert by_name[name]["classes"] == ["A", "B", "C"]
    for name in ("SP", "BT"):
        assert by_name[name]["procs"] == [4, 9, 16]
    for name in ("CG", "IS", "MG", "LU", "EP", "FT"):
        assert by_name[name]["procs"] == [4, 8, 16]
    # Seed 000 Table 2 at 16 processes, class C.
    for name, mb in (("SP", 111.0), ("BT", 272.0), ("MG", 228.0), ("IS", 107.0)):
        assert by_name[name]["memory_mb_at_16"]["C"] == mb
    assert json.loads(_core.apps()) == catalog


def test_dedicated_runtimes_match_seed_000_table_1_within_5_percent(validation):
    got = {(r["app"], r["class"]) for r in validation}
    want = {(a, c) for a in TABLE1_NAS for c in "ABC"} | {("sPPM", "-"), ("BlockSolve95", "-")}
    assert got == want
    for r in validation:
        assert r["procs"] == 16
        assert abs(r["error"]) <= 0.05, r
        assert r["error"] == pytest.approx((r["measured_s"] - r["target_s"]) / r["target_s"])
        assert not r["clamped"], r


def test_validate_table_and_exit_code(validation, monkeypatch):
    r = run_cli(["apps", "validate", "--target", "seed000"])
    assert r.exit_code == 0, r.stderr
    assert "Table 1 s" in r.stdout and "largest |error|" in r.stdout
    # A run off by more than 5% makes the command fail with exit code 1 and name it.
    rows = [dict(validation[0], measured_s=2.0, error=0.0625)] + validation[1:]
    fake = types.SimpleNamespace(apps_validate=lambda: json.dumps(rows))
    monkeypatch.setattr(cli, "_core", fake)
    r = run_cli(["apps", "validate", "--target", "seed000"])
    assert r.exit_code == 1
    assert "more than 5%" in r.stderr and f"{rows[0]['app']} {rows[0]['class']}" in r.stderr


@pytest.mark.parametrize("columns", ["80", "40"])
def test_apps_table_keeps_every_name_whole_on_a_narrow_console(columns, monkeypatch):
    # The name column is as wide as the longest name ("BlockSolve95", 12) and never wrapped; the other
    # columns fold instead of cutting a cell to "..." (rich's ellipsis), so no cell loses a character.
    monkeypatch.setenv("COLUMNS", columns)
    r = run_cli(["apps"])
    assert r.exit_code == 0, r.stderr
    names = [a["name"] for a in json.loads(_core.apps())]
    assert "BlockSolve95" in names
    for name in names:
        assert any(f"\u2502 {name} " in line for line in r.stdout.splitlines()), (name, r.stdout)
    assert "\u2026" not in r.stdout and "..." not in r.stdout


def test_validate_table_keeps_every_app_name_whole_on_a_narrow_console(monkeypatch):
    # Two made-up rows (the table's layout only): at 40 columns the app column still holds "BlockSolve95".
    rows = [
        {"app": app, "class": c, "procs": 16, "measured_s": 100.0, "target_s": 100.0, "error": 0.0,
         "comm_fraction": 0.25, "intensity": "Medium"}
        for app, c in (("CG", "A"), ("BlockSolve95", "-"))
    ]
    monkeypatch.setattr(cli, "_core", types.SimpleNamespace(apps_validate=lambda: json.dumps(rows)))
    monkeypatch.setenv("COLUMNS", "40")
    r = run_cli(["apps", "validate", "--target", "seed000"])
    assert r.exit_code == 0, r.stderr
    assert any("\u2502 BlockSolve95 " in line for line in r.stdout.splitlines()), r.stdout
    assert "\u2026" not in r.stdout


@pytest.fixture(scope="module")
def validation002() -> list[dict]:
    r = run_cli(["apps", "validate", "--target", "seed002", "--json"])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def test_seed002_table1_is_the_looser_second_target(validation002, monkeypatch):
    rows = {r["app"]: r for r in validation002}
    assert set(rows) == {"CG", "EP", "IS", "LU", "MG", "SP"}
    # EP fixes the ghanesh CPU speed (a dedicated calibration run), so it matches the table.
    assert rows["EP"]["off"] == [] and abs(rows["EP"]["exec_s"] - 228.6) < 0.5
    # The joint fit's second target: CPU utilization where the imbalance reaches it (IS keeps none: the
    # model already idles more than measured), to the fit's 0.01 points.
    for app in ("CG", "EP", "LU", "MG", "SP"):
        assert abs(rows[app]["errors"]["cpu_pct"]) <= 0.01 + 1e-9, rows[app]
        assert rows[app]["imbalance_ppm"] > 0
    assert rows["IS"]["imbalance_ppm"] == 0 and rows["IS"]["cpu_pct"] < rows["IS"]["paper_cpu_pct"]
    for r in validation002:
        assert set(r["known"]) == set(r["off"]), r  # only documented deviations
        assert r["msgs_per_node"] == pytest.approx(r["msgs_per_s"] * r["exec_s"])
        assert r["paper_kb_per_node"] == pytest.approx(r["paper_kb_per_s"] * r["paper_exec_s"])
        for key in ("exec_s", "msgs_per_s", "kb_per_s", "cpu_pct"):
            assert r[key] >= 0 and r["paper_" + key] >= 0
    # The table and the count of matching cells.
    r = run_cli(["apps", "validate", "--target", "seed002"])
    assert r.exit_code == 0, r.stderr
    assert "seed 002 Table 1" in r.stdout and "cells within the looser tolerance" in r.stdout
    # A miss that is not a known deviation fails with exit code 1 and names it.
    bad = [dict(rows["CG"], off=["exec_s"], known=[])] + [x for x in validation002 if x["app"] != "CG"]
    monkeypatch.setattr(cli, "_core", types.SimpleNamespace(apps_validate_seed002=lambda: json.dumps(bad)))
    r = run_cli(["apps", "validate", "--target", "seed002"])
    assert r.exit_code == 1 and "CG exec_s" in r.stderr


def test_communication_intensity_follows_table_1_except_the_known_deviations(validation):
    """Fraction of the dedicated run not spent computing, ordered as seed 000 Table 1's labels
    within each class, as far as the labels distinguish."""
    rows = [r for r in validation if r["app"] in TABLE1_NAS]
    violations = set()
    for a in rows:
        for b in rows:
            if a["class"] != b["class"] or LABEL_RANK[a["intensity"]] >= LABEL_RANK[b["intensity"]]:
                continue
            if a["comm_fraction"] >= b["comm_fraction"]:
                violations.add((a["app"], b["app"]))
    assert violations <= KNOWN_DEVIATIONS, violations - KNOWN_DEVIATIONS
    frac = {(r["app"], r["class"]): r["comm_fraction"] for r in rows}
    for c in "ABC":
        for high in ("CG", "IS"):
            for other in ("SP", "MG", "BT", "LU", "EP"):
                if (other, high) not in KNOWN_DEVIATIONS:
                    assert frac[high, c] > frac[other, c], (high, other, c)
        for other in ("CG", "IS", "SP", "MG", "BT", "LU"):
            assert frac[other, c] > frac["EP", c]
        # Medium above Low again since the joint fit (the imbalance of SP and MG).
        for medium in ("SP", "MG"):
            for low in ("BT", "LU"):
                assert frac[medium, c] > frac[low, c], (medium, low, c)
    # SP and MG above CG in every class is a known deviation (CG's small imbalance since the
    # receiving NICs serialize its Fast Ethernet exchanges on ghanesh).
    by_app = {r["app"]: r["comm_fraction"] for r in validation if r["class"] == "-"}
    assert by_app["BlockSolve95"] > by_app["sPPM"]  # Medium above Low


@pytest.mark.slow
def test_committed_calibration_matches_a_full_fresh_fit():
    """The full drift check (every app and class; the Rust unit test checks class A only), through the installed
    extension (release build): the committed table on disk against a fresh fit."""
    committed = (REPO / "crates" / "cosched-model" / "src" / "apps" / "calibration.json").read_text()
    diff = _core.apps_fit_differences(committed)
    assert diff == [], (
        "calibration.json is stale (regenerate: cargo run --release -p cosched --example calibrate -- --write):\n"
        + "\n".join(diff)
    )


def test_the_fit_check_refuses_a_malformed_table_before_fitting():
    with pytest.raises(ValueError, match="committed calibration table"):
        _core.apps_fit_differences('{"apps": {}}')
