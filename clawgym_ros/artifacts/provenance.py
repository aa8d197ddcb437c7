"""Provenance facts recorded in every manifest: package versions and the project's git commit."""

from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path

# Distribution names whose versions matter for reproducing a result.
KEY_DISTRIBUTIONS: tuple[str, ...] = (
    "clawgym_ros",
    "numpy",
    "mujoco",
    "ompl",
    "torch",
    "gymnasium",
    "mcap",
    "ros-rclpy",
    "toppra",
    "mink",
)


@functools.cache
def package_versions() -> dict[str, str]:
    """Versions of the key distributions that are installed (missing ones are left out)."""
    versions = {}
    for name in KEY_DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


@functools.cache
def git_commit() -> str:
    """The project's git commit (with ``-dirty`` when the tree has changes), or ``unknown``."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha
