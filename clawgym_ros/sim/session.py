"""The simulator as a node drives it: config, commands held over time, stepping, sensor schedule.

Pure core of ``sim_node`` (no rclpy): the node converts messages into calls on
:class:`SimSession` and its readings back into messages. The session owns one backend, keeps
the latest commands (a joint trajectory sampled against *simulation* time, a gripper width, a
base twist), counts control steps and says which sensors are due.

Time: a node control step is ``k`` backend control steps (``k = 1`` unless ``control_rate`` asks
for a slower rate); simulation time is always ``steps x control_dt`` after a reset, exactly.

Worlds: the bare scene of ``scenario`` (``tabletop``, ``outdoor``), or a *task world*: the
task's own env (:class:`~clawgym_ros.tasks.world.TaskEnv`, e.g. ``PickPlaceEnv``) with its
template scenes, goal and stage tracker, stepped through ``env.step`` exactly as the in-process
evaluation steps it, so physics, stages and success are the very same code. A world is named
``<scene>``, ``<task>`` (a training template drawn at every reset, as the env does) or
``<task>/<template>`` (:func:`parse_world`), by the config or per reset.
:meth:`SimSession.task_state` is what the node publishes on ``task_state``: template, goal,
stages reached, success, the step's contact force and collision, and the task env's
observation keys that no sensor carries (``place_goal``, ``hand_state``, ...).

Disturbances (:meth:`SimSession.set_disturbance`, task worlds): from the next reset on, the
task env is stepped through the in-process
:class:`~clawgym_ros.perturbations.disturbance.DisturbanceWrapper` itself, so the event fires
at the same control step, through the same code, as in an in-process evaluation;
:meth:`SimSession.disturbance_state` is the core's state and the recovery record after the
last step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.errors import ConfigError
from clawgym_ros.sim.backend import (
    BACKENDS,
    CameraPoseSettings,
    DynamicsSettings,
    LightingSettings,
)
from clawgym_ros.sim.pacing import CLOCK_MODES, EveryN
from clawgym_ros.sim.readings import (
    GpsFix,
    ImuValues,
    OdomValues,
    gps_from_vector,
    imu_from_vector,
    odom_from_vector,
)
from clawgym_ros.sim.scene_spec import GRIPPER_MAX_WIDTH
from clawgym_ros.sim.trajectory import INTERPOLATIONS, JointTrajectory, gather

SCENARIOS: tuple[str, ...] = ("tabletop", "outdoor")
#: Observation keys the sensor topics carry (everything else of a task env's observation goes
#: in the task state).
SENSOR_OBS_KEYS: frozenset[str] = frozenset(C.OBS_STATE_KEYS)
#: camera published per scenario when ``camera`` is empty, and its optical frame.
DEFAULT_CAMERAS: dict[str, tuple[str, str]] = {
    "tabletop": (C.CAMERA_WRIST, C.FRAME_WRIST_CAMERA),
    "outdoor": (C.CAMERA_FRONT, C.FRAME_FRONT_CAMERA),
}
GRIPPER_MIN_WIDTH = 0.0

SENSOR_JOINTS = "joint_states"
SENSOR_CAMERA = "camera"
SENSOR_IMU = "imu"
SENSOR_GPS = "gps"
SENSOR_ODOM = "odom"
SENSOR_OBJECTS = "object_poses"
SENSOR_TASK = "task_state"
SENSOR_DISTURBANCE = "disturbance_state"
SENSORS: tuple[str, ...] = (SENSOR_JOINTS, SENSOR_CAMERA, SENSOR_IMU, SENSOR_GPS, SENSOR_ODOM,
                            SENSOR_OBJECTS, SENSOR_TASK, SENSOR_DISTURBANCE)


def _f(default: Any, text: str) -> Any:
    return dataclasses.field(default=default, metadata={"help": text})


@dataclasses.dataclass(frozen=True)
class SimNodeConfig:
    """sim_node's parameters (declared as ROS parameters, one per field)."""

    scenario: str = _f("tabletop", "scene at start: tabletop (arm) or outdoor (mobile base); "
                       "with a task, the task's scene")
    task: str = _f("", "task world at start: a task name (pick_place, peg_insert, "
                   "pill_handover, gps_nav) simulated by its task env (templates, goal, stage "
                   "tracker); empty = the bare scene")
    template: str = _f("", "template of the task world; empty = a training template drawn at "
                       "every reset")
    seed: int = _f(0, "seed of the first reset, >= 0")
    backend: str = _f("mujoco", "simulator backend (sim_node embeds mujoco; gazebo runs "
                      "through ros_gz_bridge instead)")
    control_rate: float = _f(0.0, "control steps per simulated second, Hz; 0 = the scene's "
                             "(50 Hz); must divide the scene's rate")
    clock_mode: str = _f("free", "free (runs at real_time_factor) or lockstep (advances only "
                         "in the sim/step service)")
    real_time_factor: float = _f(1.0, "simulated seconds per wall second in free mode, (0, 100]")
    max_steps_per_tick: int = _f(10, "free mode: most control steps run in one timer tick")
    camera: str = _f("", "camera to publish; empty = wrist_camera (tabletop) or front_camera "
                     "(outdoor)")
    image_width: int = _f(84, "image width in pixels, [8, 640]")
    image_height: int = _f(84, "image height in pixels, [8, 480]")
    shadows: bool = _f(False, "render shadows (slow)")
    camera_rate: float = _f(10.0, "images per simulated second in free mode, Hz; 0 = none")
    state_rate: float = _f(50.0, "joint states, IMU, odometry and object poses per simulated "
                           "second in free mode, Hz")
    gps_rate: float = _f(10.0, "GPS fixes per simulated second in free mode, Hz")
    publish_joint_states: bool = _f(True, "publish joint_states_raw")
    publish_camera: bool = _f(True, "publish image_raw and camera_info")
    publish_imu: bool = _f(True, "publish imu/data_raw (outdoor)")
    publish_gps: bool = _f(True, "publish gps/fix_raw (outdoor)")
    publish_odom: bool = _f(True, "publish odom (outdoor)")
    publish_object_poses: bool = _f(True, "publish object_poses (tabletop; ground truth)")
    publish_clock: bool = _f(True, "publish /clock")
    trajectory_interpolation: str = _f("cubic", "joint trajectory interpolation: cubic, linear")
    twin_params_file: str = _f("", "a stand-in robot: YAML/JSON of hidden parameter values "
                               "(names of clawgym calibrate: friction, damping, armature, "
                               "servo gain, object mass, command latency, encoder biases) the "
                               "simulator runs at and reports with; empty = none")

    def __post_init__(self) -> None:
        check_choice("scenario", self.scenario, SCENARIOS)
        check_int("seed", self.seed, 0, 2**63 - 1)
        check_choice("backend", self.backend, tuple(BACKENDS))
        check_range("control_rate", self.control_rate, 0.0, 1000.0)
        check_choice("clock_mode", self.clock_mode, CLOCK_MODES)
        check_range("real_time_factor", self.real_time_factor, 0.0, 100.0, low_open=True)
        check_int("max_steps_per_tick", self.max_steps_per_tick, 1, 10000)
        check_int("image_width", self.image_width, 8, 640)
        check_int("image_height", self.image_height, 8, 480)
        for name in ("camera_rate", "state_rate", "gps_rate"):
            check_range(name, getattr(self, name), 0.0, 1000.0)
        check_choice("trajectory_interpolation", self.trajectory_interpolation, INTERPOLATIONS)
        if self.template and not self.task:
            raise ConfigError("template", self.template, "empty without a task")
        if self.task:
            parse_world(self.world, "task")
        if self.twin_params_file:
            self.twin_values()          # a bad file fails at configure

    def twin_values(self) -> dict[str, float]:
        """The stand-in robot's hidden values of ``twin_params_file`` ({} without one).

        Raises:
            ConfigError: the file (see :func:`clawgym_ros.sim.active_calibration.load_twin_file`).
        """
        if not self.twin_params_file:
            return {}
        from clawgym_ros.sim.active_calibration import load_twin_file

        return load_twin_file(self.twin_params_file)

    @property
    def world(self) -> str:
        """The world at start, as :func:`parse_world` reads it."""
        if self.task:
            return f"{self.task}/{self.template}" if self.template else self.task
        return self.scenario


@dataclasses.dataclass(frozen=True)
class World:
    """What a session simulates: a bare scene, or a task (and template) in the task's scene."""

    scene: str
    task: str = ""
    template: str = ""

    @property
    def name(self) -> str:
        if not self.task:
            return self.scene
        return f"{self.task}/{self.template}" if self.template else self.task


def parse_world(text: str, field: str = "scenario") -> World:
    """``tabletop`` / ``outdoor`` (bare scene), ``<task>`` or ``<task>/<template>``.

    Raises:
        ConfigError: an unknown scene, task or template (naming ``field`` and what is allowed).
    """
    from clawgym_ros.tasks.registry import TASKS, get_task

    if text in SCENARIOS:
        return World(text)
    task, _, template = text.partition("/")
    if task not in TASKS:
        allowed = ", ".join(TASKS) if field == "task" else (
            "a scene (" + ", ".join(SCENARIOS) + "), a task (" + ", ".join(TASKS)
            + ") or <task>/<template>")
        raise ConfigError(field, task if field == "task" else text, allowed)
    spec = get_task(task)
    if template and template not in {t.name for t in spec.templates}:
        raise ConfigError("template" if field == "task" else field,
                          template if field == "task" else text,
                          f"a template of {task}: " + ", ".join(t.name for t in spec.templates))
    if not template and "/" in text:
        raise ConfigError(field, text, f"{task} or {task}/<template>")
    return World(spec.scene, task, template)


def build_task_env(world: World, config: SimNodeConfig) -> Any:
    """The task env of a task world (the env the in-process evaluation builds for it: no
    observation cameras; sim_node renders its camera itself)."""
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401  (registers the envs)
    from clawgym_ros.tasks.registry import get_task

    return gym.make(get_task(world.task).env_id, template=world.template,
                    image_width=config.image_width, image_height=config.image_height,
                    control_mode=C.CONTROL_DICT).unwrapped


def build_backend(config: SimNodeConfig) -> Any:
    """The simulator backend of ``config`` (only the embedded MuJoCo one can be stepped here).

    Raises:
        ConfigError: a backend that sim_node cannot drive.
    """
    if config.backend != "mujoco":
        raise ConfigError("backend", config.backend,
                          "'mujoco' (Gazebo publishes the same topics through ros_gz_bridge; "
                          "see launch/gazebo_launch.py)")
    from clawgym_ros.sim.mujoco_backend import MujocoBackend, MujocoConfig

    return MujocoBackend(MujocoConfig(
        scene=config.scenario, cameras=(), image_width=config.image_width,
        image_height=config.image_height, shadows=config.shadows))


@dataclasses.dataclass(frozen=True)
class JointReading:
    """Robot joint state: names, positions, velocities, efforts."""

    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


class SimSession:
    """One simulated world driven by commands and stepped in whole control steps.

    Args:
        config: the node's configuration.
        backend: a ready backend (default: :func:`build_backend`); the session closes it.
    """

    def __init__(self, config: SimNodeConfig, backend: Any | None = None) -> None:
        self.config = config
        self.world = parse_world(config.world, "task")
        self._bias = np.zeros(0)
        if config.twin_params_file:
            self._become_twin(config.twin_values())
        if backend is None and not self.world.task:
            backend = build_backend(config)
        self._bare = backend
        self.backend = backend
        # Task worlds: one env per (task, template), as the in-process runner caches them (an
        # env with a fixed template never draws one, so the same seed gives the same episode).
        self._envs: dict[tuple[str, str], Any] = {}
        self.env: Any = None
        # What is stepped: the task env, or the disturbance wrapper around it.
        self._stepper: Any = None
        self._disturbance: Any = None
        self._info: dict[str, Any] = {}
        self._obs: dict[str, np.ndarray] = {}
        self.steps = 0
        self._trajectory: JointTrajectory | None = None
        self._twist = np.zeros(2)
        self.reset(config.seed)

    def _become_twin(self, values: dict[str, float]) -> None:
        """Run this process's simulators at a stand-in robot's hidden values (the physical
        ones, the latency as a sub-step delay) and report joint positions with its encoder
        biases; only this process knows them."""
        from clawgym_ros.sim.active_calibration import (
            TWIN_ID,
            SimCalibration,
            activate,
            split_values,
        )

        activate(SimCalibration(TWIN_ID, values))
        bias = split_values(values)[2]
        self._bias = np.array([bias.get(j, 0.0) for j in (*C.ARM_JOINTS, *C.GRIPPER_JOINTS)])

    # ------------------------------------------------------------------ properties
    @property
    def scenario(self) -> str:
        return self.backend.scene.name

    @property
    def is_arm(self) -> bool:
        return bool(self.backend.is_arm)

    @property
    def control_dt(self) -> float:
        """Seconds of simulation per node control step."""
        return self._k * self.backend.control_dt

    @property
    def time(self) -> float:
        """Simulation time in seconds (exactly ``steps * control_dt`` since the reset)."""
        return self.steps * self.control_dt

    @property
    def camera(self) -> tuple[str, str]:
        """(camera name, optical frame id) published for the current scenario."""
        name, frame = DEFAULT_CAMERAS[self.scenario]
        if self.config.camera:
            name = self.config.camera
            frame = f"{name}_optical_frame"
        return name, frame

    def available(self, sensor: str) -> bool:
        """Whether ``sensor`` exists in the current scenario and is enabled by the config."""
        cfg = self.config
        return {
            SENSOR_JOINTS: cfg.publish_joint_states,
            SENSOR_CAMERA: cfg.publish_camera,
            SENSOR_IMU: cfg.publish_imu and not self.is_arm,
            SENSOR_GPS: cfg.publish_gps and not self.is_arm,
            SENSOR_ODOM: cfg.publish_odom and not self.is_arm,
            SENSOR_OBJECTS: cfg.publish_object_poses and self.is_arm,
            SENSOR_TASK: self.env is not None,
            SENSOR_DISTURBANCE: self.disturbed,
        }[sensor]

    # ------------------------------------------------------------------ world
    def reset(self, seed: int, scenario: str | None = None) -> None:
        """Reset (switching world when given: :func:`parse_world`) with ``seed``; drops every
        command. A task world resets its task env with ``seed`` (``env.reset(seed=seed)``).

        Raises:
            ConfigError: unknown world, seed out of range, or a control_rate that the
                scene's control step does not divide.
        """
        check_int("seed", seed, 0, 2**63 - 1)
        world = parse_world(scenario) if scenario else self.world
        if world.task:
            key = (world.task, world.template)
            env = self._envs.get(key)
            if env is None:
                env = self._envs[key] = build_task_env(world, self.config)
            stepper = env
            if self._disturbance is not None:
                from clawgym_ros.perturbations.disturbance import DisturbanceWrapper

                stepper = DisturbanceWrapper(env, self._disturbance)
            self._obs, self._info = stepper.reset(seed=seed)
            self.env, self.backend, self._stepper = env, env.backend, stepper
        else:
            if self._disturbance is not None:
                # The in-process scene world refuses the family the same way.
                raise ConfigError("disturbance", self._disturbance.config.event,
                                  "a task world (the disturbance needs the task's stages)")
            if self._bare is None:
                self._bare = build_backend(dataclasses.replace(self.config, scenario=world.scene,
                                                               task="", template=""))
            self.env, self._stepper, self._obs, self._info = None, None, {}, {}
            self.backend = self._bare
            self.backend.reset(seed, world.scene)
        self.world = world
        self._k = self._steps_per_control(self.backend.control_dt)
        cam = self.camera[0]
        if self.config.publish_camera and cam not in self.backend.index.cameras:
            raise ConfigError("camera", cam, "one of " + ", ".join(self.backend.index.cameras))
        self.steps = 0
        self._trajectory = None
        self._twist = np.zeros(2)
        if self.is_arm:
            self._target = np.asarray(self.backend.scene.robot.home, dtype=float).copy()
            self._gripper = float(self.backend.scene.robot.gripper_home)
        rate = 1.0 / self.control_dt
        self._schedule = {
            SENSOR_JOINTS: EveryN(rate, self.config.state_rate),
            SENSOR_IMU: EveryN(rate, self.config.state_rate),
            SENSOR_ODOM: EveryN(rate, self.config.state_rate),
            SENSOR_OBJECTS: EveryN(rate, self.config.state_rate),
            SENSOR_TASK: EveryN(rate, self.config.state_rate),
            SENSOR_DISTURBANCE: EveryN(rate, self.config.state_rate),
            SENSOR_GPS: EveryN(rate, self.config.gps_rate),
            SENSOR_CAMERA: EveryN(rate, self.config.camera_rate),
        }

    def _steps_per_control(self, backend_dt: float) -> int:
        if self.config.control_rate == 0.0:
            return 1
        ratio = 1.0 / (self.config.control_rate * backend_dt)
        k = int(round(ratio))
        if k < 1 or abs(ratio - k) > 1e-6:
            raise ConfigError("control_rate", self.config.control_rate,
                              f"0 or {1.0 / backend_dt:g} Hz divided by a whole number")
        return k

    def set_disturbance(self, config: Any | None) -> None:
        """Disturb the episodes from the next reset on (a
        :class:`~clawgym_ros.perturbations.disturbance.DisturbanceConfig`; None or family
        ``none``: no disturbance). The reset's seed begins the episode, as
        ``env.reset(seed=...)`` does on the wrapper.

        Raises:
            ConfigError: a config of another family.
        """
        from clawgym_ros.perturbations.disturbance import Disturbance, DisturbanceConfig

        if config is None or config.family == C.FAMILY_NONE:
            self._disturbance = None
            return
        if not isinstance(config, DisturbanceConfig):
            raise ConfigError("disturbance", type(config).__name__, "a DisturbanceConfig")
        self._disturbance = Disturbance(config)

    @property
    def disturbed(self) -> bool:
        """Whether the current episode runs under a disturbance (task worlds only)."""
        return self._disturbance is not None and self.env is not None

    def disturbance_state(self) -> dict[str, Any] | None:
        """The disturbance after the last step (None without one): ``state`` (the core's,
        what an in-process episode records as ``disturbance.*``), ``record`` (the recovery
        record, its ``recovery``), ``stages`` (the task's), ``config`` and ``active``."""
        if not self.disturbed:
            return None
        core = self._disturbance
        return {"state": core.state(), "record": dict(self._info.get(C.INFO_DISTURBANCE, {})),
                "stages": tuple(self.env.tracker.stages), "config": core.config,
                "active": bool(core.active)}

    def set_lighting(self, settings: LightingSettings | None) -> None:
        """Apply lighting relative to defaults; None restores lighting *and* dynamics defaults
        (the backend keeps one set of defaults)."""
        if settings is None:
            self.backend.restore_defaults()
        else:
            self.backend.set_lighting(settings)

    def set_dynamics(self, settings: DynamicsSettings | None) -> None:
        """Apply dynamics relative to defaults; None restores every default."""
        if settings is None:
            self.backend.restore_defaults()
        else:
            self.backend.set_dynamics(settings)

    def set_camera_pose(self, settings: CameraPoseSettings | None) -> None:
        """Move the cameras' mounts relative to their defaults (the next image); None
        restores every default."""
        if settings is None:
            self.backend.restore_defaults()
        else:
            self.backend.set_camera_pose(settings)

    # ------------------------------------------------------------------ commands
    @property
    def arm_joints(self) -> tuple[str, ...]:
        return C.ARM_JOINTS if self.is_arm else ()

    def set_trajectory(self, trajectory: JointTrajectory) -> None:
        """Follow ``trajectory`` (arm and/or finger joints) from the next step on.

        Finger joints command the gripper: the width is the sum of the two fingers' openings
        (one finger given: twice its opening). Points before the current commanded state are
        the current targets at the trajectory's start time when its first point is later (as
        ros2_control's joint_trajectory_controller does).

        Raises:
            ConfigError: no arm in this scenario, or joint names that are not the robot's.
        """
        if not self.is_arm:
            raise ConfigError("joint_trajectory", self.scenario, "a scenario with an arm")
        allowed = (*C.ARM_JOINTS, *C.GRIPPER_JOINTS)
        unknown = [n for n in trajectory.joint_names if n not in allowed]
        if unknown:
            raise ConfigError("joint_trajectory.joint_names", unknown[0],
                              "one of " + ", ".join(allowed))
        self._trajectory = trajectory.with_start_state(self._commanded(trajectory.joint_names))

    def _commanded(self, names: Sequence[str]) -> np.ndarray:
        full = np.concatenate([self._target, [self._gripper / 2, self._gripper / 2]])
        return gather(names, full, (*C.ARM_JOINTS, *C.GRIPPER_JOINTS))

    def set_gripper(self, width: float) -> None:
        """Gripper opening target in metres (clipped to the gripper's range)."""
        if not self.is_arm:
            raise ConfigError("gripper_command", self.scenario, "a scenario with an arm")
        self._gripper = float(np.clip(width, GRIPPER_MIN_WIDTH, self.gripper_max_width))

    @property
    def gripper_max_width(self) -> float:
        return GRIPPER_MAX_WIDTH

    def set_base_twist(self, linear: float, angular: float) -> None:
        """Mobile base forward speed (m/s) and yaw rate (rad/s), held until changed."""
        if self.is_arm:
            raise ConfigError("cmd_vel", self.scenario, "a scenario with a mobile base")
        self._twist = np.array([float(linear), float(angular)])

    def _action(self, t_next: float) -> dict[str, np.ndarray]:
        if not self.is_arm:
            return {C.ACT_BASE_TWIST: self._twist.copy()}
        velocity = np.zeros(len(C.ARM_JOINTS))
        traj = self._trajectory
        if traj is not None:
            pos, vel = traj.sample(t_next)
            names = (*C.ARM_JOINTS, *C.GRIPPER_JOINTS)
            index = {n: i for i, n in enumerate(names)}
            fingers = []
            for name, p, v in zip(traj.joint_names, pos, vel, strict=True):
                i = index[name]
                if i < len(C.ARM_JOINTS):
                    self._target[i] = p
                    velocity[i] = v
                else:
                    fingers.append(p)
            if fingers:
                self._gripper = float(np.clip(sum(fingers) * 2 / len(fingers),
                                              GRIPPER_MIN_WIDTH, self.gripper_max_width))
            if t_next >= traj.end_time:
                self._trajectory = None
        return {C.ACT_JOINT_TARGET: self._target.copy(), C.ACT_JOINT_VEL: velocity,
                C.ACT_GRIPPER: np.array([self._gripper])}

    # ------------------------------------------------------------------ stepping
    def step(self, control_steps: int = 1) -> tuple[int, int]:
        """Advance ``control_steps`` node control steps with the held commands.

        Returns:
            (steps before, steps after), for :meth:`due`.
        """
        check_int("steps", control_steps, 0)
        before = self.steps
        backend_dt = self.backend.control_dt
        for n in range(control_steps):
            for j in range(self._k):
                # Command the state at the end of this backend step (the servo tracks it).
                t_next = (before + n) * self.control_dt + (j + 1) * backend_dt
                if self.env is not None:
                    self._obs, _, _, _, self._info = self._stepper.step(self._action(t_next))
                else:
                    self.backend.step(self._action(t_next))
            self.steps += 1
        return before, self.steps

    def due(self, before: int, after: int, every_sensor: bool = False) -> list[str]:
        """Sensors to publish after stepping from ``before`` to ``after`` steps.

        Args:
            before: steps before the batch (-1 to include the reset state at step 0).
            after: steps after it.
            every_sensor: publish every available sensor regardless of rates (lockstep).
        """
        return [s for s in SENSORS if self.available(s) and
                (every_sensor or self._schedule[s].crossed(before, after))]

    # ------------------------------------------------------------------ readings
    def joints(self) -> JointReading:
        names, pos, vel, eff = self.backend.joint_state()
        if self._bias.size and len(pos) == self._bias.size:
            pos = pos + self._bias      # a stand-in robot's encoders
        return JointReading(tuple(names), pos, vel, eff)

    def imu(self) -> ImuValues:
        return imu_from_vector(self.backend.observation(cameras=())[C.OBS_IMU])

    def gps(self) -> GpsFix:
        """The antenna's fix; under a disturbance the task env's observed one (a GPS outage
        holds the last fix there, as the in-process wrapper shows it)."""
        if self.disturbed and C.OBS_GPS in self._obs:
            return gps_from_vector(self._obs[C.OBS_GPS])
        return gps_from_vector(self.backend.gps())

    def odom(self) -> OdomValues:
        """The odometry the robot reports, as the env observes it: in a task world the task
        env's ``odom`` observation (gps_nav: wheel odometry in the odom frame, zero at reset,
        as a diff-drive controller publishes it), else the ground truth (the bare scene
        env's ``odom``)."""
        if self.env is not None and C.OBS_ODOM in self._obs:
            return odom_from_vector(self._obs[C.OBS_ODOM])
        return self.odom_truth()

    def odom_truth(self) -> OdomValues:
        """The base's true pose and twist in the world frame (what the scorer reads)."""
        return odom_from_vector(self.backend.odometry())

    def object_poses(self) -> tuple[tuple[str, ...], np.ndarray]:
        """(names, (N, 7) x y z qw qx qy qz) of the free objects in the world frame."""
        poses = self.backend.object_poses()
        names = tuple(poses)
        return names, np.array([poses[n] for n in names]).reshape(-1, 7)

    def image(self) -> np.ndarray:
        """RGB (H, W, 3) uint8 of the published camera."""
        return self.backend.render(self.camera[0], self.config.image_width,
                                   self.config.image_height)

    def camera_matrix(self) -> np.ndarray:
        """3x3 intrinsics of the published camera at the configured resolution."""
        return self.backend.camera_intrinsics(self.camera[0], self.config.image_width,
                                              self.config.image_height)

    def task_state(self) -> dict[str, Any] | None:
        """The task world's state now (None in a bare scene), JSON-able.

        Keys: ``task``, ``time`` (the env's simulation clock, ``backend.time``: what the
        in-process scorer reads; it accumulates the physics step, so it differs from
        ``steps x control_dt`` in the last bits), ``template``, ``split``, ``stages``,
        ``stages_reached``, ``success`` (the env's, after the last step; False at reset),
        ``contact_force`` (N) and ``collision`` (unintended contact) of the last step,
        ``goal`` (the env's goal dict) and ``observation``: the task env's observation keys
        that no sensor topic carries (e.g. ``place_goal``), as lists.
        """
        env = self.env
        if env is None:
            return None
        info = self._info
        extra = {k: np.asarray(v, dtype=float).tolist() for k, v in self._obs.items()
                 if k not in SENSOR_OBS_KEYS and np.asarray(v).dtype != np.uint8}
        return {"task": self.world.task, "time": float(env.backend.time),
                "template": env.template.name,
                "split": env.template.split, "stages": list(env.tracker.stages),
                "stages_reached": list(env.tracker.reached_names),
                "success": bool(info.get("success", False)),
                "contact_force": float(info.get("contact_force", 0.0)),
                "collision": bool(info.get("collision", False)),
                "goal": _jsonable(env.goal_dict()), "observation": extra}

    def describe(self) -> dict[str, Any]:
        """Backend knobs plus session time (for logs and records)."""
        return {**self.backend.describe(), "world": self.world.name, "steps": self.steps,
                "time": self.time}

    def close(self) -> None:
        """Release the backends and task envs (renderers, GL contexts)."""
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        if self._bare is not None:
            self._bare.close()


def _jsonable(value: Any) -> Any:
    """``value`` with NumPy scalars/arrays and tuples turned into JSON types."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
