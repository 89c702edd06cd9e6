"""Golden results (`tests/golden/`): text compared byte for byte with what a test produces, so that
any change of a result shows in review. The files are written only by `make bless`, which runs the
golden tests with COSCHED_BLESS=1; a missing or different file fails the test with a diff."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "golden"



def blessing() -> bool:
    return os.environ.get("COSCHED_BLESS") == "1"


def check(rel: str, text: str) -> None:
    """Compares `text` with the golden file `rel` (under tests/golden), or writes it when blessing."""
    path = GOLDEN / rel
    if blessing():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.is_file(), f"golden file {path} is missing: run `make bless` and review the new file"
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"golden/{rel}", "now", n=1))
        raise AssertionError(f"result differs from golden/{rel} (if intended: `make bless`):\n{diff}")


def verdict_lines(report_md: str) -> str:
    """One line per finding of a reproduction report: its number, the paper's finding and the verdict."""
    rows = re.findall(r"^\| (\d+) \| (.+?) \| .*\| \*\*([a-z ]+)\*\* \|$", report_md, flags=re.M)
    assert rows, "no findings in the report"
    return "".join(f"{n} | {claim} | {verdict}\n" for n, claim, verdict in rows)


def check_verdicts(exp_id: str, report_md: str) -> None:
    """The quick reproduction's verdicts against tests/golden/verdicts/EXP_ID.txt."""
    check(f"verdicts/{exp_id}.txt", verdict_lines(report_md))
