"""`cosched demo`: what coscheduling changes, on built-in data, in well under a minute.

Part 1 (process level, the tool's question): a seed 000 style mix of NAS-like jobs
(``DEMO_JOBS`` jobs of CG, IS, SP, MG, BT, LU, EP in classes A and B, exponential
inter-arrival of mean ``DEMO_INTERARRIVAL_S``, workload seed 1) on the 16-node
``choi2004`` platform of seed 000 under the schemes of ``DEMO_SCHEMES``: batch
(space sharing, one job per node), gang scheduling, native local scheduling (NLS:
time sharing with no coordination), spin-block (SB), coscheduling by
communication (CC) and HYBRID; multiprogramming level 3, PACKING placement,
memory-aware admission (the settings of seed 000 Figure 3, see
``experiments/choi.py``). Written to ``OUT/coscheduling/``: the runs (``runs/<key>/``),
``comparison.csv``, ``comparison.png`` (mean wait and execution per scheme), and
``OUT/report.html`` (the HTML report of those runs).

Part 2 (job level): FCFS, EASY and conservative backfilling on the first 3,000 jobs
of the KTH SP2 log, to ``OUT/trace-replay/``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

DATA_DIR = Path(__file__).resolve().parent / "data"
#: The trace replay's trace: the first 3,000 records of KTH-SP2-1996-2.1-cln (header kept).
DEMO_TRACE = DATA_DIR / "KTH-SP2-1996-2.1-cln-first3000.swf.gz"
DEMO_POLICIES = ("fcfs", "easy", "conservative")
#: The coscheduling comparison: schemes (``experiments.choi.SCHEMES`` labels), jobs, mean inter-arrival.
DEMO_SCHEMES = ("BATCH", "GANG", "NLS", "SB", "CC", "HYBRID")
DEMO_JOBS = 16
DEMO_INTERARRIVAL_S = 60.0
DEMO_CLASSES = "AB"

#: Columns of ``OUT/coscheduling/comparison.csv``.
SCHEME_COLUMNS = ("scheme", "jobs", "mean_wait_s", "mean_execution_s", "mean_response_s", "makespan_s",
                  "utilization", "energy_mj")


@dataclass
class CoschedDemo:
    """What part 1 produced."""

    table: pd.DataFrame
    folder: Path
    report: Path
    png: Path


def coscheduling_comparison(
    out: Path,
    *,
    workers: int,
    command: str,
    progress: Callable[[str, int], Any] | None = None,
    advance: Callable[[], Any] | None = None,
) -> CoschedDemo:
    """Part 1: runs the schemes on the NAS-like mix and writes its table, plot and HTML report."""
    import pandas as pd

    from .experiments import choi, csv_writer
    from .experiments.report import stacked_bars
    from .experiments.runner import run_specs
    from .output import write_atomic
    from .report import write_report

    folder = out / "coscheduling"
    jobs = choi.mix(DEMO_JOBS, choi.NAS_APPS, DEMO_CLASSES, DEMO_INTERARRIVAL_S, 1)
    specs = choi._specs("demo", DEMO_SCHEMES, ["packing"], [(1, jobs)], memory_aware=True)
    g = run_specs(specs, folder, workers=workers, command=command, progress=progress, advance=advance)
    runs = g.runs.set_index("scheme").loc[list(DEMO_SCHEMES)].reset_index()
    energy = runs["energy_j"] if "energy_j" in runs else pd.Series([float("nan")] * len(runs))
    table = pd.DataFrame({
        "scheme": runs["scheme"],
        "jobs": runs["jobs_total"].astype(int),
        "mean_wait_s": runs["mean_wait_s"],
        "mean_execution_s": runs["mean_execution_s"],
        "mean_response_s": runs["mean_response_s"],
        "makespan_s": runs["makespan_s"],
        "utilization": runs["utilization"],
        "energy_mj": energy / 1e6,
    }, columns=list(SCHEME_COLUMNS))
    title = f"{DEMO_JOBS} NAS-like jobs (classes {', '.join(DEMO_CLASSES)}) on choi2004 (16 nodes), MPL 3"
    bars = table.rename(columns={"mean_wait_s": "wait_s", "mean_execution_s": "execution_s"})
    write_atomic(folder, {
        "comparison.csv": csv_writer(table),
        "comparison.png": lambda p: stacked_bars(bars, p, group=None, label="scheme",
                                                 parts=[("wait_s", "wait"), ("execution_s", "execution")],
                                                 title=title, ylabel="mean response time (s)"),
    })
    report = write_report(folder, out / "report.html", title=f"cosched demo: {title}")
    return CoschedDemo(table, folder, report, folder / "comparison.png")
