"""OS noise as a reproduction setting (`cosched reproduce EXP --os-noise-us X`) and the sensitivity table of
seed 000/001's findings (`cosched reproduce noise-sensitivity`): the value reaches the engine, it is part of
each run's cache key and provenance, it is refused where no simulated platform has it, and the table lines up
each finding's verdicts at the three levels."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from coscheduling import experiments
from coscheduling.experiments import noise
from coscheduling.experiments.runner import RunSpec, run_specs

from conftest import run_cli

#: One EP class A job on 4 choi2004 nodes (one process each): EP computes almost all of its time.
EP4 = {
    "fidelity": "process", "seed": 1,
    "node_platform": {"preset": "choi2004", "nodes": 4},
    "workload": {"jobs": [{"app": "EP", "class": "A", "procs": 4, "submit_s": 0.0}]},
    "scheduler": {"node_policy": "nls", "policy": "batch"},
}


def _execution(root: Path, us: float) -> tuple[float, RunSpec, list[str]]:
    [spec] = noise.with_os_noise("ep4", [RunSpec("ep4", {"case": "ep4"}, EP4)], us)
    got = run_specs([spec], root, workers=1, command="test")
    return float(got.jobs["execution_s"].iloc[0]), spec, got.executed


def test_the_noise_reaches_the_engine_and_lengthens_compute_by_its_share_of_a_tick(tmp_path: Path) -> None:
    # choi2004 runs Linux 2.4 at HZ = 100: a tick every 10 ms. Each tick a burst runs past takes d of CPU
    # (mean X), and the burst resumes after it, so each 10 ms of wall time holds 10 ms - X of compute: a
    # compute time C takes C x 10 / (10 - X). At X = 1,000 us that is C x 10/9, +11.1%; at X = 0, C. EP is
    # compute except for its final reductions, so its execution grows by 11.1% (checked within 0.5 points:
    # the sum of ~3,500 draws uniform in 0.5-1.5 ms has a spread of 1 ms / sqrt(12) x sqrt(3,500) = 17 ms,
    # 0.05% of EP's ~32 s).
    quiet, spec0, ran0 = _execution(tmp_path, 0.0)
    hash0 = json.loads((tmp_path / "runs" / "ep4" / "summary.json").read_text())["provenance"]["config_hash"]
    noisy, spec1, ran1 = _execution(tmp_path, 1000.0)
    assert spec0.config["node_platform"]["os_noise_tick_us"] == 0.0
    assert spec1.config["node_platform"]["os_noise_tick_us"] == 1000.0
    # Same key, other level: the run at 0 is not reused for 1,000 us (the value is in the configuration).
    assert ran0 == ["ep4"] and ran1 == ["ep4"]
    assert noisy / quiet - 1 == pytest.approx(1 / 9, abs=0.005), (quiet, noisy)
    # The level is in the run's configuration and in the configuration hash of its provenance.
    assert json.loads((tmp_path / "runs" / "ep4" / "config.json").read_text())["node_platform"][
        "os_noise_tick_us"] == 1000.0
    summary = json.loads((tmp_path / "runs" / "ep4" / "summary.json").read_text())
    assert summary["provenance"]["config_hash"] != hash0
    # The same level again is the cached run.
    again, _, ran2 = _execution(tmp_path, 1000.0)
    assert ran2 == [] and again == noisy


def test_the_sourced_level_is_the_presets_value(tmp_path: Path) -> None:
    # choi2004's own noise and noise.SOURCED_US set explicitly draw the same numbers: the same job table.
    # (Any other value gives other draws: the ~3,200 ticks of EP's 32 s each take a draw.)
    tables = {}
    for name, us in (("preset", None), ("sourced", noise.SOURCED_US), ("other", noise.SOURCED_US + 1)):
        [spec] = noise.with_os_noise("ep4", [RunSpec(name, {}, EP4)], us)
        run_specs([spec], tmp_path, workers=1, command="test")
        tables[name] = (tmp_path / "runs" / name / "jobs.csv").read_text()
    assert tables["preset"] == tables["sourced"]
    assert tables["preset"] != tables["other"]


def test_no_value_leaves_the_runs_as_they_are() -> None:
    spec = RunSpec("ep4", {}, EP4)
    assert noise.with_os_noise("ep4", [spec], None) == [spec]
    assert "os_noise_tick_us" not in EP4["node_platform"]


def test_a_negative_value_and_a_run_without_a_node_platform_are_refused() -> None:
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        noise.with_os_noise("ep4", [RunSpec("ep4", {}, EP4)], -1.0)
    job_level = RunSpec("j", {}, {"fidelity": "job", "workload": {"jobs": []}})
    with pytest.raises(ValueError, match="x: --os-noise-us does not apply: its runs have no simulated node platform"):
        noise.with_os_noise("x", [job_level], 5.0)


@pytest.mark.parametrize("exp_id", ["real-slurm", "real-vs-sim", "gang-scale"])
def test_reproduce_refuses_the_noise_for_an_experiment_without_a_simulated_platform(
        exp_id: str, tmp_path: Path) -> None:
    r = run_cli(["reproduce", exp_id, "--quick", "--os-noise-us", "5", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.stdout + r.stderr
    assert f"{exp_id}: --os-noise-us does not apply" in r.stderr
    assert not (tmp_path / "o").exists()


def test_the_level_is_in_the_report_header_and_the_run_configurations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = experiments.Experiment("ep4-test", "EP alone", "no seed", runs=lambda s: [RunSpec("ep4", {}, EP4)],
                                 analyze=lambda g, s: experiments.Outcome(report="## Findings\n"))
    experiments._load()
    monkeypatch.setitem(experiments._REGISTRY, exp.id, exp)
    experiments.run_experiment(exp.id, tmp_path / "o", settings=experiments.Settings(quick=True, os_noise_us=50.0),
                               workers=1)
    text = (tmp_path / "o" / "report.md").read_text()
    assert "OS noise: 50 us of CPU per timer tick on every node (`--os-noise-us`)" in text
    cfg = json.loads((tmp_path / "o" / "runs" / "ep4" / "config.json").read_text())
    assert cfg["node_platform"]["os_noise_tick_us"] == 50.0
    experiments.run_experiment(exp.id, tmp_path / "p", settings=experiments.Settings(quick=True), workers=1)
    assert "OS noise" not in (tmp_path / "p" / "report.md").read_text()


def _report(rows: list[tuple[str, str, str]]) -> str:
    lines = ["# x", "", "| # | paper's finding | rule applied to our numbers | our numbers | verdict |",
             "|---|---|---|---|---|"]
    lines += [f"| {k} | {claim} | a rule | {ours} | **{v}** |" for k, (claim, ours, v) in enumerate(rows, 1)]
    return "\n".join(lines) + "\n"


FAKE = {
    # fig-a: finding 1 holds at every level with the same numbers; finding 2 flips at 5x.
    "0": {"fig-a": _report([("A beats B", "A 1,000 s, B 1,100 s", "reproduced"),
                            ("C beats D", "C − D -2.0%", "reproduced")])},
    "sourced": {"fig-a": _report([("A beats B", "A 1,000 s, B 1,100 s", "reproduced"),
                                  ("C beats D", "C − D -1.0%", "reproduced")])},
    "5x": {"fig-a": _report([("A beats B", "A 1,000 s, B 1,100 s", "reproduced"),
                             ("C beats D", "C − D +3.0%", "not reproduced")])},
}


def test_the_table_lines_up_each_findings_verdicts_and_flags_what_changed() -> None:
    t = noise.sensitivity_table(FAKE)
    assert list(t["finding"]) == [1, 2]
    assert list(t["verdict_0"]) == ["reproduced", "reproduced"]
    assert list(t["verdict_5x"]) == ["reproduced", "not reproduced"]
    # Finding 1: same verdict, same numbers (1000, 1100) at every level; finding 2: -2, -1, +3.
    assert list(t["verdict_changes"]) == [False, True]
    assert list(t["numbers_moved"]) == [False, True]
    md = noise.table_md(t, {"0": 0.0, "sourced": 10.0, "5x": 50.0})
    assert "| fig-a | 2 | C beats D | **reproduced** | **reproduced** | **not reproduced** |" in md
    assert "| fig-a | 1 | A beats B | reproduced | reproduced | reproduced |" in md
    assert "1 of 2 finding(s) change verdict" in md and "5x (50 us), not reproduced: C − D +3.0%" in md
    # The numbers that moved, at the sourced level's place in its text: -2.0 at 0, -1.0 sourced, +3.0 at 5x.
    assert list(t["moved"]) == ["", "C − D [-2.0 / -1.0 / +3.0]%"]
    assert "- fig-a #2: C − D [-2.0 / -1.0 / +3.0]%" in md


def test_numbers_that_do_not_line_up_are_given_whole() -> None:
    texts = {"0": "A 1 s", "sourced": "A 1 s, B 2 s", "5x": "A 1 s"}
    assert noise.moved(texts) == "0: A 1 s / sourced: A 1 s, B 2 s / 5x: A 1 s"
    assert noise.moved({"0": "x 1,000", "sourced": "x 1000", "5x": "x 1,000.0"}) == ""


def test_the_table_refuses_reports_whose_findings_differ() -> None:
    other = {**FAKE, "5x": {"fig-a": _report([("A beats B", "x 1", "reproduced")])}}
    with pytest.raises(ValueError, match="fig-a: finding 2 differs between levels sourced and 5x"):
        noise.sensitivity_table(other)
    with pytest.raises(ValueError, match="no findings table"):
        noise.findings("# nothing\n")


def test_run_sensitivity_reads_the_sourced_value_runs_three_levels_and_writes_the_table(tmp_path: Path) -> None:
    # A stand-in for run_experiment: each experiment's report follows FAKE's level for the noise asked for.
    calls: list[tuple[str, float | None]] = []

    def run(exp_id: str, out: Path, *, settings: experiments.Settings, workers: int | None, command: str) -> None:
        us = settings.os_noise_us
        calls.append((exp_id, us))
        level = {None: "sourced", 0.0: "0", 50.0: "5x"}[us]
        out.mkdir(parents=True)
        (out / "report.md").write_text(FAKE[level][exp_id])

    written = noise.run_sensitivity(tmp_path, settings=experiments.Settings(quick=True), experiments=["fig-a"],
                                    run=run, command="cosched reproduce noise-sensitivity --quick")
    # The sourced level (the experiment unchanged), then 0 and 5 x 10 us.
    assert calls == [("fig-a", None), ("fig-a", 0.0), ("fig-a", 50.0)]
    assert {p.name for p in written} == {"report.md", "sensitivity.csv", "provenance.json"}
    csv = pd.read_csv(tmp_path / "sensitivity.csv")
    assert list(csv["verdict_5x"]) == ["reproduced", "not reproduced"]
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["command_line"] == "cosched reproduce noise-sensitivity --quick"
    assert prov["options"]["os_noise_tick_us"] == {"0": 0.0, "sourced": 10.0, "5x": 50.0}
    text = (tmp_path / "report.md").read_text()
    assert "0 = 0 us, sourced = 10 us, 5x = 50 us" in text and "**not reproduced**" in text


def test_noise_sensitivity_refuses_an_explicit_level(tmp_path: Path) -> None:
    r = run_cli(["reproduce", "noise-sensitivity", "--quick", "--os-noise-us", "5", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "drop --os-noise-us" in r.stderr
