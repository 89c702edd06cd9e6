"""Atomic, deterministic result files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import coscheduling
from coscheduling import output
from coscheduling.api import JOB_COLUMNS
from coscheduling.output import OUTPUT_FILES, canonical_json, summary_text, write_outputs

JOBS = pd.DataFrame({"submit_s": [0.0, 1.0], "runtime_s": [3.0, 4.0], "procs": [1, 2]})


@pytest.fixture
def result():
    return coscheduling.run(jobs=JOBS, policy="easy", platform={"nodes": 2}, command_line="cosched test")


def test_failure_leaves_nothing_behind(result, tmp_path, monkeypatch):
    def boom(df, path):
        path.write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(output, "_write_parquet", boom)
    out = tmp_path / "a" / "b"
    with pytest.raises(OSError, match="disk full"):
        result.write(out)
    assert not (tmp_path / "a").exists()


def test_failure_keeps_previous_files(result, tmp_path, monkeypatch):
    out = tmp_path / "out"
    result.write(out)
    before = {f: (out / f).read_bytes() for f in OUTPUT_FILES}

    changed = coscheduling.run(jobs=JOBS, policy="fcfs", platform={"nodes": 1}, command_line="other")
    monkeypatch.setattr(output, "summary_text", lambda s, p: (_ for _ in ()).throw(RuntimeError("x")))
    with pytest.raises(RuntimeError):
        changed.write(out)
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)
    assert {f: (out / f).read_bytes() for f in OUTPUT_FILES} == before


def test_rewrite_is_byte_identical(result, tmp_path):
    result.write(tmp_path / "a")
    result.write(tmp_path / "b")
    for f in OUTPUT_FILES:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_summary_text_nan_is_null_and_order_is_fixed():
    text = summary_text({"b": 1.0, "a": math.nan, "provenance": "old"}, {"z": 1, "y": math.inf})
    assert text.endswith("}\n")
    doc = json.loads(text)
    assert list(doc) == ["format_version", "b", "a", "provenance"]
    assert doc["format_version"] == 3
    assert doc["a"] is None and doc["provenance"] == {"z": 1, "y": None}


def test_canonical_json_is_sorted_and_compact():
    assert canonical_json({"b": [1, math.nan], "a": {"d": 1, "c": 2}}) == '{"a":{"c":2,"d":1},"b":[1,null]}'


def test_write_outputs_creates_folder(result, tmp_path):
    paths = write_outputs(tmp_path / "x" / "y", result.jobs, result.summary, result.provenance)
    assert [p.name for p in paths] == list(OUTPUT_FILES)
    assert not [p for p in (tmp_path / "x" / "y").iterdir() if p.name.startswith(".")]


# ---------------------------------------------------------------------------
# The job table from Rust: Arrow buffers, jobs.csv written by the core


def _tricky_result():
    """Values whose text needs every branch of the float format: 1 ns and 10 us run times (exponent
    form), fractions, a huge slowdown, rejected jobs (NaN, empty node lists) and multi-node lists."""
    jobs = pd.DataFrame({
        "submit_s": [0.0, 0.1, 123456.789, 5.0, 6.0, 7.0, 2e5, 2e5, 2e5],
        "runtime_s": [1e-9, 1e-5, 3.25, 86400.0, 2.0, 0.0, 100.0, 100.0, 100.0],
        "procs": [1, 3, 8, 99, 2, 1, 1, 3, 3],
        "requested_s": [1.0, float("nan"), 1e6, 5.0, -1.0, 0.0, 100.0, 100.0, 100.0],
    })
    return coscheduling.run(jobs=jobs, policy="fcfs", platform={"nodes": 4, "procs_per_node": 2},
                            placement="random", seed=3)


def test_core_csv_is_the_pandas_encoding(tmp_path):
    r = _tricky_result()
    assert r.jobs["status"].tolist().count("rejected") == 1
    r.core.write_jobs_csv(tmp_path / "core.csv")
    output._write_csv(r.jobs, tmp_path / "pandas.csv")
    text = (tmp_path / "core.csv").read_text()
    assert text == (tmp_path / "pandas.csv").read_text()
    assert ",1e-09," in text and ",1e-05," in text  # exponent forms were exercised
    assert '"' in text  # a quoted multi-node list


def test_core_csv_matches_pandas_on_random_values(tmp_path):
    # Times over 15 orders of magnitude, so every float shape (whole, fraction, exponent) appears.
    import numpy as np

    rng = np.random.default_rng(5)
    n = 400
    jobs = pd.DataFrame({
        "submit_s": np.sort(rng.uniform(0, 1e6, n)),
        "runtime_s": 10.0 ** rng.uniform(-9, 6, n),
        "procs": rng.integers(1, 40, n),
        "requested_s": np.where(rng.random(n) < 0.3, np.nan, 10.0 ** rng.uniform(-3, 6, n)),
    })
    r = coscheduling.run(jobs=jobs, policy="easy", platform={"nodes": 16, "procs_per_node": 2,
                                                            "idle_watts": 91.3, "busy_watts": 187.7})
    r.core.write_jobs_csv(tmp_path / "core.csv")
    output._write_csv(r.jobs, tmp_path / "pandas.csv")
    assert (tmp_path / "core.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()


def test_arrow_table_matches_the_dataframe_and_parquet_bytes(tmp_path):
    import pyarrow as pa

    r = _tricky_result()
    assert r.table.column_names == list(JOB_COLUMNS)
    # NaN crosses as null, and reads back as NaN in pandas.
    assert r.table.column("start_s").null_count == 1
    assert r.jobs["start_s"].isna().sum() == 1
    assert r.jobs["status"].dtype == object and r.jobs["node_list"].dtype == object
    assert pa.Table.from_pandas(r.jobs, preserve_index=False).equals(r.table)
    output._write_parquet(r.table, tmp_path / "arrow.parquet")
    output._write_parquet(r.jobs, tmp_path / "pandas.parquet")
    assert (tmp_path / "arrow.parquet").read_bytes() == (tmp_path / "pandas.parquet").read_bytes()


def test_rerun_removes_a_stale_timeline(result, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "timeline.parquet").write_bytes(b"an older run's timeline")
    (out / "notes.txt").write_text("not a result file")
    result.write(out)
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUT_FILES, "notes.txt"])


def _staging(out, name, files, committed):
    """A staging folder as a writer killed at that point leaves it (no live lock)."""
    d = out / f".cosched-{name}.tmp"
    d.mkdir(parents=True)
    (d / ".lock").touch()
    for f, data in files.items():
        (d / f).write_bytes(data)
    if committed:
        (d / "COMMIT").write_text(json.dumps({"files": list(files), "remove": ["timeline.parquet"]}))
    return d


def test_settle_rolls_a_committed_set_forward_and_drops_an_uncommitted_one(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "jobs.csv").write_bytes(b"old")
    (out / "timeline.parquet").write_bytes(b"old")
    # Killed after its commit point, with jobs.csv already moved: the rest must follow.
    _staging(out, "1-a", {"summary.json": b"new"}, committed=True)
    (out / "jobs.csv").write_bytes(b"new")
    # Killed before its commit point: discarded.
    _staging(out, "2-b", {"jobs.csv": b"never", "summary.json": b"never"}, committed=False)
    output.settle(out)
    assert sorted(p.name for p in out.iterdir()) == ["jobs.csv", "summary.json"]
    assert (out / "jobs.csv").read_bytes() == b"new" and (out / "summary.json").read_bytes() == b"new"


def test_settle_leaves_a_live_writer_alone(tmp_path):
    import fcntl
    import os

    out = tmp_path / "out"
    d = _staging(out, "3-c", {"jobs.csv": b"x"}, committed=False)
    fd = os.open(d / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        output.settle(out)
        assert d.is_dir()
    finally:
        os.close(fd)
    output.settle(out)
    assert not d.exists()


def test_settle_removes_old_versions_temporaries_whose_writer_is_dead(tmp_path):
    """Older versions wrote ``.<result file>.<8 random>.tmp`` beside the result: one nobody holds
    open and untouched for longer than a write takes is removed; a fresh one, one a live process
    holds open, and names of another pattern stay."""
    import os
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    out.mkdir()
    long_ago = time.time() - output.OLD_TEMPORARY_AGE_S - 60
    names = {
        ".jobs.csv.ab12_x9z.tmp": "dead",
        ".summary.json.q1w2e3r4.tmp": "dead",
        ".jobs.csv.zz99yy88.tmp": "fresh",
        ".jobs.parquet.h0ld1ng1.tmp": "held",
        ".notes.txt.ab12cd34.tmp": "other",
        ".jobs.csv.ab12cd345.tmp": "other",
        ".jobs.csv.tmp4242": "other",
    }
    for name, kind in names.items():
        (out / name).write_bytes(b"partial")
        if kind != "fresh":
            os.utime(out / name, (long_ago, long_ago))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'rb'); print(flush=True); time.sleep(120)",
         str(out / ".jobs.parquet.h0ld1ng1.tmp")],
        stdout=subprocess.PIPE,
    )
    try:
        holder.stdout.readline()  # the file is open
        output.settle(out)
        assert sorted(p.name for p in out.iterdir()) == sorted(n for n, k in names.items() if k != "dead")
    finally:
        holder.kill()
        holder.wait()
    output.settle(out)
    assert sorted(p.name for p in out.iterdir()) == sorted(n for n, k in names.items() if k in ("fresh", "other"))


_SLOW_WRITER = """
import sys, time
from pathlib import Path
from coscheduling import output
def slow(p):
    p.write_bytes(b"partial")
    Path(sys.argv[2]).touch()
    time.sleep(60)
output.write_atomic(sys.argv[1], {"jobs.csv": slow, "summary.json": lambda p: p.write_text("x")})
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_interrupted_write_leaves_no_temporaries(tmp_path, sig):
    import signal
    import subprocess
    import sys
    import time

    out, started = tmp_path / "out", tmp_path / "started"
    out.mkdir()
    (out / "jobs.csv").write_bytes(b"previous")
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(out), str(started)])
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        p.send_signal(getattr(signal, sig))
        assert p.wait(timeout=60) == -getattr(signal, sig)
    finally:
        if p.poll() is None:
            p.kill()
    if sig == "SIGKILL":
        output.settle(out)  # what the next run into the folder does first
    assert [p.name for p in out.iterdir()] == ["jobs.csv"]
    assert (out / "jobs.csv").read_bytes() == b"previous"


@pytest.mark.parametrize("under", [False, True])
def test_an_output_folder_that_is_a_file_is_named(tmp_path, under):
    # Any command's atomic write (report --out, gantt --out, trace convert, ...) names the file in the way,
    # not "File exists" / "Not a directory"; nothing is written and the file is untouched.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker / "sub" if under else blocker
    with pytest.raises(OSError) as e:
        output.write_atomic(out, {"a.txt": lambda p: p.write_text("a")})
    what = f"{blocker} is a file" if under else "it is a file"
    assert e.value.filename == str(out) and e.value.strerror == f"cannot write the results here: {what}, not a folder"
    assert blocker.read_text() == "x"


def test_report_completes_a_set_a_killed_writer_left_half_moved(result, tmp_path):
    # A run killed between its renames: jobs.csv of the new set in place, its summary.json still staged
    # (committed). `cosched report` must read the whole new set, not the new jobs.csv with the old summary.
    from conftest import run_cli

    run = tmp_path / "sweep" / "runs" / "r1"
    write_outputs(run, result.table, {**result.summary, "mean_wait_s": 1.0}, {"seed": 0})
    new_summary = summary_text({**result.summary, "mean_wait_s": 2.0}, {"seed": 0}).encode()
    _staging(run, "9-z", {"summary.json": new_summary}, committed=True)
    r = run_cli(["report", tmp_path / "sweep", "--out", tmp_path / "r.html"])
    assert r.exit_code == 0, r.stderr
    assert (run / "summary.json").read_bytes() == new_summary
    assert not list(run.glob(".cosched-*"))


def test_an_output_folder_under_a_read_only_folder_is_named(tmp_path, monkeypatch):
    # (The tests run as root, whom permissions do not stop: the access check is what is exercised.)
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = output.os.access
    monkeypatch.setattr(output.os, "access", lambda p, mode: Path(p) != ro and real_access(p, mode))
    with pytest.raises(OSError) as e:
        output.write_atomic(ro / "a" / "b", {"x.txt": lambda p: p.write_text("x")})
    assert e.value.filename == str(ro / "a" / "b")
    assert e.value.strerror == f"cannot write the results here: {ro} is not writable"
    assert list(ro.iterdir()) == []


def test_the_extension_records_the_commit_it_was_built_from():
    """`pip install .` copies the package out of the checkout, so provenance cannot ask git at run time: the
    extension carries the commit its build.rs read. From a checkout, that commit is HEAD or (a build made before
    the last commits) one of HEAD's ancestors; never "unknown"."""
    import subprocess

    from coscheduling import _core

    built = getattr(_core, "__git_commit__", None)
    top = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=top, capture_output=True, text=True, check=True)
    assert built and built != "unknown", built
    assert len(built) == 40 and all(c in "0123456789abcdef" for c in built), built
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", built, head.stdout.strip()], cwd=top)
    assert ancestor.returncode == 0, f"extension built from {built}, not an ancestor of HEAD {head.stdout.strip()}"
