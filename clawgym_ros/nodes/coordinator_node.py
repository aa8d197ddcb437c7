"""coordinator_node: runs the closed loop by calling the Synthesize, Train and Evaluate actions
(and Calibrate, when online distillation finds a new robot log).

Thin: the decisions are :func:`clawgym_ros.coordinator.plan.next_plan`, the step order,
persistence and resume are :class:`clawgym_ros.coordinator.runner.LoopRunner`; this node only
turns the runner's goals into action goals, waits for their results (in a worker thread, so the
single-threaded executor keeps delivering feedback and results), and publishes the loop status
latched on ``loop_status`` (also written to ``<run>/loop/status.json`` for the CLI).

If an action server disappears while a goal runs (its node crashed), the step fails after
``server_timeout_s`` with a message naming the node; the loop state holds everything completed,
so starting the same loop again resumes at that step.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
import traceback
from typing import Any

import rclpy
from rclpy.action import ActionClient
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from clawgym_interfaces.action import Calibrate, Evaluate, Synthesize, Train
from clawgym_interfaces.msg import GroupWeight, LoopStatus, MixtureEntry
from clawgym_ros import constants as C
from clawgym_ros.commands.loop import DEFAULT_SERVER_TIMEOUT_S
from clawgym_ros.config import check_range
from clawgym_ros.errors import ClawgymError, ConfigError
from clawgym_ros.ros_io.action_client import ThreadSafeActionClient
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.qos import LATCHED_QOS


@dataclasses.dataclass(frozen=True)
class CoordinatorOptions:
    """Node parameters."""

    config: str = dataclasses.field(
        default="", metadata={"help": "loop config YAML (config/loop/<name>.yaml)"})
    run_dir: str = dataclasses.field(
        default=os.environ.get(C.ENV_RUN_DIR, C.DEFAULT_RUN_DIR),
        metadata={"help": "run directory (artifacts/, loop/)"})
    iterations: int = dataclasses.field(
        default=0, metadata={"help": "override of the config's iterations; 0 = config"})
    seed: int = dataclasses.field(
        default=-1, metadata={"help": "override of the config's seed; -1 = config"})
    mode: str = dataclasses.field(
        default="", metadata={"help": "override of the config's mode (closed/open); '' = config"})
    server_timeout_s: float = dataclasses.field(
        default=DEFAULT_SERVER_TIMEOUT_S,
        metadata={"help": "wait this long for an action server (or its return)"})
    exit_when_done: bool = dataclasses.field(
        default=True, metadata={"help": "shut down when the loop has finished"})

    def __post_init__(self) -> None:
        if not self.config:
            raise ConfigError("config", self.config, "a loop config file (parameter config)")
        check_range("server_timeout_s", self.server_timeout_s, 1.0, 86400.0)


class StepFailedError(ClawgymError):
    """An action goal was rejected, aborted or lost."""


class ActionExecutor:
    """The runner's Executor over the three action clients."""

    def __init__(self, node: CoordinatorNode):
        self.node = node

    def _call(self, client: ActionClient, server: str, goal: Any, on_feedback) -> Any:
        node = self.node
        timeout = node.options.server_timeout_s
        if not client.wait_for_server(timeout_sec=timeout):
            raise StepFailedError(f"no {server} action server after {timeout:g} s (is its node "
                             "running?)")
        sent = threading.Event()
        holder: dict[str, Any] = {}

        def on_sent(future) -> None:
            holder["handle"] = future.result()
            sent.set()

        client.send_goal_async(goal, feedback_callback=on_feedback).add_done_callback(on_sent)
        if not sent.wait(timeout):
            raise StepFailedError(f"{server} did not answer the goal within {timeout:g} s")
        handle = holder["handle"]
        if not handle.accepted:
            raise StepFailedError(f"{server} rejected the goal (busy or not active)")
        done = threading.Event()
        handle.get_result_async().add_done_callback(
            lambda f: (holder.__setitem__("result", f.result()), done.set()))
        missing_since = None
        while not done.wait(0.5):
            if node.stopping.is_set():
                handle.cancel_goal_async()
                raise StepFailedError(f"{server}: stopped")
            if client.server_is_ready():
                missing_since = None
            elif missing_since is None:
                missing_since = time.monotonic()
            elif time.monotonic() - missing_since > timeout:
                raise StepFailedError(f"the {server} action server went away while its goal ran "
                                 "(node crashed?); start the loop again to resume this step")
        wrapped = holder["result"]
        result = wrapped.result
        if not getattr(result, "success", False):
            raise StepFailedError(f"{server} failed: {result.message or 'no message'}")
        return result

    def synthesize(self, goal, progress) -> str:
        from clawgym_ros.synthesis.mixture import MixtureCell

        msg = Synthesize.Goal(
            mixture=[MixtureEntry(**MixtureCell.from_fields(e).to_msg_fields())
                     for e in goal.mixture],
            episodes=goal.episodes, seed=goal.seed, workers=goal.workers,
            record_images=goal.record_images, run_dir=goal.run_dir,
            from_report=goal.from_report, calibration_id=goal.calibration_id,
            options_json=goal.options_json)

        def feedback(fb) -> None:
            f = fb.feedback
            progress(f.done, f.total, f"{f.done}/{f.total} episodes, {f.accepted} accepted")

        return self._call(self.node.synthesize, C.ACTION_SYNTHESIZE, msg, feedback).dataset_id

    def train(self, goal, progress) -> str:
        msg = Train.Goal(
            dataset_ids=list(goal.dataset_ids), steps=goal.steps, seed=goal.seed,
            policy=goal.policy, policy_options_json=goal.policy_options_json,
            group_weights=[GroupWeight(group=g, value=float(v))
                           for g, v in goal.group_weights.items()],
            frozen_groups=list(goal.frozen_groups), hardening_share=goal.hardening_share,
            hardening_intensity=goal.hardening_intensity,
            init_checkpoint_id=goal.init_checkpoint_id, run_dir=goal.run_dir)

        def feedback(fb) -> None:
            f = fb.feedback
            progress(f.step, f.total_steps, f"step {f.step}/{f.total_steps}, loss {f.loss:.4f}")

        return self._call(self.node.train, C.ACTION_TRAIN, msg, feedback).checkpoint_id

    def finetune(self, goal, progress) -> str:
        msg = Train.Goal(steps=goal.steps, seed=goal.seed, init_checkpoint_id=goal.checkpoint_id,
                         run_dir=goal.run_dir, finetune="rl", task=goal.task,
                         workers=goal.workers, finetune_options_json=goal.options_json,
                         calibration_id=goal.calibration_id)

        def feedback(fb) -> None:
            f = fb.feedback
            progress(f.step, f.total_steps, f"RL step {f.step}/{f.total_steps}")

        return self._call(self.node.train, C.ACTION_TRAIN, msg, feedback).checkpoint_id

    def evaluate(self, goal, progress) -> str:
        msg = Evaluate.Goal(checkpoint_id=goal.checkpoint_id, suite=goal.suite, seed=goal.seed,
                            mode=goal.mode, workers=goal.workers, run_dir=goal.run_dir,
                            calibration_id=goal.calibration_id)

        def feedback(fb) -> None:
            f = fb.feedback
            progress(f.done, f.total, f"{f.done}/{f.total} episodes, success "
                     f"{f.success_rate:.2f}")

        return self._call(self.node.evaluate, C.ACTION_EVALUATE, msg, feedback).report_id

    def calibrate(self, goal, progress) -> str:
        msg = Calibrate.Goal(bag=goal.bag, params=goal.params_text, bounds_json=goal.bounds_json,
                             seed=goal.seed, starts=goal.starts, run_dir=goal.run_dir,
                             reuse=True)

        def feedback(fb) -> None:
            progress(0, 0, fb.feedback.stage)

        return self._call(self.node.calibrate, C.ACTION_CALIBRATE, msg,
                          feedback).calibration_id


class CoordinatorNode(Node):
    """Drives one loop (config + run directory from parameters) and publishes its status."""

    def __init__(self) -> None:
        super().__init__(C.NODE_COORDINATOR)
        self.options: CoordinatorOptions = declare_config(self, CoordinatorOptions)
        self.stopping = threading.Event()
        self.finished = threading.Event()
        self.exit_code = 0
        self.status_pub = self.create_publisher(LoopStatus, C.TOPIC_LOOP_STATUS, LATCHED_QOS)
        # Goals are sent from the loop thread while the main thread spins (rclpy#1123).
        self.synthesize = ThreadSafeActionClient(self, Synthesize, C.ACTION_SYNTHESIZE)
        self.train = ThreadSafeActionClient(self, Train, C.ACTION_TRAIN)
        self.evaluate = ThreadSafeActionClient(self, Evaluate, C.ACTION_EVALUATE)
        self.calibrate = ThreadSafeActionClient(self, Calibrate, C.ACTION_CALIBRATE)
        self._last_file_write = 0.0
        self._runner = None

    def start(self) -> None:
        """Load the config and start the loop in a worker thread."""
        from clawgym_ros.coordinator.config import load_loop_config
        from clawgym_ros.coordinator.runner import LoopRunner

        o = self.options
        cfg = load_loop_config(o.config, iterations=o.iterations or None,
                               seed=None if o.seed < 0 else o.seed, mode=o.mode or None)
        self.cfg = cfg
        self._runner = LoopRunner(cfg, o.run_dir, ActionExecutor(self), self.on_status)
        threading.Thread(target=self._work, name="loop", daemon=True).start()

    def _work(self) -> None:
        from clawgym_ros.coordinator.plan import PHASE_FAILED

        try:
            state = self._runner.run()
            path = self._runner.final_report_path(state)
            self.get_logger().info(f"loop finished: {state.stop_reason}; final report {path}")
        except BaseException as err:  # noqa: BLE001 (reported on the status topic)
            self.exit_code = 1
            message = str(err) if isinstance(err, ClawgymError) else \
                f"internal error: {type(err).__name__}: {err}"
            if not isinstance(err, ClawgymError):
                self.get_logger().error(traceback.format_exc())
            self.get_logger().error(f"loop failed: {message}")
            self._publish(None, PHASE_FAILED, message, None, force=True)
        finally:
            self.finished.set()

    def on_status(self, state, message: str, progress) -> None:
        """Runner callback: publish LoopStatus, write loop/status.json (throttled)."""
        self._publish(state, state.phase, message, progress, force=progress is None)

    def _publish(self, state, phase: str, message: str, progress, force: bool) -> None:
        from clawgym_ros.artifacts import atomic_write_json

        cur = (state.current if state is not None else None) or {}
        last = state.iterations[-1] if state is not None and state.iterations else {}
        msg = LoopStatus(
            iteration=int(state.iteration if state is not None else 0),
            max_iterations=int(self.cfg.iterations) if hasattr(self, "cfg") else 0,
            phase=phase, dataset_id=cur.get("dataset_id") or last.get("dataset_id", ""),
            checkpoint_id=cur.get("checkpoint_id") or last.get("checkpoint_id", ""),
            report_id=(state.final_report_id if state is not None and state.done else "")
            or cur.get("report_id") or last.get("report_id", ""), message=message)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.status_pub.publish(msg)
        now = time.monotonic()
        if force or now - self._last_file_write > 0.5:
            self._last_file_write = now
            data = {"iteration": msg.iteration, "max_iterations": msg.max_iterations,
                    "phase": phase, "message": message, "progress": list(progress or []),
                    "dataset_id": msg.dataset_id, "checkpoint_id": msg.checkpoint_id,
                    "report_id": msg.report_id, "pid": os.getpid()}
            atomic_write_json(os.path.join(self.options.run_dir, C.DIR_LOOP, "status.json"), data)
        if force:
            self.get_logger().info(message)


def main(args: list[str] | None = None) -> int:
    """Console script ``coordinator_node``."""
    rclpy.init(args=args)
    executor = SingleThreadedExecutor()
    node = None
    code = 0
    try:
        node = CoordinatorNode()
        executor.add_node(node)
        node.start()
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.2)
            if node.finished.is_set() and node.options.exit_when_done:
                code = node.exit_code
                break
    except (KeyboardInterrupt, ExternalShutdownException):
        code = 130
    except ClawgymError as err:
        print(f"{C.NODE_COORDINATOR}: error: {err}", file=sys.stderr)
        code = 2
    finally:
        if node is not None:
            node.stopping.set()
            node.destroy_node()
        executor.shutdown()
        if rclpy.ok():
            rclpy.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
