"""evaluator_node: lifecycle node serving the ``evaluate`` action
(clawgym_interfaces/action/Evaluate) and publishing the latest EvalSummary latched on
``eval_summary``.

Thin: goal -> :class:`~clawgym_ros.evaluation.config.EvalConfig` + policy source ->
:func:`clawgym_ros.orchestration.evaluation.run_evaluation` (suite -> episode specs -> rollouts
-> report artifact) -> result (report id, report.json path, EvalSummary). The evaluation runs in
a worker thread while the action's execute coroutine awaits it, so the single-threaded executor
keeps serving cancel requests, lifecycle services and the latched topic. Feedback (done, total,
success rate so far) follows every finished episode; a cancel request stops the run after the
episodes in flight (nothing is committed). One goal at a time; goals are rejected unless the
node is active.

Modes: ``in_process`` runs worker processes over the Gymnasium envs; ``ros`` starts sim_node
(lockstep), the interposers the suite needs and policy_node as child processes in a fresh
isolated ROS domain and drives them (as ``clawgym eval --mode ros`` does), so an evaluation
never disturbs the topics of the graph this node lives in.

Lifecycle: the constructor creates nothing (no parameters, publishers or servers);
``on_configure`` declares and reads the parameters, creates the latched publisher and the
action server; ``on_activate`` accepts goals; ``on_deactivate`` cancels a running goal;
``on_cleanup`` removes publisher and server. With ``autostart:=true`` the node configures and
activates itself at start-up.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from typing import Any

from rclpy.task import Future

from clawgym_interfaces.action import Evaluate
from clawgym_interfaces.msg import EvalSummary
from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.ros_io.action_node import ActionLifecycleNode, spin_action_node
from clawgym_ros.ros_io.qos import LATCHED_QOS


@dataclasses.dataclass(frozen=True)
class EvaluatorNodeOptions:
    """Node parameters: defaults for what an Evaluate goal leaves empty, and rollout options."""

    run_dir: str = dataclasses.field(
        default=os.environ.get(C.ENV_RUN_DIR, C.DEFAULT_RUN_DIR),
        metadata={"help": "run directory used when a goal's run_dir is empty"})
    mode: str = dataclasses.field(
        default=C.EVAL_MODES[0],
        metadata={"help": "mode when a goal's mode is empty: in_process or ros"})
    default_workers: int = dataclasses.field(
        default=0, metadata={"help": "in_process workers when a goal says 0 (0 = one per core)"})
    world: str = dataclasses.field(
        default="auto", metadata={"help": "auto (task env when installed), task or scene"})
    max_steps: int = dataclasses.field(
        default=0, metadata={"help": "control steps per episode (0 = the env's limit)"})
    ros_timeout_s: float = dataclasses.field(
        default=C.ROS_ANSWER_TIMEOUT_S,
        metadata={"help": "ros mode: seconds to wait for any single answer"})
    autostart: bool = dataclasses.field(
        default=False, metadata={"help": "configure and activate at start-up"})

    def __post_init__(self) -> None:
        from clawgym_ros.evaluation.rollout import WORLDS

        check_choice("mode", self.mode, C.EVAL_MODES)
        check_int("default_workers", self.default_workers, 0, 256)
        check_choice("world", self.world, WORLDS)
        check_int("max_steps", self.max_steps, 0)
        check_range("ros_timeout_s", self.ros_timeout_s, 0.1, 3600.0)


def goal_config(goal: Any, options: EvaluatorNodeOptions):
    """Evaluate goal + node options -> (EvalConfig, PolicySource, RolloutOptions, run_dir).

    A goal's checkpoint_id is a checkpoint artifact id (prefix allowed) or
    ``scripted:<task>[:k=v,...]`` (the scripted baseline; the report then has no checkpoint).

    Raises:
        ConfigError: a bad field (named with its value and the allowed values).
    """
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.rollout import POLICY_SCRIPTED, PolicySource, RolloutOptions
    from clawgym_ros.evaluation.workers import default_workers

    if not goal.checkpoint_id:
        raise ConfigError("checkpoint_id", goal.checkpoint_id,
                          "a checkpoint id or scripted:<task>")
    run_dir = goal.run_dir or options.run_dir
    source = PolicySource.parse(goal.checkpoint_id, run_dir)
    checkpoint_id = ""
    if source.kind != POLICY_SCRIPTED:
        from clawgym_ros.artifacts import ArtifactStore

        checkpoint_id = ArtifactStore(run_dir).resolve(goal.checkpoint_id).id
        source = dataclasses.replace(source, ref=checkpoint_id)
    workers = int(goal.workers) or options.default_workers or default_workers()
    cfg = EvalConfig(suite=goal.suite or "nominal", seed=int(goal.seed),
                     mode=goal.mode or options.mode, workers=workers,
                     checkpoint_id=checkpoint_id)
    return cfg, source, RolloutOptions(world=options.world, max_steps=options.max_steps), run_dir


class EvaluatorNode(ActionLifecycleNode):
    """Lifecycle node serving the Evaluate action and the latched eval_summary topic."""

    options_cls = EvaluatorNodeOptions
    action_type = Evaluate
    action_name = C.ACTION_EVALUATE

    def __init__(self) -> None:
        super().__init__(C.NODE_EVALUATOR)
        self._summary_pub = None
        #: in_process worker processes kept between goals (started by the first goal that
        #: asks for more than one worker; restarted when a goal asks for another count).
        self._pool = None

    def prepare(self) -> None:
        # A plain (not lifecycle) publisher: the latched summary stays readable whatever
        # the node's state, like the coordinator's loop status.
        self._summary_pub = self.create_publisher(EvalSummary, C.TOPIC_EVAL_SUMMARY,
                                                  LATCHED_QOS)

    def release(self) -> None:
        if self._summary_pub is not None:
            self.destroy_publisher(self._summary_pub)
            self._summary_pub = None
        self._close_pool()

    def destroy_node(self) -> None:
        self._close_pool()
        super().destroy_node()

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _worker_pool(self, cfg):
        """The kept worker pool for an in_process goal with ``cfg.workers`` > 1, else None."""
        from clawgym_ros.evaluation.workers import WorkerPool

        if cfg.mode != C.EVAL_MODES[0] or cfg.workers <= 1:
            return None
        if self._pool is not None and self._pool.workers != cfg.workers:
            self._close_pool()
        if self._pool is None:
            self._pool = WorkerPool(cfg.workers)
        return self._pool

    async def _execute(self, goal_handle) -> Evaluate.Result:
        """Await the worker thread that evaluates; the executor stays free meanwhile."""
        from clawgym_ros.evaluation.workers import EvaluationCancelledError
        from clawgym_ros.ros_io.eval_msgs import eval_summary_msg

        cancel = threading.Event()

        def watch(done: Future) -> None:
            # Cancel requests and deactivation reach the core through one Event.
            while not done.done():
                if goal_handle.is_cancel_requested or self._stop.is_set():
                    cancel.set()
                    return
                time.sleep(0.1)

        outcome = await self._in_worker(lambda: self._evaluate(goal_handle, cancel),
                                        "evaluator", watch)
        if isinstance(outcome, EvaluationCancelledError):
            goal_handle.canceled()
            return Evaluate.Result(success=False, message=str(outcome))
        if isinstance(outcome, BaseException):
            return Evaluate.Result(success=False,
                                   message=self._goal_failed(goal_handle, outcome))
        evaluation, checkpoint_id = outcome
        stamp = self.get_clock().now().nanoseconds * 1e-9
        summary = eval_summary_msg(evaluation.report, evaluation.report_id, checkpoint_id,
                                   stamp)
        if self._summary_pub is not None:
            self._summary_pub.publish(summary)
        goal_handle.succeed()
        self.get_logger().info(f"report {evaluation.report_id[:12]}: {evaluation.successes}/"
                               f"{evaluation.episodes} episodes succeeded")
        return Evaluate.Result(
            success=True, report_id=evaluation.report_id,
            report_path=str(evaluation.json_path), summary=summary,
            message=f"{evaluation.successes}/{evaluation.episodes} episodes succeeded")

    def _evaluate(self, goal_handle, cancel: threading.Event):
        """Worker thread: run one evaluation; returns (EvalOutcome, checkpoint id)."""
        from clawgym_ros.orchestration.evaluation import run_evaluation

        assert self.options is not None
        cfg, source, rollout, run_dir = goal_config(goal_handle.request, self.options)

        def progress(done: int, total: int, successes: int) -> None:
            goal_handle.publish_feedback(Evaluate.Feedback(
                done=done, total=total, success_rate=successes / done if done else 0.0))

        self.get_logger().info(f"evaluating {source.kind} {source.ref[:16]} on {cfg.suite} "
                               f"(seed {cfg.seed}, {cfg.mode}, {cfg.workers} worker(s))")
        from clawgym_ros.calibration.apply import calibration_scope

        with calibration_scope(run_dir, goal_handle.request.calibration_id):
            outcome = run_evaluation(cfg, source, run_dir, rollout, progress, cancel,
                                     ros_timeout=self.options.ros_timeout_s,
                                     pool=self._worker_pool(cfg))
        return outcome, cfg.checkpoint_id


def main(args: list[str] | None = None) -> int:
    """Console script ``evaluator_node``."""
    return spin_action_node(EvaluatorNode, args)


if __name__ == "__main__":
    sys.exit(main())
