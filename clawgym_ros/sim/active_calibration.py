"""The active calibration: what a simulator runs at, as a record every layer can pass on.

:class:`SimCalibration` is what a simulator needs of a calibration artifact (id, fitted values,
95% intervals; ``clawgym_ros.calibration.apply.load_calibration`` reads it from a store). The
MuJoCo backend applies the *active* calibration (:func:`activate` / :func:`active`) to every
model it builds (:mod:`.calibrated`), before it records its defaults, so resets and the
dynamics perturbation work around the fitted values; it delays commands by the fitted latency
at physics-step resolution. The dynamics perturbation family draws around the fitted values
with widths from the intervals (:func:`perturbation_factors`). The encoder biases belong to the
robot's driver (subtract them from its readings): a simulator ignores them.

Activation is per process and inherited by child processes (worker pools, nodes) through the
environment variable :data:`ENV_VAR`, which holds the calibration as JSON; synthesis episodes
and evaluation rollouts also carry it in their options and activate it in their worker, so a
remote worker runs at the same values. This module imports no simulator: it sits with the
shared records (test/test_boundaries.py's LAYERS), so worker pools below ``sim/`` can activate
a calibration.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from clawgym_ros.errors import ArtifactError
from clawgym_ros.sim.calibration_params import BIAS_PREFIX, PARAMS, PHYSICS

#: environment variable holding the active calibration (JSON of SimCalibration.to_dict)
ENV_VAR = "CLAWGYM_CALIBRATION"
#: options key of synthesis episodes / rollouts and config key of the loop
OPTION_KEY = "calibration"


@dataclasses.dataclass(frozen=True)
class SimCalibration:
    """What a simulator uses of a calibration artifact.

    Attributes:
        id: the calibration artifact's id.
        values: fitted value per parameter (names of :mod:`.calibration_params`).
        intervals: 95% interval (low, high) per fitted parameter.
    """

    id: str
    values: Mapping[str, float]
    intervals: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (options, manifests, the environment variable)."""
        return {"id": self.id, "values": {k: float(v) for k, v in sorted(self.values.items())},
                "intervals": {k: [float(v[0]), float(v[1])]
                              for k, v in sorted(self.intervals.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = OPTION_KEY) -> SimCalibration:
        """Inverse of :meth:`to_dict`.

        Raises:
            ArtifactError: a malformed mapping (names ``source``).
        """
        try:
            values = {str(k): float(v) for k, v in dict(data["values"]).items()}
            intervals = {str(k): (float(v[0]), float(v[1]))
                         for k, v in dict(data.get("intervals", {})).items()}
            cal = cls(str(data["id"]), values, intervals)
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise ArtifactError(f"{source}: not a calibration (id, values, intervals): "
                                f"{err!r}") from None
        unknown = sorted(set(values) - set(PARAMS))
        if unknown or not all(math.isfinite(v) for v in values.values()):
            raise ArtifactError(f"{source}: calibration {cal.id[:12]} has unknown parameters "
                                f"{unknown} or non-finite values")
        return cal

    @property
    def latency_s(self) -> float:
        """The fitted command latency, s (0 when not fitted)."""
        return max(0.0, float(self.values.get("command_latency_s", 0.0)))


_ACTIVE: list[Any] = [None, None]      # [env text it was parsed from, SimCalibration | None]


def activate(calibration: SimCalibration | Mapping[str, Any] | None) -> None:
    """Make ``calibration`` (or none) the one simulators of this process and of the processes
    it starts run at. A mapping is read by :meth:`SimCalibration.from_dict`."""
    if calibration is not None and not isinstance(calibration, SimCalibration):
        calibration = SimCalibration.from_dict(calibration)
    if calibration is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = json.dumps(calibration.to_dict(), sort_keys=True)


def active() -> SimCalibration | None:
    """The active calibration (see :func:`activate`), or None.

    Raises:
        ArtifactError: the environment variable does not hold a calibration.
    """
    text = os.environ.get(ENV_VAR, "")
    if _ACTIVE[0] != text:
        cal = None
        if text:
            try:
                data = json.loads(text)
            except ValueError as err:
                raise ArtifactError(f"{ENV_VAR}: not JSON: {err}") from None
            cal = SimCalibration.from_dict(data if isinstance(data, dict) else {}, ENV_VAR)
        _ACTIVE[:] = [text, cal]
    return _ACTIVE[1]


def perturbation_factors(cal: SimCalibration) -> dict[str, float]:
    """Widths of the dynamics perturbation around a calibration's fitted values.

    For each fitted scale the dynamics family perturbs (``damping_scale``,
    ``actuator_gain_scale``, ``object_mass_scale``): the factor f such that [v/f, v f] covers
    the 95% interval [lo, hi] of the fitted value v (narrow where the log pins the parameter,
    the bounds' width where it does not), in [1, 10]. ``command_latency_s``: how far the
    interval reaches above the fitted latency (s).
    """
    out: dict[str, float] = {}
    for name in ("damping_scale", "actuator_gain_scale", "object_mass_scale"):
        if name not in cal.intervals or name not in cal.values:
            continue
        v = cal.values[name]
        lo, hi = cal.intervals[name]
        if v <= 0.0:
            continue
        f = max(hi / v if hi > 0 else 1.0, v / lo if lo > 0 else 10.0, 1.0)
        out[name] = min(f, 10.0)
    if "command_latency_s" in cal.intervals:
        out["command_latency_s"] = max(0.0, cal.intervals["command_latency_s"][1]
                                       - cal.latency_s)
    return out


def split_values(values: dict[str, float]) -> tuple[dict[str, float], float, dict[str, float]]:
    """(model values, command latency s, encoder bias per arm joint) of fitted values."""
    model = {k: v for k, v in values.items()
             if PARAMS[k].kind == PHYSICS and k != "command_latency_s"}
    bias = {k[len(BIAS_PREFIX):]: v for k, v in values.items() if k.startswith(BIAS_PREFIX)}
    return model, float(values.get("command_latency_s", 0.0)), bias


#: id of the calibration a twin's simulator runs at (its values stay private to that process)
TWIN_ID = "twin"


def load_twin_file(path: Any) -> dict[str, float]:
    """A stand-in robot's hidden values: a YAML/JSON mapping ``{name: value}`` of the
    parameters of :mod:`.calibration_params` (``encoder_bias:<arm joint>`` included), each
    within its bounds; missing ones are nominal.

    Raises:
        ConfigError: unreadable file, not a mapping, an unknown name, a value that is not a
            finite number within the parameter's bounds (names the file, field and range).
    """
    from clawgym_ros.config import load_yaml
    from clawgym_ros.errors import ConfigError

    source = str(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("twin parameters", type(data).__name__, "a mapping name: value",
                          source)
    out: dict[str, float] = {}
    for name, value in data.items():
        spec = PARAMS.get(str(name))
        if spec is None:
            raise ConfigError(str(name), value, "a parameter of clawgym calibrate: "
                              + ", ".join(PARAMS), source)
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or not spec.low <= value <= spec.high):
            raise ConfigError(str(name), value, f"a number in [{spec.low:g}, {spec.high:g}] "
                              f"{spec.unit}", source)
        out[spec.name] = float(value)
    return out
