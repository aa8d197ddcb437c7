"""README's CLI reference and the CLI agree: every option a `clawgym <command>` row names is an
option of that command's parser, and every option of a command is named in one of its rows
(or in the shared `... --executor` row). The parser is built, nothing runs."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from clawgym_ros.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every long option of ``parser`` and of its sub-commands (e.g. ``prefs ingest``)."""
    found: set[str] = set()
    for action in parser._actions:
        found |= {o for o in action.option_strings if o.startswith("--")}
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found |= _options(child)
    return found - {"--help"}


def cli_rows(readme: str) -> tuple[dict[str, set[str]], set[str]]:
    """Options named per command in the README's CLI reference, and those of the shared
    `... --executor` row (it applies to several commands)."""
    section = readme[readme.index("## CLI reference"):]
    section = section[:section.index("\n## ", 1)]
    rows: dict[str, set[str]] = {}
    shared: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `... "):
            shared |= set(OPTION.findall(line))
        match = re.match(r"\| `clawgym ([a-z_]+)", line)
        if match:
            rows.setdefault(match.group(1), set()).update(OPTION.findall(line))
    return rows, shared


def test_readme_cli_rows_match_the_parser():
    parser = build_parser()
    commands = next(a for a in parser._actions
                    if isinstance(a, argparse._SubParsersAction)).choices
    rows, shared = cli_rows((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(rows) > 10
    problems = []
    for command, named in sorted(rows.items()):
        if command not in commands:
            problems.append(f"README names `clawgym {command}`, which does not exist")
            continue
        options = _options(commands[command])
        problems += [f"clawgym {command}: README names {o}, not an option"
                     for o in sorted(named - options)]
        problems += [f"clawgym {command}: {o} is not in the README's CLI reference"
                     for o in sorted(options - named - shared)]
    problems += [f"clawgym {c}: no row in the README's CLI reference"
                 for c in sorted(set(commands) - set(rows))]
    assert not problems, "\n".join(problems)
