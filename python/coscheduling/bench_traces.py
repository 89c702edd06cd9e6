"""`cosched bench traces`: whole-trace replays (parse, simulate, metrics) per trace and policy.

Each row carries the wall times of the three phases in the core, the simulate
throughput, the whole call's wall time, and ``simulate_vs_easy``: its simulate
time over EASY's on the same trace (the figure the speed goal of conservative
backfilling is stated in; ``None`` when EASY was not run on that trace).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import _core


def replay_rows(traces: Iterable[Path], policies: Iterable[str], max_jobs: int | None,
                progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Replays every trace under every policy, in that order; ``progress`` gets a line per run."""
    rows = []
    policies = list(policies)
    for t in traces:
        for p in policies:
            t0 = time.perf_counter()
            r = _core.run_trace(t, p, max_jobs=max_jobs)
            wall = time.perf_counter() - t0
            s = json.loads(r.summary_json())
            tm = r.timings()
            sim = tm["simulate_s"]
            rows.append({
                "trace": t.name,
                "policy": p,
                "jobs": s["jobs_total"],
                "parse_s": tm["parse_s"],
                "simulate_s": sim,
                "metrics_s": tm["metrics_s"],
                "jobs_per_s": s["jobs_total"] / sim if sim > 0 else None,
                "total_s": wall,
            })
            if progress is not None:
                progress(f"{t.name} / {p}: {wall:.2f} s")
    return with_easy_ratio(rows)


def with_easy_ratio(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sets each row's ``simulate_vs_easy``: its ``simulate_s`` over that of the ``easy`` row of the same trace.

    ``None`` when the trace has no ``easy`` row or EASY's time is zero.
    """
    easy = {r["trace"]: r["simulate_s"] for r in rows if r["policy"] == "easy"}
    for r in rows:
        e = easy.get(r["trace"])
        r["simulate_vs_easy"] = r["simulate_s"] / e if e else None
    return rows
