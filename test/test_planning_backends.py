"""Planner backend registry, the planning benchmark, and the moveit backend: against a
stand-in with moveit2 jazzy's moveit_py signatures (test/fake_moveit.py) here, for real on a
workstation."""

from __future__ import annotations

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError, ConfigError
from clawgym_ros.planning import types as T
from clawgym_ros.planning.base import BACKENDS, Planner, planner_class
from clawgym_ros.sim import scene_spec as S

HOME = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)


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
    # Cost accounting: checks and probes per problem, the checker-only bound below planning.
    assert result["checks_per_problem"] > 0 and result["probes_per_problem"] > 0
    assert result["us_per_check"] > 0.0 and result["us_per_probe"] > 0.0
    assert result["planning_to_checker_bound_ratio"] > 1.0
    # A plan-changing setting, measured on the same problems: fewer checks, still valid.
    variant = result["variants"]["motion_resolution_0.01"]
    assert variant["config"] == {"motion_resolution": 0.01}
    assert variant["success_rate"] >= 0.99 and variant["dense_recheck_valid_fraction"] == 1.0
    assert variant["checks_per_problem"] < result["checks_per_problem"]


@pytest.fixture
def fake_moveit(monkeypatch):
    from test import fake_moveit

    return fake_moveit.install(monkeypatch)


def _moveit_planner(**kwargs):
    from clawgym_ros.ros_io.moveit_planner import MoveItPlanner

    return MoveItPlanner(**kwargs)


def test_moveit_plan_builds_jazzy_plan_request_parameters(fake_moveit):
    """jazzy's PlanRequestParameters takes (moveit_cpp, namespace); one argument raised a
    TypeError that killed planner_node on its first plan."""
    planner = _moveit_planner()
    goal = np.array([0.1, -0.5, 0.0, -2.0, 0.0, 1.6, 0.7])
    result = planner.plan(T.PlanRequest(goal_type=T.GOAL_JOINTS, joint_goal=tuple(goal),
                                        start=HOME, planner_id="RRTConnect"))
    assert result.success, result.message
    arm = fake_moveit.MoveItPy.instances[0].components[C.ARM_GROUP]
    params = arm.params[-1]
    assert params.planning_pipeline == "ompl" and params.planner_id
    # the rest came from the plan_request_params block of the config dict
    assert params.planning_attempts == 1
    np.testing.assert_allclose(result.trajectory.positions[-1], goal)

    cartesian = planner.plan(T.PlanRequest(goal_type=T.GOAL_POSE, cartesian=True, start=HOME,
                                           pose_goal=T.Pose((0.5, 0.0, 0.6), (0, 1, 0, 0))))
    assert cartesian.success, cartesian.message
    assert (arm.params[-1].planning_pipeline, arm.params[-1].planner_id) == (
        "pilz_industrial_motion_planner", "LIN")


def test_moveit_pose_goals_are_sent_in_the_base_frame(fake_moveit):
    """The SRDF's fixed virtual joint makes MoveIt's world the arm base; requests are in the
    simulator's world, where the base stands at robot.pos."""
    planner = _moveit_planner()
    base = S.load_scene("tabletop").robot.pos
    planner.plan(T.PlanRequest(goal_type=T.GOAL_POSE, start=HOME,
                               pose_goal=T.Pose((0.5, 0.1, 0.6), (0, 1, 0, 0))))
    goal = fake_moveit.MoveItPy.instances[0].components[C.ARM_GROUP].goal
    pose = goal["pose_stamped_msg"]
    assert pose.header.frame_id == C.FRAME_BASE and goal["pose_link"] == C.FRAME_TOOL
    p = pose.pose.position
    np.testing.assert_allclose([p.x, p.y, p.z], np.subtract((0.5, 0.1, 0.6), base))


def test_world_to_base_undoes_the_base_yaw():
    from clawgym_ros.ros_io.moveit_planner import world_to_base

    pos, quat = world_to_base((1.0, 1.0, 0.5), S.rpy_to_quat((0, 0, np.pi / 2)),
                              (1.0, 0.0, 0.5), np.pi / 2)
    np.testing.assert_allclose(pos, (1.0, 0.0, 0.0), atol=1e-12)
    np.testing.assert_allclose(np.abs(quat), (1.0, 0.0, 0.0, 0.0), atol=1e-12)


def test_moveit_error_codes_map_to_reasons(fake_moveit):
    """Names per moveit_msgs' MoveItErrorCodes: -14 is GOAL_CONSTRAINTS_VIOLATED, -16
    INVALID_GOAL_CONSTRAINTS."""
    from clawgym_ros.ros_io.moveit_planner import ERROR_REASONS

    assert ERROR_REASONS[-14] == T.REASON_GOAL_UNREACHABLE
    assert ERROR_REASONS[-16] == T.REASON_INVALID_REQUEST
    assert ERROR_REASONS[-31] == T.REASON_IK_FAILED
    planner = _moveit_planner()
    arm = fake_moveit.MoveItPy.instances[0].components[C.ARM_GROUP]
    arm.next_code = -12
    result = planner.plan(T.PlanRequest(goal_type=T.GOAL_NAMED, named_goal="ready", start=HOME))
    assert not result.success and result.reason == T.REASON_GOAL_IN_COLLISION
    assert "-12" in result.message


def test_moveit_scene_enters_the_planning_scene_and_attach_is_checked(fake_moveit):
    """The table, pedestal, bins and objects become world collision objects (the planner used
    to add none, and attach's False was ignored)."""
    spec = S.load_scene("tabletop")
    planner = _moveit_planner()
    scene = fake_moveit.MoveItPy.instances[0].monitor.scene
    statics = [s.name for s in spec.static_shapes()]
    objects = [o.name for o in spec.objects]
    assert set(scene.world) == {*statics, *objects}
    table = scene.world["table"]
    assert table.header.frame_id == C.FRAME_BASE
    z = table.primitive_poses[0].position.z
    assert z == pytest.approx(spec.statics[1].pos[2] - spec.robot.pos[2])
    # the fixed base stands on the pedestal: allowed, or every start state is "in collision"
    assert scene.allowed_collision_matrix.entries[frozenset((C.FRAME_BASE, "pedestal"))]

    planner.attach_object(objects[0])
    assert objects[0] in scene.attached and objects[0] not in scene.world
    planner.detach_object()
    assert objects[0] in scene.world and not scene.attached
    with pytest.raises(ClawgymError, match="not_a_body"):
        planner.attach_object("not_a_body")


def test_moveit_obstacles_join_the_scene(fake_moveit):
    from clawgym_ros.planning.scene import WALL_OBSTACLES

    _moveit_planner(obstacles=WALL_OBSTACLES)
    scene = fake_moveit.MoveItPy.instances[0].monitor.scene
    assert "planning_wall" in scene.world


def test_moveit_config_dict_has_the_pilz_cartesian_limits():
    """Pilz in jazzy refuses to load without robot_description_planning.cartesian_limits."""
    from clawgym_ros.planning.moveit_config import load_moveit_config
    from clawgym_ros.ros_io.moveit_planner import moveit_config_dict

    config = moveit_config_dict(load_moveit_config())
    assert "pilz_industrial_motion_planner" in config["planning_pipelines"]["pipeline_names"]
    limits = config["robot_description_planning"]["cartesian_limits"]
    assert set(limits) == {"max_trans_vel", "max_trans_acc", "max_trans_dec", "max_rot_vel"}
    assert all(isinstance(v, float) for v in limits.values())
    assert limits["max_trans_vel"] > 0 and limits["max_trans_acc"] > 0
    assert limits["max_trans_dec"] < 0 and limits["max_rot_vel"] > 0


def test_motion_resolution_is_checked_and_defaults_to_the_moveit_files():
    from clawgym_ros.planning.ompl_planner import OmplPlannerConfig

    assert OmplPlannerConfig().motion_resolution == 0.0      # ompl_planning.yaml's value
    with pytest.raises(ConfigError, match="motion_resolution"):
        OmplPlannerConfig(motion_resolution=0.2)
