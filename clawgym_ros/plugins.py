"""What the registries of tasks, perturbation families and policy types share: references to
classes as ``"module:Name"`` text and the Python entry points of a group (how another
installed package registers its own; docs/extending.md). No heavy imports.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import Any

from clawgym_ros.errors import ConfigError


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


def named_class(table: Mapping[str, str], name: Any, field: str = "backend") -> Any:
    """The class that ``table`` (name -> ``"module:Name"``) registers under ``name``, imported
    now (backends that need a workstation are imported only when chosen).

    Raises:
        ConfigError: an unknown name (naming ``field`` and the known ones).
    """
    if name not in table:
        raise ConfigError(field, name, "one of " + ", ".join(sorted(table)))
    return load(table[name])


def lookup(name: Any, field: str, registry: Mapping[str, Any], group: str, entry_type: type,
           add: Callable[[Any], Any], names: Callable[[], Iterable[str]], what: str) -> Any:
    """A registry's entry for ``name``; an entry point of ``group`` is loaded on the name's
    first lookup (importing it registers the entry, or it names an ``entry_type`` that is
    passed to ``add``).

    Raises:
        ConfigError: an unknown name (naming ``field`` and ``names()``), or an entry point that
            registers nothing of that name (``what`` says what it should name).
    """
    if isinstance(name, str) and name in registry:
        return registry[name]
    ep = entry_points(group).get(name) if isinstance(name, str) else None
    if ep is None:
        raise ConfigError(field, name, "one of " + ", ".join(names()))
    loaded = ep.load()
    if isinstance(loaded, entry_type) and loaded.name == name:
        add(loaded)
    if name not in registry:
        raise ConfigError(field, name, f"an entry point ({group}) naming {what}, not {ep.value}")
    return registry[name]


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """The entry points of ``group`` by name, read once per group and ``sys.path`` (a scan of
    the installed distributions takes ~0.1 s)."""
    return _scan(group, tuple(sys.path))


@functools.lru_cache(maxsize=32)
def _scan(group: str, path: tuple[str, ...]) -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=group)}
