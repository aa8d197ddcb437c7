"""ROS evaluation mode, pure parts: node configs, the graph to start, and the stamp-keyed
observation buffer of ``policy_node``.

The ROS path runs the same Policy inside ``policy_node`` against live topics. With the MuJoCo
``sim_node`` in lockstep the evaluator drives the clock (``sim/reset``, ``sim/step``) and the
episode unfolds exactly as in-process:

1. the evaluator configures the observation interposers of the spec's cell (seed =
   ``perturbation_seed``) and starts their episode with ``spec.seed`` (the ROS counterpart of
   ``env.reset(seed=...)``), calls ``policy_node/reset`` (``policy.reset()``), then
   ``sim/reset(seed)`` with the episode's world in the ``scenario`` field (``<task>/<template>``
   in the task world: sim_node resets the task env, :func:`world_name`), applies the cell's
   dynamics / lighting through ``sim/set_dynamics`` / ``sim/set_lighting`` (where the wrappers
   apply them, after the reset), and reads the state at t = 0 (``sim/step`` with ``no_step``
   and ``return_state``; in the task world also the t = 0 ``task_state``);
2. sim_node publishes every sensor the policy needs stamped with the new simulation time
   (images only when the policy reads them; ``task_state`` in a task world: stages, success,
   contact force, collision and the task observation keys such as ``place_goal``);
   ``policy_node`` assembles the observation of that stamp (:class:`StampedBuffer`; the
   interposers republish held values for dropped samples in lockstep, as the Gymnasium
   wrappers show them), calls the policy and publishes one ``joint_trajectory`` (header stamp
   = the observation's; the gripper rides along as finger joints, so one message is the whole
   action) or, for the mobile base (gps_nav), one ``cmd_vel_stamped`` TwistStamped;
3. meanwhile the evaluator has already sent ``sim/step`` with ``wait_command``,
   ``command_stamp`` = that time and ``steps`` = a run of several control steps: before each
   step of the run sim_node waits until the trajectory stamped with exactly the time that step
   starts at has arrived and been applied, then steps and publishes. The evaluator scores the
   ground truth of every step (``joint_states_raw`` / ``object_poses_raw``, reliable) with
   :class:`~clawgym_ros.evaluation.rollout.EpisodeScorer` as it arrives, and asks for the next
   run when one ends, until success or the step limit; states after the end (the rest of the
   last run) are dropped. At the end the evaluator waits (``no_step``) for the command on the
   last observation, so no command of an old episode reaches the next one.

Chunks: a policy that acts open loop for its next steps (a chunked torch policy, the scripted
expert's plan) gets them sent as one trajectory with a point per control step; sim_node runs
those steps without waiting and policy_node does not act on the observations they produce
(``max_chunk``; 1 = a command per step). After ``~/reset`` policy_node ignores samples until
the new episode's t = 0 ones (it may still hold samples of the last episode: sim_node ran ahead).

Per control step without a chunk the critical path is two topic hops (sensors to policy_node,
its command to sim_node); within a chunk only sim_node's own work; the evaluator is off it
(one request per run). A command can never miss its step
(formerly, in about one run of four, a command reached sim_node after the next step request
and was applied one step late).

Free-running robots (Gazebo, a real robot): ``policy_node`` acts on a timer at the control
rate with the latest values; the evaluator then only watches
(:mod:`clawgym_ros.ros_io.eval_free`: sim_node in real time stands in for the robot; not
exact, so compared with lockstep by success rate, ``clawgym bench eval_free``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.suites import EpisodeSpec

POLICY_LOCKSTEP = "lockstep"
POLICY_FREE = "free"
POLICY_MODES: tuple[str, ...] = (POLICY_LOCKSTEP, POLICY_FREE)
#: Service of policy_node that starts a new episode (std_srvs/Trigger), relative to its name.
SRV_POLICY_RESET = "reset"
#: Default of ``policy_node``'s ``max_chunk``: one second of control steps at 50 Hz.
MAX_CHUNK = 50
#: Observation-side families: their interposers run in the lockstep graph.
HOLD_FAMILIES: tuple[str, ...] = C.OBSERVATION_FAMILIES
#: Families whose interposer may leave a stamp without a sample (policy_node then holds the
#: last value via /clock): none. In lockstep (``reliable``) sensor_noise_node and
#: gps_dropout_node republish the held values themselves, exactly as the wrappers show them
#: (a wall-clock hold could act before a late sample arrived).
CLOCK_HOLD_FAMILIES: tuple[str, ...] = ()
#: Families sim_node applies itself in lockstep, without an interposer node: ``disturbance``
#: (``sim/set_disturbance``: the in-process wrapper around sim_node's task env; task worlds)
#: and ``camera_pose`` (``sim/set_camera_pose``, sent by the lockstep driver after each reset).
SIM_NODE_FAMILIES: tuple[str, ...] = (C.FAMILY_DISTURBANCE, C.FAMILY_CAMERA_POSE)
#: Observation keys the sensor topics give per scene (tool_pose by forward kinematics).
SENSOR_OBSERVATION_KEYS: dict[str, tuple[str, ...]] = {
    C.SCENE_TABLETOP: (C.OBS_JOINT_POS, C.OBS_JOINT_VEL, C.OBS_GRIPPER, C.OBS_TOOL_POSE,
                       C.OBS_OBJECT_POSES),
    C.SCENE_OUTDOOR: (C.OBS_JOINT_POS, C.OBS_JOINT_VEL, C.OBS_IMU, C.OBS_GPS, C.OBS_ODOM),
}
def task_observation_keys() -> dict[str, tuple[str, ...]]:
    """task -> observation keys of its env that no sensor topic carries: sim_node's
    ``task_state`` provides them (each task's registration; checked against the envs'
    observation spaces by a test)."""
    from clawgym_ros.tasks.registry import task_state_keys

    return task_state_keys()


def world_observation_keys(scene: str, task: str = "") -> tuple[str, ...]:
    """The observation keys a world gives: its scene's sensor keys, then, in ``task``'s task
    world, that task's task-state keys ("" = the bare scene)."""
    task_keys = task_observation_keys().get(task, ()) if task else ()
    return (*SENSOR_OBSERVATION_KEYS[scene], *task_keys)


def interposers() -> dict[str, str]:
    """family -> its interposer node (console module), from the family registry."""
    from clawgym_ros.perturbations import interposer_nodes

    return interposer_nodes()


def _f(default: Any, text: str) -> Any:
    return dataclasses.field(default=default, metadata={"help": text})


@dataclasses.dataclass(frozen=True)
class PolicyNodeConfig:
    """Parameters of ``policy_node`` (one ROS parameter per field)."""

    policy: str = _f("", "policy: a checkpoint id, or scripted:<task>[:name=value,...]")
    run_dir: str = _f("", "run directory holding the checkpoint's artifact store")
    scene: str = _f(C.SCENE_TABLETOP, "robot/scene of the observation layout: tabletop (arm) "
                    "or outdoor (mobile base)")
    task: str = _f("", "task world(s) the simulator runs, comma-separated (their task_state "
                   "gives observation keys such as place_goal); empty = the bare scene")
    kinematics_topic: str = _f("", "arm: joint states the tool pose is computed from (forward "
                               "kinematics); empty = the observed joint_states. Behind a "
                               "sensor_noise interposer: joint_states_raw (the in-process "
                               "tool pose is the true one)")
    mode: str = _f(POLICY_LOCKSTEP, "lockstep (act once per observation stamp) or free (act "
                   "on a timer at control_rate with the latest values)")
    control_rate: float = _f(50.0, "free mode: actions per second, Hz")
    image_key: str = _f("", "observation key of the camera image (e.g. wrist_camera_rgb); "
                        "empty = the policy gets no image")
    hold_timeout: float = _f(0.05, "lockstep: seconds after /clock to wait for streams of that "
                             "stamp before holding their last value (dropped samples); 0 = "
                             "every stream always arrives (no /clock subscription)")
    control_dt: float = _f(0.02, "seconds per control step (joint trajectory timing)")
    max_chunk: int = _f(MAX_CHUNK, "lockstep, arm: most control steps one joint_trajectory "
                        "commands when the policy acts open loop (its action chunk or plan); "
                        "1 = one command per observation")
    restart_clock: bool = _f(False, "free mode: after ~/reset wait for every stream's t = 0 "
                             "sample (a simulator that restarts its clock at each reset, as "
                             "sim_node does; lockstep always waits); a robot's clock never "
                             "restarts")

    def __post_init__(self) -> None:
        check_int("max_chunk", self.max_chunk, 1, 10_000)
        check_choice("scene", self.scene, (C.SCENE_TABLETOP, C.SCENE_OUTDOOR))
        check_choice("mode", self.mode, POLICY_MODES)
        check_range("control_rate", self.control_rate, 0.0, 1000.0, low_open=True)
        check_range("hold_timeout", self.hold_timeout, 0.0, 10.0)
        check_range("control_dt", self.control_dt, 0.0, 1.0, low_open=True)
        for task in self.tasks:
            check_choice("task", task, tuple(task_observation_keys()))

    @property
    def tasks(self) -> tuple[str, ...]:
        """The task worlds of :attr:`task`."""
        return tuple(t.strip() for t in self.task.split(",") if t.strip())


def uses_image(policy: Any) -> bool:
    """Whether ``policy`` reads camera images: its own ``uses_image``, else its model's (the
    :class:`~clawgym_ros.training.policies.PolicyModel` contract: ``cnn`` and any registered
    type that sets it)."""
    declared = getattr(policy, "uses_image", None)
    if declared is None:
        declared = getattr(getattr(policy, "model", None), "uses_image", False)
    return bool(declared)


def policy_task_keys(policy: Any, label: str, scene: str, tasks: Sequence[str],
                     image_key: str) -> tuple[str, ...]:
    """The task-state keys a policy's observation needs, checking that the topics of
    ``scene`` (and the task worlds ``tasks``) can give everything it observes.

    A policy declares its layout by ``obs_spec`` (key -> width, a trained checkpoint) and its
    need for camera images by :func:`uses_image`; a policy without ``obs_spec`` (the
    scripted baseline) reads only sensor keys.

    Raises:
        ConfigError: a key no topic of this world provides (naming it and what is provided).
    """
    needed = list(getattr(policy, "obs_spec", None) or ())
    if uses_image(policy) and not image_key:
        kind = getattr(getattr(getattr(policy, "model", None), "spec", None), "type", "")
        raise ConfigError("policy", label, "a policy that needs no camera image here (this "
                          f"{kind or 'policy'} reads one; set image_key)")
    sensor = SENSOR_OBSERVATION_KEYS[scene]
    by_task = task_observation_keys()
    task_keys = [k for t in tasks for k in by_task.get(t, ())]
    world = ", ".join(tasks) if tasks else f"the bare {scene} scene"
    for key in needed:
        if key not in sensor and key not in task_keys:
            raise ConfigError("policy", label, f"a policy whose observation the topics of "
                              f"{world} provide: it observes {key!r}; they give "
                              + ", ".join((*sensor, *task_keys)))
    for task in tasks:
        given = world_observation_keys(scene, task)
        missing = [k for k in needed if k not in given]
        if missing:
            raise ConfigError("policy", label, f"a policy whose observation every task world "
                              f"gives: it observes {missing[0]!r}, which {task} has not")
    return tuple(k for k in needed if k not in sensor)


class StampedBuffer:
    """Latest values per stream keyed by header stamp, deciding when an observation is ready.

    Args:
        streams: the streams one observation needs (``ObservationAssembler.required()``).
    """

    def __init__(self, streams: Sequence[str]) -> None:
        self.streams = tuple(streams)
        self.reset()

    def reset(self) -> None:
        """Forget everything (new episode)."""
        self.latest: dict[str, tuple[float, Any]] = {}
        self.acted: float | None = None
        self.clock: float | None = None
        self.clock_wall: float | None = None

    def put(self, stream: str, stamp: float, value: Any) -> None:
        """Store a stream's newest sample."""
        self.latest[stream] = (stamp, value)

    def tick(self, stamp: float, wall: float) -> None:
        """``/clock`` reached ``stamp`` (at wall time ``wall``): every sensor of it is out."""
        if self.clock != stamp:
            self.clock, self.clock_wall = stamp, wall

    def ready(self, wall: float, hold_timeout: float) -> float | None:
        """The stamp to act on now, or None.

        Ready when every stream has a sample of the newest stamp not acted on yet; or when
        ``/clock`` announced a stamp ``hold_timeout`` ago and every stream has *some* sample
        (the missing ones were dropped by an interposer: their last value is held).
        """
        if len(self.latest) < len(self.streams):
            return None
        stamps = [self.latest[s][0] for s in self.streams]
        newest = max(stamps)
        if self.clock is not None and self.clock > newest:
            newest = self.clock
        if self.acted is not None and newest <= self.acted:
            return None
        if all(s == newest for s in stamps):
            return newest
        if (self.clock == newest and self.clock_wall is not None
                and wall - self.clock_wall >= hold_timeout):
            return newest
        return None

    def values(self) -> dict[str, Any]:
        """Current value of every stream."""
        return {s: self.latest[s][1] for s in self.streams}


@dataclasses.dataclass(frozen=True)
class ProcessSpec:
    """One child process of the ROS evaluation graph."""

    name: str
    module: str
    args: tuple[str, ...]


def needed_families(specs: Iterable[EpisodeSpec]) -> list[str]:
    """Interposer families the lockstep graph runs for ``specs``, in canonical order: the
    observation side only (lighting and dynamics are applied by the lockstep driver through
    sim_node's services right after each reset, where the wrappers apply them)."""
    used = {f for s in specs for f in s.families}
    return [f for f in interposers() if f in used and f in HOLD_FAMILIES]


def ros_families() -> tuple[str, ...]:
    """The perturbation families the lockstep graph reproduces: those with an interposer node
    and those sim_node applies itself (:data:`SIM_NODE_FAMILIES`)."""
    return (*interposers(), *(f for f in SIM_NODE_FAMILIES if f not in interposers()))


def check_ros_families(specs: Iterable[EpisodeSpec]) -> None:
    """Refuse specs of a perturbation family the ROS graph cannot reproduce (no interposer and
    not applied by sim_node: a family registered without a node), before anything starts;
    such an episode would otherwise run unperturbed under its family's name.

    Raises:
        ConfigError: naming the family and those ROS mode runs.
    """
    known = ros_families()
    for spec in specs:
        for family in spec.families:
            if family not in known:
                raise ConfigError("suite", f"{spec.task} / {family}",
                                  "perturbation families ROS mode reproduces: "
                                  + ", ".join(known) + f" ({family} runs in-process "
                                  "only: --mode in_process)")


def world_name(spec: EpisodeSpec, world: str) -> str:
    """What ``sim/reset`` loads for ``spec`` in the resolved ``world`` (``task`` or ``scene``):
    ``<task>/<template>``, ``<task>`` (no template: one drawn per reset) or the bare scene."""
    if world == "task":
        return f"{spec.task}/{spec.template}" if spec.template else spec.task
    from clawgym_ros.evaluation.rollout import scene_of

    return scene_of(spec.task)


def episode_limit(task: str, world: str, max_steps: int = 0) -> int:
    """Control steps per episode: ``max_steps``, else the env's own limit (the in-process
    runner's rule: the task env's in the ``task`` world, the bare scene env's otherwise)."""
    if max_steps:
        return int(max_steps)
    from clawgym_ros.sim.registration import ENVS
    from clawgym_ros.tasks.registry import get_task

    if world == "task":
        env_id = get_task(task).env_id
    else:
        from clawgym_ros.evaluation.rollout import scene_env_of

        env_id = scene_env_of(task)
    return int(ENVS[env_id][1] or 500)


def graph_processes(specs: Sequence[EpisodeSpec], policy: str, run_dir: str,
                    scene: str = C.SCENE_TABLETOP, image: bool = False,
                    max_chunk: int | None = None, world: str = "scene",
                    mode: str = POLICY_LOCKSTEP, control_rate: float = 50.0,
                    image_size: int = 0) -> list[ProcessSpec]:
    """sim_node (lockstep), the interposers the specs need and policy_node, with remaps.

    Without an observation interposer the policy reads the raw topics directly (remapped).
    ``max_chunk`` sets policy_node's (None: its default). ``world`` (``task`` or ``scene``,
    resolved): in the task world sim_node starts in the first spec's task world and
    policy_node is told the suite's tasks (their ``task_state`` observation keys).
    ``mode`` ``free``: the free-running shape instead (sim_node in real time, policy_node on
    its timer at ``control_rate``, waiting for the t = 0 samples after each ``~/reset``;
    nominal specs only: no interposers). ``image``: policy_node reads the camera
    (``image_key``), rendered by sim_node at ``image_size`` pixels square (0 = its default).

    Raises:
        ConfigError: specs of several scenes, or perturbed specs in free mode.
    """
    check_choice("mode", mode, POLICY_MODES)
    if mode == POLICY_FREE and needed_families(specs):
        raise ConfigError("suite", needed_families(specs), "nominal cells only in free mode")
    from clawgym_ros.evaluation.rollout import scene_of

    scenes = {scene_of(s.task) for s in specs}
    if len(scenes) > 1:
        raise ConfigError("suite", sorted(scenes), "tasks of one scene per ros evaluation")
    families = needed_families(specs)
    # Streams may miss a stamp only behind gps_dropout (sensor_noise_node republishes held
    # values in lockstep): then policy_node needs /clock to hold their last value; otherwise
    # neither /clock nor the wait is needed.
    hold = any(f in families for f in CLOCK_HOLD_FAMILIES)
    free = mode == POLICY_FREE
    sim_args = ["--autostart", "--ros-args", "-p", f"scenario:={scene}",
                "-p", f"clock_mode:={'free' if free else 'lockstep'}",
                "-p", f"publish_camera:={str(image).lower()}",
                "-p", f"publish_clock:={str(hold).lower()}"]
    if image and image_size:
        sim_args += ["-p", f"image_width:={int(image_size)}",
                     "-p", f"image_height:={int(image_size)}"]
    if scene == C.SCENE_TABLETOP:
        # Only what the arm observation needs (fewer entities: faster lockstep callbacks).
        sim_args += ["-p", "publish_imu:=false", "-p", "publish_gps:=false",
                     "-p", "publish_odom:=false"]
    tasks = list(dict.fromkeys(s.task for s in specs)) if world == "task" else []
    if tasks:
        sim_args += ["-p", f"task:={specs[0].task}"]
        if specs[0].template:
            sim_args += ["-p", f"template:={specs[0].template}"]
    procs = [ProcessSpec(C.NODE_SIM, "clawgym_ros.nodes.sim_node", tuple(sim_args))]
    for family in families:
        node = interposers()[family]
        # The observation interposers sit between two lockstep nodes: reliable both ways (a
        # lost input would shift their random stream away from the in-process wrapper's).
        args = (("--ros-args", "-p", "reliable:=true") if family in HOLD_FAMILIES else ())
        if family == C.FAMILY_GPS_DROPOUT:
            # Every stamp gets a fix (held through outages, as the wrapper shows it).
            args += ("-p", "hold:=true")
        procs.append(ProcessSpec(node, f"clawgym_ros.nodes.{node}", args))
    remaps: list[str] = []
    if C.FAMILY_SENSOR_NOISE not in families:
        remaps += [f"{C.TOPIC_JOINT_STATES}:={C.TOPIC_JOINT_STATES_RAW}",
                   f"{C.TOPIC_OBJECT_POSES}:={C.TOPIC_OBJECT_POSES_RAW}",
                   f"{C.TOPIC_IMAGE}:={C.TOPIC_IMAGE_RAW}", f"{C.TOPIC_IMU}:={C.TOPIC_IMU_RAW}"]
    if C.FAMILY_GPS_DROPOUT not in families:
        remaps.append(f"{C.TOPIC_GPS}:={C.TOPIC_GPS_RAW}")
    policy_args = ["--ros-args", "-p", f"policy:={policy}", "-p", f"scene:={scene}",
                   "-p", f"mode:={mode}"]
    if free:
        policy_args += ["-p", f"control_rate:={float(control_rate)}", "-p", "restart_clock:=true"]
    if tasks:
        policy_args += ["-p", f"task:={','.join(tasks)}"]
    if C.FAMILY_SENSOR_NOISE in families and scene == C.SCENE_TABLETOP:
        policy_args += ["-p", f"kinematics_topic:={C.TOPIC_JOINT_STATES_RAW}"]
    if not hold and not free:
        policy_args += ["-p", "hold_timeout:=0.0"]
    if max_chunk is not None:
        policy_args += ["-p", f"max_chunk:={int(max_chunk)}"]
    if run_dir:
        # An empty parameter value does not parse on the ROS command line.
        policy_args += ["-p", f"run_dir:={run_dir}"]
    if image:
        camera = C.CAMERA_WRIST if scene == C.SCENE_TABLETOP else C.CAMERA_FRONT
        policy_args += ["-p", f"image_key:={camera}_rgb"]
    for remap in remaps:
        policy_args += ["-r", remap]
    procs.append(ProcessSpec(C.NODE_POLICY, "clawgym_ros.nodes.policy_node", tuple(policy_args)))
    return procs
