"""The seed 000/001 study (Choi et al.): coscheduling schemes on the 16-node
Myrinet/Linux cluster (``choi2004`` platform).

Every experiment here runs the NAS-like application presets at process level and
compares the schemes by their measured numbers. Paper numbers appear only where
the paper prints them (Tables 3 and 4), beside ours, never in a computation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import pandas as pd

from .. import _core
from . import Experiment, Outcome, Settings, csv_writer, register
from .report import (
    NOT_APPLICABLE,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    Finding,
    findings_md,
    grouped_bars,
    md_table,
    stacked_bars,
    verdict,
)
from .runner import Gathered, RunSpec

PLATFORM = "choi2004"


@dataclass(frozen=True)
class Scheme:
    """How a scheme of the paper maps onto a run configuration."""

    label: str
    #: ``scheduler.policy`` (cluster level: admission, gang matrix, batch).
    policy: str
    #: ``scheduler.node_policy`` (node level).
    node_policy: str
    mpl: int
    #: Gang and batch use PACKING only (seed 000 §5.2: "these two schemes use PACKING as the default mode").
    packing_only: bool = False
    group: str = ""


#: The schemes of seed 000 Figure 3, in its order. Groups: "spin" and "block" are the
#: paper's spin-based and blocking-based communication-driven schemes (seed 001 Table 1).
SCHEMES: dict[str, Scheme] = {
    s.label: s
    for s in (
        Scheme("NLS", "fcfs", "nls", 3, group="spin"),
        Scheme("PB", "fcfs", "pb", 3, group="spin"),
        Scheme("DCS", "fcfs", "dcs", 3, group="spin"),
        Scheme("SB", "fcfs", "sb", 3, group="block"),
        Scheme("CC", "fcfs", "cc", 3, group="block"),
        Scheme("HYBRID", "fcfs", "hybrid", 3, group="block"),
        Scheme("GANG", "gang", "nls", 3, packing_only=True, group="gang"),
        Scheme("BATCH", "batch", "nls", 1, packing_only=True, group="batch"),
    )
}

NAS_APPS = ["CG", "IS", "SP", "MG", "BT", "LU", "EP"]  # seed 000 §5.1: all NAS programs but FT


@cache
def _job_memory_mb() -> float:
    return 900.0  # choi2004 preset: 1 GB nodes with 900 MB for jobs (seed 000 §5.1)


def mix(n: int, apps: Sequence[str], classes: str, mean_ia_s: float, seed: int) -> list[dict[str, Any]]:
    """A seed 000 style job mix drawn by the Rust core (``process_run::nas_mix``)."""
    return json.loads(_core.nas_mix(n, list(apps), classes, mean_ia_s, _job_memory_mb(), seed))


def config(
    scheme: Scheme, jobs: list[dict[str, Any]], *, placement: str, memory_aware: bool, seed: int
) -> dict[str, Any]:
    return {
        "fidelity": "process",
        "seed": seed,
        "node_platform": {"preset": PLATFORM},
        "workload": {"jobs": jobs},
        "scheduler": {
            "policy": scheme.policy,
            "node_policy": scheme.node_policy,
            "mpl": scheme.mpl,
            "placement": placement,
            "memory_aware": memory_aware,
        },
    }


def _specs(
    prefix: str,
    schemes: Iterable[str],
    placements: Sequence[str],
    workloads: Sequence[tuple[int, list[dict[str, Any]]]],
    *,
    memory_aware: bool = True,
    extra: dict[str, Any] | None = None,
) -> list[RunSpec]:
    out = []
    for seed, jobs in workloads:
        for placement in placements:
            for name in schemes:
                s = SCHEMES[name]
                if s.packing_only and placement != "packing":
                    continue
                labels = {"scheme": name, "placement": placement, "seed": seed, **(extra or {})}
                key = "-".join(str(v) for v in (prefix, placement, name.lower(), f"s{seed}"))
                out.append(RunSpec(key, labels, config(s, jobs, placement=placement,
                                                        memory_aware=memory_aware, seed=seed)))
    return out


# ----- aggregation -------------------------------------------------------------------------


def per_scheme(runs: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean (over seeds) of the response-time metrics per group, with the spread of the response."""
    agg = runs.groupby(list(by), sort=False).agg(
        wait_s=("mean_wait_s", "mean"),
        execution_s=("mean_execution_s", "mean"),
        response_s=("mean_response_s", "mean"),
        response_sd=("mean_response_s", "std"),
        makespan_s=("makespan_s", "mean"),
        utilization=("utilization", "mean"),
        energy_j=("energy_j", "mean"),
        seeds=("seed", "count"),
    )
    return agg.reset_index()


def _value(df: pd.DataFrame, col: str, **where: Any) -> float:
    sub = df
    for k, v in where.items():
        sub = sub[sub[k] == v]
    return float(sub[col].iloc[0]) if len(sub) else float("nan")


def _pct(a: float, b: float) -> float:
    return 100.0 * (a - b) / b if b else float("nan")


def _lowest(df: pd.DataFrame, col: str) -> str:
    return str(df.loc[df[col].idxmin(), "scheme"])


def _highest(df: pd.DataFrame, col: str) -> str:
    return str(df.loc[df[col].idxmax(), "scheme"])


def blocking_vs_spin(df: pd.DataFrame, col: str, where: str, runs: pd.DataFrame | None = None) -> Finding:
    """Seed 000/001: blocking-based schemes (SB, CC, HYBRID) beat the spin-based ones (NLS, PB, DCS)."""
    block = df[df["scheme"].isin(["SB", "CC", "HYBRID"])][col]
    spin = df[df["scheme"].isin(["NLS", "PB", "DCS"])][col]
    claim = f"blocking-based coscheduling (CC, SB, HYBRID) beats spin-based (NLS, PB, DCS) on Linux ({where})"
    if block.empty or spin.empty:
        return Finding(claim, "", "a group has no runs", NOT_APPLICABLE)
    ok = bool(block.max() < spin.min())
    partly = bool(block.mean() < spin.mean())
    return Finding(
        claim,
        f"reproduced if the worst blocking scheme's {col} is below the best spin scheme's; "
        "partly if only the group means are ordered so",
        f"blocking {block.min():,.0f}–{block.max():,.0f} s, spin {spin.min():,.0f}–{spin.max():,.0f} s",
        verdict(ok, partly),
        "" if ok else cost_balance(runs, ["NLS", "PB", "DCS", "SB", "CC", "HYBRID"]),
    )


def cost_balance(runs: pd.DataFrame | None, schemes: Sequence[str] | None = None) -> str:
    """What the model charged each scheme (mean per run): CPU burnt spinning vs the blocking schemes'
    context switches and wake-up interrupts."""
    if runs is None or "process_spin_s" not in runs:
        return "the run counters are not available"
    r = runs.groupby("scheme", sort=False).agg(
        spin=("process_spin_s", "mean"), cs=("process_context_switches", "mean"),
        irq=("process_interrupts", "mean"))
    if schemes is not None:
        r = r[r.index.isin(list(schemes))]
    parts = [f"{k}: {v.spin:,.0f} s spinning, {v.cs:,.0f} context switches, {v.irq:,.0f} wake-up interrupts"
             for k, v in r.iterrows()]
    return ("mean per run, " + "; ".join(parts) + ". Spinning costs CPU only while the partner is descheduled; "
            "blocking pays a context switch and a wake-up interrupt per wait and then waits for the native "
            "scheduler to run the woken process again")


# ----- Figure 3 and Table 3 ------------------------------------------------------------------


def fig3_runs(ia: float, n_full: int = 100) -> Any:
    def runs(st: Settings) -> list[RunSpec]:
        n = 30 if st.quick else n_full
        workloads = [(seed, mix(n, NAS_APPS, "ABC", ia, seed)) for seed in range(1, st.seeds + 1)]
        return _specs("fig3", SCHEMES, ["packing", "random"], workloads, memory_aware=True)

    return runs


def _fig3_findings(agg: pd.DataFrame, heavy: bool, runs: pd.DataFrame) -> list[Finding]:
    f: list[Finding] = []
    pk = agg[agg["placement"] == "packing"].reset_index(drop=True)
    allp = agg.reset_index(drop=True)
    low = _lowest(allp, "response_s")
    f.append(Finding(
        "HYBRID has the lowest response time of all schemes (S000 §5.2, Fig. 3)",
        "reproduced if HYBRID's mean response (either placement) is the lowest of all runs",
        f"lowest: {low} ({allp['response_s'].min():,.0f} s); HYBRID packing "
        f"{_value(pk, 'response_s', scheme='HYBRID'):,.0f} s",
        verdict(low == "HYBRID"),
        "" if low == "HYBRID" else f"{low} is lower in the model; " + cost_balance(runs, ["HYBRID", low]),
    ))
    if "BATCH" in set(pk["scheme"]):
        ex_low, w_high = _lowest(pk, "execution_s"), _highest(pk, "wait_s")
        f.append(Finding(
            "batch (PBS) has the lowest execution time but the longest wait (S000 §5.2)",
            "reproduced if BATCH has the lowest mean execution and the highest mean wait (PACKING runs); "
            "partly if only one holds",
            f"lowest execution: {ex_low}; longest wait: {w_high}",
            verdict(ex_low == "BATCH" and w_high == "BATCH", ex_low == "BATCH" or w_high == "BATCH"),
        ))
    f.append(blocking_vs_spin(pk, "response_s", "PACKING, mean response", runs))
    ts = [s for s, v in SCHEMES.items() if not v.packing_only]
    gains = []
    for s in ts:
        a, b = _value(agg, "response_s", scheme=s, placement="random"), _value(agg, "response_s", scheme=s,
                                                                                placement="packing")
        if a == a and b == b:
            gains.append(100.0 * (a - b) / a)
    if gains:
        g = sum(gains) / len(gains)
        target = "about 25%" if heavy else "a gain"
        f.append(Finding(
            f"PACKING improves response over NO PACKING, {target} on average (S000 §5.2)",
            "reproduced if the mean gain (NO PACKING - PACKING) / NO PACKING over the time-sharing schemes "
            + ("is within 15–35%" if heavy else "is positive") + "; partly if positive but outside that band",
            f"mean gain {g:.1f}% (per scheme: " + ", ".join(f"{s} {x:.0f}%" for s, x in zip(ts, gains,
                                                                                          strict=False)) + ")",
            verdict(15 <= g <= 35 if heavy else g > 0, g > 0),
            "" if g > 0 else "contiguous nodes buy nothing in the model: the network has no topology "
            "(one switch, equal latency between all nodes), so PACKING only changes which jobs share nodes",
        ))
    for other in ("GANG", "BATCH"):
        if other in set(pk["scheme"]):
            h, o = _value(pk, "response_s", scheme="HYBRID"), _value(pk, "response_s", scheme=other)
            size = {"GANG": "about 20% under heavy load", "BATCH": "up to 300% under heavy load"}[other]
            f.append(Finding(
                f"HYBRID's response time is lower than {other}'s" + (f" ({size})" if heavy else "")
                + " (S000 §5.2)",
                f"reproduced if HYBRID < {other} (PACKING)",
                f"HYBRID {h:,.0f} s, {other} {o:,.0f} s ({_pct(o, h):+.0f}% relative to HYBRID)",
                verdict(h < o),
            ))
    for s in ("GANG", "CC", "SB"):
        if {"BATCH", s} <= set(pk["scheme"]):
            a, b = _value(pk, "response_s", scheme=s), _value(pk, "response_s", scheme="BATCH")
            f.append(Finding(
                f"{s} outperforms PBS (S000 §5.2)", f"reproduced if {s} < BATCH mean response (PACKING)",
                f"{s} {a:,.0f} s, BATCH {b:,.0f} s", verdict(a < b),
            ))
    return f


def _fig_response(g: Gathered, st: Settings, title: str, heavy: bool, name: str) -> Outcome:
    agg = per_scheme(g.runs, ["placement", "scheme"])
    table = agg[["placement", "scheme", "wait_s", "execution_s", "response_s", "response_sd", "seeds"]]
    files = {f"{name}.csv": csv_writer(table)}
    files[f"{name}.png"] = lambda p: stacked_bars(
        agg, p, group="placement", label="scheme",
        parts=[("wait_s", "wait"), ("execution_s", "execution")],
        title=title, ylabel="mean response time (s)", err="response_sd" if st.seeds > 1 else None)
    findings = _fig3_findings(agg, heavy, g.runs)
    spin = g.runs.groupby(["placement", "scheme"], sort=False).agg(
        spin_s=("process_spin_s", "mean") if "process_spin_s" in g.runs else ("utilization", "size"),
    ).reset_index() if "process_spin_s" in g.runs else None
    report = [
        f"Workload: {int(g.runs['jobs_total'].iloc[0])} NAS jobs (CG, IS, SP, MG, BT, LU, EP; classes A–C; "
        "4/8/9/16 processes as each allows), exponential inter-arrival, MPL 3, memory-aware admission "
        "(no paging), PACKING and NO PACKING (random) placement.",
        "",
        f"![{name}]({name}.png)",
        "",
        "Mean over seeds (seconds):",
        "",
        md_table(table, 0),
        "",
        "## Findings",
        "",
        findings_md(findings),
    ]
    if spin is not None:
        report += ["", "CPU time spent spinning (s, all processes):", "", md_table(spin, 0)]
    return Outcome("\n".join(report), files)


register(Experiment(
    "choi-fig3a", "100 mixed NAS jobs, heavy load (mean inter-arrival 100 s)", "seed 000 Figure 3(a)",
    fig3_runs(100.0),
    lambda g, st: _fig_response(g, st, "Fig. 3(a): 100 NAS jobs, inter-arrival 100 s, MPL 3", True, "fig3a"),
))
register(Experiment(
    "choi-fig3b", "100 mixed NAS jobs, light load (mean inter-arrival 250 s)", "seed 000 Figure 3(b)",
    fig3_runs(250.0),
    lambda g, st: _fig_response(g, st, "Fig. 3(b): 100 NAS jobs, inter-arrival 250 s, MPL 3", False, "fig3b"),
))

#: Seed 000 Table 3 (measured on the cluster): busy MJ, idle MJ, node utilization %, total running time s.
PAPER_TABLE3 = {
    ("random", "NLS"): (9.40, 86.63, 96, 24710),
    ("random", "PB"): (9.25, 86.52, 96, 24679),
    ("random", "DCS"): (8.63, 81.90, 96, 23361),
    ("random", "CC/SB"): (4.24, 65.56, 94, 18700),
    ("random", "HYBRID"): (4.98, 62.88, 94, 17938),
    ("packing", "NLS"): (8.60, 81.32, 91, 23198),
    ("packing", "PB"): (8.20, 79.42, 92, 22655),
    ("packing", "DCS"): (7.66, 74.69, 92, 21305),
    ("packing", "CC/SB"): (4.56, 58.02, 91, 16549),
    ("packing", "HYBRID"): (4.82, 56.38, 91, 16083),
    ("packing", "GANG"): (2.99, 61.42, 95, 17520),
    ("packing", "BATCH"): (4.35, 94.55, 63, 26971),
}

#: Seed 000 Table 4: (memory-aware?, scheme) -> busy MJ, idle MJ, utilization %, running time s.
PAPER_TABLE4 = {
    (False, "NLS"): (9.20, 91.68, 97, 26151),
    (False, "PB"): (7.84, 79.09, 92, 22559),
    (False, "DCS"): (6.92, 69.05, 91, 19695),
    (False, "CC/SB"): (4.73, 89.55, 87, 25545),
    (False, "HYBRID"): (4.16, 59.94, 90, 17098),
    (False, "GANG"): (6.19, 61.27, 99, 17477),
    (True, "NLS"): (7.59, 74.19, 97, 21164),
    (True, "PB"): (7.09, 70.44, 66, 21551),
    (True, "DCS"): (7.57, 75.55, 81, 20092),
    (True, "CC/SB"): (3.99, 45.59, 79, 13003),
    (True, "HYBRID"): (3.84, 43.90, 78, 12522),
    (True, "GANG"): (4.24, 50.85, 94, 14505),
    (True, "BATCH"): (5.12, 51.62, 99, 14724),
}

IDLE_W = 219.10  # seed 000 §5.4: B
BUSY_EXTRA_W = 18.968  # seed 000 §5.4: X


def energy_table(runs: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Table 3 layout from our runs. The paper splits a node's energy into *idle* = B * N * T
    (the base power for the whole run) and *busy* = X * busy node-seconds; ours is the same split
    of the exact integration (energy_j = B * N * T + X * busy node-seconds)."""
    r = runs.copy()
    base = IDLE_W * r["machine_nodes"] * r["makespan_s"]
    r["busy_MJ"] = (r["energy_j"] - base) / 1e6
    r["idle_MJ"] = base / 1e6
    r["estimate_MJ"] = r["energy_estimate_j"] / 1e6
    r["total_MJ"] = r["energy_j"] / 1e6
    r["utilization_pct"] = 100.0 * r["utilization"]
    agg = r.groupby(list(by), sort=False).agg(
        busy_MJ=("busy_MJ", "mean"), idle_MJ=("idle_MJ", "mean"), total_MJ=("total_MJ", "mean"),
        estimate_MJ=("estimate_MJ", "mean"), utilization_pct=("utilization_pct", "mean"),
        running_time_s=("makespan_s", "mean"),
    )
    return agg.reset_index()


def _paper_key(scheme: str) -> str:
    return "CC/SB" if scheme in ("CC", "SB") else scheme


def _table3(g: Gathered, st: Settings) -> Outcome:
    t = energy_table(g.runs, ["placement", "scheme"])
    for k, col in enumerate(["paper_busy_MJ", "paper_idle_MJ", "paper_utilization_pct", "paper_running_time_s"]):
        t[col] = [PAPER_TABLE3.get((p, _paper_key(s)), (None,) * 4)[k] for p, s in zip(t["placement"], t["scheme"],
                                                                                         strict=True)]
    pk = t[t["placement"] == "packing"].reset_index(drop=True)
    f: list[Finding] = []
    if "BATCH" in set(pk["scheme"]):
        hi = str(pk.loc[pk["total_MJ"].idxmax(), "scheme"])
        f.append(Finding(
            "batch scheduling (PBS) has the highest energy consumption, from its long running time (S000 §5.4)",
            "reproduced if BATCH has the highest total energy of the PACKING runs",
            f"highest: {hi} ({pk['total_MJ'].max():.2f} MJ)", verdict(hi == "BATCH"),
            "" if hi == "BATCH" else "the model's batch runs do not have the longest running time",
        ))
        b = _value(pk, "total_MJ", scheme="BATCH")
        ok = all(_value(pk, "total_MJ", scheme=s) < b for s in ("HYBRID", "CC", "SB") if s in set(pk["scheme"]))
        f.append(Finding(
            "blocking-based coscheduling (HYBRID, CC/SB) is more energy-efficient than batch (S000 §5.4)",
            "reproduced if HYBRID, CC and SB each use less total energy than BATCH (PACKING)",
            ", ".join(f"{s} {_value(pk, 'total_MJ', scheme=s):.2f} MJ" for s in ("HYBRID", "CC", "SB", "BATCH")
                      if s in set(pk["scheme"])),
            verdict(ok),
        ))
    util_ok = (pk[pk["scheme"] != "BATCH"]["utilization_pct"] >= 90).all()
    f.append(Finding(
        "all schemes but PBS keep node utilization at or above 90% (S000 §5.4)",
        "reproduced if every non-batch PACKING run has utilization >= 90%",
        ", ".join(f"{s} {u:.0f}%" for s, u in zip(pk["scheme"], pk["utilization_pct"], strict=True)),
        verdict(bool(util_ok)),
        "" if util_ok else "utilization here is measured CPU busy time (including spinning) over N x T; "
        "schemes that block leave CPUs idle while they wait",
    ))
    dev = (100 * (t["estimate_MJ"] - t["total_MJ"]).abs() / t["total_MJ"]).max()
    f.append(Finding(
        "E = (B + X U) N T estimates the measured energy within 3% (S000 §5.4)",
        "not a test of the model: with U defined as busy node-seconds / (N T) the estimate equals the exact "
        "integration by construction",
        f"largest difference {dev:.3f}%", NOT_APPLICABLE,
    ))
    show = t[["placement", "scheme", "busy_MJ", "paper_busy_MJ", "idle_MJ", "paper_idle_MJ", "utilization_pct",
              "paper_utilization_pct", "running_time_s", "paper_running_time_s", "estimate_MJ"]]
    files = {"table3.csv": csv_writer(show)}
    files["table3.png"] = lambda p: grouped_bars(
        t.assign(config=t["placement"] + "/" + t["scheme"]), p, x="config", series="placement", value="total_MJ",
        title="Total energy (MJ), fig3a workload", ylabel="MJ")
    report = [
        "Energy of the choi-fig3a runs (same workload), laid out like seed 000 Table 3. Busy = X x busy "
        "node-seconds (spinning counts as busy), idle = B x N x T, B = 219.10 W, X = 18.968 W (seed 000 §5.4). "
        "Paper columns: the cluster's measured values (CC/SB is one row in the paper).",
        "",
        md_table(show, 2),
        "",
        "## Findings",
        "",
        findings_md(f),
    ]
    return Outcome("\n".join(report), files)


register(Experiment(
    "choi-table3", "Energy, utilization and running time of the Figure 3(a) runs", "seed 000 Table 3",
    fig3_runs(100.0), _table3,
))


# ----- Figure 4: long-running applications ------------------------------------------------------


def _fig4_runs(st: Settings) -> list[RunSpec]:
    n = 8 if st.quick else 20
    workloads = [(seed, mix(n, ["sPPM", "BlockSolve95", "LU"], "ABC", 500.0, seed)) for seed in range(1, st.seeds + 1)]
    return _specs("fig4", ["BATCH", "GANG", "CC", "SB", "HYBRID"], ["packing"], workloads)


def _fig4(g: Gathered, st: Settings) -> Outcome:
    agg = per_scheme(g.runs, ["scheme"])
    table = agg[["scheme", "wait_s", "execution_s", "response_s", "response_sd", "seeds"]]
    order = list(table.sort_values("response_s")["scheme"])
    paper = ["HYBRID", "CC/SB", "GANG", "BATCH"]
    ours = []
    for s in order:
        k = _paper_key(s)
        if k not in ours:
            ours.append(k)
    wait_hi = _highest(agg, "wait_s")
    f = [
        Finding("HYBRID best, followed by CC/SB, gang and PBS (S000 §5.2, Fig. 4)",
                "reproduced if our order of mean response (CC and SB merged at the better one) is the paper's; "
                "partly if HYBRID is first",
                "ours: " + " < ".join(ours), verdict(ours == paper, bool(ours) and ours[0] == "HYBRID")),
        Finding("even for these low-communication applications batch has the largest waiting time",
                "reproduced if BATCH has the highest mean wait", f"highest wait: {wait_hi}",
                verdict(wait_hi == "BATCH")),
    ]
    files = {"fig4.csv": csv_writer(table)}
    files["fig4.png"] = lambda p: stacked_bars(agg, p, group=None, label="scheme",
                                               parts=[("wait_s", "wait"), ("execution_s", "execution")],
                                               title="Fig. 4: long-running jobs (sPPM, BlockSolve95, LU)",
                                               ylabel="mean response time (s)")
    report = [
        f"Workload: {int(g.runs['jobs_total'].iloc[0])} jobs drawn from sPPM, BlockSolve95 and LU (classes A–C), "
        "mean inter-arrival 500 s, MPL 3, PACKING.", "", "![fig4](fig4.png)", "", md_table(table, 0), "",
        "## Findings", "", findings_md(f),
    ]
    return Outcome("\n".join(report), files)


register(Experiment("choi-fig4", "20 long-running jobs (sPPM, BlockSolve95, LU)", "seed 000 Figure 4",
                    _fig4_runs, _fig4))


# ----- Figures 5 and 8: problem size ------------------------------------------------------------

FIG5_SCHEMES = ["CC", "SB", "HYBRID", "BATCH", "GANG"]


def _fig5_runs(st: Settings) -> list[RunSpec]:
    n = 8 if st.quick else 20
    out: list[RunSpec] = []
    for cls in ("A", "B", "C"):
        workloads = [(seed, mix(n, NAS_APPS, cls, 100.0, seed)) for seed in range(1, st.seeds + 1)]
        out += _specs(f"fig5-{cls}", FIG5_SCHEMES, ["packing"], workloads, extra={"class": cls})
    return out


def _fig5(g: Gathered, st: Settings) -> Outcome:
    agg = per_scheme(g.runs, ["class", "scheme"])
    table = agg[["class", "scheme", "wait_s", "execution_s", "response_s", "response_sd"]]
    c = agg[agg["class"] == "C"]
    f = []
    if len(c):
        h = _value(c, "response_s", scheme="HYBRID")
        gng, ccsb = _value(c, "response_s", scheme="GANG"), min(_value(c, "response_s", scheme="CC"),
                                                                 _value(c, "response_s", scheme="SB"))
        pbs = _value(c, "response_s", scheme="BATCH")
        f.append(Finding(
            "CLASS C: HYBRID about 12% better than gang, 10% better than CC/SB, 65% better than PBS (S000 §5.2)",
            "reproduced if HYBRID has the lowest class C mean response; the gains are reported",
            f"HYBRID vs gang {_pct(gng, h):+.0f}%, vs CC/SB {_pct(ccsb, h):+.0f}%, vs PBS {_pct(pbs, h):+.0f}% "
            "(other's response relative to HYBRID's)",
            verdict(_lowest(c, "response_s") == "HYBRID"),
        ))
    b = agg[agg["class"] == "B"]
    if len(b):
        f.append(Finding(
            "CLASS B: batch shows the worst response time despite its shortest execution time (S000 §5.2)",
            "reproduced if BATCH has the highest mean response and the lowest mean execution in class B",
            f"worst response: {_highest(b, 'response_s')}, shortest execution: {_lowest(b, 'execution_s')}",
            verdict(_highest(b, "response_s") == "BATCH" and _lowest(b, "execution_s") == "BATCH",
                    _highest(b, "response_s") == "BATCH"),
        ))
    a = agg[agg["class"] == "A"]
    if len(a):
        spread = (a["response_s"].max() - a["response_s"].min()) / a["response_s"].min() * 100
        f.append(Finding(
            "CLASS A: response times are very close (S000 §5.2)",
            "reproduced if the spread of class A mean response over schemes is below 25%",
            f"spread {spread:.0f}%", verdict(spread < 25),
        ))
    files = {"fig5.csv": csv_writer(table)}
    files["fig5.png"] = lambda p: grouped_bars(agg, p, x="class", series="scheme", value="response_s",
                                               title="Fig. 5: mean response per class (20 jobs)",
                                               ylabel="mean response time (s)")
    report = ["Workload per class: NAS jobs of that class only, mean inter-arrival 100 s (the paper does not "
              "state it; assumed as Fig. 3(a)), MPL 3, PACKING.", "", "![fig5](fig5.png)", "", md_table(table, 0),
              "", "## Findings", "", findings_md(f)]
    return Outcome("\n".join(report), files)


def _fig8(g: Gathered, st: Settings) -> Outcome:
    t = energy_table(g.runs, ["class", "scheme"])
    c = t[t["class"] == "C"]
    f = []
    if len(c):
        order = list(c.sort_values("total_MJ")["scheme"])
        f.append(Finding(
            "CLASS C: HYBRID has the best energy behaviour, followed by CC/SB and gang (S000 §5.4, Fig. 8)",
            "reproduced if HYBRID has the lowest class C energy; partly if it is among the two lowest",
            "ours, lowest first: " + ", ".join(order), verdict(order[0] == "HYBRID", "HYBRID" in order[:2]),
        ))
    files = {"fig8.csv": csv_writer(t)}
    files["fig8.png"] = lambda p: grouped_bars(t, p, x="class", series="scheme", value="total_MJ",
                                               title="Fig. 8: energy per class (20 jobs)", ylabel="MJ")
    report = ["Energy of the choi-fig5 workloads (same runs).", "", "![fig8](fig8.png)", "", md_table(t, 2), "",
              "## Findings", "", findings_md(f)]
    return Outcome("\n".join(report), files)


register(Experiment("choi-fig5", "20 jobs per class A, B, C: response time", "seed 000 Figure 5", _fig5_runs, _fig5))
register(Experiment("choi-fig8", "20 jobs per class A, B, C: energy", "seed 000 Figure 8", _fig5_runs, _fig8))


# ----- Figure 6: three identical programs ------------------------------------------------------

FIG6_SCHEMES = ["NLS", "PB", "DCS", "SB", "CC", "HYBRID", "GANG"]


def _fig6_runs(st: Settings) -> list[RunSpec]:
    apps = ["CG", "MG", "LU"] if st.quick else ["CG", "IS", "SP", "MG", "BT", "LU"]
    cls = "A" if st.quick else "C"
    out = []
    for app in apps:
        jobs = [{"app": app, "class": cls, "procs": 16, "submit_s": 0.0} for _ in range(3)]
        out += _specs(f"fig6-{app}", FIG6_SCHEMES, ["packing"], [(s, jobs) for s in range(1, st.seeds + 1)],
                      extra={"app": app, "class": cls})
    return out


def _fig6(g: Gathered, st: Settings) -> Outcome:
    agg = per_scheme(g.runs, ["app", "scheme"])
    table = agg[["app", "scheme", "execution_s", "response_sd"]]
    f = []
    wins = [a for a in dict.fromkeys(agg["app"]) if _lowest(agg[agg["app"] == a], "execution_s") == "HYBRID"]
    apps = list(dict.fromkeys(agg["app"]))
    f.append(Finding(
        "HYBRID always shows the shortest execution time (S000 §5.2, Fig. 6)",
        "reproduced if HYBRID is lowest for every application; partly if for some",
        f"HYBRID lowest for {len(wins)} of {len(apps)}: {', '.join(wins) or 'none'}",
        verdict(len(wins) == len(apps), len(wins) > 0),
    ))
    gaps = {}
    for a in apps:
        sub = agg[agg["app"] == a]
        blk = sub[sub["scheme"].isin(["SB", "CC", "HYBRID"])]["execution_s"].mean()
        spn = sub[sub["scheme"].isin(["NLS", "PB", "DCS"])]["execution_s"].mean()
        gaps[a] = _pct(spn, blk)
    f.append(Finding(
        "blocking-based beat spin-based coscheduling, most for CG (highest communication intensity), "
        "least for BT and LU (S000 §5.2)",
        "reproduced if the spin/block gap is positive for every app and largest for CG",
        ", ".join(f"{a} {x:+.0f}%" for a, x in gaps.items()),
        verdict(all(x > 0 for x in gaps.values()) and max(gaps, key=lambda k: gaps[k]) == "CG",
                any(x > 0 for x in gaps.values())),
    ))
    files = {"fig6.csv": csv_writer(table)}
    files["fig6.png"] = lambda p: grouped_bars(agg, p, x="app", series="scheme", value="execution_s",
                                               title="Fig. 6: three identical programs on 16 nodes",
                                               ylabel="mean execution time (s)")
    cls = str(g.runs["class"].iloc[0])
    report = [f"Three identical class {cls} programs (16 processes) started together on all 16 nodes, MPL 3.", "",
              "![fig6](fig6.png)", "", md_table(table, 1), "", "## Findings", "", findings_md(f)]
    return Outcome("\n".join(report), files)


register(Experiment("choi-fig6", "Three identical class C programs on all 16 nodes, per application",
                    "seed 000 Figure 6", _fig6_runs, _fig6))


# ----- Figure 7 and Table 4: memory-aware allocation --------------------------------------------

#: Seed 000 Table 2: the class C configurations of the memory experiment (app, processes).
TABLE2_CONFIGS = [("SP", 4), ("SP", 9), ("SP", 16), ("BT", 9), ("BT", 16), ("MG", 8), ("MG", 16), ("IS", 4),
                  ("IS", 8), ("IS", 16)]
FIG7_SCHEMES = ["NLS", "PB", "DCS", "SB", "CC", "HYBRID", "GANG", "BATCH"]


def _table2_jobs(n: int, cls: str, seed: int) -> list[dict[str, Any]]:
    """``n`` jobs drawn uniformly from Table 2's configurations, exponential inter-arrival of mean
    100 s, numpy stream seeded by ``seed`` (stated in the report)."""
    import numpy as np

    rng = np.random.default_rng([seed, 7])
    t = 0.0
    jobs = []
    for _ in range(n):
        app, procs = TABLE2_CONFIGS[int(rng.integers(len(TABLE2_CONFIGS)))]
        jobs.append({"app": app, "class": cls, "procs": procs, "submit_s": round(t, 6)})
        t += float(rng.exponential(100.0))
    return jobs


def _fig7_runs(st: Settings) -> list[RunSpec]:
    n, cls = (8, "B") if st.quick else (20, "C")
    out = []
    for seed in range(1, st.seeds + 1):
        jobs = _table2_jobs(n, cls, seed)
        for aware in (False, True):
            schemes = [s for s in FIG7_SCHEMES if aware or s != "BATCH"]
            out += _specs(f"fig7-{'aware' if aware else 'unaware'}", schemes, ["packing"], [(seed, jobs)],
                          memory_aware=aware, extra={"memory_aware": aware, "class": cls})
    return out


def _fig7(g: Gathered, st: Settings) -> Outcome:
    agg = per_scheme(g.runs, ["memory_aware", "scheme"])
    table = agg[["memory_aware", "scheme", "wait_s", "execution_s", "response_s", "response_sd"]]
    un, aw = agg[~agg["memory_aware"]], agg[agg["memory_aware"]]
    rows = []
    for s in un["scheme"]:
        rows.append({"scheme": s,
                     "execution_speedup": _value(un, "execution_s", scheme=s) / _value(aw, "execution_s", scheme=s),
                     "wait_speedup": _value(un, "wait_s", scheme=s) / max(_value(aw, "wait_s", scheme=s), 1e-9),
                     "response_gain_pct": -_pct(_value(aw, "response_s", scheme=s), _value(un, "response_s",
                                                                                          scheme=s))})
    speed = pd.DataFrame(rows)
    g_mean = float(speed["response_gain_pct"].mean()) if len(speed) else float("nan")
    f = [Finding(
        "memory-aware allocation gains over 35% (S000 §5.3; about 28% in the brief's reading) on average",
        "reproduced if the mean response gain over schemes is at least 25%; partly if positive",
        f"mean gain {g_mean:.0f}% (per scheme: " + ", ".join(
            f"{s} {x:.0f}%" for s, x in zip(speed["scheme"], speed["response_gain_pct"], strict=True)) + ")",
        verdict(g_mean >= 25, g_mean > 0),
        "" if g_mean > 0 else "little or no paging happened in the unaware runs (see process_page_ins in runs.csv)",
    )]
    if len(aw):
        low = _lowest(aw, "response_s")
        f.append(Finding("with memory-aware allocation HYBRID shows the best response (S000 §5.3)",
                         "reproduced if HYBRID has the lowest memory-aware mean response",
                         f"lowest: {low}", verdict(low == "HYBRID")))
        if "BATCH" in set(aw["scheme"]) and len(un):
            b = _value(aw, "response_s", scheme="BATCH")
            ok = all(b < x for x in un["response_s"])
            f.append(Finding("PBS outperforms every scheme without memory-aware allocation (S000 §5.3)",
                             "reproduced if BATCH's response is below every unaware run's",
                             f"BATCH {b:,.0f} s; unaware best {un['response_s'].min():,.0f} s", verdict(ok)))
    if len(speed):
        top = list(speed.sort_values("execution_speedup", ascending=False)["scheme"][:3])
        f.append(Finding("the execution-time speed-up ratios of CC/SB and HYBRID are the highest (S000 §5.3)",
                         "reproduced if the three highest execution speed-ups are CC, SB and HYBRID; partly if "
                         "HYBRID or CC or SB is first",
                         "highest three: " + ", ".join(top),
                         verdict(set(top) == {"CC", "SB", "HYBRID"}, top[0] in ("CC", "SB", "HYBRID"))))
    files = {"fig7.csv": csv_writer(table), "fig7_speedup.csv": csv_writer(speed)}
    files["fig7.png"] = lambda p: stacked_bars(
        agg.assign(alloc=agg["memory_aware"].map({True: "memory-aware", False: "no memory-aware"})), p,
        group="alloc", label="scheme", parts=[("wait_s", "wait"), ("execution_s", "execution")],
        title="Fig. 7(a): memory-aware allocation (20 class C jobs)", ylabel="mean response time (s)")
    cls = str(g.runs["class"].iloc[0])
    report = [f"Workload: {int(g.runs['jobs_total'].iloc[0])} class {cls} jobs drawn uniformly from seed 000 "
              "Table 2's configurations, mean inter-arrival 100 s, MPL 3 (batch: 1), PACKING; memory-aware "
              "admission vs none (then processes page when their node's footprints exceed its 900 MB).", "",
              "![fig7](fig7.png)", "", md_table(table, 0), "", "Speed-up ratio (no memory-aware / memory-aware):",
              "", md_table(speed, 2), "", "## Findings", "", findings_md(f)]
    if "process_page_ins" in g.runs:
        pages = g.runs[["memory_aware", "scheme", "process_page_ins"]]
        report += ["", "Page-ins per run:", "", md_table(pages, 0)]
    return Outcome("\n".join(report), files)


def _table4(g: Gathered, st: Settings) -> Outcome:
    t = energy_table(g.runs, ["memory_aware", "scheme"])
    for k, col in enumerate(["paper_busy_MJ", "paper_idle_MJ", "paper_utilization_pct", "paper_running_time_s"]):
        t[col] = [PAPER_TABLE4.get((bool(a), _paper_key(s)), (None,) * 4)[k]
                  for a, s in zip(t["memory_aware"], t["scheme"], strict=True)]
    un, aw = t[~t["memory_aware"]], t[t["memory_aware"]]
    lower = [s for s in aw["scheme"] if s in set(un["scheme"]) and _value(aw, "total_MJ", scheme=s)
             < _value(un, "total_MJ", scheme=s)]
    n = len([s for s in aw["scheme"] if s in set(un["scheme"])])
    f = [Finding("avoiding disk swapping (memory-aware allocation) saves energy as well as time (S000 §5.4)",
                 "reproduced if every scheme uses less energy memory-aware; partly if some do",
                 f"lower with memory-aware for {len(lower)} of {n}: {', '.join(lower) or 'none'}",
                 verdict(len(lower) == n and n > 0, len(lower) > 0))]
    show = t[["memory_aware", "scheme", "busy_MJ", "paper_busy_MJ", "idle_MJ", "paper_idle_MJ", "utilization_pct",
              "paper_utilization_pct", "running_time_s", "paper_running_time_s"]]
    files = {"table4.csv": csv_writer(show)}
    report = ["Energy of the choi-fig7 runs, laid out like seed 000 Table 4 (busy = X x busy node-seconds, "
              "idle = B x N x T).", "", md_table(show, 2), "", "## Findings", "", findings_md(f)]
    return Outcome("\n".join(report), files)


register(Experiment("choi-fig7", "Memory-aware vs no memory-aware allocation, 20 class C jobs",
                    "seed 000 Figure 7", _fig7_runs, _fig7))
register(Experiment("choi-table4", "Energy of the memory-aware allocation experiment", "seed 000 Table 4",
                    _fig7_runs, _table4))

__all__ = ["SCHEMES", "REPRODUCED", "PARTLY", "NOT_REPRODUCED"]
