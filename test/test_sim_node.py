"""sim_node in its own process, driven by an rclpy client in the test process (issue 3).

One lockstep node covers the acceptance list: joint states, image (+ camera_info), reset with a
new seed moving the objects, set-lighting darkening the next image, a step advancing /clock by
exactly one control step, trajectory and gripper commands, then (after a reset into the
outdoor scenario) IMU, GPS, odometry and cmd_vel. A second test runs the free clock.
"""

from __future__ import annotations

import signal
import time

import numpy as np
import pytest

from test.conftest import ROOT, read_logs, spin_until

pytestmark = pytest.mark.ros

MODULE = "clawgym_ros.nodes.sim_node"



class Client:
    """Subscriptions to every sim_node output plus its service clients, in one executor."""

    def __init__(self, context, namespace: str = "") -> None:
        from geometry_msgs.msg import PoseArray
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import CameraInfo, Image, Imu, JointState, NavSatFix

        from clawgym_interfaces.srv import (
            ResetSim,
            SetCameraPose,
            SetDynamics,
            SetLighting,
            StepSim,
        )
        from clawgym_ros import constants as C
        from clawgym_ros.ros_io.qos import CLOCK_QOS, SENSOR_QOS

        self.node = Node("sim_client", namespace=namespace, context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.msgs: dict[str, list] = {}
        for key, msg_type, topic, qos in [
            ("joints", JointState, C.TOPIC_JOINT_STATES_RAW, SENSOR_QOS),
            ("image", Image, C.TOPIC_IMAGE_RAW, SENSOR_QOS),
            ("info", CameraInfo, C.TOPIC_CAMERA_INFO, SENSOR_QOS),
            ("imu", Imu, C.TOPIC_IMU_RAW, SENSOR_QOS),
            ("gps", NavSatFix, C.TOPIC_GPS_RAW, SENSOR_QOS),
            ("odom", Odometry, C.TOPIC_ODOM, SENSOR_QOS),
            ("objects", PoseArray, C.TOPIC_OBJECT_POSES_RAW, SENSOR_QOS),
            ("clock", Clock, C.TOPIC_CLOCK, CLOCK_QOS),
        ]:
            self.msgs[key] = []
            self.node.create_subscription(msg_type, topic, self.msgs[key].append, qos)
        self.clients = {
            "reset": self.node.create_client(ResetSim, C.SRV_RESET),
            "step": self.node.create_client(StepSim, C.SRV_STEP),
            "lighting": self.node.create_client(SetLighting, C.SRV_SET_LIGHTING),
            "dynamics": self.node.create_client(SetDynamics, C.SRV_SET_DYNAMICS),
            "camera_pose": self.node.create_client(SetCameraPose, C.SRV_SET_CAMERA_POSE),
        }

    def wait(self, predicate, timeout: float = 10.0) -> bool:
        return spin_until(self.executor, predicate, timeout, period=0.02)

    def call(self, name: str, request, timeout: float = 10.0):
        client = self.clients[name]
        assert client.wait_for_service(timeout_sec=timeout), f"service {name} not available"
        future = client.call_async(request)
        assert self.wait(future.done, timeout), f"service {name} did not answer"
        return future.result()

    def after(self, key: str, seconds: float, timeout: float = 5.0):
        """The first message on ``key`` stamped at ``seconds`` of simulation time."""
        from clawgym_ros.ros_io.convert import time_msg

        stamp = time_msg(seconds)

        def find():
            for msg in self.msgs[key]:
                header = getattr(msg, "header", None)
                if header is not None and header.stamp == stamp:
                    return msg
            return None
        assert self.wait(lambda: find() is not None, timeout), (
            f"no {key} message at t={seconds}")
        return find()

    def clear(self) -> None:
        """Forget received messages (before a reset: stamps restart at zero)."""
        for msgs in self.msgs.values():
            msgs.clear()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


def _start(procs, name: str, *params: str, namespace: str = ""):
    procs.env["PYTHONPATH"] = str(ROOT)
    args = ["--autostart", "--ros-args", "-r", f"__node:={name}"]
    if namespace:
        args += ["-r", f"__ns:=/{namespace}"]
    for param in params:
        args += ["-p", param]
    return procs.start_module(name, MODULE, args)


def test_lockstep_sim_node_sensors_services_and_commands(procs, rclpy_context, tmp_path):
    from geometry_msgs.msg import Twist, Vector3
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from clawgym_interfaces.msg import GripperCommand
    from clawgym_interfaces.srv import ResetSim, SetCameraPose, SetDynamics, SetLighting, StepSim
    from clawgym_ros import constants as C
    from clawgym_ros.ros_io import sensors
    from clawgym_ros.ros_io.convert import time_msg, time_seconds
    from clawgym_ros.ros_io.qos import COMMAND_QOS

    _start(procs, "sim_lockstep", "clock_mode:=lockstep", "control_rate:=25.0",
           "image_width:=64", "image_height:=48", namespace="lock")
    client = Client(rclpy_context, namespace="lock")
    try:
        assert client.clients["reset"].wait_for_service(timeout_sec=30.0), read_logs(tmp_path)
        # The service exists from configure on; a first reset drains what activation published.
        assert client.call("reset", ResetSim.Request(seed=0)).success, read_logs(tmp_path)
        client.after("objects", 0.0)
        client.wait(lambda: False, 0.2)
        client.clear()
        reset = client.call("reset", ResetSim.Request(seed=1))
        assert reset.success, reset.message + read_logs(tmp_path)
        assert time_seconds(reset.stamp) == 0.0
        objects_seed1 = sensors.pose_array_values(client.after("objects", 0.0))
        assert objects_seed1.shape == (3, 7)

        # Joint states and an image arrive (published right after a reset in lockstep).
        joints = client.after("joints", 0.0)
        assert tuple(joints.name) == (*C.ARM_JOINTS, *C.GRIPPER_JOINTS)
        image = client.after("image", 0.0)
        assert (image.width, image.height, image.encoding) == (64, 48, "rgb8")
        assert image.header.frame_id == C.FRAME_WRIST_CAMERA
        info = client.after("info", 0.0)
        assert (info.width, info.height) == (64, 48) and info.k[0] > 0

        # Reset with another seed moves the objects.
        client.clear()
        assert client.call("reset", ResetSim.Request(seed=2)).success
        objects_seed2 = sensors.pose_array_values(client.after("objects", 0.0))
        assert np.abs(objects_seed2[:, :2] - objects_seed1[:, :2]).max() > 0.01
        client.clear()
        assert client.call("reset", ResetSim.Request(seed=1)).success
        np.testing.assert_array_equal(
            sensors.pose_array_values(client.after("objects", 0.0)), objects_seed1)

        # One step advances /clock by exactly one control step (25 Hz -> 0.04 s).
        client.msgs["clock"].clear()
        step = client.call("step", StepSim.Request(steps=1))
        assert step.success and step.stamp == time_msg(0.04)
        assert client.wait(lambda: any(c.clock == time_msg(0.04) for c in client.msgs["clock"]))
        assert all(c.clock in (time_msg(0.0), time_msg(0.04)) for c in client.msgs["clock"])
        step = client.call("step", StepSim.Request(steps=3))
        assert step.stamp == time_msg(0.16)

        # Set-lighting darkens the next image.
        bright = sensors.image_array(client.after("image", 0.16)).mean()
        dark_request = SetLighting.Request(diffuse_scale=0.1, ambient_scale=0.1,
                                           specular_scale=0.1, headlight_scale=0.1)
        assert client.call("lighting", dark_request).success
        client.call("step", StepSim.Request(steps=1))
        dark = sensors.image_array(client.after("image", 0.2)).mean()
        assert dark < 0.6 * bright, (bright, dark)
        bad = client.call("lighting", SetLighting.Request(diffuse_scale=-1.0))
        assert not bad.success and "diffuse_scale" in bad.message
        assert client.call("lighting", SetLighting.Request(restore_defaults=True)).success
        client.call("step", StepSim.Request(steps=1))
        restored = sensors.image_array(client.after("image", 0.24)).mean()
        assert abs(restored - bright) < 0.1 * bright
        dyn = client.call("dynamics", SetDynamics.Request(
            target="cube_red", mass_scale=2.0, friction_scale=1.0, damping_scale=1.0,
            actuator_gain_scale=1.0))
        assert dyn.success, dyn.message
        assert not client.call("dynamics", SetDynamics.Request(target="nope", mass_scale=1.0,
                               friction_scale=1.0, actuator_gain_scale=1.0)).success

        # A joint trajectory (executed against simulation time) and a gripper command.
        traj_pub = client.node.create_publisher(JointTrajectory, C.TOPIC_JOINT_TRAJECTORY,
                                                COMMAND_QOS)
        grip_pub = client.node.create_publisher(GripperCommand, C.TOPIC_GRIPPER_COMMAND,
                                                COMMAND_QOS)
        assert client.wait(lambda: traj_pub.get_subscription_count() > 0
                           and grip_pub.get_subscription_count() > 0)
        msg = JointTrajectory(joint_names=[C.ARM_JOINTS[0]])
        msg.points = [JointTrajectoryPoint(positions=[0.5], time_from_start=time_msg(0.4))]
        traj_pub.publish(msg)
        grip_pub.publish(GripperCommand(mode=GripperCommand.MODE_CLOSE))
        client.wait(lambda: False, 0.3)   # let both commands arrive before stepping
        client.call("step", StepSim.Request(steps=20))
        joints = client.after("joints", 0.24 + 20 * 0.04)
        assert joints.position[0] == pytest.approx(0.5, abs=0.02)
        assert joints.position[7] + joints.position[8] < 0.01    # fingers closed

        # Set-camera-pose turns the camera on its mount: the next image shows the scene
        # shifted (the arm is at rest); restoring the defaults brings the view back.
        t = 0.24 + 20 * 0.04
        before = sensors.image_array(client.after("image", t)).astype(int)
        turn = SetCameraPose.Request(rotation=Vector3(x=0.0, y=0.3, z=0.0))
        assert client.call("camera_pose", turn).success
        client.call("step", StepSim.Request(steps=1))
        turned = sensors.image_array(client.after("image", t + 0.04)).astype(int)
        bad = client.call("camera_pose", SetCameraPose.Request(camera_name="nope"))
        assert not bad.success and "camera_name" in bad.message
        assert client.call("camera_pose", SetCameraPose.Request(restore_defaults=True)).success
        client.call("step", StepSim.Request(steps=1))
        back = sensors.image_array(client.after("image", t + 0.08)).astype(int)
        assert np.abs(turned - before).mean() > 5 * max(np.abs(back - before).mean(), 0.5)

        # Outdoor scenario: IMU, GPS, odometry, front camera; cmd_vel drives the base.
        client.clear()
        reset = client.call("reset", ResetSim.Request(scenario="outdoor", seed=3))
        assert reset.success, reset.message
        imu = client.after("imu", 0.0)
        assert imu.header.frame_id == C.FRAME_IMU
        assert np.linalg.norm(sensors.imu_values(imu).orientation_wxyz) == pytest.approx(1.0)
        fix = client.after("gps", 0.0)
        assert fix.status.status >= 0
        assert fix.latitude == pytest.approx(47.3977, abs=1e-3)
        assert fix.longitude == pytest.approx(8.5456, abs=1e-3)
        assert client.after("image", 0.0).header.frame_id == C.FRAME_FRONT_CAMERA
        start = sensors.odom_values(client.after("odom", 0.0)).position
        vel_pub = client.node.create_publisher(Twist, C.TOPIC_CMD_VEL, COMMAND_QOS)
        assert client.wait(lambda: vel_pub.get_subscription_count() > 0)
        vel_pub.publish(Twist(linear=Vector3(x=0.5)))
        client.wait(lambda: False, 0.3)
        client.call("step", StepSim.Request(steps=25))
        odom = sensors.odom_values(client.after("odom", 1.0))
        assert odom.linear_velocity[0] == pytest.approx(0.5, abs=0.1)
        assert np.linalg.norm(odom.position - start) > 0.2
        assert client.after("gps", 1.0).latitude != fix.latitude
        # Resting on its wheels the accelerometer reads +g (at reset it may still drop).
        assert client.after("imu", 1.0).linear_acceleration.z == pytest.approx(9.81, abs=0.3)
        bad = client.call("reset", ResetSim.Request(scenario="moon"))
        assert not bad.success and "scenario" in bad.message
    finally:
        client.close()


def test_free_running_clock_follows_real_time_factor_and_exits_on_sigterm(
        procs, rclpy_context, tmp_path):
    from clawgym_interfaces.srv import StepSim
    from clawgym_ros.ros_io.convert import time_seconds

    proc = _start(procs, "sim_free", "real_time_factor:=2.0", "publish_camera:=false",
                  namespace="free")
    client = Client(rclpy_context, namespace="free")
    try:
        clocks = client.msgs["clock"]
        assert client.wait(lambda: len(clocks) > 5, 30.0), read_logs(tmp_path)
        t0, w0 = time_seconds(clocks[-1].clock), time.monotonic()
        client.wait(lambda: False, 1.5)
        rate = (time_seconds(clocks[-1].clock) - t0) / (time.monotonic() - w0)
        assert 1.2 < rate < 2.4, rate
        assert client.msgs["joints"] and not client.msgs["image"]
        refused = client.call("step", StepSim.Request(steps=1))
        assert not refused.success and "lockstep" in refused.message
    finally:
        client.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10.0) == 0, read_logs(tmp_path)


def test_lifecycle_transitions_in_process(rclpy_context):
    """Constructor creates nothing; configure builds, cleanup releases, configure again works."""
    from rclpy.lifecycle import TransitionCallbackReturn

    from clawgym_ros.nodes.sim_node import SimNode

    ok = TransitionCallbackReturn.SUCCESS
    node = SimNode("sim_lifecycle", context=rclpy_context, namespace="life")
    try:
        def own_topics():
            return {name for name, _ in node.get_publisher_names_and_types_by_node(
                "sim_lifecycle", "/life") if name.startswith("/life/") or name == "/clock"}

        assert node.session is None and own_topics() == {"/life/sim_lifecycle/transition_event"}
        assert node.trigger_configure() == ok and node.session is not None
        assert "/life/joint_states_raw" in own_topics() and "/clock" in own_topics()
        _assert_matches_sim_topics(node)
        assert node.get_parameter("clock_mode").value == "free"
        assert node.trigger_activate() == ok and node._timer is not None
        assert node.trigger_deactivate() == ok and node._timer is None
        assert node.trigger_cleanup() == ok and node.session is None
        assert own_topics() == {"/life/sim_lifecycle/transition_event"}
        assert node.trigger_configure() == ok and node.session is not None
        assert node.trigger_shutdown() == ok and node.session is None
    finally:
        node.release()
        node.destroy_node()


def _assert_matches_sim_topics(node) -> None:
    """The configured node's endpoints are exactly the SIM_TOPICS table (names and types)."""
    from clawgym_ros.sim.topics import PUBLISH, SIM_TOPICS

    def table(endpoints):
        out = {}
        for name, types in endpoints:
            short = name if name == "/clock" else name.removeprefix("/life/")
            if name == "/clock" or name.startswith("/life/"):
                out[short] = types[0]
        return out

    pubs = table(node.get_publisher_names_and_types_by_node("sim_lifecycle", "/life"))
    pubs.pop("sim_lifecycle/transition_event")
    subs = table(node.get_subscriber_names_and_types_by_node("sim_lifecycle", "/life"))
    expected_pubs = {t.name: t.msg_type for t in SIM_TOPICS.values() if t.direction == PUBLISH}
    expected_subs = {t.name: t.msg_type for t in SIM_TOPICS.values() if t.direction != PUBLISH}
    assert pubs == expected_pubs
    assert subs == expected_subs
