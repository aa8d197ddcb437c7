"""`clawgym report ID`: re-render a report's HTML from its report.json."""

from __future__ import annotations

import argparse

from clawgym_ros.commands import add_run_dir


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help="re-render a report's HTML from its report.json")
    parser.add_argument("id", help="report artifact id (sha256) or a unique prefix of >= 8 chars")
    parser.add_argument("--out", help="HTML path to write (default: <run-dir>/reports/<id>.html)")
    add_run_dir(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.report.render import rerender

    path = rerender(args.run_dir, args.id, args.out)
    print(path)
    return 0
