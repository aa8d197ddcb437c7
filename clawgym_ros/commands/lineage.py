"""`clawgym lineage ID`: the chain of parents of an artifact down to configs and seeds."""

from __future__ import annotations

import argparse
import json

from clawgym_ros.commands import add_run_dir


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("lineage", help="print the parents of an artifact, configs, seeds")
    parser.add_argument("id", help="artifact id (sha256) or a unique prefix of at least 8 chars")
    parser.add_argument("--json", action="store_true", help="print the tree as JSON")
    add_run_dir(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.artifacts.store import format_lineage, validate_id_syntax

    validate_id_syntax(args.id)
    tree = ArtifactStore(args.run_dir).lineage(args.id)
    if args.json:
        print(json.dumps(tree, indent=2, sort_keys=True))
    else:
        print("\n".join(format_lineage(tree)))
    return 0
