"""Dynamics: object mass, friction, joint damping, actuator gain and command latency, producing
:class:`~clawgym_ros.sim.backend.DynamicsSettings` once per episode.

Model (``s`` = episode intensity; factors at intensity 1): each scale is drawn log-uniformly,
``scale = factor ** (s * u)`` with ``u ~ U(-1, 1)``, so at intensity 1 a mass factor of 2 gives
masses between half and double the default, and at intensity 0 every scale is 1. The command
latency is ``latency_s * s * U(0, 1)`` seconds.

Under a calibration (``--calibration ID``; :mod:`clawgym_ros.sim.active_calibration`) the backend's
defaults are the fitted values, so the scales draw around them, and the widths of the fitted
parameters come from their 95% intervals instead of the config: the mass, damping and actuator
gain factors are those whose ``[v/f, v f]`` covers the interval of object mass, arm damping and
servo gain (narrow where the robot's log pins the value down), and the extra latency reaches up
to the interval's upper end. Friction (of contacts, which the calibration does not fit) keeps
the config's factor.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_range
from clawgym_ros.perturbations.base import Perturbation, PerturbationConfig, _help
from clawgym_ros.sim.backend import DynamicsSettings


def _factor(default: float, text: str) -> float:
    return dataclasses.field(default=default, metadata=_help(text))


@dataclasses.dataclass(frozen=True)
class DynamicsConfig(PerturbationConfig):
    """Dynamics ranges at intensity 1 (factors >= 1; 1 = unperturbed)."""

    family: str = dataclasses.field(
        default=C.FAMILY_DYNAMICS, metadata=_help("dynamics, or 'none' to disable"))
    target: str = dataclasses.field(
        default="", metadata=_help("body/joint/actuator name; empty = the backend's defaults"))
    mass_factor: float = _factor(2.0, "object mass within [1/f, f] at intensity 1, [1, 10]")
    friction_factor: float = _factor(2.0, "sliding friction within [1/f, f], [1, 10]")
    damping_factor: float = _factor(3.0, "joint damping within [1/f, f], [1, 10]")
    actuator_gain_factor: float = _factor(1.5, "actuator gain within [1/f, f], [1, 10]")
    latency_s: float = _factor(0.1, "largest command latency, s, [0, 1]")

    FAMILY = C.FAMILY_DYNAMICS

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("mass_factor", "friction_factor", "damping_factor",
                     "actuator_gain_factor"):
            check_range(name, getattr(self, name), 1.0, 10.0)
        check_range("latency_s", self.latency_s, 0.0, 1.0)


class Dynamics(Perturbation):
    """Per-episode dynamics changes; see the module docstring for the model."""

    config_cls = DynamicsConfig

    def _restore(self) -> None:
        self._settings = DynamicsSettings(target=self.config.target)

    def widths(self) -> dict[str, float]:
        """Factors at intensity 1 and the largest latency, s: the config's, or where the
        active calibration fitted a parameter, the width of its interval (module docstring)."""
        c = self.config
        out = {"mass_factor": c.mass_factor, "friction_factor": c.friction_factor,
               "damping_factor": c.damping_factor,
               "actuator_gain_factor": c.actuator_gain_factor, "latency_s": c.latency_s}
        from clawgym_ros.sim.active_calibration import active, perturbation_factors

        cal = active()
        if cal is not None:
            fitted = perturbation_factors(cal)
            for key, name in (("mass_factor", "object_mass_scale"),
                              ("damping_factor", "damping_scale"),
                              ("actuator_gain_factor", "actuator_gain_scale"),
                              ("latency_s", "command_latency_s")):
                if name in fitted:
                    out[key] = fitted[name]
        return out

    def _sample_episode(self, rng: np.random.Generator) -> None:
        c = self.config
        w = self.widths()
        s = self.intensity
        u = rng.uniform(-1.0, 1.0, 4)

        def draw(factor: float, ui: float) -> float:
            return float(math.exp(s * ui * math.log(factor)))

        self._settings = DynamicsSettings(
            target=c.target,
            mass_scale=draw(w["mass_factor"], u[0]),
            friction_scale=draw(w["friction_factor"], u[1]),
            damping_scale=draw(w["damping_factor"], u[2]),
            actuator_gain_scale=draw(w["actuator_gain_factor"], u[3]),
            command_latency=float(w["latency_s"] * s * rng.uniform(0.0, 1.0)),
        )

    def settings(self) -> DynamicsSettings:
        """The episode's dynamics (defaults when disabled)."""
        return self._settings

    def _parameters(self) -> dict[str, float]:
        d = self._settings
        return {
            "mass_scale": d.mass_scale,
            "friction_scale": d.friction_scale,
            "damping_scale": d.damping_scale,
            "actuator_gain_scale": d.actuator_gain_scale,
            "command_latency_s": d.command_latency,
        }
