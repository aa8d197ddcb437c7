"""sensor_noise_node: interposes on raw sensor topics and republishes them with noise.

Streams (topic names are parameters and remappable; an empty name disables a stream):
``joint_states_raw -> joint_states`` (JointState), ``imu/data_raw -> imu/data`` (Imu),
``image_raw -> image`` (Image), ``object_poses_raw -> object_poses`` (PoseArray), all with
sensor-data QoS. Joint noise goes on the observation's joints only (arm or wheels:
:func:`~clawgym_ros.perturbations.sensor_noise.encoder_joints`); finger joints pass as they
came, as the wrapper leaves the gripper width true. The noise comes from
:class:`clawgym_ros.perturbations.SensorNoise` driven by the header stamps, so the same seed
and input stream give the same output as the Gymnasium wrapper. Dropped samples are not
republished, except an episode's first sample of a stream, which then passes unperturbed (as in
the wrapper, which has no earlier value to hold; and a lockstep policy needs every input at
t = 0); stale samples repeat the last values with the new stamp. Serves ``set_perturbation``;
publishes ``perturbation_state`` (latched).
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
    encoder_joints,
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
        self.host = PerturbationHost(self, SensorNoise, on_configure=self._on_episode)
        topics = declare_config(self, SensorNoiseTopics)
        self._lockstep = topics.reliable
        # Lockstep: streams still waiting for the new episode's t = 0 sample (see _old), and
        # per stream the last values delivered this episode (held for dropped samples).
        self._waiting: set[str] = set()
        self._held: dict[str, object] = {}
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

    def _on_episode(self, core: SensorNoise) -> None:
        if self._lockstep:
            self._waiting = set(self._pubs)
            self._held = {}

    def _old(self, kind: str, msg) -> bool:
        """Lockstep (``reliable``): True for a sample of the last episode still queued when
        the next one started. A lockstep simulator runs ahead of its consumers and restarts
        time at 0 on every reset, so until a stream's t = 0 sample every later stamp is old;
        perturbing it would draw from the new episode's random streams, which the in-process
        wrapper never does (and policy_node ignores such samples anyway)."""
        if kind in self._waiting:
            if msg.header.stamp.sec or msg.header.stamp.nanosec:
                return True
            self._waiting.discard(kind)
        return False

    def _first(self, stream: str, kind: str, msg, hold=None) -> None:
        """A dropped sample: republished unperturbed if nothing of ``stream`` was delivered
        in this episode yet (the wrapper then keeps the raw value), else not at all; in
        lockstep (``reliable``) ``hold(msg)`` republishes the last delivered values with this
        stamp instead, exactly what the wrapper shows the policy (so policy_node needs no
        wall-clock hold, which could act before a late sample arrived)."""
        counts = self.core.counts(stream)
        if counts["samples"] == counts["dropped"]:
            self._pubs[kind].publish(msg)
        elif self._lockstep and hold is not None and kind in self._held:
            self._pubs[kind].publish(hold(msg))

    def _on_joints(self, msg: JointState) -> None:
        if self._old("joint_states", msg):
            return
        values = sensors.joint_state_values(msg)
        # Only the observation's joints (arm or wheels): fingers pass unperturbed, as the
        # wrapper leaves the gripper width true (same draws from the same seed).
        idx = encoder_joints(values["name"])
        position = np.asarray(values["position"], dtype=float)
        velocity = np.asarray(values["velocity"], dtype=float)
        has_velocity = len(velocity) == len(position)
        out = self.core.joint_state(position[idx], velocity[idx] if has_velocity else None,
                                    time_seconds(msg.header.stamp))
        def write(held: dict) -> JointState:
            position[idx] = held[FIELD_POSITION]
            msg.position = position.tolist()
            if FIELD_VELOCITY in held and has_velocity:
                velocity[idx] = held[FIELD_VELOCITY]
                msg.velocity = velocity.tolist()
            return msg

        if out is None:
            self._first(STREAM_JOINTS, "joint_states", msg,
                        lambda m: write(self._held["joint_states"]))
        else:
            self._held["joint_states"] = out
            self._pubs["joint_states"].publish(write(out))
        self.host.publish()

    def _on_imu(self, msg: Imu) -> None:
        if self._old("imu", msg):
            return
        values = sensors.imu_values(msg)
        out = self.core.imu(values.orientation_wxyz, values.angular_velocity,
                            values.linear_acceleration, time_seconds(msg.header.stamp))
        if out is None:
            self._first(STREAM_IMU, "imu", msg, lambda m: self._write_imu(m, self._held["imu"]))
        else:
            self._held["imu"] = out
            self._pubs["imu"].publish(self._write_imu(msg, out))
        self.host.publish()

    @staticmethod
    def _write_imu(msg: Imu, out: dict) -> Imu:
        a, g = out[FIELD_ACCEL], out[FIELD_GYRO]
        msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z = (
            float(v) for v in a)
        msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = (
            float(v) for v in g)
        if FIELD_ORIENTATION in out:
            w, x, y, z = (float(v) for v in out[FIELD_ORIENTATION])
            o = msg.orientation
            o.w, o.x, o.y, o.z = w, x, y, z
        return msg

    def _on_image(self, msg: Image) -> None:
        if self._old("image", msg):
            return
        pixels = sensors.image_array(msg)
        if pixels.dtype != np.uint8:
            # Depth and 16-bit images pass unchanged: pixel noise is defined on 8-bit levels.
            self._pubs["image"].publish(msg)
            return
        out = self.core.image(pixels, time_seconds(msg.header.stamp))
        def write(pixels: np.ndarray) -> Image:
            return sensors.image_msg(pixels, msg.header.stamp, msg.header.frame_id,
                                     msg.encoding)

        if out is None:
            self._first(STREAM_IMAGE, "image", msg, lambda m: write(self._held["image"]))
        else:
            self._held["image"] = out
            self._pubs["image"].publish(write(out))
        self.host.publish()

    def _on_poses(self, msg: PoseArray) -> None:
        if self._old("object_poses", msg):
            return
        out = self.core.poses(sensors.pose_array_values(msg), time_seconds(msg.header.stamp))
        def write(poses: np.ndarray) -> PoseArray:
            return sensors.pose_array_msg(poses, msg.header.stamp, msg.header.frame_id)

        if out is None:
            self._first(STREAM_POSES, "object_poses", msg,
                        lambda m: write(self._held["object_poses"]))
        else:
            self._held["object_poses"] = out
            self._pubs["object_poses"].publish(write(out))
        self.host.publish()


def main(args: list[str] | None = None) -> int:
    """Console script ``sensor_noise_node``."""
    return spin(SensorNoiseNode, args)


if __name__ == "__main__":
    sys.exit(main())
