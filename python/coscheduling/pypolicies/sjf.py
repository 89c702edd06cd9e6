"""Shortest job first with EASY-style backfilling, in Python.

Algorithm: queued jobs are ordered by (estimate, submit, id). Jobs are started in that order while
they fit. With ``backfill=True`` the first job that does not fit gets a reservation at the earliest
time enough processors are free (from the running jobs' start + estimate), and a later job is
started now if it fits now and either ends (now + estimate) by that time or uses only processors
the reservation leaves spare. Running jobs are tracked from this policy's own start decisions.

Parameters: ``backfill`` (bool, default True).
"""

from __future__ import annotations

from collections.abc import Iterable


class ShortestJobFirst:
    def __init__(self, backfill: bool = True) -> None:
        self.backfill = bool(backfill)
        self.queue: dict[int, tuple[float, float, int]] = {}  # job -> (estimate_s, submit_s, procs)
        self.running: dict[int, tuple[float, int]] = {}  # job -> (expected end, procs)

    def on_events(self, now_s: float, events: list[tuple], free_procs: int, total_procs: int
                  ) -> Iterable[tuple]:
        for e in events:
            if e[0] == "submitted":
                _, job, procs, est, submit = e
                self.queue[job] = (est, submit, procs)
            elif e[0] in ("completed", "killed"):
                self.running.pop(e[1], None)
        order = sorted(self.queue, key=lambda j: (self.queue[j][0], self.queue[j][1], j))
        out: list[tuple] = []
        free = free_procs
        shadow, spare = None, 0
        for job in order:
            est, _, procs = self.queue[job]
            if shadow is None:
                if procs <= free:
                    out.append(self._start(job, now_s))
                    free -= procs
                    continue
                if not self.backfill:
                    break
                shadow, spare = self._reservation(procs, free, now_s)
                continue
            if procs <= free and (now_s + est <= shadow or procs <= spare):
                out.append(self._start(job, now_s))
                free -= procs
                if now_s + est > shadow:
                    spare -= procs
        return out

    def _start(self, job: int, now_s: float) -> tuple:
        est, _, procs = self.queue.pop(job)
        self.running[job] = (now_s + est, procs)
        return ("start", job)

    def _reservation(self, need: int, free: int, now_s: float) -> tuple[float, int]:
        """When the head can start (processors free from expected ends) and the processors left then."""
        avail = free
        for end, procs in sorted(self.running.values()):
            avail += procs
            if avail >= need:
                return max(end, now_s), avail - need
        return float("inf"), 0

    def dump(self) -> str:
        return f"sjf (python): {len(self.queue)} queued, {len(self.running)} running"
