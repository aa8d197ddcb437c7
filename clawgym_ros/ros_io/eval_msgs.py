"""Conversions for the evaluator: report.json content -> EvalSummary message.

A dimension the suite did not measure (``value: null, n: 0`` in the report) is sent as NaN
with n = 0, so subscribers can tell "not measured" from a real zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from clawgym_interfaces.msg import CapabilityGap, DimensionScore, EvalSummary
from clawgym_ros import constants as C
from clawgym_ros.ros_io.convert import time_msg

NAN = math.nan


def _num(value: Any) -> float:
    return NAN if value is None else float(value)


def dimension_msg(name: str, score: Mapping[str, Any]) -> DimensionScore:
    """One dimension of ``report["scores"]`` (``{"value", "ci", "n"}``)."""
    ci = score.get("ci") or (None, None)
    return DimensionScore(dimension=name, value=_num(score.get("value")),
                          ci_low=_num(ci[0]), ci_high=_num(ci[1]), n=int(score.get("n") or 0))


def gap_msg(gap: Mapping[str, Any]) -> CapabilityGap:
    """One entry of ``report["gaps"]``."""
    return CapabilityGap(condition=str(gap["condition"]), capability=str(gap["capability"]),
                         deviation=float(gap["deviation"]), evidence=str(gap["evidence"]))


def eval_summary_msg(report: Mapping[str, Any], report_id: str, checkpoint_id: str = "",
                     stamp: float = 0.0) -> EvalSummary:
    """The EvalSummary of a report (as read from report.json).

    Args:
        report: the report dict.
        report_id: its artifact id.
        checkpoint_id: the evaluated checkpoint ("" for a scripted policy).
        stamp: header time in seconds.
    """
    msg = EvalSummary()
    msg.header.stamp = time_msg(stamp)
    msg.report_id = report_id
    msg.checkpoint_id = checkpoint_id
    msg.suite = str(report["suite"]["name"])
    msg.seed = int(report["suite"]["seed"])
    scores = report.get("scores", {})
    msg.dimensions = [dimension_msg(d, scores.get(d, {})) for d in C.DIMENSIONS]
    msg.gaps = [gap_msg(g) for g in report.get("gaps", [])]
    return msg
