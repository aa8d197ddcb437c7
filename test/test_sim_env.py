"""MuJoCo backend and Gymnasium envs: contract, determinism, knobs, grasping, driving."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
gym = pytest.importorskip("gymnasium")

import clawgym_ros.sim  # noqa: E402,F401  (registers the envs)
from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.errors import ConfigError  # noqa: E402
from clawgym_ros.sim.backend import (  # noqa: E402
    DynamicsSettings,
    LightingSettings,
    backend_class,
)
from clawgym_ros.sim.geo import geodetic_to_enu  # noqa: E402
from clawgym_ros.sim.mujoco_backend import MujocoBackend, MujocoConfig, image_key  # noqa: E402
from clawgym_ros.sim.registration import ENVS  # noqa: E402


@pytest.fixture(scope="module")
def arm():
    backend = MujocoBackend(MujocoConfig(scene="tabletop", cameras=(C.CAMERA_WRIST,),
                                         image_width=64, image_height=48, depth=True))
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def base():
    backend = MujocoBackend(MujocoConfig(scene="outdoor"))
    yield backend
    backend.close()


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_check_env_passes(env_id):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, render_mode="rgb_array")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env.unwrapped, skip_render_check=False)
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.shape == (240, 320, 3) and frame.std() > 1
    env.close()


def test_bare_envs_are_registered_and_extensible():
    from clawgym_ros.sim.registration import register_env

    assert {"clawgym/Tabletop-v0", "clawgym/MobileBase-v0"} <= set(gym.registry)
    register_env("clawgym/TestTabletopCam-v0", "clawgym_ros.sim.envs:TabletopEnv", 5,
                 cameras=(C.CAMERA_WRIST,))
    try:
        env = gym.make("clawgym/TestTabletopCam-v0")
        obs, _ = env.reset(seed=0)
        assert obs[image_key(C.CAMERA_WRIST)].shape == (84, 84, 3)
        env.close()
    finally:
        del ENVS["clawgym/TestTabletopCam-v0"]
        gym.registry.pop("clawgym/TestTabletopCam-v0")


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_same_seed_same_actions_bitwise_identical_over_500_steps(env_id):
    def rollout():
        env = gym.make(env_id)
        env.action_space.seed(7)
        obs, _ = env.reset(seed=123)
        trace = [obs]
        for _ in range(500):
            obs, *_ = env.step(env.action_space.sample())
            trace.append(obs)
        env.close()
        return trace

    first, second = rollout(), rollout()
    for a, b in zip(first, second):
        for key in a:
            assert a[key].tobytes() == b[key].tobytes(), key


def test_reset_seed_changes_object_poses_and_reset_is_repeatable():
    env = gym.make("clawgym/Tabletop-v0")
    a, _ = env.reset(seed=1)
    b, _ = env.reset(seed=2)
    c, _ = env.reset(seed=1)
    assert not np.array_equal(a[C.OBS_OBJECT_POSES], b[C.OBS_OBJECT_POSES])
    assert np.array_equal(a[C.OBS_OBJECT_POSES], c[C.OBS_OBJECT_POSES])
    env.close()


def test_lighting_changes_next_image_and_restore_undoes_it(arm):
    arm.reset(0)
    before = arm.observation()[image_key(C.CAMERA_WRIST)]
    arm.set_lighting(LightingSettings(diffuse_scale=0.2, headlight_scale=0.2))
    darker = arm.observation()[image_key(C.CAMERA_WRIST)]
    assert darker.mean() < before.mean() - 5
    arm.set_lighting(LightingSettings(light_name="key_light", direction=(0.0, 0.0, -1.0),
                                      diffuse_scale=3.0))
    assert arm.observation()[image_key(C.CAMERA_WRIST)].mean() != pytest.approx(darker.mean())
    arm.restore_defaults()
    assert np.array_equal(arm.observation()[image_key(C.CAMERA_WRIST)], before)
    with pytest.raises(ConfigError, match="light_name"):
        arm.set_lighting(LightingSettings(light_name="sun"))


def test_depth_and_intrinsics(arm):
    obs = arm.observation()
    depth = obs[image_key(C.CAMERA_WRIST, "depth")]
    assert depth.dtype == np.float32 and depth.shape == (48, 64)
    assert 0.02 < float(np.median(depth)) < 2.0
    k = arm.camera_intrinsics(C.CAMERA_WRIST, 64, 48)
    assert k[0, 0] == pytest.approx(24 / math.tan(math.radians(30)))


def test_dynamics_change_and_reset_restores_defaults(arm):
    m = arm.model
    arm.reset(0)
    saved = {k: getattr(m, k).copy() for k in (
        "body_mass", "body_inertia", "geom_friction", "dof_damping", "actuator_gainprm",
        "actuator_biasprm")}
    cube = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "cube_red")
    arm.set_dynamics(DynamicsSettings(target="cube_red", mass_scale=2.0, friction_scale=0.5))
    arm.set_dynamics(DynamicsSettings(target="arm", damping_scale=3.0, actuator_gain_scale=0.5,
                                      command_latency=0.04))
    assert m.body_mass[cube] == pytest.approx(2 * saved["body_mass"][cube])
    # kp and kv scale together: position gain and both bias terms, velocity gain
    assert m.actuator_gainprm[0, 0] == pytest.approx(0.5 * saved["actuator_gainprm"][0, 0])
    assert m.actuator_biasprm[0, 1] == pytest.approx(0.5 * saved["actuator_biasprm"][0, 1])
    assert m.actuator_gainprm[7, 0] == pytest.approx(0.5 * saved["actuator_gainprm"][7, 0])
    assert m.actuator_biasprm[7, 2] == pytest.approx(0.5 * saved["actuator_biasprm"][7, 2])
    assert m.dof_damping[0] == pytest.approx(3 * saved["dof_damping"][0])
    assert m.actuator_gainprm[14, 0] == saved["actuator_gainprm"][14, 0]  # gripper untouched
    assert arm.describe()["dynamics"]
    arm.reset(1)
    for key, value in saved.items():
        assert np.array_equal(getattr(m, key), value), key
    assert arm._latency_steps == 0 and not arm.describe()["dynamics"]
    with pytest.raises(ConfigError, match="dynamics.target"):
        arm.set_dynamics(DynamicsSettings(target="no_such_thing"))


def test_command_latency_delays_the_response(arm):
    def first_move(latency):
        arm.reset(0)
        arm.set_dynamics(DynamicsSettings(command_latency=latency))
        target = np.asarray(arm.scene.robot.home) + 0.2
        for k in range(10):
            arm.step({C.ACT_JOINT_TARGET: target})
            if abs(arm.data.qpos[0] - arm.scene.robot.home[0]) > 1e-3:
                return k
        return 10

    assert first_move(0.06) - first_move(0.0) == 3
    arm.reset(0)


def _ik(backend, target_pos, q0, iters=300):
    """Damped least-squares IK for a top-down tool pose (test helper, not the planner's)."""
    m = backend.model
    d = mujoco.MjData(m)
    d.qpos[:] = backend.data.qpos
    d.qpos[:7] = q0
    want = np.diag([1.0, -1.0, -1.0])
    sid = backend.index.tool_site
    jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    for _ in range(iters):
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        rot = d.site_xmat[sid].reshape(3, 3)
        err = np.concatenate([target_pos - d.site_xpos[sid],
                              0.5 * sum(np.cross(rot[:, i], want[:, i]) for i in range(3))])
        if np.linalg.norm(err) < 1e-6:
            break
        mujoco.mj_jacSite(m, d, jp, jr, sid)
        jac = np.vstack([jp[:, :7], jr[:, :7]])
        d.qpos[:7] += jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), err)
    assert np.linalg.norm(err) < 1e-4
    return d.qpos[:7].copy()


def _move(backend, q_from, q_to, duration, gripper):
    steps = int(round(duration / backend.control_dt))
    worst = 0.0
    for i in range(1, steps + 1):
        s = i / steps
        blend, rate = 3 * s * s - 2 * s**3, (6 * s - 6 * s * s) / duration
        q = q_from + (q_to - q_from) * blend
        backend.step({C.ACT_JOINT_TARGET: q, C.ACT_JOINT_VEL: (q_to - q_from) * rate,
                      C.ACT_GRIPPER: [gripper]})
        worst = max(worst, float(np.abs(backend.data.qpos[:7] - q).max()))
    return worst


def test_top_down_grasp_lifts_a_cube_and_tracking_is_tight(arm):
    arm.reset(0, rng=np.random.default_rng(3))
    cube0 = arm.object_poses()["cube_red"]
    yaw = 2 * math.atan2(cube0[6], cube0[3])
    # rotate the last joint so the fingers close on two faces of the cube
    home = np.asarray(arm.scene.robot.home)
    q_above = _ik(arm, cube0[:3] + [0, 0, 0.15], home)
    q_above[6] -= (yaw % (math.pi / 2))
    q_above = _ik(arm, cube0[:3] + [0, 0, 0.15], q_above)
    q_grasp = _ik(arm, cube0[:3] + [0, 0, 0.005], q_above)
    q_lift = _ik(arm, cube0[:3] + [0, 0, 0.20], q_grasp)
    worst = _move(arm, home, q_above, 2.0, 0.08)
    worst = max(worst, _move(arm, q_above, q_grasp, 1.5, 0.08))
    arm.step({C.ACT_GRIPPER: [0.0]}, control_steps=25)
    width = arm.observation()[C.OBS_GRIPPER][0]
    assert 0.035 < width < 0.047               # fingers stopped on the 4.5 cm cube
    worst = max(worst, _move(arm, q_grasp, q_lift, 2.0, 0.0))
    arm.step(control_steps=50)                 # hold for a second
    cube1 = arm.object_poses()["cube_red"]
    assert cube1[2] - cube0[2] > 0.18          # lifted with the hand
    assert np.linalg.norm(cube1[:3] - arm.tool_pose()[:3]) < 0.02
    assert worst < 0.02                        # position + velocity feed-forward tracking


def test_mobile_base_drives_and_reports_imu_gps_odom(base):
    base.reset(0, rng=np.random.default_rng(0))
    base.step(control_steps=25)                                    # settle on the ground
    obs = base.observation()
    assert obs[C.OBS_IMU][9] == pytest.approx(9.81, abs=0.05)   # accelerometer feels gravity
    start = obs[C.OBS_ODOM].copy()
    base.step({C.ACT_BASE_TWIST: [0.5, 0.0]}, control_steps=100)   # 2 s
    odom = base.observation()[C.OBS_ODOM]
    heading = np.array([math.cos(start[2]), math.sin(start[2])])
    travelled = (odom[:2] - start[:2]) @ heading
    assert 0.85 < travelled < 1.0
    assert odom[3:5] @ heading == pytest.approx(0.5, abs=0.03)
    origin = base.scene.gps_origin
    lat, lon, alt = base.observation()[C.OBS_GPS]
    enu = geodetic_to_enu(lat, lon, alt, (origin.latitude, origin.longitude, origin.altitude))
    np.testing.assert_allclose(enu, base.data.site_xpos[base.index.gps_site], atol=1e-6)
    base.step({C.ACT_BASE_TWIST: [0.0, 1.0]}, control_steps=25)
    obs = base.observation()
    assert obs[C.OBS_IMU][6] == pytest.approx(1.0, abs=0.05)    # gyro z tracks the command
    assert obs[C.OBS_ODOM][5] == pytest.approx(obs[C.OBS_IMU][6], abs=1e-3)
    names, pos, vel, effort = base.joint_state()
    assert names == C.BASE_WHEEL_JOINTS and pos.shape == vel.shape == effort.shape == (2,)


def test_backend_registry_and_scenario_switch():
    cls = backend_class("mujoco")
    assert cls is MujocoBackend
    backend = MujocoBackend()
    backend.reset(0, scenario="outdoor")
    assert backend.scene.name == "outdoor" and C.OBS_GPS in backend.observation()
    backend.close()
    with pytest.raises(ConfigError, match="mujoco.scene"):
        MujocoConfig(scene="moon")
    with pytest.raises(ConfigError, match="mujoco.cameras"):
        MujocoBackend(MujocoConfig(cameras=("nope",)))


def test_bench_sim_quick_reports_ratio_and_render_fps():
    from clawgym_ros.bench import run_area

    result = run_area("sim", quick=True)
    assert result["raw_mj_step_per_s"] > 0 and result["env_physics_steps_per_s"] > 0
    assert result["env_over_raw_ratio_total"] == pytest.approx(
        result["env_physics_steps_per_s"] / result["raw_mj_step_per_s"], rel=1e-2)
    assert 0.0 < result["env_over_raw_ratio"] < 2.0
    assert result["render_fps_84x84"] > 0 and result["render_fps_320x240"] > 0
