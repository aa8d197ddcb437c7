"""Time parameterization of joint-space paths within velocity and acceleration limits (toppra).

The geometric path (a polyline of waypoints) is resampled densely before a cubic spline is fit
through it, so the timed path stays within a small distance of the polyline the planner
validated; the planner re-checks the timed result densely anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from clawgym_ros.planning.types import Trajectory

#: Spacing (max joint change, rad) of the resampled polyline the spline goes through.
RESAMPLE_STEP = 0.04


def densify(positions: np.ndarray, max_step: float) -> np.ndarray:
    """Insert points so that no joint changes by more than ``max_step`` between neighbours
    (segment i gets a + (b - a) * (k / n) for k = 1..n)."""
    positions = np.asarray(positions, dtype=float)
    out = [positions[:1]]
    for a, b in zip(positions[:-1], positions[1:], strict=True):
        n = max(1, int(np.ceil(np.max(np.abs(b - a)) / max_step)))
        out.append(a + (b - a) * (np.arange(1, n + 1) / n)[:, None])
    return np.concatenate(out)


def time_parameterize(
    positions: np.ndarray,
    joint_names: Sequence[str],
    max_velocity: np.ndarray,
    max_acceleration: np.ndarray,
    dt: float = 0.02,
    resample_step: float = RESAMPLE_STEP,
) -> Trajectory | None:
    """Time-optimal trajectory along the waypoint polyline, starting and ending at rest.

    Args:
        positions: (N, J) waypoints (N >= 1).
        joint_names: J names.
        max_velocity, max_acceleration: (J,) limits (already scaled).
        dt: sampling period of the returned points.
        resample_step: polyline resampling before the spline fit (rad).

    Returns:
        The trajectory, or None when toppra finds no parameterization.
    """
    import toppra
    import toppra.algorithm as algo
    import toppra.constraint as constraint

    logging.getLogger("toppra").setLevel(logging.WARNING)
    positions = np.asarray(positions, dtype=float)
    names = tuple(joint_names)
    # Drop repeated waypoints: the spline needs strictly increasing path parameters.
    keep = [0] + [i for i in range(1, len(positions))
                  if np.max(np.abs(positions[i] - positions[i - 1])) > 1e-9]
    positions = positions[keep]
    if len(positions) == 1:
        zeros = np.zeros_like(positions)
        return Trajectory(names, np.zeros(1), positions.copy(), zeros, zeros.copy())
    dense = densify(positions, resample_step)
    seg = np.linalg.norm(np.diff(dense, axis=0), axis=1)
    ss = np.concatenate([[0.0], np.cumsum(seg)])
    path = toppra.SplineInterpolator(ss, dense, bc_type="clamped")
    vlim = np.stack([-max_velocity, max_velocity], axis=1)
    alim = np.stack([-max_acceleration, max_acceleration], axis=1)
    grid = np.linspace(0.0, ss[-1], max(100, min(1000, 4 * len(dense))))
    if _LEAN_CONSTRAINTS:
        velocity, acceleration = _lean_constraint_classes()
    else:
        velocity = constraint.JointVelocityConstraint
        acceleration = constraint.JointAccelerationConstraint
    instance = algo.TOPPRA([velocity(vlim), acceleration(alim)],
                           path, gridpoints=grid, parametrizer="ParametrizeConstAccel")
    try:
        lean = type(instance.solver_wrapper).__name__ == _LEAN_SOLVER
        timed = _lean_trajectory(instance) if lean else instance.compute_trajectory(0.0, 0.0)
    except Exception:  # toppra raises plain exceptions on numerical trouble
        timed = None
    if timed is None:
        return None
    duration = float(timed.duration)
    n = max(2, int(np.ceil(duration / dt)) + 1)
    times = np.linspace(0.0, duration, n)
    pos, vel, acc = _sample(timed, times)
    pos[0], pos[-1] = positions[0], positions[-1]
    vel[0] = vel[-1] = 0.0
    return Trajectory(names, times, pos, vel, acc)


#: toppra's solver wrapper whose stage problems the lean passes below call directly.
_LEAN_SOLVER = "seidelWrapper"
#: Build toppra's joint limit constraints without their printable summaries (numpy array
#: formatting took a third of the time of a whole parameterization).
_LEAN_CONSTRAINTS = True


def _lean_constraint_classes() -> tuple[type, type]:
    """toppra's JointVelocityConstraint and JointAccelerationConstraint with the same limits,
    checks and parameters, minus the ``_format_string`` summary built at construction."""
    global _CONSTRAINTS
    if _CONSTRAINTS is None:
        import toppra.constraint as constraint
        from toppra.constraint.linear_constraint import LinearConstraint

        class Velocity(constraint.JointVelocityConstraint):
            def _assert_valid_limits(self) -> None:
                assert self.vlim.shape[1] == 2, "Wrong input shape."
                if np.any(self.vlim[:, 0] >= self.vlim[:, 1]):
                    raise ValueError(f"Bad velocity limits: {self.vlim}")
                self._format_string = "    Velocity limit\n"

        class Acceleration(constraint.JointAccelerationConstraint):
            def __init__(self, alim: np.ndarray,
                         discretization_scheme: object = constraint.DiscretizationType
                         .Interpolation) -> None:
                LinearConstraint.__init__(self)
                alim = np.array(alim, dtype=float)
                if np.isnan(alim).any():
                    raise ValueError(f"Bad acceleration given: {alim}")
                self.alim = alim if alim.ndim == 2 else np.vstack((-alim, alim)).T
                self.dof = self.alim.shape[0]
                self.set_discretization_type(discretization_scheme)
                assert self.alim.shape[1] == 2, "Wrong input shape."
                self._format_string = "    Acceleration limit\n"
                self.identical = True

        _CONSTRAINTS = (Velocity, Acceleration)
    return _CONSTRAINTS


_CONSTRAINTS: tuple[type, type] | None = None


def _lean_trajectory(instance: object) -> object | None:
    """toppra's ``compute_trajectory(0, 0)`` with the same solver calls in the same order and
    the same arithmetic (so the same floats), without its per-stage Python overhead (array
    allocations, NaN scans, logging checks): the backward pass (controllable sets) and the
    greedy forward pass of TOPP-RA, then the constant-acceleration parametrizer. Checked
    equal to toppra's own result in test/test_planning_fastpath.py (toppra 0.6.10)."""
    from toppra.constants import MAX_TRIES, SMALL, TINY

    sw = instance.solver_wrapper
    stages = instance._N
    solve = sw.solve_stagewise_optim
    nan = np.nan
    # Backward pass: controllable sets (compute_controllable_sets(0, 0)). Python floats
    # throughout: the same IEEE doubles as toppra's numpy scalars, without their overhead.
    lows, highs = [0.0] * (stages + 1), [0.0] * (stages + 1)
    g_upper = np.zeros(sw.get_no_vars())
    g_upper[0], g_upper[1] = 1e-9, -1
    g_lower = -g_upper
    sw.setup_solver()
    for i in range(stages - 1, -1, -1):
        low, high = lows[i + 1], highs[i + 1]
        x_upper = float(solve(i, None, g_upper, nan, nan, low, high)[1])
        x_lower = float(solve(i, None, g_lower, nan, nan, low, high)[1])
        if x_lower != x_lower or x_upper != x_upper:
            return None
        lows[i], highs[i] = (0.0 if x_lower < 0 else x_lower), x_upper
    sw.close_solver()
    if 0.0 + SMALL < lows[0] or highs[0] + SMALL < 0.0:
        return None
    # Forward pass (compute_parameterization's greedy step).
    deltas = sw.get_deltas().tolist()
    xs = [0.0] * (stages + 1)
    g = np.zeros(sw.get_no_vars())
    g[1] = -1
    tries = 0
    sw.setup_solver()
    i = 0
    while i < stages:
        x = xs[i]
        g[0] = -2 * deltas[i]
        u = float(solve(i, None, g, x, x, lows[i + 1], highs[i + 1])[0]) if x == x else nan
        if u != u:
            if tries < MAX_TRIES:
                xs[i] = max(x - TINY, 0.999 * x)
                tries += 1
                continue
            xs[i + 1:] = [nan] * (stages - i)
            break
        tries = 0
        x_next = x + 2 * deltas[i] * u
        x_next = max(x_next - TINY, 0.9999 * x_next)
        xs[i + 1] = min(highs[i + 1], max(lows[i + 1], x_next))
        i += 1
    sw.close_solver()
    velocities = np.sqrt(np.array(xs))
    if np.isnan(velocities).any():
        return None
    return _const_accel_class()(instance.path, instance.problem_data.gridpoints, velocities)


def _const_accel_class() -> type:
    """toppra's ParametrizeConstAccel with its per-gridpoint loop written as array operations
    (the same operations in the same order: cumulative sums accumulate sequentially)."""
    global _CONST_ACCEL
    if _CONST_ACCEL is None:
        from toppra.parametrizer import ParametrizeConstAccel

        class LeanConstAccel(ParametrizeConstAccel):
            def _process_parametrization(self) -> None:
                ds = self._ss[1:] - self._ss[:-1]
                self._us = 0.5 * (self._xs[1:] - self._xs[:-1]) / ds
                self._ts = np.concatenate(
                    [[0.0], np.cumsum(2 * ds / (self._velocities[:-1] + self._velocities[1:]))])

        _CONST_ACCEL = LeanConstAccel
    return _CONST_ACCEL


_CONST_ACCEL: type | None = None


def _sample(timed: object, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, velocities and accelerations of a toppra ParametrizeConstAccel at ``times``
    (its three ``__call__`` orders, sharing one evaluation of the path parameters)."""
    ss, vs, us = _eval_params(timed, times)
    path = timed._path
    d1 = path(ss, 1)
    pos = path(ss)
    vel = np.multiply(d1, vs[:, np.newaxis])
    acc = np.multiply(path(ss, 2), vs[:, np.newaxis] ** 2) + np.multiply(d1, us[:, np.newaxis])
    return np.asarray(pos), np.asarray(vel), np.asarray(acc)


def _eval_params(timed: object, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ParametrizeConstAccel._eval_params as array operations (same operations, same order)."""
    ts, us, vel, ss = timed._ts, timed._us, timed._velocities, timed._ss
    idx = np.searchsorted(ts, times, side="right") - 1
    idx[idx == len(us)] -= 1
    dt = times - ts[idx]
    u = us[idx]
    return ss[idx] + dt * vel[idx] + 0.5 * dt ** 2 * u, vel[idx] + dt * u, u
