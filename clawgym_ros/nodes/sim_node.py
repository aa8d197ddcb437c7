"""sim_node: the embedded MuJoCo simulator on the ROS graph (a lifecycle node).

Publishes (sensor QoS unless noted): ``joint_states_raw``, ``image_raw`` + ``camera_info``
(wrist camera on the tabletop, front camera outdoors), ``imu/data_raw``, ``gps/fix_raw``,
``odom`` (the robot's odometry as the env observes it: gps_nav's wheel odometry in a task
world) + ``ground_truth/odom`` (the base's true pose, world frame), ``object_poses_raw``
(ground truth, tabletop), ``task_state`` (task worlds; latched,
clawgym_interfaces/TaskState: :meth:`~clawgym_ros.sim.session.SimSession.task_state`),
``disturbance_state`` (task worlds with a disturbance configured; same QoS as task_state;
clawgym_interfaces/PerturbationState: the event and its recovery,
:mod:`clawgym_ros.ros_io.disturbance`) and ``/clock``
(clock QoS). Subscribes (reliable): ``joint_trajectory``, ``gripper_command``, ``cmd_vel``,
``cmd_vel_stamped`` (TwistStamped: the lockstep base command, stamped like a trajectory).
Serves ``sim/reset``, ``sim/step``, ``sim/set_lighting``, ``sim/set_dynamics``,
``sim/set_camera_pose`` (the cameras' mount offsets, until the next reset) and
``sim/set_disturbance`` (SetPerturbation: the disturbance of the episodes from the next reset
on, applied by the in-process wrapper around the task env, so an event fires at the same
control step as in-process).

Worlds: parameters ``task`` / ``template`` (empty task = the bare scene of ``scenario``) and,
per episode, ``sim/reset``'s ``scenario`` field: a scene (``tabletop``, ``outdoor``), a task
(``pick_place``: a training template drawn per reset) or ``<task>/<template>``. A task world
is the task's own env, stepped as the in-process evaluation steps it. An unknown task or
template fails configure (``--autostart``: exit 2 with one line) or the reset (its message
names it).

Clock modes: ``free`` (a timer advances the simulation at ``real_time_factor`` x wall time;
sensors at their configured rates) and ``lockstep`` (only ``sim/step`` advances it, by exactly
``steps`` control steps; every sensor is published after each step and after each reset).
All stamps are simulation time.

Exact lockstep (the evaluator's protocol, :mod:`clawgym_ros.evaluation.ros_mode`): a
``sim/step`` request with ``wait_command`` runs ``steps`` control steps, each one first
waiting (without blocking the executor: the callback is a coroutine) until a
``joint_trajectory`` commanding the step that starts at that time (``command_stamp`` for the
first) has arrived and been applied, so a command can never miss the step it was computed
for; every step publishes its sensors. A trajectory commands the step at its header stamp,
or, as a *chunk* (points exactly at ``control_dt, 2 control_dt, ..., n control_dt``:
:func:`~clawgym_ros.sim.trajectory.chunk_steps`), the ``n`` steps from its stamp on: an
open-loop policy's actions in one message, so those steps need no round trip.
A mobile base is commanded the same way by a ``cmd_vel_stamped`` TwistStamped (the step at
its stamp; ``cmd_vel`` carries no stamp, so a lockstep step cannot wait for it).
``return_state`` puts the ground truth after the run (the same ``joint_states_raw`` /
``object_poses_raw`` messages just published) into the response; ``no_step`` only waits (an
episode's last command).
Names and types are those of :data:`clawgym_ros.sim.topics.SIM_TOPICS` (the table
ros_gz_bridge also follows; a test checks).

The node is thin: messages become plain values (:mod:`clawgym_ros.ros_io.sensors`), the
:class:`~clawgym_ros.sim.session.SimSession` core does the rest.

Run: ``sim_node --autostart --ros-args -p scenario:=outdoor -p clock_mode:=lockstep``
(or ``-p task:=pick_place -p template:=cube``)
(``--autostart`` configures and activates without a lifecycle manager).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

import rclpy
from geometry_msgs.msg import PoseArray, Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.lifecycle import Node, State, TransitionCallbackReturn
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState, NavSatFix
from trajectory_msgs.msg import JointTrajectory

from clawgym_interfaces.msg import GripperCommand, PerturbationState, TaskState
from clawgym_interfaces.srv import (
    ResetSim,
    SetCameraPose,
    SetDynamics,
    SetLighting,
    SetPerturbation,
    StepSim,
)
from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError
from clawgym_ros.ros_io import sensors
from clawgym_ros.ros_io.convert import nanos, stamp_nanos, time_msg, time_seconds
from clawgym_ros.ros_io.disturbance import disturbance_config, disturbance_state_msg
from clawgym_ros.ros_io.lean_executor import executor_for
from clawgym_ros.ros_io.params import check_unknown_parameters, declare_config
from clawgym_ros.ros_io.qos import (
    CLOCK_QOS,
    COMMAND_QOS,
    LOCKSTEP_SENSOR_QOS,
    SENSOR_QOS,
    TASK_STATE_QOS,
)
from clawgym_ros.ros_io.sim_services import (
    camera_pose_settings,
    dynamics_settings,
    lighting_settings,
)
from clawgym_ros.ros_io.spin import StartError, autostart, declared, init_rclpy
from clawgym_ros.sim.pacing import CLOCK_LOCKSTEP, RealTimePacer
from clawgym_ros.sim.session import (
    SENSOR_CAMERA,
    SENSOR_DISTURBANCE,
    SENSOR_GPS,
    SENSOR_IMU,
    SENSOR_JOINTS,
    SENSOR_OBJECTS,
    SENSOR_ODOM,
    SENSOR_TASK,
    SimNodeConfig,
    SimSession,
)
from clawgym_ros.sim.trajectory import chunk_steps

#: Shortest wall period of the free-running timer (s): faster ticks only cost CPU.
MIN_TICK_S = 0.002
#: Default seconds a ``wait_command`` step waits for its command.
WAIT_COMMAND_TIMEOUT_S = 5.0
#: Period of the lockstep watchdog that fails ``wait_command`` steps past their timeout (s).
WATCHDOG_PERIOD_S = 0.1


class SimNode(Node):
    """Lifecycle wrapper of :class:`SimSession`; the constructor creates nothing."""

    def __init__(self, node_name: str = C.NODE_SIM, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config: SimNodeConfig | None = None
        self.session: SimSession | None = None
        self._pubs: dict[str, object] = {}
        self._entities: list[object] = []
        self._timer = None
        self._pacer: RealTimePacer | None = None
        self._active = False
        # Lockstep: the control steps the newest joint_trajectory since the last reset commands
        # (one, or a policy's chunk) as (first start stamp, last start stamp, step), all ns, and
        # the step waiting for a command: (stamp ns, future, monotonic deadline).
        self._commanded: tuple[int, int, int] | None = None
        self._waiter: tuple[int, Future, float] | None = None
        self._last: dict[str, object] = {}

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self.config = declare_config(self, SimNodeConfig)
            self.session = SimSession(self.config)
        except ClawgymError as err:
            self.transition_error = str(err)
            self.get_logger().error(f"configure failed: {err}")
            return TransitionCallbackReturn.FAILURE
        lockstep = self.config.clock_mode == CLOCK_LOCKSTEP
        # Lockstep: reliable, so no stamp's sample is ever lost (best-effort readers match too);
        # no QoS event handlers (each is one more waitable the executor polls every callback).
        qos = LOCKSTEP_SENSOR_QOS if lockstep else SENSOR_QOS
        events = {"event_callbacks": PublisherEventCallbacks(use_default_callbacks=False)} \
            if lockstep else {}
        cfg = self.config
        # Only the sensors the config enables (in lockstep every callback polls every entity).
        wanted = {
            SENSOR_JOINTS: (JointState, C.TOPIC_JOINT_STATES_RAW, cfg.publish_joint_states),
            SENSOR_CAMERA: (Image, C.TOPIC_IMAGE_RAW, cfg.publish_camera),
            "camera_info": (CameraInfo, C.TOPIC_CAMERA_INFO, cfg.publish_camera),
            SENSOR_IMU: (Imu, C.TOPIC_IMU_RAW, cfg.publish_imu),
            SENSOR_GPS: (NavSatFix, C.TOPIC_GPS_RAW, cfg.publish_gps),
            SENSOR_ODOM: (Odometry, C.TOPIC_ODOM, cfg.publish_odom),
            # Published with odom: the ground truth the evaluator scores.
            "odom_truth": (Odometry, C.TOPIC_ODOM_TRUTH, cfg.publish_odom),
            SENSOR_OBJECTS: (PoseArray, C.TOPIC_OBJECT_POSES_RAW, cfg.publish_object_poses),
            # Always: a reset may switch a bare scene into a task world.
            SENSOR_TASK: (TaskState, C.TOPIC_TASK_STATE, True),
            SENSOR_DISTURBANCE: (PerturbationState, C.TOPIC_DISTURBANCE_STATE, True),
            "clock": (Clock, C.TOPIC_CLOCK, cfg.publish_clock),
        }
        special = {"clock": CLOCK_QOS, SENSOR_TASK: TASK_STATE_QOS,
                   SENSOR_DISTURBANCE: TASK_STATE_QOS}
        self._pubs = {
            key: self.create_lifecycle_publisher(msg_type, topic, special.get(key, qos), **events)
            for key, (msg_type, topic, enabled) in wanted.items() if enabled}
        def sub_events() -> SubscriptionEventCallbacks:
            return SubscriptionEventCallbacks(use_default_callbacks=not lockstep)

        # Commands and the watchdog get their own group: a sim/step awaiting a command keeps
        # the default group busy, and the command must still be taken.
        self._command_group = MutuallyExclusiveCallbackGroup()
        self._entities = [
            self.create_subscription(
                JointTrajectory, C.TOPIC_JOINT_TRAJECTORY, self._on_trajectory, COMMAND_QOS,
                callback_group=self._command_group, event_callbacks=sub_events()),
            self.create_subscription(GripperCommand, C.TOPIC_GRIPPER_COMMAND,
                                     self._on_gripper, COMMAND_QOS, event_callbacks=sub_events()),
            self.create_subscription(Twist, C.TOPIC_CMD_VEL, self._on_cmd_vel, COMMAND_QOS,
                                     event_callbacks=sub_events()),
            self.create_subscription(
                TwistStamped, C.TOPIC_CMD_VEL_STAMPED, self._on_cmd_vel_stamped, COMMAND_QOS,
                callback_group=self._command_group, event_callbacks=sub_events()),
            self.create_service(ResetSim, C.SRV_RESET, self._on_reset),
            self.create_service(StepSim, C.SRV_STEP, self._on_step),
            self.create_service(SetLighting, C.SRV_SET_LIGHTING, self._on_set_lighting),
            self.create_service(SetDynamics, C.SRV_SET_DYNAMICS, self._on_set_dynamics),
            self.create_service(SetCameraPose, C.SRV_SET_CAMERA_POSE,
                                self._on_set_camera_pose),
            self.create_service(SetPerturbation, C.SRV_SET_DISTURBANCE,
                                self._on_set_disturbance),
        ]
        self.get_logger().info(
            f"configured: world={self.session.world.name} clock={self.config.clock_mode} "
            f"control_dt={self.session.control_dt:g}s camera={self.session.camera[0]}")
        return super().on_configure(state)

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        result = super().on_activate(state)
        self._active = True
        cfg, session = self.config, self.session
        assert cfg is not None and session is not None
        self._publish(session.due(-1, session.steps, every_sensor=True))
        if cfg.clock_mode != CLOCK_LOCKSTEP:
            self._pacer = RealTimePacer(session.control_dt, cfg.real_time_factor,
                                        cfg.max_steps_per_tick)
            self._pacer.start(time.monotonic(), session.steps)
            period = max(session.control_dt / cfg.real_time_factor, MIN_TICK_S)
            self._timer = self.create_timer(period, self._on_tick)
        else:
            self._timer = self.create_timer(WATCHDOG_PERIOD_S, self._on_watchdog,
                                            callback_group=self._command_group)
        return result

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._active = False
        self._stop_timer()
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self.release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self.release()
        return super().on_shutdown(state)

    def release(self) -> None:
        """Destroy timers, endpoints and the simulator (idempotent)."""
        self._active = False
        self._stop_timer()
        for entity in self._entities:
            destroy = (self.destroy_subscription if hasattr(entity, "topic_name")
                       else self.destroy_service)
            destroy(entity)
        self._entities = []
        for publisher in self._pubs.values():
            self.destroy_lifecycle_publisher(publisher)
        self._pubs = {}
        if self.session is not None:
            self.session.close()
            self.session = None

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        self._release_waiter(False)

    def _release_waiter(self, arrived: bool) -> None:
        if self._waiter is not None:
            _, future, _ = self._waiter
            self._waiter = None
            if not future.done():
                future.set_result(arrived)

    def _on_watchdog(self) -> None:
        if self._waiter is not None and time.monotonic() > self._waiter[2]:
            self._release_waiter(False)

    # ------------------------------------------------------------------ stepping
    def _on_tick(self) -> None:
        session, pacer = self.session, self._pacer
        if session is None or pacer is None or not self._active:
            return
        steps = pacer.due(time.monotonic(), session.steps)
        if steps:
            self._publish(session.due(*session.step(steps)))

    def _publish(self, sensors_due: Sequence[str]) -> None:
        """Publish the due sensors at the current simulation time, then /clock."""
        session, cfg = self.session, self.config
        assert session is not None and cfg is not None
        stamp = time_msg(session.time)
        self._last = {}
        for sensor in sensors_due:
            self._publish_sensor(sensor, stamp)
        if "clock" in self._pubs:
            self._pubs["clock"].publish(Clock(clock=stamp))

    def _publish_sensor(self, sensor: str, stamp) -> None:
        session = self.session
        assert session is not None
        pub = self._pubs[sensor]
        if sensor == SENSOR_JOINTS:
            j = session.joints()
            msg = sensors.joint_state_msg(j.names, j.position, j.velocity, j.effort, stamp)
            pub.publish(msg)
            self._last[sensor] = msg
        elif sensor == SENSOR_CAMERA:
            camera, frame = session.camera
            image = session.image()
            pub.publish(sensors.image_msg(image, stamp, frame))
            self._pubs["camera_info"].publish(sensors.camera_info_msg(
                image.shape[1], image.shape[0], k=session.camera_matrix(), stamp=stamp,
                frame_id=frame))
        elif sensor == SENSOR_IMU:
            pub.publish(sensors.imu_msg(session.imu(), stamp, C.FRAME_IMU))
        elif sensor == SENSOR_GPS:
            pub.publish(sensors.navsat_fix_msg(session.gps(), stamp, C.FRAME_GPS))
        elif sensor == SENSOR_ODOM:
            # The robot's odometry as the env observes it (gps_nav: wheel odometry), then the
            # ground truth in the world frame.
            pub.publish(sensors.odometry_msg(session.odom(), stamp, C.FRAME_ODOM, C.FRAME_BASE))
            self._pubs["odom_truth"].publish(sensors.odometry_msg(
                session.odom_truth(), stamp, C.FRAME_WORLD, C.FRAME_BASE))
        elif sensor == SENSOR_OBJECTS:
            _, poses = session.object_poses()
            msg = sensors.pose_array_msg(poses, stamp, C.FRAME_WORLD)
            pub.publish(msg)
            self._last[sensor] = msg
        elif sensor == SENSOR_TASK:
            state = session.task_state()
            if state is not None:
                pub.publish(sensors.task_state_msg(state, stamp_nanos(stamp)))
        elif sensor == SENSOR_DISTURBANCE:
            current = session.disturbance_state()
            if current is not None:
                pub.publish(disturbance_state_msg(**current, stamp_ns=stamp_nanos(stamp)))

    # ------------------------------------------------------------------ commands
    def _command(self, what: str, apply: Callable[[SimSession], None]) -> None:
        if self.session is None or not self._active:
            self.get_logger().warning(f"{what} ignored: node is not active")
            return
        try:
            apply(self.session)
        except ClawgymError as err:
            self.get_logger().error(f"{what} rejected: {err}")

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        def apply(session: SimSession) -> None:
            session.set_trajectory(sensors.joint_trajectory_from_msg(
                msg, session.time, session.config.trajectory_interpolation))
        self._command("joint_trajectory", apply)
        # Delivered (applied, or rejected and logged): a step waiting for it may go on.
        start = stamp_nanos(msg.header.stamp)
        step = nanos(self.session.control_dt) if self.session is not None else 0
        steps = chunk_steps([stamp_nanos(p.time_from_start) for p in msg.points], step)
        self._commanded = (start, start + (steps - 1) * step, step)
        if self._waiter is not None and self._is_commanded(self._waiter[0]):
            self._release_waiter(True)

    def _is_commanded(self, stamp_ns: int) -> bool:
        """A received trajectory commands the control step starting at ``stamp_ns``."""
        if self._commanded is None:
            return False
        first, last, step = self._commanded
        return first <= stamp_ns <= last and (step == 0 or (stamp_ns - first) % step == 0)

    def _on_gripper(self, msg: GripperCommand) -> None:
        def apply(session: SimSession) -> None:
            target = sensors.gripper_target(msg, 0.0, session.gripper_max_width)
            session.set_gripper(target.width)
        self._command("gripper_command", apply)

    def _on_cmd_vel(self, msg: Twist) -> None:
        v, w = sensors.planar_twist(msg)
        self._command("cmd_vel", lambda session: session.set_base_twist(v, w))

    def _on_cmd_vel_stamped(self, msg: TwistStamped) -> None:
        """The base command for the control step starting at its stamp (lockstep: a step
        waiting for that stamp goes on)."""
        v, w = sensors.planar_twist(msg.twist)
        self._command("cmd_vel_stamped", lambda session: session.set_base_twist(v, w))
        start = stamp_nanos(msg.header.stamp)
        step = nanos(self.session.control_dt) if self.session is not None else 0
        self._commanded = (start, start, step)
        if self._waiter is not None and self._is_commanded(self._waiter[0]):
            self._release_waiter(True)

    # ------------------------------------------------------------------ services
    def _serve(self, response, what: str, apply: Callable[[SimSession], None]):
        session = self.session
        if session is None or not self._active:
            response.success, response.message = False, "sim_node is not active"
            return response
        try:
            apply(session)
        except ClawgymError as err:
            response.success, response.message = False, str(err)
            self.get_logger().error(f"{what} failed: {err}")
            return response
        response.success, response.message = True, "ok"
        if hasattr(response, "stamp"):
            response.stamp = time_msg(session.time)
        return response

    def _on_reset(self, request: ResetSim.Request, response: ResetSim.Response):
        def apply(session: SimSession) -> None:
            session.reset(int(request.seed), request.scenario or None)
            self._commanded = None
            self._release_waiter(False)
            if self._pacer is not None:
                self._pacer.start(time.monotonic(), session.steps)
            self._publish(session.due(-1, 0, every_sensor=True))
        return self._serve(response, "reset", apply)

    async def _on_step(self, request: StepSim.Request, response: StepSim.Response):
        cfg = self.config
        if cfg is not None and cfg.clock_mode != CLOCK_LOCKSTEP:
            response.success = False
            response.message = "sim/step needs clock_mode lockstep (this one runs free)"
            return response
        if request.wait_command and self.session is not None and self._active:
            refused = self._refuse_wait(request)
            if refused:
                response.success, response.message = False, refused
                return response
            timeout = request.wait_timeout or WAIT_COMMAND_TIMEOUT_S
            # A run of ``steps`` control steps, each waiting for the command stamped with the
            # time it starts at (the policy acts on every published observation): the
            # evaluator asks once per run and reads the states from the raw topics.
            steps = 0 if request.no_step else max(int(request.steps), 1)
            want = stamp_nanos(request.command_stamp)
            for done in range(max(steps, 1)):
                if done:
                    want = nanos(self.session.time)
                if not self._is_commanded(want):
                    future = Future()
                    self._waiter = (want, future, time.monotonic() + timeout)
                    if not await future:
                        response.success = False
                        command = ("joint_trajectory" if self.session.is_arm
                                   else "cmd_vel_stamped")
                        response.message = (f"no {command} stamped "
                                            f"{want * 1e-9:.3f} within {timeout:g} s")
                        return response
                if not steps:
                    break
                if self.session is None or not self._active:
                    break
                self.session.step(1)
                self._publish(self.session.due(-1, self.session.steps, every_sensor=True))

            def fill(session: SimSession) -> None:
                if request.return_state:
                    self._fill_state(response)
            return self._serve(response, "step", fill)

        def apply(session: SimSession) -> None:
            if not request.no_step:
                session.step(max(int(request.steps), 1))
                self._publish(session.due(-1, session.steps, every_sensor=True))
            if request.return_state:
                self._fill_state(response)
        return self._serve(response, "step", apply)

    def _refuse_wait(self, request: StepSim.Request) -> str:
        """Why a ``wait_command`` step cannot be served ("" when it can)."""
        session = self.session
        assert session is not None
        if self._waiter is not None:
            return "another step is already waiting for a command"
        if stamp_nanos(request.command_stamp) != nanos(session.time):
            return (f"command_stamp {time_seconds(request.command_stamp):.3f} is not the "
                    f"simulation time {session.time:.3f}")
        return ""

    def _fill_state(self, response: StepSim.Response) -> None:
        """The ground truth at the current time (the messages just published, else new)."""
        session = self.session
        assert session is not None
        stamp = time_msg(session.time)
        joints = self._last.get(SENSOR_JOINTS)
        if joints is None or joints.header.stamp != stamp:
            j = session.joints()
            joints = sensors.joint_state_msg(j.names, j.position, j.velocity, j.effort, stamp)
        response.joint_state = joints
        if session.is_arm:
            objects = self._last.get(SENSOR_OBJECTS)
            if objects is None or objects.header.stamp != stamp:
                objects = sensors.pose_array_msg(session.object_poses()[1], stamp,
                                                 C.FRAME_WORLD)
            response.object_poses = objects

    def _on_set_lighting(self, request: SetLighting.Request, response: SetLighting.Response):
        return self._serve(response, "set_lighting",
                           lambda session: session.set_lighting(lighting_settings(request)))

    def _on_set_dynamics(self, request: SetDynamics.Request, response: SetDynamics.Response):
        return self._serve(response, "set_dynamics",
                           lambda session: session.set_dynamics(dynamics_settings(request)))

    def _on_set_camera_pose(self, request: SetCameraPose.Request,
                            response: SetCameraPose.Response):
        return self._serve(response, "set_camera_pose",
                           lambda session: session.set_camera_pose(
                               camera_pose_settings(request)))

    def _on_set_disturbance(self, request: SetPerturbation.Request,
                            response: SetPerturbation.Response):
        return self._serve(response, "set_disturbance",
                           lambda session: session.set_disturbance(disturbance_config(request)))


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sim_node", description=__doc__.split("\n")[0])
    parser.add_argument("--autostart", action="store_true",
                        help="configure and activate at start (no lifecycle manager needed)")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Run sim_node until SIGINT/SIGTERM; ``--autostart`` configures and activates it."""
    argv = list(sys.argv if argv is None else argv)
    if init_rclpy(argv):
        return 2
    args = _parse(rclpy.utilities.remove_ros_args(argv)[1:])
    node = SimNode()
    executor = None
    code = 0
    try:
        if args.autostart:
            autostart(node)
        if declared(node):
            check_unknown_parameters(node)
        # Lockstep creates no QoS event handlers, so the lean executor can run it (the hot
        # loop of the evaluation); free running and lifecycle-managed nodes keep rclpy's.
        lean = node.config is not None and node.config.clock_mode == CLOCK_LOCKSTEP
        if lean:
            executor = executor_for(node)
        else:
            executor = SingleThreadedExecutor()
            executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except _rclpy.RCLError:
        # SIGINT/SIGTERM shut the context down while the executor built its wait set.
        if rclpy.ok():
            raise
    except (StartError, ClawgymError) as err:
        print(f"{node.get_name()}: error: {err}", file=sys.stderr)
        code = 2
    finally:
        node.release()
        if executor is not None:
            executor.shutdown()
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
