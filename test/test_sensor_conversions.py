"""Conversions between sensor/command messages and core values (no ROS graph needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("rclpy")

from builtin_interfaces.msg import Duration  # noqa: E402
from geometry_msgs.msg import Twist, Vector3  # noqa: E402
from sensor_msgs.msg import NavSatFix, NavSatStatus  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from clawgym_interfaces.msg import GripperCommand  # noqa: E402
from clawgym_ros.errors import ConfigError  # noqa: E402
from clawgym_ros.ros_io import sensors as S  # noqa: E402
from clawgym_ros.ros_io.convert import time_msg, time_seconds  # noqa: E402
from clawgym_ros.sim.readings import (  # noqa: E402
    GpsFix,
    ImuValues,
    OdomValues,
    gps_from_vector,
    imu_from_vector,
    odom_from_vector,
)


def test_clock_and_joint_state():
    assert time_seconds(S.clock_msg(1.25).clock) == 1.25
    msg = S.joint_state_msg(["a", "b"], np.array([0.1, 0.2]), [1.0, 2.0], stamp=3.5)
    assert msg.name == ["a", "b"] and list(msg.position) == [0.1, 0.2]
    assert list(msg.velocity) == [1.0, 2.0] and len(msg.effort) == 0
    assert time_seconds(msg.header.stamp) == 3.5
    values = S.joint_state_values(msg)
    np.testing.assert_allclose(values["velocity"], [1.0, 2.0])
    with pytest.raises(ConfigError):
        S.joint_state_msg(["a"], [0.0, 1.0])


@pytest.mark.parametrize("array, encoding", [
    (np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3), "rgb8"),
    (np.arange(20, dtype=np.uint8).reshape(4, 5), "mono8"),
    (np.linspace(0.1, 9.0, 20, dtype=np.float32).reshape(4, 5), "32FC1"),
    (np.arange(20, dtype=np.uint16).reshape(4, 5) * 1000, "16UC1"),
])
def test_image_round_trip(array, encoding):
    msg = S.image_msg(array, stamp=1.0, frame_id="cam")
    assert msg.encoding == encoding and (msg.height, msg.width) == (4, 5)
    assert msg.step * msg.height == len(msg.data)
    back = S.image_array(msg)
    np.testing.assert_array_equal(back.reshape(array.shape), array)


def test_image_rejects_mismatched_encoding():
    with pytest.raises(ConfigError):
        S.image_msg(np.zeros((2, 2, 3), np.uint8), encoding="mono8")
    with pytest.raises(ConfigError):
        S.image_msg(np.zeros((2, 2, 2), np.uint8))


def test_camera_info_from_fovy():
    msg = S.camera_info_msg(640, 480, fovy_deg=90.0, frame_id="cam")
    k = np.asarray(msg.k).reshape(3, 3)
    assert k[0, 0] == pytest.approx(240.0) and k[1, 1] == pytest.approx(240.0)
    assert (k[0, 2], k[1, 2]) == (319.5, 239.5)
    p = np.asarray(msg.p).reshape(3, 4)
    np.testing.assert_allclose(p[:, :3], k)
    assert msg.distortion_model == "plumb_bob" and list(msg.d) == [0.0] * 5
    # The top edge of the image (half a pixel above row 0) is fovy/2 above the optical axis.
    assert math.degrees(math.atan((k[1, 2] + 0.5) / k[1, 1])) * 2 == pytest.approx(90.0)
    np.testing.assert_allclose(np.asarray(S.camera_info_msg(640, 480, k=k).k), msg.k)
    with pytest.raises(ConfigError):
        S.camera_info_msg(10, 10, fovy_deg=0.0)
    with pytest.raises(ConfigError):
        S.camera_info_msg(10, 10)


def test_imu_round_trip_and_unknown_orientation():
    values = ImuValues(np.array([0.9, 0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0]),
                         np.array([0.0, 0.0, 9.81]))
    msg = S.imu_msg(values, stamp=2.0, frame_id="imu_link", angular_velocity_std=0.1)
    assert (msg.orientation.w, msg.orientation.x) == (0.9, 0.1)
    assert msg.angular_velocity_covariance[0] == pytest.approx(0.01)
    back = S.imu_values(msg)
    np.testing.assert_allclose(back.orientation_wxyz, values.orientation_wxyz)
    np.testing.assert_allclose(back.linear_acceleration, [0.0, 0.0, 9.81])
    blind = S.imu_msg(ImuValues(None, np.zeros(3), np.zeros(3)))
    assert blind.orientation_covariance[0] == -1.0
    assert S.imu_values(blind).orientation_wxyz is None


def test_navsat_fix_status_and_covariance():
    msg = S.navsat_fix_msg(GpsFix(47.37, 8.54, 408.0, horizontal_std=2.0, vertical_std=3.0))
    assert msg.status.status == NavSatStatus.STATUS_FIX
    assert msg.position_covariance_type == NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN
    assert msg.position_covariance[0] == 4.0 and msg.position_covariance[8] == 9.0
    back = S.gps_fix(msg)
    assert back.valid and back.horizontal_std == 2.0 and back.latitude == 47.37
    lost = S.navsat_fix_msg(GpsFix(47.0, 8.0, 0.0, valid=False))
    assert lost.status.status == NavSatStatus.STATUS_NO_FIX and math.isnan(lost.latitude)
    assert lost.position_covariance_type == NavSatFix.COVARIANCE_TYPE_UNKNOWN
    assert not S.gps_fix(lost).valid


def test_odometry_and_pose_array():
    values = OdomValues(np.array([1.0, 2.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0]),
                          np.array([0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.2]))
    msg = S.odometry_msg(values, stamp=1.0, pose_std=0.1)
    assert msg.header.frame_id == "odom" and msg.child_frame_id == "base_link"
    assert msg.pose.pose.orientation.z == 1.0 and msg.pose.covariance[7] == pytest.approx(0.01)
    back = S.odom_values(msg)
    np.testing.assert_allclose(back.angular_velocity, [0.0, 0.0, 0.2])
    poses = np.array([[0.1, 0.2, 0.3, 1.0, 0.0, 0.0, 0.0], [1, 2, 3, 0, 1, 0, 0]], float)
    np.testing.assert_allclose(S.pose_array_values(S.pose_array_msg(poses)), poses)


def test_joint_trajectory_from_message():
    msg = JointTrajectory(joint_names=["a", "b"])
    msg.points = [
        JointTrajectoryPoint(positions=[0.0, 1.0], time_from_start=Duration(sec=1)),
        JointTrajectoryPoint(positions=[1.0, 2.0], time_from_start=Duration(sec=2)),
    ]
    traj = S.joint_trajectory_from_msg(msg, now=5.0, interpolation="linear")
    assert traj.start_time == 5.0 and traj.velocities is None
    np.testing.assert_allclose(traj.sample(6.5)[0], [0.5, 1.5])
    msg.header.stamp = time_msg(7.0)
    assert S.joint_trajectory_from_msg(msg, now=5.0).start_time == 7.0
    msg.points[0].velocities = [0.0, 0.0]
    msg.points[1].velocities = [0.0, 0.0]
    assert S.joint_trajectory_from_msg(msg, now=5.0).velocities is not None
    msg.points[1].positions = [1.0]
    with pytest.raises(ConfigError):
        S.joint_trajectory_from_msg(msg, now=0.0)
    with pytest.raises(ConfigError):
        S.joint_trajectory_from_msg(JointTrajectory(joint_names=["a"]), now=0.0)


def test_gripper_and_twist_commands():
    lo, hi = 0.0, 0.08
    assert S.gripper_target(GripperCommand(mode=GripperCommand.MODE_OPEN), lo, hi).width == hi
    assert S.gripper_target(GripperCommand(mode=GripperCommand.MODE_CLOSE), lo, hi).width == lo
    cmd = GripperCommand(mode=GripperCommand.MODE_WIDTH, width=0.5, max_effort=20.0)
    target = S.gripper_target(cmd, lo, hi)
    assert target.width == hi and target.max_effort == 20.0
    with pytest.raises(ConfigError):
        S.gripper_target(GripperCommand(mode=7), lo, hi)
    twist = Twist(linear=Vector3(x=0.4), angular=Vector3(z=-0.3))
    np.testing.assert_allclose(S.planar_twist(twist), [0.4, -0.3])
    values = S.twist_values(S.twist_msg([1, 2, 3], [4, 5, 6]))
    np.testing.assert_allclose(values, [1, 2, 3, 4, 5, 6])


def test_readings_from_core_observation_vectors():
    imu = imu_from_vector(np.arange(10.0))
    np.testing.assert_allclose(imu.orientation_wxyz, [0, 1, 2, 3])
    np.testing.assert_allclose(imu.linear_acceleration, [7, 8, 9])
    fix = gps_from_vector(np.array([47.4, 8.5, 488.0]), horizontal_std=1.5)
    assert fix.valid and fix.horizontal_std == 1.5
    assert not gps_from_vector(np.array([np.nan, np.nan, np.nan])).valid
    # Heading +90 deg, moving along world +y at 1 m/s = forward at 1 m/s in the base frame.
    odom = odom_from_vector(np.array([1.0, 2.0, math.pi / 2, 0.0, 1.0, 0.3]))
    np.testing.assert_allclose(odom.linear_velocity, [1.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(odom.orientation_wxyz, [math.sqrt(0.5), 0, 0, math.sqrt(0.5)])
    msg = S.odometry_msg(odom)
    assert msg.pose.pose.orientation.z == pytest.approx(math.sqrt(0.5))


@pytest.mark.parametrize("task, template", [("pick_place", "cube"), ("peg_insert", "round_peg"),
                                            ("gps_nav", "square_route")])
def test_task_state_message_round_trips_exactly(task, template):
    """clawgym_interfaces/TaskState carries SimSession.task_state exactly (float64 observation
    values, the goal as JSON, the stamp in the header); bad sizes are one line."""
    from clawgym_ros.sim.session import SimNodeConfig, SimSession

    session = SimSession(SimNodeConfig(task=task, template=template, clock_mode="lockstep"))
    try:
        session.step(3)
        state = session.task_state()
    finally:
        session.close()
    msg = S.task_state_msg(state, 1_234_567_890_123)
    assert type(msg).__name__ == "TaskState" and msg.template_name == template
    stamp, back = S.task_state_values(msg)
    assert (stamp.sec, stamp.nanosec) == (1234, 567_890_123)
    assert back == state
    if state["observation"]:
        msg.observation_sizes = [s + 1 for s in msg.observation_sizes]
        with pytest.raises(ConfigError, match="observation_sizes"):
            S.task_state_values(msg)
