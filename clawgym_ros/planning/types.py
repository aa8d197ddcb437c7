"""Requests, results and trajectories of the planning core (plain dataclasses, no ROS)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_range

#: Why a plan failed (PlanResult.reason); "" on success.
REASON_START_IN_COLLISION = "start_in_collision"
REASON_GOAL_IN_COLLISION = "goal_in_collision"
REASON_GOAL_UNREACHABLE = "goal_unreachable"
REASON_IK_FAILED = "ik_failed"
REASON_TIMEOUT = "timeout"
REASON_INVALID_REQUEST = "invalid_request"
REASON_CARTESIAN_INCOMPLETE = "cartesian_path_incomplete"
REASONS: tuple[str, ...] = (
    REASON_START_IN_COLLISION, REASON_GOAL_IN_COLLISION, REASON_GOAL_UNREACHABLE,
    REASON_IK_FAILED, REASON_TIMEOUT, REASON_INVALID_REQUEST, REASON_CARTESIAN_INCOMPLETE,
)

GOAL_JOINTS = "joints"
GOAL_POSE = "pose"
GOAL_NAMED = "named"
GOAL_TYPES: tuple[str, ...] = (GOAL_JOINTS, GOAL_POSE, GOAL_NAMED)


@dataclasses.dataclass(frozen=True)
class Pose:
    """A tool pose in the world frame: position (m) and unit quaternion ``(w, x, y, z)``."""

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        pos = tuple(float(v) for v in self.position)
        quat = np.asarray(self.orientation, dtype=float)
        if len(pos) != 3 or not np.all(np.isfinite(pos)):
            raise ValueError(f"pose.position={self.position!r} is invalid; allowed: 3 numbers")
        norm = float(np.linalg.norm(quat)) if quat.shape == (4,) else 0.0
        if not np.isfinite(norm) or norm < 1e-6:
            raise ValueError(f"pose.orientation={self.orientation!r} is invalid; allowed: "
                             "a non-zero quaternion (w, x, y, z)")
        object.__setattr__(self, "position", pos)
        object.__setattr__(self, "orientation", tuple(float(v) for v in quat / norm))


@dataclasses.dataclass(frozen=True)
class PlanRequest:
    """A motion request for one planning group (MoveIt MotionPlanRequest, simplified).

    ``start`` None means the planner's current state (see ``set_current_state``).
    """

    goal_type: str = GOAL_JOINTS
    joint_goal: tuple[float, ...] = ()
    pose_goal: Pose | None = None
    named_goal: str = ""
    start: tuple[float, ...] | None = None
    cartesian: bool = False
    group: str = C.ARM_GROUP
    planner_id: str = ""
    time_limit: float = 0.0          # 0 = planner default
    velocity_scaling: float = 0.0    # 0 = joint_limits.yaml default
    acceleration_scaling: float = 0.0

    def __post_init__(self) -> None:
        check_choice("goal_type", self.goal_type, GOAL_TYPES)
        check_range("time_limit", self.time_limit, 0.0, 600.0)
        check_range("velocity_scaling", self.velocity_scaling, 0.0, 1.0)
        check_range("acceleration_scaling", self.acceleration_scaling, 0.0, 1.0)
        object.__setattr__(self, "joint_goal", tuple(float(v) for v in self.joint_goal))
        if self.start is not None:
            object.__setattr__(self, "start", tuple(float(v) for v in self.start))


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """A time-parameterized joint trajectory (like trajectory_msgs/JointTrajectory).

    Attributes:
        joint_names: joint order of the columns.
        times: (N,) seconds from the start, increasing from 0.
        positions, velocities, accelerations: (N, J) arrays.
    """

    joint_names: tuple[str, ...]
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray

    @property
    def duration(self) -> float:
        """Seconds from the first to the last point."""
        return float(self.times[-1]) if len(self.times) else 0.0

    def path_length(self) -> float:
        """Joint-space length of the waypoint polyline (radians, Euclidean)."""
        if len(self.positions) < 2:
            return 0.0
        return float(np.linalg.norm(np.diff(self.positions, axis=0), axis=1).sum())

    def to_sim(self) -> Any:
        """The simulator's trajectory type (cubic Hermite through positions and velocities)."""
        from clawgym_ros.sim.trajectory import JointTrajectory

        return JointTrajectory(joint_names=self.joint_names, times=self.times,
                               positions=self.positions, velocities=self.velocities)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"joint_names": list(self.joint_names), "times": self.times.tolist(),
                "positions": self.positions.tolist(), "velocities": self.velocities.tolist(),
                "accelerations": self.accelerations.tolist()}


@dataclasses.dataclass
class PlanResult:
    """Outcome of a plan: a trajectory on success, a reason from :data:`REASONS` otherwise."""

    success: bool
    reason: str = ""
    message: str = ""
    trajectory: Trajectory | None = None
    planning_time: float = 0.0
    planner_id: str = ""

    @classmethod
    def failure(cls, reason: str, message: str, planning_time: float = 0.0) -> PlanResult:
        """A failed result (``reason`` must be one of :data:`REASONS`)."""
        assert reason in REASONS, reason
        return cls(success=False, reason=reason, message=message, planning_time=planning_time)
