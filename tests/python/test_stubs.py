"""The committed type stub of coscheduling._core matches the Rust sources, and the module."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coscheduling import _core

REPO = Path(__file__).resolve().parents[2]
STUB = REPO / "python" / "coscheduling" / "_core.pyi"


@pytest.mark.skipif(shutil.which("cargo") is None and not os.environ.get("CI"), reason="needs cargo")
def test_stub_is_up_to_date():
    env = dict(os.environ)
    # The stub generator links libpython: point it (and the loader) at this interpreter's.
    env.setdefault("PYO3_PYTHON", sys.executable)
    r = subprocess.run(
        ["bash", str(REPO / "scripts" / "check_stubs.sh")],
        capture_output=True, text=True, timeout=1800, env=env, check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_stub_names_match_the_module():
    tree = ast.parse(STUB.read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert names == public
