"""Perturbations: lighting, sensor noise, GPS dropout and dynamics.

Pure cores (no rclpy) shared by the Gymnasium wrappers (:mod:`.wrappers`) and the ROS nodes
(``clawgym_ros.nodes.*_node``). :func:`make` builds one from a family name and parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import from_dict
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations.base import Perturbation, PerturbationConfig
from clawgym_ros.perturbations.dynamics import Dynamics, DynamicsConfig
from clawgym_ros.perturbations.gps import GpsDropout, GpsDropoutConfig
from clawgym_ros.perturbations.lighting import Lighting, LightingConfig
from clawgym_ros.perturbations.sensor_noise import SensorNoise, SensorNoiseConfig

#: family name -> perturbation class (its ``config_cls`` is the config dataclass).
FAMILIES: dict[str, type[Perturbation]] = {
    C.FAMILY_LIGHTING: Lighting,
    C.FAMILY_SENSOR_NOISE: SensorNoise,
    C.FAMILY_GPS_DROPOUT: GpsDropout,
    C.FAMILY_DYNAMICS: Dynamics,
}


def config_for(family: str, params: Mapping[str, Any] | None = None,
               source: str | None = None) -> PerturbationConfig:
    """The config of ``family`` built from ``params`` (config field names).

    Raises:
        ConfigError: unknown family, unknown field, or a value out of range.
    """
    if family not in FAMILIES:
        raise ConfigError("family", family, "one of " + ", ".join(FAMILIES), source)
    data = {"family": family, **(params or {})}
    return from_dict(FAMILIES[family].config_cls, data, source)


def make(family: str, params: Mapping[str, Any] | None = None) -> Perturbation:
    """A perturbation of ``family`` configured from ``params`` (see :func:`config_for`)."""
    return FAMILIES[family](config_for(family, params))


__all__ = [
    "FAMILIES", "Dynamics", "DynamicsConfig", "GpsDropout", "GpsDropoutConfig", "Lighting",
    "LightingConfig", "Perturbation", "PerturbationConfig", "SensorNoise", "SensorNoiseConfig",
    "config_for", "make",
]
