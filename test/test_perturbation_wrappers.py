"""Gymnasium wrappers over the perturbation cores, on the MuJoCo envs."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.perturbations import (
    Dynamics,
    DynamicsConfig,
    GpsDropout,
    GpsDropoutConfig,
    Lighting,
    LightingConfig,
    SensorNoise,
    SensorNoiseConfig,
)
from clawgym_ros.perturbations.gps import GpsFix
from clawgym_ros.perturbations.wrappers import LightingWrapper, wrap

pytest.importorskip("mujoco")
import clawgym_ros.sim  # noqa: E402,F401  (registers the envs)

WRIST = f"{C.CAMERA_WRIST}_rgb"


@pytest.fixture(scope="module")
def tabletop():
    # The perturbation wrappers serve the Dict interface (experts, evaluator, ROS path).
    env = gym.make("clawgym/Tabletop-v0", cameras=(C.CAMERA_WRIST,), control_mode=C.CONTROL_DICT)
    yield env
    env.close()


@pytest.fixture(scope="module")
def mobile():
    env = gym.make("clawgym/MobileBase-v0", control_mode=C.CONTROL_DICT)
    yield env
    env.close()


def test_lighting_at_intensity_1_changes_the_wrist_image_by_20_percent(tabletop):
    changes = []
    for seed in range(12):
        lighting = Lighting(LightingConfig(intensity=0.0, seed=seed, change_rate_hz=0.0))
        env = LightingWrapper(tabletop, lighting)
        dark_or_bright = dataclasses.replace(lighting.config, intensity=1.0)
        obs0, _ = env.reset(seed=seed)
        lighting.configure(dark_or_bright)
        obs1, info = env.reset(seed=seed)
        m0 = obs0[WRIST].astype(float).mean()
        m1 = obs1[WRIST].astype(float).mean()
        changes.append(abs(m1 - m0) / m0)
        assert info[C.INFO_PERTURBATIONS][C.FAMILY_LIGHTING]["parameters"]["intensity"] == 1.0
    assert min(changes) >= 0.2, changes


def test_reset_undoes_lighting_and_dynamics_on_the_backend(tabletop):
    backend = tabletop.unwrapped.backend
    tabletop.reset(seed=0)
    m = backend.model
    defaults = {k: getattr(m, k).copy() for k in ("body_mass", "geom_friction", "dof_damping",
                                                   "actuator_gainprm", "light_diffuse")}
    headlight = m.vis.headlight.diffuse.copy()
    dyn = Dynamics(DynamicsConfig(intensity=1.0, seed=3))
    light = Lighting(LightingConfig(intensity=1.0, seed=3, change_rate_hz=0.0))
    env = wrap(tabletop, {C.FAMILY_DYNAMICS: dyn, C.FAMILY_LIGHTING: light})
    _, info = env.reset(seed=1)
    assert set(info[C.INFO_PERTURBATIONS]) == {C.FAMILY_DYNAMICS, C.FAMILY_LIGHTING}
    s = dyn.settings()
    cube = backend.index.object_bodies[0]
    assert m.body_mass[cube] == pytest.approx(defaults["body_mass"][cube] * s.mass_scale)
    assert not np.allclose(m.light_diffuse, defaults["light_diffuse"])
    assert backend.describe()["dynamics"] and backend.describe()["lighting"]
    env.step(tabletop.action_space.sample())
    # Disabled perturbations + reset: every default is back.
    dyn.configure(dataclasses.replace(dyn.config, family=C.FAMILY_NONE))
    light.configure(dataclasses.replace(light.config, intensity=0.0))
    _, info = env.reset(seed=1)
    for key, value in defaults.items():
        np.testing.assert_array_equal(getattr(m, key), value, err_msg=key)
    np.testing.assert_array_equal(m.vis.headlight.diffuse, headlight)
    assert info[C.INFO_PERTURBATIONS][C.FAMILY_DYNAMICS]["parameters"]["mass_scale"] == 1.0


def test_flicker_is_applied_during_steps(tabletop):
    light = Lighting(LightingConfig(intensity=1.0, seed=2, change_rate_hz=0.0, flicker_hz=5.0,
                                    flicker_depth=1.0))
    env = LightingWrapper(tabletop, light)
    env.reset(seed=0)
    hold = {C.ACT_JOINT_TARGET: np.asarray(tabletop.unwrapped.backend.scene.robot.home)}
    means, active = [], []
    for _ in range(20):
        obs, _, _, _, info = env.step(hold)
        means.append(obs[WRIST].astype(float).mean())
        active.append(info[C.INFO_PERTURBATIONS_ACTIVE][C.FAMILY_LIGHTING])
    means, active = np.array(means), np.array(active)
    assert active.any() and (~active).any()
    assert means[active].max() < means[~active].min()


def _bare_and_wrapped(env_id, perturbation_factory, seed, steps, **kwargs):
    """Raw observations of a bare env and perturbed ones of a wrapped env, same actions."""
    bare = gym.make(env_id, control_mode=C.CONTROL_DICT, **kwargs)
    wrapped_base = gym.make(env_id, control_mode=C.CONTROL_DICT, **kwargs)
    p = perturbation_factory()
    wrapped = wrap(wrapped_base, [p])
    raw = [bare.reset(seed=seed)[0]]
    first, info = wrapped.reset(seed=seed)
    out, infos = [first], [info]
    rng = np.random.default_rng(0)
    times = [bare.unwrapped.backend.time]
    for _ in range(steps):
        action = {C.ACT_BASE_TWIST: rng.uniform([-1, -2], [1, 2])}
        raw.append(bare.step(action)[0])
        times.append(bare.unwrapped.backend.time)
        o, _, _, _, i = wrapped.step(action)
        out.append(o)
        infos.append(i)
        assert wrapped.observation_space.contains(o)
    bare.close()
    wrapped.close()
    return raw, out, infos, times


def test_gps_wrapper_equals_the_core_on_the_same_stream():
    cfg = GpsDropoutConfig(intensity=1.0, seed=5, start_probability=0.5, min_duration_s=0.5,
                           max_duration_s=1.0)
    raw, out, infos, times = _bare_and_wrapped(
        "clawgym/MobileBase-v0", lambda: GpsDropout(cfg), seed=4, steps=300)
    core = GpsDropout(cfg)
    core.reset(4)
    held = None
    lost = 0
    for r, o, info, t in zip(raw, out, infos, times, strict=True):
        fix = core.apply(GpsFix(*r[C.OBS_GPS].tolist(), t))
        if fix is None:
            lost += 1
            assert info[C.INFO_GPS_STATUS] == -1
            np.testing.assert_array_equal(o[C.OBS_GPS], held)
        else:
            held = np.array([fix.latitude, fix.longitude, fix.altitude])
            np.testing.assert_array_equal(o[C.OBS_GPS], held)
            assert info[C.INFO_GPS_STATUS] == 0
    assert lost > 0 and core.outages


def test_sensor_noise_wrapper_equals_the_core_and_holds_dropped_samples():
    cfg = SensorNoiseConfig(intensity=1.0, seed=8, imu_drop_prob=0.3, joint_drop_prob=0.3)
    raw, out, _, times = _bare_and_wrapped(
        "clawgym/MobileBase-v0", lambda: SensorNoise(cfg), seed=2, steps=100)
    core = SensorNoise(cfg)
    core.reset(2)
    held = {}
    for r, o, t in zip(raw, out, times, strict=True):
        imu = core.imu(r[C.OBS_IMU][:4], r[C.OBS_IMU][4:7], r[C.OBS_IMU][7:], t)
        if imu is not None:
            held["imu"] = np.concatenate([imu["orientation"], imu["angular_velocity"],
                                          imu["linear_acceleration"]])
        np.testing.assert_array_equal(o[C.OBS_IMU], held.get("imu", r[C.OBS_IMU]))
        joints = core.joint_state(r[C.OBS_JOINT_POS], r[C.OBS_JOINT_VEL], t)
        if joints is not None:
            held["pos"] = joints["position"]
        np.testing.assert_array_equal(o[C.OBS_JOINT_POS], held.get("pos", r[C.OBS_JOINT_POS]))
        np.testing.assert_array_equal(o[C.OBS_GPS], r[C.OBS_GPS])  # untouched
    assert 0 < core.counts("imu")["dropped"] < 100
