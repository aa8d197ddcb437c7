"""Conversions between planning messages (PlanMotion, JointTrajectory) and the planning core."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.planning import types as T
from clawgym_ros.ros_io.convert import duration_msg

_GOAL_TYPES = {0: T.GOAL_JOINTS, 1: T.GOAL_POSE, 2: T.GOAL_NAMED}
_WORLD_FRAMES = ("", C.FRAME_WORLD)


def trajectory_to_msg(traj: T.Trajectory, frame_id: str = C.FRAME_WORLD) -> JointTrajectory:
    """trajectory_msgs/JointTrajectory with positions, velocities and accelerations."""
    msg = JointTrajectory()
    msg.header.frame_id = frame_id
    msg.joint_names = list(traj.joint_names)
    for k, t in enumerate(traj.times):
        msg.points.append(JointTrajectoryPoint(
            positions=traj.positions[k].tolist(), velocities=traj.velocities[k].tolist(),
            accelerations=traj.accelerations[k].tolist(), time_from_start=duration_msg(t)))
    return msg


def trajectory_from_msg(msg: JointTrajectory) -> T.Trajectory:
    """The core trajectory of a message (missing velocities/accelerations become zeros)."""
    n = len(msg.joint_names)
    times = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9
                      for p in msg.points])

    def column(attr: str) -> np.ndarray:
        rows = [list(getattr(p, attr)) or [0.0] * n for p in msg.points]
        return np.array(rows, dtype=float).reshape(len(msg.points), n)

    return T.Trajectory(tuple(msg.joint_names), times, column("positions"),
                        column("velocities"), column("accelerations"))


def _ordered(names: Sequence[str], values: Sequence[float], joints: Sequence[str],
             field: str) -> tuple[float, ...]:
    lookup = dict(zip(names, values, strict=False))
    missing = [j for j in joints if j not in lookup]
    if missing:
        raise ConfigError(f"{field}.name", missing[0], "every joint of the planning group")
    return tuple(float(lookup[j]) for j in joints)


def plan_request_from_msg(req, joints: Sequence[str] = C.ARM_JOINTS) -> T.PlanRequest:
    """A :class:`PlanRequest` from a PlanMotion request.

    Raises:
        ConfigError: unknown goal type, incomplete joint lists, a pose in another frame or an
            out-of-range value.
    """
    if req.goal_type not in _GOAL_TYPES:
        raise ConfigError("goal_type", req.goal_type, "0 (joints), 1 (pose) or 2 (named)")
    goal_type = _GOAL_TYPES[req.goal_type]
    start = None
    if req.start_state.name:
        start = _ordered(req.start_state.name, req.start_state.position, joints, "start_state")
    joint_goal: tuple[float, ...] = ()
    pose = None
    if goal_type == T.GOAL_JOINTS:
        joint_goal = _ordered(req.joint_goal.name, req.joint_goal.position, joints,
                              "joint_goal")
    elif goal_type == T.GOAL_POSE:
        frame = req.pose_goal.header.frame_id
        if frame not in _WORLD_FRAMES:
            raise ConfigError("pose_goal.header.frame_id", frame, "'' or 'world'")
        p, o = req.pose_goal.pose.position, req.pose_goal.pose.orientation
        try:
            pose = T.Pose((p.x, p.y, p.z), (o.w, o.x, o.y, o.z))
        except ValueError as err:
            raise ConfigError("pose_goal", "pose", str(err)) from None
    return T.PlanRequest(
        goal_type=goal_type, joint_goal=joint_goal, pose_goal=pose,
        named_goal=req.named_goal, start=start, cartesian=bool(req.cartesian),
        group=req.group or C.ARM_GROUP, planner_id=req.planner_id,
        time_limit=float(req.time_limit), velocity_scaling=float(req.velocity_scaling))


def fill_response(response, result: T.PlanResult):
    """Copy a :class:`PlanResult` into a PlanMotion response (returned for chaining)."""
    response.success = bool(result.success)
    response.reason = result.reason
    response.message = result.message
    response.planning_time = float(result.planning_time)
    if result.trajectory is not None:
        response.trajectory = trajectory_to_msg(result.trajectory)
    return response
