"""`cosched run` where what it needs is missing: no MPI on PATH, no right to write cgroups (an unprivileged
user). Each gives a clear error naming what is missing, and leaves nothing changed: no output folder, no
cosched cgroup, no shared-memory segment, no work folder.

These tests need root (to drop to user nobody), cgroups and MPICH; CI provides them, and without them they
fail (they never skip).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import real_config

CGROUP_ROOTS = [Path("/sys/fs/cgroup") / c for c in ("cpu", "cpuacct", "cpuset", "freezer", "unified")]
RING = "Msg[pattern=ring]"
#: The jobs' program, by absolute path: the no-MPI test's PATH has no /usr/bin.
TRUE = shutil.which("true") or "/bin/true"
#: Run as user nobody (uid and gid 65534, no supplementary group) keeping one capability, CAP_DAC_READ_SEARCH:
#: it may read any file and search any folder, so the checkout and its environment are readable wherever they
#: are (a clone under a mode-700 folder of root's included), but it still may not write cgroups, /run or any
#: folder it does not own, which is what these tests are about.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+dac_read_search",
          "--ambient-caps=+dac_read_search", "--"]


def machine_state() -> set[str]:
    """Every cosched cgroup and shared-memory segment on the machine."""
    cgs = {str(p) for r in CGROUP_ROOTS if r.is_dir() for p in r.iterdir() if p.name.startswith("cosched.")}
    return cgs | {str(p) for p in Path("/dev/shm").glob("cosched*")}


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user may write (pytest's tmp_path is root's own), removed at the end."""
    d = Path(tempfile.mkdtemp(prefix="cosched-test-errors-", dir="/tmp"))
    d.chmod(0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _run(cfg: Path, out: Path, env: dict[str, str],
         prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), sys.executable, "-m", "coscheduling", "run", str(cfg), "-o", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)


def _nothing_left(before: set[str], out: Path, work_tmp: Path) -> None:
    assert not out.exists(), "no output folder"
    assert machine_state() <= before, f"left behind: {sorted(machine_state() - before)}"
    assert not list(work_tmp.glob("cosched-run-*")), "no work folder"


def test_real_run_without_mpi_names_the_package_and_changes_nothing(open_dir: Path) -> None:
    cfg = real_config(open_dir, [(RING, 2)], {RING: [TRUE]})
    assert shutil.which("mpiexec.mpich"), "the machine has MPICH (the test takes it away)"
    # A PATH with the Python environment only: no mpiexec.mpich.
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "TMPDIR": str(open_dir)}
    before = machine_state()
    r = _run(cfg, open_dir / "out", env)
    err = " ".join(r.stderr.split())
    assert r.returncode == 1, r.stdout + r.stderr
    assert "mpiexec.mpich not found on PATH" in err and "apt-get install mpich libmpich-dev" in err, err
    _nothing_left(before, open_dir / "out", open_dir)


def test_real_run_as_an_unprivileged_user_names_what_is_missing_and_changes_nothing(open_dir: Path) -> None:
    """As user nobody (`NOBODY`: it may read everything but write no cgroup), with MPICH present: the run
    cannot write the cgroups, and says so."""
    assert os.geteuid() == 0, "the test drops from root to nobody"
    cfg = real_config(open_dir, [(RING, 2)], {RING: [TRUE]})
    for p in (cfg, *cfg.parent.iterdir()):
        p.chmod(p.stat().st_mode | 0o444)
    env = {**os.environ, "TMPDIR": str(open_dir), "HOME": str(open_dir)}
    probe = subprocess.run([*NOBODY, sys.executable, "-c", "import coscheduling"], capture_output=True, text=True,
                           env=env, timeout=120)
    assert probe.returncode == 0, f"user nobody cannot import the package from this tree: {probe.stderr}"
    before = machine_state()
    r = _run(cfg, open_dir / "out", env, prefix=NOBODY)
    err = " ".join(r.stderr.split())
    assert r.returncode == 1, r.stdout + r.stderr
    assert "root" in err and "cgroup" in err, err
    assert "Traceback" not in r.stderr, r.stderr
    _nothing_left(before, open_dir / "out", open_dir)


def test_real_agent_as_an_unprivileged_user_names_what_is_missing_and_changes_nothing(
        open_dir: Path, node_agent: Path) -> None:
    """The node agent alone (`cosched-agent serve`) as user nobody (`NOBODY`): it refuses to start, naming the
    cgroup hierarchies it cannot write, and creates nothing."""
    before = machine_state()
    r = subprocess.run([*NOBODY, str(node_agent), "serve", "--run", f"errs{os.getpid()}", "--node",
                        f"0:0:{open_dir / 'n0.sock'}", "--no-realtime", "--state-dir", str(open_dir / "state")],
                       capture_output=True, text=True, timeout=120)
    err = " ".join(r.stderr.split())
    assert r.returncode != 0, r.stderr
    assert "no permission to create cgroups in /sys/fs/cgroup/" in err and "needs root" in err, err
    assert machine_state() <= before, f"left behind: {sorted(machine_state() - before)}"
    assert not (open_dir / "n0.sock").exists()
