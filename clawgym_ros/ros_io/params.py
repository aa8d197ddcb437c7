"""Declare a node's ROS parameters from its config dataclass, and read the config back.

Each dataclass field becomes a parameter with a ParameterDescriptor carrying the field's
``metadata["help"]`` text; nested dataclasses become dotted prefixes (``mujoco.timestep``),
Nav2 style. Values are validated by the dataclass itself, so a bad parameter fails with a
message naming the field, the value and the allowed range.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

from clawgym_ros.config import from_dict
from clawgym_ros.errors import ConfigError

T = TypeVar("T")


def _flatten(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field, Any]]:
    out = []
    for field in dataclasses.fields(cls):
        name = f"{prefix}{field.name}"
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            raise TypeError(f"{cls.__name__}.{field.name} needs a default to be a ROS parameter")
        if dataclasses.is_dataclass(default):
            out += _flatten(type(default), f"{name}.")
        else:
            out.append((name, field, default))
    return out


def _to_param(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value


def declare_config(node: Node, cls: type[T], overrides: dict[str, Any] | None = None) -> T:
    """Declare one parameter per (nested) field of ``cls`` and build the config from them.

    Args:
        node: the node to declare parameters on.
        cls: a config dataclass whose fields all have defaults.
        overrides: defaults to use instead of the dataclass' (e.g. from a CLI).

    Returns:
        An instance of ``cls`` built from the parameter values.
    """
    overrides = overrides or {}
    values: dict[str, Any] = {}
    for name, field, default in _flatten(cls):
        default = overrides.get(name, default)
        descriptor = ParameterDescriptor(description=field.metadata.get("help", field.name))
        if node.has_parameter(name):
            # Lifecycle nodes configure again after cleanup: read, don't re-declare.
            param = node.get_parameter(name)
            value = param.value
            if isinstance(default, (list, tuple)) and not default:
                value = [v for v in value if v != ""]
        elif isinstance(default, (list, tuple)) and not default:
            # Empty lists have no ROS type; declare them as string arrays.
            param = node.declare_parameter(name, [""], descriptor)
            value = [v for v in param.value if v != ""]
        else:
            param = _declare(node, name, _to_param(default), descriptor)
            value = param.value
        if isinstance(default, tuple):
            value = tuple(value)
        values[name] = value
    return from_dict(cls, _nest(values), source=f"node {node.get_name()} parameters")


_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number with a decimal point",
               str: "a string", list: "a list"}


def _declare(node: Node, name: str, default: Any, descriptor: ParameterDescriptor) -> Any:
    """``declare_parameter`` with a given value of the wrong type as a ConfigError naming the
    parameter, the value and the type (rclpy raises InvalidParameterTypeException)."""
    from rclpy.exceptions import InvalidParameterTypeException

    try:
        return node.declare_parameter(name, default, descriptor)
    except InvalidParameterTypeException:
        given = getattr(node, "_parameter_overrides", {}).get(name)
        value = given.value if given is not None else "?"
        raise ConfigError(f"parameter {name}", value,
                          f"{_TYPE_NAMES.get(type(default), type(default).__name__)} "
                          f"(like {default!r})") from None


#: Parameters every rclpy node may be given besides its own.
_STANDARD = ("use_sim_time", "start_type_description_service", "qos_overrides.")


def check_unknown_parameters(node: Node) -> None:
    """Refuse parameters given to ``node`` (``-p``, params files) that it never declared: a
    misspelled name would otherwise be ignored in silence.

    Raises:
        ConfigError: naming the unknown parameter and the closest declared one.
    """
    import difflib

    given = sorted(getattr(node, "_parameter_overrides", {}))
    known = sorted(n for n in getattr(node, "_parameters", {}) if not n.startswith(_STANDARD))
    unknown = [n for n in given if n not in known and not n.startswith(_STANDARD)]
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"{node.get_name()} parameter", unknown[0],
                          f"{hint}one it declares: {', '.join(known)}")


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for name, value in flat.items():
        parts = name.split(".")
        cursor = nested
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
        cursor[parts[-1]] = value
    return nested
