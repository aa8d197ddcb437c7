"""Free-running ROS evaluation: sim_node in real time, policy_node on its timer, the evaluator
only watching (the shape of an evaluation against Gazebo or a robot), beside lockstep.

:func:`run_free_graph` starts sim_node (``clock_mode`` free, real time) and policy_node
(``mode`` free at the control rate, ``restart_clock``) in an isolated domain
(:func:`~clawgym_ros.evaluation.ros_mode.graph_processes` with ``mode`` free) and runs each
episode spec: ``policy_node/reset``, then ``sim/reset`` (seed, world); from then on nothing
waits for anyone. :class:`FreeWatcher` scores the ground truth sim_node publishes
(``joint_states_raw`` + ``object_poses_raw`` of one stamp, plus ``task_state`` in a task world)
with the same :class:`~clawgym_ros.evaluation.rollout.EpisodeScorer` and stage tracking as
lockstep, until success or the episode's step limit in simulation time. Samples are
best effort: a stamp missing one of its streams is skipped (counted in ``lost``).

Latency (sensor -> command): for every ``joint_trajectory`` policy_node publishes (stamped with
the observation it acted on), the wall time from the arrival here of that stamp's
``joint_states_raw`` to the arrival here of the command; this process receives both as
policy_node does, so it spans policy_node's wait for its next timer tick, the policy call and
the command's hop. The first command of each episode is reported apart (a planning policy
plans there).

Nominal arm specs only (no interposers; the bare scene or arm task worlds).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseArray
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from clawgym_interfaces.msg import TaskState
from clawgym_interfaces.srv import ResetSim
from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.observation import ObservationAssembler
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.rollout import (
    WORLD_TASK,
    EpisodeScorer,
    joint_limits,
    resolve_world,
    scene_of,
)
from clawgym_ros.evaluation.ros_mode import (
    POLICY_FREE,
    SRV_POLICY_RESET,
    episode_limit,
    graph_processes,
    world_name,
)
from clawgym_ros.evaluation.scripted import LiftTracker
from clawgym_ros.evaluation.suites import EpisodeSpec
from clawgym_ros.ros_io import sensors
from clawgym_ros.ros_io.convert import stamp_nanos
from clawgym_ros.ros_io.eval_lockstep import (
    HANDSHAKE_RESET_S,
    AnswerTimeoutError,
    LockstepError,
    call_service,
)
from clawgym_ros.ros_io.qos import COMMAND_QOS, SENSOR_QOS, TASK_STATE_QOS

CONTROL_DT = 0.02


class FreeWatcher:
    """Watches free-running episodes on ``node`` (spun by ``executor`` in this thread).

    Args:
        node: the node owning the clients and subscriptions.
        executor: the executor spinning ``node``.
        timeout: seconds to wait for a service answer or the next sample.
        max_steps: control steps per episode (simulation time); 0 = the env's limit.
        world: ``auto``, ``task`` or ``scene``.
    """

    def __init__(self, node: Any, executor: Any, timeout: float = 10.0, max_steps: int = 0,
                 world: str = "scene") -> None:
        self.node, self.executor = node, executor
        self.timeout, self.max_steps, self.world = timeout, max_steps, world
        self.assembler = ObservationAssembler(C.SCENE_TABLETOP)
        self.reset_client = node.create_client(ResetSim, C.SRV_RESET)
        self.policy_client = node.create_client(Trigger, f"{C.NODE_POLICY}/{SRV_POLICY_RESET}")
        # stamp ns -> {stream: sample}; arrival wall time of each joint_states stamp.
        self._samples: dict[int, dict[str, Any]] = collections.defaultdict(dict)
        self._arrival: dict[int, float] = {}
        self._streams: tuple[str, ...] = ("joints", "objects")
        # After a reset: streams whose t = 0 sample has not arrived (earlier ones are the last
        # episode's, still in flight).
        self._starting: set[str] = set()
        self._last_ns: dict[str, int] = {}
        self._commanded: set[int] = set()
        self._commands = 0
        self.latencies_ms: list[float] = []
        self.first_latencies_ms: list[float] = []
        self.lost = 0
        self._subs = [
            node.create_subscription(JointState, C.TOPIC_JOINT_STATES_RAW,
                                     lambda m: self._on_sample("joints", m), SENSOR_QOS),
            node.create_subscription(PoseArray, C.TOPIC_OBJECT_POSES_RAW,
                                     lambda m: self._on_sample("objects", m), SENSOR_QOS),
            node.create_subscription(TaskState, C.TOPIC_TASK_STATE, self._on_task,
                                     TASK_STATE_QOS),
            node.create_subscription(JointTrajectory, C.TOPIC_JOINT_TRAJECTORY,
                                     self._on_command, COMMAND_QOS),
        ]

    def close(self) -> None:
        for sub in self._subs:
            self.node.destroy_subscription(sub)
        for client in (self.reset_client, self.policy_client):
            self.node.destroy_client(client)

    # ------------------------------------------------------------------ inputs
    def _on_sample(self, stream: str, msg: Any, stamp: Any = None) -> None:
        ns = stamp_nanos(msg.header.stamp if stamp is None else stamp)
        last = self._last_ns.get(stream)
        self._last_ns[stream] = ns
        if stream in self._starting:
            # The new episode's first sample: t = 0, or (that one lost: best effort) the first
            # whose stamp goes back; later ones of the last episode are still in flight.
            if ns != 0 and last is not None and ns >= last:
                return
            self._starting.discard(stream)
        self._samples[ns][stream] = msg
        if stream == "joints":
            self._arrival.setdefault(ns, time.monotonic())

    def _on_task(self, msg: TaskState) -> None:
        stamp, state = sensors.task_state_values(msg)
        self._on_sample("task", state, stamp)

    def _on_command(self, msg: JointTrajectory) -> None:
        # The first command acting on each joint_states sample (policy_node re-sends the
        # latest values on every tick when no newer sample came).
        self._commands += 1
        ns = stamp_nanos(msg.header.stamp)
        arrived = self._arrival.get(ns)
        if arrived is not None and ns not in self._commanded:
            first = not self._commanded
            self._commanded.add(ns)
            latency = (time.monotonic() - arrived) * 1e3
            (self.first_latencies_ms if first else self.latencies_ms).append(latency)

    # ------------------------------------------------------------------ waiting
    def _call(self, client: Any, request: Any, what: str, timeout: float | None = None
              ) -> Any:
        return call_service(client, request, what, self.timeout if timeout is None else timeout,
                            self.executor, "free evaluation")

    def wait_flowing(self, task_world: bool, timeout: float) -> None:
        """Until the ground truth streams and policy_node's commands reach this node (DDS
        matches endpoints on its own; a sample published before its subscriber matched is
        gone, so the first reset waits for this).

        Raises:
            LockstepError: something did not arrive within ``timeout`` seconds.
        """
        streams = ("joints", "objects", "task") if task_world else ("joints", "objects")
        deadline = time.monotonic() + timeout
        while not (all(s in self._last_ns for s in streams) and self._commands):
            if time.monotonic() > deadline:
                missing = [s for s in streams if s not in self._last_ns]
                missing += [] if self._commands else ["policy_node's joint_trajectory"]
                raise LockstepError(f"free evaluation: no {', '.join(missing)} within "
                                    f"{timeout:g} s (topics not matched)")
            self.executor.spin_once(timeout_sec=0.05)
        # The first answers after discovery can be lost: ask policy_node (an idempotent reset)
        # until one comes back, so the first episode's reset is not the one that waits.
        while True:
            try:
                self._call(self.policy_client, Trigger.Request(), "policy_node reset",
                           min(HANDSHAKE_RESET_S, max(deadline - time.monotonic(), 0.1)))
                break
            except AnswerTimeoutError:
                if time.monotonic() > deadline:
                    raise
        # What came before the first episode is not measured.
        self.latencies_ms, self.first_latencies_ms, self.lost = [], [], 0

    # ------------------------------------------------------------------ episodes
    def run_episode(self, spec: EpisodeSpec) -> EpisodeResult:
        """Reset the policy and the simulator, then score what happens until success or the
        step limit (simulation time)."""
        world = resolve_world(spec.task, self.world)
        if scene_of(spec.task) != C.SCENE_TABLETOP or spec.families:
            raise ConfigError("spec", spec.task, "nominal arm episodes (free-running mode)")
        task_world = world == WORLD_TASK
        self._streams = ("joints", "objects", "task") if task_world else ("joints", "objects")
        limit_s = episode_limit(spec.task, world, self.max_steps) * CONTROL_DT
        # From here on only the new episode's samples (from its t = 0 ones) and commands.
        self._samples.clear()
        self._arrival.clear()
        self._commanded = set()
        self._starting = set(self._streams)
        self._call(self.policy_client, Trigger.Request(), "policy_node reset")
        reset = self._call(self.reset_client, ResetSim.Request(
            seed=int(spec.seed), scenario=world_name(spec, world)), "sim/reset")
        start_ns = stamp_nanos(reset.stamp) - 1
        tracker = None if task_world else LiftTracker()
        if task_world:
            from clawgym_ros.tasks.registry import get_task

            max_force = get_task(spec.task).max_contact_force
            stages: Sequence[str] = ()
        else:
            max_force, stages = float("inf"), tracker.stages
        scorer = EpisodeScorer(spec, CONTROL_DT, joint_limits(C.SCENE_TABLETOP), max_force)
        reached: list[str] = []
        success = False
        seen_ns = start_ns
        deadline = time.monotonic() + limit_s * 3 + self.timeout
        while True:
            ready = self._take(seen_ns)
            if not ready:
                if time.monotonic() > deadline:
                    waiting = ", ".join(sorted(self._starting)) or "none"
                    raise LockstepError(
                        f"free evaluation: episode {spec.index}: no ground truth after "
                        f"t={max(seen_ns, 0) * 1e-9:.3f} within {self.timeout:g} s (streams "
                        f"still waiting for their t = 0 sample: {waiting})")
                self.executor.spin_once(timeout_sec=0.05)
                continue
            ended = False
            for ns, sample in ready:
                seen_ns = ns
                t = ns * 1e-9
                js = sample["joints"]
                state = self.assembler.joints(js.name, js.position, js.velocity)
                state[C.OBS_OBJECT_POSES] = sensors.pose_array_values(sample["objects"])
                task = sample.get("task")
                force, collision = ((task["contact_force"], task["collision"]) if task
                                    else (0.0, False))
                if not scorer.observe(t, state, float(force), bool(collision)):
                    ended = True
                    break
                if task is not None:
                    stages = task["stages"]
                    reached, success = list(task["stages_reached"]), bool(task["success"])
                else:
                    tracker.update(t, state)
                    reached, success = tracker.reached_names, tracker.success(state)[0]
                if success or t >= limit_s - 1e-9:
                    ended = True
                    break
            if ended:
                break
        return scorer.result(stages, reached, success)

    def _take(self, after_ns: int) -> list[tuple[int, dict[str, Any]]]:
        """The complete stamps after ``after_ns`` in order (incomplete older ones dropped)."""
        complete = sorted(ns for ns, s in self._samples.items()
                          if ns > after_ns and all(k in s for k in self._streams))
        if not complete:
            return []
        newest = complete[-1]
        out = []
        for ns in sorted(self._samples):
            if ns > newest:
                break
            sample = self._samples.pop(ns)
            if ns in complete:
                out.append((ns, sample))
            elif ns > after_ns:
                self.lost += 1
        return out

    def latency(self) -> dict[str, Any]:
        """Sensor -> command latency in ms: median, p95, max and count of the commands after
        each episode's first, and of the first ones."""
        def stats(values: list[float]) -> dict[str, Any]:
            if not values:
                return {"n": 0}
            a = np.asarray(values)
            return {"n": int(a.size), "median_ms": round(float(np.median(a)), 2),
                    "p95_ms": round(float(np.percentile(a, 95)), 2),
                    "max_ms": round(float(a.max()), 2),
                    "within_control_dt": round(float((a <= CONTROL_DT * 1e3).mean()), 3)}

        return {"steady": stats(self.latencies_ms), "first_of_episode":
                stats(self.first_latencies_ms)}


def run_free_graph(specs: Sequence[EpisodeSpec], policy: str, run_dir: str, max_steps: int,
                   timeout: float = C.ROS_ANSWER_TIMEOUT_S, log_dir: str | Path | None = None,
                   world: str = "scene", control_rate: float = 50.0,
                   progress: Callable[[int, int, int], None] | None = None
                   ) -> tuple[list[EpisodeResult], dict[str, Any]]:
    """Start the free-running graph, watch ``specs``, stop it: (results, latency and lost
    sample counts).

    Raises:
        LockstepError: the graph did not come up or a node exited.
        ConfigError: specs free-running mode does not run (perturbed, mobile base).
    """
    from rclpy.executors import SingleThreadedExecutor

    from clawgym_ros.ros_io.eval_graph import check_children, graph_with_helper

    def single_threaded(node: Any, context: Any) -> SingleThreadedExecutor:
        out = SingleThreadedExecutor(context=context)
        out.add_node(node)
        return out

    for spec in specs:
        if scene_of(spec.task) != C.SCENE_TABLETOP or spec.families:
            raise ConfigError("suite", f"{spec.task} / {spec.family}",
                              "nominal arm episodes (free-running mode)")
    start_world = resolve_world(specs[0].task, world) if specs else "scene"
    run_dir = str(Path(run_dir).resolve()) if run_dir else ""
    processes = graph_processes(specs, policy, run_dir, world=start_world, mode=POLICY_FREE,
                                control_rate=control_rate)
    with graph_with_helper(processes, f"{C.NODE_EVALUATOR}_free", log_dir,
                           single_threaded) as (group, node, spinner):
        watcher = FreeWatcher(node, spinner, timeout, max_steps, world)
        try:
            deadline = time.monotonic() + max(60.0, timeout)
            for client in (watcher.reset_client, watcher.policy_client):
                while not client.wait_for_service(timeout_sec=0.25):
                    check_children(group)
                    if time.monotonic() > deadline:
                        raise LockstepError(f"free evaluation: {client.srv_name} did not come "
                                            f"up within {max(60.0, timeout):g} s")
            watcher.wait_flowing(start_world == WORLD_TASK, max(60.0, timeout))
            results: list[EpisodeResult] = []
            for spec in specs:
                check_children(group)
                results.append(watcher.run_episode(spec))
                if progress is not None:
                    progress(len(results), len(specs), sum(r.success for r in results))
            return results, {"latency": watcher.latency(), "lost_samples": watcher.lost}
        finally:
            watcher.close()
