"""Atomic, deterministic result files."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import coscheduling
from coscheduling import output
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
    assert doc["format_version"] == 1
    assert doc["a"] is None and doc["provenance"] == {"z": 1, "y": None}


def test_canonical_json_is_sorted_and_compact():
    assert canonical_json({"b": [1, math.nan], "a": {"d": 1, "c": 2}}) == '{"a":{"c":2,"d":1},"b":[1,null]}'


def test_write_outputs_creates_folder(result, tmp_path):
    paths = write_outputs(tmp_path / "x" / "y", result.jobs, result.summary, result.provenance)
    assert [p.name for p in paths] == list(OUTPUT_FILES)
    assert not [p for p in (tmp_path / "x" / "y").iterdir() if p.name.startswith(".")]
