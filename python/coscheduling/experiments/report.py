"""Pieces of an experiment report: findings with verdicts, markdown tables, plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

REPRODUCED = "reproduced"
PARTLY = "partly reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_APPLICABLE = "not applicable"
#: A compared difference whose 95% interval contains zero: neither side wins.
TIE = "tie"
#: An equivalence claim ("almost identical") whose intervals neither fit inside the stated band nor
#: lie wholly outside it: the seeds cannot tell.
UNDECIDED = "undecided"
#: Half-width of a magnitude band, as a share of the paper's number: a stated "65%" is reproduced
#: by a difference in 65% x (1 ± MAGNITUDE_BAND), i.e. 32.5–97.5%.
MAGNITUDE_BAND = 0.5


@dataclass(frozen=True)
class Finding:
    """One of the paper's claims and what our numbers say about it."""

    #: The paper's claim, in its words or close to them, with its location.
    claim: str
    #: The rule applied to our numbers (so a reader can check the verdict).
    rule: str
    #: Our numbers behind the verdict.
    ours: str
    #: One of REPRODUCED, PARTLY, NOT_REPRODUCED, NOT_APPLICABLE, TIE, UNDECIDED.
    verdict: str
    #: For a claim that does not reproduce: the reason the model gives.
    why: str = ""


def verdict(ok: bool, partly: bool = False) -> str:
    if ok:
        return REPRODUCED
    return PARTLY if partly else NOT_REPRODUCED


@dataclass(frozen=True)
class Diff:
    """A compared difference over seeds: the mean of the per-seed differences and its 95% confidence
    interval (Student t with n - 1 degrees of freedom: mean ± t(0.975, n-1) x SD / sqrt(n)). With one
    seed the interval is unknown (NaN) and a verdict rests on the sign of the single difference."""

    mean: float
    lo: float
    hi: float
    n: int

    @property
    def sign(self) -> int:
        """+1 when the difference is positive (the whole interval above 0 when it is known), -1 when
        negative, 0 when the interval straddles zero (or nothing was measured)."""
        if self.n == 0 or not math.isfinite(self.mean):
            return 0
        if self.n < 2 or not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            return (self.mean > 0) - (self.mean < 0)
        if self.lo > 0:
            return 1
        if self.hi < 0:
            return -1
        return 0

    def text(self, unit: str = "%") -> str:
        if self.n == 0:
            return "not measured"
        if self.n < 2:
            return f"{self.mean:+.1f}{unit} (1 seed, no interval)"
        return f"{self.mean:+.1f}{unit} [95% CI {self.lo:+.1f}, {self.hi:+.1f}; {self.n} seeds]"


def diff_ci(values: Sequence[float]) -> Diff:
    """:class:`Diff` of per-seed differences (NaNs dropped)."""
    from scipy import stats

    x = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(x)
    if n == 0:
        return Diff(float("nan"), float("nan"), float("nan"), 0)
    m = sum(x) / n
    if n < 2:
        return Diff(m, float("nan"), float("nan"), n)
    sd = math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1))
    h = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return Diff(m, m - h, m + h, n)


def band(paper: float) -> tuple[float, float]:
    """The stated band of a paper's magnitude: paper x (1 ± MAGNITUDE_BAND)."""
    return paper * (1 - MAGNITUDE_BAND), paper * (1 + MAGNITUDE_BAND)


def ordered(d: Diff, within: tuple[float, float] | None = None) -> str:
    """Verdict of a claim that a difference is positive (the caller orients it so), with a magnitude
    band when the paper states one: reproduced if the difference is positive (its interval above 0)
    and its mean lies in the band; partly if positive but outside the band; tie if the interval
    contains 0; not reproduced if negative."""
    if d.n == 0:
        return NOT_APPLICABLE
    s = d.sign
    if s == 0:
        return TIE
    if s < 0:
        return NOT_REPRODUCED
    if within is None or within[0] <= d.mean <= within[1]:
        return REPRODUCED
    return PARTLY


def equivalent(d: Diff, margin: float) -> str:
    """Verdict of a claim that a difference is negligible (two schemes "almost identical"), with the
    stated band ``[-margin, +margin]``: reproduced (identical) if the difference's 95% interval lies
    inside the band; not reproduced (not identical) if it lies wholly outside it; undecided otherwise
    (the interval crosses an edge of the band). With one seed (no interval) the single difference
    decides: inside the band or not."""
    if d.n == 0 or not math.isfinite(d.mean):
        return NOT_APPLICABLE
    if d.n < 2 or not (math.isfinite(d.lo) and math.isfinite(d.hi)):
        return REPRODUCED if abs(d.mean) <= margin else NOT_REPRODUCED
    if -margin <= d.lo and d.hi <= margin:
        return REPRODUCED
    if d.lo > margin or d.hi < -margin:
        return NOT_REPRODUCED
    return UNDECIDED


def all_equivalent(verdicts: Sequence[str]) -> str:
    """One verdict for several pairs claimed equivalent together: reproduced if every pair is; not
    reproduced if some pair is not; undecided otherwise."""
    v = [x for x in verdicts if x != NOT_APPLICABLE]
    if not v:
        return NOT_APPLICABLE
    if all(x == REPRODUCED for x in v):
        return REPRODUCED
    return NOT_REPRODUCED if NOT_REPRODUCED in v else UNDECIDED


def combine(verdicts: Sequence[str]) -> str:
    """One verdict for a claim made of several compared differences: reproduced if each is; partly if
    each is ordered but some lie outside their band, or if some are ordered and others not; tie if all
    are ties; not reproduced if none is ordered and some is reversed."""
    v = [x for x in verdicts if x != NOT_APPLICABLE]
    if not v:
        return NOT_APPLICABLE
    good = [x in (REPRODUCED, PARTLY) for x in v]
    if all(good):
        return REPRODUCED if all(x == REPRODUCED for x in v) else PARTLY
    if any(good):
        return PARTLY
    return TIE if all(x == TIE for x in v) else NOT_REPRODUCED


def fmt(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def md_table(df: pd.DataFrame, digits: int = 1) -> str:
    """A pipe table of ``df`` (index dropped), floats with ``digits`` decimals."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v, digits) for v in row) + " |")
    return "\n".join(lines)


def findings_md(findings: Sequence[Finding]) -> str:
    out = ["| # | paper's finding | rule applied to our numbers | our numbers | verdict |", "|---|---|---|---|---|"]
    for k, f in enumerate(findings, 1):
        out.append(f"| {k} | {f.claim} | {f.rule} | {f.ours} | **{f.verdict}** |")
    whys = [(k, f) for k, f in enumerate(findings, 1) if f.why]
    if whys:
        out.append("")
        out.append("Why the model differs where a finding does not reproduce:")
        out.append("")
        for k, f in whys:
            out.append(f"- finding {k}: {f.why}")
    return "\n".join(out)


def stacked_bars(
    df: pd.DataFrame,
    path: Path,
    *,
    group: str | None,
    label: str,
    parts: Sequence[tuple[str, str]],
    title: str,
    ylabel: str,
    err: str | None = None,
) -> None:
    """Bars of ``df`` (one per row, grouped by ``group``), stacked from ``parts`` (column, legend)."""
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(df) + 2), 4.2))
    xs: list[float] = []
    ticks: list[str] = []
    x = 0.0
    last = None
    for _, row in df.iterrows():
        g = row[group] if group else None
        if last is not None and g != last:
            x += 0.8
        last = g
        xs.append(x)
        ticks.append(f"{row[label]}\n{g}" if group else str(row[label]))
        x += 1.0
    bottom = [0.0] * len(df)
    colors = ["#9ecae1", "#3182bd", "#fdae6b", "#e6550d"]
    for k, (col, legend) in enumerate(parts):
        vals = [float(v) for v in df[col]]
        ax.bar(xs, vals, bottom=bottom, width=0.8, label=legend, color=colors[k % len(colors)])
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    if err and err in df and df[err].notna().any():
        ax.errorbar(xs, bottom, yerr=[float(v) if v == v else 0.0 for v in df[err]], fmt="none", ecolor="k",
                    capsize=3, lw=1)
    ax.set_xticks(xs, ticks, fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)


def grouped_bars(
    df: pd.DataFrame, path: Path, *, x: str, series: str, value: str, title: str, ylabel: str
) -> None:
    """Grouped bars: one group per value of ``x``, one bar per value of ``series``."""
    xs = list(dict.fromkeys(df[x]))
    ss = list(dict.fromkeys(df[series]))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(xs) * len(ss) + 2), 4.2))
    w = 0.8 / max(1, len(ss))
    for k, s in enumerate(ss):
        sub = df[df[series] == s].set_index(x)
        vals = [float(sub[value].get(v, float("nan"))) for v in xs]
        ax.bar([i + k * w for i in range(len(xs))], vals, width=w, label=str(s))
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(xs))], [str(v) for v in xs])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, ncol=min(4, len(ss)))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
