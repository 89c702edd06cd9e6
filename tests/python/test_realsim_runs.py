"""`cosched reproduce real-vs-sim` counts its real runs and lists them in runs.csv (the measurement itself is
replaced by a small hand-made table: this checks the counting and the file, not the machine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from coscheduling.experiments import realsim

from conftest import run_cli

#: Two compared rows (3 and 2 real runs) and one MPI's launch runs (2).
TABLE = pd.DataFrame([
    {"mpi": "mpich", "granularity": "fine", "scheme": "DEDICATED", "real_runs_s": "1.0000 1.1000 0.9000"},
    {"mpi": "mpich", "granularity": "fine", "scheme": "NLS", "real_runs_s": "2.0000 2.2000"},
])
CALIB: dict[str, Any] = {"os_fit": {"mpich": {"launch_s": {"median": 0.305, "runs": [0.3, 0.31]}}}}


def test_real_runs_lists_every_real_run() -> None:
    # By hand: 2 launch runs + 3 + 2 table runs = 7 rows, launch first, then the table in its order.
    runs = realsim.real_runs(TABLE, CALIB)
    assert list(runs.columns) == realsim.RUN_COLUMNS
    assert list(runs["run"]) == ["mpich/launch/DEDICATED/0", "mpich/launch/DEDICATED/1",
                                 "mpich/fine/DEDICATED/0", "mpich/fine/DEDICATED/1", "mpich/fine/DEDICATED/2",
                                 "mpich/fine/NLS/0", "mpich/fine/NLS/1"]
    assert list(runs["real_mean_response_s"]) == [0.3, 0.31, 1.0, 1.1, 0.9, 2.0, 2.2]


def test_reproduce_real_vs_sim_counts_its_runs_and_writes_them(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(realsim, "measure", lambda quick, say: (TABLE, CALIB, []))
    monkeypatch.setattr(realsim, "_report", lambda table, agreement, calib: "report\n")
    out = tmp_path / "rvs"
    r = run_cli(["reproduce", "real-vs-sim", "--quick", "-o", out])
    assert r.exit_code == 0, r.stdout + r.stderr
    # 7 real runs (above), all made now: none reused.
    assert "real-vs-sim: 7 runs (0 reused)" in r.stdout, r.stdout
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 7 and list(runs.columns) == realsim.RUN_COLUMNS
