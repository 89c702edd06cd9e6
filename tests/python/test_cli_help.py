"""`cosched ... --help`: the help texts are rich markup, where `[word]` is a style tag that vanishes; every
bracketed word a command's or a parameter's help holds (escaped in the source as `\\[word]`) must be shown."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer.main
from typer.testing import CliRunner

from coscheduling.cli import app


def _commands(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, [*path, name])


def test_every_bracketed_word_of_a_help_text_is_shown() -> None:
    # E.g. `cosched run`'s argument: "A process-level configuration with a [real] table." was shown as
    # "... with a  table."; `cosched apps export`'s "e.g. CG, Workpile[unit=2.4]." as "e.g. CG, Workpile.".
    runner = CliRunner()
    checked, missing = 0, []
    for path, cmd in _commands(typer.main.get_command(app), []):
        if not cmd.add_help_option:
            # `cosched agent` passes --help to the agent binary, which replaces the process (execv).
            continue
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        shown = runner.invoke(app, [*path, "--help"], terminal_width=200).output
        flat = re.sub(r"\s+", "", shown.replace("│", ""))
        for text in texts:
            for m in re.finditer(r"\\?\[[^\]\s]*\]", text):
                word = m.group(0).lstrip("\\")
                checked += 1
                if word not in flat:
                    missing.append((" ".join(["cosched", *path]), word))
    assert checked >= 2 and not missing, missing
