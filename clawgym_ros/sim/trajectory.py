"""Joint trajectories sampled in time: position and velocity at any (simulation) time.

A pure core (no rclpy): the sim node converts a trajectory_msgs/JointTrajectory into a
:class:`JointTrajectory` and asks it, every control step, for the joint targets and velocity
feed-forward at the current simulation time. Semantics follow ros2_control's
joint_trajectory_controller: points are relative to a start time; when the first point is not
at time zero the trajectory starts from the state the joints had on receipt; after the last
point the last position is held with zero velocity.

Interpolation between points is cubic Hermite (positions and velocities; velocities that are not
given are estimated from neighbouring segments, zero at the ends and at turning points, so the
curve does not overshoot) or linear (constant velocity per segment).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from clawgym_ros.config import check_choice
from clawgym_ros.errors import ConfigError

INTERPOLATIONS: tuple[str, ...] = ("cubic", "linear")
#: A sample time within this of a waypoint's time is that waypoint (seconds). Stamps and
#: ``time_from_start`` are integer nanoseconds while sample times are sums of floats, so a
#: sample meant for a waypoint can miss it by an ulp; snapping returns the waypoint's own
#: values, bit for bit (what the lockstep chunks of policy_node rely on).
KNOT_TOLERANCE_S = 1e-9


@dataclasses.dataclass(frozen=True)
class JointTrajectory:
    """Waypoints of named joints relative to ``start_time``.

    Attributes:
        joint_names: names of the commanded joints (a subset of the robot's is allowed).
        times: (N,) seconds after ``start_time``, strictly increasing, >= 0.
        positions: (N, J) joint positions.
        velocities: (N, J) joint velocities, or None to estimate them (cubic) or ignore them.
        start_time: absolute (simulation) time of ``times == 0``.
        interpolation: ``"cubic"`` or ``"linear"``.
    """

    joint_names: tuple[str, ...]
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    start_time: float = 0.0
    interpolation: str = "cubic"

    def __post_init__(self) -> None:
        check_choice("trajectory.interpolation", self.interpolation, INTERPOLATIONS)
        names = tuple(self.joint_names)
        if len(set(names)) != len(names) or not names:
            raise ConfigError("trajectory.joint_names", names, "distinct, non-empty names")
        times = np.asarray(self.times, dtype=float).reshape(-1)
        positions = np.asarray(self.positions, dtype=float)
        if times.size == 0:
            raise ConfigError("trajectory.points", 0, "at least one point")
        if positions.shape != (times.size, len(names)):
            raise ConfigError("trajectory.positions", positions.shape,
                              f"shape ({times.size}, {len(names)}) (points x joints)")
        if not (np.all(np.isfinite(times)) and np.all(np.isfinite(positions))):
            raise ConfigError("trajectory.points", "non-finite", "finite times and positions")
        if times[0] < 0.0 or np.any(np.diff(times) <= 0.0):
            raise ConfigError("trajectory.times", times.tolist(),
                              "strictly increasing times from start, >= 0")
        velocities = self.velocities
        if velocities is not None:
            velocities = np.asarray(velocities, dtype=float)
            if velocities.shape != positions.shape:
                raise ConfigError("trajectory.velocities", velocities.shape,
                                  f"shape {positions.shape} like positions, or none")
            if not np.all(np.isfinite(velocities)):
                raise ConfigError("trajectory.velocities", "non-finite", "finite velocities")
        object.__setattr__(self, "joint_names", names)
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "positions", positions)
        object.__setattr__(self, "velocities", velocities)
        object.__setattr__(self, "start_time", float(self.start_time))

    @property
    def duration(self) -> float:
        """Seconds from ``start_time`` to the last point."""
        return float(self.times[-1])

    @property
    def end_time(self) -> float:
        """Absolute time of the last point."""
        return self.start_time + self.duration

    def with_start_state(
        self, positions: Sequence[float], velocities: Sequence[float] | None = None,
    ) -> JointTrajectory:
        """Prepend the joints' current state at time zero when the first point is later.

        Args:
            positions: current positions of :attr:`joint_names` (same order).
            velocities: current velocities (zero when None).

        Returns:
            A trajectory that starts where the joints are; ``self`` if the first point is at 0.
        """
        if self.times[0] == 0.0:
            return self
        pos0 = np.asarray(positions, dtype=float).reshape(1, -1)
        if pos0.shape[1] != len(self.joint_names):
            raise ConfigError("trajectory.start_state", pos0.shape[1],
                              f"{len(self.joint_names)} positions (one per joint)")
        vel0 = (np.zeros_like(pos0) if velocities is None
                else np.asarray(velocities, dtype=float).reshape(1, -1))
        new_vel = None
        if self.velocities is not None:
            new_vel = np.vstack([vel0, self.velocities])
        return dataclasses.replace(
            self, times=np.concatenate([[0.0], self.times]),
            positions=np.vstack([pos0, self.positions]), velocities=new_vel)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities at absolute time ``t``.

        Before the first point the first position is held (call :meth:`with_start_state` first
        to move from the current state); after the last point the last position is held; both
        with zero velocity. At a waypoint (within :data:`KNOT_TOLERANCE_S`) the waypoint's
        own position is returned exactly, with its velocity when the trajectory gives them.

        Returns:
            ``(positions, velocities)``, each of shape (J,).
        """
        rel = float(t) - self.start_time
        times = self.times
        k = int(np.searchsorted(times, rel))
        for i in (k - 1, k):
            if 0 <= i < times.size and abs(times[i] - rel) <= KNOT_TOLERANCE_S:
                if self.velocities is not None:
                    return self.positions[i].copy(), self.velocities[i].copy()
                rel = float(times[i])
        if rel <= times[0]:
            return self.positions[0].copy(), np.zeros(len(self.joint_names))
        if rel >= times[-1]:
            return self.positions[-1].copy(), np.zeros(len(self.joint_names))
        k = int(np.searchsorted(times, rel, side="right")) - 1
        t0, t1 = times[k], times[k + 1]
        h = t1 - t0
        p0, p1 = self.positions[k], self.positions[k + 1]
        if self.interpolation == "linear":
            s = (rel - t0) / h
            return p0 + s * (p1 - p0), (p1 - p0) / h
        v0, v1 = self._knot_velocities(k), self._knot_velocities(k + 1)
        return _hermite(p0, v0, p1, v1, h, rel - t0)

    def _knot_velocities(self, k: int) -> np.ndarray:
        if self.velocities is not None:
            return self.velocities[k]
        n = self.times.size
        if k == 0 or k == n - 1:
            return np.zeros(len(self.joint_names))
        left = (self.positions[k] - self.positions[k - 1]) / (self.times[k] - self.times[k - 1])
        right = (self.positions[k + 1] - self.positions[k]) / (self.times[k + 1] - self.times[k])
        # Zero velocity at turning points keeps the cubic from overshooting the waypoint.
        return np.where(left * right > 0.0, 0.5 * (left + right), 0.0)


def _hermite(
    p0: np.ndarray, v0: np.ndarray, p1: np.ndarray, v1: np.ndarray, h: float, dt: float,
) -> tuple[np.ndarray, np.ndarray]:
    s = dt / h
    s2, s3 = s * s, s * s * s
    h00, h10, h01, h11 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, s3 - s2
    pos = h00 * p0 + h10 * h * v0 + h01 * p1 + h11 * h * v1
    d00, d10, d01, d11 = 6 * s2 - 6 * s, 3 * s2 - 4 * s + 1, -6 * s2 + 6 * s, 3 * s2 - 2 * s
    vel = (d00 * p0 + d01 * p1) / h + d10 * v0 + d11 * v1
    return pos, vel


def chunk_steps(times_ns: Sequence[int], step_ns: int) -> int:
    """Control steps a lockstep command covers, from its points' ``time_from_start`` (ns).

    A *chunk* has its points exactly at ``step, 2 step, ..., n step``: point ``i`` is what
    the sampler gives at the end of step ``i - 1`` (its target during that step), so it
    commands the ``n`` steps starting at the header stamp. Any other trajectory (one point
    at 0, a target with velocity feed-forward, a real motion) commands one step.
    """
    times = [int(t) for t in times_ns]
    if step_ns > 0 and times and times == [step_ns * (i + 1) for i in range(len(times))]:
        return len(times)
    return 1


def scatter(
    names: Sequence[str], values: np.ndarray, all_names: Sequence[str], base: np.ndarray,
) -> np.ndarray:
    """Write ``values`` of ``names`` into a copy of ``base`` ordered by ``all_names``.

    Used to merge a trajectory over a subset of joints with the targets of the others.

    Raises:
        ConfigError: a name that is not in ``all_names``.
    """
    index = _index(all_names)
    out = np.array(base, dtype=float, copy=True)
    for name, value in zip(names, np.asarray(values, dtype=float), strict=True):
        if name not in index:
            raise ConfigError("joint_names", name, "one of " + ", ".join(all_names))
        out[index[name]] = value
    return out


def gather(names: Sequence[str], values: np.ndarray, all_names: Sequence[str]) -> np.ndarray:
    """Pick the entries of ``names`` out of ``values`` ordered by ``all_names``."""
    index = _index(all_names)
    missing = [n for n in names if n not in index]
    if missing:
        raise ConfigError("joint_names", missing[0], "one of " + ", ".join(all_names))
    return np.asarray(values, dtype=float)[[index[n] for n in names]]


def _index(names: Sequence[str]) -> Mapping[str, int]:
    return {name: i for i, name in enumerate(names)}
