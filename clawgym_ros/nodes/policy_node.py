"""policy_node: a Policy on live topics (lockstep sim_node, Gazebo or a real robot).

Subscribes (sensor QoS) the perturbed sensor topics ``joint_states``, ``object_poses`` (arm),
``imu/data``, ``gps/fix``, ``odom`` (mobile base), ``image`` (when ``image_key`` is set),
``task_state`` (sim_node's task world, when the policy observes a task key such as
``place_goal``) and ``/clock`` (lockstep with ``hold_timeout`` > 0); builds the env's
observation dict with the shared
:class:`~clawgym_ros.evaluation.observation.ObservationAssembler`; calls the policy; publishes
(reliable) ``joint_trajectory`` (header stamp = the observation's stamp; in lockstep it also
carries the gripper as finger joints) and, free-running, ``gripper_command``; or, for a mobile
base, ``cmd_vel`` (free) / ``cmd_vel_stamped`` (lockstep: TwistStamped, the observation's
stamp).
Serves ``~/reset`` (std_srvs/Trigger): a new episode (``policy.reset()``, buffers cleared).

Modes: ``lockstep`` acts exactly once per observation stamp (see
:class:`~clawgym_ros.evaluation.ros_mode.StampedBuffer`); ``free`` acts on a wall timer at
``control_rate`` with the latest values. Pure logic lives in the evaluation package.

Chunks (lockstep, arm): a policy that declares its next actions open loop (a chunked torch
policy's queue, the scripted expert's plan: :func:`~clawgym_ros.evaluation.protocol.act_chunk`)
gets them sent as one trajectory of up to ``max_chunk`` points, one per control step
(:func:`~clawgym_ros.evaluation.observation.chunk_points`); sim_node runs those steps without
waiting, and the observations they produce are not acted on (the policy would not read them).
The actions are exactly those of the step-by-step in-process run.

A policy that observes a key the topics of its world cannot give (a checkpoint trained with
``place_goal`` while ``task`` is not pick_place, an image network without ``image_key``) is
refused at start: exit 2 with one line naming the key. A task-conditioned checkpoint
(``clawgym train --sequence``) is told its task from ``task``: exactly one task world, one it
was trained on (else exit 2, one line).

Run: ``policy_node --ros-args -p policy:=scripted:pick_place -r joint_states:=joint_states_raw``
"""

from __future__ import annotations

import sys
import time

from geometry_msgs.msg import PoseArray, Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, Imu, JointState, NavSatFix
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from clawgym_interfaces.msg import GripperCommand, TaskState
from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError, ConfigError
from clawgym_ros.evaluation.observation import (
    ObservationAssembler,
    arm_command,
    base_command,
    chunk_points,
    odom_vector,
    trajectory_points,
)
from clawgym_ros.evaluation.protocol import act_chunk, policy_tasks
from clawgym_ros.evaluation.rollout import PolicySource
from clawgym_ros.evaluation.ros_mode import (
    POLICY_LOCKSTEP,
    SRV_POLICY_RESET,
    PolicyNodeConfig,
    StampedBuffer,
    policy_task_keys,
)
from clawgym_ros.ros_io import sensors
from clawgym_ros.ros_io.convert import duration_msg_ns, nanos, time_msg, time_seconds
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.qos import (
    CLOCK_QOS,
    COMMAND_QOS,
    LOCKSTEP_SENSOR_QOS,
    SENSOR_QOS,
    TASK_STATE_QOS,
)
from clawgym_ros.ros_io.spin import spin


def _trajectory_msg(stamp: float, fingers: bool, points) -> JointTrajectory:
    """The arm (+ finger) trajectory of ``points`` (time from start ns, positions, velocities
    or None, gripper width); with ``fingers`` the gripper rides along as two finger joints
    (half the width each). The stamp names the observation acted on; 0 = "now"."""
    msg = JointTrajectory(joint_names=[*C.ARM_JOINTS, *(C.GRIPPER_JOINTS if fingers else ())])
    if stamp > 0:
        msg.header.stamp = time_msg(stamp)
    for t_ns, pos, vel, grip in points:
        half = [grip / 2, grip / 2] if fingers else []
        point = JointTrajectoryPoint(
            positions=[*pos.tolist(), *half],
            time_from_start=duration_msg_ns(t_ns))
        if vel is not None:
            point.velocities = [*vel.tolist(), *([0.0] * len(half))]
        msg.points.append(point)
    return msg


class PolicyNode(Node):
    """Thin node: messages -> observation dict -> Policy -> command messages."""

    def __init__(self) -> None:
        super().__init__(C.NODE_POLICY)
        self.config = declare_config(self, PolicyNodeConfig)
        cfg = self.config
        if not cfg.policy:
            raise ClawgymError("policy_node: parameter policy is empty; give a checkpoint id "
                               "or scripted:<task>")
        self.policy = PolicySource.parse(cfg.policy, cfg.run_dir).load()
        served = policy_tasks(self.policy)
        if served is not None:
            # A task-conditioned checkpoint (train --sequence) acts for the one task world it
            # is told here; ~/reset keeps it.
            if len(cfg.tasks) != 1:
                raise ConfigError("task", cfg.task, "one task world for a task-conditioned "
                                  "checkpoint (one of " + ", ".join(served) + ")")
            self.policy.set_task(cfg.tasks[0])
        task_keys = policy_task_keys(self.policy, cfg.policy, cfg.scene, cfg.tasks,
                                     cfg.image_key)
        self.assembler = ObservationAssembler(cfg.scene, cfg.image_key, task_keys=task_keys,
                                              kinematics=bool(cfg.kinematics_topic))
        self.buffer = StampedBuffer(self.assembler.required())
        self.actions = 0
        self._last_twist = (0.0, 0.0)
        # Lockstep: the last control step (stamp, ns) the published commands cover, and the
        # inputs still waiting for their t = 0 sample after ~/reset (see _put).
        self.covered_ns: int | None = None
        self.starting: set[str] = set()
        self._last_stamp: dict[str, float] = {}
        self.step_ns = nanos(cfg.control_dt)
        # Lockstep: act only once the evaluator started an episode (its ~/reset call), so the
        # observation sim_node publishes when it comes up never produces a stray command.
        self.armed = cfg.mode != POLICY_LOCKSTEP
        streams = {
            "joints": (JointState, C.TOPIC_JOINT_STATES, self._on_joints),
            "objects": (PoseArray, C.TOPIC_OBJECT_POSES, self._on_objects),
            "image": (Image, C.TOPIC_IMAGE, self._on_image),
            "imu": (Imu, C.TOPIC_IMU, self._on_imu),
            "gps": (NavSatFix, C.TOPIC_GPS, self._on_gps),
            "odom": (Odometry, C.TOPIC_ODOM, self._on_odom),
            "task": (TaskState, C.TOPIC_TASK_STATE, self._on_task),
            "kinematics": (JointState, cfg.kinematics_topic, self._on_kinematics),
        }
        # Lockstep without holding (hold_timeout 0): every stream arrives for every stamp from
        # sim_node's reliable publishers, so subscribe reliably (a lost sample would stall).
        exact = cfg.mode == POLICY_LOCKSTEP and cfg.hold_timeout == 0
        qos = LOCKSTEP_SENSOR_QOS if exact else SENSOR_QOS
        # Exact lockstep: no QoS event handlers (each is one more waitable the executor polls
        # on every callback; nothing here reacts to QoS events).
        lean = cfg.mode == POLICY_LOCKSTEP
        for stream in self.assembler.required():
            msg_type, topic, callback = streams[stream]
            # task_state is latched: free running, a late start still gets the goal.
            self.create_subscription(msg_type, topic, callback, qos if exact or stream != "task"
                                     else TASK_STATE_QOS, event_callbacks=(
                SubscriptionEventCallbacks(use_default_callbacks=False) if lean else None))
        if self.assembler.is_arm:
            self._traj_pub = self.create_publisher(
                JointTrajectory, C.TOPIC_JOINT_TRAJECTORY, COMMAND_QOS, event_callbacks=(
                    PublisherEventCallbacks(use_default_callbacks=False) if lean else None))
            if not lean:
                self._grip_pub = self.create_publisher(GripperCommand, C.TOPIC_GRIPPER_COMMAND,
                                                       COMMAND_QOS)
        elif lean:
            # Lockstep: stamped with the observation acted on, so sim_node's step waits for
            # exactly this command (cmd_vel carries no stamp).
            self._twist_stamped_pub = self.create_publisher(
                TwistStamped, C.TOPIC_CMD_VEL_STAMPED, COMMAND_QOS,
                event_callbacks=PublisherEventCallbacks(use_default_callbacks=False))
        else:
            self._twist_pub = self.create_publisher(Twist, C.TOPIC_CMD_VEL, COMMAND_QOS)
        self.create_service(Trigger, f"~/{SRV_POLICY_RESET}", self._on_reset)
        if cfg.mode == POLICY_LOCKSTEP:
            if cfg.hold_timeout > 0:
                # Only for dropped samples: /clock says a stamp is complete.
                self.create_subscription(Clock, C.TOPIC_CLOCK, self._on_clock, CLOCK_QOS)
                self.create_timer(min(cfg.hold_timeout / 2, 0.01), self._maybe_act)
        else:
            self.create_timer(1.0 / cfg.control_rate, self._act_free)
        self.get_logger().info(f"policy {cfg.policy} ({cfg.mode}), streams "
                               f"{', '.join(self.assembler.required())}")

    # ------------------------------------------------------------------ inputs
    def _starts(self, stream: str, t: float) -> bool:
        """Lockstep (and free with ``restart_clock``): False for a sample of the last episode
        taken after ~/reset.

        With chunks sim_node runs ahead of this node, so samples of the episode that just
        ended may still be queued here when the evaluator resets; the new episode begins
        with sim/reset's t = 0 sample on every input, so anything before it is old. Free
        running (best effort) that sample may be lost: the new episode begins with the first
        sample whose stamp goes back (the simulator's clock restarted).
        """
        last = self._last_stamp.get(stream)
        self._last_stamp[stream] = t
        if stream in self.starting:
            restarted = t == 0.0 or (self.config.mode != POLICY_LOCKSTEP
                                     and (last is None or t < last))
            if not restarted:
                return False
            self.starting.discard(stream)
        return True

    def _put(self, stream: str, stamp, value) -> None:
        t = time_seconds(stamp)
        if not self._starts(stream, t):
            return
        self.buffer.put(stream, t, value)
        if self.config.mode == POLICY_LOCKSTEP:
            self._maybe_act()

    def _on_joints(self, msg: JointState) -> None:
        v = sensors.joint_state_values(msg)
        self._put("joints", msg.header.stamp, (v["name"], v["position"], v["velocity"]))

    def _on_kinematics(self, msg: JointState) -> None:
        self._put("kinematics", msg.header.stamp, (msg.name, msg.position, None))

    def _on_objects(self, msg: PoseArray) -> None:
        self._put("objects", msg.header.stamp, sensors.pose_array_values(msg))

    def _on_image(self, msg: Image) -> None:
        self._put("image", msg.header.stamp, sensors.image_array(msg))

    def _on_imu(self, msg: Imu) -> None:
        v = sensors.imu_values(msg)
        quat = v.orientation_wxyz if v.orientation_wxyz is not None else [1.0, 0.0, 0.0, 0.0]
        self._put("imu", msg.header.stamp, [*quat, *v.angular_velocity,
                                            *v.linear_acceleration])

    def _on_gps(self, msg: NavSatFix) -> None:
        fix = sensors.gps_fix(msg)
        self._put("gps", msg.header.stamp, [fix.latitude, fix.longitude, fix.altitude])

    def _on_odom(self, msg: Odometry) -> None:
        o = sensors.odom_values(msg)
        self._put("odom", msg.header.stamp, odom_vector(
            o.position, o.orientation_wxyz, o.linear_velocity, o.angular_velocity))

    def _on_task(self, msg: TaskState) -> None:
        try:
            stamp, state = sensors.task_state_values(msg)
        except ClawgymError as err:
            self.get_logger().error(f"task_state ignored: {err}")
            return
        self._put("task", stamp, state.get("observation", {}))

    def _on_clock(self, msg: Clock) -> None:
        t = time_seconds(msg.clock)
        if not self._starts("clock", t):
            return
        self.buffer.tick(t, time.monotonic())
        self._maybe_act()

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response):
        self.policy.reset()
        self.buffer.reset()
        self._last_twist = (0.0, 0.0)
        self.covered_ns = None
        if self.config.mode == POLICY_LOCKSTEP:
            self.starting = {*self.buffer.streams, *(("clock",) if self.config.hold_timeout > 0
                                                     else ())}
        elif self.config.restart_clock:
            # Free running against a simulator that restarts its clock: samples of the last
            # episode still queued here must not be acted on (they are stamped later).
            self.starting = set(self.buffer.streams)
        self.armed = True
        response.success, response.message = True, f"reset after {self.actions} actions"
        return response

    # ------------------------------------------------------------------ acting
    def _maybe_act(self) -> None:
        if not self.armed:
            return
        stamp = self.buffer.ready(time.monotonic(), self.config.hold_timeout)
        if stamp is not None:
            self.buffer.acted = stamp
            if self.covered_ns is None or nanos(stamp) > self.covered_ns:
                self._act(stamp)

    def _act_free(self) -> None:
        if len(self.buffer.latest) == len(self.buffer.streams):
            self._act(max(s for s, _ in self.buffer.latest.values()))

    def _act(self, stamp: float) -> None:
        try:
            obs = self.assembler.assemble(self.buffer.values())
            if self.config.image_key:
                obs[C.OBS_IMAGE] = obs[self.config.image_key]
            lockstep = self.config.mode == POLICY_LOCKSTEP
            if lockstep and self.assembler.is_arm and self.config.max_chunk > 1:
                actions = act_chunk(self.policy, obs, self.config.max_chunk)
            else:
                actions = [self.policy.act(obs)]
            if len(actions) > 1:
                self._publish_chunk(stamp, actions)
                return
        except ClawgymError as err:
            self.get_logger().error(f"no action at t={stamp:.3f}: {err}")
            return
        action = actions[0]
        self.actions += 1
        if not self.assembler.is_arm:
            twist = base_command(action)
            if lockstep:
                if twist is None:
                    # The step waits for a command of this stamp; the env would hold the last.
                    twist = self._last_twist
                self._last_twist = twist
                msg = TwistStamped(twist=sensors.twist_msg([twist[0], 0, 0], [0, 0, twist[1]]))
                msg.header.stamp = time_msg(stamp)
                self._twist_stamped_pub.publish(msg)
            elif twist is not None:
                self._twist_pub.publish(sensors.twist_msg([twist[0], 0, 0], [0, 0, twist[1]]))
            return
        cmd = arm_command(action)
        if cmd.gripper is not None and not lockstep:
            self._grip_pub.publish(GripperCommand(mode=GripperCommand.MODE_WIDTH,
                                                  width=cmd.gripper))
        # Lockstep: the gripper rides in the trajectory as finger joints, so one message
        # carries the whole action and the evaluator waits for exactly it.
        self._traj_pub.publish(_trajectory_msg(
            stamp, lockstep and cmd.gripper is not None,
            [(nanos(t), pos, vel, cmd.gripper)
             for t, pos, vel in trajectory_points(cmd, self.config.control_dt)]))

    def _publish_chunk(self, stamp: float, actions: list) -> None:
        """Lockstep: ``actions`` for the steps from ``stamp`` on, as one trajectory."""
        commands = [arm_command(a) for a in actions]
        grips = [c.gripper for c in commands]
        fingers = grips[0] is not None
        if any((g is not None) != fingers for g in grips):
            raise ClawgymError("a chunk's actions must all have a gripper width or none")
        msg = _trajectory_msg(stamp, fingers, [
            (t_ns, pos, vel, grip) for (t_ns, pos, vel), grip in
            zip(chunk_points(commands, self.step_ns), grips, strict=True)])
        self.actions += len(actions)
        self.covered_ns = nanos(stamp) + (len(actions) - 1) * self.step_ns
        self._traj_pub.publish(msg)


def main(args: list[str] | None = None) -> int:
    """Console script ``policy_node`` (lockstep spins on the lean executor)."""
    return spin(PolicyNode, args, lean=lambda node: node.config.mode == POLICY_LOCKSTEP)


if __name__ == "__main__":
    sys.exit(main())
