"""The simulator backend interface shared by MuJoCo (embedded default) and Gazebo.

Every physical-world consumer (Gymnasium envs, sim_node, perturbations, planners, experts)
talks to a backend through this interface, so that lighting and dynamics changes, resets and
stepping look the same whichever simulator runs. Runtime knobs are *relative to the scene's
defaults* (1.0 = default), are remembered, and are undone by :meth:`SimBackend.restore_defaults`
(which ``reset`` calls).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any

from clawgym_ros import plugins
from clawgym_ros.config import check_range
from clawgym_ros.errors import ConfigError

Vec3 = tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class LightingSettings:
    """Lighting relative to the scene's defaults (scales multiply the default colours)."""

    light_name: str = dataclasses.field(
        default="", metadata={"help": "light to change; empty = every light"})
    diffuse_scale: float = dataclasses.field(
        default=1.0, metadata={"help": "multiplier on default diffuse colour, [0, 10]"})
    ambient_scale: float = dataclasses.field(
        default=1.0, metadata={"help": "multiplier on default ambient colour, [0, 10]"})
    specular_scale: float = dataclasses.field(
        default=1.0, metadata={"help": "multiplier on default specular colour, [0, 10]"})
    headlight_scale: float = dataclasses.field(
        default=1.0, metadata={"help": "multiplier on the default headlight, [0, 10]"})
    direction: Vec3 | None = None   # unit vector in world frame; None = default
    position: Vec3 | None = None    # world position; None = default

    def __post_init__(self) -> None:
        for name in ("diffuse_scale", "ambient_scale", "specular_scale", "headlight_scale"):
            check_range(f"lighting.{name}", getattr(self, name), 0.0, 10.0)
        for name in ("direction", "position"):
            value = getattr(self, name)
            if value is not None:
                if len(value) != 3:
                    raise ConfigError(f"lighting.{name}", value, "three numbers (x, y, z)")
                for i, v in enumerate(value):
                    check_range(f"lighting.{name}[{i}]", float(v))
        if self.direction is not None and not any(abs(v) > 1e-9 for v in self.direction):
            raise ConfigError("lighting.direction", self.direction, "a non-zero vector")


@dataclasses.dataclass(frozen=True)
class DynamicsSettings:
    """Dynamics relative to the model's defaults.

    ``target`` selects one body (mass, friction), joint (damping) or actuator (gain) by name;
    empty applies mass and friction to the manipulated objects, damping to every joint and
    gains to every actuator.
    """

    target: str = dataclasses.field(default="", metadata={"help": "body/joint/actuator name"})
    mass_scale: float = dataclasses.field(
        default=1.0, metadata={"help": "multiplier on object mass, (0, 10]"})
    friction_scale: float = dataclasses.field(
        default=1.0, metadata={"help": "multiplier on sliding friction, (0, 10]"})
    damping_scale: float = dataclasses.field(
        default=1.0, metadata={"help": "multiplier on joint damping, [0, 10]"})
    actuator_gain_scale: float = dataclasses.field(
        default=1.0, metadata={"help": "multiplier on actuator gains, (0, 10]"})
    command_latency: float = dataclasses.field(
        default=0.0, metadata={"help": "delay applied to commands in seconds, [0, 1]"})

    def __post_init__(self) -> None:
        check_range("dynamics.mass_scale", self.mass_scale, 0.0, 10.0, low_open=True)
        check_range("dynamics.friction_scale", self.friction_scale, 0.0, 10.0, low_open=True)
        check_range("dynamics.damping_scale", self.damping_scale, 0.0, 10.0)
        check_range("dynamics.actuator_gain_scale", self.actuator_gain_scale, 0.0, 10.0,
                    low_open=True)
        check_range("dynamics.command_latency", self.command_latency, 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class CameraPoseSettings:
    """A camera's mount moved from its default pose, in the camera's own frame (a bumped or
    miscalibrated mount: what the camera sees changes, nothing physical does)."""

    camera_name: str = dataclasses.field(
        default="", metadata={"help": "camera to move; empty = every camera"})
    offset: Vec3 = dataclasses.field(
        default=(0.0, 0.0, 0.0), metadata={"help": "translation in the camera frame, m"})
    rotation: Vec3 = dataclasses.field(
        default=(0.0, 0.0, 0.0),
        metadata={"help": "rotation vector (axis x angle) in the camera frame, rad"})

    def __post_init__(self) -> None:
        for name, limit in (("offset", 1.0), ("rotation", math.pi)):
            value = tuple(float(v) for v in getattr(self, name))
            if len(value) != 3:
                raise ConfigError(f"camera_pose.{name}", value, "three numbers (x, y, z)")
            for i, v in enumerate(value):
                check_range(f"camera_pose.{name}[{i}]", v, -limit, limit)
            object.__setattr__(self, name, value)


Blend = tuple[float, float, float, float]


@dataclasses.dataclass(frozen=True)
class ColourSettings:
    """Colours of the free objects and the fixed shapes, each blended from its default toward
    a colour: ``(r, g, b, weight)``, rgb' = (1 - weight) rgb + weight (r, g, b). The i-th entry
    of ``objects`` is for the scene's i-th free object, the i-th of ``statics`` for the fixed
    shapes of its i-th default colour (all parts of a bin together; the floor excluded);
    entries beyond the scene's count are unused, missing ones leave the colour as it is."""

    objects: tuple[Blend, ...] = ()
    statics: tuple[Blend, ...] = ()

    def __post_init__(self) -> None:
        for name in ("objects", "statics"):
            rows = tuple(tuple(float(v) for v in row) for row in getattr(self, name))
            for i, row in enumerate(rows):
                if len(row) != 4:
                    raise ConfigError(f"colour.{name}[{i}]", row, "(r, g, b, weight)")
                for j, v in enumerate(row):
                    check_range(f"colour.{name}[{i}][{j}]", v, 0.0, 1.0)
            object.__setattr__(self, name, rows)


class SimBackend(abc.ABC):
    """What every simulator backend offers. Implementations: ``mujoco`` and ``gazebo``."""

    name: str = "abstract"

    @abc.abstractmethod
    def reset(self, seed: int, scenario: str | None = None) -> None:
        """Restore defaults, then reset the world for ``scenario`` with ``seed``."""

    @abc.abstractmethod
    def set_lighting(self, settings: LightingSettings) -> None:
        """Apply lighting relative to defaults (takes effect on the next image)."""

    @abc.abstractmethod
    def set_dynamics(self, settings: DynamicsSettings) -> None:
        """Apply dynamics relative to defaults (takes effect on the next step)."""

    def set_camera_pose(self, settings: CameraPoseSettings) -> None:
        """Move a camera's mount relative to its default pose (takes effect on the next
        image; undone by :meth:`restore_defaults`).

        Raises:
            ConfigError: this backend cannot move its cameras at run time.
        """
        raise ConfigError("camera_pose", self.name, "a backend that moves cameras at run "
                          "time (mujoco)")

    def set_colours(self, settings: ColourSettings) -> None:
        """Blend object and fixed-shape colours toward ``settings``' (the next image; undone by
        :meth:`restore_defaults`).

        Raises:
            ConfigError: this backend cannot recolour its scene at run time.
        """
        raise ConfigError("colour", self.name, "a backend that recolours its scene at run "
                          "time (mujoco)")

    @abc.abstractmethod
    def restore_defaults(self) -> None:
        """Undo every lighting, dynamics, camera pose and colour change."""

    @property
    @abc.abstractmethod
    def time(self) -> float:
        """Simulation time in seconds."""

    def describe(self) -> dict[str, Any]:
        """Active runtime knobs (for episode records)."""
        return {"backend": self.name}


#: backend name -> "module:class", imported lazily (gazebo needs a workstation).
BACKENDS: dict[str, str] = {
    "mujoco": "clawgym_ros.sim.mujoco_backend:MujocoBackend",
    "gazebo": "clawgym_ros.sim.gazebo_backend:GazeboBackend",
}


def backend_class(name: str) -> type[SimBackend]:
    """The backend class registered under ``name``.

    Raises:
        ConfigError: unknown name.
    """
    return plugins.named_class(BACKENDS, name)
