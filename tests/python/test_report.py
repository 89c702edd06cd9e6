"""`cosched report`: the HTML holds the expected sections and embedded plots; runs of a sweep that differ only by
their seed are grouped per policy; the Ousterhout matrix comes from the job-level gang rows or a process-level
gang timeline; the plotted power integrates to the summary's energy; the page renders in headless Chromium
(every image decoded, no console message, the expected elements in the DOM; a positive control shows that a
console error would be caught) and its screenshot matches a committed reference within a tolerance.

The reference (`tests/python/data/report_proc_ref.png`, 40 x 75 grey levels, each the mean of a 32 x 32 pixel
block of the 1280 x 2400 screenshot) is rewritten by running this file with COSCHED_UPDATE_REPORT_REF=1."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from coscheduling import report
from coscheduling.cli import DEMO_TRACE

from conftest import REPO, run_cli

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--force-device-scale-factor=1"]
REFERENCE = Path(__file__).parent / "data" / "report_proc_ref.png"
BLOCK = 32


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("report")
    spec = d / "sweep.toml"
    spec.write_text((REPO / "examples" / "sweeps" / "kth.toml").read_text()
                    .replace('"../../python', f'"{REPO}/python')
                    .replace('"workload.estimates" = ["requested", "exact"]', '"workload.max_jobs" = [400]'))
    assert run_cli(["sweep", str(spec), "--out", str(d / "sweep"), "-j", "1"]).exit_code == 0
    r = run_cli(["report", str(d / "sweep"), "--out", str(d / "sweep.html")])
    assert r.exit_code == 0, r.stderr
    run = d / "proc"
    assert run_cli(["simulate", str(REPO / "examples" / "choi-nas-small.toml"), "--out", str(run),
                    "--timeline"]).exit_code == 0
    # A fixed provenance, so that the page (and its screenshot) does not change with the commit.
    summary = json.loads((run / "summary.json").read_text())
    summary["provenance"].update(git_commit="fixed-for-the-screenshot", version="0.0.0")
    (run / "summary.json").write_text(json.dumps(summary, indent=2))
    r = run_cli(["report", str(run), "--start", "0", "--end", "0.5", "--slots", "10"])
    assert r.exit_code == 0, r.stderr
    gang = d / "gang"
    assert run_cli(["simulate", str(REPO / "examples" / "choi-nas-gang.toml"), "--out", str(gang),
                    "--timeline"]).exit_code == 0
    assert run_cli(["report", str(gang), "--start", "0", "--end", "5"]).exit_code == 0
    fluid = d / "fluid"
    for policy in ("gang[rows=3]", "timeshare[scheme=hybrid,mpl=3]"):
        out = fluid / policy.split("[")[0]
        assert run_cli(["simulate", "--trace", str(DEMO_TRACE), "--policy", policy, "--max-jobs", "500",
                        "--out", str(out)]).exit_code == 0
    assert run_cli(["report", str(fluid)]).exit_code == 0
    return {"sweep": d / "sweep.html", "proc": run / "report.html", "gang": gang / "report.html",
            "fluid": fluid / "report.html", "sweep_dir": d / "sweep", "proc_dir": run, "gang_dir": gang,
            "fluid_dir": fluid}


def test_report_has_sections_tables_and_plots(reports: dict[str, Path]) -> None:
    text = reports["sweep"].read_text()
    for h in ("summary", "per-policy", "over-time", "window", "energy-check"):
        assert f'id="{h}"' in text
    # Per-policy plot, over time, Gantt, slot view; no matrix (batch policies), said so.
    assert len(re.findall(r'<img src="data:image/png;base64,', text)) == 4
    assert 'id="matrix-none"' in text
    assert text.count('<th scope="row">') == 6  # fcfs, easy, conservative x 2 seeds
    assert "policy=conservative" in text and "seeds of a sweep point pooled" in text
    assert "http" not in text.replace("http-equiv", "")  # self-contained: no external resources
    proc = reports["proc"].read_text()
    assert "Slot view" in proc and "0–0.5 s" in proc and 'id="matrix-none"' in proc
    for key in ("gang", "fluid"):
        page = reports[key].read_text()
        assert "Ousterhout matrix (rows x nodes)" in page and 'id="matrix-none"' not in page
    assert "rows from the timeline" in reports["gang"].read_text()
    assert "job-level gang: rows from the job table" in reports["fluid"].read_text()


def test_report_errors(tmp_path: Path) -> None:
    r = run_cli(["report", str(tmp_path)])
    assert r.exit_code == 2 and "no summary.json" in r.stderr


def test_sweep_runs_are_grouped_per_policy_over_seeds(reports: dict[str, Path]) -> None:
    runs = report.find_runs(reports["sweep_dir"])
    groups = report.groups(runs)
    assert [len(g) for _, g in groups] == [2, 2, 2]
    assert [k for k, _ in groups] == ["policy=fcfs max_jobs=400", "policy=easy max_jobs=400",
                                      "policy=conservative max_jobs=400"]
    for key, g in groups:
        assert {r.labels["seed"] for r in g} == {1, 2}
        assert {r.summary["policy"] for r in g} == {key.split()[0].split("=")[1]}


def test_plotted_power_integrates_to_the_summary_energy(reports: dict[str, Path], tmp_path: Path) -> None:
    runs = [*report.find_runs(reports["sweep_dir"]), *report.find_runs(reports["fluid_dir"]),
            *report.find_runs(reports["proc_dir"]), *report.find_runs(reports["gang_dir"])]
    assert {r.summary["policy"].split("[")[0].split("+")[0] for r in runs} == {
        "fcfs", "easy", "conservative", "gang", "timeshare"}
    # The process-level runs again without their timeline: the curve rebuilt from the job table.
    for src in (reports["proc_dir"], reports["gang_dir"]):
        bare = tmp_path / src.name
        shutil.copytree(src, bare)
        (bare / "timeline.parquet").unlink()
        runs += report.find_runs(bare)
    for r in runs:
        t, busy = report.busy_curve(r)
        assert (np.diff(t) >= 0).all()
        assert (busy >= 0).all() and (busy <= r.summary["machine_procs"] + 1e-9).all()
        assert t[0] == pytest.approx(r.summary["first_submit_s"]) and t[-1] == pytest.approx(r.summary["last_end_s"])
        assert report.energy_of(r) == pytest.approx(r.summary["energy_j"], rel=1e-9), r.label
    # Time sharing stacks processes: the busy processors reach the whole machine and never pass it.
    ts = next(r for r in runs if r.summary["policy"].startswith("timeshare"))
    assert report.busy_curve(ts)[1].max() == pytest.approx(ts.summary["machine_procs"])


def test_ousterhout_matrix_from_gang_rows_and_from_a_gang_timeline(reports: dict[str, Path]) -> None:
    fluid = next(r for r in report.find_runs(reports["fluid_dir"]) if r.summary["policy"].startswith("gang"))
    lo = float(fluid.summary["first_submit_s"])
    hi = lo + 0.05 * float(fluid.summary["makespan_s"])
    m, jobs, source = report.ousterhout_matrix(fluid, lo, hi)
    assert "gang_row" in source and m.shape == (int(fluid.jobs["gang_row"].max()) + 1, 100)
    assert len(jobs) > 3 and (m >= 0).sum() > 0
    for row in range(m.shape[0]):
        for node in range(m.shape[1]):
            j = m[row, node]
            if j >= 0:
                assert fluid.jobs["gang_row"].iloc[j] == row
                assert node in report._expand(fluid.jobs["node_list"].iloc[j])
                assert fluid.jobs["start_s"].iloc[j] < hi and fluid.jobs["end_s"].iloc[j] > lo
    # Process level (examples/choi-nas-gang.toml: 16 nodes, 3 rows, PACKING). Job table: CG (16 processes, row 0)
    # ends at 1.6 s; IS (8, at 1 s) goes to row 1 on nodes 0-7; EP (4, at 2 s) to the emptied row 0 on nodes
    # 0-3; MG (16, at 3 s) to row 2; SP (9, at 4 s) to row 0 on nodes 4-12. The timeline gives the groups of
    # jobs that run together, numbered in order of their first slot in the window.
    proc = report.find_runs(reports["gang_dir"])[0]
    j = proc.jobs
    assert list(j["node_list"]) == ["0-15", "0-7", "0-3", "0-15", "4-12"] and j["end_s"].iloc[0] < 2.0
    m, jobs, source = report.ousterhout_matrix(proc, 2.5, 5.0)
    assert "timeline" in source
    assert {tuple(r) for r in m} == {(2,) * 4 + (4,) * 9 + (-1,) * 3, (1,) * 8 + (-1,) * 8, (3,) * 16}
    # Over 0-5 s, EP and SP take the row CG left: CG held those cells longest.
    m, _, _ = report.ousterhout_matrix(proc, 0.0, 5.0)
    np.testing.assert_array_equal(m, np.array([[0] * 16, [1] * 8 + [-1] * 8, [3] * 16]))
    # Not gang-scheduled: no matrix.
    assert report.ousterhout_matrix(report.find_runs(reports["proc_dir"])[0], 0.0, 0.5) is None
    assert report.gang_params("gang[quantum_ms=50,rows=2]+nls") == {"quantum_s": 0.05, "switch_s": 0.001,
                                                                    "alternate": False}
    assert report.gang_params("easy") is None


def _gantt_pixels(draw) -> np.ndarray:  # noqa: ANN001
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 2))
    draw(ax)
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.6, 1.6)
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba()).copy()
    plt.close(fig)
    return pixels


def test_gantt_bars_are_one_collection_drawn_as_broken_barh_draws_them() -> None:
    import pandas as pd

    occ = pd.DataFrame({"lane": [7, 3, 7, 3], "job": [1, 0, 0, 1], "start": [2.0, 0.0, 1.0, 4.5],
                        "end": [5.0, 4.0, 3.0, 9.0], "kind": ["spin", "useful", "useful", "useful"]})
    index = {3: 0, 7: 1}
    color = report._colors([0, 1])
    bars = report._gantt_bars(occ, index, color)
    # By hand: order (job, kind, lane) = (0, useful, 3), (0, useful, 7), (1, spin, 7), (1, useful, 3); a bar
    # spans its lane's row index +- 0.4. Job 1's spin interval [2, 5] on lane 7 (row 1): corners (2, 0.6),
    # (2, 1.4), (5, 1.4), (5, 0.6), alpha 0.35; the others opaque.
    verts = [p.vertices[:4] for p in bars.get_paths()]
    np.testing.assert_allclose(verts[2], [[2, 0.6], [2, 1.4], [5, 1.4], [5, 0.6]])
    np.testing.assert_allclose(verts[0], [[0, -0.4], [0, 0.4], [4, 0.4], [4, -0.4]])
    assert bars.get_facecolor()[:, 3].tolist() == pytest.approx([1.0, 1.0, 0.35, 1.0])

    def reference(ax) -> None:  # noqa: ANN001
        # The former drawing: one broken_barh per (job, kind, lane).
        for (job, kind, lane), g in occ.groupby(["job", "kind", "lane"]):
            ax.broken_barh(list(zip(g["start"], g["end"] - g["start"], strict=True)), (index[lane] - 0.4, 0.8),
                           facecolors=color[job], alpha=0.35 if kind == "spin" else 1.0, linewidth=0)

    one = _gantt_pixels(lambda ax: ax.add_collection(report._gantt_bars(occ, index, color), autolim=False))
    assert (one == _gantt_pixels(reference)).all()


def test_the_window_gantt_chart_is_one_collection(reports: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # A process-level gang timeline has thousands of (job, kind, lane) groups in the window; each added its own
    # collection (and re-autoscaled the axes), which made `cosched report` of a sweep take minutes.
    counts = []
    png = report._png

    def counting(fig) -> str:  # noqa: ANN001
        counts.append(len(fig.axes[0].collections))
        return png(fig)

    monkeypatch.setattr(report, "_png", counting)
    run = report.find_runs(reports["gang_dir"])[0]
    report._window_views(run, 0.0, 5.0, 24)
    assert counts[0] == 1, counts


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI (.ci/run installs the Debian package)")
        pytest.skip("chromium not installed")
    return exe


def _dump_dom(exe: str, url: str, profile: Path) -> subprocess.CompletedProcess[str]:
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    return subprocess.run([exe, *flags, "--virtual-time-budget=10000", "--enable-logging=stderr", "--v=0",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120)


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


class _Dom(HTMLParser):
    """Counts the rendered DOM's elements of interest."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tags: dict[str, int] = {}
        self.body: dict[str, str] = {}
        self.captions: list[str] = []
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "body":
            self.body = {k: str(v) for k, v in a.items()}
        self._in_caption = tag == "figcaption"

    def handle_endtag(self, tag: str) -> None:
        if tag == "figcaption":
            self._in_caption = False

    def handle_data(self, data: str) -> None:
        if self._in_caption:
            self.captions.append(data)


def test_chromium_catches_a_console_error(tmp_path: Path) -> None:
    """Positive control: the same flags report a page's console error, so an empty list below means none."""
    exe = _chromium()
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('deliberate error');</script>"
                    "</body></html>")
    dom = _dump_dom(exe, page.resolve().as_uri(), tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert any("deliberate error" in line for line in _console(dom.stderr)), dom.stderr[-2000:]


@pytest.mark.parametrize("which,figures", [("sweep", 4), ("proc", 4), ("gang", 5), ("fluid", 5)])
def test_report_renders_in_headless_chromium(reports: dict[str, Path], which: str, figures: int,
                                             tmp_path: Path) -> None:
    exe = _chromium()
    dom = _dump_dom(exe, reports[which].resolve().as_uri(), tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not _console(dom.stderr), _console(dom.stderr)
    parsed = _Dom()
    parsed.feed(dom.stdout)
    # The page's script ran (it sets these attributes) and every image decoded.
    assert parsed.body.get("data-images") == parsed.body.get("data-images-ok") == str(figures)
    assert {"summary", "per-policy", "over-time", "window", "energy-check"} <= parsed.ids
    assert parsed.tags.get("img") == figures and parsed.tags.get("figure") == figures
    assert parsed.tags.get("table") == 1 and parsed.tags.get("h1") == 1
    captions = " ".join(parsed.captions)
    assert "Response time and bounded slowdown per policy" in captions and "Per-node Gantt chart" in captions
    assert ("Ousterhout matrix (rows x nodes)" in captions) == (which in ("gang", "fluid"))


def _blocks(png: Path) -> np.ndarray:
    img = np.asarray(Image.open(png).convert("L"), dtype=float) / 255.0
    h, w = img.shape[0] // BLOCK * BLOCK, img.shape[1] // BLOCK * BLOCK
    return img[:h, :w].reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK).mean(axis=(1, 3))


def test_report_screenshot_matches_the_reference(reports: dict[str, Path], tmp_path: Path) -> None:
    exe = _chromium()
    shot = tmp_path / "shot.png"
    r = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                        "--window-size=1280,2400", reports["proc"].resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    got = _blocks(shot)
    assert got.shape == (75, 40)
    if os.environ.get("COSCHED_UPDATE_REPORT_REF"):
        REFERENCE.parent.mkdir(exist_ok=True)
        Image.fromarray(np.round(got * 255).astype(np.uint8), mode="L").save(REFERENCE)
    ref = np.asarray(Image.open(REFERENCE).convert("L"), dtype=float) / 255.0
    diff = np.abs(got - ref)
    # Tolerance: font hinting and anti-aliasing move a block's mean by a few grey levels; a missing or moved
    # figure, table or heading changes whole blocks by far more.
    assert diff.mean() < 0.01 and diff.max() < 0.15, (diff.mean(), diff.max())
    # Regions: the heading (top left) has dark text on white, the plots below are not blank.
    assert got[:3, :20].min() < 0.8 and got[:3, :].max() > 0.95
    assert got[10:, :].std() > 0.05
