"""Shared fixtures: the shared traces folder, small trace slices, a CLI runner, `wait_for` (polling with a
deadline, for the tests that watch real processes), and the marker ``real`` of the real-execution tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from typer.testing import CliRunner

from coscheduling import slice_trace
from coscheduling.cli import app

REPO = Path(__file__).resolve().parents[2]

T = TypeVar("T")

#: Tests that execute on this machine for real (MPI ranks, node agents, cgroups, Slurm) and compare what they
#: measure: every test of these files and every test named ``test_real_*`` elsewhere gets the marker ``real``.
#: They must not share the CPUs with other tests: a parallel run (e.g. pytest-xdist) selects them out
#: (``-m "not real"``) and runs them alone in a second, serial invocation.
REAL_FILE_PREFIXES = ("test_real_", "test_slurm_")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if item.path.name.startswith(REAL_FILE_PREFIXES) or name.startswith("test_real_"):
            item.add_marker(pytest.mark.real)


#: Traces sliced for the CLI tests (first SLICE_RECORDS records, header kept).
SLICED = ("SDSC-SP2-1998-4.2-cln", "CTC-SP2-1996-3.1-cln", "LLNL-Thunder-2007-1.1-cln")
SLICE_RECORDS = 500


def find_traces_dir() -> Path:
    env = os.environ.get("COSCHED_TRACES")
    return Path(env) if env else REPO.parent / "shared" / "data" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    d = find_traces_dir()
    if not d.is_dir():
        msg = f"shared traces not found at {d} (set COSCHED_TRACES)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return d


@pytest.fixture(scope="session")
def slices(traces_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> a slice of the trace's first SLICE_RECORDS records (plain SWF)."""
    out = tmp_path_factory.mktemp("slices")
    paths = {}
    for name in SLICED:
        dst = out / f"{name}-first{SLICE_RECORDS}.swf"
        slice_trace(traces_dir / f"{name}.swf.gz", dst, SLICE_RECORDS)
        paths[name] = dst
    return paths


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(args: list[str], cwd: Path | None = None) -> CliResult:
    """Runs ``cosched ARGS`` in-process (optionally in ``cwd``)."""
    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        r = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    finally:
        os.chdir(old)
    return CliResult(r.exit_code, r.stdout, r.stderr)


def run_cli_process(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs ``cosched ARGS`` in a new Python process."""
    exe = Path(sys.executable).parent / "cosched"
    cmd = [str(exe)] if exe.is_file() else [sys.executable, "-m", "coscheduling"]
    return subprocess.run(
        [*cmd, *[str(a) for a in args]],
        cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
    )


def outputs_twice(
    args: list[str], cwd: Path, out: str, files: tuple[str, ...]
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """Runs ``cosched ARGS`` twice in new processes in ``cwd`` (removing the output folder
    ``out`` in between) and returns the bytes of ``files`` written each time."""
    runs = []
    for _ in range(2):
        shutil.rmtree(cwd / out, ignore_errors=True)
        r = run_cli_process(args, cwd)
        assert r.returncode == 0, r.stderr
        runs.append({f: (cwd / out / f).read_bytes() for f in files})
    return runs[0], runs[1]


@pytest.fixture(scope="session")
def quick_reproduction(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[CliResult, Path]]:
    """``exp_id -> (result, output folder)`` of ``cosched reproduce EXP_ID --quick -j 2``, run once per session
    for every test that reads it. All go into one parent folder, so experiments analysing the same runs
    (choi-fig3a and choi-table3, choi-fig5 and choi-fig8, choi-fig7 and choi-table4) share them as siblings.
    Tests only read these folders (copy one to change it)."""
    root = tmp_path_factory.mktemp("reproduce")
    done: dict[str, tuple[CliResult, Path]] = {}

    def get(exp_id: str) -> tuple[CliResult, Path]:
        if exp_id not in done:
            out = root / exp_id
            done[exp_id] = (run_cli(["reproduce", exp_id, "--quick", "--out", str(out), "-j", "2"]), out)
        return done[exp_id]

    return get


def wait_for(pred: Callable[[], T], timeout: float, what: str | Callable[[], str], interval: float = 0.05) -> T:
    """Polls ``pred`` every ``interval`` seconds until it returns a true value, and returns that value.

    The deadline is ``timeout`` seconds (``time.monotonic``) from the call, and the last call of ``pred``
    starts after it: a loaded machine that keeps this process off the CPU past the deadline does not fail
    a condition that holds by then. Otherwise raises ``AssertionError("timed out after TIMEOUT s waiting
    for WHAT ...")`` with the last value; ``what`` may be a function, called only then, to describe the
    state (e.g. the records read so far). A predicate that should stop the wait early (the watched process
    exited) returns a true value for that case too, and the caller tells the two apart."""
    deadline = time.monotonic() + timeout
    while True:
        expired = time.monotonic() >= deadline
        if value := pred():
            return value
        if expired:
            detail = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {detail} (last value: {value!r:.2000})")
        time.sleep(interval)
