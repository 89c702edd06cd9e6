"""Seed 003 (Lee et al., "Implications of I/O for Gang Scheduled Workloads"): the flexible gang
scheduler.

- ``lee-fig2`` / ``lee-fig3``: an I/O-bound job (Erlang-5 CPU bursts of mean 5 ms, 20 ms I/O) and a
  compute-bound job with heavy synchronization (``Barrier``) gang scheduled against each other on 32
  processors, each with its own quantum (S003 §3.2, Figures 2 and 3). The I/O job's blocked
  remainder of its quantum is donated to the compute job (the gang bit; S003 §3.2). Measured: the
  I/O job's slowdown against its dedicated run (priority inversion) and the CPU fragmentation.
- ``flexgang-mix``: the flexible gang scheduler (per-job quanta, I/O interrupts, gang bit,
  fragments filled by low-gangedness jobs as the online gangedness estimator classes them) against
  the same scheduler with a declared list of low-gangedness applications, plain gang, HYBRID and
  batch on a mix of I/O-bound, synchronization-intensive and embarrassingly parallel jobs (S003
  §3.2, §5, §6). Dedicated runs of the I/O job give the I/O jobs' slowdown per scheme.

Definitions (assumption G-S003-FLEX of docs/models/seed-parameters.md):

- slowdown = the I/O job's response time / its response time alone on the machine (same seed);
- CPU fragmentation = the summary's `cpu_fragmentation`: the share of the machine's CPU time
  (32 processors x the run's span) not spent on useful work (compute, message overheads, interrupts)
  by either job: S003 §3.2 computes it
  as "the amount of cpu resources allocated to [the cpu-bound job]" minus its useful work, and its
  simulator allocates every CPU to one job or the other, so the two agree when nothing else costs
  CPU time (the switch cost is 0 here; context switches of the lee32 platform are included).
- The compute job is a background job: the run ends with the I/O job, as in S003 where both jobs
  compete for the whole measurement.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from . import Experiment, Gathered, Outcome, Settings, csv_writer, register
from .report import NOT_APPLICABLE, Finding, findings_md, grouped_bars, md_table, verdict
from .runner import RunSpec

PLATFORM = "lee32"
NODES = 32

#: S003 Figure 2 caption: I/O-job quanta 2.5, 10 and 20 ms (the text says 2.5, 5 and 10; the
#: caption is used, assumption G-S003-FLEX); compute quanta varied from 1 to 40 ms.
FIG2_IO_Q = [2.5, 10.0, 20.0]
#: S003 Figure 3: compute-job quanta 10, 20 and 40 ms; I/O quanta varied from 1 to 40 ms.
FIG3_CPU_Q = [10.0, 20.0, 40.0]
#: 1 ms steps from 1 to 40 ms (assumption G-S003-4).
SWEEP = [float(q) for q in range(1, 41)]
QUICK_SWEEP = [1.0, 10.0, 40.0]



def _bursts(st: Settings) -> int:
    """I/O bursts per process: 400 (G-S003-4 proposes 2000; 400 keeps the 243-run sweep to minutes
    on two cores, assumption G-S003-FLEX); 12 in the quick version."""
    return 12 if st.quick else 400


def _compute_app(st: Settings) -> str:
    """Barrier every 2 quanta (1 ms of compute on lee32's 0.5 ms Fugu quantum): heavy
    synchronization relative to the 1-40 ms gang quanta (assumption G-S003-FLEX). A background job
    with 500 quanta (250 ms) of work per I/O burst: in the slowest pair (I/O quantum 1 ms against
    40 ms) a burst takes about five 41 ms cycles, of which the compute job gets about 205 ms, so it
    does not end first (the report counts the runs where it did)."""
    return f"Barrier[every=2,quanta={500 * _bursts(st)}]"


def _io_app(st: Settings) -> str:
    return f"io-bound[bursts={_bursts(st)}]"


def _config(policy: str, node_policy: str, mpl: int, jobs: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    return {
        "fidelity": "process",
        "seed": seed,
        "node_platform": {"preset": PLATFORM},
        "workload": {"jobs": jobs},
        "scheduler": {"policy": policy, "node_policy": node_policy, "mpl": mpl, "placement": "packing"},
    }


def _pair_policy(q_io: float, q_cpu: float) -> str:
    # Plain round-robin between the two rows, each job its own quantum, the I/O job's blocked
    # remainder donated (gang bit), no switch cost (S003 §3.2's simple event-driven simulator).
    return (f"gang[rows=2,quantum_ms=10,switch_us=0,gang_bit=true,"
            f"quanta=io-bound:{q_io:g}/Barrier:{q_cpu:g}]")


def _pair_runs(fig: str, pairs: list[tuple[float, float]], st: Settings) -> list[RunSpec]:
    out = []
    io = {"app": _io_app(st), "procs": NODES, "submit_s": 0.0}
    cpu = {"app": _compute_app(st), "procs": NODES, "submit_s": 0.0, "background": True}
    for seed in range(1, st.seeds + 1):
        out.append(RunSpec(f"{fig}-dedicated-s{seed}", {"kind": "dedicated", "q_io": 0.0, "q_cpu": 0.0,
                                                          "seed": seed},
                           _config("gang[rows=1,quantum_ms=10,switch_us=0]", "nls", 1, [io], seed)))
        for q_io, q_cpu in pairs:
            key = f"{fig}-io{q_io:g}-cpu{q_cpu:g}-s{seed}"
            out.append(RunSpec(key, {"kind": "shared", "q_io": q_io, "q_cpu": q_cpu, "seed": seed},
                               _config(_pair_policy(q_io, q_cpu), "nls", 2, [io, cpu], seed)))
    return out


def fig2_runs(st: Settings) -> list[RunSpec]:
    ios = [2.5, 20.0] if st.quick else FIG2_IO_Q
    sweep = QUICK_SWEEP if st.quick else SWEEP
    return _pair_runs("fig2", [(a, b) for a in ios for b in sweep], st)


def fig3_runs(st: Settings) -> list[RunSpec]:
    cpus = [10.0, 40.0] if st.quick else FIG3_CPU_Q
    sweep = QUICK_SWEEP if st.quick else SWEEP
    return _pair_runs("fig3", [(a, b) for b in cpus for a in sweep], st)


def pair_table(g: Gathered) -> pd.DataFrame:
    """One row per (q_io, q_cpu): the I/O job's slowdown and the CPU fragmentation (%), seed means."""
    # The I/O job is job 0 of every run (workload order; the compute job is job 1).
    io_rt = g.jobs[g.jobs["job_id"] == 0].set_index("run")["response_s"]
    cpu_end = g.jobs[g.jobs["job_id"] == 1].set_index("run")["end_s"]
    io_end = g.jobs[g.jobs["job_id"] == 0].set_index("run")["end_s"]
    runs = g.runs.set_index("run")
    ded = {int(r["seed"]): float(io_rt[k]) for k, r in runs.iterrows() if r["kind"] == "dedicated"}
    rows = []
    for k, r in runs.iterrows():
        if r["kind"] != "shared":
            continue
        span = float(r["makespan_s"])
        rows.append({
            "q_io": float(r["q_io"]), "q_cpu": float(r["q_cpu"]), "seed": int(r["seed"]),
            "slowdown": float(io_rt[k]) / ded[int(r["seed"])],
            "fragmentation_pct": 100.0 * float(r["process_cpu_fragmentation"]),
            "spin_pct": 100.0 * float(r["process_spin_s"]) / (NODES * span),
            "compute_ended_first": int(float(cpu_end[k]) < float(io_end[k])),
        })
    df = pd.DataFrame(rows)
    return (df.groupby(["q_io", "q_cpu"], as_index=False)
            .agg(slowdown=("slowdown", "mean"), fragmentation_pct=("fragmentation_pct", "mean"),
                 spin_pct=("spin_pct", "mean"), compute_ended_first=("compute_ended_first", "sum"))
            .sort_values(["q_io", "q_cpu"]).reset_index(drop=True))


def _trend(df: pd.DataFrame, x: str, y: str) -> float:
    """Spearman rank correlation of ``y`` with ``x`` (0 when undefined)."""
    if len(df) < 2 or df[y].nunique() < 2:
        return 0.0
    r = df[x].rank().corr(df[y].rank())
    return 0.0 if pd.isna(r) else float(r)


def trend_finding(t: pd.DataFrame, by: str, x: str, y: str, sign: int, claim: str, what: str) -> Finding:
    """Per curve (one per value of ``by``): the Spearman correlation of ``y`` with ``x`` must have
    the sign ``sign`` and magnitude >= 0.5; reproduced if every curve does, partly if one does."""
    rhos = {float(v): _trend(t[t[by] == v], x, y) for v in dict.fromkeys(t[by])}
    ok = [sign * r >= 0.5 for r in rhos.values()]
    word = "rises" if sign > 0 else "falls"
    ours = ", ".join(f"{by}={k:g}: rho {r:+.2f}" for k, r in rhos.items())
    why = ""
    if not all(ok):
        why = (f"{what} does not {word.rstrip('s')} monotonically with {x} on every curve; S003 §3.2 "
               "attributes the waviness to harmonics between the I/O job's ~25 ms period and the quanta")
    return Finding(claim, f"Spearman rho of {y} with {x} {'>= +0.5' if sign > 0 else '<= -0.5'} "
                   f"on every {by} curve (partly: on at least one)", ours,
                   verdict(all(ok), any(ok)), why)


def tradeoff_finding(t: pd.DataFrame) -> Finding:
    """Low priority inversion comes with high fragmentation: Spearman(slowdown, fragmentation) <= -0.3
    over all points."""
    r = _trend(t, "slowdown", "fragmentation_pct")
    return Finding(
        "where priority inversion is low, CPU fragmentation is high (S003 §3.2, Fig. 3)",
        "Spearman rho of fragmentation with slowdown over all points <= -0.3 (partly: < 0)",
        f"rho {r:+.2f}", verdict(r <= -0.3, r < 0),
        "" if r <= -0.3 else "slowdown and fragmentation do not trade off across our quantum pairs")


def _pair_outcome(g: Gathered, st: Settings, fig: str) -> Outcome:
    t = pair_table(g)
    if fig == "fig2":
        by, x, title = "q_io", "q_cpu", "Fig. 2: I/O job quantum fixed per curve, compute job quantum varied"
        f = [
            trend_finding(t, by, x, "slowdown", +1,
                          "a longer compute-bound quantum increases the I/O job's slowdown (priority "
                          "inversion) (S003 §3.2, Fig. 2 left)", "the slowdown"),
            trend_finding(t, by, x, "fragmentation_pct", -1,
                          "a longer compute-bound quantum reduces CPU fragmentation (S003 §3.2, Fig. 2 "
                          "right)", "the fragmentation"),
        ]
    else:
        by, x, title = "q_cpu", "q_io", "Fig. 3: compute job quantum fixed per curve, I/O job quantum varied"
        f = [
            trend_finding(t, by, x, "slowdown", -1,
                          "a longer I/O-bound quantum generally reduces the I/O job's slowdown (S003 §3.2, "
                          "Fig. 3 left)", "the slowdown"),
            trend_finding(t, by, x, "fragmentation_pct", +1,
                          "a longer I/O-bound quantum increases CPU fragmentation (S003 §3.2, Fig. 3 "
                          "right)", "the fragmentation"),
            tradeoff_finding(t),
        ]
    report = [
        f"# {title}", "",
        f"{'Quick run: ' if st.quick else ''}{_bursts(st)} bursts of the I/O job on 32 processors "
        f"(`{PLATFORM}`), the compute job `{_compute_app(st)}` (background), {st.seeds} seed(s). "
        "Slowdown: I/O job response / dedicated response. Fragmentation: % of the machine's CPU time "
        "not spent on useful work; spin: % spent busy-waiting (the compute job's processes in donated, "
        "non-gang fragments). Runs where the compute job ended before the I/O job (it then no longer "
        f"competes; should be 0): {int(t['compute_ended_first'].sum())}.", "",
        f"![slowdown]({fig}_slowdown.png)", "", f"![fragmentation]({fig}_fragmentation_pct.png)", "",
        md_table(t, 2), "", "## Findings", "", findings_md(f),
    ]
    files = {f"{fig}.csv": csv_writer(t)}
    for y, lab in (("slowdown", "I/O job slowdown"), ("fragmentation_pct", "CPU fragmentation (%)")):
        files[f"{fig}_{y}.png"] = (lambda yy, ll: lambda p: grouped_bars(
            t, p, x=x, series=by, value=yy, title=f"{title}: {ll}", ylabel=ll))(y, lab)
    return Outcome("\n".join(report), files)


register(Experiment(
    "lee-fig2", "I/O-bound vs synchronization-heavy job gang scheduled on 32 CPUs: compute quantum varied",
    "seed 003 Figure 2", fig2_runs, lambda g, st: _pair_outcome(g, st, "fig2"),
))
register(Experiment(
    "lee-fig3", "I/O-bound vs synchronization-heavy job gang scheduled on 32 CPUs: I/O quantum varied",
    "seed 003 Figure 3", fig3_runs, lambda g, st: _pair_outcome(g, st, "fig3"),
))


# ----- the flexible gang scheduler on a mix ----------------------------------------------------

#: Gang quantum and switch: the gang policy's defaults (assumption G-SCH-6); the I/O jobs' own
#: quantum under FLEX is two mean CPU bursts (10 ms; assumption G-S003-FLEX). FLEX decides which
#: jobs are of low gangedness with the online estimator (``low=auto``, S003 §5; threshold and window
#: of assumption G-S003-5); the I/O interrupts then take CPUs only from low-gangedness jobs.
GANG = "gang[rows=3,quantum_ms=100,switch_us=1000]"
FLEX = ("gang[rows=3,quantum_ms=100,switch_us=1000,alternate=true,gang_bit=true,io_preempt=true,"
        "fill=true,low=auto,quanta=io-bound:10]")
#: FLEX with the low-gangedness applications declared instead of estimated (for comparison).
FLEX_DECLARED = FLEX.replace("low=auto", "low=Emp/io-bound")
#: FLEX without the I/O interrupts: isolates their cost to the synchronizing jobs.
FLEX_NOINT = FLEX.replace("io_preempt=true", "io_preempt=false")
MIX_SCHEMES: dict[str, tuple[str, str, int]] = {
    "FLEX": (FLEX, "nls", 3),
    "FLEX-DECLARED": (FLEX_DECLARED, "nls", 3),
    "FLEX-NOINT": (FLEX_NOINT, "nls", 3),
    "GANG": (GANG, "nls", 3),
    "HYBRID": ("fcfs", "hybrid", 3),
    "BATCH": ("batch", "nls", 1),
}
CLASSES = ["io", "sync", "emp"]
#: Label of the dedicated runs of the I/O job (alone on the machine, batch + nls).
DEDICATED = "DEDICATED-IO"


def mix_jobs(st: Settings) -> list[tuple[str, dict[str, Any]]]:
    """Two jobs of each class, 16 processes each, all submitted at 0 (3 gang rows on 32 nodes)."""
    quanta = 400 if st.quick else 2000
    apps = {
        "io": f"io-bound[bursts={10 if st.quick else 40}]",
        "sync": f"Barrier[every=1,quanta={quanta}]",
        "emp": f"Emp[quanta={quanta}]",
    }
    return [(c, {"app": apps[c], "procs": 16, "submit_s": 0.0}) for _ in range(2) for c in CLASSES]


def mix_runs(st: Settings) -> list[RunSpec]:
    mix = mix_jobs(st)
    jobs = [j for _, j in mix]
    io_alone = [next(j for c, j in mix if c == "io")]
    out = []
    for seed in range(1, st.seeds + 1):
        for name, (policy, node, mpl) in MIX_SCHEMES.items():
            out.append(RunSpec(f"mix-{name.lower()}-s{seed}", {"scheme": name, "seed": seed},
                               _config(policy, node, mpl, jobs, seed)))
        out.append(RunSpec(f"mix-dedicated-io-s{seed}", {"scheme": DEDICATED, "seed": seed},
                           _config("batch", "nls", 1, io_alone, seed)))
    return out


def _order(df: pd.DataFrame) -> pd.DataFrame:
    order = list(MIX_SCHEMES)
    return (df.assign(o=[order.index(s) for s in df["scheme"]]).sort_values("o").drop(columns="o")
            .reset_index(drop=True))


def mix_table(g: Gathered, st: Settings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean response per scheme and class; the I/O jobs' slowdown against the dedicated I/O job
    (same seed); utilization and priority inversion per scheme."""
    classes = [c for c, _ in mix_jobs(st)]
    ded_runs = g.runs[g.runs["scheme"] == DEDICATED]
    ded = g.jobs[g.jobs["scheme"] == DEDICATED].set_index("seed")["response_s"]
    jobs = g.jobs[g.jobs["scheme"] != DEDICATED].copy()
    jobs["pos"] = jobs.groupby("run").cumcount()
    jobs["cls"] = [classes[int(p)] for p in jobs["pos"]]
    resp = (jobs.groupby(["scheme", "cls"], as_index=False)["response_s"].mean()
            .pivot(index="scheme", columns="cls", values="response_s").reset_index())
    resp["all"] = jobs.groupby("scheme")["response_s"].mean().reindex(resp["scheme"]).to_numpy()
    io = jobs[jobs["cls"] == "io"].copy()
    io["slowdown"] = io["response_s"] / io["seed"].map(ded).astype(float)
    resp["io_slowdown"] = io.groupby("scheme")["slowdown"].mean().reindex(resp["scheme"]).to_numpy()
    runs = g.runs[g.runs["scheme"] != DEDICATED]
    util = runs.groupby("scheme", as_index=False)[
        ["utilization", "makespan_s", "measure_priority_inversion_total_s"]].mean()
    resp = _order(resp.merge(util, on="scheme").rename(
        columns={"measure_priority_inversion_total_s": "prio_inversion_s"}))
    long = jobs.groupby(["scheme", "cls"], as_index=False)["response_s"].mean()
    resp.attrs["dedicated_io_s"] = float(ded.mean()) if not ded_runs.empty else float("nan")
    return resp[["scheme", *CLASSES, "all", "io_slowdown", "prio_inversion_s", "utilization",
                 "makespan_s"]], long


def gangedness_table(g: Gathered, st: Settings) -> pd.DataFrame:
    """Each job's final online gangedness estimate under FLEX (per seed) and FLEX-DECLARED's
    declared class, from the runs' ``process.measures.gangedness.jobs`` lists."""
    classes = [c for c, _ in mix_jobs(st)]
    declared = {a for a in FLEX_DECLARED.split("low=")[1].split(",")[0].split("/")}
    rows = []
    for _, r in g.runs[g.runs["scheme"] == "FLEX"].iterrows():
        cell = r.get("measure_gangedness_jobs")
        for e in json.loads(cell) if isinstance(cell, str) else []:
            rows.append({
                "seed": int(r["seed"]), "job": int(e["job"]), "cls": classes[int(e["job"])], "app": e["app"],
                "gang_n": int(e["gang_n"]), "ngn_n": int(e["ngn_n"]), "ngr_n": int(e["ngr_n"]),
                "gang_msg_mean": e["gang_msg_mean"], "ngn_msg_mean": e["ngn_msg_mean"], "ratio": e["ratio"],
                "estimated": e["class"], "decided_s": e.get("decided_s"),
                "declared": "low" if e["app"] in declared else "high",
            })
    return pd.DataFrame(rows)


def estimator_finding(est: pd.DataFrame) -> Finding:
    """S003 §5: message statistics identify gangedness; FLEX's online estimate must class the
    synchronizing jobs high and the embarrassingly parallel jobs low."""
    claim = ("message statistics identify the gangedness of applications: the synchronization-intensive "
             "jobs must be ganged, the embarrassingly parallel ones need not (S003 §5, §7)")
    if est.empty:
        return Finding(claim, "", "no FLEX estimates", NOT_APPLICABLE)
    sync = est[est["cls"] == "sync"]["estimated"]
    emp = est[est["cls"] == "emp"]["estimated"]
    ok = bool((sync == "high").all() and (emp == "low").all())
    part = bool((sync == "high").any() or (emp == "low").any())
    ours = (f"sync jobs: {', '.join(sync)}; emp jobs: {', '.join(emp)} (FLEX's online estimate at the "
            "end of each run)")
    return Finding(claim, "every Barrier job classed high and every Emp job classed low by FLEX's online "
                   "estimator (partly: some)", ours, verdict(ok, part),
                   "" if ok else "too few non-gang quanta or too small a ratio gap in our runs (see the "
                   "gangedness table)")


def mix_findings(t: pd.DataFrame) -> list[Finding]:
    v = t.set_index("scheme")
    f = []
    gi, fi = v.loc["GANG", "prio_inversion_s"], v.loc["FLEX", "prio_inversion_s"]
    f.append(Finding(
        "gang schedulers cause priority inversion when a compute-bound job holds the CPU while an I/O-bound "
        "process is ready (S003 §3.1); interrupting reduces it (S003 §3.2)",
        "priority inversion under GANG above FLEX's",
        f"GANG {gi:.2f} s, FLEX {fi:.2f} s, FLEX-NOINT {v.loc['FLEX-NOINT', 'prio_inversion_s']:.2f} s, "
        f"HYBRID {v.loc['HYBRID', 'prio_inversion_s']:.2f} s",
        verdict(gi > fi), "" if gi > fi else "the I/O interrupts did not lower the inversion in our runs"))
    g_io, f_io, h_io = v.loc["GANG", "io"], v.loc["FLEX", "io"], v.loc["HYBRID", "io"]
    ok = g_io > f_io and g_io > h_io
    f.append(Finding(
        "traditional gang scheduling hurts the response of I/O-bound jobs (S003 §3, §6)",
        "I/O class mean response under GANG above FLEX's and HYBRID's (partly: above one of them)",
        f"GANG {g_io:.2f} s, FLEX {f_io:.2f} s, HYBRID {h_io:.2f} s",
        verdict(ok, g_io > f_io or g_io > h_io),
        "" if ok else "the I/O jobs' 20 ms waits overlap the other rows' slots in our model"))
    ga, fa = v.loc["GANG", "all"], v.loc["FLEX", "all"]
    gu, fu = v.loc["GANG", "utilization"], v.loc["FLEX", "utilization"]
    f.append(Finding(
        "interrupting ganged compute-bound jobs and filling fragments benefits the workload (S003 §6)",
        "FLEX mean response below GANG's and FLEX utilization >= GANG's (partly: one of the two)",
        f"response FLEX {fa:.2f} s vs GANG {ga:.2f} s; utilization FLEX {fu:.3f} vs GANG {gu:.3f}",
        verdict(fa < ga and fu >= gu, fa < ga or fu >= gu),
        "" if fa < ga and fu >= gu else "the interrupts' cost to the synchronizing jobs outweighs the gain"))
    ge, fe = v.loc["GANG", "emp"], v.loc["FLEX", "emp"]
    f.append(Finding(
        "fragments are best given to low-gangedness jobs, which use them (S003 §3.2, §4, §6)",
        "the embarrassingly parallel class responds faster under FLEX than under GANG",
        f"FLEX {fe:.2f} s vs GANG {ge:.2f} s", verdict(fe < ge),
        "" if fe < ge else "the fragments left by the I/O jobs are too few or too short for Emp"))
    ns, fs, gs = v.loc["FLEX-NOINT", "sync"], v.loc["FLEX", "sync"], v.loc["GANG", "sync"]
    f.append(Finding(
        "interrupting a synchronization-intensive job costs it progress (S003 §3.2, §4.1 type i)",
        "the synchronization class responds slower under FLEX than under FLEX-NOINT (the same "
        "scheduler without I/O interrupts)",
        f"FLEX {fs:.3f} s vs FLEX-NOINT {ns:.3f} s (GANG {gs:.3f} s)", verdict(fs > ns),
        "" if fs > ns else f"in our runs the I/O interrupts did not lengthen the synchronizing jobs' "
        f"mean response (FLEX minus FLEX-NOINT: {fs - ns:+.3f} s)"))
    return f


def _mix(g: Gathered, st: Settings) -> Outcome:
    t, long = mix_table(g, st)
    est = gangedness_table(g, st)
    f = mix_findings(t) + [estimator_finding(est)]
    classes = ("" if est.empty else "; ".join(
        f"job {int(r['job'])} ({r['app']}, seed {int(r['seed'])}): **{r['estimated']}** (ratio "
        f"{'n/a' if pd.isna(r['ratio']) else format(r['ratio'], '.3f')})" for _, r in est.iterrows()))
    report = [
        "# Flexible gang scheduling on a mix of I/O-bound, synchronizing and embarrassingly parallel jobs",
        "",
        f"{'Quick run: ' if st.quick else ''}two jobs of each class, 16 processes each, on `{PLATFORM}`, "
        f"{st.seeds} seed(s). FLEX = `{FLEX}` (the online gangedness estimator decides which jobs are "
        "of low gangedness: only those get fragments and may be interrupted by I/O); FLEX-DECLARED = the "
        "same with the low-gangedness applications declared (`low=Emp/io-bound`); FLEX-NOINT = FLEX with "
        f"`io_preempt=false`; GANG = `{GANG}`; HYBRID = fcfs + hybrid (MPL 3); "
        "BATCH = batch + nls. Mean response (s) per class: io = `io-bound`, sync = `Barrier`, "
        "emp = `Emp`. io_slowdown: the I/O jobs' mean response / the I/O job's response alone on the "
        f"machine (batch, same seed; mean {t.attrs.get('dedicated_io_s', float('nan')):.3f} s). "
        "prio_inversion_s: time the I/O jobs' processes, woken by their disk, waited for a CPU while "
        "their node ran another job's process (all processes, summed).", "",
        f"FLEX's estimated class per job: {classes}.", "",
        "![flexgang_mix](flexgang_mix.png)", "", md_table(t, 3), "", "## Findings", "", findings_md(f), "",
        "## Online gangedness estimate under FLEX", "",
        "Records per set (gang, non-gang-non-running ngn, non-gang-running ngr), mean messages received "
        "per record, the ratio ngn / gang, the class (`unknown` below the window; G-S003-5) and when it was "
        "first decided (`decided_s`); `declared` is FLEX-DECLARED's list. Until a job is classified FLEX "
        "treats it as of low gangedness (it gets fragments and may be interrupted: the probing that gives it "
        "non-gang quanta), so FLEX and FLEX-DECLARED differ even when the final classes agree.", "",
        md_table(est, 3) if not est.empty else "(no estimates)",
    ]
    files = {"flexgang_mix.csv": csv_writer(t), "flexgang_mix_gangedness.csv": csv_writer(est)}
    files["flexgang_mix.png"] = lambda p: grouped_bars(
        long, p, x="cls", series="scheme", value="response_s",
        title="Mean response per job class", ylabel="response (s)")
    return Outcome("\n".join(report), files)


register(Experiment(
    "flexgang-mix", "Flexible gang vs gang, HYBRID and batch on I/O, sync and embarrassingly parallel jobs",
    "seed 003 §3.2, §6", mix_runs, _mix,
))
