"""Atomic file writes: write a temporary file in the same folder, fsync, then rename.

A reader (or a node restarted after a crash) sees either the old file or the new one, never a
half-written one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def process_umask() -> int:
    """This process's file-creation mask (read from /proc: setting it to read it back would
    race with file creation in other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_mode(directory: bool = False) -> int:
    """The mode ``open()`` / ``mkdir()`` would give a new file or folder (0o644 / 0o755 under
    the usual umask 022). ``tempfile`` creates 0o600 files and 0o700 folders: renamed into
    place, they would leave artifacts and loop files unreadable to the rest of a team."""
    return (0o777 if directory else 0o666) & ~process_umask()


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Atomically replace ``path`` with ``data`` (mode as ``open()`` would create it).

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, default_mode())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Atomically replace ``path`` with UTF-8 ``text``."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, data: Any) -> Path:
    """Atomically replace ``path`` with ``data`` as indented, key-sorted JSON."""
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def append_line(path: str | Path, line: str) -> None:
    """Append one line to a log-style file and fsync it (a crash loses at most that line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line.rstrip("\n") + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def fsync_dir(path: str | Path) -> None:
    """fsync a directory so that a rename inside it survives a power loss."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
