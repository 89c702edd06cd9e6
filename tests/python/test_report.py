"""`cosched report`: the HTML holds the expected sections and embedded plots, renders in headless
Chromium with every image decoded and no console message, and a screenshot is not blank."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from conftest import REPO, run_cli

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("report")
    spec = d / "sweep.toml"
    spec.write_text((REPO / "examples" / "sweeps" / "kth.toml").read_text()
                    .replace('"../../python', f'"{REPO}/python').replace('seed = [1, 2]', 'seed = [1]')
                    .replace('"workload.estimates" = ["requested", "exact"]', '"workload.max_jobs" = [400]'))
    assert run_cli(["sweep", str(spec), "--out", str(d / "sweep"), "-j", "1"]).exit_code == 0
    r = run_cli(["report", str(d / "sweep"), "--out", str(d / "sweep.html")])
    assert r.exit_code == 0, r.stderr
    run = d / "proc"
    assert run_cli(["simulate", str(REPO / "examples" / "choi-nas-small.toml"), "--out", str(run),
                    "--timeline"]).exit_code == 0
    r = run_cli(["report", str(run), "--start", "0", "--end", "0.5", "--slots", "10"])
    assert r.exit_code == 0, r.stderr
    return {"sweep": d / "sweep.html", "proc": run / "report.html"}


def test_report_has_sections_tables_and_plots(reports: dict[str, Path]) -> None:
    text = reports["sweep"].read_text()
    for h in ("summary", "per-policy", "over-time", "window"):
        assert f'id="{h}"' in text
    assert len(re.findall(r'<img src="data:image/png;base64,', text)) == 4
    assert text.count('<th scope="row">') == 3  # fcfs, easy, conservative
    assert "policy=conservative" in text
    assert "http" not in text.replace("http-equiv", "")  # self-contained: no external resources
    proc = reports["proc"].read_text()
    assert "Ousterhout-matrix view" in proc and "0–0.5 s" in proc


def test_report_errors(tmp_path: Path) -> None:
    r = run_cli(["report", str(tmp_path)])
    assert r.exit_code == 2 and "no summary.json" in r.stderr


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI (.ci/run installs the Debian package)")
        pytest.skip("chromium not installed")
    return exe


@pytest.mark.parametrize("which", ["sweep", "proc"])
def test_report_renders_in_headless_chromium(reports: dict[str, Path], which: str, tmp_path: Path) -> None:
    exe = _chromium()
    url = reports[which].resolve().as_uri()
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([exe, *flags, "--virtual-time-budget=10000", "--enable-logging=stderr", "--v=0",
                          "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'data-images-ok="(\d+)" data-images="(\d+)"', dom.stdout)
    assert m, dom.stdout[:500]
    assert int(m[1]) == int(m[2]) > 0
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
    shot = tmp_path / "shot.png"
    r = subprocess.run([exe, *flags, f"--screenshot={shot}", "--window-size=1280,2400", url],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    img = mpimg.imread(shot)
    assert img.shape[0] == 2400 and img.shape[1] == 1280
    assert img[..., :3].std() > 0.05  # not a blank page
