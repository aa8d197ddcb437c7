"""safety_node: every policy command to a real robot passes the safety filter.

Thin wrapper of :class:`clawgym_ros.safety.SafetyFilter` (velocity clamps, workspace box,
latched e-stop). Subscribes the policy's commands on ``cmd_vel_in`` (Twist) and
``joint_trajectory_in`` (JointTrajectory; remap the policy's outputs there), the robot's
``joint_states``, ``odom`` and optionally ``tool_pose`` (PoseStamped, base frame), and the
``estop`` topic (std_msgs/Bool, True = stop). Publishes the filtered commands on ``cmd_vel``
and ``joint_trajectory`` (reliable command QoS) and each non-passing verdict on
``safety_status`` (std_msgs/String, latched). A stop latches until the ``safety/reset``
service (std_srvs/Trigger) is called. With ``estop_timeout_s > 0`` a 10 Hz timer also stops
the robot (zero twist, hold position) when the e-stop heartbeat is overdue.
"""

from __future__ import annotations

import sys

from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from clawgym_ros import constants as C
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from clawgym_ros.ros_io.spin import spin
from clawgym_ros.safety import PASS, STOPPED, SafetyFilter, SafetyLimits


class SafetyNode(Node):
    """Filters commands between a policy and a robot."""

    def __init__(self) -> None:
        super().__init__(C.NODE_SAFETY)
        self.limits: SafetyLimits = declare_config(self, SafetyLimits)
        self.filter = SafetyFilter(self.limits)
        self.joints: dict[str, float] = {}
        self.base_xy: tuple[float, float] | None = None
        self.tool_xyz: tuple[float, float, float] | None = None
        self.cmd_pub = self.create_publisher(Twist, C.TOPIC_CMD_VEL, COMMAND_QOS)
        self.traj_pub = self.create_publisher(JointTrajectory, C.TOPIC_JOINT_TRAJECTORY,
                                              COMMAND_QOS)
        self.status_pub = self.create_publisher(String, C.TOPIC_SAFETY_STATUS, LATCHED_QOS)
        self.create_subscription(Twist, C.TOPIC_CMD_VEL_IN, self.on_twist, COMMAND_QOS)
        self.create_subscription(JointTrajectory, C.TOPIC_JOINT_TRAJECTORY_IN, self.on_traj,
                                 COMMAND_QOS)
        self.create_subscription(JointState, C.TOPIC_JOINT_STATES, self.on_joints, SENSOR_QOS)
        self.create_subscription(Odometry, C.TOPIC_ODOM, self.on_odom, SENSOR_QOS)
        self.create_subscription(PoseStamped, C.TOPIC_TOOL_POSE, self.on_tool, SENSOR_QOS)
        self.create_subscription(Bool, C.TOPIC_ESTOP, self.on_estop, COMMAND_QOS)
        self.create_service(Trigger, C.SRV_SAFETY_RESET, self.on_reset)
        self._was_stopped = False
        if self.limits.estop_timeout_s > 0:
            self.create_timer(0.1, self.on_timer)

    def now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _report(self, verdict, what: str) -> None:
        if verdict.action != PASS:
            self.status_pub.publish(String(data=f"{what}: {verdict.action}: {verdict.reason}"))

    def on_twist(self, msg: Twist) -> None:
        v = self.filter.filter_twist((msg.linear.x, msg.linear.y), msg.angular.z, self.base_xy,
                                     self.now())
        out = Twist()
        out.linear.x, out.linear.y, out.angular.z = v.command
        self.cmd_pub.publish(out)
        self._report(v, "cmd_vel")

    def on_traj(self, msg: JointTrajectory) -> None:
        if not msg.points:
            return
        names = list(msg.joint_names)
        point = msg.points[0]
        current = [self.joints.get(n) for n in names]
        if any(c is None for c in current):
            self.status_pub.publish(String(data="joint_trajectory: rejected: no joint state "
                                                "for " + ", ".join(names)))
            return
        dt = point.time_from_start.sec + point.time_from_start.nanosec * 1e-9
        v = self.filter.filter_joints(list(point.positions), current, dt, self.tool_xyz,
                                      self.now())
        out = JointTrajectory(joint_names=names)
        out.header = msg.header
        out.points = [JointTrajectoryPoint(positions=list(v.command),
                                           time_from_start=point.time_from_start)]
        self.traj_pub.publish(out)
        self._report(v, "joint_trajectory")

    def on_joints(self, msg: JointState) -> None:
        self.joints.update(zip(msg.name, msg.position))

    def on_odom(self, msg: Odometry) -> None:
        p = msg.pose.pose.position
        self.base_xy = (p.x, p.y)

    def on_tool(self, msg: PoseStamped) -> None:
        p = msg.pose.position
        self.tool_xyz = (p.x, p.y, p.z)

    def on_estop(self, msg: Bool) -> None:
        self.filter.estop(bool(msg.data), self.now())
        if self.filter.stopped and not self._was_stopped:
            self._stop_now()

    def on_timer(self) -> None:
        self.filter.check_heartbeat(self.now())
        if self.filter.stopped and not self._was_stopped:   # latched, not the startup hold
            self._stop_now()

    def _stop_now(self) -> None:
        """Send a zero twist at once and report the latched stop."""
        self._was_stopped = True
        self.cmd_pub.publish(Twist())
        self.status_pub.publish(String(data=f"{STOPPED}: {self.filter.stop_reason}"))
        self.get_logger().warning(f"safety stop latched: {self.filter.stop_reason}")

    def on_reset(self, _request, response):
        self.filter.reset(self.now())
        self._was_stopped = False
        self.status_pub.publish(String(data="reset: commands pass the filter again"))
        response.success = True
        response.message = "safety stop cleared"
        return response


def main(args: list[str] | None = None) -> int:
    """Console script ``safety_node``."""
    return spin(SafetyNode, args)


if __name__ == "__main__":
    sys.exit(main())
