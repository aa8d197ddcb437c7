"""QoS profiles, defined once: sensor data, reliable commands, latched status."""

from __future__ import annotations

import dataclasses
from typing import Any

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

#: Camera, IMU, GPS, joint states: best effort, keep last 5.
SENSOR_QOS: QoSProfile = qos_profile_sensor_data
#: Commands (trajectories, gripper, cmd_vel): reliable, keep last 10.
COMMAND_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
#: Sensor topics of a lockstep simulation: every sample of every stamp must arrive (a reliable
#: publisher also serves best-effort SENSOR_QOS subscribers). A keep-last writer overwrites
#: samples a reader has not acknowledged yet, and the evaluator reads a whole run of
#: ``RUN_STEPS`` (10) steps behind the policy at worst: the depth leaves room for three runs.
LOCKSTEP_SENSOR_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=32, reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
#: Status and reports: reliable, transient local, depth 1 (late joiners get the last one).
LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
#: sim_node's task_state: latched (a late joiner gets the newest) and, like the lockstep
#: sensors, deep enough that a reader consuming one per step misses none.
TASK_STATE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=32, reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
#: /clock: reliable, keep last 1 (lockstep consumers must not miss ticks they wait for).
CLOCK_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)


def interposer_qos(reliable: bool) -> QoSProfile:
    """QoS of a perturbation interposer's input and output: sensor QoS (best effort, matches
    any publisher), or reliable behind a lockstep sim_node, where a lost input sample would
    shift the interposer's random stream away from the in-process one."""
    return LOCKSTEP_SENSOR_QOS if reliable else SENSOR_QOS


def reliable_field() -> Any:
    """The interposers' ``reliable`` parameter (a dataclass field of their topic configs),
    chosen by :func:`interposer_qos`."""
    return dataclasses.field(default=False, metadata={"help": (
        "reliable input and output (behind a lockstep sim_node: a lost sample would shift the "
        "perturbation stream); false = sensor QoS, best effort")})
