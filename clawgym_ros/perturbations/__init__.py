"""Perturbations: lighting, sensor noise, GPS dropout, dynamics, camera pose, colour and
mid-episode disturbances, and the family registry.

Pure cores (no rclpy) shared by the Gymnasium wrappers (:mod:`.wrappers`) and the ROS nodes
(``clawgym_ros.nodes.*_node``). :func:`make` builds one from a family name and parameters.

A family registers once, as a :class:`FamilyEntry`: its core (a
:class:`~clawgym_ros.perturbations.base.Perturbation` subclass, whose ``config_cls`` is its
config), its in-process wrapper, which side it acts on (observation or backend), its place in
:func:`~clawgym_ros.perturbations.wrappers.wrap` and its ROS interposer node. Derived from it:
``constants.PERTURBATION_FAMILIES`` / ``OBSERVATION_FAMILIES`` (what mixtures, loop configs
and records accept), :data:`FAMILIES`, ``wrappers.WRAPPERS`` and :func:`interposer_nodes`.
Three ways in: a row of :data:`BUILTIN_FAMILIES`; ``@register_family(...)`` on the wrapper
class (name and core read from it); an entry point of the group ``clawgym_ros.perturbations``
(naming a decorated wrapper class or a :class:`FamilyEntry`), loaded on first lookup.

Importing this package imports no family module (no NumPy, no simulator): the cores and the
names re-exported below load on first use.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from clawgym_ros import constants as C
from clawgym_ros import plugins
from clawgym_ros.errors import ConfigError

if TYPE_CHECKING:
    from clawgym_ros.perturbations.base import Perturbation, PerturbationConfig

#: Entry-point group through which other packages register perturbation families.
ENTRY_POINT_GROUP = "clawgym_ros.perturbations"


def _entry_points() -> dict[str, Any]:
    return plugins.entry_points(ENTRY_POINT_GROUP)


@dataclasses.dataclass(frozen=True)
class FamilyEntry:
    """One perturbation family's registration.

    Attributes:
        name: the family name (suites, mixtures, loop ranges, records).
        core: ``"module:Class"`` of the :class:`~clawgym_ros.perturbations.base.Perturbation`
            subclass (its ``config_cls`` is the family's config).
        wrapper: ``"module:Class"`` of its
            :class:`~clawgym_ros.perturbations.wrappers.PerturbationWrapper` (in-process).
        observation: it acts on what the policy observes (sensor topics; training-time
            hardening emulates such families), else on the simulator (backend side).
        wrap_order: position in :func:`~clawgym_ros.perturbations.wrappers.wrap` (lower =
            closer to the env; backend-side families come before observation-side ones).
        node: the ROS interposer node (console script ``<node>``; "" = none).
    """

    name: str
    core: str
    wrapper: str
    observation: bool = False
    wrap_order: int = 50
    node: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip() \
                or self.name == C.FAMILY_NONE or "+" in self.name or "/" in self.name:
            raise ConfigError("family", self.name, "a name other than 'none', without spaces "
                              "around it, '+' or '/'")
        for field in ("core", "wrapper"):
            value = getattr(self, field)
            if not isinstance(value, str) or ":" not in value:
                raise ConfigError(f"families.{self.name}.{field}", value, "'module:Name'")
        if not isinstance(self.observation, bool):
            raise ConfigError(f"families.{self.name}.observation", self.observation,
                              "true or false")
        if not isinstance(self.wrap_order, int):
            raise ConfigError(f"families.{self.name}.wrap_order", self.wrap_order,
                              "an integer")


_W = "clawgym_ros.perturbations.wrappers"
#: The built-in families, in the order of ``constants.PERTURBATION_FAMILIES``.
BUILTIN_FAMILIES: tuple[FamilyEntry, ...] = (
    FamilyEntry(C.FAMILY_LIGHTING, "clawgym_ros.perturbations.lighting:Lighting",
                f"{_W}:LightingWrapper", wrap_order=10, node=C.NODE_LIGHTING),
    FamilyEntry(C.FAMILY_SENSOR_NOISE, "clawgym_ros.perturbations.sensor_noise:SensorNoise",
                f"{_W}:SensorNoiseWrapper", observation=True, wrap_order=60,
                node=C.NODE_SENSOR_NOISE),
    FamilyEntry(C.FAMILY_GPS_DROPOUT, "clawgym_ros.perturbations.gps:GpsDropout",
                f"{_W}:GpsDropoutWrapper", observation=True, wrap_order=70,
                node=C.NODE_GPS_DROPOUT),
    FamilyEntry(C.FAMILY_DYNAMICS, "clawgym_ros.perturbations.dynamics:Dynamics",
                f"{_W}:DynamicsWrapper", wrap_order=0, node=C.NODE_DYNAMICS),
    # camera mount offsets on the simulator (no interposer: in ROS lockstep the evaluator
    # sends them to sim_node, sim/set_camera_pose)
    FamilyEntry(C.FAMILY_CAMERA_POSE, "clawgym_ros.perturbations.camera:CameraPose",
                f"{_W}:CameraPoseWrapper", wrap_order=15),
    # object and scene colours on the simulator (in-process only: no ROS path yet)
    FamilyEntry(C.FAMILY_COLOUR, "clawgym_ros.perturbations.colour:Colour",
                f"{_W}:ColourWrapper", wrap_order=16),
    # mid-episode events on the simulator (task worlds, in-process; no ROS interposer yet)
    FamilyEntry(C.FAMILY_DISTURBANCE, "clawgym_ros.perturbations.disturbance:Disturbance",
                "clawgym_ros.perturbations.disturbance:DisturbanceWrapper", wrap_order=20),
)

_REGISTRY: dict[str, FamilyEntry] = {e.name: e for e in BUILTIN_FAMILIES}


def add_family(entry: FamilyEntry) -> FamilyEntry:
    """Register ``entry``.

    Raises:
        ConfigError: the name is taken by another family.
    """
    if not isinstance(entry, FamilyEntry):
        raise ConfigError("family", entry, "a FamilyEntry")
    known = _REGISTRY.get(entry.name)
    if known is not None and known != entry:
        raise ConfigError("family", entry.name, f"a name not registered yet (taken by "
                          f"{known.core})")
    _REGISTRY[entry.name] = entry
    return entry


def register_family(observation: bool = False, wrap_order: int | None = None, node: str = ""):
    """Class decorator: register a
    :class:`~clawgym_ros.perturbations.wrappers.PerturbationWrapper` subclass (its ``family``
    and ``core_cls``) as a perturbation family.

    Args:
        observation: the family acts on observations (else on the simulator).
        wrap_order: place in ``wrap`` (default: after the built-ins of its side: 50 backend,
            100 observation).
        node: its ROS interposer node, if it has one.

    Raises:
        ConfigError: a bad or taken name, or a core whose config is for another family.
    """
    def decorate(cls):
        family = getattr(cls, "family", "")
        config_family = getattr(getattr(cls.core_cls, "config_cls", None), "FAMILY", None)
        if config_family != family:
            raise ConfigError(f"families.{family}.core", plugins.ref(cls.core_cls),
                              f"a core whose config_cls.FAMILY is {family!r}, not "
                              f"{config_family!r}")
        order = wrap_order if wrap_order is not None else (100 if observation else 50)
        add_family(FamilyEntry(family, plugins.ref(cls.core_cls), plugins.ref(cls),
                               observation=observation, wrap_order=order, node=node))
        return cls
    return decorate


def family_entry(name: Any, field: str = "family") -> FamilyEntry:
    """The registration of family ``name`` (an entry point is loaded on its first lookup).

    Raises:
        ConfigError: unknown name, or an entry point naming neither a registered wrapper
            class nor a FamilyEntry.
    """
    return plugins.lookup(name, field, _REGISTRY, ENTRY_POINT_GROUP, FamilyEntry, add_family,
                          family_names, "a wrapper registered with @register_family or a "
                          "FamilyEntry")


def family_names() -> tuple[str, ...]:
    """Every family that can be looked up (built-in first; ``none`` is not a family)."""
    return (*_REGISTRY, *(n for n in _entry_points() if n not in _REGISTRY))


def family_entries() -> tuple[FamilyEntry, ...]:
    """Every family's entry (entry points loaded)."""
    return tuple(family_entry(n) for n in family_names())


def observation_families() -> tuple[str, ...]:
    """Families acting on what the policy observes (``constants.OBSERVATION_FAMILIES``)."""
    return tuple(e.name for e in family_entries() if e.observation)


def interposer_nodes() -> dict[str, str]:
    """family -> its ROS interposer node (families with one)."""
    return {e.name: e.node for e in family_entries() if e.node}


class FamilyTable(Mapping):
    """Live read-only view ``family -> loaded attribute`` (``core`` or ``wrapper``), in
    registration order or in wrap order."""

    def __init__(self, attr: str, wrap_order: bool = False) -> None:
        self._attr = attr
        self._wrap_order = wrap_order

    def __iter__(self) -> Iterator[str]:
        names = family_names()
        if self._wrap_order:
            entries = family_entries()
            names = tuple(e.name for e in sorted(entries, key=lambda e: e.wrap_order))
        return iter(names)

    def __len__(self) -> int:
        return len(family_names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in family_names()

    def __getitem__(self, name: str) -> Any:
        if name not in self:
            raise KeyError(name)
        return plugins.load(getattr(family_entry(name), self._attr))

    def __repr__(self) -> str:
        return f"{{{', '.join(f'{k!r}: {self._attr}' for k in self)}}}"


#: family name -> perturbation class (its ``config_cls`` is the config dataclass); live.
FAMILIES: Mapping[str, type[Perturbation]] = FamilyTable("core")


def config_for(family: str, params: Mapping[str, Any] | None = None,
               source: str | None = None) -> PerturbationConfig:
    """The config of ``family`` built from ``params`` (config field names).

    Raises:
        ConfigError: unknown family, unknown field, or a value out of range.
    """
    from clawgym_ros.config import from_dict

    if family not in FAMILIES:
        raise ConfigError("family", family, "one of " + ", ".join(FAMILIES), source)
    data = {"family": family, **(params or {})}
    return from_dict(FAMILIES[family].config_cls, data, source)


def make(family: str, params: Mapping[str, Any] | None = None) -> Perturbation:
    """A perturbation of ``family`` configured from ``params`` (see :func:`config_for`).

    Raises:
        ConfigError: as :func:`config_for` (an unknown family names the known ones).
    """
    config = config_for(family, params)
    return FAMILIES[family](config)


#: Names re-exported from the family modules, imported on first access.
_LAZY = {
    "CameraPose": "clawgym_ros.perturbations.camera",
    "CameraPoseConfig": "clawgym_ros.perturbations.camera",
    "Colour": "clawgym_ros.perturbations.colour",
    "ColourConfig": "clawgym_ros.perturbations.colour",
    "Perturbation": "clawgym_ros.perturbations.base",
    "PerturbationConfig": "clawgym_ros.perturbations.base",
    "Disturbance": "clawgym_ros.perturbations.disturbance",
    "DisturbanceConfig": "clawgym_ros.perturbations.disturbance",
    "Dynamics": "clawgym_ros.perturbations.dynamics",
    "DynamicsConfig": "clawgym_ros.perturbations.dynamics",
    "GpsDropout": "clawgym_ros.perturbations.gps",
    "GpsDropoutConfig": "clawgym_ros.perturbations.gps",
    "Lighting": "clawgym_ros.perturbations.lighting",
    "LightingConfig": "clawgym_ros.perturbations.lighting",
    "SensorNoise": "clawgym_ros.perturbations.sensor_noise",
    "SensorNoiseConfig": "clawgym_ros.perturbations.sensor_noise",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FAMILIES", "CameraPose", "CameraPoseConfig", "Colour", "ColourConfig", "Disturbance",
    "DisturbanceConfig",
    "Dynamics", "DynamicsConfig", "FamilyEntry",
    "GpsDropout", "GpsDropoutConfig", "Lighting", "LightingConfig", "Perturbation",
    "PerturbationConfig", "SensorNoise", "SensorNoiseConfig", "add_family", "config_for",
    "family_entry", "family_names",
    "interposer_nodes", "make", "observation_families", "register_family",
]
