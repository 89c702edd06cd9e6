"""Result files of a run: ``jobs.csv``, ``jobs.parquet`` and ``summary.json``
(and ``timeline.parquet`` for a process-level run that recorded one).

The set is written all or nothing (:func:`write_atomic`): every file goes to a
staging folder inside the output folder, and the set is moved into place as one
commit; a rerun replaces the whole set, so no file of an earlier run survives
beside the new ones. The files hold no timestamps or wall-clock timings: the
same inputs and seed give byte-identical files.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

OUTPUT_FILES = ("jobs.csv", "jobs.parquet", "summary.json")
#: Every file a run may write: a run replaces the whole set (one without a timeline removes an older one).
RESULT_FILES = (*OUTPUT_FILES, "timeline.parquet")

#: Version of the output contract (docs/formats/): jobs columns, summary and provenance keys.
FORMAT_VERSION = 3


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
    """The commit of the source checkout this package runs from (an editable install), else the commit
    the extension was built from (recorded at build time), else ``"unknown"``."""
    here = Path(__file__).resolve().parent
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=here, capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        if (Path(top) / "crates" / "cosched-py").is_dir():
            live = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if live:
                return live
    except (OSError, subprocess.SubprocessError):
        pass
    from . import _core

    return getattr(_core, "__git_commit__", None) or "unknown"


@functools.cache
def build_sha256() -> str:
    """SHA-256 of the compiled core this process runs (``coscheduling._core``'s file): it changes with
    any rebuild from changed sources, committed or not, where the version and commit may not."""
    from . import _core

    return sha256_file(_core.__file__)


def same_build(prov: Mapping[str, Any]) -> bool:
    """Whether a result's ``provenance`` names the very compiled core this process runs: the test
    for reusing a cached run, so a run made before an uncommitted change (a regenerated calibration,
    an edited mechanism) is never reused after it."""
    from . import _core

    return built_here(prov, _core.__version__) and prov.get("build_sha256") == build_sha256()


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
        "build_sha256": build_sha256(),
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
    """jobs.csv from a DataFrame (the reference encoding of docs/formats/jobs.md; the Rust core's
    ``RunResult.write_jobs_csv`` writes the same bytes for a run's own table)."""
    df.to_csv(path, index=False, lineterminator="\n", na_rep="")


_PANDAS_TYPES = {"int64": ("int64", "int64"), "double": ("float64", "float64"), "string": ("unicode", "object")}


def _pandas_metadata(table: pa.Table) -> bytes:
    """The ``pandas`` schema metadata ``pyarrow.Table.from_pandas`` gives a DataFrame of the same columns
    (int64, float64, object strings, no index), so a table built in Arrow writes the same Parquet bytes
    and reads back into pandas with the same dtypes; without importing pandas."""
    from importlib.metadata import version

    import pyarrow as pa

    columns = []
    for f in table.schema:
        pandas_type, numpy_type = _PANDAS_TYPES[str(f.type)]
        columns.append({"name": f.name, "field_name": f.name, "pandas_type": pandas_type,
                        "numpy_type": numpy_type, "metadata": None})
    doc = {"index_columns": [], "column_indexes": [], "columns": columns, "attributes": {},
           "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": version("pandas")}
    return json.dumps(doc).encode("utf8")


def _write_parquet(data: pd.DataFrame | pa.Table, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(data, pa.Table):
        table = data.replace_schema_metadata({b"pandas": _pandas_metadata(data)})
    else:
        table = pa.Table.from_pandas(data, preserve_index=False)
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=3,
        use_dictionary=False,
        write_statistics=True,
        version="2.6",
    )


# ---------------------------------------------------------------------------
# All-or-nothing writes
#
# A write stages its files in a folder ``.cosched-<pid>-<random>.tmp`` inside the
# output folder, whose ``.lock`` file the writer holds locked (flock) while it
# lives. When every file is written, the writer drops a ``COMMIT`` marker (the
# list of files to move and of older result files to remove) into the staging
# folder: that is the commit point. It then moves the files into place and
# removes the staging folder. Commits into one output folder are serialized by a
# lock on the folder itself, so concurrent runs into one folder never mix files.
# Every write first settles the folder: a staging folder whose writer died
# (lock free) is rolled forward if it holds a COMMIT marker, else deleted; so an
# interruption at any moment, even SIGKILL, leaves either the old set or the new
# set, never a mix, and no temporary files after the next run. SIGTERM during a
# write removes the staging folder before the process ends.

_STAGING_PREFIX = ".cosched-"
_STAGING_SUFFIX = ".tmp"
_COMMIT = "COMMIT"
_LOCK = ".lock"


@contextlib.contextmanager
def _locked(path: Path, blocking: bool = True) -> Iterator[bool]:
    """Holds an exclusive flock on ``path`` (a folder or file); yields False if ``blocking`` is off
    and someone else holds it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _roll_forward(out: Path, staging: Path) -> None:
    """Finishes a committed staging folder: moves its files into ``out``, removes the replaced ones."""
    plan = json.loads((staging / _COMMIT).read_text(encoding="utf-8"))
    for name in plan["files"]:
        src = staging / name
        if src.exists():
            os.replace(src, out / name)
    for name in plan["remove"]:
        with contextlib.suppress(FileNotFoundError):
            (out / name).unlink()
    shutil.rmtree(staging, ignore_errors=True)


def settle(out_dir: str | os.PathLike[str]) -> None:
    """Completes or discards what writers that died left in ``out_dir`` (see the module notes);
    staging folders of live writers are left alone. Called by every write; call it before reading a
    folder another process may have been killed while writing."""
    out = Path(out_dir)
    if not out.is_dir():
        return
    with _locked(out):
        _settle_locked(out)


def settle_tree(root: str | os.PathLike[str]) -> None:
    """:func:`settle` of ``root`` and of every folder below it that holds a staging folder (a sweep's or an
    experiment's runs): call it before reading a tree of results a killed writer may have left half moved."""
    top = Path(root)
    if not top.is_dir():
        return
    folders = {top} | {p.parent for p in top.rglob(f"{_STAGING_PREFIX}*{_STAGING_SUFFIX}") if p.is_dir()}
    for folder in sorted(folders):
        settle(folder)


def _settle_locked(out: Path) -> None:
    for staging in sorted(out.glob(f"{_STAGING_PREFIX}*{_STAGING_SUFFIX}")):
        if not staging.is_dir():
            continue
        lock = staging / _LOCK
        if lock.exists():
            with _locked(lock, blocking=False) as dead:
                if not dead:
                    continue  # its writer is alive
        if (staging / _COMMIT).is_file():
            _roll_forward(out, staging)
        else:
            shutil.rmtree(staging, ignore_errors=True)
    _remove_old_temporaries(out)


# Versions before the staging folder wrote each result file to ``.<name>.<8 random
# characters>.tmp`` (``tempfile.mkstemp``) beside it, then renamed it; a writer killed in
# between left that file. Such a name records no writer, so a writer counts as dead when no
# process has the file open and the file is older than a write of one result set takes.
_OLD_TEMPORARY = re.compile(r"\.(" + "|".join(map(re.escape, RESULT_FILES)) + r")\.[a-z0-9_]{8}\.tmp")
#: Seconds since its last change after which an old temporary nobody holds open is abandoned.
OLD_TEMPORARY_AGE_S = 600.0


def _open_anywhere(paths: list[Path]) -> set[tuple[int, int]]:
    """The (device, inode) pairs among ``paths`` that a running process has open (those whose
    descriptors can be read: this user's processes)."""
    wanted = set()
    for p in paths:
        with contextlib.suppress(OSError):
            st = p.stat()
            wanted.add((st.st_dev, st.st_ino))
    held = set()
    for pid in os.listdir("/proc") if wanted else ():
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    st = os.stat(fd.path)
                    if (st.st_dev, st.st_ino) in wanted:
                        held.add((st.st_dev, st.st_ino))
    return held


def _remove_old_temporaries(out: Path) -> None:
    """Removes the temporaries older versions left in ``out`` (see above) whose writer is dead."""
    old = [p for p in out.iterdir() if _OLD_TEMPORARY.fullmatch(p.name) and p.is_file()]
    if not old:
        return
    held = _open_anywhere(old)
    now = time.time()
    for p in old:
        with contextlib.suppress(OSError):
            st = p.stat()
            if (st.st_dev, st.st_ino) not in held and now - st.st_mtime > OLD_TEMPORARY_AGE_S:
                p.unlink()


class _Terminated(BaseException):
    """SIGTERM arrived during a write."""


@contextlib.contextmanager
def _sigterm_cleans_up() -> Iterator[None]:
    """Turns SIGTERM into an exception while a write runs (so its staging folder is removed), then ends
    the process by the same signal. Only in the main thread and when SIGTERM has its default action."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Terminated

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def check_out_dir(out: Path) -> None:
    """Refuses an output folder that cannot be made or written, with an OSError naming it and why: it exists
    and is not a folder, a parent on its path is a file, or the deepest existing folder on its path is not
    writable. Commands call it before their work; :func:`write_atomic` calls it before it writes."""
    parent = out
    while not parent.exists():
        if parent == parent.parent or parent.is_symlink():  # a root that is absent, or a broken link
            break
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        what = "it" if parent == out else str(parent)
        raise OSError(errno.ENOTDIR, f"cannot write the results here: {what} is a file, not a folder", str(out))
    if parent.is_dir() and not os.access(parent, os.W_OK | os.X_OK):
        raise OSError(errno.EACCES, f"cannot write the results here: {parent} is not writable", str(out))


def write_atomic(
    out_dir: str | os.PathLike[str],
    writers: Mapping[str, Callable[[Path], None]],
    replaces: tuple[str, ...] = (),
) -> list[Path]:
    """Writes several files into ``out_dir`` all or nothing (see the module notes).

    ``writers`` maps a file name to a function writing that file at the given
    (temporary) path. Names in ``replaces`` that have no writer are removed from
    ``out_dir`` in the same commit (an older result's file that is no longer part of
    the set). On failure nothing in ``out_dir`` changes, the staging folder is
    removed, and so is ``out_dir`` if this call created it.
    """
    out = Path(out_dir)
    check_out_dir(out)
    created: list[Path] = []
    for parent in reversed([out, *out.parents]):
        if not parent.exists():
            created.append(parent)
    out.mkdir(parents=True, exist_ok=True)
    staging: Path | None = None
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_sigterm_cleans_up())
            with _locked(out):
                _settle_locked(out)
                staging = Path(tempfile.mkdtemp(prefix=f"{_STAGING_PREFIX}{os.getpid()}-",
                                                suffix=_STAGING_SUFFIX, dir=out))
                lock_fd = os.open(staging / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
                stack.callback(os.close, lock_fd)
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
            mode = _file_mode()
            for name, write in writers.items():
                tmp = staging / name
                try:
                    write(tmp)
                except OSError as e:
                    # e.g. a full disk: name the file being written, not its staging copy
                    if e.filename is None or Path(e.filename) == tmp:
                        raise OSError(e.errno, e.strerror or str(e), str(out / name)) from e
                    raise
                if not tmp.is_file():
                    raise OSError(errno.ENOENT, "the writer produced no file", str(out / name))
                os.chmod(tmp, mode)
            plan = {"files": list(writers), "remove": [n for n in replaces if n not in writers]}
            marker = staging / (_COMMIT + ".new")
            marker.write_text(json.dumps(plan), encoding="utf-8")
            with _locked(out):
                # The commit: once COMMIT exists the set is moved into place, here or by the next settle.
                old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
                try:
                    os.replace(marker, staging / _COMMIT)
                    _roll_forward(out, staging)
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            return [out / name for name in writers]
        except BaseException:
            if staging is not None and not (staging / _COMMIT).exists():
                shutil.rmtree(staging, ignore_errors=True)
            for d in reversed(created):
                with contextlib.suppress(OSError):
                    d.rmdir()
            raise


def write_outputs(
    out_dir: str | os.PathLike[str],
    jobs: pd.DataFrame | pa.Table,
    summary: Mapping[str, Any],
    provenance: Mapping[str, Any],
    timeline: pd.DataFrame | None = None,
    write_jobs_csv: Callable[[Path], None] | None = None,
) -> list[Path]:
    """Writes ``jobs.csv``, ``jobs.parquet`` and ``summary.json`` (and ``timeline.parquet``
    when a timeline is given) into ``out_dir`` as one all-or-nothing set replacing any
    earlier result files there.

    ``jobs`` is the job table, as a pyarrow Table (a run's, Parquet written from Arrow) or a
    DataFrame. ``write_jobs_csv`` writes jobs.csv at a path (the Rust core's writer of the same
    table); without it jobs.csv is written by pandas.
    """
    text = summary_text(summary, provenance)

    def write_summary(path: Path) -> None:
        path.write_text(text, encoding="utf-8")

    def write_csv(path: Path) -> None:
        if write_jobs_csv is not None:
            write_jobs_csv(path)
        else:
            _write_csv(jobs if hasattr(jobs, "to_csv") else frame_of(jobs), path)

    writers: dict[str, Callable[[Path], None]] = {
        "jobs.csv": write_csv,
        "jobs.parquet": lambda p: _write_parquet(jobs, p),
        "summary.json": write_summary,
    }
    if timeline is not None:
        writers["timeline.parquet"] = lambda p: _write_parquet(timeline, p)
    return write_atomic(out_dir, writers, replaces=RESULT_FILES)


def frame_of(table: pa.Table) -> pd.DataFrame:
    """A job table as a DataFrame: int64 and float64 columns (null as NaN), strings as objects."""
    df = table.to_pandas()
    for f in table.schema:
        if str(f.type) == "string":
            df[f.name] = df[f.name].astype(object)
    return df


def write_csv_atomic(path: str | os.PathLike[str], df: pd.DataFrame) -> Path:
    """Writes one CSV file atomically (creating its folder)."""
    p = Path(path)
    return write_atomic(p.parent, {p.name: lambda t: _write_csv(df, t)})[0]
