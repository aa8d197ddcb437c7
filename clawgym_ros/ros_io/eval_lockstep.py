"""The evaluator's ROS lockstep driver: runs episode specs through sim_node + policy_node.

:class:`LockstepEvaluator` owns service clients (``sim/reset``, ``sim/step``,
``policy_node/reset``, ``<interposer>/set_perturbation``) and two reliable subscriptions (the
ground truth ``joint_states_raw`` and ``object_poses_raw``) on a node. Either an executor is
given and the driver spins it itself in the calling thread (the CLI: no second thread, no GIL
ping-pong), or the node's executor runs in *another* thread (``evaluator_node``) and
:meth:`run` waits on the futures. The protocol is described in
:mod:`clawgym_ros.evaluation.ros_mode`: one ``sim/step`` runs :data:`RUN_STEPS` control
steps, each waiting, inside sim_node, for the policy's command stamped with the time it starts
at, while the driver scores the published ground truth of every step as it arrives (so the
evaluator is off the per-step critical path). Scoring uses the same
:class:`~clawgym_ros.evaluation.rollout.EpisodeScorer` as the in-process path, on the true state
rebuilt from that ground truth (tool pose by forward kinematics): in the ``task`` world the
stages, success, contact force and collision of every step come from sim_node's
``task_state`` (the task env's own stage tracker, the very code the in-process path runs); in
the ``scene`` world from :class:`~clawgym_ros.evaluation.scripted.LiftTracker`.

The GPS dropout's outages happen in gps_dropout_node; the driver advances a copy of its core
on the same stamps (the decisions depend on stamps and seed only) for the recorded outage
count. Backend-side perturbations (lighting, dynamics) are applied by this driver through
``sim/set_lighting`` / ``sim/set_dynamics`` right after each reset, as the Gymnasium wrappers
apply them after ``env.reset`` (the lighting/dynamics nodes re-send on wall-clock timers, which
cannot hit a lockstep step exactly); the lighting perturbation is advanced every step as the
wrapper advances it (its recorded parameters), but only the reset's lighting is sent, so
images of a time-varying lighting schedule are not reproduced step by step.

The camera pose (``camera_pose``) is drawn per episode by the driver's copy of the core, as
in-process, and sent once through ``sim/set_camera_pose`` after the reset.

Disturbances (task worlds): before each reset of a disturbance cell the driver sends the
cell's :class:`~clawgym_ros.perturbations.disturbance.DisturbanceConfig` to
``sim/set_disturbance`` (a fresh core per episode, as in-process; ``none`` once after the last
such cell); sim_node then steps its task env through the in-process
:class:`~clawgym_ros.perturbations.disturbance.DisturbanceWrapper`, so the event fires at the
same step with the same size, and publishes the core's state and the recovery record on
``disturbance_state`` after every step (:mod:`clawgym_ros.ros_io.disturbance`). The driver
takes them with the other ground truth of each step: the episode's ``disturbance.*``
parameters are those of its last step, its ``recovery`` that of the last step the scorer
accepted (the in-process runner's rule).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseArray
from nav_msgs.msg import Odometry
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from clawgym_interfaces.msg import PerturbationState, TaskState
from clawgym_interfaces.srv import (
    ResetSim,
    SetCameraPose,
    SetDynamics,
    SetLighting,
    SetPerturbation,
    StepSim,
)
from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError, ConfigError
from clawgym_ros.evaluation.observation import ObservationAssembler, odom_vector
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.rollout import (
    WORLD_SCENE,
    WORLD_TASK,
    EpisodeScorer,
    joint_limits,
    perturbation_values,
    perturbations_of,
    resolve_world,
    scene_of,
)
from clawgym_ros.evaluation.ros_mode import (
    SRV_POLICY_RESET,
    episode_limit,
    interposers,
    world_name,
)
from clawgym_ros.evaluation.scripted import LiftTracker
from clawgym_ros.evaluation.suites import EpisodeSpec
from clawgym_ros.ros_io import sensors
from clawgym_ros.ros_io.convert import nanos, stamp_nanos, time_seconds
from clawgym_ros.ros_io.disturbance import disturbance_request, disturbance_state_values
from clawgym_ros.ros_io.sim_services import (
    camera_pose_request,
    dynamics_request,
    lighting_request,
)

CONTROL_DT = 0.02
#: Control steps per ``sim/step`` request: the evaluator's round trip is paid once per run;
#: an episode that ends inside a run lets sim_node finish it (at most RUN_STEPS - 1 unscored
#: steps, whose states are discarded).
RUN_STEPS = 10
#: Ground-truth samples the driver may hold untaken (> RUN_STEPS + the t = 0 samples).
TRUTH_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=64,
                       reliability=ReliabilityPolicy.RELIABLE)


class LockstepError(ClawgymError):
    """The ROS graph did not answer in time (a node missing, a message lost)."""


class AnswerTimeoutError(LockstepError):
    """A service call got no answer in time (the node is busy, gone, or its answer was lost:
    just after discovery a server may answer before it matched the client's reply reader)."""


def call_service(client: Any, request: Any, what: str, timeout: float, executor: Any | None,
                 where: str) -> Any:
    """``client``'s answer to ``request`` within ``timeout`` seconds, spinning ``executor`` in
    this thread (None: the node is spun by another thread); ``what`` and ``where`` name the
    call in errors.

    Raises:
        LockstepError: the service is not there, or it answered ``success`` False.
        AnswerTimeoutError: no answer in time (the pending request is dropped).
    """
    if not client.service_is_ready() and not client.wait_for_service(timeout_sec=timeout):
        raise LockstepError(f"{where}: service {client.srv_name} is not available ({what})")
    future = client.call_async(request)
    if executor is not None:
        executor.spin_until_future_complete(future, timeout_sec=timeout)
        done = future.done()
    else:
        event = threading.Event()
        future.add_done_callback(lambda _: event.set())
        done = event.wait(timeout)
    if not done:
        client.remove_pending_request(future)
        raise AnswerTimeoutError(f"{where}: {what} timed out after {timeout:g} s")
    response = future.result()
    if hasattr(response, "success") and not response.success:
        raise LockstepError(f"{where}: {what} failed: {response.message}")
    return response


class LockstepEvaluator:
    """Drives lockstep episodes on ``node``.

    Args:
        node: the node owning the clients.
        families: perturbation families whose interposer nodes run.
        timeout: seconds to wait for any answer (including the policy's command, which
            sim_node awaits within a step).
        max_steps: control steps per episode; 0 = the episode's env limit.
        scene: the simulated scene (``tabletop``).
        executor: spin this executor in the calling thread while waiting; None = the node is
            spun by another thread.
        world: ``auto``, ``task`` or ``scene`` (as in-process: ``resolve_world``).
        start_world: the world sim_node simulates before the first reset (``task`` world:
            its ``task_state`` is part of the handshake).
    """

    def __init__(self, node: Node, families: Sequence[str] = (), timeout: float = 5.0,
                 max_steps: int = 500, scene: str = C.SCENE_TABLETOP,
                 executor: Any | None = None, world: str = WORLD_SCENE,
                 start_world: str = WORLD_SCENE) -> None:
        self.node = node
        self.timeout = timeout
        self.max_steps = max_steps
        self.scene = scene
        self.executor = executor
        self.world = world
        # The ground-truth streams of the current world (a task world adds task_state).
        self._streams: tuple[str, ...] = self._world_streams(scene, start_world == WORLD_TASK)
        self.steps_done = 0
        self._dt_ns = nanos(CONTROL_DT)
        self._assemblers = {scene: ObservationAssembler(scene)}
        self.assembler = self._assemblers[scene]
        self.reset_client = node.create_client(ResetSim, C.SRV_RESET)
        self.step_client = node.create_client(StepSim, C.SRV_STEP)
        self.policy_client = node.create_client(Trigger, f"{C.NODE_POLICY}/{SRV_POLICY_RESET}")
        nodes = interposers()
        self.perturbation_clients = {
            f: node.create_client(SetPerturbation, f"{nodes[f]}/{C.SRV_SET_PERTURBATION}")
            for f in families}
        self.lighting_client = node.create_client(SetLighting, C.SRV_SET_LIGHTING)
        self.dynamics_client = node.create_client(SetDynamics, C.SRV_SET_DYNAMICS)
        self.camera_pose_client = node.create_client(SetCameraPose, C.SRV_SET_CAMERA_POSE)
        self.disturbance_client = node.create_client(SetPerturbation, C.SRV_SET_DISTURBANCE)
        # Whether sim_node was last told to disturb (it is told 'none' once afterwards).
        self._disturbing = False
        # Ground truth per stream, in arrival order (one writer each: in stamp order).
        self._truth: dict[str, collections.deque] = {
            key: collections.deque()
            for key in ("joints", "objects", "odom", "task", "disturbance")}
        self._arrived = threading.Condition()
        self._subs = [
            node.create_subscription(
                msg_type, topic, lambda msg, key=key: self._on_truth(key, msg), TRUTH_QOS,
                event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False))
            for key, msg_type, topic in (("joints", JointState, C.TOPIC_JOINT_STATES_RAW),
                                         ("objects", PoseArray, C.TOPIC_OBJECT_POSES_RAW),
                                         ("odom", Odometry, C.TOPIC_ODOM_TRUTH),
                                         ("task", TaskState, C.TOPIC_TASK_STATE),
                                         ("disturbance", PerturbationState,
                                          C.TOPIC_DISTURBANCE_STATE))]

    @staticmethod
    def _world_streams(scene: str, task_world: bool, disturbed: bool = False
                       ) -> tuple[str, ...]:
        """The ground truth of a scene: joints and object poses (arm) or joints and the true
        odometry (``ground_truth/odom``; ``odom`` is the robot's own, wheel odometry in gps_nav)
        (mobile base: the scorer's position and the stages' input), plus task_state (and
        disturbance_state in a disturbance cell)."""
        return ("joints", "objects" if scene == C.SCENE_TABLETOP else "odom") + (
            ("task",) if task_world else ()) + (("disturbance",) if disturbed else ())

    def _use_scene(self, scene: str) -> None:
        if scene not in self._assemblers:
            self._assemblers[scene] = ObservationAssembler(scene)
        self.scene, self.assembler = scene, self._assemblers[scene]

    @property
    def clients(self) -> tuple[Any, ...]:
        """Every service client of the driver."""
        return (self.reset_client, self.step_client, self.policy_client, self.lighting_client,
                self.dynamics_client, self.camera_pose_client, self.disturbance_client,
                *self.perturbation_clients.values())

    def close(self) -> None:
        """Destroy the clients."""
        for client in self.clients:
            self.node.destroy_client(client)
        self.perturbation_clients = {}
        for sub in self._subs:
            self.node.destroy_subscription(sub)
        self._subs = []

    def _on_truth(self, key: str, msg: Any) -> None:
        if key == "task":
            # Same shape as the other samples: .header.stamp, plus the state as a dict.
            stamp, state = sensors.task_state_values(msg)
            msg = types.SimpleNamespace(header=types.SimpleNamespace(stamp=stamp), state=state)
        with self._arrived:
            self._truth[key].append(msg)
            self._arrived.notify()

    # ------------------------------------------------------------------ waiting
    def _call(self, client, request, what: str, timeout: float | None = None):
        return call_service(client, request, what, self.timeout if timeout is None else timeout,
                            self.executor, "ros evaluation")

    def _wait_for(self, ready: Callable[[], bool], what: str, future: Any = None,
                  timeout: float | None = None) -> None:
        """Spin (or, spun elsewhere, sleep) until ``ready()`` (at most ``timeout``, default
        the evaluator's); a failed ``future`` (a run sim_node gave up) raises at once."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not ready():
            if future is not None and future.done():
                response = future.result()
                if not response.success:
                    raise LockstepError(f"ros evaluation: {what} failed: {response.message}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockstepError(f"ros evaluation: {what} timed out after {timeout:g} s")
            if self.executor is not None:
                self.executor.spin_once(timeout_sec=min(left, 0.1))
            else:
                with self._arrived:
                    if not ready():
                        self._arrived.wait(min(left, 0.1))

    def _next_truth(self, after_ns: int
                    ) -> tuple[Any, dict[str, np.ndarray], dict | None, Any]:
        """The true state of the control step after ``after_ns`` from the raw topics (stamp
        message, state, task state or None, disturbance_state message or None); older
        samples (the t = 0 ones of a reset or of activation, the unscored end of the last run)
        are dropped.

        Raises:
            LockstepError: a sample is missing (a later one arrived first) or none came.
        """
        streams = self._streams

        def ready() -> bool:
            with self._arrived:
                for key in streams:
                    queue = self._truth[key]
                    while queue and stamp_nanos(queue[0].header.stamp) <= after_ns:
                        queue.popleft()
                return all(self._truth[key] for key in streams)

        self._wait_for(ready, f"ground truth after t={after_ns * 1e-9:.3f}")
        with self._arrived:
            samples = [self._truth[key].popleft() for key in streams]
        stamp_ns = stamp_nanos(samples[0].header.stamp)
        if (any(stamp_nanos(s.header.stamp) != stamp_ns for s in samples)
                or abs(stamp_ns - after_ns - self._dt_ns) > 1000):
            raise LockstepError(f"ros evaluation: ground truth after t={after_ns * 1e-9:.3f} "
                                "was lost (a later sample came first)")
        by_key = dict(zip(streams, samples, strict=True))
        task = by_key.get("task")
        return (samples[0].header.stamp, self._truth_state(samples[0], samples[1]),
                task.state if task is not None else None, by_key.get("disturbance"))

    def _truth_state(self, js: JointState, second: Any) -> dict[str, np.ndarray]:
        """The scorer's true state from a joint state and the object poses (arm) or the
        true odometry (base; in the env's ``odom`` layout)."""
        state = self.assembler.joints(js.name, js.position, js.velocity)
        if self.assembler.is_arm:
            state[C.OBS_OBJECT_POSES] = sensors.pose_array_values(second)
        else:
            o = sensors.odom_values(second)
            state[C.OBS_ODOM] = odom_vector(o.position, o.orientation_wxyz, o.linear_velocity,
                                            o.angular_velocity)
        return state

    def _task_at(self, at_ns: int) -> dict:
        """The task state stamped ``at_ns`` (a reset's t = 0 one); older ones are dropped."""
        return self._sample_at("task", at_ns).state

    def _sample_at(self, key: str, at_ns: int) -> Any:
        """The ``key`` sample stamped ``at_ns`` (a reset's t = 0 one); older ones are
        dropped."""
        queue = self._truth[key]

        def ready() -> bool:
            with self._arrived:
                while queue and stamp_nanos(queue[0].header.stamp) < at_ns:
                    queue.popleft()
                return bool(queue)

        self._wait_for(ready, f"{key} at t={at_ns * 1e-9:.3f}")
        with self._arrived:
            sample = queue.popleft()
        if stamp_nanos(sample.header.stamp) != at_ns:
            raise LockstepError(f"ros evaluation: {key} at t={at_ns * 1e-9:.3f} was lost")
        return sample

    def _drain(self, end_ns: int, seen_ns: int) -> None:
        """Drop the unscored samples of the last run up to its end ``end_ns`` (``seen_ns``:
        the newest taken), so none is mistaken for one of the next episode's."""
        pending = set(self._streams) if seen_ns < end_ns else set()

        def ready() -> bool:
            with self._arrived:
                for key in list(pending):
                    queue = self._truth[key]
                    while queue and stamp_nanos(queue[0].header.stamp) <= end_ns:
                        if stamp_nanos(queue.popleft().header.stamp) == end_ns:
                            pending.discard(key)
            return not pending

        self._wait_for(ready, f"ground truth up to t={end_ns * 1e-9:.3f}")

    def _run(self, stamp, steps: int) -> Any:
        """Ask sim_node for ``steps`` control steps from ``stamp``, each waiting for the
        policy's command (``steps`` = 0: only wait for the command on ``stamp``); returns
        the future of the answer."""
        request = StepSim.Request(steps=max(steps, 1), no_step=steps == 0, wait_command=True,
                                  command_stamp=stamp, wait_timeout=float(self.timeout))
        if not self.step_client.service_is_ready() and not self.step_client.wait_for_service(
                timeout_sec=self.timeout):
            raise LockstepError(f"ros evaluation: service {self.step_client.srv_name} is not "
                                "available")
        return self.step_client.call_async(request)

    def _await_run(self, future: Any) -> None:
        """Spinning the executor here: wait up to the timeout for a run's answer without
        waking for its ground truth, which stays queued (:data:`TRUTH_QOS` holds more than a
        run) and is taken afterwards, all at once: one wake-up per run instead of one per
        sample, so this process leaves the CPU to sim_node and policy_node meanwhile. A run
        still unanswered then is followed sample by sample (each with its own timeout)."""
        quiet = getattr(self.executor, "spin_once_quiet", None)
        if quiet is None:
            return
        deadline = time.monotonic() + self.timeout
        while not future.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            quiet(timeout_sec=min(left, 0.1))

    def _finish(self, future: Any, what: str) -> Any:
        self._wait_for(future.done, what, future)
        response = future.result()
        if not response.success:
            raise LockstepError(f"ros evaluation: {what} failed: {response.message}")
        return response

    def _state(self, response: StepSim.Response) -> dict[str, np.ndarray]:
        js = response.joint_state
        state = self.assembler.joints(js.name, js.position, js.velocity)
        state[C.OBS_OBJECT_POSES] = sensors.pose_array_values(response.object_poses)
        return state

    def _reset(self, seed: int, world: str = "", timeout: float | None = None
               ) -> ResetSim.Response:
        """Reset policy_node, then sim_node with ``seed`` into ``world`` (a scene, task or
        task/template; empty = the current one), which publishes the t = 0 state; each call
        waits ``timeout`` (default the evaluator's)."""
        self._call(self.policy_client, Trigger.Request(), "policy_node reset", timeout)
        return self._call(self.reset_client, ResetSim.Request(seed=seed, scenario=world),
                          f"sim/reset {world}".strip(), timeout)

    def handshake(self, wait: float) -> bool:
        """One round of :func:`wait_ready`: reset, then True when the t = 0 ground truth
        arrived here and sim_node received the policy's command for t = 0 within ``wait``
        seconds each (a reset not answered within :data:`HANDSHAKE_RESET_S` counts as not
        ready: the first answers after discovery can be lost). Leaves no sample queued."""
        try:
            stamp = self._reset(0, timeout=max(wait, HANDSHAKE_RESET_S)).stamp
        except AnswerTimeoutError:
            return False
        at_ns = stamp_nanos(stamp)

        def arrived() -> bool:
            with self._arrived:
                return all(any(stamp_nanos(m.header.stamp) == at_ns for m in self._truth[key])
                           for key in self._streams)

        try:
            self._wait_for(arrived, "handshake", timeout=wait)
            truth = True
        except LockstepError:
            truth = False
        request = StepSim.Request(no_step=True, wait_command=True, command_stamp=stamp,
                                  wait_timeout=float(wait))
        try:
            self._call(self.step_client, request, "handshake command")  # raises unless served
            commanded = True
        except LockstepError:
            commanded = False
        with self._arrived:
            for queue in self._truth.values():
                queue.clear()
        return truth and commanded

    # ------------------------------------------------------------------ episodes
    def _configure_perturbations(self, spec: EpisodeSpec) -> list[Any]:
        cores = perturbations_of(spec)
        disturbance = next((c for c in cores if c.config.family == C.FAMILY_DISTURBANCE), None)
        if disturbance is not None or self._disturbing:
            # Every disturbance episode gets a fresh core in sim_node (as in-process: its
            # first reset begins episode 0); afterwards 'none' once.
            self._call(self.disturbance_client,
                       disturbance_request(None if disturbance is None
                                           else disturbance.config), "sim/set_disturbance")
            self._disturbing = disturbance is not None
        for family, client in self.perturbation_clients.items():
            req = SetPerturbation.Request()
            if family in spec.families:
                req.family, req.intensity = family, float(spec.intensity)
                req.schedule, req.seed = spec.schedule, int(spec.perturbation_seed)
            else:
                req.family, req.intensity, req.seed = C.FAMILY_NONE, 0.0, 0
            self._call(client, req, f"{family} set_perturbation")
            self._call(client, SetPerturbation.Request(family="", seed=int(spec.seed)),
                       f"{family} episode seed")
        for core in cores:
            # The same cores in-process give the parameters recorded for this episode.
            core.reset(spec.seed)
        return cores

    def _apply_backend_perturbations(self, cores: Sequence[Any], t: float) -> None:
        """After a reset at time ``t``: dynamics, camera pose and lighting as the wrappers set
        them after ``env.reset`` (:class:`~clawgym_ros.perturbations.wrappers.DynamicsWrapper`,
        :class:`~clawgym_ros.perturbations.wrappers.CameraPoseWrapper`,
        :class:`~clawgym_ros.perturbations.wrappers.LightingWrapper`)."""
        for core in cores:
            family = core.config.family
            if family == C.FAMILY_DYNAMICS and core.enabled:
                self._call(self.dynamics_client, dynamics_request(core.settings()),
                           "sim/set_dynamics")
            elif family == C.FAMILY_CAMERA_POSE and core.enabled:
                self._call(self.camera_pose_client, camera_pose_request(core.settings()),
                           "sim/set_camera_pose")
            elif family == C.FAMILY_LIGHTING:
                settings = core.update(t)
                if settings is not None and core.enabled:
                    self._call(self.lighting_client, lighting_request(settings),
                               "sim/set_lighting")

    def run_episode(self, spec: EpisodeSpec) -> EpisodeResult:
        """One lockstep episode of ``spec`` (the ``task`` or ``scene`` world).

        Raises:
            LockstepError: a node did not answer in time.
        """
        world = resolve_world(spec.task, self.world)
        task_world = world == WORLD_TASK
        scene = scene_of(spec.task)
        if scene != C.SCENE_TABLETOP and not task_world:
            raise ClawgymError(f"ros evaluation: task {spec.task} runs in its task world "
                               "only (the scene world scores arm tasks)")
        self._use_scene(scene)
        disturbed = C.FAMILY_DISTURBANCE in spec.families
        if disturbed and not task_world:
            raise ConfigError("disturbance", spec.event or "object_drop",
                              "a task world (the disturbance needs the task's stages)")
        self._streams = self._world_streams(scene, task_world, disturbed)
        limit = episode_limit(spec.task, world, self.max_steps)
        cores = self._configure_perturbations(spec)
        with self._arrived:
            # Only older episodes' states can be queued here (sim_node publishes none without
            # a disturbance; a disturbance episode's end was drained).
            self._truth["disturbance"].clear()
        reset = self._reset(int(spec.seed), world_name(spec, world))
        self._apply_backend_perturbations(cores, time_seconds(reset.stamp))
        lighting = [c for c in cores if c.config.family == C.FAMILY_LIGHTING]
        # gps_dropout: gps_dropout_node perturbs the fixes; this copy of its core follows the
        # same stamps (its outage decisions depend on the stamps and its seed only), so the
        # episode's recorded parameters (the outage count) are the wrapper's.
        gps = [c for c in cores if c.config.family == C.FAMILY_GPS_DROPOUT]
        for core in gps:
            core.decide(time_seconds(reset.stamp))
        t, stamp = time_seconds(reset.stamp), reset.stamp
        now_ns = stamp_nanos(stamp)
        if self.assembler.is_arm:
            # The state at t=0 (no command awaited, no step).
            start = self._call(self.step_client, StepSim.Request(no_step=True,
                                                                 return_state=True),
                               "sim/step (initial state)")
            state = self._state(start)
        else:
            # The base's odometry is not in the response: the reset's t = 0 samples.
            state = self._truth_state(self._sample_at("joints", now_ns),
                                      self._sample_at("odom", now_ns))
        tracker = None
        recovery = None
        if task_world:
            from clawgym_ros.tasks.registry import get_task

            task = self._task_at(now_ns)
            stages, reached = task["stages"], list(task["stages_reached"])
            max_force = get_task(spec.task).max_contact_force
            if disturbed:
                # The record at reset (the in-process wrapper's reset info).
                _, recovery = disturbance_state_values(
                    self._sample_at("disturbance", now_ns), stages)
        else:
            tracker = LiftTracker()
            stages, reached, max_force = tracker.stages, [], float("inf")
        scorer = EpisodeScorer(spec, CONTROL_DT, joint_limits(scene), max_force)
        # The task env's own clock (the float the in-process scorer reads; the stamp is
        # rounded to the nanosecond, and speeds rounded to 1e-9 m/s can tell them apart).
        scorer.observe(task.get("time", t) if task_world else t, state)
        if tracker is not None:
            tracker.update(t, state)
            reached = tracker.reached_names
        success = ended = False
        steps = 0
        core_values: dict[Any, dict[str, float]] = {}
        while not ended and steps < limit:
            run = min(RUN_STEPS, limit - steps)
            what = f"sim/step x{run} from t={t:.3f} (waits for the policy's commands)"
            future = self._run(stamp, run)
            self._await_run(future)
            for _ in range(run):
                for core in lighting:
                    # The wrapper advances lighting before each step (the recorded parameters).
                    core.update(t + CONTROL_DT)
                # The states of this run, in order; after the end the run is only finished.
                truth_stamp, state, task, dist = self._next_truth(now_ns)
                now_ns = stamp_nanos(truth_stamp)
                if dist is not None:
                    # The core's state after this step (what the record's disturbance.* holds),
                    # and its recovery record, taken below once the scorer accepts the step.
                    values, step_recovery = disturbance_state_values(dist, stages)
                    for core in cores:
                        if core.config.family == C.FAMILY_DISTURBANCE:
                            core_values[core] = values
                t = time_seconds(truth_stamp)
                for core in gps:
                    core.decide(t)
                steps += 1
                self.steps_done += 1
                force, collision = ((task["contact_force"], task["collision"]) if task
                                    else (0.0, False))
                if not scorer.observe(task.get("time", t) if task else t, state, float(force),
                                      bool(collision)):
                    ended = True
                    break
                if dist is not None:
                    recovery = step_recovery
                if task is not None:
                    reached, success = list(task["stages_reached"]), bool(task["success"])
                else:
                    assert tracker is not None
                    tracker.update(t, state)
                    reached = tracker.reached_names
                    success = tracker.success(state)[0]
                if success:
                    ended = True
                    break
            stamp = self._finish(future, what).stamp
        # The policy acts on the last observation too: wait until that command reached
        # sim_node, so no command of this episode can arrive after the next reset.
        self._finish(self._run(stamp, 0), f"last command at t={time_seconds(stamp):.3f}")
        self._drain(stamp_nanos(stamp), now_ns)
        values = perturbation_values(cores)
        for core, state in core_values.items():
            values.update({f"{core.config.family}.{k}": v for k, v in state.items()})
        result = scorer.result(stages, reached, success, values)
        if recovery is not None:
            result = dataclasses.replace(result, recovery=recovery)
        return result

    def run(self, specs: Sequence[EpisodeSpec],
            progress: Callable[[int, int, int], None] | None = None,
            cancel: threading.Event | None = None) -> list[EpisodeResult]:
        """Every spec in order; ``progress(done, total, successes)`` after each.

        Raises:
            EvaluationCancelledError: ``cancel`` was set.
        """
        from clawgym_ros.evaluation.workers import EvaluationCancelledError

        results: list[EpisodeResult] = []
        for spec in specs:
            if cancel is not None and cancel.is_set():
                raise EvaluationCancelledError(f"cancelled after {len(results)} of "
                                               f"{len(specs)} episodes")
            results.append(self.run_episode(spec))
            if progress is not None:
                progress(len(results), len(specs), sum(r.success for r in results))
        return results


#: Seconds one handshake round waits for the t = 0 samples and the policy's first command.
HANDSHAKE_ROUND_S = 1.0
#: Seconds one handshake round waits for each reset's answer (a reset under load is slower
#: than a round; an answer lost just after discovery is asked for again after this).
HANDSHAKE_RESET_S = 5.0


def wait_ready(evaluator: LockstepEvaluator, timeout: float = 30.0,
               check: Callable[[], None] | None = None) -> None:
    """Wait until sim_node, policy_node and the interposers serve their services, then until
    the lockstep topics carry messages end to end.

    A service answering does not mean the topics are matched: DDS discovers each pair of
    endpoints on its own, and a volatile publisher drops what it published before it matched
    a subscriber. So the handshake resets the simulation (a reset publishes the t = 0 samples)
    until both ground-truth samples reach this node *and* policy_node's command for t = 0
    reaches sim_node; each round waits :data:`HANDSHAKE_ROUND_S`.

    ``check()`` is called between short waits (e.g. raising when a node of the graph exited:
    a node refusing its parameters ends at once with one line naming why).

    Raises:
        LockstepError: a service is still missing, or the topics still lose the first
            messages, after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    for client in evaluator.clients:
        while not client.wait_for_service(timeout_sec=0.25):
            if check is not None:
                check()
            if time.monotonic() > deadline:
                raise LockstepError(f"ros evaluation: {client.srv_name} did not come up "
                                    f"within {timeout:g} s")
    while not evaluator.handshake(HANDSHAKE_ROUND_S):
        if time.monotonic() > deadline:
            raise LockstepError("ros evaluation: the first samples of joint_states_raw / "
                                "object_poses_raw or policy_node's first command did not "
                                f"arrive within {timeout:g} s (topics not matched)")
