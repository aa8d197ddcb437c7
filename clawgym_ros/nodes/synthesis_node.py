"""synthesis_node: lifecycle node serving the ``synthesize`` action
(clawgym_interfaces/action/Synthesize).

Thin: goal -> :class:`~clawgym_ros.orchestration.synthesis.SynthRequest` -> the synthesis core
(:func:`clawgym_ros.orchestration.synthesis.synthesize`: experts in worker processes, dual
sign-off, MCAP dataset artifact) -> result. Generation runs in a worker thread while the
action's execute coroutine awaits it, so the single-threaded executor keeps serving cancel
requests and lifecycle services. Feedback (done/total/accepted/rejected and rejections by
reason) follows every finished episode; a cancel request stops the run after the episode in
progress (nothing is committed). One goal at a time; goals are rejected unless the node is
active.

Lifecycle: the constructor declares parameters only; ``on_configure`` reads them and creates
the action server; ``on_activate`` accepts goals; ``on_deactivate`` cancels a running goal;
``on_cleanup`` removes the server. With ``autostart:=true`` the node configures and activates
itself at start-up.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from clawgym_interfaces.action import Synthesize
from clawgym_interfaces.msg import RejectionCount
from clawgym_ros import constants as C
from clawgym_ros.config import check_int
from clawgym_ros.ros_io.action_node import ActionLifecycleNode, spin_action_node


@dataclasses.dataclass(frozen=True)
class SynthesisNodeOptions:
    """Node parameters."""

    run_dir: str = dataclasses.field(
        default=os.environ.get(C.ENV_RUN_DIR, C.DEFAULT_RUN_DIR),
        metadata={"help": "run directory used when a goal's run_dir is empty"})
    default_workers: int = dataclasses.field(
        default=0, metadata={"help": "worker processes when a goal says 0 (0 = one per core)"})
    autostart: bool = dataclasses.field(
        default=False, metadata={"help": "configure and activate at start-up"})

    def __post_init__(self) -> None:
        check_int("default_workers", self.default_workers, 0, 1024)


def goal_request(goal: Any, options: SynthesisNodeOptions):
    """Synthesize goal + node options -> SynthRequest (ConfigError names the bad field)."""
    from clawgym_ros.orchestration.synthesis import SynthRequest
    from clawgym_ros.synthesis.mixture import MixtureSpec

    return SynthRequest(out=goal.run_dir or options.run_dir, episodes=int(goal.episodes),
                        seed=int(goal.seed), mixture=MixtureSpec.from_entries(goal.mixture),
                        workers=int(goal.workers) or options.default_workers,
                        images=bool(goal.record_images), options=goal_expert_options(goal))


def goal_expert_options(goal: Any) -> dict[str, Any]:
    """The goal's ``options_json`` as checked expert options (ConfigError names the field);
    what a ``from_report`` goal's recovery episodes run with, as the mixture episodes do."""
    from clawgym_ros.config import json_object
    from clawgym_ros.tasks.expert import check_expert_options

    return check_expert_options(json_object(goal.options_json, "options_json"),
                                "options_json.")


def rejection_msgs(by_reason: dict[str, int]) -> list[RejectionCount]:
    """RejectionCount messages in the stable order of ``constants.REJECTION_REASONS``."""
    order = {c: i for i, c in enumerate(C.REJECTION_REASONS)}
    return [RejectionCount(reason=k, count=int(v)) for k, v in
            sorted(by_reason.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))]


class SynthesisNode(ActionLifecycleNode):
    """Lifecycle node serving the Synthesize action."""

    options_cls = SynthesisNodeOptions
    action_type = Synthesize
    action_name = C.ACTION_SYNTHESIZE

    def __init__(self) -> None:
        super().__init__(C.NODE_SYNTHESIS)

    async def _execute(self, goal_handle) -> Synthesize.Result:
        """Await the worker thread that synthesizes; the executor stays free meanwhile."""
        outcome = await self._in_worker(lambda: self._synthesize(goal_handle), "synthesis")
        if isinstance(outcome, BaseException):
            return Synthesize.Result(success=False,
                                     message=self._goal_failed(goal_handle, outcome))
        artifact, summary = outcome
        result = Synthesize.Result(
            accepted=summary.accepted, rejected=summary.rejected,
            rejections=rejection_msgs(summary.rejected_by_reason), wall_time=summary.wall_s)
        if summary.cancelled or artifact is None:
            goal_handle.canceled()
            result.success = False
            result.message = f"cancelled after {summary.done} of {summary.planned} episodes"
            return result
        goal_handle.succeed()
        result.success, result.dataset_id = True, artifact.id
        result.message = f"{summary.accepted}/{summary.done} accepted"
        return result

    def _synthesize(self, goal_handle):
        """Worker thread: run the synthesis core for one goal (at the goal's calibration)."""
        from clawgym_ros.calibration.apply import calibration_scope

        assert self.options is not None
        req = goal_handle.request
        with calibration_scope(req.run_dir or self.options.run_dir, req.calibration_id):
            return self._run_goal(goal_handle)

    def _run_goal(self, goal_handle):
        from clawgym_ros.orchestration.synthesis import synthesize

        assert self.options is not None

        def feedback(progress: Any) -> None:
            goal_handle.publish_feedback(Synthesize.Feedback(
                done=progress.done, total=progress.total, accepted=progress.accepted,
                rejected=progress.rejected,
                rejections=rejection_msgs(progress.rejected_by_reason)))

        def cancelled() -> bool:
            return self._stop.is_set() or goal_handle.is_cancel_requested

        if goal_handle.request.from_report:
            from clawgym_ros.orchestration.synthesis import synthesize_recovery

            req = goal_handle.request
            out = req.run_dir or self.options.run_dir
            self.get_logger().info(f"synthesizing {req.episodes} recovery episodes from "
                                   f"report {req.from_report[:12]}, seed {req.seed}, into {out}")
            return synthesize_recovery(out, req.from_report, int(req.episodes), int(req.seed),
                                       int(req.workers) or self.options.default_workers,
                                       progress=feedback, cancel=cancelled,
                                       options=goal_expert_options(req))
        request = goal_request(goal_handle.request, self.options)
        self.get_logger().info(f"synthesizing {request.episodes} episodes, seed "
                               f"{request.seed}, into {request.out}")
        return synthesize(request, progress=feedback, cancel=cancelled)


def main(args: list[str] | None = None) -> int:
    """Console script ``synthesis_node``."""
    return spin_action_node(SynthesisNode, args)


if __name__ == "__main__":
    sys.exit(main())
