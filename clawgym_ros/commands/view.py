"""`clawgym view`: log a dataset episode or a report to Rerun (a running viewer or an .rrd)."""

from __future__ import annotations

import argparse

from clawgym_ros.commands import add_run_dir

#: Where ``rerun`` (the viewer) listens for SDK connections by default (its gRPC port).
DEFAULT_VIEWER = "127.0.0.1:9876"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("view", help="log an episode (joint states, object poses, camera "
                            "frames, stages, perturbation) or a report to Rerun")
    parser.add_argument("target", metavar="EPISODE|REPORT",
                        help="DATASET_ID[:INDEX] (episode INDEX of a dataset, default 0), an "
                             "episode .mcap file, or a report id")
    parser.add_argument("--save", metavar="FILE.rrd", default=None,
                        help="write this .rrd file (default: stream to a running viewer, "
                             "else ./<name>.rrd)")
    parser.add_argument("--viewer", default=DEFAULT_VIEWER, metavar="HOST:PORT",
                        help=f"where a running Rerun viewer listens (default {DEFAULT_VIEWER})")
    add_run_dir(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.report.rerun_view import (
        log_episode,
        log_report,
        open_stream,
        resolve,
        viewer_listening,
    )

    if args.save is not None and not args.save.endswith(".rrd"):
        raise ConfigError("--save", args.save, "a file name ending in .rrd")
    kind, content, name = resolve(args.run_dir, args.target)
    save = args.save
    if save is None and not viewer_listening(args.viewer):
        save = f"{name}.rrd"
    rec, where = open_stream(name, save, args.viewer)
    try:
        rows = log_episode(rec, content) if kind == "episode" else log_report(rec, *content)
    finally:
        rec.flush()
        rec.disconnect()
    timed = sum(1 for n in rows.values() if n)
    print(f"logged {kind} {name}: {len(rows)} entities ({timed} on timelines, "
          f"{max(rows.values(), default=0)} rows at most) -> {where}")
    if save is not None:
        print(f"open it with: rerun {save}")
    return 0
