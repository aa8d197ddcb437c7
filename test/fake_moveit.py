"""A stand-in for moveit_py (moveit2 ``jazzy``) with the signatures and return values the
``moveit`` planner backend relies on, for tests on machines without MoveIt.

Mirrors (read, not copied) ``moveit_py/src/moveit/moveit_ros/moveit_cpp/planning_component.cpp``
(PlanRequestParameters(moveit_cpp, namespace) loading ``<ns>.plan_request_params.*``;
set_start_state / set_goal_state / plan keyword names and argument checks),
``planning_scene_monitor.cpp`` (process_collision_object / process_attached_collision_object
return False when refused; read_write() holds the scene lock) and
``moveit_core/planning_scene/src/planning_scene.cpp`` (an ADD without geometry attaches the
world object of that id, or fails when there is none; REMOVE puts it back in the world).
moveit_msgs and shape_msgs are not PyPI wheels either, so minimal message classes come too.

:func:`install` puts the modules into ``sys.modules`` through pytest's ``monkeypatch``.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SUCCESS = 1
PLANNING_FAILED = -1

# ----------------------------------------------------------------------------- messages


@dataclass
class SolidPrimitive:
    BOX = 1
    SPHERE = 2
    CYLINDER = 3
    type: int = 0
    dimensions: list = field(default_factory=list)


@dataclass
class _Header:
    frame_id: str = ""


@dataclass
class CollisionObject:
    ADD = 0
    REMOVE = 1
    APPEND = 2
    MOVE = 3
    id: str = ""
    header: _Header = field(default_factory=_Header)
    primitives: list = field(default_factory=list)
    primitive_poses: list = field(default_factory=list)
    meshes: list = field(default_factory=list)
    planes: list = field(default_factory=list)
    operation: int = 0


@dataclass
class AttachedCollisionObject:
    link_name: str = ""
    object: CollisionObject = field(default_factory=CollisionObject)
    touch_links: list = field(default_factory=list)


@dataclass
class MoveItErrorCodes:
    val: int = 0


# ----------------------------------------------------------------------------- scene


class AllowedCollisionMatrix:
    def __init__(self) -> None:
        self.entries: dict[frozenset, bool] = {}

    def set_entry(self, name1: str, name2: str, allowed: bool) -> None:
        self.entries[frozenset((name1, name2))] = bool(allowed)


class PlanningScene:
    def __init__(self) -> None:
        self.world: dict[str, CollisionObject] = {}
        self.attached: dict[str, tuple[str, CollisionObject]] = {}
        self.allowed_collision_matrix = AllowedCollisionMatrix()

    def process_attached_collision_object(self, object: AttachedCollisionObject) -> bool:
        msg = object.object
        if msg.operation == CollisionObject.ADD:
            if not object.link_name:
                return False
            if not (msg.primitives or msg.meshes or msg.planes):
                if msg.id not in self.world:
                    return False  # "no geometry specified and ... does not exist in the world"
                self.attached[msg.id] = (object.link_name, self.world.pop(msg.id))
                return True
            self.attached[msg.id] = (object.link_name, msg)
            return True
        if msg.operation == CollisionObject.REMOVE:
            ids = [msg.id] if msg.id else list(self.attached)
            for name in ids:
                if name in self.attached:
                    self.world[name] = self.attached.pop(name)[1]
            return True
        return False


class _Locked:
    def __init__(self, monitor: PlanningSceneMonitor) -> None:
        self.monitor = monitor

    def __enter__(self) -> PlanningScene:
        self.monitor.locked = True
        return self.monitor.scene

    def __exit__(self, *exc: Any) -> None:
        self.monitor.locked = False


class PlanningSceneMonitor:
    def __init__(self) -> None:
        self.scene = PlanningScene()
        self.locked = False

    def _unlocked(self) -> None:
        # The real monitor takes the scene's unique lock: calling it inside read_write()
        # deadlocks.
        assert not self.locked, "PlanningSceneMonitor.process_* inside read_write(): deadlock"

    def process_collision_object(self, collision_object_msg: CollisionObject,
                                 color_msg: Any = None) -> bool:
        self._unlocked()
        msg = collision_object_msg
        if msg.operation != CollisionObject.ADD or not msg.primitives or \
                len(msg.primitives) != len(msg.primitive_poses) or not msg.header.frame_id:
            return False
        for prim in msg.primitives:
            want = {SolidPrimitive.BOX: 3, SolidPrimitive.SPHERE: 1, SolidPrimitive.CYLINDER: 2}
            if len(prim.dimensions) != want.get(prim.type, -1):
                return False
        self.scene.world[msg.id] = msg
        return True

    def process_attached_collision_object(
            self, attached_collision_object_msg: AttachedCollisionObject) -> bool:
        self._unlocked()
        return self.scene.process_attached_collision_object(attached_collision_object_msg)

    def read_write(self) -> _Locked:
        return _Locked(self)

    def read_only(self) -> _Locked:
        return _Locked(self)


# ----------------------------------------------------------------------------- planning


class RobotModel:
    pass


class RobotState:
    def __init__(self, robot_model: RobotModel) -> None:
        self.groups: dict[str, np.ndarray] = {}

    def set_joint_group_positions(self, joint_model_group_name: str,
                                  position_values: np.ndarray) -> None:
        self.groups[joint_model_group_name] = np.asarray(position_values, dtype=float)

    def update(self, force: bool = False, type: str = "all") -> None:
        pass


class PlanRequestParameters:
    """jazzy: ``py::init([](shared_ptr<MoveItCpp>&, const std::string& ns) {...})``: two
    positional arguments, no defaults."""

    def __init__(self, moveit_cpp: MoveItPy, ns: str, /) -> None:
        if not isinstance(moveit_cpp, MoveItPy) or not isinstance(ns, str):
            raise TypeError("__init__(): incompatible constructor arguments")
        config = moveit_cpp.config_dict or {}
        block = (config if not ns else config.get(ns, {})).get("plan_request_params", {})
        self.planner_id = block.get("planner_id", "")
        self.planning_pipeline = block.get("planning_pipeline", "")
        self.planning_time = block.get("planning_time", 1.0)
        self.planning_attempts = block.get("planning_attempts", 5)
        self.max_velocity_scaling_factor = block.get("max_velocity_scaling_factor", 1.0)
        self.max_acceleration_scaling_factor = block.get("max_acceleration_scaling_factor", 1.0)


class _Trajectory:
    def __init__(self, joint_names: list[str], goal: np.ndarray) -> None:
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        self.msg = types.SimpleNamespace(joint_trajectory=JointTrajectory(
            joint_names=list(joint_names),
            points=[JointTrajectoryPoint(positions=[0.0] * len(goal),
                                         time_from_start=Duration(sec=0)),
                    JointTrajectoryPoint(positions=goal.tolist(),
                                         time_from_start=Duration(sec=1))]))

    def get_robot_trajectory_msg(self) -> Any:
        return self.msg


class MotionPlanResponse:
    def __init__(self, code: int, trajectory: _Trajectory | None) -> None:
        self.error_code = MoveItErrorCodes(code)
        self.trajectory = trajectory

    def __bool__(self) -> bool:
        return self.error_code.val == SUCCESS


class PlanningComponent:
    def __init__(self, owner: MoveItPy, group: str) -> None:
        self.owner = owner
        self.group = group
        self.start: Any = None
        self.goal: dict[str, Any] = {}
        self.params: list[PlanRequestParameters] = []
        #: error code the next plan() returns (tests set it)
        self.next_code = SUCCESS

    def set_start_state_to_current_state(self) -> None:
        self.start = "current"

    def set_start_state(self, configuration_name: str | None = None,
                        robot_state: RobotState | None = None) -> bool:
        if configuration_name is not None and robot_state is not None:
            raise ValueError("Cannot specify both configuration name and robot state")
        if configuration_name is None and robot_state is None:
            raise ValueError("Must specify at least one argument")
        self.start = configuration_name or robot_state
        return True

    def set_goal_state(self, configuration_name: str | None = None,
                       robot_state: RobotState | None = None, pose_stamped_msg: Any = None,
                       pose_link: str | None = None,
                       motion_plan_constraints: list | None = None) -> bool:
        given = [v is not None for v in (configuration_name, robot_state, pose_stamped_msg,
                                         motion_plan_constraints)]
        if sum(given) > 1:
            raise ValueError("Cannot specify more than one goal")
        if (pose_stamped_msg is None) != (pose_link is None):
            raise ValueError("Must specify both message and corresponding link")
        if not any(given):
            raise ValueError("Must specify at least one argument")
        self.goal = {"configuration_name": configuration_name, "robot_state": robot_state,
                     "pose_stamped_msg": pose_stamped_msg, "pose_link": pose_link}
        return True

    def plan(self, single_plan_parameters: PlanRequestParameters | None = None,
             multi_plan_parameters: Any = None, planning_scene: Any = None,
             solution_selection_function: Any = None,
             stopping_criterion_callback: Any = None) -> MotionPlanResponse:
        if single_plan_parameters is not None:
            if not isinstance(single_plan_parameters, PlanRequestParameters):
                raise TypeError("plan(): incompatible function arguments")
            self.params.append(single_plan_parameters)
        if self.next_code != SUCCESS:
            return MotionPlanResponse(self.next_code, None)
        state = self.goal.get("robot_state")
        goal = state.groups[self.group] if state is not None else np.zeros(7)
        names = [f"arm_joint_{i}" for i in range(1, 8)]
        return MotionPlanResponse(SUCCESS, _Trajectory(names, goal))


class MoveItPy:
    """``MoveItPy(node_name="moveit_py", name_space="", launch_params_filepaths=...,
    config_dict=None, provide_planning_service=True, remappings=None)``."""

    instances: list[MoveItPy] = []

    def __init__(self, node_name: str = "moveit_py", name_space: str = "",
                 launch_params_filepaths: list | None = None, config_dict: dict | None = None,
                 provide_planning_service: bool = True, remappings: dict | None = None) -> None:
        self.node_name = node_name
        self.config_dict = config_dict
        self.monitor = PlanningSceneMonitor()
        self.components: dict[str, PlanningComponent] = {}
        self.model = RobotModel()
        MoveItPy.instances.append(self)

    def get_planning_component(self, planning_component_name: str) -> PlanningComponent:
        return self.components.setdefault(planning_component_name,
                                          PlanningComponent(self, planning_component_name))

    def get_planning_scene_monitor(self) -> PlanningSceneMonitor:
        return self.monitor

    def get_robot_model(self) -> RobotModel:
        return self.model


def install(monkeypatch: Any) -> types.SimpleNamespace:
    """Register the stand-in modules (moveit, moveit.planning, moveit.core.robot_state,
    moveit_msgs.msg, shape_msgs.msg) for one test."""
    MoveItPy.instances = []

    def module(name: str, **attrs: Any) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(__import__("sys").modules, name, mod)
        return mod

    planning = module("moveit.planning", MoveItPy=MoveItPy,
                      PlanRequestParameters=PlanRequestParameters,
                      PlanningComponent=PlanningComponent,
                      PlanningSceneMonitor=PlanningSceneMonitor)
    robot_state = module("moveit.core.robot_state", RobotState=RobotState)
    core = module("moveit.core", robot_state=robot_state)
    module("moveit", planning=planning, core=core)
    msgs = module("moveit_msgs.msg", CollisionObject=CollisionObject,
                  AttachedCollisionObject=AttachedCollisionObject,
                  MoveItErrorCodes=MoveItErrorCodes)
    module("moveit_msgs", msg=msgs)
    shapes = module("shape_msgs.msg", SolidPrimitive=SolidPrimitive)
    module("shape_msgs", msg=shapes)
    return types.SimpleNamespace(MoveItPy=MoveItPy)
