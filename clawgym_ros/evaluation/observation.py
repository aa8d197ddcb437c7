"""Observation assembly and action decomposition shared by the env path and the ROS path.

The Gymnasium envs return observation dicts (``constants.OBS_*`` keys) straight from the
backend; on the ROS path ``policy_node`` receives the same quantities as separate sensor
messages. :class:`ObservationAssembler` rebuilds the env's dict from those plain values (the
message conversions live in :mod:`clawgym_ros.ros_io.sensors`), so a policy sees the same
layout on both paths. :func:`arm_command` / :func:`base_command` split an action dict into what
the command topics carry (joint trajectory point, gripper width, base twist).

:class:`Kinematics` is a private MuJoCo model of the scene that places the robot (and the free
objects) at given joint values: it supplies ``tool_pose`` on the ROS path (no topic carries
it) and the evaluator's true-state reconstruction from ground-truth topics.

Pure: NumPy and MuJoCo only (no rclpy, no message types).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError, ConfigError

#: Joint positions whose names are not in a message keep these values (home pose).
_ARM_NAMES = tuple(C.ARM_JOINTS)
_FINGER_NAMES = tuple(C.GRIPPER_JOINTS)


class Kinematics:
    """Forward kinematics of a scene's robot on a private MuJoCo model (no dynamics).

    Args:
        scene: scene name (``tabletop`` or ``outdoor``).
    """

    def __init__(self, scene: str = C.SCENE_TABLETOP) -> None:
        from clawgym_ros.sim import scene_mjcf as MJ
        from clawgym_ros.sim import scene_spec as S
        from clawgym_ros.sim.mujoco_backend import index_model
        from clawgym_ros.sim.world import MujocoPhysics, mat_to_quat

        self.scene = S.load_scene(scene)
        self.model = MJ.build_model(scene)
        self.physics = MujocoPhysics(self.model)
        self._mat_to_quat = mat_to_quat
        self.data = self.physics.data
        self.index = index_model(self.model, self.scene)
        self.is_arm = scene == C.SCENE_TABLETOP

    def tool_pose(self, arm_positions: Sequence[float],
                  finger_positions: Sequence[float] | None = None) -> np.ndarray:
        """(x, y, z, qw, qx, qy, qz) of the tool site for the given arm joint values."""
        d, idx = self.data, self.index
        d.qpos[idx.arm_qpos] = np.asarray(arm_positions, dtype=float)
        if finger_positions is not None:
            d.qpos[idx.finger_qpos] = np.asarray(finger_positions, dtype=float)
        self.physics.kinematics()
        out = np.empty(7)
        out[:3] = d.site_xpos[idx.tool_site]
        self._mat_to_quat(d.site_xmat[idx.tool_site], out[3:])
        return out


@dataclasses.dataclass
class ObservationAssembler:
    """Builds the env's observation dict from plain sensor values.

    Attributes:
        scene: ``tabletop`` (arm) or ``outdoor`` (mobile base).
        image_key: observation key of the camera image (e.g. ``wrist_camera_rgb``); empty =
            images are not part of the observation.
        tool_pose: compute ``tool_pose`` by forward kinematics of the received joint values
            (tabletop; no topic carries it).
        task_keys: observation keys of the task world that sim_node's ``task_state`` carries
            (``place_goal``, ``hand_state``, ...): the ``task`` stream.
        kinematics: take ``tool_pose`` from the forward kinematics of a separate joint stream
            (``kinematics``: the robot's own encoders, ``joint_states_raw``) instead of the
            observed joints. Behind a sensor-noise interposer this is the in-process
            observation: encoder noise perturbs ``joint_pos`` / ``joint_vel`` only, the tool
            pose stays true (as a robot's TF from its own encoders).
    """

    scene: str = C.SCENE_TABLETOP
    image_key: str = ""
    tool_pose: bool = True
    task_keys: tuple[str, ...] = ()
    kinematics: bool = False

    def __post_init__(self) -> None:
        self._kin: Kinematics | None = None
        # Joint name order -> (robot joint indices, finger indices): the same every message.
        self._selections: dict[tuple[str, ...], tuple[list[int], list[int]]] = {}

    def _select(self, names: tuple[str, ...]) -> tuple[list[int], list[int]]:
        found = self._selections.get(names)
        if found is not None:
            return found
        index = {n: i for i, n in enumerate(names)}
        wanted = _ARM_NAMES if self.is_arm else tuple(C.BASE_WHEEL_JOINTS)
        missing = [n for n in wanted if n not in index]
        if missing:
            raise ConfigError("joint_states.name", missing[0], "the robot's joints " +
                              ", ".join(wanted))
        fingers = [index[n] for n in _FINGER_NAMES if n in index] if self.is_arm else []
        found = ([index[n] for n in wanted], fingers)
        if len(self._selections) < 16:
            self._selections[names] = found
        return found

    @property
    def is_arm(self) -> bool:
        return self.scene == C.SCENE_TABLETOP

    def required(self) -> tuple[str, ...]:
        """Which streams one observation needs: ``joints``, ``objects``, ``image``, ``imu``,
        ``gps``, ``odom``, ``task``."""
        if self.is_arm:
            out = ["joints", "objects"]
        else:
            out = ["joints", "imu", "gps", "odom"]
        if self.image_key:
            out.append("image")
        if self.task_keys:
            out.append("task")
        if self.kinematics and self.is_arm and self.tool_pose:
            out.append("kinematics")
        return tuple(out)

    def joints(self, names: Sequence[str], position: Sequence[float],
               velocity: Sequence[float] | None) -> dict[str, np.ndarray]:
        """``joint_pos``, ``joint_vel`` (and ``gripper_width`` for the arm) by joint name.

        Raises:
            ConfigError: a robot joint missing from ``names``.
        """
        pos = np.asarray(position, dtype=float)
        vel = (np.zeros_like(pos) if velocity is None or len(velocity) != len(pos)
               else np.asarray(velocity, dtype=float))
        sel, fingers = self._select(tuple(names))
        out = {C.OBS_JOINT_POS: pos[sel], C.OBS_JOINT_VEL: vel[sel]}
        if self.is_arm:
            out[C.OBS_GRIPPER] = np.array([pos[fingers].sum() if fingers else 0.0])
            if self.tool_pose:
                out[C.OBS_TOOL_POSE] = self._forward(pos, sel, fingers)
        return out

    def _forward(self, pos: np.ndarray, sel: list[int], fingers: list[int]) -> np.ndarray:
        if self._kin is None:
            self._kin = Kinematics(self.scene)
        finger_pos = pos[fingers] if len(fingers) == 2 else None
        return self._kin.tool_pose(pos[sel], finger_pos)

    def assemble(self, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The observation dict from stream values.

        Args:
            values: ``joints`` -> (names, position, velocity); ``objects`` -> (N, 7) poses;
                ``image`` -> uint8 (H, W, 3); ``imu`` -> (10,) quat wxyz, gyro, accel;
                ``gps`` -> (3,) lat, lon, alt; ``odom`` -> (6,) x, y, yaw, vx, vy, wz;
                ``task`` -> the task state's observation mapping (key -> values).

        Returns:
            The dict in the env's layout (float64 arrays; images uint8).

        Raises:
            ConfigError: the task state lacks one of :attr:`task_keys`.
        """
        names, position, velocity = values["joints"]
        obs = self.joints(names, position, velocity)
        if "kinematics" in self.required():
            k_names, k_position, _ = values["kinematics"]
            sel, fingers = self._select(tuple(k_names))
            obs[C.OBS_TOOL_POSE] = self._forward(np.asarray(k_position, dtype=float), sel,
                                                 fingers)
        if self.is_arm:
            obs[C.OBS_OBJECT_POSES] = np.asarray(values["objects"], dtype=float).reshape(-1, 7)
        else:
            obs[C.OBS_IMU] = np.asarray(values["imu"], dtype=float).reshape(10)
            obs[C.OBS_GPS] = np.asarray(values["gps"], dtype=float).reshape(3)
            obs[C.OBS_ODOM] = np.asarray(values["odom"], dtype=float).reshape(6)
        if self.image_key:
            obs[self.image_key] = np.asarray(values["image"], dtype=np.uint8)
        if self.task_keys:
            task = values["task"]
            for key in self.task_keys:
                if key not in task:
                    raise ConfigError("task_state.observation", sorted(task),
                                      f"the key {key} the policy observes")
                obs[key] = np.asarray(task[key], dtype=float)
        return obs


@dataclasses.dataclass(frozen=True)
class ArmCommand:
    """What the arm command topics carry for one action.

    Attributes:
        positions: (7,) joint targets, or None when the action has no ``joint_target``.
        velocities: (7,) velocity feed-forward, or None when zero / absent.
        gripper: opening in metres, or None when the action has no ``gripper``.
    """

    positions: np.ndarray | None
    velocities: np.ndarray | None
    gripper: float | None


def arm_command(action: Mapping[str, Any]) -> ArmCommand:
    """Split an arm action dict (``joint_target``, ``joint_velocity``, ``gripper``)."""
    target = action.get(C.ACT_JOINT_TARGET)
    vel = action.get(C.ACT_JOINT_VEL)
    grip = action.get(C.ACT_GRIPPER)
    positions = None if target is None else np.asarray(target, dtype=float).reshape(7)
    velocities = None
    if vel is not None and positions is not None:
        v = np.asarray(vel, dtype=float).reshape(7)
        velocities = v if np.any(v != 0.0) else None
    gripper = None if grip is None else float(np.asarray(grip, dtype=float).reshape(-1)[0])
    return ArmCommand(positions, velocities, gripper)


def base_command(action: Mapping[str, Any]) -> tuple[float, float] | None:
    """(linear m/s, angular rad/s) of a mobile-base action, None without ``base_twist``."""
    twist = action.get(C.ACT_BASE_TWIST)
    if twist is None:
        return None
    v, w = (float(x) for x in np.asarray(twist, dtype=float).reshape(-1)[:2])
    return v, w


def trajectory_points(command: ArmCommand, control_dt: float
                      ) -> list[tuple[float, np.ndarray, np.ndarray | None]]:
    """Trajectory points (time from start, positions, velocities) that make sim_node apply
    exactly ``command`` during the next control step.

    sim_node samples the trajectory at the end of each control step and holds the last point
    with zero velocity. A target without velocity feed-forward is one point at time 0 (held:
    exactly the env's ``joint_target`` with zero ``joint_velocity``). With feed-forward the
    point sits at ``control_dt`` with its velocity, followed by a point continuing at that
    velocity, so the sample at the end of the step is (target, velocity).
    """
    if command.positions is None:
        return []
    if command.velocities is None:
        return [(0.0, command.positions, None)]
    horizon = 1.0
    return [(control_dt, command.positions, command.velocities),
            (control_dt + horizon, command.positions + command.velocities * horizon,
             command.velocities)]


def chunk_points(commands: Sequence[ArmCommand], step_ns: int
                 ) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Trajectory points (time from start in ns, positions, velocities) of a lockstep chunk:
    command ``i`` at ``(i + 1) step``, the time sim_node samples it at (the end of the ``i``-th
    step from the stamp), with its velocity feed-forward or an explicit zero (an estimated
    velocity would differ from the env's action). See
    :func:`~clawgym_ros.sim.trajectory.chunk_steps`.

    Raises:
        ClawgymError: a command without joint targets.
    """
    points = []
    for i, command in enumerate(commands):
        if command.positions is None:
            raise ClawgymError("a chunk needs a joint target in every action")
        velocities = (command.velocities if command.velocities is not None
                      else np.zeros_like(command.positions))
        points.append(((i + 1) * step_ns, command.positions, velocities))
    return points


def odom_vector(position: Sequence[float], orientation_wxyz: Sequence[float],
                linear_velocity: Sequence[float], angular_velocity: Sequence[float]
                ) -> np.ndarray:
    """The env's (6,) ``odom`` (x, y, yaw, vx, vy in the world frame, wz) from odometry values
    (twist in the base frame, as nav_msgs/Odometry carries it); inverse of
    :func:`clawgym_ros.sim.readings.odom_from_vector`."""
    w, x, y, z = (float(v) for v in orientation_wxyz)
    yaw = float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
    c, s = np.cos(yaw), np.sin(yaw)
    bx, by = float(linear_velocity[0]), float(linear_velocity[1])
    return np.array([float(position[0]), float(position[1]), yaw, c * bx - s * by,
                     s * bx + c * by, float(angular_velocity[2])])
