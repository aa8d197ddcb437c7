"""Straight-line tool motions (approach, retreat, insertion) through IK, checked step by step.

Like MoveIt's computeCartesianPath: the tool pose is interpolated linearly in position and by
slerp in orientation; each waypoint is solved by IK seeded with the previous solution; a joint
jump above ``max_joint_jump`` or a collision between consecutive waypoints stops the path, and
the fraction achieved is reported.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clawgym_ros.planning.ik import IkSolver
from clawgym_ros.planning.types import Pose
from clawgym_ros.sim.collision import CollisionChecker
from clawgym_ros.sim.world import mat_to_quat


@dataclasses.dataclass
class CartesianPath:
    """Joint waypoints of a straight tool motion and the fraction of it achieved."""

    positions: np.ndarray
    fraction: float
    stop_reason: str = ""  # "", "ik", "jump", "collision"


def slerp(q0: np.ndarray, q1: np.ndarray, t: float) -> np.ndarray:
    """Spherical interpolation of unit quaternions (w, x, y, z)."""
    q0, q1 = np.asarray(q0, dtype=float), np.asarray(q1, dtype=float)
    dot = float(np.dot(q0, q1))
    if dot < 0.0:
        q1, dot = -q1, -dot
    if dot > 0.9995:
        out = q0 + t * (q1 - q0)
        return out / np.linalg.norm(out)
    theta = np.arccos(dot)
    return (np.sin((1 - t) * theta) * q0 + np.sin(t * theta) * q1) / np.sin(theta)


def cartesian_path(
    checker: CollisionChecker,
    ik: IkSolver,
    start: np.ndarray,
    target: Pose,
    step: float = 0.005,
    max_joint_jump: float = 0.15,
    check_step: float = 0.01,
) -> CartesianPath:
    """Joint path moving the tool in a straight line from its pose at ``start`` to ``target``.

    Args:
        checker: collision checker (its padding applies).
        ik: IK solver of the same model.
        start: start configuration of the planning joints.
        target: goal tool pose.
        step: largest tool translation between waypoints (m); rotation steps of 3 degrees.
        max_joint_jump: largest allowed joint change between waypoints (rad).
        check_step: joint-space resolution of collision checks between waypoints.

    Returns:
        The achieved part of the path (at least the start) and its fraction.
    """
    start = np.asarray(start, dtype=float)
    p0, r0 = checker.tool_pose(start)
    q0 = mat_to_quat(r0)
    p1, q1 = np.asarray(target.position), np.asarray(target.orientation)
    angle = 2.0 * np.arccos(min(1.0, abs(float(np.dot(q0, q1)))))
    n = max(1, int(np.ceil(max(np.linalg.norm(p1 - p0) / step, angle / np.radians(3.0)))))
    path = [start]
    for i in range(1, n + 1):
        t = i / n
        pose = Pose(tuple(p0 + t * (p1 - p0)), tuple(slerp(q0, q1, t)))
        result = ik.solve(pose, seed=path[-1], attempts=1, iterations=60)
        stop = ""
        if not result.success:
            stop = "ik"
        elif np.max(np.abs(result.q - path[-1])) > max_joint_jump:
            stop = "jump"
        elif not checker.motion_valid(path[-1], result.q, check_step):
            stop = "collision"
        if stop:
            return CartesianPath(np.array(path), (i - 1) / n, stop)
        path.append(result.q)
    return CartesianPath(np.array(path), 1.0)
