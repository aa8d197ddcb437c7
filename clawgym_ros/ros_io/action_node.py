"""A lifecycle node that serves one long-running action (synthesis, training, evaluation).

The three long-work nodes share this shape: parameters from an options dataclass, an action
server created on configure, goals accepted only while active and one at a time, and a stop
event that a worker thread polls for cancellation and shutdown. Subclasses set the class
attributes and implement ``_execute``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.task import Future

from clawgym_ros.config import from_dict
from clawgym_ros.errors import ClawgymError
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.spin import autostart, spin

#: Seconds :meth:`ActionLifecycleNode.destroy_node` waits for a running goal's worker thread
#: to stop: the workers poll ``_stop`` between steps (a training step, a synthesized or
#: evaluated episode), so they end within one of those.
WORKER_STOP_TIMEOUT_S = 60.0


class ActionLifecycleNode(LifecycleNode):
    """Lifecycle node serving ``action_type`` on ``action_name`` with ``options_cls`` params.

    Hooks: :meth:`prepare` (extra configure work; may raise ClawgymError) and :meth:`release`
    (extra cleanup). ``self._busy`` is held by the running goal; ``self._stop`` is set on
    deactivate, cleanup, shutdown and when the node is destroyed (Ctrl-C, SIGTERM: the
    running goal's worker stops and is joined first).
    """

    options_cls: type
    action_type: type
    action_name: str

    def __init__(self, node_name: str) -> None:
        super().__init__(node_name)
        self.options: Any = None
        self._declared = False
        self._server: ActionServer | None = None
        self._active = False
        self._busy = threading.Lock()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------
    def read_options(self) -> Any:
        """Declare (first time) and read the node parameters."""
        if not self._declared:
            self._declared = True
            return declare_config(self, self.options_cls)
        values = {f.name: self.get_parameter(f.name).value
                  for f in dataclasses.fields(self.options_cls)}
        return from_dict(self.options_cls, values, source=f"node {self.get_name()}")

    def prepare(self) -> None:
        """Extra work on configure, after the options are read."""

    def release(self) -> None:
        """Extra work on cleanup, after the action server is destroyed."""

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.options = self.read_options()
            self.prepare()
        except ClawgymError as err:
            self.transition_error = str(err)
            self.get_logger().error(f"configure failed: {err}")
            return TransitionCallbackReturn.FAILURE
        self._server = ActionServer(
            self, self.action_type, self.action_name, execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=lambda _req: CancelResponse.ACCEPT)
        self.get_logger().info(f"configured; run_dir default {self.options.run_dir}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        self._stop.clear()
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self._stop.set()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop.set()
        if self._server is not None:
            self._server.destroy()
            self._server = None
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self._stop.set()
        return self.on_cleanup(state)

    # --- the action ------------------------------------------------------------------------
    def _on_goal(self, goal: Any) -> GoalResponse:
        name = self.action_type.__name__
        if not self._active:
            self.get_logger().warning(f"rejecting {name} goal: node is not active")
            return GoalResponse.REJECT
        if self._busy.locked():
            self.get_logger().warning(f"rejecting {name} goal: another goal is running")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute(self, goal_handle: Any) -> Any:
        raise NotImplementedError

    async def _in_worker(self, work: Callable[[], Any], name: str,
                         watch: Callable[[Future], None] | None = None) -> Any:
        """Run ``work()`` in a worker thread while the goal holds ``_busy``, and await it
        without blocking the executor (cancel requests, lifecycle services and topics keep
        being served). Returns its result, or the exception it raised (not re-raised: the
        caller turns it into the action's result). ``watch(done)``, if given, runs in a
        second thread until the work is done (e.g. to forward cancel requests)."""
        done: Future = Future(executor=self.executor)
        done.add_done_callback(lambda _f: None)  # completion wakes the executor

        def run() -> None:
            try:
                outcome: Any = work()
            except BaseException as err:  # noqa: BLE001 (reported in the result)
                outcome = err
            try:
                done.set_result(outcome)
            except Exception:  # noqa: BLE001 (the node is stopping: its executor is gone)
                if not self._stop.is_set():
                    raise

        with self._busy:
            self._worker = threading.Thread(target=run, name=name, daemon=True)
            self._worker.start()
            if watch is not None:
                threading.Thread(target=watch, args=(done,), name=f"{name}-watch",
                                 daemon=True).start()
            return await done

    def destroy_node(self) -> None:
        """Stop and join the running goal's worker before the node goes. Left running, a
        worker inside torch or MuJoCo when the interpreter exits aborts the process ("terminate
        called without an active exception", SIGABRT) instead of letting it exit cleanly; what
        the goal had not committed is not committed (as on a cancel)."""
        self._stop.set()
        worker = self._worker
        if worker is not None and worker.is_alive() and worker is not threading.current_thread():
            try:
                worker.join(WORKER_STOP_TIMEOUT_S)
            except KeyboardInterrupt:
                pass            # a second Ctrl-C: leave the worker to the interpreter's exit
        super().destroy_node()

    def _goal_failed(self, goal_handle: Any, error: BaseException) -> str:
        """Abort the goal for ``error``; returns the message for the result (a ClawgymError's
        own text, else "internal error: ...")."""
        message = str(error) if isinstance(error, ClawgymError) else \
            f"internal error: {type(error).__name__}: {error}"
        self.get_logger().error(f"{self.action_type.__name__} goal failed: {message}")
        goal_handle.abort()
        return message


def _autostart(node: ActionLifecycleNode) -> None:
    if node.read_options().autostart:
        autostart(node)


def spin_action_node(node_cls: type[ActionLifecycleNode], args: list[str] | None = None) -> int:
    """Console-script body: run one action node (configure + activate it when ``autostart``).

    Returns:
        The exit code: 0, or 2 when the parameters are invalid (the error names the field).
    """
    return spin(node_cls, args, start=_autostart)
