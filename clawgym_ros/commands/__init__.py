"""Subcommands of the `clawgym` CLI, one module each with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import os

from clawgym_ros import constants as C


def add_run_dir(parser: argparse.ArgumentParser, flag: str = "--run-dir") -> None:
    """Add the run-directory option (default: $CLAWGYM_RUN_DIR or runs/default)."""
    parser.add_argument(
        flag, dest="run_dir", default=os.environ.get(C.ENV_RUN_DIR, C.DEFAULT_RUN_DIR),
        help=f"run directory holding artifacts/ (default: ${C.ENV_RUN_DIR} or "
             f"{C.DEFAULT_RUN_DIR})",
    )
