"""Scenes: one spec -> MuJoCo model and Gazebo world (committed SDF == generated, same content)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.sim import scene_mjcf as MJ
from clawgym_ros.sim import scene_sdf as SDF
from clawgym_ros.sim import scene_spec as S
from clawgym_ros.sim.geo import enu_to_geodetic, geodetic_to_enu


@pytest.mark.parametrize("name", S.SCENE_NAMES)
def test_committed_world_equals_generated(name):
    committed = (SDF.WORLDS_DIR / f"{name}.sdf").read_text()
    assert committed == SDF.scene_sdf(name), (
        f"worlds/{name}.sdf is stale: run `python -m clawgym_ros.sim.scene_sdf`")


def _pose(el):
    return np.array(el.find("pose").text.split(), float)


@pytest.mark.parametrize("name", S.SCENE_NAMES)
def test_world_content_matches_spec(name):
    spec = S.load_scene(name)
    world = ET.fromstring((SDF.WORLDS_DIR / f"{name}.sdf").read_text()).find("world")
    assert world.get("name") == name
    models = {m.get("name"): m for m in world.findall("model")}
    for shape in spec.static_shapes():
        model = models[shape.name]
        assert model.find("static").text == "true"
        np.testing.assert_allclose(_pose(model), [*shape.pos, *shape.rpy], atol=1e-6)
    for obj in spec.objects:
        model = models[obj.name]
        assert model.find("static").text == "false"
        np.testing.assert_allclose(_pose(model), [*obj.pos, *obj.rpy], atol=1e-6)
        assert float(model.find("link/inertial/mass").text) == pytest.approx(obj.mass)
    lights = {li.get("name"): li for li in world.findall("light")}
    assert set(lights) == {li.name for li in spec.lights}
    for light in spec.lights:
        diffuse = np.array(lights[light.name].find("diffuse").text.split(), float)
        np.testing.assert_allclose(diffuse[:3], light.diffuse, atol=1e-6)
        direction = np.array(lights[light.name].find("direction").text.split(), float)
        np.testing.assert_allclose(direction, np.array(light.dir) / np.linalg.norm(light.dir),
                                   atol=1e-5)
    sph = world.find("spherical_coordinates")
    if spec.gps_origin is None:
        assert sph is None
    else:
        assert float(sph.find("latitude_deg").text) == pytest.approx(spec.gps_origin.latitude)
        assert float(sph.find("longitude_deg").text) == pytest.approx(spec.gps_origin.longitude)
        assert float(sph.find("elevation").text) == pytest.approx(spec.gps_origin.altitude)
        assert sph.find("world_frame_orientation").text == "ENU"


@pytest.mark.parametrize("name", S.SCENE_NAMES)
def test_mujoco_model_has_every_spec_name(name):
    mujoco = pytest.importorskip("mujoco")
    spec = S.load_scene(name)
    model = MJ.build_model(spec)
    for shape in spec.static_shapes():
        gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, shape.name)
        assert gid >= 0
        np.testing.assert_allclose(model.geom_pos[gid], shape.pos, atol=1e-9)
    for obj in spec.objects:
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, obj.name) > 0
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"{obj.name}_joint") >= 0
    for light in spec.lights:
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_LIGHT, light.name) >= 0
    for cam in spec.cameras:
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, cam.name) >= 0
    assert model.opt.timestep == spec.physics.timestep


def test_scene_validation_names_the_field(tmp_path):
    with pytest.raises(ConfigError, match="scene"):
        S.load_scene("moon")
    text = (S.SCENES_DIR / "tabletop.yaml").read_text().replace("control_dt: 0.02",
                                                                "control_dt: 0.023")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match="physics.control_dt"):
        S.load_scene(bad)
    bad.write_text(text.replace("control_dt: 0.023", "control_dt: 0.02").replace(
        "shape: cylinder", "shape: cone"))
    with pytest.raises(ConfigError, match="cylinder_blue.shape"):
        S.load_scene(bad)


def test_object_sampling_is_seeded_in_range_and_separated():
    spec = S.load_scene("tabletop")
    a = S.sample_object_poses(spec, np.random.default_rng(5))
    b = S.sample_object_poses(spec, np.random.default_rng(5))
    c = S.sample_object_poses(spec, np.random.default_rng(6))
    assert all(np.array_equal(a[k][0], b[k][0]) and a[k][1] == b[k][1] for k in a)
    assert any(not np.array_equal(a[k][0], c[k][0]) for k in a)
    for seed in range(20):
        poses = S.sample_object_poses(spec, np.random.default_rng(seed))
        for obj in spec.objects:
            pos, _ = poses[obj.name]
            assert obj.randomize.x[0] <= pos[0] <= obj.randomize.x[1]
            assert obj.randomize.y[0] <= pos[1] <= obj.randomize.y[1]
        names = list(poses)
        for i, n1 in enumerate(names):
            for n2 in names[i + 1:]:
                assert np.hypot(*(poses[n1][0][:2] - poses[n2][0][:2])) > 0.05


def test_enu_geodetic_round_trip_and_scale():
    origin = (47.397742, 8.545594, 488.0)
    lat, lon, alt = enu_to_geodetic(np.array([0.0, 0.0, 0.0]), origin)
    assert (lat, lon) == pytest.approx(origin[:2], abs=1e-10) and alt == pytest.approx(488.0)
    lat, lon, alt = enu_to_geodetic(np.array([0.0, 100.0, 0.0]), origin)
    assert (lat - origin[0]) * 111_200 == pytest.approx(100.0, rel=5e-3)   # ~111.2 km/deg
    lat, lon, alt = enu_to_geodetic(np.array([100.0, 0.0, 0.0]), origin)
    assert lon > origin[1] and lat == pytest.approx(origin[0], abs=1e-6)
    enu = np.array([123.4, -56.7, 8.9])
    np.testing.assert_allclose(geodetic_to_enu(*enu_to_geodetic(enu, origin), origin), enu,
                               atol=1e-6)


def test_tool_and_camera_names_come_from_constants():
    mujoco = pytest.importorskip("mujoco")
    model = MJ.build_model("tabletop")
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, C.FRAME_TOOL) >= 0
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, C.CAMERA_WRIST) >= 0
    model = MJ.build_model("outdoor")
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, C.CAMERA_FRONT) >= 0
