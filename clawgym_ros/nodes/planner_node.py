"""planner_node: the PlanMotion service (MoveIt-like planning for the arm group).

Lifecycle node: the constructor only declares parameters; ``on_configure`` builds the planner
(backend ``ompl`` = embedded OMPL + MuJoCo in the scene's model, or ``moveit`` = moveit_py on a
workstation), the ``joint_states`` subscription (current state for requests without a start
state), the ``plan_motion`` service and the ``joint_trajectory`` publisher used when a request
asks to ``execute`` (sim_node follows it). With ``autostart`` (default) the node configures and
activates itself; otherwise a lifecycle manager drives it. Requests arriving while inactive
are answered with success=false.
"""


# No `from __future__ import annotations`: from_dict needs real field types to build the
# nested `ompl` options.
import dataclasses
import sys

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from clawgym_interfaces.srv import PlanMotion
from clawgym_ros import constants as C
from clawgym_ros.config import check_choice
from clawgym_ros.errors import ClawgymError
from clawgym_ros.planning.base import BACKENDS, planner_class
from clawgym_ros.planning.ompl_planner import OmplPlannerConfig
from clawgym_ros.planning.types import REASON_INVALID_REQUEST, PlanResult
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.planning import fill_response, plan_request_from_msg
from clawgym_ros.ros_io.qos import COMMAND_QOS, SENSOR_QOS
from clawgym_ros.ros_io.spin import autostart, spin

OBSTACLE_SETS = ("none", "wall")


@dataclasses.dataclass(frozen=True)
class PlannerNodeConfig:
    """Parameters of planner_node (backend options nested under the backend name)."""

    backend: str = dataclasses.field(
        default="ompl", metadata={"help": "planner backend: ompl (embedded) or moveit"})
    scene: str = dataclasses.field(
        default="tabletop", metadata={"help": "scene to plan in (config/scenes/<name>.yaml)"})
    obstacles: str = dataclasses.field(
        default="none", metadata={"help": "extra planning obstacles: none or wall"})
    autostart: bool = dataclasses.field(
        default=True, metadata={"help": "configure and activate on start-up"})
    ompl: OmplPlannerConfig = dataclasses.field(default_factory=OmplPlannerConfig)

    def __post_init__(self) -> None:
        check_choice("backend", self.backend, tuple(BACKENDS))
        check_choice("obstacles", self.obstacles, OBSTACLE_SETS)


def make_planner(config: PlannerNodeConfig):
    """Build the configured backend (imports moveit_py only for ``moveit``)."""
    from clawgym_ros.planning.scene import WALL_OBSTACLES, build_planning_model, home_qpos

    cls = planner_class(config.backend)
    obstacles = WALL_OBSTACLES if config.obstacles == "wall" else ()
    if config.backend == "moveit":
        # The same scene and obstacles enter MoveIt's planning scene as OMPL's model.
        return cls(scene=config.scene, obstacles=obstacles)
    model, spec = build_planning_model(config.scene, obstacles)
    return cls(model, config.ompl, scene_qpos=home_qpos(model, spec))


class PlannerNode(LifecycleNode):
    """Thin node: PlanMotion request -> PlanRequest -> planner -> JointTrajectory."""

    def __init__(self) -> None:
        super().__init__(C.NODE_PLANNER)
        self.config = declare_config(self, PlannerNodeConfig)
        self.planner = None
        self._service = self._sub = self._pub = None
        self._active = False

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.planner = make_planner(self.config)
        except (ClawgymError, ImportError) as err:
            self.transition_error = f"cannot build the {self.config.backend} planner: {err}"
            self.get_logger().error(self.transition_error)
            return TransitionCallbackReturn.FAILURE
        self._sub = self.create_subscription(JointState, C.TOPIC_JOINT_STATES,
                                             self._on_joint_states, SENSOR_QOS)
        self._pub = self.create_publisher(JointTrajectory, C.TOPIC_JOINT_TRAJECTORY,
                                          COMMAND_QOS)
        self._service = self.create_service(PlanMotion, C.SRV_PLAN_MOTION, self._on_plan)
        self.get_logger().info(f"planner ready (backend {self.config.backend}, scene "
                               f"{self.config.scene}, obstacles {self.config.obstacles})")
        return super().on_configure(state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        for entity, destroy in ((self._service, self.destroy_service),
                                (self._sub, self.destroy_subscription),
                                (self._pub, self.destroy_publisher)):
            if entity is not None:
                destroy(entity)
        self._service = self._sub = self._pub = None
        self.planner = None
        return super().on_cleanup(state)

    def _on_joint_states(self, msg: JointState) -> None:
        if self.planner is not None and len(msg.name) == len(msg.position):
            self.planner.set_joint_positions(dict(zip(msg.name, msg.position, strict=True)))

    def _on_plan(self, request: PlanMotion.Request, response: PlanMotion.Response):
        if not self._active or self.planner is None:
            return fill_response(response, PlanResult.failure(
                REASON_INVALID_REQUEST, "planner_node is not active"))
        try:
            plan_request = plan_request_from_msg(request, self.planner.joint_names)
        except ClawgymError as err:
            return fill_response(response, PlanResult.failure(REASON_INVALID_REQUEST, str(err)))
        result = self.planner.plan(plan_request)
        fill_response(response, result)
        if result.success and request.execute:
            response.trajectory.header.stamp = self.get_clock().now().to_msg()
            self._pub.publish(response.trajectory)
        # One call line per severity: rclpy (Jazzy, and Kilted's .warning) pins a call site's
        # first severity and raises ValueError when the same line logs at another one.
        text = f"{result.message} ({result.planning_time:.3f} s)"
        if result.success:
            self.get_logger().info(f"plan ok: {text}")
        else:
            self.get_logger().warning(f"plan {result.reason}: {text}")
        return response


def _autostart(node: PlannerNode) -> None:
    if node.config.autostart:
        autostart(node)


def main(args: list[str] | None = None) -> int:
    """Console script ``planner_node``."""
    return spin(PlannerNode, args, start=_autostart)


if __name__ == "__main__":
    sys.exit(main())
