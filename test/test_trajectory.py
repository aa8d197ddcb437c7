"""The pure joint-trajectory sampler: interpolation, holding, start state, merging."""

from __future__ import annotations

import numpy as np
import pytest

from clawgym_ros.errors import ConfigError
from clawgym_ros.sim.trajectory import JointTrajectory, gather, scatter


def _traj(**kw):
    args = dict(joint_names=("a", "b"), times=[1.0, 2.0, 3.0],
                positions=[[0.0, 1.0], [1.0, 1.0], [0.0, 2.0]], start_time=10.0)
    args.update(kw)
    return JointTrajectory(**args)


def test_passes_through_waypoints_and_holds_outside():
    traj = _traj()
    for rel, expected in [(1.0, [0.0, 1.0]), (2.0, [1.0, 1.0]), (3.0, [0.0, 2.0])]:
        pos, _ = traj.sample(10.0 + rel)
        np.testing.assert_allclose(pos, expected, atol=1e-12)
    pos, vel = traj.sample(5.0)
    np.testing.assert_allclose(pos, [0.0, 1.0])
    np.testing.assert_allclose(vel, 0.0)
    pos, vel = traj.sample(100.0)
    np.testing.assert_allclose(pos, [0.0, 2.0])
    np.testing.assert_allclose(vel, 0.0)
    assert traj.duration == 3.0 and traj.end_time == 13.0


def test_linear_interpolation_has_segment_velocity():
    traj = _traj(interpolation="linear")
    pos, vel = traj.sample(11.25)
    np.testing.assert_allclose(pos, [0.25, 1.0])
    np.testing.assert_allclose(vel, [1.0, 0.0])
    pos, vel = traj.sample(12.5)
    np.testing.assert_allclose(pos, [0.5, 1.5])
    np.testing.assert_allclose(vel, [-1.0, 1.0])


def test_cubic_uses_given_velocities_and_velocity_is_the_derivative():
    traj = _traj(velocities=[[0.0, 0.0], [0.5, 0.2], [0.0, 0.0]])
    _, vel = traj.sample(12.0)
    np.testing.assert_allclose(vel, [0.5, 0.2], atol=1e-12)
    for t in np.linspace(11.05, 12.95, 17):
        eps = 1e-6
        numeric = (traj.sample(t + eps)[0] - traj.sample(t - eps)[0]) / (2 * eps)
        np.testing.assert_allclose(traj.sample(t)[1], numeric, atol=1e-5)


def test_cubic_without_velocities_does_not_overshoot_turning_points():
    traj = _traj()
    samples = np.array([traj.sample(t)[0] for t in np.linspace(11.0, 13.0, 201)])
    assert samples[:, 0].max() <= 1.0 + 1e-12 and samples[:, 0].min() >= -1e-12
    # Joint b rises monotonically: its estimated knot velocity is zero at the flat part only.
    assert np.all(np.diff(samples[:, 1]) >= -1e-12)


def test_with_start_state_moves_from_current_position():
    traj = _traj().with_start_state([5.0, -1.0])
    pos, _ = traj.sample(10.0)
    np.testing.assert_allclose(pos, [5.0, -1.0])
    pos, _ = traj.sample(11.0)
    np.testing.assert_allclose(pos, [0.0, 1.0])
    mid, _ = traj.sample(10.5)
    assert 0.0 < mid[0] < 5.0
    starts_at_zero = _traj(times=[0.0, 1.0, 2.0])
    assert starts_at_zero.with_start_state([9.0, 9.0]) is starts_at_zero


def test_single_point_holds_it():
    traj = JointTrajectory(("a",), [0.5], [[2.0]], start_time=0.0).with_start_state([0.0])
    np.testing.assert_allclose(traj.sample(0.25)[0], [1.0], atol=1e-12)
    np.testing.assert_allclose(traj.sample(0.75)[0], [2.0])


@pytest.mark.parametrize("kw, field", [
    (dict(times=[1.0, 1.0, 2.0]), "trajectory.times"),
    (dict(times=[-1.0, 1.0, 2.0]), "trajectory.times"),
    (dict(positions=[[0.0], [1.0], [2.0]]), "trajectory.positions"),
    (dict(velocities=[[0.0, 0.0]]), "trajectory.velocities"),
    (dict(joint_names=("a", "a")), "trajectory.joint_names"),
    (dict(interpolation="quintic"), "trajectory.interpolation"),
    (dict(positions=[[0.0, np.nan], [1.0, 1.0], [0.0, 2.0]]), "trajectory.points"),
])
def test_rejects_bad_trajectories_naming_the_field(kw, field):
    with pytest.raises(ConfigError) as err:
        _traj(**kw)
    assert err.value.field == field


def test_scatter_and_gather_by_name():
    names = ("j1", "j2", "j3")
    merged = scatter(("j3", "j1"), np.array([3.0, 1.0]), names, np.zeros(3))
    np.testing.assert_allclose(merged, [1.0, 0.0, 3.0])
    np.testing.assert_allclose(gather(("j3", "j2"), merged, names), [3.0, 0.0])
    with pytest.raises(ConfigError):
        scatter(("nope",), np.array([1.0]), names, np.zeros(3))
    with pytest.raises(ConfigError):
        gather(("nope",), merged, names)
