"""The per-node Gantt chart (`cosched gantt`, coscheduling.plots)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes

from coscheduling import plots


def test_merge_spans_closes_gaps_shorter_than_the_given_one() -> None:
    # [0,1) and [1.5,2) are 0.5 apart (< 1): one run [0,2); [5,6) is 3 after 2: a run of its own;
    # [5.2,5.5) lies inside [5,6). Unsorted input is sorted first.
    s, e = plots.merge_spans(np.array([5.0, 0.0, 1.5, 5.2]), np.array([6.0, 1.0, 2.0, 5.5]), 1.0)
    assert s.tolist() == [0.0, 5.0] and e.tolist() == [2.0, 6.0]
    # A gap exactly as long as `gap` is kept.
    s, e = plots.merge_spans(np.array([0.0, 2.0]), np.array([1.0, 3.0]), 1.0)
    assert s.tolist() == [0.0, 2.0] and e.tolist() == [1.0, 3.0]


def test_gantt_hatches_sub_pixel_runs_of_spin_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One CPU alternating 0.1 ms of useful work and 0.1 ms of spinning for 0.2 s: 1,000 segments of each.
    # The chart is 11 in x 110 dpi = 1,210 pixels wide, so a pixel is at least 0.2 s / 1,210 = 0.165 ms: the
    # 0.1 ms gaps between spin segments are below a pixel and the spin hatching is one run [0, 0.1999] s.
    # Every segment is still filled: 2,000 rectangles, all unhatched.
    n = 1000
    start = np.arange(2 * n) * 1e-4
    tl = pd.DataFrame({"node": 0, "cpu": 0, "job": 0, "rank": 0, "pid": 0, "start_s": start,
                       "end_s": start + 1e-4, "kind": ["useful", "spin"] * n})
    drawn: list[tuple[int, object]] = []
    original = Axes.broken_barh

    def spy(self, xranges, yrange, **kw):  # type: ignore[no-untyped-def]
        drawn.append((len(list(xranges)), kw.get("hatch")))
        return original(self, xranges, yrange, **kw)

    monkeypatch.setattr(Axes, "broken_barh", spy)
    plots.gantt(tl, tmp_path / "g.png", start=0.0, end=0.2)
    assert sum(k for k, h in drawn if h is None) == 2 * n
    assert [k for k, h in drawn if h is not None] == [1]
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gantt_of_nodes_the_timeline_lacks_is_an_error(tmp_path: Path) -> None:
    # Nodes 0, 1, 2 and 5 hold segments; asking for 4 and 9 names both and the nodes there are.
    tl = pd.DataFrame({"node": [0, 1, 2, 5], "cpu": 0, "job": 0, "rank": 0, "pid": 0, "start_s": 0.0,
                       "end_s": 1.0, "kind": "useful"})
    with pytest.raises(ValueError, match=r"node\(s\) \[4, 9\]: not in the timeline; its nodes: 0-2, 5"):
        plots.gantt(tl, tmp_path / "g.png", nodes=[9, 0, 4])
    assert not (tmp_path / "g.png").exists()


def test_gantt_of_a_window_where_nothing_ran_is_an_error(tmp_path: Path) -> None:
    # Segments [0, 1) s on node 0 and [2, 3) s on node 1: the window [5, 6) holds none, and node 1 has none
    # in [0, 1.5); an empty chart would say nothing, the error says where the timeline is.
    tl = pd.DataFrame({"node": [0, 1], "cpu": 0, "job": 0, "rank": 0, "pid": 0, "start_s": [0.0, 2.0],
                       "end_s": [1.0, 3.0], "kind": "useful"})
    with pytest.raises(ValueError, match=r"nothing ran in the window \[5, 6\] s; the timeline spans \[0, 3\] s"):
        plots.gantt(tl, tmp_path / "g.png", start=5.0, end=6.0)
    with pytest.raises(ValueError, match=r"window \[0, 1.5\] s on node\(s\) 1; the timeline spans \[2, 3\] s"):
        plots.gantt(tl, tmp_path / "g.png", start=0.0, end=1.5, nodes=[1])
    assert not (tmp_path / "g.png").exists()


@pytest.mark.parametrize("bound", ["start", "end"])
def test_gantt_window_bounds_must_be_finite(tmp_path: Path, bound: str) -> None:
    tl = pd.DataFrame({"node": [0], "cpu": 0, "job": 0, "rank": 0, "pid": 0, "start_s": [0.0], "end_s": [1.0],
                       "kind": "useful"})
    with pytest.raises(ValueError, match=f"the window's {bound} must be a finite number of seconds, got nan"):
        plots.gantt(tl, tmp_path / "g.png", **{bound: float("nan")})
