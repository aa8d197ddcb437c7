"""Gazebo (gz-sim) backend: the same SimBackend knobs through gz-transport services.

Workstation only: ``gz.transport`` / ``gz.msgs`` Python bindings (Harmonic: transport13 /
msgs10; Ionic: transport14 / msgs11) are imported when a backend is constructed, never at
module import. The world is ``worlds/<scene>.sdf`` (generated from the same scene spec as the
MuJoCo model), and the robot is spawned by ``launch/gazebo_launch.py``.

What maps to which service (``<w>`` = world name = scene name):

* reset: ``/world/<w>/control`` (WorldControl reset all, pause kept true: gz-sim applies the
  request's ``pause`` field with every control request, so a reset that leaves it false starts
  the world running and lockstep is lost), then ``/world/<w>/set_pose_vector`` with object
  poses drawn by the shared :func:`~clawgym_ros.sim.scene_spec.sample_object_poses`;
* lighting: ``/world/<w>/light_config`` (gz.msgs.Light: diffuse, specular, direction, pose);
  Gazebo lights have no per-light ambient and there is no headlight, so those scales are
  recorded but have no effect;
* object mass and friction: the object is re-created (``/world/<w>/remove`` +
  ``/world/<w>/create``) from the spec's SDF with the scaled values at its current pose;
* joint damping, actuator gains and command latency cannot be changed at run time in gz-sim:
  :meth:`GazeboBackend.set_dynamics` raises :class:`UnsupportedOnGazeboError` naming the knob.

The request builders (:func:`light_request`, :func:`object_sdf`) are pure and tested here.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError, ConfigError
from clawgym_ros.sim import scene_sdf as SDF
from clawgym_ros.sim import scene_spec as S
from clawgym_ros.sim.backend import DynamicsSettings, LightingSettings, SimBackend

#: (transport module, msgs package) pairs tried in order
GZ_VERSIONS = (("gz.transport14", "gz.msgs11"), ("gz.transport13", "gz.msgs10"))
SERVICE_TIMEOUT_MS = 2000


class UnsupportedOnGazeboError(ClawgymError):
    """A runtime knob gz-sim does not offer (the message names it)."""


def light_request(light: S.Light, settings: LightingSettings) -> dict[str, Any]:
    """Field values of the gz.msgs.Light request for one light (relative to the spec).

    Returns:
        ``{"name", "type", "diffuse" (rgba), "specular" (rgba), "direction" (xyz),
        "position" (xyz), "cast_shadows"}``.
    """
    direction = np.asarray(settings.direction if settings.direction is not None else light.dir,
                           dtype=float)
    direction = direction / np.linalg.norm(direction)
    position = settings.position if settings.position is not None else light.pos
    return {
        "name": light.name,
        "type": light.type,
        "diffuse": [*(np.asarray(light.diffuse) * settings.diffuse_scale).tolist(), 1.0],
        "specular": [*(np.asarray(light.specular) * settings.specular_scale).tolist(), 1.0],
        "direction": direction.tolist(),
        "position": [float(v) for v in position],
        "cast_shadows": light.cast_shadows,
    }


def object_sdf(obj: S.Shape, mass_scale: float = 1.0, friction_scale: float = 1.0) -> str:
    """SDF of one free object with scaled mass and friction (for re-creating it)."""
    scaled = dataclasses.replace(obj, mass=obj.mass * mass_scale,
                                 friction=obj.friction * friction_scale)
    model = SDF._sdf_model(scaled, (0, 0, 0, 0, 0, 0), static=False)
    return f'<?xml version="1.0"?>\n<sdf version="1.9">\n{model}\n</sdf>\n'


class GazeboBackend(SimBackend):
    """SimBackend over a running gz-sim world (see the module docstring).

    Args:
        scene: scene name (= world name).

    Raises:
        UnsupportedOnGazeboError: the gz Python bindings are not installed.
    """

    name = "gazebo"

    def __init__(self, scene: str = C.SCENE_TABLETOP) -> None:
        self.scene = S.load_scene(scene)
        self.world = self.scene.name
        self._transport, self._msgs = self._import_gz()
        self._node = self._transport.Node()
        self._time = 0.0
        self._lighting: dict[str, LightingSettings] = {}
        self._dynamics: dict[str, DynamicsSettings] = {}
        self._node.subscribe(self._msg("clock_pb2", "Clock"), f"/world/{self.world}/clock",
                             self._on_clock)

    @staticmethod
    def _import_gz() -> tuple[Any, str]:
        for transport, msgs in GZ_VERSIONS:
            try:
                return importlib.import_module(transport), msgs
            except ImportError:
                continue
        raise UnsupportedOnGazeboError(
            "the Gazebo backend needs the gz-transport Python bindings (gz.transport13/14) "
            "from a Gazebo Harmonic or Ionic install")

    def _msg(self, module: str, cls: str) -> Any:
        return getattr(importlib.import_module(f"{self._msgs}.{module}"), cls)

    def _on_clock(self, msg: Any) -> None:
        self._time = msg.sim.sec + msg.sim.nsec * 1e-9

    def _call(self, service: str, request: Any, reply_module: str = "boolean_pb2",
              reply_cls: str = "Boolean") -> Any:
        ok, reply = self._node.request(f"/world/{self.world}/{service}", request,
                                       type(request), self._msg(reply_module, reply_cls),
                                       SERVICE_TIMEOUT_MS)
        if not ok:
            raise ClawgymError(f"gz service /world/{self.world}/{service} did not answer")
        return reply

    # ------------------------------------------------------------------ SimBackend
    def reset(self, seed: int, scenario: str | None = None,
              rng: np.random.Generator | None = None) -> None:
        """Reset the world, restore defaults, then place objects with the shared sampler."""
        if scenario is not None and scenario != self.world:
            raise ConfigError("scenario", scenario,
                              f"{self.world!r} (Gazebo runs one world per launch)")
        control = self._msg("world_control_pb2", "WorldControl")()
        control.pause = True  # gz-sim sets pause from every request: false would run the world
        control.reset.all = True
        self._call("control", control)
        self.restore_defaults()
        rng = rng if rng is not None else np.random.default_rng(seed)
        poses = S.sample_object_poses(self.scene, rng)
        pose_v = self._msg("pose_v_pb2", "Pose_V")()
        for name, (pos, yaw) in poses.items():
            pose = pose_v.pose.add()
            pose.name = name
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in pos)
            w, x, y, z = S.rpy_to_quat((0.0, 0.0, yaw))
            pose.orientation.w, pose.orientation.x = w, x
            pose.orientation.y, pose.orientation.z = y, z
        self._call("set_pose_vector", pose_v)

    def set_lighting(self, settings: LightingSettings) -> None:
        """Send light_config for the named light (or every light)."""
        lights = [li for li in self.scene.lights
                  if not settings.light_name or li.name == settings.light_name]
        if not lights:
            raise ConfigError("lighting.light_name", settings.light_name,
                              "one of " + ", ".join(li.name for li in self.scene.lights))
        light_cls = self._msg("light_pb2", "Light")
        for light in lights:
            values = light_request(light, settings)
            msg = light_cls()
            msg.name = values["name"]
            msg.type = {"point": light_cls.POINT, "spot": light_cls.SPOT,
                        "directional": light_cls.DIRECTIONAL}[values["type"]]
            msg.diffuse.r, msg.diffuse.g, msg.diffuse.b, msg.diffuse.a = values["diffuse"]
            msg.specular.r, msg.specular.g, msg.specular.b, msg.specular.a = values["specular"]
            msg.direction.x, msg.direction.y, msg.direction.z = values["direction"]
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = values["position"]
            msg.cast_shadows = values["cast_shadows"]
            self._call("light_config", msg)
        self._lighting[settings.light_name] = settings

    def set_dynamics(self, settings: DynamicsSettings) -> None:
        """Re-create objects with scaled mass/friction; other knobs are unsupported.

        Raises:
            UnsupportedOnGazeboError: damping, actuator gains or latency differ from default.
        """
        for knob, value in (("damping_scale", settings.damping_scale),
                            ("actuator_gain_scale", settings.actuator_gain_scale)):
            if value != 1.0:
                raise UnsupportedOnGazeboError(
                    f"dynamics.{knob}={value} cannot change at run time in gz-sim; "
                    "use the MuJoCo backend")
        if settings.command_latency != 0.0:
            raise UnsupportedOnGazeboError("dynamics.command_latency is applied by sim_node only")
        objects = [o for o in self.scene.objects
                   if not settings.target or o.name == settings.target]
        if not objects:
            raise ConfigError("dynamics.target", settings.target,
                              "empty or one of " + ", ".join(o.name for o in self.scene.objects))
        for obj in objects:
            self._recreate(obj, settings.mass_scale, settings.friction_scale)
        self._dynamics[settings.target] = settings

    def _recreate(self, obj: S.Shape, mass_scale: float, friction_scale: float) -> None:
        entity = self._msg("entity_pb2", "Entity")()
        entity.name = obj.name
        entity.type = entity.MODEL
        self._call("remove", entity)
        factory = self._msg("entity_factory_pb2", "EntityFactory")()
        factory.sdf = object_sdf(obj, mass_scale, friction_scale)
        factory.name = obj.name
        factory.pose.position.x, factory.pose.position.y, factory.pose.position.z = obj.pos
        self._call("create", factory)

    def restore_defaults(self) -> None:
        """Re-apply default lights and re-create objects whose dynamics changed."""
        if self._lighting:
            self._lighting.clear()
            self.set_lighting(LightingSettings())
            self._lighting.clear()
        if self._dynamics:
            changed = list(self._dynamics.values())
            self._dynamics.clear()
            for settings in changed:
                for obj in self.scene.objects:
                    if not settings.target or obj.name == settings.target:
                        self._recreate(obj, 1.0, 1.0)

    def step(self, steps: int = 1) -> None:
        """Advance a paused world by ``steps`` physics steps (lockstep)."""
        control = self._msg("world_control_pb2", "WorldControl")()
        control.pause = True
        control.multi_step = int(steps)
        self._call("control", control)

    @property
    def time(self) -> float:
        """Simulation time from the world clock topic (seconds)."""
        return self._time

    def describe(self) -> dict[str, Any]:
        """Active runtime knobs (for episode records)."""
        return {"backend": self.name, "scene": self.world,
                "lighting": [dataclasses.asdict(s) for s in self._lighting.values()],
                "dynamics": [dataclasses.asdict(s) for s in self._dynamics.values()]}
