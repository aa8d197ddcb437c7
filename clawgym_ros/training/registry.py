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

import importlib
from importlib import metadata
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError

#: Entry-point group through which other packages register policy types.
ENTRY_POINT_GROUP = "clawgym_ros.policies"
#: Built-in policy types and the module that registers them.
BUILTIN_POLICIES: tuple[str, ...] = (C.POLICY_MLP, C.POLICY_CNN)
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


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


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
