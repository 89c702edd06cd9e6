"""Regenerates the demo trace shipped in python/coscheduling/data/.

The excerpt is the first 3,000 records of the Parallel Workloads Archive's
KTH-SP2-1996-2.1-cln log, header comments (acknowledgements, cleaning notes)
kept verbatim. Usage, from the repository root with the package installed:

    python scripts/make_demo_data.py [--traces ../shared/data/traces]
"""

from __future__ import annotations

import argparse
import gzip
import os
from pathlib import Path

from coscheduling import slice_trace, trace_info

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "KTH-SP2-1996-2.1-cln.swf.gz"
RECORDS = 3000
DEST = ROOT / "python" / "coscheduling" / "data" / f"KTH-SP2-1996-2.1-cln-first{RECORDS}.swf.gz"


def main() -> None:
    default = os.environ.get("COSCHED_TRACES", str(ROOT.parent / "shared" / "data" / "traces"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=default, help="folder of the shared SWF traces")
    args = ap.parse_args()
    src = Path(args.traces) / SOURCE
    DEST.parent.mkdir(parents=True, exist_ok=True)
    slice_trace(src, DEST, RECORDS)
    # Say what the file is, after the original header comments (kept verbatim).
    lines = gzip.decompress(DEST.read_bytes()).decode().splitlines(keepends=True)
    n_header = next(i for i, line in enumerate(lines) if not line.startswith(";"))
    note = f"; Note: excerpt for the cosched demo: the first {RECORDS} records of {SOURCE}\n"
    lines.insert(n_header, note)
    tmp = DEST.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress("".join(lines).encode(), compresslevel=9, mtime=0))
    os.replace(tmp, DEST)
    info = trace_info(DEST)
    print(f"wrote {DEST.relative_to(ROOT)}: {info['records']} records, {info['jobs']} jobs, "
          f"{info['machine_procs']} processors")


if __name__ == "__main__":
    main()
