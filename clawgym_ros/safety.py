"""Safety filter for hardware-in-the-loop runs (pure): velocity limits, workspace box, e-stop.

Every command from a policy to a real robot passes :class:`SafetyFilter` (``safety_node``
wraps it between the policy's command topics and the robot's):

- e-stop: one ``True`` on the e-stop topic latches a stop; every later command becomes a zero
  command until :meth:`SafetyFilter.reset` (an operator's explicit reset; a ``False`` on the
  topic does not clear it). With ``estop_timeout_s > 0`` a missing e-stop heartbeat also
  latches the stop (a dead operator console must stop the robot); until the first e-stop
  message arrives, commands are held without latching.
- velocity: base twists are clamped to ``max_linear_speed`` / ``max_angular_speed`` (the
  direction kept); arm joint targets are moved toward the target by at most
  ``max_joint_speed * dt`` per joint and clipped into the joint limits. ``dt`` is the time
  until the target is due, at least ``command_period_s``: a target due at once (a policy's
  held setpoint, ``time_from_start`` 0) is reached by the servo within one command period,
  and with ``dt`` 0 every step was cut to nothing (the robot never moved).
- workspace: a base command whose predicted position (``position + v * horizon_s``) leaves the
  ``base_min``/``base_max`` rectangle, and an arm command whose tool position (from a forward
  kinematics callable on the target, else the measured tool position) is outside the
  ``workspace_min``/``workspace_max`` box, is rejected (a zero command is sent instead).

Each call returns a :class:`Verdict` with the command to send and why it changed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from clawgym_ros.config import check_range
from clawgym_ros.errors import ConfigError

PASS = "pass"
CLAMPED = "clamped"
REJECTED = "rejected"
STOPPED = "stopped"


@dataclasses.dataclass(frozen=True)
class SafetyLimits:
    """Limits of a hardware run (SI units; the ``safety_node`` parameters)."""

    max_linear_speed: float = dataclasses.field(
        default=0.3, metadata={"help": "base linear speed limit, m/s"})
    max_angular_speed: float = dataclasses.field(
        default=0.8, metadata={"help": "base angular speed limit, rad/s"})
    max_joint_speed: float = dataclasses.field(
        default=0.5, metadata={"help": "arm joint speed limit, rad/s"})
    joint_lower: tuple[float, ...] = dataclasses.field(
        default=(-2.8,) * 7, metadata={"help": "arm joint lower limits, rad"})
    joint_upper: tuple[float, ...] = dataclasses.field(
        default=(2.8,) * 7, metadata={"help": "arm joint upper limits, rad"})
    workspace_min: tuple[float, ...] = dataclasses.field(
        default=(-0.2, -0.6, 0.0), metadata={"help": "tool workspace box min corner (x, y, z), m"})
    workspace_max: tuple[float, ...] = dataclasses.field(
        default=(0.9, 0.6, 1.0), metadata={"help": "tool workspace box max corner (x, y, z), m"})
    base_min: tuple[float, ...] = dataclasses.field(
        default=(-5.0, -5.0), metadata={"help": "base region min corner (x, y), m"})
    base_max: tuple[float, ...] = dataclasses.field(
        default=(5.0, 5.0), metadata={"help": "base region max corner (x, y), m"})
    horizon_s: float = dataclasses.field(
        default=0.5, metadata={"help": "look-ahead for predicted base positions, s"})
    estop_timeout_s: float = dataclasses.field(
        default=0.0, metadata={"help": "latch a stop if no e-stop message for this long; 0=off"})
    command_period_s: float = dataclasses.field(
        default=0.02, metadata={"help": "shortest time an arm target is reached in, s (the "
                                "policy's command period: a target due at once is limited "
                                "to max_joint_speed x this)"})

    def __post_init__(self) -> None:
        for name in ("max_linear_speed", "max_angular_speed", "max_joint_speed"):
            check_range(name, getattr(self, name), 0.0, 10.0)
        check_range("horizon_s", self.horizon_s, 0.0, 10.0)
        check_range("command_period_s", self.command_period_s, 0.0, 1.0, low_open=True)
        check_range("estop_timeout_s", self.estop_timeout_s, 0.0, 3600.0)
        for name in ("joint_lower", "joint_upper", "workspace_min", "workspace_max",
                     "base_min", "base_max"):
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))
        if len(self.joint_lower) != len(self.joint_upper):
            raise ConfigError("joint_upper", self.joint_upper,
                              f"{len(self.joint_lower)} values (as joint_lower)")
        for lo_name, hi_name, n in (("workspace_min", "workspace_max", 3),
                                    ("base_min", "base_max", 2),
                                    ("joint_lower", "joint_upper", len(self.joint_lower))):
            lo, hi = getattr(self, lo_name), getattr(self, hi_name)
            if len(lo) != n or len(hi) != n:
                raise ConfigError(hi_name if len(lo) == n else lo_name, hi, f"{n} values")
            for i, (a, b) in enumerate(zip(lo, hi)):
                if not a < b:
                    raise ConfigError(f"{hi_name}[{i}]", b, f"> {lo_name}[{i}]={a:g}")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What to send and why: ``action`` is pass, clamped, rejected or stopped."""

    command: tuple[float, ...]
    action: str
    reason: str = ""


def _inside(point: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> bool:
    return all(a <= p <= b for p, a, b in zip(point, lo, hi))


class SafetyFilter:
    """Stateful filter: the e-stop latch and its heartbeat clock live here."""

    def __init__(self, limits: SafetyLimits | None = None,
                 fk: Callable[[Sequence[float]], Sequence[float]] | None = None):
        self.limits = limits or SafetyLimits()
        self.fk = fk
        self.stopped = False
        self.stop_reason = ""
        self._last_estop_msg: float | None = None

    # --- e-stop --------------------------------------------------------------------------------
    def estop(self, engaged: bool, now: float) -> None:
        """An e-stop message at time ``now`` (s): True latches the stop; any message is a
        heartbeat."""
        self._last_estop_msg = now
        if engaged and not self.stopped:
            self.stopped = True
            self.stop_reason = "e-stop engaged"

    def reset(self, now: float) -> None:
        """Operator reset: clear the latch (and restart the heartbeat clock)."""
        self.stopped = False
        self.stop_reason = ""
        self._last_estop_msg = now

    def check_heartbeat(self, now: float) -> bool:
        """Whether commands are stopped: the latch; or, with a heartbeat required, no e-stop
        message seen yet (a hold, not a latch: the operator's console may still be connecting,
        and a startup race must not need an operator reset; the robot holds meanwhile). An
        overdue heartbeat after the first latches the stop."""
        timeout = self.limits.estop_timeout_s
        if timeout > 0 and not self.stopped:
            if self._last_estop_msg is None:
                self.stop_reason = "waiting for the first e-stop heartbeat"
                return True
            if now - self._last_estop_msg > timeout:
                self.stopped = True
                self.stop_reason = f"no e-stop heartbeat for {now - self._last_estop_msg:.2f} s"
        return self.stopped

    # --- commands ------------------------------------------------------------------------------
    def filter_twist(self, linear: Sequence[float], angular_z: float,
                     position_xy: Sequence[float] | None, now: float) -> Verdict:
        """Filter a base command ``(vx, vy)``, ``wz`` given the base position (None = unknown).

        Returns:
            Verdict with command ``(vx, vy, wz)``.
        """
        lim = self.limits
        zero = (0.0, 0.0, 0.0)
        if self.check_heartbeat(now):
            return Verdict(zero, STOPPED, self.stop_reason)
        vx, vy = float(linear[0]), float(linear[1])
        wz = float(angular_z)
        if not all(math.isfinite(v) for v in (vx, vy, wz)):
            return Verdict(zero, REJECTED, "non-finite command")
        reasons = []
        speed = math.hypot(vx, vy)
        if speed > lim.max_linear_speed:
            scale = lim.max_linear_speed / speed
            vx, vy = vx * scale, vy * scale
            reasons.append(f"linear speed {speed:.3f} > {lim.max_linear_speed:g} m/s")
        if abs(wz) > lim.max_angular_speed:
            reasons.append(f"angular speed {abs(wz):.3f} > {lim.max_angular_speed:g} rad/s")
            wz = math.copysign(lim.max_angular_speed, wz)
        if position_xy is not None:
            # The command is in the base frame; its world displacement magnitude is what
            # matters for a conservative check: test every heading's worst case.
            x, y = float(position_xy[0]), float(position_xy[1])
            reach = math.hypot(vx, vy) * lim.horizon_s
            corners = [(x + dx * reach, y + dy * reach) for dx, dy in
                       ((1, 0), (-1, 0), (0, 1), (0, -1))] if reach > 0 else [(x, y)]
            if not _inside((x, y), lim.base_min, lim.base_max):
                if reach > 0:
                    return Verdict(zero, REJECTED, f"base at ({x:.2f}, {y:.2f}) is outside "
                                   "the allowed region")
            elif not all(_inside(c, lim.base_min, lim.base_max) for c in corners):
                return Verdict(zero, REJECTED, f"base would leave the allowed region within "
                               f"{lim.horizon_s:g} s")
        action = CLAMPED if reasons else PASS
        return Verdict((vx, vy, wz), action, "; ".join(reasons))

    def filter_joints(self, target: Sequence[float], current: Sequence[float], dt: float,
                      tool_position: Sequence[float] | None, now: float) -> Verdict:
        """Filter an arm joint-position target reached in ``dt`` seconds from ``current``.

        Args:
            target: commanded joint positions.
            current: measured joint positions (same order).
            dt: time until the target is due (s); the step is limited to speed * dt, with
                dt at least ``command_period_s``.
            tool_position: measured tool position (used when no fk callable was given).
            now: time (s) for the e-stop heartbeat.

        Returns:
            Verdict with the (possibly clamped) target; when stopped or rejected, the command
            is ``current`` (hold position).
        """
        lim = self.limits
        hold = tuple(float(v) for v in current)
        if self.check_heartbeat(now):
            return Verdict(hold, STOPPED, self.stop_reason)
        if len(target) != len(current) or len(target) != len(lim.joint_lower):
            return Verdict(hold, REJECTED, f"{len(target)} joint targets for "
                           f"{len(lim.joint_lower)} joints")
        if not all(math.isfinite(float(v)) for v in target):
            return Verdict(hold, REJECTED, "non-finite joint target")
        reasons = []
        dt = max(float(dt), lim.command_period_s)
        max_step = lim.max_joint_speed * dt
        out = []
        for i, (q, c) in enumerate(zip(target, current)):
            q, c = float(q), float(c)
            step = q - c
            if abs(step) > max_step + 1e-12:
                q = c + math.copysign(max_step, step)
                reasons.append(f"joint {i} speed {abs(step) / dt:.3f} > "
                               f"{lim.max_joint_speed:g} rad/s")
            clipped = min(max(q, lim.joint_lower[i]), lim.joint_upper[i])
            if clipped != q:
                reasons.append(f"joint {i} target {q:.3f} outside its limits")
            out.append(clipped)
        tool = self.fk(out) if self.fk is not None else tool_position
        if tool is not None and not _inside(tool, lim.workspace_min, lim.workspace_max):
            where = ", ".join(f"{v:.2f}" for v in tool)
            return Verdict(hold, REJECTED, f"tool at ({where}) outside the workspace box")
        return Verdict(tuple(out), CLAMPED if reasons else PASS, "; ".join(reasons))
