"""Clock pacing for a simulator driven by a node: free-running at a real-time factor, or lockstep.

Pure (no rclpy): the sim node's timer asks :class:`RealTimePacer` how many control steps are
due at the current wall time, and :class:`EveryN` which sensors are due after a batch of
steps. Both count whole control steps, so simulation time is always an exact multiple of the
control step and sensor publication is deterministic in lockstep.
"""

from __future__ import annotations

import math

from clawgym_ros.config import check_int, check_range

CLOCK_FREE = "free"
CLOCK_LOCKSTEP = "lockstep"
CLOCK_MODES: tuple[str, ...] = (CLOCK_FREE, CLOCK_LOCKSTEP)


class RealTimePacer:
    """Steps due so that simulation time follows ``real_time_factor`` x wall time.

    When the simulator falls behind by more than ``max_steps_per_tick`` steps, the pacer does
    not try to catch up later (that would burst); it re-anchors, so the simulation runs slower
    than asked rather than in spurts.

    Args:
        control_dt: seconds of simulation time per control step (> 0).
        real_time_factor: simulation seconds per wall second (> 0).
        max_steps_per_tick: most steps one :meth:`due` call returns (>= 1).
    """

    def __init__(self, control_dt: float, real_time_factor: float = 1.0,
                 max_steps_per_tick: int = 10) -> None:
        self.control_dt = check_range("control_dt", control_dt, 0.0, low_open=True)
        self.real_time_factor = check_range("real_time_factor", real_time_factor, 0.0,
                                            low_open=True)
        self.max_steps_per_tick = check_int("max_steps_per_tick", max_steps_per_tick, 1)
        self._anchor: tuple[float, int] | None = None   # (wall time, step count)
        self.behind = 0                                   # steps given up by re-anchoring

    def start(self, wall: float, steps: int) -> None:
        """Anchor: at wall time ``wall`` the simulator had done ``steps`` control steps."""
        self._anchor = (wall, steps)

    def due(self, wall: float, steps: int) -> int:
        """Control steps to run now, given the simulator has done ``steps`` so far."""
        if self._anchor is None:
            self.start(wall, steps)
        wall0, steps0 = self._anchor  # type: ignore[misc]
        target = steps0 + math.floor(
            (wall - wall0) * self.real_time_factor / self.control_dt + 1e-9)
        todo = target - steps
        if todo <= self.max_steps_per_tick:
            return max(todo, 0)
        self.behind += todo - self.max_steps_per_tick
        self.start(wall, steps + self.max_steps_per_tick)
        return self.max_steps_per_tick


class EveryN:
    """Fires once per ``n`` control steps (a sensor at a rate dividing the control rate).

    Args:
        control_rate: control steps per simulated second.
        rate: desired publication rate in Hz; rounded to a whole number of control steps
            (at least one). 0 disables.
    """

    def __init__(self, control_rate: float, rate: float) -> None:
        check_range("rate", rate, 0.0)
        self.n = 0 if rate == 0.0 else max(1, round(control_rate / rate))

    @property
    def enabled(self) -> bool:
        return self.n > 0

    def crossed(self, before: int, after: int) -> bool:
        """Whether a multiple of ``n`` lies in ``(before, after]`` (steps before/after a batch).

        Step 0 (right after a reset) counts as a multiple: pass ``before = -1`` to include it.
        """
        if not self.enabled or after <= before:
            return False
        return after // self.n > math.floor(before / self.n)
