"""Trace tools: conversion round trips, time windows, load scaling, the Lublin-Feitelson generator."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coscheduling import api, traces
from coscheduling.cli import DEMO_TRACE
from coscheduling.workloads import lublin
from coscheduling.workloads.lublin import lublin_jobs

from conftest import run_cli


def test_convert_round_trips_through_parquet_and_json(tmp_path: Path) -> None:
    header, df = traces.read_swf(DEMO_TRACE)
    assert len(df) == 3000 and list(df.columns) == list(traces.SWF_FIELDS)
    for ext in ("parquet", "json"):
        mid = tmp_path / f"t.{ext}"
        back = tmp_path / f"back-{ext}.swf.gz"
        assert run_cli(["trace", "convert", str(DEMO_TRACE), str(mid)]).exit_code == 0
        assert run_cli(["trace", "convert", str(mid), str(back)]).exit_code == 0
        h2, df2 = traces.read_swf(back)
        assert h2 == header
        pd.testing.assert_frame_equal(df2, df, check_dtype=False)
        a, b = api.trace_info(back), api.trace_info(DEMO_TRACE)
        a.pop("origin"), b.pop("origin")
        assert a == b


def test_malformed_input_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.swf"
    bad.write_text("; Version: 2\n1 0 -1 10 4 -1 -1 4 20 -1 1 -1 -1 -1 -1 -1 -1 -1\n2 5 -1 x 4\n")
    r = run_cli(["trace", "convert", str(bad), str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and "bad.swf:3:" in r.stderr
    assert not (tmp_path / "o.parquet").exists()
    r = run_cli(["trace", "convert", str(DEMO_TRACE), str(tmp_path / "o.txt")])
    assert r.exit_code == 2 and "unknown trace format" in r.stderr


def test_time_window_and_load_scaling(tmp_path: Path) -> None:
    _, df = traces.read_swf(DEMO_TRACE)
    win = tmp_path / "w.swf"
    r = run_cli(["trace", "slice", str(DEMO_TRACE), str(win), "--start", "1000000", "--end", "1500000"])
    assert r.exit_code == 0, r.stderr
    _, w = traces.read_swf(win)
    expect = df[(df.submit_time >= 1_000_000) & (df.submit_time < 1_500_000)]
    assert len(w) == len(expect) > 0
    assert (w["submit_time"].to_numpy() == expect["submit_time"].to_numpy() - 1_000_000).all()
    x2 = tmp_path / "x2.swf"
    assert run_cli(["trace", "scale-load", str(DEMO_TRACE), str(x2), "--factor", "2"]).exit_code == 0
    base, scaled = api.trace_info(DEMO_TRACE)["offered_load"], api.trace_info(x2)["offered_load"]
    assert math.isclose(scaled, 2 * base, rel_tol=0.01)
    rt = tmp_path / "rt.swf"
    assert run_cli(["trace", "scale-load", str(DEMO_TRACE), str(rt), "--factor", "0.5", "--by", "runtime"]
                   ).exit_code == 0
    _, r2 = traces.read_swf(rt)
    assert (r2["submit_time"] == df["submit_time"]).all()
    assert np.allclose(r2["run_time"], (df["run_time"] * 0.5).round())
    assert run_cli(["trace", "scale-load", str(DEMO_TRACE), str(rt), "--factor", "0"]).exit_code == 2


def test_lublin_model_matches_its_parameters() -> None:
    n, nodes = 40_000, 128
    d = lublin_jobs(n, nodes, seed=11)
    assert d.equals(lublin_jobs(n, nodes, seed=11))
    assert not d.equals(lublin_jobs(n, nodes, seed=12))
    assert (d["submit_s"].diff().dropna() >= 0).all()
    assert d["procs"].between(1, nodes).all()
    for kind, p in ((True, lublin.INTERACTIVE), (False, lublin.BATCH)):
        sub = d[d["interactive"] == kind]
        serial = (sub["procs"] == 1).mean()
        assert abs(serial - p.serial_prob) < 0.02, (kind, serial)
        par = sub[sub["procs"] > 1]["procs"]
        pow2 = (par & (par - 1) == 0).mean()
        # Power-of-two jobs are pow2_prob / (1 - serial_prob) of the parallel ones, plus the non-power-of-two
        # draws that round to one; so at least that share.
        assert pow2 >= p.pow2_prob / (1 - p.serial_prob) - 0.02
    # Runtime: log(runtime) is hyper-gamma; its mean over serial batch jobs is p*a1*b1 + (1-p)*a2*b2.
    b = d[(~d["interactive"]) & (d["procs"] == 1)]
    p = lublin.BATCH.pa + lublin.BATCH.pb
    mean = p * lublin.BATCH.a1 * lublin.BATCH.b1 + (1 - p) * lublin.BATCH.a2 * lublin.BATCH.b2
    assert abs(np.log(b["runtime_s"]).mean() - mean) < 0.25
    # Daily cycle: more arrivals in the day (8:00-18:00) than in the night (22:00-6:00).
    hour = (d["submit_s"] % 86400) // 3600
    day, night = hour.between(8, 17).sum(), ((hour >= 22) | (hour < 6)).sum()
    assert day > 1.5 * night


def test_generate_writes_a_trace_the_simulator_runs(tmp_path: Path) -> None:
    out = tmp_path / "lub.swf"
    r = run_cli(["trace", "generate", "lublin", str(out), "--jobs", "500", "--nodes", "64", "--seed", "2"])
    assert r.exit_code == 0, r.stderr
    info = api.trace_info(out)
    assert info["jobs"] == 500 and info["machine_procs"] == 64
    res = api.run(out, policy="easy")
    assert res.summary["jobs_completed"] == 500
    again = tmp_path / "again.swf"
    run_cli(["trace", "generate", "lublin", str(again), "--jobs", "500", "--nodes", "64", "--seed", "2"])
    assert again.read_bytes() == out.read_bytes()
    assert run_cli(["trace", "generate", "nope", str(again)]).exit_code == 2


def test_scale_load_to_parquet_and_info_slice_of_parquet_and_json(tmp_path: Path) -> None:
    # scale-load writing Parquet used to write the file and then fail reading it back as SWF.
    out = tmp_path / "x2.parquet"
    r = run_cli(["trace", "scale-load", str(DEMO_TRACE), str(out), "--factor", "2"])
    assert r.exit_code == 0, r.stderr
    assert "offered load" in r.stdout
    swf = tmp_path / "x2.swf"
    assert run_cli(["trace", "scale-load", str(DEMO_TRACE), str(swf), "--factor", "2"]).exit_code == 0
    a, b = api.trace_info(out), api.trace_info(swf)
    assert a.pop("origin") == str(out)
    b.pop("origin")
    assert a == b
    # trace info and slice read what convert writes.
    for ext in ("parquet", "json"):
        conv = tmp_path / f"demo.{ext}"
        assert run_cli(["trace", "convert", str(DEMO_TRACE), str(conv)]).exit_code == 0
        r = run_cli(["trace", "info", str(conv), "--json"])
        assert r.exit_code == 0, r.stderr
        first = tmp_path / f"first.{ext}"
        r = run_cli(["trace", "slice", str(conv), str(first), "--first", "100"])
        assert r.exit_code == 0, r.stderr
        _, df100 = traces.read_any(first)
        _, df = traces.read_swf(DEMO_TRACE)
        pd.testing.assert_frame_equal(df100, df.head(100), check_dtype=False)
        win = tmp_path / f"win.{ext}"
        r = run_cli(["trace", "slice", str(conv), str(win), "--start", "1000000", "--end", "1500000"])
        assert r.exit_code == 0, r.stderr
    info = api.trace_info(tmp_path / "demo.json")
    ref = api.trace_info(DEMO_TRACE)
    assert info["jobs"] == ref["jobs"] and info["offered_load"] == ref["offered_load"]
    # A table without the SWF fields is a clear error.
    bad = tmp_path / "bad.json"
    bad.write_text('{"header": [], "jobs": [{"submit_time": 1}]}')
    r = run_cli(["trace", "info", str(bad)])
    assert r.exit_code == 2 and "missing field(s)" in r.stderr


def test_time_window_with_a_fractional_start_rebases_exactly(tmp_path: Path) -> None:
    src = tmp_path / "t.swf"
    src.write_text("; MaxProcs: 4\n"
                   "1 100 -1 10 1 -1 -1 1 20 -1 1 -1 -1 -1 -1 -1 -1 -1\n"
                   "2 101 -1 10 1 -1 -1 1 20 -1 1 -1 -1 -1 -1 -1 -1 -1\n"
                   "3 103 -1 10 1 -1 -1 1 20 -1 1 -1 -1 -1 -1 -1 -1 -1\n")
    out = tmp_path / "w.swf"
    assert traces.time_window(src, out, 100.5, 200.0) == 2
    _, w = traces.read_swf(out)
    assert w["submit_time"].tolist() == [0.5, 2.5]
    # Whole-second starts keep integer submit times.
    assert traces.time_window(src, out, 100.0, 200.0) == 3
    _, w = traces.read_swf(out)
    assert w["submit_time"].tolist() == [0, 1, 3] and w["submit_time"].dtype.kind == "i"


def test_write_swf_gzip_closes_its_file_and_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header, df = traces.read_swf(DEMO_TRACE)
    out = tmp_path / "o.swf.gz"
    opened: list[object] = []
    real_open = Path.open

    def tracking_open(self: Path, *args: object, **kwargs: object) -> object:
        f = real_open(self, *args, **kwargs)  # type: ignore[arg-type]
        opened.append(f)
        return f

    monkeypatch.setattr(Path, "open", tracking_open)
    traces.write_swf(out, header, df.head(50))
    monkeypatch.undo()
    assert opened and all(f.closed for f in opened)  # type: ignore[attr-defined]
    h2, d2 = traces.read_swf(out)
    assert h2 == header
    pd.testing.assert_frame_equal(d2, df.head(50), check_dtype=False)


def test_a_byte_order_mark_does_not_lose_the_header(tmp_path: Path) -> None:
    # The SWF reader skips a leading UTF-8 BOM; the header read for conversions must too, else the
    # converted trace loses MaxProcs (and every later run of it fails for want of a machine size).
    src = tmp_path / "bom.swf"
    src.write_bytes(b"\xef\xbb\xbf; MaxProcs: 8\n; MaxNodes: 8\n1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    header, df = traces.read_swf(src)
    assert header == ["MaxProcs: 8", "MaxNodes: 8"] and len(df) == 1
    r = run_cli(["trace", "convert", src, tmp_path / "t.json"])
    assert r.exit_code == 0, r.stderr
    assert traces.read_any(tmp_path / "t.json")[0] == header


JOB = {"job_number": 1, "submit_time": 0, "wait_time": 0, "run_time": 10, "allocated_procs": 2, "avg_cpu_time": -1,
       "used_memory": -1, "requested_procs": 2, "requested_time": 20, "requested_memory": -1, "status": 1,
       "user_id": 1, "group_id": 1, "executable": -1, "queue": -1, "partition": -1, "preceding_job": -1,
       "think_time": -1}


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"header": ["MaxProcs: 8"], "jobs": [JOB, {**JOB, "allocated_procs": "abc"}]},
         'record 2: field 5 (allocated_procs): not a number (value "abc")'),
        ({"header": ["MaxProcs: 8"], "jobs": [JOB, {**JOB, "allocated_procs": -5}]},
         'record 2: field 5 (allocated_procs): negative value (value "-5")'),
        ({"header": ["MaxProcs: 8"], "jobs": [{**JOB, "run_time": None}]},
         'record 1: field 4 (run_time): not a number (value "None")'),
        ([JOB], 'expected an object {"header": [...], "jobs": [...]}, found a list'),
        ({"header": [], "jobs": {"a": 1}}, '"jobs" must be a list of records, found dict'),
        ({"header": [], "jobs": [JOB, 5]}, "record 2: expected an object of the 18 SWF fields, found int"),
    ],
    ids=["non-numeric", "negative-procs", "null", "not-an-object", "jobs-not-a-list", "record-not-an-object"],
)
@pytest.mark.parametrize("command", ["info", "convert", "slice", "scale-load"])
def test_a_bad_json_trace_is_refused_by_every_trace_tool(tmp_path: Path, doc, needle, command) -> None:
    # Before writing anything: exit 2, the file and record named, no traceback, no output file.
    import json

    src = tmp_path / "t.json"
    src.write_text(json.dumps(doc))
    dst = tmp_path / "out.swf"
    args = {"info": ["trace", "info", src], "convert": ["trace", "convert", src, dst],
            "slice": ["trace", "slice", src, dst, "--first", "1"],
            "scale-load": ["trace", "scale-load", src, dst, "--factor", "2"]}[command]
    r = run_cli(args)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    assert f"{src}: {needle}" in r.stderr, r.stderr
    assert not dst.exists()


def test_a_trace_without_a_machine_size_can_still_be_converted_windowed_and_scaled(tmp_path: Path) -> None:
    # Only simulating needs the machine size; the trace tools check the records alone. Two jobs submitted
    # at 0 and 50 s: the window [0, 20) keeps the first; scaling the load by 2 halves the gap (50 -> 25).
    src = tmp_path / "nosize.swf"
    src.write_text("; Note: no size\n1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
                   "2 50 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    r = run_cli(["trace", "convert", src, tmp_path / "t.json"])
    assert r.exit_code == 0, r.stderr
    assert traces.read_any(tmp_path / "t.json")[1]["submit_time"].tolist() == [0, 50]
    r = run_cli(["trace", "slice", tmp_path / "t.json", tmp_path / "w.swf", "--start", "0", "--end", "20"])
    assert r.exit_code == 0 and "(1 jobs)" in r.stdout, r.stderr
    r = run_cli(["trace", "scale-load", src, tmp_path / "s.swf", "--factor", "2"])
    assert r.exit_code == 0, r.stderr
    assert "offered load not computed" in r.stdout and "no machine size" in r.stdout
    assert traces.read_swf(tmp_path / "s.swf")[1]["submit_time"].tolist() == [0, 25]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["scale-load", "{src}", "{dst}", "--factor", "inf"], "factor: must be a finite number > 0, got inf"),
        (["scale-load", "{src}", "{dst}", "--factor", "nan"], "factor: must be a finite number > 0, got nan"),
        (["slice", "{src}", "{dst}", "--start", "nan"], "window: start and end must be numbers of seconds, got "
                                                        "start nan, end inf"),
    ],
    ids=["factor-inf", "factor-nan", "start-nan"],
)
def test_non_finite_trace_tool_arguments_are_refused(tmp_path: Path, args, needle) -> None:
    # An infinite load factor would put every submission at the first one (gaps / inf = 0) and exit 0.
    fill = {"src": str(DEMO_TRACE), "dst": str(tmp_path / "o.swf")}
    r = run_cli(["trace", *[a.format(**fill) for a in args]])
    assert r.exit_code == 2 and needle in r.stderr, (r.exit_code, r.stderr)
    assert not (tmp_path / "o.swf").exists()


@pytest.mark.parametrize("ext", ["parquet", "json"])
@pytest.mark.parametrize("command", ["info", "convert"])
def test_a_missing_parquet_or_json_trace_is_bad_input(tmp_path: Path, ext: str, command: str) -> None:
    # As for a missing SWF trace: exit 2 and the reason (pyarrow's own error gave the path alone, exit 1).
    src = tmp_path / f"nope.{ext}"
    args = ["trace", "info", src] if command == "info" else ["trace", "convert", src, tmp_path / "o.swf"]
    r = run_cli(args)
    assert r.exit_code == 2 and f"{src}: no such file" in r.stderr, (r.exit_code, r.stderr)
    folder = tmp_path / f"folder.{ext}"
    folder.mkdir()
    args = ["trace", "info", folder] if command == "info" else ["trace", "convert", folder, tmp_path / "o.swf"]
    r = run_cli(args)
    assert r.exit_code == 2 and f"{folder}: not a file" in r.stderr, (r.exit_code, r.stderr)


def test_trace_info_without_a_machine_size_gives_the_other_statistics(tmp_path: Path) -> None:
    # Two jobs of 2 processors, 10 s each, submitted at 0 and 50 s, no MaxProcs/MaxNodes: span 50 s, mean
    # runtime 10 s; the machine's figures (offered load, ...) are None, with a warning; --machine-size 8
    # gives them: offered load = 2 x 2 x 10 / (8 x 50) = 0.1.
    src = tmp_path / "nosize.swf"
    src.write_text("; Note: no size\n1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
                   "2 50 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    s = api.trace_info(src)
    assert (s["jobs"], s["span_s"], s["runtime_mean_s"]) == (2, 50.0, 10.0)
    assert all(s[k] is None for k in traces.MACHINE_STATS)
    assert any("no machine size in the header" in w for w in s["warnings"])
    r = run_cli(["trace", "info", src])
    assert r.exit_code == 0 and "give one with --machine-size N" in r.stderr, r.stderr
    assert api.trace_info(src, machine_size=8)["offered_load"] == pytest.approx(0.1)
