"""Adversarial use of the CLI, the Python API and Python policies: every case ends with the
documented exit code and a one-line message (no traceback, no PanicException), runs stop on
Ctrl-C, and pool workers die with their parent. Hypothesis drives the API and the CLI with
random extreme inputs (cases per test: the profile's max_examples, raised by ``make fuzz``)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import coscheduling

from conftest import run_cli, run_cli_process, wait_for

HEADER = "; MaxProcs: 4\n"
PY = Path(sys.executable)
COSCHED = PY.parent / "cosched"
#: Cases per hypothesis test (``make fuzz`` sets COSCHED_FUZZ_EXAMPLES for a long campaign).
EXAMPLES = int(os.environ.get("COSCHED_FUZZ_EXAMPLES", "40"))


def line(job: int, submit: str, run: str, procs: int = 1, req: str = "-1") -> str:
    return f"{job} {submit} -1 {run} {procs} -1 -1 {procs} {req} -1 1 1 1 -1 -1 -1 -1 -1\n"


def check(r, code: int, *needles: str) -> None:
    text = r.stdout + r.stderr
    assert r.exit_code == code, (r.exit_code, text)
    assert "Traceback" not in text and "PanicException" not in text, text
    flat = " ".join(r.stderr.split())  # the console wraps long lines
    for n in needles:
        assert " ".join(n.split()) in flat, (n, r.stderr)


# ---------------------------------------------------------------------------
# Times beyond the representable range (issue cases 1 and 5)


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative", "gang[rows=3]"])
@pytest.mark.parametrize(
    ("submit", "run", "req", "field"),
    [("0", "4000000000", "-1", "field 4 (run_time)"), ("1000000000000", "10", "-1", "field 2 (submit_time)"),
     ("0", "10", "1000000000000000", "field 9 (requested_time)")],
    ids=["run-4e9", "submit-1e12", "requested-1e15"],
)
def test_times_beyond_the_range_are_bad_input_naming_line_and_field(tmp_path, policy, submit, run, req, field):
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER + line(1, "0", "5") + line(2, submit, run, req=req))
    out = tmp_path / "out"
    r = run_cli(["simulate", "--trace", trace, "--policy", policy, "--out", out])
    check(r, 2, f"{trace}:3: {field}", "outside the supported range")
    assert not out.exists()


def test_a_schedule_beyond_the_range_is_an_engine_error_not_saturated_times(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER.replace("4", "1") + "".join(line(i, "0", "1000000000") for i in range(1, 11)))
    r = run_cli(["simulate", "--trace", trace, "--policy", "gang[rows=3]"])
    check(r, 1, "beyond the representable simulated time")


def test_api_runtime_beyond_the_range_is_a_value_error():
    jobs = pd.DataFrame({"submit_s": [0.0], "runtime_s": [1e12], "procs": [1]})
    with pytest.raises(ValueError, match="runtime_s: time 1000000000000.0 s is outside the supported range"):
        coscheduling.run(jobs=jobs, platform={"nodes": 4})


# ---------------------------------------------------------------------------
# Configuration values (issue cases 3, 6, 9)


def process_config(tmp_path: Path, job: str, extra: str = "") -> Path:
    p = tmp_path / "c.toml"
    p.write_text(
        f'fidelity = "process"\n[node_platform]\npreset = "lee4"\n{extra}\n[workload]\njobs = [{job}]\n'
        '[scheduler]\nnode_policy = "nls"\nmpl = 2\n'
    )
    return p


@pytest.mark.parametrize(
    ("job", "extra", "needle"),
    [
        ('{ app = "Emp", procs = 4, noise_cv = 1e300 }', "", "field `workload.jobs[0].noise_cv`"),
        ('{ app = "Emp", procs = 4 }', "cpu_speed = 1e-300", "cpu_speed: must be a finite number between"),
        ('{ app = "Emp", procs = 4 }', "cpu_speed = 1e-9", "cpu_speed"),
        ('{ app = "Emp[quanta=1e12]", procs = 4 }', "", "field `workload.jobs[0]`"),
        ('{ app = "Emp", procs = 32 }', "", "field `workload.jobs[0]`: app Emp at 32 processes: needs 32 nodes"),
        ('{ app = "Emp", procs = 4, ranks_per_node = 0 }', "", "field `workload.jobs[0].ranks_per_node`"),
    ],
    ids=["noise_cv", "cpu_speed-1e-300", "cpu_speed-1e-9", "quanta-1e12", "too-wide", "ranks_per_node-0"],
)
def test_implausible_configuration_values_name_file_and_field(tmp_path, job, extra, needle):
    cfg = process_config(tmp_path, job, extra)
    r = run_cli(["simulate", cfg, "--out", tmp_path / "out"])
    check(r, 2, str(cfg), needle)
    assert not (tmp_path / "out").exists()


def test_the_time_limit_is_an_engine_error_naming_the_key(tmp_path):
    cfg = process_config(tmp_path, '{ app = "Emp", procs = 4 }', "")
    cfg.write_text(cfg.read_text() + "[limits]\nmax_sim_time_s = 0.01\n")
    r = run_cli(["simulate", cfg, "--out", tmp_path / "out"])
    check(r, 1, str(cfg), "limits.max_sim_time_s")


# ---------------------------------------------------------------------------
# SWF edges (issue case 9)


def test_cr_only_line_endings_and_a_bom_are_read(tmp_path):
    text = "; Version: 2.2\n" + HEADER + line(1, "0", "10") + line(2, "5", "10")
    for name, data in [("cr.swf", text.replace("\n", "\r").encode()), ("bom.swf", b"\xef\xbb\xbf" + text.encode())]:
        trace = tmp_path / name
        trace.write_bytes(data)
        r = run_cli(["simulate", "--trace", trace, "--policy", "fcfs"])
        check(r, 0)


def test_maxprocs_beyond_u32_says_so(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxProcs: 4294967296\n" + line(1, "0", "10"))
    r = run_cli(["simulate", "--trace", trace])
    check(r, 2, "header field MaxProcs: larger than the largest supported value 4294967295")


def test_empty_parameters_in_a_policy_string_are_refused(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER + line(1, "0", "10"))
    r = run_cli(["simulate", "--trace", trace, "--policy", "gang[rows=3,,]"])
    check(r, 2, "empty parameter")


@pytest.mark.parametrize(("spec", "pos"), [("gang[rows=3,,]", 13), ("easy[a", 7), ("python:m:C[x]", 12),
                                           ("ea sy", 3)])
def test_one_parser_gives_one_error_format_everywhere(tmp_path, spec, pos):
    from coscheduling import _core, real, report

    with pytest.raises(ValueError) as e:
        _core.parse_spec(spec)
    msg = str(e.value)
    assert msg.startswith(f'cannot parse "{spec}" at character {pos}: '), msg
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER + line(1, "0", "10"))
    check(run_cli(["simulate", "--trace", trace, "--policy", spec]), 2, msg)
    with pytest.raises(ValueError, match="field `scheduler.policy`: cannot parse"):
        real._policy(tmp_path / "r.toml", spec)
    assert report.gang_params(spec) is None


@pytest.mark.parametrize("spec", ["easy", "python:coscheduling.pypolicies.fcfs:Fcfs"])
def test_surrounding_whitespace_of_a_policy_string_is_ignored_everywhere(tmp_path, spec):
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER + line(1, "0", "10") + line(2, "5", "10", procs=4))
    plain = coscheduling.run(trace, policy=spec)
    padded = coscheduling.run(trace, policy=f"  {spec}\t")
    assert plain.jobs.equals(padded.jobs)
    r = run_cli(["simulate", "--trace", trace, "--policy", f" {spec} "])
    check(r, 0)


def test_policy_none_is_a_value_error(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER + line(1, "0", "10"))
    with pytest.raises(ValueError, match="policy: expected a policy name"):
        coscheduling.run(trace, policy=None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Python policies (issue case 8)

POLICIES_PY = '''
import sys
import threading
class Raise:
    def on_events(self, now, events, free, total):
        raise ValueError("boom")
class Int:
    def on_events(self, now, events, free, total):
        return [3]
class Exit:
    def on_events(self, now, events, free, total):
        sys.exit(3)
class NotIterable:
    def on_events(self, now, events, free, total):
        return 5
class BadJob:
    def on_events(self, now, events, free, total):
        return [("start", "zero")]
class Short:
    def on_events(self, now, events, free, total):
        return [("start_on", 0)]
class Insomniac:
    """Starts each job, then asks to be woken 1 ms later, for ever."""
    def on_events(self, now, events, free, total):
        out = [("start", e[1]) for e in events if e[0] == "submitted"]
        return out + [("wake_at", now + 0.001)]
'''


@pytest.fixture()
def policy_module(tmp_path, monkeypatch):
    (tmp_path / "badpolicies.py").write_text(POLICIES_PY)
    monkeypatch.syspath_prepend(str(tmp_path))
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER + line(1, "0", "10"))
    return trace


@pytest.mark.parametrize(
    ("cls", "needle"),
    [("Raise", "on_events raised ValueError: boom"), ("Int", "malformed decision 3: not a tuple"),
     ("Exit", "on_events raised SystemExit: 3"), ("NotIterable", "must return an iterable of decisions, got 5"),
     ("BadJob", "malformed decision ('start', 'zero')"), ("Short", "expected 3 items, got 2")],
)
def test_python_policy_failures_are_policy_errors(policy_module, cls, needle):
    r = run_cli(["simulate", "--trace", policy_module, "--policy", f"python:badpolicies:{cls}"])
    check(r, 2, f"policy python:badpolicies:{cls} failed at t=0.000000000s on the events [('submitted', 0",
          needle)


@pytest.mark.parametrize(
    ("limits", "needle"),
    [("max_events = 500", "event limit 500 reached"),
     ("max_sim_time_s = 0.5", "time limit 0.500000000s reached")],
)
def test_job_level_run_limits_stop_a_policy_that_keeps_waking_up(policy_module, limits, needle):
    cfg = policy_module.parent / "insomniac.toml"
    cfg.write_text(f'[workload]\ntrace = "{policy_module.name}"\n[scheduler]\n'
                   f'policy = "python:badpolicies:Insomniac"\n[limits]\n{limits}\n')
    r = run_cli(["simulate", cfg, "--out", policy_module.parent / "out"])
    key = "limits." + limits.split()[0]
    check(r, 1, str(cfg), needle, f"raise `{key}`")
    assert not (policy_module.parent / "out").exists()


def test_python_policy_exception_is_the_cause(policy_module):
    with pytest.raises(RuntimeError) as info:
        coscheduling.run(policy_module, policy="python:badpolicies:Raise")
    assert isinstance(info.value.__cause__, ValueError)


# ---------------------------------------------------------------------------
# Interruption and orphans (issue cases 6, 7, 10)

# A run that is still going when the "running" case interrupts it 4 s after start-up: this pair takes about 30 s on
# an idle machine (100,000 quanta each took 3.5 s, too close to 4 s).
LONG = '{ app = "Msg[quanta=1000000]", procs = 4 }, { app = "Msg[quanta=1000000]", procs = 4 }'


def interrupt_after(args: list[str], cwd: Path, delay: float) -> tuple[int, str, float]:
    """Ctrl-C `delay` seconds after the command has imported `coscheduling.entry` (whose `main` installs the
    handler at once); before that the interpreter's own start-up is not the command's to handle, and on a
    loaded machine it alone can take longer than a fixed delay from the spawn. `-X importtime` tells when."""
    p = subprocess.Popen([str(PY), "-X", "importtime", str(COSCHED), *map(str, args)], cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    entered = threading.Event()

    def drain() -> None:
        for line in p.stderr:
            if line.startswith("import time:"):
                if line.rstrip().endswith("| coscheduling.entry"):
                    entered.set()
            else:
                lines.append(line)
        entered.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    assert entered.wait(120), "the command never imported coscheduling.entry"
    time.sleep(delay)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    reader.join(timeout=60)
    return p.returncode, "".join(lines), time.monotonic() - t0


def test_the_command_reaches_its_ctrl_c_handler_without_importing_anything_slow():
    # Before coscheduling.entry.main's handler, only the package's __init__ and entry run: a slow
    # import there (typing: tens of ms) was a window in which Ctrl-C printed a traceback.
    code = "import sys, coscheduling.entry; print(sorted(set(sys.modules) & {'typing', 'coscheduling.api', 'pandas'}))"
    r = subprocess.run([str(PY), "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]", r.stdout


def test_ctrl_c_during_the_imports_of_the_command_exits_130_with_one_line():
    # `cli.main` imports click before its own handler; under load that import took seconds, and a
    # Ctrl-C then printed a KeyboardInterrupt traceback and the process died by SIGINT (-2).
    code = ("import coscheduling.cli as cli, coscheduling.entry as entry\n"
            "def importing_click():\n    raise KeyboardInterrupt\n"
            "cli.main = importing_click\nentry.main()\n")
    r = subprocess.run([str(PY), "-c", code], capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (130, "cosched: interrupted\n"), (r.returncode, r.stderr)


def test_an_interrupted_command_exits_at_once_whatever_python_would_run_at_exit():
    # After the message nothing may run: an exit handler that interrupts again (as a second Ctrl-C
    # or a KeyboardInterrupt still pending would) changes neither the exit code nor the output.
    code = ("import atexit, coscheduling.entry as entry\n"
            "def again():\n    raise KeyboardInterrupt\n"
            "atexit.register(again)\nprint('partial output', end='')\nentry.interrupted()\n")
    r = subprocess.run([str(PY), "-c", code], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (130, "partial output", "cosched: interrupted\n"), r


@pytest.mark.skipif(not COSCHED.is_file(), reason="needs the installed cosched command")
@pytest.mark.parametrize("delay", [0.3, 0.8, 4.0], ids=["importing", "start-up", "running"])
def test_ctrl_c_exits_130_with_one_line_at_any_moment(tmp_path, delay):
    cfg = process_config(tmp_path, LONG)
    rc, err, _ = interrupt_after(["simulate", cfg, "--out", tmp_path / "out"], tmp_path, delay)
    assert rc == 130, err
    assert err.strip().splitlines()[-1:] == ["cosched: interrupted"], err
    assert "Traceback" not in err


def process_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_pool_workers_die_with_their_parent(tmp_path, sig):
    script = tmp_path / "pool.py"
    script.write_text(
        "import concurrent.futures as cf, multiprocessing, os, time\n"
        "from coscheduling.workers import die_with_parent\n"
        "def work(_):\n    time.sleep(60)\n"
        "if __name__ == '__main__':\n"
        "    ctx = multiprocessing.get_context('spawn')\n"
        "    with cf.ProcessPoolExecutor(2, mp_context=ctx, initializer=die_with_parent,"
        " initargs=(os.getpid(),)) as pool:\n"
        "        fs = [pool.submit(work, i) for i in range(2)]\n"
        "        print('ready', flush=True)\n"
        "        time.sleep(60)\n"
    )
    p = subprocess.Popen([str(PY), str(script)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"

    def workers_and_tracker() -> list[int] | None:
        kids = children(p.pid)
        return kids if len(kids) >= 3 else None

    kids = wait_for(workers_and_tracker, 30, "the 2 workers and the resource tracker", interval=0.1)
    p.send_signal(sig)
    p.wait(timeout=30)
    try:
        wait_for(lambda: not any(process_alive(k) for k in kids), 10,
                 lambda: f"the children to die with their parent (left: {[k for k in kids if process_alive(k)]})",
                 interval=0.1)
    finally:
        for k in kids:  # clean up what this test started before failing
            if process_alive(k):
                os.kill(k, signal.SIGKILL)


# ---------------------------------------------------------------------------
# Hypothesis: the Python API with extreme job tables never panics


finite_or_not = st.one_of(
    st.floats(min_value=0, max_value=2e9), st.sampled_from([0.0, 1e9, 1e9 + 1, 4e9, 9.3e9, 1e12, 1e300,
                                                             float("nan"), float("inf"), -1.0]))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(finite_or_not, finite_or_not, st.integers(-1, 10), finite_or_not), min_size=1, max_size=8),
    policy=st.sampled_from(["fcfs", "easy", "conservative", "gang[rows=3]", "timeshare",
                            "python:coscheduling.pypolicies.fcfs:Fcfs"]),
)
def test_api_extreme_job_tables_give_a_result_or_a_clear_error(rows, policy):
    jobs = pd.DataFrame(rows, columns=["submit_s", "runtime_s", "procs", "requested_s"])
    try:
        res = coscheduling.run(jobs=jobs, platform={"nodes": 4}, policy=policy)
    except ValueError as e:
        assert "jobs" in str(e) or "column" in str(e) or "procs" in str(e), e
        return
    except RuntimeError as e:
        assert "internal error" not in str(e), e
        return
    df = res.jobs if hasattr(res, "jobs") else None
    summary = res.summary
    assert summary["utilization"] <= 1 + 1e-9
    if df is not None:
        started = df["start_s"].notna()
        assert (df.loc[started, "start_s"] >= df.loc[started, "submit_s"]).all()
        assert (df.loc[started, "end_s"] >= df.loc[started, "start_s"]).all()


@settings(max_examples=max(5, EXAMPLES // 4), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                                   HealthCheck.function_scoped_fixture])
@given(
    submit=st.sampled_from(["0", "5", "1e9", "1000000001", "9.3e9", "1e300", "nan", "-5", "x"]),
    run=st.sampled_from(["0", "10", "1e9", "4e9", "1e300", "-1", "inf"]),
    procs=st.sampled_from(["1", "4", "5", "0", "-1", "4294967296", "1.5"]),
    policy=st.sampled_from(["fcfs", "easy", "conservative", "gang[rows=3]", "timeshare", " easy", "gang[rows=3,,]"]),
)
def test_cli_extreme_traces_exit_0_1_or_2_without_traceback(tmp_path_factory, submit, run, procs, policy):
    d = tmp_path_factory.mktemp("cli")
    trace = d / "t.swf"
    extreme = f"2 {submit} -1 {run} {procs} -1 -1 {procs} -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
    trace.write_text(HEADER + line(1, "0", "10") + extreme)
    r = run_cli(["simulate", "--trace", trace, "--policy", policy, "--out", d / "out"])
    text = r.stdout + r.stderr
    assert r.exit_code in (0, 1, 2), text
    assert "Traceback" not in text and "PanicException" not in text and "internal error" not in text, text
    if r.exit_code != 0:
        assert not (d / "out").exists()


def test_cli_subprocess_bad_input_exit_2(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER + line(1, "0", "4000000000"))
    r = run_cli_process(["simulate", "--trace", trace], tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("names_staging_copy", [False, True])
def test_a_full_disk_names_the_file(tmp_path, names_staging_copy):
    from coscheduling.output import write_atomic

    def full(path: Path) -> None:
        if names_staging_copy:  # as open() or pyarrow report it: the staging copy's path
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as info:
        write_atomic(tmp_path / "o", {"jobs.csv": full})
    assert info.value.filename == str(tmp_path / "o" / "jobs.csv")
    assert info.value.errno == errno.ENOSPC
    assert not (tmp_path / "o").exists()


def test_duplicate_job_ids_are_refused_in_a_job_table():
    jobs = pd.DataFrame({"job_id": [5, 7, 5], "submit_s": [0.0, 1.0, 2.0], "runtime_s": [1.0] * 3, "procs": [1] * 3})
    with pytest.raises(ValueError, match="job id 5 appears in rows 0 and 2"):
        coscheduling.run(jobs=jobs, platform={"nodes": 4})


def test_duplicate_job_numbers_of_a_trace_are_reported(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text(HEADER + line(1, "0", "10") + line(1, "5", "10"))
    res = coscheduling.run(trace, policy="fcfs")
    assert any("reuse the job number" in w for w in res.warnings), res.warnings
