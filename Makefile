# cosched: set up, demo and test.
#
#   make demo    create .venv (Python 3.11) if absent, build and install the package
#                (Rust core in release mode), then run `cosched demo`
#   make test    the same setup plus the test extras, then: ruff, cargo test, clippy,
#                the type-stub drift check and pytest (whole-trace runs included).
#                Fails on the first failure.
#   make stubs   regenerate python/coscheduling/_core.pyi from the Rust sources
#   make bless   rewrite the golden results (tests/golden/: small scenarios at both
#                fidelities, the verdicts of every quick reproduction) from this
#                build; review the diff before committing it
#   make bench   replay whole traces (needs ../shared/data/traces or COSCHED_TRACES)
#   make real    build the real-execution C parts into build/real/ (the MPI shim and
#                programs, once per MPI present: Debian mpich libmpich-dev and/or
#                openmpi-bin libopenmpi-dev; gfortran for the Fortran probe)
#   make explore the property tests (proptest, hypothesis) on newly drawn cases:
#                EXPLORE_SEED (default: drawn from /dev/urandom, printed); `make test`
#                draws the same cases on every run (TEST_SEED)
#   make fuzz    a long fuzzing campaign: FUZZ_CASES (default 20000) cases per Rust
#                target (SWF reader, configuration loader, policy strings, registered
#                policies run with random parameters) and FUZZ_EXAMPLES (default 2000)
#                per hypothesis test (API, CLI, real execution's program files)
#
# Needs only Rust (cargo), Python 3.11 and a C toolchain; everything else comes from
# PyPI (into .venv/) and crates.io (into target/).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
CARGO ?= cargo
PIP := $(PY) -m pip --disable-pip-version-check

# Every cargo command (tests, clippy, the stub generator) builds PyO3 against the
# venv's interpreter and runs with its libpython on the loader path.
export PYO3_PYTHON := $(abspath $(PY))
# The build backend (maturin) is installed into the venv and must be found there.
export PATH := $(abspath $(VENV))/bin:$(PATH)
PY_LIBDIR = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')
RUN = env LD_LIBRARY_PATH="$(PY_LIBDIR)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}"

.PHONY: help venv install install-test demo test lint rust-test clippy stubs check-stubs pytest bench real fuzz explore clean

# Property tests draw their cases from this seed in `make test` (proptest's
# PROPTEST_RNG_SEED, hypothesis's --hypothesis-seed), so that a result of the suite does
# not depend on the draw; `make explore` draws new cases, and a failing case found there
# is kept in the test's regression file (proptest) or as an explicit example.
TEST_SEED ?= 1
ifeq ($(origin EXPLORE_SEED),undefined)
EXPLORE_SEED := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
endif

help:
	@sed -n '2,22p' Makefile | sed 's/^# \{0,1\}//'

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

venv: $(PY)

# Editable install: the Python sources are used in place; the Rust extension is
# built by maturin (release profile) into python/coscheduling/.
install: $(PY)
	$(PIP) install 'maturin>=1.9,<2'
	$(PIP) install --no-build-isolation -e .

install-test: $(PY)
	$(PIP) install 'maturin>=1.9,<2'
	$(PIP) install --no-build-isolation -e '.[test]'

demo: install
	$(VENV)/bin/cosched demo

test: install-test real lint rust-test clippy check-stubs pytest
	@echo "make test: all checks passed"

lint: install-test
	$(VENV)/bin/ruff check python tests scripts

rust-test: $(PY)
	PROPTEST_RNG_SEED=$(TEST_SEED) $(RUN) $(CARGO) test --workspace

clippy: $(PY)
	$(RUN) $(CARGO) clippy --workspace --all-targets -- -D warnings

stubs: $(PY)
	$(RUN) $(CARGO) run -p cosched-py --bin stub_gen

check-stubs: $(PY)
	$(RUN) bash scripts/check_stubs.sh

# pytest in two parts: the simulation-only tests (whole-trace runs included: `-m` replaces the
# default "not slow") on PYTEST_WORKERS pytest-xdist workers, a test file's tests on one worker
# (--dist loadfile: a module's fixtures and the session's quick reproductions, which one file's
# tests share, run once); then the tests marked `real` (MPI, node agents, cgroups, Slurm; see
# tests/python/conftest.py) alone, one after the other, as they time what they run.
# REAL_TESTS_UNDER: a command prefix for the second part, e.g. `flock FILE` where several test
# runs share the machine and must not run real execution at the same time.
PYTEST_WORKERS ?= 2
REAL_TESTS_UNDER ?=
pytest: install-test
	$(RUN) $(PY) -m pytest tests/python -q -m "not real" -n $(PYTEST_WORKERS) --dist loadfile \
		--durations=25 --hypothesis-seed=$(TEST_SEED)
	$(RUN) $(REAL_TESTS_UNDER) $(PY) -m pytest tests/python -q -m real --durations=25 \
		--hypothesis-seed=$(TEST_SEED)

real:
	$(MAKE) -C real OUT=$(abspath build/real)

# The tests that compare with tests/golden/ (the quick reproductions write their verdicts there).
GOLDEN_TESTS := tests/python/test_golden.py tests/python/test_reproduce.py::test_quick_version_writes_report_tables_and_plots \
	tests/python/test_reproduce_flexgang.py::test_quick_version_writes_report_with_verdicts \
	tests/python/test_reproduce_ghanesh.py::test_quick_version_writes_report_tables_and_plots \
	tests/python/test_reproduce_lee.py::test_quick_version_writes_report_tables_and_plots

bless: install-test
	COSCHED_BLESS=1 $(RUN) $(PY) -m pytest -q $(GOLDEN_TESTS)
	git status --short tests/golden

bench: install
	$(VENV)/bin/cosched bench

FUZZ_CASES ?= 20000
FUZZ_EXAMPLES ?= 2000
# Debug build on purpose: integer overflow panics there, so the campaign finds it.
fuzz: install-test
	PROPTEST_CASES=$(FUZZ_CASES) $(RUN) $(CARGO) test -p cosched --test fuzz -- --nocapture
	COSCHED_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(RUN) $(PY) -m pytest tests/python/test_reliability.py -q -k "api_extreme or cli_extreme"
	COSCHED_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(RUN) $(PY) -m pytest tests/python/test_fuzz_program.py -q

explore: install-test
	@echo "make explore: EXPLORE_SEED=$(EXPLORE_SEED) (rerun with it to draw the same cases)"
	PROPTEST_RNG_SEED=$(EXPLORE_SEED) $(RUN) $(CARGO) test --workspace
	$(RUN) $(PY) -m pytest -q -m "not real" --hypothesis-seed=$(EXPLORE_SEED) tests/python/test_properties.py \
		tests/python/test_pypolicy.py tests/python/test_reliability.py tests/python/test_fuzz_program.py

clean:
	rm -rf $(VENV) target python/coscheduling/_core*.so .pytest_cache .ruff_cache .hypothesis cosched-demo build

# The Slurm SPANK plugin (needs Debian's libslurm-dev for <slurm/spank.h>).
SPANK_OUT ?= build/real/cosched_spank.so
.PHONY: spank
spank:
	@test -f /usr/include/slurm/spank.h || { echo "error: /usr/include/slurm/spank.h not found: install the Debian package libslurm-dev" >&2; exit 2; }
	mkdir -p $(dir $(SPANK_OUT))
	$(CC) -O2 -Wall -Wextra -Werror -shared -fPIC -o $(SPANK_OUT) real/spank/cosched_spank.c
