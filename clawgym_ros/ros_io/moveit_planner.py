"""The ``moveit`` planner backend: moveit_py's planning component behind :class:`Planner`.

Needs a ROS 2 workstation with MoveIt 2 (``moveit_py``); it is not installable from PyPI, so
everything from ``moveit`` is imported inside functions, and the backend is exercised only on
a workstation (its tests skip here with that reason). It lives in ros_io, not planning/,
because moveit_py is a ROS client and pure cores import no ROS packages (test_boundaries).
It loads the same ``config/moveit`` files as the embedded planner, so groups, named states,
limits and planner ids agree.

Cartesian requests use Pilz's ``LIN`` planner (straight tool line); failures map MoveIt error
codes onto :data:`clawgym_ros.planning.types.REASONS`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import load_yaml
from clawgym_ros.planning import types as T
from clawgym_ros.planning.base import GRIPPER_TOUCH_LINKS, Planner
from clawgym_ros.planning.moveit_config import MoveItConfig, load_moveit_config

#: moveit_msgs/MoveItErrorCodes value -> PlanResult.reason
ERROR_REASONS: dict[int, str] = {
    -1: T.REASON_GOAL_UNREACHABLE,      # PLANNING_FAILED
    -6: T.REASON_TIMEOUT,               # TIMED_OUT
    -10: T.REASON_START_IN_COLLISION,   # START_STATE_IN_COLLISION
    -11: T.REASON_INVALID_REQUEST,      # START_STATE_VIOLATES_PATH_CONSTRAINTS
    -12: T.REASON_GOAL_IN_COLLISION,    # GOAL_IN_COLLISION
    -14: T.REASON_GOAL_UNREACHABLE,     # INVALID_GOAL_CONSTRAINTS
    -15: T.REASON_INVALID_REQUEST,      # INVALID_GROUP_NAME
    -31: T.REASON_IK_FAILED,            # NO_IK_SOLUTION
}


def moveit_config_dict(moveit: MoveItConfig) -> dict[str, Any]:
    """The parameter dictionary MoveItPy(config_dict=...) expects, from config/moveit."""
    from clawgym_ros.planning.srdf import urdf_text

    directory = moveit.directory
    return {
        "robot_description": urdf_text(),
        "robot_description_semantic": (directory / "claw_arm.srdf").read_text(),
        "robot_description_kinematics": load_yaml(directory / "kinematics.yaml"),
        "robot_description_planning": load_yaml(directory / "joint_limits.yaml"),
        "planning_pipelines": {"pipeline_names": ["ompl", "pilz_industrial_motion_planner"]},
        "plan_request_params": {"planning_pipeline": "ompl", "planning_attempts": 1,
                                "planning_time": 5.0, "max_velocity_scaling_factor": 1.0,
                                "max_acceleration_scaling_factor": 1.0},
        "ompl": load_yaml(directory / "ompl_planning.yaml"),
        "pilz_industrial_motion_planner": {
            "planning_plugins": ["pilz_industrial_motion_planner/CommandPlanner"]},
        **load_yaml(directory / "moveit_controllers.yaml"),
    }


class MoveItPlanner(Planner):
    """moveit_py planning for the arm group.

    Args:
        moveit: the MoveIt configuration (default: the package's config/moveit).
        node_name: name of the node MoveItPy creates.

    Raises:
        ImportError: moveit_py is not available (not a ROS workstation with MoveIt 2).
    """

    name = "moveit"

    def __init__(self, moveit: MoveItConfig | None = None, node_name: str = "moveit_py") -> None:
        from moveit.planning import MoveItPy

        self.moveit_config = moveit or load_moveit_config()
        self._moveit = MoveItPy(node_name=node_name,
                                config_dict=moveit_config_dict(self.moveit_config))
        self._arm = self._moveit.get_planning_component(C.ARM_GROUP)
        self._joints = self.moveit_config.group_joints(C.ARM_GROUP)
        self._current: dict[str, float] = {}

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(self._joints)

    def set_joint_positions(self, positions: Mapping[str, float]) -> None:
        # MoveItPy keeps its own planning scene monitor on joint_states; remembered for
        # requests that give no start state when the monitor is not running.
        self._current.update({k: float(v) for k, v in positions.items()})

    def attach_object(self, body: str, touch_links: Iterable[str] = GRIPPER_TOUCH_LINKS) -> None:
        from moveit_msgs.msg import AttachedCollisionObject

        attached = AttachedCollisionObject(link_name=C.FRAME_TOOL, touch_links=list(touch_links))
        attached.object.id = body
        attached.object.operation = attached.object.ADD
        with self._moveit.get_planning_scene_monitor().read_write() as scene:
            scene.process_attached_collision_object(attached)

    def detach_object(self) -> None:
        from moveit_msgs.msg import AttachedCollisionObject

        detach = AttachedCollisionObject(link_name=C.FRAME_TOOL)
        detach.object.operation = detach.object.REMOVE
        with self._moveit.get_planning_scene_monitor().read_write() as scene:
            scene.process_attached_collision_object(detach)

    def plan(self, request: T.PlanRequest) -> T.PlanResult:
        t0 = time.perf_counter()
        try:
            result = self._plan(request)
        except (ValueError, RuntimeError) as err:  # moveit_py raises these on bad input
            result = T.PlanResult.failure(T.REASON_INVALID_REQUEST, str(err))
        result.planning_time = time.perf_counter() - t0
        return result

    def _plan(self, req: T.PlanRequest) -> T.PlanResult:
        from geometry_msgs.msg import PoseStamped
        from moveit.core.robot_state import RobotState
        from moveit.planning import PlanRequestParameters

        model = self._moveit.get_robot_model()
        arm = self._arm
        if req.start is not None:
            start = RobotState(model)
            start.set_joint_group_positions(C.ARM_GROUP, np.asarray(req.start))
            start.update()
            arm.set_start_state(robot_state=start)
        else:
            arm.set_start_state_to_current_state()
        if req.goal_type == T.GOAL_NAMED:
            arm.set_goal_state(configuration_name=req.named_goal)
        elif req.goal_type == T.GOAL_JOINTS:
            goal = RobotState(model)
            goal.set_joint_group_positions(C.ARM_GROUP, np.asarray(req.joint_goal))
            goal.update()
            arm.set_goal_state(robot_state=goal)
        else:
            if req.pose_goal is None:
                return T.PlanResult.failure(T.REASON_INVALID_REQUEST, "pose goal missing")
            pose = PoseStamped()
            pose.header.frame_id = C.FRAME_WORLD
            (pose.pose.position.x, pose.pose.position.y,
             pose.pose.position.z) = req.pose_goal.position
            w, x, y, z = req.pose_goal.orientation
            pose.pose.orientation.w, pose.pose.orientation.x = w, x
            pose.pose.orientation.y, pose.pose.orientation.z = y, z
            arm.set_goal_state(pose_stamped_msg=pose, pose_link=C.FRAME_TOOL)
        params = PlanRequestParameters(self._moveit)
        if req.cartesian:
            params.planning_pipeline = "pilz_industrial_motion_planner"
            params.planner_id = "LIN"
        else:
            params.planning_pipeline = "ompl"
            params.planner_id = self.moveit_config.resolve_planner(
                C.ARM_GROUP, req.planner_id).name
        params.planning_time = req.time_limit or 5.0
        params.max_velocity_scaling_factor = (
            req.velocity_scaling or self.moveit_config.default_velocity_scaling)
        params.max_acceleration_scaling_factor = (
            req.acceleration_scaling or self.moveit_config.default_acceleration_scaling)
        response = arm.plan(single_plan_parameters=params)
        code = int(getattr(response.error_code, "val", response.error_code))
        if not response or code != 1:
            reason = ERROR_REASONS.get(code, T.REASON_INVALID_REQUEST)
            if req.cartesian and reason == T.REASON_GOAL_UNREACHABLE:
                reason = T.REASON_CARTESIAN_INCOMPLETE
            return T.PlanResult.failure(reason, f"MoveIt error code {code}")
        msg = response.trajectory.get_robot_trajectory_msg().joint_trajectory
        return T.PlanResult(True, "", f"moveit {params.planner_id}", _from_msg(msg),
                            planner_id=params.planner_id)


def _from_msg(msg: Any) -> T.Trajectory:
    n = len(msg.joint_names)
    times = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9
                      for p in msg.points])

    def column(attr: str) -> np.ndarray:
        return np.array([list(getattr(p, attr)) or [0.0] * n for p in msg.points], dtype=float)

    return T.Trajectory(tuple(msg.joint_names), times, column("positions"),
                        column("velocities"), column("accelerations"))
