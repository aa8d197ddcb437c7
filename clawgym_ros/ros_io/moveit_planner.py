"""The ``moveit`` planner backend: moveit_py's planning component behind :class:`Planner`.

Needs a ROS 2 workstation with MoveIt 2 (``moveit_py``); it is not installable from PyPI, so
everything from ``moveit`` is imported inside functions, and the backend is exercised only on
a workstation (its tests skip here with that reason). It lives in ros_io, not planning/,
because moveit_py is a ROS client and pure cores import no ROS packages (test_boundaries).
It loads the same ``config/moveit`` files as the embedded planner, so groups, named states,
limits and planner ids agree.

Cartesian requests use Pilz's ``LIN`` planner (straight tool line); failures map MoveIt error
codes onto :data:`clawgym_ros.planning.types.REASONS`.

Frames: the SRDF's fixed virtual joint puts MoveIt's planning frame on ``base_link``, while
requests (and the scene specs) are in the simulator's world frame, where the base stands at
``robot.pos`` / ``robot.yaw``; pose goals and collision objects are therefore sent in
``base_link`` coordinates. The scene's static geometry and free objects (nominal poses) enter
MoveIt's planning scene when the planner is built, like the embedded planner's model.

Written against moveit2 ``jazzy`` (moveit_py bindings); not run by this project.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import load_yaml
from clawgym_ros.errors import ClawgymError
from clawgym_ros.planning import types as T
from clawgym_ros.planning.base import GRIPPER_TOUCH_LINKS, Planner
from clawgym_ros.planning.moveit_config import MoveItConfig, load_moveit_config
from clawgym_ros.sim import scene_spec as S

#: moveit_msgs/MoveItErrorCodes value -> PlanResult.reason (names as in moveit_msgs' ros2
#: MoveItErrorCodes.msg)
ERROR_REASONS: dict[int, str] = {
    -1: T.REASON_GOAL_UNREACHABLE,      # PLANNING_FAILED
    -6: T.REASON_TIMEOUT,               # TIMED_OUT
    -10: T.REASON_START_IN_COLLISION,   # START_STATE_IN_COLLISION
    -11: T.REASON_INVALID_REQUEST,      # START_STATE_VIOLATES_PATH_CONSTRAINTS
    -12: T.REASON_GOAL_IN_COLLISION,    # GOAL_IN_COLLISION
    -13: T.REASON_INVALID_REQUEST,      # GOAL_VIOLATES_PATH_CONSTRAINTS
    -14: T.REASON_GOAL_UNREACHABLE,     # GOAL_CONSTRAINTS_VIOLATED
    -15: T.REASON_INVALID_REQUEST,      # INVALID_GROUP_NAME
    -16: T.REASON_INVALID_REQUEST,      # INVALID_GOAL_CONSTRAINTS
    -17: T.REASON_INVALID_REQUEST,      # INVALID_ROBOT_STATE
    -26: T.REASON_START_IN_COLLISION,   # START_STATE_INVALID
    -27: T.REASON_GOAL_IN_COLLISION,    # GOAL_STATE_INVALID
    -31: T.REASON_IK_FAILED,            # NO_IK_SOLUTION
}

#: PlanRequestParameters(moveit_cpp, namespace) reads ``<namespace>.plan_request_params.*``,
#: or ``plan_request_params.*`` for an empty namespace (the block moveit_config_dict writes).
PLAN_REQUEST_NAMESPACE = ""

#: shape_msgs/SolidPrimitive type constants
_PRIMITIVE_TYPES = {"box": 1, "sphere": 2, "cylinder": 3}


def world_to_base(position: Sequence[float], quat_wxyz: Sequence[float],
                  base_pos: Sequence[float], base_yaw: float) -> tuple[np.ndarray, np.ndarray]:
    """A world-frame pose in the frame of a base at ``base_pos`` turned by ``base_yaw``.

    Returns:
        (position (3,), quaternion (w, x, y, z)) in the base frame.
    """
    c, s = math.cos(base_yaw), math.sin(base_yaw)
    dx, dy, dz = np.asarray(position, dtype=float) - np.asarray(base_pos, dtype=float)
    pos = np.array([c * dx + s * dy, -s * dx + c * dy, dz])
    # q_base = q_z(-yaw) * q_world
    hw, hz = math.cos(base_yaw / 2), -math.sin(base_yaw / 2)
    w, x, y, z = (float(v) for v in quat_wxyz)
    quat = np.array([hw * w - hz * z, hw * x - hz * y, hw * y + hz * x, hw * z + hz * w])
    return pos, quat


def primitive_fields(shape: S.Shape, base_pos: Sequence[float],
                     base_yaw: float) -> dict[str, Any]:
    """Field values of the moveit_msgs/CollisionObject for one scene shape (base frame).

    Returns:
        ``{"id", "type" (SolidPrimitive constant), "dimensions", "position", "orientation"
        (w, x, y, z)}``; a cylinder's dimensions are (height, radius) as SolidPrimitive wants.
    """
    if shape.shape == "cylinder":
        dimensions = [float(shape.size[1]), float(shape.size[0])]
    else:
        dimensions = [float(v) for v in shape.size]
    pos, quat = world_to_base(shape.pos, S.rpy_to_quat(shape.rpy), base_pos, base_yaw)
    return {"id": shape.name, "type": _PRIMITIVE_TYPES[shape.shape], "dimensions": dimensions,
            "position": pos.tolist(), "orientation": quat.tolist()}


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
        scene: the scene (name or spec) whose geometry enters MoveIt's planning scene.
        obstacles: extra static shapes (e.g. :data:`clawgym_ros.planning.scene.WALL_OBSTACLES`).

    Raises:
        ImportError: moveit_py is not available (not a ROS workstation with MoveIt 2).
        ClawgymError: MoveIt refused a collision object of the scene (named).
    """

    name = "moveit"

    def __init__(self, moveit: MoveItConfig | None = None, node_name: str = "moveit_py",
                 scene: str | S.SceneSpec = C.SCENE_TABLETOP,
                 obstacles: Sequence[S.Shape] = ()) -> None:
        from moveit.planning import MoveItPy

        self.moveit_config = moveit or load_moveit_config()
        spec = S.load_scene(scene) if isinstance(scene, str) else scene
        self.scene = spec
        self._base_pos = tuple(spec.robot.pos)
        self._base_yaw = float(spec.robot.yaw)
        self._moveit = MoveItPy(node_name=node_name,
                                config_dict=moveit_config_dict(self.moveit_config))
        self._arm = self._moveit.get_planning_component(C.ARM_GROUP)
        self._joints = self.moveit_config.group_joints(C.ARM_GROUP)
        self._current: dict[str, float] = {}
        self._attached: str | None = None
        self._add_scene([*spec.static_shapes(), *obstacles], list(spec.objects))

    def _add_scene(self, statics: Sequence[S.Shape], objects: Sequence[S.Shape]) -> None:
        """Add the scene's shapes as world collision objects; the fixed base may touch statics
        (it stands on the pedestal), which MoveIt would otherwise report as a start-state
        collision on every request."""
        from geometry_msgs.msg import Pose
        from moveit_msgs.msg import CollisionObject
        from shape_msgs.msg import SolidPrimitive

        monitor = self._moveit.get_planning_scene_monitor()
        for shape in [*statics, *objects]:
            fields = primitive_fields(shape, self._base_pos, self._base_yaw)
            msg = CollisionObject()
            msg.id = fields["id"]
            msg.header.frame_id = C.FRAME_BASE
            msg.primitives = [SolidPrimitive(type=fields["type"],
                                             dimensions=fields["dimensions"])]
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = fields["position"]
            (pose.orientation.w, pose.orientation.x, pose.orientation.y,
             pose.orientation.z) = fields["orientation"]
            msg.primitive_poses = [pose]
            msg.operation = CollisionObject.ADD
            if not monitor.process_collision_object(msg):
                raise ClawgymError(f"MoveIt refused collision object {shape.name!r} of scene "
                                   f"{self.scene.name!r} (see the moveit_py log)")
        with monitor.read_write() as scene:
            acm = scene.allowed_collision_matrix
            for shape in statics:
                acm.set_entry(C.FRAME_BASE, shape.name, True)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(self._joints)

    def set_joint_positions(self, positions: Mapping[str, float]) -> None:
        # MoveItPy keeps its own planning scene monitor on joint_states; remembered for
        # requests that give no start state when the monitor is not running.
        self._current.update({k: float(v) for k, v in positions.items()})

    def attach_object(self, body: str, touch_links: Iterable[str] = GRIPPER_TOUCH_LINKS) -> None:
        """Attach the world object ``body`` (added with the scene) to the tool frame.

        Raises:
            ClawgymError: MoveIt refused (e.g. ``body`` is not a collision object of the scene).
        """
        from moveit_msgs.msg import AttachedCollisionObject, CollisionObject

        attached = AttachedCollisionObject(link_name=C.FRAME_TOOL, touch_links=list(touch_links))
        attached.object.id = body
        # ADD without geometry: MoveIt moves the world object of that id onto the link.
        attached.object.operation = CollisionObject.ADD
        monitor = self._moveit.get_planning_scene_monitor()
        if not monitor.process_attached_collision_object(attached):
            raise ClawgymError(f"MoveIt could not attach {body!r} to {C.FRAME_TOOL}: it is not "
                               f"a collision object of scene {self.scene.name!r}")
        self._attached = body

    def detach_object(self) -> None:
        """Detach the attached object; it stays in the world where it was released.

        Raises:
            ClawgymError: MoveIt refused the detach.
        """
        from moveit_msgs.msg import AttachedCollisionObject, CollisionObject

        if self._attached is None:
            return
        detach = AttachedCollisionObject(link_name=C.FRAME_TOOL)
        detach.object.id = self._attached
        detach.object.operation = CollisionObject.REMOVE
        monitor = self._moveit.get_planning_scene_monitor()
        if not monitor.process_attached_collision_object(detach):
            raise ClawgymError(f"MoveIt could not detach {self._attached!r}")
        self._attached = None

    def plan(self, request: T.PlanRequest) -> T.PlanResult:
        t0 = time.perf_counter()
        try:
            result = self._plan(request)
        except (ValueError, RuntimeError) as err:  # moveit_py raises these on bad input
            result = T.PlanResult.failure(T.REASON_INVALID_REQUEST, str(err))
        except TypeError as err:
            # pybind11 raises TypeError when a binding's signature does not match (another
            # MoveIt release): a failed plan naming it, not a dead planner_node.
            result = T.PlanResult.failure(T.REASON_INVALID_REQUEST,
                                          f"moveit_py call does not match its binding: {err}")
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
            position, quat = world_to_base(req.pose_goal.position, req.pose_goal.orientation,
                                           self._base_pos, self._base_yaw)
            pose = PoseStamped()
            pose.header.frame_id = C.FRAME_BASE
            pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = position.tolist()
            w, x, y, z = quat.tolist()
            pose.pose.orientation.w, pose.pose.orientation.x = w, x
            pose.pose.orientation.y, pose.pose.orientation.z = y, z
            arm.set_goal_state(pose_stamped_msg=pose, pose_link=C.FRAME_TOOL)
        # jazzy: PlanRequestParameters(moveit_cpp, namespace), both positional.
        params = PlanRequestParameters(self._moveit, PLAN_REQUEST_NAMESPACE)
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
