"""Gymnasium wrappers: the in-process front end of the perturbation cores.

Observation side (:class:`SensorNoiseWrapper`, :class:`GpsDropoutWrapper`): the observation of
every reset and step passes through the same core as ``sensor_noise_node`` /
``gps_dropout_node``, stamped with the backend's simulation time. The observation space never
changes, so a sample the core drops (or a GPS fix lost in an outage) is replaced by the last
delivered values (the first sample of an episode passes unperturbed if it is dropped); the GPS
status (0 = fix, -1 = no fix) is reported in ``info["gps_status"]``.

Backend side (:class:`LightingWrapper`, :class:`CameraPoseWrapper`, :class:`ColourWrapper`,
:class:`DynamicsWrapper`):
settings go to the env's backend (``env.unwrapped.backend``) after every reset (the backend's
reset has restored its defaults) and, for lighting, before every step at the time of the
coming observation; images of the reset observation are re-rendered under the new lighting,
camera pose or colours.

Every wrapper resets its perturbation with the env (``reset(seed=s)`` keys the episode by
``s``), records it in ``info["perturbations"][family]`` on reset and reports whether it is
active in ``info["perturbations_active"][family]`` on every step. :func:`wrap` applies a set of
perturbations in the canonical order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations import FamilyTable
from clawgym_ros.perturbations.base import Perturbation
from clawgym_ros.perturbations.camera import CameraPose
from clawgym_ros.perturbations.colour import Colour
from clawgym_ros.perturbations.dynamics import Dynamics
from clawgym_ros.perturbations.gps import STATUS_FIX, STATUS_NO_FIX, GpsDropout, GpsFix
from clawgym_ros.perturbations.lighting import Lighting
from clawgym_ros.perturbations.sensor_noise import (
    FIELD_ACCEL,
    FIELD_GYRO,
    FIELD_ORIENTATION,
    FIELD_POSITION,
    FIELD_VELOCITY,
    SensorNoise,
)

Obs = dict[str, np.ndarray]


class PerturbationWrapper(gym.Wrapper):
    """Base class: owns one perturbation, resets it with the env, records it in ``info``."""

    core_cls: ClassVar[type[Perturbation]] = Perturbation
    #: The family this wrapper serves (the info key, even when its config says 'none').
    family: ClassVar[str] = C.FAMILY_NONE

    def __init__(self, env: gym.Env, perturbation: Perturbation):
        super().__init__(env)
        if not isinstance(perturbation, self.core_cls):
            raise ConfigError("perturbation", type(perturbation).__name__,
                              f"a {self.core_cls.__name__} for {type(self).__name__}")
        self.perturbation = perturbation

    @property
    def backend(self) -> Any:
        """The simulator backend of the wrapped env."""
        return self.env.unwrapped.backend

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Obs, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.perturbation.reset(seed)
        obs, info = self._after_reset(obs, dict(info))
        records = dict(info.get(C.INFO_PERTURBATIONS, {}))
        records[self.family] = self.perturbation.record()
        info[C.INFO_PERTURBATIONS] = records
        return obs, info

    def step(self, action: Any) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        self._before_step()
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs, info = self._after_step(obs, dict(info))
        active = dict(info.get(C.INFO_PERTURBATIONS_ACTIVE, {}))
        active[self.family] = self.perturbation.active
        info[C.INFO_PERTURBATIONS_ACTIVE] = active
        return obs, reward, terminated, truncated, info

    def _rerendered(self, obs: Obs) -> Obs:
        """``obs`` with its images rendered again (after a backend-side change at reset)."""
        keys = [k for k in self.env.unwrapped.image_keys if k in obs]
        if not keys:
            return obs
        fresh = self.backend.observation()
        return {**obs, **{k: fresh[k] for k in keys}}

    # hooks ------------------------------------------------------------------------------------
    def _after_reset(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        return self._after_step(obs, info)

    def _before_step(self) -> None:
        pass

    def _after_step(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        return obs, info


class SensorNoiseWrapper(PerturbationWrapper):
    """Noise on joint encoders, IMU, object pose estimates and camera images."""

    core_cls = SensorNoise
    family = C.FAMILY_SENSOR_NOISE

    def reset(self, **kwargs: Any) -> tuple[Obs, dict[str, Any]]:
        self._held: dict[str, np.ndarray] = {}
        return super().reset(**kwargs)

    def _hold(self, keys: Iterable[str], out: Mapping[str, np.ndarray] | None,
              obs: Obs) -> None:
        """Write ``out`` into ``obs`` (remembering it), or the held values when dropped."""
        for key in keys:
            if out is not None:
                self._held[key] = out[key]
            obs[key] = self._held.get(key, obs[key]).copy()

    def _after_step(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        core: SensorNoise = self.perturbation
        if not core.enabled:
            return obs, info
        obs = dict(obs)
        t = self.backend.time
        if C.OBS_JOINT_POS in obs:
            out = core.joint_state(obs[C.OBS_JOINT_POS], obs.get(C.OBS_JOINT_VEL), t)
            mapped = None if out is None else {C.OBS_JOINT_POS: out[FIELD_POSITION],
                                               C.OBS_JOINT_VEL: out.get(FIELD_VELOCITY)}
            self._hold([k for k in (C.OBS_JOINT_POS, C.OBS_JOINT_VEL) if k in obs], mapped, obs)
        if C.OBS_IMU in obs:
            imu = obs[C.OBS_IMU]
            out = core.imu(imu[0:4], imu[4:7], imu[7:10], t)
            mapped = None if out is None else {C.OBS_IMU: np.concatenate(
                [out[FIELD_ORIENTATION], out[FIELD_GYRO], out[FIELD_ACCEL]])}
            self._hold([C.OBS_IMU], mapped, obs)
        if C.OBS_OBJECT_POSES in obs:
            out = core.poses(obs[C.OBS_OBJECT_POSES], t)
            mapped = None if out is None else {
                C.OBS_OBJECT_POSES: out.reshape(obs[C.OBS_OBJECT_POSES].shape)}
            self._hold([C.OBS_OBJECT_POSES], mapped, obs)
        for key in self.env.unwrapped.image_keys:
            if key in obs and obs[key].dtype == np.uint8:
                out = core.image(obs[key], t)
                self._hold([key], None if out is None else {key: out}, obs)
        return obs, info


class GpsDropoutWrapper(PerturbationWrapper):
    """GPS outages and jitter on the ``gps`` observation (latitude, longitude, altitude)."""

    core_cls = GpsDropout
    family = C.FAMILY_GPS_DROPOUT

    def reset(self, **kwargs: Any) -> tuple[Obs, dict[str, Any]]:
        self._held: np.ndarray | None = None
        return super().reset(**kwargs)

    def _after_step(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        if C.OBS_GPS not in obs:
            return obs, info
        obs = dict(obs)
        raw = obs[C.OBS_GPS]
        out = self.perturbation.apply(GpsFix(float(raw[0]), float(raw[1]), float(raw[2]),
                                             self.backend.time))
        if out is None or out.status == STATUS_NO_FIX:
            status = STATUS_NO_FIX
            held = self._held if self._held is not None else raw
        else:
            status = STATUS_FIX
            held = np.array([out.latitude, out.longitude, out.altitude], dtype=raw.dtype)
            self._held = held
        obs[C.OBS_GPS] = held.copy()
        info[C.INFO_GPS_STATUS] = status
        return obs, info


class LightingWrapper(PerturbationWrapper):
    """Lighting on the backend: set on reset (images re-rendered) and before every step."""

    core_cls = Lighting
    family = C.FAMILY_LIGHTING

    def _after_reset(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        settings = self.perturbation.update(self.backend.time)
        if settings is None or not self.perturbation.enabled:
            return obs, info
        self.backend.set_lighting(settings)
        return self._rerendered(obs), info

    def _before_step(self) -> None:
        # The observation of this step is rendered at the end of the control period.
        settings = self.perturbation.update(self.backend.time + self.backend.control_dt)
        if settings is not None:
            self.backend.set_lighting(settings)


class _ResetVisualWrapper(PerturbationWrapper):
    """A visual family set on the backend on every reset (images of the reset observation
    re-rendered): :meth:`_apply` sets the core's episode on the backend."""

    def _apply(self) -> None:
        raise NotImplementedError

    def _after_reset(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        if not self.perturbation.enabled:
            return obs, info
        self._apply()
        return self._rerendered(obs), info


class CameraPoseWrapper(_ResetVisualWrapper):
    """Camera mount offsets on the backend, set on every reset (images re-rendered)."""

    core_cls = CameraPose
    family = C.FAMILY_CAMERA_POSE

    def _apply(self) -> None:
        self.backend.set_camera_pose(self.perturbation.settings())


class ColourWrapper(_ResetVisualWrapper):
    """Object and scene colours on the backend, set on every reset (images re-rendered)."""

    core_cls = Colour
    family = C.FAMILY_COLOUR

    def _apply(self) -> None:
        self.backend.set_colours(self.perturbation.settings())


class DynamicsWrapper(PerturbationWrapper):
    """Mass, friction, damping, actuator gain and command latency, set on every reset."""

    core_cls = Dynamics
    family = C.FAMILY_DYNAMICS

    def _after_reset(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        if self.perturbation.enabled:
            self.backend.set_dynamics(self.perturbation.settings())
        return obs, info


#: Family -> wrapper, in the order :func:`wrap` applies them (backend side first): derived from
#: the family registry (each family's ``wrapper`` and ``wrap_order``; live).
WRAPPERS: Mapping[str, type[PerturbationWrapper]] = FamilyTable("wrapper", wrap_order=True)


def wrap(env: gym.Env, perturbations: Mapping[str, Perturbation] | Iterable[Perturbation]
         ) -> gym.Env:
    """Wrap ``env`` with one wrapper per perturbation (e.g. ``[make("lighting", ...)]``).

    Raises:
        ConfigError: two perturbations of one family.
    """
    items = perturbations.values() if isinstance(perturbations, Mapping) else perturbations
    by_family: dict[str, Perturbation] = {}
    for p in items:
        if type(p).__name__ in {type(q).__name__ for q in by_family.values()}:
            raise ConfigError("perturbations", type(p).__name__, "one per family")
        family = next((f for f, w in WRAPPERS.items() if isinstance(p, w.core_cls)), None)
        if family is None:
            raise ConfigError("perturbations", type(p).__name__, "one of " +
                              ", ".join(w.core_cls.__name__ for w in WRAPPERS.values()))
        by_family[family] = p
    for family, wrapper in WRAPPERS.items():
        if family in by_family:
            env = wrapper(env, by_family[family])
    return env
