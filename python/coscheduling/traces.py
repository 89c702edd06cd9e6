"""Trace tools: SWF <-> Parquet/JSON conversion, time windows, load scaling, generated traces.

Every input trace is first checked by the Rust SWF reader (errors name file, line and field);
outputs are written atomically. SWF fields and their names: docs/formats/swf.md.
"""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import _core
from .output import write_atomic

__all__ = ["SWF_FIELDS", "read_swf", "write_swf", "read_any", "convert", "time_window", "scale_load", "info",
           "first_records"]

#: The 18 SWF fields, in order (Parallel Workloads Archive, standard workload format 2.2).
SWF_FIELDS = (
    "job_number", "submit_time", "wait_time", "run_time", "allocated_procs", "avg_cpu_time", "used_memory",
    "requested_procs", "requested_time", "requested_memory", "status", "user_id", "group_id", "executable",
    "queue", "partition", "preceding_job", "think_time",
)
_HEADER_KEY = b"cosched.swf_header"
#: The machine size given to the SWF reader when only the records are checked (conversions, windows, load
#: scaling): these need no machine size, so a trace whose header has none can still be converted or scaled.
_ANY_MACHINE_SIZE = 2**32 - 1


def _is_swf(path: Path) -> bool:
    return path.name.endswith((".swf", ".swf.gz"))


def _kind(path: Path) -> str:
    if _is_swf(path):
        return "swf"
    if path.suffix in (".parquet", ".json"):
        return path.suffix[1:]
    raise ValueError(f"{path}: unknown trace format; use .swf, .swf.gz, .parquet or .json")


def _open_text(path: Path) -> io.TextIOBase:
    """The text of an SWF file; a leading UTF-8 byte order mark is skipped (as the Rust reader does), so the
    first header line is read as one."""
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", errors="replace")
    return open(path, encoding="utf-8-sig", errors="replace")  # noqa: SIM115


def read_swf(path: str | Path) -> tuple[list[str], pd.DataFrame]:
    """The header comment lines (without their ';') and the records, one column per field."""
    p = Path(path)
    # Validates every record (errors name line and field); the machine size does not matter here.
    _core.trace_info(p, machine_size_from_nodes=False, machine_size=_ANY_MACHINE_SIZE)
    header: list[str] = []
    with _open_text(p) as f:
        for line in f:
            s = line.strip()
            if s.startswith(";"):
                header.append(s[1:].strip())
            elif s:
                break
    df = pd.read_csv(p, sep=r"\s+", comment=";", header=None, names=list(SWF_FIELDS), engine="c",
                     compression="gzip" if p.name.endswith(".gz") else None)
    for c in SWF_FIELDS:
        if pd.api.types.is_float_dtype(df[c]) and (df[c] == df[c].round()).all():
            df[c] = df[c].astype("int64")
    return header, df


def _read_table(p: Path) -> tuple[list[str], pd.DataFrame]:
    """The header and records of a Parquet or JSON trace, as stored (the values not yet checked)."""
    if not p.is_file():
        raise ValueError(f"{p}: {'not a file' if p.exists() else 'no such file'}")
    if p.suffix == ".parquet":
        table = pq.read_table(p)
        meta = table.schema.metadata or {}
        header = json.loads(meta.get(_HEADER_KEY, b"[]"))
        df = table.to_pandas()
    else:
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: line {e.lineno}: not valid JSON: {e.msg}") from None
        if not isinstance(doc, dict):
            raise ValueError(f'{p}: expected an object {{"header": [...], "jobs": [...]}}, found a '
                             f"{type(doc).__name__}")
        header, jobs = doc.get("header", []), doc.get("jobs")
        if not isinstance(header, list) or not all(isinstance(h, str) for h in header):
            raise ValueError(f'{p}: "header" must be a list of strings (the SWF header lines)')
        if not isinstance(jobs, list):
            raise ValueError(f'{p}: "jobs" must be a list of records, found '
                             f"{'nothing' if jobs is None else type(jobs).__name__}")
        bad = next((k for k, j in enumerate(jobs) if not isinstance(j, dict)), None)
        if bad is not None:
            raise ValueError(f"{p}: record {bad + 1}: expected an object of the 18 SWF fields, found "
                             f"{type(jobs[bad]).__name__}")
        df = pd.DataFrame(jobs, columns=list(SWF_FIELDS) if not jobs else None)
    missing = [c for c in SWF_FIELDS if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: missing field(s) {missing}")
    return list(header), df[list(SWF_FIELDS)]


def _checked(p: Path, header: list[str], df: pd.DataFrame, *, machine_size_from_nodes: bool = False,
             machine_size: int | None = None) -> dict[str, object]:
    """Checks the records of a Parquet or JSON trace by the Rust SWF reader's rules (written out as SWF to a
    temporary file) and returns their statistics. An error names the file and the record (1-based)."""
    import re
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / f"{p.stem}.swf"
        tmp.write_text(_swf_text(header, df), encoding="utf-8")
        try:
            text = _core.trace_info(tmp, machine_size_from_nodes=machine_size_from_nodes, machine_size=machine_size)
        except ValueError as e:
            msg = re.sub(re.escape(str(tmp)) + r":(\d+):",
                         lambda m: f"{p}: record {int(m[1]) - len(header)}:", str(e))
            raise ValueError(msg.replace(str(tmp), str(p))) from None
    stats: dict[str, object] = json.loads(text)
    stats["origin"] = str(p)
    stats["warnings"] = [str(w).replace(str(tmp), str(p)) for w in stats.get("warnings") or []]  # type: ignore[union-attr]
    return stats


def read_any(path: str | Path) -> tuple[list[str], pd.DataFrame]:
    """Reads an SWF, Parquet (written by :func:`convert`) or JSON (``{"header": [...], "jobs": [...]}``) trace.
    Every record is checked by the SWF reader's rules: an error names the file and the line (SWF) or the
    record (Parquet, JSON) and field."""
    p = Path(path)
    kind = _kind(p)
    if kind == "swf":
        return read_swf(p)
    header, df = _read_table(p)
    _checked(p, header, df, machine_size=_ANY_MACHINE_SIZE)
    return header, df


def _swf_text(header: list[str], df: pd.DataFrame) -> str:
    lines = [f"; {h}".rstrip() for h in header]
    cols = [df[c].tolist() for c in SWF_FIELDS]

    def fmt(v: object) -> str:
        if isinstance(v, float):
            # Whole numbers as integers, others as the shortest text that reads back exactly.
            return str(int(v)) if v.is_integer() else repr(v)
        return str(v)

    for row in zip(*cols, strict=True):
        lines.append(" ".join(fmt(v) for v in row))
    return "\n".join(lines) + "\n"


def write_swf(path: str | Path, header: list[str], df: pd.DataFrame) -> Path:
    """Writes an SWF trace atomically (gzip if the name ends in ``.gz``)."""
    p = Path(path)
    text = _swf_text(header, df)

    def write(t: Path) -> None:
        data = text.encode("utf-8")
        if p.name.endswith(".gz"):
            # GzipFile does not close a file object it was given: close both explicitly.
            with t.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as g:
                g.write(data)
        else:
            t.write_bytes(data)

    return write_atomic(p.parent, {p.name: write})[0]


def write_any(path: str | Path, header: list[str], df: pd.DataFrame) -> Path:
    p = Path(path)
    kind = _kind(p)
    if kind == "swf":
        return write_swf(p, header, df)
    if kind == "parquet":
        table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               _HEADER_KEY: json.dumps(header).encode()})
        return write_atomic(p.parent, {p.name: lambda t: pq.write_table(table, t)})[0]
    doc = {"header": header, "jobs": df.to_dict(orient="records")}
    text = json.dumps(doc, indent=0, default=int)
    return write_atomic(p.parent, {p.name: lambda t: t.write_text(text, encoding="utf-8")})[0]


def convert(src: str | Path, dst: str | Path) -> Path:
    """SWF <-> Parquet/JSON, by the files' extensions; the header travels along."""
    header, df = read_any(src)
    return write_any(dst, header, df)


def time_window(src: str | Path, dst: str | Path, start_s: float, end_s: float, *, rebase: bool = True) -> int:
    """Keeps the jobs submitted in ``[start_s, end_s)``; with ``rebase`` their submit times are shifted so the
    window starts at 0. Returns the number of jobs kept."""
    if math.isnan(start_s) or math.isnan(end_s):
        raise ValueError(f"window: start and end must be numbers of seconds, got start {start_s}, end {end_s}")
    if not end_s > start_s:
        raise ValueError(f"window: end ({end_s}) must be after start ({start_s})")
    header, df = read_any(src)
    keep = df[(df["submit_time"] >= start_s) & (df["submit_time"] < end_s)].copy()
    if rebase:
        shifted = keep["submit_time"].astype("float64") - float(start_s)
        whole = bool((shifted == shifted.round()).all())
        keep["submit_time"] = shifted.round().astype("int64") if whole else shifted
    note = f"cosched: jobs submitted in [{start_s:g}, {end_s:g}) s" + (", submit times rebased to 0" if rebase
                                                                       else "")
    write_any(dst, [*header, note], keep)
    return len(keep)


def scale_load(src: str | Path, dst: str | Path, factor: float, *, by: str = "interarrival") -> None:
    """Multiplies the offered load by ``factor``: ``by="interarrival"`` divides the gaps between submit
    times by it (same jobs, denser arrivals); ``by="runtime"`` multiplies run, requested and average CPU
    times by it (same arrivals, longer jobs). Times are rounded to whole seconds, as SWF stores them."""
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"factor: must be a finite number > 0, got {factor}")
    if by not in ("interarrival", "runtime"):
        raise ValueError(f"by: must be interarrival or runtime, got {by!r}")
    header, df = read_any(src)
    df = df.copy()
    if by == "interarrival":
        # The origin is the first known submit time; unknown ones (-1) stay unknown. The same rule as a
        # configuration's workload.load_scale (crates/cosched-model/src/swf.rs, scale_load).
        known = df["submit_time"] >= 0
        first = df.loc[known, "submit_time"].min()
        scaled = (first + (df.loc[known, "submit_time"] - first) / factor).round()
        df["submit_time"] = df["submit_time"].astype("float64")
        df.loc[known, "submit_time"] = scaled
        df["submit_time"] = df["submit_time"].astype("int64")
    else:
        for c in ("run_time", "requested_time", "avg_cpu_time"):
            valid = df[c] >= 0
            scaled = (df.loc[valid, c] * factor).round()
            df[c] = df[c].astype("float64")
            df.loc[valid, c] = scaled
            df[c] = df[c].astype("int64") if (df[c] == df[c].round()).all() else df[c]
    write_any(dst, [*header, f"cosched: offered load scaled by {factor:g} ({by})"], df)


#: Statistics that depend on the machine size: absent (None) when the trace gives none.
MACHINE_STATS = ("machine_procs", "machine_nodes", "procs_per_node", "machine_size_source", "jobs_wider_than_machine",
                 "offered_load")


def info(path: str | Path, *, machine_size_from_nodes: bool = False,
         machine_size: int | None = None) -> dict[str, object]:
    """Statistics of a trace in any format (``cosched trace info``): an SWF trace goes to the Rust reader as it
    is; a Parquet or JSON trace is written out as SWF to a temporary file first, so the statistics and the
    checks are the same (error messages then name the file and the record). A trace whose header gives no
    machine size (and no ``machine_size``) still gets every other statistic: those of ``MACHINE_STATS`` are
    None, with a warning saying how to give one."""
    try:
        return _info(Path(path), machine_size_from_nodes, machine_size)
    except ValueError as e:
        if machine_size is not None or ": no machine size:" not in str(e):
            raise
        stats = _info(Path(path), machine_size_from_nodes, _ANY_MACHINE_SIZE)
    stats.update(dict.fromkeys(MACHINE_STATS))
    stats["warnings"] = [w for w in stats.get("warnings") or [] if "more processors than the machine" not in w]  # type: ignore[union-attr]
    stats["warnings"].append(f"{path}: no machine size in the header (MaxProcs, MaxNodes): the machine's "  # type: ignore[union-attr]
                             "statistics are omitted; give one with --machine-size N")
    return stats


def _info(p: Path, machine_size_from_nodes: bool, machine_size: int | None) -> dict[str, object]:
    if p.suffix not in (".parquet", ".json"):  # SWF, whatever the name
        return json.loads(_core.trace_info(p, machine_size_from_nodes=machine_size_from_nodes,
                                           machine_size=machine_size))
    header, df = _read_table(p)
    return _checked(p, header, df, machine_size_from_nodes=machine_size_from_nodes, machine_size=machine_size)


def first_records(src: str | Path, dst: str | Path, n: int) -> None:
    """Writes the first ``n`` records of ``src`` to ``dst`` (any formats; SWF to SWF keeps the file's text)."""
    s, d = Path(src), Path(dst)
    if s.suffix not in (".parquet", ".json") and d.suffix not in (".parquet", ".json"):
        _core.slice_trace(s, d, n)
        return
    header, df = read_any(s)
    write_any(d, [*header, f"cosched: first {n} records"], df.head(n))
