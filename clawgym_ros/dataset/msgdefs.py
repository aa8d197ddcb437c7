"""ROS 2 message definition text (the ``ros2 bag`` MCAP schema format) without a ROS install.

``ros2 bag`` stores, for each topic type, the ``.msg`` text of the type followed by the text of
every type it depends on, each introduced by a line of 80 ``=`` and ``MSG: pkg/Name``::

    std_msgs/Header header
    float64[] position
    ================================================================================
    MSG: std_msgs/Header
    builtin_interfaces/Time stamp
    string frame_id
    ================================================================================
    MSG: builtin_interfaces/Time
    ...

This module assembles that text from ``.msg`` files found in the repository (custom
``clawgym_interfaces``) and in installed ``share/<pkg>/msg`` folders (AMENT_PREFIX_PATH, the
venv's prefix, ``/opt/ros/*``). It imports no ROS package: the MCAP writer (mcap-ros2-support)
and readers (rosbags, mcap_ros2) parse the text themselves.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

from clawgym_ros.errors import ClawgymError

SEPARATOR = "=" * 80
PRIMITIVE_TYPES = frozenset({
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
    "uint32", "int64", "uint64", "string", "wstring",
})
_REPO_ROOT = Path(__file__).resolve().parents[2]
_ARRAY_SUFFIX = re.compile(r"\[[^\]]*\]$")
_BOUND_SUFFIX = re.compile(r"<=\d+$")


def search_roots() -> list[Path]:
    """Folders that may hold ``<pkg>/msg/<Name>.msg``, in lookup order.

    The repository comes first (its ``clawgym_interfaces`` sources are the truth for custom
    types), then the share folders of AMENT_PREFIX_PATH, of this interpreter's prefix and of any
    ``/opt/ros/<distro>``.
    """
    roots = [_REPO_ROOT]
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            roots.append(Path(prefix) / "share")
    roots.append(Path(sys.prefix) / "share")
    roots += sorted(Path("/opt/ros").glob("*/share")) if Path("/opt/ros").is_dir() else []
    unique: list[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


def normalize_type(type_name: str) -> tuple[str, str]:
    """Split ``pkg/Name`` or ``pkg/msg/Name`` into ``(pkg, Name)``.

    Raises:
        ClawgymError: if the name has no package part.
    """
    parts = type_name.strip().split("/")
    if len(parts) == 3 and parts[1] == "msg":
        parts = [parts[0], parts[2]]
    if len(parts) != 2 or not all(parts):
        raise ClawgymError(f"message type {type_name!r} is not of the form pkg/Name or "
                           "pkg/msg/Name")
    return parts[0], parts[1]


@functools.cache
def find_msg_file(pkg: str, name: str) -> Path:
    """Path of the ``.msg`` file of ``pkg/Name``.

    Raises:
        ClawgymError: if no search root has it (the message lists the places looked at).
    """
    for root in search_roots():
        path = root / pkg / "msg" / f"{name}.msg"
        if path.is_file():
            return path
    looked = ", ".join(str(r) for r in search_roots())
    raise ClawgymError(f"definition of {pkg}/{name} not found (looked for {pkg}/msg/{name}.msg "
                       f"under {looked}); install the ROS message package or source ROS 2")


def field_types(text: str, pkg: str) -> list[str]:
    """Non-primitive field types of one ``.msg`` text, as ``pkg/Name``, in order of appearance.

    Constants (``type NAME=value``) are skipped; same-package short names get ``pkg``; the
    legacy bare ``Header`` means ``std_msgs/Header``.
    """
    found: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        if len(tokens) < 2 or "=" in tokens[1] or (len(tokens) > 2 and tokens[2].startswith("=")):
            continue  # a constant, or not a field line
        base = _BOUND_SUFFIX.sub("", _ARRAY_SUFFIX.sub("", tokens[0]))
        if base in PRIMITIVE_TYPES:
            continue
        if "/" in base:
            dep = "/".join(normalize_type(base))
        elif base == "Header":
            dep = "std_msgs/Header"
        else:
            dep = f"{pkg}/{base}"
        if dep not in found:
            found.append(dep)
    return found


@functools.cache
def message_definition(type_name: str) -> str:
    """The full ``ros2 bag`` definition text of a message type (dependencies depth-first).

    Args:
        type_name: ``pkg/Name`` or ``pkg/msg/Name``.

    Returns:
        The top type's ``.msg`` text, then each dependency once, separated as ros2 bag does.

    Raises:
        ClawgymError: a definition file is missing.
    """
    pkg, name = normalize_type(type_name)
    top = _read(pkg, name)
    order: list[str] = []
    _collect(pkg, top, order, {f"{pkg}/{name}"})
    parts = [top]
    for dep in order:
        dep_pkg, dep_name = normalize_type(dep)
        parts.append(f"{SEPARATOR}\nMSG: {dep}\n{_read(dep_pkg, dep_name)}")
    return "\n".join(parts) + "\n"


def _read(pkg: str, name: str) -> str:
    return find_msg_file(pkg, name).read_text(encoding="utf-8").rstrip("\n")


def _collect(pkg: str, text: str, order: list[str], seen: set[str]) -> None:
    for dep in field_types(text, pkg):
        if dep in seen:
            continue
        seen.add(dep)
        order.append(dep)
        dep_pkg, dep_name = normalize_type(dep)
        _collect(dep_pkg, _read(dep_pkg, dep_name), order, seen)
