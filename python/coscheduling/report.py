"""A self-contained HTML report of run results (``cosched report``).

Input: a run's output folder (``summary.json``, ``jobs.csv``, optionally ``timeline.parquet``), or a
folder of runs (a sweep's or an experiment's ``runs/*/``). Output: one HTML file with every plot
embedded (PNG, base64), no external resources:

- summary table, one row per run;
- response time and bounded slowdown per policy: in a sweep, the runs that differ only by their seed
  are one group (their jobs pooled);
- utilization and energy over time: the busy processors over time, rebuilt from the job table (each
  job's CPU time, ``energy_j x ppn / busy_watts``, spread over its execution; busy time not owned by a
  job, e.g. gang switches, spread over the time some job runs), capped at the machine; the power curve
  integrates to the summary's ``energy_j`` (shown beside it);
- for one run and time window: a per-node Gantt chart; the Ousterhout matrix (rows x nodes, each cell
  the job that held it longest in the window) of a gang-scheduled run, from the job table's ``gang_row``
  (job-level ``gang[...]``) or, for a process-level ``gang[...]`` run with a timeline, from the timeline
  (jobs that run at the same time share a row); and a slot view (time slots x nodes, each cell the job
  that held the node longest in the slot; slots of one quantum plus switch for a gang run).
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from .output import write_atomic  # noqa: E402

__all__ = ["Run", "find_runs", "build_html", "write_report"]


@dataclass
class Run:
    label: str
    folder: Path
    summary: dict[str, Any]
    jobs: pd.DataFrame
    #: The run's swept values (a sweep's or experiment's table), if any.
    labels: dict[str, Any] | None = None

    @property
    def timeline_path(self) -> Path:
        return self.folder / "timeline.parquet"


def _label(folder: Path, summary: dict[str, Any], extra: dict[str, Any] | None) -> str:
    if extra:
        return " ".join(f"{k.split('.')[-1]}={v}" for k, v in extra.items())
    return f"{summary.get('policy', '?')} {folder.name}"


def find_runs(root: str | Path) -> list[Run]:
    """The runs under ``root`` (itself a run folder, or holding ``runs/*/`` or ``*/`` run folders)."""
    r = Path(root)
    if not r.is_dir():
        raise ValueError(f"{r}: not a folder of results")
    if (r / "summary.json").is_file():
        folders = [r]
    else:
        folders = sorted(p.parent for p in r.glob("runs/*/summary.json")) or sorted(
            p.parent for p in r.glob("*/summary.json"))
    if not folders:
        raise ValueError(f"{r}: no summary.json here, in runs/*/ or in */")
    labels: dict[str, dict[str, Any]] = {}
    for table in ("results.parquet", "runs.csv"):
        p = r / table
        if p.is_file():
            df = pd.read_parquet(p) if table.endswith(".parquet") else pd.read_csv(p)
            keep = [c for c in df.columns if c == "run" or "." in c or c in
                    ("scheme", "placement", "seed", "class", "app", "memory_aware")]
            for row in df[keep].to_dict(orient="records"):
                labels[str(row.pop("run"))] = row
            break
    runs = []
    for f in folders:
        summary = json.loads((f / "summary.json").read_text(encoding="utf-8"))
        jobs = pd.read_csv(f / "jobs.csv")
        runs.append(Run(_label(f, summary, labels.get(f.name)), f, summary, jobs, labels.get(f.name)))
    if labels:
        order = {k: i for i, k in enumerate(labels)}
        runs.sort(key=lambda r: order.get(r.folder.name, len(order)))
    return runs


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(data: str, alt: str) -> str:
    return f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}"><figcaption>' \
           f'{html.escape(alt)}</figcaption></figure>'


SUMMARY_COLUMNS = [
    ("jobs_total", "jobs", 0), ("mean_wait_s", "mean wait s", 1), ("mean_response_s", "mean response s", 1),
    ("mean_bounded_slowdown", "mean bounded slowdown", 2), ("utilization", "utilization", 3),
    ("makespan_s", "makespan s", 0), ("energy_j", "energy MJ", 3),
]


def _summary_table(runs: Sequence[Run]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _ in SUMMARY_COLUMNS)
    rows = []
    for r in runs:
        cells = []
        for key, _, digits in SUMMARY_COLUMNS:
            v = r.summary.get(key)
            if key == "energy_j" and isinstance(v, int | float):
                v = v / 1e6
            cells.append(f"<td>{'—' if v is None else f'{v:,.{digits}f}'}</td>")
        rows.append(f"<tr><th scope=\"row\">{html.escape(r.label)}</th>{''.join(cells)}</tr>")
    return f'<table class="summary"><thead><tr><th>run</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def groups(runs: Sequence[Run]) -> list[tuple[str, list[Run]]]:
    """Runs grouped for the per-policy plots: in a sweep, runs whose swept values differ only by ``seed``
    form one group (labelled by the other values, e.g. the policy); otherwise each run is its own group."""
    out: dict[str, list[Run]] = {}
    for r in runs:
        if r.labels and "seed" in r.labels and len(r.labels) > 1:
            key = " ".join(f"{k.split('.')[-1]}={v}" for k, v in r.labels.items() if k != "seed")
        else:
            key = r.label
        out.setdefault(key, []).append(r)
    return list(out.items())


def _per_policy(runs: Sequence[Run]) -> str:
    grouped = groups(runs)
    fig, axes = plt.subplots(1, 2, figsize=(12, max(3.0, 0.35 * len(grouped) + 1.5)))
    labels = [f"{k} ({len(g)} runs)" if len(g) > 1 else k for k, g in grouped]
    for ax, col, title in ((axes[0], "response_s", "response time (s)"),
                           (axes[1], "bounded_slowdown", "bounded slowdown")):
        data = [np.concatenate([r.jobs[col].dropna().to_numpy() for r in g]) for _, g in grouped]
        ax.boxplot([d if len(d) else np.array([np.nan]) for d in data], orientation="horizontal", tick_labels=labels,
                   showfliers=False)
        ax.scatter([float(np.mean(d)) if len(d) else np.nan for d in data], range(1, len(grouped) + 1), marker="D",
                   color="C3", zorder=3, label="mean")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(title)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    pooled = any(len(g) > 1 for _, g in grouped)
    return _img(_png(fig), "Response time and bounded slowdown per policy" + (
        " (the seeds of a sweep point pooled)" if pooled else "") + " (box: quartiles, whiskers 1.5 IQR, diamond: "
        "mean)")


def busy_curve(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """Busy processors over time, a step function: ``busy[k]`` holds on ``[t[k], t[k+1])``, from
    ``first_submit_s`` to ``last_end_s``. Each job's CPU time (its energy share ``energy_j`` times
    ``procs_per_node / busy_watts``: processors x execution for a job that owns its processors, its processes'
    CPU time under time sharing) is spread evenly over its execution; busy time the summary counts beyond the
    jobs' (gang switches, charged to every processor while a job runs) is spread evenly over the time some job
    runs. Capped at the machine's processors (busy time above the machine is carried to the next instants with
    room, so the total is kept). With a process-level timeline, the busy CPUs of the timeline. Power is
    ``idle_watts x nodes + (busy_watts - idle_watts) x busy / procs_per_node``, so the integral is the summary's
    energy."""
    s = run.summary
    plat = (s.get("provenance") or {}).get("platform") or {}
    procs, ppn = float(s.get("machine_procs") or 0), float(s.get("procs_per_node") or 1)
    busy_w = float(plat.get("busy_watts") or 0.0)
    lo, hi = float(s.get("first_submit_s") or 0.0), float(s.get("last_end_s") or 0.0)
    if not hi > lo or busy_w <= 0 or procs <= 0:
        return np.array([lo, hi]), np.zeros(1)
    if run.timeline_path.is_file():
        # A process-level timeline: the busy CPUs themselves (useful work, spinning, context switches).
        tl = pd.read_parquet(run.timeline_path, columns=["cpu", "start_s", "end_s"])
        tl = tl[(tl["cpu"] >= 0) & (tl["end_s"] > tl["start_s"])]
        a, b = tl["start_s"].to_numpy(float), tl["end_s"].to_numpy(float)
        return _steps(lo, hi, [a, b], [np.ones(len(a)), -np.ones(len(b))], procs)
    ran = run.jobs.dropna(subset=["start_s", "end_s"])
    ran = ran[ran["end_s"] > ran["start_s"]]
    start, end = ran["start_s"].to_numpy(float), ran["end_s"].to_numpy(float)
    cpu = ran["energy_j"].to_numpy(float) * ppn / busy_w
    rate = cpu / (end - start)
    times, deltas = [start, end], [rate, -rate]
    # Busy time the jobs do not own, over the union of their executions.
    extra = float(s.get("utilization") or 0.0) * procs * (hi - lo) - float(cpu.sum())
    if len(start):
        order = np.argsort(start, kind="stable")
        us, ue = [start[order[0]]], [end[order[0]]]
        for a, b in zip(start[order[1:]], end[order[1:]], strict=True):
            if a <= ue[-1]:
                ue[-1] = max(ue[-1], b)
            else:
                us.append(a)
                ue.append(b)
        span = float(np.sum(np.array(ue) - np.array(us)))
        if extra > 1e-9 * max(1.0, float(cpu.sum())) and span > 0:
            r = np.full(len(us), extra / span)
            times += [np.array(us), np.array(ue)]
            deltas += [r, -r]
    return _steps(lo, hi, times, deltas, procs)


def _steps(lo: float, hi: float, times: list[np.ndarray], deltas: list[np.ndarray],
           cap: float) -> tuple[np.ndarray, np.ndarray]:
    """The step function of the summed changes ``deltas`` at ``times``, on ``[lo, hi]``, clipped to ``[0, cap]``."""
    t = np.concatenate([[lo], *times, [hi]])
    d = np.concatenate([[0.0], *deltas, [0.0]])
    order = np.argsort(t, kind="stable")
    t, level = t[order], np.cumsum(d[order])
    # One step per distinct time: the level after every change at that time.
    last = np.r_[t[1:] != t[:-1], True]
    t, level = t[last], level[last]
    keep = (t >= lo) & (t <= hi)
    before = level[t < lo][-1] if (t < lo).any() else 0.0
    t, level = t[keep], level[keep]
    if t[0] > lo:
        t, level = np.r_[lo, t], np.r_[before, level]
    busy = np.clip(level[:-1], 0.0, None)
    if (busy > cap).any():
        # Busy time above the machine (spreading each job's CPU time evenly over its execution can stack more
        # than the machine at times) is carried to the next instants with room, so the total is kept.
        dt = np.diff(t)
        carry = 0.0
        for k in range(len(busy)):
            want = busy[k] * dt[k] + carry
            got = min(want, cap * dt[k])
            carry = want - got
            busy[k] = got / dt[k] if dt[k] > 0 else min(busy[k], cap)
    return t, busy


def power_of(run: Run, busy: np.ndarray) -> np.ndarray:
    s = run.summary
    plat = (s.get("provenance") or {}).get("platform") or {}
    idle_w, busy_w = float(plat.get("idle_watts") or 0.0), float(plat.get("busy_watts") or 0.0)
    nodes, ppn = float(s.get("machine_nodes") or 1), float(s.get("procs_per_node") or 1)
    return idle_w * nodes + (busy_w - idle_w) * busy / ppn


def energy_of(run: Run) -> float:
    """The integral of the plotted power, J (compare with the summary's ``energy_j``)."""
    t, busy = busy_curve(run)
    return float(np.sum(power_of(run, busy) * np.diff(t)))


def _over_time(runs: Sequence[Run]) -> str:
    fig, axes = plt.subplots(2, 1, figsize=(12, 6), sharex=False)
    notes = []
    for r in runs[:10]:
        t, busy = busy_curve(r)
        if len(t) < 2:
            continue
        procs = r.summary.get("machine_procs") or 1
        axes[0].step(t, np.r_[busy, busy[-1:]] / procs, where="post", lw=0.8, label=r.label)
        energy = np.concatenate([[0.0], np.cumsum(power_of(r, busy) * np.diff(t))]) / 1e6
        axes[1].plot(t, energy, lw=0.8, label=r.label)
        notes.append(f"{html.escape(r.label)}: {energy[-1]:,.4f} MJ (summary energy_j "
                     f"{(r.summary.get('energy_j') or 0.0) / 1e6:,.4f} MJ)")
    axes[0].set_ylabel("busy / processors")
    axes[0].set_title("Busy processors over time, as a fraction of the machine", fontsize=10)
    axes[1].set_ylabel("energy, MJ (cumulative)")
    axes[1].set_xlabel("time (s)")
    axes[1].set_title("Energy over time: idle power of every node + busy power of the busy processors",
                      fontsize=10)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return _img(_png(fig), "Utilization and energy over time (first 10 runs)") + (
        '<p class="meta" id="energy-check">Integral of the plotted power: ' + "; ".join(notes) + "</p>")


def _expand(spec: str) -> list[int]:
    out: list[int] = []
    for part in str(spec).split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part.strip():
            out.append(int(part))
    return out


def _occupancy(run: Run, lo: float, hi: float) -> pd.DataFrame:
    """Intervals (lane, job, start, end) in the window: CPU lanes from the timeline when recorded,
    else processors from the job table's node lists."""
    if run.timeline_path.is_file():
        tl = pd.read_parquet(run.timeline_path)
        tl = tl[(tl["cpu"] >= 0) & (tl["end_s"] > lo) & (tl["start_s"] < hi)]
        return pd.DataFrame({"lane": tl["node"], "job": tl["job"], "start": tl["start_s"].clip(lower=lo),
                             "end": tl["end_s"].clip(upper=hi), "kind": tl["kind"]})
    rows = []
    ran = run.jobs.dropna(subset=["start_s", "end_s"])
    ran = ran[(ran["end_s"] > lo) & (ran["start_s"] < hi)]
    for j, s, e, nl in zip(ran["job_id"], ran["start_s"], ran["end_s"], ran["node_list"].astype(str), strict=True):
        for lane in _expand(nl):
            rows.append((lane, j, max(s, lo), min(e, hi), "useful"))
    return pd.DataFrame(rows, columns=["lane", "job", "start", "end", "kind"])


def gang_params(policy: str) -> dict[str, Any] | None:
    """``quantum_s``, ``switch_s`` and ``alternate`` of a gang policy name (``gang[...]``, at process level
    ``gang[...]+NODE_POLICY``), with the defaults of both levels; None for any other policy."""
    from . import _core

    try:
        name, items = _core.parse_spec((policy or "").split("+", 1)[0])
    except ValueError:
        return None
    if name != "gang":
        return None
    kv = dict(items)
    try:
        return {"quantum_s": float(kv.get("quantum_ms", 100)) / 1e3, "switch_s": float(kv.get("switch_us", 1000)) / 1e6,
                "alternate": kv.get("alternate", "false").lower() == "true"}
    except ValueError:
        return None


def _held(cells: dict[tuple[int, int], dict[int, float]], row: int, node: int, job: int, t: float) -> None:
    d = cells.setdefault((row, node), {})
    d[job] = d.get(job, 0.0) + t


def ousterhout_matrix(run: Run, lo: float, hi: float) -> tuple[np.ndarray, list[int], str] | None:
    """The Ousterhout matrix of a gang-scheduled run over ``[lo, hi)``: ``m[row, node]`` is the job (its
    job-table index) that held that cell longest in the window, -1 if none; the job indices in the matrix;
    and where the rows come from. Job-level ``gang[...]``: the job table's ``gang_row``. Process-level
    ``gang[...]`` with a timeline: jobs whose processes ran at the same instant share a row (only the active
    row runs); such groups are numbered in order of their first slot in the window and a group that starts
    after another ended may take its row (the timeline does not record row numbers). None when the run is
    not gang-scheduled (or, at process level, has no timeline or uses alternate scheduling)."""
    nodes = int(run.summary.get("machine_nodes") or 0)
    cells: dict[tuple[int, int], dict[int, float]] = {}
    jobs = run.jobs
    if "gang_row" in jobs.columns and (jobs["gang_row"] >= 0).any():
        source = "job-level gang: rows from the job table's gang_row"
        ran = jobs[(jobs["gang_row"] >= 0) & (jobs["end_s"] > lo) & (jobs["start_s"] < hi)]
        for j, row, st, en, nl in zip(ran.index, ran["gang_row"], ran["start_s"], ran["end_s"],
                                      ran["node_list"].astype(str), strict=True):
            for node in _expand(nl):
                _held(cells, int(row), node, int(j), min(en, hi) - max(st, lo))
        rows = int(jobs["gang_row"].max()) + 1
    else:
        g = gang_params(str(run.summary.get("policy", "")))
        if g is None or g["alternate"] or not run.timeline_path.is_file():
            return None
        tl = pd.read_parquet(run.timeline_path)
        tl = tl[(tl["cpu"] >= 0) & (tl["end_s"] > lo) & (tl["start_s"] < hi)]
        if tl.empty:
            return None
        source = "process-level gang: rows from the timeline (jobs running at the same instant share a row)"
        spans: dict[int, list[tuple[float, float]]] = {}
        for j, a, b in zip(tl["job"], tl["start_s"].clip(lower=lo), tl["end_s"].clip(upper=hi), strict=True):
            spans.setdefault(int(j), []).append((float(a), float(b)))
        # Union-find over "ran at the same instant" (a sweep over the sorted intervals).
        parent = {j: j for j in spans}

        def find(j: int) -> int:
            while parent[j] != j:
                parent[j] = parent[parent[j]]
                j = parent[j]
            return j

        ivs = sorted((a, b, j) for j, v in spans.items() for a, b in v)
        active: list[tuple[float, int]] = []
        for a, b, j in ivs:
            active = [(e, k) for e, k in active if e > a]
            for _, k in active:
                parent[find(k)] = find(j)
            active.append((b, j))
        groups: dict[int, list[int]] = {}
        for j in spans:
            groups.setdefault(find(j), []).append(j)
        extent = {r: (min(a for j in g for a, _ in spans[j]), max(b for j in g for _, b in spans[j]))
                  for r, g in groups.items()}
        row_end: list[float] = []
        row_of: dict[int, int] = {}
        for r in sorted(groups, key=lambda r: extent[r]):
            a, b = extent[r]
            k = next((i for i, e in enumerate(row_end) if e <= a), None)
            if k is None:
                row_end.append(b)
                k = len(row_end) - 1
            else:
                row_end[k] = b
            for j in groups[r]:
                row_of[j] = k
        for j, node, a, b in zip(tl["job"], tl["node"], tl["start_s"].clip(lower=lo), tl["end_s"].clip(upper=hi),
                                 strict=True):
            _held(cells, row_of[int(j)], int(node), int(j), float(b - a))
        rows = len(row_end)
    if not cells:
        return None
    nodes = max(nodes, 1 + max(n for _, n in cells))
    m = np.full((rows, nodes), -1, dtype=int)
    for (row, node), held in cells.items():
        m[row, node] = min(held, key=lambda j: (-held[j], j))
    return m, sorted({int(j) for j in m.ravel() if j >= 0}), source


def _colors(jobs: Sequence[int]) -> dict[int, Any]:
    """A job's colour, by its job-table index: the same in every view of the window."""
    cmap = plt.get_cmap("tab20")
    return {int(j): cmap(int(j) % 20) for j in jobs}


def _matrix_view(run: Run, lo: float, hi: float) -> str:
    got = ousterhout_matrix(run, lo, hi)
    if got is None:
        return ('<p id="matrix-none">No Ousterhout matrix: this run is not gang-scheduled (job-level gang[...], '
                'or process-level gang[...] without alternate scheduling and with a timeline).</p>')
    m, jobs, source = got
    color = _colors(jobs)
    rows, cols = m.shape
    rgba = np.ones((rows, cols, 4))
    for r in range(rows):
        for c in range(cols):
            if m[r, c] >= 0:
                rgba[r, c] = color[int(m[r, c])]
    fig, ax = plt.subplots(figsize=(12, max(1.8, 0.45 * rows + 1.2)))
    ax.imshow(rgba, aspect="auto", interpolation="nearest")
    if cols <= 64:
        for r in range(rows):
            for c in range(cols):
                if m[r, c] >= 0:
                    ax.text(c, r, str(int(run.jobs["job_id"].iloc[m[r, c]])), ha="center", va="center", fontsize=6)
        ax.set_xticks(range(cols), [str(c) for c in range(cols)], fontsize=6)
    ax.set_yticks(range(rows), [f"row {r}" for r in range(rows)], fontsize=7)
    ax.set_xlabel("node")
    ax.set_title(f"Ousterhout matrix, {lo:g}–{hi:g} s: each cell the job (job_id) that held it longest "
                 "in the window", fontsize=10)
    fig.tight_layout()
    return _img(_png(fig), f"Ousterhout matrix (rows x nodes); {source}")


def _gantt_bars(occ: pd.DataFrame, index: dict[Any, int], color: dict[int, Any]) -> PolyCollection:
    """Every interval of ``occ`` as one bar of height 0.8 on its lane's row, in one collection (a timeline
    holds tens of thousands of segments; one collection per (job, kind, lane) cost a re-autoscale of the axes
    each). The bars are those ``broken_barh`` draws, in the same order (by job, kind, lane, then interval),
    faint (alpha 0.35) while spinning."""
    order = occ.sort_values(["job", "kind", "lane"], kind="stable")
    x0 = order["start"].to_numpy(dtype=float)
    x1 = x0 + (order["end"].to_numpy(dtype=float) - x0)
    y0 = np.array([index[lane] for lane in order["lane"]], dtype=float) - 0.4
    y1 = y0 + 0.8
    verts = np.stack([np.column_stack(p) for p in ((x0, y0), (x0, y1), (x1, y1), (x1, y0))], axis=1)
    faces = np.array([(*color[int(j)][:3], 0.35 if k == "spin" else 1.0)
                      for j, k in zip(order["job"], order["kind"], strict=True)]).reshape(-1, 4)
    return PolyCollection(verts, facecolors=faces, linewidth=0)


def _window_views(run: Run, lo: float, hi: float, slots: int) -> str:
    occ = _occupancy(run, lo, hi)
    if occ.empty:
        return "<p>No activity in this window.</p>"
    lanes = sorted(occ["lane"].unique())
    jobs = sorted(occ["job"].unique())
    color = _colors(jobs)
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.22 * len(lanes) + 1)))
    index = {lane: k for k, lane in enumerate(lanes)}
    ax.add_collection(_gantt_bars(occ, index, color), autolim=False)
    ax.set_yticks(range(len(lanes)), [str(v) for v in lanes], fontsize=6)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("node" if run.timeline_path.is_file() else "processor")
    ax.set_title(f"Gantt chart, {run.label}, {lo:g}–{hi:g} s (faint: spinning)", fontsize=10)
    fig.tight_layout()
    gantt = _img(_png(fig), "Per-node Gantt chart of the window")
    # Slot view: slot x lane, the job that held the lane longest in the slot. A process-level gang run with a
    # timeline gets slots of one quantum plus switch, from the first slot start in the window.
    g = gang_params(str(run.summary.get("policy", "")))
    if g is not None and run.timeline_path.is_file():
        step = g["quantum_s"] + g["switch_s"]
        first = float(occ["start"].min())
        n = max(1, min(slots, int(np.ceil((hi - first) / step))))
        edges = first + step * np.arange(n + 1)
        aligned = f"slots of one quantum + switch ({step * 1e3:g} ms) from {first:g} s"
    else:
        edges = np.linspace(lo, hi, slots + 1)
        aligned = f"{slots} equal slots"
    n = len(edges) - 1
    matrix = np.full((n, len(lanes)), -1, dtype=int)
    for k in range(n):
        a, b = edges[k], edges[k + 1]
        sub = occ[(occ["end"] > a) & (occ["start"] < b)]
        if sub.empty:
            continue
        held = (sub["end"].clip(upper=b) - sub["start"].clip(lower=a)).rename("held").groupby(
            [sub["lane"], sub["job"]]).sum()
        best = held.reset_index().sort_values(["held", "job"], ascending=[False, True]).drop_duplicates("lane")
        for lane, job in zip(best["lane"], best["job"], strict=True):
            matrix[k, index[lane]] = jobs.index(job)
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.25 * n + 1)))
    rgba = np.ones((n, len(lanes), 4))
    for k in range(n):
        for m in range(len(lanes)):
            if matrix[k, m] >= 0:
                rgba[k, m] = color[jobs[matrix[k, m]]]
    ax.imshow(rgba, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(lanes)), [str(v) for v in lanes], fontsize=6)
    digits = max(0, 1 - int(np.floor(np.log10(max(edges[1] - edges[0], 1e-9)))))
    ax.set_yticks(range(n), [f"{edges[k]:.{digits}f}" for k in range(n)], fontsize=6)
    ax.set_xlabel("node" if run.timeline_path.is_file() else "processor")
    ax.set_ylabel("slot start (s)")
    ax.set_title(f"Slot view ({aligned}): each cell is the job that held the node longest in the slot", fontsize=10)
    fig.tight_layout()
    slot_img = _img(_png(fig), "Slot view of the window (time slots x nodes)")
    return gantt + _matrix_view(run, lo, hi) + slot_img


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1250px;color:#222}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table.summary{border-collapse:collapse;font-size:.85rem}
table.summary th,table.summary td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}
table.summary th[scope=row]{text-align:left;font-weight:normal}
figure{margin:1rem 0}figure img{max-width:100%}figcaption{font-size:.8rem;color:#555}
.meta{font-size:.8rem;color:#555}
"""

SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img'), ok = 0;
  imgs.forEach(function (im) { if (im.complete && im.naturalWidth > 0) { ok++; } else {
    console.error('image failed to load: ' + im.alt); } });
  document.body.setAttribute('data-images-ok', String(ok));
  document.body.setAttribute('data-images', String(imgs.length));
});
"""


def build_html(runs: Sequence[Run], *, title: str, run_index: int = 0, window: tuple[float, float] | None = None,
               slots: int = 24) -> str:
    if not runs:
        raise ValueError("no runs to report")
    if not 0 <= run_index < len(runs):
        raise ValueError(f"run: must be between 0 and {len(runs) - 1}, got {run_index}")
    focus = runs[run_index]
    first = float(focus.summary.get("first_submit_s") or 0.0)
    last = float(focus.summary.get("last_end_s") or first + 1.0)
    lo, hi = window if window is not None else (first, first + max(1e-9, (last - first) * 0.1))
    if not hi > lo:
        raise ValueError(f"window: end ({hi}) must be after start ({lo})")
    prov = focus.summary.get("provenance") or {}
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">{len(runs)} run(s); cosched {html.escape(str(prov.get("version", "?")))}, commit '
        f'<code>{html.escape(str(prov.get("git_commit", "?")))}</code>. Formats: docs/formats/.</p>',
        '<h2 id="summary">Summary</h2>', _summary_table(runs),
        '<h2 id="per-policy">Response time and slowdown</h2>', _per_policy(runs),
        '<h2 id="over-time">Utilization and energy over time</h2>', _over_time(runs),
        f'<h2 id="window">Schedule of {html.escape(focus.label)}, {lo:g}–{hi:g} s</h2>',
        _window_views(focus, lo, hi, slots),
        f"<script>{SCRIPT}</script>", "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_report(results: str | Path, out: str | Path, *, run_index: int = 0,
                 window: tuple[float, float] | None = None, slots: int = 24, title: str | None = None) -> Path:
    runs = find_runs(results)
    text = build_html(runs, title=title or f"cosched report: {Path(results).resolve().name}", run_index=run_index,
                      window=window, slots=slots)
    p = Path(out)
    return write_atomic(p.parent, {p.name: lambda t: t.write_text(text, encoding="utf-8")})[0]
