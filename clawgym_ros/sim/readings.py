"""Sensor readings as plain values, and their extraction from simulator observation vectors.

Pure (no rclpy): :mod:`clawgym_ros.ros_io.sensors` turns these into sensor_msgs / nav_msgs
messages and back, so sim_node, the perturbation nodes and the evaluator share one format.
Quaternions are ``(w, x, y, z)``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass
class ImuValues:
    """An IMU sample: orientation (w, x, y, z) or None, rates (rad/s), acceleration (m/s^2)."""

    orientation_wxyz: np.ndarray | None
    angular_velocity: np.ndarray
    linear_acceleration: np.ndarray


@dataclasses.dataclass
class GpsFix:
    """A GNSS fix: degrees, metres; ``valid`` False means no fix (values are then NaN)."""

    latitude: float
    longitude: float
    altitude: float
    valid: bool = True
    horizontal_std: float = 0.0
    vertical_std: float = 0.0


@dataclasses.dataclass
class OdomValues:
    """Odometry: pose of the child frame in the odom frame; twist in the child frame (REP 105)."""

    position: np.ndarray
    orientation_wxyz: np.ndarray
    linear_velocity: np.ndarray
    angular_velocity: np.ndarray


def imu_from_vector(imu: np.ndarray) -> ImuValues:
    """ImuValues from the core's (10,) ``imu`` observation: quat wxyz, gyro xyz, accel xyz."""
    imu = np.asarray(imu, dtype=float).reshape(10)
    return ImuValues(imu[0:4].copy(), imu[4:7].copy(), imu[7:10].copy())


def gps_from_vector(gps: np.ndarray, horizontal_std: float = 0.0,
                    vertical_std: float = 0.0) -> GpsFix:
    """GpsFix from the core's (3,) ``gps`` observation: latitude, longitude (deg), altitude."""
    lat, lon, alt = (float(v) for v in np.asarray(gps, dtype=float).reshape(3))
    valid = math.isfinite(lat) and math.isfinite(lon)
    return GpsFix(lat, lon, alt, valid, horizontal_std, vertical_std)


def yaw_quat(yaw: float) -> np.ndarray:
    """(w, x, y, z) of a rotation by ``yaw`` about +z."""
    return np.array([math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0)])


def odom_from_vector(odom: np.ndarray) -> OdomValues:
    """OdomValues from the core's planar (6,) ``odom``: x, y, yaw, vx, vy (world), wz.

    The world-frame velocity is rotated into the base frame, as nav_msgs/Odometry wants.
    """
    x, y, yaw, vx, vy, wz = (float(v) for v in np.asarray(odom, dtype=float).reshape(6))
    c, s = math.cos(yaw), math.sin(yaw)
    return OdomValues(
        position=np.array([x, y, 0.0]), orientation_wxyz=yaw_quat(yaw),
        linear_velocity=np.array([c * vx + s * vy, -s * vx + c * vy, 0.0]),
        angular_velocity=np.array([0.0, 0.0, wz]))
