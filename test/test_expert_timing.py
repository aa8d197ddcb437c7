"""The arm experts' time-optimal timing (issue 24): ``optimal_path`` stays within the joint
velocity and acceleration limits and the tool speed, ends at rest on the last waypoint and is
shorter than the quintic scaling; a pick_place episode with ``timing=optimal`` is signed off
and shorter; ``clawgym synth --option`` refuses bad names and values with exit 2; the synthesis
benchmark's physics-only pass replays the same physics."""

from __future__ import annotations

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.cli import main as cli_main
from clawgym_ros.synthesis.episode import EpisodeSpec
from clawgym_ros.tasks.expert import optimal_path, quintic_path
from clawgym_ros.tasks.registry import generate_any, get_task

DT = 0.02
VMAX = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])
AMAX = np.array([3.75, 1.875, 2.5, 3.125, 3.75, 5.0, 5.0])


@pytest.mark.parametrize("waypoints", [
    np.array([[0.0] * 7, [1.5, -0.4, 0.2, -1.0, 0.3, 0.5, -0.2]]),       # cruise phase
    np.array([[0.0] * 7, [0.05, 0.02, 0.0, -0.03, 0.0, 0.01, 0.0]]),       # triangle
    np.array([[0.0] * 7, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
              [0.1, 0.1, 0.05, 0.0, 0.0, 0.0, 0.0], [0.2, 0.1, 0.05, 0.1, 0.0, 0.0, 0.0]]),
])
def test_optimal_path_within_limits_at_rest_and_shorter(waypoints):
    pos, vel = optimal_path(waypoints, VMAX, AMAX, DT)
    np.testing.assert_array_equal(pos[-1], waypoints[-1])
    assert not vel[-1].any()
    assert np.all(np.abs(vel) <= VMAX * (1 + 1e-9))
    if len(waypoints) == 2:     # one segment: the joint accelerations are the path's
        acc = np.abs(np.diff(np.vstack([np.zeros(7), vel]), axis=0)) / DT
        assert np.all(acc <= AMAX * (1 + 1e-6))
    # the samples move along the polyline towards its end (no overshoot past the goal)
    assert np.all(np.linalg.norm(pos - waypoints[-1], axis=1)[:-1] > 0)
    quintic, _ = quintic_path(waypoints, VMAX, AMAX, DT)
    assert len(pos) < len(quintic)


def test_optimal_path_respects_the_tool_speed():
    waypoints = np.array([[0.0] * 7, [0.0, 0.3, 0.0, -0.3, 0.0, 0.0, 0.0]])
    free, _ = optimal_path(waypoints, VMAX, AMAX, DT)
    slow, vel = optimal_path(waypoints, VMAX, AMAX, DT, tool_length=0.1, tool_speed=0.05)
    joint_length = float(np.linalg.norm(waypoints[1]))
    tool_speed = np.linalg.norm(vel, axis=1) * 0.1 / joint_length
    assert tool_speed.max() <= 0.05 + 1e-9
    assert len(slow) > len(free) >= 2


def test_optimal_pick_place_episode_is_signed_off_and_shorter():
    task = get_task(C.TASK_PICK_PLACE)
    signoff = task.signoff()
    spec = EpisodeSpec(index=0, seed=5, task=task.name, template="cube")
    default = generate_any(spec)
    optimal = generate_any(EpisodeSpec(index=0, seed=5, task=task.name, template="cube",
                                       options={"timing": "optimal",
                                                "acceleration_scale": 2.0}))
    assert default.outcome.success and optimal.outcome.success
    assert not signoff(optimal), [r.code for r in signoff(optimal)]
    assert optimal.num_steps < 0.8 * default.num_steps


def test_bench_synth_replays_the_physics_alone_to_the_recorded_state():
    # clawgym bench synth's in-process measurement on two episodes: the physics-only pass (the
    # recorded actions through the backend's step from the expert's reset) ends in the
    # recorded joint state, and an episode costs more than its physics alone
    from clawgym_ros.bench.synth import _episodes

    task = get_task(C.TASK_PICK_PLACE)
    specs = [EpisodeSpec(index=i, seed=5 + i, task=task.name, template="cube")
             for i in range(2)]
    out = _episodes(specs, task.signoff())
    assert out["physics_only"]["episodes"] == 2
    assert out["physics_only"]["same_final_state"]
    assert out["cpu_to_physics_only_ratio"] > 1.0 and out["wall_to_physics_ratio"] > 1.0


@pytest.mark.parametrize("option, field", [
    ("timing=fast", "--option timing"), ("speed=2", "--option speed"),
    ("acceleration_scale=9", "acceleration_scale"), ("acceleration_scale=x",
                                                      "--option acceleration_scale"),
    ("planning", "--option"),
])
def test_synth_option_refused_with_one_line(tmp_path, capsys, option, field):
    out = tmp_path / "run"
    assert cli_main(["synth", "--task", "pick_place", "--episodes", "1", "--seed", "0",
                     "--out", str(out), "--option", option]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err
    assert not (out / "artifacts").exists() or not any((out / "artifacts").iterdir())
