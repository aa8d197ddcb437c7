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
