"""``cosched agent ARGS...``: the node agent of real execution under the ``cosched`` command.

The agent is the Rust binary ``cosched-agent`` (``crates/cosched-real``, docs/real.md). This command
finds it and replaces the Python process with it (``execv``), with the same arguments, so signals
(SIGTERM/SIGINT restore everything), the exit status and the output are the agent's own. The binary
is looked up as the real-execution tools are: ``$COSCHED_AGENT_BIN`` if set, else the source tree's
``target/release/cosched-agent`` (``cargo build --release -p cosched-real``), else ``cosched-agent``
on ``PATH`` (installed as in docs/real-slurm.md).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

#: What builds the agent, for the error when it is missing.
BUILD_HINT = "cargo build --release -p cosched-real"
#: The source tree's optimized build of the agent.
TREE_AGENT = Path(__file__).resolve().parents[2] / "target" / "release" / "cosched-agent"


def agent_binary() -> Path:
    """The ``cosched-agent`` binary to run; ``FileNotFoundError`` naming what to build if none is found."""
    env = os.environ.get("COSCHED_AGENT_BIN")
    if env:
        p = Path(env)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        raise FileNotFoundError(f"COSCHED_AGENT_BIN={env} is not an executable file: build the node agent "
                                f"with `{BUILD_HINT}` (target/release/cosched-agent) or unset it")
    tree = TREE_AGENT
    if tree.is_file() and os.access(tree, os.X_OK):
        return tree
    found = shutil.which("cosched-agent")
    if found:
        return Path(found)
    raise FileNotFoundError(f"the node agent cosched-agent is missing (not {tree}, not on PATH, "
                            f"COSCHED_AGENT_BIN unset): build it with `{BUILD_HINT}`")


def register_cli(app: Any, fail: Callable[[str, int], Any]) -> None:
    """Adds ``cosched agent`` to the command-line application."""

    @app.command("agent", add_help_option=False,
                 context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def agent_cmd(ctx: typer.Context) -> None:
        """The node agent of real execution (`cosched-agent`), with the same arguments: `serve`,
        `cleanup`, `cgroups`, `coordinate`... (`cosched agent --help`; docs/real.md)."""
        try:
            path = agent_binary()
        except FileNotFoundError as e:
            raise fail(str(e), 1) from None
        os.execv(path, [str(path), *ctx.args])
