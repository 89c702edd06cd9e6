"""The native scheduler model of the real-vs-sim preset, fitted on how this machine time-shares one CPU.

Algorithm:

1. **Measure** (``cosched-timeshare``, real/tools/timeshare.c) on each node CPU, nothing else of the
   experiment running: two and three CPU-bound spinners pinned on the CPU (the run slices each gets:
   stretches of its loop without a gap of ``GAP_US``); and two sleepers that repeat seed 003's I/O-bound
   cycle (a CPU burst drawn from Erlang-5 of mean 5 ms, then 20 ms asleep) next to one spinner: per
   wake-up, the time the spinner still held the CPU after the sleeper's timer expired (``held``: 0 when
   a woken sleeper preempts the spinner at once, up to a slice when it waits for the spinner's slice to
   end; its median and mean). Both come from CLOCK_MONOTONIC stamps of the measured processes themselves,
   so another task of the machine that takes the CPU cuts a slice short but is not counted as a slice or as
   held time.
2. **Simulate the same micro-benchmark** on one node of one CPU of the preset (its costs, noise and CPU
   speed), once per candidate OS model of ``CANDIDATES``: an ``Emp`` job of two ranks (compute only) on
   the node, with a ``cpu-load`` background job for the third spinner, for the slices; two ``io-bound``
   jobs of one rank (the same cycle, the engine's Erlang-5 draws) with a ``cpu-load`` background job for
   the wake-ups, run with each seed of ``WAKE_SEEDS`` and pooled. The same figures are read from the
   simulated timelines. Two known differences from the real benchmark (idle traces, docs/real.md "The held
   time and the lockstep"): the ``io-bound`` sleep is a disk burst, which the engine serves one at a time
   per node, so the two simulated sleepers sleep in turn (the real ones sleep independently: a woken
   sleeper finds the other on the CPU at about 1% of the simulated wake-ups against 22-26% traced); and the
   real sleepers, reading their CPU clock, are switched out at their deadline (1,400 us), the simulated
   ones at the tick.
3. **Choose** by the mean over ``FEATURES`` (the median slice of 2 and of 3 spinners, the median and the
   mean held time) of ``|ln((simulated + FLOOR_US) / (measured + FLOOR_US))|`` (``FLOOR_US`` keeps
   differences far below the fine-grained workload's quantum, a wake-up's own cost or the timer's jitter,
   from deciding). The candidate of smallest error leads; every candidate whose error is within the
   **tie tolerance** of the leader's counts as tied with it, and of the tied ones the first in
   ``CANDIDATES`` order (the simpler, older model) is chosen. The tolerance comes from the measurement's
   own spread, nothing else: each node CPU's runs are a repeat of the micro-benchmark, the leader is
   scored against each repeat's figures alone, and the tolerance is the spread (largest less smallest)
   of those errors: how much the error moves from one repeat of the same measurement to the next. With
   two repeats this is twice the standard error of the mean error (``|x1 - x2| = 2 * sd / sqrt(2)``).
   One repeat gives no tolerance (ties only within 1e-9).

The dedicated-runtime fit that chose the model before (:func:`realsim.fit_os`) stays as a check: it cannot
tell the models apart (one rank per CPU, the scheduler has nothing to choose).

Sources of the candidates' parameters: the CFS defaults for one CPU (latency 6 ms, minimum granularity
0.75 ms, wake-up granularity 1 ms; Linux 2.6.23 to 6.5); EEVDF (Linux 6.6 and later) gives every task of
equal weight the same request size ``base_slice`` whatever the number of runnable tasks, a CFS model with
``latency_ms = min_granularity_ms = slice`` (each runnable task gets ``min_granularity``): 0.75 ms
(``sysctl_sched_base_slice``, kernel/sched/fair.c), 1.5 ms (0.75 ms scaled by ``1 + ilog2(CPUs)`` for 2
CPUs, the default ``SCHED_TUNABLESCALING_LOG``) and 4 ms (one tick at HZ = 250: without the HRTICK
feature a slice ends at the first tick after it expired); Linux 2.4's 60 ms base slice (``NICE_TO_TICKS(0)
= 6`` ticks at HZ = 100); the Solaris TS dispatch table (``mlfq``); round robin at its default quantum and
at one tick of this machine (4 ms); and the ``eevdf`` model (``os/eevdf.rs``, docs/models/eevdf.md: EEVDF
entity by entity, eligibility, deadlines and slices ended at the first tick that finds the deadline
reached, ``RUN_TO_PARITY`` protection, lag placement and delayed dequeue) with ``tick_ms`` 4 (HZ = 250) and
``slice_ms`` 0.75 (``sysctl_sched_base_slice`` until it became 0.70 ms), 1.5 (scaled for 2 CPUs), 4 (one
tick) and, last, 1.4 (the current mainline base slice, 0.70 ms, scaled for 2 CPUs: what a sched_switch trace
of this machine's kernel shows, a sleeper that reads its CPU clock being switched out after 1,400 us of run,
docs/real.md), labelled ``eevdf-rtp-*``, after the others so that a tie keeps the earlier choice. What the
running kernel exposes of its slice is recorded with the fit (:func:`kernel_slice_sources`).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import statistics
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: The candidate OS models: label and the ``os`` table of the preset (a cfs candidate also gets the
#: measured slice spread, ``slice_cv``). Sources: the module notes.
CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("cfs", {"model": "cfs"}),
    ("eevdf-0.75ms", {"model": "cfs", "latency_ms": 0.75, "min_granularity_ms": 0.75}),
    ("eevdf-1.5ms", {"model": "cfs", "latency_ms": 1.5, "min_granularity_ms": 1.5}),
    ("eevdf-tick-4ms", {"model": "cfs", "latency_ms": 4.0, "min_granularity_ms": 4.0}),
    ("linux24", {"model": "linux24"}),
    ("mlfq", {"model": "mlfq"}),
    ("rr", {"model": "rr"}),
    ("rr-tick-4ms", {"model": "rr", "quantum_ms": 4.0}),
    ("eevdf-rtp-0.75ms", {"model": "eevdf", "slice_ms": 0.75, "tick_ms": 4.0}),
    ("eevdf-rtp-1.5ms", {"model": "eevdf", "slice_ms": 1.5, "tick_ms": 4.0}),
    ("eevdf-rtp-4ms", {"model": "eevdf", "slice_ms": 4.0, "tick_ms": 4.0}),
    ("eevdf-rtp-1.4ms", {"model": "eevdf", "slice_ms": 1.4, "tick_ms": 4.0}),
)
#: The figures compared, us: the median run slice of 2 and of 3 spinners; the median and the mean time a
#: spinner held the CPU after a sleeper's wake-up (the median: whether a woken task usually preempts; the
#: mean: with the waits of the wake-ups that do not).
FEATURES = ("slice2_p50_us", "slice3_p50_us", "held_p50_us", "held_mean_us")
#: Added to both sides of every ratio, us.
FLOOR_US = 100.0
#: A step of a spinner's loop this long or longer ends its run slice, us (real and simulated alike).
GAP_US = 50.0
#: The sleepers: seed 003's I/O-bound job (20 ms asleep after a CPU burst of Erlang-5 of mean 5 ms), two of
#: them: with one, a spinner's slice begins when the sleeper blocks, so a model whose slices divide 20 ms
#: ends one exactly when the sleeper wakes (a phase lock the simulator would show and the real tick-driven
#: kernel does not); with two, the slice begins when either blocks, independent of the other's wake-up.
SLEEP_US, BURST_US, BURST_K, SLEEPERS = 20_000.0, 5_000.0, 5, 2
#: The simulated micro-benchmark's least length: compute of the slices runs, s, and rounds of each sleeper
#: (simulated time is cheap: a model of 200 ms slices still gives dozens of them).
SIM_SLICES_S, SIM_ROUNDS = 10.0, 100
#: The run seeds whose wake-ups are pooled for the held time (each seed draws the node's tick phase and the
#: sleepers' bursts): a sleep of 20 ms is 5 ticks of 4 ms, so one seed's wake-ups can keep falling at one
#: point of the tick and one draw would decide whether they wait (the eevdf model, slice 0.75 ms, on the idle
#: run's preset: held mean 94 to 426 us over seeds 1 to 6).
WAKE_SEEDS = (1, 2, 3, 4, 5, 6)
#: CPU time of one ``Emp`` quantum, s.
QUANTUM_S = 0.5e-3
#: Simulated timeline rows in which a process runs its own code.
RUNS = ("useful", "spin")


def tool(build: Path) -> Path:
    exe = build / "cosched-timeshare"
    if not exe.is_file():
        raise RuntimeError(f"{exe} is missing: build it with `make real`")
    return exe


def _json(cmd: list[str]) -> dict[str, Any]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def measure(build: Path, cpus: tuple[int, ...], seconds: float, rounds: int) -> dict[str, Any]:
    """Step 1 on each CPU of ``cpus``: slices of 2 and 3 spinners for ``seconds`` each, ``rounds``
    wake-ups of the sleeper next to one spinner. Returns every run and the features (mean over the CPUs)."""
    exe = str(tool(build))
    runs: dict[str, list[dict[str, Any]]] = {"slices2": [], "slices3": [], "wake": []}
    for cpu in cpus:
        for n in (2, 3):
            runs[f"slices{n}"].append(_json([exe, "slices", str(cpu), str(n), f"{seconds:g}", f"{GAP_US:g}"]))
        runs["wake"].append(_json([exe, "wake", str(cpu), "1", str(SLEEPERS), str(rounds), f"{SLEEP_US:g}",
                                   f"{BURST_US:g}", str(BURST_K), "1"]))
    return {"runs": runs, "features": real_features(runs), "kernel": kernel_slice_sources()}


def real_features(runs: Mapping[str, list[dict[str, Any]]]) -> dict[str, float]:
    """The features of the measured runs: per figure the mean over the CPUs."""
    return {"slice2_p50_us": statistics.mean(r["slice_p50_us"] for r in runs["slices2"]),
            "slice3_p50_us": statistics.mean(r["slice_p50_us"] for r in runs["slices3"]),
            "held_p50_us": statistics.mean(r["held_p50_us"] for r in runs["wake"]),
            "held_mean_us": statistics.mean(r["held_mean_us"] for r in runs["wake"]),
            "slice_cv": statistics.mean(r["slice_cv"] for r in runs["slices2"])}


def kernel_slice_sources() -> dict[str, Any]:
    """What the running kernel exposes of its time slice: EEVDF's ``base_slice_ns`` (debugfs, Linux 6.6
    and later) or CFS's ``sched_min_granularity_ns`` (sysctl before 5.13, debugfs after), the first
    readable; and ``CONFIG_HZ`` / ``CONFIG_SCHED_HRTICK`` from /proc/config.gz when present."""
    paths = ("/sys/kernel/debug/sched/base_slice_ns", "/sys/kernel/debug/sched/min_granularity_ns",
             "/proc/sys/kernel/sched_base_slice_ns", "/proc/sys/kernel/sched_min_granularity_ns")
    out: dict[str, Any] = {"kernel": os.uname().release, "slice_ns": None, "slice_source": None}
    for p in paths:
        try:
            out["slice_ns"] = int(Path(p).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out["slice_source"] = p
        break
    else:
        debugfs = "mounted" if os.path.ismount("/sys/kernel/debug") else "not mounted"
        out["slice_source"] = f"not readable: none of {', '.join(paths)} (debugfs {debugfs})"
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            conf = dict(line.strip().split("=", 1) for line in f if line.startswith("CONFIG_") and "=" in line)
        out["config_hz"] = int(conf["CONFIG_HZ"]) if "CONFIG_HZ" in conf else None
        out["config_sched_hrtick"] = conf.get("CONFIG_SCHED_HRTICK") == "y"
    except (OSError, ValueError):
        out["config_hz"] = None
    return out


def _merge(rows: list[tuple[float, float]], gap_s: float) -> list[tuple[float, float]]:
    """Sorted intervals joined where the next starts less than ``gap_s`` after the previous ends."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(rows):
        if out and a - out[-1][1] < gap_s:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def sim_slices(tl: Any) -> list[float]:
    """The run slices (us) of every process of a simulated timeline: its rows running its own code
    joined across gaps under ``GAP_US``, less each process's first and last run (the first may begin
    before the other spinners started, the last ends with the process)."""
    out: list[float] = []
    run = tl[(tl.cpu >= 0) & tl.kind.isin(RUNS)]
    for _, g in run.groupby("pid"):
        slices = _merge(list(zip(g.start_s, g.end_s, strict=True)), GAP_US * 1e-6)
        out += [(b - a) * 1e6 for a, b in slices[1:-1]]
    return out


def _overlap(a: float, b: float, runs: list[tuple[float, float]]) -> float:
    return sum(max(min(b, y) - max(a, x), 0.0) for x, y in runs)


def sim_held(tl: Any, sleeper_jobs: list[int], spinner_job: int) -> list[float]:
    """Per wake-up of a sleeper (the end of each of its ``blocked`` rows), the time (us) the spinner ran
    its own code between the wake-up and the sleeper's next run."""
    spin = tl[(tl.job == spinner_job) & (tl.cpu >= 0) & tl.kind.isin(RUNS)]
    runs = sorted(zip(spin.start_s, spin.end_s, strict=True))
    out = []
    for job in sleeper_jobs:
        mine = tl[tl.job == job]
        starts = sorted(mine[(mine.cpu >= 0) & mine.kind.isin(RUNS)].start_s)
        for woke in sorted(mine[mine.kind == "blocked"].end_s):
            nxt = next((s for s in starts if s >= woke), None)
            if nxt is not None:
                out.append(_overlap(woke, nxt, runs) * 1e6)
    return out


def _config(platform: Mapping[str, Any], jobs: list[dict[str, Any]], procs: int, seed: int = 1) -> dict[str, Any]:
    """One node of one CPU running ``jobs`` (``procs`` processes in all) at once, with run seed ``seed``."""
    return {"fidelity": "process", "seed": seed, "node_platform": dict(platform, nodes=1),
            "workload": {"jobs": jobs}, "scheduler": {"policy": "fcfs", "node_policy": "nls", "mpl": procs}}


def simulate(platform: Mapping[str, Any], seconds: float, rounds: int, work: Path) -> dict[str, float]:
    """Step 2 for one preset: the micro-benchmark run by the simulator on one node of one CPU, and its
    features. ``seconds`` of compute in all for the slices, ``rounds`` wake-ups of each sleeper, at least
    ``SIM_SLICES_S`` and ``SIM_ROUNDS``."""
    from ..api import run

    seconds, rounds = max(seconds, SIM_SLICES_S), max(rounds, SIM_ROUNDS)

    def timeline(name: str, jobs: list[dict[str, Any]], procs: int, seed: int = 1) -> Any:
        folder = work / name
        folder.mkdir(parents=True, exist_ok=True)
        cfg = folder / "config.json"
        cfg.write_text(json.dumps(_config(platform, jobs, procs, seed), indent=1, sort_keys=True) + "\n")
        return run(config=cfg, timeline=True).timeline

    feats: dict[str, float] = {}
    spinner = {"app": "cpu-load", "procs": 1, "background": True}
    for n in (2, 3):
        quanta = max(round(seconds / (n * QUANTUM_S)), 1)
        # `Emp` has at least 2 ranks: both on the node, and a background spinner for the third.
        emp = {"app": f"Emp[quanta={quanta}]", "procs": 2, "ranks_per_node": 2}
        tl = timeline(f"slices{n}", [emp] + [spinner] * (n - 2), n)
        slices = sim_slices(tl)
        if not slices:
            raise RuntimeError(f"{platform['os']}: no complete slice of {n} spinners in {seconds:g} s simulated")
        feats[f"slice{n}_p50_us"] = statistics.median(slices)
    sleepers = [{"app": f"io-bound[bursts={rounds}]", "procs": 1}] * SLEEPERS
    held: list[float] = []
    for seed in WAKE_SEEDS:
        tl = timeline(f"wake-{seed}", [*sleepers, spinner], SLEEPERS + 1, seed)
        held += sim_held(tl, list(range(SLEEPERS)), SLEEPERS)
    feats["held_p50_us"] = statistics.median(held)
    feats["held_mean_us"] = statistics.mean(held)
    feats["held_samples"] = float(len(held))
    return feats


def error(real: Mapping[str, float], sim: Mapping[str, float]) -> float:
    """Mean over ``FEATURES`` of ``|ln((sim + FLOOR_US) / (real + FLOOR_US))|``."""
    return statistics.mean(abs(math.log((sim[f] + FLOOR_US) / (real[f] + FLOOR_US))) for f in FEATURES)


def repeat_features(runs: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, float]]:
    """The features of each repeat of the measurement: the runs of one node CPU alone (the i-th run of
    each kind; :func:`measure` runs them CPU by CPU)."""
    n = {len(runs[k]) for k in ("slices2", "slices3", "wake")}
    if len(n) != 1:
        raise ValueError(f"the measurement's runs differ in number per kind: {sorted(n)}")
    return [real_features({k: [runs[k][i]] for k in ("slices2", "slices3", "wake")}) for i in range(n.pop())]


def tie_tolerance(repeats: list[Mapping[str, float]], sim: Mapping[str, float]) -> tuple[float, list[float]]:
    """The spread (largest less smallest) of ``sim``'s :func:`error` against each repeat's features, and
    those errors; 0 with fewer than two repeats."""
    errs = [error(r, sim) for r in repeats]
    return (max(errs) - min(errs) if len(errs) > 1 else 0.0), errs


def choose(real: Mapping[str, float], sims: Mapping[str, Mapping[str, float]],
           repeats: list[Mapping[str, float]] | None = None) -> tuple[str, dict[str, float]]:
    """Step 3: the first candidate (a key of ``sims``, in its order) whose :func:`error` is within the tie
    tolerance of the smallest (:func:`tie_tolerance` of the leader over ``repeats``; none without them;
    errors compared to 1e-9); and every candidate's error."""
    return choose_with_tolerance(real, sims, repeats)[:2]


def choose_with_tolerance(real: Mapping[str, float], sims: Mapping[str, Mapping[str, float]],
                          repeats: list[Mapping[str, float]] | None = None
                          ) -> tuple[str, dict[str, float], dict[str, Any]]:
    """:func:`choose`, and how: the leader (smallest error), the tolerance and the leader's error per
    repeat."""
    if not sims:
        raise ValueError("no candidate OS model to choose from")
    for name, feats in [("measurement", real)] + [(f"repeat {i}", r) for i, r in enumerate(repeats or [])]:
        missing = [f for f in FEATURES if f not in feats]
        if missing:
            raise ValueError(f"the {name} lacks {', '.join(missing)}")
    errors = {label: error(real, s) for label, s in sims.items()}
    order = list(sims)
    leader = min(order, key=lambda k: (round(errors[k], 9), order.index(k)))
    tol, leader_errs = tie_tolerance(list(repeats or []), sims[leader])
    best = next(k for k in order if round(errors[k] - errors[leader] - tol, 9) <= 0)
    return best, errors, {"leader": leader, "tolerance": tol, "leader_repeat_errors": leader_errs}


def candidate_os(label: str, slice_cv: float) -> dict[str, Any]:
    """The ``os`` table of candidate ``label``; a cfs one carries the measured slice spread."""
    table = dict(dict(CANDIDATES)[label])
    if table["model"] == "cfs" and slice_cv > 0:
        table["slice_cv"] = round(slice_cv, 4)
    return table


def fit(measured: Mapping[str, Any], platform_of: Callable[[dict[str, Any]], dict[str, Any]], seconds: float,
        rounds: int, work: Path, say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Steps 2 and 3: ``platform_of(os table)`` gives the preset with that OS model. Returns the record
    kept in ``calibration.json``: the chosen candidate and its ``os`` table, the measured and simulated
    features, every candidate's error, the method."""
    real = measured["features"]
    sims: dict[str, dict[str, float]] = {}
    tables: dict[str, dict[str, Any]] = {}
    for label, _ in CANDIDATES:
        say(f"time-sharing fit: {label}")
        tables[label] = candidate_os(label, real.get("slice_cv", 0.0))
        sims[label] = simulate(platform_of(tables[label]), seconds, rounds, work / label)
    repeats = repeat_features(measured["runs"]) if "runs" in measured else []
    best, errors, how = choose_with_tolerance(real, sims, repeats)
    return {"chosen": best, "os": tables[best], "measured": {f: real[f] for f in FEATURES},
            "measured_repeats": [{f: r[f] for f in FEATURES} for r in repeats],
            "simulated": sims, "error": errors, "candidates": tables, **how,
            "method": f"mean over {', '.join(FEATURES)} of |ln((sim + {FLOOR_US:g} us) / (real + "
                      f"{FLOOR_US:g} us))|; candidates within the tie tolerance of the smallest error (its "
                      f"spread over the {len(repeats)} repeats, one per node CPU) are tied, the first of them "
                      f"in candidate order wins",
            "kernel": measured.get("kernel", {})}


def report_lines(rec: Mapping[str, Any]) -> list[str]:
    """The fit's section of the real-vs-sim report: measured against each candidate's simulated figures."""
    k = rec.get("kernel", {})
    hz = k.get("config_hz")
    src = (f"{k['slice_ns'] / 1e6:g} ms from `{k['slice_source']}`" if k.get("slice_ns") is not None
           else str(k.get("slice_source", "not recorded")))
    tie = ""
    if "tolerance" in rec:
        per = ", ".join(f"{e:.4f}" for e in rec.get("leader_repeat_errors", []))
        tie = (f" Smallest error: {rec['leader']} ({rec['error'][rec['leader']]:.4f}; against each repeat alone "
               f"{per or 'no repeats'}), tie tolerance {rec['tolerance']:.4f}: chosen {rec['chosen']}.")
    lines = [f"Native scheduler fit on time sharing (`cosched-timeshare` on each node CPU; {rec['method']}). "
             f"Kernel {k.get('kernel', '?')}: its slice {src}"
             + (f"; CONFIG_HZ {hz}, HRTICK {'built' if k.get('config_sched_hrtick') else 'not built'}" if hz else "")
             + "." + tie, "",
             "| OS model | os table | slice, 2 spinners p50 (us) | slice, 3 spinners p50 (us) | "
             "held after a wake-up, p50 / mean (us) | error |", "|---|---|---|---|---|---|"]
    m = rec["measured"]
    lines.append(f"| **measured** | | {m['slice2_p50_us']:.0f} | {m['slice3_p50_us']:.0f} | "
                 f"{m['held_p50_us']:.0f} / {m['held_mean_us']:.0f} | |")
    for i, r in enumerate(rec.get("measured_repeats", [])):
        lines.append(f"| measured, repeat {i} | | {r['slice2_p50_us']:.0f} | {r['slice3_p50_us']:.0f} | "
                     f"{r['held_p50_us']:.0f} / {r['held_mean_us']:.0f} | |")
    for label, s in rec["simulated"].items():
        name = f"**{label}** (chosen)" if label == rec["chosen"] else label
        lines.append(f"| {name} | `{json.dumps(rec['candidates'][label], sort_keys=True)}` | "
                     f"{s['slice2_p50_us']:.0f} | {s['slice3_p50_us']:.0f} | "
                     f"{s['held_p50_us']:.0f} / {s['held_mean_us']:.0f} | "
                     f"{rec['error'][label]:.4f} |")
    return lines
