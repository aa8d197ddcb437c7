"""sensor_noise_node: interposes on raw sensor topics and republishes them with noise.

Streams (topic names are parameters and remappable; an empty name disables a stream):
``joint_states_raw -> joint_states`` (JointState), ``imu/data_raw -> imu/data`` (Imu),
``image_raw -> image`` (Image), ``object_poses_raw -> object_poses`` (PoseArray), all with
sensor-data QoS. The noise comes from :class:`clawgym_ros.perturbations.SensorNoise` driven by
the header stamps, so the same seed and input stream give the same output as the Gymnasium
wrapper. Dropped samples are not republished, except an episode's first sample of a stream,
which then passes unperturbed (as in the wrapper, which has no earlier value to hold; and a
lockstep policy needs every input at t = 0); stale samples repeat the last values with the new
stamp. Serves ``set_perturbation``; publishes ``perturbation_state`` (latched).
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
from geometry_msgs.msg import PoseArray
from rclpy.node import Node
from sensor_msgs.msg import Image, Imu, JointState

from clawgym_ros import constants as C
from clawgym_ros.perturbations.sensor_noise import (
    FIELD_ACCEL,
    FIELD_GYRO,
    FIELD_ORIENTATION,
    FIELD_POSITION,
    FIELD_VELOCITY,
    STREAM_IMAGE,
    STREAM_IMU,
    STREAM_JOINTS,
    STREAM_POSES,
    SensorNoise,
)
from clawgym_ros.ros_io import sensors
from clawgym_ros.ros_io.convert import time_seconds
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.perturbation import PerturbationHost
from clawgym_ros.ros_io.qos import interposer_qos, reliable_field
from clawgym_ros.ros_io.spin import spin


@dataclasses.dataclass(frozen=True)
class SensorNoiseTopics:
    """Input and output topics of the interposer (empty = stream off)."""

    joint_states_in: str = dataclasses.field(
        default=C.TOPIC_JOINT_STATES_RAW, metadata={"help": "raw JointState input"})
    joint_states_out: str = dataclasses.field(
        default=C.TOPIC_JOINT_STATES, metadata={"help": "perturbed JointState output"})
    imu_in: str = dataclasses.field(default=C.TOPIC_IMU_RAW, metadata={"help": "raw Imu input"})
    imu_out: str = dataclasses.field(default=C.TOPIC_IMU, metadata={"help": "perturbed Imu"})
    image_in: str = dataclasses.field(
        default=C.TOPIC_IMAGE_RAW, metadata={"help": "raw Image input"})
    image_out: str = dataclasses.field(default=C.TOPIC_IMAGE, metadata={"help": "noisy Image"})
    object_poses_in: str = dataclasses.field(
        default=C.TOPIC_OBJECT_POSES_RAW, metadata={"help": "raw PoseArray of object poses"})
    object_poses_out: str = dataclasses.field(
        default=C.TOPIC_OBJECT_POSES, metadata={"help": "perturbed PoseArray"})
    reliable: bool = reliable_field()


class SensorNoiseNode(Node):
    """Thin node: message -> arrays -> :class:`SensorNoise` -> message."""

    def __init__(self) -> None:
        super().__init__(C.NODE_SENSOR_NOISE)
        self.host = PerturbationHost(self, SensorNoise)
        topics = declare_config(self, SensorNoiseTopics)
        self._pubs = {}
        qos = interposer_qos(topics.reliable)
        for kind, msg_type, callback in (
            ("joint_states", JointState, self._on_joints),
            ("imu", Imu, self._on_imu),
            ("image", Image, self._on_image),
            ("object_poses", PoseArray, self._on_poses),
        ):
            src, dst = getattr(topics, f"{kind}_in"), getattr(topics, f"{kind}_out")
            if src and dst:
                self._pubs[kind] = self.create_publisher(msg_type, dst, qos)
                self.create_subscription(msg_type, src, callback, qos)

    @property
    def core(self) -> SensorNoise:
        return self.host.core

    def _first(self, stream: str, kind: str, msg) -> None:
        """A dropped sample: republished unperturbed if nothing of ``stream`` was delivered
        in this episode yet (the wrapper then keeps the raw value), else not at all."""
        counts = self.core.counts(stream)
        if counts["samples"] == counts["dropped"]:
            self._pubs[kind].publish(msg)

    def _on_joints(self, msg: JointState) -> None:
        values = sensors.joint_state_values(msg)
        out = self.core.joint_state(values["position"], values["velocity"],
                                    time_seconds(msg.header.stamp))
        if out is None:
            self._first(STREAM_JOINTS, "joint_states", msg)
        else:
            msg.position = out[FIELD_POSITION].tolist()
            if FIELD_VELOCITY in out:
                msg.velocity = out[FIELD_VELOCITY].tolist()
            self._pubs["joint_states"].publish(msg)
        self.host.publish()

    def _on_imu(self, msg: Imu) -> None:
        values = sensors.imu_values(msg)
        out = self.core.imu(values.orientation_wxyz, values.angular_velocity,
                            values.linear_acceleration, time_seconds(msg.header.stamp))
        if out is None:
            self._first(STREAM_IMU, "imu", msg)
        else:
            a, g = out[FIELD_ACCEL], out[FIELD_GYRO]
            msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z = (
                float(v) for v in a)
            msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = (
                float(v) for v in g)
            if FIELD_ORIENTATION in out:
                w, x, y, z = (float(v) for v in out[FIELD_ORIENTATION])
                o = msg.orientation
                o.w, o.x, o.y, o.z = w, x, y, z
            self._pubs["imu"].publish(msg)
        self.host.publish()

    def _on_image(self, msg: Image) -> None:
        pixels = sensors.image_array(msg)
        if pixels.dtype != np.uint8:
            # Depth and 16-bit images pass unchanged: pixel noise is defined on 8-bit levels.
            self._pubs["image"].publish(msg)
            return
        out = self.core.image(pixels, time_seconds(msg.header.stamp))
        if out is None:
            self._first(STREAM_IMAGE, "image", msg)
        else:
            self._pubs["image"].publish(sensors.image_msg(
                out, msg.header.stamp, msg.header.frame_id, msg.encoding))
        self.host.publish()

    def _on_poses(self, msg: PoseArray) -> None:
        out = self.core.poses(sensors.pose_array_values(msg), time_seconds(msg.header.stamp))
        if out is None:
            self._first(STREAM_POSES, "object_poses", msg)
        else:
            self._pubs["object_poses"].publish(
                sensors.pose_array_msg(out, msg.header.stamp, msg.header.frame_id))
        self.host.publish()


def main(args: list[str] | None = None) -> int:
    """Console script ``sensor_noise_node``."""
    return spin(SensorNoiseNode, args)


if __name__ == "__main__":
    sys.exit(main())
