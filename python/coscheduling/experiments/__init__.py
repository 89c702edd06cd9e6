"""Named, runnable reproductions of the seeds' experiments (``cosched reproduce``).

An experiment is a list of process-level runs (:class:`RunSpec`) and an analysis
that turns their results into CSV tables, PNG plots and a markdown report
``OUT/report.md``. The report states, for each of the paper's findings, the rule
applied to our numbers and whether they reproduce it; nothing in a verdict is
hard-coded. ``quick`` runs a reduced version (fewer jobs, smaller problems) cheap
enough for CI; ``seeds`` repeats every run with different workload and engine
seeds and reports the spread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..output import canonical_json, provenance, write_atomic
from .runner import Gathered, RunSpec, default_workers, run_specs

__all__ = ["FULL_SEEDS", "Experiment", "Settings", "Outcome", "RunSpec", "experiments", "get", "run_experiment"]


#: Seeds of a full reproduction by default (`cosched reproduce` without --quick): enough for a 95%
#: interval of every compared difference (one seed gives none).
FULL_SEEDS = 5


@dataclass(frozen=True)
class Settings:
    quick: bool = False
    seeds: int = 1
    #: Experiments with real runs: how many times each real run is repeated (None: the experiment's default).
    repeat: int | None = None
    #: Experiments compared with the simulator on this machine's preset: the real-vs-sim ``calibration.json``
    #: the preset is built from (None: the experiment measures what it needs itself).
    calibration: Path | None = None
    #: OS noise of every simulated node, us of CPU per timer tick, replacing the preset's (None: the
    #: preset's sourced value). Refused for an experiment without a simulated node platform.
    os_noise_us: float | None = None


@dataclass
class Outcome:
    """What an analysis produced: files written into the output folder and the report text."""

    report: str
    files: dict[str, Callable[[Path], None]] = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    id: str
    title: str
    #: The seed and figure or table it reproduces.
    source: str
    runs: Callable[[Settings], list[RunSpec]]
    analyze: Callable[[Gathered, Settings], Outcome]
    #: The title of the quick version when it runs a different workload than ``title`` names.
    quick_title: str = ""

    def title_for(self, settings: Settings) -> str:
        """The title of what ``settings`` runs."""
        return self.quick_title if settings.quick and self.quick_title else self.title


_REGISTRY: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    if exp.id in _REGISTRY:
        raise ValueError(f"experiment {exp.id!r} registered twice")
    _REGISTRY[exp.id] = exp
    return exp


def experiments() -> list[Experiment]:
    _load()
    return list(_REGISTRY.values())


def get(exp_id: str) -> Experiment:
    _load()
    try:
        return _REGISTRY[exp_id]
    except KeyError:
        valid = ", ".join(_REGISTRY)
        raise ValueError(f"unknown experiment {exp_id!r}; valid experiments: {valid}") from None


def _load() -> None:
    from . import choi, flexgang, lee, realsim, realslurm, scale  # noqa: F401  (register their experiments)
    from .ghanesh import register as _  # noqa: F401  (registers its experiments)


def run_experiment(
    exp_id: str,
    out: Path,
    *,
    settings: Settings,
    workers: int | None = None,
    command: str = "",
    progress: Callable[[str, int], Any] | None = None,
    advance: Callable[[], Any] | None = None,
) -> tuple[list[Path], Gathered]:
    """Runs an experiment into ``out``: the runs (cached under ``out/runs``, or copied from a
    sibling folder's ``runs`` holding the same configuration from this build), then the
    analysis, whose files and ``report.md`` are written atomically."""
    exp = get(exp_id)
    if settings.seeds < 1:
        raise ValueError("seeds: must be at least 1")
    if settings.repeat is not None and settings.repeat < 1:
        raise ValueError("repeat: must be at least 1")
    from .noise import with_os_noise

    specs = with_os_noise(exp.id, exp.runs(settings), settings.os_noise_us)
    out.mkdir(parents=True, exist_ok=True)
    # Experiments that analyse the same runs (choi-fig3a and choi-table3, ...) share them
    # through sibling output folders, e.g. reproduce/choi-fig3a and reproduce/choi-table3.
    siblings = sorted(d for d in out.resolve().parent.iterdir() if d.is_dir() and d != out.resolve())
    gathered = run_specs(
        specs,
        out,
        workers=workers or default_workers(),
        command=command,
        progress=progress,
        advance=advance,
        reuse=siblings,
    )
    outcome = exp.analyze(gathered, settings)
    prov = provenance(
        version=_version(),
        seed=0,
        policy="experiment",
        options={"experiment": exp.id, "quick": settings.quick, "seeds": settings.seeds,
                 "runs_sha256": _runs_hash(specs),
                 **({"repeat": settings.repeat} if settings.repeat is not None else {}),
                 **({"calibration": str(settings.calibration)} if settings.calibration is not None else {}),
                 **({"os_noise_tick_us": settings.os_noise_us} if settings.os_noise_us is not None else {})},
        trace=None,
        platform={},
        command=command,
    )
    header = (
        f"# {exp.id}: {exp.title_for(settings)}\n\n"
        f"Reproduces {exp.source}. Version {prov['version']}, commit `{prov['git_commit']}`, "
        f"{'quick' if settings.quick else 'full'} version, {settings.seeds} seed(s), {len(specs)} runs "
        f"(configurations and per-run results under `runs/`; every run's summary.json holds its provenance).\n\n"
    )
    if settings.os_noise_us is not None:
        header += (f"OS noise: {settings.os_noise_us:g} us of CPU per timer tick on every node (`--os-noise-us`), "
                   "in place of the platform preset's sourced value (`node_platform.os_noise_tick_us` of every "
                   "run).\n\n")
    files = dict(outcome.files)
    text = header + outcome.report.rstrip() + "\n"
    files["report.md"] = lambda p: p.write_text(text, encoding="utf-8")
    files["runs.csv"] = lambda p: gathered.runs.to_csv(p, index=False, lineterminator="\n")
    files["jobs.csv"] = lambda p: gathered.jobs.to_csv(p, index=False, lineterminator="\n")
    return write_atomic(out, files), gathered


def _version() -> str:
    from .. import _core

    return _core.__version__


def _runs_hash(specs: Sequence[RunSpec]) -> str:
    import hashlib

    return hashlib.sha256(canonical_json([s.config for s in specs]).encode()).hexdigest()


def csv_writer(df: pd.DataFrame) -> Callable[[Path], None]:
    return lambda p: df.to_csv(p, index=False, lineterminator="\n")
