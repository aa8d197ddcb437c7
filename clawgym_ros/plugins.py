"""What the registries of tasks, perturbation families and policy types share: references to
classes as ``"module:Name"`` text and the Python entry points of a group (how another
installed package registers its own; docs/extending.md). No heavy imports.
"""

from __future__ import annotations

import functools
import importlib
import sys
from importlib import metadata
from typing import Any


def ref(value: Any) -> str:
    """``"module:Name"`` of a class or function (strings are kept)."""
    if isinstance(value, str):
        return value
    return f"{value.__module__}:{value.__qualname__}"


def load(reference: str) -> Any:
    """The object a ``"module:Name"`` (or ``"module:Outer.Inner"``) text names (imports it)."""
    module, _, name = reference.partition(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """The entry points of ``group`` by name, read once per group and ``sys.path`` (a scan of
    the installed distributions takes ~0.1 s)."""
    return _scan(group, tuple(sys.path))


@functools.lru_cache(maxsize=32)
def _scan(group: str, path: tuple[str, ...]) -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=group)}
