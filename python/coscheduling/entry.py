"""The ``cosched`` command's entry point: Ctrl-C from the first instant.

Importing the command (pandas, the Rust core, ...) takes a noticeable moment; an
interruption then, or at any later point of a command, ends it with one line on stderr
and exit code 130, never a traceback.
"""

from __future__ import annotations

import sys

#: Exit code of an interrupted command (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


def interrupted() -> None:
    """Ends the command with exit code 130 after an interruption. Once the message is written the
    command is over: a further Ctrl-C is ignored. Otherwise a second SIGINT raises KeyboardInterrupt
    while SystemExit unwinds (Python then kills itself with SIGINT instead of exiting 130), or arrives
    after Python's finalization has put SIGINT back to its default action (death by SIGINT)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stderr.write("cosched: interrupted\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_INTERRUPTED)


def main() -> None:
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        interrupted()
    cli_main()
