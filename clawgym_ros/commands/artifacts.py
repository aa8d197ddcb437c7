"""`clawgym artifacts`: list the artifacts of a run directory."""

from __future__ import annotations

import argparse
import json

from clawgym_ros import constants as C
from clawgym_ros.commands import add_run_dir


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("artifacts", help="list artifacts (datasets, checkpoints, reports)")
    parser.add_argument("--kind", choices=C.ARTIFACT_KINDS, help="only this kind")
    parser.add_argument("--verify", action="store_true", help="re-hash every artifact's files")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    add_run_dir(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.artifacts import ArtifactStore

    store = ArtifactStore(args.run_dir)
    for art in store.list(args.kind):
        if args.verify:
            store.verify(art)
        m = art.manifest
        if args.json:
            print(json.dumps({"id": m.id, "kind": m.kind, "created": m.created,
                              "parents": m.parents, "summary": m.summary}, sort_keys=True))
        else:
            print(f"{m.kind:<10} {m.id}  {m.created}  parents={len(m.parents)}")
    return 0
