"""The embedded planner: collision checking, IK, OMPL plans, Cartesian lines, timing, tracking."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.planning import types as T
from clawgym_ros.planning.follow import follow_trajectory
from clawgym_ros.planning.moveit_config import load_moveit_config
from clawgym_ros.planning.ompl_planner import OmplPlanner
from clawgym_ros.planning.scene import build_planning_model, home_qpos
from clawgym_ros.sim.collision import CollisionChecker
from clawgym_ros.sim.world import mat_to_quat

DOWN = (0.0, 1.0, 0.0, 0.0)  # tool z axis pointing down
LEFT = T.Pose((0.5, 0.2, 0.55), DOWN)
RIGHT = T.Pose((0.5, -0.2, 0.55), DOWN)
LOW = (0.5, 1.7, 0.0, -0.1, 0.0, 1.5, 0.0)  # hand pushed into the table top


@pytest.fixture(scope="module")
def scene():
    model, spec = build_planning_model()
    return model, spec, home_qpos(model, spec)


@pytest.fixture(scope="module")
def planner(scene):
    model, _, qpos = scene
    return OmplPlanner(model, scene_qpos=qpos)


def test_disabled_pairs_are_honoured(scene):
    model, spec, qpos = scene
    pairs = load_moveit_config().srdf.disabled_collisions
    bent = np.array([0.0, 0.0, 0.0, -3.0, 0.0, 3.7, 0.0])  # folded: neighbours overlap
    with_srdf = CollisionChecker(model, disabled_pairs=pairs, scene_qpos=qpos)
    without = CollisionChecker(model, scene_qpos=qpos)
    found = {frozenset((c.body1, c.body2)) for c in without.contacts(bent)}
    assert found & pairs, "the folded pose should touch some disabled (adjacent) pair"
    assert not ({frozenset((c.body1, c.body2)) for c in with_srdf.contacts(bent)} & pairs)
    assert with_srdf.is_valid(spec.robot.home)
    # Pushing the arm down through the table is caught (static geometry of the world body).
    low = np.array(LOW)
    assert any("table" in c.describe() or "floor" in c.describe()
               for c in with_srdf.contacts(low))


def test_attached_object_moves_with_the_tool(scene):
    model, spec, qpos = scene
    checker = CollisionChecker(model, disabled_pairs=load_moveit_config().srdf.disabled_collisions,
                               scene_qpos=qpos)
    home = np.array(spec.robot.home)
    tool0, _ = checker.tool_pose(home)
    # Put the red cube 3 cm below the tool at home, attach it, and move the arm.
    scene_q = qpos.copy()
    adr = model.jnt_qposadr[model.joint("cube_red_joint").id]
    scene_q[adr:adr + 3] = tool0 + [0.0, 0.0, -0.03]
    checker.set_scene_qpos(scene_q)
    checker.attach("cube_red", home, ("gripper_hand", "gripper_left_finger",
                                       "gripper_right_finger"))
    assert checker.attached_body == "cube_red"
    q2 = home + np.array([0.5, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0])
    tool2, _ = checker.tool_pose(q2)
    cube2, _ = checker.body_pose("cube_red", q2)
    assert np.linalg.norm(cube2 - (tool2 + [0.0, 0.0, -0.03])) < 0.01
    # Lowering the tool so that the cube enters the table is a collision of the cube.
    low = None
    for dz in np.linspace(0.0, 1.2, 25):
        q = home + np.array([0.0, dz, 0.0, 0.0, 0.0, 0.0, 0.0])
        if any("cube_red" in (c.body1, c.body2) for c in checker.contacts(q)):
            low = q
            break
    assert low is not None
    checker.detach()
    assert checker.attached_body is None
    assert not any("cube_red" in (c.body1, c.body2) for c in checker.contacts(low))


def test_ik_reaches_poses_within_tolerance(planner):
    rng = np.random.default_rng(3)
    chk = planner.checker
    for _ in range(5):
        q = rng.uniform(chk.lower, chk.upper)
        pos, mat = chk.tool_pose(q)
        result = planner.ik.solve(T.Pose(tuple(pos), tuple(mat_to_quat(mat))),
                                  seed=(0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785))
        assert result.success
        pos2, mat2 = chk.tool_pose(result.q)
        assert np.linalg.norm(pos2 - pos) < 2e-3
        assert chk.within_limits(result.q)


def _check_trajectory(planner, traj, vscale=0.5):
    assert traj.joint_names == C.ARM_JOINTS
    assert traj.times[0] == 0.0 and np.all(np.diff(traj.times) > 0)
    assert np.all(np.abs(traj.velocities) <= planner.max_velocity * vscale * 1.05 + 1e-6)
    assert np.all(np.abs(traj.accelerations) <= planner.max_acceleration * vscale * 1.1 + 1e-6)
    planner.checker.set_padding(0.0)
    ok, bad = planner.checker.path_valid(traj.positions, 0.002)
    assert ok, f"segment {bad} collides"


def test_joint_goal_around_the_wall_is_collision_free_and_within_limits(planner):
    start = planner.ik.solve(LEFT, seed=(0.4, 0.0, 0.0, -2.0, 0.0, 2.0, 0.8),
                             accept=planner.checker.is_valid).q
    goal = planner.ik.solve(RIGHT, seed=(-0.4, 0.0, 0.0, -2.0, 0.0, 2.0, 0.8),
                            accept=planner.checker.is_valid).q
    assert not planner.checker.motion_valid(start, goal, 0.002), "wall must be in the way"
    result = planner.plan(T.PlanRequest(start=tuple(start), joint_goal=tuple(goal)))
    assert result.success, result.message
    _check_trajectory(planner, result.trajectory)
    np.testing.assert_allclose(result.trajectory.positions[0], start, atol=1e-9)
    np.testing.assert_allclose(result.trajectory.positions[-1], goal, atol=1e-9)


@pytest.mark.parametrize("planner_id", ["RRTstar", "KPIECEkConfigDefault", "PRM"])
def test_planner_is_chosen_by_its_ompl_planning_name(planner, planner_id):
    result = planner.plan(T.PlanRequest(goal_type=T.GOAL_NAMED, named_goal="ready",
                                        start=(0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785),
                                        planner_id=planner_id, time_limit=1.0))
    assert result.success, result.message
    assert result.planner_id == planner.moveit.resolve_planner("arm", planner_id).name


def test_failures_come_back_with_reasons(planner):
    home = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)
    far = planner.plan(T.PlanRequest(goal_type=T.GOAL_POSE, start=home,
                                     pose_goal=T.Pose((2.0, 0.0, 0.6), DOWN)))
    assert not far.success and far.reason == T.REASON_GOAL_UNREACHABLE
    in_table = planner.plan(T.PlanRequest(goal_type=T.GOAL_POSE, start=home,
                                          pose_goal=T.Pose((0.5, 0.0, 0.30), DOWN)))
    assert not in_table.success
    assert in_table.reason in (T.REASON_GOAL_IN_COLLISION, T.REASON_IK_FAILED)
    low = LOW
    start_bad = planner.plan(T.PlanRequest(start=low, joint_goal=home))
    assert start_bad.reason == T.REASON_START_IN_COLLISION
    goal_bad = planner.plan(T.PlanRequest(start=home, joint_goal=low))
    assert goal_bad.reason == T.REASON_GOAL_IN_COLLISION
    limits = planner.plan(T.PlanRequest(start=home, joint_goal=(9.0,) * 7))
    assert limits.reason == T.REASON_INVALID_REQUEST
    unknown = planner.plan(T.PlanRequest(start=home, joint_goal=home, planner_id="Nope"))
    assert unknown.reason == T.REASON_INVALID_REQUEST and "planner_id" in unknown.message
    named = planner.plan(T.PlanRequest(goal_type=T.GOAL_NAMED, named_goal="nowhere"))
    assert named.reason == T.REASON_INVALID_REQUEST


def test_cartesian_approach_is_a_straight_tool_line(planner):
    above = planner.plan(T.PlanRequest(goal_type=T.GOAL_POSE, pose_goal=T.Pose(
        (0.45, -0.15, 0.60), DOWN), start=(0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)))
    assert above.success, above.message
    start = above.trajectory.positions[-1]
    target = T.Pose((0.45, -0.15, 0.50), DOWN)
    result = planner.plan(T.PlanRequest(goal_type=T.GOAL_POSE, pose_goal=target,
                                        cartesian=True, start=tuple(start)))
    assert result.success, result.message
    tips = np.array([planner.checker.tool_pose(q)[0] for q in result.trajectory.positions])
    assert np.linalg.norm(tips[-1] - target.position) < 3e-3
    # Every point of the executed path stays within 3 mm of the line.
    assert np.max(np.abs(tips[:, :2] - np.array([0.45, -0.15]))) < 3e-3
    # Through the table it stops part-way with the Cartesian reason.
    blocked = planner.plan(T.PlanRequest(goal_type=T.GOAL_POSE, cartesian=True,
                                         pose_goal=T.Pose((0.45, -0.15, 0.30), DOWN),
                                         start=tuple(start)))
    assert blocked.reason == T.REASON_CARTESIAN_INCOMPLETE


def test_execution_tracks_within_0_02_rad_without_touching_obstacles(scene, planner):
    model, spec, qpos = scene
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    data.ctrl[:7] = spec.robot.home
    data.ctrl[14:16] = spec.robot.gripper_home / 2
    mujoco.mj_forward(model, data)
    planner.set_scene_qpos(data.qpos.copy())
    for goal in (LEFT, RIGHT):
        result = planner.plan(T.PlanRequest(goal_type=T.GOAL_POSE, pose_goal=goal,
                                            velocity_scaling=1.0, acceleration_scaling=1.0))
        assert result.success, result.message
        follow = follow_trajectory(model, data, result.trajectory)
        assert follow.max_error < 0.02, follow
        assert follow.arm_contacts == [], follow.arm_contacts
        tool = data.site_xpos[model.site(C.FRAME_TOOL).id]
        assert np.linalg.norm(tool - goal.position) < 0.01
        planner.set_scene_qpos(data.qpos.copy())


def test_joint_states_of_the_gripper_reach_the_planning_scene(scene):
    """set_joint_positions (planner_node's joint_states) moves the fingers in the collision
    scene too; a numpy joint type compared with mjtJoint members by 'in' had skipped them."""
    model, _, qpos = scene
    planner = OmplPlanner(model, scene_qpos=qpos)
    adr = model.jnt_qposadr[model.joint(C.GRIPPER_JOINTS[0]).id]
    planner.set_joint_positions({C.GRIPPER_JOINTS[0]: 0.013, C.ARM_JOINTS[0]: 0.2})
    assert planner.checker.scene_qpos[adr] == 0.013
    assert planner.current[0] == 0.2
