"""Shared fixtures: the shared traces folder, small trace slices, a CLI runner, `wait_for` (re-exported from
`coscheduling.waiting`: polling with a deadline, for the tests that watch real processes), and the marker
``real`` of the real-execution tests."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coscheduling import slice_trace
from coscheduling.cli import app
from coscheduling.waiting import WaitTimeout as WaitTimeout  # re-exported for the tests
from coscheduling.waiting import wait_for as wait_for

REPO = Path(__file__).resolve().parents[2]

# The CLI draws at 160 columns off a terminal and at COLUMNS when that is set; the tests read its output
# drawn at 160 (a test of another width sets COLUMNS itself). pytest-xdist's workers start with COLUMNS=80
# and LINES=24 in their environment, and a shell may export its own: neither reaches the tests.
for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)

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


#: The real-execution C parts (``make real``).
REAL_BUILD = REPO / "build" / "real"


#: The node agent of the real-execution tests (debug profile, see ``node_agent``).
NODE_AGENT = REPO / "target" / "debug" / "cosched-agent"


@pytest.fixture(scope="session")
def node_agent() -> Path:
    """The node agent ``cosched-agent``, built once per session for every test that runs it (alone, under
    ``cosched run`` or beside Slurm's daemons): the debug profile, which ``cargo test`` builds too, so the
    suite makes no second, optimized build of it (and integer overflow panics in it)."""
    b = subprocess.run(["cargo", "build", "-q", "-p", "cosched-real", "--bin", "cosched-agent"], cwd=REPO,
                       capture_output=True, text=True, timeout=1800, check=False)
    assert b.returncode == 0, f"cannot build the node agent:\n{b.stderr}"
    assert NODE_AGENT.is_file(), NODE_AGENT
    return NODE_AGENT


def real_config(tmp: Path, jobs: list[tuple[str, int]], programs: dict[str, list[str]], *, policy: str = "fcfs",
                node_policy: str = "nls", mpl: int | None = None, time_limit_s: int = 300, extra: str = "") -> Path:
    """Writes a real-execution configuration into `tmp` and returns its path: `jobs` as (application, ranks), all
    submitted at 0, on 2 nodes of 1 CPU (MPICH, the ``choi2004`` preset for the simulated side), each application
    run as the command `programs` gives it, under `policy` and `node_policy` (at `mpl` when given); `extra` is
    appended to the ``[real]`` table as TOML."""
    job_list = ", ".join(f'{{ app = "{app}", procs = {n}, submit_s = 0 }}' for app, n in jobs)
    progs = ", ".join(f"{json.dumps(app)} = {json.dumps([str(a) for a in argv])}" for app, argv in programs.items())
    text = f"""
fidelity = "process"
seed = 1
[node_platform]
preset = "choi2004"
[workload]
jobs = [{job_list}]
[scheduler]
policy = "{policy}"
node_policy = "{node_policy}"
{f"mpl = {mpl}" if mpl is not None else ""}
[real]
mpi = "mpich"
nodes = 2
cpus_per_node = 1
time_limit_s = {time_limit_s}
build_dir = "{REAL_BUILD}"
programs = {{ {progs} }}
{extra}
"""
    p = tmp / f"real-{hashlib.sha256(text.encode()).hexdigest()[:16]}.toml"
    p.write_text(text)
    return p


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


#: Shared-memory files an MPI library's rank creates in /dev/shm and removes itself only when it ends
#: normally, so a rank SIGKILLed (by a test, or by a job's abort) leaves them: MPICH 4's
#: ``mpich_shar_tmp*`` (its MPL library creates it with mkstemp at this fixed path in MPI_Init and unlinks it
#: once every rank of the node has attached; no setting moves it) and UCX's ``ucx_shm_posix_*`` (its posix
#: shared-memory transport, under MPICH's ch4:ucx).
MPI_SHM = ("mpich_shar_tmp*", "ucx_shm_posix_*")


def mpi_shm_files(shm: Path = Path("/dev/shm")) -> set[Path]:
    return {f for pattern in MPI_SHM for f in shm.glob(pattern)}


def held_files() -> set[str]:
    """Every file some live process has open (``/proc/*/fd``) or mapped (``/proc/*/maps``)."""
    held: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                try:
                    held.add(os.readlink(fd))
                except OSError:
                    pass
            for line in (proc / "maps").read_text().splitlines():
                fields = line.split(maxsplit=5)
                if len(fields) == 6:
                    held.add(fields[5])
        except OSError:  # the process ended meanwhile, or is not ours to read
            continue
    return held


def remove_orphan_mpi_shm(before: set[Path], shm: Path = Path("/dev/shm")) -> list[Path]:
    """Removes the MPI shared-memory files (:data:`MPI_SHM`) in ``shm`` that are not in ``before`` (they
    appeared since) and that no live process holds (the rank that created them is gone, and no other rank
    maps them); returns them, sorted. Files that were there before, or that a process still holds, are left."""
    new = sorted(mpi_shm_files(shm) - before)
    if not new:
        return []
    held = held_files()
    gone = [f for f in new if str(f) not in held]
    for f in gone:
        f.unlink(missing_ok=True)
    return gone


@pytest.fixture(autouse=True)
def _mpi_shm_of_killed_ranks(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each real-execution test, removes the MPI shared-memory files its killed ranks left
    (:func:`remove_orphan_mpi_shm`); other tests start no MPI rank."""
    if request.node.get_closest_marker("real") is None:
        yield
        return
    before = mpi_shm_files()
    yield
    remove_orphan_mpi_shm(before)
