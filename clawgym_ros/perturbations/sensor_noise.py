"""Sensor noise: gaussian noise, constant bias, bias random walk, quantization, dropped and
stale samples, for joint encoders, IMU, object pose estimates and camera pixels.

Every sensor is a *stream* (``joint_states``, ``imu``, ``object_poses``, ``image``) with its own
generator and state; a sample is a mapping of field name -> numpy array plus a timestamp in
seconds (message stamp or simulation time, never wall time). For each sample, in this order:

1. two uniforms decide drop (sample not delivered: ``None``) and stale (the previous delivered
   values are delivered again);
2. each field's bias random walk advances by ``N(0, walk * sqrt(dt))`` with ``dt`` from the
   stamps;
3. unless dropped or stale: ``out = in + bias + walk_bias + N(0, std)``, then quantized to
   ``round(out / q) * q``. Quaternion fields are rotated by a random rotation vector of
   standard deviation ``std`` (rad) instead; pixels are clipped to [0, 255] and rounded.

All parameters are given at intensity 1 and scale linearly with the episode intensity
(units in the field help texts and docs/notes/perturbations.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_range
from clawgym_ros.perturbations.base import (
    Perturbation,
    PerturbationConfig,
    _help,
    canonical_stamp,
)

STREAM_JOINTS = "joint_states"
STREAM_IMU = "imu"
STREAM_POSES = "object_poses"
STREAM_IMAGE = "image"
STREAMS = (STREAM_JOINTS, STREAM_IMU, STREAM_POSES, STREAM_IMAGE)

#: Field names of each stream (what :meth:`SensorNoise.apply` accepts).
FIELD_POSITION = "position"
FIELD_VELOCITY = "velocity"
FIELD_ACCEL = "linear_acceleration"
FIELD_GYRO = "angular_velocity"
FIELD_ORIENTATION = "orientation"
FIELD_POSE_POSITION = "position"
FIELD_POSE_ORIENTATION = "orientation"
FIELD_PIXELS = "pixels"


def _f(default: float, text: str) -> float:
    return dataclasses.field(default=default, metadata=_help(text))


@dataclasses.dataclass(frozen=True)
class SensorNoiseConfig(PerturbationConfig):
    """Sensor noise parameters, each at intensity 1 (scaled by the episode intensity)."""

    family: str = dataclasses.field(
        default=C.FAMILY_SENSOR_NOISE, metadata=_help("sensor_noise, or 'none' to disable"))
    joint_pos_std: float = _f(0.01, "joint position noise std, rad")
    joint_pos_bias: float = _f(0.0, "joint position constant bias, rad")
    joint_pos_bias_walk: float = _f(0.005, "joint position bias random walk, rad/sqrt(s)")
    joint_pos_quantization: float = _f(0.001, "joint encoder resolution, rad (0 = off)")
    joint_vel_std: float = _f(0.05, "joint velocity noise std, rad/s")
    joint_vel_bias: float = _f(0.0, "joint velocity constant bias, rad/s")
    joint_drop_prob: float = _f(0.05, "probability a joint state sample is dropped")
    joint_stale_prob: float = _f(0.05, "probability a joint state sample repeats the last one")
    imu_accel_std: float = _f(0.2, "linear acceleration noise std, m/s^2")
    imu_accel_bias: float = _f(0.0, "linear acceleration constant bias, m/s^2")
    imu_accel_bias_walk: float = _f(0.02, "accelerometer bias random walk, m/s^2/sqrt(s)")
    imu_gyro_std: float = _f(0.02, "angular velocity noise std, rad/s")
    imu_gyro_bias: float = _f(0.0, "angular velocity constant bias, rad/s")
    imu_gyro_bias_walk: float = _f(0.002, "gyro bias random walk, rad/s/sqrt(s)")
    imu_orientation_std: float = _f(0.02, "orientation noise, rotation angle std, rad")
    imu_drop_prob: float = _f(0.05, "probability an IMU sample is dropped")
    imu_stale_prob: float = _f(0.05, "probability an IMU sample repeats the last one")
    pose_position_std: float = _f(0.01, "object position estimate noise std, m")
    pose_position_bias: float = _f(0.0, "object position estimate constant bias, m")
    pose_position_bias_walk: float = _f(0.002, "object position bias random walk, m/sqrt(s)")
    pose_orientation_std: float = _f(0.05, "object orientation noise, rotation std, rad")
    pose_drop_prob: float = _f(0.1, "probability an object pose estimate is dropped")
    pose_stale_prob: float = _f(0.1, "probability an object pose estimate repeats the last")
    image_std: float = _f(12.0, "pixel noise std, intensity levels of 255")
    image_bias: float = _f(0.0, "pixel constant offset, intensity levels of 255")
    image_quantization: float = _f(0.0, "pixel quantization step, levels (0 = off)")
    image_drop_prob: float = _f(0.05, "probability a camera frame is dropped")
    image_stale_prob: float = _f(0.1, "probability a camera frame repeats the last one")
    quaternion_order: str = dataclasses.field(
        default="wxyz", metadata=_help("quaternion component order: wxyz (cores) or xyzw"))

    FAMILY = C.FAMILY_SENSOR_NOISE

    def __post_init__(self) -> None:
        super().__post_init__()
        for field in dataclasses.fields(self):
            name = field.name
            if name.endswith("_prob"):
                check_range(name, getattr(self, name), 0.0, 1.0)
            elif name.endswith(("_std", "_bias_walk", "_quantization")):
                check_range(name, getattr(self, name), 0.0)
            elif name.endswith("_bias"):
                check_range(name, getattr(self, name))
        check_choice("quaternion_order", self.quaternion_order, ("xyzw", "wxyz"))


@dataclasses.dataclass(frozen=True)
class FieldNoise:
    """Noise of one field (already scaled to the episode intensity)."""

    std: float = 0.0
    bias: float = 0.0
    bias_walk: float = 0.0
    quantization: float = 0.0
    kind: str = "vector"   # vector | quaternion_xyzw | quaternion_wxyz | pixels


@dataclasses.dataclass(frozen=True)
class StreamNoise:
    """Noise of one stream: its fields plus drop / stale probabilities."""

    fields: Mapping[str, FieldNoise]
    drop_prob: float = 0.0
    stale_prob: float = 0.0


def encoder_joints(names: Sequence[str]) -> list[int]:
    """Indices (in ``names``) of the joints an observation's ``joint_pos`` / ``joint_vel``
    carry: the arm joints, else the wheels, in the observation's order; every joint when
    neither is named (another robot).

    The in-process wrapper perturbs exactly those (the gripper width and the tool pose stay
    true); the ROS interposer perturbs the same joints of a full JointState (arm + fingers),
    so both draw the same noise from the same seed.
    """
    index = {n: i for i, n in enumerate(names)}
    for group in (C.ARM_JOINTS, C.BASE_WHEEL_JOINTS):
        if all(n in index for n in group):
            return [index[n] for n in group]
    return list(range(len(names)))


def stream_specs(config: SensorNoiseConfig, intensity: float) -> dict[str, StreamNoise]:
    """The per-stream noise of ``config`` at ``intensity`` (linear scaling)."""
    s = float(intensity)
    c = config
    quat = f"quaternion_{c.quaternion_order}"
    return {
        STREAM_JOINTS: StreamNoise(
            {
                FIELD_POSITION: FieldNoise(c.joint_pos_std * s, c.joint_pos_bias * s,
                                           c.joint_pos_bias_walk * s,
                                           c.joint_pos_quantization * s),
                FIELD_VELOCITY: FieldNoise(c.joint_vel_std * s, c.joint_vel_bias * s),
            },
            c.joint_drop_prob * s, c.joint_stale_prob * s),
        STREAM_IMU: StreamNoise(
            {
                FIELD_ACCEL: FieldNoise(c.imu_accel_std * s, c.imu_accel_bias * s,
                                        c.imu_accel_bias_walk * s),
                FIELD_GYRO: FieldNoise(c.imu_gyro_std * s, c.imu_gyro_bias * s,
                                       c.imu_gyro_bias_walk * s),
                FIELD_ORIENTATION: FieldNoise(c.imu_orientation_std * s, kind=quat),
            },
            c.imu_drop_prob * s, c.imu_stale_prob * s),
        STREAM_POSES: StreamNoise(
            {
                FIELD_POSE_POSITION: FieldNoise(c.pose_position_std * s, c.pose_position_bias * s,
                                                c.pose_position_bias_walk * s),
                FIELD_POSE_ORIENTATION: FieldNoise(c.pose_orientation_std * s, kind=quat),
            },
            c.pose_drop_prob * s, c.pose_stale_prob * s),
        STREAM_IMAGE: StreamNoise(
            {FIELD_PIXELS: FieldNoise(c.image_std * s, c.image_bias * s, 0.0,
                                      c.image_quantization * s, kind="pixels")},
            c.image_drop_prob * s, c.image_stale_prob * s),
    }


def _quat_mul_wxyz(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def rotate_quaternions(q: np.ndarray, rotvec: np.ndarray, order: str) -> np.ndarray:
    """Right-multiply quaternions ``q`` (..., 4) by the rotations ``rotvec`` (..., 3), rad."""
    q = np.asarray(q, dtype=float)
    wxyz = q if order == "wxyz" else q[..., [3, 0, 1, 2]]
    angle = np.linalg.norm(rotvec, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(x/2)/x is finite at 0; np.sinc(y) = sin(pi y)/(pi y).
    scale = 0.5 * np.sinc(half / math.pi)
    dq = np.concatenate([np.cos(half), rotvec * scale], axis=-1)
    out = _quat_mul_wxyz(wxyz, dq)
    out /= np.linalg.norm(out, axis=-1, keepdims=True)
    return out if order == "wxyz" else out[..., [1, 2, 3, 0]]


class _StreamState:
    """What a stream remembers within an episode (forgotten on reset)."""

    def __init__(self) -> None:
        self.last_stamp: float | None = None
        self.walk: dict[str, np.ndarray] = {}
        self.last_output: dict[str, np.ndarray] | None = None
        self.samples = 0
        self.dropped = 0
        self.stale = 0


class SensorNoise(Perturbation):
    """Sensor noise over the four streams; see the module docstring for the model."""

    config_cls = SensorNoiseConfig

    def _restore(self) -> None:
        self.specs = stream_specs(self.config, self.intensity)
        self._states = {name: _StreamState() for name in STREAMS}

    def _sample_episode(self, rng: np.random.Generator) -> None:
        # Nothing per episode beyond the intensity: biases start at their configured value
        # and the random walks at zero.
        pass

    def _parameters(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for stream, spec in self.specs.items():
            for field, noise in spec.fields.items():
                for attr in ("std", "bias", "bias_walk", "quantization"):
                    out[f"{stream}.{field}.{attr}"] = getattr(noise, attr)
            out[f"{stream}.drop_prob"] = spec.drop_prob
            out[f"{stream}.stale_prob"] = spec.stale_prob
        return out

    def counts(self, stream: str) -> dict[str, int]:
        """Samples seen, dropped and repeated (stale) on ``stream`` in this episode."""
        st = self._states[stream]
        return {"samples": st.samples, "dropped": st.dropped, "stale": st.stale}

    def apply(self, stream: str, values: Mapping[str, np.ndarray],
              stamp: float) -> dict[str, np.ndarray] | None:
        """Perturb one sample of ``stream``.

        Args:
            stream: one of :data:`STREAMS`.
            values: field name -> array (fields the stream does not know pass unchanged;
                known fields missing from the sample are skipped).
            stamp: the sample's time in seconds (drives the bias random walk).

        Returns:
            The perturbed fields (new arrays; pixels keep their dtype), or None when dropped.
        """
        stamp = canonical_stamp(stamp)
        spec = self.specs[stream]
        st = self._states[stream]
        st.samples += 1
        if not self.enabled:
            return {k: np.array(v, copy=True) for k, v in values.items()}
        rng = self.stream(stream)
        u_drop, u_stale = rng.random(2)
        dt = 0.0 if st.last_stamp is None else max(0.0, stamp - st.last_stamp)
        st.last_stamp = stamp
        for name, noise in spec.fields.items():
            if name not in values or noise.bias_walk <= 0.0:
                continue
            shape = np.shape(values[name])
            walk = st.walk.get(name)
            if walk is None or walk.shape != shape:
                walk = np.zeros(shape)
            st.walk[name] = walk + rng.normal(0.0, noise.bias_walk * math.sqrt(dt), shape)
        if u_drop < spec.drop_prob:
            st.dropped += 1
            return None
        if u_stale < spec.stale_prob and st.last_output is not None and \
                st.last_output.keys() == values.keys():
            st.stale += 1
            return {k: v.copy() for k, v in st.last_output.items()}
        out = {}
        for name, value in values.items():
            noise = spec.fields.get(name)
            out[name] = (np.array(value, copy=True) if noise is None
                         else self._field(name, noise, np.asarray(value), st, rng))
        st.last_output = {k: v.copy() for k, v in out.items()}
        return out

    def _field(self, name: str, noise: FieldNoise, value: np.ndarray, st: _StreamState,
               rng: np.random.Generator) -> np.ndarray:
        if noise.kind.startswith("quaternion"):
            if noise.std <= 0.0:
                return value.astype(float, copy=True)
            rotvec = rng.normal(0.0, noise.std, value.shape[:-1] + (3,))
            return rotate_quaternions(value, rotvec, noise.kind.rsplit("_", 1)[1])
        out = value.astype(float, copy=True)
        if noise.bias:
            out += noise.bias
        walk = st.walk.get(name)
        if walk is not None:
            out += walk
        if noise.std > 0.0:
            out += rng.normal(0.0, noise.std, out.shape)
        if noise.quantization > 0.0:
            out = np.round(out / noise.quantization) * noise.quantization
        if noise.kind == "pixels":
            return np.clip(np.round(out), 0, 255).astype(value.dtype)
        return out

    # --- convenience for the common streams -------------------------------------------------
    def joint_state(self, position: np.ndarray, velocity: np.ndarray | None,
                    stamp: float) -> dict[str, np.ndarray] | None:
        """Perturb joint encoder readings (rad, rad/s); None when dropped."""
        values = {FIELD_POSITION: np.asarray(position, dtype=float)}
        if velocity is not None and len(velocity):
            values[FIELD_VELOCITY] = np.asarray(velocity, dtype=float)
        return self.apply(STREAM_JOINTS, values, stamp)

    def image(self, pixels: np.ndarray, stamp: float) -> np.ndarray | None:
        """Perturb a uint8 image; None when the frame is dropped."""
        out = self.apply(STREAM_IMAGE, {FIELD_PIXELS: pixels}, stamp)
        return None if out is None else out[FIELD_PIXELS]

    def imu(self, orientation: np.ndarray | None, angular_velocity: np.ndarray,
            linear_acceleration: np.ndarray, stamp: float) -> dict[str, np.ndarray] | None:
        """Perturb an IMU sample (orientation quaternion or None, rad/s, m/s^2)."""
        values = {FIELD_ACCEL: np.asarray(linear_acceleration, dtype=float),
                  FIELD_GYRO: np.asarray(angular_velocity, dtype=float)}
        if orientation is not None:
            values[FIELD_ORIENTATION] = np.asarray(orientation, dtype=float)
        return self.apply(STREAM_IMU, values, stamp)

    def poses(self, poses: np.ndarray, stamp: float) -> np.ndarray | None:
        """Perturb object pose estimates: (N, 7) rows of position + quaternion."""
        arr = np.asarray(poses, dtype=float).reshape(-1, 7)
        out = self.apply(STREAM_POSES, {FIELD_POSE_POSITION: arr[:, :3],
                                        FIELD_POSE_ORIENTATION: arr[:, 3:]}, stamp)
        if out is None:
            return None
        return np.concatenate([out[FIELD_POSE_POSITION], out[FIELD_POSE_ORIENTATION]], axis=1)
