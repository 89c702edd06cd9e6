"""Plots of run outputs: the per-node Gantt chart of a process-level timeline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

__all__ = ["gantt", "merge_spans"]

#: The Gantt chart's width (inches) and resolution (dots per inch).
FIG_WIDTH_IN = 11
DPI = 110

#: Kinds of timeline segments (docs/formats/timeline.md) and how they are drawn.
_STYLE = {
    "useful": {"alpha": 1.0, "hatch": None},
    "spin": {"alpha": 0.35, "hatch": "////"},
    "switch": {"alpha": 1.0, "hatch": None, "color": "black"},
    "page_in": {"alpha": 0.8, "hatch": "xx"},
    "swap_out": {"alpha": 0.8, "hatch": "++"},
    "io": {"alpha": 0.6, "hatch": ".."},
}


def merge_spans(starts: np.ndarray, ends: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals ``[starts[i], ends[i])`` (sorted by start), with gaps shorter than
    ``gap`` closed: the starts and ends of the merged runs."""
    if len(starts) == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new_run = np.concatenate(([True], s[1:] - e[:-1] >= gap))
    first = np.flatnonzero(new_run)
    last = np.concatenate((first[1:] - 1, [len(s) - 1]))
    return s[first], e[last]


def _ranges(values: Sequence[int]) -> str:
    """Sorted integers as ranges: ``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    out: list[str] = []
    for v in values:
        if out and v == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ", ".join(out)


def gantt(
    timeline: pd.DataFrame,
    path: str | Path,
    *,
    start: float | None = None,
    end: float | None = None,
    nodes: Sequence[int] | None = None,
    title: str = "",
) -> Path:
    """Draws one lane per (node, CPU) and per node disk, segments coloured by job; spinning
    is hatched and faint, context switches black, disk page-ins cross-hatched, swap-outs plus-hatched, I/O dotted.
    The processes' own ``ready`` and ``blocked`` rows (``cpu == -2``) are not drawn.
    ``start``/``end`` (seconds) clip the window; ``nodes`` selects nodes. Writes a PNG."""
    missing = {"node", "cpu", "job", "start_s", "end_s", "kind"} - set(timeline.columns)
    if missing:
        raise ValueError(f"timeline: missing columns {sorted(missing)}")
    for name, v in (("start", start), ("end", end)):
        if v is not None and not math.isfinite(v):
            raise ValueError(f"timeline: the window's {name} must be a finite number of seconds, got {v}")
    t = timeline[timeline["cpu"] >= -1]
    lo = float(t["start_s"].min()) if start is None else float(start)
    hi = float(t["end_s"].max()) if end is None else float(end)
    if not len(t) or hi <= lo:
        raise ValueError(f"timeline: empty window [{lo}, {hi}] s")
    if nodes is not None:
        have = sorted(set(int(n) for n in t["node"]))
        absent = sorted(set(nodes) - set(have))
        if absent:
            raise ValueError(f"node(s) {absent}: not in the timeline; its nodes: {_ranges(have)}")
        t = t[t["node"].isin(list(nodes))]
    span = (float(t["start_s"].min()), float(t["end_s"].max()))
    t = t[(t["end_s"] > lo) & (t["start_s"] < hi)]
    if not len(t):
        raise ValueError(f"timeline: nothing ran in the window [{lo:g}, {hi:g}] s"
                         + (f" on node(s) {_ranges(sorted(set(nodes)))}" if nodes is not None else "")
                         + f"; the timeline spans [{span[0]:g}, {span[1]:g}] s")
    lanes = sorted({(int(n), int(c)) for n, c in zip(t["node"], t["cpu"], strict=True)})
    index = {lane: k for k, lane in enumerate(lanes)}
    jobs = sorted(set(int(j) for j in t["job"]))
    cmap = plt.get_cmap("tab20")
    color = {j: cmap(k % 20) for k, j in enumerate(jobs)}
    fig, ax = plt.subplots(figsize=(FIG_WIDTH_IN, max(2.5, 0.28 * len(lanes) + 1.2)))
    # Less than one pixel of the plot: the whole figure's width in pixels is more than the axes'.
    pixel_s = (hi - lo) / (FIG_WIDTH_IN * DPI)
    for (kind, job), grp in t.groupby(["kind", "job"], sort=True):
        style = _STYLE.get(str(kind), {"alpha": 1.0, "hatch": None})
        c = style.get("color", color[int(job)])
        for lane, rows in grp.groupby(["node", "cpu"], sort=True):
            y = index[(int(lane[0]), int(lane[1]))]
            s = rows["start_s"].clip(lower=lo).to_numpy()
            e = rows["end_s"].clip(upper=hi).to_numpy()
            ax.broken_barh(list(zip(s, e - s, strict=True)), (y - 0.4, 0.8), facecolors=c,
                           alpha=style["alpha"], linewidth=0)
            if style["hatch"]:
                # Hatching costs far more to draw than a fill: it is drawn once over each run of segments
                # that lie less than a pixel apart (thousands of spin segments a second at fine grain).
                ms, me = merge_spans(s, e, pixel_s)
                ax.broken_barh(list(zip(ms, me - ms, strict=True)), (y - 0.4, 0.8), facecolors="none",
                               alpha=style["alpha"], hatch=style["hatch"], linewidth=0)
    ax.set_yticks(range(len(lanes)), [f"n{n} {'disk' if c < 0 else f'cpu{c}'}" for n, c in lanes], fontsize=6)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time (s)")
    ax.set_title(title or f"timeline {lo:.3f}–{hi:.3f} s", fontsize=10)
    handles = [Patch(facecolor=color[j], label=f"job {j}") for j in jobs[:12]]
    handles += [Patch(facecolor="grey", alpha=0.35, hatch="////", label="spin"),
                Patch(facecolor="black", label="switch"), Patch(facecolor="grey", hatch="xx", label="page-in"),
                Patch(facecolor="grey", hatch="++", label="swap-out"),
                Patch(facecolor="grey", alpha=0.6, hatch="..", label="I/O")]
    ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return out
