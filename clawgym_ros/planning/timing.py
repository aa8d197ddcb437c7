"""Time parameterization of joint-space paths within velocity and acceleration limits (toppra).

The geometric path (a polyline of waypoints) is resampled densely before a cubic spline is fit
through it, so the timed path stays within a small distance of the polyline the planner
validated; the planner re-checks the timed result densely anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from clawgym_ros.planning.types import Trajectory

#: Spacing (max joint change, rad) of the resampled polyline the spline goes through.
RESAMPLE_STEP = 0.04


def densify(positions: np.ndarray, max_step: float) -> np.ndarray:
    """Insert points so that no joint changes by more than ``max_step`` between neighbours."""
    positions = np.asarray(positions, dtype=float)
    out = [positions[0]]
    for a, b in zip(positions[:-1], positions[1:], strict=True):
        n = max(1, int(np.ceil(np.max(np.abs(b - a)) / max_step)))
        out += [a + (b - a) * (i / n) for i in range(1, n + 1)]
    return np.array(out)


def time_parameterize(
    positions: np.ndarray,
    joint_names: Sequence[str],
    max_velocity: np.ndarray,
    max_acceleration: np.ndarray,
    dt: float = 0.02,
    resample_step: float = RESAMPLE_STEP,
) -> Trajectory | None:
    """Time-optimal trajectory along the waypoint polyline, starting and ending at rest.

    Args:
        positions: (N, J) waypoints (N >= 1).
        joint_names: J names.
        max_velocity, max_acceleration: (J,) limits (already scaled).
        dt: sampling period of the returned points.
        resample_step: polyline resampling before the spline fit (rad).

    Returns:
        The trajectory, or None when toppra finds no parameterization.
    """
    import toppra
    import toppra.algorithm as algo
    import toppra.constraint as constraint

    logging.getLogger("toppra").setLevel(logging.WARNING)
    positions = np.asarray(positions, dtype=float)
    names = tuple(joint_names)
    # Drop repeated waypoints: the spline needs strictly increasing path parameters.
    keep = [0] + [i for i in range(1, len(positions))
                  if np.max(np.abs(positions[i] - positions[i - 1])) > 1e-9]
    positions = positions[keep]
    if len(positions) == 1:
        zeros = np.zeros_like(positions)
        return Trajectory(names, np.zeros(1), positions.copy(), zeros, zeros.copy())
    dense = densify(positions, resample_step)
    seg = np.linalg.norm(np.diff(dense, axis=0), axis=1)
    ss = np.concatenate([[0.0], np.cumsum(seg)])
    path = toppra.SplineInterpolator(ss, dense, bc_type="clamped")
    vlim = np.stack([-max_velocity, max_velocity], axis=1)
    alim = np.stack([-max_acceleration, max_acceleration], axis=1)
    grid = np.linspace(0.0, ss[-1], max(100, min(1000, 4 * len(dense))))
    instance = algo.TOPPRA(
        [constraint.JointVelocityConstraint(vlim), constraint.JointAccelerationConstraint(alim)],
        path, gridpoints=grid, parametrizer="ParametrizeConstAccel")
    try:
        timed = instance.compute_trajectory(0.0, 0.0)
    except Exception:  # toppra raises plain exceptions on numerical trouble
        timed = None
    if timed is None:
        return None
    duration = float(timed.duration)
    n = max(2, int(np.ceil(duration / dt)) + 1)
    times = np.linspace(0.0, duration, n)
    pos = np.asarray(timed(times))
    vel = np.asarray(timed(times, 1))
    acc = np.asarray(timed(times, 2))
    pos[0], pos[-1] = positions[0], positions[-1]
    vel[0] = vel[-1] = 0.0
    return Trajectory(names, times, pos, vel, acc)
