"""The visual perturbation families beside lighting: camera_pose (the camera's mount offsets)
and colour (object and scene colours). Their cores, the MuJoCo backend's side, the wrappers
(images change, nothing physical does), bad input, ROS mode and the coordinator's view."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations import (
    CameraPose,
    CameraPoseConfig,
    Colour,
    ColourConfig,
    config_for,
    make,
)
from clawgym_ros.perturbations.colour import SLOTS
from clawgym_ros.perturbations.wrappers import wrap
from clawgym_ros.sim.backend import CameraPoseSettings, ColourSettings

pytest.importorskip("mujoco")
import mujoco  # noqa: E402

import clawgym_ros.sim  # noqa: E402,F401  (registers the envs)

WRIST = f"{C.CAMERA_WRIST}_rgb"


@pytest.fixture(scope="module")
def tabletop():
    env = gym.make("clawgym/Tabletop-v0", cameras=(C.CAMERA_WRIST,), control_mode=C.CONTROL_DICT)
    yield env
    env.close()


def test_the_core_draws_offsets_within_the_configured_sizes_and_repeats_per_seed():
    cfg = CameraPoseConfig(intensity=0.5, seed=4, position_m=0.02, rotation_rad=0.2)
    core = CameraPose(cfg)
    sizes = []
    for seed in range(40):
        core.reset(seed)
        state = core.state()
        # magnitudes U(0.5, 1) x parameter x intensity
        assert 0.005 - 1e-12 <= state["offset_m"] <= 0.01 + 1e-12
        assert 0.05 - 1e-12 <= state["rotation_rad"] <= 0.1 + 1e-12
        sizes.append((state["offset_x"], state["rotation_z"]))
        again = CameraPose(cfg)
        again.reset(seed)
        assert again.state() == state
    assert len(set(sizes)) == 40
    off = CameraPose(dataclasses.replace(cfg, intensity=0.0))
    off.reset(3)
    assert off.settings() == CameraPoseSettings()
    assert off.state()["offset_m"] == 0.0


def test_bad_camera_pose_input_names_the_field():
    with pytest.raises(ConfigError, match="position_m"):
        config_for(C.FAMILY_CAMERA_POSE, {"intensity": 1.0, "position_m": 0.5})
    with pytest.raises(ConfigError, match="rotation_rad"):
        config_for(C.FAMILY_CAMERA_POSE, {"rotation_rad": -0.1})
    with pytest.raises(ConfigError, match=r"camera_pose\.offset\[2\]"):
        CameraPoseSettings(offset=(0.0, 0.0, 2.0))
    with pytest.raises(ConfigError, match="camera_pose.camera_name"):
        env = gym.make("clawgym/Tabletop-v0", control_mode=C.CONTROL_DICT)
        try:
            env.unwrapped.backend.set_camera_pose(CameraPoseSettings(camera_name="nope"))
        finally:
            env.close()


def test_the_backend_moves_the_camera_in_its_own_frame_and_reset_restores_it(tabletop):
    backend = tabletop.unwrapped.backend
    tabletop.reset(seed=0)
    m, d = backend.model, backend.data
    cid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, C.CAMERA_WRIST)
    pos0, mat0 = d.cam_xpos[cid].copy(), d.cam_xmat[cid].reshape(3, 3).copy()
    backend.set_camera_pose(CameraPoseSettings(camera_name=C.CAMERA_WRIST,
                                               offset=(0.0, 0.0, 0.01),
                                               rotation=(0.0, 0.1, 0.0)))
    # 1 cm along the camera's own z (its viewing axis is -z), a 0.1 rad turn about its y
    np.testing.assert_allclose(d.cam_xpos[cid], pos0 + mat0[:, 2] * 0.01, atol=1e-12)
    mat1 = d.cam_xmat[cid].reshape(3, 3)
    angle = math.acos(np.clip((np.trace(mat0.T @ mat1) - 1) / 2, -1, 1))
    assert angle == pytest.approx(0.1, abs=1e-9)
    assert backend.describe()["camera_pose"]
    tabletop.reset(seed=0)
    np.testing.assert_array_equal(d.cam_xpos[cid], pos0)
    assert "camera_pose" not in backend.describe()


@pytest.mark.parametrize("family, drawn", [(C.FAMILY_CAMERA_POSE, "rotation_rad"),
                                           (C.FAMILY_COLOUR, "object_mix")])
def test_the_wrapper_changes_the_images_and_nothing_physical(tabletop, family, drawn):
    bare = gym.make("clawgym/Tabletop-v0", cameras=(C.CAMERA_WRIST,), control_mode=C.CONTROL_DICT)
    core = make(family, {"intensity": 1.0, "seed": 2})
    env = wrap(tabletop, [core])
    rng = np.random.default_rng(0)
    changed = []
    for seed in range(4):
        obs_b, _ = bare.reset(seed=seed)
        obs_w, info = env.reset(seed=seed)
        record = info[C.INFO_PERTURBATIONS][family]
        assert record["parameters"]["intensity"] == 1.0
        assert record["parameters"][drawn] > 0.0
        for _ in range(5):
            action = {C.ACT_JOINT_TARGET: np.asarray(bare.unwrapped.backend.scene.robot.home)
                      + rng.normal(0.0, 0.05, 7)}
            obs_b = bare.step(action)[0]
            obs_w = env.step(action)[0]
        for key in obs_b:
            if key == WRIST:
                changed.append(np.abs(obs_b[key].astype(int) - obs_w[key].astype(int)).mean())
            else:
                np.testing.assert_array_equal(obs_b[key], obs_w[key], err_msg=key)
    bare.close()
    # a few degrees and millimetres, or other colours: several grey levels per pixel
    assert min(changed) > 2.0, changed


def test_camera_pose_is_a_visual_family_that_ros_lockstep_reproduces():
    from clawgym_ros.coordinator.visual import gap_steers, is_visual
    from clawgym_ros.evaluation.ros_mode import check_ros_families, ros_families
    from clawgym_ros.evaluation.suites import EpisodeSpec

    gap = {"kind": "perturbation", "families": [C.FAMILY_CAMERA_POSE]}
    assert is_visual(gap)
    assert gap_steers(gap, sees=True) and not gap_steers(gap, sees=False)
    assert C.FAMILY_CAMERA_POSE in C.PERTURBATION_FAMILIES
    assert C.FAMILY_CAMERA_POSE not in C.OBSERVATION_FAMILIES
    spec = EpisodeSpec(index=0, task="pick_place", template="cube", split="train",
                       family=C.FAMILY_CAMERA_POSE, families=(C.FAMILY_CAMERA_POSE,),
                       intensity=1.0, schedule="constant", seed=1, perturbation_seed=2)
    assert C.FAMILY_CAMERA_POSE in ros_families()
    check_ros_families([spec])      # sim/set_camera_pose, sent by the lockstep driver


def test_wrap_orders_camera_pose_with_the_backend_families(tabletop):
    env = wrap(tabletop, [make(C.FAMILY_SENSOR_NOISE, {"intensity": 0.1}),
                          make(C.FAMILY_CAMERA_POSE, {"intensity": 0.5}),
                          make(C.FAMILY_LIGHTING, {"intensity": 0.5})])
    order = []
    while env is not tabletop:
        order.append(env.family)
        env = env.env
    assert order == [C.FAMILY_SENSOR_NOISE, C.FAMILY_CAMERA_POSE, C.FAMILY_LIGHTING]


def test_the_colour_core_draws_per_seed_and_the_backend_blends_and_restores(tabletop):
    cfg = ColourConfig(intensity=0.5, seed=1, object_mix=1.0, static_mix=0.4)
    core = Colour(cfg)
    core.reset(5)
    s = core.settings()
    assert len(s.objects) == len(s.statics) == SLOTS
    assert all(0.25 - 1e-12 <= w <= 0.5 + 1e-12 for *_, w in s.objects)
    assert all(0.1 - 1e-12 <= w <= 0.2 + 1e-12 for *_, w in s.statics)
    again = Colour(cfg)
    again.reset(5)
    assert again.settings() == s
    again.reset(6)
    assert again.settings() != s
    off = Colour(dataclasses.replace(cfg, intensity=0.0))
    off.reset(5)
    assert off.settings() == ColourSettings()
    with pytest.raises(ConfigError, match="object_mix"):
        config_for(C.FAMILY_COLOUR, {"object_mix": 1.5})
    with pytest.raises(ConfigError, match=r"colour\.objects\[0\]\[3\]"):
        ColourSettings(objects=((0.0, 0.0, 0.0, 2.0),))

    backend = tabletop.unwrapped.backend
    tabletop.reset(seed=0)
    m = backend.model
    rgba0 = m.geom_rgba.copy()
    first = backend.index.object_geoms[0]
    backend.set_colours(ColourSettings(objects=((0.0, 0.0, 1.0, 1.0),),
                                       statics=((1.0, 1.0, 1.0, 0.5),) * 4))
    np.testing.assert_allclose(m.geom_rgba[first], [0.0, 0.0, 1.0, rgba0[first, 3]])
    # the fixed shapes are repainted by default colour: a bin's floor and walls alike
    walls = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"bin_left_{p}")
             for p in ("floor", "wall_px", "wall_ny")]
    np.testing.assert_allclose(m.geom_rgba[walls, :3], 0.5 + 0.5 * rgba0[walls, :3], rtol=1e-6)
    floor = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    np.testing.assert_array_equal(m.geom_rgba[floor], rgba0[floor])      # textured: kept
    robot = backend.index.robot_geoms
    np.testing.assert_array_equal(m.geom_rgba[robot], rgba0[robot])
    assert backend.describe()["colour"]
    tabletop.reset(seed=0)
    np.testing.assert_array_equal(m.geom_rgba, rgba0)
    assert "colour" not in backend.describe()


def test_colour_runs_in_process_only_and_steers_a_seeing_policy():
    from clawgym_ros.coordinator.visual import gap_steers, is_visual
    from clawgym_ros.evaluation.ros_mode import check_ros_families
    from clawgym_ros.evaluation.suites import EpisodeSpec

    gap = {"kind": "perturbation", "families": [C.FAMILY_COLOUR]}
    assert is_visual(gap) and gap_steers(gap, sees=True) and not gap_steers(gap, sees=False)
    spec = EpisodeSpec(index=0, task="pick_place", template="cube", split="train",
                       family=C.FAMILY_COLOUR, families=(C.FAMILY_COLOUR,), intensity=1.0,
                       schedule="constant", seed=1, perturbation_seed=2)
    with pytest.raises(ConfigError, match="colour runs in-process only"):
        check_ros_families([spec])
