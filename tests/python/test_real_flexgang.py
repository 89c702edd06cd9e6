"""Flexible gang scheduling for real: `cosched run` with `gang[...,alternate=true]` runs, on a virtual node
that the active row leaves idle, another row's rank, by freezing and thawing each job's rank node by node
(its freezer cgroup on that virtual node), as the simulator's engine does with the same policy object.

Needs root, the v1 freezer cgroup hierarchy, MPICH and `make real` (CI provides them; without them the test
fails, it never skips). Two virtual nodes of one CPU; job 0 has 1 rank (row 0, node 0), job 1 has 2 ranks
(row 1, both nodes): in row 0's slots node 1 has no process of the active row. Assertions are on the
controller's slot records, on the freezer states seen while the run goes on (polled, generous deadline), and
on the agent's per-rank CPU samples compared between the two policies (medians of 3 runs, relative
tolerance, no absolute time).
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
from test_real_agent import RING, _foreign_runs, finegrain, leftovers  # noqa: F401 (fixtures)

from coscheduling import real

from conftest import real_config

FREEZER = Path("/sys/fs/cgroup/freezer")
PLAIN = "gang[quantum_ms=100,rows=2]"
ALTERNATE = "gang[quantum_ms=100,rows=2,alternate=true]"


def config(tmp: Path, exe: Path, policy: str) -> Path:
    """An I/O-bound 1-rank job and a 2-rank ring, both running `exe` (``conftest.real_config``)."""
    programs = {"io-bound": [exe, "5000", "200"], RING: [exe, "1500", "200"]}
    return real_config(tmp, [("io-bound", 1), (RING, 2)], programs, policy=policy, time_limit_s=600,
                       extra="sample_ms = 20")


class SplitWatch:
    """Polls the run's per-node freezer cgroups of job 1 (every 10 ms, while both exist): the share of the
    polls that find its rank on one node thawed while its rank on the other is frozen. A switch freezes or
    thaws the two one after the other, so any run shows such a state for a moment; alternate shows it for
    row 0's slots."""

    def __init__(self) -> None:
        self.polls = 0
        self.split = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._poll, daemon=True)
        self._t.start()

    def _state(self, node: int) -> str | None:
        for d in FREEZER.glob(f"cosched.r*.n{node}/j1"):
            try:
                return (d / "freezer.state").read_text().strip()
            except OSError:
                return None
        return None

    def _poll(self) -> None:
        while not self._stop.is_set():
            states = {self._state(0), self._state(1)}
            if None not in states:
                self.polls += 1
                self.split += states == {"THAWED", "FROZEN"}
            time.sleep(0.01)

    def stop(self) -> float:
        self._stop.set()
        self._t.join(timeout=10)
        return self.split / max(self.polls, 1)


def rank_cpu(out: Path) -> dict[tuple[int, int], float]:
    """CPU seconds of each (job, rank) in the agent's samples."""
    tl = pd.read_parquet(out / "timeline.parquet")
    on = tl[tl["cpu"] >= 0]
    return {(int(j), int(r)): float((g["end_s"] - g["start_s"]).sum()) for (j, r), g in on.groupby(["job", "rank"])}


Run = tuple[dict[str, Any], dict[tuple[int, int], float], float]


def run_once(tmp: Path, exe: Path, policy: str) -> Run:
    out = tmp / f"out-{time.monotonic_ns()}"
    w = SplitWatch()
    try:
        s = real.run(config(tmp, exe, policy), out)
    finally:
        split = w.stop()
    assert s["real"]["jobs_failed"] == 0, s["real"]["errors"]
    return s, rank_cpu(out), split


def test_alternate_fills_the_idle_node_with_the_other_rows_rank(tmp_path: Path, finegrain: Path) -> None:  # noqa: F811
    ratios: dict[str, list[float]] = {PLAIN: [], ALTERNATE: []}
    splits: dict[str, list[float]] = {PLAIN: [], ALTERNATE: []}
    for _ in range(3):
        for policy in (PLAIN, ALTERNATE):
            s, cpu, split = run_once(tmp_path, finegrain, policy)
            splits[policy].append(split)
            slots = s["real"]["gang_slots"]
            row0 = [g["nodes"] for g in slots if g["row"] == 0 and 0 in g["nodes"]]
            assert row0, slots
            # Job 0's node; job 1's rank r is on node r, so its rank on the other node is the one row 0
            # leaves idle.
            lone = row0[0].index(0)
            other = 1 - lone
            assert all(n[lone] == 0 for n in row0), row0
            if policy == ALTERNATE:
                # The policy's decision, carried out: while job 0 runs in row 0's slots, the other node
                # runs job 1's rank (idle without alternate) and job 1's rank beside job 0 stays frozen.
                assert any(n[other] == 1 for n in row0), row0
            else:
                assert all(n[other] == -1 for n in row0), row0
            # Job 1's rank on the other node over its rank beside job 0: about 1 under plain gang (both
            # run in row 1's slots only); with alternate the first also runs in row 0's slots.
            ratios[policy].append(cpu[(1, other)] / max(cpu[(1, lone)], 1e-3))
    med = {k: statistics.median(v) for k, v in ratios.items()}
    split_med = {k: statistics.median(v) for k, v in splits.items()}
    print("job 1 CPU ratio medians:", med, "runs:", ratios, "split share medians:", split_med, "runs:", splits)
    # The freezers held job 1's rank thawed on one node and frozen on the other for a real share of the
    # time, not only for the moment of a switch.
    assert split_med[ALTERNATE] >= 0.1, split_med
    assert split_med[ALTERNATE] >= 3 * split_med[PLAIN], split_med
    assert med[ALTERNATE] >= 1.3 * med[PLAIN], med
    assert not leftovers()
