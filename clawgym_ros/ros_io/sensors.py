"""Conversions between sensor/command messages and the plain values the cores use.

Used by sim_node, the perturbation nodes and the evaluator, so every function takes and returns
plain numbers and numpy arrays (no core objects). Conventions:

- Quaternions in the cores are ``(w, x, y, z)`` (MuJoCo order); messages use ``x, y, z, w``.
- Times are seconds (float); stamps are built with :func:`clawgym_ros.ros_io.convert.time_msg`.
- Covariances are given as standard deviations per axis (diagonal) or full 3x3 matrices; an
  unknown quantity is marked the ROS way (``covariance[0] = -1``).
"""

from __future__ import annotations

import array
import dataclasses
import json
import math
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, PoseArray, Quaternion, Twist, Vector3
from nav_msgs.msg import Odometry
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState, NavSatFix, NavSatStatus
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg

from clawgym_interfaces.msg import GripperCommand, TaskState
from clawgym_ros.errors import ConfigError
from clawgym_ros.ros_io.convert import time_msg, time_seconds
from clawgym_ros.sim.readings import GpsFix, ImuValues, OdomValues
from clawgym_ros.sim.trajectory import JointTrajectory

Stamp = float | Time

#: numpy dtype and channel count per supported image encoding.
ENCODINGS: dict[str, tuple[np.dtype, int]] = {
    "rgb8": (np.dtype(np.uint8), 3),
    "bgr8": (np.dtype(np.uint8), 3),
    "rgba8": (np.dtype(np.uint8), 4),
    "mono8": (np.dtype(np.uint8), 1),
    "mono16": (np.dtype(np.uint16), 1),
    "16UC1": (np.dtype(np.uint16), 1),
    "32FC1": (np.dtype(np.float32), 1),
}


def _stamp(stamp: Stamp) -> Time:
    return stamp if isinstance(stamp, Time) else time_msg(float(stamp))


def _quat_msg(quat_wxyz: Sequence[float]) -> Quaternion:
    w, x, y, z = (float(v) for v in quat_wxyz)
    return Quaternion(x=x, y=y, z=z, w=w)


def _quat_wxyz(msg: Quaternion) -> np.ndarray:
    return np.array([msg.w, msg.x, msg.y, msg.z])


def _vec3(values: Sequence[float]) -> Vector3:
    x, y, z = (float(v) for v in values)
    return Vector3(x=x, y=y, z=z)


def _xyz(msg: Vector3 | Point) -> np.ndarray:
    return np.array([msg.x, msg.y, msg.z])


def covariance3(std: float | Sequence[float] | np.ndarray | None) -> np.ndarray:
    """Row-major 3x3 covariance (9 values) from a std (scalar or per axis) or a 3x3 matrix.

    ``None`` means unknown: ``[-1, 0, ..., 0]`` as sensor_msgs documents.
    """
    if std is None:
        out = np.zeros(9)
        out[0] = -1.0
        return out
    arr = np.asarray(std, dtype=float)
    if arr.shape == (3, 3):
        return arr.reshape(9).copy()
    arr = np.broadcast_to(arr, (3,))
    return np.diag(arr * arr).reshape(9)


def covariance6(std: float | Sequence[float] | None) -> np.ndarray:
    """Row-major 6x6 covariance (36 values) from a std (scalar or six values); zeros if None."""
    if std is None:
        return np.zeros(36)
    arr = np.broadcast_to(np.asarray(std, dtype=float), (6,))
    return np.diag(arr * arr).reshape(36)


# --- Core values -> messages -----------------------------------------------------------------

def clock_msg(seconds: float) -> Clock:
    """rosgraph_msgs/Clock at ``seconds`` of simulation time."""
    return Clock(clock=time_msg(seconds))


def joint_state_msg(
    names: Sequence[str], positions: Sequence[float], velocities: Sequence[float] | None = None,
    efforts: Sequence[float] | None = None, stamp: Stamp = 0.0, frame_id: str = "",
) -> JointState:
    """sensor_msgs/JointState; velocities/efforts are left empty when not given."""
    msg = JointState()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = frame_id
    msg.name = list(names)
    msg.position = _doubles(positions)
    if len(msg.position) != len(msg.name):
        raise ConfigError("joint_state.position", len(msg.position), f"{len(msg.name)} values")
    if velocities is not None:
        msg.velocity = _doubles(velocities)
    if efforts is not None:
        msg.effort = _doubles(efforts)
    return msg


def _doubles(values: Sequence[float]) -> array.array:
    """A float64[] field's own type, filled from the array's bytes (no per-element checks:
    half the cost of assigning a list, the same values)."""
    return array.array("d", np.ascontiguousarray(values, dtype=np.float64).ravel().tobytes())


def joint_state_values(msg: JointState) -> dict[str, np.ndarray | list[str]]:
    """``{"name", "position", "velocity", "effort"}`` of a JointState (arrays; may be empty)."""
    return {
        "name": list(msg.name),
        "position": np.asarray(msg.position, dtype=float),
        "velocity": np.asarray(msg.velocity, dtype=float),
        "effort": np.asarray(msg.effort, dtype=float),
    }


def image_msg(
    array: np.ndarray, stamp: Stamp = 0.0, frame_id: str = "", encoding: str | None = None,
) -> Image:
    """sensor_msgs/Image from an (H, W[, C]) array; ``data`` is assigned from bytes.

    Args:
        array: uint8 (H, W, 3) -> rgb8, (H, W, 4) -> rgba8, (H, W) -> mono8;
            float32 (H, W) -> 32FC1 (depth in metres); uint16 (H, W) -> 16UC1.
        encoding: override the inferred encoding (must match dtype and channels).
    """
    arr = np.asarray(array)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3:
        raise ConfigError("image.shape", arr.shape, "(H, W) or (H, W, C)")
    if encoding is None:
        encoding = _infer_encoding(arr)
    if encoding not in ENCODINGS:
        raise ConfigError("image.encoding", encoding, "one of " + ", ".join(ENCODINGS))
    dtype, channels = ENCODINGS[encoding]
    if arr.shape[2] != channels:
        raise ConfigError("image.channels", arr.shape[2], f"{channels} for {encoding}")
    arr = np.ascontiguousarray(arr, dtype=dtype.newbyteorder("<"))
    msg = Image()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(arr.shape[0]), int(arr.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = int(arr.shape[1] * channels * dtype.itemsize)
    msg.data = arr.tobytes()
    return msg


def _infer_encoding(arr: np.ndarray) -> str:
    channels = arr.shape[2]
    if arr.dtype == np.uint8:
        return {1: "mono8", 3: "rgb8", 4: "rgba8"}.get(channels, "?")
    if arr.dtype == np.uint16 and channels == 1:
        return "16UC1"
    if np.issubdtype(arr.dtype, np.floating) and channels == 1:
        return "32FC1"
    raise ConfigError("image.dtype", f"{arr.dtype} x{channels}",
                      "uint8 with 1/3/4 channels, uint16 or float with 1 channel")


def image_array(msg: Image) -> np.ndarray:
    """(H, W, C) array view of an Image (copy-free where possible); honours ``step``."""
    if msg.encoding not in ENCODINGS:
        raise ConfigError("image.encoding", msg.encoding, "one of " + ", ".join(ENCODINGS))
    dtype, channels = ENCODINGS[msg.encoding]
    dtype = dtype.newbyteorder(">" if msg.is_bigendian else "<")
    raw = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
    row = msg.width * channels * dtype.itemsize
    return raw[:, :row].copy().view(dtype).reshape(msg.height, msg.width, channels)


def camera_intrinsics(width: int, height: int, fovy_deg: float) -> np.ndarray:
    """3x3 pinhole matrix K of a camera with vertical field of view ``fovy_deg`` (MuJoCo's).

    Pixels are square, so fx = fy = (height / 2) / tan(fovy / 2); the principal point is the
    image centre in the ROS convention (pixel centres at integers): ((W - 1) / 2, (H - 1) / 2),
    as the MuJoCo backend's ``camera_intrinsics`` computes it.
    """
    if not 0.0 < fovy_deg < 180.0:
        raise ConfigError("camera.fovy", fovy_deg, "(0, 180) degrees")
    f = 0.5 * height / math.tan(math.radians(fovy_deg) / 2.0)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0],
                     [0.0, 0.0, 1.0]])


def camera_info_msg(
    width: int, height: int, k: np.ndarray | None = None, fovy_deg: float | None = None,
    stamp: Stamp = 0.0, frame_id: str = "",
) -> CameraInfo:
    """sensor_msgs/CameraInfo of an ideal (undistorted) pinhole camera.

    Args:
        width, height: resolution in pixels.
        k: the 3x3 intrinsic matrix; or give ``fovy_deg`` to compute it.
        fovy_deg: vertical field of view in degrees (used when ``k`` is None).
    """
    if k is None:
        if fovy_deg is None:
            raise ConfigError("camera_info", None, "an intrinsic matrix k or fovy_deg")
        k = camera_intrinsics(width, height, fovy_deg)
    k = np.asarray(k, dtype=float).reshape(3, 3)
    msg = CameraInfo()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = frame_id
    msg.width, msg.height = int(width), int(height)
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = k.reshape(9)
    msg.r = np.eye(3).reshape(9)
    msg.p = np.hstack([k, np.zeros((3, 1))]).reshape(12)
    return msg


def imu_msg(
    values: ImuValues, stamp: Stamp = 0.0, frame_id: str = "",
    orientation_std: float | Sequence[float] | None = None,
    angular_velocity_std: float | Sequence[float] | None = 0.0,
    linear_acceleration_std: float | Sequence[float] | None = 0.0,
) -> Imu:
    """sensor_msgs/Imu; an orientation of None is marked unknown (covariance[0] = -1)."""
    msg = Imu()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = frame_id
    if values.orientation_wxyz is None:
        msg.orientation_covariance = covariance3(None)
    else:
        msg.orientation = _quat_msg(values.orientation_wxyz)
        msg.orientation_covariance = covariance3(
            0.0 if orientation_std is None else orientation_std)
    msg.angular_velocity = _vec3(values.angular_velocity)
    msg.angular_velocity_covariance = covariance3(angular_velocity_std)
    msg.linear_acceleration = _vec3(values.linear_acceleration)
    msg.linear_acceleration_covariance = covariance3(linear_acceleration_std)
    return msg


def imu_values(msg: Imu) -> ImuValues:
    """The values of an Imu message (orientation None when marked unknown)."""
    unknown = msg.orientation_covariance[0] == -1.0
    return ImuValues(
        orientation_wxyz=None if unknown else _quat_wxyz(msg.orientation),
        angular_velocity=_xyz(msg.angular_velocity),
        linear_acceleration=_xyz(msg.linear_acceleration),
    )


def navsat_fix_msg(fix: GpsFix, stamp: Stamp = 0.0, frame_id: str = "") -> NavSatFix:
    """sensor_msgs/NavSatFix with status and a diagonal covariance from the fix's stds.

    A fix that is not ``valid`` gets STATUS_NO_FIX, NaN coordinates and an unknown covariance.
    """
    msg = NavSatFix()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = frame_id
    msg.status.service = NavSatStatus.SERVICE_GPS
    if not fix.valid or not all(math.isfinite(v) for v in (fix.latitude, fix.longitude)):
        msg.status.status = NavSatStatus.STATUS_NO_FIX
        msg.latitude = msg.longitude = msg.altitude = math.nan
        msg.position_covariance_type = NavSatFix.COVARIANCE_TYPE_UNKNOWN
        return msg
    msg.status.status = NavSatStatus.STATUS_FIX
    msg.latitude, msg.longitude = float(fix.latitude), float(fix.longitude)
    msg.altitude = float(fix.altitude)
    h, v = float(fix.horizontal_std), float(fix.vertical_std)
    msg.position_covariance = covariance3([h, h, v])
    msg.position_covariance_type = NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN
    return msg


def gps_fix(msg: NavSatFix) -> GpsFix:
    """The values of a NavSatFix (``valid`` False for STATUS_NO_FIX)."""
    valid = msg.status.status >= NavSatStatus.STATUS_FIX and math.isfinite(msg.latitude)
    known = msg.position_covariance_type != NavSatFix.COVARIANCE_TYPE_UNKNOWN
    cov = np.asarray(msg.position_covariance, dtype=float)
    return GpsFix(
        latitude=msg.latitude, longitude=msg.longitude, altitude=msg.altitude, valid=valid,
        horizontal_std=math.sqrt(max(cov[0], 0.0)) if known else 0.0,
        vertical_std=math.sqrt(max(cov[8], 0.0)) if known else 0.0,
    )


def odometry_msg(
    values: OdomValues, stamp: Stamp = 0.0, frame_id: str = "odom",
    child_frame_id: str = "base_link", pose_std: float | Sequence[float] | None = None,
    twist_std: float | Sequence[float] | None = None,
) -> Odometry:
    """nav_msgs/Odometry from pose and body-frame twist."""
    msg = Odometry()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = frame_id
    msg.child_frame_id = child_frame_id
    x, y, z = (float(v) for v in values.position)
    msg.pose.pose.position = Point(x=x, y=y, z=z)
    msg.pose.pose.orientation = _quat_msg(values.orientation_wxyz)
    msg.pose.covariance = covariance6(pose_std)
    msg.twist.twist.linear = _vec3(values.linear_velocity)
    msg.twist.twist.angular = _vec3(values.angular_velocity)
    msg.twist.covariance = covariance6(twist_std)
    return msg


def odom_values(msg: Odometry) -> OdomValues:
    """The values of an Odometry message."""
    return OdomValues(
        position=_xyz(msg.pose.pose.position),
        orientation_wxyz=_quat_wxyz(msg.pose.pose.orientation),
        linear_velocity=_xyz(msg.twist.twist.linear),
        angular_velocity=_xyz(msg.twist.twist.angular),
    )


def pose_msg(position: Sequence[float], quat_wxyz: Sequence[float]) -> Pose:
    """geometry_msgs/Pose from a position and a (w, x, y, z) quaternion."""
    x, y, z = (float(v) for v in position)
    return Pose(position=Point(x=x, y=y, z=z), orientation=_quat_msg(quat_wxyz))


def pose_array_msg(poses: np.ndarray, stamp: Stamp = 0.0, frame_id: str = "world") -> PoseArray:
    """geometry_msgs/PoseArray from an (N, 7) array of ``x y z qw qx qy qz`` rows."""
    msg = PoseArray()
    msg.header.stamp = _stamp(stamp)
    msg.header.frame_id = frame_id
    out = []
    # Plain floats set field by field (a lockstep sim_node builds one per control step).
    for x, y, z, qw, qx, qy, qz in np.asarray(poses, dtype=float).reshape(-1, 7).tolist():
        pose = Pose()
        p, q = pose.position, pose.orientation
        p.x, p.y, p.z = x, y, z
        q.x, q.y, q.z, q.w = qx, qy, qz, qw
        out.append(pose)
    msg.poses = out
    return msg


def pose_array_values(msg: PoseArray) -> np.ndarray:
    """(N, 7) array of ``x y z qw qx qy qz`` rows of a PoseArray."""
    rows = []
    for pose in msg.poses:
        p, q = pose.position, pose.orientation
        rows.append((p.x, p.y, p.z, q.w, q.x, q.y, q.z))
    return np.array(rows, dtype=float).reshape(-1, 7)


# --- Command messages -> core values ---------------------------------------------------------

def joint_trajectory_from_msg(
    msg: JointTrajectoryMsg, now: float, interpolation: str = "cubic",
) -> JointTrajectory:
    """A core :class:`JointTrajectory` from a trajectory_msgs/JointTrajectory.

    The header stamp is the start time; a zero stamp means "start now" (as ros2_control reads
    it). Velocities are used when every point has one per joint (otherwise estimated).

    Args:
        msg: the trajectory message.
        now: current (simulation) time in seconds.
        interpolation: ``"cubic"`` or ``"linear"``.

    Raises:
        ConfigError: empty or inconsistent trajectories.
    """
    stamp = time_seconds(msg.header.stamp)
    start = now if stamp == 0.0 else stamp
    points = list(msg.points)
    if not points:
        raise ConfigError("trajectory.points", 0, "at least one point")
    times = [time_seconds(p.time_from_start) for p in points]
    positions = [list(p.positions) for p in points]
    joints = len(msg.joint_names)
    velocities = None
    if all(len(p.velocities) == joints for p in points):
        velocities = [list(p.velocities) for p in points]
    if any(len(row) != joints for row in positions):
        raise ConfigError("trajectory.positions", [len(r) for r in positions],
                          f"{joints} positions per point (one per joint name)")
    return JointTrajectory(
        joint_names=tuple(msg.joint_names), times=np.asarray(times),
        positions=np.asarray(positions, dtype=float).reshape(len(points), joints),
        velocities=None if velocities is None else np.asarray(velocities, dtype=float),
        start_time=start, interpolation=interpolation)


@dataclasses.dataclass(frozen=True)
class GripperTarget:
    """A gripper command as values: target opening in metres and effort (0 = the limit)."""

    width: float
    max_effort: float = 0.0


def gripper_target(msg: GripperCommand, min_width: float, max_width: float) -> GripperTarget:
    """Target opening of a GripperCommand, clipped to ``[min_width, max_width]``.

    Raises:
        ConfigError: an unknown mode or a non-finite width.
    """
    if msg.mode == GripperCommand.MODE_OPEN:
        width = max_width
    elif msg.mode == GripperCommand.MODE_CLOSE:
        width = min_width
    elif msg.mode == GripperCommand.MODE_WIDTH:
        if not math.isfinite(msg.width):
            raise ConfigError("gripper_command.width", msg.width, "a finite width in metres")
        width = min(max(float(msg.width), min_width), max_width)
    else:
        raise ConfigError("gripper_command.mode", msg.mode, "MODE_WIDTH, MODE_OPEN, MODE_CLOSE")
    return GripperTarget(width=width, max_effort=max(float(msg.max_effort), 0.0))


def twist_values(msg: Twist) -> np.ndarray:
    """``[vx, vy, vz, wx, wy, wz]`` of a geometry_msgs/Twist."""
    return np.array([*_xyz(msg.linear), *_xyz(msg.angular)])


def planar_twist(msg: Twist) -> np.ndarray:
    """``[v, omega]`` (forward speed, yaw rate) for a differential-drive base."""
    return np.array([msg.linear.x, msg.angular.z])


def twist_msg(linear: Sequence[float], angular: Sequence[float]) -> Twist:
    """geometry_msgs/Twist from linear and angular 3-vectors."""
    return Twist(linear=_vec3(linear), angular=_vec3(angular))


# ---------------------------------------------------------------------------------------------
# Task state (sim_node in a task world): clawgym_interfaces/TaskState
# ---------------------------------------------------------------------------------------------
def task_state_msg(state: dict, stamp_ns: int) -> TaskState:
    """The ``task_state`` message (clawgym_interfaces/TaskState) of
    :meth:`SimSession.task_state` at ``stamp_ns``. The goal (a per-task structure) rides as
    JSON; the observation keys as names, sizes and float64 values (exact)."""
    observation = state.get("observation", {})
    arrays = [np.asarray(v, dtype=float).reshape(-1) for v in observation.values()]
    msg = TaskState(
        task=state["task"], template_name=state["template"], split=state["split"],
        time=float(state["time"]), stages=list(state["stages"]),
        stages_reached=list(state["stages_reached"]), success=bool(state["success"]),
        contact_force=float(state["contact_force"]), collision=bool(state["collision"]),
        goal_json=json.dumps(state["goal"], separators=(",", ":")),
        observation_keys=list(observation), observation_sizes=[a.size for a in arrays])
    msg.header.stamp = Time(sec=int(stamp_ns) // 1_000_000_000,
                            nanosec=int(stamp_ns) % 1_000_000_000)
    if arrays:
        msg.observation_values = array.array("d", np.concatenate(arrays).tobytes())
    return msg


def task_state_values(msg: TaskState) -> tuple[Time, dict]:
    """(stamp, state dict) of a ``task_state`` message: the keys of
    :meth:`SimSession.task_state` (``observation`` values as lists).

    Raises:
        ConfigError: observation sizes that do not add up to its values, or a goal that is
            not JSON.
    """
    sizes = list(msg.observation_sizes)
    values = np.asarray(msg.observation_values, dtype=float)
    if len(sizes) != len(msg.observation_keys) or sum(sizes) != values.size:
        raise ConfigError("task_state.observation_sizes", sizes,
                          f"one size per key ({len(msg.observation_keys)}) adding up to the "
                          f"{values.size} values")
    try:
        goal = json.loads(msg.goal_json) if msg.goal_json else {}
    except ValueError:
        raise ConfigError("task_state.goal_json", msg.goal_json[:60], "JSON") from None
    bounds = np.cumsum([0, *sizes])
    observation = {key: values[bounds[i]:bounds[i + 1]].tolist()
                   for i, key in enumerate(msg.observation_keys)}
    return msg.header.stamp, {
        "task": msg.task, "time": msg.time, "template": msg.template_name, "split": msg.split,
        "stages": list(msg.stages), "stages_reached": list(msg.stages_reached),
        "success": msg.success, "contact_force": msg.contact_force,
        "collision": msg.collision, "goal": goal, "observation": observation}
