"""OS noise as an experiment setting, and the sensitivity of seed 000/001's findings to it.

The process-level engine steals CPU time from a running process at every timer tick it crosses
(``crates/cosched-engine/src/process/osnoise.rs``); the mean per tick is the platform's
``os_noise_tick_us``, 10 us on the ``choi2004`` and ``ghanesh`` presets after D. Tsafrir, "The
context-switch overhead inflicted by hardware interrupts (and the enigma of do-nothing loops)", ExpCS 2007
(``LINUX_TICK_NOISE_US`` in ``cosched-model/src/node.rs``; docs/models/os-noise.md).

:func:`with_os_noise` puts another value into every run of an experiment (``cosched reproduce EXP
--os-noise-us X``): it is written into each run's ``node_platform.os_noise_tick_us``, so it is part of
the run's configuration, hence of its cache key (a run at another level is never reused) and of the
configuration hash in its summary.json provenance (``config.json`` beside it holds the value). An
experiment whose runs have no simulated node platform (real execution, where the noise is the machine's
own, or a model without processes) is refused.

:func:`run_sensitivity` (``cosched reproduce noise-sensitivity``) runs every seed 000/001 experiment
(:data:`EXPERIMENTS`) at three levels: the preset's sourced value :data:`SOURCED_US` (the experiments
unchanged), 0 (no noise) and :data:`FACTOR` x the sourced value. Each level runs into its own folder, where
experiments sharing runs (choi-fig3a and choi-table3, ...) reuse them as they do in ``reproduce/``.
:func:`sensitivity_table` then lines up each finding's verdict at the three levels, with the numbers
its rule compared; ``report.md`` and ``sensitivity.csv`` hold the table and ``provenance.json`` what
produced it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..output import canonical_json, provenance, write_atomic
from .runner import RunSpec

#: The command's experiment id: ``cosched reproduce noise-sensitivity``.
ID = "noise-sensitivity"
#: Seed 000/001's experiments, in the order of ``reproduce`` (siblings share runs within a level).
EXPERIMENTS = ("choi-fig3a", "choi-fig3b", "choi-table3", "choi-fig4", "choi-fig5", "choi-fig8", "choi-fig6",
               "choi-fig7", "choi-table4")
#: The high level as a multiple of the sourced value: well past the top of the source's range (15 us per
#: tick at 1.5x the mean), so a finding that holds there does not hang on the noise's exact size.
FACTOR = 5.0
#: The OS noise of the ``choi2004`` preset all of :data:`EXPERIMENTS` run on, us per tick:
#: ``LINUX_TICK_NOISE_US`` (above). The engine does not report its platform to Python, so the value is
#: restated here; test_noise_sensitivity.py checks that a run with it set is the preset's run, draw for draw.
SOURCED_US = 10.0
#: Level labels, in the table's column order.
ZERO, SOURCED, HIGH = "0", "sourced", f"{FACTOR:g}x"
LEVELS = (ZERO, SOURCED, HIGH)

_ROW = re.compile(r"^\| (\d+) \| (.+?) \| (?:.+) \| (.+?) \| \*\*([a-z ]+)\*\* \|$", flags=re.M)
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def with_os_noise(exp_id: str, specs: Sequence[RunSpec], os_noise_us: float | None) -> list[RunSpec]:
    """``specs`` with ``node_platform.os_noise_tick_us`` = ``os_noise_us`` (None: unchanged). Raises
    ValueError for a negative or non-finite value, and for an experiment whose runs have no simulated
    node platform to set it on."""
    if os_noise_us is None:
        return list(specs)
    if not (os_noise_us >= 0.0 and os_noise_us != float("inf")):
        raise ValueError(f"--os-noise-us: must be a finite number >= 0 (us of CPU per timer tick), not {os_noise_us}")
    if not specs or any(not isinstance(s.config.get("node_platform"), Mapping) for s in specs):
        raise ValueError(
            f"{exp_id}: --os-noise-us does not apply: its runs have no simulated node platform with an OS "
            "noise parameter (node_platform.os_noise_tick_us); real runs carry the machine's own noise")
    out = []
    for s in specs:
        cfg = dict(s.config)
        cfg["node_platform"] = {**cfg["node_platform"], "os_noise_tick_us": float(os_noise_us)}
        out.append(dataclasses.replace(s, config=cfg))
    return out


def findings(report_md: str) -> list[dict[str, Any]]:
    """The findings rows of a reproduction report: number, claim, our numbers and verdict."""
    rows = [{"finding": int(n), "claim": claim, "ours": ours, "verdict": verdict}
            for n, claim, ours, verdict in _ROW.findall(report_md)]
    if not rows:
        raise ValueError("no findings table in the report")
    return rows


def numbers(text: str) -> tuple[float, ...]:
    """The numbers in a finding's "our numbers" text, in order (thousands separators dropped)."""
    return tuple(float(m.replace(",", "")) for m in _NUMBER.findall(text))


def moved(texts: Mapping[str, str]) -> str:
    """The sourced level's "our numbers" text with each number that differs at another level written as
    ``0-level / sourced / 5x-level`` (``texts[level]``); the three texts whole, joined, when their numbers
    do not line up; "" when no number moved."""
    nums = {lv: numbers(texts[lv]) for lv in LEVELS}
    if len(set(nums.values())) == 1:
        return ""
    if len({len(v) for v in nums.values()}) != 1:
        return " / ".join(f"{lv}: {texts[lv]}" for lv in LEVELS)
    found = list(_NUMBER.finditer(texts[SOURCED]))
    cells = {lv: [m.group() for m in _NUMBER.finditer(texts[lv])] for lv in LEVELS}
    out, pos = [], 0
    for k, m in enumerate(found):
        out.append(texts[SOURCED][pos:m.start()])
        trio = [cells[lv][k] for lv in LEVELS]
        out.append(m.group() if nums[ZERO][k] == nums[SOURCED][k] == nums[HIGH][k] else
                   f"[{' / '.join(trio)}]")
        pos = m.end()
    out.append(texts[SOURCED][pos:])
    return "".join(out)


def sensitivity_table(reports: Mapping[str, Mapping[str, str]]) -> pd.DataFrame:
    """One row per (experiment, finding): its verdict and compared numbers at each level of
    :data:`LEVELS`, whether the verdict changes across them, and whether the numbers moved.
    ``reports[level][exp_id]`` is that experiment's report.md at that level."""
    missing = [lv for lv in LEVELS if lv not in reports]
    if missing:
        raise ValueError(f"no reports at level(s) {', '.join(missing)}")
    rows: list[dict[str, Any]] = []
    for exp_id in reports[SOURCED]:
        by_level = {lv: {f["finding"]: f for f in findings(reports[lv][exp_id])} for lv in LEVELS}
        for n, f in by_level[SOURCED].items():
            row: dict[str, Any] = {"experiment": exp_id, "finding": n, "claim": f["claim"]}
            for lv in LEVELS:
                g = by_level[lv].get(n)
                if g is None or g["claim"] != f["claim"]:
                    raise ValueError(f"{exp_id}: finding {n} differs between levels {SOURCED} and {lv}")
                row[f"verdict_{lv}"] = g["verdict"]
            row["verdict_changes"] = len({row[f"verdict_{lv}"] for lv in LEVELS}) > 1
            row["numbers_moved"] = len({numbers(by_level[lv][n]["ours"]) for lv in LEVELS}) > 1
            row["moved"] = moved({lv: by_level[lv][n]["ours"] for lv in LEVELS})
            for lv in LEVELS:
                row[f"ours_{lv}"] = by_level[lv][n]["ours"]
            rows.append(row)
    return pd.DataFrame(rows)


def table_md(table: pd.DataFrame, levels_us: Mapping[str, float]) -> str:
    """The verdict table and, for each finding whose verdict changes, its numbers at each level."""
    head = [f"{lv} ({levels_us[lv]:g} us)" for lv in LEVELS]
    out = ["| experiment | # | finding | " + " | ".join(head) + " |", "|---|---|---|" + "---|" * len(LEVELS)]
    for r in table.itertuples(index=False):
        cells = [getattr(r, f"verdict_{lv}") for lv in LEVELS]
        if r.verdict_changes:
            cells = [f"**{c}**" for c in cells]
        out.append(f"| {r.experiment} | {r.finding} | {r.claim} | " + " | ".join(cells) + " |")
    changed = table[table["verdict_changes"]]
    out += ["", f"{len(changed)} of {len(table)} finding(s) change verdict across the levels; the numbers "
            f"compared moved in {int(table['numbers_moved'].sum())}. `sensitivity.csv` holds every finding's "
            "numbers at each level."]
    if len(changed):
        out += ["", "## The compared numbers of the findings that change", ""]
        for r in changed.itertuples(index=False):
            out.append(f"- {r.experiment} #{r.finding} ({r.claim}):")
            for lv in LEVELS:
                out.append(f"  - {lv} ({levels_us[lv]:g} us), {getattr(r, f'verdict_{lv}')}: "
                           f"{getattr(r, f'ours_{lv}')}")
    moving = table[table["numbers_moved"]]
    if len(moving):
        out += ["", "## The compared numbers that moved", "",
                f"Each finding's numbers at the sourced level; a number that differs at another level reads "
                f"[{' / '.join(f'at {lv}' for lv in LEVELS)}].", ""]
        out += [f"- {r.experiment} #{r.finding}: {r.moved}" for r in moving.itertuples(index=False)]
    return "\n".join(out)


def run_sensitivity(
    out: Path,
    *,
    settings: Any,
    workers: int | None = None,
    command: str = "",
    experiments: Sequence[str] = EXPERIMENTS,
    run: Callable[..., Any] | None = None,
    say: Callable[[str], Any] = lambda _m: None,
) -> list[Path]:
    """Runs ``experiments`` at the sourced noise (unchanged), at 0 and at :data:`FACTOR` x, into ``out/<level>/<exp>``,
    and writes the table (``report.md``, ``sensitivity.csv``, ``provenance.json``) into ``out``.
    ``run`` is :func:`coscheduling.experiments.run_experiment` (replaceable in tests)."""
    from . import run_experiment

    run = run or run_experiment
    folders = {ZERO: out / "noise-0", SOURCED: out / "noise-sourced", HIGH: out / f"noise-{FACTOR:g}x"}

    def level(lv: str, us: float | None) -> dict[str, str]:
        texts = {}
        for exp_id in experiments:
            say(f"{exp_id} at OS noise {lv}" + ("" if us is None else f" ({us:g} us)"))
            dest = folders[lv] / exp_id
            run(exp_id, dest, settings=dataclasses.replace(settings, os_noise_us=us), workers=workers,
                command=command)
            texts[exp_id] = (dest / "report.md").read_text(encoding="utf-8")
        return texts

    levels_us = {ZERO: 0.0, SOURCED: SOURCED_US, HIGH: FACTOR * SOURCED_US}
    # The sourced level is the experiments as `cosched reproduce` runs them (no override).
    reports = {SOURCED: level(SOURCED, None), ZERO: level(ZERO, 0.0), HIGH: level(HIGH, levels_us[HIGH])}
    table = sensitivity_table(reports)
    return write_atomic(out, _files(table, levels_us, settings, experiments, command))


def _files(table: pd.DataFrame, levels_us: Mapping[str, float], settings: Any, experiments: Sequence[str],
           command: str) -> dict[str, Callable[[Path], None]]:
    from .. import _core

    options = {"experiment": ID, "experiments": list(experiments), "quick": settings.quick,
               "seeds": settings.seeds, "os_noise_tick_us": {lv: levels_us[lv] for lv in LEVELS}}
    prov = provenance(version=_core.__version__, seed=0, policy="experiment", options=options, trace=None,
                      platform={}, command=command)
    header = (
        f"# {ID}: seed 000/001's findings at OS noise 0, the sourced value and {FACTOR:g}x it\n\n"
        f"Version {prov['version']}, commit `{prov['git_commit']}`, "
        f"{'quick' if settings.quick else 'full'} versions, {settings.seeds} seed(s). OS noise per timer tick "
        f"on every node: {', '.join(f'{lv} = {levels_us[lv]:g} us' for lv in LEVELS)} (the sourced level runs "
        "the experiments unchanged, on the `choi2004` preset's value; `--os-noise-us` sets the others). Each "
        "level's reports, with their runs, are under `noise-*/<experiment>/`. A verdict in bold changes "
        "across the levels.\n\n"
    )
    text = header + table_md(table, levels_us) + "\n"
    prov_text = json.dumps(json.loads(canonical_json({**prov, "options": options})), indent=1, sort_keys=True) + "\n"
    return {
        "report.md": lambda p: p.write_text(text, encoding="utf-8"),
        "sensitivity.csv": lambda p: table.to_csv(p, index=False, lineterminator="\n"),
        "provenance.json": lambda p: p.write_text(prov_text, encoding="utf-8"),
    }
