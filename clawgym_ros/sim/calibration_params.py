"""The physical parameters a calibration can fit, with nominal values and default bounds.

Every parameter is a number relative to the simulator as built from the scene (``*_scale``
multiplies the model's value; the others are absolute and nominally 0):

=========================== ======= ============ ============================================
name                        nominal bounds       what it changes
=========================== ======= ============ ============================================
``joint_friction``          0       [0, 5] N m   dry (Coulomb) friction of every arm joint
``damping_scale``           1       [0.2, 5]     viscous damping of the arm joints
``armature_scale``          1       [0.2, 5]     rotor inertia (armature) of the arm joints
``actuator_gain_scale``     1       [0.5, 2]     kp and kv of the arm's joint servos
``object_mass_scale``       1       [0.5, 2]     mass (and inertia) of every free object
``command_latency_s``       0       [0, 0.1] s   delay between a command's stamp and its effect
``encoder_bias:<joint>``    0       [-0.1, 0.1]  offset of the reported position of one arm
                                    rad          joint (the servo acts on the true position)
=========================== ======= ============ ============================================

``encoder_bias`` alone stands for the seven ``encoder_bias:arm_joint_<k>``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError

#: parameters that change the simulated motion (the rest only change what is reported)
PHYSICS = "physics"
OBSERVATION = "observation"
BIAS_PREFIX = "encoder_bias:"


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One fittable parameter.

    Attributes:
        name: the parameter's name (see the module table).
        nominal: its value in the uncalibrated simulator.
        low, high: default bounds.
        unit: unit text for reports.
        kind: PHYSICS (needs a new simulation) or OBSERVATION (an offset on the readings).
        help: one line for reports and ``--help``.
    """

    name: str
    nominal: float
    low: float
    high: float
    unit: str
    kind: str
    help: str


_BASE = (
    ParamSpec("joint_friction", 0.0, 0.0, 5.0, "N m", PHYSICS,
              "dry friction (MuJoCo frictionloss) of every arm joint"),
    ParamSpec("damping_scale", 1.0, 0.2, 5.0, "x", PHYSICS,
              "viscous damping of the arm joints, times the model's"),
    ParamSpec("armature_scale", 1.0, 0.2, 5.0, "x", PHYSICS,
              "armature (rotor inertia) of the arm joints, times the model's"),
    ParamSpec("actuator_gain_scale", 1.0, 0.5, 2.0, "x", PHYSICS,
              "kp and kv of the arm's joint servos, times the model's"),
    ParamSpec("object_mass_scale", 1.0, 0.5, 2.0, "x", PHYSICS,
              "mass and inertia of every free object, times the model's"),
    ParamSpec("command_latency_s", 0.0, 0.0, 0.1, "s", PHYSICS,
              "delay between a command's stamp and its effect"),
)

#: name -> spec of every parameter (the encoder biases of the seven arm joints included)
PARAMS: dict[str, ParamSpec] = {p.name: p for p in _BASE}
for _joint in C.ARM_JOINTS:
    PARAMS[BIAS_PREFIX + _joint] = ParamSpec(
        BIAS_PREFIX + _joint, 0.0, -0.1, 0.1, "rad", OBSERVATION,
        f"offset of the reported position of {_joint} (the servo acts on the true one)")

#: what ``clawgym calibrate`` fits without ``--params``
DEFAULT_PARAMS: tuple[str, ...] = tuple(PARAMS)


def expand_names(names: Sequence[str]) -> tuple[str, ...]:
    """Check parameter names (``encoder_bias`` expands to the seven joints), keep their order,
    drop repeats.

    Raises:
        ConfigError: a name the model does not have, or no name at all.
    """
    out: list[str] = []
    for raw in names:
        name = raw.strip()
        group = [BIAS_PREFIX + j for j in C.ARM_JOINTS] if name == "encoder_bias" else [name]
        for n in group:
            if n not in PARAMS:
                raise ConfigError("--params", name, "names from " + ", ".join(
                    [p.name for p in _BASE] + ["encoder_bias", BIAS_PREFIX + "<arm joint>"]))
            if n not in out:
                out.append(n)
    if not out:
        raise ConfigError("--params", ",".join(names), "at least one parameter name")
    return tuple(out)


def resolve_bounds(names: Sequence[str], overrides: Mapping[str, Any] | None = None,
                   source: str | None = None) -> dict[str, tuple[float, float]]:
    """Bounds of ``names``: the defaults, replaced by ``overrides`` (name -> [low, high]).

    A bound must contain the nominal value (the uncalibrated simulator is the fit's first
    start and the reference of "before").

    Raises:
        ConfigError: an override for a parameter that is not fitted or unknown, a malformed
            pair, low >= high, or bounds that exclude the nominal value.
    """
    overrides = dict(overrides or {})
    out = {n: (PARAMS[n].low, PARAMS[n].high) for n in names}
    for key, value in overrides.items():
        if key not in out:
            allowed = "a fitted parameter: " + ", ".join(names)
            raise ConfigError(f"bounds.{key}", value, allowed, source)
        if (not isinstance(value, (list, tuple)) or len(value) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                           and math.isfinite(v) for v in value)):
            raise ConfigError(f"bounds.{key}", value, "[low, high], two finite numbers", source)
        low, high = float(value[0]), float(value[1])
        if not low < high:
            raise ConfigError(f"bounds.{key}", value, "low < high", source)
        nominal = PARAMS[key].nominal
        if not low <= nominal <= high:
            raise ConfigError(f"bounds.{key}", value, f"bounds containing the nominal value "
                              f"{nominal:g} {PARAMS[key].unit}", source)
        out[key] = (low, high)
    return out


def load_bounds(path: str | Path, names: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Bounds from a YAML/JSON file ``{name: [low, high], ...}`` (the safe loader)."""
    from clawgym_ros.config import load_yaml

    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("bounds", type(data).__name__, "a mapping name: [low, high]",
                          str(path))
    return resolve_bounds(names, data, str(path))
