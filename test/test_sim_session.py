"""The pure core behind sim_node: config validation, exact time, commands, sensor schedule."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.errors import ConfigError  # noqa: E402
from clawgym_ros.sim.session import SimNodeConfig, SimSession  # noqa: E402
from clawgym_ros.sim.trajectory import JointTrajectory  # noqa: E402


@pytest.fixture(scope="module")
def session():
    s = SimSession(SimNodeConfig(control_rate=25.0, image_width=32, image_height=24))
    yield s
    s.close()


@pytest.mark.parametrize("field, value", [
    ("scenario", "moon"), ("clock_mode", "sometimes"), ("real_time_factor", 0.0),
    ("image_width", 4), ("seed", -1), ("backend", "bullet"), ("camera_rate", -1.0),
])
def test_config_names_the_bad_field(field, value):
    with pytest.raises(ConfigError) as err:
        SimNodeConfig(**{field: value})
    assert err.value.field == field


def test_control_rate_must_divide_the_scene_rate():
    with pytest.raises(ConfigError) as err:
        SimSession(SimNodeConfig(control_rate=30.0))
    assert err.value.field == "control_rate"


def test_time_is_an_exact_multiple_of_the_control_step(session):
    session.reset(0)
    assert session.control_dt == pytest.approx(0.04)
    before, after = session.step(3)
    assert (before, after) == (0, 3) and session.time == 3 * session.control_dt
    assert session.backend.time == pytest.approx(session.time)


def test_trajectory_is_followed_in_simulation_time(session):
    session.reset(0)
    home = np.asarray(session.backend.scene.robot.home)
    session.set_trajectory(JointTrajectory(
        joint_names=(C.ARM_JOINTS[1], C.GRIPPER_JOINTS[0]), times=[0.5, 1.0],
        positions=[[home[1] + 0.2, 0.02], [home[1] + 0.3, 0.01]], start_time=session.time))
    session.step(int(round(0.5 / session.control_dt)))
    mid = session.joints().position
    assert mid[1] == pytest.approx(home[1] + 0.2, abs=0.02)
    session.step(25)
    end = session.joints().position
    assert end[1] == pytest.approx(home[1] + 0.3, abs=0.01)
    assert end[0] == pytest.approx(home[0], abs=0.01)            # other joints hold
    assert end[7] + end[8] == pytest.approx(0.02, abs=0.003)     # one finger -> width 2x
    with pytest.raises(ConfigError):
        session.set_trajectory(JointTrajectory(("wheel",), [1.0], [[0.0]]))


def test_sensor_schedule_per_rate_and_scenario(session):
    session.reset(0)
    assert session.due(-1, 0) == ["joint_states", "camera", "object_poses"]
    # 25 Hz control, 10 Hz camera -> every 2 steps (rounded); state every step.
    assert session.due(0, 1) == ["joint_states", "object_poses"]
    assert "camera" in session.due(1, 2)
    assert session.image().shape == (24, 32, 3)
    session.reset(1, "outdoor")
    try:
        assert session.camera == (C.CAMERA_FRONT, C.FRAME_FRONT_CAMERA)
        assert set(session.due(-1, 0, every_sensor=True)) == {
            "joint_states", "camera", "imu", "gps", "odom"}
        with pytest.raises(ConfigError):
            session.set_gripper(0.0)
        session.set_base_twist(0.4, 0.0)
        session.step(25)
        assert session.odom().linear_velocity[0] == pytest.approx(0.4, abs=0.05)
        assert session.gps().valid
    finally:
        session.reset(0, "tabletop")


# ---------------------------------------------------------------------------------------------
# Task worlds (issue 17): the task env itself, stepped as the in-process evaluation steps it
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, field, allowed", [
    ({"task": "stacking"}, "task", "pick_place, peg_insert, pill_handover, gps_nav"),
    ({"task": "pick_place", "template": "pyramid"}, "template", "a template of pick_place"),
    ({"template": "cube"}, "template", "empty without a task"),
])
def test_unknown_task_or_template_is_one_error_naming_it(kwargs, field, allowed):
    with pytest.raises(ConfigError) as err:
        SimNodeConfig(**kwargs)
    assert err.value.field == field and allowed in err.value.allowed
    assert "\n" not in str(err.value)


def test_parse_world_reads_scene_task_and_task_template():
    from clawgym_ros.sim.session import World, parse_world

    assert parse_world("outdoor") == World("outdoor")
    assert parse_world("pick_place") == World("tabletop", "pick_place", "")
    assert parse_world("gps_nav/square_route") == World("outdoor", "gps_nav", "square_route")
    for bad in ("moon", "pick_place/pyramid", "pick_place/"):
        with pytest.raises(ConfigError) as err:
            parse_world(bad)
        assert err.value.field == "scenario" and err.value.value == bad


def _arm_action(home: np.ndarray, k: int) -> dict[str, np.ndarray]:
    target = home + 0.002 * k * np.array([1.0, -1.0, 0.5, 0.0, 0.3, -0.2, 0.1])
    return {C.ACT_JOINT_TARGET: target, C.ACT_GRIPPER: np.array([0.08 - 0.001 * k])}


@pytest.mark.parametrize("world", ["pick_place/stack", "peg_insert/round_peg",
                                   "pill_handover/pill_box"])
def test_task_world_is_the_task_env_stepped_as_in_process(world):
    """The session's task world gives bit for bit what the in-process runner's env gives for
    the same seed and actions: joint states, object poses, stages, success, contact force,
    collision and the task observation keys (``place_goal``, ``hand_state``)."""
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401
    from clawgym_ros.sim.trajectory import JointTrajectory
    from clawgym_ros.tasks.registry import get_task

    task, template = world.split("/")
    session = SimSession(SimNodeConfig(task=task, template=template, publish_camera=False))
    env = gym.make(get_task(task).env_id, template=template).unwrapped
    try:
        for seed in (3, 4):
            session.reset(seed)
            obs, info = env.reset(seed=seed)
            home = np.asarray(env.backend.scene.robot.home, dtype=float)
            state = session.task_state()
            assert state["template"] == template and state["stages"] == info["stages"]
            assert state["goal"] == env.goal_dict()
            for k in range(1, 26):
                action = _arm_action(home, k)
                # sim_node's command path: a one-point trajectory (held) and the gripper width.
                session.set_trajectory(JointTrajectory(
                    C.ARM_JOINTS, [0.0], [action[C.ACT_JOINT_TARGET]],
                    start_time=session.time))
                session.set_gripper(float(action[C.ACT_GRIPPER][0]))
                session.step(1)
                obs, _, _, _, info = env.step(action)
                state = session.task_state()
                assert np.array_equal(session.joints().position, env.backend.joint_state()[1])
                assert np.array_equal(session.object_poses()[1], obs[C.OBS_OBJECT_POSES])
                assert state["stages_reached"] == info["stages_reached"]
                assert state["success"] == info["success"]
                assert state["contact_force"] == info["contact_force"]
                assert state["collision"] == info["collision"]
                extra = {k: v for k, v in obs.items() if k not in C.OBS_STATE_KEYS}
                assert set(state["observation"]) == set(extra)
                for key, value in extra.items():
                    assert np.array_equal(state["observation"][key], value), key
        # Per reset the world switches (sim/reset's scenario field), and back.
        session.reset(5, "tabletop")
        assert session.task_state() is None and session.world.name == "tabletop"
        session.reset(5, world)
        assert session.task_state()["template"] == template
        assert "task_state" in session.due(-1, 0)
    finally:
        session.close()
        env.close()


def test_gps_nav_world_reports_the_env_odometry_and_the_ground_truth_apart():
    """In the gps_nav task world ``odom`` is the env's own ``odom`` observation (wheel
    odometry, zero at reset), not the base's true pose (which ``odom_truth`` gives, for the
    evaluator): they drift meters apart, so a policy reading ``odom`` over ROS needs the
    former (issue 17: sim_node published the truth as odom)."""
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401
    from clawgym_ros.sim.readings import odom_from_vector
    from clawgym_ros.tasks.registry import get_task

    def values(o) -> np.ndarray:
        return np.concatenate([o.position, o.orientation_wxyz, o.linear_velocity,
                               o.angular_velocity])

    session = SimSession(SimNodeConfig(task="gps_nav", template="square_route",
                                       publish_camera=False))
    env = gym.make(get_task("gps_nav").env_id, template="square_route",
                   control_mode="dict").unwrapped
    try:
        session.reset(3)
        obs, _ = env.reset(seed=3)
        apart = 0.0
        for k in range(150):
            twist = np.array([0.8, 0.5 * np.sin(k / 30)])
            session.set_base_twist(*twist)
            session.step(1)
            obs, *_ = env.step({C.ACT_BASE_TWIST: twist})
            assert np.array_equal(values(session.odom()),
                                  values(odom_from_vector(obs[C.OBS_ODOM]))), k
            assert np.array_equal(values(session.odom_truth()),
                                  values(odom_from_vector(env.backend.odometry()))), k
            apart = max(apart, float(np.hypot(*(session.odom().position[:2]
                                                 - session.odom_truth().position[:2]))))
        assert apart > 0.1
        # The bare outdoor scene's env observes the truth: both are the same there.
        session.reset(3, "outdoor")
        assert np.array_equal(values(session.odom()), values(session.odom_truth()))
    finally:
        session.close()
        env.close()
