"""Real execution killed at random moments: nothing may be left behind.

Each iteration starts a small gang-scheduled `cosched run` (two jobs of two ranks on two virtual
nodes, one of them frozen at any time) and, at a random moment (seeded), kills one part of it:

- the `cosched run` process, which hosts both the node agent (a thread) and the controller, with
  SIGKILL (no cleanup runs: the next start must restore everything), SIGTERM, SIGHUP or SIGINT (the
  run stops, the agent restores everything, exit 130);
- one rank (the process the shim is loaded into) with SIGKILL: its job fails, the other job finishes;
- the MPI launcher of one job (`mpiexec`) with SIGKILL: the same.

Then (after the next start, one tiny `cosched run`, when the run was SIGKILLed) it checks that no
process the run started is left (frozen, stopped or running), that no cgroup of the run is left in
any hierarchy (so no weight stays raised and nothing stays frozen), and that no
`/dev/shm/cosched.<run>.*` segment, no state file and no work folder (`cosched-run-<PID>-*`) is left.
A SIGKILLed rank leaves its MPI library's own shared-memory files (`/dev/shm/mpich_shar_tmp*`,
`ucx_shm_posix_*`: fixed paths no setting moves, so a run cannot tell its jobs' files apart): after each
real-execution test, conftest.py removes those that appeared while it ran and that no live process holds
open or mapped (`remove_orphan_mpi_shm`), and only those.
Each run uses its own state directory
(``COSCHED_STATE_DIR``) and is identified by its run id (``r<pid>``), so runs of others on the
machine are neither touched nor counted. Only processes this test started are ended, by PID.

The CI variant runs a few iterations; the `slow` one more. Needs what tests/python/test_real_agent.py
needs (root, cgroups, MPICH, `make real`).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from test_real_agent import (
    BUILD,
    CGROUP_ROOTS,
    FINEGRAIN_C,
    config,
)

from coscheduling import real

from conftest import MPI_SHM, mpi_shm_files, remove_orphan_mpi_shm, wait_for

KINDS = ["run-SIGKILL", "run-SIGTERM", "run-SIGINT", "rank-SIGKILL", "launcher-SIGKILL", "run-SIGHUP"]
GANG = "gang[quantum_ms=100,rows=2]"


def test_only_new_mpi_shm_files_no_process_holds_are_removed(tmp_path: Path) -> None:
    """In a folder standing for /dev/shm: ``old`` was there before (kept although no one holds it),
    ``held`` is new and open in a live child (kept), ``orphan`` (MPICH's) and ``ucx`` (UCX's) are new and held
    by no one (removed), and ``other`` has another name (kept). Once the child has ended, ``held`` goes too."""
    assert MPI_SHM == ("mpich_shar_tmp*", "ucx_shm_posix_*")
    old, held, orphan, ucx, other = (tmp_path / n for n in ("mpich_shar_tmpOLD", "mpich_shar_tmpHLD",
                                                           "mpich_shar_tmpORF", "ucx_shm_posix_1f", "cosched.r1.0.0"))
    old.write_bytes(b"")
    before = mpi_shm_files(tmp_path)
    assert before == {old}
    for f in (held, orphan, ucx, other):
        f.write_bytes(b"")
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); print(1, flush=True); "
                              "time.sleep(60)", str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "1\n"  # the file is open
        assert remove_orphan_mpi_shm(before, tmp_path) == [orphan, ucx]
        assert old.exists() and held.exists() and other.exists() and not orphan.exists() and not ucx.exists()
    finally:
        child.kill()
        child.wait()
    assert remove_orphan_mpi_shm(before, tmp_path) == [held]
    assert old.exists() and other.exists()


@pytest.fixture(scope="module")
def finegrain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("fg") / "real_finegrain"
    subprocess.run(["mpicc.mpich", "-O2", "-o", str(exe), str(FINEGRAIN_C)], check=True)
    return exe


def stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of a live process, None once it is gone (a zombie counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else (int(fields[1]), fields[0])


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def descendants(root: int, known: set[int]) -> set[int]:
    """Adds every live descendant of ``root`` to ``known`` (which also keeps the ones seen before)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (s := stat(int(d.name))) is not None:
            parent[int(d.name)] = s[0]
    frontier = {root} | known
    while True:
        more = {p for p, pp in parent.items() if pp in frontier and p not in frontier}
        if not more:
            break
        frontier |= more
    known |= frontier - {root}
    return known


def run_cgroups(run: str) -> list[Path]:
    return [p for root in CGROUP_ROOTS if root.is_dir() for p in root.iterdir()
            if p.name.startswith(f"cosched.{run}.")]


def segments(run: str) -> list[Path]:
    return sorted(Path("/dev/shm").glob(f"cosched.{run}.*"))


def cgroup_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cgroup").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while (alive := {p for p in pids if stat(p) is not None}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def one_iteration(tmp: Path, finegrain: Path, kind: str, delay: float, rng: random.Random) -> list[str]:
    """Runs, kills and cleans up once; returns what was left behind (empty: nothing)."""
    state = tmp / "state"
    state.mkdir(exist_ok=True)
    # The run's work folder goes to a temporary folder of this iteration, so leftovers are counted here only
    # (a short path in /tmp: the agent's sockets live in the work folder, and a socket path has 107 bytes).
    work_tmp = Path(tempfile.mkdtemp(prefix="cosched-kt-"))
    env = dict(os.environ, COSCHED_STATE_DIR=str(state), TMPDIR=str(work_tmp))
    # ~2-4 s of CPU per rank, so the kill falls while the gang slots switch.
    cfg = config(tmp, [str(finegrain), "4000", "500"], policy=GANG)
    out = tmp / "out"
    proc = subprocess.Popen([sys.executable, "-m", "coscheduling", "run", str(cfg), "-o", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = f"r{proc.pid}"
    started: set[int] = set()
    problems: list[str] = []
    target = "run"
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < delay and proc.poll() is None:
            descendants(proc.pid, started)
            time.sleep(0.02)
        launched = False
        if kind.startswith("run-"):
            launched = bool(descendants(proc.pid, started))
            proc.send_signal(getattr(signal, kind.split("-")[1]))
        else:
            # Wait for the victim to exist (the delay may fall before the launch).
            want = "real_finegrain" if kind.startswith("rank") else "mpiexec"
            victims: list[int] = []

            def victims_or_end() -> bool:
                descendants(proc.pid, started)
                victims[:] = sorted(p for p in started if stat(p) is not None and want in cmdline(p).split(" ")[0])
                return bool(victims) or proc.poll() is not None  # a run that ended first is reported below

            wait_for(victims_or_end, 60, f"a {want} process", interval=0.02)
            if not victims:
                return [f"{kind}: no {want} process appeared (run exited with {proc.poll()})"]
            victim = rng.choice(victims)
            target = f"{want} {victim}"
            os.kill(victim, signal.SIGKILL)
        try:
            text, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
            problems.append(f"{kind}: `cosched run` did not end within 120 s after killing {target}")
        # 130 and `cosched: interrupted` when the signal fell during the run, 0 if it ended first;
        # a signal before anything was launched (interpreter start-up) may end the process at once.
        allowed = (0, 130) if launched else (0, 130, -signal.SIGINT, -signal.SIGTERM, -signal.SIGHUP)
        # A Ctrl-C in the interpreter's first moments (before any cosched code runs) may also end
        # it with Python's own start-up failure (docs/architecture.md, Interruption).
        startup = not launched and proc.returncode == 1 and text.startswith("Could not import runpy module")
        if kind in ("run-SIGTERM", "run-SIGINT", "run-SIGHUP") and proc.returncode not in allowed and not startup:
            problems.append(f"{kind}: `cosched run` exited {proc.returncode}, expected 130 (or 0):\n{text}")
        if kind in ("rank-SIGKILL", "launcher-SIGKILL") and not problems:
            # The run goes on: the victim's job fails, the other job completes.
            if proc.returncode != 1:
                problems.append(f"{kind}: `cosched run` exited {proc.returncode}, expected 1:\n{text}")
            elif (out / "jobs.csv").is_file():
                status = sorted(pd.read_csv(out / "jobs.csv")["status"])
                if status != ["completed", "failed"]:
                    problems.append(f"{kind}: job statuses {status}, expected one completed and one failed")
            else:
                problems.append(f"{kind}: no jobs.csv written:\n{text}")
        if kind == "run-SIGKILL":
            # Restore what the killed agent recorded: the next start does it (a tiny run).
            nxt = config(tmp, [str(BUILD / "cosched-probe-mpich"), "pingpong", "100", "8"], jobs=1)
            os.environ["COSCHED_STATE_DIR"] = str(state)
            was, tempfile.tempdir = tempfile.tempdir, str(work_tmp)
            try:
                real.run(nxt, tmp / "out-next")
            finally:
                del os.environ["COSCHED_STATE_DIR"]
                tempfile.tempdir = was
        for p in sorted(started):
            s = stat(p)
            if s is not None and s[1] == "T":
                problems.append(f"{kind}: process {p} ({cmdline(p)[:60]}) is left stopped")
            if "cosched." in cgroup_of(p):
                problems.append(f"{kind}: process {p} is left in a cosched cgroup")
        left = wait_gone(started, 20)
        problems += [f"{kind}: process {p} ({cmdline(p)[:60]}) is left running" for p in sorted(left)]
        problems += [f"{kind}: cgroup {c} is left" for c in run_cgroups(run)]
        problems += [f"{kind}: segment {s} is left" for s in segments(run)]
        problems += [f"{kind}: state file {f.name} is left" for f in state.glob(f"cosched.{run}.*")]
        # Its work folder: removed by the run itself, or (SIGKILL) by the next start.
        problems += [f"{kind}: work folder {d.name} is left" for d in work_tmp.glob(f"{real.WORK_PREFIX}*")]
        return problems
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in wait_gone(started, 0):  # end what this test started, by PID, before failing
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(work_tmp, ignore_errors=True)


def campaign(tmp: Path, finegrain: Path, seed: int, iterations: int) -> None:
    rng = random.Random(seed)
    problems: list[str] = []
    for i in range(iterations):
        kind = KINDS[i % len(KINDS)] if i < len(KINDS) else rng.choice(KINDS)
        delay = rng.uniform(0.0, 3.0)
        d = tmp / f"it{i}"
        d.mkdir()
        found = one_iteration(d, finegrain, kind, delay, rng)
        problems += [f"iteration {i} (seed {seed}, kill at {delay:.2f} s): {p}" for p in found]
    assert not problems, "\n".join(problems)


def test_a_start_removes_the_work_folders_of_dead_controllers_only(tmp_path: Path) -> None:
    """`cosched-run-<PID>-*` folders: removed when no process has that PID (here pid_max + 1, which no
    process can have), kept for a live PID (a child sleeping, and this process), and anything else kept:
    an old name without a PID, another prefix, a link and a plain file of a dead PID's name."""
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        def folder(name: str) -> Path:
            (tmp_path / name).mkdir()
            return tmp_path / name

        gone = folder(f"{real.WORK_PREFIX}{dead}-k2x9")
        (gone / "rank0.log").write_text("output of a killed run\n")
        kept = [folder(f"{real.WORK_PREFIX}{live.pid}-a1"), folder(f"{real.WORK_PREFIX}{os.getpid()}-b2"),
                folder(f"{real.WORK_PREFIX}0fj4q062"), folder(f"cosched-rs-{dead}-c3")]
        (tmp_path / f"{real.WORK_PREFIX}{dead}-link").symlink_to(kept[2])
        (tmp_path / f"{real.WORK_PREFIX}{dead}-file").write_text("")
        kept += [tmp_path / f"{real.WORK_PREFIX}{dead}-link", tmp_path / f"{real.WORK_PREFIX}{dead}-file"]
        assert real.remove_dead_work_dirs(tmp_path) == [gone]
        assert not gone.exists()
        assert all(k.exists() for k in kept)
        assert real.remove_dead_work_dirs(tmp_path) == []
        # Once the child has ended (reaped), its folder goes too.
        live.kill()
        live.wait()
        assert real.remove_dead_work_dirs(tmp_path) == [kept[0]]
    finally:
        live.kill()
        live.wait()


def test_killing_any_part_at_random_moments_leaves_nothing(tmp_path: Path, finegrain: Path) -> None:
    campaign(tmp_path, finegrain, seed=17, iterations=len(KINDS))


@pytest.mark.slow
def test_killing_any_part_at_random_moments_leaves_nothing_long(tmp_path: Path, finegrain: Path) -> None:
    campaign(tmp_path, finegrain, seed=1017, iterations=20)


def test_sighup_ends_the_run_like_sigterm(tmp_path: Path, finegrain: Path) -> None:
    """SIGHUP (the terminal closed) while the ranks run: the jobs are ended, everything is restored and
    `cosched run` exits 130 with `cosched: interrupted`, as for SIGTERM and Ctrl-C."""
    state = tmp_path / "state"
    state.mkdir()
    env = dict(os.environ, COSCHED_STATE_DIR=str(state))
    cfg = config(tmp_path, [str(finegrain), "20000", "500"], policy=GANG)
    proc = subprocess.Popen([sys.executable, "-m", "coscheduling", "run", str(cfg), "-o", str(tmp_path / "out")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = f"r{proc.pid}"
    started: set[int] = set()
    try:
        def registered_or_ended() -> bool:
            descendants(proc.pid, started)
            return len(segments(run)) >= 4 or proc.poll() is not None

        # Every rank has registered (its segment exists) before the signal.
        wait_for(registered_or_ended, 60, "the 4 ranks to register")
        assert len(segments(run)) == 4, f"the ranks did not register (run exited with {proc.poll()})"
        descendants(proc.pid, started)
        proc.send_signal(signal.SIGHUP)
        text, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, text
        assert "cosched: interrupted" in text
        assert not wait_gone(started, 20)
        assert not run_cgroups(run)
        assert not segments(run)
        assert not list(state.glob(f"cosched.{run}.*"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in wait_gone(started, 0):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
