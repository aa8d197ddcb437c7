"""`clawgym export lerobot`: a dataset artifact as a LeRobotDataset (format v3.0)."""

from __future__ import annotations

import argparse
import sys

from clawgym_ros.commands import add_run_dir


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("export", help="export a dataset to another format (lerobot)")
    formats = parser.add_subparsers(dest="format", metavar="FORMAT", required=True)
    lerobot = formats.add_parser(
        "lerobot", help="a LeRobotDataset v3.0 folder (what lerobot 0.4.x loads): states, "
        "actions, camera frames, episode index and task strings")
    lerobot.add_argument("dataset", metavar="DATASET_ID", help="dataset artifact id (or a "
                         "unique prefix of at least 8 characters) in --run-dir")
    lerobot.add_argument("out", metavar="OUT", help="folder to create (must not exist); "
                         "LeRobotDataset(repo_id, root=OUT) loads it")
    images = lerobot.add_mutually_exclusive_group()
    images.add_argument("--images", dest="images", action="store_true", default=None,
                        help="export the camera frames; refuse a dataset without any")
    images.add_argument("--no-images", dest="images", action="store_false",
                        help="leave camera frames out (default: exported when recorded)")
    add_run_dir(lerobot)
    lerobot.set_defaults(handler=run_lerobot)


def run_lerobot(args: argparse.Namespace) -> int:
    import json

    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.dataset.lerobot import export_lerobot

    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        print(f"\r{done}/{total} episodes", end="" if done < total else "\n", file=sys.stderr,
              flush=True)

    summary = export_lerobot(ArtifactStore(args.run_dir), args.dataset, args.out,
                             args.images, progress if tty else None)
    print(summary.out)
    print(json.dumps({"episodes": summary.episodes, "frames": summary.frames,
                      "fps": summary.fps, "tasks": list(summary.tasks),
                      "cameras": list(summary.cameras), "data_files": summary.data_files}))
    return 0
