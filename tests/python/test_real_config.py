"""`cosched run`'s reading of a configuration (`coscheduling.real.plan`, before anything is started): a syntax
error, a `[real]` value of the wrong type or range and a simulator field of the wrong type each name the file,
the line and column or the field; a position is never that of the loader's internal one-line copy. The checks
after the MPI shim's (scale, time limit, watts) are reached only with `make real` built, as `make test` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from coscheduling import real

from conftest import real_config


def _plan_error(cfg: Path, tmp_path: Path) -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    with pytest.raises(ValueError) as e:
        real.plan(cfg, work)
    return str(e.value)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # `nodes = 2` is a line of [real]: a string there was "invalid literal for int() with base 10: 'two'".
        (lambda t: t.replace("nodes = 2\n", 'nodes = "two"\n'), "field `real.nodes`: an integer, got 'two'"),
        (lambda t: t.replace("nodes = 2\n", "nodes = 1.5\n"), "field `real.nodes`: an integer, got 1.5"),
        (lambda t: t.replace("cpus_per_node = 1\n", "cpus_per_node = 0\n"),
         "field `real.cpus_per_node`: must be >= 1, got 0"),
        (lambda t: t.replace("time_limit_s = 300\n", "time_limit_s = -1\n"),
         "field `real.time_limit_s`: must be > 0, got -1"),
        (lambda t: t.replace("nodes = 2\n", "nodes = 2\nscale = true\n"),
         "field `real.scale`: a finite number, got True"),
        (lambda t: t.replace("nodes = 2\n", "nodes = 2\nsample_ms = nan\n"),
         "field `real.sample_ms`: a finite number"),
        (lambda t: t.replace("nodes = 2\n", "nodes = 2\nidle_watts = -5\n"), "field `real.idle_watts`: must be >= 0"),
        # A simulator field of the wrong type: the simulator's loader names it, without the position it found in
        # the one-line JSON copy it was given (that line and column are not the file's).
        (lambda t: t.replace('preset = "choi2004"\n', 'preset = "choi2004"\nnodes = "two"\n'),
         "real-.*\\.toml: field `node_platform.nodes`: invalid type: string \"two\", expected u32$"),
        # TOML syntax: tomllib's message, now behind the file's name.
        (lambda t: t.replace("seed = 1\n", "seed = \n"), "real-.*\\.toml: Invalid value \\(at line 3, column 8\\)$"),
    ],
    ids=["nodes-string", "nodes-fraction", "cpus-0", "time-limit-negative", "scale-bool", "sample-nan",
         "idle-watts-negative", "simulator-field", "toml-syntax"],
)
def test_a_bad_configuration_names_its_file_and_field(tmp_path: Path, edit, message: str) -> None:  # noqa: ANN001
    import re

    cfg = real_config(tmp_path, [("Msg[pattern=ring]", 2)], {"Msg[pattern=ring]": ["true"]})
    cfg.write_text(edit(cfg.read_text()))
    got = _plan_error(cfg, tmp_path)
    assert got.startswith(f"{cfg}: "), got
    assert re.search(message, got), got


def test_a_json_configuration_s_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    # By hand: line 2 is ` "seed": 1,,`; the second comma, column 12, is where a key was expected.
    cfg = tmp_path / "run.json"
    cfg.write_text('{"fidelity": "process",\n "seed": 1,,\n "real": {"mpi": "mpich"}}\n')
    assert _plan_error(cfg, tmp_path) == (
        f"{cfg}: line 2, column 12: Expecting property name enclosed in double quotes")
    cfg.write_text("[1, 2]\n")
    assert _plan_error(cfg, tmp_path) == f"{cfg}: expected a JSON object of tables, got list"



@pytest.mark.parametrize(("program", "where"), [("../build/real/nope", "no such file here or in "),
                                                ("no-such-command-here", "not found on PATH")])
def test_a_program_that_does_not_exist_is_refused_before_the_run(tmp_path: Path, program: str, where: str) -> None:
    # A relative path is looked up beside the configuration, then in the working folder; a bare name on PATH.
    # Before, the job started and mpiexec failed with "execvp error on file ...".
    cfg = real_config(tmp_path, [("Msg[pattern=ring]", 2)], {"Msg[pattern=ring]": [program, "x"]})
    got = _plan_error(cfg, tmp_path)
    assert got.startswith(f"{cfg}: field `real.programs.Msg[pattern=ring]`: {program}: {where}"), got
    ok = real_config(tmp_path, [("Msg[pattern=ring]", 2)], {"Msg[pattern=ring]": ["true"]})
    spec = real.plan(ok, tmp_path)[0]
    assert spec["jobs"][0]["argv"] == ["true"]
