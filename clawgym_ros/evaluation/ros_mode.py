"""ROS evaluation mode, pure parts: node configs, the graph to start, and the stamp-keyed
observation buffer of ``policy_node``.

The ROS path runs the same Policy inside ``policy_node`` against live topics. With the MuJoCo
``sim_node`` in lockstep the evaluator drives the clock (``sim/reset``, ``sim/step``) and the
episode unfolds exactly as in-process:

1. the evaluator configures the perturbation nodes of the spec's cell (seed =
   ``perturbation_seed``) and starts their episode with ``spec.seed`` (the ROS counterpart of
   ``env.reset(seed=...)``), calls ``policy_node/reset`` (``policy.reset()``), then
   ``sim/reset(seed)``, and reads the state at t = 0 (``sim/step`` with ``no_step`` and
   ``return_state``);
2. sim_node publishes every sensor the policy needs stamped with the new simulation time
   (images only when the policy reads them); ``policy_node`` assembles the observation of that
   stamp (:class:`StampedBuffer`; when interposers may drop samples it also listens to
   ``/clock`` and holds a dropped stream's last value, as the Gymnasium wrappers do), calls
   the policy and publishes one ``joint_trajectory`` (header stamp = the observation's; the
   gripper rides along as finger joints, so one message is the whole action);
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
rate with the latest values; the evaluator then only watches (not covered by the agreement
test).
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
#: Families whose interposers may drop sensor samples (policy_node then holds via /clock).
HOLD_FAMILIES: tuple[str, ...] = C.OBSERVATION_FAMILIES
#: Interposer node of each observation-side family and its console module.
INTERPOSERS: dict[str, str] = {
    C.FAMILY_SENSOR_NOISE: C.NODE_SENSOR_NOISE,
    C.FAMILY_GPS_DROPOUT: C.NODE_GPS_DROPOUT,
    C.FAMILY_LIGHTING: C.NODE_LIGHTING,
    C.FAMILY_DYNAMICS: C.NODE_DYNAMICS,
}


def _f(default: Any, text: str) -> Any:
    return dataclasses.field(default=default, metadata={"help": text})


@dataclasses.dataclass(frozen=True)
class PolicyNodeConfig:
    """Parameters of ``policy_node`` (one ROS parameter per field)."""

    policy: str = _f("", "policy: a checkpoint id, or scripted:<task>[:name=value,...]")
    run_dir: str = _f("", "run directory holding the checkpoint's artifact store")
    scene: str = _f(C.SCENE_TABLETOP, "robot/scene of the observation layout: tabletop (arm) "
                    "or outdoor (mobile base)")
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

    def __post_init__(self) -> None:
        check_int("max_chunk", self.max_chunk, 1, 10_000)
        check_choice("scene", self.scene, (C.SCENE_TABLETOP, C.SCENE_OUTDOOR))
        check_choice("mode", self.mode, POLICY_MODES)
        check_range("control_rate", self.control_rate, 0.0, 1000.0, low_open=True)
        check_range("hold_timeout", self.hold_timeout, 0.0, 10.0)
        check_range("control_dt", self.control_dt, 0.0, 1.0, low_open=True)


@dataclasses.dataclass(frozen=True)
class EvaluatorNodeConfig:
    """Parameters of ``evaluator_node`` (one ROS parameter per field)."""

    run_dir: str = _f(C.DEFAULT_RUN_DIR, "default run directory (a goal's run_dir wins)")
    step_timeout: float = _f(5.0, "ros mode: seconds to wait for an action or a state")
    max_steps: int = _f(0, "control steps per episode; 0 = the env's limit")
    world: str = _f("auto", "in_process world: auto, task or scene (ros mode: scene)")
    autostart: bool = _f(False, "configure and activate at start")

    def __post_init__(self) -> None:
        check_range("step_timeout", self.step_timeout, 0.0, 600.0, low_open=True)


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
    """Perturbation families any spec uses, in canonical order."""
    used = {f for s in specs for f in s.families}
    return [f for f in INTERPOSERS if f in used]


def graph_processes(specs: Sequence[EpisodeSpec], policy: str, run_dir: str,
                    scene: str = C.SCENE_TABLETOP, image: bool = False,
                    max_chunk: int | None = None) -> list[ProcessSpec]:
    """sim_node (lockstep), the interposers the specs need and policy_node, with remaps.

    Without an observation interposer the policy reads the raw topics directly (remapped).
    ``max_chunk`` sets policy_node's (None: its default).

    Raises:
        ConfigError: specs of several scenes.
    """
    scenes = {("outdoor" if s.task == C.TASK_GPS_NAV else C.SCENE_TABLETOP) for s in specs}
    if len(scenes) > 1:
        raise ConfigError("suite", sorted(scenes), "tasks of one scene per ros evaluation")
    families = needed_families(specs)
    # Streams may miss a stamp only behind an observation interposer: then policy_node needs
    # /clock to hold their last value; otherwise neither /clock nor the wait is needed.
    hold = any(f in families for f in HOLD_FAMILIES)
    sim_args = ["--autostart", "--ros-args", "-p", f"scenario:={scene}",
                "-p", "clock_mode:=lockstep", "-p", f"publish_camera:={str(image).lower()}",
                "-p", f"publish_clock:={str(hold).lower()}"]
    if scene == C.SCENE_TABLETOP:
        # Only what the arm observation needs (fewer entities: faster lockstep callbacks).
        sim_args += ["-p", "publish_imu:=false", "-p", "publish_gps:=false",
                     "-p", "publish_odom:=false"]
    procs = [ProcessSpec(C.NODE_SIM, "clawgym_ros.nodes.sim_node", tuple(sim_args))]
    for family in families:
        node = INTERPOSERS[family]
        # The observation interposers sit between two lockstep nodes: reliable both ways (a
        # lost input would shift their random stream away from the in-process wrapper's).
        args = (("--ros-args", "-p", "reliable:=true") if family in HOLD_FAMILIES else ())
        procs.append(ProcessSpec(node, f"clawgym_ros.nodes.{node}", args))
    remaps: list[str] = []
    if C.FAMILY_SENSOR_NOISE not in families:
        remaps += [f"{C.TOPIC_JOINT_STATES}:={C.TOPIC_JOINT_STATES_RAW}",
                   f"{C.TOPIC_OBJECT_POSES}:={C.TOPIC_OBJECT_POSES_RAW}",
                   f"{C.TOPIC_IMAGE}:={C.TOPIC_IMAGE_RAW}", f"{C.TOPIC_IMU}:={C.TOPIC_IMU_RAW}"]
    if C.FAMILY_GPS_DROPOUT not in families:
        remaps.append(f"{C.TOPIC_GPS}:={C.TOPIC_GPS_RAW}")
    policy_args = ["--ros-args", "-p", f"policy:={policy}", "-p", f"scene:={scene}",
                   "-p", f"mode:={POLICY_LOCKSTEP}"]
    if not hold:
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
