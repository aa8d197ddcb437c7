"""Helpers for config dataclasses: validated fields and loading from YAML/dicts.

Every component has one frozen-ish dataclass validated in ``__post_init__`` with the helpers
below, so that a bad value produces a :class:`~clawgym_ros.errors.ConfigError` naming the field,
the value and the allowed range.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from clawgym_ros.errors import ConfigError

# Every YAML config is read by the one safe loader (size limit, no aliases, UTF-8 checked).
from clawgym_ros.safe_load import load_yaml  # noqa: F401 (re-exported)

T = TypeVar("T")


@functools.cache
def data_root() -> Path:
    """The folder holding the package's config/, urdf/ and worlds/: the source checkout, else
    the installed ``share/clawgym_ros`` of this interpreter's prefix or of an
    AMENT_PREFIX_PATH entry (colcon / pip install); the checkout when none has them."""
    from clawgym_ros.constants import PACKAGE

    source = Path(__file__).resolve().parents[1]
    if (source / "config" / "scenes").is_dir():
        return source
    for prefix in (sys.prefix, *os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        share = Path(prefix) / "share" / PACKAGE
        if prefix and (share / "config" / "scenes").is_dir():
            return share
    return source


def check_range(
    field: str,
    value: float,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    source: str | None = None,
) -> float:
    """Check that ``value`` is a finite number within [low, high] (or open bounds).

    Returns:
        The value, unchanged.

    Raises:
        ConfigError: if the value is not a number, not finite or out of range.
    """
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    allowed = f"{'(' if low_open else '['}{lo}, {hi}{')' if high_open else ']'}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(field, value, f"a number in {allowed}", source)
    try:
        finite = math.isfinite(value)
    except OverflowError:       # an integer beyond any float (10**400)
        finite = False
    if not finite:
        raise ConfigError(field, value, f"a finite number in {allowed}", source)
    if low is not None and (value < low or (low_open and value == low)):
        raise ConfigError(field, value, allowed, source)
    if high is not None and (value > high or (high_open and value == high)):
        raise ConfigError(field, value, allowed, source)
    return value


def check_int(
    field: str, value: int, low: int | None = None, high: int | None = None,
    source: str | None = None,
) -> int:
    """Check that ``value`` is an integer within [low, high]."""
    lo = "-inf" if low is None else str(low)
    hi = "inf" if high is None else str(high)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, value, f"an integer in [{lo}, {hi}]", source)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ConfigError(field, value, f"an integer in [{lo}, {hi}]", source)
    return value


def json_object(text: str, field: str, allowed: str = "a JSON object") -> dict[str, Any]:
    """A goal's JSON-object text field (``*_json``) -> dict; "" = {}.

    Raises:
        ConfigError: ``text`` is not a JSON object (naming ``field``, the parse error if any).
    """
    import json

    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ConfigError(field, text, f"{allowed} ({err})") from None
    if not isinstance(value, dict):
        raise ConfigError(field, text, allowed)
    return value


def check_option_names(options: Mapping[str, Any], allowed: Sequence[str],
                       prefix: str) -> None:
    """Every key of ``options`` (settings given by name: ``--rl-option KEY=VALUE``, a config's
    ``options`` block, an action goal's JSON) is one of ``allowed``.

    Raises:
        ConfigError: field ``<prefix><key>`` with the key's value and the allowed names.
    """
    for key in options:
        if key not in allowed:
            raise ConfigError(f"{prefix}{key}", options[key], "one of " + ", ".join(allowed))


def check_choice(field: str, value: str, choices: Iterable[str], source: str | None = None) -> str:
    """Check that ``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(field, value, "one of " + ", ".join(repr(c) for c in choices), source)
    return value


def from_dict(cls: type[T], data: Mapping[str, Any], source: str | None = None) -> T:
    """Build a config dataclass from a mapping, rejecting unknown keys by name.

    Nested dataclass fields are built recursively when given as mappings.

    Raises:
        ConfigError: for unknown keys, or anything the dataclass' validation rejects.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(cls.__name__, data, "a mapping of field names to values", source)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = _type_hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(unknown[0], data[unknown[0]], "one of the fields " + ", ".join(fields),
                          source)
    kwargs = {}
    for name, value in data.items():
        sub = _dataclass_type(hints.get(name, fields[name].type))
        if sub is not None and isinstance(value, Mapping):
            value = from_dict(sub, value, source)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except ConfigError as err:
        if source and not err.source:
            raise ConfigError(err.field, err.value, err.allowed, source) from None
        raise


def _type_hints(cls: type) -> dict[str, Any]:
    """Resolved field types (string annotations under ``from __future__ import annotations``)."""
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):
        return {}


def _dataclass_type(ftype: Any) -> type | None:
    if isinstance(ftype, type) and dataclasses.is_dataclass(ftype):
        return ftype
    return None


def to_dict(obj: Any) -> Any:
    """Convert a (nested) dataclass to plain JSON-able Python data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj
