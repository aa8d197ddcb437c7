"""A simulated human hand for handovers: two kinematic finger pads on a slowly drifting wrist.

The hand is added to a MuJoCo spec by :func:`add_hand`: a mocap body ``human_hand`` (the
grasp centre, visual palm only) and two dynamic finger pads ``human_finger_a`` / ``_b``
(free bodies, gravity-compensated) welded to mocap targets that close along the hand's x
axis. Pads are dynamic because MuJoCo friction acts on velocities: a teleported mocap pad
would not carry an object. The hand holds an object only by pinching it between the pads:
there is no palm underneath, so an object released before the hand has closed falls.

Behaviour (:class:`HumanHand`, pure NumPy, driven by the true object pose):

- ``open``: the wrist drifts along a seeded Lissajous path around its presentation point;
- the hand starts ``closing`` once the object centre has stayed within ``accept_radius`` of
  the grasp centre, moving slower than ``accept_speed``, for ``dwell_s``; it then holds still
  and closes its pads over ``close_s`` onto the object's width minus ``squeeze``;
- ``closed``: pads at the closed opening;
- ``retract``: once the robot let go (no gripper-object contact) for ``release_dwell_s`` (time
  for the gripper to retreat), the
  hand pulls back along ``retract_direction`` by ``retract_distance``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from clawgym_ros.config import check_range

HAND_BODY = "human_hand"
FINGER_BODIES = ("human_finger_a", "human_finger_b")
PHASES = ("open", "closing", "closed", "retract")


@dataclasses.dataclass(frozen=True)
class HandConfig:
    """Geometry, timing and motion of the simulated hand (m, s, rad)."""

    pad_half_size: tuple[float, float, float] = (0.005, 0.012, 0.010)
    open_clearance: float = 0.035
    squeeze: float = 0.004
    pad_mass: float = 0.5
    pad_friction: float = 1.5
    accept_radius: float = 0.02
    accept_speed: float = 0.03
    dwell_s: float = 0.4
    close_s: float = 0.6
    release_dwell_s: float = 2.8
    retract_distance: float = 0.08
    retract_speed: float = 0.04
    drift_amplitude: tuple[float, float, float] = (0.015, 0.015, 0.008)
    drift_frequency: tuple[float, float] = (0.06, 0.12)

    def __post_init__(self) -> None:
        check_range("squeeze", self.squeeze, 0.0, 0.01)
        check_range("close_s", self.close_s, 0.0, 10.0, low_open=True)
        check_range("accept_radius", self.accept_radius, 0.0, 0.2, low_open=True)


def add_hand(spec: Any, config: HandConfig | None = None) -> None:
    """Add the hand's mocap bodies and pads to an uncompiled ``mujoco.MjSpec``."""
    from clawgym_ros.sim.world import spec_enum

    box = spec_enum("geom", "box")
    cfg = config or HandConfig()
    world = spec.worldbody
    hand = world.add_body(name=HAND_BODY, mocap=True, pos=[0.6, 0.3, 0.6])
    hand.add_geom(name="human_palm", type=box, size=[0.03, 0.04, 0.008],
                  pos=[0.0, 0.05, 0.03], contype=0, conaffinity=0, group=1,
                  rgba=[0.93, 0.76, 0.62, 0.6])
    for name in FINGER_BODIES:
        world.add_body(name=f"{name}_target", mocap=True, pos=[0.6, 0.3, 0.6])
        body = world.add_body(name=name, pos=[0.6, 0.3, 0.6], gravcomp=1.0)
        body.add_freejoint(name=f"{name}_joint")
        body.add_geom(name=name, type=box, size=list(cfg.pad_half_size),
                      rgba=[0.93, 0.70, 0.58, 1.0], mass=cfg.pad_mass, priority=2,
                      friction=[cfg.pad_friction, 0.01, 0.001], condim=4)
        weld = spec.add_equality(name=f"{name}_weld", type=spec_enum("equality", "weld"),
                                 objtype=spec_enum("object", "body"), name1=name,
                                 name2=f"{name}_target", solref=[0.01, 1.0])
        # what MJCF's <weld body1 body2/> gives (MjSpec's default data anchors 1 m off):
        # zero relative pose = taken from the bodies' initial (identical) poses
        weld.data = np.array([0.0] * 10 + [1.0, 0.0])


@dataclasses.dataclass(frozen=True)
class HandPath:
    """The seeded wrist path: presentation point, yaw of the pad axis, drift parameters."""

    center: np.ndarray
    yaw: float
    amplitude: np.ndarray
    frequency: np.ndarray
    phase: np.ndarray
    retract_direction: np.ndarray

    @classmethod
    def sample(cls, rng: np.random.Generator, center_low: Sequence[float],
               center_high: Sequence[float], yaw_range: tuple[float, float],
               config: HandConfig) -> HandPath:
        """Draw a path from ``rng`` (centre box, yaw range, drift within config ranges)."""
        center = rng.uniform(center_low, center_high)
        yaw = float(rng.uniform(*yaw_range))
        amp = np.asarray(config.drift_amplitude) * rng.uniform(0.5, 1.0, 3)
        freq = rng.uniform(*config.drift_frequency, 3)
        phase = rng.uniform(0.0, 2.0 * math.pi, 3)
        away = np.array([center[0], center[1], 0.0])
        away = away / max(np.linalg.norm(away), 1e-9) + np.array([0.0, 0.0, 0.3])
        return cls(np.asarray(center), yaw, amp, freq, phase, away / np.linalg.norm(away))

    def position(self, t: float) -> np.ndarray:
        """Wrist (grasp centre) position at time ``t`` while open."""
        return self.center + self.amplitude * np.sin(2.0 * math.pi * self.frequency * t
                                                     + self.phase)


class HumanHand:
    """The hand's state machine (see the module docstring).

    Args:
        path: the episode's wrist path.
        object_width: width of the object along the pad axis (m) when grasped.
        config: geometry and timing.
    """

    def __init__(self, path: HandPath, object_width: float,
                 config: HandConfig | None = None) -> None:
        self.config = config or HandConfig()
        self.path = path
        self.object_width = float(object_width)
        self.phase = "open"
        self.closure = 0.0
        self._dwell = 0.0
        self._released = 0.0
        self._hold: np.ndarray | None = None
        self._retracted = 0.0
        self.close_started: float | None = None
        self.closed_at: float | None = None
        self.position = path.position(0.0)

    @property
    def axis(self) -> np.ndarray:
        """Unit pad axis (world)."""
        return np.array([math.cos(self.path.yaw), math.sin(self.path.yaw), 0.0])

    @property
    def quat(self) -> np.ndarray:
        """Hand orientation (w, x, y, z): yaw about world z."""
        return np.array([math.cos(self.path.yaw / 2), 0.0, 0.0, math.sin(self.path.yaw / 2)])

    def half_opening(self) -> float:
        """Distance from the grasp centre to each pad's inner face (m)."""
        cfg = self.config
        open_half = self.object_width / 2 + cfg.open_clearance
        closed_half = self.object_width / 2 - cfg.squeeze
        return open_half + (closed_half - open_half) * self.closure

    def update(self, t: float, dt: float, object_pos: Sequence[float], object_speed: float,
               gripper_contact: bool) -> None:
        """Advance the hand by ``dt`` given the true object state at time ``t``."""
        cfg = self.config
        obj = np.asarray(object_pos, dtype=float)
        if self.phase == "open":
            self.position = self.path.position(t)
            near = float(np.linalg.norm(obj - self.position)) < cfg.accept_radius
            self._dwell = self._dwell + dt if near and object_speed < cfg.accept_speed else 0.0
            if self._dwell >= cfg.dwell_s:
                self.phase = "closing"
                self.close_started = t
                self._hold = self.position.copy()
        elif self.phase == "closing":
            self.closure = min(1.0, self.closure + dt / cfg.close_s)
            if self.closure >= 1.0:
                self.phase = "closed"
                self.closed_at = t
        elif self.phase == "closed":
            self._released = self._released + dt if not gripper_contact else 0.0
            if self._released >= cfg.release_dwell_s:
                self.phase = "retract"
        elif self.phase == "retract" and self._retracted < cfg.retract_distance:
            step = min(cfg.retract_speed * dt, cfg.retract_distance - self._retracted)
            self._retracted += step
            assert self._hold is not None
            self._hold = self._hold + self.path.retract_direction * step
        if self._hold is not None:
            self.position = self._hold.copy()

    def pad_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Centres of the two pads (world)."""
        off = self.half_opening() + self.config.pad_half_size[0]
        return self.position + self.axis * off, self.position - self.axis * off

    def state_vector(self) -> np.ndarray:
        """(x, y, z, qw, qx, qy, qz, closure): the ``hand_state`` observation."""
        return np.concatenate([self.position, self.quat, [self.closure]])
