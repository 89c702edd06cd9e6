"""Result files of a run: ``jobs.csv``, ``jobs.parquet`` and ``summary.json``.

All three are written atomically: each goes to a temporary file in the output
folder first and is renamed into place only when every file has been written,
so a failed run leaves nothing new behind. The files hold no timestamps or
wall-clock timings: the same inputs and seed give byte-identical files.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

OUTPUT_FILES = ("jobs.csv", "jobs.parquet", "summary.json")

#: Version of the output contract (docs/formats/): jobs columns, summary and provenance keys.
FORMAT_VERSION = 1


def _file_mode() -> int:
    """Permissions of a newly created file under the current umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _clean(value: Any) -> Any:
    """JSON-ready copy of ``value``: NaN and infinities become None, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _clean(value.item())
    return value


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the text hashed for ``config_hash``."""
    return json.dumps(_clean(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.cache
def git_commit() -> str:
    """The commit of the source checkout this package runs from, or ``"unknown"``."""
    here = Path(__file__).resolve().parent
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=here, capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        if not (Path(top) / "crates" / "cosched-py").is_dir():
            return "unknown"
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def built_here(prov: Mapping[str, Any], version: str) -> bool:
    """Whether a result's ``provenance`` names this cosched (``version`` and the current git commit): cached
    results from another build must not be reused as if they were current."""
    return prov.get("version") == version and prov.get("git_commit") == git_commit()


def command_line() -> str:
    """``sys.argv`` shell-quoted, the program given by its name without its folder."""
    argv = list(sys.argv) or [""]
    argv[0] = os.path.basename(argv[0])
    return shlex.join(argv)


def provenance(
    *,
    version: str,
    seed: int,
    policy: str,
    options: Mapping[str, Any],
    trace: str | os.PathLike[str] | None,
    platform: Mapping[str, Any] | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """The ``provenance`` object of summary.json, with sorted keys.

    ``config_hash`` is the SHA-256 of the canonical JSON (sorted keys, compact) of
    ``options``, the effective run options or configuration.
    """
    prov: dict[str, Any] = {
        "command_line": command if command is not None else command_line(),
        "config_hash": sha256_text(canonical_json(options)),
        "git_commit": git_commit(),
        "platform": dict(sorted(platform.items())) if platform is not None else None,
        "policy": policy,
        "seed": seed,
        "trace": None if trace is None else {"path": str(trace), "sha256": sha256_file(trace)},
        "version": version,
    }
    return dict(sorted(prov.items()))


def summary_text(summary: Mapping[str, Any], prov: Mapping[str, Any]) -> str:
    """summary.json: the summary keys in their fixed order, then ``provenance``."""
    doc: dict[str, Any] = {"format_version": FORMAT_VERSION}
    doc.update((k, v) for k, v in summary.items() if k not in ("provenance", "format_version"))
    doc["provenance"] = prov
    return json.dumps(_clean(doc), indent=2, allow_nan=False) + "\n"


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    df.to_csv(path, index=False, lineterminator="\n", na_rep="")


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    table = pa.Table.from_pandas(df, preserve_index=False)
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=3,
        use_dictionary=False,
        write_statistics=True,
        version="2.6",
    )


def write_atomic(out_dir: str | os.PathLike[str], writers: Mapping[str, Callable[[Path], None]]) -> list[Path]:
    """Writes several files into ``out_dir`` all or nothing.

    ``writers`` maps a file name to a function writing that file at the given
    (temporary) path. Every file is first written to a temporary file in
    ``out_dir``; only when all succeeded are they renamed into place. On failure
    the temporary files are removed, and so is ``out_dir`` if this call created it.
    """
    out = Path(out_dir)
    created: list[Path] = []
    for parent in reversed([out, *out.parents]):
        if not parent.exists():
            created.append(parent)
    out.mkdir(parents=True, exist_ok=True)
    temps: dict[str, Path] = {}
    try:
        for name, write in writers.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            os.close(fd)
            temps[name] = Path(tmp)
            write(temps[name])
        final = []
        mode = _file_mode()
        for name, tmp in temps.items():
            os.chmod(tmp, mode)
            dest = out / name
            os.replace(tmp, dest)
            final.append(dest)
        return final
    except BaseException:
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        for d in reversed(created):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise


def write_outputs(
    out_dir: str | os.PathLike[str],
    jobs_df: pd.DataFrame,
    summary: Mapping[str, Any],
    provenance: Mapping[str, Any],
    timeline: pd.DataFrame | None = None,
) -> list[Path]:
    """Writes ``jobs.csv``, ``jobs.parquet`` and ``summary.json`` (and ``timeline.parquet``
    when a timeline is given) into ``out_dir`` atomically."""
    text = summary_text(summary, provenance)

    def write_summary(path: Path) -> None:
        path.write_text(text, encoding="utf-8")

    writers: dict[str, Callable[[Path], None]] = {
        "jobs.csv": lambda p: _write_csv(jobs_df, p),
        "jobs.parquet": lambda p: _write_parquet(jobs_df, p),
        "summary.json": write_summary,
    }
    if timeline is not None:
        writers["timeline.parquet"] = lambda p: _write_parquet(timeline, p)
    return write_atomic(out_dir, writers)


def write_csv_atomic(path: str | os.PathLike[str], df: pd.DataFrame) -> Path:
    """Writes one CSV file atomically (creating its folder)."""
    p = Path(path)
    return write_atomic(p.parent, {p.name: lambda t: _write_csv(df, t)})[0]
