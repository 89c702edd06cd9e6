"""First come, first served, in Python: the Rust ``fcfs`` policy line by line (a differential test
checks that both give the same schedule).

Algorithm: jobs wait in submission order; on every batch of events the queue head is started while
it fits in the free processors; a head that does not fit blocks the queue. Parameters: none.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class Fcfs:
    def __init__(self) -> None:
        self.queue: deque[tuple[int, int]] = deque()

    def on_events(self, now_s: float, events: list[tuple], free_procs: int, total_procs: int
                  ) -> Iterable[tuple]:
        for e in events:
            if e[0] == "submitted":
                self.queue.append((e[1], e[2]))
        out = []
        free = free_procs
        while self.queue and self.queue[0][1] <= free:
            job, procs = self.queue.popleft()
            free -= procs
            out.append(("start", job))
        return out

    def dump(self) -> str:
        return f"fcfs (python): {len(self.queue)} queued"
