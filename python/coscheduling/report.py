"""A self-contained HTML report of run results (``cosched report``).

Input: a run's output folder (``summary.json``, ``jobs.csv``, optionally ``timeline.parquet``), or a
folder of runs (a sweep's or an experiment's ``runs/*/``). Output: one HTML file with every plot
embedded (PNG, base64), no external resources: summary table, response time and bounded slowdown per
policy, utilization and energy over time, and for one run and time window a per-node Gantt chart and
an Ousterhout-matrix view (time slots x nodes, each cell the job that held the node longest in the slot).
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

from .output import write_atomic  # noqa: E402

__all__ = ["Run", "find_runs", "build_html", "write_report"]


@dataclass
class Run:
    label: str
    folder: Path
    summary: dict[str, Any]
    jobs: pd.DataFrame

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
        runs.append(Run(_label(f, summary, labels.get(f.name)), f, summary, jobs))
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


def _per_policy(runs: Sequence[Run]) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(12, max(3.0, 0.35 * len(runs) + 1.5)))
    labels = [r.label for r in runs]
    for ax, col, title in ((axes[0], "response_s", "response time (s)"),
                           (axes[1], "bounded_slowdown", "bounded slowdown")):
        data = [r.jobs[col].dropna().to_numpy() for r in runs]
        ax.boxplot([d if len(d) else np.array([np.nan]) for d in data], orientation="horizontal", tick_labels=labels,
                   showfliers=False)
        ax.scatter([float(np.mean(d)) if len(d) else np.nan for d in data], range(1, len(runs) + 1), marker="D",
                   color="C3", zorder=3, label="mean")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(title)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return _img(_png(fig), "Response time and bounded slowdown per run (box: quartiles, whiskers 1.5 IQR, "
                           "diamond: mean)")


def _busy_steps(jobs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    ran = jobs.dropna(subset=["start_s", "end_s"])
    t = np.concatenate([ran["start_s"].to_numpy(), ran["end_s"].to_numpy()])
    d = np.concatenate([ran["procs"].to_numpy(), -ran["procs"].to_numpy()]).astype(float)
    order = np.lexsort((d, t))
    return t[order], np.cumsum(d[order])


def _over_time(runs: Sequence[Run]) -> str:
    fig, axes = plt.subplots(2, 1, figsize=(12, 6), sharex=False)
    for r in runs[:10]:
        t, busy = _busy_steps(r.jobs)
        if not len(t):
            continue
        procs = r.summary.get("machine_procs") or 1
        plat = (r.summary.get("provenance") or {}).get("platform") or {}
        nodes, ppn = r.summary.get("machine_nodes") or 1, r.summary.get("procs_per_node") or 1
        idle_w, busy_w = plat.get("idle_watts", 0.0), plat.get("busy_watts", 0.0)
        axes[0].step(t, busy / procs, where="post", lw=0.8, label=r.label)
        power = idle_w * nodes + (busy_w - idle_w) * busy / ppn
        energy = np.concatenate([[0.0], np.cumsum(power[:-1] * np.diff(t))]) / 1e6
        axes[1].plot(t, energy, lw=0.8, label=r.label)
    axes[0].set_ylabel("allocated / processors")
    axes[0].set_title("Processors allocated to running jobs over time, as a fraction of the machine "
                      "(time sharing: processes per processor, can exceed 1)", fontsize=10)
    axes[1].set_ylabel("energy, MJ (cumulative)")
    axes[1].set_xlabel("time (s)")
    axes[1].set_title("Energy over time: idle power for every node + busy power for allocated processors",
                      fontsize=10)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return _img(_png(fig), "Utilization and energy over time (first 10 runs)")


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


def _window_views(run: Run, lo: float, hi: float, slots: int) -> str:
    occ = _occupancy(run, lo, hi)
    if occ.empty:
        return "<p>No activity in this window.</p>"
    lanes = sorted(occ["lane"].unique())
    jobs = sorted(occ["job"].unique())
    cmap = plt.get_cmap("tab20")
    color = {j: cmap(k % 20) for k, j in enumerate(jobs)}
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.22 * len(lanes) + 1)))
    index = {lane: k for k, lane in enumerate(lanes)}
    for (job, kind), g in occ.groupby(["job", "kind"]):
        ys = g["lane"].map(index).to_numpy()
        alpha = 0.35 if kind == "spin" else 1.0
        ax.barh(ys, (g["end"] - g["start"]).to_numpy(), left=g["start"].to_numpy(), height=0.8, color=color[job],
                alpha=alpha, linewidth=0)
    ax.set_yticks(range(len(lanes)), [str(v) for v in lanes], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("node" if run.timeline_path.is_file() else "processor")
    ax.set_title(f"Gantt chart, {run.label}, {lo:g}–{hi:g} s (faint: spinning)", fontsize=10)
    fig.tight_layout()
    gantt = _img(_png(fig), "Per-node Gantt chart of the window")
    # Ousterhout-matrix view: slot x lane, the job that held the lane longest in the slot.
    edges = np.linspace(lo, hi, slots + 1)
    matrix = np.full((slots, len(lanes)), -1, dtype=int)
    for k in range(slots):
        a, b = edges[k], edges[k + 1]
        sub = occ[(occ["end"] > a) & (occ["start"] < b)]
        if sub.empty:
            continue
        held = (sub["end"].clip(upper=b) - sub["start"].clip(lower=a)).rename("held").groupby(
            [sub["lane"], sub["job"]]).sum()
        best = held.reset_index().sort_values(["held", "job"], ascending=[False, True]).drop_duplicates("lane")
        for lane, job in zip(best["lane"], best["job"], strict=True):
            matrix[k, index[lane]] = jobs.index(job)
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.25 * slots + 1)))
    rgba = np.ones((slots, len(lanes), 4))
    for k in range(slots):
        for m in range(len(lanes)):
            if matrix[k, m] >= 0:
                rgba[k, m] = color[jobs[matrix[k, m]]]
    ax.imshow(rgba, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(lanes)), [str(v) for v in lanes], fontsize=6)
    ax.set_yticks(range(slots), [f"{edges[k]:.3g}" for k in range(slots)], fontsize=6)
    ax.set_xlabel("node" if run.timeline_path.is_file() else "processor")
    ax.set_ylabel("slot start (s)")
    ax.set_title("Ousterhout-matrix view: each cell is the job that held the node longest in the slot", fontsize=10)
    fig.tight_layout()
    matrix_img = _img(_png(fig), "Ousterhout-matrix view of the window")
    return gantt + matrix_img


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
