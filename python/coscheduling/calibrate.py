"""Fitting the job-level interference model from process-level runs (``cosched calibrate``).

For every node-level scheme and communication-intensity class (seed 000 Table 1's classes, each
stood for by one application), ``k = 1, 2, 3`` identical 16-process copies are started together on
the 16 ``choi2004`` nodes (MPL 3) and ``e_k = k x T_1 / T_k`` is measured (``T_k``: mean execution
time of the copies). The table is then validated on a held-out job mix: the mix runs at process
level, and at job level with each job's dedicated run time and its application's class; the
relative error of the mean execution time is the scheme's ``fit_error``.

Output: the table file (docs/formats/interference.md), read by ``timeshare[...]`` job-level runs.

Cached runs under the work folder are reused only when their results came from this very build (version, git
commit and the compiled core's SHA-256 in their provenance); others are run again. ``cosched calibrate --check``
refits with the settings of the committed table and reports every value that differs (a stale table after an
engine change). ``--check --quick`` compares a quick fit with a table made by ``--quick`` (``--against FILE``);
a check whose fit settings are not those of the table (its ``method``), such as ``--quick`` against the
committed full table, is refused before any run: it could only report every value as stale.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from . import _core
from .experiments.runner import RunSpec, run_specs
from .output import git_commit, write_atomic

#: Application standing for each intensity class (seed 000 Table 1).
REPRESENTATIVES = {"very-low": "EP", "low": "LU", "medium": "MG", "high": "CG"}
_TABLE1_CLASS = {"Very low": "very-low", "Low": "low", "Medium": "medium", "High": "high"}
PLATFORM = "choi2004"
NODES = 16
MPL = 3


@dataclass(frozen=True)
class Settings:
    schemes: tuple[str, ...]
    problem_class: str = "B"
    mix_jobs: int = 16
    mix_classes: str = "AB"
    mix_interarrival_s: float = 30.0
    mix_seed: int = 7


def _config(jobs: list[dict[str, Any]], scheme: str, memory_aware: bool) -> dict[str, Any]:
    return {"fidelity": "process", "seed": 1, "node_platform": {"preset": PLATFORM}, "workload": {"jobs": jobs},
            "scheduler": {"policy": "fcfs", "node_policy": scheme, "mpl": MPL, "placement": "packing",
                          "memory_aware": memory_aware}}


def _classes_of_apps() -> dict[str, str]:
    return {a["name"]: _TABLE1_CLASS.get(a.get("intensity") or "", "medium") for a in json.loads(_core.apps())}


def _mix(st: Settings) -> list[dict[str, Any]]:
    apps = ["CG", "IS", "SP", "MG", "BT", "LU", "EP"]
    return json.loads(_core.nas_mix(st.mix_jobs, apps, st.mix_classes, st.mix_interarrival_s, 900.0, st.mix_seed))


def specs(st: Settings) -> list[RunSpec]:
    out = []
    for scheme in st.schemes:
        for cls, app in REPRESENTATIVES.items():
            for k in range(1, MPL + 1):
                jobs = [{"app": app, "class": st.problem_class, "procs": NODES, "submit_s": 0.0}] * k
                out.append(RunSpec(f"fit-{scheme}-{cls}-k{k}", {"part": "fit", "scheme": scheme, "intensity": cls,
                                                                 "k": k}, _config(jobs, scheme, False)))
        out.append(RunSpec(f"mix-{scheme}", {"part": "mix", "scheme": scheme}, _config(_mix(st), scheme, True)))
    # Dedicated runs of every distinct job of the mix (the job-level model's run times), per scheme.
    seen = set()
    for j in _mix(st):
        key = (j["app"], j["class"], j["procs"])
        if key in seen:
            continue
        seen.add(key)
        for scheme in st.schemes:
            one = [{**j, "submit_s": 0.0}]
            out.append(RunSpec(f"ded-{scheme}-{j['app']}-{j['class']}-{j['procs']}",
                               {"part": "dedicated", "scheme": scheme, "app": j["app"], "class": j["class"],
                                "size": j["procs"]}, _config(one, scheme, False)))
    return out


def fit(root: Path, st: Settings, *, workers: int, progress: Callable[[str, int], Any] | None = None,
        advance: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Runs (or reuses, under ``root/runs``) the calibration runs and returns the table document."""
    all_specs = specs(st)
    g = run_specs(all_specs, root, workers=workers, command="cosched calibrate", progress=progress, advance=advance)
    runs = g.runs
    efficiency: dict[str, dict[str, list[float]]] = {}
    for scheme in st.schemes:
        efficiency[scheme] = {}
        for cls in REPRESENTATIVES:
            t = {int(r["k"]): float(r["mean_execution_s"]) for _, r in runs[(runs["part"] == "fit") & (
                runs["scheme"] == scheme) & (runs["intensity"] == cls)].iterrows()}
            efficiency[scheme][cls] = [round(min(float(k), k * t[1] / t[k]), 6) for k in range(1, MPL + 1)]
    fit_error = {scheme: round(_validate(runs, g.jobs, st, scheme, efficiency[scheme]), 6) for scheme in st.schemes}
    return {
        "format_version": 1,
        "platform": PLATFORM,
        "method": method(st),
        "representatives": dict(REPRESENTATIVES),
        "efficiency": efficiency,
        "fit_error": fit_error,
        "provenance": {"version": _core.__version__, "git_commit": git_commit()},
    }


def method(st: Settings) -> str:
    """The table's ``method`` text: what a fit with the settings ``st`` runs (the copies' class, the mix)."""
    return (f"k = 1..{MPL} identical {NODES}-process class {st.problem_class} copies started together, "
            f"MPL {MPL}, PACKING; e_k = k T_1 / T_k (capped at k). Validation: {st.mix_jobs} jobs of the "
            f"seed 000 mix (classes {st.mix_classes}, mean inter-arrival {st.mix_interarrival_s:g} s, "
            f"seed {st.mix_seed}), memory-aware, relative error of the mean execution time.")


def check_settings(st: Settings, committed: dict[str, Any], ref: Path, *, quick: bool) -> None:
    """Refuses a ``--check`` whose fit could never match the table ``ref``: a table is reproduced only by a fit
    with the settings it was made with (its ``method``), so a quick fit (class A copies, a smaller class A mix)
    against the committed full table, or a full fit against a ``--quick`` table, would differ in every value."""
    if committed.get("method") == method(st):
        return
    for name, other in (("--quick", QUICK), ("the full settings", FULL)):
        if committed.get("method") == method(Settings(schemes=st.schemes, **other)):
            made = name
            break
    else:
        made = "other settings"
    mode = "--quick" if quick else "the full settings (no --quick)"
    hint = ("check the committed table without --quick (the full fit), or give --against a table written by "
            "`cosched calibrate --quick`") if quick else "check it with --quick" if made == "--quick" else \
        "give --against a table written by this cosched's `cosched calibrate`"
    raise ValueError(f"--check: {ref} was fitted with {made}, this fit would use {mode}: its values could never "
                     f"match (method {committed.get('method')!r}); {hint}")


def _validate(runs: pd.DataFrame, jobs: pd.DataFrame, st: Settings, scheme: str, eff: dict[str, list[float]]) -> float:
    mix = _mix(st)
    classes = _classes_of_apps()
    order = list(REPRESENTATIVES)
    ded = runs[(runs["part"] == "dedicated") & (runs["scheme"] == scheme)]
    runtime = {(r["app"], r["class"], int(r["size"])): float(r["mean_execution_s"]) for _, r in ded.iterrows()}
    mix_sorted = sorted(mix, key=lambda j: j["submit_s"])
    res = _core.run_timeshare_jobs(
        [j["submit_s"] for j in mix_sorted], [runtime[(j["app"], j["class"], j["procs"])] for j in mix_sorted],
        [j["procs"] for j in mix_sorted], [order.index(classes[j["app"]]) for j in mix_sorted],
        [eff[c] for c in order], nodes=NODES, mpl=MPL)
    predicted = json.loads(res.summary_json())["mean_execution_s"]
    measured = float(runs[(runs["part"] == "mix") & (runs["scheme"] == scheme)]["mean_execution_s"].iloc[0])
    return abs(predicted - measured) / measured


#: Settings of the committed table (crates/cosched-model/src/interference.json) and of ``--quick``.
FULL = {"problem_class": "B", "mix_jobs": 16, "mix_classes": "AB", "mix_interarrival_s": 30.0}
QUICK = {"problem_class": "A", "mix_jobs": 8, "mix_classes": "A", "mix_interarrival_s": 5.0}


def committed_table() -> Path:
    """The committed table of the source checkout (what ``timeshare[...]`` reads by default)."""
    here = Path(__file__).resolve().parents[2] / "crates" / "cosched-model" / "src" / "interference.json"
    if not here.is_file():
        raise ValueError(f"{here}: not found; --check needs the source checkout (or --against FILE)")
    return here


def differences(fitted: dict[str, Any], committed: dict[str, Any], tol: float = 1e-6) -> list[str]:
    """What differs between a fitted table and a committed one (method, every e_k, every fit error)."""
    out = []
    if fitted.get("method") != committed.get("method"):
        out.append(f"method: {committed.get('method')!r} -> {fitted.get('method')!r}")
    for scheme in sorted(set(fitted["efficiency"]) | set(committed.get("efficiency", {}))):
        a = fitted["efficiency"].get(scheme, {})
        b = committed.get("efficiency", {}).get(scheme, {})
        for cls in sorted(set(a) | set(b)):
            va, vb = a.get(cls), b.get(cls)
            if va is None or vb is None or len(va) != len(vb) or any(abs(x - y) > tol for x, y in zip(va, vb,
                                                                                                         strict=True)):
                out.append(f"efficiency.{scheme}.{cls}: {vb} -> {va}")
        fa, fb = fitted["fit_error"].get(scheme), committed.get("fit_error", {}).get(scheme)
        if fa is None or fb is None or abs(fa - fb) > tol:
            out.append(f"fit_error.{scheme}: {fb} -> {fa}")
    return out


def registered_node_schemes() -> list[str]:
    return [p["name"] for p in json.loads(_core.policies()) if p["level"] == "node"]


def write_table(doc: dict[str, Any], out: Path) -> Path:
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    return write_atomic(out.parent, {out.name: lambda p: p.write_text(text, encoding="utf-8")})[0]


def table_frame(doc: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for scheme, by_class in doc["efficiency"].items():
        for cls, v in by_class.items():
            rows.append({"scheme": scheme, "intensity": cls, **{f"e{k + 1}": x for k, x in enumerate(v)},
                         "fit_error": doc["fit_error"].get(scheme)})
    return pd.DataFrame(rows)


def schemes_arg(given: Sequence[str] | None) -> tuple[str, ...]:
    valid = registered_node_schemes()
    chosen = list(given) if given else valid
    bad = [s for s in chosen if s not in valid]
    if bad:
        raise ValueError(f"unknown node scheme(s) {bad}; valid: {', '.join(valid)}")
    return tuple(chosen)
