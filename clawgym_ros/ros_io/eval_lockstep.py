"""The evaluator's ROS lockstep driver: runs episode specs through sim_node + policy_node.

:class:`LockstepEvaluator` owns service clients (``sim/reset``, ``sim/step``,
``policy_node/reset``, ``<interposer>/set_perturbation``) and subscriptions (ground-truth
``joint_states_raw`` / ``object_poses_raw`` / ``odom``, and the policy's commands) on a node
that an executor spins in *another* thread; :meth:`run` blocks the calling thread (the
evaluator's worker thread, or the CLI's main thread) and waits on ``threading`` conditions that
the callbacks signal. The protocol is described in :mod:`clawgym_ros.evaluation.ros_mode`;
scoring uses the same :class:`~clawgym_ros.evaluation.rollout.EpisodeScorer` and
:class:`~clawgym_ros.evaluation.scripted.LiftTracker` as the in-process ``scene`` world, on the
true state rebuilt from the ground-truth topics (tool pose by forward kinematics).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseArray, Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from clawgym_interfaces.msg import GripperCommand
from clawgym_interfaces.srv import ResetSim, SetPerturbation, StepSim
from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError
from clawgym_ros.evaluation.observation import ObservationAssembler
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.rollout import (
    EpisodeScorer,
    joint_limits,
    perturbation_values,
    perturbations_of,
    scene_of,
)
from clawgym_ros.evaluation.ros_mode import INTERPOSERS, SRV_POLICY_RESET
from clawgym_ros.evaluation.scripted import LiftTracker
from clawgym_ros.evaluation.suites import EpisodeSpec
from clawgym_ros.ros_io import sensors
from clawgym_ros.ros_io.convert import time_seconds
from clawgym_ros.ros_io.qos import COMMAND_QOS, SENSOR_QOS

CONTROL_DT = 0.02


class LockstepError(ClawgymError):
    """The ROS graph did not answer in time (a node missing, a message lost)."""


class LockstepEvaluator:
    """Drives lockstep episodes on ``node`` (spun elsewhere).

    Args:
        node: a node whose executor runs in another thread.
        families: perturbation families whose interposer nodes run.
        timeout: seconds to wait for any answer, action or state.
        max_steps: control steps per episode.
        scene: the simulated scene (``tabletop``).
    """

    def __init__(self, node: Node, families: Sequence[str] = (), timeout: float = 5.0,
                 max_steps: int = 500, scene: str = C.SCENE_TABLETOP) -> None:
        self.node = node
        self.timeout = timeout
        self.max_steps = max_steps
        self.scene = scene
        self.cond = threading.Condition()
        self.truth: dict[str, tuple[float, Any]] = {}
        self.action_stamp: float | None = None
        self.grippers = 0
        self.twists = 0
        self.steps_done = 0
        self.assembler = ObservationAssembler(scene)
        self.reset_client = node.create_client(ResetSim, C.SRV_RESET)
        self.step_client = node.create_client(StepSim, C.SRV_STEP)
        self.policy_client = node.create_client(Trigger, f"{C.NODE_POLICY}/{SRV_POLICY_RESET}")
        self.perturbation_clients = {
            f: node.create_client(SetPerturbation, f"{INTERPOSERS[f]}/{C.SRV_SET_PERTURBATION}")
            for f in families}
        self._subs = [
            node.create_subscription(JointState, C.TOPIC_JOINT_STATES_RAW, self._on_joints,
                                     SENSOR_QOS),
            node.create_subscription(PoseArray, C.TOPIC_OBJECT_POSES_RAW, self._on_objects,
                                     SENSOR_QOS),
            node.create_subscription(Odometry, C.TOPIC_ODOM, self._on_odom, SENSOR_QOS),
            node.create_subscription(JointTrajectory, C.TOPIC_JOINT_TRAJECTORY,
                                     self._on_trajectory, COMMAND_QOS),
            node.create_subscription(GripperCommand, C.TOPIC_GRIPPER_COMMAND, self._on_gripper,
                                     COMMAND_QOS),
            node.create_subscription(Twist, C.TOPIC_CMD_VEL, self._on_twist, COMMAND_QOS),
        ]

    def close(self) -> None:
        """Destroy the clients and subscriptions."""
        for sub in self._subs:
            self.node.destroy_subscription(sub)
        for client in (self.reset_client, self.step_client, self.policy_client,
                       *self.perturbation_clients.values()):
            self.node.destroy_client(client)
        self._subs = []

    # ------------------------------------------------------------------ callbacks (executor)
    def _store(self, key: str, stamp, value: Any) -> None:
        with self.cond:
            self.truth[key] = (time_seconds(stamp), value)
            self.cond.notify_all()

    def _on_joints(self, msg: JointState) -> None:
        self._store("joints", msg.header.stamp, (list(msg.name), np.asarray(msg.position),
                                                 np.asarray(msg.velocity)))

    def _on_objects(self, msg: PoseArray) -> None:
        self._store("objects", msg.header.stamp, sensors.pose_array_values(msg))

    def _on_odom(self, msg: Odometry) -> None:
        self._store("odom", msg.header.stamp, msg)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        with self.cond:
            self.action_stamp = time_seconds(msg.header.stamp)
            self.cond.notify_all()

    def _on_gripper(self, msg: GripperCommand) -> None:
        with self.cond:
            self.grippers += 1
            self.cond.notify_all()

    def _on_twist(self, msg: Twist) -> None:
        with self.cond:
            self.twists += 1
            self.cond.notify_all()

    # ------------------------------------------------------------------ waiting
    def _wait(self, predicate: Callable[[], bool], what: str) -> None:
        with self.cond:
            if not self.cond.wait_for(predicate, self.timeout):
                raise LockstepError(f"ros evaluation: no {what} within {self.timeout:g} s")

    def _call(self, client, request, what: str):
        if not client.service_is_ready() and not client.wait_for_service(
                timeout_sec=self.timeout):
            raise LockstepError(f"ros evaluation: service {client.srv_name} is not available "
                                f"({what})")
        event = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: event.set())
        if not event.wait(self.timeout):
            raise LockstepError(f"ros evaluation: {what} timed out after {self.timeout:g} s")
        response = future.result()
        if hasattr(response, "success") and not response.success:
            raise LockstepError(f"ros evaluation: {what} failed: {response.message}")
        return response

    def _truth_at(self, stamp: float) -> dict[str, np.ndarray]:
        keys = ("joints", "objects") if self.assembler.is_arm else ("joints", "odom")

        def ready() -> bool:
            return all(k in self.truth and abs(self.truth[k][0] - stamp) < 1e-6 for k in keys)

        self._wait(ready, f"ground-truth state at t={stamp:.3f}")
        names, pos, vel = self.truth["joints"][1]
        state = self.assembler.joints(names, pos, vel)
        if self.assembler.is_arm:
            state[C.OBS_OBJECT_POSES] = self.truth["objects"][1]
        else:
            from clawgym_ros.evaluation.observation import odom_vector

            o = sensors.odom_values(self.truth["odom"][1])
            state[C.OBS_ODOM] = odom_vector(o.position, o.orientation_wxyz, o.linear_velocity,
                                            o.angular_velocity)
        return state

    def _action_for(self, stamp: float, grippers: int, twists: int) -> None:
        if self.assembler.is_arm:
            self._wait(lambda: self.action_stamp is not None and
                       abs(self.action_stamp - stamp) < 1e-6,
                       f"policy action for t={stamp:.3f}")
        else:
            self._wait(lambda: self.twists > twists, f"policy action for t={stamp:.3f}")

    # ------------------------------------------------------------------ episodes
    def _configure_perturbations(self, spec: EpisodeSpec) -> list[Any]:
        cores = perturbations_of(spec)
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

    def run_episode(self, spec: EpisodeSpec) -> EpisodeResult:
        """One lockstep episode of ``spec`` (``scene`` world).

        Raises:
            LockstepError: a node did not answer in time.
        """
        if scene_of(spec.task) != C.SCENE_TABLETOP:
            raise ClawgymError(f"ros evaluation: task {spec.task} is not an arm task of the "
                               "tabletop scene that sim_node simulates here")
        cores = self._configure_perturbations(spec)
        self._call(self.policy_client, Trigger.Request(), "policy_node reset")
        with self.cond:
            self.truth.clear()
            self.action_stamp = None
            grippers, twists = self.grippers, self.twists
        self._call(self.reset_client, ResetSim.Request(seed=int(spec.seed)), "sim/reset")
        tracker = LiftTracker()
        scorer = EpisodeScorer(spec, CONTROL_DT, joint_limits(self.scene))
        t = 0.0
        state = self._truth_at(t)
        scorer.observe(t, state)
        tracker.update(t, state)
        success = False
        for _ in range(self.max_steps):
            self._action_for(t, grippers, twists)
            with self.cond:
                grippers, twists = self.grippers, self.twists
            response = self._call(self.step_client, StepSim.Request(steps=1), "sim/step")
            self.steps_done += 1
            t = time_seconds(response.stamp)
            state = self._truth_at(t)
            if not scorer.observe(t, state):
                break
            tracker.update(t, state)
            success = tracker.success(state)[0]
            if success:
                break
        # The policy acts on the last observation too: wait, so its commands cannot reach
        # sim_node after the next reset.
        self._action_for(t, grippers, twists)
        return scorer.result(tracker.stages, tracker.reached_names, success,
                             perturbation_values(cores))

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


def wait_ready(evaluator: LockstepEvaluator, timeout: float = 30.0) -> None:
    """Wait until sim_node, policy_node and the interposers serve their services.

    Raises:
        LockstepError: one is still missing after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    clients = [evaluator.reset_client, evaluator.step_client, evaluator.policy_client,
               *evaluator.perturbation_clients.values()]
    for client in clients:
        left = max(deadline - time.monotonic(), 0.1)
        if not client.wait_for_service(timeout_sec=left):
            raise LockstepError(f"ros evaluation: {client.srv_name} did not come up within "
                                f"{timeout:g} s")
