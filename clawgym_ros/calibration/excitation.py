"""Excitation trajectories: what to send the robot while recording a calibration log.

Each arm joint follows a sum of sines around the scene's home pose (harmonics of
``1 / period_s`` between ``f_min`` and ``f_max``, drawn per joint from the seed, amplitude
falling as 1/f so that velocities stay moderate), inside a window that holds still for
``hold_s``, ramps in and out smoothly over ``ramp_s`` and holds again at the end. Amplitudes
stay within the joint limits (minus a margin) and peak speeds within ``velocity_fraction`` of
each joint's velocity limit; the whole path is checked collision-free in MuJoCo against the
scene (table, pedestal, bins, objects at their nominal poses, the arm itself) and shrunk until
it is. Velocity feed-forward is the exact time derivative of the targets.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_int, check_range
from clawgym_ros.errors import ClawgymError

#: URDF velocity limits of the arm joints (rad/s), urdf/claw_arm.urdf.xacro
ARM_VELOCITY_LIMITS = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
LIMIT_MARGIN = 0.1   # rad kept from every joint limit


@dataclasses.dataclass(frozen=True)
class ExcitationConfig:
    """Options of :func:`make_excitation` (all recorded in the log's metadata)."""

    seed: int = 0
    duration_s: float = 60.0
    rate_hz: float = 50.0
    hold_s: float = 1.0
    ramp_s: float = 2.0
    amplitude: float = 0.35
    velocity_fraction: float = 0.5
    period_s: float = 20.0
    f_min: float = 0.1
    f_max: float = 1.2
    harmonics: int = 5
    scene: str = C.SCENE_TABLETOP

    def __post_init__(self) -> None:
        check_int("excitation.seed", self.seed, 0, 2**32 - 1)
        check_range("excitation.duration_s", self.duration_s, 5.0, 3600.0)
        check_range("excitation.rate_hz", self.rate_hz, 5.0, 1000.0)
        check_range("excitation.hold_s", self.hold_s, 0.0, 10.0)
        check_range("excitation.ramp_s", self.ramp_s, 0.1, 10.0)
        check_range("excitation.amplitude", self.amplitude, 0.01, 1.0)
        check_range("excitation.velocity_fraction", self.velocity_fraction, 0.05, 1.0)
        check_range("excitation.period_s", self.period_s, 1.0, 600.0)
        check_range("excitation.f_min", self.f_min, 0.01, 10.0)
        check_range("excitation.f_max", self.f_max, self.f_min, 20.0)
        check_int("excitation.harmonics", self.harmonics, 1, 20)
        if 2 * (self.hold_s + self.ramp_s) >= self.duration_s:
            raise ClawgymError(f"excitation.duration_s={self.duration_s} is invalid; allowed: "
                               f"more than 2 x (hold_s + ramp_s) = "
                               f"{2 * (self.hold_s + self.ramp_s):g}")


@dataclasses.dataclass(frozen=True)
class Excitation:
    """Joint targets at the command rate.

    Attributes:
        t: (M,) command times from 0, s.
        position, velocity: (M, 7) arm joint targets (rad) and their derivative (rad/s).
        home: (7,) the pose held at both ends.
        config: the options used (amplitudes after the limit and collision checks in
            ``amplitudes``).
    """

    t: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    home: np.ndarray
    config: dict[str, Any]


def _window(t: np.ndarray, c: ExcitationConfig) -> tuple[np.ndarray, np.ndarray]:
    """The smooth 0 -> 1 -> 0 envelope and its derivative."""
    w, dw = np.zeros_like(t), np.zeros_like(t)
    t1, t2 = c.hold_s, c.hold_s + c.ramp_s
    t4 = c.duration_s - c.hold_s
    t3 = t4 - c.ramp_s
    up = (t >= t1) & (t < t2)
    x = (t[up] - t1) / c.ramp_s
    w[up] = 0.5 * (1 - np.cos(np.pi * x))
    dw[up] = 0.5 * np.pi / c.ramp_s * np.sin(np.pi * x)
    mid = (t >= t2) & (t < t3)
    w[mid] = 1.0
    down = (t >= t3) & (t < t4)
    x = (t[down] - t3) / c.ramp_s
    w[down] = 0.5 * (1 + np.cos(np.pi * x))
    dw[down] = -0.5 * np.pi / c.ramp_s * np.sin(np.pi * x)
    return w, dw


def _shapes(t: np.ndarray, c: ExcitationConfig,
            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per joint a multi-sine normalised to peak 1, and its derivative."""
    f0 = 1.0 / c.period_s
    ks = np.arange(max(1, int(np.ceil(c.f_min / f0))), int(np.floor(c.f_max / f0)) + 1)
    if len(ks) < c.harmonics:
        raise ClawgymError(f"excitation: only {len(ks)} harmonics of 1/period_s="
                           f"{f0:g} Hz lie in [f_min, f_max]; allowed: at least harmonics="
                           f"{c.harmonics}")
    s = np.zeros((len(t), 7))
    ds = np.zeros((len(t), 7))
    for j in range(7):
        chosen = np.sort(rng.choice(ks, size=c.harmonics, replace=False))
        phases = rng.uniform(0, 2 * np.pi, size=c.harmonics)
        for k, phi in zip(chosen, phases, strict=True):
            w = 2 * np.pi * k * f0
            a = 1.0 / k
            s[:, j] += a * np.sin(w * t + phi)
            ds[:, j] += a * w * np.cos(w * t + phi)
        peak = np.abs(s[:, j]).max()
        s[:, j] /= peak
        ds[:, j] /= peak
    return s, ds


def make_excitation(config: ExcitationConfig | None = None) -> Excitation:
    """Seeded excitation targets (see the module docstring).

    Raises:
        ClawgymError: no collision-free amplitude found (after 20 reductions).
    """
    from clawgym_ros.sim import scene_mjcf as MJ
    from clawgym_ros.sim import scene_spec as S
    from clawgym_ros.sim.calibrated import ContactsBeyondHome

    c = config or ExcitationConfig()
    scene = S.load_scene(c.scene)
    home = np.asarray(scene.robot.home, dtype=np.float64)
    model = MJ.build_model(scene)
    rng = np.random.default_rng(c.seed)
    n = int(round(c.duration_s * c.rate_hz)) + 1
    t = np.arange(n) / c.rate_hz
    w, dw = _window(t, c)
    s, ds = _shapes(t, c, rng)
    amp = np.full(7, c.amplitude)
    for j, name in enumerate(C.ARM_JOINTS):
        lo, hi = model.joint(name).range
        amp[j] = min(amp[j], home[j] - lo - LIMIT_MARGIN, hi - home[j] - LIMIT_MARGIN)
        peak_speed = np.abs(dw * s[:, j] + w * ds[:, j]).max()
        amp[j] = min(amp[j], c.velocity_fraction * ARM_VELOCITY_LIMITS[j] / peak_speed)
    checker = ContactsBeyondHome(model, home, C.ARM_JOINTS)
    for _ in range(20):
        pos = home + w[:, None] * s * amp
        if checker.free(pos[:: max(1, int(c.rate_hz // 25))]):
            break
        amp = amp * 0.85
    else:
        raise ClawgymError(f"excitation: no collision-free amplitude around the home pose of "
                           f"scene {c.scene} (amplitude={c.amplitude})")
    vel = (dw[:, None] * s + w[:, None] * ds) * amp
    info = dataclasses.asdict(c)
    info["amplitudes"] = [round(float(a), 6) for a in amp]
    return Excitation(t=t, position=pos, velocity=vel, home=home, config=info)
