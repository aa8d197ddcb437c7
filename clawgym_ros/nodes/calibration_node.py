"""calibration_node: lifecycle node serving the ``calibrate`` action
(clawgym_interfaces/action/Calibrate).

Thin: goal -> :class:`~clawgym_ros.calibration.job.CalibrateRequest` -> the calibration core
(:func:`clawgym_ros.calibration.job.run_calibration`: read the robot log, fit, commit the
``calibration`` artifact) -> result; the same function ``clawgym calibrate --bag`` runs, so the
same log, parameters, bounds and seed give the same artifact id either way. The fit runs in a
worker thread; feedback follows each optimizer start and refinement, and a cancel request
ends the job at the next of those (nothing is committed). One goal at a time; goals are
rejected unless the node is active. A workstation or the loop's coordinator (online
distillation: a new robot log between iterations) sends the goals.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from clawgym_interfaces.action import Calibrate
from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError
from clawgym_ros.ros_io.action_node import ActionLifecycleNode, spin_action_node


@dataclasses.dataclass(frozen=True)
class CalibrationNodeOptions:
    """Node parameters."""

    run_dir: str = dataclasses.field(
        default=os.environ.get(C.ENV_RUN_DIR, C.DEFAULT_RUN_DIR),
        metadata={"help": "run directory used when a goal's run_dir is empty"})
    autostart: bool = dataclasses.field(
        default=False, metadata={"help": "configure and activate at start-up"})


class FitCancelledError(ClawgymError):
    """The goal was cancelled (or the node deactivated) during the fit."""


class CalibrationNode(ActionLifecycleNode):
    """Lifecycle node serving the Calibrate action."""

    options_cls = CalibrationNodeOptions
    action_type = Calibrate
    action_name = C.ACTION_CALIBRATE

    def __init__(self) -> None:
        super().__init__(C.NODE_CALIBRATION)

    async def _execute(self, goal_handle) -> Calibrate.Result:
        """Await the worker thread that fits; the executor stays free meanwhile."""
        outcome = await self._in_worker(lambda: self._calibrate(goal_handle), "calibration")
        if isinstance(outcome, FitCancelledError):
            goal_handle.canceled()
            return Calibrate.Result(success=False, message=str(outcome))
        if isinstance(outcome, BaseException):
            return Calibrate.Result(success=False,
                                    message=self._goal_failed(goal_handle, outcome))
        artifact, summary = outcome
        goal_handle.succeed()
        rmse = (f"position RMSE {summary['position_rmse_before']:.3g} -> "
                f"{summary['position_rmse_after']:.3g} rad")
        return Calibrate.Result(success=True, calibration_id=artifact.id,
                                summary_json=json.dumps(summary, sort_keys=True),
                                message=("reused: " if summary.get("reused") else "") + rmse)

    def _calibrate(self, goal_handle):
        """Worker thread: run the calibration core for one goal."""
        from clawgym_ros.calibration.job import request_from_fields, run_calibration

        assert self.options is not None
        goal = goal_handle.request
        request = request_from_fields(goal.bag, goal.params, goal.bounds_json, int(goal.seed),
                                      int(goal.starts), goal.scene)
        request.fit_config()           # names and bounds checked before the log is read
        out = goal.run_dir or self.options.run_dir

        def progress(text: str) -> None:
            if self._stop.is_set() or goal_handle.is_cancel_requested:
                raise FitCancelledError(f"cancelled ({text}); nothing committed")
            goal_handle.publish_feedback(Calibrate.Feedback(stage=text))

        self.get_logger().info(f"calibrating from {request.bag} into {out}")
        return run_calibration(out, request, progress, reuse=bool(goal.reuse))


def main(args: list[str] | None = None) -> int:
    """Console script ``calibration_node``."""
    return spin_action_node(CalibrationNode, args)


if __name__ == "__main__":
    sys.exit(main())
