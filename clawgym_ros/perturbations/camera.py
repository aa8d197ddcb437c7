"""Camera pose: the camera's mount moved from its calibrated pose (a bumped wrist camera, a
re-mounted one, a calibration that is a few millimetres and degrees off), producing
:class:`~clawgym_ros.sim.backend.CameraPoseSettings` once per episode.

Model (``s`` = episode intensity; parameters at intensity 1): each camera (or the one named)
gets, per episode, an offset of length ``position_m * s * m1`` along a uniformly random
direction and a rotation of ``rotation_rad * s * m2`` about a uniformly random axis, both in the
camera's own frame, with independent magnitudes ``m1, m2 ~ U(0.5, 1)`` (as the lighting levels
draw theirs). The pose holds for the whole episode. Only images change: the physics, the state
observations and so the state expert's demonstrations are those of the unperturbed episode.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_range
from clawgym_ros.perturbations.base import Perturbation, PerturbationConfig, _help
from clawgym_ros.sim.backend import CameraPoseSettings


@dataclasses.dataclass(frozen=True)
class CameraPoseConfig(PerturbationConfig):
    """Camera mount offsets at intensity 1."""

    family: str = dataclasses.field(
        default=C.FAMILY_CAMERA_POSE, metadata=_help("camera_pose, or 'none' to disable"))
    camera_name: str = dataclasses.field(
        default="", metadata=_help("camera to move; empty = every camera"))
    position_m: float = dataclasses.field(
        default=0.01, metadata=_help("largest mount offset, m, [0, 0.1]"))
    rotation_rad: float = dataclasses.field(
        default=0.1, metadata=_help("largest mount rotation, rad, [0, pi/4]"))

    FAMILY = C.FAMILY_CAMERA_POSE

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("position_m", self.position_m, 0.0, 0.1)
        check_range("rotation_rad", self.rotation_rad, 0.0, math.pi / 4)


def _unit(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random unit vector (a normal draw, normalized; redrawn if ~0)."""
    while True:
        v = rng.normal(size=3)
        n = float(np.linalg.norm(v))
        if n > 1e-9:
            return v / n


class CameraPose(Perturbation):
    """Per-episode camera mount offsets; see the module docstring for the model."""

    config_cls = CameraPoseConfig

    def _restore(self) -> None:
        self.offset = np.zeros(3)
        self.rotation = np.zeros(3)

    def _sample_episode(self, rng: np.random.Generator) -> None:
        c, s = self.config, self.intensity
        m1, m2 = rng.uniform(0.5, 1.0, 2)
        direction, axis = _unit(rng), _unit(rng)
        self.offset = direction * (c.position_m * s * m1)
        self.rotation = axis * (c.rotation_rad * s * m2)

    def settings(self) -> CameraPoseSettings:
        """The episode's camera pose (the default pose when disabled)."""
        return CameraPoseSettings(camera_name=self.config.camera_name,
                                  offset=tuple(float(v) for v in self.offset),
                                  rotation=tuple(float(v) for v in self.rotation))

    def _parameters(self) -> dict[str, float]:
        out = {"offset_m": float(np.linalg.norm(self.offset)),
               "rotation_rad": float(np.linalg.norm(self.rotation))}
        out.update({f"offset_{a}": float(v) for a, v in zip("xyz", self.offset, strict=True)})
        out.update({f"rotation_{a}": float(v) for a, v in zip("xyz", self.rotation,
                                                              strict=True)})
        return out
