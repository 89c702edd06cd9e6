"""The Slurm test cluster on one machine (scripts/slurm-testbed) and the cosched SPANK plugin.

The plugin is checked against a stand-in agent that speaks the agent side of real/include/cosched_proto.h
(job declarations and their ACK), so that what the plugin sends, and what it does on each answer, is
checked on its own. These tests need root and Debian's Slurm (slurmctld, slurmd, slurm-client,
libslurm-dev), which .ci/run installs: they fail, not skip, where these are missing.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "scripts" / "slurm-testbed"
ACK = struct.Struct("<IIiiiiQQQ")  # struct cosched_msg
JOB = struct.Struct("<IIiI120sI")  # struct cosched_job_msg
MSG_ACK, MSG_JOB, MSG_JOB_END = 2, 9, 10


class StandInAgent:
    """Answers job declarations on one node's socket: EINVAL for the spec "bogus", else 0."""

    def __init__(self, path: Path):
        self.path = path
        self.got: list[tuple[int, int, int, str]] = []  # (type, job, flags, spec)
        self.nnodes: list[int] = []  # the node count of each declaration
        path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(4096)
                if len(data) != JOB.size:
                    continue
                typ, _ver, job, flags, raw, nnodes = JOB.unpack(data)
                spec = raw.split(b"\0", 1)[0].decode()
                self.got.append((typ, job, flags, spec))
                self.nnodes.append(nnodes)
                if typ == MSG_JOB:
                    rc = 22 if spec == "bogus" else 0
                    conn.send(ACK.pack(MSG_ACK, 1, job, 0, 0, rc, 0, 0, 0))

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


def run(cmd: list[str], env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("slurm")
    plugin = work / "cosched_spank.so"
    r = run(["make", "-s", "-C", str(ROOT), "spank", f"SPANK_OUT={plugin}"])
    assert r.returncode == 0, r.stdout + r.stderr
    sockdir = work / "agents"
    sockdir.mkdir()
    plug = work / "plugstack.conf"
    plug.write_text(f"required {plugin} agent={sockdir}/agent-%n.sock shim=/opt/cosched-test/libshim.so\n")
    d = work / "testbed"
    # `up` waits up to about 170 s in all on a loaded machine; a failed or timed-out `up` is taken down.
    try:
        r = run([str(TESTBED), "up", "--nodes", "2", "--dir", str(d), "--plugstack", str(plug)], timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    except BaseException:
        run([str(TESTBED), "down", "--dir", str(d)], timeout=300)
        raise
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
    cgroups = [Path(c["path"]) for c in json.loads((d / "testbed.json").read_text())["cgroups"]]
    agents = {n: StandInAgent(sockdir / f"agent-{n}.sock") for n in ("cn0", "cn1")}
    try:
        yield env, agents, d
    finally:
        for a in agents.values():
            a.close()
        r = run([str(TESTBED), "down", "--dir", str(d)], timeout=120)
        assert r.returncode == 0, r.stderr
        assert not d.exists()
        assert not [c for c in cgroups if c.exists()]


ENV_LINE = "echo $SLURMD_NODENAME ${LD_PRELOAD:-none} ${COSCHED_RUN:-none} ${COSCHED_JOB:-none} ${COSCHED_AGENT:-none}"


def srun(env, *opts: str) -> subprocess.CompletedProcess:
    return run(["srun", "-N2", "-n2", *opts, "bash", "-c", ENV_LINE], env=env)


def test_nodes_come_up_each_bound_to_its_own_cpu(cluster):
    env, _, _ = cluster
    r = run(["sinfo", "-h", "-N", "-o", "%N %T"], env=env)
    assert sorted(r.stdout.split()) == sorted(["cn0", "idle", "cn1", "idle"])
    r = run(["srun", "-N2", "-n2", "bash", "-c", "echo $SLURMD_NODENAME $(grep Cpus_allowed_list /proc/self/status)"],
            env=env)
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines())
    ncpu = os.cpu_count() or 1
    assert lines == [f"cn0 Cpus_allowed_list: {0 % ncpu}", f"cn1 Cpus_allowed_list: {1 % ncpu}"]


def test_the_option_is_offered(cluster):
    env, _, _ = cluster
    r = run(["srun", "--help"], env=env)
    assert "--cosched=SPEC" in r.stdout and "--cosched-optional" in r.stdout and "--cosched-gang" in r.stdout


def test_a_step_without_the_option_is_left_alone(cluster):
    env, agents, _ = cluster
    before = {n: len(a.got) for n, a in agents.items()}
    r = srun(env)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        assert line.split()[1:] == ["none", "none", "none", "none"]
    assert {n: len(a.got) for n, a in agents.items()} == before


def test_a_coscheduled_step_is_declared_on_every_node_and_preloads_the_shim(cluster):
    env, agents, _ = cluster
    for a in agents.values():
        a.got.clear()
    r = srun(env, "--cosched=sb[spin_us=300]")
    assert r.returncode == 0, r.stderr
    rows = sorted(line.split() for line in r.stdout.splitlines())
    assert [row[0] for row in rows] == ["cn0", "cn1"]
    job = rows[0][3]
    for node, preload, run_id, jobid, agent in rows:
        assert preload == "/opt/cosched-test/libshim.so"
        assert run_id.startswith(f"s{job}-") and jobid == job
        assert agent.endswith(f"agents/agent-{node}.sock")
    # slurmstepd tells srun that the tasks ended before it runs the plugin's exit (which sends JOB_END).
    wait_for(lambda: all(len(a.got) >= 2 for a in agents.values()), 20,
             lambda: f"JOB and JOB_END on every node: {({n: a.got for n, a in agents.items()})}", interval=0.01)
    for a in agents.values():
        assert [(t, j, f, s) for t, j, f, s in a.got] == [
            (MSG_JOB, int(job), 0, "sb[spin_us=300]"),
            (MSG_JOB_END, int(job), 0, ""),
        ]


def test_a_gang_step_is_declared_with_the_gang_flag_and_the_steps_node_count_on_every_node(cluster):
    env, agents, _ = cluster
    for a in agents.values():
        a.got.clear()
        a.nnodes.clear()
    r = srun(env, "--cosched-gang")
    assert r.returncode == 0, r.stderr
    job = sorted(line.split() for line in r.stdout.splitlines())[0][3]
    wait_for(lambda: all(len(a.got) >= 2 for a in agents.values()), 20,
             lambda: f"JOB and JOB_END on every node: {({n: a.got for n, a in agents.items()})}", interval=0.01)
    for a in agents.values():
        # --cosched-gang alone means NLS ranks (COSCHED_JOB_GANG = 2), on the step's 2 nodes.
        assert a.got == [(MSG_JOB, int(job), 2, "nls"), (MSG_JOB_END, int(job), 2, "")]
        assert a.nnodes[0] == 2


def test_a_refused_policy_fails_the_step_fast_with_the_reason(cluster):
    env, _, _ = cluster
    r = srun(env, "--cosched=bogus")
    assert r.returncode != 0
    assert 'refused policy "bogus": unknown or invalid policy spec' in r.stderr


def test_an_unreachable_agent_fails_the_step_unless_optional(cluster):
    env, agents, _ = cluster
    path = agents["cn1"].path
    agents["cn1"].close()
    try:
        r = srun(env, "--cosched=nls")
        assert r.returncode != 0
        assert f"no cosched agent at {path}" in r.stderr
        r = srun(env, "--cosched=nls", "--cosched-optional")
        assert r.returncode == 0, r.stderr
        rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()}
        assert rows["cn1"] == ["none", "none", "none", "none"]  # uncoscheduled where the agent is down
        assert rows["cn0"][0] == "/opt/cosched-test/libshim.so"
    finally:
        agents["cn1"] = StandInAgent(path)


def test_bad_usage_is_named(tmp_path):
    r = run([str(TESTBED), "up", "--gang", "--timeslice", "1", "--dir", str(tmp_path / "unused")])
    assert r.returncode == 2 and "minimum SchedulerTimeSlice is 5 s" in r.stderr
    r = run([str(TESTBED), "up", "--plugin", "x.so", "--dir", str(tmp_path / "unused")])
    assert r.returncode == 2 and "--plugin and --shim go together" in r.stderr


def test_a_folder_that_holds_no_test_cluster_is_never_deleted(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("x")
    r = run([str(TESTBED), "up", "--dir", str(mine)])
    assert r.returncode == 2 and "holds no test cluster" in r.stderr
    r = run([str(TESTBED), "down", "--dir", str(mine)])
    assert r.returncode == 0 and (mine / "keep.txt").exists()


def test_the_daemons_listen_on_loopback_only(cluster):
    _, _, d = cluster
    pids = {x["pid"] for x in json.loads((d / "testbed.json").read_text())["daemons"]}
    r = run(["ss", "-Hltnp"])
    mine = [line for line in r.stdout.splitlines() if any(f"pid={p}," in line for p in pids)]
    assert len(mine) >= 3, r.stdout  # slurmctld and two slurmd
    for line in mine:
        assert line.split()[3].startswith("127.0.0.1:"), line
