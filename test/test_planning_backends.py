"""Planner backend registry, the planning benchmark, and the moveit backend (workstation)."""

from __future__ import annotations

import pytest

from clawgym_ros.errors import ConfigError
from clawgym_ros.planning.base import BACKENDS, Planner, planner_class


def test_registry_resolves_ompl_and_rejects_unknown_names():
    assert set(BACKENDS) == {"ompl", "moveit"}
    cls = planner_class("ompl")
    assert issubclass(cls, Planner) and cls.name == "ompl"
    with pytest.raises(ConfigError, match="backend"):
        planner_class("chomp")


def test_moveit_backend_on_a_workstation():
    pytest.importorskip("moveit.planning", reason="moveit_py is not installable from PyPI; "
                        "this backend runs only on a ROS 2 workstation with MoveIt 2")
    from clawgym_ros.planning import types as T

    planner = planner_class("moveit")()
    result = planner.plan(T.PlanRequest(goal_type=T.GOAL_NAMED, named_goal="ready",
                                        start=(0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)))
    assert result.success, result.message
    assert result.trajectory.joint_names == planner.joint_names


def test_bench_planning_small_run_meets_the_acceptance_bars():
    from clawgym_ros.bench.planning import bench_planning

    result = bench_planning(seed=5, problems=8)
    assert result["problems"] == 8
    assert result["success_rate"] >= 0.99, result
    assert result["dense_recheck_valid_fraction"] == 1.0
    assert result["planning_time_median_s"] > 0.0
    assert result["mean_path_length_rad"] > 0.0
    assert 0.0 <= result["straight_line_collision_rate"] <= 1.0
