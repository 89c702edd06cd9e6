"""`cosched agent ARGS`: the node agent binary under the `cosched` command, with the same arguments.

The serve test needs root and cgroups (CI provides them; without them it fails, it does not skip).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from coscheduling import agent_cmd

from conftest import wait_for

COSCHED = [sys.executable, "-m", "coscheduling"]


def _env(agent: Path | str) -> dict[str, str]:
    return {**os.environ, "COSCHED_AGENT_BIN": str(agent)}


def test_cosched_agent_runs_the_agent_binary_with_the_same_arguments(node_agent: Path) -> None:
    for args in (["cgroups"], ["--help"], ["serve", "--help"], ["no-such-subcommand"]):
        direct = subprocess.run([str(node_agent), *args], capture_output=True, text=True, timeout=60)
        via = subprocess.run([*COSCHED, "agent", *args], capture_output=True, text=True, timeout=60,
                             env=_env(node_agent))
        assert (via.returncode, via.stdout, via.stderr) == (direct.returncode, direct.stdout, direct.stderr), args
    # The agent's own answers, so the comparison above is not of two identical failures.
    assert subprocess.run([str(node_agent), "cgroups"], capture_output=True, timeout=60).returncode == 0
    bad = subprocess.run([str(node_agent), "no-such-subcommand"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no-such-subcommand" in bad.stderr


def test_cosched_agent_is_the_agent_process_and_its_sigterm_restores(node_agent: Path, tmp_path: Path) -> None:
    """`cosched agent serve` becomes the agent (execv: same pid), so SIGTERM reaches the agent itself, which
    removes its cgroups and exits 0."""
    run = f"agentcmd{os.getpid()}"
    sock = tmp_path / "n0.sock"
    p = subprocess.Popen([*COSCHED, "agent", "serve", "--run", run, "--node", f"0:0:{sock}", "--no-realtime",
                          "--state-dir", str(tmp_path / "state")], env=_env(node_agent),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(sock.exists, timeout=60, what="the agent's socket")
        assert Path(f"/proc/{p.pid}/exe").resolve() == node_agent.resolve()
        cgs = list(Path("/sys/fs/cgroup").glob(f"*/cosched.{run}.n0"))
        assert cgs, "the agent made its node's cgroups"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert not [c for c in cgs if c.exists()], "SIGTERM restores: no cgroup left"


def test_cosched_agent_names_what_to_build_when_the_agent_is_missing(tmp_path: Path) -> None:
    r = subprocess.run([*COSCHED, "agent", "cgroups"], capture_output=True, text=True, timeout=60,
                       env=_env(tmp_path / "absent"))
    assert r.returncode == 1
    assert "cargo build --release -p cosched-real" in " ".join(r.stderr.split()), r.stderr


def test_agent_binary_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$COSCHED_AGENT_BIN, then the source tree's release build, then PATH; none: an error naming the build."""
    exe = tmp_path / "bin" / "cosched-agent"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    tree = tmp_path / "tree" / "cosched-agent"
    monkeypatch.setattr(agent_cmd, "TREE_AGENT", tree)
    monkeypatch.delenv("COSCHED_AGENT_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match=r"cargo build --release -p cosched-real"):
        agent_cmd.agent_binary()
    monkeypatch.setenv("PATH", str(exe.parent))
    assert agent_cmd.agent_binary() == exe
    tree.parent.mkdir()
    tree.write_text("#!/bin/sh\n")
    tree.chmod(0o755)
    assert agent_cmd.agent_binary() == tree
    monkeypatch.setenv("COSCHED_AGENT_BIN", str(exe))
    assert agent_cmd.agent_binary() == exe
