"""Policy types by name: one registry, filled by a decorator and by Python entry points.

No torch import here, so :class:`~clawgym_ros.training.config.TrainConfig`, the CLI and nodes
can check a policy name cheaply. A policy type is a subclass of
:class:`clawgym_ros.training.policies.PolicyModel` registered under its name:

- inside this package or any imported module, with the decorator
  ``@register_policy("name")``;
- from another installed package, with an entry point in the group ``clawgym_ros.policies``
  (``name = "package.module:Class"``; loaded the first time the name is looked up).

The built-in types (``mlp``, ``cnn``) live in :mod:`clawgym_ros.training.policies`, imported on
their first lookup.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

from clawgym_ros import plugins
from clawgym_ros.errors import ConfigError
from clawgym_ros.training.options import BUILTIN_OPTIONS

#: Entry-point group through which other packages register policy types.
ENTRY_POINT_GROUP = "clawgym_ros.policies"


def _entry_points() -> dict[str, Any]:
    return plugins.entry_points(ENTRY_POINT_GROUP)


#: Built-in policy types (those with options in training/options.py) and the module that
#: registers them.
BUILTIN_POLICIES: tuple[str, ...] = tuple(BUILTIN_OPTIONS)
_BUILTIN_MODULE = "clawgym_ros.training.policies"

_REGISTRY: dict[str, Any] = {}


def register_policy(name: str):
    """Class decorator: register a :class:`~clawgym_ros.training.policies.PolicyModel`
    subclass as the policy type ``name`` (sets its ``type_name``).

    Raises:
        ConfigError: the name is empty, or already taken by another class.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ConfigError("policy", name, "a non-empty name without surrounding spaces")

    def decorate(cls):
        known = _REGISTRY.get(name)
        if known is not None and known is not cls \
                and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ConfigError("policy", name, "a name not registered yet (taken by "
                              f"{known.__module__}.{known.__qualname__})")
        cls.type_name = name
        _REGISTRY[name] = cls
        return cls
    return decorate


def policy_names() -> tuple[str, ...]:
    """Every policy type that can be looked up: built-in, registered, from entry points."""
    names = list(BUILTIN_POLICIES)
    for name in [*_REGISTRY, *_entry_points()]:
        if name not in names:
            names.append(name)
    return tuple(names)


def check_policy_name(name: Any, field: str = "policy") -> str:
    """``name`` if it is a known policy type (entry points are read only for other names).

    Raises:
        ConfigError: naming the field, the value and the known types.
    """
    if isinstance(name, str) and (name in BUILTIN_POLICIES or name in _REGISTRY):
        return name
    if isinstance(name, str) and name in _entry_points():
        return name
    raise ConfigError(field, name, "one of " + ", ".join(policy_names()))


def policy_class(name: str):
    """The PolicyModel subclass registered as ``name`` (imports torch).

    Raises:
        ConfigError: unknown name, or an entry point that does not name a PolicyModel class.
    """
    if name not in _REGISTRY and name in BUILTIN_POLICIES:
        importlib.import_module(_BUILTIN_MODULE)
    if name not in _REGISTRY:
        ep = _entry_points().get(name)
        if ep is None:
            raise ConfigError("policy", name, "one of " + ", ".join(policy_names()))
        loaded = ep.load()
        from clawgym_ros.training.policies import PolicyModel

        if not (isinstance(loaded, type) and issubclass(loaded, PolicyModel)):
            raise ConfigError("policy", name, f"an entry point ({ENTRY_POINT_GROUP}) naming a "
                              f"PolicyModel subclass, not {ep.value}")
        if _REGISTRY.get(name) is not loaded:
            register_policy(name)(loaded)
    return _REGISTRY[name]


def check_policy_options(name: str, options: Any, field: str = "policy_options") -> dict:
    """``options`` checked by the policy type's own ``Options`` class (as training builds it).

    A built-in type is checked without importing torch (its ``Options`` live in
    :mod:`clawgym_ros.training.options`); a plugin type is loaded (torch, and its entry point).

    Args:
        name: a known policy type (see :func:`check_policy_name`).
        options: option name -> value.
        field: field name for error messages (e.g. ``policy_options``).

    Returns:
        the options as a plain dict.

    Raises:
        ConfigError: not a mapping, an option the type does not have (the error names it and
            the type's options), a required option missing, or the type's own validation.
    """
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise ConfigError(field, options, "a mapping of option name to value (the policy "
                          "type's Options)")
    options = dict(options)
    if name in BUILTIN_POLICIES:
        option_cls = BUILTIN_OPTIONS[name]
    else:
        option_cls = policy_class(name).Options
    allowed = [f.name for f in dataclasses.fields(option_cls)] \
        if dataclasses.is_dataclass(option_cls) else []
    known = ", ".join(allowed) or "none"
    for key, value in options.items():
        if key not in allowed:
            raise ConfigError(f"{field}.{key}", value, f"options of the {name} policy: {known}")
    try:
        option_cls(**options)
    except TypeError as err:            # a required option without a value
        raise ConfigError(field, options, f"options of the {name} policy: {known} ({err})") \
            from None
    except ConfigError as err:          # the type's own validation names its option
        sub = err.field.split(".", 1)[1] if err.field.startswith("policy_options.") else ""
        raise ConfigError(f"{field}.{sub}" if sub else err.field, err.value, err.allowed) \
            from None
    return options


def policy_options_from_json(text: str, field: str = "policy_options_json") -> dict:
    """The Train action's ``policy_options_json`` -> options ("" = none).

    Raises:
        ConfigError: not a JSON object with string keys.
    """
    from clawgym_ros.config import json_object

    return json_object(text, field, "a JSON object of option name to value, or empty")
