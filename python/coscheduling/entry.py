"""The ``cosched`` command's entry point: Ctrl-C from the first instant.

Importing the command (pandas, the Rust core, click, ...) takes a noticeable moment; an
interruption then, or at any later point of a command, ends it with one line on stderr
and exit code 130, never a traceback.
"""

from __future__ import annotations

import sys

#: Exit code of an interrupted command (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


def interrupted() -> None:
    """Ends the command with exit code 130 after an interruption, at once: called where the
    interruption has already unwound the command (its ``finally`` blocks and context managers have
    run), it ignores any further Ctrl-C, writes the message and leaves through ``os._exit``, so no
    later KeyboardInterrupt (a second Ctrl-C, or one still pending in the interpreter) can turn the
    exit into a traceback or a death by SIGINT while Python shuts down."""
    import os
    import signal

    while True:
        try:  # signal.signal first runs a pending handler: a second Ctrl-C may raise here once
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            break
        except KeyboardInterrupt:
            continue
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to say there
            pass
    try:
        sys.stderr.write("cosched: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(EXIT_INTERRUPTED)


def main() -> None:
    try:
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:  # also during the imports `cli.main` makes before its own handler
        interrupted()
