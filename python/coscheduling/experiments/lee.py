"""The seed 003 study (Lee et al., flexible gang scheduling): how applications behave
when quanta are taken away from or given to a gang scheduled job (§4, Fig. 5-9), and
the online gangedness estimator built from message statistics (§5, Table 3, Fig. 10).

Every run gang schedules the measured application (job 0) on the ``lee4`` platform in
its own matrix row against a competing row (a long ``Emp`` background job) with the
``gang-perturb`` scheme; the run time is job 0's time inside its own slots, so a
taken-away quantum counts and a given-away one does not. Changes of run time are in
quanta (500,000 instructions = 0.5 ms on ``lee4``). Paper numbers appear only where the
paper prints them (Table 3, the Fig. 10 ratios derived from it), beside ours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import Experiment, Outcome, Settings, csv_writer, register  # noqa: E402
from .report import NOT_APPLICABLE, Finding, findings_md, md_table, verdict  # noqa: E402
from .runner import Gathered, RunSpec  # noqa: E402

PLATFORM = "lee4"
P = 4
QUANTUM_S = 0.0005  # S003 §4: 500,000 instructions; 1 instruction = 1 ns on lee4
COMPETITOR = "Emp[quanta=100000]"
#: Midpoints between the paper's reference lines (slopes in quanta per perturbation).
HIGH = (1.0 + 1.0 / P) / 2  # between "all time taken" (1) and 1/P
NO_GAIN = -1.0 / (2 * P)  # between zero and -1/P

SYNTHETIC = ["Emp", "Barrier", "Workpile[unit=0.14]", "Workpile[unit=0.6]", "Workpile[unit=2.4]",
             "Workpile[unit=24]", "Msg[pattern=ring]", "Msg[pattern=alltoall]", "Msg[pattern=random]",
             "Msg[pattern=master]"]
REAL = ["lee-Enum", "lee-Water", "lee-LU", "lee-Barnes"]

#: S003 §4.1: the class of each synthetic application.
PAPER_CLASS = {
    "Emp": "embarrassingly parallel", "Barrier": "synchronization intensive",
    "Workpile[unit=0.14]": "self load-balancing", "Workpile[unit=0.6]": "self load-balancing",
    "Workpile[unit=2.4]": "self load-balancing", "Workpile[unit=24]": "embarrassingly parallel",
    "Msg[pattern=ring]": "synchronization intensive", "Msg[pattern=alltoall]": "synchronization intensive",
    "Msg[pattern=random]": "synchronization intensive", "Msg[pattern=master]": "synchronization intensive",
}

#: S003 Table 3: (class) -> (msg avg, msg SD, progress avg, progress SD), progress in instructions.
PAPER_TABLE3 = {
    "lee-Enum": {"gang": (247.73, 47.51, 1483678, 209519), "ngr": (162.29, 60.21, 882735, 307236),
                 "ngn": (242.30, 88.57, 1324103, 459779)},
    "lee-Water": {"gang": (15.41, 19.63, 1127732, 485835), "ngr": (2.54, 3.40, 479135, 387983),
                  "ngn": (1.17, 0.70, 718703, 554749)},
    "lee-LU": {"gang": (2.85, 3.19, 1242051, 397927), "ngr": (1.40, 1.82, 740624, 313568),
               "ngn": (0.89, 0.73, 1110937, 421677)},
    "lee-Barnes": {"gang": (28.44, 56.99, 1436370, 282763), "ngr": (2.53, 3.00, 507318, 300674),
                   "ngn": (1.80, 0.78, 760978, 389349)},
}
CLASS_NAMES = {"gang": "gang-all", "ngr": "non-gang-running", "ngn": "non-gang-non-running"}


def _with(app: str, quanta: int) -> str:
    """``app`` with ``quanta=`` set (the run length in quanta of work per processor)."""
    if app.endswith("]"):
        return f"{app[:-1]},quanta={quanta}]"
    return f"{app}[quanta={quanta}]"


def config(app: str, policy: str, seed: int) -> dict[str, Any]:
    return {
        "fidelity": "process",
        "seed": seed,
        "node_platform": {"preset": PLATFORM},
        "workload": {"jobs": [
            {"app": app, "class": "-", "procs": P, "submit_s": 0},
            {"app": COMPETITOR, "class": "-", "procs": P, "submit_s": 0, "background": True},
        ]},
        "scheduler": {"policy": policy, "node_policy": "nls", "mpl": 2, "placement": "packing",
                      "memory_aware": False},
    }


def policy(kind: str, choice: str, proc: int, count: int, span: int, seed: int) -> str:
    return (f"gang-perturb[kind={kind},choice={choice},proc={proc},count={count},span={span},"
            f"seed={seed}]")


#: An environment: (label, kind, choice, fixed processor).
Env = tuple[str, str, str, int]


def _key(*parts: Any) -> str:
    return "-".join(str(p) for p in parts).replace("[", "_").replace("]", "").replace("=", "").replace(",", "_")


def perturb_specs(prefix: str, apps: Sequence[str], envs: Sequence[Env], counts: Sequence[int], draws: int,
                  quanta: int) -> list[RunSpec]:
    """One unperturbed run per application, then every environment x count x draw."""
    out = []
    for app in apps:
        name = _with(app, quanta)
        out.append(RunSpec(_key(prefix, app, "base"), {"app": app, "env": "none", "count": 0, "draw": 0},
                           config(name, policy("takeaway", "fixed", 1, 0, quanta, 0), 1)))
        for label, kind, choice, proc in envs:
            for n in counts:
                if n == 0:
                    continue
                for d in range(draws):
                    out.append(RunSpec(
                        _key(prefix, app, label, n, f"d{d}"),
                        {"app": app, "env": label, "count": n, "draw": d},
                        config(name, policy(kind, choice, proc, n, quanta, 1000 + d), 1)))
    return out


def deltas(runs: pd.DataFrame) -> pd.DataFrame:
    """Change of run time (own quanta) per application, environment and count, mean over draws."""
    base = runs[runs["env"] == "none"].set_index("app")["measure_perturb_own_s"]
    r = runs[runs["env"] != "none"].copy()
    r["delta_q"] = (r["measure_perturb_own_s"] - r["app"].map(base)) / QUANTUM_S
    r["applied"] = r["measure_perturb_perturbations"]
    return r.groupby(["app", "env", "count"], sort=False).agg(
        delta_q=("delta_q", "mean"), applied=("applied", "mean"), draws=("draw", "count")).reset_index()


def slopes(d: pd.DataFrame) -> pd.DataFrame:
    """Least-squares slope through the origin of change of run time vs perturbations applied."""
    rows = []
    for (app, env), g in d.groupby(["app", "env"], sort=False):
        sxx = float((g["applied"] ** 2).sum())
        s = float((g["applied"] * g["delta_q"]).sum()) / sxx if sxx else float("nan")
        rows.append({"app": app, "env": env, "slope": s})
    return pd.DataFrame(rows)


def _slope(s: pd.DataFrame, app: str, env: str) -> float:
    sub = s[(s["app"] == app) & (s["env"] == env)]
    return float(sub["slope"].iloc[0]) if len(sub) else float("nan")


def classify(take_fx: float, take_rr: float, give_rr: float) -> str:
    """S003 §4.1's three classes from the curves' slopes (quanta per perturbation):
    synchronization intensive if round-robin takeaway costs more than the midpoint between
    all the time taken and 1/P of it and round-robin giveaway gains less than the midpoint
    between zero and 1/P; else embarrassingly parallel if fixed-processor takeaway costs more
    than that midpoint; else self load-balancing."""
    if any(math.isnan(x) for x in (take_fx, take_rr, give_rr)):
        return "unknown"
    if take_rr > HIGH and give_rr > NO_GAIN:
        return "synchronization intensive"
    if take_fx > HIGH:
        return "embarrassingly parallel"
    return "self load-balancing"


def plot_curves(d: pd.DataFrame, apps: Sequence[str], path: Path, title: str) -> None:
    """One panel per application: change of run time vs perturbations, with the four
    reference lines of S003 Fig. 5 (all time taken, 1/P of it, zero, -1/P of time given)."""
    n = len(apps)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
    xmax = max(1.0, float(d["applied"].max()) if len(d) else 1.0)
    for k, app in enumerate(apps):
        ax = axes[k // cols][k % cols]
        xs = [0.0, xmax]
        for slope, style in ((1.0, ":"), (1.0 / P, ":"), (0.0, ":"), (-1.0 / P, ":")):
            ax.plot(xs, [0.0, slope * xmax], style, color="grey", lw=0.8)
        for env, g in d[d["app"] == app].groupby("env", sort=False):
            g = g.sort_values("applied")
            ax.plot([0.0, *g["applied"]], [0.0, *g["delta_q"]], marker="o", ms=3, lw=1.2, label=str(env))
        ax.set_title(app, fontsize=8)
        ax.set_xlabel("perturbations", fontsize=7)
        ax.set_ylabel("change of run time (quanta)", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if k == 0:
            ax.legend(fontsize=6)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


# ----- Figure 5: synthetic applications ------------------------------------------------------

SYN_ENVS: list[Env] = [("SubFX", "takeaway", "fixed", 1), ("SubRR", "takeaway", "rr", 0),
                       ("AddFX", "giveaway", "fixed", 1), ("AddRR", "giveaway", "rr", 0)]


def fig5_runs(st: Settings) -> list[RunSpec]:
    if st.quick:
        apps = ["Emp", "Barrier", "Workpile[unit=0.14]", "Msg[pattern=ring]"]
        return perturb_specs("fig5", apps, SYN_ENVS, [8], 1, 60)
    return perturb_specs("fig5", SYNTHETIC, SYN_ENVS, [4, 8, 12, 16, 20], st.seeds, 200)


def fig5_findings(s: pd.DataFrame, apps: Sequence[str]) -> tuple[list[Finding], pd.DataFrame]:
    table = []
    for app in apps:
        sl = {e[0]: _slope(s, app, e[0]) for e in SYN_ENVS}
        cls = classify(sl["SubFX"], sl["SubRR"], sl["AddRR"])
        table.append({"app": app, **sl, "class (ours)": cls, "class (paper)": PAPER_CLASS.get(app, "—")})
    t = pd.DataFrame(table)
    f: list[Finding] = []
    for cls in ("synchronization intensive", "embarrassingly parallel", "self load-balancing"):
        members = [a for a in apps if PAPER_CLASS.get(a) == cls]
        if not members:
            continue
        got = [a for a in members if t.loc[t["app"] == a, "class (ours)"].iloc[0] == cls]
        wrong = {a: t.loc[t["app"] == a, "class (ours)"].iloc[0] for a in members if a not in got}
        why = ""
        if wrong:
            why = "; ".join(f"{a} is {c} in the model (slopes " + ", ".join(
                f"{e[0]} {_slope(s, a, e[0]):+.2f}" for e in SYN_ENVS) + ")" for a, c in wrong.items())
            if any(a.startswith("Workpile") and not a.endswith("=24]") for a in wrong):
                why += (". The model's Workpile has a dedicated master (rank 0) that must be scheduled to "
                        "hand out work: while it is not, the workers block on their requests, so given-away "
                        "quanta on a worker are lost and a taken-away master quantum stalls every worker")
            if "Workpile[unit=24]" in wrong:
                why += (". With units of 24 quanta (25 units for 3 workers in a 200-quantum run) the end of the "
                        "run is set by the worker holding the last unit: fixed-processor perturbations on "
                        "processor 1 change the run time by whether that worker is on the critical path (SubFX "
                        f"{_slope(s, 'Workpile[unit=24]', 'SubFX'):+.2f}, AddFX "
                        f"{_slope(s, 'Workpile[unit=24]', 'AddFX'):+.2f}), so the fixed-processor slopes do not "
                        "show the load imbalance the rule looks for")
        f.append(Finding(
            f"{', '.join(members)}: {cls} (S003 §4.1)",
            "classify by the slopes (quanta per perturbation): synchronization intensive if SubRR > "
            f"{HIGH:.3f} and AddRR > {NO_GAIN:.3f}; else embarrassingly parallel if SubFX > {HIGH:.3f}; "
            "else self load-balancing. Reproduced if every member gets the paper's class; partly if most do",
            f"{len(got)}/{len(members)} classified {cls}",
            verdict(len(got) == len(members), 2 * len(got) > len(members)),
            why,
        ))
    sync = [a for a in apps if PAPER_CLASS.get(a) == "synchronization intensive"]
    if sync:
        gains = [min(_slope(s, a, "AddFX"), _slope(s, a, "AddRR")) for a in sync]
        ok = all(g > NO_GAIN for g in gains)
        f.append(Finding(
            "synchronization intensive applications get no benefit at all from given-away quanta (S003 §4.1 i)",
            f"reproduced if every giveaway slope of {', '.join(sync)} is above {NO_GAIN:.3f} (closer to zero "
            "than to -1/P)",
            "giveaway slopes " + ", ".join(f"{a} {g:+.2f}" for a, g in zip(sync, gains, strict=True)),
            verdict(ok),
        ))
    slb = [a for a in apps if PAPER_CLASS.get(a) == "self load-balancing"]
    if slb:
        gv = [(_slope(s, a, "AddFX"), _slope(s, a, "AddRR")) for a in slb]
        ok = all(fx < NO_GAIN and rr < NO_GAIN for fx, rr in gv)
        f.append(Finding(
            "self load-balancing applications improve by 1/P quantum per quantum given away, fixed or round "
            "robin (S003 §4.1 iii)",
            f"reproduced if AddFX and AddRR are below {NO_GAIN:.3f} (closer to -1/P than to zero) for every "
            "member; partly if AddRR is",
            ", ".join(f"{a} AddFX {fx:+.2f} AddRR {rr:+.2f}" for a, (fx, rr) in zip(slb, gv, strict=True)),
            verdict(ok, all(rr < NO_GAIN for _, rr in gv)),
            "" if ok else "the model's Workpile has a dedicated master (rank 0, the IR has no message "
            "handlers): a worker given a quantum while the master is descheduled blocks on its next work "
            "request, so at most the unit in progress is gained",
        ))
    ep = [a for a in apps if PAPER_CLASS.get(a) == "embarrassingly parallel"]
    if ep:
        vals = [(_slope(s, a, "SubRR"), _slope(s, a, "AddRR")) for a in ep]
        ok = all(abs(t_ - 1 / P) < 1 / (2 * P) and abs(g + 1 / P) < 1 / (2 * P) for t_, g in vals)
        f.append(Finding(
            "embarrassingly parallel applications lose 1/P quantum per round-robin takeaway and gain 1/P per "
            "round-robin giveaway (S003 §4.1 ii)",
            f"reproduced if SubRR is within 1/(2P) of {1 / P:.2f} and AddRR within 1/(2P) of {-1 / P:.2f}",
            ", ".join(f"{a} SubRR {t_:+.2f} AddRR {g:+.2f}" for a, (t_, g) in zip(ep, vals, strict=True)),
            verdict(ok),
        ))
    return f, t


def fig5_analyze(g: Gathered, st: Settings) -> Outcome:
    d = deltas(g.runs)
    s = slopes(d)
    apps = list(dict.fromkeys(g.runs["app"]))
    findings, t = fig5_findings(s, apps)
    files = {"fig5_curves.csv": csv_writer(d), "fig5_slopes.csv": csv_writer(t)}
    files["fig5.png"] = lambda p: plot_curves(d, apps, p, "S003 Fig. 5: takeaway/giveaway, synthetic apps")
    report = [
        f"Synthetic applications of S003 Table 1 on `{PLATFORM}` (P = {P}), gang scheduled against a competing "
        "row; perturbations in batches of four, three quanta apart, at seeded random times. Fixed-processor "
        "environments perturb processor 1. Change of run time in quanta (job 0's time in its own slots, minus "
        "the unperturbed run's).",
        "",
        "![fig5](fig5.png)",
        "",
        "Slopes (change of run time per perturbation, quanta; reference lines 1, 1/P = 0.25, 0, -1/P = -0.25) "
        "and the class the rule gives:",
        "",
        md_table(t, 2),
        "",
        "## Findings",
        "",
        findings_md(findings),
    ]
    return Outcome("\n".join(report), files)


register(Experiment(
    "lee-fig5", "Takeaway/giveaway characteristic plots of the synthetic applications", "seed 003 Figure 5",
    fig5_runs, fig5_analyze,
))


# ----- Figures 6-9: real-application profiles -------------------------------------------------

REAL_ENVS: list[Env] = [("SubFX-p0", "takeaway", "fixed", 0), ("SubFX-p1", "takeaway", "fixed", 1),
                        ("SubFX-p3", "takeaway", "fixed", 3), ("SubRR", "takeaway", "rr", 0),
                        ("AddFX-p1", "giveaway", "fixed", 1), ("AddRR", "giveaway", "rr", 0)]


def fig69_runs(st: Settings) -> list[RunSpec]:
    if st.quick:
        return perturb_specs("fig69", REAL, REAL_ENVS, [8], 1, 60)
    # S003 §4.2: "each data point by taking the average result from 20 runs"; 5 draws per seed here.
    return perturb_specs("fig69", REAL, REAL_ENVS, [4, 8, 12, 16, 20], 5 * st.seeds, 200)


#: S003 Table 2: messages per process per quantum (blocking for Water, LU, Barnes); used in explanations only.
TABLE2_RATE = {"lee-Enum": 254, "lee-Water": 12, "lee-LU": 3, "lee-Barnes": 28}


def _blocking_why(app: str, slopes_: dict[str, float]) -> str:
    return (f"in the model {app[4:]}'s ranks exchange {TABLE2_RATE[app]} blocking request/replies per quantum, "
            "so a rank whose processor is taken away stops answering and the others wait for it within a "
            "fraction of the quantum (slopes " + ", ".join(f"{k} {v:+.2f}" for k, v in slopes_.items())
            + "); the profiles' load imbalance (assumption G-S003-2) is too small to hide that wait")


def fig69_findings(s: pd.DataFrame) -> list[Finding]:
    def sl(app: str, env: str) -> float:
        return _slope(s, app, env)

    f: list[Finding] = []
    e = "lee-Enum"
    cls = classify(sl(e, "SubFX-p1"), sl(e, "SubRR"), sl(e, "AddRR"))
    f.append(Finding(
        "Enum's plot resembles an embarrassingly parallel application's (S003 §4.2)",
        "the Fig. 5 rule (SubFX from processor 1) gives embarrassingly parallel",
        f"{cls} (SubFX-p1 {sl(e, 'SubFX-p1'):+.2f}, SubRR {sl(e, 'SubRR'):+.2f}, AddRR {sl(e, 'AddRR'):+.2f})",
        verdict(cls == "embarrassingly parallel"),
    ))
    p3, p01 = sl(e, "SubFX-p3"), max(sl(e, "SubFX-p0"), sl(e, "SubFX-p1"))
    f.append(Finding(
        "Enum: taking time away from processor 3 (its bottleneck) slows it more than from processors 0 or 1 "
        "(S003 §4.2)",
        "reproduced if SubFX-p3 > max(SubFX-p0, SubFX-p1)",
        f"p3 {p3:+.2f}, max(p0, p1) {p01:+.2f}", verdict(p3 > p01)))
    bott = {"lee-Water": "p3", "lee-LU": "p3", "lee-Barnes": "p0"}
    for app, b in bott.items():
        others = [x for x in ("p0", "p1", "p3") if x != b]
        vb = sl(app, f"SubFX-{b}")
        vo = [sl(app, f"SubFX-{x}") for x in others]
        f.append(Finding(
            f"{app[4:]}: takeaway from the bottleneck processor {b[1]} costs close to 100% of the time taken, "
            "more than from the other processors (S003 §4.2)",
            f"reproduced if SubFX-{b} > {HIGH:.3f} and exceeds SubFX of {', '.join(others)}; partly if it only "
            "exceeds them",
            f"{b} {vb:+.2f}; " + ", ".join(f"{x} {v:+.2f}" for x, v in zip(others, vo, strict=True)),
            verdict(vb > HIGH and vb > max(vo), vb > max(vo)),
            "" if vb > max(vo) else _blocking_why(app, {f"SubFX-{x}": sl(app, f"SubFX-{x}")
                                                         for x in ("p0", "p1", "p3")}),
        ))
    lu0, lu1 = sl("lee-LU", "SubFX-p0"), sl("lee-LU", "SubFX-p1")
    f.append(Finding(
        "LU: processor 0 takeaway slows it slightly more than processor 1 (S003 §4.2)",
        "reproduced if SubFX-p0 > SubFX-p1", f"p0 {lu0:+.2f}, p1 {lu1:+.2f}", verdict(lu0 > lu1)))
    crl = ["lee-Water", "lee-LU", "lee-Barnes"]
    rr = [sl(a, "SubRR") for a in crl]
    f.append(Finding(
        "Water, LU, Barnes: round-robin takeaway degrades them by about 50% of the time taken (S003 §4.2; "
        "'50-60%', §4.3)",
        "reproduced if every SubRR slope is within 0.35-0.75; partly if all lie between 1/P and 1",
        ", ".join(f"{a[4:]} {v:+.2f}" for a, v in zip(crl, rr, strict=True)),
        verdict(all(0.35 <= v <= 0.75 for v in rr), all(1 / P <= v <= 1 for v in rr)),
        "" if all(0.35 <= v <= 0.75 for v in rr) else "; ".join(
            _blocking_why(a, {"SubRR": v}) for a, v in zip(crl, rr, strict=True) if v > 0.75),
    ))
    g1 = [sl(a, "AddFX-p1") for a in crl]
    f.append(Finding(
        "fixed giveaway to processor 1 fails to improve Water, LU and Barnes (S003 §4.2)",
        f"reproduced if every AddFX-p1 slope is above {NO_GAIN:.3f}",
        ", ".join(f"{a[4:]} {v:+.2f}" for a, v in zip(crl, g1, strict=True)),
        verdict(all(v > NO_GAIN for v in g1)),
    ))
    grr = {a: sl(a, "AddRR") for a in crl}
    ok = grr["lee-Water"] < NO_GAIN and grr["lee-LU"] < NO_GAIN and grr["lee-Barnes"] > NO_GAIN
    f.append(Finding(
        "round-robin giveaway improves Water and LU but not Barnes (high rate of blocking requests) (S003 §4.2)",
        f"reproduced if AddRR < {NO_GAIN:.3f} for Water and LU and > {NO_GAIN:.3f} for Barnes; partly if "
        "Barnes gains least of the three",
        ", ".join(f"{a[4:]} {v:+.2f}" for a, v in grr.items()),
        verdict(ok, grr["lee-Barnes"] >= max(grr["lee-Water"], grr["lee-LU"])),
        "" if ok else "in the model a given-away quantum helps only until the rank needs a reply from a "
        "descheduled rank: with " + ", ".join(f"{a[4:]} {TABLE2_RATE[a]}" for a in crl)
        + " blocking requests per quantum that comes within a fraction of the quantum",
    ))
    return f


def fig69_analyze(g: Gathered, st: Settings) -> Outcome:
    d = deltas(g.runs)
    s = slopes(d)
    findings = fig69_findings(s)
    wide = s.pivot(index="app", columns="env", values="slope").reindex(REAL).reset_index()
    wide = wide[["app", *[e[0] for e in REAL_ENVS if e[0] in wide.columns]]]
    files = {"fig6_9_curves.csv": csv_writer(d), "fig6_9_slopes.csv": csv_writer(wide)}
    files["fig6_9.png"] = lambda p: plot_curves(d, REAL, p, "S003 Fig. 6-9: Enum, Water, LU, Barnes")
    report = [
        f"Real-application profiles of S003 Table 2 on `{PLATFORM}`; fixed-processor takeaway from processors 0, "
        "1 and 3, fixed giveaway to processor 1, round robin both ways (S003 §4.2). Each point is the mean over "
        "draws of the perturbation times.",
        "",
        "![fig6_9](fig6_9.png)",
        "",
        "Slopes (change of run time per perturbation, quanta):",
        "",
        md_table(wide, 2),
        "",
        "## Findings",
        "",
        findings_md(findings),
    ]
    return Outcome("\n".join(report), files)


register(Experiment(
    "lee-fig6-9", "Takeaway/giveaway plots of Enum, Water, LU and Barnes", "seed 003 Figures 6-9",
    fig69_runs, fig69_analyze,
))


# ----- Table 3 and Figure 10: the gangedness estimator ---------------------------------------


def table3_runs(st: Settings) -> list[RunSpec]:
    # S003 §5.2: the fixed-processor takeaway environment, run five times.
    quanta, count, reps = (60, 12, 1) if st.quick else (200, 20, 5 * st.seeds)
    out = []
    for app in REAL:
        for d in range(reps):
            out.append(RunSpec(_key("table3", app, f"d{d}"), {"app": app, "draw": d},
                               config(_with(app, quanta), policy("takeaway", "fixed", 1, count, quanta, 2000 + d),
                                      1)))
    return out


def pooled(runs: pd.DataFrame) -> pd.DataFrame:
    """Per application and class: record count, pooled mean and SD of messages and of progress
    (instructions = ns of useful CPU on ``lee4``) over the runs."""
    rows = []
    for app, g in runs.groupby("app", sort=False):
        for c in ("gang", "ngr", "ngn"):
            n = g[f"measure_perturb_{c}_n"].astype(float)
            N = float(n.sum())
            row: dict[str, Any] = {"app": app, "class": CLASS_NAMES[c], "n": int(N)}
            for what, scale in (("msg", 1.0), ("prog", 1e9)):
                mcol = f"measure_perturb_{c}_{what}_mean" + ("_s" if what == "prog" else "")
                scol = f"measure_perturb_{c}_{what}_sd" + ("_s" if what == "prog" else "")
                m = g[mcol].astype(float).fillna(0.0) * scale
                sd = g[scol].astype(float).fillna(0.0) * scale
                if N:
                    mean = float((n * m).sum()) / N
                    var = float((n * (sd ** 2 + m ** 2)).sum()) / N - mean ** 2
                    row[f"{what}_avg"], row[f"{what}_sd"] = mean, math.sqrt(max(var, 0.0))
                else:
                    row[f"{what}_avg"] = row[f"{what}_sd"] = float("nan")
            paper = PAPER_TABLE3.get(str(app), {}).get(c)
            row["paper_msg_avg"] = paper[0] if paper else float("nan")
            row["paper_prog_avg"] = paper[2] if paper else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def ratios(t: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for app, g in t.groupby("app", sort=False):
        v = g.set_index("class")["msg_avg"]
        ours = float(v["non-gang-non-running"] / v["gang-all"]) if v["gang-all"] > 0 else float("nan")
        p = PAPER_TABLE3.get(str(app))
        paper = p["ngn"][0] / p["gang"][0] if p else float("nan")
        rows.append({"app": app, "ratio": ours, "paper_ratio": paper})
    return pd.DataFrame(rows)


def table3_findings(t: pd.DataFrame, r: pd.DataFrame) -> list[Finding]:
    f: list[Finding] = []
    val = {(a, c): row for (a, c), row in t.set_index(["app", "class"]).iterrows()}

    def get(app: str, c: str, col: str) -> float:
        row = val.get((app, c))
        return float(row[col]) if row is not None else float("nan")

    e = "lee-Enum"
    g, ngn = get(e, "gang-all", "msg_avg"), get(e, "non-gang-non-running", "msg_avg")
    if g == g and ngn == ngn:
        f.append(Finding(
            "Enum (non-blocking messages) sustains its message volume in non-gang quanta (S003 §5.2: 247.73 "
            "gang-all vs 242.30 non-gang-non-running)",
            "reproduced if Enum's non-gang-non-running message average is at least half its gang-all average",
            f"gang-all {g:.1f}, non-gang-non-running {ngn:.1f}", verdict(ngn >= 0.5 * g),
            "" if ngn >= 0.5 * g else _enum_why(t)))
        pg, pn = get(e, "gang-all", "prog_avg"), get(e, "non-gang-non-running", "prog_avg")
        f.append(Finding(
            "Enum's sender progress in non-gang-non-running quanta is close to gang-all (S003 §5.2: 1483678 vs "
            "1324103)",
            "reproduced if within 15% of gang-all; partly if within 30%",
            f"gang-all {pg:,.0f}, non-gang-non-running {pn:,.0f} ({100 * (pn - pg) / pg:+.0f}%)",
            verdict(abs(pn - pg) <= 0.15 * pg, abs(pn - pg) <= 0.3 * pg),
            "" if abs(pn - pg) <= 0.3 * pg else _enum_why(t)))
    blocking = ["lee-Water", "lee-LU", "lee-Barnes"]
    lows = [(a, get(a, "non-gang-non-running", "msg_avg"), get(a, "gang-all", "msg_avg")) for a in blocking]
    f.append(Finding(
        "Water, LU and Barnes (blocking messages) receive few messages in non-gang quanta (S003 §5.2)",
        "reproduced if each one's non-gang-non-running message average is below half its gang-all average",
        ", ".join(f"{a[4:]} {n:.1f} vs {g_:.1f}" for a, n, g_ in lows),
        verdict(all(n < 0.5 * g_ for _, n, g_ in lows))))
    rr = r.set_index("app")["ratio"]
    if r["ratio"].notna().all() and len(r) == len(REAL):
        ours = list(rr.sort_values(ascending=False).index)
        paper = list(r.set_index("app")["paper_ratio"].sort_values(ascending=False).index)
        f.append(Finding(
            "ordering the applications by message ratio (non-gang / gang) reverse-orders them by gangedness: "
            "Enum, LU, Water, Barnes (S003 Fig. 10)",
            "reproduced if our ratio ordering equals the paper's; partly if Enum and LU are the two highest",
            "ours: " + " > ".join(f"{a[4:]} {rr[a]:.3f}" for a in ours),
            verdict(ours == paper, set(ours[:2]) == {"lee-Enum", "lee-LU"})))
        low = min(rr["lee-Enum"], rr["lee-LU"])
        high = max(rr["lee-Water"], rr["lee-Barnes"])
        f.append(Finding(
            "the ratios of the low-gangedness applications (Enum, LU) are at least five times those of the "
            "high-gangedness ones (Water, Barnes) (S003 §5.2)",
            "reproduced if min(Enum, LU) >= 4 x max(Water, Barnes) (the paper's own Table 3 averages give "
            "0.312 / 0.076 = 4.1 for this pair, its text 'at least a factor of five'); partly if greater",
            f"min(Enum, LU) {low:.3f}, max(Water, Barnes) {high:.3f}",
            verdict(low >= 4 * high, low > high),
            "" if low >= 4 * high else _enum_why(t),
        ))
    else:
        f.append(Finding("message ratio ordering (S003 Fig. 10)", "", "a ratio is missing", NOT_APPLICABLE))
    return f


def _enum_why(t: pd.DataFrame) -> str:
    row = t[(t["app"] == "lee-Enum")].set_index("class")
    if "gang-all" not in row.index or "non-gang-non-running" not in row.index:
        return "Enum's statistics are missing"
    pg, pn = float(row.loc["gang-all", "prog_avg"]), float(row.loc["non-gang-non-running", "prog_avg"])
    return (f"the model's Enum senders make {100 * pn / pg:.0f}% of their gang progress while a partner is "
            "descheduled: the profile lets a process run only ENUM_LAG = 254 steps (one quantum of messages, "
            "assumption G-S003-2) ahead of the partner whose messages it consumes, so a whole taken-away quantum "
            "exhausts the slack and the senders stall, where the paper's Enum senders kept running (Table 3)")


def plot_ratios(t: pd.DataFrame, r: pd.DataFrame, path: Path) -> None:
    """S003 Fig. 10: messages per quantum per processor in gang (G) and non-gang (NG) quanta,
    mean with +-1 SD bars, the ratio NG / G under each application."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ticks, xs = [], []
    x = 0.0
    for app in REAL:
        for c, lab in (("gang-all", "G"), ("non-gang-non-running", "NG")):
            row = t[(t["app"] == app) & (t["class"] == c)]
            if not len(row):
                continue
            m, sd = float(row["msg_avg"].iloc[0]), float(row["msg_sd"].iloc[0])
            ax.bar([x], [m], width=0.8, color="#3182bd" if lab == "G" else "#fdae6b")
            ax.errorbar([x], [m], yerr=[[min(sd, m)], [sd]], fmt="none", ecolor="k", capsize=3, lw=1)
            ratio = r.loc[r["app"] == app, "ratio"]
            ticks.append(f"{lab}\n{app[4:]}" + (f"\n({float(ratio.iloc[0]):.3f})" if lab == "G" else ""))
            xs.append(x)
            x += 1.0
        x += 0.6
    ax.set_xticks(xs, ticks, fontsize=7)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylabel("messages per quantum per processor")
    ax.set_title("S003 Fig. 10: messages in gang (G) and non-gang (NG) quanta", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


def table3_analyze(g: Gathered, st: Settings) -> Outcome:
    t = pooled(g.runs)
    r = ratios(t)
    findings = table3_findings(t, r)
    files = {"table3.csv": csv_writer(t), "fig10_ratios.csv": csv_writer(r),
             "fig10.png": lambda p: plot_ratios(t, r, p)}
    report = [
        f"Real-application profiles on `{PLATFORM}` in the fixed-processor takeaway environment (processor 1), "
        f"{len(g.runs) // len(REAL)} run(s) each (S003 §5.2). For every processor and quantum in which the "
        "application runs: messages received, and the progress (useful instructions = ns on lee4) of the other "
        "processors; classes gang-all, non-gang-running, non-gang-non-running. Paper values (Table 3) beside ours.",
        "",
        md_table(t[["app", "class", "n", "msg_avg", "msg_sd", "paper_msg_avg", "prog_avg", "prog_sd",
                    "paper_prog_avg"]], 2),
        "",
        "Message ratio non-gang-non-running / gang-all (the online gangedness measure; high = low gangedness):",
        "",
        md_table(r, 3),
        "",
        "![fig10](fig10.png)",
        "",
        "## Findings",
        "",
        findings_md(findings),
    ]
    return Outcome("\n".join(report), files)


register(Experiment(
    "lee-table3", "Message and progress statistics in gang and non-gang quanta; the gangedness ratio",
    "seed 003 Table 3, Figure 10", table3_runs, table3_analyze,
))
