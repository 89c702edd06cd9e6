"""The Lublin-Feitelson workload model of rigid parallel jobs.

U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers: modeling the
characteristics of rigid jobs", J. Parallel Distrib. Comput. 63(11), 2003. Parameters are the
model's published values for batch jobs, interactive jobs and the typeless "whole sample".

- **Size**: serial with probability ``serial_prob``; otherwise ``2**x`` rounded, with ``x`` from a
  two-stage uniform (``ulow``..``umed`` with probability ``uprob``, else ``umed``..``uhi``), ``x``
  itself rounded first for power-of-two jobs (probability ``pow2_prob``).
- **Runtime**: ``exp(hg)`` with ``hg`` hyper-gamma: gamma(a1, b1) with probability
  ``p = pa * size + pb`` (clipped to [0, 1]), else gamma(a2, b2); redrawn above 12 (e^12 s).
- **Arrivals**: a daily cycle of 48 half-hour buckets weighted by the gamma(anum, bnum) density
  over the hours 11..35 (folded onto the day), normalized to mean 1; each inter-arrival draws
  ``exp(g)`` seconds, ``g`` ~ gamma(aarr * arar, barr) (redrawn above 13), worth ``exp(g)/1800``
  points that are spent bucket by bucket at the bucket's weight. Batch and interactive jobs arrive
  as two such streams, merged by time.

Scaling to a machine of ``P`` nodes (the published values are for 128 nodes, ``uhi = 7``): ``uhi``
becomes ``log2(P)`` for batch and the whole sample and ``log2(P) - 1.5`` for interactive jobs, and
``umed`` keeps its published distance below ``uhi``; sizes are capped at ``P``. Times are rounded
to whole seconds, as in SWF. Draws come from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.special import gammainc

__all__ = ["LublinParams", "BATCH", "INTERACTIVE", "WHOLE", "lublin_jobs"]

BUCKETS = 48
SECONDS_IN_BUCKET = 86400 / BUCKETS
CYCLIC_DAY_START = 11
TOO_MUCH_TIME = 12.0
TOO_MUCH_ARRIVE_TIME = 13.0


@dataclass(frozen=True)
class LublinParams:
    serial_prob: float
    pow2_prob: float
    ulow: float
    umed: float
    uhi: float
    uprob: float
    a1: float
    b1: float
    a2: float
    b2: float
    pa: float
    pb: float
    aarr: float
    barr: float
    anum: float
    bnum: float
    arar: float


#: Batch jobs (the model's published batch parameters, 128-node machine).
BATCH = LublinParams(0.2927, 0.6686, 1.2, 5.0, 7.0, 0.875, 6.57, 0.823, 639.1, 0.0156, -0.003, 0.6986,
                     6.0415, 0.8531, 6.1271, 5.2740, 1.0519)
#: Interactive jobs.
INTERACTIVE = LublinParams(0.1541, 0.625, 1.0, 3.0, 5.5, 0.705, 3.8351, 0.6605, 7.073, 0.6856, -0.0118, 0.9156,
                           6.5510, 0.6621, 8.9186, 3.6680, 0.9797)
#: The whole sample (no job types).
WHOLE = LublinParams(0.244, 0.576, 0.8, 4.5, 7.0, 0.86, 4.2, 0.94, 312.0, 0.03, -0.0054, 0.78,
                     10.2303, 0.4871, 8.1737, 3.9631, 1.0225)


def scaled(p: LublinParams, nodes: int, hi_offset: float) -> LublinParams:
    uhi = math.log2(nodes) - hi_offset
    return replace(p, uhi=uhi, umed=uhi - (p.uhi - p.umed), ulow=min(p.ulow, uhi))


class _Stream:
    """One arrival stream (batch or interactive)."""

    def __init__(self, p: LublinParams, rng: np.random.Generator) -> None:
        self.p, self.rng = p, rng
        idx = [(i - 1) % BUCKETS for i in range(CYCLIC_DAY_START, BUCKETS + CYCLIC_DAY_START)]
        w = np.zeros(BUCKETS)
        for i, k in zip(range(CYCLIC_DAY_START, BUCKETS + CYCLIC_DAY_START), idx, strict=True):
            w[k] = gammainc(p.anum, (i + 0.5) / p.bnum) - gammainc(p.anum, (i - 0.5) / p.bnum)
        self.weights = w / w.mean()
        self.bucket, self.points, self.reminder, self.time = 0, 0.0, 0.0, 0.0
        self.advance()

    def advance(self) -> None:
        p, rng = self.p, self.rng
        while True:
            g = rng.gamma(p.aarr * p.arar, p.barr)
            if g <= TOO_MUCH_ARRIVE_TIME:
                break
        self.points += math.exp(g) / SECONDS_IN_BUCKET
        nxt = 0.0
        while self.points > self.weights[self.bucket]:
            self.points -= self.weights[self.bucket]
            self.bucket = (self.bucket + 1) % BUCKETS
            nxt += SECONDS_IN_BUCKET
        rem = self.points / self.weights[self.bucket]
        nxt += SECONDS_IN_BUCKET * (rem - self.reminder)
        self.reminder = rem
        self.time += nxt

    def size(self, nodes: int) -> int:
        p, rng = self.p, self.rng
        u = rng.random()
        if u <= p.serial_prob:
            return 1
        x = rng.uniform(p.ulow, p.umed) if rng.random() <= p.uprob else rng.uniform(p.umed, p.uhi)
        if u <= p.serial_prob + p.pow2_prob:
            x = math.floor(x + 0.5)
        return max(1, min(nodes, math.floor(2.0**x + 0.5)))

    def runtime(self, size: int) -> int:
        p, rng = self.p, self.rng
        prob = min(1.0, max(0.0, p.pa * size + p.pb))
        while True:
            a, b = (p.a1, p.b1) if rng.random() <= prob else (p.a2, p.b2)
            hg = rng.gamma(a, b)
            if hg <= TOO_MUCH_TIME:
                return max(1, math.floor(math.exp(hg)))


def lublin_jobs(n: int, nodes: int, seed: int, *, types: bool = True) -> pd.DataFrame:
    """``n`` jobs of the model for a machine of ``nodes`` nodes: columns ``submit_s``, ``runtime_s``,
    ``procs``, ``interactive`` (bool). ``types=False`` uses the whole-sample parameters."""
    if n < 0:
        raise ValueError(f"jobs: must be >= 0, got {n}")
    if nodes < 2:
        raise ValueError(f"nodes: must be >= 2, got {nodes}")
    rng = np.random.default_rng(seed)
    if types:
        streams = {False: _Stream(scaled(BATCH, nodes, 0.0), rng), True: _Stream(scaled(INTERACTIVE, nodes, 1.5),
                                                                                  rng)}
    else:
        streams = {True: _Stream(scaled(WHOLE, nodes, 0.0), rng)}
    rows = []
    for _ in range(n):
        kind = min(streams, key=lambda k: (streams[k].time, not k))  # a tie goes to the interactive stream
        s = streams[kind]
        submit = s.time
        s.advance()
        size = s.size(nodes)
        rows.append((round(submit), s.runtime(size), size, kind))
    return pd.DataFrame(rows, columns=["submit_s", "runtime_s", "procs", "interactive"])
