"""A robot log over ROS: send a calibration excitation to a robot, record what it did.

:class:`ExcitationSender` plays an :class:`~clawgym_ros.calibration.excitation.Excitation` to
a robot's arm: on each joint state (stamped with the robot's clock) it publishes the row due
for the control period starting at that stamp, as a one-point ``JointTrajectory`` stamped
with it and reached one period later (``time_from_start`` = the period: a servo tracking the
trajectory holds that row as its target over the period, as sim_node does). Event-driven, so
a late message never reorders rows; a period the robot steps past without a joint state
keeps the previous row.

:class:`RobotLogRecorder` records the robot's joint states, the arm commands it received (its
own command topic, i.e. after any safety filter) and optionally object poses, on arrival, and
writes them with the package's log writer (:func:`clawgym_ros.calibration.log.encode_log`):
the MCAP ``clawgym calibrate --bag`` reads. Only what crossed the topics is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseArray
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from clawgym_ros import constants as C
from clawgym_ros.ros_io.convert import duration_msg, time_msg, time_seconds
from clawgym_ros.ros_io.qos import COMMAND_QOS, SENSOR_QOS


class ExcitationSender:
    """Publishes an excitation's rows on ``topic`` in step with the robot's joint states.

    Args:
        node: the rclpy node to publish and subscribe from.
        excitation: the rows (``t``, ``position``, ``velocity``; 7 arm joints).
        joint_states: the robot's joint state topic.
        topic: where the commands go (a robot's trajectory topic, or a safety filter's input).
        start_delay_s: robot time from the first joint state to the excitation's first row.
    """

    def __init__(self, node: Any, excitation: Any, joint_states: str, topic: str,
                 start_delay_s: float = 0.5) -> None:
        self.excitation = excitation
        self.period = float(excitation.t[1] - excitation.t[0])
        self.start_delay_s = start_delay_s
        self.t0: float | None = None
        self.sent = 0
        self._last = -1
        self._pub = node.create_publisher(JointTrajectory, topic, COMMAND_QOS)
        node.create_subscription(JointState, joint_states, self._on_joints, SENSOR_QOS)

    @property
    def done(self) -> bool:
        """Whether the last row's period has started."""
        return self._last >= len(self.excitation.t) - 1

    def _on_joints(self, msg: JointState) -> None:
        now = time_seconds(msg.header.stamp)
        if self.t0 is None:
            self.t0 = now + self.start_delay_s
        row = int(round((now - self.t0) / self.period))
        if row < 0 or row <= self._last or row >= len(self.excitation.t):
            return
        self._last = row
        out = JointTrajectory(joint_names=list(C.ARM_JOINTS))
        out.header.stamp = time_msg(now)
        out.points = [JointTrajectoryPoint(
            positions=self.excitation.position[row].tolist(),
            velocities=self.excitation.velocity[row].tolist(),
            time_from_start=duration_msg(self.period))]
        self._pub.publish(out)
        self.sent += 1


class RobotLogRecorder:
    """Records joint states, arm commands and object poses as they arrive (see the module
    docstring).

    Args:
        node: the rclpy node to subscribe from.
        joint_states, trajectory, object_poses: the robot's topics (object_poses "" = none).
    """

    def __init__(self, node: Any, joint_states: str, trajectory: str,
                 object_poses: str = "") -> None:
        self.states: list[JointState] = []
        self.commands: list[JointTrajectory] = []
        self.poses: list[PoseArray] = []
        node.create_subscription(JointState, joint_states, self.states.append, SENSOR_QOS)
        node.create_subscription(JointTrajectory, trajectory, self.commands.append, COMMAND_QOS)
        if object_poses:
            node.create_subscription(PoseArray, object_poses, self.poses.append, SENSOR_QOS)

    def encode(self, metadata: dict[str, Any] | None = None,
               arm_joints: Sequence[str] = C.ARM_JOINTS) -> bytes:
        """The recording as robot-log MCAP bytes (messages in arrival order).

        Raises:
            ValueError: nothing recorded yet, or commands that are not for ``arm_joints``.
        """
        states = self.states
        commands = [m for m in self.commands if m.points]
        if not states or not commands:
            raise ValueError(f"recorded {len(states)} joint states and {len(commands)} "
                             "commands; need both")
        if any(list(m.joint_names) != list(arm_joints) for m in commands):
            raise ValueError("recorded commands name other joints than " + ", ".join(arm_joints))
        from clawgym_ros.calibration.log import encode_log

        names = tuple(states[0].name)
        t = np.array([time_seconds(m.header.stamp) for m in states])
        pos, vel, eff = (np.array([list(getattr(m, f)) for m in states])
                         for f in ("position", "velocity", "effort"))
        cmd_t = np.array([time_seconds(m.header.stamp) for m in commands])
        n = len(arm_joints)
        cmd_pos = np.array([list(m.points[0].positions) for m in commands])
        cmd_vel = np.array([list(m.points[0].velocities) if len(m.points[0].velocities) == n
                            else [0.0] * n for m in commands])
        obj_t = obj = None
        if self.poses:
            obj_t = np.array([time_seconds(m.header.stamp) for m in self.poses])
            obj = np.array([[[p.position.x, p.position.y, p.position.z, p.orientation.w,
                              p.orientation.x, p.orientation.y, p.orientation.z]
                             for p in m.poses] for m in self.poses])
        return encode_log(t, names, pos, vel, eff, cmd_t, tuple(arm_joints), cmd_pos, cmd_vel,
                          obj_t, obj, metadata, in_stamp_order=False)

    def write(self, path: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """Write :meth:`encode` to ``path`` atomically."""
        from clawgym_ros.artifacts.atomic import atomic_write_bytes

        path = Path(path)
        atomic_write_bytes(path, self.encode(metadata))
        return path
