"""Fuzzing of the program-file reader of real execution (``real/program/ir_parse.c``, the format of
docs/formats/program.md, read by ``cosched-ir-run``). The reader is built with a small driver and,
where the compiler has them, AddressSanitizer and UndefinedBehaviorSanitizer (else ``-ftrapv``).

Hypothesis writes well-formed programs (nested loops, every operation, several ranks) and mutates
some of them (a token replaced by an extreme or malformed value, a line dropped, duplicated or added,
CR line endings, an overlong line, a cut). Every file must give either a result or one error line
``FILE:LINE: what``, never a crash or undefined behaviour; an unmutated program must give its exact
operation count and its compute (loops counted with their repetitions, saturated at 2^63 - 1 ns).
Cases per run: COSCHED_FUZZ_EXAMPLES (40 in the normal test run; ``make fuzz`` raises it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "real" / "program"
DRIVER = Path(__file__).parent / "data" / "ir_parse_driver.c"
EXAMPLES = int(os.environ.get("COSCHED_FUZZ_EXAMPLES", "40"))
I64 = 2**63 - 1
SANITIZERS = {"ASAN_OPTIONS": "exitcode=86:allocator_may_return_null=1:detect_leaks=1",
              "UBSAN_OPTIONS": "halt_on_error=1:exitcode=87:print_stacktrace=1"}


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    exe = tmp_path_factory.mktemp("ir") / "ir_parse_driver"
    sources = [str(DRIVER), str(PROGRAM / "ir_parse.c"), f"-I{PROGRAM}", "-o", str(exe)]
    for flags in (["-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"], ["-O1", "-ftrapv"]):
        if subprocess.run([cc, *flags, *sources], capture_output=True).returncode == 0:
            return exe
    pytest.fail("the program-file reader does not compile")


# ---------------------------------------------------------------------------
# Well-formed programs

amount = st.integers(0, 5000)
count = st.one_of(st.integers(0, 20), st.sampled_from([2**32 - 1, 2**31 - 1, 65536]))
COLLS = ["barrier", "allreduce", "alltoall", "bcast", "reduce"]


def simple_op(ranks: int) -> st.SearchStrategy[str]:
    peer = st.integers(0, ranks - 1)
    tag = st.integers(0, 2**32 - 1)
    return st.one_of(
        st.builds("compute {}".format, st.one_of(amount, st.sampled_from([I64, 2**40]))),
        st.builds("io {}".format, amount),
        st.builds("burst {} {}".format, amount, st.integers(1, 1000)),
        st.builds("{} {} {} {}".format, st.sampled_from(["send", "isend"]), peer, amount, tag),
        st.builds("{} {} {}".format, st.sampled_from(["recv", "irecv"]), st.one_of(peer.map(str), st.just("*")), tag),
        st.builds("reply {} {}".format, amount, tag),
        st.just("wait"),
        st.sampled_from(["coll barrier"]),
        st.builds("coll {} {}".format, st.sampled_from(["allreduce", "alltoall"]), amount),
        st.builds("coll {} {} {}".format, st.sampled_from(["bcast", "reduce"]), peer, amount),
        st.builds("{} {}".format, st.sampled_from(["collbegin", "collend"]), st.sampled_from(COLLS)),
    )


def body(ranks: int, depth: int = 0) -> st.SearchStrategy[list[tuple]]:
    """A list of items: ("op", text) or ("loop", kind, count, items)."""
    op = simple_op(ranks).map(lambda t: ("op", t))
    if depth >= 3:
        return st.lists(op, max_size=4)
    loop = st.tuples(st.just("loop"), st.sampled_from(["loop", "loopuntil"]), count,
                     st.deferred(lambda: body(ranks, depth + 1)))
    return st.lists(st.one_of(op, op, loop), max_size=5)


def render(items: list[tuple]) -> list[str]:
    out: list[str] = []
    for it in items:
        if it[0] == "op":
            out.append(it[1])
        else:
            inner = render(it[3])
            out.append(f"{it[1]} {it[2]} {len(inner)}")
            out += inner
    return out


def compute(items: list[tuple], mult: int = 1) -> int:
    """The rank's compute as the format defines it: loops repeat theirs, loopuntil counts once."""
    total = 0
    for it in items:
        if it[0] == "op":
            kind, *f = it[1].split()
            if kind in ("compute", "burst"):
                total += mult * int(f[0])
        else:
            total += compute(it[3], mult * it[2] if it[1] == "loop" else mult)
    return total


@st.composite
def program(draw: st.DrawFn) -> tuple[list[str], int, list[list[tuple]]]:
    ranks = draw(st.integers(1, 4))
    sections = [draw(body(ranks)) for _ in range(ranks)]
    lines = ["cosched-program 1", "program fuzz", f"ranks {ranks}", f"memory_mb {draw(st.integers(0, 100))}",
             "noise_cv 0", "scale 1", f"collectives {draw(st.sampled_from(['library', 'p2p']))}"]
    if draw(st.booleans()):
        lines.insert(1, "# a comment")
        lines.append("")
    for r, items in enumerate(sections):
        ops = render(items)
        lines += [f"rank {r} {len(ops)}", *ops, "end"]
    return lines, ranks, sections


# ---------------------------------------------------------------------------
# Mutations

JUNK = ["-1", "0", "*", "x", "", "1e3", "9223372036854775807", "9223372036854775808", "18446744073709551616",
        "4294967296", "2147483648", "-9223372036854775808", "٣", "loop", "end", "rank", "0x10", "+5", "1 2"]


@st.composite
def mutation(draw: st.DrawFn, lines: list[str]) -> list[str]:
    lines = list(lines)
    i = draw(st.integers(0, max(0, len(lines) - 1)))
    kind = draw(st.sampled_from(["token", "token", "drop", "dup", "insert", "cut", "long", "count"]))
    if kind == "token" and lines[i].split():
        toks = lines[i].split()
        toks[draw(st.integers(0, len(toks) - 1))] = draw(st.sampled_from(JUNK))
        lines[i] = " ".join(toks)
    elif kind == "drop":
        del lines[i]
    elif kind == "dup":
        lines.insert(i, lines[i])
    elif kind == "insert":
        lines.insert(i, draw(st.sampled_from(["end", "rank 0 0", "loop 1 5", "ranks 2", "wait", "coll bcast 9 1",
                                              "compute", "cosched-program 1", "coll", "collbegin nope"])))
    elif kind == "cut":
        lines = lines[:i]
    elif kind == "long":
        lines[i] = lines[i] + " " * 600 + "1"
    elif kind == "count":
        m = re.match(r"(rank \d+|loop|loopuntil) (\d+) ?(\d*)", lines[i])
        if m:
            lines[i] = f"{m.group(1)} {draw(st.sampled_from(JUNK[:9]))}" + (f" {m.group(3)}" if m.group(3) else "")
    return lines


def parse(exe: Path, text: str, rank: int) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.txt"
        path.write_bytes(text.encode())
        r = subprocess.run([str(exe), str(path), str(rank)], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **SANITIZERS})
        r.args = str(path)  # the name errors must start with
        return r


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                       HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_program_files_give_a_result_or_an_error_naming_file_and_line(reader, data):
    lines, ranks, sections = data.draw(program())
    mutated = data.draw(st.booleans())
    if mutated:
        lines = data.draw(mutation(lines))
    eol = data.draw(st.sampled_from(["\n", "\r\n"]))
    text = eol.join(lines) + eol
    rank = data.draw(st.integers(0, ranks))
    r = parse(reader, text, rank)
    assert r.returncode in (0, 1), (r.returncode, r.stderr, text)
    assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, (r.stderr, text)
    if r.returncode == 1:
        err = r.stderr.strip()
        assert "\n" not in err and re.match(rf"{re.escape(r.args)}:\d+: \S", err), (err, text)
        n = int(err[len(r.args) + 1:].split(":")[0])
        assert 0 <= n <= len(lines) + 1, (err, text)
    if not mutated:
        if rank == ranks:
            assert r.returncode == 1 and f"the program has {ranks} ranks, this is rank {ranks}" in r.stderr
        else:
            assert r.returncode == 0, (r.stderr, text)
            ops = render(sections[rank])
            assert r.stdout.split() == ["ok", str(ranks), str(len(ops)), str(min(compute(sections[rank]), I64))], text


def test_loop_counts_whose_product_overflows_saturate_the_compute(reader):
    """Three nested loops of 2^32 - 1 repetitions around a compute: the product is beyond 64 bits;
    the reader saturates the rank's compute instead of overflowing a signed integer."""
    text = "cosched-program 1\nranks 1\nrank 0 4\nloop 4294967295 3\nloop 4294967295 2\nloop 4294967295 1\n" \
           "compute 5\nend\n"
    r = parse(reader, text, 0)
    assert "runtime error" not in r.stderr and r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok", "1", "4", str(I64)]
