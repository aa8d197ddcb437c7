"""Use a calibration: its fitted values, and a scene model set to them.

What a simulator that accepts ``--calibration ID`` would call (sim/ and synthesis/ do not yet):
:func:`load_values` reads an artifact's fitted values; :func:`apply_to_model` sets a compiled
scene model (``clawgym_ros.sim.scene.build_model``) to the physical ones - before the backend
records its defaults, so that resets and the dynamics perturbation then work around the
calibrated values. The command latency needs a delay at physics-step resolution (the backend
delays by whole 20 ms control steps) and the encoder biases belong to the robot's driver (subtract
them from its readings); both are returned by :func:`split_values` for the caller to use.
"""

from __future__ import annotations

import json
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.calibration.artifact import CALIBRATION_FORMAT, FILE_JSON
from clawgym_ros.calibration.params import BIAS_PREFIX, PARAMS, PHYSICS
from clawgym_ros.calibration.replay import ModelParams
from clawgym_ros.errors import ArtifactError


def load_values(store: ArtifactStore, ref: str) -> dict[str, float]:
    """The fitted values of calibration ``ref`` (id or unique prefix) of ``store``.

    Raises:
        ArtifactError: unknown id, not a calibration, or an unreadable calibration.json.
    """
    artifact = store.resolve(ref, C.KIND_CALIBRATION)
    try:
        data = json.loads(artifact.file(FILE_JSON).read_text())
    except (OSError, ValueError) as err:
        raise ArtifactError(f"calibration {artifact.id[:12]}: {FILE_JSON} is unreadable: "
                            f"{err}") from None
    if data.get("format") != CALIBRATION_FORMAT:
        raise ArtifactError(f"calibration {artifact.id[:12]}: format {data.get('format')!r}, "
                            f"expected {CALIBRATION_FORMAT!r}")
    return {k: float(v) for k, v in data["values"].items() if k in PARAMS}


def split_values(values: dict[str, float]) -> tuple[dict[str, float], float, dict[str, float]]:
    """(model values, command latency s, encoder bias per arm joint) of fitted values."""
    model = {k: v for k, v in values.items()
             if PARAMS[k].kind == PHYSICS and k != "command_latency_s"}
    bias = {k[len(BIAS_PREFIX):]: v for k, v in values.items() if k.startswith(BIAS_PREFIX)}
    return model, float(values.get("command_latency_s", 0.0)), bias


def apply_to_model(model: Any, values: dict[str, float]) -> None:
    """Set a scene model's joint friction, damping, armature, arm servo gains and object
    masses to ``values`` (relative to the model as compiled; missing = nominal)."""
    ModelParams(model).apply(model, split_values(values)[0])
