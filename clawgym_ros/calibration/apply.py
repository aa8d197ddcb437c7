"""Use a calibration artifact: load it from a store and activate it (``--calibration ID``).

What a simulator does with it (:class:`~clawgym_ros.sim.active_calibration.SimCalibration`,
activation, the model edits, the dynamics family's widths, a stand-in robot's private values)
lives in :mod:`clawgym_ros.sim.active_calibration`; this module reads the artifact
(:func:`load_values`, :func:`load_calibration`) and wires it into the commands.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.calibration.artifact import CALIBRATION_FORMAT, FILE_JSON
from clawgym_ros.errors import ArtifactError
from clawgym_ros.sim.active_calibration import ENV_VAR, SimCalibration, activate, active
from clawgym_ros.sim.calibration_params import PARAMS


def _read_json(store: ArtifactStore, ref: str) -> tuple[str, dict[str, Any]]:
    artifact = store.resolve(ref, C.KIND_CALIBRATION)
    try:
        data = json.loads(artifact.file(FILE_JSON).read_text())
    except (OSError, ValueError) as err:
        raise ArtifactError(f"calibration {artifact.id[:12]}: {FILE_JSON} is unreadable: "
                            f"{err}") from None
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ArtifactError(f"calibration {artifact.id[:12]}: format {got!r}, "
                            f"expected {CALIBRATION_FORMAT!r}")
    return artifact.id, data


def load_values(store: ArtifactStore, ref: str) -> dict[str, float]:
    """The fitted values of calibration ``ref`` (id or unique prefix) of ``store``.

    Raises:
        ArtifactError: unknown id, not a calibration, or an unreadable calibration.json.
    """
    _, data = _read_json(store, ref)
    return {k: float(v) for k, v in data["values"].items() if k in PARAMS}


def load_calibration(store: ArtifactStore, ref: str) -> SimCalibration:
    """Calibration ``ref`` (id or unique prefix) of ``store``: id, values, 95% intervals.

    Raises:
        ArtifactError: unknown id, not a calibration, or an unreadable calibration.json.
    """
    art_id, data = _read_json(store, ref)
    intervals = {p["name"]: (p["ci_low"], p["ci_high"]) for p in data.get("params", ())
                 if isinstance(p, dict) and "name" in p}
    return SimCalibration.from_dict({"id": art_id, "values": data.get("values"),
                                     "intervals": intervals},
                                    f"calibration {art_id[:12]} {FILE_JSON}")


def use_calibration(run_dir: Any, ref: str) -> SimCalibration | None:
    """Load calibration ``ref`` of ``run_dir``'s store and activate it (None for ``""``).

    Raises:
        ArtifactError: unknown or malformed id, not a calibration, unreadable artifact.
    """
    if not ref:
        return None
    cal = load_calibration(ArtifactStore(run_dir), ref)
    activate(cal)
    return cal


@contextlib.contextmanager
def calibration_scope(run_dir: Any, ref: str) -> Iterator[SimCalibration | None]:
    """Run at calibration ``ref`` of ``run_dir``'s store inside the block, then restore the
    calibration that was active before (a node serving one goal after another). ``""`` leaves
    the active one (the process's own, e.g. inherited from ``clawgym loop``) in place.

    Raises:
        ArtifactError: unknown or malformed id, not a calibration, unreadable artifact.
    """
    if not ref:
        yield active()
        return
    before = os.environ.get(ENV_VAR)
    try:
        yield use_calibration(run_dir, ref)
    finally:
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before
