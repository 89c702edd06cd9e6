"""The seed 000/001 study (Choi et al.): coscheduling schemes on the 16-node
Myrinet/Linux cluster (``choi2004`` platform).

Every experiment here runs the NAS-like application presets at process level and
compares the schemes by their measured numbers. Paper numbers appear only where
the paper prints them (Tables 3 and 4), beside ours, never in a computation. Each
finding function takes our aggregated numbers (and the per-run counters for its
reason) and returns a :class:`Finding` whose verdict and reason are computed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from .. import _core
from . import Experiment, Outcome, Settings, csv_writer, register
from .report import (
    NOT_APPLICABLE,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    TIE,
    UNDECIDED,
    Diff,
    Finding,
    all_equivalent,
    band,
    combine,
    diff_ci,
    equivalent,
    findings_md,
    grouped_bars,
    md_table,
    ordered,
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


#: OpenPBS's default ``max_starve`` (24:00:00), in seconds: BATCH-NS's starving threshold.
MAX_STARVE_S = 86_400

#: The schemes of seed 000 Figure 3, in its order, then those the paper mentions without plotting
#: them: GM's own blocking scheme (§5.2: "almost identical" to CC and SB; node policy
#: ``block[spin_us=1000]``: gm_blocking_receive's 1 ms of polling, then sleep, at sender and receiver,
#: no boosts), PBS with EASY backfilling (§5.1: "very
#: close (within 2%)" to PBS without; estimates: each class's requested walltime, ``batch.rs``) and
#: PBS in OpenPBS's default, non-strict queue order (BATCH-NS, ``strict_ordering: false`` with the
#: default ``help_starving_jobs`` after ``max_starve: 24:00:00``, ``starving.rs``; BATCH is strict FCFS).
#: Groups: "spin" and "block" are the paper's spin-based and blocking-based
#: communication-driven schemes (seed 001 Table 1).
SCHEMES: dict[str, Scheme] = {
    s.label: s
    for s in (
        Scheme("NLS", "fcfs", "nls", 3, group="spin"),
        Scheme("PB", "fcfs", "pb", 3, group="spin"),
        Scheme("DCS", "fcfs", "dcs", 3, group="spin"),
        Scheme("SB", "fcfs", "sb", 3, group="block"),
        Scheme("CC", "fcfs", "cc", 3, group="block"),
        Scheme("GM-BLOCK", "fcfs", "block[spin_us=1000]", 3, group="gm"),
        Scheme("HYBRID", "fcfs", "hybrid", 3, group="block"),
        Scheme("GANG", "gang", "nls", 3, packing_only=True, group="gang"),
        Scheme("BATCH", "batch", "nls", 1, packing_only=True, group="batch"),
        Scheme("BATCH-NS", f"batch[strict=false,max_starve_s={MAX_STARVE_S}]", "nls", 1, packing_only=True,
               group="batch"),
        Scheme("BATCH-EASY", "batch[backfill=easy]", "nls", 1, packing_only=True, group="batch"),
    )
}
#: The two FIFO batch baselines: strict FCFS and OpenPBS's default non-strict order. A "beats PBS"
#: verdict rests on the better of the two (lower mean response), so it holds against either.
PBS_BASELINES = ["BATCH", "BATCH-NS"]

#: The schemes the paper plots in Figure 3; its rankings ("lowest", "longest") are checked over these.
PAPER_SCHEMES = ["NLS", "PB", "DCS", "SB", "CC", "HYBRID", "GANG", "BATCH"]
SPIN = ["NLS", "PB", "DCS"]
BLOCK = ["SB", "CC", "HYBRID"]
#: The schemes the paper reports as almost identical (seed 000/001 §5.2).
GM_TRIO = ["CC", "SB", "GM-BLOCK"]

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
    """Mean (over seeds) of the response-time metrics per group, with their spread (SD over seeds)."""
    agg = runs.groupby(list(by), sort=False).agg(
        wait_s=("mean_wait_s", "mean"),
        execution_s=("mean_execution_s", "mean"),
        response_s=("mean_response_s", "mean"),
        wait_sd=("mean_wait_s", "std"),
        execution_sd=("mean_execution_s", "std"),
        response_sd=("mean_response_s", "std"),
        makespan_s=("makespan_s", "mean"),
        utilization=("utilization", "mean"),
        energy_j=("energy_j", "mean"),
        seeds=("seed", "count"),
    )
    return agg.reset_index()


def _where(df: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    sub = df
    for k, v in where.items():
        if k in sub:
            sub = sub[sub[k] == v]
    return sub


def _value(df: pd.DataFrame, col: str, **where: Any) -> float:
    sub = _where(df, where)
    return float(sub[col].iloc[0]) if len(sub) and col in sub else float("nan")


def _sec(v: float, sign: bool = False) -> str:
    """Seconds for a reason or a finding: whole seconds from 10 s up, two decimals below."""
    spec = ("+" if sign else "") + (",.0f" if abs(v) >= 10 or v != v else ".2f")
    return format(v, spec)


def _pct(a: float, b: float) -> float:
    return 100.0 * (a - b) / b if b else float("nan")


def per_seed(runs: pd.DataFrame | None, scheme: str, col: str = "mean_response_s",
             where: dict[str, Any] | None = None) -> pd.Series:
    """One run column of ``scheme`` per seed (the runs matching ``where``)."""
    if runs is None or "scheme" not in runs or col not in runs:
        return pd.Series(dtype=float)
    r = _where(runs[runs["scheme"] == scheme], where or {})
    return r.groupby("seed")[col].mean()


def rel_diff(runs: pd.DataFrame | None, better: str, other: str, col: str = "mean_response_s",
             where: dict[str, Any] | None = None, base: str = "better", agg: pd.DataFrame | None = None) -> Diff:
    """How much lower ``better``'s ``col`` is than ``other``'s, in % of ``base`` ("better": relative to
    ``better``'s value, the paper's "HYBRID 65% better than PBS"; "other": relative to ``other``'s,
    its "gain of PACKING over NO PACKING"), per seed (the seeds' runs share a workload), with its 95%
    interval over the seeds. Positive: ``better`` is lower. Without runs, from the means in ``agg``."""
    a, b = per_seed(runs, better, col, where), per_seed(runs, other, col, where)
    if (a.empty or b.empty) and agg is not None:
        # No per-run table (findings on aggregated numbers only): the means, as one sample.
        c = col.removeprefix("mean_")
        a = pd.Series([_value(agg, c, scheme=better, **(where or {}))])
        b = pd.Series([_value(agg, c, scheme=other, **(where or {}))])
    common = a.index.intersection(b.index)
    a, b = a[common], b[common]
    ref = a if base == "better" else b
    return diff_ci(list(100.0 * (b - a) / ref))


def cross_diff(runs: pd.DataFrame | None, better: tuple[str, dict[str, Any]], other: tuple[str, dict[str, Any]],
               col: str = "mean_response_s") -> Diff:
    """Like :func:`rel_diff` for two (scheme, where) cells that differ in more than the scheme (e.g.
    BATCH memory-aware against NLS without): (other − better) / better in %, paired by seed (none
    measured with fewer than two seeds: the caller takes the means)."""
    runs = seeded(runs)
    a, b = per_seed(runs, better[0], col, better[1]), per_seed(runs, other[0], col, other[1])
    common = a.index.intersection(b.index)
    return diff_ci(list(100.0 * (b[common] - a[common]) / a[common]))


def seeded(runs: pd.DataFrame | None) -> pd.DataFrame | None:
    """``runs`` when they hold at least two seeds (an interval can be computed), else None: with one
    seed the per-seed difference is the difference of the means, so the findings take the means."""
    if runs is None or "seed" not in runs or runs["seed"].nunique() < 2:
        return None
    return runs


@dataclass(frozen=True)
class First:
    """Whether ``target`` is first (lowest, or highest) of a set of schemes, judged per seed: ``lead``
    is, when ``target`` is first by mean, its lead over the runner-up (the runner-up's value minus
    ``target``'s, % of ``target``'s; for "highest", ``target``'s minus the runner-up's, % of the
    runner-up's), else the first's lead over ``target`` (the same orientation, the first in ``target``'s
    place). ``verdict``: reproduced if ``target`` is first and its lead's 95% interval is above 0; tie if
    the lead's interval contains 0 (whichever is first by mean); not reproduced if another scheme is first
    and its lead's interval is above 0. With one seed the sign of the single difference decides."""

    verdict: str
    #: The scheme first by mean, and the runner-up (or ``target`` when another is first).
    first: str
    second: str
    lead: Diff

    def text(self) -> str:
        return f"{self.first} ahead of {self.second} by {self.lead.text()}"


def first_of(runs: pd.DataFrame | None, agg: pd.DataFrame, target: str, col: str, run_col: str,
             schemes: Sequence[str] | None = None, where: dict[str, Any] | None = None,
             highest: bool = False) -> First:
    """:class:`First` of ``target`` by the means in ``agg`` (column ``col``) and the per-seed values in
    ``runs`` (column ``run_col``), over ``schemes`` (default: every scheme in ``agg``) and the rows
    matching ``where``. Without per-run values the lead is the difference of the means (one sample)."""
    sub = _where(agg, where or {})
    if schemes is not None:
        sub = sub[sub["scheme"].isin(list(schemes))]
    vals = sub.groupby("scheme", sort=False)[col].mean().dropna()
    if target not in vals.index or len(vals) < 2:
        return First(NOT_APPLICABLE, target, target, diff_ci([]))
    order = list(vals.sort_values(ascending=not highest, kind="stable").index)
    first = order[0]
    second = order[1] if first == target else target
    # Oriented so that a positive difference means `first` is ahead of `second`.
    lo, hi = (second, first) if highest else (first, second)
    runs = seeded(runs)
    if runs is not None and len(per_seed(runs, lo, run_col, where)) and len(per_seed(runs, hi, run_col, where)):
        lead = rel_diff(runs, lo, hi, run_col, where)
    else:
        lead = diff_ci([_pct(float(vals[hi]), float(vals[lo]))])
    if lead.n == 0:
        return First(NOT_APPLICABLE, first, second, lead)
    if lead.sign == 0:
        v = TIE
    else:
        # The per-seed differences can order the pair against the means (a skewed seed): they decide.
        v = REPRODUCED if (lead.sign > 0) == (first == target) else NOT_REPRODUCED
    return First(v, first, second, lead)


def pbs_baseline(runs: pd.DataFrame | None, where: dict[str, Any] | None = None,
                 agg: pd.DataFrame | None = None) -> str:
    """The FIFO batch baseline a "beats PBS" verdict rests on: the better (lower mean response) of
    strict FCFS (BATCH) and OpenPBS's default non-strict order (BATCH-NS), among those run (from the
    means in ``agg`` without runs)."""
    def mean(s: str) -> float:
        v = per_seed(runs, s, where=where)
        if len(v):
            return float(v.mean())
        return _value(agg, "response_s", scheme=s, **(where or {})) if agg is not None else float("nan")

    have = [(mean(s), s) for s in PBS_BASELINES if mean(s) == mean(s)]
    return min(have)[1] if have else "BATCH"


def _one_pbs(df: pd.DataFrame, pbs: str) -> pd.DataFrame:
    """``df`` without the FIFO baseline the verdicts do not rest on (and without BATCH-EASY)."""
    drop = [s for s in [*PBS_BASELINES, "BATCH-EASY"] if s != pbs]
    return df[~df["scheme"].isin(drop)].reset_index(drop=True)


def _other_baseline(runs: pd.DataFrame | None, scheme: str, pbs: str, where: dict[str, Any]) -> str:
    """``scheme`` against the FIFO baseline the verdict does not rest on, for the report."""
    other = [s for s in PBS_BASELINES if s != pbs and len(per_seed(runs, s, where=where))]
    return "".join(f"; {o} − {scheme} {rel_diff(runs, scheme, o, where=where).text()}" for o in other)


def _lowest(df: pd.DataFrame, col: str) -> str:
    return str(df.loc[df[col].idxmin(), "scheme"])


def _highest(df: pd.DataFrame, col: str) -> str:
    return str(df.loc[df[col].idxmax(), "scheme"])


def _paper(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["scheme"].isin(PAPER_SCHEMES)].reset_index(drop=True)


def _present(df: pd.DataFrame, names: Sequence[str]) -> list[str]:
    have = set(df["scheme"])
    return [s for s in names if s in have]


# ----- the cost balance: what the model charged each scheme -----------------------------------

#: Run counters of the cost balance: (runs.csv column, cost-table column, words in a reason).
COSTS = [
    ("process_spin_s", "spin_s", "s spinning"),
    ("process_context_switches", "context_switches", "context switches"),
    ("process_interrupts", "wakeup_interrupts", "wake-up interrupts"),
    ("process_policy_interrupts", "policy_interrupts", "policy interrupts"),
    ("process_boosts", "boosts", "boosts"),
    ("process_boost_preemptions", "boost_preemptions", "boost preemptions"),
    ("process_gang_switches", "gang_switches", "gang switches"),
    ("process_page_ins", "page_ins", "page-ins"),
]


def cost_table(runs: pd.DataFrame, by: Sequence[str] = ("scheme",),
               schemes: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean per run, per group: the wait/execution split and every cost counter the runs have."""
    cols: dict[str, tuple[str, str]] = {}
    for src, dst in (("mean_wait_s", "wait_s"), ("mean_execution_s", "execution_s")):
        if src in runs:
            cols[dst] = (src, "mean")
    for src, dst, _ in COSTS:
        if src in runs:
            cols[dst] = (src, "mean")
    r = runs if schemes is None else runs[runs["scheme"].isin(list(schemes))]
    if r.empty or not cols:
        return pd.DataFrame(columns=[*by, *cols])
    return r.groupby(list(by), sort=False).agg(**cols).reset_index()


def cost_balance(runs: pd.DataFrame | None, schemes: Sequence[str] | None = None,
                 where: dict[str, Any] | None = None) -> str:
    """What the model charged each scheme (mean per run, over the runs matching ``where``): the
    wait/execution split, CPU burnt spinning, context switches, wake-up and policy interrupts,
    boosts, gang switches and page-ins. Counters that are 0 for every scheme compared are left out."""
    if runs is None or "scheme" not in runs or not any(src in runs for src, _, _ in COSTS):
        return "the run counters are not available"
    t = cost_table(_where(runs, where or {}), ["scheme"], schemes)
    if t.empty:
        return "no run of these schemes"
    if schemes is not None:
        t = t.set_index("scheme").reindex([s for s in schemes if s in set(t["scheme"])]).reset_index()
    shown = [(dst, words) for _, dst, words in COSTS
             if dst in t and (dst == "spin_s" or (t[dst].fillna(0) != 0).any())]
    parts = []
    for _, v in t.iterrows():
        split = (f"wait {_sec(v['wait_s'])} s + execution {_sec(v['execution_s'])} s, "
                 if "wait_s" in t and "execution_s" in t else "")
        counters = ", ".join(f"{v[dst]:,.0f} {words}" for dst, words in shown)
        parts.append(f"{v['scheme']}: {split}{counters}")
    scope = "".join(f" ({k} = {val})" for k, val in (where or {}).items())
    return f"mean per run{scope}: " + "; ".join(parts)


def _gap(df: pd.DataFrame, a: str, b: str, col: str = "response_s", **where: Any) -> str:
    """``a``'s ``col`` beside ``b``'s, the difference split into wait and execution when ``col`` is
    the response time."""
    va, vb = _value(df, col, scheme=a, **where), _value(df, col, scheme=b, **where)
    text = f"{a} {_sec(va)} s vs {b} {_sec(vb)} s"
    if col == "response_s" and {"wait_s", "execution_s"} <= set(df.columns):
        dw = _value(df, "wait_s", scheme=a, **where) - _value(df, "wait_s", scheme=b, **where)
        de = _value(df, "execution_s", scheme=a, **where) - _value(df, "execution_s", scheme=b, **where)
        text += f" ({a} − {b}: wait {_sec(dw, True)} s, execution {_sec(de, True)} s)"
    return text


# ----- node occupancy from the job tables -----------------------------------------------------


def _nodes_of(text: Any) -> list[int]:
    out: list[int] = []
    for part in str(text).split(","):
        if part and part != "nan":
            a, _, b = part.partition("-")
            out.extend(range(int(a), int(b or a) + 1))
    return out


def occupancy(jobs: pd.DataFrame, nodes: int) -> dict[str, float]:
    """How one run's jobs occupied the nodes, from its job table (start, end, node_list):
    ``jobs_per_node``: mean number of jobs on a node while it held at least one (time-weighted);
    ``empty_pct``: share of node-time (N x makespan) a node held no job;
    ``empty_waiting_pct``: share of node-time a node held no job while a job was waiting to start
    (fragments a backfilling scheduler could fill);
    ``backfilled``: jobs that started before a job submitted earlier."""
    j = jobs.dropna(subset=["start_s", "end_s"]).sort_values(["submit_s", "job_id"], kind="stable")
    if j.empty or nodes <= 0:
        return {"jobs_per_node": float("nan"), "empty_pct": float("nan"), "empty_waiting_pct": float("nan"),
                "backfilled": 0}
    sub, st, en = (j[c].to_numpy(float) for c in ("submit_s", "start_s", "end_s"))
    member = np.zeros((len(j), nodes), dtype=bool)
    for k, text in enumerate(j["node_list"]):
        for n in _nodes_of(text):
            if 0 <= n < nodes:
                member[k, n] = True
    t = np.unique(np.concatenate([sub, st, en]))
    lo, hi = t[:-1], t[1:]
    dt = hi - lo
    running = (st[:, None] <= lo[None, :]) & (en[:, None] > lo[None, :])  # job x segment
    waiting = ((sub[:, None] <= lo[None, :]) & (st[:, None] > lo[None, :])).any(axis=0)
    count = running.T.astype(float) @ member.astype(float)  # segment x node: jobs on the node
    occupied = (count > 0) * dt[:, None]
    span = float(en.max() - sub.min()) * nodes
    held = float(occupied.sum())
    empty = (count == 0) * dt[:, None]
    backfilled = sum(bool((st[:k] > st[k]).any()) for k in range(len(j)))
    return {
        "jobs_per_node": float((count * dt[:, None]).sum() / held) if held else float("nan"),
        "empty_pct": 100.0 * float(empty.sum()) / span if span else float("nan"),
        "empty_waiting_pct": 100.0 * float((empty * waiting[:, None]).sum()) / span if span else float("nan"),
        "backfilled": backfilled,
    }


def occupancy_table(g: Gathered, by: Sequence[str]) -> pd.DataFrame:
    """:func:`occupancy` of every run, averaged per group."""
    if g.jobs.empty or "node_list" not in g.jobs:
        return pd.DataFrame(columns=[*by, "jobs_per_node", "empty_pct", "empty_waiting_pct", "backfilled"])
    rows = []
    nodes = dict(zip(g.runs["run"], g.runs["machine_nodes"], strict=True))
    labels = g.runs.set_index("run")
    for run, jobs in g.jobs.groupby("run", sort=False):
        rows.append({**{k: labels.loc[run, k] for k in by}, **occupancy(jobs, int(nodes[run]))})
    return pd.DataFrame(rows).groupby(list(by), sort=False).mean(numeric_only=True).reset_index()


def offered_load(g: Gathered, by: Sequence[str] = ()) -> str:
    """The seeds' spread of offered load: per BATCH run (strict FCFS, every job dedicated on its nodes,
    so its execution is its dedicated time), the node-seconds of work (nodes x execution, summed over
    the jobs) over N x the submission span (last submit − first submit); min–max and mean over the
    seeds, per value of ``by``."""
    j, r = g.jobs, g.runs
    if j.empty or "scheme" not in j or "nodes" not in j:
        return ""
    b = j[(j["scheme"] == "BATCH") & j["execution_s"].notna()]
    if b.empty:
        return ""
    nodes = dict(zip(r["run"], r["machine_nodes"], strict=True))
    rows = []
    for run, x in b.groupby("run", sort=False):
        span = float(x["submit_s"].max() - x["submit_s"].min())
        if span > 0:
            rows.append({**{k: x[k].iloc[0] for k in by}, "load": float((x["nodes"] * x["execution_s"]).sum())
                         / (float(nodes[run]) * span)})
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    parts = []
    for key, sub in (df.groupby(list(by), sort=False) if by else [((), df)]):
        label = ", ".join(str(v) for v in (key if isinstance(key, tuple) else (key,)))
        parts.append((f"{label}: " if label else "") + f"{sub['load'].min():.2f}–{sub['load'].max():.2f} "
                     f"(mean {sub['load'].mean():.2f}, {len(sub)} seed(s))")
    return ("Offered load (node-seconds of the jobs' dedicated execution, taken from the BATCH runs, over N x the "
            "submission span): " + "; ".join(parts) + ".")


def starving_note(g: Gathered) -> str:
    """Whether OpenPBS's starving-job rule acted in the BATCH-NS runs: their longest wait against
    ``max_starve`` (a job waiting longer is starving and holds the queue until it starts)."""
    j = g.jobs
    if j.empty or "scheme" not in j or "wait_s" not in j:
        return ""
    w = j.loc[j["scheme"] == "BATCH-NS", "wait_s"].dropna()
    if w.empty:
        return ""
    longest = float(w.max())
    starving = int((w > MAX_STARVE_S).sum())
    return (f"BATCH-NS is OpenPBS's default scheduler: non-strict order with help_starving_jobs after max_starve "
            f"{MAX_STARVE_S:,} s (24 h). Longest BATCH-NS wait: {longest:,.0f} s; "
            + (f"{starving} job(s) waited past max_starve, so the starving rule held the queue for them."
               if starving else "no job waited past max_starve, so the starving rule never acted (BATCH-NS is "
               "plain non-strict order in these runs)."))


# ----- findings shared by several experiments ---------------------------------------------------


def _gap_per_seed(runs: pd.DataFrame | None, low: Sequence[str], high: Sequence[str], col: str,
                  where: dict[str, Any] | None) -> pd.Series:
    """Per seed, the mean of ``high``'s schemes minus the mean of ``low``'s, % of ``low``'s (seeds where
    a scheme did not run are left out; empty with fewer than two seeds)."""
    runs = seeded(runs)
    if runs is None or not low or not high:
        return pd.Series(dtype=float)
    lo = pd.concat([per_seed(runs, s, col, where) for s in low], axis=1).dropna().mean(axis=1)
    hi = pd.concat([per_seed(runs, s, col, where) for s in high], axis=1).dropna().mean(axis=1)
    common = lo.index.intersection(hi.index)
    return 100.0 * (hi[common] - lo[common]) / lo[common]


def group_gap(runs: pd.DataFrame | None, low: Sequence[str], high: Sequence[str], col: str = "mean_response_s",
              where: dict[str, Any] | None = None) -> Diff:
    """:func:`_gap_per_seed` with its 95% interval over the seeds."""
    return diff_ci(list(_gap_per_seed(runs, low, high, col, where)))


def blocking_vs_spin(df: pd.DataFrame, col: str, where: str, runs: pd.DataFrame | None = None,
                     scope: dict[str, Any] | None = None) -> Finding:
    """Seed 000/001: blocking-based schemes (SB, CC, HYBRID) beat the spin-based ones (NLS, PB, DCS)."""
    block = df[df["scheme"].isin(BLOCK)][col]
    spin = df[df["scheme"].isin(SPIN)][col]
    claim = f"blocking-based coscheduling (CC, SB, HYBRID) beats spin-based (NLS, PB, DCS) on Linux ({where})"
    if block.empty or spin.empty:
        return Finding(claim, "", "a group has no runs", NOT_APPLICABLE)
    worst_block = str(df.loc[block.idxmax(), "scheme"])
    best_spin = str(df.loc[spin.idxmin(), "scheme"])
    run_col = f"mean_{col}"
    strict = rel_diff(seeded(runs), worst_block, best_spin, run_col, scope, agg=df)
    groups = group_gap(runs, _present(df, BLOCK), _present(df, SPIN), run_col, scope)
    if groups.n == 0:
        groups = diff_ci([_pct(float(spin.mean()), float(block.mean()))])
    if ordered(strict) == REPRODUCED:
        v = REPRODUCED
    elif ordered(groups) == REPRODUCED:
        v = PARTLY
    elif groups.sign == 0 or strict.sign == 0:
        v = TIE
    else:
        v = NOT_REPRODUCED
    return Finding(
        claim,
        f"per seed: reproduced if the best spin scheme minus the worst blocking scheme (by mean {col}; % of the "
        "blocking one) has a 95% interval above 0; partly if only the spin group's mean minus the blocking "
        "group's does; tie if an interval contains 0 and neither is above it; not reproduced otherwise",
        f"blocking {_sec(block.min())}–{_sec(block.max())} s, spin {_sec(spin.min())}–{_sec(spin.max())} s; "
        f"{best_spin} − {worst_block} {strict.text()}; spin − blocking group means {groups.text()}",
        v,
        "" if v == REPRODUCED else f"worst blocking {_gap(df, worst_block, best_spin, col)} (best spin); "
        + cost_balance(runs, [*SPIN, *BLOCK], scope),
    )


#: How a grouping column is named in a rule, and how its values read.
_GROUP_NOUN = {"placement": "placement", "app": "application", "memory_aware": "allocation", "class": "class"}


def _group(by: str | None, value: Any) -> str:
    if by == "memory_aware":
        return "memory-aware" if bool(value) else "no memory-aware"
    if by == "placement":
        return {"random": "NO PACKING", "packing": "PACKING"}.get(str(value), str(value))
    return str(value)


def pair_spread(runs: pd.DataFrame | None, a: str, b: str, col: str, where: dict[str, Any] | None = None,
                agg: pd.DataFrame | None = None) -> Diff:
    """How much higher ``b``'s ``col`` is than ``a``'s, in % of the lower of the two, per seed (the
    seeds' runs share a workload), with its 95% interval over the seeds: the spread of one pair, signed.
    Without runs, from the means in ``agg`` (one sample)."""
    x, y = per_seed(runs, a, col, where), per_seed(runs, b, col, where)
    if (x.empty or y.empty) and agg is not None:
        c = col.removeprefix("mean_")
        x = pd.Series([_value(agg, c, scheme=a, **(where or {}))])
        y = pd.Series([_value(agg, c, scheme=b, **(where or {}))])
    common = x.index.intersection(y.index)
    x, y = x[common], y[common]
    return diff_ci(list(100.0 * (y - x) / pd.concat([x, y], axis=1).min(axis=1)))


#: "Almost identical" (seed 000/001 §5.2) gives no number: the band every pairwise spread's 95%
#: interval must lie in, in % of the lower value (the 10% the earlier mean-only rule used).
IDENTICAL_BAND = 10.0


def gm_block_finding(df: pd.DataFrame, col: str, by: str | None, runs: pd.DataFrame | None = None) -> Finding:
    """Seed 000/001 §5.2: CC, SB and GM's own blocking scheme perform almost identically (so the paper
    plots them as one). An equivalence verdict per value of ``by`` (placement, application, allocation):
    identical if each of the three pairwise spreads has its 95% interval inside ±IDENTICAL_BAND, not
    identical if one lies wholly outside it, undecided otherwise."""
    claim = ("CC, SB and the blocking scheme available with GM (GM-BLOCK: 1 ms spin then blocking, no boosts) "
             "perform almost identically (S000/S001 §5.2)")
    groups = list(dict.fromkeys(df[by])) if by else [None]
    pairs = [(GM_TRIO[i], GM_TRIO[j]) for i in range(len(GM_TRIO)) for j in range(i + 1, len(GM_TRIO))]
    run_col = f"mean_{col}"
    stat_runs = seeded(runs)
    per_group: dict[Any, tuple[str, list[tuple[str, str, Diff]]]] = {}
    for gv in groups:
        sub = df if gv is None else df[df[by] == gv]
        if not set(GM_TRIO) <= set(sub["scheme"]):
            continue
        where = {by: gv} if by else None
        ds = [(a, b, pair_spread(stat_runs, a, b, run_col, where, agg=sub)) for a, b in pairs]
        per_group[gv] = (all_equivalent([equivalent(d, IDENTICAL_BAND) for _, _, d in ds]), ds)
    if not per_group:
        return Finding(claim, "", "CC, SB and GM-BLOCK were not all run", NOT_APPLICABLE)
    noun = _GROUP_NOUN.get(by or "", by or "")
    each = f" for every {noun}" if by else ""
    vs = [v for v, _ in per_group.values()]
    if all(v == REPRODUCED for v in vs):
        v = REPRODUCED
    elif REPRODUCED in vs and by is not None:
        v = PARTLY
    elif NOT_REPRODUCED in vs:
        v = NOT_REPRODUCED
    else:
        v = UNDECIDED
    why = ""
    if v != REPRODUCED:
        bits = []
        for gv, (gvv, _) in per_group.items():
            if gvv == REPRODUCED:
                continue
            scope = {by: gv} if by else {}
            sub = df if gv is None else df[df[by] == gv]
            vals = ", ".join(f"{s} {_sec(_value(sub, col, scheme=s))} s" for s in GM_TRIO)
            bits.append((f"{_group(by, gv)}: " if by else "") + vals + "; " + cost_balance(runs, GM_TRIO, scope))
        why = ("GM-BLOCK spins 1 ms then blocks and never boosts; SB spins up to its spin time before blocking; CC "
               "also spin-blocks the sender and boosts receivers: " + " | ".join(bits))
    ours = "; ".join(
        (f"{_group(by, gv)} ({gvv}): " if by else f"({gvv}) ")
        + ", ".join(f"{b} − {a} {d.text()}" for a, b, d in ds)
        for gv, (gvv, ds) in per_group.items())
    return Finding(
        claim,
        f"equivalence of the {col} of CC, SB and GM-BLOCK{each}: each pairwise spread (the higher minus the lower, "
        f"% of the lower, per seed) has its 95% interval inside ±{IDENTICAL_BAND:g}% (the paper states no number; "
        "one seed: the spread of the means) → reproduced (identical); one interval wholly outside → not reproduced "
        "(not identical); otherwise undecided"
        + (f"; partly if identical for some {noun}" if by else ""),
        ours,
        v,
        why,
    )


def backfill_finding(df: pd.DataFrame, occ: pd.DataFrame | None = None,
                     runs: pd.DataFrame | None = None) -> Finding:
    """Seed 000 §5.1: PBS with and without backfilling gave results within 2% of each other."""
    claim = ("PBS with and without backfilling are very close (within 2%): the NAS jobs' sizes (2^N or N^2) "
             "on 16 nodes leave few fragments for backfilling (S000 §5.1)")
    b, e = _value(df, "response_s", scheme="BATCH"), _value(df, "response_s", scheme="BATCH-EASY")
    if not (b == b and e == e):
        return Finding(claim, "", "BATCH and BATCH-EASY were not both run", NOT_APPLICABLE)
    dd = rel_diff(runs, "BATCH", "BATCH-EASY", base="better", agg=df)
    d = dd.mean
    ok, partly = abs(d) <= 2.0, abs(d) <= 10.0
    occ_text = ""
    if occ is not None and len(occ) and "scheme" in occ:
        bits = []
        for s in ("BATCH", "BATCH-EASY"):
            if s in set(occ["scheme"]):
                bits.append(f"{s}: {_value(occ, 'backfilled', scheme=s):,.1f} jobs started ahead of an earlier "
                            f"one, nodes empty while a job waited {_value(occ, 'empty_waiting_pct', scheme=s):.1f}%"
                            " of node-time")
        occ_text = "; ".join(bits)
    why = ""
    if not ok:
        why = (f"{_gap(df, 'BATCH-EASY', 'BATCH')}; " + (occ_text + "; " if occ_text else "")
               + "EASY lets a later job start on nodes the head job cannot use yet when it ends before the head "
               "job's reservation (estimates: the requested walltime of the job's class, batch.rs); the response "
               "changes by "
               "what those jobs save in wait minus what the jobs behind them lose")
    return Finding(
        claim,
        "reproduced if BATCH-EASY's mean response is within 2% of BATCH's (strict FCFS, PACKING; mean over the "
        "seeds of the per-seed difference); partly if within 10%",
        f"BATCH {_sec(b)} s, BATCH-EASY {_sec(e)} s (BATCH-EASY − BATCH {dd.text()})"
        + (f"; {occ_text}" if occ_text else ""),
        verdict(ok, partly),
        why,
    )


# ----- Figure 3 and Table 3 ------------------------------------------------------------------


def fig3_runs(ia: float, n_full: int = 100) -> Any:
    def runs(st: Settings) -> list[RunSpec]:
        n = 30 if st.quick else n_full
        workloads = [(seed, mix(n, NAS_APPS, "ABC", ia, seed)) for seed in range(1, st.seeds + 1)]
        return _specs("fig3", SCHEMES, ["packing", "random"], workloads, memory_aware=True)

    return runs


def _placement_reason(agg: pd.DataFrame, occ: pd.DataFrame | None, schemes: Sequence[str]) -> str:
    """Why PACKING gains what it gains: the wait and execution under each placement (mean over the
    time-sharing schemes) and how the jobs occupied the nodes."""
    sub = agg[agg["scheme"].isin(list(schemes))]
    m = sub.groupby("placement")[["wait_s", "execution_s"]].mean()
    text = []
    if {"packing", "random"} <= set(m.index):
        text.append(f"mean over the time-sharing schemes, NO PACKING → PACKING: wait {_sec(m.loc['random', 'wait_s'])}"
                    f" → {_sec(m.loc['packing', 'wait_s'])} s, execution {_sec(m.loc['random', 'execution_s'])} → "
                    f"{_sec(m.loc['packing', 'execution_s'])} s")
    if occ is not None and len(occ) and {"placement", "scheme"} <= set(occ.columns):
        o = occ[occ["scheme"].isin(list(schemes))].groupby("placement")[["jobs_per_node", "empty_pct"]].mean()
        if {"packing", "random"} <= set(o.index):
            text.append(f"a node held {o.loc['random', 'jobs_per_node']:.2f} (NO PACKING) vs "
                        f"{o.loc['packing', 'jobs_per_node']:.2f} (PACKING) jobs on average while occupied and was "
                        f"empty {o.loc['random', 'empty_pct']:.1f}% vs {o.loc['packing', 'empty_pct']:.1f}% of the "
                        "node-time")
    text.append("the platform has one latency between every pair of nodes (no topology), so placement acts only "
                "through which jobs share a node and how long admitted jobs wait for free slots")
    return "; ".join(text)


def fig3_findings(agg: pd.DataFrame, heavy: bool, runs: pd.DataFrame | None = None,
                  occ: pd.DataFrame | None = None) -> list[Finding]:
    """Seed 000/001 §5.2 on Figure 3 (and §5.1 on backfilling), from the per-(placement, scheme) means."""
    f: list[Finding] = []
    pk_all = agg[agg["placement"] == "packing"].reset_index(drop=True)
    pk = _paper(pk_all)
    allp = _paper(agg)
    k = allp["response_s"].idxmin()
    low, low_pl = str(allp.loc[k, "scheme"]), str(allp.loc[k, "placement"])
    hy = allp[allp["scheme"] == "HYBRID"]
    if len(hy):
        hk = hy["response_s"].idxmin()
        hy_pl, hy_r = str(allp.loc[hk, "placement"]), float(allp.loc[hk, "response_s"])
        why = ""
        if low != "HYBRID":
            d = rel_diff(runs, low, "HYBRID", where={"placement": low_pl}, agg=allp)
            v = TIE if d.sign == 0 else NOT_REPRODUCED
            why = (f"{low} ({low_pl}) is lower in the model: "
                   f"{_gap(allp[allp['placement'] == low_pl], 'HYBRID', low)} under {low_pl}; "
                   + cost_balance(runs, ["HYBRID", low], {"placement": low_pl}))
        else:
            rest = allp[allp.index != k]
            k2 = rest["response_s"].idxmin()
            second, second_pl = str(rest.loc[k2, "scheme"]), str(rest.loc[k2, "placement"])
            if second_pl == hy_pl:
                d = rel_diff(runs, "HYBRID", second, where={"placement": hy_pl}, agg=allp)
            elif runs is not None:
                hs = per_seed(runs, "HYBRID", where={"placement": hy_pl})
                d = diff_ci(list(100.0 * (per_seed(runs, second, where={"placement": second_pl}) - hs) / hs))
            else:
                d = diff_ci([_pct(float(rest.loc[k2, "response_s"]), hy_r)])
            v = ordered(d)
        f.append(Finding(
            "HYBRID has the lowest response time of all schemes (S000 §5.2, Fig. 3)",
            "reproduced if HYBRID's mean response (either placement) is the lowest of the paper's schemes' runs "
            "and its difference to the next lowest (per seed, % of the lower) has a 95% interval above 0; tie if "
            "that interval contains 0",
            f"lowest: {low} {low_pl} ({_sec(allp['response_s'].min())} s); HYBRID {hy_pl} {_sec(hy_r)} s; "
            f"gap to the next: {d.text()}",
            v, why,
        ))
    if "BATCH" in set(pk["scheme"]):
        where_pk = {"placement": "packing"}
        ex = first_of(runs, pk, "BATCH", "execution_s", "mean_execution_s", where=where_pk)
        wt = first_of(runs, pk, "BATCH", "wait_s", "mean_wait_s", where=where_pk, highest=True)
        v = combine([ex.verdict, wt.verdict])
        ex_low, w_high = ex.first, wt.first
        why = ""
        if v != REPRODUCED:
            bits = []
            if ex_low != "BATCH":
                bits.append(f"lowest execution {_gap(pk, ex_low, 'BATCH', 'execution_s')}")
            if w_high != "BATCH":
                bits.append(f"longest wait {_gap(pk, w_high, 'BATCH', 'wait_s')}")
            why = "; ".join(bits + [cost_balance(runs, list(dict.fromkeys(["BATCH", ex_low, w_high])), where_pk)])
        f.append(Finding(
            "batch (PBS) has the lowest execution time but the longest wait (S000 §5.2)",
            "each half per seed (PACKING runs of the paper's schemes): BATCH first by mean and its lead over the "
            "runner-up (% of the lower) with a 95% interval above 0; a lead whose interval contains 0 is a tie "
            "(whoever is first by mean). Reproduced if both halves hold; partly if one; tie if both are ties",
            f"lowest execution: {ex_low} ({ex.text()}, {ex.verdict}); longest wait: {w_high} ({wt.text()}, "
            f"{wt.verdict})",
            v, why,
        ))
    f.append(blocking_vs_spin(pk, "response_s", "PACKING, mean response", runs, {"placement": "packing"}))
    ts = [s for s in PAPER_SCHEMES if not SCHEMES[s].packing_only]
    gains = {}
    for s in ts:
        a = _value(agg, "response_s", scheme=s, placement="random")
        b = _value(agg, "response_s", scheme=s, placement="packing")
        if a == a and b == b:
            gains[s] = 100.0 * (a - b) / a
    if gains:
        g = sum(gains.values()) / len(gains)
        target = "about 25%" if heavy else "a gain"
        # Per seed: the gain averaged over the time-sharing schemes; its interval over the seeds.
        per = [per_seed(runs, s, where={"placement": pl}) for s in gains for pl in ("random", "packing")]
        per_gain = [100.0 * (per[2 * i] - per[2 * i + 1]) / per[2 * i] for i in range(len(gains))]
        seeds_gain = pd.concat(per_gain, axis=1).mean(axis=1).dropna() if per_gain else pd.Series(dtype=float)
        d = diff_ci(list(seeds_gain)) if len(seeds_gain) else diff_ci([g])
        lo_b, hi_b = band(20.0)[0], band(25.0)[1]
        v = ordered(d, (lo_b, hi_b) if heavy else None)
        f.append(Finding(
            f"PACKING improves response over NO PACKING, {target} on average (S000 §5.2; S001: about 20%)",
            "reproduced if the gain (NO PACKING - PACKING) / NO PACKING, averaged over the time-sharing schemes, "
            "is positive (95% interval over the seeds above 0)"
            + (f" with its mean within {lo_b:.0f}–{hi_b:.1f}% (20–25% ± half); partly if positive but outside "
               "that band" if heavy else "") + "; tie if the interval contains 0",
            f"mean gain {d.text()} (per scheme: " + ", ".join(f"{s} {x:.0f}%" for s, x in gains.items()) + ")",
            v,
            "" if v == REPRODUCED else _placement_reason(agg, occ, list(gains)),
        ))
    where = {"placement": "packing"}
    pbs = pbs_baseline(runs, where, pk_all)
    pbs_words = (f"PBS = {pbs} (the better by mean response of strict FCFS BATCH and OpenPBS's default "
                 "non-strict BATCH-NS)")
    for other, paper_pct, size in (("GANG", 20.0, "about 20% under heavy load"),
                                   ("PBS", 300.0, "up to 300% under heavy load")):
        o = pbs if other == "PBS" else other
        if {"HYBRID", o} <= set(pk_all["scheme"]):
            h, ov = _value(pk_all, "response_s", scheme="HYBRID"), _value(pk_all, "response_s", scheme=o)
            d = rel_diff(runs, "HYBRID", o, where=where, agg=pk_all)
            lo_b, hi_b = band(paper_pct)
            v = ordered(d, (lo_b, hi_b) if heavy else None)
            f.append(Finding(
                f"HYBRID's response time is lower than {'BATCH' if other == 'PBS' else other}'s"
                + (f" ({size})" if heavy else "") + " (S000 §5.2)",
                f"reproduced if {o} − HYBRID (% of HYBRID, per seed, PACKING) has a 95% interval above 0"
                + (f" and a mean within {lo_b:.0f}–{hi_b:.0f}% (the paper's {paper_pct:.0f}% ± half); partly if "
                   "above 0 but outside that band" if heavy else "") + "; tie if the interval contains 0"
                + (f"; {pbs_words}" if other == "PBS" else ""),
                f"HYBRID {_sec(h)} s, {o} {_sec(ov)} s; {o} − HYBRID {d.text()}"
                + (_other_baseline(runs, "HYBRID", pbs, where) if other == "PBS" else ""),
                v,
                "" if v == REPRODUCED else _gap(pk_all, "HYBRID", o) + "; "
                + cost_balance(runs, ["HYBRID", o], where),
            ))
    for s in ("GANG", "CC", "SB"):
        if {pbs, s} <= set(pk_all["scheme"]):
            a, b = _value(pk_all, "response_s", scheme=s), _value(pk_all, "response_s", scheme=pbs)
            d = rel_diff(runs, s, pbs, where=where, agg=pk_all)
            v = ordered(d)
            f.append(Finding(
                f"{s} outperforms PBS (S000 §5.2)",
                f"reproduced if {pbs} − {s} mean response (% of {s}, per seed, PACKING) has a 95% interval above "
                f"0; tie if it contains 0; {pbs_words}",
                f"{s} {_sec(a)} s, {pbs} {_sec(b)} s; {pbs} − {s} {d.text()}" + _other_baseline(runs, s, pbs, where),
                v,
                "" if v == REPRODUCED else _gap(pk_all, s, pbs) + "; " + cost_balance(runs, [s, pbs], where),
            ))
    if set(GM_TRIO) <= set(agg["scheme"]):
        f.append(gm_block_finding(agg, "response_s", "placement", runs))
    if {"BATCH", "BATCH-EASY"} <= set(pk_all["scheme"]):
        occ_pk = occ[occ["placement"] == "packing"] if occ is not None and "placement" in occ else occ
        f.append(backfill_finding(pk_all, occ_pk, runs))
    return f


#: Columns of the cost-balance tables in the reports.
COST_COLUMNS = ["wait_s", "execution_s", *[dst for _, dst, _ in COSTS]]


def _cost_section(g: Gathered, by: Sequence[str], occ: pd.DataFrame | None = None) -> list[str]:
    """The report's cost-balance table: mean per run of the wait/execution split and the counters."""
    t = cost_table(g.runs, by)
    if occ is not None and len(occ):
        t = t.merge(occ[[*by, "jobs_per_node", "empty_pct"]], on=list(by), how="left")
    if t.empty:
        return []
    for _, dst, _ in COSTS[1:]:  # counters: whole numbers (means over seeds rounded)
        if dst in t:
            t[dst] = [f"{v:,.0f}" if v == v else "—" for v in t[dst]]
    return ["", "Cost balance, mean per run (wait and execution: mean per job, s; spin_s: CPU seconds spent "
            "spinning, all processes; counters from summary.json `process`; jobs_per_node: jobs on a node "
            "while it held one; empty_pct: node-time with no job):", "", md_table(t, 1)]


def _fig_response(g: Gathered, st: Settings, title: str, heavy: bool, name: str) -> Outcome:
    title = title.format(n=int(g.runs["jobs_total"].iloc[0]))
    agg = per_scheme(g.runs, ["placement", "scheme"])
    table = agg[["placement", "scheme", "wait_s", "execution_s", "response_s", "response_sd", "seeds"]]
    files = {f"{name}.csv": csv_writer(table)}
    files[f"{name}.png"] = lambda p: stacked_bars(
        agg, p, group="placement", label="scheme",
        parts=[("wait_s", "wait"), ("execution_s", "execution")],
        title=title, ylabel="mean response time (s)", err="response_sd" if st.seeds > 1 else None)
    occ = occupancy_table(g, ["placement", "scheme"])
    findings = fig3_findings(agg, heavy, g.runs, occ)
    report = [
        f"Workload: {int(g.runs['jobs_total'].iloc[0])} NAS jobs (CG, IS, SP, MG, BT, LU, EP; classes A–C; "
        "4/8/9/16 processes as each allows), exponential inter-arrival, MPL 3, memory-aware admission "
        "(no paging), PACKING and NO PACKING (random) placement. GM-BLOCK is GM's own blocking scheme "
        "(1 ms spin then blocking, no boosts), BATCH-EASY is PBS with EASY backfilling; the paper mentions both "
        "without plotting them, so its rankings are checked over its eight plotted schemes.",
        "",
        f"![{name}]({name}.png)",
        "",
        offered_load(g),
        "",
        starving_note(g),
        "",
        "Mean over seeds (seconds):",
        "",
        md_table(table, 0),
        "",
        "## Findings",
        "",
        findings_md(findings),
    ]
    report += _cost_section(g, ["placement", "scheme"], occ)
    return Outcome("\n".join(report), files)


register(Experiment(
    "choi-fig3a", "100 mixed NAS jobs, heavy load (mean inter-arrival 100 s)", "seed 000 Figure 3(a)",
    fig3_runs(100.0),
    lambda g, st: _fig_response(g, st, "Fig. 3(a): {n} NAS jobs, inter-arrival 100 s, MPL 3", True, "fig3a"),
    quick_title="30 mixed NAS jobs, heavy load (mean inter-arrival 100 s)",
))
register(Experiment(
    "choi-fig3b", "100 mixed NAS jobs, light load (mean inter-arrival 250 s)", "seed 000 Figure 3(b)",
    fig3_runs(250.0),
    lambda g, st: _fig_response(g, st, "Fig. 3(b): {n} NAS jobs, inter-arrival 250 s, MPL 3", False, "fig3b"),
    quick_title="30 mixed NAS jobs, light load (mean inter-arrival 250 s)",
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

#: Energy-table columns that get a ``_sd`` (spread over seeds) column when ``--seeds N > 1``.
ENERGY_SD = ["busy_MJ", "idle_MJ", "total_MJ", "utilization_pct", "running_time_s"]


def energy_table(runs: pd.DataFrame, by: Sequence[str], seeds: int = 1) -> pd.DataFrame:
    """Seed 000 Table 3's layout from our runs, with B (idle W) and X (busy - idle W) of each run's own
    platform (summary.json provenance). The paper splits a node's energy into *idle* = B x N x T (the
    base power over the whole run) and *busy* = the extra power X while busy. Exact integration:
    ``busy_MJ`` = energy_j - B N T = X x busy node-seconds (spinning counts as busy). The seed's estimate
    E = (B + X U) N T split the same way: ``est_idle_MJ`` = B N T, ``est_busy_MJ`` = X U N T."""
    need = {"platform_idle_watts", "platform_busy_watts", "machine_nodes", "makespan_s", "energy_j", "utilization"}
    if missing := sorted(need - set(runs.columns)):
        raise ValueError(f"energy table: runs lack column(s) {', '.join(missing)}")
    r = runs.copy()
    b = r["platform_idle_watts"].astype(float)
    x = r["platform_busy_watts"].astype(float) - b
    nt = r["machine_nodes"].astype(float) * r["makespan_s"].astype(float)
    r["idle_MJ"] = b * nt / 1e6
    r["busy_MJ"] = (r["energy_j"] - b * nt) / 1e6
    r["total_MJ"] = r["energy_j"] / 1e6
    r["est_idle_MJ"] = b * nt / 1e6
    r["est_busy_MJ"] = x * r["utilization"] * nt / 1e6
    r["estimate_MJ"] = r["est_idle_MJ"] + r["est_busy_MJ"]
    r["utilization_pct"] = 100.0 * r["utilization"]
    r["running_time_s"] = r["makespan_s"]
    spec = {c: (c, "mean") for c in ("busy_MJ", "idle_MJ", "total_MJ", "utilization_pct", "running_time_s",
                                     "est_busy_MJ", "est_idle_MJ", "estimate_MJ")}
    if seeds > 1:
        spec.update({f"{c}_sd": (c, "std") for c in ENERGY_SD})
    agg = r.groupby(list(by), sort=False).agg(**spec).reset_index()
    # (+ 0.0 turns a rounded -0.0 into 0.0)
    agg["estimate_diff_pct"] = (100.0 * (agg["estimate_MJ"] - agg["total_MJ"]) / agg["total_MJ"]).round(9) + 0.0
    return agg


def with_node_held(t: pd.DataFrame, occ: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """``t`` with ``node_held_pct``: the share of node-time a node held at least one job (100 −
    ``empty_pct`` of :func:`occupancy`), the second utilization definition beside ``utilization_pct``
    (CPU busy, spinning included)."""
    if occ is None or occ.empty or "empty_pct" not in occ:
        return t
    m = t.merge(occ[[*by, "empty_pct"]], on=list(by), how="left")
    m["node_held_pct"] = 100.0 - m.pop("empty_pct")
    return m


def power_model(runs: pd.DataFrame) -> str:
    """B and X of the runs' platform, as printed in the energy reports."""
    pairs = sorted({(float(i), float(w) - float(i)) for i, w in zip(runs["platform_idle_watts"],
                                                                     runs["platform_busy_watts"], strict=True)})
    text = "; ".join(f"B = {b:.2f} W, X = {x:.3f} W" for b, x in pairs)
    return text + " (the runs' platform, summary.json provenance)"


def _energy_columns(t: pd.DataFrame, by: Sequence[str], paper: dict[Any, tuple[float, ...]] | None,
                    key: Any) -> pd.DataFrame:
    """The energy table with the paper's four columns beside ours (where the paper prints a row) and the
    spread columns when present."""
    t = t.copy()
    if paper is not None:
        for k, col in enumerate(["paper_busy_MJ", "paper_idle_MJ", "paper_utilization_pct", "paper_running_time_s"]):
            t[col] = [paper.get(key(row), (None,) * 4)[k] for _, row in t.iterrows()]
    cols = list(by)
    for c in ("busy_MJ", "idle_MJ", "utilization_pct", "running_time_s"):
        cols.append(c)
        if f"{c}_sd" in t:
            cols.append(f"{c}_sd")
        if c == "utilization_pct" and "node_held_pct" in t:
            cols.append("node_held_pct")
        if paper is not None:
            cols.append(f"paper_{c}")
    cols += ["total_MJ", *(["total_MJ_sd"] if "total_MJ_sd" in t else []), "est_busy_MJ", "est_idle_MJ",
             "estimate_diff_pct"]
    return t[cols]


def _paper_key(scheme: str) -> str:
    return "CC/SB" if scheme in ("CC", "SB") else scheme


def _util_split(runs: pd.DataFrame | None, occ: pd.DataFrame | None, scheme: str, where: dict[str, Any]) -> str:
    """Where a scheme's node-time went: busy (and of it spinning), no job on the node, jobs present but
    all blocked."""
    if runs is None or "scheme" not in runs:
        return ""
    r = _where(runs[runs["scheme"] == scheme], where)
    if r.empty or "utilization" not in r:
        return ""
    u = 100.0 * float(r["utilization"].mean())
    text = f"{scheme}: busy {u:.0f}%"
    if {"process_spin_s", "machine_procs", "makespan_s"} <= set(r.columns):
        spin = 100.0 * float((r["process_spin_s"] / (r["machine_procs"] * r["makespan_s"])).mean())
        text += f" (spinning {spin:.1f}%)"
    if occ is not None and len(occ) and "scheme" in occ:
        e = _value(occ, "empty_pct", scheme=scheme, **where)
        if e == e:
            text += f", no job on the node {e:.0f}%, jobs present but none running {100 - u - e:.0f}%"
    return text


def _above(runs: pd.DataFrame | None, scheme: str, col: str, threshold: float, where: dict[str, Any],
           mean: float) -> Diff:
    """Per seed, ``scheme``'s ``col`` minus ``threshold``, in percentage points of a 0–1 share, with its
    95% interval (the mean ``mean`` as one sample without per-run values)."""
    v = per_seed(seeded(runs), scheme, col, where)
    return diff_ci(list(100.0 * (v - threshold)) if len(v) else [100.0 * (mean - threshold)])


def table3_findings(t: pd.DataFrame, runs: pd.DataFrame | None = None,
                    occ: pd.DataFrame | None = None) -> list[Finding]:
    """Seed 000 §5.4 on Table 3, from the energy table of the fig3a runs."""
    pk = _paper(t[t["placement"] == "packing"])
    f: list[Finding] = []
    where = {"placement": "packing"}
    if "BATCH" in set(pk["scheme"]):
        top = first_of(runs, pk, "BATCH", "total_MJ", "energy_j", where=where, highest=True)
        hi = top.first
        why = ""
        if top.verdict != REPRODUCED:
            longest = _highest(pk, "running_time_s")
            share = 100.0 * _value(pk, "idle_MJ", scheme="BATCH") / _value(pk, "total_MJ", scheme="BATCH")
            why = (f"B x N x T is {share:.0f}% of BATCH's energy, so energy follows the running time; the longest "
                   f"run is {longest}'s: " + ", ".join(
                       f"{s} {_sec(_value(pk, 'running_time_s', scheme=s))} s at "
                       f"{_value(pk, 'utilization_pct', scheme=s):.0f}% ({_value(pk, 'total_MJ', scheme=s):.2f} MJ)"
                       for s in dict.fromkeys(["BATCH", hi, longest]))
                   + "; " + cost_balance(runs, list(dict.fromkeys(["BATCH", hi])), where))
        f.append(Finding(
            "batch scheduling (PBS) has the highest energy consumption, from its long running time (S000 §5.4)",
            "reproduced if BATCH has the highest mean total energy of the paper's schemes' PACKING runs and its lead "
            "over the runner-up (per seed, % of the runner-up's) has a 95% interval above 0; tie if the first's "
            "lead contains 0",
            f"highest: {hi} ({pk['total_MJ'].max():.2f} MJ; {top.text()})", top.verdict, why,
        ))
        blk = _present(pk, ["HYBRID", "CC", "SB"])
        sr = seeded(runs)
        less = {s: ordered(rel_diff(sr, s, "BATCH", "energy_j", where)
                           if len(per_seed(sr, s, "energy_j", where)) else
                           diff_ci([_pct(_value(pk, "total_MJ", scheme="BATCH"), _value(pk, "total_MJ", scheme=s))]))
                for s in blk}
        v = combine(list(less.values()))
        worse = [s for s, x in less.items() if x != REPRODUCED]
        f.append(Finding(
            "blocking-based coscheduling (HYBRID, CC/SB) is more energy-efficient than batch (S000 §5.4)",
            "for each of HYBRID, CC and SB: BATCH's total energy minus its (per seed, % of its) with a 95% interval "
            "above 0 (PACKING). Reproduced if for all three; partly if for some; tie if all three intervals contain "
            "0",
            ", ".join(f"{s} {_value(pk, 'total_MJ', scheme=s):.2f} MJ" for s in [*blk, "BATCH"]) + " ("
            + ", ".join(f"{s}: {x}" for s, x in less.items()) + ")",
            v,
            "" if not worse else ", ".join(
                f"{s} ran {_sec(_value(pk, 'running_time_s', scheme=s))} s with {_value(pk, 'busy_MJ', scheme=s):.2f} "
                "MJ busy" for s in [*worse, "BATCH"]) + "; " + cost_balance(runs, [*worse, "BATCH"], where),
        ))
    non_batch = pk[pk["scheme"] != "BATCH"]
    utils = {s: _above(runs, s, "utilization", 0.90, where, _value(pk, "utilization_pct", scheme=s) / 100.0)
             for s in non_batch["scheme"]}
    u_verdicts = {s: ordered(d) for s, d in utils.items()}
    v = combine(list(u_verdicts.values())) if utils else NOT_REPRODUCED
    low = non_batch[[u_verdicts.get(s) != REPRODUCED for s in non_batch["scheme"]]]
    splits = [x for x in (_util_split(runs, occ, s, where) for s in low["scheme"]) if x] or [
        f"{s} {u:.0f}%" for s, u in zip(low["scheme"], low["utilization_pct"], strict=True)]
    f.append(Finding(
        "all schemes but PBS keep node utilization at or above 90% (S000 §5.4)",
        "for every non-batch PACKING run of the paper's schemes: utilization (busy CPU time, spinning included, over "
        "N x T) minus 90%, per seed, with a 95% interval above 0. Reproduced if for all; partly if for some; tie if "
        "every interval contains 0",
        ", ".join(f"{s} {u:.0f}%" for s, u in zip(pk["scheme"], pk["utilization_pct"], strict=True))
        + (" (− 90%: " + ", ".join(f"{s} {d.text(' pp')}" for s, d in utils.items()) + ")" if utils else ""),
        v,
        "" if low.empty else "node-time split: " + "; ".join(splits),
    ))
    dev = float(t["estimate_diff_pct"].abs().max())
    same = dev < 1e-6
    f.append(Finding(
        "E = (B + X U) N T estimates the measured energy within 3% (S000 §5.4)",
        "reproduced if the estimate is within 3% of the exact integration for every run; not applicable when they "
        "agree to rounding: U is measured as busy node-seconds / (N T), which makes the estimate exact",
        f"largest difference {dev:.2g}%",
        NOT_APPLICABLE if same else verdict(dev <= 3.0),
        "" if same or dev <= 3.0 else "U here is the busy CPU time over P x T, and power is linear in busy CPUs; a "
        f"difference of {dev:.1f}% means the runs' utilization and energy disagree",
    ))
    return f


def _table3(g: Gathered, st: Settings) -> Outcome:
    t = energy_table(g.runs, ["placement", "scheme"], st.seeds)
    occ = occupancy_table(g, ["placement", "scheme"])
    t = with_node_held(t, occ, ["placement", "scheme"])
    f = table3_findings(t, g.runs, occ)
    show = _energy_columns(t, ["placement", "scheme"], PAPER_TABLE3,
                           lambda row: (row["placement"], _paper_key(str(row["scheme"]))))
    files = {"table3.csv": csv_writer(show)}
    files["table3.png"] = lambda p: grouped_bars(
        t.assign(config=t["placement"] + "/" + t["scheme"]), p, x="config", series="placement", value="total_MJ",
        title="Total energy (MJ), fig3a workload", ylabel="MJ")
    report = [
        "Energy of the choi-fig3a runs (same workload), laid out like seed 000 Table 3. Exact integration of "
        "each node's power: idle = B x N x T, busy = X x busy node-seconds (spinning counts as busy); est_busy/"
        f"est_idle: the seed's E = (B + X U) N T split the same way; {power_model(g.runs)}. Paper columns: the "
        "cluster's measured values (CC/SB is one row in the paper; GM-BLOCK, BATCH-NS and BATCH-EASY have none). "
        "Utilization two ways: utilization_pct = CPU busy (spinning included) over N x T; node_held_pct = node-time "
        "a node held at least one job; the paper's column does not say which it measured.",
        "",
        md_table(show, 2),
        "",
        "## Findings",
        "",
        findings_md(f),
    ]
    report += _cost_section(g, ["placement", "scheme"], occ)
    return Outcome("\n".join(report), files)


register(Experiment(
    "choi-table3", "Energy, utilization and running time of the Figure 3(a) runs", "seed 000 Table 3",
    fig3_runs(100.0), _table3,
    quick_title="Energy, utilization and running time of the Figure 3(a) runs (quick: 30 jobs)",
))


# ----- Figure 4: long-running applications ------------------------------------------------------

FIG4_SCHEMES = ["BATCH", "BATCH-NS", "GANG", "CC", "SB", "HYBRID"]


def _fig4_runs(st: Settings) -> list[RunSpec]:
    n = 8 if st.quick else 20
    workloads = [(seed, mix(n, ["sPPM", "BlockSolve95", "LU"], "ABC", 500.0, seed)) for seed in range(1, st.seeds + 1)]
    return _specs("fig4", FIG4_SCHEMES, ["packing"], workloads)


def fig4_findings(agg: pd.DataFrame, runs: pd.DataFrame | None = None) -> list[Finding]:
    """Seed 000 §5.2 on Figure 4, from the per-scheme means (PBS: the FIFO baseline the verdicts rest on)."""
    pbs = pbs_baseline(runs, {}, agg)
    agg = _one_pbs(agg, pbs)
    order = list(agg.sort_values("response_s")["scheme"])
    paper = ["HYBRID", "CC/SB", "GANG", "BATCH"]
    ours: list[str] = []
    for s in order:
        k = "BATCH" if s == pbs else _paper_key(s)
        if k not in ours:
            ours.append(k)
    ok = ours == paper
    wait_hi = _highest(agg, "wait_s")
    # Each neighbour in our order against the next, per seed (% of the lower), with its interval.
    cs = [x for x in ("CC", "SB") if x in set(agg["scheme"])]
    ccsb = min(cs, key=lambda x: _value(agg, "response_s", scheme=x)) if cs else ""
    firsts = [s for s in order if s not in ("CC", "SB") or s == ccsb]
    diffs = [(a, b, rel_diff(runs, a, b, agg=agg)) for a, b in zip(firsts, firsts[1:], strict=False)]
    gaps = "; ".join(f"{b} − {a} {d.text()}" for a, b, d in diffs)
    # An order that differs from the paper's only between neighbours none of which is told apart (every
    # neighbour's interval contains 0) is a tie, not a reversal.
    tied = bool(diffs) and all(d.n >= 2 and d.sign == 0 for _, _, d in diffs)
    return [
        Finding("HYBRID best, followed by CC/SB, gang and PBS (S000 §5.2, Fig. 4)",
                "reproduced if our order of mean response (CC and SB merged at the better one) is the paper's; "
                "partly if HYBRID is first; tie if not and no neighbour in our order differs from the next "
                f"(every 95% interval contains 0); PBS = {pbs} (the better of strict BATCH and non-strict BATCH-NS)",
                "ours: " + " < ".join(ours) + (f" ({gaps})" if gaps else ""),
                verdict(ok, bool(ours) and ours[0] == "HYBRID") if ok or not tied or ours[0] == "HYBRID" else TIE,
                "" if ok else cost_balance(runs, order)),
        Finding("even for these low-communication applications batch has the largest waiting time (S000 §5.2)",
                f"reproduced if PBS ({pbs}) has the highest mean wait", f"highest wait: {wait_hi}",
                verdict(wait_hi == pbs),
                "" if wait_hi == pbs else _gap(agg, wait_hi, pbs, "wait_s") + "; "
                + cost_balance(runs, [wait_hi, pbs])),
    ]


def _fig4(g: Gathered, st: Settings) -> Outcome:
    agg = per_scheme(g.runs, ["scheme"])
    table = agg[["scheme", "wait_s", "execution_s", "response_s", "response_sd", "seeds"]]
    f = fig4_findings(agg, g.runs)
    files = {"fig4.csv": csv_writer(table)}
    files["fig4.png"] = lambda p: stacked_bars(agg, p, group=None, label="scheme",
                                               parts=[("wait_s", "wait"), ("execution_s", "execution")],
                                               title="Fig. 4: long-running jobs (sPPM, BlockSolve95, LU)",
                                               ylabel="mean response time (s)")
    report = [
        f"Workload: {int(g.runs['jobs_total'].iloc[0])} jobs drawn from sPPM, BlockSolve95 and LU (classes A–C), "
        "mean inter-arrival 500 s, MPL 3, PACKING; sPPM and BlockSolve95 grow their problem with the process "
        "count (a fixed per-process block, the size of seed 000 Table 1's 16-process run).", "",
        offered_load(g), "", starving_note(g), "", "![fig4](fig4.png)", "", md_table(table, 0), "",
        "## Findings", "", findings_md(f),
    ]
    report += _cost_section(g, ["scheme"])
    return Outcome("\n".join(report), files)


register(Experiment("choi-fig4", "20 long-running jobs (sPPM, BlockSolve95, LU)", "seed 000 Figure 4",
                    _fig4_runs, _fig4, quick_title="8 long-running jobs (sPPM, BlockSolve95, LU)"))


# ----- Figures 5 and 8: problem size ------------------------------------------------------------

FIG5_SCHEMES = ["CC", "SB", "HYBRID", "BATCH", "BATCH-NS", "GANG"]


def _fig5_runs(st: Settings) -> list[RunSpec]:
    n = 8 if st.quick else 20
    out: list[RunSpec] = []
    for cls in ("A", "B", "C"):
        workloads = [(seed, mix(n, NAS_APPS, cls, 100.0, seed)) for seed in range(1, st.seeds + 1)]
        out += _specs(f"fig5-{cls}", FIG5_SCHEMES, ["packing"], workloads, extra={"class": cls})
    return out


def fig5_findings(agg: pd.DataFrame, runs: pd.DataFrame | None = None) -> list[Finding]:
    """Seed 000 §5.2 on Figure 5, from the per-(class, scheme) means."""
    f = []
    c = agg[agg["class"] == "C"]
    if len(c):
        h = _value(c, "response_s", scheme="HYBRID")
        gng, ccsb = _value(c, "response_s", scheme="GANG"), min(_value(c, "response_s", scheme="CC"),
                                                                 _value(c, "response_s", scheme="SB"))
        where = {"class": "C"}
        pbs = pbs_baseline(runs, where, c)
        ccsb_s = "CC" if _value(c, "response_s", scheme="CC") <= _value(c, "response_s", scheme="SB") else "SB"
        parts = [(gng_s, pct, rel_diff(runs, "HYBRID", gng_s, where=where, agg=c))
                 for gng_s, pct in (("GANG", 12.0), (ccsb_s, 10.0), (pbs, 65.0))]
        vs = [ordered(d, band(pct)) for _, pct, d in parts]
        v = combine(vs)
        low = _lowest(c, "response_s")
        f.append(Finding(
            "CLASS C: HYBRID about 12% better than gang, 10% better than CC/SB, 65% better than PBS (S000 §5.2)",
            "each of GANG, CC/SB (the better of CC and SB), PBS minus HYBRID (% of HYBRID, per seed) must have a 95% "
            "interval above 0 and a mean within the paper's number ± half (6–18%, 5–15%, 32.5–97.5%): reproduced "
            "if all three hold; partly if all are above 0 but some outside the band, or only some are above 0; "
            f"tie if all three intervals contain 0; PBS = {pbs} (the better of strict BATCH and non-strict "
            "BATCH-NS)",
            "; ".join(f"{o} − HYBRID {d.text()} ({vv})" for (o, _, d), vv in zip(parts, vs, strict=True))
            + f" (means: HYBRID {_sec(h)} s, GANG {_sec(gng)} s, CC/SB {_sec(ccsb)} s)",
            v,
            "" if v == REPRODUCED else (_gap(c, "HYBRID", low) + "; " if low != "HYBRID" else "")
            + cost_balance(runs, list(dict.fromkeys(["HYBRID", low, pbs])), where),
        ))
    b = agg[agg["class"] == "B"]
    if len(b):
        pbs = pbs_baseline(runs, {"class": "B"}, b)
        b = _one_pbs(b, pbs)
        worst, shortest = _highest(b, "response_s"), _lowest(b, "execution_s")
        ok = worst == pbs and shortest == pbs
        bits = []
        if worst != pbs:
            bits.append(f"worst response {_gap(b, worst, pbs)}")
        if shortest != pbs:
            bits.append(f"shortest execution {_gap(b, shortest, pbs, 'execution_s')}")
        f.append(Finding(
            "CLASS B: batch shows the worst response time despite its shortest execution time (S000 §5.2)",
            f"reproduced if PBS has the highest mean response and the lowest mean execution in class B; partly if "
            f"only the highest response; PBS = {pbs} (the better of strict BATCH and non-strict BATCH-NS)",
            f"worst response: {worst}, shortest execution: {shortest}",
            verdict(ok, worst == pbs),
            "" if ok else "; ".join(bits) + "; " + cost_balance(runs, list(dict.fromkeys([pbs, worst, shortest])),
                                                               {"class": "B"}),
        ))
    a = agg[agg["class"] == "A"]
    if len(a):
        spread = (a["response_s"].max() - a["response_s"].min()) / a["response_s"].min() * 100
        hi, lo = _highest(a, "response_s"), _lowest(a, "response_s")
        f.append(Finding(
            "CLASS A: response times are very close (S000 §5.2)",
            "reproduced if the spread (max − min) / min of class A mean response over schemes is below 25%",
            f"spread {spread:.0f}% ({hi} highest, {lo} lowest)", verdict(spread < 25),
            "" if spread < 25 else _gap(a, hi, lo) + "; " + cost_balance(runs, [hi, lo], {"class": "A"}),
        ))
    return f


def _fig5(g: Gathered, st: Settings) -> Outcome:
    agg = per_scheme(g.runs, ["class", "scheme"])
    table = agg[["class", "scheme", "wait_s", "execution_s", "response_s", "response_sd"]]
    f = fig5_findings(agg, g.runs)
    files = {"fig5.csv": csv_writer(table)}
    files["fig5.png"] = lambda p: grouped_bars(agg, p, x="class", series="scheme", value="response_s",
                                               title=f"Fig. 5: mean response per class "
                                               f"({int(g.runs['jobs_total'].iloc[0])} jobs)",
                                               ylabel="mean response time (s)")
    report = ["Workload per class: NAS jobs of that class only, mean inter-arrival 100 s (the paper does not "
              "state it; assumed as Fig. 3(a)), MPL 3, PACKING.", "", offered_load(g, ["class"]), "",
              starving_note(g), "",
              "![fig5](fig5.png)", "", md_table(table, 0),
              "", "## Findings", "", findings_md(f)]
    report += _cost_section(g, ["class", "scheme"])
    return Outcome("\n".join(report), files)


def fig8_findings(t: pd.DataFrame, runs: pd.DataFrame | None = None) -> list[Finding]:
    """Seed 000 §5.4 on Figure 8, from the per-(class, scheme) energy table and the runs' energy per seed."""
    c = t[t["class"] == "C"]
    if c.empty:
        return []
    order = list(c.sort_values("total_MJ")["scheme"])
    where = {"class": "C"}
    top = first_of(runs, c, "HYBRID", "total_MJ", "energy_j", where=where)
    v = top.verdict
    if v == NOT_REPRODUCED and len(order) > 2 and order[1] == "HYBRID":
        # Second by mean: partly if HYBRID is told apart from the third (lower by a 95% interval above 0).
        behind = first_of(runs, c[c["scheme"] != order[0]], "HYBRID", "total_MJ", "energy_j", where=where)
        v = PARTLY if behind.verdict == REPRODUCED else v
    why = ""
    if v != REPRODUCED:
        low = order[0] if order[0] != "HYBRID" else order[1]
        why = ("energy = B N T + X x busy node-seconds, so it follows the running time: " + ", ".join(
            f"{s} {_value(c, 'total_MJ', scheme=s):.2f} MJ in {_sec(_value(c, 'running_time_s', scheme=s))} s "
            f"({_value(c, 'busy_MJ', scheme=s):.2f} MJ busy)" for s in ("HYBRID", low))
            + "; " + cost_balance(runs, ["HYBRID", low], where))
    return [Finding(
        "CLASS C: HYBRID has the best energy behaviour, followed by CC/SB and gang (S000 §5.4, Fig. 8)",
        "reproduced if HYBRID has the lowest mean class C energy and its lead over the runner-up (per seed, % of "
        "HYBRID's) has a 95% interval above 0; tie if the first's lead contains 0; partly if HYBRID is second and "
        "lower than the third by an interval above 0",
        "ours, lowest first: " + ", ".join(order) + f" ({top.text()})", v, why,
    )]


def _fig8(g: Gathered, st: Settings) -> Outcome:
    t = energy_table(g.runs, ["class", "scheme"], st.seeds)
    f = fig8_findings(t, g.runs)
    show = _energy_columns(t, ["class", "scheme"], None, None)
    files = {"fig8.csv": csv_writer(show)}
    files["fig8.png"] = lambda p: grouped_bars(t, p, x="class", series="scheme", value="total_MJ",
                                               title=f"Fig. 8: energy per class "
                                               f"({int(g.runs['jobs_total'].iloc[0])} jobs)", ylabel="MJ")
    report = [f"Energy of the choi-fig5 workloads (same runs), exact integration split as seed 000 Table 3 "
              f"(idle = B x N x T, busy = X x busy node-seconds) beside the seed's estimate; {power_model(g.runs)}.",
              "", "![fig8](fig8.png)", "", md_table(show, 2), "", "## Findings", "", findings_md(f)]
    return Outcome("\n".join(report), files)


register(Experiment("choi-fig5", "20 jobs per class A, B, C: response time", "seed 000 Figure 5", _fig5_runs, _fig5,
                    quick_title="8 jobs per class A, B, C: response time"))
register(Experiment("choi-fig8", "20 jobs per class A, B, C: energy", "seed 000 Figure 8", _fig5_runs, _fig8,
                    quick_title="8 jobs per class A, B, C: energy"))


# ----- Figure 6: three identical programs ------------------------------------------------------

FIG6_SCHEMES = ["NLS", "PB", "DCS", "SB", "CC", "GM-BLOCK", "HYBRID", "GANG"]


def _fig6_runs(st: Settings) -> list[RunSpec]:
    apps = ["CG", "MG", "LU"] if st.quick else ["CG", "IS", "SP", "MG", "BT", "LU"]
    cls = "A" if st.quick else "C"
    out = []
    for app in apps:
        jobs = [{"app": app, "class": cls, "procs": 16, "submit_s": 0.0} for _ in range(3)]
        out += _specs(f"fig6-{app}", FIG6_SCHEMES, ["packing"], [(s, jobs) for s in range(1, st.seeds + 1)],
                      extra={"app": app, "class": cls})
    return out


def fig6_findings(agg: pd.DataFrame, runs: pd.DataFrame | None = None) -> list[Finding]:
    """Seed 000 §5.2 on Figure 6, per application, each comparison per seed with its 95% interval."""
    f = []
    apps = list(dict.fromkeys(agg["app"]))
    paper = _paper(agg)
    firsts = {a: first_of(runs, paper, "HYBRID", "execution_s", "mean_execution_s", where={"app": a}) for a in apps}
    lows = {a: firsts[a].first for a in apps}
    wins = [a for a in apps if firsts[a].verdict == REPRODUCED]
    v = combine([firsts[a].verdict for a in apps])
    f.append(Finding(
        "HYBRID always shows the shortest execution time (S000 §5.2, Fig. 6)",
        "per application: HYBRID first by mean execution of the paper's schemes and its lead over the runner-up "
        "(per seed, % of HYBRID's) with a 95% interval above 0; a lead whose interval contains 0 is a tie. "
        "Reproduced if for every application; partly if for some; tie if every one is a tie",
        f"HYBRID lowest for {len(wins)} of {len(apps)}: {', '.join(wins) or 'none'} ("
        + "; ".join(f"{a}: {firsts[a].text()}, {firsts[a].verdict}" for a in apps) + ")",
        v,
        "" if v == REPRODUCED else " | ".join(
            f"{a}: {_gap(agg[agg['app'] == a], 'HYBRID', lows[a], 'execution_s')}; "
            + cost_balance(runs, ["HYBRID", lows[a]], {"app": a}) for a in apps if lows[a] != "HYBRID"),
    ))
    gaps: dict[str, Diff] = {}
    for a in apps:
        sub = agg[agg["app"] == a]
        d = group_gap(runs, _present(sub, BLOCK), _present(sub, SPIN), "mean_execution_s", {"app": a})
        if d.n == 0:
            blk = sub[sub["scheme"].isin(BLOCK)]["execution_s"].mean()
            spn = sub[sub["scheme"].isin(SPIN)]["execution_s"].mean()
            d = diff_ci([_pct(spn, blk)])
        gaps[a] = d
    parts = {a: ordered(d) for a, d in gaps.items()}
    top = max(gaps, key=lambda k: gaps[k].mean)
    # "Most for CG": CG's gap against the largest other one, per seed (percentage points).
    others = [a for a in apps if a != "CG"]
    cg_part = NOT_APPLICABLE
    cg_text = ""
    if "CG" in gaps and others and seeded(runs) is not None:
        rival = max(others, key=lambda k: gaps[k].mean)
        per = {a: _gap_per_seed(runs, _present(agg[agg["app"] == a], BLOCK), _present(agg[agg["app"] == a], SPIN),
                                "mean_execution_s", {"app": a}) for a in ("CG", rival)}
        common = per["CG"].index.intersection(per[rival].index)
        lead = diff_ci(list(per["CG"][common] - per[rival][common]))
        if lead.n == 0:
            lead = diff_ci([gaps["CG"].mean - gaps[rival].mean])
        cg_part = ordered(lead)
        cg_text = f"; CG − {rival} gap {lead.text(' pp')}"
    elif "CG" in gaps and others:
        cg_part = REPRODUCED if top == "CG" else NOT_REPRODUCED
    v = combine([*parts.values(), cg_part])
    why = ""
    if v != REPRODUCED:
        odd = [a for a, x in parts.items() if x != REPRODUCED]
        if cg_part != REPRODUCED:
            odd += [a for a in (top, "CG") if a in gaps and a not in odd]
        why = ("spin/block execution gap (spin − block) / block per app; the group costs where it departs from "
               "the paper: " + " | ".join(
                   f"{a} ({gaps[a].mean:+.0f}%): " + cost_balance(runs, [*SPIN, *BLOCK], {"app": a}) for a in odd))
    f.append(Finding(
        "blocking-based beat spin-based coscheduling, most for CG (highest communication intensity), "
        "least for BT and LU (S000 §5.2)",
        "per application and seed: the spin group's mean execution (NLS, PB, DCS) minus the blocking group's (SB, "
        "CC, HYBRID), % of the blocking one, with a 95% interval above 0; and CG's gap minus the largest other "
        "application's (percentage points) above 0. Reproduced if all hold; partly if some; tie if every "
        "interval contains 0",
        ", ".join(f"{a} {d.text()}" for a, d in gaps.items()) + cg_text,
        v,
        why,
    ))
    if set(GM_TRIO) <= set(agg["scheme"]):
        f.append(gm_block_finding(agg, "execution_s", "app", runs))
    return f


def _fig6(g: Gathered, st: Settings) -> Outcome:
    agg = per_scheme(g.runs, ["app", "scheme"])
    table = agg[["app", "scheme", "execution_s", "execution_sd", "seeds"]]
    f = fig6_findings(agg, g.runs)
    files = {"fig6.csv": csv_writer(table)}
    files["fig6.png"] = lambda p: grouped_bars(agg, p, x="app", series="scheme", value="execution_s",
                                               title="Fig. 6: three identical programs on 16 nodes",
                                               ylabel="mean execution time (s)")
    cls = str(g.runs["class"].iloc[0])
    report = [f"Three identical class {cls} programs (16 processes) started together on all 16 nodes, MPL 3; "
              "execution_sd: SD over seeds (with --seeds N > 1).", "",
              "![fig6](fig6.png)", "", md_table(table, 1), "", "## Findings", "", findings_md(f)]
    report += _cost_section(g, ["app", "scheme"])
    return Outcome("\n".join(report), files)


register(Experiment("choi-fig6", "Three identical class C programs on all 16 nodes, per application",
                    "seed 000 Figure 6", _fig6_runs, _fig6,
                    quick_title="Three identical class A programs on all 16 nodes, for CG, MG and LU"))


# ----- Figure 7 and Table 4: memory-aware allocation --------------------------------------------

#: Seed 000 Table 2: the class C configurations of the memory experiment (app, processes).
TABLE2_CONFIGS = [("SP", 4), ("SP", 9), ("SP", 16), ("BT", 9), ("BT", 16), ("MG", 8), ("MG", 16), ("IS", 4),
                  ("IS", 8), ("IS", 16)]
FIG7_SCHEMES = ["NLS", "PB", "DCS", "SB", "CC", "GM-BLOCK", "HYBRID", "GANG", "BATCH", "BATCH-NS"]
#: Schemes run only with memory-aware allocation: seed 000 §5.3 on Fig. 7(a), "This figure includes just
#: one result for the batch scheduling (PBS), because its MPL is always one" (and Table 4's single BATCH
#: row). PBS is OpenPBS (seed 000 §2.1), read both ways as elsewhere: strict FCFS (BATCH) and OpenPBS's
#: default non-strict order (BATCH-NS).
FIG7_AWARE_ONLY = ["BATCH", "BATCH-NS"]


def _table2_jobs(n: int, cls: str, seed: int) -> list[dict[str, Any]]:
    """``n`` jobs drawn uniformly from Table 2's configurations, exponential inter-arrival of mean
    100 s, numpy stream seeded by ``seed`` (stated in the report)."""
    rng = np.random.default_rng([seed, 7])
    t = 0.0
    jobs = []
    for _ in range(n):
        app, procs = TABLE2_CONFIGS[int(rng.integers(len(TABLE2_CONFIGS)))]
        jobs.append({"app": app, "class": cls, "procs": procs, "submit_s": round(t, 6)})
        t += float(rng.exponential(100.0))
    return jobs


#: How fig7's runs without memory-aware allocation page (the mechanism behind the speed-up ratios).
FIG7_PAGING_CAVEAT = (
    "**Paging is page-granular.** A computing process touches its footprint once per main-loop iteration "
    "and faults when it reaches a page that is not resident; each fault blocks it for one read of Linux "
    "2.4's 64 KB swap read-ahead cluster, after the dirty frames it takes from the least recently run "
    "process are written, each disk request costing a 7200-rpm disk's seek and rotation plus its transfer "
    "(`crates/cosched-engine/src/process/paging.rs`, docs/models/seed-parameters.md G-MEM-1). This is the "
    "mechanism of seed 000 §5.3 (swapping as a process uses its quantum); the speed-up ratios below come "
    "from it. **What the speed-up ranking is evidence of:** the order in which the schemes' ways of waiting "
    "(spinning, blocking, coscheduling) cope with page faults under this mechanism, i.e. whether a scheme "
    "lets a process whose pages are resident use the CPU while its partners fault. It is not evidence of "
    "the paper's magnitudes: the model re-reads every missing page in 64 KB requests each iteration, with "
    "no merged swap I/O, no kswapd writing ahead and the whole footprint as the working set (each "
    "unsourced, none modelled), so its runs without memory-aware allocation take several times Table 4's "
    "running times and every ratio to them is larger than the paper's. Runs that did not finish are "
    "explained in docs/models/fig7-thrashing.md.")


#: Simulated-time limit of every fig7 run: 10 x the longest total running time in seed 000 Table 4 (NLS
#: without memory-aware allocation, 26,151 s). A run the engine stops there, or at its event limit
#: (``limits.max_events``), did not finish: that is its outcome (``runner`` ``stopped.json``), reported as such
#: in the table, the report and the findings, never as a partial result.
FIG7_TIME_LIMIT_S = 10 * 26_151


def _fig7_runs(st: Settings) -> list[RunSpec]:
    n, cls = (8, "B") if st.quick else (20, "C")
    out = []
    for seed in range(1, st.seeds + 1):
        jobs = _table2_jobs(n, cls, seed)
        for aware in (False, True):
            schemes = [s for s in FIG7_SCHEMES if aware or s not in FIG7_AWARE_ONLY]
            out += [replace(r, config={**r.config, "limits": {"max_sim_time_s": FIG7_TIME_LIMIT_S}},
                            stop_is_outcome=True)
                    for r in _specs(f"fig7-{'aware' if aware else 'unaware'}", schemes, ["packing"],
                                    [(seed, jobs)], memory_aware=aware,
                                    extra={"memory_aware": aware, "class": cls})]
    return out


def split_stopped(g: Gathered) -> tuple[Gathered, pd.DataFrame]:
    """The runs of the (allocation, scheme) groups every seed of which finished, and one row per group with a
    run stopped at its limit: its seeds stopped and finished, what stopped them, the simulated time reached,
    the jobs left unfinished and a lower bound of the group's mean response (s). A group with any stopped seed
    is left out of the means whole (its finished seeds alone would bias them)."""
    runs = g.runs
    if "stopped" not in runs:
        return g, pd.DataFrame()
    stopped = runs["stopped"].fillna(False).astype(bool)
    keys = ["memory_aware", "scheme"]
    bad = runs[stopped][keys].drop_duplicates()
    out_mask = runs.set_index(keys).index.isin(bad.set_index(keys).index)
    rows = []
    for (aware, scheme), grp in runs[out_mask].groupby(keys, sort=False):
        st = grp[grp["stopped"].fillna(False).astype(bool)]
        rows.append({"memory_aware": bool(aware), "scheme": scheme, "seeds_stopped": len(st),
                     "seeds_finished": len(grp) - len(st),
                     "stopped_by": ", ".join(sorted(set(st["stopped_by"]))),
                     "sim_time_s": float(st["sim_time_s"].min()),
                     "jobs_unfinished": int(st["jobs_unfinished"].min()),
                     "jobs_unfinished_max": int(st["jobs_unfinished"].max()), "jobs_total": int(st["jobs_total"].max()),
                     "response_lower_bound_s": float(st["response_lower_bound_s"].min())})
    kept = runs[~out_mask].drop(columns=[c for c in STOP_COLUMNS if c in runs])
    return Gathered(runs=kept.reset_index(drop=True), jobs=g.jobs, executed=g.executed), pd.DataFrame(rows)


#: Columns of a stopped run's row (``runner.gather``), besides its labels.
STOP_COLUMNS = ["stopped", "stopped_by", "limit", "sim_time_s", "jobs_unfinished", "jobs_total",
                "response_lower_bound_s"]


def _unfinished(r: pd.Series) -> str:
    """A stopped group's unfinished jobs: one count, or the range over its stopped seeds."""
    lo, hi = int(r["jobs_unfinished"]), int(r.get("jobs_unfinished_max", r["jobs_unfinished"]))
    return str(lo) if lo == hi else f"{lo}–{hi}"


def stopped_text(stopped: pd.DataFrame) -> str:
    """One sentence per (allocation, scheme) that did not finish."""
    if not len(stopped):
        return ""
    parts = []
    for _, r in stopped.iterrows():
        alloc = "memory-aware" if r["memory_aware"] else "no memory-aware"
        parts.append(
            f"{r['scheme']} ({alloc}) did not finish: stopped by its {r['stopped_by']} at {_sec(r['sim_time_s'])} "
            f"simulated s with {_unfinished(r)} of {int(r['jobs_total'])} jobs unfinished "
            f"({int(r['seeds_stopped'])} of {int(r['seeds_stopped'] + r['seeds_finished'])} seeds); mean "
            f"response at least {_sec(r['response_lower_bound_s'])} s")
    return "; ".join(parts)


def speedup_table(agg: pd.DataFrame) -> pd.DataFrame:
    """Seed 000 Fig. 7(b): no memory-aware / memory-aware ratios of execution and wait, and the response gain."""
    un, aw = agg[~agg["memory_aware"].astype(bool)], agg[agg["memory_aware"].astype(bool)]
    rows = []
    for s in un["scheme"]:
        if s not in set(aw["scheme"]):
            continue
        rows.append({"scheme": s,
                     "execution_speedup": _value(un, "execution_s", scheme=s) / _value(aw, "execution_s", scheme=s),
                     "wait_speedup": _value(un, "wait_s", scheme=s) / max(_value(aw, "wait_s", scheme=s), 1e-9),
                     "response_gain_pct": -_pct(_value(aw, "response_s", scheme=s),
                                                _value(un, "response_s", scheme=s))})
    return pd.DataFrame(rows, columns=["scheme", "execution_speedup", "wait_speedup", "response_gain_pct"])


def _page_ins(runs: pd.DataFrame | None, aware: bool, schemes: Sequence[str] | None = None) -> float:
    """Mean page-ins per run under one allocation (NaN without the counter)."""
    if runs is None or "process_page_ins" not in runs or "memory_aware" not in runs:
        return float("nan")
    r = runs[runs["memory_aware"].astype(bool) == aware]
    if schemes is not None:
        r = r[r["scheme"].isin(list(schemes))]
    return float(r["process_page_ins"].mean()) if len(r) else float("nan")


def _paging(runs: pd.DataFrame | None, aware: bool, schemes: Sequence[str] | None = None) -> str:
    """Page-ins and paged memory per run under one allocation."""
    n = _page_ins(runs, aware, schemes)
    if n != n:
        return "page-in counters not available"
    r = runs[runs["memory_aware"].astype(bool) == aware] if runs is not None else pd.DataFrame()
    if schemes is not None:
        r = r[r["scheme"].isin(list(schemes))]
    mb = f" ({r['process_paged_in_mb'].mean():,.0f} MB)" if "process_paged_in_mb" in r else ""
    return f"{n:,.0f} page-ins{mb} per run"


def _mean_gain(runs: pd.DataFrame | None, schemes: Sequence[str]) -> pd.Series:
    """Per seed, the response gain of memory-aware allocation (no memory-aware − memory-aware) / no
    memory-aware, in %, averaged over ``schemes`` (empty with fewer than two seeds)."""
    runs = seeded(runs)
    if runs is None or "memory_aware" not in runs:
        return pd.Series(dtype=float)
    per = []
    for s in schemes:
        un = per_seed(runs, s, where={"memory_aware": False})
        aw = per_seed(runs, s, where={"memory_aware": True})
        per.append(100.0 * (un - aw) / un)
    return pd.concat(per, axis=1).dropna().mean(axis=1) if per else pd.Series(dtype=float)


def _stopped_notes(f: list[Finding], agg: pd.DataFrame, stopped: pd.DataFrame,
                   runs: pd.DataFrame | None) -> list[Finding]:
    """The findings with the (allocation, scheme) groups that did not finish stated in each: they are left
    out of every comparison, and where a group's lower bound of mean response bears on one (the gain of
    memory-aware allocation; PBS against the schemes without it), that bound is given."""
    if not len(stopped):
        return f
    aw = agg[agg["memory_aware"].astype(bool)]
    pbs = pbs_baseline(runs, {"memory_aware": True}, aw)
    b = _value(aw, "response_s", scheme=pbs)
    left = "did not finish within the limit, left out: " + ", ".join(
        f"{r['scheme']} ({'memory-aware' if r['memory_aware'] else 'no memory-aware'})" for _, r in stopped.iterrows())
    out = []
    for x in f:
        extra = []
        for _, r in stopped[~stopped["memory_aware"].astype(bool)].iterrows():
            lb, a = float(r["response_lower_bound_s"]), _value(aw, "response_s", scheme=r["scheme"])
            if x.claim.startswith("memory-aware allocation gains") and a == a and lb > 0:
                extra.append(f"{r['scheme']}'s gain is at least {100.0 * (lb - a) / lb:.1f}% (mean response "
                             f"≥ {_sec(lb)} s without, {_sec(a)} s with memory-aware allocation)")
            if x.claim.startswith("PBS outperforms") and b == b:
                extra.append(f"{r['scheme']} (no memory-aware) mean response ≥ {_sec(lb)} s, "
                             + (f"above {pbs}'s {_sec(b)} s" if lb > b else f"not above {pbs}'s {_sec(b)} s: "
                                "the bound does not decide"))
        out.append(replace(x, ours=x.ours + "; " + left + (" (" + "; ".join(extra) + ")" if extra else "")))
    return out


def bounded_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with each run stopped at its limit (without memory-aware allocation) counted at its lower
    bound of mean response (``response_lower_bound_s``; its other metrics unknown), for the comparisons a
    lower bound decides soundly: memory-aware allocation's gain and PBS's lead over the schemes without it
    (both can only be larger). Groups with memory-aware allocation that did not finish are left out whole."""
    if "stopped" not in runs or not runs["stopped"].fillna(False).astype(bool).any():
        return runs.drop(columns=[c for c in STOP_COLUMNS if c in runs])
    st = runs["stopped"].fillna(False).astype(bool)
    keys = ["memory_aware", "scheme"]
    bad_aware = runs[st & runs["memory_aware"].astype(bool)][keys].drop_duplicates()
    out = runs[~runs.set_index(keys).index.isin(bad_aware.set_index(keys).index)].copy()
    m = out["stopped"].fillna(False).astype(bool)
    out.loc[m, "mean_response_s"] = out.loc[m, "response_lower_bound_s"]
    return out.drop(columns=[c for c in STOP_COLUMNS if c in out]).reset_index(drop=True)


#: Findings a run's lower bound of mean response decides soundly (their claims begin so).
BOUNDED_CLAIMS = ("memory-aware allocation gains", "PBS outperforms")


def fig7_findings(agg: pd.DataFrame, speed: pd.DataFrame, runs: pd.DataFrame | None = None,
                  stopped: pd.DataFrame | None = None, bounded: pd.DataFrame | None = None) -> list[Finding]:
    """Seed 000 §5.3 on Figure 7, from the per-(allocation, scheme) means and the speed-up table, each
    comparison per seed with its 95% interval. Groups in ``stopped`` (:func:`split_stopped`: runs that did
    not finish within their limit) are not in ``agg``, ``speed`` or ``runs``; each finding names them. With
    ``bounded`` (:func:`bounded_runs`), the gain and PBS findings count the stopped runs without memory-aware
    allocation at their lower bound of mean response instead of leaving them out."""
    stopped = stopped if stopped is not None else pd.DataFrame()
    f = _fig7_findings(agg, speed, runs)
    if bounded is not None and len(stopped) and (~stopped["memory_aware"].astype(bool)).any():
        agg_b = per_scheme(bounded, ["memory_aware", "scheme"])
        fb = {x.claim: x for x in _fig7_findings(agg_b, speedup_table(agg_b), bounded)}
        note = ("; a scheme that did not finish without memory-aware allocation counts with its lower bound of mean "
                "response (each unfinished job: the simulated time reached less its submission), so its gain and "
                "its lead over PBS are lower bounds")
        own = {x.claim: x for x in f}
        # In the bounded findings' order (a superset: the bounds may make a finding computable).
        f = [replace(x, rule=x.rule + note) if x.claim.startswith(BOUNDED_CLAIMS) else own[x.claim]
             for x in fb.values() if x.claim.startswith(BOUNDED_CLAIMS) or x.claim in own]
        f += [x for c, x in own.items() if c not in fb]
    return _stopped_notes(f, agg, stopped, runs)


def _fig7_findings(agg: pd.DataFrame, speed: pd.DataFrame, runs: pd.DataFrame | None = None) -> list[Finding]:
    un, aw = agg[~agg["memory_aware"].astype(bool)], agg[agg["memory_aware"].astype(bool)]
    g_mean = float(speed["response_gain_pct"].mean()) if len(speed) else float("nan")
    seeds_gain = _mean_gain(runs, list(speed["scheme"]))
    d = diff_ci(list(seeds_gain)) if len(seeds_gain) else diff_ci([g_mean] if g_mean == g_mean else [])
    # "Over 35%": a lower bound, so the band is open above (35% less half).
    lo_b = band(35.0)[0]
    v = ordered(d, (lo_b, float("inf")))
    why = ""
    if v != REPRODUCED:
        both = list(speed["scheme"])
        m = {k: df[df["scheme"].isin(both)][["wait_s", "execution_s"]].mean() for k, df in (("un", un), ("aw", aw))}
        why = (f"no memory-aware runs: {_paging(runs, False, both)}, memory-aware: {_paging(runs, True, both)}; over "
               f"the schemes, no memory-aware → memory-aware: wait {_sec(m['un']['wait_s'])} → "
               f"{_sec(m['aw']['wait_s'])} s, execution {_sec(m['un']['execution_s'])} → "
               f"{_sec(m['aw']['execution_s'])} s; "
               + ("no process paged without memory-aware allocation, so holding jobs back for memory has nothing "
                  "to save" if _page_ins(runs, False, both) == 0 else
                  "memory-aware admission removes the paging from execution and adds the time jobs are held "
                  "until memory frees"))
    f = [Finding(
        "memory-aware allocation gains over 35% on average (S000 §5.3; S001 §5.3: over 28%)",
        "the response gain (no memory-aware − memory-aware) / no memory-aware, averaged over the schemes run both "
        f"ways, per seed: reproduced if its 95% interval is above 0 and its mean at least {lo_b:.1f}% (the paper's "
        "lower bound 35% less half); partly if above 0 but below that; tie if the interval contains 0",
        f"mean gain {d.text()} (per scheme: " + ", ".join(
            f"{s} {x:.0f}%" for s, x in zip(speed["scheme"], speed["response_gain_pct"], strict=True)) + ")",
        v, why,
    )]
    paper_aw = _paper(aw)
    aware = {"memory_aware": True}
    if len(paper_aw):
        top = first_of(runs, paper_aw, "HYBRID", "response_s", "mean_response_s", where=aware)
        low = top.first
        f.append(Finding(
            "with memory-aware allocation HYBRID shows the best response (S000 §5.3)",
            "reproduced if HYBRID has the lowest memory-aware mean response of the paper's schemes and its lead over "
            "the runner-up (per seed, % of HYBRID's) has a 95% interval above 0; tie if the first's lead contains 0",
            f"lowest: {low} ({top.text()})", top.verdict,
            "" if top.verdict == REPRODUCED else _gap(aw, "HYBRID", low if low != "HYBRID" else top.second) + "; "
            + cost_balance(runs, list(dict.fromkeys(["HYBRID", low, top.second])), aware),
        ))
    pbs = pbs_baseline(runs, aware, aw)
    if pbs in set(aw["scheme"]) and len(un):
        b = _value(aw, "response_s", scheme=pbs)
        best = _lowest(un, "response_s")
        d = cross_diff(runs, (pbs, aware), (best, {"memory_aware": False}))
        if d.n == 0:
            d = diff_ci([_pct(float(un["response_s"].min()), b)])
        v = ordered(d)
        f.append(Finding(
            "PBS outperforms every scheme without memory-aware allocation (S000 §5.3)",
            f"reproduced if the best no memory-aware scheme (by mean response) minus PBS (memory-aware; % of PBS's, "
            f"per seed) has a 95% interval above 0; tie if it contains 0; PBS = {pbs} (the better of strict BATCH "
            "and non-strict BATCH-NS)",
            f"{pbs} {_sec(b)} s; no memory-aware best {best} {_sec(un['response_s'].min())} s; {best} − {pbs} "
            f"{d.text()}",
            v,
            "" if v == REPRODUCED else (
                f"{pbs} (memory-aware) wait {_sec(_value(aw, 'wait_s', scheme=pbs))} s + execution "
                f"{_sec(_value(aw, 'execution_s', scheme=pbs))} s vs {best} (no memory-aware) wait "
                f"{_sec(_value(un, 'wait_s', scheme=best))} s + execution "
                f"{_sec(_value(un, 'execution_s', scheme=best))} s; {best} without memory-aware allocation: "
                f"{_paging(runs, False, [best])}; "
                + cost_balance(runs, [best], {"memory_aware": False})),
        ))
    if len(speed):
        ranked = list(speed.sort_values("execution_speedup", ascending=False)["scheme"])
        top3 = ranked[:3]
        blk = [s for s in ("CC", "SB", "HYBRID") if s in ranked]
        rest = [s for s in ranked if s not in blk]
        lead = _speedup_lead(runs, blk, rest)
        if lead.n == 0 and blk and rest:
            sp = speed.set_index("scheme")["execution_speedup"]
            lead = diff_ci([100.0 * (sp[blk].min() - sp[rest].max()) / sp[rest].max()])
        v = ordered(lead) if blk and rest else NOT_APPLICABLE
        if v == NOT_REPRODUCED and ranked[0] in ("CC", "SB", "HYBRID"):
            v = PARTLY
        f.append(Finding(
            SPEEDUP_CLAIM, SPEEDUP_RULE,
            "highest three: " + ", ".join(top3) + f"; lowest of CC/SB/HYBRID − highest other {lead.text()}",
            v,
            "" if v == REPRODUCED else "execution speed-up " + ", ".join(
                f"{s} {x:.2f}" for s, x in zip(speed["scheme"], speed["execution_speedup"], strict=True))
            + "; the paper's reason is that blocking schemes page more when jobs do not fit; without memory-aware "
            "allocation: " + cost_balance(runs, list(speed["scheme"]), {"memory_aware": False}),
        ))
    elif len(aw):
        f.append(Finding(SPEEDUP_CLAIM, SPEEDUP_RULE, "no execution speed-up: no scheme has runs that finished both "
                         "with and without memory-aware allocation", NOT_APPLICABLE))
    if set(GM_TRIO) <= set(agg["scheme"]):
        f.append(gm_block_finding(agg, "response_s", "memory_aware", runs))
    return f


SPEEDUP_CLAIM = "the execution-time speed-up ratios of CC/SB and HYBRID are the highest (S000 §5.3)"
SPEEDUP_RULE = ("per seed: the lowest execution speed-up of CC, SB and HYBRID minus the highest of the other "
                "schemes (% of the latter): reproduced if its 95% interval is above 0; tie if it contains 0; partly "
                "if below 0 but HYBRID or CC or SB is first by mean")


def _speedup_lead(runs: pd.DataFrame | None, top: Sequence[str], rest: Sequence[str]) -> Diff:
    """Per seed, the lowest execution speed-up (no memory-aware / memory-aware mean execution) of ``top``
    minus the highest of ``rest``, % of the latter (none measured with fewer than two seeds)."""
    runs = seeded(runs)
    if runs is None or "memory_aware" not in runs or not top or not rest:
        return diff_ci([])

    def speedups(schemes: Sequence[str]) -> pd.DataFrame:
        return pd.concat([per_seed(runs, s, "mean_execution_s", {"memory_aware": False})
                          / per_seed(runs, s, "mean_execution_s", {"memory_aware": True}) for s in schemes],
                         axis=1).dropna()

    a, b = speedups(top).min(axis=1), speedups(rest).max(axis=1)
    common = a.index.intersection(b.index)
    return diff_ci(list(100.0 * (a[common] - b[common]) / b[common]))


def _fig7_table(agg: pd.DataFrame, stopped: pd.DataFrame) -> pd.DataFrame:
    """Fig. 7(a)'s table: the means of the groups that finished, and a row with its outcome for each group
    that did not."""
    table = agg[["memory_aware", "scheme", "wait_s", "execution_s", "response_s", "response_sd"]].assign(
        outcome="finished")
    if len(stopped):
        dnf = stopped[["memory_aware", "scheme"]].assign(outcome=[
            f"did not finish within {_sec(r['sim_time_s'])} s ({r['stopped_by']}; {_unfinished(r)} of "
            f"{int(r['jobs_total'])} jobs unfinished)" for _, r in stopped.iterrows()])
        table = pd.concat([table, dnf], ignore_index=True)
    return table


def _fig7(g: Gathered, st: Settings) -> Outcome:
    allruns = g.runs
    g, stopped = split_stopped(g)
    agg = per_scheme(g.runs, ["memory_aware", "scheme"])
    table = _fig7_table(agg, stopped)
    speed = speedup_table(agg)
    f = fig7_findings(agg, speed, g.runs, stopped, bounded_runs(allruns))
    files = {"fig7.csv": csv_writer(table), "fig7_speedup.csv": csv_writer(speed)}
    files["fig7.png"] = lambda p: stacked_bars(
        agg.assign(alloc=agg["memory_aware"].map({True: "memory-aware", False: "no memory-aware"})), p,
        group="alloc", label="scheme", parts=[("wait_s", "wait"), ("execution_s", "execution")],
        title=f"Fig. 7(a): memory-aware allocation ({int(allruns['jobs_total'].iloc[0])} class "
        f"{allruns['class'].iloc[0]} jobs)", ylabel="mean response time (s)")
    cls = str(allruns["class"].iloc[0])
    report = [f"Workload: {int(allruns['jobs_total'].iloc[0])} class {cls} jobs drawn uniformly from seed 000 "
              "Table 2's configurations, mean inter-arrival 100 s, MPL 3 (batch: 1), PACKING; memory-aware "
              "admission vs none (then processes page when their node's footprints exceed its 900 MB). Every run "
              f"is limited to {FIG7_TIME_LIMIT_S:,} simulated s (10 x seed 000 Table 4's longest total running "
              "time, 26,151 s) and the engine's event limit; a run stopped at either did not finish, and its "
              "scheme is reported as such, not averaged.", "",
              "![fig7](fig7.png)", "", md_table(table, 0), ""]
    if len(stopped):
        report += [f"**Did not finish:** {stopped_text(stopped)}. Without memory-aware allocation the modelled "
                   "cluster thrashes (its disks serve page faults 64 KB at a time; paging volume and disk "
                   "occupancy measured in docs/models/fig7-thrashing.md).", ""]
    report += ["Speed-up ratio (no memory-aware / memory-aware):",
               "", md_table(speed, 2), "", FIG7_PAGING_CAVEAT, "", starving_note(g), "", "## Findings", "",
               findings_md(f)]
    report += _cost_section(g, ["memory_aware", "scheme"])
    return Outcome("\n".join(report), files)


def table4_findings(t: pd.DataFrame, runs: pd.DataFrame | None = None) -> list[Finding]:
    """Seed 000 §5.4 on Table 4, from the per-(allocation, scheme) energy table and the runs' energy per
    seed."""
    aware = t["memory_aware"].astype(bool)
    un, aw = t[~aware], t[aware]
    both = [s for s in aw["scheme"] if s in set(un["scheme"])]
    diffs = {}
    for s in both:
        d = cross_diff(runs, (s, {"memory_aware": True}), (s, {"memory_aware": False}), "energy_j")
        if d.n == 0:
            d = diff_ci([_pct(_value(un, "total_MJ", scheme=s), _value(aw, "total_MJ", scheme=s))])
        diffs[s] = d
    vs = {s: ordered(d) for s, d in diffs.items()}
    lower = [s for s in both if vs[s] == REPRODUCED]
    v = combine(list(vs.values())) if vs else NOT_REPRODUCED
    why = ""
    if v != REPRODUCED:
        why = "; ".join(
            f"{s}: no memory-aware {_value(un, 'total_MJ', scheme=s):.2f} MJ in "
            f"{_sec(_value(un, 'running_time_s', scheme=s))} s ({_paging(runs, False, [s])}), memory-aware "
            f"{_value(aw, 'total_MJ', scheme=s):.2f} MJ in "
            f"{_sec(_value(aw, 'running_time_s', scheme=s))} s ({_paging(runs, True, [s])})"
            for s in both if s not in lower) + "; energy follows the running time (B x N x T dominates)"
    return [Finding(
        "avoiding disk swapping (memory-aware allocation) saves energy as well as time (S000 §5.4)",
        "for each scheme: its energy without memory-aware allocation minus with it (per seed, % of the memory-aware "
        "one) with a 95% interval above 0. Reproduced if for every scheme; partly if for some; tie if every "
        "interval contains 0",
        f"lower with memory-aware for {len(lower)} of {len(both)}: {', '.join(lower) or 'none'} ("
        + ", ".join(f"{s} {d.text()}" for s, d in diffs.items()) + ")",
        v, why,
    )]


def energy_bounded_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`bounded_runs` for energy: each stopped run without memory-aware allocation counts with
    B x N x the simulated time it reached (its idle energy so far, a lower bound of its energy; its busy
    part unknown, utilization 0), B and N from the finished runs of the same platform. Unchanged without
    a stopped run or a finished run to take B and N from."""
    if "stopped" not in runs:
        return runs
    st = runs["stopped"].fillna(False).astype(bool)
    done = runs[~st]
    if not st.any() or not len(done) or "platform_idle_watts" not in done:
        return runs
    keys = ["memory_aware", "scheme"]
    bad_aware = runs[st & runs["memory_aware"].astype(bool)][keys].drop_duplicates()
    out = runs[~runs.set_index(keys).index.isin(bad_aware.set_index(keys).index)].copy()
    m = out["stopped"].fillna(False).astype(bool)
    for c in ("platform_idle_watts", "platform_busy_watts", "machine_nodes"):
        out.loc[m, c] = done[c].iloc[0]
    out.loc[m, "makespan_s"] = out.loc[m, "sim_time_s"]
    out.loc[m, "utilization"] = 0.0
    out.loc[m, "energy_j"] = out.loc[m, "platform_idle_watts"] * out.loc[m, "machine_nodes"] * out.loc[m, "makespan_s"]
    return out.drop(columns=[c for c in STOP_COLUMNS if c in out]).reset_index(drop=True)


def _table4(g: Gathered, st: Settings) -> Outcome:
    allruns = g.runs
    g, stopped = split_stopped(g)
    t = energy_table(g.runs, ["memory_aware", "scheme"], st.seeds)
    f = table4_findings(t, g.runs)
    if len(stopped) and (~stopped["memory_aware"].astype(bool)).any():
        eb = energy_bounded_runs(allruns)
        f = [replace(x, rule=x.rule + "; a run that did not finish without memory-aware allocation counts with "
                     "B x N x the simulated time it reached, a lower bound of its energy",
                     ours=x.ours + "; did not finish within the limit: " + ", ".join(
                         f"{r['scheme']} ({'memory-aware' if r['memory_aware'] else 'no memory-aware'})"
                         for _, r in stopped.iterrows()))
             for x in table4_findings(energy_table(eb, ["memory_aware", "scheme"], st.seeds), eb)]
    show = _energy_columns(t, ["memory_aware", "scheme"], PAPER_TABLE4,
                           lambda row: (bool(row["memory_aware"]), _paper_key(str(row["scheme"]))))
    files = {"table4.csv": csv_writer(show)}
    report = ["Energy of the choi-fig7 runs, laid out like seed 000 Table 4: exact integration (idle = B x N x T, "
              "busy = X x busy node-seconds) and the seed's estimate E = (B + X U) N T split the same way; "
              f"{power_model(g.runs)}.", "", md_table(show, 2), ""]
    if len(stopped):
        report += [f"**Did not finish** (no energy: the run has no end): {stopped_text(stopped)}.", ""]
    report += ["## Findings", "", findings_md(f)]
    report += _cost_section(g, ["memory_aware", "scheme"])
    return Outcome("\n".join(report), files)


register(Experiment("choi-fig7", "Memory-aware vs no memory-aware allocation, 20 class C jobs",
                    "seed 000 Figure 7", _fig7_runs, _fig7,
                    quick_title="Memory-aware vs no memory-aware allocation, 8 class B jobs"))
register(Experiment("choi-table4", "Energy of the memory-aware allocation experiment", "seed 000 Table 4",
                    _fig7_runs, _table4))

__all__ = ["SCHEMES", "REPRODUCED", "PARTLY", "NOT_REPRODUCED"]
