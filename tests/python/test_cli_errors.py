"""Bad input: a clear message naming file, line and field, exit code 2, and nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import run_cli, run_cli_process

HEADER = "; MaxProcs: 8\n; MaxNodes: 8\n"
GOOD = "1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n"


def check_failed(r, code: int, *needles: str) -> None:
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    assert "error:" in r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


@pytest.mark.parametrize(
    ("line", "needles"),
    [
        ("2 5 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1\n", [":4:", "expected 18 fields, found 17"]),
        ("2 5 0 ten 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n", [":4:", "field 4", "run_time", "ten"]),
    ],
    ids=["field-count", "non-numeric"],
)
def test_malformed_swf_names_file_and_line_and_writes_nothing(tmp_path, line, needles):
    trace = tmp_path / "bad.swf"
    trace.write_text(HEADER + GOOD + line)
    out = tmp_path / "out"
    r = run_cli(["simulate", "--trace", trace, "--out", out])
    check_failed(r, 2, str(trace), *needles)
    assert not out.exists()


def test_malformed_gzip_trace_names_line(tmp_path, slices):
    import gzip

    text = Path(slices["SDSC-SP2-1998-4.2-cln"]).read_text().splitlines(keepends=True)
    n_header = sum(1 for t in text if t.startswith(";"))
    text[n_header + 9] = "1 2 3\n"  # the 10th record
    trace = tmp_path / "broken.swf.gz"
    trace.write_bytes(gzip.compress("".join(text).encode()))
    r = run_cli(["simulate", "--trace", trace, "--out", tmp_path / "o"])
    check_failed(r, 2, f"{trace}:{n_header + 10}:", "expected 18 fields, found 3")
    assert not (tmp_path / "o").exists()


def test_missing_trace_file(tmp_path):
    r = run_cli(["simulate", "--trace", tmp_path / "nope.swf", "--out", tmp_path / "o"])
    check_failed(r, 2, "nope.swf")
    assert not (tmp_path / "o").exists()


def test_unknown_policy_lists_valid_ones(slices, tmp_path):
    r = run_cli(["simulate", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--policy", "sjf",
                 "--out", tmp_path / "o"])
    check_failed(r, 2, "unknown policy", "sjf", "fcfs, easy, conservative")
    assert not (tmp_path / "o").exists()


def test_unknown_policy_parameter(slices):
    r = run_cli(["simulate", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--policy", "fcfs[depth=2]"])
    check_failed(r, 2, "unknown parameter", "depth")


def test_bad_config_key_names_line_and_key(slices, tmp_path):
    shutil.copy(slices["CTC-SP2-1996-3.1-cln"], tmp_path / "t.swf")
    cfg = tmp_path / "exp.toml"
    cfg.write_text('seed = 1\n[workload]\ntrace = "t.swf"\n[scheduler]\npolicy = "easy"\nplacment = "random"\n')
    r = run_cli(["simulate", cfg], cwd=tmp_path)
    check_failed(r, 2, str(cfg), "line 6", "placment")
    assert not (tmp_path / "results").exists()


def test_bad_config_value_names_field(slices, tmp_path):
    shutil.copy(slices["CTC-SP2-1996-3.1-cln"], tmp_path / "t.swf")
    cfg = tmp_path / "exp.toml"
    cfg.write_text('[workload]\ntrace = "t.swf"\n[scheduler]\npolicy = "easy"\n[platform]\nnodes = 0\n')
    r = run_cli(["simulate", cfg], cwd=tmp_path)
    check_failed(r, 2, "platform.nodes", "at least 1")
    assert not (tmp_path / "results").exists()


def test_config_with_trace_flags_is_refused(slices, tmp_path):
    shutil.copy(slices["CTC-SP2-1996-3.1-cln"], tmp_path / "t.swf")
    cfg = tmp_path / "exp.toml"
    cfg.write_text('[workload]\ntrace = "t.swf"\n[scheduler]\npolicy = "easy"\n')
    r = run_cli(["simulate", cfg, "--policy", "fcfs"], cwd=tmp_path)
    check_failed(r, 2, "--policy")
    assert not (tmp_path / "results").exists()


def test_needs_a_config_or_a_trace(slices):
    check_failed(run_cli(["simulate"]), 2, "CONFIG", "--trace")


def test_bad_option_value_is_a_usage_error(slices):
    r = run_cli(["simulate", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--estimates", "perfect"])
    assert r.exit_code == 2
    assert "Traceback" not in r.stderr + r.stdout


def test_unwritable_output_is_exit_1_and_leaves_nothing(slices, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_cli(["simulate", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--out", blocker / "sub"])
    check_failed(r, 1)
    assert blocker.read_text() == "x"


def test_trace_info_of_a_bad_file(tmp_path):
    trace = tmp_path / "bad.swf"
    trace.write_text(HEADER + "1 2\n")
    check_failed(run_cli(["trace", "info", trace]), 2, f"{trace}:3:")


def test_bench_without_traces_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("COSCHED_TRACES", str(tmp_path / "none"))
    check_failed(run_cli(["bench"]), 2, "COSCHED_TRACES")


def long_bad_trace(tmp_path: Path) -> Path:
    """A malformed trace (record 2 has 17 fields, file line 4) at a path of more than 200 characters."""
    folder = tmp_path / ("d" * 100) / ("e" * 100)
    folder.mkdir(parents=True)
    trace = folder / "bad.swf"
    trace.write_text(HEADER + GOOD + "2 5 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1\n")
    assert len(str(trace)) > 200
    return trace


@pytest.mark.parametrize("columns", [None, "40"], ids=["default-width", "COLUMNS=40"])
def test_a_long_path_stays_whole_on_the_error_line(tmp_path, monkeypatch, columns):
    # The console is 160 columns wide off a terminal, COLUMNS wide when set: an error message is wider than
    # both here and must not be wrapped, so the one line with "error:" holds the whole "FILE:4:".
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    trace = long_bad_trace(tmp_path)
    r = run_cli(["simulate", "--trace", trace, "--out", tmp_path / "o"])
    check_failed(r, 2)
    (line,) = [x for x in r.stderr.splitlines() if "error:" in x]
    assert f"{trace}:4:" in line and "expected 18 fields, found 17" in line, r.stderr


def test_a_long_path_stays_whole_on_the_error_line_of_the_command(tmp_path, monkeypatch):
    # The installed command (its own entry point, a new process) at COLUMNS=40.
    monkeypatch.setenv("COLUMNS", "40")
    trace = long_bad_trace(tmp_path)
    r = run_cli_process(["simulate", "--trace", trace, "--out", tmp_path / "o"], tmp_path)
    assert r.returncode == 2, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "error:" in x]
    assert line.startswith("error: ") and f"{trace}:4:" in line, r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--bogus"], "No such option: --bogus"), (["simulate", "--policy"], "'--policy' requires an argument")],
    ids=["unknown-option", "missing-value"],
)
def test_a_usage_error_is_one_message_and_exit_code_2_without_a_traceback(tmp_path, args, needle):
    r = run_cli_process(args, tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    assert needle in r.stderr, r.stderr


def test_the_command_runs_without_click_installed(tmp_path):
    """The plain install (`make demo`: no test extras) has no `click`; typer carries its own copy."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['click'] = None; sys.argv = ['cosched', '--bogus']; "
        "from coscheduling.entry import main; main()"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "No such option: --bogus" in r.stderr and "Traceback" not in r.stderr, r.stderr


RAISING_POLICIES = '''\
class BadInit:
    def __init__(self, depth=1):
        raise KeyError("depth")

    def on_events(self, now_s, events, free_procs, total_procs):
        return []
'''


@pytest.mark.parametrize(
    ("source", "cls", "needles"),
    [
        (RAISING_POLICIES, "BadInit[depth=2]", ["BadInit(depth=2) raised KeyError: 'depth'", ".py:3)"]),
        ("import math\nmath.sqrt(-1)\n", "X", ["importing module", "raised ValueError: math domain error",
                                               ".py:2)"]),
    ],
    ids=["constructor", "import"],
)
def test_a_python_policy_that_raises_while_built_is_a_clear_error(tmp_path, monkeypatch, slices, source, cls,
                                                                   needles):
    # A module of the user's whose import or constructor raises: exit 2, the policy, the exception and the
    # line that raised it, no traceback, nothing written.
    module = f"userpolicy_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o"
    r = run_cli(["simulate", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--policy", f"python:{module}:{cls}",
                 "--out", out])
    check_failed(r, 2, f"python:{module}:{cls}", *needles)
    assert not out.exists()


MARKS_ITS_RUN = '''\
from pathlib import Path


class Marks:
    def __init__(self, mark):
        Path(mark).write_text("ran")

    def on_events(self, now_s, events, free_procs, total_procs):
        return [("start", e[1]) for e in events if e[0] == "submitted"]
'''


@pytest.mark.parametrize("where", ["out", "parent"])
def test_an_output_folder_that_cannot_be_made_is_refused_before_the_run(tmp_path, monkeypatch, slices, where):
    # --out names a file (or a folder under a file): exit 1 naming it, before the policy is even built (its
    # constructor would leave the mark), and the file untouched.
    module = f"marks_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(MARKS_ITS_RUN)
    monkeypatch.syspath_prepend(str(tmp_path))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker if where == "out" else blocker / "sub"
    mark = tmp_path / "mark"
    r = run_cli(["simulate", "--trace", slices["CTC-SP2-1996-3.1-cln"], "--out", out,
                 "--policy", f"python:{module}:Marks[mark='{mark}']"])
    check_failed(r, 1, f"{out}: cannot write the results here: "
                 + ("it is a file" if where == "out" else f"{blocker} is a file"))
    assert not mark.exists()
    assert blocker.read_text() == "x"


@pytest.mark.parametrize("ext", ["parquet", "json"])
def test_simulate_names_the_conversion_for_a_trace_that_is_not_swf(tmp_path, slices, ext):
    trace = tmp_path / f"t.{ext}"
    assert run_cli(["trace", "convert", slices["CTC-SP2-1996-3.1-cln"], trace]).exit_code == 0
    r = run_cli(["simulate", "--trace", trace, "--out", tmp_path / "o"])
    check_failed(r, 2, f"{trace}: --trace reads SWF traces", f"cosched trace convert {trace} {tmp_path / 't.swf'}")
    assert not (tmp_path / "o").exists()


def test_calibrate_check_of_some_schemes_compares_only_those(tmp_path, monkeypatch):
    # `calibrate --check -s hybrid` refits hybrid only: the committed table's other schemes are not stale.
    # The fit is replaced by the committed table's own hybrid entries, so the check must find a match.
    import json

    from coscheduling import calibrate as cal

    committed = json.loads(cal.committed_table().read_text())
    fitted = {**committed, "efficiency": {"hybrid": committed["efficiency"]["hybrid"]},
              "fit_error": {"hybrid": committed["fit_error"]["hybrid"]}}
    monkeypatch.setattr(cal, "fit", lambda *a, **k: fitted)
    r = run_cli(["calibrate", "--check", "-s", "hybrid", "--work", tmp_path])
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "the table matches a fit with this cosched" in r.stdout
    fitted["efficiency"]["hybrid"] = {**committed["efficiency"]["hybrid"], "high": [1.0, 0.5, 0.5]}
    r = run_cli(["calibrate", "--check", "-s", "hybrid", "--work", tmp_path])
    assert r.exit_code == 1 and "1 value(s) differ" in r.stderr
    assert "differs: efficiency.hybrid.high" in r.stdout and "nls" not in r.stdout.split("differs", 1)[1]


def test_a_configuration_naming_a_parquet_trace_names_the_conversion(tmp_path, slices):
    # The SWF reader itself tells a Parquet file (magic PAR1) from SWF text, so a configuration's
    # workload.trace (read by the core, not by the CLI's --trace check) gets the same clear error.
    trace = tmp_path / "t.parquet"
    assert run_cli(["trace", "convert", slices["CTC-SP2-1996-3.1-cln"], trace]).exit_code == 0
    cfg = tmp_path / "exp.toml"
    cfg.write_text('[workload]\ntrace = "t.parquet"\n[scheduler]\npolicy = "easy"\n')
    r = run_cli(["simulate", cfg, "--out", tmp_path / "o"], cwd=tmp_path)
    check_failed(r, 2, f"{trace}: not an SWF trace but a Parquet file; convert it to SWF first "
                 f"(cosched trace convert {trace} OUT.swf)")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("records", "note"), [("", ""), ("1 0 0 -1 2 -1 -1 2 20 -1 0 1 1 -1 -1 -1 -1 -1\n",
                                                      " (1 dropped: never ran or no processor count)")])
def test_a_trace_without_a_usable_job_is_warned_of(tmp_path, records, note):
    # A header alone, or only a job that never ran (run time -1): the run is empty, and says so.
    trace = tmp_path / "empty.swf"
    trace.write_text(HEADER + records)
    r = run_cli(["simulate", "--trace", trace])
    assert r.exit_code == 0, r.stderr
    assert f"warning: {trace}: no job to simulate{note}; every statistic is empty" in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["demo", "--no-replay", "--out", "{f}"], "{f}: cannot write the results here: it is a file"),
        (["reproduce", "lee-fig2", "--quick", "--out", "{f}/x"], "{f}/x: cannot write the results here: {f} is a file"),
        (["sweep", str(Path(__file__).resolve().parents[2] / "examples" / "sweeps" / "kth.toml"), "--out", "{f}"],
         "{f}: cannot write the results here: it is a file"),
        (["calibrate", "--quick", "-s", "nls", "-o", "{f}/t.json", "--work", "{w}"],
         "{f}: cannot write the results here: it is a file"),
        (["calibrate", "--quick", "-s", "nls", "-o", "{w}.json", "--work", "{f}/w"],
         "{f}/w: cannot write the results here: {f} is a file"),
    ],
    ids=["demo", "reproduce", "sweep", "calibrate-out", "calibrate-work"],
)
def test_commands_refuse_an_output_folder_under_a_file_before_their_runs(tmp_path, args, named):
    # Each names the file in the way before running anything: no work folder is made, no run is made.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    work = tmp_path / "work"
    fill = {"f": str(blocker), "w": str(work)}
    r = run_cli([a.format(**fill) for a in args], cwd=tmp_path)
    check_failed(r, 1, named.format(**fill))
    assert not work.exists() and not Path(f"{work}.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_missing_parquet_trace_is_reported_missing_not_to_be_converted(tmp_path):
    r = run_cli(["simulate", "--trace", tmp_path / "nope.parquet"])
    check_failed(r, 2, f"{tmp_path / 'nope.parquet'}: No such file")
    assert "convert" not in r.stderr
